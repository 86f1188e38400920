#include <spdlog/spdlog.h>

#include <boost/asio/post.hpp>
#include <cmath>
#include <limits>
#include <map>

#include "broker/redis/core.h"
#include "redis/slot.h"

namespace delayq::broker::redis {

// A count is deleted when its node is not live at two looks in a row (a heartbeat that sees the
// node leave is one): a node that has just started, and reported its count before its first
// heartbeat, is live by the second.
void Core::sweep_waiting() {
  client->run(delayq::redis::key_slot(names.waiting), Command{"HGETALL", names.waiting},
              [self = shared_from_this()](Result<Reply> reply) {
                if (self->closed || !reply.is_ok() || reply.value().type != ReplyType::kArray) {
                  return;
                }
                std::set<std::string> not_live;
                Command stale{"HDEL", self->names.waiting};
                const auto& e = reply.value().elements;
                for (std::size_t i = 0; i + 1 < e.size(); i += 2) {
                  if (self->live.contains(e[i].str)) continue;
                  if (self->not_live_waiting.contains(e[i].str)) {
                    stale.arg(e[i].str);
                  } else {
                    not_live.insert(e[i].str);
                  }
                }
                self->not_live_waiting = std::move(not_live);
                if (stale.size() > 2) {
                  self->client->run(delayq::redis::key_slot(self->names.waiting), std::move(stale),
                                    [](Result<Reply>) {});
                }
              });
}

void Core::keep_meta() {
  client->run(
      delayq::redis::key_slot(names.meta),
      Command{"HSETNX", names.meta, "shards", std::to_string(shards)},
      [self = shared_from_this()](Result<Reply> reply) {
        if (self->closed || !reply.is_ok() || reply.value().integer != 1) return;
        spdlog::warn(
            "redis: {} was missing (Redis lost its data?): written again, {} shards, layout {}",
            self->names.meta, self->shards, kLayout);
        self->client->run(delayq::redis::key_slot(self->names.meta),
                          Command{"HSETNX", self->names.meta, "layout", std::to_string(kLayout)},
                          [](Result<Reply>) {});
      });
}

void Core::shard_warning(const std::string& what, std::uint32_t shard, const std::string& detail) {
  ShardWarnings& kind = shard_warnings[what];
  const SteadyTime now = clock->steady_now();
  if (kind.last != SteadyTime{} && now - kind.last < std::chrono::seconds(1)) {
    ++kind.held;
    return;
  }
  kind.last = now;
  const std::size_t held = std::exchange(kind.held, 0);
  if (held == 0) {
    spdlog::warn("shard {}: {}{}", shard, what, detail);
  } else {
    spdlog::warn("shard {}: {}{} (and {} more shards since the last such line)", shard, what,
                 detail, held);
  }
}

void Core::lease_tick() {
  if (closed || resigned || leasing) return;
  leasing = true;
  lease_timer->cancel();
  heartbeat(false);
}

// The heartbeat, then the leases. Sent first as a call Redis refuses while over its maxmemory,
// which is how the node learns that it is (puts then get OUT_OF_MEMORY, and /readyz says so),
// and then again as one it runs anyway, so that the node stays alive and keeps its leases.
void Core::heartbeat(bool over_memory) {
  // A script request (not a bare command): a node lacking the library gets it and the
  // heartbeat is sent again, rather than failing until the next tick.
  delayq::redis::Request request;
  request.slot = delayq::redis::key_slot(names.nodes);
  ++calls_by_op["heartbeat"];
  request.commands.push_back(script.call(
      {names.nodes}, {"heartbeat", node, std::to_string(options.lease.count()), "", node},
      over_memory));
  request.script = &script;
  client->run(std::move(request), [self = shared_from_this(),
                                   over_memory](Result<std::vector<Reply>> replies) {
    if (self->closed || self->resigned) return;
    Result<Reply> reply =
        replies.is_ok() ? Result<Reply>(split_answer(std::move(replies.value().front())).reply)
                        : Result<Reply>(replies.status());
    if (!over_memory) {
      self->out_of_memory =
          reply.is_ok() && reply.value().is_error() && is_out_of_memory(reply.value().str);
      if (self->out_of_memory) return self->heartbeat(true);
    }
    self->leasing = false;
    const bool answered =
        reply.is_ok() && status_of(reply.value()).is_ok() && reply.value().elements.size() > 1;
    if (!answered && !self->heartbeat_failing) {
      self->heartbeat_failing = true;
      spdlog::warn(
          "redis: the heartbeat failed ({}); the node is not ready until Redis answers",
          reply.is_ok() ? status_of(reply.value()).to_string() : reply.status().to_string());
    }
    if (answered) {
      const SteadyTime now = self->clock->steady_now();
      if (std::exchange(self->heartbeat_failing, false)) {
        spdlog::info("redis: the heartbeat is answered again, {} ms after the last one",
                     std::chrono::duration_cast<Millis>(now - self->last_heartbeat).count());
        for (auto& [what, kind] : self->shard_warnings) {
          if (kind.held > 0) {
            spdlog::warn("redis: {} more shards: {}", std::exchange(kind.held, 0), what);
          }
        }
      }
      // Unheard of for longer than a lease, this node may have been taken for gone (below, by
      // the others): its count of waiting reserves is said again.
      if (now - self->last_heartbeat > self->options.lease) {
        self->reported_waiting = std::numeric_limits<std::size_t>::max();
        self->report_waiting();
      }
      self->last_heartbeat = now;
      self->keep_meta();
      const std::set<std::string> before = std::move(self->live);
      self->live.clear();
      for (const auto& name : reply.value().elements[1].elements) {
        self->live.insert(name.str);
      }
      self->count_subscribers();
      // A node whose lease lapsed left dq:nodes: seen leaving counts as a first look, and its
      // count in dq:waiting goes at the sweep, now. Every node that saw it live deletes it;
      // twice is harmless.
      bool left = false;
      for (const std::string& name : before) {
        if (!self->live.contains(name)) left = self->not_live_waiting.insert(name).second || left;
      }
      if (left || ++self->heartbeats_since_sweep >= kSweepEvery) {
        self->heartbeats_since_sweep = 0;
        self->sweep_waiting();
      }
      if (!self->announced) {
        self->announced = true;
        self->client->run(delayq::redis::key_slot(self->names.events),
                          Command{"PUBLISH", self->names.events, "l"}, [](Result<Reply>) {});
      }
    }
    const std::size_t share = self->share();
    self->renew_held();
    if (self->owned.size() > share) {
      // Hand the surplus back, so that a node that joined gets its share.
      std::size_t surplus = self->owned.size() - share;
      while (surplus-- > 0) {
        auto last = std::prev(self->owned.end());
        const std::uint32_t shard = last->first;
        self->call(shard, {"resign", self->node}, false, [](Result<Reply>) {});
        self->owned.erase(last);
        self->ownership_changed(shard);
      }
      // The others take them now rather than at their next renewal.
      self->client->run(delayq::redis::key_slot(self->names.events),
                        Command{"PUBLISH", self->names.events, "l"}, [](Result<Reply>) {});
    } else if (self->owned.size() < share && !self->walking) {
      // A walk under way reads the share again at each step: a second one beside it would
      // take more than the share when a node joined meanwhile.
      self->walking = true;
      std::vector<std::uint32_t> candidates;
      const auto offset =
          static_cast<std::uint32_t>(std::hash<std::string>{}(self->node) % self->shards);
      for (std::uint32_t i = 0; i < self->shards; ++i) {
        const std::uint32_t shard = (offset + i) % self->shards;
        if (!self->owned.contains(shard)) candidates.push_back(shard);
      }
      self->acquire(self->per_primary(candidates, [](std::uint32_t shard) { return shard; }), 0);
    }
    self->lease_timer->expires_after(self->options.lease / 3);
    self->lease_timer->async_wait([self](bool expired) {
      if (expired) self->lease_tick();
    });
  });
}

// No WAIT for renewals: one that a failover loses only ends the lease sooner (another node takes
// it, and fencing stops this one), and one held up behind a replica that stopped answering would
// lose it here.
void Core::renew_held() {
  std::vector<std::pair<std::uint32_t, std::int64_t>> held;
  for (const auto& [shard, own] : owned) held.emplace_back(shard, own.epoch);
  new_round_across_slots("renew_all");
  for (auto& part : per_primary(held, [](const auto& entry) { return entry.first; })) {
    renew_together(std::move(part));
  }
}

void Core::call_across_slots(std::uint32_t first, std::vector<std::string> args,
                             std::function<void(Result<Reply>)> done) {
  call_across_slots(first, std::move(args), std::move(done), AcrossSlotsOptions());
}

void Core::call_across_slots(std::uint32_t first, std::vector<std::string> args,
                             std::function<void(Result<Reply>)> done, AcrossSlotsOptions how) {
  const std::vector<std::string> keys =
      how.every_key ? shard_keys(names.prefix, first)
                    : std::vector<std::string>{shard_base(names.prefix, first) + ":owner"};
  args.emplace_back();  // jobs.lua's run() takes the call's number (none), then the caller, last
  args.push_back(node);
  const std::vector<std::string_view> views(args.begin(), args.end());
  delayq::redis::Request request;
  request.slot = delayq::redis::key_slot(keys.front());
  ++calls_by_op[args.front()];
  request.commands.push_back(
      script.call_across_slots(std::vector<std::string_view>(keys.begin(), keys.end()), views));
  request.script = &script;
  Lane lane{client->primary_of(request.slot),
            how.lane.empty() ? args.front() : std::move(how.lane)};
  auto send = [self = shared_from_this(), lane, request = std::move(request),
               done = std::move(done), wanted = std::move(how.wanted)]() mutable {
    if (wanted && !wanted()) {
      done(Status(Code::kIOError, "not sent: no longer wanted"));
      // Posted: a queue of such calls is gone through without growing the stack.
      asio::post(self->io, [self, lane] { self->next_across_slots(lane); });
      return;
    }
    self->client->run(std::move(request),
                      [self, lane, done = std::move(done)](Result<std::vector<Reply>> replies) {
                        if (!replies.is_ok()) {
                          done(replies.status());
                        } else if (replies.value().empty()) {
                          done(Status(Code::kIOError, "Redis: no reply"));
                        } else {
                          done(split_answer(std::move(replies.value().front())).reply);
                        }
                        self->next_across_slots(lane);
                      });
  };
  AcrossSlots& calls = across_slots[lane];
  if (calls.busy) {
    calls.waiting.emplace_back(std::move(send));
    return;
  }
  calls.busy = true;
  send();
}

void Core::next_across_slots(const Lane& lane) {
  const auto it = across_slots.find(lane);
  if (it == across_slots.end()) return;
  if (closed || it->second.waiting.empty()) {
    across_slots.erase(it);
    return;
  }
  auto send = std::move(it->second.waiting.front());
  it->second.waiting.pop_front();
  send();
}

void Core::renew_together(std::vector<std::pair<std::uint32_t, std::int64_t>> held) {
  std::erase_if(held, [&](const auto& entry) {
    const auto mine = owned.find(entry.first);
    return mine == owned.end() || mine->second.epoch != entry.second;
  });
  if (resigned || held.empty()) return;
  std::vector<std::string> args = {"renew_all", node, std::to_string(options.lease.count())};
  for (const auto& [shard, epoch] : held) {
    args.push_back(shard_base(names.prefix, shard));
    args.push_back(std::to_string(epoch));
  }
  const std::uint32_t first = held.front().first;
  call_across_slots(first, std::move(args),
                    [self = shared_from_this(), held = std::move(held)](Result<Reply> reply) {
                      if (self->closed || self->resigned) return;
                      // {'ok', {1 or 0 for each shard}}: those not renewed (fenced, or served
                      // elsewhere since the map was read, a slot migrating) are renewed one by one,
                      // as they would be without it, a few at a time (trickle()), as is every shard
                      // when the call failed.
                      std::vector<std::function<void()>> alone;
                      const auto renew_alone = [&](std::uint32_t shard, std::int64_t epoch) {
                        alone.emplace_back([self, shard, epoch] { self->renew(shard, epoch); });
                      };
                      const bool answered =
                          reply.is_ok() && reply.value().type == ReplyType::kArray &&
                          reply.value().elements.size() > 1 &&
                          reply.value().elements[0].str == "ok" &&
                          reply.value().elements[1].elements.size() == held.size();
                      for (std::size_t i = 0; answered && i < held.size(); ++i) {
                        if (reply.value().elements[1].elements[i].integer != 1) {
                          renew_alone(held[i].first, held[i].second);
                        }
                      }
                      if (!answered) {
                        for (const auto& [shard, epoch] : held) renew_alone(shard, epoch);
                      }
                      self->trickle(std::move(alone));
                    });
}

void Core::count_subscribers() {
  // Nodes that take turns (kTakesTurns) came after the shard channels: while only they are
  // live, no count is needed. It would race each node's start: its first heartbeat may reach
  // Redis before its SSUBSCRIBEs do, and a count between them took it for an older node until
  // the next heartbeat (seen on a loaded machine: every poll asked every shard meanwhile).
  if (std::all_of(live.begin(), live.end(),
                  [](const std::string& name) { return name.ends_with(kTakesTurns); })) {
    older_node_live = false;
    return;
  }
  const std::string channel = shard_channel(options.prefix, 0);
  client->run(delayq::redis::key_slot(channel), Command{"PUBSUB", "SHARDNUMSUB", channel},
              [self = shared_from_this(), alive = live.size()](Result<Reply> reply) {
                // {channel, count}
                if (self->closed || !reply.is_ok() || reply.value().elements.size() != 2) return;
                self->older_node_live = static_cast<std::size_t>(std::max<std::int64_t>(
                                            0, reply.value().elements[1].integer)) < alive;
              });
}

// A lease lost (fenced) stops its firing.
void Core::renew(std::uint32_t shard, std::int64_t epoch) {
  const auto mine = owned.find(shard);
  if (resigned || mine == owned.end() || mine->second.epoch != epoch) return;
  call(shard, {"renew", node, std::to_string(options.lease.count()), std::to_string(epoch)}, false,
       [self = shared_from_this(), shard, epoch](Result<Reply> renewed) {
         const auto held = self->owned.find(shard);
         if (renewed.is_ok() && renewed.value().type == ReplyType::kArray &&
             !renewed.value().elements.empty() && renewed.value().elements[0].str == "fenced" &&
             held != self->owned.end() && held->second.epoch == epoch) {
           self->shard_warning("lease lost", shard);
           self->owned.erase(held);
           self->ownership_changed(shard);
         }
       });
}

void Core::ownership_changed(std::uint32_t shard) {
  if (on_ownership) {
    asio::post(io, [self = shared_from_this(), shard] {
      if (!self->closed && self->on_ownership) self->on_ownership(shard);
    });
  }
  const bool moves = std::any_of(webhook_map.begin(), webhook_map.end(), [&](const auto& entry) {
    return delivery_shard(entry.first) == shard;
  });
  if (!moves) return;
  // Posted: the handler starts and ends lanes, whose sessions call back into this core.
  asio::post(io, [self = shared_from_this()] {
    if (!self->closed && self->webhooks_handler) self->webhooks_handler();
  });
}

void Core::acquire(std::vector<std::vector<std::uint32_t>> parts, std::size_t index) {
  if (closed || resigned || owned.size() >= share() || index >= parts.size()) {
    walking = false;
    return;
  }
  std::vector<std::string> args = {"acquire_all", node, std::to_string(options.lease.count()),
                                   std::to_string(share() - owned.size())};
  for (const auto shard : parts[index]) args.push_back(shard_base(names.prefix, shard));
  const std::uint32_t first = parts[index].front();
  // No WAIT, as for renewals: a lease that a failover loses is taken again, and two owners of a
  // shard fire nothing twice (the firing call moves each job once); waiting for a replica that
  // stopped answering would hold up the firing of the shards still to be taken.
  call_across_slots(
      first, std::move(args),
      [self = shared_from_this(), parts = std::move(parts), index](Result<Reply> reply) mutable {
        if (self->closed) return;
        // {'ok', {each shard's new epoch; 0 held by another, -1 not tried, -2 not served}}; a
        // call that failed took none.
        const std::vector<std::uint32_t> part = parts[index];  // parts grows below
        const bool answered = reply.is_ok() && reply.value().type == ReplyType::kArray &&
                              reply.value().elements.size() > 1 &&
                              reply.value().elements[0].str == "ok" &&
                              reply.value().elements[1].elements.size() == part.size();
        std::vector<std::uint32_t> taken;
        for (std::size_t i = 0; answered && i < part.size(); ++i) {
          const std::int64_t got = reply.value().elements[1].elements[i].integer;
          const std::uint32_t shard = part[i];
          if (got == -2 && part.size() > 1) parts.push_back({shard});
          if (got <= 0) continue;
          // Taken as the node closed, or beyond the share (a node joined while the call ran):
          // handed back at once.
          if (self->resigned || self->owned.size() >= self->share()) {
            self->call(shard, {"resign", self->node}, false, [](Result<Reply>) {});
            continue;
          }
          Owned& own = self->owned[shard];
          own.epoch = got;
          own.timer = self->clock->timer();
          spdlog::debug("shard {}: owned, epoch {}", shard, own.epoch);
          self->ownership_changed(shard);
          taken.push_back(shard);
        }
        // Their earliest timers, in one call: those due are fired at once, the others armed.
        self->look_together(std::move(taken));
        self->acquire(std::move(parts), index + 1);
      });
}

void Core::fire(std::uint32_t shard) {
  auto it = owned.find(shard);
  if (it == owned.end() || closed) return;
  Owned& own = it->second;
  if (own.firing) {
    own.again = true;
    return;
  }
  own.firing = true;
  own.again = false;
  std::vector<std::string> args = {"fire", std::to_string(own.epoch),
                                   std::to_string(options.fire_batch)};
  std::vector<std::shared_ptr<Waiter>> handed;
  if (!own.failed) handed = handed_to_call(args);
  // No WAIT: a firing a failover loses is done again by the shard's owner, from the due time.
  call(shard, std::move(args), false,
       [self = shared_from_this(), shard, handed = std::move(handed)](Result<Reply> reply) {
         const bool served = reply.is_ok() && reply.value().elements.size() > 5 &&
                             reply.value().elements[0].str == "ok";
         self->after_handing(handed, served ? &reply.value().elements[5] : nullptr);
         auto found = self->owned.find(shard);
         if (found == self->owned.end()) return;
         Owned& mine = found->second;
         mine.firing = false;
         mine.failed = !reply.is_ok();
         if (reply.is_ok() && !reply.value().elements.empty() &&
             reply.value().elements[0].str == "fenced") {
           self->shard_warning("fenced off: another node owns it", shard);
           self->owned.erase(found);
           self->ownership_changed(shard);
           return;
         }
         if (!reply.is_ok() || reply.value().type != ReplyType::kArray ||
             reply.value().elements.size() < 5) {
           if (!reply.is_ok())
             self->shard_warning("firing failed", shard, ": " + reply.status().to_string());
           return self->arm_fire(shard, Millis{100});
         }
         const auto& elements = reply.value().elements;
         for (const auto& late : elements[4].elements) {  // microseconds
           self->fire_lateness.observe(static_cast<double>(to_int(late.str)) / 1e6);
         }
         const auto moved = elements[1].integer;
         const double head = to_ms(elements[2].str, -1);
         const double now = to_ms(elements[3].str, 0);
         self->set_overdue(shard, head, now);
         self->saw_redis_clock(mine, now);
         if (mine.again || moved >= static_cast<std::int64_t>(self->options.fire_batch)) {
           return self->fire(shard);
         }
         // Until the next timer's microsecond by Redis's clock, counted from the call's present.
         // A timer made earlier meanwhile (a put, a reservation) is told on the shard's channel:
         // while that is not subscribed, the owner looks every resync instead.
         const bool told = self->client->shard_channel_subscribed(shard);
         if (head < 0 && told) {  // until a message, or the periodic look (resync())
           mine.armed_at.reset();
           mine.timer->cancel();
           return;
         }
         std::chrono::microseconds delay = self->options.resync;
         if (head >= 0) {
           const std::chrono::microseconds until = self->until_timer(head, now);
           delay = told ? until : std::min(until, delay);
         }
         self->arm_fire(shard, delay);
       });
}

// A reserve waiting here for tubes of which no shard is known to hold a ready job would be woken
// by what a firing or a put makes ready, and then reserve it: one more round trip to Redis
// between the due time (or the put) and the worker. So the call reserves for it: the longest
// waiting first, a few at a time (each costs the call a look at its tubes), and only while
// nothing is known elsewhere, so that one never gets a worse job than another shard holds.
// Appends `holder n tube...` for each to `args` (jobs.lua's serve()); for a put, `only` the
// waiters of the tubes it puts ready jobs in.
std::vector<std::shared_ptr<Waiter>> Core::handed_to_call(std::vector<std::string>& args,
                                                          const std::set<std::string>* only) {
  constexpr std::size_t kMostWaiters = 8;
  constexpr std::size_t kMostLooked = 32;  // waiters of the call's tubes looked at, handed or not
  constexpr std::size_t kMostTubes = 8;
  const SteadyTime now = clock->steady_now();
  const auto lately = [&](const Hint& h) {
    return h.readied_at != SteadyTime{} && now - h.readied_at < kReadiedLately;
  };
  // A firing with no tube readied lately (the node's first, jobs that come once in a while):
  // the longest waiting, whatever their tubes.
  const bool any_tube =
      only == nullptr &&
      std::none_of(hints.begin(), hints.end(), [&](const auto& e) { return lately(e.second); });
  const auto for_this_call = [&](const std::string& tube) {
    if (only != nullptr) return only->contains(tube);
    if (any_tube) return true;
    const auto it = hints.find(tube);
    return it != hints.end() && lately(it->second);
  };
  std::vector<std::shared_ptr<Waiter>> handed;
  std::unordered_map<std::string, bool> empty;  // tube -> no shard known to hold a ready job
  std::size_t looked = 0;
  // Looks at one waiter; false once enough were.
  const auto consider = [&](const std::shared_ptr<Waiter>& waiter) {
    if (handed.size() == kMostWaiters || looked == kMostLooked) return false;
    if (waiter->finished || waiter->trying ||
        std::none_of(waiter->tubes.begin(), waiter->tubes.end(), for_this_call)) {
      return true;
    }
    const auto tubes = open_tubes(*waiter);
    if (tubes.empty() || tubes.size() > kMostTubes) return true;
    if (std::none_of(tubes.begin(), tubes.end(), for_this_call)) return true;
    ++looked;
    const bool nothing_known = std::all_of(tubes.begin(), tubes.end(), [&](const auto& tube) {
      const auto [it, inserted] = empty.try_emplace(tube, false);
      if (inserted) {
        it->second = !hint(tube).any();
      }
      return it->second;
    });
    if (!nothing_known) return true;
    waiter->trying = true;
    waiter->handed = true;
    waiter->again = false;
    args.push_back(waiter->session->holder);
    args.push_back(std::to_string(tubes.size()));
    args.insert(args.end(), tubes.begin(), tubes.end());
    handed.push_back(waiter);
    return true;
  };
  if (any_tube) {
    for (const auto& waiter : waiters) {
      if (!consider(waiter)) break;
    }
    return handed;
  }
  // Those waiting for the call's tubes, in the order they came, from the tubes' own lists (a
  // node may hold thousands of reserves of other tubes, which are not walked): the first few
  // idle of each.
  std::vector<const std::shared_ptr<Waiter>*> candidates;
  const auto gather = [&](const std::string& tube) {
    std::size_t taken = 0;
    for (const auto& waiter : waiters_of_tube(tube)) {
      if (taken == 2 * kMostLooked) break;
      if (waiter->finished || waiter->trying) continue;
      candidates.push_back(&waiter);
      ++taken;
    }
  };
  if (only != nullptr) {
    for (const auto& tube : *only) gather(tube);
  } else {
    for (const auto& [tube, h] : hints) {
      if (lately(h)) gather(tube);
    }
  }
  std::sort(candidates.begin(), candidates.end(),
            [](const auto* a, const auto* b) { return (*a)->arrival < (*b)->arrival; });
  const std::shared_ptr<Waiter>* last = nullptr;
  for (const auto* waiter : candidates) {
    if (last != nullptr && *last == *waiter) continue;  // of two of the call's tubes
    last = waiter;
    if (!consider(*waiter)) break;
  }
  return handed;
}

void Core::after_handing(const std::vector<std::shared_ptr<Waiter>>& handed, const Reply* served) {
  for (std::size_t i = 0; i < handed.size(); ++i) {
    const auto& waiter = handed[i];
    waiter->trying = false;
    waiter->handed = false;
    const Reply* job =
        served != nullptr && i < served->elements.size() ? &served->elements[i] : nullptr;
    if (job != nullptr && job->type == ReplyType::kArray) {
      // (A waiter that went away meanwhile: finish() undoes the reservation.)
      auto got = job_of(*job);
      if (got.is_ok()) {
        if (const auto it = hints.find(got.value().view.tube); it != hints.end()) {
          it->second.readied_at = clock->steady_now();
        }
      }
      finish(waiter, std::move(got));
    } else if (waiter->finished) {
      pass_on(open_tubes(*waiter));
    } else {
      // What the node knows may have changed during the call: a try (which costs no call when
      // no shard is known to hold a job of its tubes) goes by it, and waits again if need be.
      try_reserve(waiter);
    }
  }
}

void Core::arm_fire(std::uint32_t shard, std::chrono::microseconds delay) {
  auto it = owned.find(shard);
  if (it == owned.end()) return;
  it->second.armed_at = clock->steady_now() + delay;
  it->second.timer->expires_after(delay);
  it->second.timer->async_wait([self = shared_from_this(), shard](bool expired) {
    if (!expired) return;
    if (auto mine = self->owned.find(shard); mine != self->owned.end()) {
      mine->second.armed_at.reset();
    }
    self->fire(shard);
  });
}

void Core::look_together(std::vector<std::uint32_t> part) {
  if (closed || part.empty()) return;
  std::vector<std::string> args = {"look_all"};
  for (const auto shard : part) args.push_back(shard_base(names.prefix, shard));
  const std::uint32_t first = part.front();
  call_across_slots(
      first, std::move(args),
      [self = shared_from_this(), part = std::move(part)](Result<Reply> answer) {
        if (self->closed) return;
        if (answer.is_ok()) {
          const Reply& reply = answer.value();
          if (reply.type == ReplyType::kArray && reply.elements.size() > 2 &&
              reply.elements[0].str == "ok" && reply.elements[1].elements.size() == part.size()) {
            const double now = to_ms(reply.elements[2].str, 0);
            std::vector<std::function<void()>> alone;
            for (std::size_t i = 0; i < part.size(); ++i) {
              const auto earliest = to_int(reply.elements[1].elements[i].str, -2);
              if (earliest == -2) {
                alone.emplace_back([self, shard = part[i]] { self->look_alone(shard); });
              } else {
                self->looked(part[i], earliest, now);
              }
            }
            return self->trickle(std::move(alone));
          }
        }
        // A few at a time (trickle()): the primary that failed to answer may be busy.
        std::vector<std::function<void()>> alone;
        for (const auto shard : part) {
          alone.emplace_back([self, shard] { self->look_alone(shard); });
        }
        self->trickle(std::move(alone));
      });
}

void Core::tidy_owned() {
  std::vector<std::uint32_t> held;
  for (const auto& [shard, own] : owned) held.push_back(shard);
  for (auto& part : per_primary(held, [](std::uint32_t shard) { return shard; })) {
    tidy_together(std::move(part));
  }
}

void Core::tidy_together(std::vector<std::uint32_t> part) {
  if (closed || part.empty()) return;
  std::vector<std::string> args = {"tidy_all", std::to_string(options.forget_empty_tubes.count()),
                                   std::to_string(kTubesPerTidy)};
  for (const auto shard : part) args.push_back(shard_base(names.prefix, shard));
  // Unanswered, or a shard not served there ('-2'): the next look tries again.
  call_across_slots(
      part.front(), std::move(args),
      [self = shared_from_this(), part](Result<Reply> reply) {
        if (self->closed || !reply.is_ok() || reply.value().elements.size() < 2) return;
        const auto& counts = reply.value().elements[1].elements;
        std::vector<std::uint32_t> left;  // '-1': the budget ran out before or in its look
        for (std::size_t i = 0; i < counts.size() && i < part.size(); ++i) {
          if (counts[i].type != ReplyType::kInteger) {
            if (counts[i].str == "-1") left.push_back(part[i]);
          } else if (counts[i].integer > 0) {
            spdlog::debug("shard {}: {} tubes that held nothing forgotten", part[i],
                          counts[i].integer);
          }
        }
        self->tidy_together(std::move(left));
      },
      {.every_key = true, .lane = {}, .wanted = {}});
}

void Core::look_alone(std::uint32_t shard) {
  if (owned.contains(shard)) return fire(shard);
  call(shard, {"overdue"}, false, [self = shared_from_this(), shard](Result<Reply> reply) {
    if (!reply.is_ok() || reply.value().elements.size() < 3) return;
    self->set_overdue(shard, static_cast<double>(to_int(reply.value().elements[1].str, -1)),
                      to_ms(reply.value().elements[2].str, 0));
  });
}

void Core::looked(std::uint32_t shard, std::int64_t earliest_ms, double now_ms) {
  const auto earliest = static_cast<double>(earliest_ms);
  set_overdue(shard, earliest, now_ms);
  const auto mine = owned.find(shard);
  if (mine == owned.end()) return;
  saw_redis_clock(mine->second, now_ms);
  if (earliest_ms < 0) return;
  if (earliest <= now_ms) return fire(shard);
  const std::chrono::microseconds in = until_timer(earliest, now_ms);
  if (!mine->second.firing &&
      (!mine->second.armed_at || *mine->second.armed_at > clock->steady_now() + in)) {
    arm_fire(shard, in);
  }
}

namespace {

// A steady time point in milliseconds, with their fraction, to set against Redis's clock.
double ms_of(SteadyTime at) {
  return std::chrono::duration<double, std::milli>(at.time_since_epoch()).count();
}

}  // namespace

void Core::saw_redis_clock(Owned& own, double now_ms) {
  if (now_ms <= 0) return;
  const SteadyTime at = clock->steady_now();
  const double ahead = now_ms - ms_of(at);
  // Each answer is short by its way back; the largest within the window is the nearest. Older
  // ones give way, so that the two clocks' drift (or a step of Redis's) counts within seconds.
  if (!own.redis_clock_seen || at - *own.redis_clock_seen > 2 * look_period() ||
      ahead > own.redis_ahead_ms) {
    own.redis_ahead_ms = ahead;
    own.redis_clock_seen = at;
  }
}

void Core::told_timer(std::uint32_t shard, double at_ms) {
  const auto mine = owned.find(shard);
  if (mine == owned.end()) return;
  Owned& own = mine->second;
  const SteadyTime now = clock->steady_now();
  if (own.firing || at_ms < 0 || !own.redis_clock_seen ||
      now - *own.redis_clock_seen > 3 * look_period() || client->unsettled(shard_slot(shard))) {
    return fire(shard);
  }
  // Armed a little late rather than early (the clock as seen is behind Redis's by the answer's
  // way back); one armed early would find nothing due and be armed again from its answer.
  const double redis_now = ms_of(now) + own.redis_ahead_ms;
  if (at_ms <= redis_now) return fire(shard);
  const std::chrono::microseconds in = until_timer(at_ms, redis_now);
  if (!own.armed_at || *own.armed_at > now + in) arm_fire(shard, in);
}

// "r dq:{s} tube node head": tube's best ready job in shard s is now `head` (Head::parse()), by
// a call of `node` (which learnt it from the call's answer: heard_ready()). Nodes of
// older versions sent "r dq:{s} tube [node]" when the tube's ready set stopped being empty: the
// head is then unknown. "h dq:{s} tube node head": a reserve or delete of `node` took the tube's
// best ready job in shard s, whose best is now `head` (empty: none). "p dq:{s} tube node next
// head [passer]": the turn at that job passes to node `next` (take_turn()), from `passer` if it
// has no reserve of the tube; "w tube node": `node` has one now. "t dq:{s} at": shard s has a
// timer earlier than it had. "c": a tube's configuration changed. "l": a node gave leases up.
void Core::on_event(const std::string& payload) {
  if (payload == "c") {
    load_conf([](Status) {});
    return;
  }
  if (payload == "l") {
    lease_tick();
    return;
  }
  if (payload.starts_with("w ")) {  // "w tube node": `node` has a reserve of `tube` now
    const auto space = payload.rfind(' ');
    const auto it = without_waiters.find(std::string_view(payload).substr(2, space - 2));
    if (space > 2 && it != without_waiters.end()) {
      it->second.erase(payload.substr(space + 1));
      if (it->second.empty()) without_waiters.erase(it);
    }
    return;
  }
  if (payload.size() < 4 || payload[1] != ' ') return;
  const auto open = payload.find('{');
  const auto close = payload.find('}', open);
  if (open == std::string::npos || close == std::string::npos) return;
  const auto shard = static_cast<std::uint32_t>(
      to_int(std::string_view(payload).substr(open + 1, close - open - 1)));
  const std::string rest = close + 2 <= payload.size() ? payload.substr(close + 2) : std::string();
  if (payload[0] == 'r') {
    const std::string_view fields(rest);
    const auto space = fields.find(' ');
    const std::string_view tube = fields.substr(0, space);
    std::string_view from;
    std::string_view head = "?";
    if (space != std::string_view::npos) {
      from = fields.substr(space + 1);
      if (const auto second = from.find(' '); second != std::string_view::npos) {
        head = from.substr(second + 1);
        from = from.substr(0, second);
      }
    }
    heard_ready(shard, std::string(tube), from, head);
  } else if (payload[0] == 'h') {
    // "tube from head": the same fields as 'r'; the head may be "" (none left).
    const std::string_view fields(rest);
    const auto first = fields.find(' ');
    const auto second = first == std::string_view::npos ? first : fields.find(' ', first + 1);
    if (second == std::string_view::npos) return;
    const std::string_view from = fields.substr(first + 1, second - first - 1);
    heard_head(shard, std::string(fields.substr(0, first)), from, fields.substr(second + 1));
  } else if (payload[0] == 'p') {
    // "tube from next head": the turn at the job passes to `next`.
    std::vector<std::string_view> fields;
    std::string_view left(rest);
    while (!left.empty() && fields.size() < 4) {
      const auto space = left.find(' ');
      fields.push_back(left.substr(0, space));
      left = space == std::string_view::npos ? std::string_view() : left.substr(space + 1);
    }
    if (fields.size() < 4) return;
    // A sixth field: the node that passed, which has no reserve of the tube. (This node, if it
    // has one since: said again, in case its "w" reached some before the pass.)
    const std::string tube(fields[0]);
    if (!left.empty() && left != node) {
      without_waiters[tube].insert(std::string(left));
    } else if (left == node && hints.contains(tube)) {
      say_waiting_for(tube);
    }
    if (fields[2] == node) take_turn(shard, tube, fields[1], fields[3]);
  } else if (payload[0] == 't') {
    told_timer(shard, to_ms(rest, -1));
  } else if (payload[0] == 's' && owned.contains(shard) && on_schedule_changed) {
    on_schedule_changed(shard, rest);
  }
}

void Core::resync() {
  if (closed) return;
  forget_voided();
  if (const auto refused = client->shard_subscribe_error(); refused != subscribe_refused) {
    subscribe_refused = refused;
    if (!refused.empty()) {
      spdlog::warn(
          "redis: the shard channels cannot be subscribed ({}): reserves here hear of jobs "
          "made ready through other nodes only every 5 s (an ACL must allow the channels "
          "{}:{{*}}:events)",
          refused, options.prefix);
    }
  }
  // An owned shard whose channel is not subscribed (it broke since the shard's last firing) is
  // looked at every resync, as fire() arms it.
  for (auto& [shard, own] : owned) {
    if (!own.armed_at && !own.firing && !client->shard_channel_subscribed(shard)) {
      arm_fire(shard, options.resync);
    }
  }
  // Nodes left out of turns for want of waiters count again at each look: a "w" that came
  // before the pass it answers, or was lost, leaves one out for a few seconds at most.
  without_waiters.clear();
  std::set<std::string> waited;
  for (const auto& waiter : waiters) waited.insert(waiter->tubes.begin(), waiter->tubes.end());
  // The hints of tubes no reserve here waits for, no session here watches and no webhook
  // delivers go (a few KiB each): a node must not keep something for every tube it heard of.
  std::erase_if(hints, [&](const auto& entry) {
    const auto& [tube, h] = entry;
    if (waited.contains(tube) || webhook_map.contains(tube)) return false;
    if (const auto use = uses.find(tube); use != uses.end() && use->second.watching > 0) {
      return false;
    }
    return std::all_of(h.trying.begin(), h.trying.end(), [](std::uint32_t n) { return n == 0; });
  });
  wake_known();
  // Every tube a reserve waits for is looked for again (one probe round per tube, shared by its
  // waiters) in each shard whose channel the PINGs cannot vouch for (sync_shards(), as a poll
  // about to time out does): what a lost message hid, they find. A channel that broke was
  // subscribed again meanwhile, which made its shard's best unknown already.
  if (!waited.empty()) {
    client->sync_shards([self = shared_from_this(), waited](std::vector<bool> held) {
      if (self->closed) return;
      const bool older = self->older_node_recent();
      // And each shard whose best is unknown (a call's answer lost): no message will tell.
      std::vector<std::uint32_t> which;
      for (std::uint32_t shard = 0; shard < self->shards; ++shard) {
        const bool unknown = std::any_of(waited.begin(), waited.end(), [&](const auto& tube) {
          return self->hint(tube).head(shard).kind == Head::Kind::kUnknown;
        });
        if (older || unknown || shard >= held.size() || !held[shard]) which.push_back(shard);
      }
      if (which.empty()) return;
      for (const auto& tube : waited) {
        if (self->paused(tube)) continue;
        self->probe_shards(
            {tube}, which,
            [self](bool found) {
              if (found) self->pump();
            },
            true);
      }
    });
  }
  // Every shard's earliest timer, for the overdue gauge: seen from every node, so that a shard
  // its owner stopped firing shows on the others' pages too. For the shards it owns, the bound
  // on what a lost message, or a call from a node of an older version (which tells no
  // reservation's end), can delay. In calls of kShardsPerCall shards of one primary.
  if (const auto now = clock->steady_now();
      !last_tidy || now - *last_tidy >= options.forget_empty_tubes / 6) {
    last_tidy = now;
    tidy_owned();
  }
  shard_overdue.resize(shards);
  new_round_across_slots("look_all");
  for (auto& part : per_primary(every_shard_number(), [](std::uint32_t shard) { return shard; })) {
    look_together(std::move(part));
  }
  resync_timer->expires_after(look_period());
  resync_timer->async_wait([self = shared_from_this()](bool expired) {
    if (expired) self->resync();
  });
}

}  // namespace delayq::broker::redis
