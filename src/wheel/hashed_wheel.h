// hashed_wheel.h — the classic hashed timing wheel with round counts (Varghese & Lauck's scheme 4,
// Netty's HashedWheelTimer): a ring of `slots` buckets, one tick each; a timer due in d ticks goes
// to bucket (now + d) mod slots with rounds = (d - 1) / slots, and each time the pointer passes a
// bucket it walks every timer there, firing those at round 0 and decrementing the others.
// schedule() and cancel() are O(1) (cancel is lazy and swept, as in HierarchicalWheel). A tick's
// cost is the number of timers in its bucket, fired or not: with n timers spread over far more than
// one revolution, every tick walks ~n/slots timers, which is the design's known weakness (see
// docs/BENCHMARKS.md). Unlike the classic, an advance longer than two revolutions skips whole
// revolutions in one O(n) pass, so a jump of years is not years of ticking; next_deadline() is an
// O(n + slots) scan, and may answer a revolution late if called from inside fire(). Owned by one
// thread. Comparison: docs/design/timing-wheel.md
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "base/check.h"
#include "wheel/timer.h"

namespace delayq::wheel {

struct HashedWheelOptions {
  // Buckets in the ring. Default: 3600, the classic one-hour ring of one-second buckets.
  std::uint32_t slots = 3600;
  // Length of one tick (one bucket). Deadlines round up to it. Default: 1 s.
  Millis tick{1000};
  // Time the wheel starts at (its first now()). Default: 0.
  Time start{};
  // Cancelled entries are dropped once they outnumber the live ones and number at least this
  // many, as in HierarchicalWheelOptions. Default: 4096.
  std::size_t min_sweep_entries = 4096;
};

class HashedWheel {
 public:
  explicit HashedWheel(TimerTable& timers, HashedWheelOptions options = {});

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
  [[nodiscard]] std::size_t size() const noexcept { return live_; }
  [[nodiscard]] std::size_t memory_bytes() const noexcept;

 private:
  struct Entry {
    std::uint64_t rounds;  // passes of the pointer left before the timer is due
    TimerId id;
    std::uint32_t generation;
  };
  [[nodiscard]] bool is_live(const Entry& entry) const noexcept {
    return (*timers_)[entry.id].generation == entry.generation;
  }
  template <typename Fire>
  std::size_t fire_due(Fire& fire);
  template <typename Fire>
  std::size_t pass(std::uint32_t bucket, Fire& fire);
  void skip_revolutions(std::uint64_t target);
  void drop_stale();
  void maybe_drop_stale();

  TimerTable* timers_;
  Millis tick_;
  std::uint64_t now_tick_;
  std::size_t min_sweep_entries_;
  std::size_t live_ = 0;
  std::size_t stale_ = 0;
  bool advancing_ = false;
  bool epoch_drop_due_ = false;
  std::uint64_t next_skip_tick_ = 0;  // no revolution skip is tried before this tick
  std::vector<std::vector<Entry>> buckets_;
  std::vector<Entry> due_;  // scheduled at or before now(); fire on the next advance_to()
};

template <typename Fire>
std::size_t HashedWheel::fire_due(Fire& fire) {
  std::size_t fired = 0;
  // fire() may append to due_, so index afresh each time.
  for (std::size_t i = 0; i < due_.size(); ++i) {
    const Entry entry = due_[i];
    if (!is_live(entry)) {
      --stale_;
      continue;
    }
    ++(*timers_)[entry.id].generation;
    --live_;
    ++fired;
    fire(entry.id);
  }
  due_.clear();
  return fired;
}

// The pointer passes `bucket`: every entry is visited; stale ones are dropped, round-0 ones fire,
// the rest lose a round and stay, in order. Entries fire() appends during the pass are not
// visited by it; they move down after the survivors.
template <typename Fire>
std::size_t HashedWheel::pass(std::uint32_t bucket_index, Fire& fire) {
  std::vector<Entry>& bucket = buckets_[bucket_index];
  const std::size_t visited = bucket.size();
  std::size_t kept = 0;
  std::size_t fired = 0;
  for (std::size_t i = 0; i < visited; ++i) {
    Entry entry = bucket[i];
    if (!is_live(entry)) {
      --stale_;
    } else if (entry.rounds == 0) {
      ++(*timers_)[entry.id].generation;
      --live_;
      ++fired;
      fire(entry.id);
    } else {
      --entry.rounds;
      bucket[kept++] = entry;
    }
  }
  bucket.erase(bucket.begin() + static_cast<std::ptrdiff_t>(kept),
               bucket.begin() + static_cast<std::ptrdiff_t>(visited));
  return fired;
}

template <typename Fire>
std::size_t HashedWheel::advance_to(Time now, Fire&& fire) noexcept {
  DELAYQ_CHECK(!advancing_);
  const std::uint64_t target = now_tick(now, tick_);
  if (target < now_tick_) return 0;
  advancing_ = true;
  const auto slots = static_cast<std::uint64_t>(buckets_.size());
  std::size_t fired = fire_due(fire);
  while (now_tick_ < target) {
    if (live_ == 0) {
      for (auto& bucket : buckets_) bucket.clear();
      stale_ = 0;
      now_tick_ = target;
      break;
    }
    if (target - now_tick_ >= 2 * slots && now_tick_ >= next_skip_tick_) skip_revolutions(target);
    ++now_tick_;
    fired += pass(static_cast<std::uint32_t>(now_tick_ % slots), fire);
    fired += fire_due(fire);
  }
  advancing_ = false;
  maybe_drop_stale();
  return fired;
}

}  // namespace delayq::wheel
