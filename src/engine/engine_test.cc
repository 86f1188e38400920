// Scenario tests of the engine, one rule each, on a manual clock. The long random comparison
// with a reference model is engine_sim_test.cc.
#include "engine/engine.h"

#include <gtest/gtest.h>

namespace delayq::engine {
namespace {

using Kind = ReserveResult::Kind;

class EngineTest : public ::testing::Test {
 protected:
  JobId put(ClientId client, Millis delay, std::uint32_t priority = 100, std::string_view key = {},
            std::string_view group = {}) {
    PutRequest request;
    request.due = Due::after(delay);
    request.priority = priority;
    request.body = "body";
    request.key = key;
    request.group = group;
    auto result = engine.put(client, request);
    EXPECT_TRUE(result.is_ok()) << result.status().to_string();
    return result.value().id;
  }
  JobState state(JobId id) { return engine.peek(id).value().state; }
  void pass(Millis by) {
    clock.advance(by);
    engine.advance();
  }

  ManualClock clock;
  Engine engine{clock};
  ClientId producer = engine.connect();
  ClientId worker = engine.connect();
};

TEST_F(EngineTest, DelayedJobBecomesReadyAtItsDueMillisecondAndNotBefore) {
  const JobId id = put(producer, Millis{1500});
  EXPECT_EQ(state(id), JobState::kDelayed);
  // A lower bound that is never in the past: the caller may sleep until then and look again.
  ASSERT_TRUE(engine.next_wakeup_us().has_value());
  EXPECT_LE(*engine.next_wakeup_us(), (clock.now_unix_ms() + 1500) * 1000);
  EXPECT_GT(*engine.next_wakeup_us(), clock.now_unix_ms() * 1000);
  EXPECT_EQ(engine.reserve(worker, Millis{0}).kind, Kind::kTimedOut);
  pass(Millis{1499});
  EXPECT_EQ(state(id), JobState::kDelayed);
  EXPECT_EQ(engine.reserve(worker, Millis{0}).kind, Kind::kTimedOut);
  pass(Millis{1});
  EXPECT_EQ(state(id), JobState::kReady);
  const ReserveResult got = engine.reserve(worker, Millis{0});
  ASSERT_EQ(got.kind, Kind::kReserved);
  EXPECT_EQ(got.job.id, id);
  EXPECT_EQ(got.job.counters.reserves, 1U);
}

TEST_F(EngineTest, ReadyJobsGoOutByPriorityThenId) {
  const JobId a = put(producer, Millis{0}, 5);
  const JobId b = put(producer, Millis{0}, 1);
  const JobId c = put(producer, Millis{0}, 5);
  const JobId d = put(producer, Millis{0}, 0);
  for (const JobId expected : {d, b, a, c}) {
    const ReserveResult got = engine.reserve(worker, Millis{0});
    ASSERT_EQ(got.kind, Kind::kReserved);
    EXPECT_EQ(got.job.id, expected);
  }
}

TEST_F(EngineTest, WaitingWorkersAreServedFirstComeFirstServed) {
  const ClientId second = engine.connect();
  EXPECT_EQ(engine.reserve(worker, std::nullopt).kind, Kind::kWaiting);
  EXPECT_EQ(engine.reserve(second, std::nullopt).kind, Kind::kWaiting);
  EXPECT_EQ(engine.stats().waiting, 2U);
  const JobId first_job = put(producer, Millis{0});
  auto wakeups = engine.take_wakeups();
  ASSERT_EQ(wakeups.size(), 1U);
  EXPECT_EQ(wakeups[0].client, worker);
  EXPECT_EQ(wakeups[0].result.job.id, first_job);
  const JobId later = put(producer, Millis{20});
  EXPECT_TRUE(engine.take_wakeups().empty());
  pass(Millis{20});
  wakeups = engine.take_wakeups();
  ASSERT_EQ(wakeups.size(), 1U);
  EXPECT_EQ(wakeups[0].client, second);
  EXPECT_EQ(wakeups[0].result.job.id, later);
}

TEST_F(EngineTest, ReserveWithTimeoutTimesOut) {
  EXPECT_EQ(engine.reserve(worker, Millis{300}).kind, Kind::kWaiting);
  pass(Millis{299});
  EXPECT_TRUE(engine.take_wakeups().empty());
  pass(Millis{1});
  const auto wakeups = engine.take_wakeups();
  ASSERT_EQ(wakeups.size(), 1U);
  EXPECT_EQ(wakeups[0].result.kind, Kind::kTimedOut);
  EXPECT_EQ(engine.stats().waiting, 0U);
}

TEST_F(EngineTest, TtrLapseMakesTheJobReadyAgainAndCountsATimeout) {
  PutRequest request;
  request.ttr = Seconds{2};
  const JobId id = engine.put(producer, request).value().id;
  ASSERT_EQ(engine.reserve(worker, Millis{0}).kind, Kind::kReserved);
  EXPECT_EQ(engine.peek(id).value().deadline_unix_ms, clock.now_unix_ms() + 2000);
  pass(Millis{1999});
  EXPECT_EQ(state(id), JobState::kReserved);
  pass(Millis{1});
  const JobView job = engine.peek(id).value();
  EXPECT_EQ(job.state, JobState::kReady);
  EXPECT_EQ(job.counters.timeouts, 1U);
  EXPECT_EQ(engine.stats().job_timeouts, 1U);
  // The lapsed worker no longer owns it.
  EXPECT_EQ(engine.erase(worker, id).code(), Code::kOk);
}

TEST_F(EngineTest, ReserveSaysDeadlineSoonWhenAReservedJobIsAboutToLapse) {
  PutRequest request;
  request.ttr = Seconds{3};
  (void)engine.put(producer, request).value();
  ASSERT_EQ(engine.reserve(worker, Millis{0}).kind, Kind::kReserved);
  EXPECT_EQ(engine.reserve(worker, Millis{5000}).kind, Kind::kWaiting);
  pass(Millis{1999});
  EXPECT_TRUE(engine.take_wakeups().empty());
  pass(Millis{1});
  const auto wakeups = engine.take_wakeups();
  ASSERT_EQ(wakeups.size(), 1U);
  EXPECT_EQ(wakeups[0].result.kind, Kind::kDeadlineSoon);
  EXPECT_EQ(engine.reserve(worker, Millis{0}).kind, Kind::kDeadlineSoon);
}

TEST_F(EngineTest, OnlyTheReserverMayReleaseBuryOrTouchAndOthersCannotDelete) {
  const JobId id = put(producer, Millis{0});
  ASSERT_EQ(engine.reserve(worker, Millis{0}).kind, Kind::kReserved);
  EXPECT_EQ(engine.release(producer, id, 1, Millis{0}).code(), Code::kNotFound);
  EXPECT_EQ(engine.bury(producer, id, 1).code(), Code::kNotFound);
  EXPECT_EQ(engine.touch(producer, id).code(), Code::kNotFound);
  EXPECT_EQ(engine.erase(producer, id).code(), Code::kNotFound);
  EXPECT_EQ(engine.touch(worker, id).code(), Code::kOk);
  EXPECT_EQ(engine.release(worker, id, 7, Millis{50}).code(), Code::kOk);
  const JobView job = engine.peek(id).value();
  EXPECT_EQ(job.state, JobState::kDelayed);
  EXPECT_EQ(job.priority, 7U);
  EXPECT_EQ(job.delay_ms, 50);
  EXPECT_EQ(job.counters.releases, 1U);
}

TEST_F(EngineTest, DisconnectReturnsReservedJobsToReady) {
  const JobId id = put(producer, Millis{0});
  ASSERT_EQ(engine.reserve(worker, Millis{0}).kind, Kind::kReserved);
  engine.disconnect(worker);
  EXPECT_EQ(state(id), JobState::kReady);
  EXPECT_EQ(engine.stats().reserved, 0U);
  EXPECT_EQ(engine.stats().ready, 1U);
}

TEST_F(EngineTest, KickTakesBuriedJobsFirstThenTheEarliestDelayed) {
  const JobId late = put(producer, Millis{90000});
  const JobId early = put(producer, Millis{5000});
  const JobId buried = put(producer, Millis{0});
  ASSERT_EQ(engine.reserve(worker, Millis{0}).job.id, buried);
  ASSERT_TRUE(engine.bury(worker, buried, 3).is_ok());
  EXPECT_EQ(engine.peek_buried("default").value().id, buried);
  EXPECT_EQ(engine.peek_delayed("default").value().id, early);
  EXPECT_EQ(engine.kick("default", 10), 1U);
  EXPECT_EQ(state(buried), JobState::kReady);
  EXPECT_EQ(engine.peek(buried).value().counters.kicks, 1U);
  EXPECT_EQ(engine.kick("default", 1), 1U);
  EXPECT_EQ(state(early), JobState::kReady);
  EXPECT_EQ(state(late), JobState::kDelayed);
  EXPECT_EQ(engine.kick_job(late).code(), Code::kOk);
  EXPECT_EQ(engine.kick_job(late).code(), Code::kNotFound);
}

TEST_F(EngineTest, PeekDelayedFindsTheEarliestAcrossWheelLevels) {
  ASSERT_TRUE(engine.use(producer, "other").is_ok());
  put(producer, Millis{1});  // another tube's earlier job must not be the answer
  ASSERT_TRUE(engine.use(producer, "default").is_ok());
  const JobId far = put(producer, Millis{86'400'000});
  const JobId near = put(producer, Millis{70'000});
  const JobId tie = put(producer, Millis{70'000});
  EXPECT_EQ(engine.peek_delayed("default").value().id, near);
  ASSERT_TRUE(engine.erase(producer, near).is_ok());
  EXPECT_EQ(engine.peek_delayed("default").value().id, tie);
  ASSERT_TRUE(engine.erase(producer, tie).is_ok());
  EXPECT_EQ(engine.peek_delayed("default").value().id, far);
}

TEST_F(EngineTest, PausedTubeHandsOutNothingUntilThePauseEnds) {
  put(producer, Millis{0});
  ASSERT_TRUE(engine.pause_tube("default", Seconds{2}).is_ok());
  EXPECT_EQ(engine.reserve(worker, std::nullopt).kind, Kind::kWaiting);
  EXPECT_EQ(engine.stats_tube("default").value().pause, Seconds{2});
  pass(Millis{1999});
  EXPECT_TRUE(engine.take_wakeups().empty());
  pass(Millis{1});
  const auto wakeups = engine.take_wakeups();
  ASSERT_EQ(wakeups.size(), 1U);
  EXPECT_EQ(wakeups[0].result.kind, Kind::kReserved);
  EXPECT_EQ(engine.pause_tube("missing", Seconds{1}).code(), Code::kNotFound);
}

TEST_F(EngineTest, AKeyIsUniquePerTubeAndPutIsIdempotentUnlessReplacing) {
  const JobId first = put(producer, Millis{60000}, 100, "order:123");
  PutRequest again;
  again.key = "order:123";
  again.due = Due::after(Millis{10});
  auto retry = engine.put(producer, again);
  ASSERT_TRUE(retry.is_ok());
  EXPECT_FALSE(retry.value().inserted);
  EXPECT_EQ(retry.value().id, first);
  EXPECT_EQ(engine.jobs(), 1U);
  EXPECT_EQ(engine.find_key("default", "order:123").value(), first);

  again.replace = true;
  auto replaced = engine.put(producer, again);
  ASSERT_TRUE(replaced.is_ok());
  EXPECT_TRUE(replaced.value().inserted);
  EXPECT_EQ(replaced.value().replaced, first);
  EXPECT_EQ(engine.peek(first).code(), Code::kNotFound);
  EXPECT_EQ(engine.find_key("default", "order:123").value(), replaced.value().id);

  // The same key in another tube is another job.
  again.tube = "other";
  again.replace = false;
  EXPECT_TRUE(engine.put(producer, again).value().inserted);

  // A reserved holder is not replaced under its worker's feet.
  pass(Millis{10});
  ASSERT_EQ(engine.reserve(worker, Millis{0}).job.id, replaced.value().id);
  again.tube = {};
  again.replace = true;
  EXPECT_EQ(engine.put(producer, again).code(), Code::kConflict);
  // Deleting the job frees its key.
  ASSERT_TRUE(engine.erase(worker, replaced.value().id).is_ok());
  EXPECT_EQ(engine.find_key("default", "order:123").code(), Code::kNotFound);
}

TEST_F(EngineTest, RescheduleMovesADelayedJobEarlierOrLater) {
  const JobId id = put(producer, Millis{4 * 3600 * 1000}, 100, "pet:7:feed");
  const std::int64_t start = clock.now_unix_ms();
  ASSERT_TRUE(engine.reschedule(id, Due::at(start + 2 * 3600 * 1000)).is_ok());
  EXPECT_EQ(engine.peek_key("default", "pet:7:feed").value().due_unix_ms, start + 2 * 3600 * 1000);
  pass(Millis{2 * 3600 * 1000 - 1});
  EXPECT_EQ(state(id), JobState::kDelayed);
  pass(Millis{1});
  EXPECT_EQ(state(id), JobState::kReady);
  ASSERT_TRUE(engine.reschedule(id, Due::at(clock.now_unix_ms() + 100)).is_ok());
  EXPECT_EQ(state(id), JobState::kDelayed);
  ASSERT_TRUE(engine.reschedule(id, Due::at(clock.now_unix_ms() - 100)).is_ok());
  EXPECT_EQ(state(id), JobState::kReady);
  ASSERT_EQ(engine.reserve(worker, Millis{0}).job.id, id);
  EXPECT_EQ(engine.reschedule(id, Due::at(start)).code(), Code::kConflict);
}

TEST_F(EngineTest, GroupsListAndCancelTheirJobs) {
  const JobId a = put(producer, Millis{1000}, 1, {}, "user:1");
  const JobId b = put(producer, Millis{0}, 1, {}, "user:1");
  const JobId other = put(producer, Millis{1000}, 1, {}, "user:2");
  const JobId c = put(producer, Millis{0}, 2, {}, "user:1");
  ASSERT_EQ(engine.reserve(worker, Millis{0}).job.id, b);
  const auto listed = engine.list_group("default", "user:1");
  ASSERT_EQ(listed.size(), 3U);
  EXPECT_EQ(listed[0].id, a);
  EXPECT_EQ(listed[1].id, b);
  EXPECT_EQ(listed[2].id, c);
  EXPECT_EQ(engine.cancel_group("default", "user:1"), 2U);  // b is reserved: kept
  EXPECT_EQ(engine.peek(a).code(), Code::kNotFound);
  EXPECT_EQ(engine.peek(c).code(), Code::kNotFound);
  EXPECT_EQ(state(b), JobState::kReserved);
  EXPECT_EQ(state(other), JobState::kDelayed);
  EXPECT_EQ(engine.stats_tube("default").value().deletes, 2U);
}

TEST_F(EngineTest, TubesComeAndGoWithTheirUsers) {
  ASSERT_TRUE(engine.use(producer, "emails").is_ok());
  EXPECT_EQ(engine.tubes(), (std::vector<std::string>{"default", "emails"}));
  const JobId id = put(producer, Millis{0});
  ASSERT_TRUE(engine.use(producer, "default").is_ok());
  EXPECT_EQ(engine.stats_tube("emails").value().ready, 1U);  // kept alive by its job
  ASSERT_TRUE(engine.erase(producer, id).is_ok());
  EXPECT_EQ(engine.stats_tube("emails").code(), Code::kNotFound);
  EXPECT_EQ(engine.use(producer, "-bad").code(), Code::kInvalidArgument);
  EXPECT_EQ(engine.use(producer, std::string(201, 'a')).code(), Code::kInvalidArgument);
  EXPECT_EQ(engine.watch(worker, "emails").value(), 2U);
  EXPECT_EQ(engine.ignore(worker, "default").value(), 1U);
  EXPECT_EQ(engine.ignore(worker, "emails").code(), Code::kNotIgnored);
  EXPECT_EQ(engine.watched_tubes(worker), (std::vector<std::string>{"emails"}));
}

// list-tubes and list-tubes-watched in beanstalkd's order (checked against beanstalkd 1.12): a
// tube is appended when made; when one goes, the last takes its place.
TEST_F(EngineTest, TubesAreListedInBeanstalkdsOrder) {
  using Names = std::vector<std::string>;
  const ClientId zeta = engine.connect(), alpha = engine.connect(), mid = engine.connect(),
                 beta = engine.connect();
  ASSERT_TRUE(engine.use(zeta, "zeta").is_ok());
  ASSERT_TRUE(engine.use(alpha, "alpha").is_ok());
  ASSERT_TRUE(engine.use(mid, "mid").is_ok());
  ASSERT_TRUE(engine.use(beta, "beta").is_ok());
  EXPECT_EQ(engine.tubes(), (Names{"default", "zeta", "alpha", "mid", "beta"}));
  engine.disconnect(zeta);
  EXPECT_EQ(engine.tubes(), (Names{"default", "beta", "alpha", "mid"}));
  ASSERT_TRUE(engine.use(producer, "zeta").is_ok());
  EXPECT_EQ(engine.tubes(), (Names{"default", "beta", "alpha", "mid", "zeta"}));
  const JobId id = put(mid, Millis{0});
  engine.disconnect(mid);
  EXPECT_EQ(engine.tubes(), (Names{"default", "beta", "alpha", "mid", "zeta"}));  // its job
  ASSERT_TRUE(engine.erase(producer, id).is_ok());
  EXPECT_EQ(engine.tubes(), (Names{"default", "beta", "alpha", "zeta"}));

  ASSERT_TRUE(engine.watch(worker, "a").is_ok());
  ASSERT_TRUE(engine.watch(worker, "b").is_ok());
  ASSERT_TRUE(engine.watch(worker, "c").is_ok());
  ASSERT_TRUE(engine.ignore(worker, "default").is_ok());
  EXPECT_EQ(engine.watched_tubes(worker), (Names{"c", "a", "b"}));
  ASSERT_TRUE(engine.ignore(worker, "a").is_ok());
  EXPECT_EQ(engine.watched_tubes(worker), (Names{"c", "b"}));
}

TEST_F(EngineTest, StateChangesThatMatterAfterARestartAreWrittenAndOthersAreNot) {
  const JobId id = put(producer, Millis{0});
  store::WriteSet put_set = engine.take_mutations();
  ASSERT_EQ(put_set.ops().size(), 2U);
  EXPECT_EQ(put_set.ops()[0].kind, store::WriteSet::Kind::kRecord);
  EXPECT_EQ(put_set.ops()[1].kind, store::WriteSet::Kind::kBody);
  EXPECT_EQ(put_set.ops()[1].value, "body");
  EXPECT_EQ(put_set.next_id(), id + 1);
  // Reserve and touch change nothing a restart keeps: reserved jobs come back ready.
  ASSERT_EQ(engine.reserve(worker, Millis{0}).kind, Kind::kReserved);
  ASSERT_TRUE(engine.touch(worker, id).is_ok());
  EXPECT_TRUE(engine.take_mutations().empty());
  ASSERT_TRUE(engine.bury(worker, id, 9).is_ok());
  store::WriteSet bury_set = engine.take_mutations();
  ASSERT_EQ(bury_set.ops().size(), 1U);
  const auto record = store::decode_record(id, bury_set.ops()[0].value);
  ASSERT_TRUE(record.is_ok());
  EXPECT_EQ(record.value().state, JobState::kBuried);
  EXPECT_EQ(record.value().priority, 9U);
  EXPECT_EQ(record.value().counters.buries, 1U);
  ASSERT_TRUE(engine.erase(producer, id).is_ok());
  store::WriteSet erase_set = engine.take_mutations();
  ASSERT_EQ(erase_set.ops().size(), 1U);
  EXPECT_EQ(erase_set.ops()[0].kind, store::WriteSet::Kind::kErase);
}

TEST_F(EngineTest, RestoreRebuildsStatesKeysAndTheIdMark) {
  ManualClock later(clock.now_unix_ms() + 10'000);
  Engine restored(later);
  const auto record = [](JobId id, JobState state, std::int64_t due) {
    store::JobRecord r;
    r.id = id;
    r.tube = "mail";
    r.state = state;
    r.due_unix_ms = due;
    r.ttr_seconds = 30;
    return r;
  };
  const std::int64_t now = later.now_unix_ms();
  auto keyed = record(3, JobState::kDelayed, now + 5000);
  keyed.key = "k";
  ASSERT_TRUE(restored.restore(record(1, JobState::kReserved, now - 90'000)).is_ok());
  ASSERT_TRUE(restored.restore(record(2, JobState::kDelayed, now - 1)).is_ok());
  ASSERT_TRUE(restored.restore(keyed).is_ok());
  ASSERT_TRUE(restored.restore(record(4, JobState::kBuried, 0)).is_ok());
  EXPECT_EQ(restored.restore(record(4, JobState::kReady, 0)).code(), Code::kCorruption);
  auto clash = record(5, JobState::kReady, 0);
  clash.key = "k";
  EXPECT_EQ(restored.restore(clash).code(), Code::kCorruption);
  restored.finish_restore(100);
  restored.advance();
  EXPECT_EQ(restored.peek(1).value().state, JobState::kReady);
  EXPECT_EQ(restored.peek(2).value().state, JobState::kReady);
  EXPECT_EQ(restored.peek(3).value().state, JobState::kDelayed);
  EXPECT_EQ(restored.peek(3).value().due_unix_ms, now + 5000);
  EXPECT_EQ(restored.find_key("mail", "k").value(), 3U);
  EXPECT_EQ(restored.peek(4).value().state, JobState::kBuried);
  EXPECT_TRUE(restored.take_mutations().empty());
  const ClientId client = restored.connect();
  PutRequest request;
  request.tube = "mail";
  EXPECT_EQ(restored.put(client, request).value().id, 100U);
}

TEST_F(EngineTest, SetPriorityMovesAReadyJobAndIsWritten) {
  const JobId low = put(producer, Millis{0}, 10);
  const JobId high = put(producer, Millis{0}, 20);
  const JobId later = put(producer, Millis{5000}, 30);
  (void)engine.take_mutations();
  ASSERT_TRUE(engine.set_priority(high, 5).is_ok());
  ASSERT_TRUE(engine.set_priority(later, 1).is_ok());
  EXPECT_EQ(engine.peek(later).value().priority, 1U);
  EXPECT_EQ(state(later), JobState::kDelayed);  // a delayed job stays where it is in time
  const store::WriteSet written = engine.take_mutations();
  ASSERT_EQ(written.ops().size(), 2U);  // both new priorities survive a restart
  EXPECT_EQ(written.ops()[0].id, high);
  EXPECT_EQ(written.ops()[1].id, later);
  EXPECT_EQ(engine.reserve(worker, Millis{0}).job.id, high);
  EXPECT_EQ(engine.reserve(worker, Millis{0}).job.id, low);
  EXPECT_EQ(engine.set_priority(low + 100, 1).code(), Code::kNotFound);
  // Unchanged: nothing to write.
  ASSERT_TRUE(engine.set_priority(low, engine.peek(low).value().priority).is_ok());
  EXPECT_TRUE(engine.mutations().empty());
}

// A reserve that names its tubes waits on its own: a client may have many such waits beside
// the one on its watch list; each is woken first come, first served, and the job is the
// client's.
TEST_F(EngineTest, ReservesFromNamedTubesWaitSideBySide) {
  const ClientId session = engine.connect(false);
  auto first = engine.reserve_from(session, {"a", "b"}, std::nullopt);
  auto second = engine.reserve_from(session, {"b"}, Millis{500});
  ASSERT_TRUE(first.is_ok() && second.is_ok());
  ASSERT_EQ(first.value().kind, Kind::kWaiting);
  ASSERT_EQ(second.value().kind, Kind::kWaiting);
  EXPECT_NE(first.value().wait, second.value().wait);
  EXPECT_EQ(engine.stats().waiting, 2U);
  EXPECT_EQ(engine.stats_tube("b").value().waiting_clients, 2U);

  PutRequest request;
  request.tube = "b";
  request.body = "x";
  const JobId id = engine.put(producer, request).value().id;
  const std::vector<Wakeup> woken = engine.take_wakeups();
  ASSERT_EQ(woken.size(), 1U);  // first come, first served
  EXPECT_EQ(woken[0].wait, first.value().wait);
  EXPECT_EQ(woken[0].client, session);
  EXPECT_EQ(woken[0].result.job.id, id);
  ASSERT_TRUE(engine.touch(session, id).is_ok());             // the session holds it
  EXPECT_EQ(engine.stats_tube("a").code(), Code::kNotFound);  // nothing holds "a" any more

  pass(Millis{500});
  const std::vector<Wakeup> timed_out = engine.take_wakeups();
  ASSERT_EQ(timed_out.size(), 1U);
  EXPECT_EQ(timed_out[0].wait, second.value().wait);
  EXPECT_EQ(timed_out[0].result.kind, Kind::kTimedOut);

  auto cancelled = engine.reserve_from(session, {"c"}, std::nullopt);
  ASSERT_TRUE(cancelled.is_ok());
  EXPECT_TRUE(engine.cancel_wait(cancelled.value().wait));
  EXPECT_FALSE(engine.cancel_wait(cancelled.value().wait));
  EXPECT_TRUE(engine.take_wakeups().empty());
  EXPECT_EQ(engine.stats().waiting, 0U);

  EXPECT_EQ(engine.reserve_from(session, {"ok", "-bad"}, std::nullopt).code(),
            Code::kInvalidArgument);
  EXPECT_EQ(engine.stats_tube("ok").code(), Code::kNotFound);  // not left behind
  engine.disconnect(session);                                  // its reservation is ready again
  EXPECT_EQ(state(id), JobState::kReady);
}

TEST_F(EngineTest, ADisconnectEndsEveryWaitOfTheClient) {
  const ClientId session = engine.connect(false);
  ASSERT_TRUE(engine.watch(session, "w").is_ok());
  ASSERT_EQ(engine.reserve(session, std::nullopt).kind, Kind::kWaiting);
  ASSERT_EQ(engine.reserve_from(session, {"x"}, std::nullopt).value().kind, Kind::kWaiting);
  EXPECT_EQ(engine.stats().waiting, 2U);
  engine.disconnect(session);
  EXPECT_EQ(engine.stats().waiting, 0U);
  EXPECT_EQ(engine.stats_tube("x").code(), Code::kNotFound);
  PutRequest request;
  request.tube = "w";
  request.body = "x";
  ASSERT_TRUE(engine.put(producer, request).is_ok());
  EXPECT_TRUE(engine.take_wakeups().empty());
}

TEST_F(EngineTest, InternalClientsUseAndWatchNothing) {
  const TubeStats default_before = engine.stats_tube("default").value();
  const ClientId internal = engine.connect(false);
  PutRequest request;
  request.tube = "work";
  request.body = "x";
  ASSERT_TRUE(engine.put(internal, request).is_ok());
  ASSERT_EQ(engine.watch(internal, "work").value(), 1U);  // it watched nothing before
  EXPECT_EQ(engine.reserve(internal, Millis{0}).kind, Kind::kReserved);
  EXPECT_EQ(engine.stats_tube("default").value().using_clients, default_before.using_clients);
  EXPECT_EQ(engine.stats_tube("default").value().watching_clients, default_before.watching_clients);
  engine.disconnect(internal);
  EXPECT_EQ(engine.stats_tube("work").value().ready, 1U);  // its reservation came back
}

TEST_F(EngineTest, FireObserverSeesDelayedJobsOnlyWithTheirDueTimes) {
  std::vector<std::int64_t> fired;
  engine.on_fire([&fired](std::int64_t due) { fired.push_back(due); });
  const JobId delayed = put(producer, Millis{100});
  put(producer, Millis{0});  // ready at once: not fired by time
  const std::int64_t due = engine.peek(delayed).value().due_unix_ms;
  pass(Millis{100});
  ASSERT_EQ(fired, std::vector<std::int64_t>{due * 1000}) << "in microseconds";
  // A reservation whose TTR lapses is not a fire.
  const ReserveResult got = engine.reserve(worker, Millis{0});
  ASSERT_EQ(got.kind, Kind::kReserved);
  pass(Millis{61000});
  EXPECT_EQ(fired.size(), 1U);
}

TEST_F(EngineTest, TimeThatStepsBackIsHeldAtTheLatestSeen) {
  const JobId id = put(producer, Millis{1000});
  pass(Millis{500});
  clock.advance(Millis{-10'000});
  engine.advance();
  EXPECT_EQ(engine.now(), clock.now_unix_ms() + 10'000);
  EXPECT_EQ(state(id), JobState::kDelayed);
  clock.advance(Millis{10'500});
  engine.advance();
  EXPECT_EQ(state(id), JobState::kReady);
}

// Invariant 8: a wall-clock step back holds no relative timer (a TTR of 3 s still lapses 3 s
// after the reserve), and a step forward fires the due times it passes and nothing relative.
TEST_F(EngineTest, WallClockStepsMoveDueTimesOnlyAndRelativeTimersRunOnTheSteadyClock) {
  const JobId held = put(producer, Millis{0}, 1);
  PutRequest request;
  request.ttr = Seconds{3};
  request.body = "b";
  request.priority = 0;
  const JobId short_ttr = engine.put(producer, request).value().id;
  ASSERT_EQ(engine.reserve(worker, Millis{0}).job.id, short_ttr);
  const ClientId waiter = engine.connect();
  ASSERT_EQ(engine.reserve(waiter, Millis{0}).job.id, held);  // 60 s TTR
  const ClientId idle = engine.connect();
  ASSERT_EQ(engine.watch(idle, "empty").value(), 2U);
  ASSERT_TRUE(engine.ignore(idle, "default").is_ok());
  ASSERT_EQ(engine.reserve(idle, Millis{5000}).kind, Kind::kWaiting);
  ASSERT_TRUE(engine.pause_tube("default", Seconds{4}).is_ok());

  clock.step_wall(Millis{-60'000});  // NTP steps the wall clock back a minute
  engine.advance();
  pass(Millis{2999});
  EXPECT_EQ(state(short_ttr), JobState::kReserved);
  EXPECT_TRUE(engine.take_wakeups().empty());
  pass(Millis{1});  // 3 s after the reserve, by the steady clock
  EXPECT_EQ(state(short_ttr), JobState::kReady);
  pass(Millis{1000});  // the pause (4 s) ended, and the reserve's 5 s run out at 5 s
  EXPECT_EQ(engine.stats_tube("default").value().pause_left, Millis{0});
  pass(Millis{1000});
  const auto wakeups = engine.take_wakeups();
  ASSERT_EQ(wakeups.size(), 1U);
  EXPECT_EQ(wakeups[0].result.kind, Kind::kTimedOut);

  // Forward: a job due in 30 min fires at once, one due in 2 h does not, and the 60 s TTR,
  // 5 s old by the steady clock, holds.
  const std::int64_t wall = clock.now_unix_ms();
  const JobId soon = put(producer, Millis{30 * 60'000});
  const JobId later = put(producer, Millis{2 * 3'600'000});
  clock.step_wall(Millis{3'600'000});
  engine.advance();
  EXPECT_EQ(state(soon), JobState::kReady);
  EXPECT_EQ(state(later), JobState::kDelayed);
  EXPECT_EQ(state(held), JobState::kReserved);
  EXPECT_EQ(engine.peek(held).value().deadline_unix_ms, wall + 3'600'000 + 55'000)
      << "a reservation's end reads on the wall clock as far ahead as it is";
}

// Clocks in the middle of a millisecond: their present has rounded down, their start up. The
// steady clock keeps its distance from the wall clock (no step).
class MidMillisecondClock final : public Clock {
 public:
  [[nodiscard]] std::int64_t now_unix_ms() const override { return now; }
  [[nodiscard]] std::int64_t start_unix_ms() const override { return now + 1; }
  [[nodiscard]] std::int64_t steady_ms() const override { return now - kSteadyOffset; }
  [[nodiscard]] std::int64_t steady_start_ms() const override { return now - kSteadyOffset + 1; }
  static constexpr std::int64_t kSteadyOffset = 1'600'000'000'000;
  std::int64_t now = 1'700'000'000'000;
};

TEST(EngineClockTest, WaitsEndNoEarlierThanAskedEither) {
  MidMillisecondClock clock;
  Engine engine(clock);
  const ClientId worker = engine.connect();
  // Asked at (now + 0.x) ms to wait 300 ms: the wait may end at now + 301, not at now + 300.
  EXPECT_EQ(engine.reserve(worker, Millis{300}).kind, ReserveResult::Kind::kWaiting);
  clock.now += 300;
  engine.advance();
  EXPECT_TRUE(engine.take_wakeups().empty());
  clock.now += 1;
  engine.advance();
  const auto wakeups = engine.take_wakeups();
  ASSERT_EQ(wakeups.size(), 1U);
  EXPECT_EQ(wakeups[0].result.kind, ReserveResult::Kind::kTimedOut);
}

// A TTR no longer than the DEADLINE_SOON margin (1 s) is within it from the moment of the
// reserve, as in beanstalkd, even in the middle of a millisecond, where the TTR's deadline
// counts from the next one.
TEST(EngineClockTest, ATtrOfOneSecondIsDeadlineSoonAtOnce) {
  MidMillisecondClock clock;
  Engine engine(clock);
  const ClientId worker = engine.connect();
  PutRequest request;
  request.ttr = Seconds{1};
  (void)engine.put(worker, request).value();
  ASSERT_EQ(engine.reserve(worker, Millis{0}).kind, ReserveResult::Kind::kReserved);
  EXPECT_EQ(engine.reserve(worker, Millis{0}).kind, ReserveResult::Kind::kDeadlineSoon);
}

TEST(EngineClockTest, DelaysCountFromTheMomentRoundedUpSoNothingIsEverEarly) {
  MidMillisecondClock clock;
  Engine engine(clock);
  const ClientId client = engine.connect();
  PutRequest request;
  request.due = Due::after(Millis{1000});
  const JobId id = engine.put(client, request).value().id;
  // Put at (now + 0.x) ms: due no earlier than a full second later, i.e. now + 1001.
  EXPECT_EQ(engine.peek(id).value().due_unix_ms, clock.now + 1001);
  EXPECT_EQ(engine.peek(id).value().delay_ms, 1000);
  clock.now += 1000;
  engine.advance();
  EXPECT_EQ(engine.peek(id).value().state, JobState::kDelayed);
  clock.now += 1;
  engine.advance();
  EXPECT_EQ(engine.peek(id).value().state, JobState::kReady);
  // A put without a delay is ready at once all the same.
  request.due = Due::after(Millis{0});
  const JobId now_job = engine.put(client, request).value().id;
  EXPECT_EQ(engine.peek(now_job).value().state, JobState::kReady);
}

// A clock that reads to the microsecond, as the system's does; the steady clock keeps its
// distance from the wall clock.
class MicrosecondClock final : public Clock {
 public:
  [[nodiscard]] std::int64_t now_unix_ms() const override { return floor_ms(now_us); }
  [[nodiscard]] std::int64_t start_unix_ms() const override { return (now_us + 999) / 1000; }
  [[nodiscard]] std::int64_t now_unix_us() const override { return now_us; }
  [[nodiscard]] std::int64_t start_unix_us() const override { return now_us; }
  [[nodiscard]] std::int64_t steady_ms() const override { return floor_ms(now_us) - kOffset; }
  [[nodiscard]] std::int64_t steady_start_ms() const override { return start_unix_ms() - kOffset; }
  static std::int64_t floor_ms(std::int64_t us) { return us / 1000; }
  static constexpr std::int64_t kOffset = 1'600'000'000'000;
  std::int64_t now_us = 1'700'000'000'000'300;  // 0.3 ms into a millisecond
};

// Wall and steady clocks whose milliseconds begin at different moments (0.3 ms and 0.9 ms into
// the wall clock's), as the system's do: their readings to the millisecond differ by 1 ms more
// for 0.6 ms of each millisecond.
class PhasedClock final : public Clock {
 public:
  [[nodiscard]] std::int64_t now_unix_ms() const override { return now_us / 1000; }
  [[nodiscard]] std::int64_t now_unix_us() const override { return now_us; }
  [[nodiscard]] std::int64_t steady_ms() const override { return steady_us() / 1000; }
  [[nodiscard]] std::int64_t steady_start_ms() const override { return (steady_us() + 999) / 1000; }
  [[nodiscard]] std::int64_t steady_us() const override { return now_us - kLeadUs; }
  static constexpr std::int64_t kLeadUs = 600'000'000'000'600;
  std::int64_t now_us = 1'700'000'000'000'300;
};

TEST(EngineClockTest, AReservationsEndReadsTheSameWhateverTheMicrosecondOfTheRead) {
  PhasedClock clock;
  Engine engine(clock);
  const ClientId worker = engine.connect();
  const JobId id = engine.put(worker, PutRequest{}).value().id;
  ASSERT_EQ(engine.reserve(worker, Millis{0}).kind, ReserveResult::Kind::kReserved);
  // Reserved 0.7 ms into a steady millisecond: the TTR ends 60 s after the next one, whose
  // start the wall clock reads 0.6 ms into its millisecond 1,700,000,000,000.
  const std::int64_t until = 1'700'000'060'000;
  for (int read = 0; read < 10; ++read) {
    EXPECT_EQ(engine.peek(id).value().deadline_unix_ms, until) << "at +" << read * 100 << " us";
    clock.now_us += 100;
  }
}

class EngineMicrosecondTest : public ::testing::Test {
 protected:
  JobId put(Millis delay, std::string_view tube = "default") {
    PutRequest request;
    request.due = Due::after(delay);
    request.body = "body";
    EXPECT_TRUE(engine.use(producer, tube).is_ok());
    return engine.put(producer, request).value().id;
  }
  JobState state(JobId id) { return engine.peek(id).value().state; }
  void at(std::int64_t us) {
    clock.now_us = us;
    engine.advance();
  }

  MicrosecondClock clock;
  Engine engine{clock};
  ClientId producer = engine.connect();
};

// A delay counts from the put's microsecond: the job fires then, not at the next whole
// millisecond. What is reported is that time's millisecond (rounded down, so the job is never
// handed out before the time it shows) and the delay reads back as given; what is stored says
// that the time lies inside its millisecond, and a restart makes it due at the millisecond's
// end (never early).
TEST_F(EngineMicrosecondTest, ADelayCountsFromTheMicrosecondOfThePut) {
  std::vector<std::int64_t> fired;
  engine.on_fire([&fired](std::int64_t due_us) { fired.push_back(due_us); });
  const std::int64_t start = clock.now_us;
  const JobId id = put(Millis{1000});
  const std::int64_t exact = start + 1'000'000;
  EXPECT_EQ(engine.peek(id).value().due_unix_ms, exact / 1000) << "rounded down";
  EXPECT_EQ(engine.peek(id).value().created_unix_ms, start / 1000);
  EXPECT_EQ(engine.peek(id).value().delay_ms, 1000);
  const store::WriteSet written = engine.take_mutations();
  const store::JobRecord stored = store::decode_record(id, written.ops()[0].value).value();
  EXPECT_EQ(stored.due_unix_ms, exact / 1000);
  EXPECT_TRUE(stored.due_inside);
  EXPECT_EQ(stored.delay_ms, stored.due_unix_ms - stored.created_unix_ms);

  at(exact - 300);  // the due millisecond begins: not yet
  EXPECT_EQ(state(id), JobState::kDelayed);
  EXPECT_EQ(engine.next_wakeup_us(), exact);
  at(exact - 1);
  EXPECT_EQ(state(id), JobState::kDelayed);
  at(exact);
  EXPECT_EQ(state(id), JobState::kReady);
  EXPECT_EQ(fired, std::vector<std::int64_t>{exact});
}

// Jobs waiting for their microsecond can be deleted, kicked, rescheduled and peeked like any
// delayed job, and they fire in the order of their exact times.
TEST_F(EngineMicrosecondTest, JobsWithinTheirDueMillisecondAreDelayedJobsLikeAnyOther) {
  const std::int64_t base = clock.now_us;  // 0.3 ms into a millisecond
  const JobId first = put(Millis{50});
  clock.now_us += 200;
  const JobId second = put(Millis{50});
  clock.now_us += 100;
  const JobId third = put(Millis{50});
  clock.now_us += 100;
  const JobId gone = put(Millis{50});
  const JobId moved = put(Millis{50});
  const JobId other = put(Millis{50}, "other");
  // All in the same millisecond, each waiting for its microsecond.
  at(base - 300 + 50'000);
  EXPECT_EQ(engine.peek_delayed("default").value().id, first);
  EXPECT_EQ(engine.peek_delayed("other").value().id, other);
  ASSERT_TRUE(engine.erase(producer, gone).is_ok());
  ASSERT_TRUE(engine.reschedule(moved, Due::at((base - 300) / 1000 + 60)).is_ok());
  EXPECT_EQ(engine.kick("default", 1), 1U);
  EXPECT_EQ(state(first), JobState::kReady);
  at(base + 50'200);  // second's exact time
  EXPECT_EQ(state(second), JobState::kReady);
  EXPECT_EQ(state(third), JobState::kDelayed);
  EXPECT_EQ(engine.peek_delayed("default").value().id, third);
  at(base + 50'300);
  EXPECT_EQ(state(third), JobState::kReady);
  EXPECT_EQ(state(moved), JobState::kDelayed);
  EXPECT_EQ(engine.peek_delayed("default").value().id, moved);
  at(base - 300 + 60'000);
  EXPECT_EQ(state(moved), JobState::kReady);
  EXPECT_EQ(state(other), JobState::kReady);
  EXPECT_FALSE(engine.next_wakeup_us().has_value());
}

// Rescheduling by a delay counts from the microsecond too; by an absolute time, from none.
TEST_F(EngineMicrosecondTest, ARescheduleByDelayCountsFromTheMicrosecond) {
  const JobId id = put(Millis{60'000});
  clock.now_us += 250;
  const std::int64_t exact = clock.now_us + 100'000;
  ASSERT_TRUE(engine.reschedule(id, Due::after(Millis{100})).is_ok());
  EXPECT_EQ(engine.peek(id).value().delay_ms, 100);
  EXPECT_EQ(engine.peek(id).value().due_unix_ms, exact / 1000);
  at(exact - 1);
  EXPECT_EQ(state(id), JobState::kDelayed);
  at(exact);
  EXPECT_EQ(state(id), JobState::kReady);
  ASSERT_TRUE(engine.reschedule(id, Due::after(Millis{0})).is_ok());
  EXPECT_EQ(state(id), JobState::kReady);
}

// A job stored as due inside its millisecond comes back due at that millisecond's last
// microsecond; one stored as due at a whole millisecond, at that millisecond.
TEST_F(EngineMicrosecondTest, ARestoredJobDueInsideAMillisecondIsDueAtItsEnd) {
  const std::int64_t ms = clock.now_us / 1000 + 50;
  store::JobRecord inside;
  inside.id = 1;
  inside.tube = "t";
  inside.state = JobState::kDelayed;
  inside.due_unix_ms = ms;
  inside.created_unix_ms = ms - 100;
  inside.delay_ms = 100;
  inside.due_inside = true;
  store::JobRecord whole = inside;
  whole.id = 2;
  whole.due_inside = false;
  Engine restored(clock);
  ASSERT_TRUE(restored.restore(inside).is_ok());
  ASSERT_TRUE(restored.restore(whole).is_ok());
  restored.finish_restore(10);
  EXPECT_EQ(restored.peek(1).value().due_unix_ms, ms);
  EXPECT_EQ(restored.peek(1).value().delay_ms, 100);
  clock.now_us = ms * 1000;
  restored.advance();
  EXPECT_EQ(restored.peek(1).value().state, JobState::kDelayed);
  EXPECT_EQ(restored.peek(2).value().state, JobState::kReady);
  clock.now_us = ms * 1000 + 998;
  restored.advance();
  EXPECT_EQ(restored.peek(1).value().state, JobState::kDelayed);
  clock.now_us = ms * 1000 + 999;
  restored.advance();
  EXPECT_EQ(restored.peek(1).value().state, JobState::kReady);
  // Rewritten as any job is, it no longer claims a microsecond.
  const store::WriteSet written = restored.take_mutations();
  for (const auto& op : written.ops()) {
    if (op.kind == store::WriteSet::Kind::kRecord) {
      EXPECT_FALSE(store::decode_record(op.id, op.value).value().due_inside);
    }
  }
}

// A wall clock that steps back holds the engine's present: a job waiting for its microsecond
// waits for the clock to come back past it.
TEST_F(EngineMicrosecondTest, AStepBackNeverFiresAJobBeforeItsMicrosecond) {
  const JobId id = put(Millis{10});
  const std::int64_t exact = clock.now_us + 10'000;
  at(exact - 100);
  at(exact - 5'000);  // a step back
  EXPECT_EQ(state(id), JobState::kDelayed);
  at(exact - 1);
  EXPECT_EQ(state(id), JobState::kDelayed);
  at(exact);
  EXPECT_EQ(state(id), JobState::kReady);
}

TEST_F(EngineTest, AnAttachmentIsWrittenWithItsJobAndErasedWithIt) {
  (void)engine.take_mutations();
  const Delivery delivery{.url = "http://h/x", .content_type = "text/plain"};
  PutRequest request;
  request.body = "b";
  request.attachment = &delivery;
  const JobId id = engine.put(producer, request).value().id;
  EXPECT_TRUE(engine.peek(id).value().attached);
  store::WriteSet written = engine.take_mutations();
  using Op = store::WriteSet::Kind;
  std::vector<Op> kinds;
  for (const auto& op : written.ops()) kinds.push_back(op.kind);
  EXPECT_EQ(kinds, (std::vector<Op>{Op::kRecord, Op::kBody, Op::kAttachment}));
  EXPECT_TRUE(store::decode_record(id, written.ops()[0].value).value().attached);
  EXPECT_EQ(store::decode_delivery(id, written.ops()[2].value).value(), delivery);

  const JobId plain = put(producer, Millis{0});
  EXPECT_FALSE(engine.peek(plain).value().attached);
  EXPECT_TRUE(engine.attach(plain, delivery).is_ok());
  EXPECT_EQ(engine.attach(999, delivery).code(), Code::kNotFound);
  store::WriteSet attached = engine.take_mutations();
  kinds.clear();
  for (const auto& op : attached.ops()) kinds.push_back(op.kind);
  // The record is rewritten once, to say the job has an attachment.
  EXPECT_EQ(kinds.back(), Op::kAttachment);
  EXPECT_TRUE(store::decode_record(plain, attached.ops()[kinds.size() - 2].value).value().attached);

  ASSERT_TRUE(engine.erase(producer, id).is_ok());
  store::WriteSet erased = engine.take_mutations();
  kinds.clear();
  for (const auto& op : erased.ops()) kinds.push_back(op.kind);
  EXPECT_EQ(kinds, (std::vector<Op>{Op::kErase, Op::kEraseAttachment}));
}

TEST_F(EngineTest, ARestoredJobKeepsItsAttachedFlag) {
  ManualClock restored_clock;
  Engine restored{restored_clock};
  store::JobRecord record;
  record.id = 5;
  record.tube = "t";
  record.attached = true;
  ASSERT_TRUE(restored.restore(record).is_ok());
  restored.finish_restore(6);
  EXPECT_TRUE(restored.peek(5).value().attached);
}

TEST_F(EngineTest, MaxAttemptsBuriesAJobWhoseLastReservationFailed) {
  ASSERT_TRUE(engine.set_max_attempts("default", 2).is_ok());
  EXPECT_EQ(engine.set_max_attempts("-bad", 2).code(), Code::kInvalidArgument);
  EXPECT_EQ(engine.stats_tube("default").value().max_attempts, 2U);
  const JobId released = put(producer, Millis{0});
  // Released once: ready again; released a second time: buried, its buries counted.
  ASSERT_EQ(engine.reserve(worker, Millis{0}).kind, Kind::kReserved);
  ASSERT_TRUE(engine.release(worker, released, 1, Millis{0}).is_ok());
  EXPECT_EQ(state(released), JobState::kReady);
  ASSERT_EQ(engine.reserve(worker, Millis{0}).kind, Kind::kReserved);
  ASSERT_TRUE(engine.release(worker, released, 1, Millis{0}).is_ok());
  EXPECT_EQ(state(released), JobState::kBuried);
  EXPECT_EQ(engine.peek(released).value().counters.buries, 1U);

  // A lapsed TTR counts as a failed attempt, and so does a worker that goes away.
  const JobId lapsed = put(producer, Millis{0});
  ASSERT_EQ(engine.reserve(worker, Millis{0}).kind, Kind::kReserved);
  pass(Millis{60'000});
  EXPECT_EQ(state(lapsed), JobState::kReady);
  ASSERT_EQ(engine.reserve(worker, Millis{0}).kind, Kind::kReserved);
  pass(Millis{60'000});
  EXPECT_EQ(state(lapsed), JobState::kBuried);
  const JobId left = put(producer, Millis{0});
  for (int attempt = 0; attempt < 2; ++attempt) {
    const ClientId gone = engine.connect();
    ASSERT_EQ(engine.reserve(gone, Millis{0}).kind, Kind::kReserved);
    engine.disconnect(gone);
  }
  EXPECT_EQ(state(left), JobState::kBuried);

  // 0 ends the limit; the change is written for the store.
  (void)engine.take_mutations();
  ASSERT_TRUE(engine.set_max_attempts("default", 0).is_ok());
  const store::WriteSet written = engine.take_mutations();
  ASSERT_EQ(written.ops().size(), 1U);
  EXPECT_EQ(written.ops()[0].kind, store::WriteSet::Kind::kMaxAttempts);
  EXPECT_EQ(written.ops()[0].tube, "default");
  EXPECT_EQ(store::decode_u32(written.ops()[0].value), 0U);
  const JobId free = put(producer, Millis{0});
  for (int attempt = 0; attempt < 3; ++attempt) {
    ASSERT_EQ(engine.reserve(worker, Millis{0}).kind, Kind::kReserved);
    ASSERT_TRUE(engine.release(worker, free, 1, Millis{0}).is_ok());
  }
  EXPECT_EQ(state(free), JobState::kReady);
}

}  // namespace
}  // namespace delayq::engine
