// micros_wheel.h — the timer queue of src/wheel/ that SchedulerOptions names, driven in
// microseconds. The timer thread (timer_thread.cc) owns one, inside run_with_wheel().
//
// The queues count time in milliseconds (wheel::Time, wheel::Millis), but they only ever divide a
// time's count by the tick's count (wheel/timer.h: deadline_tick, now_tick, tick_time), so fed
// microsecond counts they are microsecond queues: a 100 us tick is a tick of count 100.
// MicrosWheel is the one place where a microsecond count crosses into the queues' types
// (to_wheel_time, to_wheel_tick, from_wheel_time); everything on the scheduler's side of it is
// std::chrono::microseconds. Costs are the queue's own: O(1) for the
// wheels, O(log n) for the heap. Timer thread only, like the queue.
#pragma once

#include <chrono>
#include <optional>
#include <utility>

#include "base/check.h"
#include "delayq/scheduler.h"
#include "wheel/hashed_wheel.h"
#include "wheel/heap_timer.h"
#include "wheel/hierarchical_wheel.h"
#include "wheel/timer.h"

namespace delayq::detail {

// A time in microseconds as the queues take it, and back, and a tick: the same count.
[[nodiscard]] constexpr wheel::Time to_wheel_time(std::chrono::microseconds time) noexcept {
  return wheel::Time{wheel::Millis{time.count()}};
}
[[nodiscard]] constexpr std::chrono::microseconds from_wheel_time(wheel::Time time) noexcept {
  return std::chrono::microseconds{time.time_since_epoch().count()};
}
[[nodiscard]] constexpr wheel::Millis to_wheel_tick(std::chrono::microseconds tick) noexcept {
  return wheel::Millis{tick.count()};
}

template <wheel::TimerQueue Queue>
class MicrosWheel {
 public:
  using Micros = std::chrono::microseconds;

  explicit MicrosWheel(Queue& queue) noexcept : queue_(queue) {}

  void schedule(wheel::TimerId id, Micros due) { queue_.schedule(id, to_wheel_time(due)); }
  void reschedule(wheel::TimerId id, Micros due) { queue_.reschedule(id, to_wheel_time(due)); }
  void cancel(wheel::TimerId id) { queue_.cancel(id); }
  // Fires every timer due by `now` (Micros::max(): every timer).
  template <typename Fire>
  void advance_to(Micros now, Fire&& fire) noexcept {
    queue_.advance_to(to_wheel_time(now), std::forward<Fire>(fire));
  }
  [[nodiscard]] std::optional<Micros> next_deadline() const noexcept {
    if (const auto wheel_next = queue_.next_deadline()) return from_wheel_time(*wheel_next);
    return std::nullopt;
  }

 private:
  Queue& queue_;
};

// Builds the queue `options` names over `timers`, starting at time 0 with the options' tick (or
// the queue's natural one: 100 us for the hierarchical wheel and the heap, 1 s for the hashed
// ring), and calls run(MicrosWheel<that queue>&); the queue lives until run returns.
template <typename Run>
void run_with_wheel(const SchedulerOptions& options, wheel::TimerTable& timers, Run&& run) {
  using std::chrono::microseconds;
  const auto wheel_tick = [&](microseconds natural) {
    return to_wheel_tick(options.tick.count() > 0 ? options.tick : natural);
  };
  const auto wheel_start = to_wheel_time(microseconds{0});
  switch (options.wheel) {
    case WheelKind::kHierarchical: {
      wheel::HierarchicalWheel queue(timers,
                                     {.tick = wheel_tick(microseconds{100}), .start = wheel_start});
      MicrosWheel in_micros(queue);
      run(in_micros);
      return;
    }
    case WheelKind::kHashed: {
      wheel::HashedWheel queue(timers, {.slots = options.hashed_slots,
                                        .tick = wheel_tick(std::chrono::seconds{1}),
                                        .start = wheel_start});
      MicrosWheel in_micros(queue);
      run(in_micros);
      return;
    }
    case WheelKind::kHeap: {
      wheel::HeapTimer queue(timers, {.tick = wheel_tick(microseconds{100}), .start = wheel_start});
      MicrosWheel in_micros(queue);
      run(in_micros);
      return;
    }
  }
  DELAYQ_CHECK(false && "unknown WheelKind");
}

}  // namespace delayq::detail
