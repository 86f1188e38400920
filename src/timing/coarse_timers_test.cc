#include "timing/coarse_timers.h"

#include <gtest/gtest.h>

#include <vector>

#include "timing/manual_clock.h"

namespace delayq::timing {
namespace {

using namespace std::chrono_literals;

// The manual clock, counting how often its timers are set.
class CountingClock final : public Clock {
 public:
  explicit CountingClock(ManualClock& inner) : inner_(inner) {}
  [[nodiscard]] SteadyTime steady_now() const override { return inner_.steady_now(); }
  [[nodiscard]] std::int64_t now_unix_ms() const override { return inner_.now_unix_ms(); }
  [[nodiscard]] std::unique_ptr<Timer> timer() override {
    return std::make_unique<Counted>(inner_.timer(), sets);
  }
  int sets = 0;

 private:
  class Counted final : public Timer {
   public:
    Counted(std::unique_ptr<Timer> inner, int& sets) : inner_(std::move(inner)), sets_(sets) {}
    void expires_at(SteadyTime at) override {
      ++sets_;
      inner_->expires_at(at);
    }
    void expires_after(std::chrono::microseconds delay) override {
      ++sets_;
      inner_->expires_after(delay);
    }
    void async_wait(std::function<void(bool)> done) override {
      inner_->async_wait(std::move(done));
    }
    void cancel() override { inner_->cancel(); }

   private:
    std::unique_ptr<Timer> inner_;
    int& sets_;
  };
  ManualClock& inner_;
};

class CoarseTimersTest : public ::testing::Test {
 protected:
  boost::asio::io_context io;
  ManualClock clock{io};
  CountingClock counting{clock};
  CoarseTimers timers{counting, 10ms};
  std::vector<int> ran;
  SteadyTime start = clock.steady_now();
};

TEST_F(CoarseTimersTest, ALoneDeadlineRunsAtItsTimeAndNotBefore) {
  timers.at(start + 100ms, [this] { ran.push_back(1); });
  clock.advance(99ms);
  EXPECT_TRUE(ran.empty());
  clock.advance(1ms);
  EXPECT_EQ(ran, std::vector<int>{1});
  EXPECT_EQ(timers.pending(), 0U);
}

TEST_F(CoarseTimersTest, ACancelledDeadlineNeverRunsAndTheOthersStill) {
  const auto first = timers.at(start + 5ms, [this] { ran.push_back(1); });
  timers.at(start + 7ms, [this] { ran.push_back(2); });
  timers.cancel(first);
  timers.cancel(first);  // again: nothing
  timers.cancel(0);
  clock.advance(20ms);
  EXPECT_EQ(ran, std::vector<int>{2});
}

TEST_F(CoarseTimersTest, DeadlinesMadeOneAfterAnotherSetTheTimerOncePerSlack) {
  // A deadline due at once, made and dropped a thousand times: the timer is set for the first,
  // and then at most once per 10 ms, never once per deadline.
  int runs = 0;
  for (int i = 0; i < 1000; ++i) {
    const auto id = timers.at(clock.steady_now(), [&runs] { ++runs; });
    if (i % 2 == 0) timers.cancel(id);
    clock.advance(10us);
  }
  clock.advance(20ms);
  EXPECT_EQ(runs, 500);  // each kept one ran
  EXPECT_EQ(timers.pending(), 0U);
  // 10 ms of deadlines, set for the first and once after each of the two firings.
  EXPECT_LE(counting.sets, 3);
  EXPECT_GE(counting.sets, 1);
}

TEST_F(CoarseTimersTest, NoDeadlineRunsMoreThanTheSlackLateNorEarly) {
  std::vector<std::pair<SteadyTime, SteadyTime>> met;  // due, ran
  for (int i = 0; i < 200; ++i) {
    const SteadyTime due = start + std::chrono::microseconds(i * 377 % 50'000);
    timers.at(due, [this, &met, due] { met.emplace_back(due, clock.steady_now()); });
  }
  clock.advance(100ms);
  ASSERT_EQ(met.size(), 200U);
  for (const auto& [due, at] : met) {
    EXPECT_GE(at, due);
    EXPECT_LE(at, due + 10ms);
  }
}

TEST_F(CoarseTimersTest, AnEarlierDeadlineMoreThanTheSlackAheadSetsTheTimerSooner) {
  timers.at(start + 1s, [this] { ran.push_back(1); });
  timers.at(start + 50ms, [this] { ran.push_back(2); });
  clock.advance(50ms);
  EXPECT_EQ(ran, std::vector<int>{2});
  clock.advance(950ms);
  EXPECT_EQ(ran, (std::vector<int>{2, 1}));
}

TEST_F(CoarseTimersTest, ARunMayMakeAndCancelDeadlines) {
  CoarseTimers::Id later = 0;
  timers.at(start + 1ms, [&] {
    ran.push_back(1);
    timers.cancel(later);
    timers.at(clock.steady_now() + 30ms, [this] { ran.push_back(3); });
  });
  later = timers.at(start + 2ms, [this] { ran.push_back(2); });
  clock.advance(100ms);
  EXPECT_EQ(ran, (std::vector<int>{1, 3}));
}

TEST_F(CoarseTimersTest, DestroyedWithDeadlinesPendingRunsNone) {
  {
    CoarseTimers local(clock, 10ms);
    local.at(start + 5ms, [this] { ran.push_back(1); });
  }
  clock.advance(50ms);
  EXPECT_TRUE(ran.empty());
}

}  // namespace
}  // namespace delayq::timing
