// hashed_wheel_test.cc — what is particular to HashedWheel: round counts and revolution skipping.
#include "wheel/hashed_wheel.h"

#include <gtest/gtest.h>

#include <vector>

namespace delayq::wheel {
namespace {

TEST(HashedWheelTest, TimersInOneBucketFireOnTheirOwnRevolution) {
  TimerTable timers(4);
  HashedWheel wheel(timers, {.slots = 8, .tick = Millis{1}, .start = time_at(0)});
  // All in bucket 3, one, two and three revolutions apart.
  wheel.schedule(0, time_at(3));
  wheel.schedule(1, time_at(11));
  wheel.schedule(2, time_at(19));
  wheel.schedule(3, time_at(27));
  for (std::int64_t t = 1; t <= 27; ++t) {
    std::vector<TimerId> fired;
    wheel.advance_to(time_at(t), [&](TimerId id) { fired.push_back(id); });
    if (t == 3 || t == 11 || t == 19 || t == 27) {
      EXPECT_EQ(fired, std::vector<TimerId>{static_cast<TimerId>((t - 3) / 8)}) << t;
    } else {
      EXPECT_TRUE(fired.empty()) << t;
    }
  }
}

TEST(HashedWheelTest, DefaultIsTheClassicHourOfSeconds) {
  TimerTable timers(1);
  HashedWheel wheel(timers);
  wheel.schedule(0, time_at(1'500));  // rounds up to the 2 s bucket
  std::size_t fired = wheel.advance_to(time_at(1'999), [](TimerId) {});
  EXPECT_EQ(fired, 0U);
  fired = wheel.advance_to(time_at(2'000), [](TimerId) {});
  EXPECT_EQ(fired, 1U);
}

TEST(HashedWheelTest, JumpOfYearsSkipsWholeRevolutions) {
  TimerTable timers(2);
  HashedWheel wheel(timers, {.slots = 16, .tick = Millis{1}, .start = time_at(0)});
  const Time ten_years = time_at(315'360'000'000);
  wheel.schedule(0, ten_years);
  wheel.schedule(1, ten_years + Millis{5});
  std::vector<TimerId> fired;
  wheel.advance_to(ten_years - Millis{1}, [&](TimerId id) { fired.push_back(id); });
  EXPECT_TRUE(fired.empty());
  wheel.advance_to(ten_years + Millis{5}, [&](TimerId id) { fired.push_back(id); });
  EXPECT_EQ(fired, (std::vector<TimerId>{0, 1}));
}

}  // namespace
}  // namespace delayq::wheel
