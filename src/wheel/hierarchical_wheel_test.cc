// hierarchical_wheel_test.cc — what is particular to HierarchicalWheel: placement over the whole
// 64-bit range, lazy cancel and its sweep, the block pool, and the memory per timer.
#include "wheel/hierarchical_wheel.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "wheel/reference_queue.h"

namespace delayq::wheel {
namespace {

std::size_t advance(HierarchicalWheel& wheel, Time to, std::vector<TimerId>* fired = nullptr) {
  return wheel.advance_to(to, [&](TimerId id) {
    if (fired != nullptr) fired->push_back(id);
  });
}

TEST(HierarchicalWheelTest, EveryLevelCascadesDownToTheExactTick) {
  // One timer per level boundary and just either side of it, from now = 0.
  TimerTable timers(3 * HierarchicalWheel::kLevels);
  HierarchicalWheel wheel(timers);
  std::vector<std::int64_t> deadlines;
  for (unsigned level = 1; level < HierarchicalWheel::kLevels; ++level) {
    const std::uint64_t boundary = std::uint64_t{1} << (level * HierarchicalWheel::kLevelBits);
    if (boundary > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) break;
    for (std::int64_t delta : {-1, 0, 1}) {
      deadlines.push_back(static_cast<std::int64_t>(boundary) + delta);
    }
  }
  for (std::size_t i = 0; i < deadlines.size(); ++i) {
    wheel.schedule(static_cast<TimerId>(i), time_at(deadlines[i]));
  }
  for (std::size_t i = 0; i < deadlines.size(); ++i) {
    std::vector<TimerId> fired;
    EXPECT_EQ(advance(wheel, time_at(deadlines[i] - 1), &fired), 0U) << deadlines[i];
    EXPECT_EQ(advance(wheel, time_at(deadlines[i]), &fired), 1U) << deadlines[i];
    EXPECT_EQ(fired, std::vector<TimerId>{static_cast<TimerId>(i)});
  }
  EXPECT_EQ(wheel.size(), 0U);
}

TEST(HierarchicalWheelTest, NextDeadlineLeadsToTheEarliestTimerInAFewWakeups) {
  TimerTable timers(1000);
  HierarchicalWheel wheel(timers, {.tick = Millis{1}, .start = time_at(1'000'000)});
  std::mt19937_64 rng(42);
  std::int64_t earliest = std::numeric_limits<std::int64_t>::max();
  for (TimerId id = 0; id < 1000; ++id) {
    const auto at = 1'000'001 + static_cast<std::int64_t>(rng() % 100'000'000'000);
    earliest = std::min(earliest, at);
    wheel.schedule(id, time_at(at));
  }
  // Each wakeup is the start of the slot holding the earliest timer, one level lower each time.
  std::size_t wakeups = 0;
  std::size_t fired = 0;
  while (fired == 0) {
    const auto next = wheel.next_deadline();
    ASSERT_TRUE(next.has_value());
    ASSERT_LE(next->time_since_epoch().count(), earliest);
    ASSERT_LE(++wakeups, HierarchicalWheel::kLevels);
    fired = advance(wheel, *next);
  }
  EXPECT_EQ(wheel.now(), time_at(earliest));
}

TEST(HierarchicalWheelTest, CancelledEntriesAreSweptOnceTheyOutnumberLiveOnes) {
  constexpr TimerId kTimers = 100'000;
  TimerTable timers(kTimers);
  HierarchicalWheel wheel(timers);
  for (TimerId id = 0; id < kTimers; ++id) {
    wheel.schedule(id, time_at(1'000 + static_cast<std::int64_t>(id) * 37));
  }
  const std::size_t full = wheel.memory_bytes();
  for (TimerId id = 0; id < kTimers; id += 1) {
    if (id % 10 != 0) {
      EXPECT_TRUE(wheel.cancel(id));
    }
    EXPECT_LE(wheel.stale_entries(), std::max<std::size_t>(wheel.size() + 1, 4096));
  }
  EXPECT_EQ(wheel.size(), kTimers / 10);
  EXPECT_LT(wheel.memory_bytes(), full / 2);
  std::vector<TimerId> fired;
  advance(wheel, time_at(1'000 + std::int64_t{kTimers} * 37), &fired);
  ASSERT_EQ(fired.size(), kTimers / 10);
  for (std::size_t i = 0; i < fired.size(); ++i) EXPECT_EQ(fired[i], i * 10);
  EXPECT_EQ(wheel.stale_entries(), 0U);
}

// A level-1 slot reaching level 0 is laid out as one sorted run; a sweep in the middle of its
// window must keep the unfired part in order, and timers placed into the window later must still
// fire after the run's timers of the same tick.
TEST(HierarchicalWheelTest, SweepInsideALevelZeroWindowKeepsOrder) {
  constexpr TimerId kTimers = 20'000;
  constexpr std::int64_t kWindow = 256 * 10;  // level-1 slot 10: ticks 2560..2815
  TimerTable timers(kTimers + 100);
  HierarchicalWheel wheel(timers);
  ReferenceQueue model(Millis{1}, time_at(0));
  std::mt19937_64 rng(11);
  const auto both = [&](auto&& op) {
    op(wheel);
    op(model);
  };
  for (TimerId id = 0; id < kTimers; ++id) {
    const Time at = time_at(kWindow + static_cast<std::int64_t>(rng() % 256));
    both([&](auto& q) { q.schedule(id, at); });
  }
  std::vector<TimerId> fired;
  std::vector<TimerId> expected;
  advance(wheel, time_at(kWindow + 100), &fired);
  model.advance_to(time_at(kWindow + 100), [&](TimerId id) { expected.push_back(id); });
  ASSERT_EQ(fired, expected);
  for (TimerId id = 0; id < kTimers; ++id) {
    if (id % 10 != 0) both([&](auto& q) { q.cancel(id); });
  }
  EXPECT_LT(wheel.stale_entries(), 4096U);  // swept
  for (TimerId id = kTimers; id < kTimers + 100; ++id) {
    const Time at = time_at(kWindow + 100 + static_cast<std::int64_t>(rng() % 156));
    both([&](auto& q) { q.schedule(id, at); });
  }
  fired.clear();
  expected.clear();
  advance(wheel, time_at(kWindow + 256), &fired);
  model.advance_to(time_at(kWindow + 256), [&](TimerId id) { expected.push_back(id); });
  EXPECT_EQ(fired, expected);
  EXPECT_EQ(wheel.size(), 0U);
  EXPECT_EQ(wheel.stale_entries(), 0U);
}

TEST(HierarchicalWheelTest, ADenseWindowDoesNotPinItsMemory) {
  constexpr TimerId kTimers = 100'000;
  TimerTable timers(kTimers + 1);
  HierarchicalWheel wheel(timers);
  for (TimerId id = 0; id < kTimers; ++id) wheel.schedule(id, time_at(2'560 + id % 256));
  EXPECT_EQ(advance(wheel, time_at(2'816)), kTimers);  // one level-0 window, laid out as a run
  wheel.schedule(kTimers, time_at(100'000));
  EXPECT_EQ(advance(wheel, time_at(100'000)), 1U);  // the next level-1 cascade gives the run back
  EXPECT_LE(wheel.memory_bytes(), std::size_t{1} << 20);
}

TEST(HierarchicalWheelTest, FirstSchedulesDoNotStartAGenerationEpoch) {
  // An epoch sweep reads every entry; it must come once per 2^30 generations of a timer, not on
  // every timer's first schedule (that would be a full sweep at the first cancel after a fill).
  TimerTable timers(10'000);
  HierarchicalWheel wheel(timers);
  for (TimerId id = 0; id < 10'000; ++id) wheel.schedule(id, time_at(1'000 + id));
  EXPECT_TRUE(wheel.cancel(0));
  EXPECT_EQ(wheel.stale_entries(), 1U);  // left in place, not swept
}

TEST(HierarchicalWheelTest, RescheduleManyTimesKeepsOneLiveEntry) {
  TimerTable timers(1);
  HierarchicalWheel wheel(timers);
  for (int i = 0; i < 100'000; ++i) wheel.reschedule(0, time_at(5'000'000 - i));
  EXPECT_EQ(wheel.size(), 1U);
  EXPECT_LE(wheel.stale_entries(), 4096U);
  std::vector<TimerId> fired;
  EXPECT_EQ(advance(wheel, time_at(4'900'000), &fired), 0U);
  EXPECT_EQ(advance(wheel, time_at(4'900'001), &fired), 1U);
}

TEST(HierarchicalWheelTest, MemoryPerTimerAtAMillionTimers) {
  constexpr std::size_t kTimers = 1'000'000;
  TimerTable timers(kTimers);
  HierarchicalWheel wheel(timers);
  std::mt19937_64 rng(7);
  for (TimerId id = 0; id < kTimers; ++id) {
    wheel.schedule(id, time_at(1 + static_cast<std::int64_t>(rng() % 3'600'000)));
  }
  const double bytes_per_timer =
      static_cast<double>(wheel.memory_bytes() + timers.size() * sizeof(Timer)) / kTimers;
  EXPECT_LE(bytes_per_timer, 32.0);
  // Blocks go back to the pool and, past a floor, to the heap as timers fire.
  EXPECT_EQ(advance(wheel, time_at(3'600'000)), kTimers);
  EXPECT_LE(wheel.memory_bytes(), 1U << 20);
}

}  // namespace
}  // namespace delayq::wheel
