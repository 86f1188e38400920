// A node's prefetch (RedisBrokerOptions::prefetch): a worker's delete reserves its next job in
// the same call, which its next reserve takes without a call; a job not taken in time, or not
// fitting the reserve that comes, or whose session ends, is given back uncounted. And, prefetch
// or not, a reserve read in the same turn as its connection's delete riding with the delete.
#include "broker/redis/waking_fixture.h"

namespace delayq::broker::redis::testing {
namespace {

using namespace std::chrono_literals;
using Reply = delayq::redis::Reply;

// A worker and its deletes (the node opened as the fixture below says).
class Workers : public WakingTest {
 protected:
  // `s` holds job 4 (of shard 0, from its watch list), and shard 0 is known to hold job 8 next.
  void working(broker::Session& s) {
    hold(s, 4, 60s);
    announce(0, head(1024, 8));
  }
  // `s` deletes job 4: its call, not answered yet.
  Call delete_4(broker::Session& s, Outcome<JobId>& erased) {
    s.erase(broker::JobRef::by_id(4), erased.callback());
    settle();
    return take("erase");
  }
  // The answer of that call: job 4 deleted, and `next`, the reserve's part.
  void deleted(Call& call, Reply next) {
    redis->answer(call, reply::array({Reply::string("ok"), Reply::string("4"), std::move(next)}));
    settle();
  }
  // `s` deletes job 4, and reserves before the delete's call is answered (pipelined): that call.
  Call pipelined(broker::Session& s, Outcome<JobId>& erased, Outcome<broker::Job>& next) {
    working(s);
    Call erase = delete_4(s, erased);
    s.reserve({}, next.callback());
    settle();
    return erase;
  }
  // `s` deletes job 4, and its call prefetches job 8.
  void prefetched_8(broker::Session& s) {
    working(s);
    Outcome<JobId> erased;
    Call erase = delete_4(s, erased);
    deleted(erase, reserved(ready_job(8), {""}));
    ASSERT_TRUE(erased.done() && erased.result->is_ok());
  }
  // The release that gives job 8 back uncounted: its first reservation, undone.
  [[nodiscard]] std::vector<std::string> giving_back_8() const {
    return {holder(1), "8", "", "", "1", "1"};
  }
  // delayq_prefetches_total of the outcome.
  [[nodiscard]] std::int64_t prefetches(std::string_view outcome) const {
    const auto* family = metrics.find_counters("delayq_prefetches_total");
    return family == nullptr ? -1 : family->value({outcome});
  }
  // A release call's arguments, if one waits: holder id pri delay reservation undo.
  std::vector<std::string> release_args() {
    auto call = redis->take("release");
    return call ? call->args() : std::vector<std::string>{};
  }
};

// With the prefetch option on (a 20 ms hold).
class Prefetch : public Workers {
 protected:
  void SetUp() override {
    RedisBrokerOptions options;
    options.prefetch = 20ms;
    open_node(options);
  }
};

TEST_F(Prefetch, AWorkersDeleteReservesItsNextJobAndTheNextReserveMakesNoCall) {
  auto s = session();
  working(*s);
  Outcome<JobId> erased;
  Call erase = delete_4(*s, erased);
  // holder, the job, then the bound (no better job known elsewhere) and the watched tubes.
  const auto args = erase.args();
  ASSERT_EQ(args.size(), 6U);
  EXPECT_EQ(args[0], holder(1));
  EXPECT_EQ(std::vector<std::string>(args.begin() + 1, args.end()),
            (std::vector<std::string>{"4", "", "", "", "default"}));
  deleted(erase, reserved(ready_job(8), {""}));
  ASSERT_TRUE(erased.done() && erased.result->is_ok());
  EXPECT_EQ(erased.result->value(), 4U);

  Outcome<broker::Job> next;
  s->reserve({}, next.callback());
  EXPECT_FALSE(next.done()) << "answered inside the call";
  settle();
  EXPECT_EQ(id_of(next), 8U);
  EXPECT_EQ(redis->count("reserve") + redis->count("probe"), 0U);
  // Taken: nothing is given back when the hold would have ended.
  clock->advance(50ms);
  EXPECT_EQ(redis->count("release"), 0U);
  EXPECT_EQ(prefetches("taken"), 1);
  EXPECT_EQ(prefetches("given_back"), 0);
}

TEST_F(Prefetch, AJobNotAskedForWithinTheHoldIsGivenBackUncounted) {
  auto s = session();
  prefetched_8(*s);
  clock->advance(19ms);
  EXPECT_EQ(redis->count("release"), 0U);
  clock->advance(11ms);  // the hold, and at most the 10 ms its deadline may be late
  EXPECT_EQ(release_args(), giving_back_8());
  EXPECT_EQ(prefetches("given_back"), 1);
  EXPECT_EQ(prefetches("taken"), 0);
  // The reserve that comes later asks Redis as usual.
  Outcome<broker::Job> next;
  s->reserve({}, next.callback());
  settle();
  EXPECT_FALSE(next.done());
  EXPECT_EQ(redis->count("release"), 0U);
}

TEST_F(Prefetch, AReserveOfOtherTubesGivesThePrefetchedJobBackFirst) {
  auto s = session();
  prefetched_8(*s);
  Outcome<broker::Job> next;
  s->reserve(within(5s, {"other"}), next.callback());
  settle();
  EXPECT_FALSE(next.done());
  EXPECT_EQ(release_args(), giving_back_8());
  EXPECT_EQ(redis->count("probe"), kShards) << "the reserve of \"other\" asks the shards";
}

TEST_F(Prefetch, TheSessionsEndGivesThePrefetchedJobBackUncounted) {
  auto s = session();
  prefetched_8(*s);
  s.reset();
  settle();
  EXPECT_EQ(release_args(), giving_back_8());
  EXPECT_EQ(redis->count("release"), 0U) << "given back twice";
}

TEST_F(Prefetch, APipelinedReserveWaitsForItsDeletesAnswerAndTakesItsJob) {
  auto s = session();
  Outcome<JobId> erased;
  Outcome<broker::Job> next;
  Call erase = pipelined(*s, erased, next);
  EXPECT_FALSE(next.done());
  EXPECT_EQ(redis->count("reserve") + redis->count("probe"), 0U)
      << "the reserve made a call of its own";
  deleted(erase, reserved(ready_job(8), {""}));
  EXPECT_TRUE(erased.done());
  EXPECT_EQ(id_of(next), 8U);
}

TEST_F(Prefetch, ADeleteWhoseShardHasNoJobAsGoodLeavesTheNextReserveToAskAsUsual) {
  auto s = session();
  Outcome<JobId> erased;
  Outcome<broker::Job> next;
  Call erase = pipelined(*s, erased, next);
  deleted(erase, reply::array({Reply::string("worse"), Reply::string("a better job elsewhere"),
                               reply::array({Reply::string(head(1024, 12))}),
                               reply::array({Reply::number(1)})}));
  ASSERT_TRUE(erased.done() && erased.result->is_ok());
  EXPECT_FALSE(next.done());
  // It learnt that shard 0 holds job 12 next, and asks there.
  Call reserve = take("reserve");
  EXPECT_EQ(shard_of(reserve), 0U);
  redis->answer(reserve, reserved(ready_job(12), {""}));
  settle();
  EXPECT_EQ(id_of(next), 12U);
}

// Workers draining a backlog: another's reserve under way (its call sent) takes its own job,
// and this worker's delete still prefetches.
TEST_F(Prefetch, AnotherWorkersReserveUnderWayLeavesThePrefetchOn) {
  auto s = session();
  hold(*s, 4, 60s);
  auto busy = session();
  Outcome<broker::Job> taking;
  busy->reserve({}, taking.callback());
  rest();
  announce(0, head(1024, 8));
  ASSERT_EQ(redis->count("reserve"), 1U);
  Outcome<JobId> erased;
  EXPECT_EQ(delete_4(*s, erased).args().size(), 6U);
}

TEST_F(Prefetch, NoPrefetchForAReserveAtRestHereNorADeleteOfAJobNotHeld) {
  auto s = session();
  hold(*s, 4, 60s);
  // Two other workers wait for "default"; one goes for job 8 once it hears of it, and the other
  // rests meanwhile: a job of the shard is its to find, not a prefetch's.
  auto idle = session();
  auto other = session();
  Outcome<broker::Job> waiting;
  Outcome<broker::Job> resting;
  idle->reserve({}, waiting.callback());
  other->reserve({}, resting.callback());
  rest();
  ASSERT_FALSE(waiting.done() || resting.done());
  announce(0, head(1024, 8));
  ASSERT_EQ(redis->count("reserve"), 1U);
  Outcome<JobId> erased;
  EXPECT_EQ(delete_4(*s, erased).args().size(), 4U);
  // A producer's delete of a job it does not hold.
  auto producer = session();
  producer->erase(broker::JobRef::by_id(16), erased.callback());
  settle();
  EXPECT_EQ(take("erase").args().size(), 4U);
}

// Without the prefetch option: a reserve read in the same turn as its connection's delete (sent
// in one write) rides with the delete's call, which reserves its job; the reserve makes no call.
class RideAlong : public Workers {};

TEST_F(RideAlong, AReserveReadWithItsDeleteRidesWithTheDeletesCall) {
  auto s = session();
  working(*s);
  Outcome<JobId> erased;
  Outcome<broker::Job> next;
  s->erase(broker::JobRef::by_id(4), erased.callback());
  s->reserve({}, next.callback());
  settle();
  Call erase = take("erase");
  const auto args = erase.args();
  ASSERT_EQ(args.size(), 6U);
  EXPECT_EQ(std::vector<std::string>(args.begin() + 1, args.end()),
            (std::vector<std::string>{"4", "", "", "", "default"}));
  EXPECT_EQ(redis->count("reserve") + redis->count("probe"), 0U);
  deleted(erase, reserved(ready_job(8), {""}));
  ASSERT_TRUE(erased.done() && erased.result->is_ok());
  EXPECT_EQ(id_of(next), 8U);
  clock->advance(50ms);
  EXPECT_EQ(redis->count("release"), 0U) << "the job was the reserve's, not given back";
}

TEST_F(RideAlong, AReserveOfALaterTurnOrADeleteAlreadySentRidesWithNothing) {
  auto s = session();
  working(*s);
  Outcome<JobId> erased;
  Outcome<broker::Job> next;
  Call erase = delete_4(*s, erased);  // sent: its turn is over
  EXPECT_EQ(erase.args().size(), 4U);
  s->reserve({}, next.callback());
  settle();
  EXPECT_EQ(redis->count("reserve"), 1U) << "the reserve asks as usual";
}

}  // namespace
}  // namespace delayq::broker::redis::testing
