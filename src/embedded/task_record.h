// task_record.h — the rules every thread follows around a TaskRecord (declared in
// include/delayq/scheduler.h): its state word, the claim a caller takes to change a pending task,
// and its reference count. Callers, the timer thread and the workers all go through these.
//
//   word = version << 8 | state        refs_ = references | kQueued (the inbox holds it)
//
// Every move out of pending is a compare-and-swap on the word: the timer's pending -> running,
// or a caller's pending -> claimed, which then writes the new due time, queues the record and
// releases the claim as (version + 1, pending) or as cancelled. So exactly one of them wins.
// A final state is published last, after the callable is destroyed, and notifies wait().
// Lock-free; a thread that meets a claim yields until it ends (claims last a few instructions).
// The whole protocol, drawn: docs/embedded.md, "How it works".
#pragma once

#include <atomic>
#include <cstdint>
#include <thread>

#include "delayq/scheduler.h"

namespace delayq::detail {

// The states of the word. kClaimed is internal: a caller is changing the task; others wait for it.
// kCancelling and kDropping are internal too: the outcome is decided and the callable is being
// destroyed (its captures' destructors may call into this task's handle, which finds it no
// longer pending, or take long; nobody waits for them but wait()).
inline constexpr std::uint64_t kPending = static_cast<std::uint64_t>(TaskState::kPending);
inline constexpr std::uint64_t kRunning = static_cast<std::uint64_t>(TaskState::kRunning);
inline constexpr std::uint64_t kDone = static_cast<std::uint64_t>(TaskState::kDone);
inline constexpr std::uint64_t kFailed = static_cast<std::uint64_t>(TaskState::kFailed);
inline constexpr std::uint64_t kCancelled = static_cast<std::uint64_t>(TaskState::kCancelled);
inline constexpr std::uint64_t kDropped = static_cast<std::uint64_t>(TaskState::kDropped);
inline constexpr std::uint64_t kClaimed = 0xff;
inline constexpr std::uint64_t kCancelling = 0xfe;
inline constexpr std::uint64_t kDropping = 0xfd;

inline constexpr std::uint32_t kQueued = TaskRecord::kQueued;

constexpr std::uint64_t state_of(std::uint64_t word) noexcept {
  return word & 0xff;
}
constexpr std::uint64_t version_of(std::uint64_t word) noexcept {
  return word >> 8;
}
constexpr std::uint64_t make_word(std::uint64_t version, std::uint64_t state) noexcept {
  return version << 8 | state;
}
// The outcome a state stands for: a task being cancelled or dropped is, already.
constexpr std::uint64_t outcome_of(std::uint64_t state) noexcept {
  return state == kCancelling ? kCancelled : state == kDropping ? kDropped : state;
}
constexpr bool is_final(std::uint64_t state) noexcept {
  return state == kDone || state == kFailed || state == kCancelled || state == kDropped;
}

// Drops one reference; the last one frees the record.
inline void release(TaskRecord* record) noexcept {
  if (record->refs_.fetch_sub(1, std::memory_order_acq_rel) == 1) delete record;
}

// Clears the kQueued bit of a record the timer thread took out of the inbox (the last reference
// when nothing else holds the record).
inline void unqueue(TaskRecord* record) noexcept {
  if (record->refs_.fetch_and(~kQueued, std::memory_order_acq_rel) == kQueued) delete record;
}

// Takes the claim on a pending task; false if it is not pending. `word` is the word claimed.
inline bool claim(TaskRecord* record, std::uint64_t& word) noexcept {
  word = record->word_.load(std::memory_order_acquire);
  for (;;) {
    const std::uint64_t state = state_of(word);
    if (state == kClaimed) {
      std::this_thread::yield();
      word = record->word_.load(std::memory_order_acquire);
      continue;
    }
    if (state != kPending) return false;
    if (record->word_.compare_exchange_weak(word, make_word(version_of(word), kClaimed),
                                            std::memory_order_acquire)) {
      return true;
    }
  }
}

// The word once no claim is held on it. Claims last a few instructions and one short mutex, so
// the timer thread spins rather than parks.
inline std::uint64_t settled_word(const TaskRecord* record) noexcept {
  for (;;) {
    const std::uint64_t word = record->word_.load(std::memory_order_acquire);
    if (state_of(word) != kClaimed) return word;
    std::this_thread::yield();
  }
}

// Publishes `state` and wakes every wait().
inline void finish_task(TaskRecord* record, std::uint64_t version, std::uint64_t state) noexcept {
  record->word_.store(make_word(version, state), std::memory_order_release);
  record->word_.notify_all();
}

// Ends a claimed task as cancelled or dropped: the outcome is published first (the claim ends,
// so a capture's destructor that cancels this task's handle gets false rather than waiting on
// itself, and the timer thread does not spin on a slow destructor), then the callable is
// destroyed, then the final state says so (wait() returns only then).
inline void end_claimed(TaskRecord* record, std::uint64_t word, std::uint64_t outcome) noexcept {
  record->word_.store(make_word(version_of(word), outcome == kCancelled ? kCancelling : kDropping),
                      std::memory_order_release);
  record->destroy_task();
  finish_task(record, version_of(word), outcome);
}

// Moves a pending task to `state` (kDropped, or kRunning for a shutdown that runs it now), waiting
// out a claim; false if it was not pending (a caller cancelled it first). A dropped task's
// callable is destroyed before the state is published, so whoever sees the final state (wait())
// sees the captures gone.
inline bool settle(TaskRecord* record, std::uint64_t state) noexcept {
  std::uint64_t word;
  if (!claim(record, word)) return false;
  if (state == kDropped) {
    end_claimed(record, word, kDropped);
  } else {
    finish_task(record, version_of(word), state);
  }
  return true;
}

}  // namespace delayq::detail
