// flow_contract_test — flow control through the broker contract (Admin::set_flow, and reserves
// that it orders), for every broker of the contract suite: group concurrency, fair turns, a rate
// per group, and the settings across a restart. A broker that could not do it would answer
// kNotSupported (Capabilities::flow_control), and the cases check that instead; both do it.
#include <gtest/gtest.h>

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "broker/contract_fixture.h"

namespace delayq::testing {
namespace {

constexpr std::string_view kTimedOut = "(timed out)";

class FlowContract : public BrokerContract {
 protected:
  Result<FlowSettings> set_flow(const std::string& tube, broker::FlowChange change) {
    return call<FlowSettings>(
        [&](auto done) { admin().set_flow(tube, std::move(change), std::move(done)); });
  }
  // Sets it, or checks that the broker says it cannot; false then, and the case ends.
  bool flow_on(const std::string& tube, broker::FlowChange change) {
    auto set = set_flow(tube, std::move(change));
    if (!can_.flow_control) {
      EXPECT_EQ(set.code(), Code::kNotSupported) << set.status().to_string();
      return false;
    }
    EXPECT_TRUE(set.is_ok()) << set.status().to_string();
    return set.is_ok();
  }
  // The group of the job a reserve takes at once ("" for none), or "(timed out)".
  std::string take_group(Session& s, const std::string& tube, std::vector<JobId>* held = nullptr) {
    auto got = reserve(s, {tube});
    if (!got.is_ok()) {
      EXPECT_EQ(got.code(), Code::kTimedOut) << got.status().to_string();
      return std::string(kTimedOut);
    }
    if (held != nullptr) held->push_back(got.value().view.id);
    return got.value().view.group;
  }
};

TEST_P(FlowContract, AGroupAtItsConcurrencyWaitsWhileOthersAreServedUntilItsSlotIsFreed) {
  if (!flow_on("gc", {.group_concurrency = 1})) return;
  Session& producer = session();
  Session& worker = session();
  put_ok(producer, "gc", 100, {}, {}, "a");
  put_ok(producer, "gc", 100, {}, {}, "a");
  put_ok(producer, "gc", 100, {}, {}, "b");
  std::vector<JobId> held;
  EXPECT_EQ(take_group(worker, "gc", &held), "a");
  EXPECT_EQ(take_group(worker, "gc", &held), "b");
  EXPECT_EQ(take_group(worker, "gc"), kTimedOut) << "a's second job is held back";
  // Every ready job held back: peek-ready shows the best of them rather than nothing.
  auto peeked = peek_next(producer, "gc", JobState::kReady);
  ASSERT_TRUE(peeked.is_ok()) << peeked.status().to_string();
  EXPECT_EQ(peeked.value().view.group, "a");
  const TubeStats stats = stats_tube("gc").value();
  EXPECT_EQ(stats.ready, 1U);
  EXPECT_EQ(stats.groups_held, 1U);
  EXPECT_EQ(stats.flow.group_concurrency, 1U);
  // A reserve that waits gets a's next job as soon as a's reservation ends.
  Session& waiter = session();
  auto out = std::make_shared<std::optional<Result<broker::Job>>>();
  (void)waiter.reserve({{"gc"}, std::chrono::milliseconds(kWait)}, expect_once<broker::Job>(out));
  ASSERT_TRUE(release(worker, held[0]).is_ok());
  // The released job and the held one are both a's: the waiter takes one, the other waits.
  ASSERT_TRUE(run_until([&] { return out->has_value(); }));
  ASSERT_TRUE(out->value().is_ok()) << out->value().status().to_string();
  EXPECT_EQ(out->value().value().view.group, "a");
  EXPECT_EQ(take_group(worker, "gc"), kTimedOut);
}

TEST_P(FlowContract, DeletedBuriedAndLostReservationsFreeTheirSlot) {
  if (!flow_on("free", {.group_concurrency = 1})) return;
  Session& producer = session();
  for (int i = 0; i < 4; ++i) put_ok(producer, "free", 100, {}, {}, "g");
  Session& worker = session();
  std::vector<JobId> held;
  ASSERT_EQ(take_group(worker, "free", &held), "g");
  ASSERT_TRUE(erase(worker, JobRef::by_id(held.back())).is_ok());
  ASSERT_EQ(take_group(worker, "free", &held), "g");
  ASSERT_TRUE(bury(worker, held.back()).is_ok());
  Session& lost = session();
  ASSERT_EQ(take_group(lost, "free", &held), "g");
  EXPECT_EQ(take_group(worker, "free"), kTimedOut);
  end_session(lost);   // its reservation ends: the job is ready again, and the slot free
  bool taken = false;  // run_until asks once more at the end: the reserve is made until it takes
  ASSERT_TRUE(run_until([&] { return taken || (taken = take_group(worker, "free") == "g"); }));
  EXPECT_EQ(take_group(worker, "free"), kTimedOut);
}

TEST_P(FlowContract, FairTurnsServeAGroupWithOneJobBetweenAnotherGroupsThousands) {
  if (!flow_on("fair", {.fair = true})) return;
  Session& producer = session();
  for (int i = 0; i < 50; ++i) put_ok(producer, "fair", 100, {}, {}, "big");
  for (int i = 0; i < 3; ++i) put_ok(producer, "fair", 100, {}, {}, "small");
  Session& worker = session();
  std::vector<std::string> order;
  for (int i = 0; i < 7; ++i) order.push_back(take_group(worker, "fair"));
  EXPECT_EQ(order,
            (std::vector<std::string>{"big", "small", "big", "small", "big", "small", "big"}));
}

TEST_P(FlowContract, AWeightedGroupTakesTurnsInProportion) {
  if (!flow_on("weighted", {.fair = true, .group_weights = {{"gold", 2}}})) return;
  Session& producer = session();
  for (int i = 0; i < 6; ++i) {
    put_ok(producer, "weighted", 100, {}, {}, "gold");
    put_ok(producer, "weighted", 100, {}, {}, "plain");
  }
  Session& worker = session();
  std::map<std::string, int> served;
  for (int i = 0; i < 9; ++i) served[take_group(worker, "weighted")]++;
  EXPECT_EQ(served["gold"], 6);
  EXPECT_EQ(served["plain"], 3);
}

TEST_P(FlowContract, ARateHoldsAGroupsNextJobButNotOtherGroups) {
  // One job an hour per group: the second of a group is not served within the test.
  if (!flow_on("rate", {.rate_jobs = 1, .rate_period = std::chrono::hours(1)})) return;
  Session& producer = session();
  put_ok(producer, "rate", 100, {}, {}, "a");
  put_ok(producer, "rate", 100, {}, {}, "a");
  put_ok(producer, "rate", 100, {}, {}, "b");
  put_ok(producer, "rate", 100);  // no group: not limited
  put_ok(producer, "rate", 100);
  Session& worker = session();
  std::vector<std::string> got;
  for (int i = 0; i < 5; ++i) got.push_back(take_group(worker, "rate"));
  EXPECT_EQ(got, (std::vector<std::string>{"a", "b", "", "", std::string(kTimedOut)}));
  EXPECT_EQ(stats_tube("rate").value().ready, 1U);
}

// docs/flow-control.md: changing a setting starts every group's turns and rate afresh, even a
// change that leaves the settings as they were.
TEST_P(FlowContract, ChangingASettingStartsEveryGroupsRateAndTurnsAfresh) {
  if (!flow_on("afresh", {.rate_jobs = 1, .rate_period = std::chrono::hours(1)})) return;
  Session& producer = session();
  for (int i = 0; i < 3; ++i) put_ok(producer, "afresh", 100, {}, {}, "a");
  Session& worker = session();
  EXPECT_EQ(take_group(worker, "afresh"), "a");
  EXPECT_EQ(take_group(worker, "afresh"), kTimedOut) << "the rate let a second job through";
  ASSERT_TRUE(set_flow("afresh", {.rate_burst = 1}).is_ok());
  EXPECT_EQ(take_group(worker, "afresh"), "a") << "the bucket was not filled anew";

  if (!flow_on("turns", {.fair = true, .group_weights = {{"a", 3}}})) return;
  for (int i = 0; i < 3; ++i) {
    put_ok(producer, "turns", 100, {}, {}, "a");
    put_ok(producer, "turns", 100, {}, {}, "b");
  }
  std::vector<std::string> got;
  for (int i = 0; i < 2; ++i) got.push_back(take_group(worker, "turns"));
  ASSERT_TRUE(set_flow("turns", {.rate_burst = 1}).is_ok());
  for (int i = 0; i < 4; ++i) got.push_back(take_group(worker, "turns"));
  // Weight 3 to 1: after the change both groups start at turn 0 again, so b's head (its job
  // put earlier than a's next) is served before a's, as in a tube just set.
  EXPECT_EQ(got, (std::vector<std::string>{"a", "b", "a", "b", "a", "b"}));
}

TEST_P(FlowContract, AReserveWaitingOnAGroupHeldByItsRateGetsItsJobWhenTheNextTokenComes) {
  // Five a second with a burst of one: a group's next job may be taken 200 ms after the last.
  if (!flow_on("paced", {.rate_jobs = 5, .rate_period = std::chrono::seconds(1)})) return;
  Session& producer = session();
  put_ok(producer, "paced", 100, {}, {}, "a");
  put_ok(producer, "paced", 100, {}, {}, "a");
  Session& worker = session();
  const auto first = std::chrono::steady_clock::now();
  ASSERT_EQ(take_group(worker, "paced"), "a");
  Session& waiter = session();
  auto out = std::make_shared<std::optional<Result<broker::Job>>>();
  (void)waiter.reserve({{"paced"}, std::chrono::milliseconds(kWait)},
                       expect_once<broker::Job>(out));
  ASSERT_TRUE(run_until([&] { return out->has_value(); })) << "nothing woke the waiting reserve";
  ASSERT_TRUE(out->value().is_ok()) << out->value().status().to_string();
  EXPECT_EQ(out->value().value().view.group, "a");
  // Not before the token: the rate holds (a bound on order, not on speed).
  EXPECT_GE(std::chrono::steady_clock::now() - first, std::chrono::milliseconds(150));
}

// Settings that leave flow control off on a tube that never had it change nothing, and are not
// refused when the tube already has jobs (as first settings are in Redis mode): a client that
// sends every field of the settings to turn them off gets its answer.
TEST_P(FlowContract, SettingsThatLeaveFlowControlOffChangeNothingAlsoOnATubeWithJobs) {
  Session& producer = session();
  put_ok(producer, "off", 100, {}, {}, "g");
  auto set = set_flow("off", {.group_concurrency = 0,
                              .fair = false,
                              .rate_jobs = 0,
                              .rate_burst = 1,
                              .group_weights = {{"g", 1}}});
  if (!can_.flow_control) {
    EXPECT_EQ(set.code(), Code::kNotSupported) << set.status().to_string();
    return;
  }
  ASSERT_TRUE(set.is_ok()) << set.status().to_string();
  EXPECT_FALSE(set.value().any());
  const TubeStats stats = stats_tube("off").value();
  EXPECT_FALSE(stats.flow.any());
  EXPECT_EQ(stats.ready, 1U);
}

TEST_P(FlowContract, SettingsAreKeptAcrossARestartAndOffRestoresTheOrder) {
  if (!flow_on("keep", {.group_concurrency = 2, .fair = true})) return;
  auto changed = set_flow("keep", {.rate_jobs = 5, .rate_burst = 3, .group_weights = {{"vip", 3}}});
  ASSERT_TRUE(changed.is_ok());
  EXPECT_EQ(changed.value().group_weights.at("vip"), 3U);
  EXPECT_EQ(changed.value().group_concurrency, 2U) << "a change keeps what it does not name";
  EXPECT_TRUE(changed.value().fair);
  EXPECT_EQ(changed.value().rate_jobs, 5U);
  EXPECT_EQ(changed.value().rate_burst, 3U);
  Session& producer = session();
  put_ok(producer, "keep", 100, {}, {}, "a");
  restart();
  const TubeStats stats = stats_tube("keep").value();
  EXPECT_EQ(stats.flow, changed.value());
  auto off = set_flow(
      "keep",
      {.group_concurrency = 0, .fair = false, .rate_jobs = 0, .group_weights = {{"vip", 1}}});
  ASSERT_TRUE(off.is_ok());
  EXPECT_FALSE(off.value().any());
  const TubeStats after_off = stats_tube("keep").value();
  EXPECT_FALSE(after_off.flow.any());
  EXPECT_EQ(after_off.ready, 1U);
  EXPECT_EQ(after_off.groups_ready, 0U) << "groups are counted while flow control is on";
  EXPECT_EQ(after_off.groups_held, 0U);
  auto bad = set_flow("keep", {.rate_jobs = 1, .rate_period = std::chrono::milliseconds(0)});
  EXPECT_EQ(bad.code(), Code::kInvalidArgument);
}

// A group's bucket outlives a restart, or starts empty after it: a restart never gives a group
// a fresh burst (a rate of one a minute: the group's second job waits, restart or not).
TEST_P(FlowContract, ARestartDoesNotGiveAGroupAFreshBurst) {
  if (!flow_on("minute", {.rate_jobs = 1, .rate_period = std::chrono::minutes(1)})) return;
  Session& producer = session();
  for (int i = 0; i < 3; ++i) put_ok(producer, "minute", 100, {}, {}, "g");
  Session& worker = session();
  std::vector<JobId> held;
  ASSERT_EQ(take_group(worker, "minute", &held), "g");
  ASSERT_TRUE(erase(worker, JobRef::by_id(held.back())).is_ok());
  EXPECT_EQ(take_group(worker, "minute"), kTimedOut);
  restart();
  EXPECT_EQ(take_group(session(), "minute"), kTimedOut) << "the restart refilled the bucket";
  EXPECT_EQ(stats_tube("minute").value().ready, 2U);
}

// A burst or weights mean something only with flow control on: given to a tube without it they
// are refused, kept while it is on, and forgotten with it.
TEST_P(FlowContract, ABurstOrWeightsAloneAreRefusedAndGoWhenFlowControlGoesOff) {
  if (!can_.flow_control) return;
  EXPECT_EQ(set_flow("lone", {.rate_burst = 5}).code(), Code::kInvalidArgument);
  EXPECT_EQ(set_flow("lone", {.group_weights = {{"gold", 3}}}).code(), Code::kInvalidArgument);
  auto on = set_flow("lone", {.group_concurrency = 2, .rate_jobs = 10, .rate_burst = 5});
  ASSERT_TRUE(on.is_ok()) << on.status().to_string();
  auto rate_off = set_flow("lone", {.rate_jobs = 0});
  ASSERT_TRUE(rate_off.is_ok());
  EXPECT_EQ(rate_off.value().rate_burst, 5U) << "kept while the concurrency keeps flow control on";
  auto rate_on = set_flow("lone", {.rate_jobs = 10});
  ASSERT_TRUE(rate_on.is_ok());
  EXPECT_EQ(rate_on.value().rate_burst, 5U);
  // Turned off by a client that sends back every setting it read: taken, and all forgotten.
  auto off = set_flow("lone", {.group_concurrency = 0,
                               .fair = false,
                               .rate_jobs = 0,
                               .rate_burst = 5,
                               .group_weights = {{"gold", 3}}});
  ASSERT_TRUE(off.is_ok()) << off.status().to_string();
  EXPECT_EQ(off.value(), FlowSettings{}) << "the answer shows what is kept: nothing";
  auto again = set_flow("lone", {.rate_jobs = 10});
  ASSERT_TRUE(again.is_ok());
  EXPECT_EQ(again.value().rate_burst, 1U);
}

// Debounce is a put's: every broker does it (it needs only the key's holder, in one place).
TEST_P(FlowContract, ADebouncedPutMovesThePendingJobButNeverPastItsFirstPutPlusMaxWait) {
  Session& s = session();
  const auto debounced_put = [&](std::string body, std::chrono::milliseconds debounce,
                                 std::optional<std::chrono::milliseconds> max_wait) {
    PutRequest request;
    request.tube = "deb";
    request.key = "k";
    request.body = std::move(body);
    request.priority = 7;
    request.debounce = debounce;
    request.max_wait = max_wait;
    return put(s, std::move(request));
  };
  auto first = debounced_put("first", 1h, 90min);
  ASSERT_TRUE(first.is_ok()) << first.status().to_string();
  EXPECT_TRUE(first.value().inserted);
  EXPECT_FALSE(first.value().debounced);
  const JobView job = first.value().job;
  EXPECT_EQ(job.state, JobState::kDelayed);
  EXPECT_NEAR(static_cast<double>(job.due_unix_ms - job.created_unix_ms), 3'600'000, 1);

  auto second = debounced_put("second", 1h, 90min);
  ASSERT_TRUE(second.is_ok()) << second.status().to_string();
  EXPECT_TRUE(second.value().debounced);
  EXPECT_EQ(second.value().job.id, job.id) << "the same job, moved";
  EXPECT_NEAR(static_cast<double>(second.value().job.created_unix_ms),
              static_cast<double>(job.created_unix_ms), 1)
      << "its first put";
  EXPECT_EQ(peek(s, JobRef::by_key("deb", "k")).value().body, "second");

  // Three hours would pass the first put + 90 min: the due time stops there.
  auto third = debounced_put("third", 3h, 90min);
  ASSERT_TRUE(third.is_ok()) << third.status().to_string();
  EXPECT_TRUE(third.value().debounced);
  auto held = peek(s, JobRef::by_key("deb", "k"));
  ASSERT_TRUE(held.is_ok());
  EXPECT_EQ(held.value().body, "third");
  EXPECT_NEAR(
      static_cast<double>(held.value().view.due_unix_ms - held.value().view.created_unix_ms),
      5'400'000, 1);
  EXPECT_EQ(stats_tube("deb").value().total_jobs, 1U) << "a debounce puts no new job";

  // The job moved keeps its counters, and the answer says them.
  ASSERT_TRUE(debounced_put("soon", 0ms, std::nullopt).is_ok());
  auto once = reserve(s, {"deb"});
  ASSERT_TRUE(once.is_ok()) << once.status().to_string();
  ASSERT_TRUE(release(s, job.id, 1h).is_ok());
  auto after_work = debounced_put("again", 1h, std::nullopt);
  ASSERT_TRUE(after_work.is_ok()) << after_work.status().to_string();
  EXPECT_TRUE(after_work.value().debounced);
  const JobCounters counted{1, 0, 1, 0, 0};
  EXPECT_EQ(after_work.value().job.counters, counted) << "the answer's counters";
  EXPECT_EQ(peek(s, JobRef::by_key("deb", "k")).value().view.counters, counted);

  // Ready at once, reserved: a worker is on it, so a debounce is refused.
  ASSERT_TRUE(debounced_put("now", 0ms, std::nullopt).is_ok());
  auto taken = reserve(s, {"deb"});
  ASSERT_TRUE(taken.is_ok()) << taken.status().to_string();
  EXPECT_EQ(taken.value().view.id, job.id);
  EXPECT_EQ(taken.value().body, "now");
  EXPECT_EQ(debounced_put("late", 1h, std::nullopt).code(), Code::kConflict);
  // Buried: replaced by a new job.
  ASSERT_TRUE(bury(s, job.id).is_ok());
  auto fresh = debounced_put("fresh", 1h, std::nullopt);
  ASSERT_TRUE(fresh.is_ok()) << fresh.status().to_string();
  EXPECT_FALSE(fresh.value().debounced);
  EXPECT_EQ(fresh.value().replaced, job.id);
  EXPECT_NE(fresh.value().job.id, job.id);

  // What a debounce needs: a key, no due time or replace of its own.
  PutRequest keyless;
  keyless.tube = "deb";
  keyless.debounce = 1s;
  EXPECT_EQ(put(s, keyless).code(), Code::kInvalidArgument);
  PutRequest both = keyless;
  both.key = "k2";
  both.due = Due::after(5s);
  EXPECT_EQ(put(s, both).code(), Code::kInvalidArgument);
}

INSTANTIATE_TEST_SUITE_P(Brokers, FlowContract,
                         ::testing::Values(BrokerKind::kLocalMemory, BrokerKind::kLocalRocks,
                                           BrokerKind::kRedis, BrokerKind::kRedisCluster,
                                           BrokerKind::kRedisPrefetch),
                         [](const auto& brokers) { return kind_name(brokers.param); });

}  // namespace
}  // namespace delayq::testing
