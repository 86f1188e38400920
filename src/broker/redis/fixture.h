// fixture.h — a Redis broker node over the unit tests' fakes (fakes.h): opened as delayqd opens
// one, against a scripted Redis that answers the opening's questions as a healthy 7.x cluster of
// one primary with a replica does, then answers nothing by itself. A test makes sessions, looks
// at the calls the node made (redis), answers them in any order or loses them, publishes the
// channels' messages and moves the clock (clock). Everything runs when the test says so
// (settle(), clock->advance()); nothing sleeps.
#pragma once

#include <gtest/gtest.h>

#include <boost/asio/io_context.hpp>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "broker/redis/fakes.h"
#include "broker/redis/redis_broker.h"
#include "timing/manual_clock.h"

namespace delayq::broker::redis::testing {

class NodeTest : public ::testing::Test {
 protected:
  static constexpr std::uint32_t kShards = 4;

  void SetUp() override { open_node(RedisBrokerOptions{}); }
  // Closes the node and runs what its closing posted, so that nothing of it outlives the test.
  void TearDown() override;

  // Opens the node with `options` (shards: kShards unless set otherwise by `shards`).
  void open_node(RedisBrokerOptions options, std::uint32_t shards = kShards);

  // Runs what is ready on the executor (completions, posted work), with no time passing.
  void settle() { clock->settle(); }

  // A session as a beanstalkd client's: using and watching "default".
  std::unique_ptr<broker::Session> session();

  // The result a callback got, once it got one.
  template <typename T>
  struct Outcome {
    std::optional<Result<T>> result;
    int calls = 0;
    broker::Callback<T> callback() {
      return [this](Result<T> r) {
        ++calls;
        result.emplace(std::move(r));
      };
    }
    [[nodiscard]] bool done() const { return result.has_value(); }
  };

  // The next unanswered call with op(); fails the test (and returns an empty call) if none.
  Call take(const std::string& op);
  // Answers a probe of `tubes` in `call`'s shard: each tube's head ("" none) and depth.
  void answer_probe(Call& call, const std::vector<std::string>& heads,
                    const std::vector<std::int64_t>& depths = {});
  // The shard a jobs.lua call went to (its keys' base, "dq:{s}").
  [[nodiscard]] static std::uint32_t shard_of(const Call& call);
  // The shards a call across slots names by their keys' bases (args() from `from` on).
  [[nodiscard]] static std::vector<std::uint32_t> shards_named(const Call& call, std::size_t from);
  // Answers an acquire_all call with `got` for each shard it names: an epoch, 0 (held by
  // another node), -1 (not tried: its most taken) or -2 (not served there).
  void answer_acquire(Call call, const std::vector<std::int64_t>& got);
  // Answers each acquire_all as it comes as Redis would with every shard free: it takes as many
  // as the call allows, granting epochs `epoch`, `epoch + 1`, ...; the shards taken, in order.
  // Their firings wait.
  std::vector<std::uint32_t> grant_acquires(std::int64_t epoch = 1);
  // A ready job of `tube` with id `id`, as a reserve's answer carries it.
  [[nodiscard]] JobView ready_job(JobId id, const std::string& tube = "default") const;
  // A reserve's answer: the job, reserved (deadline = now + ttr), then the tubes' heads after
  // it and their depths.
  [[nodiscard]] delayq::redis::Reply reserved(JobView job, const std::vector<std::string>& heads,
                                              const std::vector<std::int64_t>& depths = {}) const;
  // Answers every shard of every `each` call of `op` waiting now with `reply` (how many shards
  // it answered).
  std::size_t answer_each(const std::string& op, const delayq::redis::Reply& reply) {
    return redis->answer_each(
        op, [&](std::uint32_t, const std::vector<std::string>&) { return reply; });
  }
  // Answers every call of `op` waiting now with `reply` (how many it answered).
  std::size_t answer_all(const std::string& op, const delayq::redis::Reply& reply);

  metrics::Registry metrics;  // outlives the node's core, which may outlive the node
  boost::asio::io_context io;
  std::shared_ptr<timing::ManualClock> clock = std::make_shared<timing::ManualClock>(io);
  ScriptedRedis* redis = nullptr;  // owned by broker
  std::unique_ptr<RedisBroker> broker;
};

}  // namespace delayq::broker::redis::testing
