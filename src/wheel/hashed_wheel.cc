// hashed_wheel.cc — bucket placement, revolution skipping and the O(n) next_deadline().
#include "wheel/hashed_wheel.h"

#include <algorithm>
#include <limits>

namespace delayq::wheel {

HashedWheel::HashedWheel(TimerTable& timers, HashedWheelOptions options)
    : timers_(&timers),
      tick_(options.tick),
      now_tick_(0),
      min_sweep_entries_(options.min_sweep_entries),
      buckets_(options.slots) {
  DELAYQ_CHECK(options.tick.count() > 0);
  DELAYQ_CHECK(options.slots > 0);
  now_tick_ = now_tick(options.start, tick_);
}

void HashedWheel::schedule(TimerId id, Time deadline) {
  const std::uint32_t generation = next_generation(*timers_, id);
  const std::uint64_t tick = deadline_tick(deadline, tick_);
  if (tick <= now_tick_) {
    due_.push_back({0, id, generation});
  } else {
    const std::uint64_t ticks_away = tick - now_tick_;
    const auto slots = static_cast<std::uint64_t>(buckets_.size());
    buckets_[tick % slots].push_back({(ticks_away - 1) / slots, id, generation});
  }
  (*timers_)[id].generation = generation;
  ++live_;
  if (starts_epoch(generation)) {
    epoch_drop_due_ = true;
    maybe_drop_stale();
  }
}

// Same bound as HierarchicalWheel: stale entries never outnumber live ones by much, and none
// outlives a generation epoch (see starts_epoch()). Not during a pass, which it would disturb.
void HashedWheel::maybe_drop_stale() {
  if (advancing_ || stale_ == 0) return;
  if (epoch_drop_due_ || (stale_ > live_ && stale_ >= min_sweep_entries_)) drop_stale();
}

bool HashedWheel::cancel(TimerId id) {
  if (!disarm(*timers_, id)) return false;
  --live_;
  ++stale_;
  maybe_drop_stale();
  return true;
}

void HashedWheel::drop_stale() {
  const auto stale = [&](const Entry& entry) { return !is_live(entry); };
  for (auto& bucket : buckets_) std::erase_if(bucket, stale);
  std::erase_if(due_, stale);
  stale_ = 0;
  epoch_drop_due_ = false;
}

bool HashedWheel::reschedule(TimerId id, Time deadline) {
  const bool was_scheduled = cancel(id);
  schedule(id, deadline);
  return was_scheduled;
}

// Passing k whole revolutions visits every bucket k times, so if every timer has at least k
// rounds left, those passes fire nothing and amount to `rounds -= k` everywhere: one O(n) pass
// instead of k * slots ticks. Stale entries are dropped on the way. When some timer is due within
// a revolution, the next try waits a revolution, so the scan costs O(n / slots) a tick at most.
void HashedWheel::skip_revolutions(std::uint64_t target) {
  const auto slots = static_cast<std::uint64_t>(buckets_.size());
  drop_stale();
  std::uint64_t min_rounds = std::numeric_limits<std::uint64_t>::max();
  for (const auto& bucket : buckets_) {
    for (const Entry& entry : bucket) min_rounds = std::min(min_rounds, entry.rounds);
  }
  const std::uint64_t skip = std::min(min_rounds, (target - now_tick_) / slots - 1);
  if (skip == 0) {
    next_skip_tick_ = now_tick_ + slots;
    return;
  }
  for (auto& bucket : buckets_) {
    for (Entry& entry : bucket) entry.rounds -= skip;
  }
  now_tick_ += skip * slots;
}

// O(n): a bucket mixes timers of many revolutions, so nothing short of a scan knows the earliest.
std::optional<Time> HashedWheel::next_deadline() const noexcept {
  if (live_ == 0) return std::nullopt;
  for (const Entry& entry : due_) {
    if (is_live(entry)) return tick_time(now_tick_, tick_);
  }
  const auto slots = static_cast<std::uint64_t>(buckets_.size());
  std::uint64_t earliest = std::numeric_limits<std::uint64_t>::max();  // none can fire
  for (std::uint64_t offset = 1; offset <= slots; ++offset) {
    const std::uint64_t tick = now_tick_ + offset;
    for (const Entry& entry : buckets_[tick % slots]) {
      if (is_live(entry)) earliest = std::min(earliest, tick + entry.rounds * slots);
    }
  }
  if (earliest > last_tick(tick_)) return std::nullopt;
  return tick_time(earliest, tick_);
}

std::size_t HashedWheel::memory_bytes() const noexcept {
  std::size_t bytes = buckets_.capacity() * sizeof(std::vector<Entry>);
  for (const auto& bucket : buckets_) bytes += bucket.capacity() * sizeof(Entry);
  return bytes + due_.capacity() * sizeof(Entry);
}

}  // namespace delayq::wheel
