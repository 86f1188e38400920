// timer_thread.cc — the timer thread of SchedulerCore (scheduler_core.h): it sleeps until the
// earliest due time or a wake-up, applies the inbox to the wheel, fires what is due and hands it
// to the workers; at shutdown it settles every record it holds. It alone touches the wheel and
// the record table, so none of that takes a lock; it shares only the inbox (lock-free), each
// record's state word (compare-and-swap) and, to sleep, wake_mutex_.
//
// The timer never fires a queued record (kQueued set): its wheel entry may be for an older due
// time, and the reconcile on its way rearms it. So once reschedule() has returned, the old due
// time can no longer fire. The handshake that keeps a sleep from missing a push is at
// wait_for_work().
#include <algorithm>
#include <limits>
#include <optional>
#ifdef __linux__
#include <pthread.h>
#include <sys/prctl.h>
#endif

#include "base/check.h"
#include "embedded/micros_wheel.h"
#include "embedded/scheduler_core.h"
#include "embedded/task_record.h"

namespace delayq::detail {

void SchedulerCore::timer_main() noexcept {
#ifdef __linux__
  // Named for top -H and /proc/<pid>/task/*/comm; woken exactly when asked (the default 50 us
  // of timer slack would be lateness on every task).
  pthread_setname_np(pthread_self(), "delayq-timer");
  prctl(PR_SET_TIMERSLACK, 1UL, 0UL, 0UL, 0UL);
#endif
  run_with_wheel(options_, records_.timers(), [this](auto& queue) { run_timer(queue); });
}

// Sleep until the earliest due time or a wake-up, apply the inbox (a bounded batch at a time, so
// a flood of schedules cannot hold up firing), fire what is due. `target` is a time no later
// than the earliest due task (kNever if none); cancels may leave it early, which costs one
// wake-up that fires nothing.
template <typename Queue>
void SchedulerCore::run_timer(Queue& queue) noexcept {
  Micros target = kNever;
  for (;;) {
    wait_for_work(target);
    target = std::min(target, drain(queue, kWakeBatch));
    if (closing_seen_ && mode_ != ShutdownMode::kRunPendingWhenDue) break;
    target = advance(queue, target);
    if (closing_seen_ && records_.size() == 0) break;
  }
  finish(queue);
}

Micros SchedulerCore::now_since_start() const noexcept {
  return std::chrono::floor<Micros>(now() - start_);
}

// Sleeps until `target`, a wake-up, or a push; returns at once if the inbox has something. On
// SchedulerClock a timed wait; a ManualSchedulerClock has no real time to wait for, so the thread
// waits until the clock says it moved (clock_moved()) and then reads it again.
void SchedulerCore::wait_for_work(Micros target) {
  if (!inbox_.empty()) return;
  std::unique_lock lock(wake_mutex_);
  while (!wake_) {
    // Then check the inbox: a caller pushes and then reads sleeping_until_ (notify()), so either
    // the push is seen here or the caller sees what the thread sleeps for.
    sleeping_until_.store(target, std::memory_order_seq_cst);
    if (!inbox_.empty()) break;
    if (target == kNever) {
      wake_cv_.wait(lock);
    } else {
      const auto when = start_ + std::min(target, kFarthest);
      if (now() >= when) break;
      if (clock_ != nullptr) {
        wake_cv_.wait(lock);
      } else {
        wake_cv_.wait_until(lock, when);
      }
    }
  }
  sleeping_until_.store(kAwake, std::memory_order_seq_cst);
  wake_ = false;
}

// Takes up to `limit` records out of the inbox and reconciles each; returns the earliest due time
// armed, or kNever.
template <typename Queue>
Micros SchedulerCore::drain(Queue& queue, std::size_t limit) {
  Micros earliest = kNever;
  for (std::size_t n = 0; n < limit; ++n) {
    InboxNode* node = inbox_.pop();
    if (node == nullptr) break;
    if (node == &closing_marker_) {
      closing_seen_ = true;
      continue;
    }
    auto* record = static_cast<TaskRecord*>(node);
    if (record->timer_id_ == kGoneRecord) {
      unqueue(record);  // settled by shutdown's sweep while queued
      continue;
    }
    // Clear the bit before reading the word: a change made after this queues the record again.
    // The scheduler's reference keeps the record alive.
    unqueue(record);
    earliest = std::min(earliest, reconcile(queue, record));
  }
  return earliest;
}

// Makes the wheel match the record's word; returns the due time it armed, or kNever.
template <typename Queue>
Micros SchedulerCore::reconcile(Queue& queue, TaskRecord* record) {
  if (record->timer_id_ == kNewRecord && closing_seen_) {
    // Scheduled after shutdown began (its producer checked closing_ just before shutdown set it).
    settle(record, kDropped);
    forget(queue, record);
    return kNever;
  }
  const std::uint64_t state = outcome_of(state_of(settled_word(record)));
  if (state == kCancelled || state == kDropped) {
    forget(queue, record);
    return kNever;
  }
  DELAYQ_CHECK(state == kPending);  // a queued record does not fire
  const Micros due = since_start(SchedulerClock::time_point(
      SchedulerClock::duration(record->due_ns_.load(std::memory_order_relaxed))));
  if (record->timer_id_ == kNewRecord) {
    queue.schedule(records_.add(record), due);
  } else {
    queue.reschedule(record->timer_id_, due);
  }
  return due;
}

// Fires what is due by now, if `target` has come; returns the next target.
template <typename Queue>
Micros SchedulerCore::advance(Queue& queue, Micros target) {
  const Micros now = now_since_start();
  if (target > now) return target;
  queue.advance_to(now, [&](wheel::TimerId id) { fire(id); });
  workers_.hand_over(due_);
  const std::optional<Micros> next = queue.next_deadline();
  if (!next) return kNever;
  // Everything due by now has fired, so the next deadline lies ahead; never spin on it.
  return std::max(*next, now + Micros{1});
}

// Called by advance_to() for a timer that is due. A claimed or queued record has a change on its
// way (its wheel entry may be for an older due time): the reconcile that follows rearms it. The
// version in the compare-and-swap catches a change made between these reads and the swap.
void SchedulerCore::fire(wheel::TimerId id) {
  TaskRecord* record = records_.at(id);
  std::uint64_t word = record->word_.load(std::memory_order_acquire);
  if (state_of(word) != kPending ||
      (record->refs_.load(std::memory_order_acquire) & kQueued) != 0 ||
      !record->word_.compare_exchange_strong(word, make_word(version_of(word), kRunning),
                                             std::memory_order_acq_rel)) {
    return;
  }
  records_.remove(record);
  due_.push_back(record);  // the scheduler's reference goes with it to the worker
}

// A cancelled or dropped record leaves the wheel and the scheduler lets go of it.
template <typename Queue>
void SchedulerCore::forget(Queue& queue, TaskRecord* record) {
  if (record->timer_id_ == kNewRecord) {
    record->timer_id_ = kGoneRecord;
  } else {
    queue.cancel(record->timer_id_);
    records_.remove(record);
  }
  release(record);  // the scheduler's reference
}

// Shutdown, once the marker is out of the inbox. Apply what came after it, settle every record
// still pending (run it now or drop it), then seal the inbox and take what is left: a caller that
// held a claim during the sweep has queued its record by the time the sweep gets past it, and a
// record scheduled after the seal is dropped by its producer.
template <typename Queue>
void SchedulerCore::finish(Queue& queue) {
  const ShutdownMode mode = mode_;
  drain(queue, std::numeric_limits<std::size_t>::max());
  // Tasks already due run, as shutdown() promises; kRunPendingNow runs the rest too.
  const Micros fire_by = mode == ShutdownMode::kRunPendingNow ? Micros::max() : now_since_start();
  queue.advance_to(fire_by, [&](wheel::TimerId id) { fire(id); });
  const std::uint64_t settled = mode == ShutdownMode::kRunPendingNow ? kRunning : kDropped;
  for (TaskRecord* record : records_.slots()) {
    if (record == nullptr) continue;
    if (!settle(record, settled)) continue;  // cancelled: its queued change forgets it
    queue.cancel(record->timer_id_);
    records_.remove(record);
    if (settled == kRunning) {
      due_.push_back(record);
    } else {
      release(record);
    }
  }
  workers_.hand_over(due_);
  sealed_.store(true, std::memory_order_seq_cst);
  drain(queue, std::numeric_limits<std::size_t>::max());
  DELAYQ_CHECK(records_.size() == 0);
}

}  // namespace delayq::detail
