// engine_model.h — a plain reference model of Engine's semantics, for engine_sim_test.cc.
// Everything is a std::map and a linear scan: a reserve looks at every job, a key lookup walks
// the tube. It is slow on purpose, so that it is obviously right; it shares none of the engine's
// indexes (no heaps, no wheel, no slots). Each operation returns what the engine must answer and
// records the wakeups and the store mutations the engine must emit, in order.
// Semantics: engine.h's comments and beanstalkd 1.12 (docs/protocol.md); where they leave a
// detail open (which due time a job shows once ready) the model follows the engine and says so.
// Contract of the driver (as in beanstalkd): a client that waits in reserve issues no command of
// its own until its wait ends; it may only disconnect.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/job.h"
#include "base/names.h"
#include "base/status.h"
#include "engine/engine.h"
#include "store/record.h"

namespace delayq::engine::model {

inline constexpr std::string_view kDefaultTube = "default";

class Model {
 public:
  struct Job {
    JobId id = 0;
    std::string tube;
    JobState state = JobState::kReady;
    std::uint32_t priority = 0;
    std::int64_t due_unix_ms = 0;         // as JobView::due_unix_ms
    std::int64_t deadline_steady_ms = 0;  // reserved only: its TTR's end, on the steady clock
    std::int64_t created_unix_ms = 0;
    std::int64_t delay_ms = 0;  // the delay it was last put, released or rescheduled with
    std::uint32_t ttr_seconds = 1;
    JobCounters counters;
    std::string key;
    std::string group;
    std::string body;
    ClientId reserver = 0;         // reserved only
    std::uint64_t bury_order = 0;  // buried only: kick and peek-buried take the smallest
  };
  struct Client {
    std::string used{kDefaultTube};
    std::vector<std::string> watched{std::string(kDefaultTube)};
    std::uint64_t wait_order = 0;  // 0: not waiting; else first come, first served
    std::optional<std::int64_t> wait_deadline_steady_ms;
  };
  struct Tube {
    std::uint64_t total_jobs = 0, deletes = 0, pauses = 0;
    std::int64_t pause_seconds = 0;
    std::int64_t pause_until_steady_ms = 0;
  };
  // The answer to a reserve, or a wakeup: the job's id when kind is kReserved.
  struct Reserve {
    ReserveResult::Kind kind = ReserveResult::Kind::kWaiting;
    JobId id = 0;
    friend bool operator==(const Reserve&, const Reserve&) = default;
  };
  // One store mutation: record holds the expected record of kRecord, body the bytes of kBody.
  struct Mutation {
    store::WriteSet::Kind kind = store::WriteSet::Kind::kRecord;
    JobId id = 0;
    store::JobRecord record;
    std::string body;
  };
  struct Options {
    std::int64_t deadline_soon_margin_ms = 1000;
    std::uint32_t urgent_priority = 1024;
    std::size_t max_name_bytes = 200;
  };

  Model(std::int64_t now_unix_ms, Options options) : now_(now_unix_ms), options_(options) {
    tubes_[std::string(kDefaultTube)];
  }

  // --- time, on two clocks as the engine's: the wall clock, whose present never runs backwards
  // (Engine::now()), for due times; the steady one for TTRs, waits and pauses.
  void set_clock(std::int64_t clock_unix_ms, std::int64_t steady_ms) {
    raw_ = clock_unix_ms;
    now_ = std::max(now_, clock_unix_ms);
    steady_ = std::max(steady_, steady_ms);
  }
  [[nodiscard]] std::int64_t now() const { return now_; }

  // --- clients
  ClientId connect() {
    const ClientId id = next_client_++;
    clients_[id];
    return id;
  }

  void disconnect(ClientId id) {
    Client& c = clients_.at(id);
    c.wait_order = 0;
    for (auto& [job_id, job] : jobs_) {
      if (job.state == JobState::kReserved && job.reserver == id) make_ready_unchanged(job);
    }
    clients_.erase(id);
    collect_tubes();
    dispatch();
  }

  Status use(ClientId id, std::string_view name) {
    if (!tubes_.contains(std::string(name))) {
      if (Status s = check_tube_name(name); !s.is_ok()) return s;
    }
    tubes_[std::string(name)];
    clients_.at(id).used = std::string(name);
    collect_tubes();
    return Status::ok();
  }

  Result<std::size_t> watch(ClientId id, std::string_view name) {
    if (!tubes_.contains(std::string(name))) {
      if (Status s = check_tube_name(name); !s.is_ok()) return s;
    }
    tubes_[std::string(name)];
    auto& watched = clients_.at(id).watched;
    if (std::find(watched.begin(), watched.end(), name) == watched.end()) {
      watched.emplace_back(name);
    }
    return watched.size();
  }

  Result<std::size_t> ignore(ClientId id, std::string_view name) {
    auto& watched = clients_.at(id).watched;
    const auto it = std::find(watched.begin(), watched.end(), name);
    if (it == watched.end()) return watched.size();
    if (watched.size() == 1) return Status(Code::kNotIgnored, "last");
    remove_as_beanstalkd(watched, it);
    collect_tubes();
    return watched.size();
  }

  // --- the lifecycle
  Result<PutResult> put(ClientId id, const PutRequest& request) {
    if (request.key.size() > options_.max_name_bytes ||
        request.group.size() > options_.max_name_bytes) {
      return Status(Code::kInvalidArgument, "too long");
    }
    Client& c = clients_.at(id);
    const std::string tube = request.tube.empty() ? c.used : std::string(request.tube);
    if (!tubes_.contains(tube)) {
      if (Status s = check_tube_name(tube); !s.is_ok()) return s;
    }
    tubes_[tube];
    PutResult result;
    if (!request.key.empty()) {
      if (const auto holder = find_key(tube, request.key)) {
        if (!request.replace) return PutResult{*holder, false, 0};
        if (jobs_.at(*holder).state == JobState::kReserved) {
          return Status(Code::kConflict, "reserved");
        }
        result.replaced = *holder;
        tubes_[tube].deletes++;
        ++deletes_;
        destroy(*holder);
      }
    }
    Job job;
    job.id = next_id_++;
    job.tube = tube;
    job.priority = request.priority;
    job.created_unix_ms = now_;
    job.ttr_seconds = static_cast<std::uint32_t>(std::max<std::int64_t>(1, request.ttr.count()));
    job.key = std::string(request.key);
    job.group = std::string(request.group);
    job.body = std::string(request.body);
    const std::int64_t due = request.due.absolute ? request.due.ms : now_ + request.due.ms;
    if (due > now_) {
      job.state = JobState::kDelayed;
      job.due_unix_ms = due;
      job.delay_ms = due - now_;
    } else {
      job.state = JobState::kReady;
      job.due_unix_ms = now_;
      job.delay_ms = 0;
    }
    ++total_jobs_;
    tubes_[tube].total_jobs++;
    const JobId new_id = job.id;
    jobs_[new_id] = std::move(job);
    persist(jobs_.at(new_id));
    mutations_.push_back({store::WriteSet::Kind::kBody, new_id, {}, std::string(request.body)});
    result.id = new_id;
    dispatch();
    return result;
  }

  Reserve reserve(ClientId id, std::optional<Millis> timeout) {
    Client& c = clients_.at(id);
    if (const auto best = best_ready(c)) {
      hand_out(id, jobs_.at(*best));
      return {ReserveResult::Kind::kReserved, *best};
    }
    if (deadline_soon(id)) return {ReserveResult::Kind::kDeadlineSoon, 0};
    if (timeout && timeout->count() <= 0) return {ReserveResult::Kind::kTimedOut, 0};
    c.wait_order = next_wait_order_++;
    c.wait_deadline_steady_ms.reset();
    if (timeout) c.wait_deadline_steady_ms = steady_ + timeout->count();
    return {ReserveResult::Kind::kWaiting, 0};
  }

  Status reserve_job(ClientId id, JobId job_id) {
    Job* job = find_mut(job_id);
    if (job == nullptr || job->state == JobState::kReserved) return {Code::kNotFound, "none"};
    const bool was_ready = job->state == JobState::kReady;
    // A delayed job taken early became ready now, as a kicked one.
    if (job->state == JobState::kDelayed) job->due_unix_ms = std::min(job->due_unix_ms, now_);
    hand_out(id, *job);
    // A reserved job comes back ready after a restart, so only a job taken from the delayed
    // or buried list needs its record rewritten.
    if (!was_ready) persist(*job);
    return Status::ok();
  }

  Status erase(ClientId id, JobId job_id) {
    const Job* job = find_mut(job_id);
    if (job == nullptr || (job->state == JobState::kReserved && job->reserver != id)) {
      return {Code::kNotFound, "none"};
    }
    tubes_.at(job->tube).deletes++;
    ++deletes_;
    destroy(job_id);
    collect_tubes();
    return Status::ok();
  }

  Status release(ClientId id, JobId job_id, std::uint32_t priority, Millis delay) {
    Job* job = reserved_by(id, job_id);
    if (job == nullptr) return {Code::kNotFound, "not reserved by the client"};
    job->priority = priority;
    job->counters.releases++;
    job->reserver = 0;
    job->deadline_steady_ms = 0;
    job->delay_ms = std::max<std::int64_t>(0, delay.count());
    if (delay.count() > 0) {
      job->state = JobState::kDelayed;
      job->due_unix_ms = now_ + delay.count();
    } else {
      job->state = JobState::kReady;
      job->due_unix_ms = now_;
    }
    persist(*job);
    dispatch();
    return Status::ok();
  }

  Status bury(ClientId id, JobId job_id, std::uint32_t priority) {
    Job* job = reserved_by(id, job_id);
    if (job == nullptr) return {Code::kNotFound, "not reserved by the client"};
    job->priority = priority;
    job->counters.buries++;
    ++buries_;
    job->reserver = 0;
    job->deadline_steady_ms = 0;
    job->state = JobState::kBuried;
    job->bury_order = next_bury_order_++;
    persist(*job);
    return Status::ok();
  }

  Status touch(ClientId id, JobId job_id) {
    Job* job = reserved_by(id, job_id);
    if (job == nullptr) return {Code::kNotFound, "not reserved by the client"};
    job->deadline_steady_ms = steady_ + std::int64_t{job->ttr_seconds} * 1000;
    return Status::ok();
  }

  // Buried jobs first, oldest bury first; if the tube has none, delayed jobs, earliest due
  // first, ties by id.
  std::size_t kick(std::string_view tube, std::size_t bound) {
    if (!tubes_.contains(std::string(tube))) return 0;
    std::vector<const Job*> order;
    for (const auto& [id, job] : jobs_) {
      if (job.tube == tube && job.state == JobState::kBuried) order.push_back(&job);
    }
    if (!order.empty()) {
      std::sort(order.begin(), order.end(),
                [](const Job* a, const Job* b) { return a->bury_order < b->bury_order; });
    } else {
      for (const auto& [id, job] : jobs_) {
        if (job.tube == tube && job.state == JobState::kDelayed) order.push_back(&job);
      }
      std::sort(order.begin(), order.end(), [](const Job* a, const Job* b) {
        return a->due_unix_ms != b->due_unix_ms ? a->due_unix_ms < b->due_unix_ms : a->id < b->id;
      });
    }
    if (order.size() > bound) order.resize(bound);
    for (const Job* kicked : order) kick_one(jobs_.at(kicked->id));
    dispatch();
    return order.size();
  }

  Status kick_job(JobId job_id) {
    Job* job = find_mut(job_id);
    if (job == nullptr || (job->state != JobState::kBuried && job->state != JobState::kDelayed)) {
      return {Code::kNotFound, "no buried or delayed job"};
    }
    kick_one(*job);
    dispatch();
    return Status::ok();
  }

  Status pause_tube(std::string_view name, Seconds pause) {
    const auto it = tubes_.find(std::string(name));
    if (it == tubes_.end()) return {Code::kNotFound, "no tube"};
    it->second.pauses++;
    it->second.pause_seconds = std::max<std::int64_t>(0, pause.count());
    it->second.pause_until_steady_ms = pause.count() > 0 ? steady_ + pause.count() * 1000 : 0;
    dispatch();
    return Status::ok();
  }

  Status reschedule(JobId job_id, std::int64_t due_unix_ms) {
    Job* job = find_mut(job_id);
    if (job == nullptr) return {Code::kNotFound, "none"};
    if (job->state != JobState::kDelayed && job->state != JobState::kReady) {
      return {Code::kConflict, "reserved or buried"};
    }
    job->delay_ms = std::max<std::int64_t>(0, due_unix_ms - now_);
    if (due_unix_ms > now_) {
      job->state = JobState::kDelayed;
      job->due_unix_ms = due_unix_ms;
    } else {
      job->state = JobState::kReady;
      job->due_unix_ms = now_;
    }
    persist(*job);
    dispatch();
    return Status::ok();
  }

  std::size_t cancel_group(std::string_view tube, std::string_view group) {
    std::vector<JobId> doomed;
    for (const JobId id : list_group(tube, group)) {
      if (jobs_.at(id).state != JobState::kReserved) doomed.push_back(id);
    }
    if (!doomed.empty()) tubes_.at(std::string(tube)).deletes += doomed.size();
    deletes_ += doomed.size();
    for (const JobId id : doomed) destroy(id);
    collect_tubes();
    return doomed.size();
  }

  // Time passes: due jobs become ready, TTRs lapse, pauses end; waiting clients are served;
  // then the waits of those that got nothing end (DEADLINE_SOON before TIMED_OUT). A client is
  // told DEADLINE_SOON only when no job is ready for it, as reserve() says, and a job that
  // became ready by the end of a wait goes to the waiter (beanstalkd's prottick enqueues due
  // jobs, handing them out, before it looks at connection timeouts).
  void advance() {
    for (auto& [id, job] : jobs_) {
      if (job.state == JobState::kDelayed && job.due_unix_ms <= now_) {
        job.state = JobState::kReady;
      } else if (job.state == JobState::kReserved && job.deadline_steady_ms <= steady_) {
        job.counters.timeouts++;
        ++job_timeouts_;
        make_ready_unchanged(job);
      }
    }
    for (auto& [name, tube] : tubes_) {
      if (tube.pause_until_steady_ms <= steady_) tube.pause_until_steady_ms = 0;
    }
    dispatch();
    end_waits();
  }

  // The earliest time on the wall clock at which advance() has something to do: a steady time
  // comes as far from the wall clock's reading as it is from the steady present.
  [[nodiscard]] std::optional<std::int64_t> next_event() const {
    std::optional<std::int64_t> when;
    const auto consider = [&when](std::int64_t t) {
      if (!when || t < *when) when = t;
    };
    const auto consider_steady = [&](std::int64_t t) { consider(raw_ + (t - steady_)); };
    for (const auto& [id, job] : jobs_) {
      if (job.state == JobState::kDelayed) consider(job.due_unix_ms);
      if (job.state == JobState::kReserved) consider_steady(job.deadline_steady_ms);
    }
    for (const auto& [name, tube] : tubes_) {
      if (tube.pause_until_steady_ms > steady_) consider_steady(tube.pause_until_steady_ms);
    }
    for (const auto& [id, c] : clients_) {
      if (c.wait_order == 0) continue;
      if (c.wait_deadline_steady_ms) consider_steady(*c.wait_deadline_steady_ms);
      for (const auto& [job_id, job] : jobs_) {
        if (job.state == JobState::kReserved && job.reserver == id) {
          consider_steady(job.deadline_steady_ms - options_.deadline_soon_margin_ms);
        }
      }
    }
    return when;
  }

  // --- what happened
  std::map<ClientId, Reserve> take_wakeups() { return std::exchange(wakeups_, {}); }
  std::vector<Mutation> take_mutations() { return std::exchange(mutations_, {}); }

  // --- recovery: the engine restarted at `clock_unix_ms` from `records`; every client is gone.
  // Reserved jobs come back ready, buried ones buried in id order, delayed ones delayed (ready
  // at the next advance() if overdue). Counters and statistics start again from the records.
  // The new present is the clock's, even if it is behind the old engine's.
  void restart(std::int64_t clock_unix_ms, const std::map<JobId, store::JobRecord>& records,
               const std::map<JobId, std::string>& bodies, JobId stored_next_id) {
    now_ = raw_ = clock_unix_ms;
    jobs_.clear();
    clients_.clear();
    tubes_.clear();
    tubes_[std::string(kDefaultTube)];
    total_jobs_ = job_timeouts_ = deletes_ = buries_ = 0;
    next_client_ = 1;
    wakeups_.clear();
    mutations_.clear();
    next_id_ = stored_next_id;
    for (const auto& [id, r] : records) {
      Job job;
      job.id = id;
      job.tube = r.tube;
      job.priority = r.priority;
      job.due_unix_ms = r.due_unix_ms;
      job.created_unix_ms = r.created_unix_ms;
      job.delay_ms = r.delay_ms;
      job.ttr_seconds = std::max<std::uint32_t>(1, r.ttr_seconds);
      job.counters = r.counters;
      job.key = r.key;
      job.group = r.group;
      job.body = bodies.at(id);
      switch (r.state) {
        case JobState::kDelayed:
          job.state = JobState::kDelayed;
          break;
        case JobState::kReady:
        case JobState::kReserved:
          job.state = JobState::kReady;
          break;
        case JobState::kBuried:
          job.state = JobState::kBuried;
          job.bury_order = next_bury_order_++;
          break;
      }
      (void)tubes_[r.tube];  // total-jobs counts puts since start: recovered jobs are not puts
      next_id_ = std::max(next_id_, id + 1);
      jobs_[id] = std::move(job);
    }
  }

  // --- questions
  [[nodiscard]] const Job* find(JobId id) const {
    const auto it = jobs_.find(id);
    return it == jobs_.end() ? nullptr : &it->second;
  }
  [[nodiscard]] const std::map<JobId, Job>& jobs() const { return jobs_; }
  [[nodiscard]] const std::map<ClientId, Client>& clients() const { return clients_; }
  [[nodiscard]] const std::map<std::string, Tube>& tubes() const { return tubes_; }
  [[nodiscard]] JobId next_id() const { return next_id_; }
  [[nodiscard]] bool waiting(ClientId id) const { return clients_.at(id).wait_order != 0; }

  [[nodiscard]] std::optional<JobId> peek_ready(std::string_view tube) const {
    return best_of(tube, JobState::kReady, [](const Job& a, const Job& b) {
      return a.priority != b.priority ? a.priority < b.priority : a.id < b.id;
    });
  }
  [[nodiscard]] std::optional<JobId> peek_delayed(std::string_view tube) const {
    return best_of(tube, JobState::kDelayed, [](const Job& a, const Job& b) {
      return a.due_unix_ms != b.due_unix_ms ? a.due_unix_ms < b.due_unix_ms : a.id < b.id;
    });
  }
  [[nodiscard]] std::optional<JobId> peek_buried(std::string_view tube) const {
    return best_of(tube, JobState::kBuried,
                   [](const Job& a, const Job& b) { return a.bury_order < b.bury_order; });
  }
  [[nodiscard]] std::optional<JobId> find_key(std::string_view tube, std::string_view key) const {
    if (key.empty()) return std::nullopt;
    for (const auto& [id, job] : jobs_) {
      if (job.tube == tube && job.key == key) return id;
    }
    return std::nullopt;
  }
  [[nodiscard]] std::vector<JobId> list_group(std::string_view tube, std::string_view group) const {
    std::vector<JobId> ids;
    if (group.empty()) return ids;
    for (const auto& [id, job] : jobs_) {
      if (job.tube == tube && job.group == group) ids.push_back(id);
    }
    return ids;
  }
  [[nodiscard]] bool paused(const Tube& tube) const { return tube.pause_until_steady_ms > steady_; }

  [[nodiscard]] store::JobRecord record(const Job& job) const {
    store::JobRecord r;
    r.id = job.id;
    r.tube = job.tube;
    r.priority = job.priority;
    r.state = job.state;
    r.due_unix_ms = job.due_unix_ms;
    r.created_unix_ms = job.created_unix_ms;
    r.delay_ms = job.delay_ms;
    r.ttr_seconds = job.ttr_seconds;
    r.counters = job.counters;
    r.key = job.key;
    r.group = job.group;
    return r;
  }

  [[nodiscard]] JobView view(const Job& job) const {
    JobView v;
    v.id = job.id;
    v.tube = job.tube;
    v.state = job.state;
    v.priority = job.priority;
    v.due_unix_ms = job.due_unix_ms;
    v.deadline_unix_ms =
        job.state == JobState::kReserved ? now_ + (job.deadline_steady_ms - steady_) : 0;
    v.created_unix_ms = job.created_unix_ms;
    v.delay_ms = job.delay_ms;
    v.ttr = Seconds{job.ttr_seconds};
    v.counters = job.counters;
    v.key = job.key;
    v.group = job.group;
    return v;
  }

  [[nodiscard]] TubeStats tube_stats(const std::string& name) const {
    const Tube& t = tubes_.at(name);
    TubeStats s;
    s.name = name;
    std::optional<std::int64_t> oldest_ready;  // the second it became ready
    for (const auto& [id, job] : jobs_) {
      if (job.tube != name) continue;
      add_count(job, s.urgent, s.ready, s.reserved, s.delayed, s.buried);
      if (job.state == JobState::kReady) {
        const std::int64_t second = job.due_unix_ms / 1000 * 1000;
        oldest_ready = std::min(oldest_ready.value_or(second), second);
      }
    }
    if (oldest_ready) s.oldest_ready_age = Millis{std::max<std::int64_t>(0, now_ - *oldest_ready)};
    s.total_jobs = t.total_jobs;
    for (const auto& [id, c] : clients_) {
      const bool watches = std::find(c.watched.begin(), c.watched.end(), name) != c.watched.end();
      s.using_clients += c.used == name ? 1U : 0U;
      s.watching_clients += watches ? 1U : 0U;
      s.waiting_clients += watches && c.wait_order != 0 ? 1U : 0U;
    }
    s.deletes = t.deletes;
    s.pauses = t.pauses;
    if (paused(t)) {
      s.pause = Seconds{t.pause_seconds};
      s.pause_left = Millis{t.pause_until_steady_ms - steady_};
    }
    return s;
  }

  // Delayed jobs of a tube (all tubes: empty) by due time, as Engine::due_counts counts them.
  [[nodiscard]] std::vector<std::uint64_t> due_counts(
      const std::string& tube, const std::vector<std::int64_t>& edges) const {
    constexpr std::int64_t kMinute = 60'000;
    std::vector<std::uint64_t> out(edges.size() + 1, 0);
    for (const auto& [id, job] : jobs_) {
      if (job.state != JobState::kDelayed || (!tube.empty() && job.tube != tube)) continue;
      std::size_t i = 0;
      while (i < edges.size() && job.due_unix_ms / kMinute >= edges[i] / kMinute) ++i;
      ++out[i];
    }
    return out;
  }

  [[nodiscard]] ServerStats server_stats() const {
    ServerStats s;
    for (const auto& [id, job] : jobs_) {
      add_count(job, s.urgent, s.ready, s.reserved, s.delayed, s.buried);
    }
    s.total_jobs = total_jobs_;
    s.job_timeouts = job_timeouts_;
    s.deletes = deletes_;
    s.buries = buries_;
    s.tubes = tubes_.size();
    for (const auto& [id, c] : clients_) {
      s.waiting += c.wait_order != 0 ? 1U : 0U;
    }
    s.next_id = next_id_;
    return s;
  }

 private:
  Job* find_mut(JobId id) {
    const auto it = jobs_.find(id);
    return it == jobs_.end() ? nullptr : &it->second;
  }

  Job* reserved_by(ClientId client, JobId id) {
    Job* job = find_mut(id);
    if (job == nullptr || job->state != JobState::kReserved || job->reserver != client) {
      return nullptr;
    }
    return job;
  }

  Status check_tube_name(std::string_view name) const {
    const auto valid = [](char ch) {
      return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
             std::string_view("-+/;.$_()").find(ch) != std::string_view::npos;
    };
    if (name.empty() || name.size() > options_.max_name_bytes || name.front() == '-' ||
        !std::all_of(name.begin(), name.end(), valid)) {
      return {Code::kInvalidArgument, "bad tube name"};
    }
    return Status::ok();
  }

  template <typename Less>
  std::optional<JobId> best_of(std::string_view tube, JobState state, Less less) const {
    const Job* best = nullptr;
    for (const auto& [id, job] : jobs_) {
      if (job.tube != tube || job.state != state) continue;
      if (best == nullptr || less(job, *best)) best = &job;
    }
    if (best == nullptr) return std::nullopt;
    return best->id;
  }

  // beanstalkd's order: among the client's watched tubes that are not paused, the lowest
  // priority, then the lowest id.
  std::optional<JobId> best_ready(const Client& c) const {
    const Job* best = nullptr;
    for (const auto& [id, job] : jobs_) {
      if (job.state != JobState::kReady) continue;
      if (std::find(c.watched.begin(), c.watched.end(), job.tube) == c.watched.end()) continue;
      if (paused(tubes_.at(job.tube))) continue;
      if (best == nullptr || job.priority < best->priority ||
          (job.priority == best->priority && job.id < best->id)) {
        best = &job;
      }
    }
    if (best == nullptr) return std::nullopt;
    return best->id;
  }

  bool deadline_soon(ClientId id) const {
    for (const auto& [job_id, job] : jobs_) {
      if (job.state == JobState::kReserved && job.reserver == id &&
          job.deadline_steady_ms <= steady_ + options_.deadline_soon_margin_ms) {
        return true;
      }
    }
    return false;
  }

  void hand_out(ClientId id, Job& job) {
    job.state = JobState::kReserved;
    job.reserver = id;
    job.deadline_steady_ms = steady_ + std::int64_t{job.ttr_seconds} * 1000;
    job.counters.reserves++;
  }

  // A TTR lapse or a vanished worker: ready again, due time untouched (the engine keeps it).
  static void make_ready_unchanged(Job& job) {
    job.state = JobState::kReady;
    job.reserver = 0;
    job.deadline_steady_ms = 0;
  }

  void kick_one(Job& job) {
    job.counters.kicks++;
    job.due_unix_ms = std::min(job.due_unix_ms, now_);
    job.state = JobState::kReady;
    persist(job);
  }

  // Waits that end without a job: a reserved job about to lapse, or the timeout.
  void end_waits() {
    for (auto& [id, c] : clients_) {
      if (c.wait_order == 0) continue;
      if (deadline_soon(id)) {
        c.wait_order = 0;
        wakeups_[id] = {ReserveResult::Kind::kDeadlineSoon, 0};
      } else if (c.wait_deadline_steady_ms && *c.wait_deadline_steady_ms <= steady_) {
        c.wait_order = 0;
        wakeups_[id] = {ReserveResult::Kind::kTimedOut, 0};
      }
    }
  }

  // Waiting clients, first come first served, each take the best job they may have.
  void dispatch() {
    std::vector<std::pair<std::uint64_t, ClientId>> waiting;
    for (const auto& [id, c] : clients_) {
      if (c.wait_order != 0) waiting.emplace_back(c.wait_order, id);
    }
    std::sort(waiting.begin(), waiting.end());
    for (const auto& [order, id] : waiting) {
      Client& c = clients_.at(id);
      const auto best = best_ready(c);
      if (!best) continue;
      c.wait_order = 0;
      hand_out(id, jobs_.at(*best));
      wakeups_[id] = {ReserveResult::Kind::kReserved, *best};
    }
  }

  void destroy(JobId id) {
    jobs_.erase(id);
    mutations_.push_back({store::WriteSet::Kind::kErase, id, {}, {}});
  }

  void persist(const Job& job) {
    mutations_.push_back({store::WriteSet::Kind::kRecord, job.id, record(job), {}});
  }

  // A tube lives while it is "default", holds a job, or a client uses or watches it; a tube that
  // comes back starts its statistics afresh.
  void collect_tubes() {
    for (auto it = tubes_.begin(); it != tubes_.end();) {
      const std::string& name = it->first;
      bool held = name == kDefaultTube;
      for (const auto& [id, job] : jobs_) held = held || job.tube == name;
      for (const auto& [id, c] : clients_) {
        held = held || c.used == name ||
               std::find(c.watched.begin(), c.watched.end(), name) != c.watched.end();
      }
      it = held ? std::next(it) : tubes_.erase(it);
    }
  }

  void add_count(const Job& job, std::uint64_t& urgent, std::uint64_t& ready,
                 std::uint64_t& reserved, std::uint64_t& delayed, std::uint64_t& buried) const {
    switch (job.state) {
      case JobState::kReady:
        ++ready;
        if (job.priority < options_.urgent_priority) ++urgent;
        break;
      case JobState::kReserved:
        ++reserved;
        break;
      case JobState::kDelayed:
        ++delayed;
        break;
      case JobState::kBuried:
        ++buried;
        break;
    }
  }

  std::int64_t now_;
  std::int64_t raw_ = now_;  // the wall clock as it reads, which may be behind now_
  std::int64_t steady_ = 0;
  Options options_;
  std::map<JobId, Job> jobs_;
  std::map<ClientId, Client> clients_;
  std::map<std::string, Tube> tubes_;
  JobId next_id_ = 1;
  ClientId next_client_ = 1;
  std::uint64_t next_wait_order_ = 1;
  std::uint64_t next_bury_order_ = 1;
  std::uint64_t total_jobs_ = 0, job_timeouts_ = 0, deletes_ = 0, buries_ = 0;
  std::map<ClientId, Reserve> wakeups_;
  std::vector<Mutation> mutations_;
};

}  // namespace delayq::engine::model
