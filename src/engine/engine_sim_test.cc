// engine_sim_test.cc — deterministic simulation of Engine against the plain model in
// engine_model.h. Each run draws a long random sequence of every engine operation (clients
// coming and going, put in all its forms, reserve with every kind of timeout, the whole
// lifecycle, keys, groups, pauses, clock moves of 0 ms to many seconds, restarts from the
// stored records) on a ManualClock, and after every step compares everything the engine shows:
// each job (peek), each tube (stats and peeks), the server's stats, keys, clients, wakeups,
// next_wakeup_us() and the exact store mutations, which it applies to a map of records that any
// restart is rebuilt from. It also checks "never early" without the model: a job may leave the
// delayed state by time only once due, and a reservation may lapse only once its TTR is over.
// Every run prints its seed and the command that replays it (DELAYQ_SEED=<seed> with a gtest
// filter); DELAYQ_SIM_STEPS=<n> makes every run n steps long. The EngineSimCase tests at the end
// are the smallest cases of what the simulation has found.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <deque>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "engine/clock.h"
#include "engine/engine.h"
#include "engine/engine_model.h"
#include "store/memory_store.h"
#include "store/record.h"
#include "support/seed.h"

namespace delayq {

// gtest prints these by name in its failure messages.
inline void PrintTo(Code code, std::ostream* out) {
  *out << code_name(code);
}
inline void PrintTo(JobState state, std::ostream* out) {
  *out << state_name(state);
}

namespace engine {
namespace {

using model::Model;
using Kind = ReserveResult::Kind;
using OpKind = store::WriteSet::Kind;

// ---------------------------------------------------------------------------------------------
// Showing values in failure messages

template <std::integral T>
std::string show(T value) {
  return std::to_string(value);
}
std::string show(const std::string& text) {
  return '"' + text + '"';
}
std::string show(JobState state) {
  return std::string(state_name(state));
}
std::string show(Seconds s) {
  return std::to_string(s.count()) + "s";
}
std::string show(Millis ms) {
  return std::to_string(ms.count()) + "ms";
}
std::string show(const JobCounters& c) {
  return "{reserves " + show(c.reserves) + " timeouts " + show(c.timeouts) + " releases " +
         show(c.releases) + " buries " + show(c.buries) + " kicks " + show(c.kicks) + "}";
}
std::string show(Kind kind) {
  switch (kind) {
    case Kind::kReserved:
      return "reserved";
    case Kind::kWaiting:
      return "waiting";
    case Kind::kDeadlineSoon:
      return "deadline-soon";
    case Kind::kTimedOut:
      return "timed-out";
  }
  return "?";
}
std::string show(OpKind kind) {
  switch (kind) {
    case OpKind::kRecord:
      return "record";
    case OpKind::kBody:
      return "body";
    case OpKind::kErase:
      return "erase";
    case OpKind::kAttachment:
      return "attachment";
    case OpKind::kEraseAttachment:
      return "erase-attachment";
    case OpKind::kWebhook:
      return "webhook";
    case OpKind::kEraseWebhook:
      return "erase-webhook";
    case OpKind::kMaxAttempts:
      return "max-attempts";
    case OpKind::kFlow:
      return "flow";
    case OpKind::kSchedule:
      return "schedule";
    case OpKind::kEraseSchedule:
      return "erase-schedule";
    case OpKind::kFarPut:
      return "far-put";
    case OpKind::kFarPutFresh:
      return "far-put-fresh";
    case OpKind::kFarErase:
      return "far-erase";
    case OpKind::kFarCount:
      return "far-count";
  }
  return "?";
}

// Collects the fields in which the engine and the model disagree.
class Diff {
 public:
  template <typename T>
  Diff& field(std::string_view name, const T& engine, const T& model) {
    if (!(engine == model)) {
      text_.append(name).append(": engine ").append(show(engine));
      text_.append(", model ").append(show(model)).append("; ");
    }
    return *this;
  }
  [[nodiscard]] const std::string& text() const { return text_; }

 private:
  std::string text_;
};

std::string diff(const JobView& e, const JobView& m) {
  Diff d;
  d.field("id", e.id, m.id).field("tube", e.tube, m.tube).field("state", e.state, m.state);
  d.field("priority", e.priority, m.priority).field("due", e.due_unix_ms, m.due_unix_ms);
  d.field("deadline", e.deadline_unix_ms, m.deadline_unix_ms);
  d.field("created", e.created_unix_ms, m.created_unix_ms).field("delay", e.delay_ms, m.delay_ms);
  d.field("ttr", e.ttr, m.ttr).field("counters", e.counters, m.counters);
  d.field("key", e.key, m.key).field("group", e.group, m.group);
  return d.text();
}

std::string diff(const store::JobRecord& e, const store::JobRecord& m) {
  Diff d;
  d.field("id", e.id, m.id).field("tube", e.tube, m.tube).field("state", e.state, m.state);
  d.field("priority", e.priority, m.priority).field("due", e.due_unix_ms, m.due_unix_ms);
  d.field("created", e.created_unix_ms, m.created_unix_ms).field("delay", e.delay_ms, m.delay_ms);
  d.field("ttr", e.ttr_seconds, m.ttr_seconds).field("counters", e.counters, m.counters);
  d.field("key", e.key, m.key).field("group", e.group, m.group);
  return d.text();
}

std::string diff(const TubeStats& e, const TubeStats& m) {
  Diff d;
  d.field("urgent", e.urgent, m.urgent).field("ready", e.ready, m.ready);
  d.field("reserved", e.reserved, m.reserved).field("delayed", e.delayed, m.delayed);
  d.field("buried", e.buried, m.buried).field("total_jobs", e.total_jobs, m.total_jobs);
  d.field("using", e.using_clients, m.using_clients);
  d.field("watching", e.watching_clients, m.watching_clients);
  d.field("waiting", e.waiting_clients, m.waiting_clients);
  d.field("deletes", e.deletes, m.deletes).field("pauses", e.pauses, m.pauses);
  d.field("pause", e.pause, m.pause).field("pause_left", e.pause_left, m.pause_left);
  d.field("oldest_ready_age", e.oldest_ready_age, m.oldest_ready_age);
  return d.text();
}

std::string diff(const ServerStats& e, const ServerStats& m) {
  Diff d;
  d.field("urgent", e.urgent, m.urgent).field("ready", e.ready, m.ready);
  d.field("reserved", e.reserved, m.reserved).field("delayed", e.delayed, m.delayed);
  d.field("buried", e.buried, m.buried).field("total_jobs", e.total_jobs, m.total_jobs);
  d.field("job_timeouts", e.job_timeouts, m.job_timeouts).field("tubes", e.tubes, m.tubes);
  d.field("waiting", e.waiting, m.waiting).field("next_id", e.next_id, m.next_id);
  d.field("deletes", e.deletes, m.deletes).field("buries", e.buries, m.buries);
  return d.text();
}

// ---------------------------------------------------------------------------------------------
// Configurations and randomness

struct SimConfig {
  std::string name;
  std::uint64_t seed = 1;  // first default seed; runs use seed, seed + 1, ...
  int runs = 1;
  int steps = 10000;  // operations per run
  std::size_t max_clients = 4;
  std::vector<std::string> tubes;  // the names operations pick from
  int keys = 6;                    // k0 .. k5
  int groups = 3;                  // g0 .. g2
  std::size_t target_jobs = 60;    // above it, puts give way to deletes
  int precise_time_percent = 30;   // clock moves that stop at every next_wakeup_us()
  int restart_per_mille = 2;       // restarts from the stored records, per thousand steps
  int put_weight = 22;             // of about 120 for all operations
  int reserve_weight = 14;
  EngineOptions options;
  // Set: the far tier on, with this window, over a MemoryStore that the engine's writes reach
  // some steps late (settled at random), as the committer's do.
  std::optional<Millis> window;
};

// mt19937_64 is specified bit for bit; the standard distributions are not, so draws are made
// here and a seed replays the same run on every standard library.
class Random {
 public:
  explicit Random(std::uint64_t seed) : engine_(seed) {}
  std::int64_t range(std::int64_t lo, std::int64_t hi) {  // inclusive
    const auto span = static_cast<std::uint64_t>(hi - lo) + 1;
    return lo + static_cast<std::int64_t>(engine_() % span);
  }
  std::size_t index(std::size_t size) { return static_cast<std::size_t>(engine_() % size); }
  bool percent(int p) { return range(0, 99) < p; }
  template <typename T>
  const T& pick(const std::vector<T>& items) {
    return items[index(items.size())];
  }

 private:
  std::mt19937_64 engine_;
};

// "DELAYQ_SEED=7 engine_sim_test --gtest_filter=EngineSim.SmallCrowd"
std::string replay_hint(std::uint64_t seed) {
  const auto* test = ::testing::UnitTest::GetInstance()->current_test_info();
  std::string hint = "DELAYQ_SEED=" + std::to_string(seed) + " engine_sim_test";
  if (test != nullptr) {
    hint.append(" --gtest_filter=").append(test->test_suite_name()).append(".");
    hint.append(test->name());
  }
  return hint;
}

// ---------------------------------------------------------------------------------------------
// The simulation

class Simulation {
 public:
  Simulation(const SimConfig& config, std::uint64_t seed)
      : config_(config),
        seed_(seed),
        random_(seed),
        engine_(std::make_unique<Engine>(clock_, engine_options())),
        model_(clock_.now_unix_ms(), model_options(config.options)) {
    model_.set_clock(clock_.now_unix_ms(), clock_.steady_ms());
  }

  // Runs the configured number of steps; stops at the first disagreement (a gtest failure).
  void run();
  [[nodiscard]] const std::map<std::string, std::uint64_t>& tally() const { return tally_; }

 private:
  using Op = void (Simulation::*)();
  struct OpEntry {
    int weight;
    Op run;
  };

  EngineOptions engine_options() {
    EngineOptions options = config_.options;
    if (config_.window) {
      options.window = config_.window;
      options.far = &far_store_;
    }
    return options;
  }

  static Model::Options model_options(const EngineOptions& options) {
    return {.deadline_soon_margin_ms = options.deadline_soon_margin.count(),
            .urgent_priority = options.urgent_priority,
            .max_name_bytes = options.max_name_bytes};
  }

  // operations, one per engine call (op_time: clock moves and advance())
  void op_connect();
  void op_disconnect();
  void op_use();
  void op_watch();
  void op_ignore();
  void op_put();
  void op_reserve();
  void op_reserve_job();
  void op_erase();
  void op_release();
  void op_bury();
  void op_touch();
  void op_kick();
  void op_kick_job();
  void op_pause_tube();
  void op_peek();
  void op_peek_key();
  void op_reschedule();
  void op_list_group();
  void op_cancel_group();
  void op_time();
  void op_restart();

  // after every operation
  void settle(std::string_view op);
  void check_wakeups();
  void check_mutations();
  void check_far_mutations();
  void check_far_family();
  void check_records();
  void check_state();
  void check_tubes();
  void check_clients();
  void check_next_wakeup();
  void check_never_early(std::string_view op);
  void check_restart(const std::map<JobId, Model::Job>& before);
  void advance_both();

  // picking
  std::optional<ClientId> idle_client();
  std::optional<ClientId> any_client();
  std::string tube_name(int odd_percent);
  std::string key_name() { return "k" + std::to_string(random_.range(0, config_.keys - 1)); }
  std::string group_name() { return "g" + std::to_string(random_.range(0, config_.groups - 1)); }
  JobId any_job();
  JobId held_job(ClientId client);
  std::uint32_t priority();
  std::optional<Millis> reserve_timeout();

  // An operation that cannot run now (every client waits, say) calls this and returns.
  void skip() { skipped_ = true; }
  void note(std::string text);
  void count(std::string what) {
    std::replace(what.begin(), what.end(), ' ', '-');
    ++tally_[what];
  }
  [[nodiscard]] std::string where() const;

  const SimConfig& config_;
  std::uint64_t seed_;
  Random random_;
  ManualClock clock_;
  // Far mode: the store the engine reads (written as settled) and the store as written.
  store::MemoryStore far_store_;
  store::MemoryStore written_;
  std::deque<std::pair<std::uint64_t, store::WriteSet>> unsettled_;
  std::unique_ptr<Engine> engine_;
  Model model_;
  int step_ = 0;
  bool skipped_ = false;
  std::deque<std::string> trace_;
  std::map<std::string, std::uint64_t> tally_;
  std::uint64_t bodies_put_ = 0;

  // The store as the mutations leave it.
  std::map<JobId, store::JobRecord> records_;
  std::map<JobId, std::string> bodies_;
  JobId stored_next_id_ = 1;

  // What the engine showed after the previous step, for the never-early check.
  struct Seen {
    JobState state;
    std::int64_t due_unix_ms;
    std::int64_t deadline_steady_ms;  // reserved: its TTR's end on the steady clock
  };
  std::map<JobId, Seen> seen_;
};

void Simulation::note(std::string text) {
  if (trace_.size() == 40) trace_.pop_front();
  trace_.push_back("#" + std::to_string(step_) + " t=" + std::to_string(engine_->now()) + " " +
                   std::move(text));
}

std::string Simulation::where() const {
  std::string text = "\n[config " + config_.name + ", seed " + std::to_string(seed_) + ", step " +
                     std::to_string(step_) + "; replay: " + replay_hint(seed_) +
                     "]\nlast operations:\n";
  for (const std::string& line : trace_) text.append("  ").append(line).append("\n");
  return text;
}

void Simulation::run() {
  // Weights: the lifecycle dominates; rare administrative operations still run hundreds of
  // times a run. Restarts are drawn apart, per thousand steps.
  const std::array<OpEntry, 21> table{{
      {2, &Simulation::op_connect},
      {1, &Simulation::op_disconnect},
      {2, &Simulation::op_use},
      {2, &Simulation::op_watch},
      {2, &Simulation::op_ignore},
      {config_.put_weight, &Simulation::op_put},
      {config_.reserve_weight, &Simulation::op_reserve},
      {2, &Simulation::op_reserve_job},
      {6, &Simulation::op_erase},
      {7, &Simulation::op_release},
      {3, &Simulation::op_bury},
      {3, &Simulation::op_touch},
      {3, &Simulation::op_kick},
      {2, &Simulation::op_kick_job},
      {1, &Simulation::op_pause_tube},
      {3, &Simulation::op_peek},
      {2, &Simulation::op_peek_key},
      {3, &Simulation::op_reschedule},
      {1, &Simulation::op_list_group},
      {1, &Simulation::op_cancel_group},
      {16, &Simulation::op_time},
  }};
  int total = 0;
  for (const OpEntry& entry : table) total += entry.weight;
  for (std::size_t i = 0; i < config_.max_clients; ++i) {
    op_connect();
    if (::testing::Test::HasFatalFailure()) return;
  }
  for (step_ = 1; step_ <= config_.steps; ++step_) {
    skipped_ = false;
    if (random_.range(0, 999) < config_.restart_per_mille) {
      op_restart();
    } else {
      std::int64_t roll = random_.range(0, total - 1);
      for (const OpEntry& entry : table) {
        roll -= entry.weight;
        if (roll < 0) {
          (this->*entry.run)();
          break;
        }
      }
    }
    if (skipped_ && !::testing::Test::HasFatalFailure()) {
      // Nothing to do for the drawn operation: let time pass or bring a client.
      if (model_.clients().size() < config_.max_clients) {
        op_connect();
      } else {
        op_time();
      }
    }
    if (::testing::Test::HasFatalFailure()) return;
  }
}

// ---------------------------------------------------------------------------------------------
// Picking

std::optional<ClientId> Simulation::idle_client() {
  std::vector<ClientId> idle;
  for (const auto& [id, c] : model_.clients()) {
    if (c.wait_order == 0) idle.push_back(id);
  }
  if (idle.empty()) return std::nullopt;
  return random_.pick(idle);
}

std::optional<ClientId> Simulation::any_client() {
  std::vector<ClientId> all;
  for (const auto& [id, c] : model_.clients()) all.push_back(id);
  if (all.empty()) return std::nullopt;
  return random_.pick(all);
}

// A tube from the configured names; now and then one that exists nowhere, or (odd_percent) a
// name the engine must refuse.
std::string Simulation::tube_name(int odd_percent) {
  if (random_.percent(odd_percent)) {
    static const std::vector<std::string> kBad = {"-dash", "sp ace", "", "star*",
                                                  std::string(201, 't')};
    return random_.pick(kBad);
  }
  if (random_.percent(3)) return "elsewhere";
  return random_.pick(config_.tubes);
}

JobId Simulation::any_job() {
  const auto& jobs = model_.jobs();
  if (!jobs.empty() && random_.percent(88)) {
    auto it = jobs.begin();
    std::advance(it, static_cast<std::ptrdiff_t>(random_.index(jobs.size())));
    return it->first;
  }
  return static_cast<JobId>(random_.range(0, static_cast<std::int64_t>(model_.next_id()) + 1));
}

JobId Simulation::held_job(ClientId client) {
  std::vector<JobId> held;
  for (const auto& [id, job] : model_.jobs()) {
    if (job.state == JobState::kReserved && job.reserver == client) held.push_back(id);
  }
  if (!held.empty() && random_.percent(85)) return random_.pick(held);
  return any_job();
}

std::uint32_t Simulation::priority() {
  static const std::vector<std::uint32_t> kSpecial = {0, 1, 1023, 1024, 1025, 4294967295U};
  if (random_.percent(20)) return random_.pick(kSpecial);
  return static_cast<std::uint32_t>(random_.range(0, 4) * 500);  // many equal priorities
}

std::optional<Millis> Simulation::reserve_timeout() {
  switch (random_.range(0, 3)) {
    case 0:
      return std::nullopt;
    case 1:
      return Millis{random_.percent(5) ? -random_.range(1, 100) : 0};
    case 2:
      return Millis{random_.range(1, 50)};
    default:
      return Millis{random_.range(200, 5000)};
  }
}

// ---------------------------------------------------------------------------------------------
// Clients and tubes

void Simulation::op_connect() {
  if (model_.clients().size() >= config_.max_clients + 2) return skip();
  const ClientId want = model_.connect();
  const ClientId got = engine_->connect();
  note("connect -> c" + std::to_string(got));
  EXPECT_EQ(got, want) << where();
  settle("connect");
}

void Simulation::op_disconnect() {
  if (model_.clients().size() <= 1) return skip();
  const ClientId c = *any_client();
  note("disconnect c" + std::to_string(c) + (model_.waiting(c) ? " (waiting)" : ""));
  count(model_.waiting(c) ? "disconnect.waiting" : "disconnect");
  model_.disconnect(c);
  engine_->disconnect(c);
  settle("disconnect");
}

void Simulation::op_use() {
  const auto c = idle_client();
  if (!c) return skip();
  const std::string tube = tube_name(3);
  note("use c" + std::to_string(*c) + " " + tube.substr(0, 20));
  const Status want = model_.use(*c, tube);
  const Status got = engine_->use(*c, tube);
  ASSERT_EQ(got.code(), want.code()) << where() << got.to_string();
  settle("use");
}

void Simulation::op_watch() {
  const auto c = idle_client();
  if (!c) return skip();
  const std::string tube = tube_name(3);
  note("watch c" + std::to_string(*c) + " " + tube.substr(0, 20));
  const auto want = model_.watch(*c, tube);
  const auto got = engine_->watch(*c, tube);
  ASSERT_EQ(got.code(), want.code()) << where() << got.status().to_string();
  if (want.is_ok()) {
    ASSERT_EQ(got.value(), want.value()) << where();
  }
  settle("watch");
}

void Simulation::op_ignore() {
  const auto c = idle_client();
  if (!c) return skip();
  const std::string tube = tube_name(0);
  note("ignore c" + std::to_string(*c) + " " + tube);
  const auto want = model_.ignore(*c, tube);
  const auto got = engine_->ignore(*c, tube);
  ASSERT_EQ(got.code(), want.code()) << where() << got.status().to_string();
  if (want.is_ok()) {
    ASSERT_EQ(got.value(), want.value()) << where();
  }
  count(want.is_ok() ? "ignore" : "ignore.not-ignored");
  settle("ignore");
}

// ---------------------------------------------------------------------------------------------
// The lifecycle

void Simulation::op_put() {
  if (model_.jobs().size() > config_.target_jobs && random_.percent(75)) {
    if (random_.percent(80)) return op_erase();
    return op_cancel_group();
  }
  const auto c = idle_client();
  if (!c) return skip();
  PutRequest request;
  std::string tube = random_.percent(40) ? std::string() : tube_name(1);
  request.tube = tube;
  request.priority = priority();
  const std::int64_t now = model_.now();
  switch (random_.range(0, 11)) {
    case 0:
    case 1:
    case 2:
    case 3:
      break;  // ready at once
    case 4:
      request.due = Due::after(Millis{random_.range(1, 20)});
      break;
    case 5:
      request.due = Due::after(Millis{random_.range(100, 3000)});
      break;
    case 6:
      request.due = Due::after(Millis{random_.range(1000, 30000)});
      break;
    case 7:
      request.due = Due::after(Millis{1000});
      break;
    case 8:
      request.due = Due::at(now - random_.range(0, 5000));
      break;
    case 9:
      request.due = Due::at(now + random_.range(1, 5000));
      break;
    case 10:
      request.due = Due::at(now + 1);
      break;
    default:
      request.due = Due::at(now);
      break;
  }
  if (random_.percent(1) && !request.due.absolute) {
    request.due = Due::after(Millis{-random_.range(1, 1000)});
  }
  static const std::vector<std::int64_t> kTtrs = {0, 1, 1, 1, 2, 2, 3, 5, 60, -1};
  request.ttr = Seconds{random_.pick(kTtrs)};
  std::string key;
  if (random_.percent(45)) key = random_.percent(1) ? std::string(201, 'k') : key_name();
  request.key = key;
  request.replace = !key.empty() && random_.percent(35);
  std::string group;
  if (random_.percent(35)) group = random_.percent(1) ? std::string(201, 'g') : group_name();
  request.group = group;
  const std::string body = "body-" + std::to_string(++bodies_put_);
  request.body = body;

  note("put c" + std::to_string(*c) + " tube=" + tube.substr(0, 20) +
       " pri=" + std::to_string(request.priority) + " due=" + (request.due.absolute ? "@" : "+") +
       std::to_string(request.due.ms) + " ttr=" + std::to_string(request.ttr.count()) + " key=" +
       key.substr(0, 20) + (request.replace ? " replace" : "") + " group=" + group.substr(0, 20));
  const auto want = model_.put(*c, request);
  const auto got = engine_->put(*c, request);
  ASSERT_EQ(got.code(), want.code()) << where() << got.status().to_string();
  if (want.is_ok()) {
    EXPECT_EQ(got->id, want->id) << where();
    EXPECT_EQ(got->inserted, want->inserted) << where();
    EXPECT_EQ(got->replaced, want->replaced) << where();
    note("  -> id " + std::to_string(got->id) + (got->inserted ? "" : " (key held)") +
         (got->replaced != 0 ? " replaced " + std::to_string(got->replaced) : ""));
    count(!want->inserted ? "put.key-held" : want->replaced != 0 ? "put.replaced" : "put");
  } else {
    count("put." + std::string(code_name(want.code())));
  }
  settle("put");
}

void Simulation::op_reserve() {
  const auto c = idle_client();
  if (!c) return skip();
  const auto timeout = reserve_timeout();
  note("reserve c" + std::to_string(*c) +
       " timeout=" + (timeout ? std::to_string(timeout->count()) : std::string("none")));
  const Model::Reserve want = model_.reserve(*c, timeout);
  const ReserveResult got = engine_->reserve(*c, timeout);
  ASSERT_EQ(show(got.kind), show(want.kind))
      << where() << "reserve: engine job " << got.job.id << ", model job " << want.id;
  if (want.kind == Kind::kReserved) {
    const std::string d = diff(got.job, model_.view(*model_.find(want.id)));
    ASSERT_TRUE(d.empty()) << where() << "reserved job: " << d;
    note("  -> job " + std::to_string(got.job.id));
  } else {
    note("  -> " + show(got.kind));
  }
  count("reserve." + show(want.kind));
  settle("reserve");
}

void Simulation::op_reserve_job() {
  const auto c = idle_client();
  if (!c) return skip();
  const JobId id = any_job();
  note("reserve-job c" + std::to_string(*c) + " " + std::to_string(id));
  const Model::Job* before = model_.find(id);
  const std::string from = before != nullptr ? show(before->state) : "none";
  const Status want = model_.reserve_job(*c, id);
  const auto got = engine_->reserve_job(*c, id);
  ASSERT_EQ(got.code(), want.code()) << where() << got.status().to_string();
  if (want.is_ok()) {
    const std::string d = diff(got.value(), model_.view(*model_.find(id)));
    ASSERT_TRUE(d.empty()) << where() << "reserved job: " << d;
  }
  count("reserve-job." + (want.is_ok() ? from : std::string(code_name(want.code()))));
  settle("reserve-job");
}

void Simulation::op_erase() {
  const auto c = idle_client();
  if (!c) return skip();
  const JobId id = random_.percent(50) ? held_job(*c) : any_job();
  note("delete c" + std::to_string(*c) + " " + std::to_string(id));
  const Status want = model_.erase(*c, id);
  const Status got = engine_->erase(*c, id);
  ASSERT_EQ(got.code(), want.code()) << where() << got.to_string();
  count("delete." + std::string(code_name(want.code())));
  settle("delete");
}

void Simulation::op_release() {
  const auto c = idle_client();
  if (!c) return skip();
  const JobId id = held_job(*c);
  const std::uint32_t pri = priority();
  Millis delay{0};
  if (random_.percent(45)) delay = Millis{random_.percent(50) ? random_.range(1, 30) : 2000};
  if (random_.percent(2)) delay = Millis{-random_.range(1, 1000)};
  note("release c" + std::to_string(*c) + " " + std::to_string(id) + " pri=" + std::to_string(pri) +
       " delay=" + std::to_string(delay.count()));
  const Status want = model_.release(*c, id, pri, delay);
  const Status got = engine_->release(*c, id, pri, delay);
  ASSERT_EQ(got.code(), want.code()) << where() << got.to_string();
  count("release." + std::string(code_name(want.code())));
  settle("release");
}

void Simulation::op_bury() {
  const auto c = idle_client();
  if (!c) return skip();
  const JobId id = held_job(*c);
  const std::uint32_t pri = priority();
  note("bury c" + std::to_string(*c) + " " + std::to_string(id) + " pri=" + std::to_string(pri));
  const Status want = model_.bury(*c, id, pri);
  const Status got = engine_->bury(*c, id, pri);
  ASSERT_EQ(got.code(), want.code()) << where() << got.to_string();
  count("bury." + std::string(code_name(want.code())));
  settle("bury");
}

void Simulation::op_touch() {
  const auto c = idle_client();
  if (!c) return skip();
  const JobId id = held_job(*c);
  note("touch c" + std::to_string(*c) + " " + std::to_string(id));
  const Status want = model_.touch(*c, id);
  const Status got = engine_->touch(*c, id);
  ASSERT_EQ(got.code(), want.code()) << where() << got.to_string();
  count("touch." + std::string(code_name(want.code())));
  settle("touch");
}

void Simulation::op_kick() {
  const std::string tube = tube_name(0);
  const std::size_t bound =
      random_.percent(10) ? 1000 : static_cast<std::size_t>(random_.range(0, 4));
  note("kick " + tube + " " + std::to_string(bound));
  const std::size_t want = model_.kick(tube, bound);
  const std::size_t got = engine_->kick(tube, bound);
  ASSERT_EQ(got, want) << where();
  count(want > 0 ? "kick.some" : "kick.none");
  settle("kick");
}

void Simulation::op_kick_job() {
  const JobId id = any_job();
  note("kick-job " + std::to_string(id));
  const Model::Job* before = model_.find(id);
  const std::string from = before != nullptr ? show(before->state) : "none";
  const Status want = model_.kick_job(id);
  const Status got = engine_->kick_job(id);
  ASSERT_EQ(got.code(), want.code()) << where() << got.to_string();
  count("kick-job." + (want.is_ok() ? from : std::string(code_name(want.code()))));
  settle("kick-job");
}

void Simulation::op_pause_tube() {
  const std::string tube = tube_name(0);
  static const std::vector<std::int64_t> kPauses = {0, 0, 1, 2, 5, 30, -1};
  const Seconds pause{random_.pick(kPauses)};
  note("pause-tube " + tube + " " + std::to_string(pause.count()) + "s");
  const Status want = model_.pause_tube(tube, pause);
  const Status got = engine_->pause_tube(tube, pause);
  ASSERT_EQ(got.code(), want.code()) << where() << got.to_string();
  count("pause-tube." + std::string(code_name(want.code())));
  settle("pause-tube");
}

void Simulation::op_peek() {
  const auto expect = [this](const Result<JobView>& got, std::optional<JobId> want,
                             const char* what) {
    ASSERT_EQ(got.is_ok(), want.has_value()) << where() << what;
    if (!want) {
      ASSERT_EQ(got.code(), Code::kNotFound) << where() << what;
      return;
    }
    const std::string d = diff(got.value(), model_.view(*model_.find(*want)));
    ASSERT_TRUE(d.empty()) << where() << what << ": " << d;
  };
  const std::string tube = tube_name(0);
  switch (random_.range(0, 3)) {
    case 0: {
      const JobId id = any_job();
      note("peek " + std::to_string(id));
      const bool live = model_.find(id) != nullptr;
      expect(engine_->peek(id), live ? std::optional<JobId>(id) : std::nullopt, "peek");
      expect(engine_->stats_job(id), live ? std::optional<JobId>(id) : std::nullopt, "stats-job");
      break;
    }
    case 1:
      note("peek-ready " + tube);
      expect(engine_->peek_ready(tube), model_.peek_ready(tube), "peek-ready");
      break;
    case 2:
      note("peek-delayed " + tube);
      expect(engine_->peek_delayed(tube), model_.peek_delayed(tube), "peek-delayed");
      break;
    default:
      note("peek-buried " + tube);
      expect(engine_->peek_buried(tube), model_.peek_buried(tube), "peek-buried");
      break;
  }
  if (::testing::Test::HasFatalFailure()) return;
  settle("peek");
}

void Simulation::op_peek_key() {
  const std::string tube = tube_name(0);
  const std::string key = random_.percent(3) ? std::string() : key_name();
  note("peek-key " + tube + " " + key);
  const auto want = model_.find_key(tube, key);
  const auto found = engine_->find_key(tube, key);
  const auto peeked = engine_->peek_key(tube, key);
  ASSERT_EQ(found.is_ok(), want.has_value()) << where();
  ASSERT_EQ(peeked.is_ok(), want.has_value()) << where();
  if (want) {
    ASSERT_EQ(found.value(), *want) << where();
    const std::string d = diff(peeked.value(), model_.view(*model_.find(*want)));
    ASSERT_TRUE(d.empty()) << where() << "peek-key: " << d;
  } else {
    ASSERT_EQ(found.code(), Code::kNotFound) << where();
    ASSERT_EQ(peeked.code(), Code::kNotFound) << where();
  }
  count(want ? "peek-key.found" : "peek-key.none");
  settle("peek-key");
}

void Simulation::op_reschedule() {
  const JobId id = any_job();
  const std::int64_t now = model_.now();
  std::int64_t due = now;
  switch (random_.range(0, 4)) {
    case 0:
      due = now - random_.range(1, 3000);
      break;
    case 1:
      due = now;
      break;
    case 2:
      due = now + random_.range(1, 30);
      break;
    default:
      due = now + random_.range(500, 20000);
      break;
  }
  note("reschedule " + std::to_string(id) + " due=" + std::to_string(due) + " (now" +
       (due >= now ? "+" : "") + std::to_string(due - now) + ")");
  const Model::Job* before = model_.find(id);
  const std::string from = before != nullptr ? show(before->state) : "none";
  const Status want = model_.reschedule(id, due);
  const Status got = engine_->reschedule(id, Due::at(due));
  ASSERT_EQ(got.code(), want.code()) << where() << got.to_string();
  count("reschedule." + (want.is_ok() ? from : std::string(code_name(want.code()))));
  settle("reschedule");
}

void Simulation::op_list_group() {
  const std::string tube = tube_name(0);
  const std::string group = group_name();
  note("list-group " + tube + " " + group);
  const std::vector<JobId> want = model_.list_group(tube, group);
  const std::vector<JobView> got = engine_->list_group(tube, group);
  ASSERT_EQ(got.size(), want.size()) << where();
  for (std::size_t i = 0; i < want.size(); ++i) {
    const std::string d = diff(got[i], model_.view(*model_.find(want[i])));
    ASSERT_TRUE(d.empty()) << where() << "list-group entry " << i << ": " << d;
  }
  count(want.empty() ? "list-group.empty" : "list-group.some");
  settle("list-group");
}

void Simulation::op_cancel_group() {
  const std::string tube = tube_name(0);
  const std::string group = group_name();
  note("cancel-group " + tube + " " + group);
  const std::size_t want = model_.cancel_group(tube, group);
  const std::size_t got = engine_->cancel_group(tube, group);
  ASSERT_EQ(got, want) << where();
  count(want > 0 ? "cancel-group.some" : "cancel-group.none");
  settle("cancel-group");
}

// ---------------------------------------------------------------------------------------------
// Time and restarts

void Simulation::advance_both() {
  model_.set_clock(clock_.now_unix_ms(), clock_.steady_ms());
  model_.advance();
  engine_->advance();
}

// Moves the clocks by 0 ms to many seconds (now and then the wall clock steps back or forward
// alone: the engine must hold its wall time, and run TTRs, waits and pauses on the steady
// clock), then advance(). A precise move stops at every next_wakeup_us() on the way, as the server
// does; a coarse one jumps, as a server that slept too long would.
void Simulation::op_time() {
  std::int64_t step = 0;
  switch (random_.range(0, 19)) {
    case 0:
    case 1:
      step = 0;
      break;
    case 2:
    case 3:
    case 4:
      step = 1;
      break;
    case 5:
    case 6:
    case 7:
      step = random_.range(2, 10);
      break;
    case 8:
    case 9:
      step = random_.range(11, 400);
      break;
    case 10:
    case 11:
    case 12:
    case 13:
      step = random_.range(990, 1010);
      break;
    case 14:
      step = random_.range(1500, 4000);
      break;
    case 15:
    case 16:
      step = random_.range(4000, 30000);
      break;
    case 17:
      step = -random_.range(1, 3000);
      break;  // the wall clock steps back
    case 18:
      if (random_.percent(50)) {
        // The wall clock steps forward, and no time passes: due times it passes fire, and
        // nothing that runs on the steady clock (TTRs, waits, pauses) moves.
        const std::int64_t jump = random_.range(1, 40000);
        note("wall clock +" + std::to_string(jump) + "ms (a step)");
        count("time.step-forward");
        clock_.step_wall(Millis{jump});
        advance_both();
        settle("time");
        return;
      }
      step = random_.range(401, 989);
      break;
    default:
      step = random_.range(401, 989);
      break;
  }
  const bool precise = step > 0 && random_.percent(config_.precise_time_percent);
  const std::int64_t target = clock_.now_unix_ms() + step;
  note("time " + std::string(step >= 0 ? "+" : "") + std::to_string(step) + "ms" +
       (precise ? " (precise)" : ""));
  count(step < 0 ? "time.back" : precise ? "time.precise" : "time.coarse");
  for (int hops = 0; precise && hops < 64; ++hops) {
    // This clock holds whole milliseconds, so every wakeup is one.
    const auto wake_us = engine_->next_wakeup_us();
    if (!wake_us || *wake_us / 1000 >= target) break;
    ASSERT_EQ(*wake_us % 1000, 0) << where() << "a wakeup inside a millisecond";
    const std::int64_t wake = *wake_us / 1000;
    clock_.set(wake);
    note("  wakeup at " + std::to_string(wake));
    advance_both();
    settle("time");
    if (::testing::Test::HasFatalFailure()) return;
  }
  clock_.set(target);
  advance_both();
  settle("time");
}

// Builds a fresh engine from the stored records, as delayqd does at start, and checks what
// recovery promises against the engine that was: delayed jobs keep their due time, reserved ones
// come back ready, buried ones stay buried, keys hold, ids go on from where they were.
void Simulation::op_restart() {
  note("restart from " + std::to_string(records_.size()) + " records, next id " +
       std::to_string(stored_next_id_));
  count("restart");
  while (!unsettled_.empty()) {  // what was taken is stored
    const store::WriteSet* sets[] = {&unsettled_.front().second};
    ASSERT_TRUE(far_store_.write(sets, false).is_ok());
    unsettled_.pop_front();
  }
  auto fresh = std::make_unique<Engine>(clock_, engine_options());
  if (config_.window) {
    // As delayqd: the records, then the far tier's counts; its jobs stay on disk.
    const Status scanned =
        far_store_.scan([&fresh](store::JobRecord&& record) { return fresh->restore(record); });
    ASSERT_TRUE(scanned.is_ok()) << where() << scanned.to_string();
    const Status counted =
        far_store_.far_counts([&fresh](std::string tube, std::int64_t minute, std::uint64_t n) {
          return fresh->restore_far(tube, minute, n);
        });
    ASSERT_TRUE(counted.is_ok()) << where() << counted.to_string();
  } else {
    for (const auto& [id, record] : records_) {
      const Status s = fresh->restore(record);
      ASSERT_TRUE(s.is_ok()) << where() << "restore " << id << ": " << s.to_string();
    }
  }
  fresh->finish_restore(stored_next_id_);
  ASSERT_TRUE(fresh->take_mutations().empty()) << where() << "restore wrote mutations";
  engine_ = std::move(fresh);
  const std::map<JobId, Model::Job> before = model_.jobs();
  const JobId next_id_before = model_.next_id();
  model_.restart(clock_.now_unix_ms(), records_, bodies_, stored_next_id_);
  advance_both();
  ASSERT_EQ(engine_->stats().next_id, next_id_before) << where() << "ids would be reused";
  check_restart(before);
  if (::testing::Test::HasFatalFailure()) return;
  seen_.clear();
  settle("restart");
  for (std::size_t i = 0; i < config_.max_clients / 2 + 1; ++i) op_connect();
}

void Simulation::check_restart(const std::map<JobId, Model::Job>& before) {
  ASSERT_EQ(engine_->jobs(), before.size()) << where();
  for (const auto& [id, old] : before) {
    const auto now = engine_->peek(id);
    ASSERT_TRUE(now.is_ok()) << where() << "job " << id << " lost in the restart";
    const JobView& v = now.value();
    // A job that became ready by time is still delayed on disk; if the clock has stepped back
    // behind its due time, it is delayed again (never early).
    const store::JobRecord& r = records_.at(id);
    JobState expected = old.state;
    if (old.state == JobState::kReserved) expected = JobState::kReady;
    if (expected == JobState::kReady && r.state == JobState::kDelayed &&
        r.due_unix_ms > engine_->now()) {
      expected = JobState::kDelayed;
    }
    ASSERT_EQ(v.state, expected) << where() << "job " << id << " was " << show(old.state);
    if (old.state == JobState::kDelayed) {
      ASSERT_EQ(v.due_unix_ms, old.due_unix_ms) << where() << "job " << id;
      EXPECT_EQ(v.delay_ms, old.delay_ms) << where() << "job " << id;
    }
    ASSERT_EQ(v.priority, old.priority) << where() << "job " << id;
    ASSERT_EQ(v.tube, old.tube) << where() << "job " << id;
    ASSERT_EQ(v.ttr, Seconds{old.ttr_seconds}) << where() << "job " << id;
    ASSERT_EQ(v.created_unix_ms, old.created_unix_ms) << where() << "job " << id;
    ASSERT_EQ(v.group, old.group) << where() << "job " << id;
    ASSERT_EQ(v.key, old.key) << where() << "job " << id;
    if (!old.key.empty()) {
      const auto holder = engine_->find_key(old.tube, old.key);
      ASSERT_TRUE(holder.is_ok() && holder.value() == id) << where() << "key " << old.key;
    }
    // Reserves and timeouts are not written when they happen (a reserved job comes back ready
    // anyway); the rest are.
    ASSERT_EQ(v.counters.releases, old.counters.releases) << where() << "job " << id;
    ASSERT_EQ(v.counters.buries, old.counters.buries) << where() << "job " << id;
    ASSERT_EQ(v.counters.kicks, old.counters.kicks) << where() << "job " << id;
    ASSERT_LE(v.counters.reserves, old.counters.reserves) << where() << "job " << id;
    ASSERT_LE(v.counters.timeouts, old.counters.timeouts) << where() << "job " << id;
  }
  // Buried jobs come back in id order.
  for (const auto& [name, tube] : model_.tubes()) {
    std::optional<JobId> first;
    for (const auto& [id, old] : before) {
      if (old.tube == name && old.state == JobState::kBuried && !first) first = id;
    }
    const auto peeked = engine_->peek_buried(name);
    ASSERT_EQ(peeked.is_ok(), first.has_value()) << where() << "tube " << name;
    if (first) {
      ASSERT_EQ(peeked->id, *first) << where() << "tube " << name;
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Checks after every step

void Simulation::settle(std::string_view op) {
  if (::testing::Test::HasFatalFailure()) return;
  check_wakeups();
  if (::testing::Test::HasFatalFailure()) return;
  check_mutations();
  if (::testing::Test::HasFatalFailure()) return;
  check_state();
  if (::testing::Test::HasFatalFailure()) return;
  check_never_early(op);
}

void Simulation::check_wakeups() {
  const std::vector<Wakeup> got = engine_->take_wakeups();
  const std::map<ClientId, Model::Reserve> want = model_.take_wakeups();
  std::map<ClientId, const Wakeup*> by_client;
  for (const Wakeup& w : got) {
    ASSERT_TRUE(by_client.emplace(w.client, &w).second)
        << where() << "two wakeups for c" << w.client;
    ASSERT_TRUE(w.result.kind != Kind::kWaiting) << where() << "a wakeup that says wait";
  }
  for (const auto& [client, w] : want) {
    const auto it = by_client.find(client);
    ASSERT_TRUE(it != by_client.end())
        << where() << "no wakeup for c" << client << ", model: " << show(w.kind) << " " << w.id;
    const ReserveResult& r = it->second->result;
    ASSERT_EQ(show(r.kind), show(w.kind)) << where() << "wakeup of c" << client << ": engine job "
                                          << r.job.id << ", model job " << w.id;
    note("  wakeup c" + std::to_string(client) + " " + show(r.kind) +
         (r.kind == Kind::kReserved ? " job " + std::to_string(r.job.id) : std::string()));
    count("wakeup." + show(r.kind));
    if (w.kind == Kind::kReserved) {
      const std::string d = diff(r.job, model_.view(*model_.find(w.id)));
      ASSERT_TRUE(d.empty()) << where() << "wakeup of c" << client << ": " << d;
    }
  }
  for (const Wakeup& w : got) {
    ASSERT_TRUE(want.contains(w.client)) << where() << "unexpected wakeup c" << w.client << " "
                                         << show(w.result.kind) << " job " << w.result.job.id;
  }
}

// The engine's WriteSet must be exactly the model's, op for op; applied, it is the store.
void Simulation::check_mutations() {
  if (config_.window) {
    check_far_mutations();
    return;
  }
  const store::WriteSet got = engine_->take_mutations();
  const std::vector<Model::Mutation> want = model_.take_mutations();
  const auto listing = [&got, &want] {
    std::string text = "\nengine:";
    for (const auto& op : got.ops()) text += " " + show(op.kind) + " " + std::to_string(op.id);
    text += "\nmodel: ";
    for (const auto& op : want) text += " " + show(op.kind) + " " + std::to_string(op.id);
    return text;
  };
  ASSERT_EQ(got.ops().size(), want.size()) << where() << "mutations differ" << listing();
  for (std::size_t i = 0; i < want.size(); ++i) {
    const store::WriteSet::Op& op = got.ops()[i];
    ASSERT_EQ(op.kind, want[i].kind) << where() << "mutation " << i << listing();
    ASSERT_EQ(op.id, want[i].id) << where() << "mutation " << i << listing();
    switch (op.kind) {
      case OpKind::kRecord: {
        const auto decoded = store::decode_record(op.id, op.value);
        ASSERT_TRUE(decoded.is_ok()) << where() << decoded.status().to_string();
        const std::string d = diff(decoded.value(), want[i].record);
        ASSERT_TRUE(d.empty()) << where() << "record of job " << op.id << ": " << d;
        ASSERT_TRUE(bodies_.contains(op.id) ||
                    (i + 1 < want.size() && want[i + 1].kind == OpKind::kBody))
            << where() << "record without a body";
        records_[op.id] = decoded.value();
        break;
      }
      case OpKind::kBody:
        ASSERT_EQ(op.value, want[i].body) << where();
        ASSERT_FALSE(bodies_.contains(op.id)) << where() << "body written twice";
        bodies_[op.id] = op.value;
        break;
      case OpKind::kErase:
        ASSERT_TRUE(records_.erase(op.id) == 1 && bodies_.erase(op.id) == 1)
            << where() << "erase of job " << op.id << " that the store does not hold";
        break;
      case OpKind::kAttachment:
      case OpKind::kEraseAttachment:
      case OpKind::kWebhook:
      case OpKind::kEraseWebhook:
      case OpKind::kMaxAttempts:
      case OpKind::kFlow:
      case OpKind::kSchedule:
      case OpKind::kEraseSchedule:
      case OpKind::kFarPut:
      case OpKind::kFarPutFresh:
      case OpKind::kFarErase:
      case OpKind::kFarCount:
        // The model's operations attach nothing and set no webhook (engine_test covers them);
        // schedules are the broker's, never the engine's.
        FAIL() << where() << "unexpected " << show(op.kind);
    }
  }
  if (got.next_id()) stored_next_id_ = *got.next_id();
  ASSERT_EQ(stored_next_id_, model_.next_id()) << where() << "stored id high-water mark";
  check_records();
}

// Far mode: the model writes no far tier, so the store is compared as a whole, not op by op: the
// records and far records, as written, hold exactly the live jobs (check_records()), and the far
// family's indexes and counts agree with its records. The engine's reads see the writes some
// steps late, as they would beside the committer.
void Simulation::check_far_mutations() {
  store::WriteSet got = engine_->take_mutations();
  (void)model_.take_mutations();
  if (got.next_id()) stored_next_id_ = *got.next_id();
  ASSERT_EQ(stored_next_id_, model_.next_id()) << where() << "stored id high-water mark";
  for (const auto& op : got.ops()) {
    count("store." + show(op.kind));
    if (op.kind == OpKind::kBody) {
      ASSERT_FALSE(written_.read_body(op.id).is_ok()) << where() << "body written twice";
    }
  }
  const store::WriteSet* sets[] = {&got};
  const Status written = written_.write(sets, false);
  ASSERT_TRUE(written.is_ok()) << where() << written.to_string();
  unsettled_.emplace_back(engine_->epoch(), std::move(got));
  const std::size_t settle = random_.index(unsettled_.size() + 1);
  for (std::size_t i = 0; i < settle; ++i) {
    const store::WriteSet* batch[] = {&unsettled_.front().second};
    ASSERT_TRUE(far_store_.write(batch, false).is_ok());
    if (i + 1 == settle) engine_->settle(unsettled_.front().first);
    unsettled_.pop_front();
  }
  records_.clear();
  bodies_.clear();
  const Status scanned = written_.scan([this](store::JobRecord&& record) {
    records_.emplace(record.id, std::move(record));
    return Status::ok();
  });
  ASSERT_TRUE(scanned.is_ok()) << where() << scanned.to_string();
  check_far_family();
  if (::testing::Test::HasFatalFailure()) return;
  for (const auto& [id, record] : records_) {
    auto body = written_.read_body(id);
    ASSERT_TRUE(body.is_ok()) << where() << "no body for job " << id;
    bodies_[id] = body.value();
  }
  check_records();
}

// Every far record has its due entry, and its key's and group's; nothing else is there; the
// counts by minute are the records'. Far records join records_ (each job in one place only).
void Simulation::check_far_family() {
  std::map<std::string, std::string> expected;
  std::map<std::pair<std::string, std::int64_t>, std::uint64_t> counts;
  for (const auto& [key, value] : written_.far()) {
    if (key[0] == store::kFarCountPrefix) continue;
    if (key[0] != store::kFarJobPrefix) continue;
    const auto id = store::parse_job_key(store::kFarJobPrefix, key);
    ASSERT_TRUE(id.has_value()) << where() << "far key of the wrong size";
    auto record = store::decode_record(*id, value);
    ASSERT_TRUE(record.is_ok()) << where() << record.status().to_string();
    const store::JobRecord& r = record.value();
    ASSERT_EQ(r.state, JobState::kDelayed) << where() << "far job " << *id << " not delayed";
    ASSERT_FALSE(records_.contains(*id)) << where() << "job " << *id << " both near and far";
    expected[key] = value;
    expected[store::far_due_key(r.tube, r.due_unix_ms, r.id)] = "";
    if (!r.key.empty()) {
      const auto holder = written_.far_key(r.tube, r.key);
      ASSERT_TRUE(holder.is_ok() && holder.value() == r.id) << where() << "far key of " << r.id;
      expected[store::far_key_key(r.tube, r.key)] =
          written_.far().at(store::far_key_key(r.tube, r.key));
    }
    if (!r.group.empty()) expected[store::far_group_key(r.tube, r.group, r.id)] = "";
    ++counts[{r.tube, r.due_unix_ms / Engine::kDueBucketMs}];
    records_.emplace(r.id, r);
  }
  std::map<std::string, std::string> found;
  for (const auto& [key, value] : written_.far()) {
    if (key[0] != store::kFarCountPrefix) found.emplace(key, value);
  }
  ASSERT_EQ(found.size(), expected.size()) << where() << "far entries beside the records";
  ASSERT_TRUE(found == expected) << where() << "far entries differ from what the records ask";
  std::map<std::pair<std::string, std::int64_t>, std::uint64_t> stored;
  const Status read =
      written_.far_counts([&stored](std::string tube, std::int64_t minute, std::uint64_t n) {
        stored[{std::move(tube), minute}] = n;
        return Status::ok();
      });
  ASSERT_TRUE(read.is_ok()) << where() << read.to_string();
  ASSERT_TRUE(stored == counts) << where() << "far counts differ from the far records";
}

// The store holds exactly the live jobs, and each record restores to what the job is now.
void Simulation::check_records() {
  ASSERT_EQ(records_.size(), model_.jobs().size()) << where();
  ASSERT_EQ(bodies_.size(), model_.jobs().size()) << where();
  const std::int64_t now = model_.now();
  for (const auto& [id, job] : model_.jobs()) {
    const auto it = records_.find(id);
    ASSERT_TRUE(it != records_.end()) << where() << "job " << id << " is not stored";
    const store::JobRecord& r = it->second;
    ASSERT_EQ(bodies_.at(id), job.body) << where();
    ASSERT_TRUE(r.tube == job.tube && r.key == job.key && r.group == job.group &&
                r.priority == job.priority && r.ttr_seconds == job.ttr_seconds &&
                r.created_unix_ms == job.created_unix_ms)
        << where() << "stale record of job " << id << ": " << diff(r, model_.record(job));
    bool restorable = false;
    switch (job.state) {
      case JobState::kDelayed:
        restorable = r.state == JobState::kDelayed && r.due_unix_ms == job.due_unix_ms &&
                     r.delay_ms == job.delay_ms;
        break;
      case JobState::kBuried:
        restorable = r.state == JobState::kBuried;
        break;
      case JobState::kReady:
      case JobState::kReserved:
        restorable = r.state == JobState::kReady || r.state == JobState::kReserved ||
                     (r.state == JobState::kDelayed && r.due_unix_ms <= now);
        break;
    }
    ASSERT_TRUE(restorable) << where() << "job " << id << " is " << show(job.state)
                            << " but its record would restore as " << show(r.state) << " due "
                            << r.due_unix_ms;
  }
}

void Simulation::check_state() {
  // every job, and no other
  ASSERT_EQ(engine_->jobs(), model_.jobs().size()) << where();
  for (const auto& [id, job] : model_.jobs()) {
    const auto got = engine_->peek(id);
    ASSERT_TRUE(got.is_ok()) << where() << "job " << id << " is gone from the engine";
    const std::string d = diff(got.value(), model_.view(job));
    ASSERT_TRUE(d.empty()) << where() << "job " << id << ": " << d;
  }
  for (const JobId id : {JobId{0}, model_.next_id(), model_.next_id() + 1}) {
    ASSERT_EQ(engine_->peek(id).code(), Code::kNotFound) << where() << "job " << id;
  }
  const std::string server = diff(engine_->stats(), model_.server_stats());
  ASSERT_TRUE(server.empty()) << where() << "stats: " << server;
  check_tubes();
  if (::testing::Test::HasFatalFailure()) return;
  check_clients();
  if (::testing::Test::HasFatalFailure()) return;
  check_next_wakeup();
}

void Simulation::check_tubes() {
  std::vector<std::string> names;
  for (const auto& [name, tube] : model_.tubes()) names.push_back(name);
  // The same tubes; their order (beanstalkd's, which depends on the order tubes were dropped in)
  // is EngineTest.TubesAreListedInBeanstalkdsOrder's to check.
  std::vector<std::string> listed = engine_->tubes();
  std::sort(listed.begin(), listed.end());
  ASSERT_EQ(listed, names) << where();
  for (const auto& [name, tube] : model_.tubes()) {
    const auto got = engine_->stats_tube(name);
    ASSERT_TRUE(got.is_ok()) << where() << "tube " << name;
    const std::string d = diff(got.value(), model_.tube_stats(name));
    ASSERT_TRUE(d.empty()) << where() << "stats-tube " << name << ": " << d;
    const auto same = [&](const Result<JobView>& peeked, std::optional<JobId> want,
                          const char* what) {
      ASSERT_EQ(peeked.is_ok(), want.has_value()) << where() << what << " " << name;
      if (want) {
        ASSERT_EQ(peeked->id, *want) << where() << what << " " << name;
      }
    };
    same(engine_->peek_ready(name), model_.peek_ready(name), "peek-ready");
    same(engine_->peek_delayed(name), model_.peek_delayed(name), "peek-delayed");
    same(engine_->peek_buried(name), model_.peek_buried(name), "peek-buried");
    if (::testing::Test::HasFatalFailure()) return;
  }
  // The first jobs of each tube in each state, in the order they will be served.
  constexpr std::size_t kListed = 4;
  for (const auto& [name, tube] : model_.tubes()) {
    for (const JobState state :
         {JobState::kReady, JobState::kDelayed, JobState::kReserved, JobState::kBuried}) {
      std::vector<const Model::Job*> want;
      for (const auto& [id, job] : model_.jobs()) {
        if (job.tube == name && job.state == state) want.push_back(&job);
      }
      const auto before = [state](const Model::Job* a, const Model::Job* b) {
        switch (state) {
          case JobState::kReady:
            return std::pair(a->priority, a->id) < std::pair(b->priority, b->id);
          case JobState::kDelayed:
            return std::pair(a->due_unix_ms, a->id) < std::pair(b->due_unix_ms, b->id);
          case JobState::kBuried:
            return a->bury_order < b->bury_order;
          case JobState::kReserved:  // ties in TTR end are in no order the model knows: by id
            return a->id < b->id;
        }
        return false;
      };
      std::sort(want.begin(), want.end(), before);
      const auto got = engine_->list_jobs(name, state, kListed);
      ASSERT_TRUE(got.is_ok() && got->complete) << where() << "list of " << name;
      std::vector<JobId> got_ids, want_ids;
      for (const JobView& v : got->jobs) got_ids.push_back(v.id);
      for (std::size_t i = 0; i < std::min(kListed, want.size()); ++i) {
        want_ids.push_back(want[i]->id);
      }
      if (state == JobState::kReserved) {
        if (want.size() > kListed) continue;
        std::sort(got_ids.begin(), got_ids.end());
      }
      ASSERT_EQ(got_ids, want_ids) << where() << "list of " << name << " " << state_name(state);
    }
  }
  // Due counts around the present, per tube and over all of them: edges inside and between
  // minutes, before the present and after it.
  const std::int64_t now = model_.now();
  const std::vector<std::int64_t> edges = {now - 90'000, now, now + 1, now + 45'000, now + 150'000};
  std::vector<std::string> due_tubes = {""};
  for (const auto& [name, tube] : model_.tubes()) due_tubes.push_back(name);
  for (const std::string& name : due_tubes) {
    const auto got = engine_->due_counts(name, edges);
    ASSERT_TRUE(got.is_ok()) << where() << "due counts of " << name;
    ASSERT_EQ(got.value(), model_.due_counts(name, edges))
        << where() << "due counts of '" << name << "'";
  }
  // Keys are unique per tube, and each finds its job.
  std::map<std::pair<std::string, std::string>, JobId> keys;
  for (const auto& [id, job] : model_.jobs()) {
    if (job.key.empty()) continue;
    ASSERT_TRUE(keys.emplace(std::pair(job.tube, job.key), id).second)
        << where() << "key " << job.key << " held twice in " << job.tube;
    const auto found = engine_->find_key(job.tube, job.key);
    ASSERT_TRUE(found.is_ok() && found.value() == id) << where() << "key " << job.key;
  }
}

void Simulation::check_clients() {
  for (const auto& [id, c] : model_.clients()) {
    ASSERT_EQ(engine_->used_tube(id), c.used) << where() << "c" << id;
    ASSERT_EQ(engine_->watched_tubes(id), c.watched) << where() << "c" << id;
  }
}

// next_wakeup_us() may be early (the wheel answers with the start of a slot), never late, and
// never in the past of the wall clock as it reads (which may be behind the engine's present
// after a step back): a server sleeping until it would miss nothing and never spin.
void Simulation::check_next_wakeup() {
  const auto got = engine_->next_wakeup_us();
  const auto want = model_.next_event();
  if (!want) {
    ASSERT_FALSE(got.has_value()) << where() << "next_wakeup " << *got << " us with nothing to do";
    return;
  }
  ASSERT_TRUE(got.has_value()) << where() << "no next_wakeup, model: " << *want;
  ASSERT_LE(*got, *want * 1000) << where() << "next_wakeup too late";
  ASSERT_GT(*got, clock_.now_unix_ms() * 1000) << where() << "next_wakeup not in the future";
}

// Without the model: a job leaves the delayed state before its due time only when an operation
// says so (kick, kick-job, reserve-job, reschedule), and a reservation ends before its TTR only
// when its worker ends it (release, bury, delete, disconnect).
void Simulation::check_never_early(std::string_view op) {
  const std::int64_t now = engine_->now();
  const std::int64_t steady = engine_->steady_now();
  const bool may_wake_early =
      op == "kick" || op == "kick-job" || op == "reserve-job" || op == "reschedule";
  const bool may_end_reservation =
      op == "release" || op == "bury" || op == "delete" || op == "disconnect";
  std::map<JobId, Seen> seen;
  for (const auto& [id, job] : model_.jobs()) {
    const JobView v = engine_->peek(id).value();
    if (const auto it = seen_.find(id); it != seen_.end()) {
      const Seen& before = it->second;
      if (before.state == JobState::kDelayed && v.state != JobState::kDelayed && !may_wake_early) {
        ASSERT_LE(before.due_unix_ms, now)
            << where() << "job " << id << " left the delayed state early (" << op << ")";
      }
      if (before.state == JobState::kReserved && v.state != JobState::kReserved &&
          !may_end_reservation) {
        ASSERT_LE(before.deadline_steady_ms, steady)
            << where() << "job " << id << " lapsed before its TTR (" << op << ")";
      }
    }
    if (v.state == JobState::kDelayed) {
      ASSERT_GT(v.due_unix_ms, now) << where() << "job " << id << " is overdue after advance()";
    }
    // The view shows a TTR's end on the wall clock, as far ahead as it is on the steady one.
    seen.emplace(id, Seen{v.state, v.due_unix_ms, v.deadline_unix_ms - now + steady});
  }
  seen_ = std::move(seen);
}

// ---------------------------------------------------------------------------------------------
// The runs

std::optional<std::uint64_t> env_number(const char* name) {
  const char* text = std::getenv(name);
  if (text == nullptr || *text == '\0') return std::nullopt;
  return std::strtoull(text, nullptr, 10);
}

// DELAYQ_SEED=<seed> runs that seed alone; DELAYQ_SIM_STEPS=<n> sets the steps of every run (a
// soak: DELAYQ_SIM_STEPS=1000000).
void run_config(SimConfig config) {
  std::vector<std::uint64_t> seeds;
  if (const auto seed = testing::seed_from_env()) {
    seeds.push_back(*seed);
  } else {
    for (int i = 0; i < config.runs; ++i) seeds.push_back(config.seed + static_cast<unsigned>(i));
  }
  if (const auto steps = env_number("DELAYQ_SIM_STEPS")) {
    config.steps = static_cast<int>(std::min<std::uint64_t>(*steps, 1'000'000'000));
  }
  for (const std::uint64_t seed : seeds) {
    std::cout << "[ sim      ] config " << config.name << " seed " << seed << " steps "
              << config.steps << " (replay: " << replay_hint(seed) << ")" << std::endl;
    ::testing::Test::RecordProperty("seed_" + config.name + "_" + std::to_string(seed),
                                    std::to_string(seed));
    Simulation sim(config, seed);
    sim.run();
    if (::testing::Test::HasFatalFailure()) return;
    std::string tally;
    for (const auto& [what, n] : sim.tally()) tally += " " + what + "=" + std::to_string(n);
    std::cout << "[ sim      ]  " << tally << std::endl;
  }
}

const std::vector<std::string> kFewTubes = {"default", "default", "mail"};
const std::vector<std::string> kManyTubes = {"default", "mail", "sms", "a.b-c", "x(1)", "q$"};

// Few clients and tubes, a small population: contention on the same jobs and keys.
TEST(EngineSim, SmallCrowd) {
  SimConfig config;
  config.name = "small";
  config.seed = 1001;
  config.runs = 3;
  config.steps = 20000;
  config.max_clients = 3;
  config.tubes = kFewTubes;
  config.keys = 4;
  config.groups = 2;
  config.target_jobs = 25;
  run_config(config);
}

// More clients than jobs to go round: many waiting clients, first come first served.
TEST(EngineSim, ManyWaiters) {
  SimConfig config;
  config.name = "waiters";
  config.seed = 2001;
  config.runs = 3;
  config.steps = 20000;
  config.max_clients = 8;
  config.tubes = kManyTubes;
  config.target_jobs = 12;
  config.precise_time_percent = 60;
  config.put_weight = 12;
  config.reserve_weight = 26;
  run_config(config);
}

// A larger population over many tubes, keys and groups, with restarts.
TEST(EngineSim, ManyTubes) {
  SimConfig config;
  config.name = "tubes";
  config.seed = 3001;
  config.runs = 2;
  config.steps = 25000;
  config.max_clients = 5;
  config.tubes = kManyTubes;
  config.keys = 12;
  config.groups = 4;
  config.target_jobs = 120;
  config.restart_per_mille = 4;
  run_config(config);
}

// The far tier with a window of 2 s: most delayed jobs go to disk and come back ahead of their
// time or when an operation needs them, with the engine's reads of the store some steps behind
// its writes, and restarts that read only the near jobs.
TEST(EngineSim, FarTier) {
  SimConfig config;
  config.name = "far";
  config.seed = 5001;
  config.runs = 2;
  config.steps = 20000;
  config.max_clients = 4;
  config.tubes = kManyTubes;
  config.keys = 8;
  config.groups = 3;
  config.target_jobs = 60;
  config.restart_per_mille = 4;
  config.window = Millis{2000};
  run_config(config);
}

// Options off their defaults: a short DEADLINE_SOON margin and a low urgent bound.
TEST(EngineSim, OtherOptions) {
  SimConfig config;
  config.name = "options";
  config.seed = 4001;
  config.runs = 2;
  config.steps = 20000;
  config.max_clients = 4;
  config.tubes = kManyTubes;
  config.target_jobs = 50;
  config.options.deadline_soon_margin = Millis{250};
  config.options.urgent_priority = 600;
  run_config(config);
}

// ---------------------------------------------------------------------------------------------
// Minimal cases of what the simulation found, each in whole seconds as a beanstalkd client
// would send them. They pin the rule the model above encodes.

class EngineSimCase : public ::testing::Test {
 protected:
  JobId put(Millis delay, Seconds ttr = Seconds{60}) {
    PutRequest request;
    request.due = Due::after(delay);
    request.ttr = ttr;
    request.body = "body";
    auto result = engine.put(client, request);
    EXPECT_TRUE(result.is_ok()) << result.status().to_string();
    return result.is_ok() ? result->id : 0;
  }
  void pass(Millis by) {
    clock.advance(by);
    engine.advance();
  }

  ManualClock clock;
  Engine engine{clock};
  ClientId client = engine.connect();
};

// stats-job's delay is the delay the job was put with (engine.h: "the delay it was last put,
// released or rescheduled with"; beanstalkd's kick leaves j->r.delay alone). Kicking a job early
// must not rewrite it, in memory or on disk.
TEST_F(EngineSimCase, KickKeepsTheDelayTheJobWasPutWith) {
  const JobId by_id = put(Millis{5000});
  const JobId by_tube = put(Millis{6000});
  pass(Millis{1000});
  ASSERT_TRUE(engine.kick_job(by_id).is_ok());
  EXPECT_EQ(engine.peek(by_id)->delay_ms, 5000);
  ASSERT_EQ(engine.kick("default", 1), 1U);
  EXPECT_EQ(engine.peek(by_tube)->delay_ms, 6000);
  const store::WriteSet written = engine.take_mutations();
  for (const auto& op : written.ops()) {
    if (op.kind != OpKind::kRecord) continue;
    const auto record = store::decode_record(op.id, op.value);
    ASSERT_TRUE(record.is_ok());
    EXPECT_EQ(record->delay_ms, op.id == by_id ? 5000 : 6000) << "record of job " << op.id;
  }
}

// reserve: "if none [ready] and a job reserved by this client has its TTR deadline within 1000 ms
// -> kDeadlineSoon". A job that becomes ready at the very millisecond the margin begins is ready:
// the waiting worker gets it (beanstalkd's prottick enqueues due jobs, and hands them out,
// before it looks at connection timeouts).
TEST_F(EngineSimCase, AJobDueWhenTheDeadlineMarginBeginsGoesToTheWaiterNotDeadlineSoon) {
  const JobId held = put(Millis{0}, Seconds{2});
  ASSERT_EQ(engine.reserve(client, Millis{0}).job.id, held);  // its TTR lapses at +2 s
  const JobId next = put(Millis{1000});                       // due when the margin begins
  ASSERT_EQ(engine.reserve(client, std::nullopt).kind, Kind::kWaiting);
  pass(Millis{1000});
  const auto wakeups = engine.take_wakeups();
  ASSERT_EQ(wakeups.size(), 1U);
  EXPECT_EQ(show(wakeups[0].result.kind), show(Kind::kReserved));
  EXPECT_EQ(wakeups[0].result.job.id, next);
}

// reserve-with-timeout 1 and a job put with delay 1 at the same moment: the job is due when the
// wait ends, and goes to the waiter (as in beanstalkd) instead of TIMED_OUT beside a ready job.
TEST_F(EngineSimCase, AJobDueWhenTheWaitEndsGoesToTheWaiterNotTimedOut) {
  const JobId id = put(Millis{1000});
  ASSERT_EQ(engine.reserve(client, Millis{1000}).kind, Kind::kWaiting);
  pass(Millis{1000});
  const auto wakeups = engine.take_wakeups();
  ASSERT_EQ(wakeups.size(), 1U);
  EXPECT_EQ(show(wakeups[0].result.kind), show(Kind::kReserved));
  EXPECT_EQ(wakeups[0].result.job.id, id);
}

// A server woken late (one advance() for a second of events): the job that became ready before
// the wait's timeout goes to the waiter.
TEST_F(EngineSimCase, ALateAdvanceStillHandsOutTheJobThatWasDueBeforeTheTimeout) {
  const JobId id = put(Millis{200});
  ASSERT_EQ(engine.reserve(client, Millis{500}).kind, Kind::kWaiting);
  pass(Millis{1000});
  const auto wakeups = engine.take_wakeups();
  ASSERT_EQ(wakeups.size(), 1U);
  EXPECT_EQ(show(wakeups[0].result.kind), show(Kind::kReserved));
  EXPECT_EQ(wakeups[0].result.job.id, id);
}

}  // namespace
}  // namespace engine
}  // namespace delayq
