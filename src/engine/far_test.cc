// The far tier in the engine (far.cc): jobs beyond the window on disk only, back in memory ahead
// of their time or when an operation needs them; a store that sees the engine's writes only
// once they are committed; restarts that read the near jobs and the far counts. The simulation
// (engine_sim_test's FarTier) runs every operation against the model; these pin one rule each.
#include <gtest/gtest.h>

#include <array>
#include <memory>

#include "engine/engine.h"
#include "store/memory_store.h"

namespace delayq::engine {
namespace {

using Kind = ReserveResult::Kind;
constexpr Millis kWindow{60'000};
constexpr Millis kHour{3'600'000};

class FarTierTest : public ::testing::Test {
 protected:
  FarTierTest() { start(); }

  void start() {
    EngineOptions options;
    options.window = kWindow;
    options.far = &store;
    engine = std::make_unique<Engine>(clock, options);
    client = engine->connect();
  }
  // As delayqd starts: the stored records, then the far tier's counts.
  void restart() {
    commit();
    start_without_commit();
  }
  void start_without_commit() {
    EngineOptions options;
    options.window = kWindow;
    options.far = &store;
    engine = std::make_unique<Engine>(clock, options);
    ASSERT_TRUE(store.scan([this](store::JobRecord&& r) { return engine->restore(r); }).is_ok());
    ASSERT_TRUE(store
                    .far_counts([this](std::string tube, std::int64_t minute, std::uint64_t n) {
                      return engine->restore_far(tube, minute, n);
                    })
                    .is_ok());
    engine->finish_restore(store.next_id());
    client = engine->connect();
    engine->advance();
  }
  JobId put(Millis delay, std::string_view key = {}, std::string_view group = {},
            bool replace = false) {
    PutRequest request;
    request.due = Due::after(delay);
    request.body = "body";
    request.key = key;
    request.group = group;
    request.replace = replace;
    auto result = engine->put(client, request);
    EXPECT_TRUE(result.is_ok()) << result.status().to_string();
    return result.is_ok() ? result.value().id : 0;
  }
  // The engine's writes reach the store, and the engine is told.
  void commit() {
    const store::WriteSet set = engine->take_mutations();
    const store::WriteSet* sets[] = {&set};
    ASSERT_TRUE(store.write(sets, false).is_ok());
    engine->settle(engine->epoch());
  }
  void pass(Millis by) {
    clock.advance(by);
    engine->advance();
    commit();
  }
  bool on_disk_only(JobId id) {
    return store.far().contains(store::job_key(store::kFarJobPrefix, id)) &&
           !store.records_hold(id);
  }
  JobState state(JobId id) { return engine->peek(id).value().state; }

  ManualClock clock;
  store::MemoryStore store;
  std::unique_ptr<Engine> engine;
  ClientId client = 0;
};

TEST_F(FarTierTest, AJobBeyondTheWindowIsKeptOnDiskOnlyAndStillShown) {
  engine->advance();
  const JobId near = put(Millis{5000});
  const JobId far = put(kHour);
  commit();
  EXPECT_EQ(engine->far_jobs(), 1U);
  EXPECT_EQ(engine->jobs(), 2U);
  EXPECT_TRUE(on_disk_only(far));
  EXPECT_FALSE(on_disk_only(near));
  const JobView v = engine->peek(far).value();
  EXPECT_EQ(v.state, JobState::kDelayed);
  EXPECT_EQ(v.due_unix_ms, clock.now_unix_ms() + kHour.count());
  EXPECT_EQ(engine->stats_tube("default").value().delayed, 2U);
  EXPECT_EQ(engine->stats().delayed, 2U);
  const std::array<std::int64_t, 1> edges = {clock.now_unix_ms() + 2 * kWindow.count()};
  EXPECT_EQ(engine->due_counts("", edges).value(), (std::vector<std::uint64_t>{1, 1}));
}

TEST_F(FarTierTest, AFarJobComesBackAheadOfItsTimeAndFiresOnItsMillisecond) {
  engine->advance();
  const JobId id = put(kHour);
  commit();
  ASSERT_EQ(engine->far_jobs(), 1U);
  pass(kHour - kWindow - Millis{1});
  EXPECT_EQ(engine->far_jobs(), 0U) << "loaded a window ahead of its time";
  EXPECT_FALSE(on_disk_only(id));
  pass(kWindow);
  EXPECT_EQ(state(id), JobState::kDelayed);
  pass(Millis{1});
  EXPECT_EQ(state(id), JobState::kReady);
}

TEST_F(FarTierTest, AJobSpilledAgainBeforeTheFirstSpillIsSettledStaysInMemoryUntilTheSecondIs) {
  engine->advance();
  const JobId id = put(kHour);
  const store::WriteSet first = engine->take_mutations();
  const std::uint64_t first_epoch = engine->epoch();
  ASSERT_TRUE(engine->reschedule(id, Due::after(2 * kHour)).is_ok());  // back, and far again
  const store::WriteSet second = engine->take_mutations();
  const store::WriteSet* one[] = {&first};
  ASSERT_TRUE(store.write(one, false).is_ok());
  engine->settle(first_epoch);
  ASSERT_TRUE(engine->peek(id).is_ok()) << "evicted before its latest spill was stored";
  EXPECT_EQ(engine->far_jobs(), 0U);
  const store::WriteSet* two[] = {&second};
  ASSERT_TRUE(store.write(two, false).is_ok());
  engine->settle(engine->epoch());
  EXPECT_EQ(engine->far_jobs(), 1U);
  EXPECT_EQ(engine->peek(id).value().due_unix_ms, clock.now_unix_ms() + 2 * kHour.count());
}

// A job loaded by an operation is written once, as the operation leaves it: moved from far to far,
// as a far job with no near record to write or delete; moved into the window, one near record.
TEST_F(FarTierTest, AJobTakenFromTheFarTierIsWrittenOnceAsTheStepLeavesIt) {
  engine->advance();
  const JobId id = put(kHour);
  commit();
  const auto ops_of = [&](const store::WriteSet& set) {
    std::vector<store::WriteSet::Kind> kinds;
    for (const auto& op : set.ops()) {
      if (op.id == id) kinds.push_back(op.kind);
    }
    return kinds;
  };
  using K = store::WriteSet::Kind;
  ASSERT_TRUE(engine->reschedule(id, Due::after(2 * kHour)).is_ok());
  store::WriteSet set = engine->take_mutations();
  EXPECT_EQ(ops_of(set), (std::vector<K>{K::kFarErase, K::kFarPutFresh}));
  const store::WriteSet* sets[] = {&set};
  ASSERT_TRUE(store.write(sets, false).is_ok());
  engine->settle(engine->epoch());
  EXPECT_TRUE(on_disk_only(id));
  ASSERT_TRUE(engine->reschedule(id, Due::after(Millis{5000})).is_ok());
  set = engine->take_mutations();
  EXPECT_EQ(ops_of(set), (std::vector<K>{K::kFarErase, K::kRecord}));
  ASSERT_TRUE(store.write(sets, false).is_ok());
  engine->settle(engine->epoch());
  EXPECT_FALSE(on_disk_only(id));
  EXPECT_EQ(store.far().size(), 0U) << "every far entry and count erased";
}

TEST_F(FarTierTest, EveryOperationByIdFindsAFarJob) {
  engine->advance();
  const std::array<JobId, 5> ids = {put(kHour), put(kHour), put(kHour), put(kHour), put(kHour)};
  commit();
  ASSERT_EQ(engine->far_jobs(), 5U);
  EXPECT_TRUE(engine->erase(client, ids[0]).is_ok());
  EXPECT_TRUE(engine->kick_job(ids[1]).is_ok());
  EXPECT_EQ(state(ids[1]), JobState::kReady);
  EXPECT_EQ(engine->reserve_job(client, ids[2]).value().id, ids[2]);
  EXPECT_TRUE(engine->reschedule(ids[3], Due::after(Millis{10})).is_ok());
  EXPECT_TRUE(engine->set_priority(ids[4], 7).is_ok());
  commit();
  EXPECT_FALSE(engine->peek(ids[0]).is_ok());
  EXPECT_EQ(engine->peek(ids[4]).value().priority, 7U);
  EXPECT_TRUE(on_disk_only(ids[4])) << "still far after a change of priority";
  EXPECT_EQ(engine->far_jobs(), 1U);
  pass(Millis{10});
  EXPECT_EQ(state(ids[3]), JobState::kReady);
}

TEST_F(FarTierTest, KeysOfFarJobsStayUniqueAndAreFound) {
  engine->advance();
  const JobId held = put(kHour, "order-1");
  commit();
  ASSERT_TRUE(on_disk_only(held));
  EXPECT_EQ(engine->find_key("default", "order-1").value(), held);
  EXPECT_EQ(put(kHour, "order-1"), held) << "the key is taken: its holder answers";
  PutRequest request;
  request.due = Due::after(2 * kHour);
  request.body = "new";
  request.key = "order-1";
  request.replace = true;
  const PutResult replaced = engine->put(client, request).value();
  EXPECT_EQ(replaced.replaced, held);
  commit();
  EXPECT_FALSE(engine->peek(held).is_ok());
  EXPECT_EQ(engine->find_key("default", "order-1").value(), replaced.id);
  EXPECT_TRUE(on_disk_only(replaced.id));
}

TEST_F(FarTierTest, GroupsListAndCancelTheirFarJobs) {
  engine->advance();
  const JobId a = put(kHour, {}, "user-7");
  const JobId b = put(Millis{1000}, {}, "user-7");
  const JobId c = put(kHour, {}, "user-8");
  commit();
  const auto listed = engine->list_group("default", "user-7");
  ASSERT_EQ(listed.size(), 2U);
  EXPECT_EQ(listed[0].id, a);
  EXPECT_EQ(listed[1].id, b);
  EXPECT_EQ(engine->cancel_group("default", "user-7"), 2U);
  commit();
  EXPECT_FALSE(engine->peek(a).is_ok());
  EXPECT_FALSE(engine->peek(b).is_ok());
  EXPECT_TRUE(engine->peek(c).is_ok());
  EXPECT_EQ(engine->jobs(), 1U);
}

TEST_F(FarTierTest, PeekDelayedAndKickTakeTheEarliestWhereverItIs) {
  engine->advance();
  const JobId later = put(2 * kHour);
  const JobId sooner = put(kHour);
  commit();
  EXPECT_EQ(engine->peek_delayed("default").value().id, sooner);
  const auto listed = engine->list_jobs("default", JobState::kDelayed, 10).value();
  ASSERT_EQ(listed.jobs.size(), 2U);
  EXPECT_EQ(listed.jobs[0].id, sooner);
  EXPECT_EQ(engine->kick("default", 1), 1U);
  EXPECT_EQ(state(sooner), JobState::kReady);
  EXPECT_EQ(state(later), JobState::kDelayed);
}

TEST_F(FarTierTest, ARestartReadsTheNearJobsAndTheCountsNotTheFarJobs) {
  engine->advance();
  const JobId near = put(Millis{5000});
  std::vector<JobId> far;
  for (int i = 0; i < 20; ++i) far.push_back(put(kHour + Millis{i}, "k" + std::to_string(i)));
  restart();
  EXPECT_EQ(engine->jobs(), 21U);
  EXPECT_EQ(engine->far_jobs(), 20U);
  EXPECT_EQ(engine->stats().delayed, 21U);
  EXPECT_EQ(engine->peek(near).value().state, JobState::kDelayed);
  EXPECT_EQ(engine->find_key("default", "k3").value(), far[3]);
  EXPECT_TRUE(engine->erase(client, far[0]).is_ok());
  commit();
  EXPECT_EQ(engine->jobs(), 20U);
  pass(kHour + Millis{20});
  EXPECT_EQ(engine->far_jobs(), 0U);
  EXPECT_EQ(state(far[1]), JobState::kReady);
}

TEST_F(FarTierTest, WithoutAWindowTheFarJobsOfAnEarlierRunAreLoadedBack) {
  engine->advance();
  const JobId id = put(kHour);
  commit();
  ASSERT_EQ(engine->far_jobs(), 1U);
  EngineOptions options;
  options.far = &store;  // no window
  engine = std::make_unique<Engine>(clock, options);
  ASSERT_TRUE(store
                  .far_counts([this](std::string tube, std::int64_t minute, std::uint64_t n) {
                    return engine->restore_far(tube, minute, n);
                  })
                  .is_ok());
  engine->finish_restore(store.next_id());
  engine->advance();
  commit();
  EXPECT_EQ(engine->far_jobs(), 0U);
  EXPECT_FALSE(on_disk_only(id));
  EXPECT_EQ(engine->peek(id).value().state, JobState::kDelayed);
  EXPECT_TRUE(store.far().empty()) << "every far entry and count erased";
}

}  // namespace
}  // namespace delayq::engine
