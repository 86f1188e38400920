// heap_timer.h — the baseline: an indexed binary min-heap of (tick, schedule order), the structure
// behind Java's DelayQueue and ScheduledThreadPoolExecutor. schedule() and cancel() are O(log n)
// (cancel finds its entry through Timer::position); each fired timer costs an O(log n) pop, and
// every level of the heap is a likely cache miss once it outgrows the caches. next_deadline() is
// exact and O(1). Owned by one thread. Comparison with the wheels: docs/design/timing-wheel.md
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "base/check.h"
#include "wheel/timer.h"

namespace delayq::wheel {

struct HeapTimerOptions {
  // Length of one tick. Default: 1 ms.
  Millis tick{1};
  // Time the heap starts at (its first now()). Default: 0.
  Time start{};
};

class HeapTimer {
 public:
  explicit HeapTimer(TimerTable& timers, HeapTimerOptions options = {});

  void schedule(TimerId id, Time deadline);
  bool cancel(TimerId id);
  bool reschedule(TimerId id, Time deadline);
  template <typename Fire>
  std::size_t advance_to(Time now, Fire&& fire) noexcept;

  [[nodiscard]] std::optional<Time> next_deadline() const noexcept;
  [[nodiscard]] bool scheduled(TimerId id) const noexcept {
    return id < timers_->size() && (*timers_)[id].scheduled();
  }
  [[nodiscard]] Time now() const noexcept { return tick_time(now_tick_, tick_); }
  [[nodiscard]] std::size_t size() const noexcept { return heap_.size(); }
  [[nodiscard]] std::size_t memory_bytes() const noexcept {
    return heap_.capacity() * sizeof(Entry);
  }

 private:
  struct Entry {
    std::uint64_t tick;
    std::uint64_t order;  // schedule order: equal ticks fire first-scheduled first
    TimerId id;
  };
  [[nodiscard]] static bool before(const Entry& a, const Entry& b) noexcept {
    return a.tick < b.tick || (a.tick == b.tick && a.order < b.order);
  }
  void set(std::size_t position, const Entry& entry) noexcept;
  void sift_up(std::size_t position) noexcept;
  void sift_down(std::size_t position) noexcept;
  void remove_at(std::size_t position) noexcept;

  TimerTable* timers_;
  Millis tick_;
  std::uint64_t now_tick_;
  std::uint64_t next_order_ = 0;
  bool advancing_ = false;
  std::vector<Entry> heap_;
};

template <typename Fire>
std::size_t HeapTimer::advance_to(Time now, Fire&& fire) noexcept {
  DELAYQ_CHECK(!advancing_);
  const std::uint64_t target = now_tick(now, tick_);
  if (target < now_tick_) return 0;
  advancing_ = true;
  std::size_t fired = 0;
  while (!heap_.empty() && heap_.front().tick <= target) {
    const Entry top = heap_.front();
    remove_at(0);
    if (top.tick > now_tick_) now_tick_ = top.tick;
    ++(*timers_)[top.id].generation;
    ++fired;
    fire(top.id);
  }
  now_tick_ = target;
  advancing_ = false;
  return fired;
}

}  // namespace delayq::wheel
