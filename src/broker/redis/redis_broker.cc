#include "broker/redis/redis_broker.h"

#include <spdlog/spdlog.h>
#include <unistd.h>

#include <random>
#include <thread>

#include "broker/families.h"
#include "broker/redis/admin.h"
#include "broker/redis/jobs_lua.h"
#include "broker/redis/schedules.h"
#include "broker/redis/session.h"
#include "redis/slot.h"

namespace delayq::broker::redis {

Core::Core(asio::io_context& io_in, RedisBrokerOptions options_in,
           std::unique_ptr<Caller> client_in, std::shared_ptr<Clock> clock_in)
    : io(io_in),
      options(std::move(options_in)),
      client(std::move(client_in)),
      clock(std::move(clock_in)),
      script(std::string(kJobsLua)),
      names(options.prefix),
      own_metrics(options.metrics == nullptr ? std::make_unique<metrics::Registry>() : nullptr),
      registry(options.metrics != nullptr ? *options.metrics : *own_metrics),
      fire_lateness(broker::fire_lateness(registry)),
      prefetches(registry.counters("delayq_prefetches_total",
                                   "Redis mode: jobs a worker's delete reserved for its next "
                                   "reserve (--redis-prefetch, or a reserve sent in the same "
                                   "write), by outcome (taken, or given back: not asked for in "
                                   "time, or not fitting the reserve).",
                                   metrics::Kind::kCounter, {"outcome"})) {
  last_heartbeat = started = clock->steady_now();
  replica_timer = clock->timer();
  report_timer = clock->timer();
  lease_timer = clock->timer();
  resync_timer = clock->timer();
  conf_timer = clock->timer();
  coarse = std::make_unique<CoarseTimers>(*clock, Millis{10});
}

namespace {

// What is stored is of layout 2 (timer pages, MessagePack records; jobs.lua), marked "layout" in
// dq:meta. A cluster from before the mark holds layout 1, which is upgraded here, shard by
// shard, once none of its nodes is alive (they would not read layout 2); a newer layout is
// refused. `wait` runs the event loop until its argument is set.
template <typename Wait>
Status check_layout(Core& core, bool first_start, const Wait& wait) {
  // A command on the primary serving `key`'s slot.
  const auto ask = [&](const std::string& key, Command command) -> Result<Reply> {
    std::optional<Result<Reply>> answer;
    core.client->run(delayq::redis::key_slot(key), std::move(command),
                     [&](Result<Reply> r) { answer.emplace(std::move(r)); });
    wait(answer);
    if (answer->is_ok() && answer->value().is_error()) {
      return Status(Code::kIOError, "redis: " + answer->value().str);
    }
    return std::move(*answer);
  };
  if (first_start) {
    return ask(core.names.meta, Command{"HSET", core.names.meta, "layout", std::to_string(kLayout)})
        .status();
  }
  // Layout 1 until marked. Its nodes must be gone: wait up to two leases for their
  // announcements to lapse (and look at the mark again each time: another new node may have
  // upgraded meanwhile, and be the live node seen).
  const auto deadline = core.clock->steady_now() + core.options.lease * 2;
  for (;;) {
    auto layout = ask(core.names.meta, Command{"HGET", core.names.meta, "layout"});
    if (!layout.is_ok()) return layout.status();
    if (!layout.value().is_nil()) {
      const auto version = to_int(layout.value().str);
      if (version == kLayout) return Status::ok();
      return Status(Code::kUnknownFormat, "the cluster's jobs are stored in layout " +
                                              layout.value().str + ", newer than this delayqd's (" +
                                              std::to_string(kLayout) +
                                              "): run a delayqd as new as the one that wrote them");
    }
    auto time = ask(core.names.nodes, Command{"TIME"});
    if (!time.is_ok()) return time.status();
    auto nodes =
        ask(core.names.nodes, Command{"ZRANGE", core.names.nodes, "0", "-1", "WITHSCORES"});
    if (!nodes.is_ok()) return nodes.status();
    const auto& t = time.value().elements;
    const std::int64_t now_ms =
        t.size() == 2 ? to_int(t[0].str) * 1000 + to_int(t[1].str) / 1000 : 0;
    std::string alive;
    const auto& entries = nodes.value().elements;
    for (std::size_t i = 0; i + 1 < entries.size(); i += 2) {
      if (to_int(entries[i + 1].str) > now_ms)
        alive += (alive.empty() ? "" : ", ") + entries[i].str;
    }
    if (alive.empty()) break;
    if (core.clock->steady_now() >= deadline) {
      return Status(Code::kConflict,
                    "the cluster's jobs are stored in layout 1, which this delayqd upgrades at "
                    "its start once no older node runs; still running: " +
                        alive + " (docs/redis-mode.md, \"Layouts and upgrades\")");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
  }
  for (std::uint32_t shard = 0; shard < core.shards; ++shard) {
    for (std::int64_t from = 0; from >= 0;) {
      std::optional<Result<Reply>> answer;
      core.call(shard, {"upgrade", std::to_string(from)}, true,
                [&](Result<Reply> r) { answer.emplace(std::move(r)); });
      wait(answer);
      if (!answer->is_ok()) return answer->status();
      const auto& reply = answer->value();
      if (reply.elements.size() < 2 || reply.elements[0].str != "ok") {
        return Status(Code::kIOError, "redis: shard " + std::to_string(shard) +
                                          " could not be upgraded: " + reply.str);
      }
      from = reply.elements[1].type == ReplyType::kInteger ? reply.elements[1].integer : -1;
    }
  }
  if (Status s =
          ask(core.names.meta, Command{"HSET", core.names.meta, "layout", std::to_string(kLayout)})
              .status();
      !s.is_ok()) {
    return s;
  }
  spdlog::info("redis: jobs upgraded from layout 1 to layout {} ({} shards)", kLayout, core.shards);
  return Status::ok();
}

}  // namespace

Result<std::unique_ptr<RedisBroker>> RedisBroker::open(asio::io_context& io,
                                                       RedisBrokerOptions options) {
  if (Status s = check_prefix(options.prefix); !s.is_ok()) return s;
  if (options.shards == 0 || options.shards > 16384) {
    return Status(Code::kInvalidArgument, "shards must be 1 to 16384");
  }
  auto client = client_caller(io.get_executor(), options.client);
  return open(io, std::move(options), std::move(client), timing::system_clock(io));
}

Result<std::unique_ptr<RedisBroker>> RedisBroker::open(asio::io_context& io,
                                                       RedisBrokerOptions options,
                                                       std::unique_ptr<Caller> client,
                                                       std::shared_ptr<Clock> clock) {
  if (Status s = check_prefix(options.prefix); !s.is_ok()) return s;
  if (options.shards == 0 || options.shards > 16384) {
    return Status(Code::kInvalidArgument, "shards must be 1 to 16384");
  }
  auto core = std::make_shared<Core>(io, std::move(options), std::move(client), std::move(clock));
  std::random_device random;
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  core->node = std::string(host) + ":" + std::to_string(::getpid()) + ":" +
               std::to_string(random() % 1000000) + std::string(Core::kTakesTurns);

  // Runs io until `done` is set; each step is bounded by the client's request timeout.
  const auto wait = [&io](const auto& done) {
    io.restart();
    while (!done.has_value() && !io.stopped()) io.run_one();
  };
  std::optional<Status> started;
  core->client->start([&](Status s) { started = std::move(s); });
  wait(started);
  if (!started->is_ok()) return *started;

  for (const auto& address : core->client->primaries()) {
    // The jobs' code is a function library (FCALL): Redis 7.0 or later.
    std::optional<Result<Reply>> server;
    core->client->run_at(address, Command{"INFO", "server"},
                         [&](Result<Reply> r) { server.emplace(std::move(r)); });
    wait(server);
    if (!server->is_ok()) return server->status();
    const std::string& info = server->value().str;
    if (const auto at = info.find("redis_version:"); at != std::string::npos) {
      const std::string version = info.substr(at + 14, info.find_first_of("\r\n", at) - at - 14);
      if (to_int(version.substr(0, version.find('.'))) < 7) {
        return Status(Code::kInvalidArgument, "redis " + address + " is version " + version +
                                                  ": delayq needs Redis 7.0 or later (functions)");
      }
    }
    // A Redis that evicts keys under memory pressure would drop jobs: refuse it.
    std::optional<Result<Reply>> policy;
    core->client->run_at(address, Command{"CONFIG", "GET", "maxmemory-policy"},
                         [&](Result<Reply> r) { policy.emplace(std::move(r)); });
    wait(policy);
    if (!policy->is_ok()) return policy->status();
    const Reply& reply = policy->value();
    if (reply.is_error()) {
      spdlog::warn("redis {}: cannot check maxmemory-policy ({}); it must be noeviction", address,
                   reply.str);
    } else if (reply.elements.size() == 2 && reply.elements[1].str != "noeviction") {
      return Status(Code::kInvalidArgument, "redis " + address + " has maxmemory-policy " +
                                                reply.elements[1].str +
                                                ": it may evict jobs; delayq needs noeviction");
    }
    std::optional<Result<Reply>> aof;
    core->client->run_at(address, Command{"CONFIG", "GET", "appendonly"},
                         [&](Result<Reply> r) { aof.emplace(std::move(r)); });
    wait(aof);
    if (aof->is_ok() && aof->value().elements.size() == 2 && aof->value().elements[1].str == "no") {
      spdlog::warn(
          "redis {}: appendonly is off: a restart of it loses jobs since its last snapshot",
          address);
    }
  }
  std::optional<bool> checked;
  core->check_replicas([&] { checked = true; });
  wait(checked);
  for (const auto& [address, online] : core->replicas) {
    if (online == 0) {
      spdlog::warn("redis {}: no replica: if it fails, its jobs are gone until it comes back",
                   address);
    }
  }

  // The layout: the shard count is the first start's.
  std::optional<Result<Reply>> meta;
  core->client->run(
      delayq::redis::key_slot(core->names.meta),
      Command{"HSETNX", core->names.meta, "shards", std::to_string(core->options.shards)},
      [&](Result<Reply> r) { meta.emplace(std::move(r)); });
  wait(meta);
  if (!meta->is_ok()) return meta->status();
  const bool first_start = meta->value().integer == 1;
  meta.reset();
  core->client->run(delayq::redis::key_slot(core->names.meta),
                    Command{"HGET", core->names.meta, "shards"},
                    [&](Result<Reply> r) { meta.emplace(std::move(r)); });
  wait(meta);
  if (!meta->is_ok()) return meta->status();
  core->shards = static_cast<std::uint32_t>(to_int(meta->value().str));
  if (core->shards == 0) return Status(Code::kCorruption, "dq:meta holds no shard count");
  if (core->shards != core->options.shards) {
    spdlog::warn(
        "the cluster's layout has {} shards (set at its first start); --redis-shards {} "
        "is ignored",
        core->shards, core->options.shards);
  }
  if (Status s = check_layout(*core, first_start, wait); !s.is_ok()) return s;

  std::optional<Status> conf;
  core->load_conf([&](Status s) { conf = std::move(s); });
  wait(conf);
  if (!conf->is_ok()) return *conf;

  std::weak_ptr<Core> weak = core;
  core->client->subscribe(
      std::string(core->names.events),
      [weak](std::string payload) {
        auto self = weak.lock();
        if (!self) return;
        if (payload.starts_with("r ") || payload.starts_with("t ")) {
          self->older_node_heard = self->clock->steady_now();
        }
        self->on_event(payload);
      },
      [weak] {
        auto self = weak.lock();
        if (!self) return;
        // Messages may have been lost while unsubscribed: look everywhere again.
        for (auto& [tube, h] : self->hints) self->forget_heads(h);
        ++self->looks_again;
        self->pump();
        for (auto& [shard, own] : self->owned) self->fire(shard);
      });
  std::vector<std::string> channels;
  for (std::uint32_t shard = 0; shard < core->shards; ++shard) {
    channels.push_back(shard_channel(core->options.prefix, shard));
  }
  core->client->subscribe_shards(
      std::move(channels),
      [weak](std::size_t, std::string payload) {
        if (auto self = weak.lock()) self->on_event(payload);
      },
      [weak](std::size_t index) {
        auto self = weak.lock();
        if (!self) return;
        // The shard's messages may have been lost while unsubscribed: look there again.
        const auto shard = static_cast<std::uint32_t>(index);
        for (auto& [tube, h] : self->hints) Core::forget_head(h, shard);
        ++self->looks_again;
        self->pump();
        if (auto own = self->owned.find(shard); own != self->owned.end()) {
          own->second.redis_clock_seen.reset();  // it may have moved to another primary
          self->fire(shard);
        }
      });
  core->lease_tick();
  core->resync();
  io.restart();
  spdlog::info("redis: {} primaries, {} shards, node {}", core->client->primaries().size(),
               core->shards, core->node);
  return std::unique_ptr<RedisBroker>(new RedisBroker(std::move(core)));
}

RedisBroker::~RedisBroker() {
  schedules_->stop();
  core_->closed = true;
  core_->replica_timer->cancel();
  core_->report_timer->cancel();
  core_->lease_timer->cancel();
  core_->resync_timer->cancel();
  for (auto& [shard, own] : core_->owned) own.timer->cancel();
  core_->across_slots.clear();  // calls waiting to be sent hold the core
  // Requests under way hold the core through their completions, and the client's connections
  // hold those: closing them breaks the cycle.
  core_->client->close();
}

std::unique_ptr<broker::Session> RedisBroker::open_session(broker::SessionOptions options) {
  return std::make_unique<RedisSession>(core_, options);
}

std::unique_ptr<broker::Admin> RedisBroker::open_admin() {
  return std::make_unique<RedisAdmin>(core_);
}

void RedisBroker::set_draining(bool draining) {
  core_->draining = draining;
}
bool RedisBroker::draining() const {
  return core_->draining;
}
Status RedisBroker::health() const {
  if (core_->out_of_memory) {
    return {Code::kNoSpace, "Redis is out of memory (over its maxmemory): writes are refused"};
  }
  if (core_->draining) return {Code::kDraining, "draining"};
  // No heartbeat answered for a whole lease: Redis is out of reach (and this node's shards may
  // be another's by now).
  const auto silent = core_->clock->steady_now() - core_->last_heartbeat;
  if (silent > core_->options.lease) {
    return {Code::kIOError,
            "Redis has not answered for " +
                std::to_string(std::chrono::duration_cast<std::chrono::seconds>(silent).count()) +
                " s"};
  }
  return Status::ok();
}
broker::Seconds RedisBroker::uptime() const {
  return std::chrono::duration_cast<broker::Seconds>(core_->clock->steady_now() - core_->started);
}
RedisBroker::RedisBroker(std::shared_ptr<Core> core)
    : core_(std::move(core)),
      shard_families_(core_->registry.collect([this](metrics::Page& page) {
        page.family("delayq_shard_overdue_seconds",
                    "How far a shard's earliest timer is behind the present (0: none is); one "
                    "that keeps growing is not being fired.",
                    "gauge");
        for (std::size_t shard = 0; shard < core_->shard_overdue.size(); ++shard) {
          page.sample("delayq_shard_overdue_seconds", {{"shard", std::to_string(shard)}},
                      core_->shard_overdue[shard]);
        }
        page.family("delayq_shard_channels_subscribed",
                    "Shards whose channel this node is subscribed to (of "
                    "delayq_shard_overdue_seconds' shards): one that is not wakes reserves here "
                    "late.",
                    "gauge");
        page.sample("delayq_shard_channels_subscribed",
                    static_cast<std::int64_t>(core_->client->shard_channels_subscribed()));
        page.family("delayq_shards_owned",
                    "Shards whose lease this node holds: it fires their timers. Over the live "
                    "nodes they add up to the shards once the leases settle.",
                    "gauge");
        page.sample("delayq_shards_owned", static_cast<std::int64_t>(core_->owned.size()));
        page.family("delayq_redis_calls_sent_again_total",
                    "Calls to Redis sent again after their connection broke once they were sent "
                    "(their answers lost; a call that changes something is answered as it ran).",
                    "counter");
        const delayq::redis::ClientStats stats = core_->client->stats();
        page.sample("delayq_redis_calls_sent_again_total",
                    static_cast<std::int64_t>(stats.sent_again));
        page.family("delayq_redis_lost_calls_total",
                    "Calls to Redis that got no answer in time, then asked after: those that had "
                    "run (what they reserved for waiters given back), those that had not "
                    "(voided: they never run), and those past knowing (the node's kept answers "
                    "had expired).",
                    "counter");
        page.sample("delayq_redis_lost_calls_total", {{"found", "ran"}},
                    static_cast<std::int64_t>(core_->lost_ran));
        page.sample("delayq_redis_lost_calls_total", {{"found", "void"}},
                    static_cast<std::int64_t>(core_->lost_void));
        page.sample("delayq_redis_lost_calls_total", {{"found", "unknown"}},
                    static_cast<std::int64_t>(core_->lost_unknown));
        page.family("delayq_redis_calls_total",
                    "Calls to Redis's jobs script by what they do (put, fire, reserve, erase, "
                    "...).",
                    "counter");
        for (const auto& [op, count] : core_->calls_by_op) {
          page.sample("delayq_redis_calls_total", {{"op", op}}, static_cast<std::int64_t>(count));
        }
        page.family("delayq_redis_reconnects_total",
                    "Connections to Redis made again after they broke.", "counter");
        page.sample("delayq_redis_reconnects_total", static_cast<std::int64_t>(stats.reconnects));
        page.family("delayq_redis_redirections_total",
                    "Requests Redis sent elsewhere or asked to send again, by its reply (a slot "
                    "migrating or failing over, a node loading or read-only).",
                    "counter");
        for (const auto& [reply, count] : {std::pair{"MOVED", stats.moved},
                                           {"ASK", stats.ask},
                                           {"TRYAGAIN", stats.try_again},
                                           {"CLUSTERDOWN", stats.cluster_down},
                                           {"LOADING", stats.loading},
                                           {"READONLY", stats.read_only}}) {
          page.sample("delayq_redis_redirections_total", {{"reply", reply}},
                      static_cast<std::int64_t>(count));
        }
      })),
      schedules_(RedisSchedules::open(core_)) {}

broker::Schedules& RedisBroker::schedules() {
  return *schedules_;
}

std::vector<std::pair<std::string, Webhook>> RedisBroker::webhooks() const {
  return {core_->webhook_map.begin(), core_->webhook_map.end()};
}
bool RedisBroker::delivers(std::string_view tube) const {
  return core_->owned.contains(core_->delivery_shard(std::string(tube)));
}

void RedisBroker::on_webhooks_changed(std::function<void()> handler) {
  core_->webhooks_handler = std::move(handler);
}

Status RedisBroker::close() {
  // Hand the leases back so that other nodes fire these shards at once rather than after the
  // lease runs out, and leave the live nodes, so that the others count their shares without
  // this one (sent, not waited for: the io_context may not run again). The message that leases
  // are free goes once the shards are: a node that hears it takes them at once.
  core_->resigned = true;
  core_->lease_timer->cancel();
  auto left = std::make_shared<std::size_t>(core_->owned.size() + 1);
  const auto announce = [core = core_, left](Result<Reply>) {
    if (--*left == 0) {
      core->client->run(delayq::redis::key_slot(core->names.events),
                        Command{"PUBLISH", core->names.events, "l"}, [](Result<Reply>) {});
    }
  };
  for (auto& [shard, own] : core_->owned) {
    own.timer->cancel();
    core_->call(shard, {"resign", core_->node}, false, announce);
  }
  core_->client->run(delayq::redis::key_slot(core_->names.nodes),
                     Command{"ZREM", core_->names.nodes, core_->node}, announce);
  core_->client->run(delayq::redis::key_slot(core_->names.waiting),
                     Command{"HDEL", core_->names.waiting, core_->node}, [](Result<Reply>) {});
  core_->owned.clear();
  return Status::ok();
}

void RedisBroker::settle(std::function<void()> done) {
  settle_core(core_, std::move(done));
}

// Looked at every 10 ms: the calls are answered in a few. Holds the core, not the broker.
void RedisBroker::settle_core(const std::shared_ptr<Core>& core, std::function<void()> done) {
  if (core->calls_under_way == 0) {
    boost::asio::post(core->io, std::move(done));
    return;
  }
  std::shared_ptr<Timer> timer = core->clock->timer();
  timer->expires_after(Millis{10});
  timer->async_wait([core, timer, done = std::move(done)](bool expired) mutable {
    if (expired && !core->closed) settle_core(core, std::move(done));
  });
}

const std::string& RedisBroker::node_name() const {
  return core_->node;
}
std::uint32_t RedisBroker::shards() const {
  return core_->shards;
}
std::size_t RedisBroker::owned_shards() const {
  return core_->owned.size();
}

}  // namespace delayq::broker::redis
