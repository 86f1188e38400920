// delayq/scheduler.h — delayq embedded in a C++ process: "run this function in 48 hours unless I
// cancel it", with no server. One timer thread owns a timer wheel and does nothing but advance it
// and hand due tasks to a pool of worker threads, so a slow task never delays the clock.
// schedule(), cancel() and reschedule() are callable from any thread and take no lock unless they
// must wake a sleeping timer thread; they cost a task record from a per-thread pool (schedule
// only), an append to the timer thread's lock-free inbox (one atomic exchange) and, for cancel and
// reschedule, one compare-and-swap on the task; the timer thread applies them in O(1) each
// (hierarchical and hashed wheels) or O(log n) (heap). Idle, the timer thread sleeps until the
// next due time: no polling. Never early: a task starts at or after its due time on the
// scheduler's clock, steady_clock unless SchedulerOptions::clock names a ManualSchedulerClock,
// which tests advance instead of sleeping. In memory only: a process exit loses every pending
// task (use the delayqd server for that). Guarantees, costs and examples: docs/embedded.md
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <new>
#include <optional>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

namespace delayq {

using SchedulerClock = std::chrono::steady_clock;

namespace detail {
class SchedulerCore;
}  // namespace detail

// A clock that moves only when told, for tests of code that schedules: SchedulerOptions::clock =
// &clock runs a Scheduler on it (due times, schedule(delay), reschedule(delay) and the timer
// thread all read it), and advance() moves it and wakes the timer thread of every Scheduler on
// it, which fires what has come due; the tasks then run on the workers (advance() does not wait
// for them). Never early holds against now(): a task starts only once now() has reached its due
// time. Thread-safe. It must outlive every Scheduler that runs on it (checked: its destructor
// aborts while one is left).
class ManualSchedulerClock {
 public:
  // Default: SchedulerClock's epoch.
  explicit ManualSchedulerClock(SchedulerClock::time_point start = {},
                                std::chrono::system_clock::time_point wall_start = {}) noexcept
      : now_ns_(start.time_since_epoch().count()),
        start_(start.time_since_epoch().count()),
        wall_start_(wall_start) {}
  ~ManualSchedulerClock();
  ManualSchedulerClock(const ManualSchedulerClock&) = delete;
  ManualSchedulerClock& operator=(const ManualSchedulerClock&) = delete;

  [[nodiscard]] SchedulerClock::time_point now() const noexcept {
    return SchedulerClock::time_point(SchedulerClock::duration(now_ns_.load()));
  }
  // The wall-clock time that goes with now(), for Scheduler::cron: `wall_start` (given to the
  // constructor; default the Unix epoch) plus how far now() has moved since.
  [[nodiscard]] std::chrono::system_clock::time_point wall_now() const noexcept {
    return wall_start_ + std::chrono::duration_cast<std::chrono::system_clock::duration>(
                             now() - SchedulerClock::time_point(SchedulerClock::duration(start_)));
  }
  // Moves now() forward by `by`; a step of zero or less changes nothing.
  void advance(SchedulerClock::duration by);
  // Moves now() forward to `to`; never back (a `to` before now() changes nothing).
  void advance_to(SchedulerClock::time_point to);

 private:
  friend class detail::SchedulerCore;
  void watch(detail::SchedulerCore* core);
  void unwatch(detail::SchedulerCore* core) noexcept;
  void wake_watchers();

  std::atomic<SchedulerClock::rep> now_ns_;
  const SchedulerClock::rep start_;
  const std::chrono::system_clock::time_point wall_start_;
  std::mutex mutex_;  // guards watchers_; held while they are woken, so unwatch() waits for that
  std::vector<detail::SchedulerCore*> watchers_;
};

// Where a task is. kPending and kRunning move on; the other four are final.
enum class TaskState : std::uint8_t {
  kPending,    // waiting for its due time; cancel() and reschedule() still apply
  kRunning,    // handed to a worker (queued for one or running); it will run
  kDone,       // ran and returned
  kFailed,     // ran and threw; the exception went to SchedulerOptions::on_task_exception
  kCancelled,  // cancel() won: it never ran and never will
  kDropped,    // never ran: still pending at a shutdown that dropped pending tasks, or scheduled
               // after shutdown began
};

[[nodiscard]] const char* task_state_name(TaskState state) noexcept;

// The timer queue the timer thread runs (src/wheel/; compared in docs/BENCHMARKS.md).
enum class WheelKind : std::uint8_t {
  kHierarchical,  // 8 levels of 256 slots: O(1) schedule, cancel and expiry; idle time skipped
  kHashed,        // the classic ring with round counts (Netty's HashedWheelTimer): O(1) schedule
                  // and cancel, but each tick walks every task of its slot
  kHeap,          // a binary heap, as in ScheduledThreadPoolExecutor: O(log n) everything
};

// What shutdown() does with tasks that are still pending. Running tasks always finish.
enum class ShutdownMode : std::uint8_t {
  kDropPending,        // pending tasks end kDropped without running
  kRunPendingNow,      // pending tasks run at once, in due-time order: the one exception to "never
                       // early", for a process that must not lose the work as it exits
  kRunPendingWhenDue,  // shutdown() blocks until every pending task has run at its due time (or
                       // was cancelled); cancel() and reschedule() keep working meanwhile
};

struct SchedulerOptions {
  // Worker threads that run due tasks. A task that blocks a worker delays only the tasks queued
  // behind it once every worker is busy; the clock is never delayed. 0 means
  // std::thread::hardware_concurrency(), or 2 where that is unknown. Default: 0.
  std::size_t workers = 0;
  // The timer queue. Default: kHierarchical.
  WheelKind wheel = WheelKind::kHierarchical;
  // Length of one tick: due times round up to a tick, so a coarser tick batches more tasks per
  // wake-up and fires up to one tick later. 0 picks the wheel's natural tick: 100 us for
  // kHierarchical and kHeap; 1 s for kHashed (the classic ring of 3600 one-second slots).
  // Default: 0.
  std::chrono::microseconds tick{0};
  // Slots of the kHashed ring, 1 to kMaxHashedSlots; ignored by the other wheels. Default: 3600.
  std::uint32_t hashed_slots = 3600;
  static constexpr std::uint32_t kMaxHashedSlots = 1U << 24;
  // Called on the worker thread with the exception a task threw; the task ends kFailed and the
  // worker carries on. An exception the handler throws is swallowed. Empty: the exception's
  // what() goes to stderr. Default: empty.
  std::function<void(std::exception_ptr)> on_task_exception;
  // What the destructor's shutdown does with pending tasks. Default: kDropPending.
  ShutdownMode shutdown = ShutdownMode::kDropPending;
  // The clock the scheduler runs on. nullptr: SchedulerClock itself, on which the timer thread
  // sleeps with a timed wait. A ManualSchedulerClock moves only when told, so the timer thread
  // sleeps until the clock wakes it; it must outlive the Scheduler. Default: nullptr.
  ManualSchedulerClock* clock = nullptr;
};

namespace detail {

// A link of the timer thread's inbox, an intrusive multi-producer single-consumer queue.
struct InboxNode {
  std::atomic<InboxNode*> next_{nullptr};
};

// One scheduled task: its state word, shared by the caller's handles, the timer thread and the
// worker that runs it, and the callable. Reference counted (handles, the scheduler's while the
// task is pending, the worker's while it runs), plus one bit that stands for the inbox while the
// record is queued there; freed by whoever drops the last. 64 bytes with a callable of up to 16.
class TaskRecord : public InboxNode {
 public:
  TaskRecord() = default;
  TaskRecord(const TaskRecord&) = delete;
  TaskRecord& operator=(const TaskRecord&) = delete;
  virtual ~TaskRecord() = default;
  // Runs the callable once; may throw.
  virtual void run() = 0;
  // Destroys the callable and what it captured. Called exactly once, by whoever moves the task
  // to its final state: the worker that ran it, the cancel() that won, or the shutdown that
  // dropped it. Nothing else destroys the callable.
  virtual void destroy_task() noexcept = 0;

  // Records of up to 64 or 128 bytes (a callable of up to 16 or 80) come from pools of fixed-size
  // slots with a cache per thread, not from malloc: a record is usually made on one thread and
  // freed on another, the case general-purpose allocators handle worst. Larger records use
  // ::operator new.
  static void* operator new(std::size_t size);
  static void operator delete(void* record, std::size_t size) noexcept;
  static void* operator new(std::size_t size, std::align_val_t align);
  static void operator delete(void* record, std::size_t size, std::align_val_t align) noexcept;

  // refs_ bit: the record is in the inbox.
  static constexpr std::uint32_t kQueued = 1U << 31;

  // version << 8 | state. reschedule() bumps the version, so a compare-and-swap can tell the
  // word it read from one a caller has changed since.
  std::atomic<std::uint64_t> word_{0};
  // Due time, nanoseconds of SchedulerClock; written only while the writer holds the claim.
  std::atomic<SchedulerClock::rep> due_ns_{0};
  SchedulerCore* core_ = nullptr;
  std::atomic<std::uint32_t> refs_{0};
  // Timer thread only: the id of the record's wheel timer, or one of the two values the
  // scheduler keeps for a record not yet in the wheel and one no longer there.
  std::uint32_t timer_id_ = 0;
};

template <typename F>
class TaskRecordOf final : public TaskRecord {
 public:
  template <typename G>
  explicit TaskRecordOf(G&& task) : task_(std::forward<G>(task)) {}
  // The callable is gone already: destroy_task() ran.
  ~TaskRecordOf() override {}
  void run() override { task_(); }
  void destroy_task() noexcept override { task_.~F(); }

 private:
  // In a union so that its life is the task's, not the record's.
  union {
    F task_;
  };
};

class Recurring;  // recurring.cc

// A task for every run of a recurring one: `task` is called again and again, so it is kept once,
// shared by the runs (a move-only callable works too).
template <typename F>
[[nodiscard]] std::function<void()> repeatable(F&& task) {
  auto kept = std::make_shared<std::decay_t<F>>(std::forward<F>(task));
  return [kept] { (*kept)(); };
}

// A delay as it is added to the present: rounded up to the clock's resolution; below zero counts
// as zero, beyond 100 years as 100 years (a due time that far out waits at the scheduler's
// horizon, 100 years after its start, which steady_clock does not reach while a process runs).
template <typename Rep, typename Period>
[[nodiscard]] SchedulerClock::duration clamp_delay(std::chrono::duration<Rep, Period> delay) {
  constexpr std::chrono::hours kFarthest{24 * 365 * 100};
  if (!(delay > delay.zero())) return SchedulerClock::duration::zero();  // NaN too
  if (std::chrono::duration<double>(delay) >= std::chrono::duration<double>(kFarthest)) {
    return kFarthest;
  }
  return std::chrono::ceil<SchedulerClock::duration>(delay);
}

// at + delay (delay >= 0), the clock's last instant where that would pass it.
[[nodiscard]] inline SchedulerClock::time_point later(SchedulerClock::time_point at,
                                                      SchedulerClock::duration delay) noexcept {
  return delay > SchedulerClock::time_point::max() - at ? SchedulerClock::time_point::max()
                                                        : at + delay;
}

}  // namespace detail

// A caller's view of one scheduled task. Cheap to copy (a reference count); any thread may use
// it; it may outlive its Scheduler (every task is final once the Scheduler is destroyed, so
// cancel() and reschedule() then return false). A default-constructed handle refers to nothing:
// cancel() and reschedule() return false, state() says kDropped.
class TaskHandle {
 public:
  TaskHandle() noexcept = default;
  TaskHandle(const TaskHandle& other) noexcept;
  TaskHandle(TaskHandle&& other) noexcept : record_(std::exchange(other.record_, nullptr)) {}
  TaskHandle& operator=(TaskHandle other) noexcept {
    std::swap(record_, other.record_);
    return *this;
  }
  ~TaskHandle();

  // True if the task was pending and now never runs (state kCancelled); false if it had already
  // been handed to a worker, had finished, or was cancelled or dropped before. Racing with the
  // timer, exactly one side wins: cancel() returns true and the task never runs, or it returns
  // false and the task runs (or ran).
  bool cancel() noexcept;
  // Moves a pending task's due time (earlier or later); false, changing nothing, if it is no
  // longer pending. Once this returns true the task does not run before the new due time.
  bool reschedule_at(SchedulerClock::time_point due) noexcept;
  // The same, to `delay` from now on the task's scheduler's clock.
  template <typename Rep, typename Period>
  bool reschedule(std::chrono::duration<Rep, Period> delay) noexcept {
    return reschedule_after(detail::clamp_delay(delay));
  }

  [[nodiscard]] TaskState state() const noexcept;
  // The current due time.
  [[nodiscard]] SchedulerClock::time_point due() const noexcept;
  // Blocks until the task's state is final, and returns it. Must not be called from the task
  // itself, nor while a shutdown in kRunPendingWhenDue waits on this task.
  TaskState wait() const noexcept;
  [[nodiscard]] bool valid() const noexcept { return record_ != nullptr; }

 private:
  friend class Scheduler;
  explicit TaskHandle(detail::TaskRecord* adopted) noexcept : record_(adopted) {}
  bool reschedule_after(SchedulerClock::duration delay) noexcept;
  detail::TaskRecord* record_ = nullptr;
};

// A caller's view of a recurring task (Scheduler::every, Scheduler::cron). Cheap to copy; any
// thread may use it; it may outlive its Scheduler. A default-constructed handle refers to nothing.
class RecurringHandle {
 public:
  RecurringHandle() noexcept = default;

  // Stops the task: no run starts after this returns (a run under way finishes). True if it was
  // still recurring; false if it had been cancelled, had no run left (a cron expression with no
  // later date), or its scheduler had shut down.
  bool cancel() noexcept;
  // Whether a next run is scheduled.
  [[nodiscard]] bool active() const noexcept;
  // The next run's due time on the scheduler's clock; nullopt when not active.
  [[nodiscard]] std::optional<SchedulerClock::time_point> next() const noexcept;
  // Runs started so far, and the instants passed over because the run before them was still
  // under way when they came (runs never overlap).
  [[nodiscard]] std::uint64_t runs() const noexcept;
  [[nodiscard]] std::uint64_t skipped() const noexcept;
  [[nodiscard]] bool valid() const noexcept { return state_ != nullptr; }

 private:
  friend class Scheduler;
  explicit RecurringHandle(std::shared_ptr<detail::Recurring> state) noexcept
      : state_(std::move(state)) {}
  std::shared_ptr<detail::Recurring> state_;
};

// The scheduler: a timer thread and SchedulerOptions::workers workers, started by the
// constructor and stopped by shutdown() or the destructor. Thread-safe: every member may be
// called from any thread, tasks included (except shutdown(), which must not run on a worker).
class Scheduler {
 public:
  // Throws std::invalid_argument for a negative tick or a kHashed ring of 0 slots or more than
  // SchedulerOptions::kMaxHashedSlots, and
  // std::system_error or std::bad_alloc when the threads cannot be started (none is left
  // running then).
  explicit Scheduler(SchedulerOptions options = {});
  // shutdown(options.shutdown), unless shutdown() already ran.
  ~Scheduler();
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  // Runs `task()` (a callable taking no arguments; its result is ignored; it may be move-only)
  // on a worker at or after `due`. A due time in the past runs as soon as possible. After
  // shutdown() has begun, the task is not accepted: the handle says kDropped.
  template <typename F>
  TaskHandle schedule_at(F&& task, SchedulerClock::time_point due) {
    static_assert(std::is_invocable_v<std::decay_t<F>&>, "a task is callable with no arguments");
    return submit(new detail::TaskRecordOf<std::decay_t<F>>(std::forward<F>(task)), due);
  }
  // Runs `task()` `delay` from now() (delays below zero count as zero).
  template <typename F, typename Rep, typename Period>
  TaskHandle schedule(F&& task, std::chrono::duration<Rep, Period> delay) {
    return schedule_at(std::forward<F>(task), detail::later(now(), detail::clamp_delay(delay)));
  }

  // Recurring tasks. Each run is a task as schedule() makes one, scheduled when the run before it
  // ends, so runs never overlap: an instant that passes while a run is under way is skipped
  // (RecurringHandle::skipped()) and the next run is at the first instant after the present. A
  // run that throws goes to on_task_exception, as any task's exception, and the task recurs.
  // At a shutdown, the next run is a pending task like any other (ShutdownMode says whether it
  // runs); none comes after it.
  //
  // every: `task()` every `period` (more than zero, else std::invalid_argument; one over 100
  // years is taken as 100 years), the first time `period` from now(): at now() + k * period,
  // on the scheduler's clock.
  template <typename F, typename Rep, typename Period>
  RecurringHandle every(F&& task, std::chrono::duration<Rep, Period> period) {
    static_assert(std::is_invocable_v<std::decay_t<F>&>, "a task is callable with no arguments");
    return start_every(detail::repeatable(std::forward<F>(task)), detail::clamp_delay(period));
  }
  // cron: `task()` at each instant of a cron expression read in an IANA time zone, with the
  // rules of delayqd's schedules (docs/schedules.md: five fields or six with seconds first,
  // names, steps, @daily and the like; a local time skipped by a clock change runs at the first
  // instant after it, one repeated runs once). The wait for each run is measured on the
  // scheduler's clock from the wall clock at the moment it is scheduled (wall_now()): a step of
  // the wall clock afterwards does not move it. Throws std::invalid_argument, with the reason,
  // for an expression or a zone that is not valid.
  template <typename F>
  RecurringHandle cron(F&& task, std::string_view expression, std::string_view zone = "UTC") {
    static_assert(std::is_invocable_v<std::decay_t<F>&>, "a task is callable with no arguments");
    return start_cron(detail::repeatable(std::forward<F>(task)), expression, zone);
  }
  // The wall-clock time that goes with now(): std::chrono::system_clock::now(), or a
  // ManualSchedulerClock's wall_now().
  [[nodiscard]] std::chrono::system_clock::time_point wall_now() const noexcept {
    return clock_ != nullptr ? clock_->wall_now() : std::chrono::system_clock::now();
  }

  // Stops the scheduler: no new task is accepted, pending tasks are handled as `mode` says,
  // running and already-due tasks finish, then the threads are joined. Blocks until then.
  // Later calls (and the destructor) return at once. Must not be called from a task.
  void shutdown(ShutdownMode mode);
  void shutdown() { shutdown(default_shutdown_); }

  [[nodiscard]] std::size_t workers() const noexcept;
  // The present on the scheduler's clock (SchedulerOptions::clock), which due times are on.
  [[nodiscard]] SchedulerClock::time_point now() const noexcept {
    return clock_ != nullptr ? clock_->now() : SchedulerClock::now();
  }

 private:
  TaskHandle submit(detail::TaskRecord* record, SchedulerClock::time_point due);
  RecurringHandle start_every(std::function<void()> task, SchedulerClock::duration period);
  RecurringHandle start_cron(std::function<void()> task, std::string_view expression,
                             std::string_view zone);

  ShutdownMode default_shutdown_;
  const ManualSchedulerClock* clock_;
  std::unique_ptr<detail::SchedulerCore> core_;
};

}  // namespace delayq
