// reserve_end_test.cc — how a node's reserve ends, over a scripted Redis (waking_fixture.h):
// cancelled, stopped, timed out, answered once; the waiting count it reports in dq:waiting; and
// DEADLINE_SOON, a held job's TTR ending a reserve of the watch list. No process, no sleep: the
// test answers every call.
#include "broker/redis/waking_fixture.h"

namespace delayq::broker::redis::testing {
namespace {

using namespace std::chrono_literals;
using delayq::redis::Reply;

using Waking = WakingTest;
using DeadlineSoon = WakingTest;

// Redis answers none of a reserve's calls (its heartbeat neither).
class Silent : public WakingTest {
 protected:
  // `s` reserves, waiting at most `timeout`; its probes are never answered. It answers TIMED_OUT
  // `at` after it came, and not a millisecond before.
  void expect_timed_out_at(broker::Session& s, Outcome<broker::Job>& got, Millis timeout,
                           Millis at) {
    s.reserve(within(timeout), got.callback());
    settle();
    ASSERT_EQ(redis->count("probe"), kShards);
    clock->advance(at - Millis{1});
    EXPECT_FALSE(got.done());
    clock->advance(Millis{1});
    ASSERT_TRUE(got.done());
    EXPECT_EQ(got.result->status().code(), Code::kTimedOut);
  }
};

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

// Redis answers nothing after a reserve's deadline (stopped in an outage's first seconds, before
// the heartbeat tells): the reserve answers TIMED_OUT once Redis has been silent for 40 ms.
TEST_F(Silent, AReserveAnswersTimedOutFortyMillisecondsAfterItsDeadline) {
  auto s = session();
  Outcome<broker::Job> got;
  expect_timed_out_at(*s, got, 2s, 2040ms);
  // The answers come at last, one shard holding a job: nobody goes for it on the reserve's behalf.
  answer_probes({{1, head(1024, 5)}});
  settle();
  EXPECT_EQ(redis->count("reserve"), 0U);
  EXPECT_EQ(got.calls, 1);
}

// A poll (a reserve that waits less than a second) gives its calls the whole second, silent
// Redis or not: on a loaded node they may be slow, and it must see a job put before it came.
TEST_F(Silent, APollAnswersTimedOutOneSecondAfterItsDeadline) {
  auto s = session();
  Outcome<broker::Job> got;
  expect_timed_out_at(*s, got, 500ms, 1500ms);
}

// While Redis answers other calls (a loaded node: the reserve's own calls are slow, not lost),
// the reserve waits for them up to a second after its deadline.
TEST_F(Waking, WhileRedisAnswersOtherCallsAReserveWaitsForItsOwnUpToASecondAfterItsDeadline) {
  auto s = session();
  auto other = session();
  Outcome<broker::Job> got;
  s->reserve(within(1s), got.callback());
  settle();
  ASSERT_EQ(redis->count("probe"), kShards);  // never answered, until after the end
  clock->advance(1s);
  answer_others_for(*other, 990ms);
  EXPECT_FALSE(got.done());
  clock->advance(10ms);
  ASSERT_TRUE(got.done());
  EXPECT_EQ(got.result->status().code(), Code::kTimedOut);
}

// No heartbeat answered for more than half a lease: Redis is out of reach, and a reserve
// answers TIMED_OUT at its deadline, with no grace for calls that will not come back.
TEST_F(Silent, WithNoHeartbeatForHalfALeaseAReserveAnswersTimedOutAtItsDeadline) {
  auto s = session();
  Outcome<broker::Job> got;
  expect_timed_out_at(*s, got, 4s, 4s);
}

// A reserve call that fails while Redis is out of reach does not end a reserve whose timeout is
// still to come: it waits on, and answers TIMED_OUT at its time.
TEST_F(Waking, WithRedisOutOfReachAFailedReserveCallWaitsOnUntilItsTimeout) {
  auto s = session();
  Outcome<broker::Job> got;
  s->reserve(within(10s), got.callback());
  rest();
  clock->advance(3s);  // no heartbeat answered since the start: more than half the 5 s lease
  announce(1, head(1024, 5));
  Call taking = take("reserve");
  redis->fail(taking, Status(Code::kIOError, "no answer in time"));
  settle();
  EXPECT_FALSE(got.done()) << "answered " << got.result->status().to_string();
  clock->advance(7s);
  settle();
  ASSERT_TRUE(got.done());
  EXPECT_EQ(got.result->status().code(), Code::kTimedOut);
  // Redis answers again: the node's own round of probes (its look every 5 s) ends.
  for (int i = 0; i < 10; ++i) {
    clock->advance(10ms);
    rest();
  }
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
  auto other = session();
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
  answer_others_for(*other, 500ms);  // Redis answers, slowly for this put
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
