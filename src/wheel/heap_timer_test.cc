// heap_timer_test.cc — what is particular to HeapTimer: positions stay consistent under removal
// from the middle.
#include "wheel/heap_timer.h"

#include <gtest/gtest.h>

#include <random>
#include <vector>

namespace delayq::wheel {
namespace {

TEST(HeapTimerTest, CancelFromTheMiddleKeepsHeapOrder) {
  constexpr TimerId kTimers = 10'000;
  TimerTable timers(kTimers);
  HeapTimer heap(timers);
  std::mt19937_64 rng(3);
  std::vector<std::int64_t> deadline(kTimers);
  for (TimerId id = 0; id < kTimers; ++id) {
    deadline[id] = 1 + static_cast<std::int64_t>(rng() % 1'000'000);
    heap.schedule(id, time_at(deadline[id]));
  }
  for (TimerId id = 0; id < kTimers; id += 3) EXPECT_TRUE(heap.cancel(id));
  for (TimerId id = 0; id < kTimers; ++id) {
    if (timers[id].scheduled()) {
      EXPECT_LT(timers[id].position, heap.size());
    }
  }
  std::int64_t last = 0;
  std::size_t fired = heap.advance_to(time_at(1'000'000), [&](TimerId id) {
    EXPECT_NE(id % 3, 0U);
    EXPECT_GE(deadline[id], last);
    last = deadline[id];
  });
  EXPECT_EQ(fired, kTimers - (kTimers + 2) / 3);
}

}  // namespace
}  // namespace delayq::wheel
