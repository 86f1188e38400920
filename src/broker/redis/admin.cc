#include "broker/redis/admin.h"

#include <algorithm>

#include "broker/redis/replies.h"
#include "redis/slot.h"
#include "store/record.h"

namespace delayq::broker::redis {

void RedisAdmin::pause_tube(std::string tube, broker::Seconds pause, Callback<TubeStats> done) {
  if (Status s = check(tube); !s.is_ok()) return post(std::move(done), Result<TubeStats>(s));
  stats_tube(tube, [self = this, state = state_, tube, pause,
                    done = std::move(done)](Result<TubeStats> exists) mutable {
    if (!state->alive) return;
    if (!exists.is_ok()) return done(exists.status());
    self->pause_existing(tube, pause, std::move(done));
  });
}

void RedisAdmin::pause_existing(const std::string& tube, broker::Seconds pause,
                                Callback<TubeStats> done) {
  // The shards' scripts enforce it, on Redis's clock; then record_pause().
  const auto seconds = pause.count();
  every_shard({"pause", tube, std::to_string(seconds * 1000)}, true,
              [state = state_, tube, seconds, self = this,
               done = std::move(done)](Result<std::vector<Reply>> replies) mutable {
                if (!state->alive) return;
                if (!replies.is_ok()) return done(replies.status());
                self->record_pause(tube, seconds, std::move(done));
              });
}

// The global entry, what stats show and what tells every node when the pause ends (so that
// their reserves look again): its end is taken once the shards have theirs, never before it.
// A Redis that refuses the entry (over its maxmemory, where the scripts still run) has the
// shards taken back to the pause in force before, and the pause is refused: paused without it,
// the tube's shards would read as empty to the other nodes' reserves, with nothing to tell them
// when to look again.
void RedisAdmin::record_pause(const std::string& tube, std::int64_t seconds,
                              Callback<TubeStats> done) {
  const auto it = core_->pauses.find(tube);
  const std::int64_t now = core_->clock->now_unix_ms();
  const Pause p{seconds == 0 ? 0 : now + seconds * 1000, seconds,
                (it == core_->pauses.end() ? 0 : it->second.count) + 1};
  const std::int64_t before_ms =
      it == core_->pauses.end() ? 0 : std::max<std::int64_t>(0, it->second.until_unix_ms - now);
  core_->client->run(delayq::redis::key_slot(core_->names.pauses),
                     Command{"HSET", core_->names.pauses, tube,
                             std::to_string(p.until_unix_ms) + " " + std::to_string(p.seconds) +
                                 " " + std::to_string(p.count)},
                     [core = core_, state = state_, tube, p, before_ms, self = this,
                      done = std::move(done)](Result<Reply> reply) mutable {
                       if (!state->alive) return;
                       if (Status s = outcome(reply); !s.is_ok()) {
                         return self->every_shard({"pause", tube, std::to_string(before_ms)}, true,
                                                  [state, s, done = std::move(done)](auto) mutable {
                                                    if (state->alive) done(s);
                                                  });
                       }
                       core->pauses[tube] = p;
                       core->watch_pauses();
                       core->publish_conf();
                       self->stats_tube(tube, std::move(done));
                     });
}

void RedisAdmin::stats_tube(std::string tube, Callback<TubeStats> done) {
  if (Status s = check(tube); !s.is_ok()) return post(std::move(done), Result<TubeStats>(s));
  tube_stats({tube},
             [self = this, state = state_, tube, done = std::move(done)](Result<Sums> sums) {
               if (!state->alive) return;
               if (!sums.is_ok()) return done(sums.status());
               TubeStats stats;
               stats.name = tube;
               if (const auto it = sums.value().tubes.find(tube); it != sums.value().tubes.end()) {
                 stats = it->second;
               }
               stats = self->with_local(std::move(stats));
               if (!self->exists(stats)) return done(Status(Code::kNotFound, "no such tube"));
               done(std::move(stats));
             });
}

void RedisAdmin::set_max_attempts(std::string tube, std::uint32_t max_attempts,
                                  Callback<std::uint32_t> done) {
  if (Status s = check(tube); !s.is_ok()) return post(std::move(done), Result<std::uint32_t>(s));
  // The global copy first (what stats show: a Redis that refuses it changes nothing); then
  // every shard's scripts, which read it where they run.
  Command command = max_attempts == 0 ? Command{"HDEL", core_->names.max_attempts, tube}
                                      : Command{"HSET", core_->names.max_attempts, tube,
                                                std::to_string(max_attempts)};
  core_->client->run(delayq::redis::key_slot(core_->names.max_attempts), std::move(command),
                     [core = core_, state = state_, tube, max_attempts, self = this,
                      done = std::move(done)](Result<Reply> reply) mutable {
                       if (!state->alive) return;
                       if (Status s = outcome(reply); !s.is_ok()) return done(s);
                       if (max_attempts == 0) {
                         core->max_attempts.erase(tube);
                       } else {
                         core->max_attempts[tube] = max_attempts;
                       }
                       self->every_shard({"max_attempts", tube, std::to_string(max_attempts)}, true,
                                         [core, state, max_attempts, done = std::move(done)](
                                             Result<std::vector<Reply>> replies) mutable {
                                           if (!state->alive) return;
                                           core->publish_conf();
                                           if (!replies.is_ok()) return done(replies.status());
                                           done(max_attempts);
                                         });
                     });
}

// A tube with flow control lives whole in its home shard (flow.lua). The settings go to every
// shard's f first: a shard that holds jobs of a tube not yet pinned refuses, and then what the
// others took is taken back. Then the global copy, which nodes route by and stats show.
void RedisAdmin::set_flow(std::string tube, broker::FlowChange change,
                          Callback<FlowSettings> done) {
  if (Status s = check(tube); !s.is_ok()) return post(std::move(done), Result<FlowSettings>(s));
  core_->client->run(
      delayq::redis::key_slot(core_->names.flows), Command{"HGET", core_->names.flows, tube},
      [self = this, state = state_, tube, change = std::move(change),
       done = std::move(done)](Result<Reply> reply) mutable {
        if (!state->alive) return;
        if (Status s = outcome(reply); !s.is_ok()) return done(s);
        FlowSettings current;
        const bool pinned = reply.value().type == ReplyType::kString;
        if (pinned) {
          auto stored = store::decode_flow(tube, reply.value().str);
          if (!stored.is_ok()) return done(stored.status());
          if (stored.value().any()) current = std::move(stored).value();
        }
        auto applied = change.applied_to(std::move(current));
        if (!applied.is_ok()) return done(applied.status());
        FlowSettings flow = std::move(applied).value();
        if (Status s = check_flow(flow, self->core_->options.max_name_bytes); !s.is_ok()) {
          return done(s);
        }
        // Flow control left off on a tube that never had it: nothing to pin, so nothing to
        // refuse for a tube that already has jobs.
        if (!pinned && !flow.any()) return done(std::move(flow));
        self->pin(tube, std::move(flow), pinned, std::move(done));
      });
}

void RedisAdmin::pin(const std::string& tube, FlowSettings flow, bool pinned,
                     Callback<FlowSettings> done) {
  std::vector<std::string> args = {"flow",
                                   tube,
                                   std::to_string(core_->home_of(tube)),
                                   std::to_string(flow.group_concurrency),
                                   flow.fair ? "1" : "0",
                                   std::to_string(flow.rate_jobs),
                                   std::to_string(flow.rate_period.count()),
                                   std::to_string(flow.rate_burst)};
  for (const auto& [group, weight] : flow.group_weights) {
    args.push_back(group);
    args.push_back(std::to_string(weight));
  }
  every_shard(std::move(args), true,
              [self = this, core = core_, state = state_, tube, flow, pinned,
               done = std::move(done)](Result<std::vector<Reply>> replies) mutable {
                if (!replies.is_ok()) {
                  if (pinned) return state->alive ? done(replies.status()) : void();
                  // Taken back where it was set (each shard only while it holds no job of the
                  // tube).
                  return self->every_shard(
                      {"unflow", tube}, true,
                      [state, failed = replies.status(), done = std::move(done)](auto) mutable {
                        if (state->alive) done(failed);
                      });
                }
                core->client->run(
                    delayq::redis::key_slot(core->names.flows),
                    Command{"HSET", core->names.flows, tube, store::encode_flow(flow)},
                    [core, state, tube, flow, done = std::move(done)](Result<Reply> reply) {
                      if (Status s = outcome(reply); !s.is_ok()) {
                        if (state->alive) done(s);
                        return;
                      }
                      core->flows[tube] = flow;
                      core->publish_conf();
                      if (state->alive) done(flow);
                    });
              });
}

// A tube exists while it holds jobs or a client here uses, watches or waits for it (a reserve
// naming it: an HTTP long-poll, a webhook's delivery); "default" always does.
bool RedisAdmin::has_jobs(const TubeStats& stats) {
  return stats.ready + stats.reserved + stats.delayed + stats.buried > 0;
}

// A tube with a webhook exists as long as the webhook does, as on a single delayqd.
bool RedisAdmin::exists(const TubeStats& stats) const {
  return has_jobs(stats) ||
         stats.using_clients + stats.watching_clients + stats.waiting_clients > 0 ||
         stats.name == "default" || core_->webhook_map.contains(stats.name);
}

std::vector<TubeStats> RedisAdmin::existing(Sums sums) const {
  // Only tubes with jobs and tubes this node's clients name can exist (the shards also remember
  // tubes long gone: with_local() is not spent on those).
  std::set<std::string> named = {"default"};
  for (const auto& [name, use] : core_->uses) named.insert(name);
  for (const auto& [name, webhook] : core_->webhook_map) named.insert(name);
  for (const auto& waiter : core_->waiters) {
    named.insert(waiter->tubes.begin(), waiter->tubes.end());
  }
  for (const auto& name : named) sums.tubes.try_emplace(name).first->second.name = name;
  std::vector<TubeStats> list;
  for (auto& [name, stats] : sums.tubes) {
    if (!has_jobs(stats) && !named.contains(name)) continue;
    TubeStats local = with_local(std::move(stats));
    if (exists(local)) list.push_back(std::move(local));
  }
  return list;
}

void RedisAdmin::list_tubes(Callback<std::vector<TubeStats>> done) {
  tube_stats({}, [self = this, state = state_, done = std::move(done)](Result<Sums> sums) {
    if (!state->alive) return;
    if (!sums.is_ok()) return done(sums.status());
    done(self->existing(std::move(sums).value()));
  });
}

void RedisAdmin::stats(Callback<ServerStats> done) {
  tube_stats({}, [self = this, state = state_, done = std::move(done)](Result<Sums> sums) mutable {
    if (!state->alive) return;
    if (!sums.is_ok()) return done(sums.status());
    ServerStats stats;
    stats.job_timeouts = sums.value().timeouts;
    for (const auto& [name, t] : sums.value().tubes) {
      stats.total_jobs += t.total_jobs;
      stats.deletes += t.deletes;
    }
    for (const auto& t : self->existing(std::move(sums).value())) {
      stats.urgent += t.urgent;
      stats.ready += t.ready;
      stats.reserved += t.reserved;
      stats.delayed += t.delayed;
      stats.buried += t.buried;
      ++stats.tubes;
    }
    // Reserves waiting on every live node: this one's as it is, the others' as they last said.
    auto core = self->core_;
    core->client->run(delayq::redis::key_slot(core->names.waiting),
                      Command{"HGETALL", core->names.waiting},
                      [core, state, stats, done = std::move(done)](Result<Reply> reply) mutable {
                        if (!state->alive) return;
                        stats.waiting = core->waiting_here();
                        if (reply.is_ok()) {
                          const auto& e = reply.value().elements;
                          for (std::size_t i = 0; i + 1 < e.size(); i += 2) {
                            if (e[i].str != core->node && core->live.contains(e[i].str)) {
                              stats.waiting += static_cast<std::uint64_t>(to_int(e[i + 1].str));
                            }
                          }
                        }
                        done(stats);
                      });
  });
}

void RedisAdmin::set_webhook(std::string tube, Webhook webhook, Callback<Webhook> done) {
  if (Status s = check(tube); !s.is_ok()) return post(std::move(done), Result<Webhook>(s));
  core_->client->run(delayq::redis::key_slot(core_->names.webhooks),
                     Command{"HSET", core_->names.webhooks, tube, store::encode_webhook(webhook)},
                     [core = core_, state = state_, tube, webhook,
                      done = std::move(done)](Result<Reply> reply) mutable {
                       if (Status s = outcome(reply); !s.is_ok()) {
                         if (state->alive) done(s);
                         return;
                       }
                       core->webhook_map[tube] = webhook;
                       core->publish_conf();
                       if (core->webhooks_handler) core->webhooks_handler();
                       if (state->alive) done(std::move(webhook));
                     });
}

void RedisAdmin::get_webhook(std::string tube, Callback<Webhook> done) {
  const auto it = core_->webhook_map.find(tube);
  if (it == core_->webhook_map.end()) {
    return post(std::move(done),
                Result<Webhook>(Status(Code::kNotFound, "tube " + tube + " has no webhook")));
  }
  post(std::move(done), Result<Webhook>(it->second));
}

void RedisAdmin::remove_webhook(std::string tube, Callback<Webhook> done) {
  const auto it = core_->webhook_map.find(tube);
  if (it == core_->webhook_map.end()) {
    return post(std::move(done),
                Result<Webhook>(Status(Code::kNotFound, "tube " + tube + " has no webhook")));
  }
  Webhook old = it->second;
  core_->client->run(delayq::redis::key_slot(core_->names.webhooks),
                     Command{"HDEL", core_->names.webhooks, tube},
                     [core = core_, state = state_, tube, old,
                      done = std::move(done)](Result<Reply> reply) mutable {
                       if (Status s = outcome(reply); !s.is_ok()) {
                         if (state->alive) done(s);
                         return;
                       }
                       core->webhook_map.erase(tube);
                       core->publish_conf();
                       if (core->webhooks_handler) core->webhooks_handler();
                       if (state->alive) done(std::move(old));
                     });
}

void RedisAdmin::tube_stats(std::vector<std::string> tubes,
                            std::function<void(Result<Sums>)> then) {
  std::vector<std::string> args = {"stats"};
  args.insert(args.end(), tubes.begin(), tubes.end());
  // Summed as each shard's rows come: a row for every tube a shard remembers, not kept.
  auto sums = std::make_shared<Sums>();
  fold_every_shard(
      core_, state_, std::move(args),
      [sums](Reply reply) {
        for (std::size_t i = 1; i < reply.elements.size(); ++i) {
          const auto& row = reply.elements[i].elements;
          if (row.size() < 9) continue;
          TubeStats& t = sums->tubes[row[0].str];
          if (t.name.empty()) t.name = row[0].str;
          const auto n = [&](std::size_t k) {
            return k < row.size() ? static_cast<std::uint64_t>(row[k].integer) : 0;
          };
          t.ready += n(1);
          t.urgent += n(2);
          t.reserved += n(3);
          t.delayed += n(4);
          t.buried += n(5);
          t.total_jobs += n(6);
          t.deletes += n(7);
          sums->timeouts += n(8);
          t.groups_held += n(9);
          t.groups_ready += n(10);
        }
      },
      [sums, then = std::move(then)](Status status) {
        if (!status.is_ok()) return then(status);
        then(std::move(*sums));
      });
}

TubeStats RedisAdmin::with_local(TubeStats stats) const {
  if (const auto it = core_->uses.find(stats.name); it != core_->uses.end()) {
    stats.using_clients = it->second.using_clients;
    stats.watching_clients = it->second.watching;
  }
  for (const auto& waiter : core_->waiters) {
    if (std::find(waiter->tubes.begin(), waiter->tubes.end(), stats.name) != waiter->tubes.end()) {
      ++stats.waiting_clients;
    }
  }
  if (const auto it = core_->pauses.find(stats.name); it != core_->pauses.end()) {
    stats.pauses = it->second.count;
    const auto left = it->second.until_unix_ms - core_->clock->now_unix_ms();
    if (left > 0) {
      stats.pause = std::chrono::seconds(it->second.seconds);
      stats.pause_left = Millis{left};
    }
  }
  if (const auto it = core_->max_attempts.find(stats.name); it != core_->max_attempts.end()) {
    stats.max_attempts = it->second;
  }
  if (const auto it = core_->flows.find(stats.name); it != core_->flows.end() && it->second.any()) {
    stats.flow = it->second;
  }
  return stats;
}

}  // namespace delayq::broker::redis
