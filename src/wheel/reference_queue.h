// reference_queue.h — the plain model the timer queues are tested against (tests only).
// A std::multimap from deadline tick to id: multimap keeps equal keys in insertion order, so
// popping from the front is exactly "by tick, then by schedule order". Same semantics as the
// TimerQueue concept (deadlines at or before now are due now; time never goes back), none of the
// cleverness. O(log n) everything.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <unordered_map>

#include "wheel/timer.h"

namespace delayq::wheel {

class ReferenceQueue {
 public:
  ReferenceQueue(Millis tick, Time start) : tick_(tick), now_tick_(now_tick(start, tick)) {}

  void schedule(TimerId id, Time deadline) {
    const std::uint64_t tick = std::max(deadline_tick(deadline, tick_), now_tick_);
    where_.emplace(id, by_tick_.emplace(tick, id));
  }

  bool cancel(TimerId id) {
    const auto it = where_.find(id);
    if (it == where_.end()) return false;
    by_tick_.erase(it->second);
    where_.erase(it);
    return true;
  }

  bool reschedule(TimerId id, Time deadline) {
    const bool was_scheduled = cancel(id);
    schedule(id, deadline);
    return was_scheduled;
  }

  template <typename Fire>
  std::size_t advance_to(Time now, Fire&& fire) {
    const std::uint64_t target = now_tick(now, tick_);
    if (target < now_tick_) return 0;
    std::size_t fired = 0;
    while (!by_tick_.empty() && by_tick_.begin()->first <= target) {
      const auto [tick, id] = *by_tick_.begin();
      by_tick_.erase(by_tick_.begin());
      where_.erase(id);
      now_tick_ = std::max(now_tick_, tick);
      ++fired;
      fire(id);
    }
    now_tick_ = target;
    return fired;
  }

  // As the TimerQueue concept says: none when no timer can fire, which includes timers whose tick
  // lies beyond last_tick() (they sort last, so the first one decides).
  [[nodiscard]] std::optional<Time> next_deadline() const {
    if (by_tick_.empty() || by_tick_.begin()->first > last_tick(tick_)) return std::nullopt;
    return tick_time(by_tick_.begin()->first, tick_);
  }
  [[nodiscard]] Time now() const { return tick_time(now_tick_, tick_); }
  [[nodiscard]] std::size_t size() const { return by_tick_.size(); }
  [[nodiscard]] bool scheduled(TimerId id) const { return where_.contains(id); }

 private:
  Millis tick_;
  std::uint64_t now_tick_;
  std::multimap<std::uint64_t, TimerId> by_tick_;
  std::unordered_map<TimerId, std::multimap<std::uint64_t, TimerId>::iterator> where_;
};

}  // namespace delayq::wheel
