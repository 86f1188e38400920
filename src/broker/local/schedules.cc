#include "broker/local/schedules.h"

#include <spdlog/spdlog.h>

#include "broker/put_rules.h"
#include "schedule/codec.h"

namespace delayq::broker::local {
namespace {

using broker::Callback;
using broker::ScheduleView;

constexpr std::size_t kStepsPerTurn = 1000;
constexpr std::int64_t kRetryMs = 1000;  // a step refused for want of disk or a read is retried

Status no_schedule(const std::string& name) {
  return {Code::kNotFound, "no schedule '" + name + "'"};
}

}  // namespace

LocalSchedules::LocalSchedules(Node& node)
    : node_(node),
      families_(node.metrics()),
      client_(node.engine().connect(/*watch_default=*/false)) {}

LocalSchedules::~LocalSchedules() {
  node_.set_ticker(nullptr);
  engine().disconnect(client_);
}

Result<std::unique_ptr<LocalSchedules>> LocalSchedules::open(Node& node) {
  std::unique_ptr<LocalSchedules> schedules(new LocalSchedules(node));
  Status read = node.scan_schedules([&](std::string name, std::string value) {
    auto entry = schedules->entry_of(name, value);
    if (entry.code() == Code::kInvalidArgument) {
      // Stored when it compiled: the tz database has changed under it. It stays on disk,
      // untouched, for a server whose tz database knows its zone again.
      spdlog::error("schedule '{}' cannot run and is left alone: {}", name,
                    entry.status().message());
      return Status::ok();
    }
    if (!entry.is_ok()) return entry.status();
    // What came while the server was down is due at once, and settled in the first turn.
    schedules->book_.set(name, schedule::wake(entry.value().schedule, entry.value().state));
    return Status::ok();
  });
  if (!read.is_ok()) return read;
  schedules->families_.schedules.set({}, static_cast<std::int64_t>(schedules->book_.size()));
  node.set_ticker(schedules.get());
  node.touched();
  return schedules;
}

// --- the turn

void LocalSchedules::tick() {
  // A bounded number a turn: a restart that finds a million due settles them over many turns,
  // each its own batch, with the server's other work between them.
  for (const std::string& name : book_.due(now(), kStepsPerTurn)) step(name);
}

std::optional<std::int64_t> LocalSchedules::next_wake_us() const {
  const auto wake = book_.next_wake();
  if (!wake) return std::nullopt;
  return *wake * 1000;
}

void LocalSchedules::step(const std::string& name) {
  auto entry = find(name);
  if (entry.is_ok()) return step(entry.value());
  if (entry.code() == Code::kNotFound) {
    book_.erase(name);
    return;
  }
  spdlog::error("schedule '{}' cannot run: {}", name, entry.status().to_string());
  // A read that failed is tried again; a record that cannot run is left alone.
  book_.set(name, entry.code() == Code::kIOError ? std::optional(now() + kRetryMs) : std::nullopt);
}

void LocalSchedules::step(Entry& entry) {
  const std::int64_t at = now();
  const std::string& name = entry.schedule.definition.name;
  if (!node_.space().is_ok()) {
    // Runs are new jobs: none while the disk is short. Instants passed meanwhile are missed,
    // and the misfire rule settles them once there is room.
    book_.set(name, at + kRetryMs);
    return;
  }
  const schedule::Compiled& s = entry.schedule;
  const schedule::Environment environment{
      [this, &s](std::string_view key) {
        return engine().find_key(s.definition.tube, key).is_ok();
      },
      [this](std::int64_t bound) {
        return std::uniform_int_distribution<std::int64_t>(0, bound)(random_);
      },
      // A late run put ahead: at a restart, recovery has made its job ready already, but no
      // worker has had it.
      [this, &s](std::string_view key) {
        return delete_untaken(s.definition.tube, key, /*or_ready=*/true);
      }};
  const schedule::State before = entry.state;
  const schedule::Step out = schedule::step(s, entry.state, at, environment);
  count(before, entry.state);
  for (const schedule::Run& run : out.put) {
    if (auto put = put_run(s, run); !put.is_ok()) {
      // Job ids or slots used up: the instant is missed, and counted so.
      spdlog::error("schedule '{}': the run of {} could not be put: {}", name, run.instant_unix_ms,
                    put.status().to_string());
      --entry.state.runs;
      ++entry.state.misfires;
    }
  }
  if (entry.state != before) persist(entry);
  book_.set(name, out.wake_unix_ms);
  node_.touched();
}

Result<broker::PutResult> LocalSchedules::put_run(const schedule::Compiled& schedule,
                                                  const schedule::Run& run) {
  const schedule::Definition& d = schedule.definition;
  const std::string key = schedule::run_key(d.name, run.instant_unix_ms);
  engine::PutRequest put;
  put.tube = d.tube;
  put.priority = d.priority;
  put.due = Due::at(run.due_unix_ms);
  put.ttr = d.ttr;
  put.body = d.body;
  put.key = key;
  put.group = d.group;
  Delivery delivery{.url = d.url, .content_type = d.content_type};
  if (!delivery.empty()) put.attachment = &delivery;
  auto result = engine().put(client_, put);
  if (!result.is_ok()) return result.status();
  auto view = engine().peek(result.value().id);
  if (!view.is_ok()) return view.status();
  return broker::PutResult{view.value(), result.value().inserted, result.value().replaced};
}

void LocalSchedules::withdraw(Entry& entry) {
  const auto ahead = schedule::pending_ahead(entry.state, now());
  if (!ahead) return;
  const std::string key = schedule::run_key(entry.schedule.definition.name, *ahead);
  schedule::withdraw_ahead(entry.state, now(),
                           delete_untaken(entry.schedule.definition.tube, key, false));
}

bool LocalSchedules::delete_untaken(const std::string& tube, std::string_view key, bool or_ready) {
  auto id = engine().find_key(tube, key);
  if (!id.is_ok()) return true;  // gone already (a user deleted it): it will not run
  auto job = engine().peek(id.value());
  if (!job.is_ok()) return false;
  const JobView& view = job.value();
  const bool untaken = view.state == JobState::kDelayed ||
                       (or_ready && view.state == JobState::kReady && view.counters.reserves == 0);
  return untaken && engine().erase(client_, id.value()).is_ok();
}

Status LocalSchedules::check_put(const schedule::Definition& d, bool at_set) {
  // A run is a put: the put's own checks, from their one source (names were checked by
  // schedule::compile, and a due time now is in range). At set, only the url's.
  broker::PutRequest request;
  request.tube = d.tube;
  request.url = d.url;
  broker::PutContext context;
  context.max_name_bytes = engine().options().max_name_bytes;
  context.draining = !at_set && node_.draining();
  context.space = at_set ? Status::ok() : node_.space();
  context.tube_has_webhook = node_.webhooks().contains(d.tube);
  return broker::check_put(request, d.tube, context);
}

void LocalSchedules::count(const schedule::State& before, const schedule::State& after) {
  families_.schedules.set({}, static_cast<std::int64_t>(book_.size()));
  // A withdrawn run is taken back from `runs`: counted here only as runs grow.
  if (after.runs > before.runs) {
    families_.runs.add({}, static_cast<std::int64_t>(after.runs - before.runs));
  }
  families_.misfires.add({}, static_cast<std::int64_t>(after.misfires - before.misfires));
  families_.overlaps.add({}, static_cast<std::int64_t>(after.overlaps - before.overlaps));
}

void LocalSchedules::persist(const Entry& entry) {
  node_.staged().put_schedule(entry.schedule.definition.name,
                              schedule::encode({entry.schedule.definition, entry.state}));
}

ScheduleView LocalSchedules::view(const Entry& entry) const {
  const std::int64_t at = now();
  return {entry.schedule.definition, entry.state,
          schedule::next_run(entry.schedule, entry.state, at), at};
}

Result<LocalSchedules::Entry> LocalSchedules::find(const std::string& name) {
  if (!book_.contains(name)) return no_schedule(name);
  auto bytes = node_.schedule(name);
  if (!bytes.is_ok()) return bytes.status();
  if (!bytes.value()) return no_schedule(name);
  return entry_of(name, *bytes.value());
}

Result<LocalSchedules::Entry> LocalSchedules::entry_of(const std::string& name,
                                                       std::string_view bytes) const {
  auto record = schedule::decode(name, bytes);
  if (!record.is_ok()) return record.status();
  auto compiled = schedule::compile(std::move(record.value().definition), now(),
                                    engine().options().max_name_bytes);
  if (!compiled.is_ok()) return compiled.status();
  return Entry{std::move(compiled).value(), record.value().state};
}

template <typename T>
void LocalSchedules::finish(Callback<T> done, Result<T> result) {
  node_.when_durable(
      node_.barrier(),
      [done = std::move(done), result = std::move(result)]() mutable { done(std::move(result)); });
  node_.touched();
}

// --- the contract

void LocalSchedules::set(schedule::Definition definition, Callback<ScheduleView> done) {
  auto compiled =
      schedule::compile(std::move(definition), now(), engine().options().max_name_bytes);
  if (!compiled.is_ok()) return finish<ScheduleView>(std::move(done), compiled.status());
  const schedule::Definition& d = compiled.value().definition;
  if (Status refused = check_put(d, /*at_set=*/true); !refused.is_ok()) {
    return finish<ScheduleView>(std::move(done), std::move(refused));
  }
  schedule::State state = schedule::start(compiled.value(), now());
  bool created = true;
  if (book_.contains(d.name)) {
    auto old = find(d.name);
    if (old.is_ok()) {
      withdraw(old.value());
      state = schedule::start(compiled.value(), now(), &old.value().state);
      created = false;
    } else if (old.code() == Code::kIOError) {
      return finish<ScheduleView>(std::move(done), old.status());
    }  // else a record that cannot run: replaced, as if new
  }
  Entry entry{std::move(compiled).value(), state};
  persist(entry);
  step(entry);
  families_.schedules.set({}, static_cast<std::int64_t>(book_.size()));
  ScheduleView set = view(entry);
  set.created = created;
  finish<ScheduleView>(std::move(done), std::move(set));
}

void LocalSchedules::get(std::string name, Callback<ScheduleView> done) {
  auto entry = find(name);
  if (!entry.is_ok()) return finish<ScheduleView>(std::move(done), entry.status());
  finish<ScheduleView>(std::move(done), view(entry.value()));
}

void LocalSchedules::list(std::string after, std::size_t limit,
                          Callback<std::vector<ScheduleView>> done) {
  std::vector<ScheduleView> views;
  for (const std::string& name : book_.list(after, limit)) {
    auto entry = find(name);
    if (!entry.is_ok()) {
      return finish<std::vector<ScheduleView>>(std::move(done), entry.status());
    }
    views.push_back(view(entry.value()));
  }
  finish<std::vector<ScheduleView>>(std::move(done), std::move(views));
}

void LocalSchedules::remove(std::string name, Callback<ScheduleView> done) {
  auto found = find(name);
  if (!found.is_ok()) return finish<ScheduleView>(std::move(done), found.status());
  Entry& entry = found.value();
  withdraw(entry);
  ScheduleView removed = view(entry);
  removed.next_unix_ms.reset();
  node_.staged().erase_schedule(name);
  book_.erase(name);
  families_.schedules.set({}, static_cast<std::int64_t>(book_.size()));
  finish<ScheduleView>(std::move(done), std::move(removed));
}

void LocalSchedules::pause(std::string name, bool paused, Callback<ScheduleView> done) {
  auto found = find(name);
  if (!found.is_ok()) return finish<ScheduleView>(std::move(done), found.status());
  Entry& entry = found.value();
  if (entry.schedule.definition.paused != paused) {
    if (paused) withdraw(entry);
    entry.schedule.definition.paused = paused;
    persist(entry);
    step(entry);
  }
  finish<ScheduleView>(std::move(done), view(entry));
}

void LocalSchedules::trigger(std::string name, Callback<broker::PutResult> done) {
  auto found = find(name);
  if (!found.is_ok()) return finish<broker::PutResult>(std::move(done), found.status());
  Entry& entry = found.value();
  if (Status refused = check_put(entry.schedule.definition, /*at_set=*/false); !refused.is_ok()) {
    return finish<broker::PutResult>(std::move(done), std::move(refused));
  }
  const schedule::State before = entry.state;
  const schedule::Run run = schedule::trigger(entry.state, now());
  auto put = put_run(entry.schedule, run);
  if (!put.is_ok() || !put.value().inserted) {  // no new job: as if not triggered
    entry.state.runs = before.runs;
    entry.state.last_run_unix_ms = before.last_run_unix_ms;
  }
  count(before, entry.state);
  persist(entry);
  finish<broker::PutResult>(std::move(done), std::move(put));
}

void LocalSchedules::backfill(std::string name, std::int64_t from_unix_ms, std::int64_t to_unix_ms,
                              Callback<std::vector<broker::PutResult>> done) {
  using Puts = std::vector<broker::PutResult>;
  auto found = find(name);
  if (!found.is_ok()) return finish<Puts>(std::move(done), found.status());
  Entry& entry = found.value();
  if (Status refused = check_put(entry.schedule.definition, /*at_set=*/false); !refused.is_ok()) {
    return finish<Puts>(std::move(done), std::move(refused));
  }
  const schedule::State before = entry.state;
  auto runs = schedule::backfill(entry.schedule, entry.state, from_unix_ms, to_unix_ms, now());
  if (!runs.is_ok()) return finish<Puts>(std::move(done), runs.status());
  Puts puts;
  // Counted from the jobs put: an instant whose job still stood, or a put that failed, is not a
  // run. The latest instant put has come: a last run, as a trigger's is.
  entry.state.runs = before.runs;
  for (const schedule::Run& run : runs.value()) {
    auto put = put_run(entry.schedule, run);
    if (put.is_ok() && put.value().inserted) {
      ++entry.state.runs;
      entry.state.last_run_unix_ms =
          std::max(entry.state.last_run_unix_ms.value_or(run.instant_unix_ms), run.instant_unix_ms);
    }
    if (!put.is_ok()) {
      count(before, entry.state);
      persist(entry);
      return finish<Puts>(std::move(done), put.status());
    }
    puts.push_back(std::move(put).value());
  }
  count(before, entry.state);
  persist(entry);
  finish<Puts>(std::move(done), std::move(puts));
}

}  // namespace delayq::broker::local
