// waking_test.cc — a node's reserves over a scripted Redis (waking_fixture.h): which shards a
// reserve asks and when, and what the shards' answers and the channels' messages teach it. How a
// reserve ends is in reserve_end_test.cc. No process, no sleep: the test answers every call.
// Waking: trying shards, waking waiters (waking.cc, session.cc's reserve side); ProbeRounds: the
// rounds of probes that waiting reserves share.
#include "broker/redis/waking_fixture.h"
#include "redis/slot.h"

namespace delayq::broker::redis::testing {
namespace {

using namespace std::chrono_literals;
using delayq::redis::Reply;

using Waking = WakingTest;
using ProbeRounds = WakingTest;

// A node of 20 shards, where the node's own rounds of calls go a few at a time.
class ProbeRoundsOf20Shards : public WakingTest {
 protected:
  void SetUp() override { open_node(RedisBrokerOptions{}, 20); }
};

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

// probe_all's answer: each shard's {heads, depths} of one tube ("" none), or "-2" where a shard
// is not served by the Redis asked.
Reply probed_all(const std::vector<std::string>& heads) {
  std::vector<Reply> each;
  for (const auto& head : heads) {
    if (head == "-2") {
      each.push_back(Reply::string(head));
    } else {
      each.push_back(reply::array({reply::array({Reply::string(head)}),
                                   reply::array({Reply::number(head.empty() ? 0 : 1)})}));
    }
  }
  return reply::ok({reply::array(std::move(each))});
}

TEST_F(Waking, AmongManyShardsAReserveOfAnUnknownTubeAsksThemInCallsOf64OneAtATime) {
  constexpr std::uint32_t kMany = 150;  // calls of 64, 64 and 22
  open_node(RedisBrokerOptions{}, kMany);
  auto s = session();
  Outcome<broker::Job> got;
  s->reserve({}, got.callback());
  settle();
  EXPECT_EQ(redis->count("probe"), 0U) << "a call a shard";
  std::vector<std::size_t> sizes;
  std::set<std::string> asked;
  while (auto call = redis->take("probe_all")) {
    EXPECT_EQ(redis->count("probe_all"), 0U) << "a second call before the first was answered";
    EXPECT_TRUE(call->commands[0][1].ends_with("_slots")) << call->commands[0][1];
    const auto args = call->args();  // n, the shards' bases, the tubes
    ASSERT_GE(args.size(), 2U);
    const std::size_t n = std::stoul(args[0]);
    ASSERT_EQ(args.size(), n + 2);
    EXPECT_EQ(args.back(), "default");
    sizes.push_back(n);
    std::vector<std::string> heads(n, "");
    for (std::size_t i = 0; i < n; ++i) {
      asked.insert(args[1 + i]);
      if (args[1 + i] == "dq:{77}") heads[i] = "1024:1799999999000:77";  // the one job
      if (args[1 + i] == "dq:{140}") heads[i] = "-2";  // moved meanwhile: asked alone
    }
    redis->answer(*call, probed_all(heads));
    settle();
  }
  EXPECT_EQ(sizes, (std::vector<std::size_t>{64, 64, 22}));
  EXPECT_EQ(asked.size(), kMany);
  EXPECT_EQ(redis->count("reserve"), 0U) << "reserved before every shard answered";
  Call alone = take("probe");
  EXPECT_EQ(shard_of(alone), 140U);
  answer_probe(alone, {""});
  settle();
  Call reserve = take("reserve");
  EXPECT_EQ(shard_of(reserve), 77U);
  redis->answer(reserve, reserved(ready_job(77), {""}));
  settle();
  ASSERT_TRUE(got.done());
  ASSERT_TRUE(got.result->is_ok()) << got.result->status().to_string();
  EXPECT_EQ(got.result->value().view.id, 77U);
}

TEST_F(Waking, AMessageOfAReadyJobWakesAWaitingReserve) {
  auto s = session();
  Outcome<broker::Job> got;
  s->reserve({}, got.callback());
  settle();
  answer_all("probe", reply::ok({reply::array({delayq::redis::Reply::string("")}),
                                 reply::array({delayq::redis::Reply::number(0)})}));
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

// While another shard is known to hold a job, a shard slow to answer a probe holds a reserve up
// for 200 ms at most (then the reserve goes where the job is known to be), and a shard whose
// slot met a migration or a failover in the last 10 s not at all.
class SlowShard : public WakingTest {
 protected:
  // The tube's heads learnt (none anywhere), then a job told of in shard 3 and shard 1's best
  // made unknown (its channel subscribed again); then `worker`'s reserve. Its probe of shard 1,
  // left unanswered. (Sessions and calls stay in the test's body: kept past TearDown(), they
  // would keep the node alive.)
  Call reserve_with_shard_1_unknown(broker::Session& worker, Outcome<broker::Job>& got) {
    poll_nothing();
    redis->publish_shard(3, "r dq:{3} default other-node 1024:1799999999500:7");
    redis->shard_resubscribed(1);
    settle();
    worker.reserve({}, got.callback());
    settle();
    EXPECT_EQ(redis->count("probe"), 1U);
    Call probe = take("probe");
    EXPECT_EQ(shard_of(probe), 1U);
    return probe;
  }
  // The reserve goes to shard 3 and gets job 7; the slow probe's answer then sends nothing more.
  void take_the_job(Outcome<broker::Job>& got, Call& slow_probe) {
    Call reserve = take("reserve");
    EXPECT_EQ(shard_of(reserve), 3U);
    redis->answer(reserve, reserved(ready_job(7), {""}));
    settle();
    ASSERT_TRUE(got.done());
    EXPECT_EQ(got.result->value().view.id, 7U);
    answer_probe(slow_probe, {""});
    settle();
    EXPECT_EQ(redis->count("reserve"), 0U);
  }
};

TEST_F(SlowShard, AShardSlowToAnswerAProbeHoldsAReserveUpFor200MillisecondsAtMost) {
  auto worker = session();
  Outcome<broker::Job> got;
  Call slow = reserve_with_shard_1_unknown(*worker, got);
  EXPECT_EQ(redis->count("reserve"), 0U) << "the probe had no time to answer";
  clock->advance(std::chrono::milliseconds(199));
  EXPECT_EQ(redis->count("reserve"), 0U);
  clock->advance(std::chrono::milliseconds(11));  // the patience's timer is at most 10 ms late
  take_the_job(got, slow);
}

// The same when no shard was known before the reserve (a node's first reserve of the tube asks
// every shard): once the answers so far found a job, one shard stuck behind a migration holds the
// reserve up for 200 ms at most. With no job found yet, the reserve waits for the last answer.
TEST_F(SlowShard, AShardSlowToAnswerTheFirstProbesHoldsAReserveUpFor200MillisecondsAtMost) {
  auto worker = session();
  Outcome<broker::Job> got;
  worker->reserve({}, got.callback());
  settle();
  ASSERT_EQ(redis->count("probe"), kShards);
  std::optional<Call> slow;
  std::vector<Call> others;
  while (auto probe = redis->take("probe")) {
    if (shard_of(*probe) == 1) {
      slow = std::move(probe);
    } else {
      others.push_back(std::move(*probe));
    }
  }
  ASSERT_TRUE(slow.has_value());
  clock->advance(std::chrono::milliseconds(210));
  EXPECT_EQ(redis->count("reserve"), 0U) << "reserved blindly, nothing known";
  for (Call& probe : others) {
    answer_probe(probe, {shard_of(probe) == 3 ? "1024:1799999999500:7" : ""});
  }
  settle();
  // The patience looks again every 200 ms (its timer at most 10 ms late): the next look, at 400
  // to 420 ms, finds the job.
  clock->advance(std::chrono::milliseconds(180));
  EXPECT_EQ(redis->count("reserve"), 0U);
  clock->advance(std::chrono::milliseconds(40));
  take_the_job(got, *slow);
}

TEST_F(SlowShard, AShardWhoseSlotMigratedLatelyHoldsNoReserveUp) {
  redis->unsettled_slots.insert(delayq::redis::key_slot("dq:{1}"));
  auto worker = session();
  Outcome<broker::Job> got;
  Call slow = reserve_with_shard_1_unknown(*worker, got);
  take_the_job(got, slow);
}

TEST_F(Waking, AReserveWithATimeoutAnswersTimedOutAtItsDeadlineAfterLettingMessagesIn) {
  auto s = session();
  Outcome<broker::Job> got;
  broker::ReserveRequest request;
  request.timeout = std::chrono::seconds(2);
  s->reserve(request, got.callback());
  settle();
  answer_all("probe", reply::ok({reply::array({delayq::redis::Reply::string("")}),
                                 reply::array({delayq::redis::Reply::number(0)})}));
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

// A node of a version from before the shard channels sends its messages on the node-wide
// channel, over the cluster bus, which the PINGs do not wait for. Live in dq:nodes and
// subscribed to no shard channel, it is known before a message of it comes: a poll asks every
// shard before answering TIMED_OUT, until the subscribers and the live nodes match again.
// Nodes whose names say they take turns came after the shard channels: while only they are live
// nothing is counted (a count raced each node's start, its heartbeat before its SSUBSCRIBEs).
TEST_F(Waking, WhileALiveNodeSubscribesToNoShardChannelAPollAsksEveryShardBeforeTimedOut) {
  // Answers the next heartbeat with `live`; then the count with `subscribers`, if one is sent.
  const auto heartbeat = [&](const std::vector<std::string>& live, std::int64_t subscribers) {
    clock->advance(std::chrono::seconds(2));
    while (redis->count("heartbeat") > 1) take("heartbeat");
    Call call = take("heartbeat");
    std::vector<Reply> names;
    for (const auto& name : live) names.push_back(Reply::string(name));
    redis->answer(call, reply::ok({reply::array(std::move(names))}));
    settle();
    if (subscribers < 0) return;
    Call count = take("PUBSUB");
    EXPECT_EQ(count.args(), (std::vector<std::string>{"SHARDNUMSUB", "dq:{0}:events"}));
    redis->answer(count,
                  reply::array({Reply::string("dq:{0}:events"), Reply::number(subscribers)}));
    settle();
  };
  const std::string me = broker->node_name();
  poll_nothing();  // the tube's heads learnt: none anywhere
  heartbeat({me, "older"}, 1);
  EXPECT_EQ(poll_nothing(), kShards) << "a live node hears of no shard channel";
  heartbeat({me, "newer"}, 2);
  EXPECT_EQ(poll_nothing(), 0U) << "every live node subscribes: the channels vouch";
  heartbeat({me, "older"}, 1);
  heartbeat({me, "other+h"}, -1);
  EXPECT_EQ(redis->count("PUBSUB"), 0U) << "every live node takes turns: nothing to count";
  EXPECT_EQ(poll_nothing(), 0U) << "the older node left: the channels vouch";
}

TEST_F(Waking, AShardWhoseChannelBrokeIsAskedAgainBeforeTimedOut) {
  auto s = session();
  Outcome<broker::Job> got;
  broker::ReserveRequest request;
  request.timeout = std::chrono::seconds(1);
  s->reserve(request, got.callback());
  settle();
  answer_all("probe", reply::ok({reply::array({delayq::redis::Reply::string("")}),
                                 reply::array({delayq::redis::Reply::number(0)})}));
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

// --- probe rounds: what reserves that know nothing of a shard ask it, and who shares a round

TEST_F(ProbeRounds, AThousandReservesOfATubeWaitingAtOnceShareTwoRoundsNotOneEach) {
  auto s = session();
  std::deque<Outcome<broker::Job>> got(1000);
  for (auto& one : got) s->reserve({}, one.callback());
  settle();
  // The first reserve's round went out alone; the 999 that came while it was under way wait for
  // the next, which goes out when it ends.
  EXPECT_EQ(redis->count("probe"), kShards);
  EXPECT_EQ(answer_probes(), kShards);
  settle();
  EXPECT_EQ(redis->count("probe"), kShards);
  EXPECT_EQ(answer_probes(), kShards);
  settle();
  EXPECT_EQ(redis->count("probe"), 0U);
  EXPECT_EQ(redis->count("reserve"), 0U);
  EXPECT_TRUE(std::none_of(got.begin(), got.end(), [](const auto& one) { return one.done(); }));
}

TEST_F(ProbeRounds, AReserveThatComesWhileARoundIsUnderWayWaitsForTheNextRound) {
  auto s1 = session();
  auto s2 = session();
  Outcome<broker::Job> first;
  Outcome<broker::Job> second;
  s1->reserve({}, first.callback());
  settle();
  ASSERT_EQ(redis->count("probe"), kShards);
  s2->reserve({}, second.callback());
  settle();
  EXPECT_EQ(redis->count("probe"), kShards) << "the later reserve sent a round of its own";
  // The round under way, sent before the second came, says nothing of it: its own goes now.
  answer_probes();
  settle();
  EXPECT_EQ(redis->count("reserve"), 0U);
  ASSERT_EQ(redis->count("probe"), kShards);
  answer_probes({{1, head(1024, 5)}});
  settle();
  Call reserve = take("reserve");
  EXPECT_EQ(shard_of(reserve), 1U);
  EXPECT_EQ(who(reserve), holder(2));
  redis->answer(reserve, reserved(ready_job(5), {""}));
  settle();
  ASSERT_TRUE(second.done());
  EXPECT_EQ(id_of(second), 5U);
  EXPECT_FALSE(first.done());
}

TEST_F(ProbeRounds, AReserveOfTwoTubesAsksBothInOneProbeAndTakesTheBetterJobOfEither) {
  auto s = session();
  Outcome<broker::Job> got;
  broker::ReserveRequest request;
  request.tubes = {"a", "b"};
  s->reserve(request, got.callback());
  settle();
  ASSERT_EQ(redis->count("probe"), kShards);
  while (auto probe = redis->take("probe")) {
    EXPECT_EQ(probe->args(), (std::vector<std::string>{"a", "b"}));
    const std::uint32_t shard = shard_of(*probe);
    answer_probe(*probe, {shard == 1 ? head(10, 5) : "", shard == 2 ? head(5, 6) : ""});
  }
  settle();
  // Tube b's job in shard 2 comes first; shard 1's best (of tube a) bounds the call.
  Call reserve = take("reserve");
  EXPECT_EQ(shard_of(reserve), 2U);
  EXPECT_EQ(reserve.args(), (std::vector<std::string>{holder(1), head(10, 5), "a", "b"}));
  redis->answer(reserve, reserved(ready_job(6, "b"), {"", ""}));
  settle();
  ASSERT_TRUE(got.done());
  ASSERT_TRUE(got.result->is_ok()) << got.result->status().to_string();
  EXPECT_EQ(id_of(got), 6U);
}

TEST_F(ProbeRounds, AShardWhoseProbeFailedIsTriedWhenNoOtherIsKnownToHoldAJob) {
  auto s = session();
  Outcome<broker::Job> got;
  s->reserve({}, got.callback());
  settle();
  fail_probes_of(3);
  settle();
  Call reserve = take("reserve");
  EXPECT_EQ(shard_of(reserve), 3U);
  EXPECT_EQ(reserve.args(), (std::vector<std::string>{holder(1), "", "default"}));
  EXPECT_EQ(redis->count("probe"), 0U) << "probed twice in one try";
  miss(reserve, "notfound", {""});
  settle();
  EXPECT_FALSE(got.done());
  EXPECT_EQ(redis->count("reserve"), 0U);
  EXPECT_EQ(redis->count("probe"), 0U);
}

TEST_F(ProbeRounds, TryingAShardNoProbeCouldLearnLeavesTheKeylessPutTurnsInOrder) {
  auto s = session();
  broker::PutRequest put;
  put.body = "x";
  Outcome<broker::PutResult> first;
  s->put(put, first.callback());
  settle();
  const std::uint32_t first_shard = shard_of(take("put"));
  Outcome<broker::Job> got;
  s->reserve({}, got.callback());
  settle();
  fail_probes_of(3);
  settle();
  Call reserve = take("reserve");
  miss(reserve, "notfound", {""});
  settle();
  Outcome<broker::PutResult> second;
  s->put(put, second.callback());
  settle();
  EXPECT_EQ(shard_of(take("put")), (first_shard + 1) % kShards)
      << "the reserve's pick of a shard moved the put turns on";
}

TEST_F(ProbeRounds, EveryFiveSecondsTheShardsThePingsCannotVouchForAreProbedAgain) {
  auto s = session();
  Outcome<broker::Job> got;
  s->reserve({}, got.callback());
  rest();
  clock->advance(4999ms);
  EXPECT_EQ(redis->syncs_waiting(), 0U);
  clock->advance(1ms);
  // Every message sent before now let in first (a PING per primary), then only the shards whose
  // channel did not hold throughout are asked, for every tube a reserve waits for.
  EXPECT_EQ(redis->count("probe"), 0U);
  ASSERT_EQ(redis->syncs_waiting(), 1U);
  redis->answer_syncs(std::vector<bool>(kShards, true));
  settle();
  EXPECT_EQ(redis->count("probe"), 0U);
  clock->advance(5s);
  ASSERT_EQ(redis->syncs_waiting(), 1U);
  std::vector<bool> held(kShards, true);
  held[3] = false;
  redis->answer_syncs(held);
  settle();
  ASSERT_EQ(redis->count("probe"), 1U);
  ASSERT_EQ(shard_of(redis->calls.back()), 3U);
  // A job whose message was lost is found, and the waiter goes for it.
  answer_probes({{3, head(1024, 7)}});
  settle();
  Call reserve = take("reserve");
  EXPECT_EQ(shard_of(reserve), 3U);
  redis->answer(reserve, reserved(ready_job(7), {""}));
  settle();
  ASSERT_TRUE(got.done());
  EXPECT_EQ(id_of(got), 7U);
}

TEST_F(ProbeRounds, AShardWhoseBestALostAnswerMadeUnknownIsProbedAtTheFiveSecondLook) {
  Outcome<broker::Job> got;
  auto worker = waiting(got);
  // A put whose answer is lost: what it made ready, if anything, no message will tell this node.
  auto producer = session();
  Outcome<broker::PutResult> put;
  broker::PutRequest request;
  request.body = "later";
  request.due = Due::after(Millis{10000});
  producer->put(request, put.callback());
  settle();
  Call lost = take("put");
  const std::uint32_t shard = shard_of(lost);
  redis->fail(lost, Status(Code::kIOError, "connection reset"));
  settle();
  clock->advance(5s);
  redis->answer_syncs(std::vector<bool>(kShards, true));  // every channel held
  settle();
  ASSERT_EQ(redis->count("probe"), 1U);
  EXPECT_EQ(shard_of(redis->calls.back()), shard);
}

TEST_F(ProbeRoundsOf20Shards, AReservesRoundGoesAtOnceAndAResyncsEightEveryTwoMilliseconds) {
  auto s = session();
  Outcome<broker::Job> got;
  s->reserve({}, got.callback());
  settle();
  EXPECT_EQ(redis->count("probe"), 20U);
  answer_probes();
  settle();
  clock->advance(5s);
  redis->answer_syncs(std::vector<bool>(20, false));  // no channel vouched for
  settle();
  EXPECT_EQ(redis->count("probe"), 8U);
  clock->advance(1ms);
  EXPECT_EQ(redis->count("probe"), 8U);
  clock->advance(1ms);
  EXPECT_EQ(redis->count("probe"), 16U);
  clock->advance(2ms);
  EXPECT_EQ(redis->count("probe"), 20U);
}

// --- trying shards: misses, waiting for a shard being tried, waking others

TEST_F(Waking, AWorseAnswerTeachesTheShardsHeadAndTheNextBestShardIsTried) {
  auto s = session();
  Outcome<broker::Job> got;
  s->reserve({}, got.callback());
  settle();
  answer_probes({{1, head(1024, 5)}, {2, head(1025, 6)}});
  settle();
  Call first = take("reserve");
  EXPECT_EQ(shard_of(first), 1U);
  EXPECT_EQ(first.args(), (std::vector<std::string>{holder(1), head(1025, 6), "default"}));
  // Another node took job 5: shard 1's best is now worse than shard 2's.
  miss(first, "worse", {head(2000, 9)});
  settle();
  Call second = take("reserve");
  EXPECT_EQ(shard_of(second), 2U);
  EXPECT_EQ(second.args(), (std::vector<std::string>{holder(1), head(2000, 9), "default"}));
  redis->answer(second, reserved(ready_job(6), {""}));
  settle();
  ASSERT_TRUE(got.done());
  EXPECT_EQ(id_of(got), 6U);
  EXPECT_EQ(got.calls, 1);
}

TEST_F(Waking, ANotFoundAnswerTeachesTheShardIsEmptyAndTheNextShardIsTried) {
  auto s = session();
  Outcome<broker::Job> got;
  s->reserve({}, got.callback());
  settle();
  answer_probes({{1, head(1024, 5)}, {2, head(1025, 6)}});
  settle();
  Call first = take("reserve");
  EXPECT_EQ(shard_of(first), 1U);
  miss(first, "notfound", {""});
  settle();
  // Shard 1 holds nothing now: shard 2 is the only one left, so nothing bounds the call.
  Call second = take("reserve");
  EXPECT_EQ(shard_of(second), 2U);
  EXPECT_EQ(second.args(), (std::vector<std::string>{holder(1), "", "default"}));
  redis->answer(second, reserved(ready_job(6), {""}));
  settle();
  ASSERT_TRUE(got.done());
  EXPECT_EQ(id_of(got), 6U);
}

TEST_F(Waking, ATryGivesUpAfterMoreMissesThanShardsPlusSixteenAndTheReserveWaits) {
  auto s = session();
  Outcome<broker::Job> got;
  s->reserve({}, got.callback());
  settle();
  answer_probes({{0, head(100, 1)}, {1, head(101, 2)}});
  settle();
  // Each shard answers that its best is now worse than the other's: 21 calls (misses 0 to 20).
  for (std::uint32_t i = 0; i <= kShards + 16; ++i) {
    Call reserve = take("reserve");
    miss(reserve, "worse", {head(200 + i, 100 + i)});
    settle();
  }
  EXPECT_EQ(redis->count("reserve"), 0U);
  EXPECT_FALSE(got.done());
}

TEST_F(Waking, AWaiterWhoseOnlyKnownShardIsBeingTriedWaitsForThatAnswerThenTriesIt) {
  auto s1 = session();
  auto s2 = session();
  Outcome<broker::Job> first;
  Outcome<broker::Job> second;
  s1->reserve({}, first.callback());
  settle();
  answer_probes({{2, head(1024, 6)}});  // one ready job there
  settle();
  Call taking = take("reserve");
  ASSERT_EQ(shard_of(taking), 2U);
  s2->reserve({}, second.callback());
  settle();
  EXPECT_EQ(redis->count("reserve"), 0U) << "a second call for shard 2's one job";
  EXPECT_EQ(redis->count("probe"), 0U);
  redis->answer(taking, reserved(ready_job(6), {head(1024, 10)}));
  settle();
  ASSERT_TRUE(first.done());
  // The answer says what shard 2 holds next: the second tries it.
  Call then = take("reserve");
  EXPECT_EQ(shard_of(then), 2U);
  EXPECT_EQ(who(then), holder(2));
  redis->answer(then, reserved(ready_job(10), {""}));
  settle();
  ASSERT_TRUE(second.done());
  EXPECT_EQ(id_of(second), 10U);
}

TEST_F(Waking, AShardThatSaidItHeldTwoReadyJobsTakesTwoReservesAtOnce) {
  auto s1 = session();
  auto s2 = session();
  Outcome<broker::Job> first;
  Outcome<broker::Job> second;
  s1->reserve({}, first.callback());
  settle();
  answer_probes({{2, head(1024, 6)}}, {{2, 2}});
  settle();
  Call taking = take("reserve");
  ASSERT_EQ(shard_of(taking), 2U);
  s2->reserve({}, second.callback());
  settle();
  Call also = take("reserve");
  EXPECT_EQ(shard_of(also), 2U);
  EXPECT_EQ(who(also), holder(2));
}

TEST_F(Waking, AServedReserveWakesTwoMoreWaitersWhenItsShardStillHoldsJobs) {
  std::vector<std::unique_ptr<broker::Session>> sessions;
  std::deque<Outcome<broker::Job>> got(4);
  for (auto& one : got) {
    sessions.push_back(session());
    sessions.back()->reserve({}, one.callback());
  }
  rest();
  announce(1, head(1024, 5));
  Call first = take("reserve");
  EXPECT_EQ(who(first), holder(1)) << "not the longest waiting";
  EXPECT_EQ(redis->count("reserve"), 0U) << "a message wakes one waiter";
  redis->answer(first, reserved(ready_job(5), {head(1024, 6)}, {3}));
  settle();
  ASSERT_TRUE(got[0].done());
  std::set<std::string> woken;
  while (auto reserve = redis->take("reserve")) {
    EXPECT_EQ(shard_of(*reserve), 1U);
    woken.insert(who(*reserve));
  }
  EXPECT_EQ(woken, (std::set<std::string>{holder(2), holder(3)}));
}

TEST_F(Waking, AServedReserveWhoseShardIsEmptyWakesOneWaiterIfAnotherShardMayHoldJobs) {
  std::vector<std::unique_ptr<broker::Session>> sessions;
  std::deque<Outcome<broker::Job>> got(3);
  for (auto& one : got) {
    sessions.push_back(session());
    sessions.back()->reserve({}, one.callback());
  }
  rest();
  lose_an_answer(*sessions[0], 3);
  announce(1, head(1024, 5));
  // The waiter woken asks shard 3 first, and learns nothing (its answer is lost too).
  Call look = take("probe");
  EXPECT_EQ(shard_of(look), 3U);
  redis->fail(look, Status(Code::kIOError, "connection reset"));
  settle();
  Call first = take("reserve");
  EXPECT_EQ(shard_of(first), 1U);
  redis->answer(first, reserved(ready_job(5), {""}));
  settle();
  ASSERT_TRUE(got[0].done());
  // Shard 1 is empty, shard 3 may hold jobs: one waiter goes to see, not two.
  Call probe = take("probe");
  EXPECT_EQ(shard_of(probe), 3U);
  answer_probe(probe, {""});
  settle();
  EXPECT_EQ(redis->count("probe"), 0U) << "a second waiter was woken";
  EXPECT_EQ(redis->count("reserve"), 0U);
}

TEST_F(Waking, AServedReserveWakesNobodyWhenNoShardIsKnownToHoldJobs) {
  auto s1 = session();
  auto s2 = session();
  Outcome<broker::Job> first;
  Outcome<broker::Job> second;
  s1->reserve({}, first.callback());
  s2->reserve({}, second.callback());
  rest();
  announce(1, head(1024, 5));
  Call taking = take("reserve");
  redis->answer(taking, reserved(ready_job(5), {""}));
  settle();
  ASSERT_TRUE(first.done());
  EXPECT_EQ(redis->count("reserve"), 0U);
  EXPECT_EQ(redis->count("probe"), 0U);
  EXPECT_FALSE(second.done());
}

TEST_F(Waking, AMessageForAShardAReserveHereIsTryingWakesNoOtherWaiter) {
  auto s1 = session();
  auto s2 = session();
  Outcome<broker::Job> first;
  Outcome<broker::Job> second;
  s1->reserve({}, first.callback());
  s2->reserve({}, second.callback());
  rest();
  // (Shard 3 unknown: a waiter woken would ask it, which shows.)
  lose_an_answer(*s1, 3);
  announce(1, head(1024, 5));
  Call look = take("probe");
  redis->fail(look, Status(Code::kIOError, "connection reset"));
  settle();
  Call taking = take("reserve");
  EXPECT_EQ(shard_of(taking), 1U);
  announce(1, head(10, 8));
  EXPECT_EQ(redis->count("probe"), 0U) << "woke the second waiter";
  EXPECT_EQ(redis->count("reserve"), 0U);
}

TEST_F(Waking, AMessageThatCameWhileAReserveWasUnderWayOutlivesItsAnswer) {
  auto s1 = session();
  auto s2 = session();
  Outcome<broker::Job> first;
  Outcome<broker::Job> second;
  s1->reserve({}, first.callback());
  s2->reserve({}, second.callback());
  rest();
  announce(1, head(1024, 5));
  Call taking = take("reserve");
  announce(1, head(10, 8));
  EXPECT_EQ(redis->count("reserve"), 0U);
  // The answer left before job 8 came (it says the shard is empty): the message's head stands,
  // and the other waiter goes for it.
  redis->answer(taking, reserved(ready_job(5), {""}));
  settle();
  ASSERT_TRUE(first.done());
  Call then = take("reserve");
  EXPECT_EQ(shard_of(then), 1U);
  EXPECT_EQ(who(then), holder(2));
}

TEST_F(Waking, AFailedReserveCallAnswersIOErrorAndAnotherWaiterAsksTheShardAgain) {
  auto s1 = session();
  auto s2 = session();
  Outcome<broker::Job> first;
  Outcome<broker::Job> second;
  s1->reserve({}, first.callback());
  s2->reserve({}, second.callback());
  rest();
  announce(1, head(1024, 5));
  Call taking = take("reserve");
  redis->fail(taking, Status(Code::kIOError, "connection reset"));
  settle();
  ASSERT_TRUE(first.done());
  EXPECT_EQ(first.result->status().code(), Code::kIOError);
  // The call may have run: what shard 1 holds is unknown, and the other waiter asks it alone.
  Call probe = take("probe");
  EXPECT_EQ(shard_of(probe), 1U);
  EXPECT_EQ(redis->count("probe"), 0U);
  EXPECT_EQ(redis->count("reserve"), 0U);
  EXPECT_FALSE(second.done());
}

TEST_F(Waking, APutOfAReadyJobCarriesAReserveWaitingWithNothingKnownAndHandsItTheJob) {
  auto worker = session();
  Outcome<broker::Job> got;
  worker->reserve({}, got.callback());
  rest();
  auto producer = session();
  Outcome<broker::PutResult> put;
  Call call = put_carrying(*producer, put, holder(1));
  const auto now = Reply::number(clock->now_unix_ms());
  redis->answer(call, reply::ok({Reply::number(5), now, Reply::number(0), now,
                                 reply::array({reserved(ready_job(5), {""})})}));
  settle();
  ASSERT_TRUE(got.done());
  ASSERT_TRUE(got.result->is_ok()) << got.result->status().to_string();
  EXPECT_EQ(id_of(got), 5U);
  ASSERT_TRUE(put.done() && put.result->is_ok());
  EXPECT_EQ(put.result->value().job.id, 5U);
  EXPECT_EQ(redis->count("reserve"), 0U);
}

// A put whose call got no answer in time may have run, or may run once Redis reads it; its
// waiter tries again and the client is told the store failed. Once Redis answers, the node asks
// the shard what became of the call (`lost`): it ran, and the job it handed the waiter, which
// never got it, is given back at once (uncounted), not held until its TTR lapses.
TEST_F(Waking, APutThatGotNoAnswerInTimeIsAskedAfterAndTheJobItHandedAWaiterIsGivenBack) {
  auto worker = session();
  Outcome<broker::Job> got;
  worker->reserve({}, got.callback());
  rest();
  auto producer = session();
  Outcome<broker::PutResult> put;
  Call call = put_carrying(*producer, put, holder(1));
  std::string number = call.tag();
  if (!number.empty() && number.front() == '+') number.erase(0, 1);
  number = number.substr(0, number.find(','));
  redis->fail(call, Status(Code::kTimedOut, "no reply within 10000 ms"));
  settle();
  ASSERT_TRUE(put.done());
  EXPECT_EQ(put.result->status().code(), Code::kIOError);
  EXPECT_FALSE(got.done()) << "the waiter waits on";
  Call lost = take("lost");
  EXPECT_EQ(shard_of(lost), shard_of(call));
  EXPECT_EQ(lost.args(), std::vector<std::string>{number});
  JobView job = ready_job(5);
  job.counters.reserves = 2;  // the third reservation, which reserved() counts
  const auto now = Reply::number(clock->now_unix_ms());
  const Reply ran = reply::ok(
      {Reply::number(5), now, Reply::number(0), now, reply::array({reserved(job, {""})})});
  redis->answer(lost, reply::ok({reply::array({reply::array({Reply::status("ran"), ran})})}));
  settle();
  Call release = take("release");
  EXPECT_EQ(shard_of(release), 1U);
  EXPECT_EQ(release.args(), (std::vector<std::string>{holder(1), "5", "", "", "3", "1"}));
  EXPECT_FALSE(got.done());
  // The node has the answer now: the shard's next call says so, and jobs.lua forgets it.
  Outcome<JobId> erased;
  producer->erase(broker::JobRef::by_id(shard_of(call) + 8), erased.callback());
  settle();
  const std::string tag = take("erase").tag();
  EXPECT_NE(tag.find("," + number), std::string::npos) << tag;
}

// Reserves of another tube that have waited longer, more of them than a call looks at, do not
// keep a put's job from the reserve of its tube.
TEST_F(Waking, APutCarriesAReserveOfItsTubeBehindManyLongerWaitingOnesOfAnother) {
  std::vector<std::unique_ptr<broker::Session>> idle;
  std::deque<Outcome<broker::Job>> idle_got(40);
  for (auto& got : idle_got) {
    idle.push_back(session());
    idle.back()->reserve(within(100s, {"idle"}), got.callback());
  }
  rest();
  Outcome<broker::Job> got;
  auto worker = waiting(got);
  auto producer = session();
  Outcome<broker::PutResult> put;
  put_carrying(*producer, put, holder(41));
}

// --- what makes heads unknown: a channel resubscribed, an older node's message

TEST_F(Waking, AResubscribedShardChannelMakesItsHeadsUnknownAndAWaitingReserveProbesIt) {
  auto s = session();
  Outcome<broker::Job> got;
  s->reserve({}, got.callback());
  rest();
  redis->shard_resubscribed(2);
  settle();
  Call probe = take("probe");
  EXPECT_EQ(shard_of(probe), 2U);
  EXPECT_EQ(redis->count("probe"), 0U);
  answer_probe(probe, {head(1024, 6)});
  settle();
  Call reserve = take("reserve");
  EXPECT_EQ(shard_of(reserve), 2U);
}

// A node's channels are subscribed after its start, and under load their confirmations can come
// while a reserve's probes are answered: the shard whose head that made unknown is asked again,
// not passed over for a worse job known elsewhere.
TEST_F(Waking, AShardChannelSubscribedDuringAReservesProbeRoundIsProbedAgainBeforeAnyReserve) {
  auto s = session();
  Outcome<broker::Job> got;
  s->reserve({}, got.callback());
  settle();
  std::optional<Call> last;
  while (auto probe = redis->take("probe")) {
    const std::uint32_t shard = shard_of(*probe);
    if (shard == 3) {
      last = std::move(*probe);
      continue;
    }
    answer_probe(*probe, {shard == 1 ? head(50, 16) : shard == 2 ? head(1, 17) : ""});
  }
  ASSERT_TRUE(last.has_value());
  redis->shard_resubscribed(2);
  answer_probe(*last, {""});
  settle();
  EXPECT_EQ(redis->count("reserve"), 0U) << "a reserve before the unknown shard was asked";
  Call probe = take("probe");
  EXPECT_EQ(shard_of(probe), 2U);
  answer_probe(probe, {head(1, 17)});
  settle();
  Call reserve = take("reserve");
  EXPECT_EQ(shard_of(reserve), 2U);
  ASSERT_GE(reserve.args().size(), 2U);
  EXPECT_EQ(reserve.args()[1], head(50, 16)) << "the best known elsewhere, as the bound";
}

TEST_F(Waking, AnOlderNodesMessageWithoutAHeadMakesTheHeadUnknownAndWakesAWaiter) {
  auto s = session();
  Outcome<broker::Job> got;
  s->reserve({}, got.callback());
  rest();
  redis->publish("r dq:{1} default");
  settle();
  EXPECT_EQ(redis->count("reserve"), 0U);
  Call probe = take("probe");
  EXPECT_EQ(shard_of(probe), 1U);
  EXPECT_EQ(redis->count("probe"), 0U);
  answer_probe(probe, {head(1024, 5)});
  settle();
  Call reserve = take("reserve");
  EXPECT_EQ(shard_of(reserve), 1U);
}

TEST_F(Waking, AfterAnOlderNodesMessageEveryShardIsAskedBeforeTimedOut) {
  auto s = session();
  Outcome<broker::Job> got;
  s->reserve(within(2s), got.callback());
  rest();
  redis->publish("r dq:{1} default");
  settle();
  Call probe = take("probe");
  answer_probe(probe, {""});
  settle();
  clock->advance(2s);
  // Every shard channel held, but the older node publishes on the node-wide channel, which the
  // PINGs do not wait for.
  let_messages_in();
  EXPECT_EQ(redis->count("probe"), kShards);
  EXPECT_FALSE(got.done());
  answer_probes();
  settle();
  ASSERT_TRUE(got.done());
  EXPECT_EQ(got.result->status().code(), Code::kTimedOut);
}

TEST_F(Waking, AMessageOfAPausedTubeWakesNobodyAndItsProbesLeaveItOutUntilThePauseEnds) {
  paused_elsewhere("a", 3s);
  auto s = session();
  Outcome<broker::Job> got;
  broker::ReserveRequest request;
  request.tubes = {"a", "b"};
  s->reserve(request, got.callback());
  settle();
  ASSERT_EQ(redis->count("probe"), kShards);
  while (auto probe = redis->take("probe")) {
    EXPECT_EQ(probe->args(), std::vector<std::string>{"b"});
    answer_probe(*probe, {""});
  }
  settle();
  announce(1, head(1024, 5), "a");
  EXPECT_EQ(redis->count("reserve"), 0U);
  EXPECT_EQ(redis->count("probe"), 0U);
  clock->advance(3s);
  ASSERT_EQ(redis->count("probe"), kShards);
  while (auto probe = redis->take("probe")) {
    EXPECT_EQ(probe->args(), (std::vector<std::string>{"a", "b"}));
  }
}

}  // namespace
}  // namespace delayq::broker::redis::testing
