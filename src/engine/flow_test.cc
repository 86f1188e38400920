// Flow control in the engine (flow.cc): group concurrency, fair turns, a rate per group, one
// rule each on a manual clock, and a random walk that checks the limits and the counts hold.
#include <gtest/gtest.h>

#include <map>
#include <random>

#include "engine/engine.h"

namespace delayq::engine {
namespace {

using Kind = ReserveResult::Kind;

class FlowTest : public ::testing::Test {
 protected:
  JobId put(std::string_view group, std::uint32_t priority = 100) {
    PutRequest request;
    request.tube = "t";
    request.priority = priority;
    request.body = "body";
    request.group = group;
    auto result = engine.put(producer, request);
    EXPECT_TRUE(result.is_ok()) << result.status().to_string();
    return result.value().id;
  }
  // The job a reserve from "t" takes now, or 0.
  JobId take(ClientId client) {
    auto got = engine.reserve_from(client, {"t"}, Millis{0});
    EXPECT_TRUE(got.is_ok());
    return got.value().kind == Kind::kReserved ? got.value().job.id : 0;
  }
  std::string group_of(JobId id) { return engine.peek(id).value().group; }
  void set(FlowSettings flow) { ASSERT_TRUE(engine.set_flow("t", flow).is_ok()); }
  void pass(Millis by) {
    clock.advance(by);
    engine.advance();
  }

  ManualClock clock;
  Engine engine{clock};
  ClientId producer = engine.connect();
  ClientId worker = engine.connect();
};

TEST_F(FlowTest, AGroupAtItsConcurrencyWaitsReadyWhileOtherGroupsAreServed) {
  set({.group_concurrency = 1});
  const JobId a1 = put("a");
  const JobId a2 = put("a");
  const JobId b1 = put("b");
  const JobId none = put("");
  EXPECT_EQ(engine.stats_tube("t").value().groups_ready, 2U) << "a and b; no group is none";
  EXPECT_EQ(take(worker), a1);
  EXPECT_EQ(take(worker), b1);    // a2 is held back: a has one reserved
  EXPECT_EQ(take(worker), none);  // no group: never limited
  EXPECT_EQ(take(worker), 0U);
  EXPECT_EQ(engine.peek(a2).value().state, JobState::kReady);
  const TubeStats stats = engine.stats_tube("t").value();
  EXPECT_EQ(stats.ready, 1U);
  EXPECT_EQ(stats.groups_held, 1U);
  EXPECT_EQ(stats.groups_ready, 0U);
  EXPECT_EQ(stats.flow.group_concurrency, 1U);
  // peek-ready shows the held job rather than nothing, as the ready count says there is one.
  EXPECT_EQ(engine.peek_ready("t").value().id, a2);
  // Listed after the jobs a reserve may take now, in the order a reserve takes them.
  const JobId c1 = put("c");
  const JobId a3 = put("a");
  const auto listed = engine.list_jobs("t", JobState::kReady, 10).value().jobs;
  ASSERT_EQ(listed.size(), 3U);
  EXPECT_EQ(listed[0].id, c1);
  EXPECT_EQ(listed[1].id, a2);
  EXPECT_EQ(listed[2].id, a3);
  EXPECT_EQ(take(worker), c1);
  ASSERT_TRUE(engine.erase(worker, a1).is_ok());
  EXPECT_EQ(take(worker), a2);
}

TEST_F(FlowTest, EveryWayAReservationEndsFreesItsSlotAtOnce) {
  set({.group_concurrency = 1});
  const ClientId other = engine.connect();
  const JobId a1 = put("a");
  const JobId a2 = put("a");
  EXPECT_EQ(take(worker), a1);
  EXPECT_EQ(take(other), 0U);
  // released
  ASSERT_TRUE(engine.release(worker, a1, 100, Millis{0}).is_ok());
  EXPECT_EQ(take(other), a1);
  // buried
  ASSERT_TRUE(engine.bury(other, a1, 100).is_ok());
  EXPECT_EQ(take(worker), a2);
  // the worker gone
  engine.disconnect(worker);
  EXPECT_EQ(take(other), a2);
  // the TTR lapsed (60 s)
  ASSERT_EQ(engine.kick_job(a1).code(), Code::kOk);
  EXPECT_EQ(take(other), 0U);
  pass(Millis{61'000});
  EXPECT_EQ(engine.peek(a2).value().state, JobState::kReady);
  const JobId next = take(other);
  EXPECT_TRUE(next == a1 || next == a2);
  EXPECT_EQ(take(other), 0U);
}

TEST_F(FlowTest, AWaitingReserveIsServedWhenAGroupIsFreed) {
  set({.group_concurrency = 1});
  const ClientId other = engine.connect();
  const JobId a1 = put("a");
  const JobId a2 = put("a");
  EXPECT_EQ(take(worker), a1);
  auto waiting = engine.reserve_from(other, {"t"}, std::nullopt);
  ASSERT_EQ(waiting.value().kind, Kind::kWaiting);
  ASSERT_TRUE(engine.erase(worker, a1).is_ok());
  const auto wakeups = engine.take_wakeups();
  ASSERT_EQ(wakeups.size(), 1U);
  EXPECT_EQ(wakeups[0].client, other);
  EXPECT_EQ(wakeups[0].result.job.id, a2);
}

TEST_F(FlowTest, FairTurnsAlternateGroupsHoweverManyJobsEachHolds) {
  set({.fair = true});
  std::vector<JobId> a;
  for (int i = 0; i < 100; ++i) a.push_back(put("a"));
  const JobId b1 = put("b");
  const JobId b2 = put("b");
  // a was first in line; then b and a alternate while both have jobs.
  std::vector<std::string> order;
  for (int i = 0; i < 6; ++i) order.push_back(group_of(take(worker)));
  EXPECT_EQ(order, (std::vector<std::string>{"a", "b", "a", "b", "a", "a"}));
  (void)b1;
  (void)b2;
}

TEST_F(FlowTest, AWeightedGroupGetsTurnsInProportion) {
  set({.fair = true, .group_weights = {{"gold", 3}}});
  for (int i = 0; i < 20; ++i) {
    put("gold");
    put("plain");
  }
  std::map<std::string, int> served;
  for (int i = 0; i < 16; ++i) served[group_of(take(worker))]++;
  EXPECT_EQ(served["gold"], 12);
  EXPECT_EQ(served["plain"], 4);
  // Out of range: refused, and what was set stays.
  EXPECT_EQ(engine.set_flow("t", {.fair = true, .group_weights = {{"gold", 1001}}}).code(),
            Code::kInvalidArgument);
  EXPECT_EQ(engine.flow("t").group_weights.at("gold"), 3U);
}

TEST_F(FlowTest, FairTurnsComeAfterPriority) {
  set({.fair = true});
  put("a", 10);
  put("a", 10);
  const JobId urgent = put("a", 1);
  put("b", 10);
  EXPECT_EQ(take(worker), urgent);
  EXPECT_EQ(group_of(take(worker)), "b");  // a was served last
  EXPECT_EQ(group_of(take(worker)), "a");
}

TEST_F(FlowTest, WithoutSettingsTheOrderIsPriorityThenId) {
  const JobId a1 = put("a");
  const JobId a2 = put("a");
  const JobId b1 = put("b");
  EXPECT_EQ(take(worker), a1);
  EXPECT_EQ(take(worker), a2);
  EXPECT_EQ(take(worker), b1);
}

TEST_F(FlowTest, ARateSpacesAGroupsReservesAndAReserveWaitsForItsTurn) {
  set({.rate_jobs = 10, .rate_period = Millis{1000}, .rate_burst = 1});
  for (int i = 0; i < 5; ++i) put("a");
  const JobId b = put("b");
  EXPECT_EQ(group_of(take(worker)), "a");
  EXPECT_EQ(take(worker), b);  // a has no token left: b is not held behind it
  EXPECT_EQ(take(worker), 0U);
  auto waiting = engine.reserve_from(worker, {"t"}, std::nullopt);
  ASSERT_EQ(waiting.value().kind, Kind::kWaiting);
  ASSERT_TRUE(engine.next_wakeup_us().has_value());
  pass(Millis{99});
  EXPECT_TRUE(engine.take_wakeups().empty());
  pass(Millis{1});
  const auto wakeups = engine.take_wakeups();
  ASSERT_EQ(wakeups.size(), 1U);
  EXPECT_EQ(group_of(wakeups[0].result.job.id), "a");
}

TEST_F(FlowTest, SettingsSurviveTheTubeGoingAwayAndOffRestoresTheOrder) {
  set({.group_concurrency = 1});
  EXPECT_EQ(engine.flow("t").group_concurrency, 1U);
  const JobId a1 = put("a");
  const JobId a2 = put("a");
  EXPECT_EQ(take(worker), a1);
  EXPECT_EQ(take(worker), 0U);
  set({});  // off: a2 is free at once
  EXPECT_EQ(take(worker), a2);
  set({.group_concurrency = 2});
  ASSERT_TRUE(engine.erase(worker, a1).is_ok());
  ASSERT_TRUE(engine.erase(worker, a2).is_ok());
  EXPECT_FALSE(engine.stats_tube("t").is_ok());  // gone, settings kept
  const JobId a3 = put("a");
  const JobId a4 = put("a");
  const JobId a5 = put("a");
  EXPECT_EQ(take(worker), a3);
  EXPECT_EQ(take(worker), a4);
  EXPECT_EQ(take(worker), 0U);
  (void)a5;
}

TEST_F(FlowTest, SettingALimitCountsTheReservationsAlreadyHeld) {
  const JobId a1 = put("a");
  const JobId a2 = put("a");
  EXPECT_EQ(take(worker), a1);
  set({.group_concurrency = 1});
  EXPECT_EQ(take(worker), 0U);
  ASSERT_TRUE(engine.release(worker, a1, 100, Millis{0}).is_ok());
  EXPECT_EQ(take(worker), a1);
  (void)a2;
}

// Random puts, reserves, deletes, releases, buries, kicks, disconnects and passing time on a
// tube with `flow`: no group ever holds more than `limit`, the reserved count is what the
// workers hold, and once every worker is gone (and, under a rate, time has passed) every job
// can be taken. Under a rate, no group takes more reserves than its bucket allows.
class FlowWalk : public FlowTest {
 protected:
  void walk(const FlowSettings& flow, int limit) {
    set(flow);
    std::mt19937 random(7);
    std::vector<ClientId> workers;
    for (int i = 0; i < 4; ++i) workers.push_back(engine.connect());
    std::map<JobId, ClientId> held;
    std::vector<JobId> all;
    std::map<std::string, std::vector<std::int64_t>> reserved_at;  // by group, steady ms
    for (int step = 0; step < 20'000; ++step) {
      const int what = static_cast<int>(random() % 11);
      const ClientId w = workers[random() % workers.size()];
      if (what < 3) {
        all.push_back(put(std::string(1, static_cast<char>('a' + random() % 5)),
                          static_cast<std::uint32_t>(random() % 3)));
      } else if (what < 6) {
        if (const JobId id = take(w)) {
          held[id] = w;
          reserved_at[group_of(id)].push_back(engine.steady_now());
        }
      } else if (what == 6 && !held.empty()) {
        auto it = std::next(held.begin(), static_cast<long>(random() % held.size()));
        ASSERT_TRUE(engine.erase(it->second, it->first).is_ok());
        std::erase(all, it->first);
        held.erase(it);
      } else if (what == 7 && !held.empty()) {
        auto it = std::next(held.begin(), static_cast<long>(random() % held.size()));
        ASSERT_TRUE(random() % 2 ? engine.release(it->second, it->first, 1, Millis{0}).is_ok()
                                 : engine.bury(it->second, it->first, 1).is_ok());
        held.erase(it);
      } else if (what == 8) {
        engine.kick("t", 3);
      } else if (what == 9) {
        pass(Millis{static_cast<std::int64_t>(random() % 50)});
      } else if (random() % 20 == 0) {
        engine.disconnect(w);
        std::erase_if(held, [w](const auto& entry) { return entry.second == w; });
        std::replace(workers.begin(), workers.end(), w, engine.connect());
      }
      std::map<std::string, int> per_group;
      for (const auto& [id, holder] : held) {
        if (const std::string g = group_of(id); !g.empty()) {
          ASSERT_LE(++per_group[g], limit) << g;
        }
      }
      const auto stats = engine.stats_tube("t");  // gone while it holds nothing
      ASSERT_EQ(stats.is_ok() ? stats.value().reserved : 0U, held.size());
    }
    if (flow.rate_jobs != 0) {
      // In any window of a period, a group takes at most burst + the period's reserves.
      const std::int64_t period = flow.rate_period.count();
      for (const auto& [group, times] : reserved_at) {
        if (group.empty()) continue;
        for (std::size_t a = 0, b = 0; b < times.size(); ++b) {
          while (times[b] - times[a] >= period) ++a;
          ASSERT_LE(b - a + 1, flow.rate_burst + flow.rate_jobs) << group << " at " << times[b];
        }
      }
    }
    for (const ClientId w : workers) engine.disconnect(w);
    engine.kick("t", all.size());
    const ClientId last = engine.connect();
    std::size_t taken = 0;
    for (int round = 0; round < 100'000 && taken < all.size(); ++round) {
      if (const JobId id = take(last)) {
        ASSERT_TRUE(engine.erase(last, id).is_ok());
        ++taken;
      } else {
        pass(Millis{10});  // a rate's next token
      }
    }
    EXPECT_EQ(taken, all.size());
  }
};

TEST_F(FlowWalk, ConcurrencyAndFairTurns) {
  walk({.group_concurrency = 2, .fair = true}, 2);
}

TEST_F(FlowWalk, ARateWithConcurrencyAndWeights) {
  walk({.group_concurrency = 3,
        .fair = true,
        .rate_jobs = 5,
        .rate_period = Millis{100},
        .rate_burst = 2,
        .group_weights = {{"a", 4}}},
       3);
}

}  // namespace
}  // namespace delayq::engine
