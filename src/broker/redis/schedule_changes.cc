// The calls of broker/schedules.h that change a schedule, from any node (schedules.h): each
// reads the record, changes it and writes it over the version it read, again on a conflict; and
// the reads (get, list).
#include <spdlog/spdlog.h>

#include <algorithm>
#include <boost/asio/post.hpp>

#include "broker/put_rules.h"
#include "broker/redis/schedules.h"
#include "redis/slot.h"

namespace delayq::broker::redis {
namespace {

using broker::Callback;
using broker::ScheduleView;

constexpr int kTries = 8;                // writes of one change that may meet another's
constexpr std::size_t kListBatch = 256;  // names read from the index at a time

Status no_schedule(const std::string& name) {
  return {Code::kNotFound, "no schedule '" + name + "'"};
}

template <typename T>
void post_result(boost::asio::io_context& io, Callback<T> done, Result<T> result) {
  boost::asio::post(io, [done = std::move(done), result = std::move(result)]() mutable {
    done(std::move(result));
  });
}

}  // namespace

void RedisSchedules::change(const std::string& name, bool create, Change how, int tries,
                            std::function<void(Result<StoredSchedule>, bool created)> then) {
  read(name, [self = shared_from_this(), name, create, how = std::move(how), tries,
              then = std::move(then)](Result<Stored> stored) mutable {
    if (!stored.is_ok()) return then(stored.status(), false);
    if (!stored.value() && !create) return then(no_schedule(name), false);
    const bool created = !stored.value();
    auto held =
        std::make_shared<StoredSchedule>(created ? StoredSchedule{} : std::move(*stored.value()));
    // A step whose end nobody saw: its runs put first (none twice), so that what it put ahead
    // is there to be withdrawn.
    std::vector<schedule::Run> intent = std::move(held->intent);
    held->intent.clear();
    self->put_runs(*held, std::move(intent), 0,
                   [self, name, create, how = std::move(how), tries, then = std::move(then), held,
                    created](Status put) mutable {
                     if (!put.is_ok()) return then(put, created);
                     const schedule::State before = held->record.state;
                     how(held, [self, name, create, how, tries, then = std::move(then), held,
                                created, before](Result<Plan> planned) mutable {
                       if (!planned.is_ok()) return then(planned.status(), created);
                       StoredSchedule next = *held;
                       next.record.state = planned.value().state;
                       next.intent = planned.value().step.put;
                       const std::uint64_t expected = held->version;
                       self->commit(
                           name, expected, next, /*announce=*/true,
                           [self, name, create, how = std::move(how), tries, then = std::move(then),
                            next, created, before](Result<std::uint64_t> written) mutable {
                             if (written.code() == Code::kConflict && tries > 1) {
                               return self->change(name, create, std::move(how), tries - 1,
                                                   std::move(then));
                             }
                             if (!written.is_ok()) return then(written.status(), created);
                             self->count(before, next.record.state);
                             next.version = written.value();
                             next.intent.clear();
                             then(std::move(next), created);
                           });
                     });
                   });
  });
}

void RedisSchedules::withdraw(std::shared_ptr<StoredSchedule> stored,
                              std::function<void(Status)> then) {
  const auto ahead = schedule::pending_ahead(stored->record.state, now());
  if (!ahead) return then(Status::ok());
  unrun(stored->record.definition, stored->generation, stored->version, *ahead,
        /*or_ready=*/false,
        [self = shared_from_this(), stored, then = std::move(then)](Result<std::string> outcome) {
          if (!outcome.is_ok()) return then(outcome.status());
          // Gone before its instant: a user deleted it, and it will not run.
          schedule::withdraw_ahead(stored->record.state, self->now(),
                                   outcome.value() == "deleted" || outcome.value() == "gone");
          then(Status::ok());
        });
}

ScheduleView RedisSchedules::view(const StoredSchedule& stored) const {
  const std::int64_t at = now();
  ScheduleView out{stored.record.definition, stored.record.state, std::nullopt, at};
  auto compiled = schedule::compile(stored.record.definition, at, core_->options.max_name_bytes);
  if (compiled.is_ok()) out.next_unix_ms = schedule::next_run(compiled.value(), out.state, at);
  return out;
}

Status RedisSchedules::check_put(const schedule::Definition& d, bool at_set) const {
  // A run is a put: the put's own checks, from their one source. At set, only the url's.
  broker::PutRequest request;
  request.tube = d.tube;
  request.url = d.url;
  broker::PutContext context;
  context.max_name_bytes = core_->options.max_name_bytes;
  context.draining = !at_set && core_->draining;
  context.tube_has_webhook = core_->webhook_map.contains(d.tube);
  return broker::check_put(request, d.tube, context);
}

void RedisSchedules::set(schedule::Definition definition, Callback<ScheduleView> done) {
  auto compiled = schedule::compile(std::move(definition), now(), core_->options.max_name_bytes);
  if (!compiled.is_ok())
    return post_result<ScheduleView>(core_->io, std::move(done), compiled.status());
  if (Status refused = check_put(compiled.value().definition, /*at_set=*/true); !refused.is_ok()) {
    return post_result<ScheduleView>(core_->io, std::move(done), std::move(refused));
  }
  auto schedule = std::make_shared<const schedule::Compiled>(std::move(compiled).value());
  const std::string name = schedule->definition.name;
  Change how = [self = shared_from_this(), schedule](std::shared_ptr<StoredSchedule> stored,
                                                     std::function<void(Result<Plan>)> planned) {
    const bool created = stored->version == 0;
    self->withdraw(stored, [self, schedule, stored, created,
                            planned = std::move(planned)](Status withdrawn) mutable {
      if (!withdrawn.is_ok()) return planned(withdrawn);
      const std::int64_t at = self->now();
      schedule::State state = created ? schedule::start(*schedule, at)
                                      : schedule::start(*schedule, at, &stored->record.state);
      stored->record.definition = schedule->definition;
      // A new generation: marks left by the runs of what this replaces do not hold for its own.
      char generation[17];
      std::snprintf(generation, sizeof generation, "%016llx",
                    static_cast<unsigned long long>(self->random_()));
      stored->generation = generation;
      stored->record.state = state;
      self->plan(schedule, stored->generation, stored->version, state, at,
                 std::make_shared<Facts>(), std::move(planned));
    });
  };
  // Listed before it is stored: the index holds every stored name (and perhaps a name whose
  // set failed, which listing skips).
  core_->client->run(
      delayq::redis::key_slot(core_->names.schedules),
      Command{"ZADD", core_->names.schedules, "0", name},
      [self = shared_from_this(), name, how = std::move(how),
       done = std::move(done)](Result<Reply> added) mutable {
        if (!added.is_ok()) return done(added.status());
        self->change(name, /*create=*/true, std::move(how), kTries,
                     [self, done = std::move(done)](Result<StoredSchedule> stored, bool created) {
                       if (!stored.is_ok()) return done(stored.status());
                       ScheduleView out = self->view(stored.value());
                       out.created = created;
                       done(std::move(out));
                     });
      });
}

void RedisSchedules::get(std::string name, Callback<ScheduleView> done) {
  read(name, [self = shared_from_this(), name, done = std::move(done)](Result<Stored> stored) {
    if (!stored.is_ok()) return done(stored.status());
    if (!stored.value()) return done(no_schedule(name));
    done(self->view(*stored.value()));
  });
}

void RedisSchedules::list(std::string after, std::size_t limit,
                          Callback<std::vector<ScheduleView>> done) {
  list_from(std::move(after), limit, std::make_shared<std::vector<ScheduleView>>(),
            std::move(done));
}

void RedisSchedules::list_from(std::string after, std::size_t limit,
                               std::shared_ptr<std::vector<ScheduleView>> views,
                               Callback<std::vector<ScheduleView>> done) {
  if (views->size() >= limit) return done(std::move(*views));
  const std::size_t want = std::min(kListBatch, limit - views->size());
  core_->client->run(
      delayq::redis::key_slot(core_->names.schedules),
      Command{"ZRANGEBYLEX", core_->names.schedules, after.empty() ? "-" : "(" + after, "+",
              "LIMIT", "0", std::to_string(want)},
      [self = shared_from_this(), limit, want, views,
       done = std::move(done)](Result<Reply> listed) mutable {
        if (!listed.is_ok()) return done(listed.status());
        std::vector<std::string> names;
        for (const Reply& name : listed.value().elements) names.push_back(name.str);
        if (names.empty()) return done(std::move(*views));
        // The records, one call per shard that holds some.
        std::map<std::uint32_t, std::vector<std::string>> by_shard;
        for (const std::string& name : names) by_shard[self->home(name)].push_back(name);
        auto found = std::make_shared<std::map<std::string, StoredSchedule>>();
        auto left = std::make_shared<std::size_t>(by_shard.size());
        auto failed = std::make_shared<Status>();
        auto finish = [self, limit, want, views, names, found, failed,
                       done = std::move(done)]() mutable {
          if (!failed->is_ok()) return done(*failed);
          for (const std::string& name : names) {
            if (auto it = found->find(name); it != found->end() && views->size() < limit) {
              views->push_back(self->view(it->second));
            }
          }
          // Fewer than asked for: the index has no more. Else read on after the last name.
          if (names.size() < want) return done(std::move(*views));
          self->list_from(names.back(), limit, views, std::move(done));
        };
        auto shared_finish = std::make_shared<decltype(finish)>(std::move(finish));
        for (auto& [shard, some] : by_shard) {
          std::vector<std::string> args = {"schedule_get"};
          args.insert(args.end(), some.begin(), some.end());
          self->core_->call(shard, std::move(args), false,
                            [some, found, left, failed, shared_finish](Result<Reply> reply) {
                              if (!reply.is_ok()) {
                                *failed = reply.status();
                              } else if (Status s = status_of(reply.value()); !s.is_ok()) {
                                *failed = s;
                              } else {
                                const auto& e = reply.value().elements;
                                for (std::size_t i = 0; i < some.size() && i + 1 < e.size(); ++i) {
                                  if (e[i + 1].str.empty()) continue;  // set, then failed or gone
                                  auto stored = decode_stored(some[i], e[i + 1].str);
                                  if (stored.is_ok()) {
                                    found->emplace(some[i], std::move(stored).value());
                                  }
                                }
                              }
                              if (--*left == 0) (*shared_finish)();
                            });
        }
      });
}

void RedisSchedules::remove(std::string name, Callback<ScheduleView> done) {
  read(name, [self = shared_from_this(), name,
              done = std::move(done)](Result<Stored> stored) mutable {
    if (!stored.is_ok()) return done(stored.status());
    if (!stored.value()) return done(no_schedule(name));
    auto held = std::make_shared<StoredSchedule>(std::move(*stored.value()));
    std::vector<schedule::Run> intent = std::move(held->intent);
    held->intent.clear();
    self->put_runs(*held, std::move(intent), 0,
                   [self, name, held, done = std::move(done)](Status put) mutable {
                     if (!put.is_ok()) return done(put);
                     self->withdraw(held, [self, name, held,
                                           done = std::move(done)](Status withdrawn) mutable {
                       if (!withdrawn.is_ok()) return done(withdrawn);
                       self->save(name, held->version, nullptr, /*announce=*/true,
                                  [self, name, held, done = std::move(done)](Status saved) mutable {
                                    // Changed meanwhile: removed by reading it again (a step came
                                    // between).
                                    if (saved.code() == Code::kConflict)
                                      return self->remove(name, std::move(done));
                                    if (!saved.is_ok()) return done(saved);
                                    ScheduleView removed = self->view(*held);
                                    removed.next_unix_ms.reset();
                                    self->core_->client->run(
                                        delayq::redis::key_slot(self->core_->names.schedules),
                                        Command{"ZREM", self->core_->names.schedules, name},
                                        [removed = std::move(removed), done = std::move(done)](
                                            Result<Reply>) mutable { done(std::move(removed)); });
                                  });
                     });
                   });
  });
}

void RedisSchedules::pause(std::string name, bool paused, Callback<ScheduleView> done) {
  Change how = [self = shared_from_this(), paused](std::shared_ptr<StoredSchedule> stored,
                                                   std::function<void(Result<Plan>)> planned) {
    auto next = [self, stored, paused, planned = std::move(planned)](Status withdrawn) mutable {
      if (!withdrawn.is_ok()) return planned(withdrawn);
      stored->record.definition.paused = paused;
      auto compiled = schedule::compile(stored->record.definition, self->now(),
                                        self->core_->options.max_name_bytes);
      if (!compiled.is_ok()) return planned(compiled.status());
      // Resumed: the instants missed meanwhile settled by the misfire rule, the next put ahead.
      self->plan(std::make_shared<const schedule::Compiled>(std::move(compiled).value()),
                 stored->generation, stored->version, stored->record.state, self->now(),
                 std::make_shared<Facts>(), std::move(planned));
    };
    if (paused && !stored->record.definition.paused) return self->withdraw(stored, std::move(next));
    next(Status::ok());
  };
  change(name, /*create=*/false, std::move(how), kTries,
         [self = shared_from_this(), done = std::move(done)](Result<StoredSchedule> stored, bool) {
           if (!stored.is_ok()) return done(stored.status());
           done(self->view(stored.value()));
         });
}

void RedisSchedules::put_direct(std::shared_ptr<const schedule::Definition> d,
                                std::vector<schedule::Run> runs,
                                std::shared_ptr<std::vector<broker::PutResult>> puts,
                                std::function<void(Status)> then) {
  if (puts->size() == runs.size()) return then(Status::ok());
  broker::PutRequest request = run_request(*d, runs[puts->size()]);
  if (!session_) {
    // Made at the first: a session counts among the node's (its holder's number).
    broker::SessionOptions options;
    options.watch_default = false;
    session_ = std::make_unique<RedisSession>(core_, options);
  }
  session_->put(std::move(request),
                [self = shared_from_this(), d, runs = std::move(runs), puts,
                 then = std::move(then)](Result<broker::PutResult> put) mutable {
                  if (!put.is_ok()) return then(put.status());
                  puts->push_back(std::move(put).value());
                  self->put_direct(std::move(d), std::move(runs), std::move(puts), std::move(then));
                });
}

void RedisSchedules::recount(const std::string& name, std::uint64_t runs,
                             std::optional<std::int64_t> last_run, int tries) {
  read(name, [self = shared_from_this(), name, runs, last_run, tries](Result<Stored> stored) {
    if (!stored.is_ok() || !stored.value()) return;  // gone: nothing to count
    StoredSchedule next = std::move(*stored.value());
    const schedule::State before = next.record.state;
    next.record.state.runs += runs;
    if (last_run) {
      next.record.state.last_run_unix_ms =
          std::max(next.record.state.last_run_unix_ms.value_or(*last_run), *last_run);
    }
    const std::uint64_t expected = next.version;
    next.version = expected + 1;
    self->save(
        name, expected, &next, /*announce=*/true,
        [self, name, runs, last_run, tries, before, after = next.record.state](Status saved) {
          if (saved.code() == Code::kConflict && tries > 1) {
            return self->recount(name, runs, last_run, tries - 1);
          }
          if (!saved.is_ok()) {
            spdlog::warn("schedule '{}': its runs could not be counted: {}", name,
                         saved.to_string());
            return;
          }
          self->count(before, after);
        });
  });
}

void RedisSchedules::trigger(std::string name, Callback<broker::PutResult> done) {
  read(name,
       [self = shared_from_this(), name, done = std::move(done)](Result<Stored> stored) mutable {
         if (!stored.is_ok()) return done(stored.status());
         if (!stored.value()) return done(no_schedule(name));
         const schedule::Definition& d = stored.value()->record.definition;
         if (Status refused = self->check_put(d, /*at_set=*/false); !refused.is_ok()) {
           return done(refused);
         }
         schedule::State state = stored.value()->record.state;
         const schedule::Run run = schedule::trigger(state, self->now());
         auto puts = std::make_shared<std::vector<broker::PutResult>>();
         self->put_direct(std::make_shared<const schedule::Definition>(d), {run}, puts,
                          [self, name, run, puts, done = std::move(done)](Status put) mutable {
                            if (!put.is_ok()) return done(put);
                            // No new job: as if not triggered.
                            if (puts->front().inserted)
                              self->recount(name, 1, run.instant_unix_ms, kTries);
                            done(std::move(puts->front()));
                          });
       });
}

void RedisSchedules::backfill(std::string name, std::int64_t from_unix_ms, std::int64_t to_unix_ms,
                              Callback<std::vector<broker::PutResult>> done) {
  using Puts = std::vector<broker::PutResult>;
  read(name, [self = shared_from_this(), name, from_unix_ms, to_unix_ms,
              done = std::move(done)](Result<Stored> stored) mutable {
    if (!stored.is_ok()) return done(stored.status());
    if (!stored.value()) return done(no_schedule(name));
    const schedule::Definition& d = stored.value()->record.definition;
    if (Status refused = self->check_put(d, /*at_set=*/false); !refused.is_ok()) {
      return done(refused);
    }
    auto compiled = schedule::compile(d, self->now(), self->core_->options.max_name_bytes);
    if (!compiled.is_ok()) return done(compiled.status());
    schedule::State state = stored.value()->record.state;
    auto runs = schedule::backfill(compiled.value(), state, from_unix_ms, to_unix_ms, self->now());
    if (!runs.is_ok()) return done(runs.status());
    auto puts = std::make_shared<Puts>();
    self->put_direct(
        std::make_shared<const schedule::Definition>(d), runs.value(), puts,
        [self, name, puts, runs = runs.value(), done = std::move(done)](Status put) mutable {
          // Counted from the jobs put; the latest instant put is a last run, as a
          // trigger's is (its instant has come).
          std::uint64_t inserted = 0;
          std::optional<std::int64_t> last_run;
          for (std::size_t i = 0; i < puts->size() && i < runs.size(); ++i) {
            if (!(*puts)[i].inserted) continue;
            ++inserted;
            last_run =
                std::max(last_run.value_or(runs[i].instant_unix_ms), runs[i].instant_unix_ms);
          }
          if (inserted > 0) self->recount(name, inserted, last_run, kTries);
          if (!put.is_ok()) return done(put);
          done(std::move(*puts));
        });
  });
}

}  // namespace delayq::broker::redis
