// micros_wheel_test.cc — each queue SchedulerOptions can name, built by run_with_wheel() and
// driven in microseconds through MicrosWheel (micros_wheel.h): a due time between ticks fires at
// the next tick boundary, never a microsecond before, and advancing to Micros::max() (shutdown's
// kRunPendingNow) fires a timer however far off. This pins what the scheduler relies on: that
// the queues, which take wheel::Millis, treat a count as a count.
#include "embedded/micros_wheel.h"

#include <gtest/gtest.h>

#include <chrono>
#include <optional>
#include <string>
#include <vector>

namespace delayq::detail {
namespace {

using std::chrono::microseconds;

std::string wheel_name(const ::testing::TestParamInfo<WheelKind>& param) {
  switch (param.param) {
    case WheelKind::kHierarchical:
      return "hierarchical";
    case WheelKind::kHashed:
      return "hashed";
    case WheelKind::kHeap:
      return "heap";
  }
  return "unknown";
}

class SchedulerMicrosWheelTest : public ::testing::TestWithParam<WheelKind> {};

INSTANTIATE_TEST_SUITE_P(Scheduler, SchedulerMicrosWheelTest,
                         ::testing::Values(WheelKind::kHierarchical, WheelKind::kHashed,
                                           WheelKind::kHeap),
                         wheel_name);

// The natural tick: 100 us, or 1 s for the hashed ring.
microseconds natural_tick(WheelKind kind) {
  return kind == WheelKind::kHashed ? microseconds{std::chrono::seconds{1}} : microseconds{100};
}

TEST_P(SchedulerMicrosWheelTest, FiresAtTheTickAfterTheDueTimeNeverBefore) {
  SchedulerOptions options;
  options.wheel = GetParam();
  const microseconds tick = natural_tick(GetParam());
  wheel::TimerTable timers;
  timers.emplace_back();
  timers.emplace_back();
  std::vector<wheel::TimerId> fired;
  run_with_wheel(options, timers, [&](auto& queue) {
    const auto fire = [&](wheel::TimerId id) { fired.push_back(id); };
    queue.schedule(0, tick + tick / 2);
    queue.schedule(1, microseconds{std::chrono::hours{24 * 365}});
    const std::optional<microseconds> next = queue.next_deadline();
    ASSERT_TRUE(next.has_value());
    EXPECT_LE(*next, 2 * tick);
    queue.advance_to(2 * tick - microseconds{1}, fire);
    EXPECT_TRUE(fired.empty());
    queue.advance_to(2 * tick, fire);
    EXPECT_EQ(fired, std::vector<wheel::TimerId>{0});
    queue.advance_to(microseconds::max(), fire);
    EXPECT_EQ(fired, (std::vector<wheel::TimerId>{0, 1}));
    EXPECT_FALSE(queue.next_deadline().has_value());
  });
}

TEST_P(SchedulerMicrosWheelTest, TheOptionsTickIsInMicroseconds) {
  SchedulerOptions options;
  options.wheel = GetParam();
  options.tick = microseconds{250};
  wheel::TimerTable timers;
  timers.emplace_back();
  std::vector<wheel::TimerId> fired;
  run_with_wheel(options, timers, [&](auto& queue) {
    const auto fire = [&](wheel::TimerId id) { fired.push_back(id); };
    queue.schedule(0, microseconds{260});
    queue.advance_to(microseconds{499}, fire);
    EXPECT_TRUE(fired.empty());
    queue.advance_to(microseconds{500}, fire);
    EXPECT_EQ(fired, std::vector<wheel::TimerId>{0});
  });
}

}  // namespace
}  // namespace delayq::detail
