#include "broker/redis/schedules.h"

#include <spdlog/spdlog.h>

#include <charconv>

namespace delayq::broker::redis {
namespace {

constexpr std::int64_t kRetryMs = 1000;  // a step that Redis failed is tried again
constexpr std::size_t kStepsAtOnce = 1000;

// Reads an integer and the byte after it, which must be `end`.
bool take_int(std::string_view& text, char end, std::int64_t& out) {
  const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), out);
  if (ec != std::errc() || ptr == text.data() + text.size() || *ptr != end) return false;
  text.remove_prefix(static_cast<std::size_t>(ptr - text.data()) + 1);
  return true;
}

}  // namespace

broker::PutRequest run_request(const schedule::Definition& d, const schedule::Run& run) {
  broker::PutRequest request;
  request.tube = d.tube;
  request.priority = d.priority;
  request.due = Due::at(run.due_unix_ms);
  request.ttr = d.ttr;
  request.body = d.body;
  request.key = schedule::run_key(d.name, run.instant_unix_ms);
  request.group = d.group;
  request.url = d.url;
  request.content_type = d.content_type;
  return request;
}

// "<version>:<generation>:<n>:" then n runs "<instant>,<due>;", then the codec's bytes.
std::string encode_stored(const StoredSchedule& stored) {
  std::string out = std::to_string(stored.version) + ':' + stored.generation + ':' +
                    std::to_string(stored.intent.size()) + ':';
  for (const schedule::Run& run : stored.intent) {
    out += std::to_string(run.instant_unix_ms) + ',' + std::to_string(run.due_unix_ms) + ';';
  }
  return out + schedule::encode(stored.record);
}

Result<StoredSchedule> decode_stored(std::string_view name, std::string_view bytes) {
  const Status damaged(Code::kCorruption,
                       "schedule '" + std::string(name) + "': a damaged record in Redis");
  StoredSchedule stored;
  std::int64_t version = 0;
  std::int64_t runs = 0;
  if (!take_int(bytes, ':', version) || version <= 0) return damaged;
  stored.version = static_cast<std::uint64_t>(version);
  const auto colon = bytes.find(':');
  if (colon == std::string_view::npos) return damaged;
  stored.generation = std::string(bytes.substr(0, colon));
  bytes.remove_prefix(colon + 1);
  if (!take_int(bytes, ':', runs) || runs < 0 ||
      runs > static_cast<std::int64_t>(schedule::kMaxCatchUpRuns) + 2) {
    return damaged;
  }
  for (std::int64_t i = 0; i < runs; ++i) {
    schedule::Run run;
    if (!take_int(bytes, ',', run.instant_unix_ms) || !take_int(bytes, ';', run.due_unix_ms)) {
      return damaged;
    }
    stored.intent.push_back(run);
  }
  auto record = schedule::decode(name, bytes);
  if (!record.is_ok()) return record.status();
  stored.record = std::move(record).value();
  return stored;
}

RedisSchedules::RedisSchedules(std::shared_ptr<Core> core)
    : core_(std::move(core)), families_(core_->registry), timer_(core_->clock->timer()) {}

RedisSchedules::~RedisSchedules() {
  stop();
}

std::shared_ptr<RedisSchedules> RedisSchedules::open(std::shared_ptr<Core> core) {
  std::shared_ptr<RedisSchedules> schedules(new RedisSchedules(core));
  Weak weak = schedules;
  core->on_ownership = [weak](std::uint32_t shard) {
    auto self = weak.lock();
    if (!self || self->stopped_) return;
    if (self->core_->owned.contains(shard)) {
      self->load_shard(shard);
    } else {
      self->drop_shard(shard);
    }
  };
  core->on_schedule_changed = [weak](std::uint32_t, std::string name) {
    if (auto self = weak.lock(); self && !self->stopped_) self->reload(name);
  };
  for (const auto& [shard, own] : core->owned) schedules->load_shard(shard);
  return schedules;
}

void RedisSchedules::stop() {
  if (stopped_) return;
  stopped_ = true;
  timer_->cancel();
  core_->on_ownership = nullptr;
  core_->on_schedule_changed = nullptr;
}

std::uint32_t RedisSchedules::home(std::string_view name) const {
  // Tube names are never empty: no job's key or group hashes as a schedule's name does.
  return shard_of_name("", name, core_->shards);
}

// --- Redis

void RedisSchedules::read(const std::string& name, std::function<void(Result<Stored>)> then) {
  core_->call(home(name), {"schedule_get", name}, false,
              [self = shared_from_this(), name, then = std::move(then)](Result<Reply> reply) {
                if (!reply.is_ok()) return then(reply.status());
                if (Status s = status_of(reply.value()); !s.is_ok()) return then(s);
                const auto& e = reply.value().elements;
                if (e.size() < 2 || e[1].str.empty()) return then(Stored{});
                auto stored = decode_stored(name, e[1].str);
                if (!stored.is_ok()) return then(stored.status());
                then(Stored(std::move(stored).value()));
              });
}

void RedisSchedules::save(const std::string& name, std::uint64_t expected,
                          const StoredSchedule* next, bool announce,
                          std::function<void(Status)> then) {
  core_->call(home(name),
              {"schedule_save", name, std::to_string(expected),
               next != nullptr ? encode_stored(*next) : std::string(), announce ? "1" : "0"},
              true, [self = shared_from_this(), then = std::move(then)](Result<Reply> reply) {
                if (!reply.is_ok()) return then(reply.status());
                then(status_of(reply.value()));
              });
}

void RedisSchedules::put_runs(const StoredSchedule& stored, std::vector<schedule::Run> runs,
                              std::size_t from, std::function<void(Status)> then) {
  if (from == runs.size()) return then(Status::ok());
  const schedule::Definition& d = stored.record.definition;
  const schedule::Run run = runs[from];
  broker::PutRequest request = run_request(d, run);
  const std::uint32_t shard = core_->key_shard(d.tube, request.key);
  std::vector<std::string> args = {
      "putrun",          std::to_string(core_->shards),       std::to_string(shard),         d.name,
      stored.generation, std::to_string(run.instant_unix_ms), std::to_string(stored.version)};
  for (std::string& arg : put_arguments(request, d.tube)) args.push_back(std::move(arg));
  core_->call(shard, std::move(args), true,
              [self = shared_from_this(), stored, runs = std::move(runs), from,
               then = std::move(then)](Result<Reply> reply) mutable {
                if (!reply.is_ok()) return then(reply.status());
                if (Status s = status_of(reply.value()); !s.is_ok()) return then(s);
                self->put_runs(stored, std::move(runs), from + 1, std::move(then));
              });
}

void RedisSchedules::commit(const std::string& name, std::uint64_t expected, StoredSchedule next,
                            bool announce, std::function<void(Result<std::uint64_t>)> then) {
  next.version = expected + 1;
  auto written = std::make_shared<StoredSchedule>(std::move(next));
  save(name, expected, written.get(), announce,
       [self = shared_from_this(), name, written, then = std::move(then)](Status saved) mutable {
         if (!saved.is_ok()) return then(saved);
         if (written->intent.empty()) return then(written->version);
         self->put_runs(*written, written->intent, 0,
                        [self, name, written, then = std::move(then)](Status put) mutable {
                          // Not put: the intent stays, and whoever steps the schedule next puts
                          // them.
                          if (!put.is_ok()) return then(put);
                          const std::uint64_t with_intent = written->version;
                          written->intent.clear();
                          written->version = with_intent + 1;
                          self->save(
                              name, with_intent, written.get(), false,
                              [written, then = std::move(then)](Status cleared) {
                                // A conflict: another write came since, and read the intent (and
                                // put its runs again, none twice). The runs are put either way.
                                if (!cleared.is_ok() && cleared.code() != Code::kConflict) {
                                  return then(cleared);
                                }
                                then(cleared.is_ok() ? written->version : written->version - 1);
                              });
                        });
       });
}

void RedisSchedules::plan(std::shared_ptr<const schedule::Compiled> schedule,
                          std::string generation, std::uint64_t version, schedule::State state,
                          std::int64_t at, std::shared_ptr<Facts> facts,
                          std::function<void(Result<Plan>)> then) {
  // The planner runs with what is known; the first question it asks that is not is answered by
  // the job's shard, and the planner run again from the start, with the same present.
  std::optional<std::pair<std::string, bool>> missing;  // key, withdraw
  std::size_t draws = 0;
  const schedule::Environment environment{
      [&](std::string_view key) {
        if (auto it = facts->exists.find(key); it != facts->exists.end()) return it->second;
        if (!missing) missing.emplace(std::string(key), false);
        return false;
      },
      [&](std::int64_t bound) {
        if (draws == facts->draws.size()) {
          facts->draws.push_back(std::uniform_int_distribution<std::int64_t>(0, bound)(random_));
        }
        return facts->draws[draws++];
      },
      [&](std::string_view key) {
        if (auto it = facts->withdrawn.find(key); it != facts->withdrawn.end()) return it->second;
        if (!missing) missing.emplace(std::string(key), true);
        return false;
      }};
  Plan out;
  out.state = state;
  out.step = schedule::step(*schedule, out.state, at, environment);
  if (!missing) return then(std::move(out));

  const schedule::Definition& d = schedule->definition;
  const std::string key = missing->first;
  const std::uint32_t shard = core_->key_shard(d.tube, key);
  auto again = [self = shared_from_this(), schedule, generation, version, state, at, facts,
                then = std::move(then)](Result<bool> fact, bool withdraw,
                                        std::string asked) mutable {
    if (!fact.is_ok()) return then(fact.status());
    (withdraw ? facts->withdrawn : facts->exists)[asked] = fact.value();
    self->plan(std::move(schedule), std::move(generation), version, std::move(state), at,
               std::move(facts), std::move(then));
  };
  if (missing->second) {
    // A run put ahead and reached late: withdrawn only if no worker has had it. Gone, it ran
    // (its shard's owner fired it while this schedule's was away) or a user deleted it.
    const auto run = schedule::parse_run_key(key);
    unrun(d, generation, version, run ? run->instant_unix_ms : 0, /*or_ready=*/true,
          [again = std::move(again), key](Result<std::string> outcome) mutable {
            if (!outcome.is_ok()) return again(outcome.status(), true, key);
            again(outcome.value() == "deleted", true, key);
          });
    return;
  }
  core_->call(shard, {"peek", "", d.tube, key}, false,
              [again = std::move(again), key](Result<Reply> reply) mutable {
                if (!reply.is_ok()) return again(reply.status(), false, key);
                const Status s = status_of(reply.value());
                if (!s.is_ok() && s.code() != Code::kNotFound) return again(s, false, key);
                again(s.is_ok(), false, key);
              });
}

void RedisSchedules::unrun(const schedule::Definition& d, const std::string& generation,
                           std::uint64_t version, std::int64_t instant, bool or_ready,
                           std::function<void(Result<std::string>)> then) {
  const std::string key = schedule::run_key(d.name, instant);
  core_->call(core_->key_shard(d.tube, key),
              {"unrun", d.name, generation, std::to_string(instant), std::to_string(version),
               d.tube, key, or_ready ? "1" : "0"},
              true, [self = shared_from_this(), then = std::move(then)](Result<Reply> reply) {
                if (!reply.is_ok()) return then(reply.status());
                if (Status s = status_of(reply.value()); !s.is_ok()) return then(s);
                const auto& e = reply.value().elements;
                if (e.size() < 2) return then(Status(Code::kIOError, "Redis: a short reply"));
                then(e[1].str);
              });
}

// --- the owner's turn

void RedisSchedules::warn(const std::string& what) {
  const SteadyTime now = core_->clock->steady_now();
  if (warned_ && now - *warned_ < kWarnEvery) {
    ++unwarned_;
    return;
  }
  if (unwarned_ > 0) {
    spdlog::warn("redis: {} (and {} more such warnings of schedules since the last)", what,
                 unwarned_);
  } else {
    spdlog::warn("redis: {}", what);
  }
  warned_ = now;
  unwarned_ = 0;
}

void RedisSchedules::load_shard(std::uint32_t shard) {
  core_->call(
      shard, {"schedule_all"}, false, [self = shared_from_this(), shard](Result<Reply> reply) {
        if (self->stopped_ || !self->core_->owned.contains(shard)) return;
        if (!reply.is_ok() || !status_of(reply.value()).is_ok()) {
          // Its schedules wait for the next look: retried until the lease goes.
          self->warn(fmt::format(
              "the schedules of shard {} could not be read: {}", shard,
              reply.is_ok() ? status_of(reply.value()).to_string() : reply.status().to_string()));
          std::shared_ptr<Timer> timer = self->core_->clock->timer();
          timer->expires_after(Millis{kRetryMs});
          timer->async_wait([self, shard, timer](bool expired) {
            if (expired && !self->stopped_ && self->core_->owned.contains(shard)) {
              self->load_shard(shard);
            }
          });
          return;
        }
        const auto& e = reply.value().elements;
        if (e.size() < 2) return;
        const auto& pairs = e[1].elements;
        const std::int64_t at = self->now();
        for (std::size_t i = 0; i + 1 < pairs.size(); i += 2) {
          const std::string& name = pairs[i].str;
          if (self->steps_.contains(name)) continue;  // loaded already, and stepping
          auto stored = decode_stored(name, pairs[i + 1].str);
          if (!stored.is_ok()) {
            spdlog::error("schedule '{}' cannot run and is left alone: {}", name,
                          stored.status().to_string());
            continue;
          }
          auto compiled = schedule::compile(std::move(stored.value().record.definition), at,
                                            self->core_->options.max_name_bytes);
          if (!compiled.is_ok()) {
            // Stored when it compiled: this node's tz database does not know its zone. It stays
            // in Redis, untouched, for a node whose database does.
            spdlog::error("schedule '{}' cannot run here and is left alone: {}", name,
                          compiled.status().message());
            continue;
          }
          // A step whose end was not seen is finished at once; the rest wake when they are due.
          self->book_.set(name, stored.value().intent.empty()
                                    ? schedule::wake(compiled.value(), stored.value().record.state)
                                    : std::optional(at));
        }
        self->families_.schedules.set({}, static_cast<std::int64_t>(self->book_.size()));
        self->arm();
      });
}

void RedisSchedules::drop_shard(std::uint32_t shard) {
  for (const std::string& name : book_.list("", book_.size())) {
    if (home(name) == shard) forget(name);
  }
  families_.schedules.set({}, static_cast<std::int64_t>(book_.size()));
  arm();
}

void RedisSchedules::reload(const std::string& name) {
  if (!core_->owned.contains(home(name))) return;
  // A step under way read the record before the change: its answers are dropped (its write
  // fails on the version, or came first and the change read it).
  steps_.erase(name);
  book_.set(name, now());
  families_.schedules.set({}, static_cast<std::int64_t>(book_.size()));
  arm();
}

void RedisSchedules::forget(const std::string& name) {
  book_.erase(name);
  steps_.erase(name);
}

void RedisSchedules::arm() {
  if (stopped_ || steps_.size() >= kStepsAtOnce) return;  // armed again as a step ends
  const auto wake = book_.next_wake();
  if (!wake) {
    timer_->cancel();
    return;
  }
  const std::int64_t in = std::max<std::int64_t>(0, *wake - now());
  timer_->expires_after(Millis{in});
  timer_->async_wait([self = shared_from_this()](bool expired) {
    if (expired && !self->stopped_) self->tick();
  });
}

void RedisSchedules::tick() {
  // A bounded number under way at once (each reads its record first); the rest as they end.
  const std::size_t room = kStepsAtOnce - std::min(steps_.size(), kStepsAtOnce);
  for (const std::string& name : book_.due(now(), room)) step(name);
  arm();
}

bool RedisSchedules::stepping(const std::string& name, std::uint64_t number) const {
  const auto it = steps_.find(name);
  return !stopped_ && it != steps_.end() && it->second == number;
}

void RedisSchedules::step(const std::string& name) {
  if (!book_.contains(name) || steps_.contains(name)) return;
  const std::uint64_t number = ++step_numbers_;
  steps_[name] = number;
  book_.set(name, std::nullopt);  // set again when the step is done
  read(name, [self = shared_from_this(), name, number](Result<Stored> stored) {
    if (!self->stepping(name, number)) return;
    if (!stored.is_ok()) {
      self->warn(
          fmt::format("schedule '{}' could not be read: {}", name, stored.status().to_string()));
      return self->stepped(name, number, self->now() + kRetryMs);
    }
    if (!stored.value()) {  // removed (its owner hears of it too)
      self->forget(name);
      self->families_.schedules.set({}, static_cast<std::int64_t>(self->book_.size()));
      return self->arm();
    }
    StoredSchedule current = std::move(*stored.value());
    if (!current.intent.empty()) return self->replay(name, number, std::move(current));
    auto compiled = schedule::compile(current.record.definition, self->now(),
                                      self->core_->options.max_name_bytes);
    if (!compiled.is_ok()) {
      spdlog::error("schedule '{}' cannot run here and is left alone: {}", name,
                    compiled.status().message());
      return self->stepped(name, number, std::nullopt);
    }
    self->advance(name, number, std::move(current),
                  std::make_shared<const schedule::Compiled>(std::move(compiled).value()));
  });
}

void RedisSchedules::replay(const std::string& name, std::uint64_t number, StoredSchedule current) {
  auto held = std::make_shared<StoredSchedule>(std::move(current));
  put_runs(*held, held->intent, 0, [self = shared_from_this(), name, number, held](Status put) {
    if (!put.is_ok()) return self->stepped(name, number, self->now() + kRetryMs);
    StoredSchedule cleared = *held;
    cleared.intent.clear();
    const schedule::State state = cleared.record.state;
    self->commit(name, held->version, std::move(cleared), false,
                 [self, name, number, state](Result<std::uint64_t> written) {
                   // Then a step of its own, at once.
                   self->written(name, number, state, state, self->now(), written);
                 });
  });
}

void RedisSchedules::advance(const std::string& name, std::uint64_t number, StoredSchedule current,
                             std::shared_ptr<const schedule::Compiled> compiled) {
  const std::int64_t at = now();
  // (Copied first: the continuation takes `current` over.)
  std::string generation = current.generation;
  const schedule::State state = current.record.state;
  const std::uint64_t version = current.version;
  plan(std::move(compiled), std::move(generation), version, state, at, std::make_shared<Facts>(),
       [self = shared_from_this(), name, number, at,
        current = std::move(current)](Result<Plan> planned) mutable {
         if (!planned.is_ok()) {
           self->warn(fmt::format("schedule '{}': {}", name, planned.status().to_string()));
           return self->stepped(name, number, at + kRetryMs);
         }
         Plan& p = planned.value();
         const schedule::State before = current.record.state;
         if (p.state == before && p.step.put.empty()) {
           return self->stepped(name, number, p.step.wake_unix_ms);
         }
         const std::uint64_t expected = current.version;
         current.record.state = p.state;
         current.intent = std::move(p.step.put);
         self->commit(name, expected, std::move(current), false,
                      [self, name, number, before, after = p.state,
                       wake = p.step.wake_unix_ms](Result<std::uint64_t> written) {
                        self->written(name, number, before, after, wake, written);
                      });
       });
}

void RedisSchedules::written(const std::string& name, std::uint64_t number,
                             const schedule::State& before, const schedule::State& after,
                             std::optional<std::int64_t> wake,
                             const Result<std::uint64_t>& version) {
  if (!stepping(name, number)) return;
  // Another write came first: step again from what it wrote.
  if (version.code() == Code::kConflict) return stepped(name, number, now());
  if (!version.is_ok()) {
    // Written with its intent, or not at all: the next step reads which.
    warn(fmt::format("schedule '{}': {}", name, version.status().to_string()));
    return stepped(name, number, now() + kRetryMs);
  }
  count(before, after);
  stepped(name, number, wake);
}

void RedisSchedules::stepped(const std::string& name, std::uint64_t number,
                             std::optional<std::int64_t> wake) {
  if (!stepping(name, number)) return;
  steps_.erase(name);
  book_.set(name, wake);
  arm();
}

void RedisSchedules::count(const schedule::State& before, const schedule::State& after) {
  if (after.runs > before.runs) {
    families_.runs.add({}, static_cast<std::int64_t>(after.runs - before.runs));
  }
  if (after.misfires > before.misfires) {
    families_.misfires.add({}, static_cast<std::int64_t>(after.misfires - before.misfires));
  }
  if (after.overlaps > before.overlaps) {
    families_.overlaps.add({}, static_cast<std::int64_t>(after.overlaps - before.overlaps));
  }
}

}  // namespace delayq::broker::redis
