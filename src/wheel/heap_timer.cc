// heap_timer.cc — sift operations of the indexed binary heap.
#include "wheel/heap_timer.h"

#include <algorithm>

namespace delayq::wheel {

HeapTimer::HeapTimer(TimerTable& timers, HeapTimerOptions options)
    : timers_(&timers), tick_(options.tick), now_tick_(0) {
  DELAYQ_CHECK(options.tick.count() > 0);
  now_tick_ = now_tick(options.start, tick_);
}

void HeapTimer::schedule(TimerId id, Time deadline) {
  const std::uint32_t generation = next_generation(*timers_, id);
  heap_.push_back({std::max(deadline_tick(deadline, tick_), now_tick_), next_order_++, id});
  (*timers_)[id].generation = generation;
  (*timers_)[id].position = static_cast<std::uint32_t>(heap_.size() - 1);
  sift_up(heap_.size() - 1);
}

bool HeapTimer::cancel(TimerId id) {
  if (!disarm(*timers_, id)) return false;
  remove_at((*timers_)[id].position);
  return true;
}

bool HeapTimer::reschedule(TimerId id, Time deadline) {
  const bool was_scheduled = cancel(id);
  schedule(id, deadline);
  return was_scheduled;
}

std::optional<Time> HeapTimer::next_deadline() const noexcept {
  if (heap_.empty() || heap_.front().tick > last_tick(tick_)) return std::nullopt;
  return tick_time(heap_.front().tick, tick_);
}

void HeapTimer::set(std::size_t position, const Entry& entry) noexcept {
  heap_[position] = entry;
  (*timers_)[entry.id].position = static_cast<std::uint32_t>(position);
}

void HeapTimer::sift_up(std::size_t position) noexcept {
  const Entry entry = heap_[position];
  while (position > 0) {
    const std::size_t parent = (position - 1) / 2;
    if (!before(entry, heap_[parent])) break;
    set(position, heap_[parent]);
    position = parent;
  }
  set(position, entry);
}

void HeapTimer::sift_down(std::size_t position) noexcept {
  const Entry entry = heap_[position];
  const std::size_t size = heap_.size();
  for (;;) {
    std::size_t child = 2 * position + 1;
    if (child >= size) break;
    if (child + 1 < size && before(heap_[child + 1], heap_[child])) ++child;
    if (!before(heap_[child], entry)) break;
    set(position, heap_[child]);
    position = child;
  }
  set(position, entry);
}

// Moves the last entry into the hole and restores order in whichever direction it is out of.
void HeapTimer::remove_at(std::size_t position) noexcept {
  const std::size_t last = heap_.size() - 1;
  if (position != last) {
    set(position, heap_[last]);
    heap_.pop_back();
    if (position > 0 && before(heap_[position], heap_[(position - 1) / 2])) {
      sift_up(position);
    } else {
      sift_down(position);
    }
  } else {
    heap_.pop_back();
  }
}

}  // namespace delayq::wheel
