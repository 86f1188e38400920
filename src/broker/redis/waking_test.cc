// waking_test.cc — a node's reserves over a scripted Redis (fixture.h): which shards a reserve
// asks and when, what the shards' answers and the channels' messages teach it, and how it ends
// (a job, TIMED_OUT, DEADLINE_SOON). No process, no sleep: the test answers every call.
#include <gtest/gtest.h>

#include <set>

#include "broker/redis/fixture.h"
#include "broker/redis/layout.h"

namespace delayq::redis_broker::testing {
namespace {

using Waking = NodeTest;

TEST_F(Waking, AReserveOfAnUnknownTubeAsksEveryShardOnceAndWaitsWhenNoneHoldsAJob) {
  auto s = session();
  Outcome<broker::Job> got;
  s->reserve({}, got.callback());
  EXPECT_FALSE(got.done()) << "answered inside the call";
  settle();
  EXPECT_EQ(redis->count("probe"), kShards);
  EXPECT_EQ(redis->count("reserve"), 0U);
  std::set<std::uint32_t> asked;
  while (auto probe = redis->take("probe")) {
    EXPECT_EQ(probe->args(), std::vector<std::string>{"default"});
    asked.insert(shard_of(*probe));
    answer_probe(*probe, {""});
  }
  EXPECT_EQ(asked.size(), kShards);
  settle();
  EXPECT_FALSE(got.done());
  EXPECT_EQ(redis->count("reserve"), 0U) << "a reserve call with no shard holding a job";
}

TEST_F(Waking, AProbeThatFindsAJobSendsTheReserveToItsShard) {
  auto s = session();
  Outcome<broker::Job> got;
  s->reserve({}, got.callback());
  settle();
  std::uint32_t holding = 0;
  while (auto probe = redis->take("probe")) {
    const bool has = shard_of(*probe) == 2;
    if (has) holding = shard_of(*probe);
    answer_probe(*probe, {has ? "1024:1799999999000:6" : ""});
  }
  settle();
  Call reserve = take("reserve");
  EXPECT_EQ(shard_of(reserve), holding);
  ASSERT_GE(reserve.args().size(), 3U);
  EXPECT_EQ(reserve.args()[2], "default");
  redis->answer(reserve, reserved(ready_job(6), {""}));
  settle();
  ASSERT_TRUE(got.done());
  ASSERT_TRUE(got.result->is_ok()) << got.result->status().to_string();
  EXPECT_EQ(got.result->value().view.id, 6U);
  EXPECT_EQ(got.calls, 1);
}

TEST_F(Waking, AMessageOfAReadyJobWakesAWaitingReserve) {
  auto s = session();
  Outcome<broker::Job> got;
  s->reserve({}, got.callback());
  settle();
  answer_all("probe", reply::ok({reply::array({redis::Reply::string("")}),
                                 reply::array({redis::Reply::number(0)})}));
  settle();
  ASSERT_EQ(redis->count("reserve"), 0U);
  redis->publish_shard(3, "r dq:{3} default other-node 1024:1799999999500:7");
  settle();
  Call reserve = take("reserve");
  EXPECT_EQ(shard_of(reserve), 3U);
  redis->answer(reserve, reserved(ready_job(7), {""}));
  settle();
  ASSERT_TRUE(got.done());
  EXPECT_EQ(got.result->value().view.id, 7U);
}

TEST_F(Waking, ANodesOwnMessageWakesNobody) {
  auto s = session();
  Outcome<broker::Job> got;
  s->reserve({}, got.callback());
  settle();
  answer_all("probe", reply::ok({reply::array({redis::Reply::string("")}),
                                 reply::array({redis::Reply::number(0)})}));
  settle();
  redis->publish_shard(1, "r dq:{1} default " + broker->node_name() + " 1024:1799999999500:5");
  settle();
  EXPECT_EQ(redis->count("reserve"), 0U);
  EXPECT_FALSE(got.done());
}

TEST_F(Waking, AReserveWithATimeoutAnswersTimedOutAtItsDeadlineAfterLettingMessagesIn) {
  auto s = session();
  Outcome<broker::Job> got;
  broker::ReserveRequest request;
  request.timeout = std::chrono::seconds(2);
  s->reserve(request, got.callback());
  settle();
  answer_all("probe", reply::ok({reply::array({redis::Reply::string("")}),
                                 reply::array({redis::Reply::number(0)})}));
  clock->advance(std::chrono::milliseconds(1999));
  EXPECT_FALSE(got.done()) << "timed out early";
  EXPECT_EQ(redis->syncs_waiting(), 0U);
  clock->advance(std::chrono::milliseconds(1));
  // Before TIMED_OUT, every message already sent is let in.
  EXPECT_EQ(redis->syncs_waiting(), 1U);
  EXPECT_FALSE(got.done());
  redis->answer_syncs(std::vector<bool>(kShards, true));
  settle();
  ASSERT_TRUE(got.done());
  EXPECT_EQ(got.result->status().code(), Code::kTimedOut);
}

TEST_F(Waking, AShardWhoseChannelBrokeIsAskedAgainBeforeTimedOut) {
  auto s = session();
  Outcome<broker::Job> got;
  broker::ReserveRequest request;
  request.timeout = std::chrono::seconds(1);
  s->reserve(request, got.callback());
  settle();
  answer_all("probe", reply::ok({reply::array({redis::Reply::string("")}),
                                 reply::array({redis::Reply::number(0)})}));
  clock->advance(std::chrono::seconds(1));
  std::vector<bool> held(kShards, true);
  held[1] = false;
  redis->answer_syncs(held);
  settle();
  // Shard 1's channel did not hold: a job announced there may have been missed.
  Call probe = take("probe");
  EXPECT_EQ(shard_of(probe), 1U);
  EXPECT_EQ(redis->count("probe"), 0U);
  answer_probe(probe, {"1024:1799999999000:9"});
  settle();
  Call reserve = take("reserve");
  EXPECT_EQ(shard_of(reserve), 1U);
  redis->answer(reserve, reserved(ready_job(9), {""}));
  settle();
  ASSERT_TRUE(got.done());
  ASSERT_TRUE(got.result->is_ok()) << got.result->status().to_string();
  EXPECT_EQ(got.result->value().view.id, 9U);
}

}  // namespace
}  // namespace delayq::redis_broker::testing
