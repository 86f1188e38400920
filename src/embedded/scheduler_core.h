// scheduler_core.h — what stands behind a delayq::Scheduler (include/delayq/scheduler.h): the
// inbox any thread feeds, the timer thread that owns the wheel, and the worker pool it hands due
// tasks to. Scheduler and TaskHandle (scheduler.cc) call submit(), queue_change() and shutdown();
// the rest is the timer thread's:
//
//   any thread                        timer thread (owns the wheel)          workers
//   schedule:  new record ───┐
//   cancel:    claim, queue ─┼─> inbox ──> reconcile: make the wheel ──> fire: CAS pending ──> run
//   reschedule:claim, queue ─┘  (lock-free  match each record's word      -> running, hand over
//                                MPSC list)  (schedule/reschedule/cancel)
//
// Time inside the scheduler is Micros since the scheduler started (the wheel's convention: a
// deadline is a duration from the caller's epoch), rounded up for due times and down for the
// present (never early). Shutdown puts a marker in the inbox: records queued before it were
// accepted, new records after it are dropped. Sources: this header (submitting, inline for the
// callers), scheduler_core.cc (waking, shutdown), timer_thread.cc (the timer thread). The story:
// docs/embedded.md, "How it works".
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <mutex>
#include <thread>
#include <vector>

#include "delayq/scheduler.h"
#include "embedded/inbox.h"
#include "embedded/record_table.h"
#include "embedded/task_record.h"
#include "embedded/worker_pool.h"
#include "wheel/timer.h"

namespace delayq::detail {

using Micros = std::chrono::microseconds;
static_assert(std::atomic<Micros>::is_always_lock_free);

inline constexpr Micros kNever = Micros::max();
inline constexpr Micros kAwake = Micros::min();  // sleeping_until_: the timer thread is not asleep
// The scheduler's horizon: a due time beyond it waits there (docs/embedded.md, "Never early").
inline constexpr Micros kFarthest = std::chrono::hours{24 * 365 * 100};

// Inbox entries that wake a sleeping timer thread even if none of them is due before it would
// wake anyway, so the inbox stays small and is drained in batches.
inline constexpr std::size_t kWakeBatch = 4096;

class SchedulerCore {
 public:
  // Throws std::invalid_argument for bad options, std::system_error when a thread cannot start.
  explicit SchedulerCore(SchedulerOptions options);
  ~SchedulerCore();
  SchedulerCore(const SchedulerCore&) = delete;
  SchedulerCore& operator=(const SchedulerCore&) = delete;

  // Hands a new record (references: the handle's, the scheduler's and kQueued) to the timer
  // thread; false, doing nothing, once shutdown has begun.
  bool submit(TaskRecord* record, Micros due);
  // Queues a change to a record the caller holds the claim on (the claim keeps the scheduler
  // alive), unless it is queued already, and wakes the timer thread if it sleeps past `due`.
  void queue_change(TaskRecord* record, Micros due);
  // `due` on the scheduler's time: rounded up, 0 for the past, at most kFarthest.
  [[nodiscard]] Micros since_start(SchedulerClock::time_point due) const noexcept;
  void shutdown(ShutdownMode mode);
  [[nodiscard]] std::size_t workers() const noexcept { return workers_.size(); }
  [[nodiscard]] SchedulerClock::time_point now() const noexcept {
    return clock_ != nullptr ? clock_->now() : SchedulerClock::now();
  }
  // Called by the ManualSchedulerClock the scheduler runs on, after it moved.
  void clock_moved() noexcept;

 private:
  // scheduler_core.cc
  static SchedulerOptions checked(SchedulerOptions options);
  void notify(Micros due);
  void wake_timer();

  // timer_thread.cc
  void timer_main() noexcept;
  template <typename Queue>
  void run_timer(Queue& queue) noexcept;
  [[nodiscard]] Micros now_since_start() const noexcept;
  void wait_for_work(Micros target);
  template <typename Queue>
  Micros drain(Queue& queue, std::size_t limit);
  template <typename Queue>
  Micros reconcile(Queue& queue, TaskRecord* record);
  template <typename Queue>
  Micros advance(Queue& queue, Micros target);
  void fire(wheel::TimerId id);
  template <typename Queue>
  void forget(Queue& queue, TaskRecord* record);
  template <typename Queue>
  void finish(Queue& queue);

  const SchedulerOptions options_;
  ManualSchedulerClock* const clock_;  // nullptr: SchedulerClock
  const SchedulerClock::time_point start_;

  // Any thread -> timer thread.
  Inbox inbox_;
  InboxNode closing_marker_;  // pushed once by shutdown()
  // Read by every caller, written rarely; a line of their own.
  alignas(64) std::atomic<Micros> sleeping_until_{kAwake};  // what the timer thread sleeps for
  std::atomic<bool> closing_{false};  // shutdown() has begun: refuse new records
  std::atomic<bool> sealed_{false};   // the timer thread has taken its last look at the inbox
  ShutdownMode mode_ = ShutdownMode::kDropPending;  // published by the marker's push

  // Waking the timer thread.
  alignas(64) std::mutex wake_mutex_;
  std::condition_variable wake_cv_;
  bool wake_ = false;

  // Timer thread only.
  RecordTable records_;
  std::vector<TaskRecord*> due_;  // fired, to be handed to the workers
  bool closing_seen_ = false;     // the marker came out of the inbox

  // Timer thread -> workers.
  WorkerPool workers_;

  std::mutex shutdown_mutex_;
  bool stopped_ = false;
  std::thread timer_;
};

// The callers' hot path, inline where Scheduler and TaskHandle call it (scheduler.cc): a task's
// schedule or cancel is a push and, rarely, a wake.
inline Micros SchedulerCore::since_start(SchedulerClock::time_point due) const noexcept {
  // Compared before subtracting: a time near time_point::min() or max() would overflow.
  if (due <= start_) return Micros{0};
  if (due - start_ >= kFarthest) return kFarthest;
  return std::chrono::ceil<Micros>(due - start_);
}

inline bool SchedulerCore::submit(TaskRecord* record, Micros due) {
  if (closing_.load(std::memory_order_acquire)) return false;
  inbox_.push(record);
  if (sealed_.load(std::memory_order_seq_cst)) {
    // Shutdown got past its last look at the inbox since the check above: nobody will take the
    // record out, so drop it here, unless that last look saw it and settled it already. The
    // destructor frees it.
    settle(record, kDropped);
    return true;
  }
  notify(due);
  return true;
}

inline void SchedulerCore::queue_change(TaskRecord* record, Micros due) {
  // Sequentially consistent, for notify()'s read. If the bit was set, the record is in the inbox
  // already (whoever set it pushed it before releasing its claim) and the timer thread rereads
  // the word after taking it out.
  if ((record->refs_.fetch_or(kQueued, std::memory_order_seq_cst) & kQueued) == 0) {
    inbox_.push(record);
  }
  // While a shutdown waits for pending tasks to run, a cancel may be what it waits for.
  notify(closing_.load(std::memory_order_relaxed) ? Micros{0} : due);
}

// Wakes the timer thread if it sleeps past `due`, and every kWakeBatch-th time a thread calls
// this while it sleeps, so the inbox is drained in batches rather than at the next due time.
inline void SchedulerCore::notify(Micros due) {
  thread_local std::size_t pushes = 0;
  const Micros sleeping = sleeping_until_.load(std::memory_order_seq_cst);
  if (sleeping == kAwake) return;  // it checks the inbox before it sleeps again
  if (due >= sleeping && ++pushes < kWakeBatch) return;
  pushes = 0;
  // One caller wakes it; the others see kAwake.
  Micros expected = sleeping;
  if (!sleeping_until_.compare_exchange_strong(expected, kAwake, std::memory_order_seq_cst)) return;
  wake_timer();
}

}  // namespace delayq::detail
