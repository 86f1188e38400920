// waking_test.cc — a node's reserves over a scripted Redis (fixture.h): which shards a reserve
// asks and when, what the shards' answers and the channels' messages teach it, and how it ends
// (a job, TIMED_OUT, DEADLINE_SOON). No process, no sleep: the test answers every call.
// Waking: trying shards, waking waiters, ending reserves (waking.cc, session.cc's reserve side);
// ProbeRounds: the rounds of probes that waiting reserves share; DeadlineSoon: a held job's TTR.
#include <gtest/gtest.h>

#include <algorithm>
#include <deque>
#include <map>
#include <set>

#include "broker/redis/fixture.h"
#include "broker/redis/layout.h"

namespace delayq::broker::redis::testing {
namespace {

using namespace std::chrono_literals;
using delayq::redis::Reply;

class WakingTest : public NodeTest {
 protected:
  // A head as jobs.lua writes it, "priority:created:id", all created at one millisecond.
  static std::string head(std::uint32_t priority, JobId id) {
    return std::to_string(priority) + ":1799999999000:" + std::to_string(id);
  }
  // The name in Redis of the n-th session this node opened.
  [[nodiscard]] std::string holder(int n) const {
    return broker->node_name() + "/" + std::to_string(n);
  }
  // The session a reserve call was made for (its first argument), "" if none.
  static std::string who(const Call& call) {
    const auto args = call.args();
    return args.empty() ? std::string() : args[0];
  }
  // The id of the job a reserve got; 0 if it got none (yet).
  static JobId id_of(const Outcome<broker::Job>& got) {
    return got.done() && got.result->is_ok() ? got.result->value().view.id : 0;
  }
  // Answers every probe of one tube waiting now: its head in each shard of `heads` (depth as in
  // `depths`, else 1), none elsewhere. Returns how many it answered.
  std::size_t answer_probes(const std::map<std::uint32_t, std::string>& heads = {},
                            const std::map<std::uint32_t, std::int64_t>& depths = {}) {
    std::size_t answered = 0;
    while (auto probe = redis->take("probe")) {
      const std::uint32_t shard = shard_of(*probe);
      const auto it = heads.find(shard);
      const auto depth = depths.find(shard);
      if (it == heads.end()) {
        answer_probe(*probe, {""});
      } else {
        answer_probe(*probe, {it->second}, {depth == depths.end() ? 1 : depth->second});
      }
      ++answered;
    }
    return answered;
  }
  // Answers every probe waiting: shard `failed`'s with a connection reset, the others' with no
  // job.
  void fail_probes_of(std::uint32_t failed) {
    while (auto probe = redis->take("probe")) {
      if (shard_of(*probe) == failed) {
        redis->fail(*probe, Status(Code::kIOError, "connection reset"));
      } else {
        answer_probe(*probe, {""});
      }
    }
  }
  // Answers probe rounds, each saying no shard holds a job, until none is asked: every reserve
  // made so far waits.
  void rest() {
    settle();
    while (redis->count("probe") > 0) {
      answer_probes();
      settle();
    }
  }
  // Answers a reserve call with a miss ("worse" or "notfound") and the shard's heads after it.
  void miss(Call& call, const std::string& code, const std::vector<std::string>& heads) {
    std::vector<Reply> h;
    std::vector<Reply> d;
    for (const auto& one : heads) {
      h.push_back(Reply::string(one));
      d.push_back(Reply::number(one.empty() ? 0 : 1));
    }
    redis->answer(call, reply::array({Reply::string(code), Reply::string("missed"),
                                      reply::array(std::move(h)), reply::array(std::move(d))}));
  }
  // Answers the sync_shards() round waiting: every shard channel held throughout.
  void let_messages_in() {
    redis->answer_syncs(std::vector<bool>(kShards, true));
    settle();
  }
  // A message on shard `shard`'s channel from another node: `tube`'s best there is `best`.
  void announce(std::uint32_t shard, const std::string& best, const std::string& tube = "default") {
    const std::string index = std::to_string(shard);
    redis->publish_shard(shard, "r dq:{" + index + "} " + tube + " other-node " + best);
    settle();
  }
  // A call of `s` to `shard` whose answer is lost (an erase): what the shard holds is unknown
  // now, which wakes nobody by itself.
  void lose_an_answer(broker::Session& s, std::uint32_t shard) {
    Outcome<JobId> erased;
    s.erase(broker::JobRef::by_id(kShards + shard), erased.callback());
    settle();
    Call erase = take("erase");
    EXPECT_EQ(shard_of(erase), shard);
    redis->fail(erase, Status(Code::kIOError, "connection reset"));
    settle();
    EXPECT_EQ(redis->count("probe"), 0U);
  }
  // `s` reserves job `id` (of its shard), held for `ttr`; afterwards no shard is known to hold
  // another job of "default".
  void hold(broker::Session& s, JobId id, std::chrono::seconds ttr) {
    Outcome<broker::Job> got;
    s.reserve({}, got.callback());
    settle();
    answer_probes({{shard_of_id(id, kShards), head(1024, id)}});
    settle();
    Call reserve = take("reserve");
    JobView job = ready_job(id);
    job.ttr = ttr;
    redis->answer(reserve, reserved(job, {""}));
    settle();
    ASSERT_TRUE(got.done() && got.result->is_ok());
  }
  // Another node paused `tube` for `length`: the node hears "c" and reads the pauses.
  void paused_elsewhere(const std::string& tube, std::chrono::seconds length) {
    redis->publish("c");
    settle();
    const auto until = clock->now_unix_ms() + length.count() * 1000;
    while (auto read = redis->take("HGETALL")) {
      const bool pauses = !read->args().empty() && read->args()[0] == "dq:pauses";
      redis->answer(*read,
                    pauses ? reply::array({Reply::string(tube),
                                           Reply::string(std::to_string(until) + " " +
                                                         std::to_string(length.count()) + " 1")})
                           : reply::array({}));
    }
    settle();
  }
  // A reserve that waits at most `timeout`, of the watch list unless `tubes` are named.
  static broker::ReserveRequest within(Millis timeout, std::vector<std::string> tubes = {}) {
    broker::ReserveRequest request;
    request.timeout = timeout;
    request.tubes = std::move(tubes);
    return request;
  }
};

using Waking = WakingTest;
using ProbeRounds = WakingTest;
using DeadlineSoon = WakingTest;

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

TEST_F(Waking, ANodesOwnMessageWakesNobody) {
  auto s = session();
  Outcome<broker::Job> got;
  s->reserve({}, got.callback());
  settle();
  answer_all("probe", reply::ok({reply::array({delayq::redis::Reply::string("")}),
                                 reply::array({delayq::redis::Reply::number(0)})}));
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

TEST_F(ProbeRounds, EveryFiveSecondsEveryTubeAReserveWaitsForIsProbedAgain) {
  auto s = session();
  Outcome<broker::Job> got;
  s->reserve({}, got.callback());
  rest();
  clock->advance(4999ms);
  EXPECT_EQ(redis->count("probe"), 0U);
  clock->advance(1ms);
  ASSERT_EQ(redis->count("probe"), kShards);
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

TEST_F(ProbeRoundsOf20Shards, AReservesRoundGoesAtOnceAndAResyncsEightEveryTwoMilliseconds) {
  auto s = session();
  Outcome<broker::Job> got;
  s->reserve({}, got.callback());
  settle();
  EXPECT_EQ(redis->count("probe"), 20U);
  answer_probes();
  settle();
  clock->advance(5s);
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
  broker::PutRequest request;
  request.body = "hello";
  producer->put(request, put.callback());
  settle();
  Call call = take("put");
  const auto args = call.args();
  ASSERT_GE(args.size(), 3U);
  EXPECT_EQ(std::vector<std::string>(args.end() - 3, args.end()),
            (std::vector<std::string>{holder(1), "1", "default"}));
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

// --- how a reserve ends: cancelled, stopped, timed out, answered once

TEST_F(Waking, CancelReserveAnswersTimedOutOnTheExecutorAndReleasesAJobTakenMeanwhileUncounted) {
  auto s = session();
  Outcome<broker::Job> got;
  const auto ticket = s->reserve({}, got.callback());
  settle();
  answer_probes({{2, head(1024, 6)}});
  settle();
  Call reserve = take("reserve");
  EXPECT_TRUE(s->cancel_reserve(ticket));
  EXPECT_FALSE(got.done()) << "answered inside cancel_reserve()";
  EXPECT_FALSE(s->cancel_reserve(ticket));
  settle();
  ASSERT_TRUE(got.done());
  EXPECT_EQ(got.result->status().code(), Code::kTimedOut);
  EXPECT_NE(got.result->status().message().find("cancelled"), std::string::npos);
  // The script reserved job 6 for it all the same: nobody has it, so it is undone at once, with
  // the flag that counts no release.
  redis->answer(reserve, reserved(ready_job(6), {""}));
  settle();
  Call release = take("release");
  EXPECT_EQ(shard_of(release), 2U);
  EXPECT_EQ(release.args(), (std::vector<std::string>{holder(1), "6", "", "", "1", "1"}));
  EXPECT_EQ(got.calls, 1);
}

TEST_F(Waking, AClosedSessionsReserveIsNeverAnsweredAndAJobTakenForItIsReleasedUncounted) {
  auto s = session();
  Outcome<broker::Job> got;
  s->reserve({}, got.callback());
  settle();
  answer_probes({{2, head(1024, 6)}});
  settle();
  Call reserve = take("reserve");
  s.reset();
  settle();
  redis->answer(reserve, reserved(ready_job(6), {""}));
  settle();
  EXPECT_FALSE(got.done());
  Call release = take("release");
  EXPECT_EQ(release.args(), (std::vector<std::string>{holder(1), "6", "", "", "1", "1"}));
}

TEST_F(Waking, StopWaitingEndsAWaitingReserveWithTimedOutAfterLettingMessagesIn) {
  auto s = session();
  Outcome<broker::Job> got;
  const auto ticket = s->reserve({}, got.callback());
  rest();
  EXPECT_TRUE(s->stop_waiting(ticket));
  EXPECT_FALSE(got.done());
  settle();
  EXPECT_EQ(redis->syncs_waiting(), 1U);
  EXPECT_FALSE(got.done());
  let_messages_in();
  EXPECT_EQ(redis->count("probe"), 0U) << "every channel held: nothing to ask";
  ASSERT_TRUE(got.done());
  EXPECT_EQ(got.result->status().code(), Code::kTimedOut);
}

TEST_F(Waking, StopWaitingDuringATryLetsTheTryAnswerTheJobItFinds) {
  auto s = session();
  Outcome<broker::Job> got;
  const auto ticket = s->reserve({}, got.callback());
  settle();
  ASSERT_EQ(redis->count("probe"), kShards);
  EXPECT_TRUE(s->stop_waiting(ticket));
  settle();
  EXPECT_EQ(redis->syncs_waiting(), 0U);
  answer_probes({{1, head(1024, 5)}});
  settle();
  Call reserve = take("reserve");
  redis->answer(reserve, reserved(ready_job(5), {""}));
  settle();
  ASSERT_TRUE(got.done());
  ASSERT_TRUE(got.result->is_ok()) << got.result->status().to_string();
  EXPECT_EQ(id_of(got), 5U);
}

TEST_F(Waking, WithRedisSilentAReserveAnswersTimedOutOneSecondAfterItsDeadline) {
  auto s = session();
  Outcome<broker::Job> got;
  s->reserve(within(2s), got.callback());
  settle();
  ASSERT_EQ(redis->count("probe"), kShards);  // never answered, until after the end
  clock->advance(2999ms);
  EXPECT_FALSE(got.done());
  clock->advance(1ms);
  ASSERT_TRUE(got.done());
  EXPECT_EQ(got.result->status().code(), Code::kTimedOut);
  // The answers come at last, one shard holding a job: nobody goes for it on the reserve's behalf.
  answer_probes({{1, head(1024, 5)}});
  settle();
  EXPECT_EQ(redis->count("reserve"), 0U);
  EXPECT_EQ(got.calls, 1);
}

TEST_F(Waking, AReserveWithTimeoutZeroLooksAtEveryShardAndLetsMessagesInBeforeTimedOut) {
  auto s = session();
  Outcome<broker::Job> got;
  s->reserve(within(0ms), got.callback());
  EXPECT_FALSE(got.done());
  settle();
  EXPECT_EQ(answer_probes(), kShards);
  settle();
  EXPECT_EQ(redis->syncs_waiting(), 1U);
  EXPECT_FALSE(got.done());
  let_messages_in();
  ASSERT_TRUE(got.done());
  EXPECT_EQ(got.result->status().code(), Code::kTimedOut);
}

TEST_F(Waking, ATimedOutReserveWaitsForThePutsItsSessionMadeBeforeIt) {
  auto s = session();
  std::vector<std::string> answered;
  broker::PutRequest put;
  put.body = "hello";
  s->put(put, [&](Result<broker::PutResult> r) { answered.push_back(r.is_ok() ? "put" : "?"); });
  s->reserve(within(1s), [&](Result<broker::Job> r) {
    answered.push_back(!r.is_ok() && r.status().code() == Code::kTimedOut ? "timed out" : "?");
  });
  settle();
  Call put_call = take("put");
  answer_probes();
  settle();
  clock->advance(1s);
  EXPECT_EQ(redis->syncs_waiting(), 0U) << "looked again before its session's put was answered";
  clock->advance(500ms);
  EXPECT_TRUE(answered.empty());
  const auto now = Reply::number(clock->now_unix_ms());
  redis->answer(put_call, reply::ok({Reply::number(8), now, Reply::number(0), now}));
  settle();
  EXPECT_EQ(redis->syncs_waiting(), 1U);
  let_messages_in();
  EXPECT_EQ(answered, (std::vector<std::string>{"put", "timed out"}));
}

TEST_F(Waking, ATimedOutReserveDoesNotWaitForPutsItsSessionMadeAfterIt) {
  auto s = session();
  Outcome<broker::Job> got;
  Outcome<broker::PutResult> put;
  s->reserve(within(1s), got.callback());
  broker::PutRequest request;
  request.body = "hello";
  s->put(request, put.callback());
  settle();
  EXPECT_EQ(redis->count("put"), 1U);
  answer_probes();
  settle();
  clock->advance(1s);
  EXPECT_EQ(redis->syncs_waiting(), 1U);
  let_messages_in();
  ASSERT_TRUE(got.done());
  EXPECT_EQ(got.result->status().code(), Code::kTimedOut);
  EXPECT_FALSE(put.done());
}

TEST_F(Waking, AReserveOfABadTubeNameIsRefusedOnTheExecutorAndAsksNothing) {
  auto s = session();
  Outcome<broker::Job> got;
  broker::ReserveRequest request;
  request.tubes = {"-bad"};
  EXPECT_EQ(s->reserve(request, got.callback()), 0U);
  EXPECT_FALSE(got.done()) << "answered inside reserve()";
  settle();
  ASSERT_TRUE(got.done());
  EXPECT_EQ(got.result->status().code(), Code::kInvalidArgument);
  EXPECT_EQ(got.calls, 1);
  EXPECT_EQ(redis->count("probe"), 0U);
}

TEST_F(Waking, AServedReserveIsAnsweredOnceWhateverComesAfter) {
  auto s = session();
  Outcome<broker::Job> got;
  const auto ticket = s->reserve(within(1s), got.callback());
  EXPECT_FALSE(got.done());
  settle();
  answer_probes({{1, head(1024, 5)}});
  settle();
  Call reserve = take("reserve");
  redis->answer(reserve, reserved(ready_job(5), {""}));
  settle();
  ASSERT_TRUE(got.done());
  clock->advance(3s);  // past its deadline and the grace after it
  EXPECT_FALSE(s->cancel_reserve(ticket));
  EXPECT_FALSE(s->stop_waiting(ticket));
  settle();
  EXPECT_EQ(got.calls, 1);
  EXPECT_TRUE(got.result->is_ok());
  EXPECT_EQ(redis->syncs_waiting(), 0U);
}

// --- the waiting count in dq:waiting

TEST_F(Waking, TheWaitingCountIsReportedTenMillisecondsAfterAChangeOneWriteForABurst) {
  auto s = session();
  std::deque<Outcome<broker::Job>> got(3);
  for (auto& one : got) s->reserve({}, one.callback());
  rest();
  clock->advance(9ms);
  EXPECT_EQ(redis->count("HSET"), 0U);
  clock->advance(1ms);
  Call report = take("HSET");
  EXPECT_EQ(report.args(), (std::vector<std::string>{"dq:waiting", broker->node_name(), "3"}));
  EXPECT_EQ(redis->count("HSET"), 0U);
  announce(1, head(1024, 5));
  Call reserve = take("reserve");
  redis->answer(reserve, reserved(ready_job(5), {""}));
  settle();
  ASSERT_TRUE(got[0].done());
  clock->advance(10ms);
  report = take("HSET");
  EXPECT_EQ(report.args(), (std::vector<std::string>{"dq:waiting", broker->node_name(), "2"}));
}

// dq:waiting, which the other nodes' stats sum, stops counting a cancelled reserve.
TEST_F(Waking, ACancelledReserveIsReportedAsNoLongerWaiting) {
  auto s = session();
  Outcome<broker::Job> got;
  const auto ticket = s->reserve({}, got.callback());
  rest();
  clock->advance(10ms);
  ASSERT_EQ(redis->count("HSET"), 1U);
  Call report = take("HSET");
  EXPECT_EQ(report.args().back(), "1");
  EXPECT_TRUE(s->cancel_reserve(ticket));
  settle();
  clock->advance(10ms);
  ASSERT_EQ(redis->count("HSET"), 1U) << "the count went unreported";
  report = take("HSET");
  EXPECT_EQ(report.args().back(), "0");
}

// ... nor the waiting reserve of a session that ended.
TEST_F(Waking, AClosedSessionsWaitingReserveIsReportedAsNoLongerWaiting) {
  auto s = session();
  Outcome<broker::Job> got;
  s->reserve({}, got.callback());
  rest();
  clock->advance(10ms);
  ASSERT_EQ(redis->count("HSET"), 1U);
  Call report = take("HSET");
  EXPECT_EQ(report.args().back(), "1");
  s.reset();
  settle();
  clock->advance(10ms);
  ASSERT_EQ(redis->count("HSET"), 1U) << "the count went unreported";
  report = take("HSET");
  EXPECT_EQ(report.args().back(), "0");
}

// --- DEADLINE_SOON: a held job's TTR ends a reserve of the watch list

TEST_F(DeadlineSoon, AWatchListReserveAnswersDeadlineSoonWhenAHeldJobEntersItsLastSecond) {
  auto s = session();
  hold(*s, 6, 2s);
  Outcome<broker::Job> got;
  s->reserve({}, got.callback());
  settle();
  EXPECT_EQ(redis->count("probe"), 0U);
  clock->advance(999ms);
  EXPECT_EQ(redis->syncs_waiting(), 0U);
  EXPECT_FALSE(got.done());
  clock->advance(1ms);
  EXPECT_EQ(redis->syncs_waiting(), 1U);
  EXPECT_FALSE(got.done());
  let_messages_in();
  ASSERT_TRUE(got.done());
  EXPECT_EQ(got.result->status().code(), Code::kDeadlineSoon);
}

TEST_F(DeadlineSoon, AReserveNamingItsTubesIsNotEndedByAHeldJobsLastSecond) {
  auto s = session();
  hold(*s, 6, 2s);
  Outcome<broker::Job> got;
  s->reserve(within(1500ms, {"default"}), got.callback());
  settle();
  clock->advance(1000ms);
  EXPECT_EQ(redis->syncs_waiting(), 0U);
  clock->advance(499ms);
  EXPECT_EQ(redis->syncs_waiting(), 0U);
  EXPECT_FALSE(got.done());
  clock->advance(1ms);
  EXPECT_EQ(redis->syncs_waiting(), 1U);
  let_messages_in();
  ASSERT_TRUE(got.done());
  EXPECT_EQ(got.result->status().code(), Code::kTimedOut);
}

}  // namespace
}  // namespace delayq::broker::redis::testing
