// redis_broker.h — the broker whose state lives in Redis (a cluster, or one server): any number
// of delayqd nodes share it, and any node serves any client. Every change to a job is one
// script (jobs.lua) on the one shard that holds it; a reply leaves once that script ran on the
// shard's primary and, by default, once WAIT says a replica has it.
// Firing: each shard has one owner at a time (a lease in Redis, renewed every lease/3, with a
// fencing number every firing script checks); the owner sleeps until the shard's next timer and
// moves what is due by script, on Redis's clock. Leases spread evenly over the live nodes.
// Waking: scripts publish on their shard's channel (sharded pub/sub, to which every node
// subscribes on each shard's primary) when they give a tube a better ready job in the shard;
// every node keeps, per tube, each shard's best ready job, and its waiting reserves try those.
// Everything runs on the io_context's thread. Made by delayqd (--redis). The whole design, its
// costs and what it does differently from the local broker: docs/redis-mode.md
#pragma once

#include <boost/asio/io_context.hpp>
#include <cstdint>
#include <memory>
#include <string>

#include "base/names.h"
#include "broker/broker.h"
#include "broker/redis/caller.h"
#include "metrics/registry.h"
#include "redis/client.h"
#include "timing/clock.h"

namespace delayq::broker::redis {

using Millis = std::chrono::milliseconds;

struct RedisBrokerOptions {
  // The Redis servers to start from, and the client's timeouts (redis/client.h).
  delayq::redis::ClientOptions client;
  // What every key and the channel start with: deployments with different prefixes share a
  // Redis without seeing each other's jobs. Default: "dq".
  std::string prefix = "dq";
  // How many logical shards the jobs spread over; read at a cluster's first start and kept in
  // Redis (a later value differs is ignored, with a warning). More shards than nodes spread
  // firing and keys evenly; each costs a lease and a timer on its owner. Default: 128.
  std::uint32_t shards = 128;
  // How long a shard's owner holds it without renewing: the longest a dead node's shards go
  // unfired. Renewed every third of it. Default: 5 s.
  Millis lease{5000};
  // Wait, after each change, until a replica of the shard's primary has it (WAIT 1), when the
  // primary has replicas; at most wait_timeout. Off: a primary that fails may take the last
  // changes it acknowledged with it. Default: on, 1 s.
  bool wait_for_replica = true;
  Millis wait_timeout{1000};
  // At most this many jobs fired by one script (bounds how long a script holds its shard).
  // Default: 1000.
  std::uint32_t fire_batch = 1000;
  // How often an owner looks at a shard whose channel it is not subscribed to (no message tells
  // it of an earlier timer there). Every five of it (at least 1 s), every node asks every shard
  // for its earliest timer (the overdue gauge; an owner fires what is due), and waiting reserves
  // ask the shards whose channels may have lost messages: the bound on what a lost message can
  // delay. Default: 1 s.
  Millis resync{1000};
  // Prefetch: a worker's delete (by id, of a job its connection reserved from its watch list)
  // also reserves, in the same call, the best ready job of the tubes it watches in that shard,
  // and holds it for the connection's next reserve, which then needs no call: a busy worker's
  // job costs one call instead of two. A job held so is reserved as other clients see it; one
  // not asked for within this time, or not fitting the reserve that comes, is given back
  // (ready again where it was, its reserve uncounted). 0: off. Default: 0.
  Millis prefetch{0};
  // A tube that has held no job in a shard, and had no settings there, for this long is
  // forgotten by the shard: its name and its counts, which go on in the shard's totals (the
  // server's totals never go down). Each owner looks at its shards every sixth of it (at least
  // every resync look). 0: at each look. Default: 1 h.
  Millis forget_empty_tubes{3'600'000};
  // Longest tube name, key or group. Default: 200 bytes.
  std::size_t max_name_bytes = kDefaultMaxNameBytes;
  // Where the broker registers its metrics families; null: a registry of its own, which nobody
  // reads. Must outlive the broker.
  metrics::Registry* metrics = nullptr;
};

class RedisSchedules;

class RedisBroker final : public broker::Broker {
 public:
  // Connects, reads the topology, refuses a Redis that may evict keys, creates or reads the
  // layout, subscribes to events and starts taking leases. Runs `io` until it is done (at most
  // the client's request timeout per step).
  static Result<std::unique_ptr<RedisBroker>> open(boost::asio::io_context& io,
                                                   RedisBrokerOptions options);
  // The same over another Redis and clock (the unit tests' fakes); options.client is unused.
  static Result<std::unique_ptr<RedisBroker>> open(boost::asio::io_context& io,
                                                   RedisBrokerOptions options,
                                                   std::unique_ptr<Caller> client,
                                                   std::shared_ptr<timing::Clock> clock);
  ~RedisBroker() override;

  [[nodiscard]] std::unique_ptr<broker::Session> open_session(
      broker::SessionOptions options) override;
  [[nodiscard]] std::unique_ptr<broker::Admin> open_admin() override;
  void set_draining(bool draining) override;
  [[nodiscard]] bool draining() const override;
  [[nodiscard]] bool applies_calls_in_order() const override { return false; }
  [[nodiscard]] Status health() const override;
  [[nodiscard]] broker::Seconds uptime() const override;
  [[nodiscard]] broker::Schedules& schedules() override;
  [[nodiscard]] std::vector<std::pair<std::string, Webhook>> webhooks() const override;
  [[nodiscard]] bool delivers(std::string_view tube) const override;
  void on_webhooks_changed(std::function<void()> handler) override;
  Status close() override;
  void settle(std::function<void()> done) override;

  // This node's name in Redis (its leases and sessions carry it), the layout's shard count, and
  // how many shards this node owns now.
  [[nodiscard]] const std::string& node_name() const;
  [[nodiscard]] std::uint32_t shards() const;
  [[nodiscard]] std::size_t owned_shards() const;

  struct Core;

 private:
  explicit RedisBroker(std::shared_ptr<Core> core);
  static void settle_core(const std::shared_ptr<Core>& core, std::function<void()> done);
  std::shared_ptr<Core> core_;
  metrics::Registry::Collector shard_families_;  // reads core_
  std::shared_ptr<RedisSchedules> schedules_;
};

}  // namespace delayq::broker::redis
