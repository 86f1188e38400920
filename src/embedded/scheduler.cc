// scheduler.cc — the timer thread, the inbox that feeds it, and the worker pool behind
// delayq::Scheduler (include/delayq/scheduler.h). How the pieces fit:
//
//   any thread                        timer thread (owns the wheel)          workers
//   schedule:  new record ───┐
//   cancel:    claim, queue ─┼─> inbox ──> reconcile: make the wheel ──> fire: CAS pending ──> run
//   reschedule:claim, queue ─┘  (lock-free  match each record's word      -> running, hand over
//                                MPSC list)  (schedule/reschedule/cancel)
//
// A task's state word (version << 8 | state) is the single source of truth. Every change from
// pending is a compare-and-swap: the timer's pending -> running, or a caller's pending -> claimed,
// which then writes the new due time, queues the record and releases the claim as
// (version + 1, pending) or cancelled. So cancel and fire cannot both win.
// The inbox holds records, not commands: a record is in it at most once (the kQueued bit of its
// reference count says so), and the timer thread, having taken it out and cleared the bit, rereads
// the word and makes the wheel match it. The timer never fires a record whose bit is set: its
// wheel entry may be for an older due time, and the reconcile that is on its way rearms it. So
// once reschedule() has returned, the old due time can no longer fire.
// Shutdown puts a marker in the inbox: records queued before it were accepted, new records after
// it are dropped.
#include "delayq/scheduler.h"

#include <algorithm>
#include <condition_variable>
#include <cstddef>
#include <cstdio>
#include <deque>
#include <limits>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <vector>
#ifdef __linux__
#include <pthread.h>
#include <sys/prctl.h>
#endif

#include "base/check.h"
#include "wheel/hashed_wheel.h"
#include "wheel/heap_timer.h"
#include "wheel/hierarchical_wheel.h"

namespace delayq {
namespace detail {
namespace {

using wheel::Millis;
using wheel::TimerId;

// Time inside the scheduler: microseconds since the scheduler started, rounded up for due times
// and down for the present (never early). The wheels count time in units they call Millis; the
// scheduler hands them microseconds, so a 1 ms tick would be Millis{1000}.
using Units = std::int64_t;
constexpr Units kNever = std::numeric_limits<Units>::max();
constexpr Units kAwake = std::numeric_limits<Units>::min();  // the timer thread is not sleeping
constexpr Units kFarthest = Units{100} * 365 * 24 * 3600 * 1'000'000;

// Inbox entries that wake a sleeping timer thread even if none of them is due before it would
// wake anyway, so the inbox stays small and is drained in batches.
constexpr std::size_t kWakeBatch = 4096;

// The state word. kClaimed is internal: a caller is changing the task; others wait for it.
// kCancelling and kDropping are internal too: the outcome is decided and the callable is being
// destroyed (its captures' destructors may call into this task's handle, which finds it no
// longer pending, or take long; nobody waits for them but wait()).
constexpr std::uint64_t kPending = static_cast<std::uint64_t>(TaskState::kPending);
constexpr std::uint64_t kRunning = static_cast<std::uint64_t>(TaskState::kRunning);
constexpr std::uint64_t kDone = static_cast<std::uint64_t>(TaskState::kDone);
constexpr std::uint64_t kFailed = static_cast<std::uint64_t>(TaskState::kFailed);
constexpr std::uint64_t kCancelled = static_cast<std::uint64_t>(TaskState::kCancelled);
constexpr std::uint64_t kDropped = static_cast<std::uint64_t>(TaskState::kDropped);
constexpr std::uint64_t kClaimed = 0xff;
constexpr std::uint64_t kCancelling = 0xfe;
constexpr std::uint64_t kDropping = 0xfd;

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

// TaskRecord::timer_id_ of a record that is not in the wheel: not yet (it is in the inbox, new),
// or no more (handed to a worker, cancelled or dropped; the scheduler's reference is gone).
constexpr TimerId kNewRecord = std::numeric_limits<TimerId>::max();
constexpr TimerId kGoneRecord = kNewRecord - 1;
constexpr std::uint32_t kQueued = TaskRecord::kQueued;

void release(TaskRecord* record) noexcept {
  if (record->refs_.fetch_sub(1, std::memory_order_acq_rel) == 1) delete record;
}

// Clears the kQueued bit of a record the timer thread took out of the inbox (the last reference
// when nothing else holds the record).
void unqueue(TaskRecord* record) noexcept {
  if (record->refs_.fetch_and(~kQueued, std::memory_order_acq_rel) == kQueued) delete record;
}

// Takes the claim on a pending task; false if it is not pending. `word` is the word claimed.
bool claim(TaskRecord* record, std::uint64_t& word) noexcept {
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
std::uint64_t settled_word(const TaskRecord* record) noexcept {
  for (;;) {
    const std::uint64_t word = record->word_.load(std::memory_order_acquire);
    if (state_of(word) != kClaimed) return word;
    std::this_thread::yield();
  }
}

void finish_task(TaskRecord* record, std::uint64_t version, std::uint64_t state) noexcept {
  record->word_.store(make_word(version, state), std::memory_order_release);
  record->word_.notify_all();
}

// Ends a claimed task as cancelled or dropped: the outcome is published first (the claim ends,
// so a capture's destructor that cancels this task's handle gets false rather than waiting on
// itself, and the timer thread does not spin on a slow destructor), then the callable is
// destroyed, then the final state says so (wait() returns only then).
void end_claimed(TaskRecord* record, std::uint64_t word, std::uint64_t outcome) noexcept {
  record->word_.store(make_word(version_of(word), outcome == kCancelled ? kCancelling : kDropping),
                      std::memory_order_release);
  record->destroy_task();
  finish_task(record, version_of(word), outcome);
}

// Moves a pending task to `state` (kDropped, or kRunning for a shutdown that runs it now), waiting
// out a claim; false if it was not pending (a caller cancelled it first). A dropped task's
// callable is destroyed before the state is published, so whoever sees the final state (wait())
// sees the captures gone.
bool settle(TaskRecord* record, std::uint64_t state) noexcept {
  std::uint64_t word;
  if (!claim(record, word)) return false;
  if (state == kDropped) {
    end_claimed(record, word, kDropped);
  } else {
    finish_task(record, version_of(word), state);
  }
  return true;
}

std::size_t default_workers() noexcept {
  const unsigned n = std::thread::hardware_concurrency();
  return n == 0 ? 2 : n;
}

// ---- the inbox ---------------------------------------------------------------------------------
// Dmitry Vyukov's intrusive MPSC queue: push() is one atomic exchange and one store from any
// thread, never waiting; pop() is the timer thread's alone. A push is caught between its two
// steps for a few instructions (the list is briefly unlinked there); pop() yields until it is
// done, so a producer preempted right there delays the timer thread until it runs again.
class Inbox {
 public:
  Inbox() = default;
  Inbox(const Inbox&) = delete;
  Inbox& operator=(const Inbox&) = delete;

  // The exchange is sequentially consistent: a caller that pushes and then reads the timer
  // thread's sleeping_until_, and a timer thread that writes it and then checks empty(), cannot
  // both miss each other.
  void push(InboxNode* node) noexcept {
    node->next_.store(nullptr, std::memory_order_relaxed);
    InboxNode* prev = tail_.exchange(node, std::memory_order_seq_cst);
    prev->next_.store(node, std::memory_order_release);
  }

  // Timer thread. The oldest node, or nullptr if there is none.
  InboxNode* pop() noexcept {
    for (;;) {
      InboxNode* head = head_;
      InboxNode* next = head->next_.load(std::memory_order_acquire);
      if (head == &stub_) {
        if (next == nullptr) {
          if (tail_.load(std::memory_order_seq_cst) == &stub_) return nullptr;
          std::this_thread::yield();  // a push between its exchange and its link
          continue;
        }
        head_ = next;
        head = next;
        next = next->next_.load(std::memory_order_acquire);
      }
      if (next == nullptr) {
        // `head` is the last node: put the stub behind it so that it can be taken out.
        if (tail_.load(std::memory_order_acquire) != head) {
          std::this_thread::yield();  // a push is linking a node behind `head`
          continue;
        }
        push(&stub_);
        next = head->next_.load(std::memory_order_acquire);
        if (next == nullptr) {
          std::this_thread::yield();  // a push got in before the stub and is linking
          continue;
        }
      }
      head_ = next;
      return head;
    }
  }

  // Timer thread. Sequentially consistent, for the sleeping handshake above.
  [[nodiscard]] bool empty() const noexcept {
    return head_ == &stub_ && tail_.load(std::memory_order_seq_cst) == &stub_;
  }

 private:
  // Three lines: producers write the stub's link (when the list is empty) and exchange the tail;
  // the head is the timer thread's alone.
  alignas(64) InboxNode stub_;
  alignas(64) InboxNode* head_ = &stub_;
  alignas(64) std::atomic<InboxNode*> tail_{&stub_};
};

// ---- the record pool --------------------------------------------------------------------------
// Slots of 64 and 128 bytes in slabs of 64 KiB, never returned to the system (the pool keeps its
// peak). Each thread keeps up to 2 * kBatch free slots and trades whole batches of kBatch with
// the process-wide list under a mutex, so allocating and freeing a record is a vector push or pop
// on the calling thread almost always. Built without it under AddressSanitizer, so ASan sees
// every record's lifetime.
#if defined(__SANITIZE_ADDRESS__)
constexpr bool kPooled = false;
#else
constexpr bool kPooled = true;
#endif
constexpr std::size_t kSlabBytes = 64 * 1024;
constexpr std::size_t kBatch = 256;

template <std::size_t kSlotBytes>
class GlobalPool {
 public:
  // Never destroyed: threads hand their slots back when they exit, even after main() returns.
  static GlobalPool& instance() {
    static GlobalPool* const pool = new GlobalPool;
    return *pool;
  }
  // Refills an empty thread cache with one batch.
  void take(std::vector<void*>& cache) {
    std::lock_guard lock(mutex_);
    if (batches_.empty()) {
      auto* slab =
          static_cast<std::byte*>(::operator new (kSlabBytes, std::align_val_t{kSlotBytes}));
      for (std::size_t first = 0; first < kSlabBytes / kSlotBytes; first += kBatch) {
        std::vector<void*>& slots = batches_.emplace_back();
        slots.reserve(kBatch);
        for (std::size_t i = first; i < first + kBatch; ++i) slots.push_back(slab + i * kSlotBytes);
      }
    }
    cache.insert(cache.end(), batches_.back().begin(), batches_.back().end());
    batches_.pop_back();
  }
  // One slot freed by a thread whose cache is gone.
  void give_one(void* slot) {
    std::vector<void*> slots{slot};
    std::lock_guard lock(mutex_);
    batches_.push_back(std::move(slots));
  }
  // Moves the last `n` slots of a thread cache to the shared list.
  void give(std::vector<void*>& cache, std::size_t n) {
    std::vector<void*> slots(cache.end() - static_cast<std::ptrdiff_t>(n), cache.end());
    cache.resize(cache.size() - n);
    std::lock_guard lock(mutex_);
    batches_.push_back(std::move(slots));
  }

 private:
  std::mutex mutex_;
  std::vector<std::vector<void*>> batches_;
};

// Set once a thread's caches are destroyed (a trivial thread_local, readable until the thread
// ends): a record freed after that, by a handle in a static or thread_local object destroyed
// later, goes straight back to the shared pool rather than into a destroyed cache.
thread_local bool caches_gone = false;

template <std::size_t kSlotBytes>
class ThreadCache {
 public:
  ThreadCache() { slots_.reserve(2 * kBatch); }
  ~ThreadCache() {
    caches_gone = true;
    if (!slots_.empty()) GlobalPool<kSlotBytes>::instance().give(slots_, slots_.size());
  }
  ThreadCache(const ThreadCache&) = delete;
  ThreadCache& operator=(const ThreadCache&) = delete;

  void* allocate() {
    if (slots_.empty()) GlobalPool<kSlotBytes>::instance().take(slots_);
    void* slot = slots_.back();
    slots_.pop_back();
    return slot;
  }
  void free(void* slot) noexcept {
    if (slots_.size() == 2 * kBatch) GlobalPool<kSlotBytes>::instance().give(slots_, kBatch);
    slots_.push_back(slot);  // within the capacity reserved: never allocates
  }

 private:
  std::vector<void*> slots_;
};

thread_local ThreadCache<64> small_records;
thread_local ThreadCache<128> large_records;

}  // namespace

void* TaskRecord::operator new(std::size_t size) {
  if (kPooled && size <= 64) return small_records.allocate();
  if (kPooled && size <= 128) return large_records.allocate();
  return ::operator new(size);
}

void TaskRecord::operator delete(void* record, std::size_t size) noexcept {
  if (!kPooled || size > 128) {
    ::operator delete(record, size);
  } else if (caches_gone) {  // the shared pool takes it: this thread's caches are destroyed
    if (size <= 64) {
      GlobalPool<64>::instance().give_one(record);
    } else {
      GlobalPool<128>::instance().give_one(record);
    }
  } else if (size <= 64) {
    small_records.free(record);
  } else {
    large_records.free(record);
  }
}

void* TaskRecord::operator new(std::size_t size, std::align_val_t align) {
  return ::operator new(size, align);
}

void TaskRecord::operator delete(void* record, std::size_t size, std::align_val_t align) noexcept {
  ::operator delete(record, size, align);
}

class SchedulerCore {
 public:
  explicit SchedulerCore(SchedulerOptions options);
  ~SchedulerCore();
  SchedulerCore(const SchedulerCore&) = delete;
  SchedulerCore& operator=(const SchedulerCore&) = delete;

  // Hands a new record (references: the handle's, the scheduler's and kQueued) to the timer
  // thread; false, doing nothing, once shutdown has begun.
  bool submit(TaskRecord* record, Units due);
  // Queues a change to a record the caller holds the claim on (the claim keeps the scheduler
  // alive), unless it is queued already, and wakes the timer thread if it sleeps past `due`.
  void queue_change(TaskRecord* record, Units due);
  [[nodiscard]] Units to_units(SchedulerClock::time_point due) const noexcept;
  void shutdown(ShutdownMode mode);
  [[nodiscard]] std::size_t workers() const noexcept { return workers_.size(); }
  [[nodiscard]] SchedulerClock::time_point now() const noexcept {
    return clock_ != nullptr ? clock_->now() : SchedulerClock::now();
  }
  // Called by the ManualSchedulerClock the scheduler runs on, after it moved.
  void clock_moved() noexcept;

 private:
  [[nodiscard]] Units now_units() const noexcept;
  void notify(Units due);
  void timer_main() noexcept;
  template <typename Queue>
  void run_timer(Queue& queue) noexcept;
  void wait_for_work(Units target);
  template <typename Queue>
  Units drain(Queue& queue, std::size_t limit);
  template <typename Queue>
  Units reconcile(Queue& queue, TaskRecord* record);
  template <typename Queue>
  Units advance(Queue& queue, Units target);
  void fire(TimerId id);
  template <typename Queue>
  void finish(Queue& queue);
  template <typename Queue>
  void forget(Queue& queue, TaskRecord* record);
  TimerId take_id(TaskRecord* record);
  void put_id(TaskRecord* record);
  void dispatch();
  void worker_main() noexcept;
  void run_task(TaskRecord* record) noexcept;
  void report(std::exception_ptr error) noexcept;

  const SchedulerOptions options_;
  ManualSchedulerClock* const clock_;  // nullptr: SchedulerClock
  const SchedulerClock::time_point start_;

  // Any thread -> timer thread.
  Inbox inbox_;
  InboxNode closing_marker_;  // pushed once by shutdown()
  // Read by every caller, written rarely; a line of their own.
  alignas(64) std::atomic<Units> sleeping_until_{kAwake};  // what the timer thread sleeps for
  std::atomic<bool> closing_{false};  // shutdown() has begun: refuse new records
  std::atomic<bool> sealed_{false};   // the timer thread has taken its last look at the inbox
  ShutdownMode mode_ = ShutdownMode::kDropPending;  // published by the marker's push

  // Waking the timer thread.
  alignas(64) std::mutex wake_mutex_;
  std::condition_variable wake_cv_;
  bool wake_ = false;

  // Timer thread only: the wheel's Timers, and the record of each timer id.
  wheel::TimerTable timers_;
  std::vector<TaskRecord*> by_id_;
  std::vector<TimerId> free_ids_;
  std::size_t table_size_ = 0;
  std::vector<TaskRecord*> due_;  // fired, to be handed to the workers
  bool closing_seen_ = false;     // the marker came out of the inbox

  // Timer thread -> workers.
  std::mutex work_mutex_;
  std::condition_variable work_cv_;
  std::deque<TaskRecord*> work_;
  bool workers_stop_ = false;

  std::mutex shutdown_mutex_;
  bool stopped_ = false;
  std::vector<std::thread> workers_;
  std::thread timer_;
};

SchedulerCore::SchedulerCore(SchedulerOptions options)
    : options_(std::move(options)), clock_(options_.clock), start_(now()) {
  if (options_.tick.count() < 0) throw std::invalid_argument("SchedulerOptions::tick < 0");
  if (options_.wheel == WheelKind::kHashed && options_.hashed_slots == 0) {
    throw std::invalid_argument("SchedulerOptions::hashed_slots is 0");
  }
  if (clock_ != nullptr) clock_->watch(this);
  // Threads the system will not start (too many workers, no memory) make the constructor
  // throw, with those already started stopped and nothing left behind.
  try {
    const std::size_t workers = options_.workers == 0 ? default_workers() : options_.workers;
    workers_.reserve(workers);
    for (std::size_t i = 0; i < workers; ++i) workers_.emplace_back([this] { worker_main(); });
    timer_ = std::thread([this] { timer_main(); });
  } catch (...) {
    {
      std::lock_guard lock(work_mutex_);
      workers_stop_ = true;
    }
    work_cv_.notify_all();
    for (auto& worker : workers_) worker.join();
    if (clock_ != nullptr) clock_->unwatch(this);
    throw;
  }
}

// What is left in the inbox are records scheduled while shutdown sealed it; their producers
// dropped them (submit()).
SchedulerCore::~SchedulerCore() {
  DELAYQ_CHECK(stopped_);
  if (clock_ != nullptr) clock_->unwatch(this);
  while (InboxNode* node = inbox_.pop()) {
    if (node == &closing_marker_) continue;
    auto* record = static_cast<TaskRecord*>(node);
    const bool held = record->timer_id_ != kGoneRecord;
    record->timer_id_ = kGoneRecord;
    unqueue(record);
    if (held) release(record);
  }
}

Units SchedulerCore::to_units(SchedulerClock::time_point due) const noexcept {
  // Compared before subtracting: a time near time_point::min() or max() would overflow.
  if (due <= start_) return 0;
  if (due - start_ >= std::chrono::microseconds(kFarthest)) return kFarthest;
  return std::chrono::ceil<std::chrono::microseconds>(due - start_).count();
}

Units SchedulerCore::now_units() const noexcept {
  return std::chrono::floor<std::chrono::microseconds>(now() - start_).count();
}

// The timer thread reads the clock holding wake_mutex_ before it waits, so taking the mutex here
// orders this notify after that read: either the read saw the move or the thread is waiting.
void SchedulerCore::clock_moved() noexcept {
  { std::lock_guard lock(wake_mutex_); }
  wake_cv_.notify_one();
}

bool SchedulerCore::submit(TaskRecord* record, Units due) {
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

void SchedulerCore::queue_change(TaskRecord* record, Units due) {
  // Sequentially consistent, for notify()'s read. If the bit was set, the record is in the inbox
  // already (whoever set it pushed it before releasing its claim) and the timer thread rereads
  // the word after taking it out.
  if ((record->refs_.fetch_or(kQueued, std::memory_order_seq_cst) & kQueued) == 0) {
    inbox_.push(record);
  }
  // While a shutdown waits for pending tasks to run, a cancel may be what it waits for.
  notify(closing_.load(std::memory_order_relaxed) ? 0 : due);
}

// Wakes the timer thread if it sleeps past `due`, and every kWakeBatch-th time a thread calls
// this while it sleeps, so the inbox is drained in batches rather than at the next due time.
void SchedulerCore::notify(Units due) {
  thread_local std::size_t pushes = 0;
  const Units sleeping = sleeping_until_.load(std::memory_order_seq_cst);
  if (sleeping == kAwake) return;  // it checks the inbox before it sleeps again
  if (due >= sleeping && ++pushes < kWakeBatch) return;
  pushes = 0;
  // One caller wakes it; the others see kAwake.
  Units expected = sleeping;
  if (!sleeping_until_.compare_exchange_strong(expected, kAwake, std::memory_order_seq_cst)) return;
  {
    std::lock_guard lock(wake_mutex_);
    wake_ = true;
  }
  wake_cv_.notify_one();
}

void SchedulerCore::timer_main() noexcept {
#ifdef __linux__
  // Named for top -H and /proc/<pid>/task/*/comm; woken exactly when asked (the default 50 us
  // of timer slack would be lateness on every task).
  pthread_setname_np(pthread_self(), "delayq-timer");
  prctl(PR_SET_TIMERSLACK, 1UL, 0UL, 0UL, 0UL);
#endif
  const auto tick = [&](Units natural) {
    return Millis{options_.tick.count() > 0 ? options_.tick.count() : natural};
  };
  switch (options_.wheel) {
    case WheelKind::kHierarchical: {
      wheel::HierarchicalWheel queue(timers_, {.tick = tick(100), .start = Millis{0}});
      run_timer(queue);
      return;
    }
    case WheelKind::kHashed: {
      wheel::HashedWheel queue(
          timers_, {.slots = options_.hashed_slots, .tick = tick(1'000'000), .start = Millis{0}});
      run_timer(queue);
      return;
    }
    case WheelKind::kHeap: {
      wheel::HeapTimer queue(timers_, {.tick = tick(100), .start = Millis{0}});
      run_timer(queue);
      return;
    }
  }
  DELAYQ_CHECK(false && "unknown WheelKind");
}

// The timer thread: sleep until the earliest due time or a wake-up, apply the inbox (a bounded
// batch at a time, so a flood of schedules cannot hold up firing), fire what is due. `target` is
// a time no later than the earliest due task (kNever if none); cancels may leave it early, which
// costs one wake-up that fires nothing.
template <typename Queue>
void SchedulerCore::run_timer(Queue& queue) noexcept {
  Units target = kNever;
  for (;;) {
    wait_for_work(target);
    target = std::min(target, drain(queue, kWakeBatch));
    if (closing_seen_ && mode_ != ShutdownMode::kRunPendingWhenDue) break;
    target = advance(queue, target);
    if (closing_seen_ && table_size_ == 0) break;
  }
  finish(queue);
}

// Sleeps until `target`, a wake-up, or a push; returns at once if the inbox has something. On
// SchedulerClock a timed wait; a ManualSchedulerClock has no real time to wait for, so the thread
// waits until the clock says it moved (clock_moved()) and then reads it again.
void SchedulerCore::wait_for_work(Units target) {
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
      const auto when = start_ + std::chrono::microseconds(std::min(target, kFarthest));
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
Units SchedulerCore::drain(Queue& queue, std::size_t limit) {
  Units earliest = kNever;
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
Units SchedulerCore::reconcile(Queue& queue, TaskRecord* record) {
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
  const Units due = to_units(SchedulerClock::time_point(
      SchedulerClock::duration(record->due_ns_.load(std::memory_order_relaxed))));
  if (record->timer_id_ == kNewRecord) {
    queue.schedule(take_id(record), Millis{due});
  } else {
    queue.reschedule(record->timer_id_, Millis{due});
  }
  return due;
}

template <typename Queue>
Units SchedulerCore::advance(Queue& queue, Units target) {
  const Units now = now_units();
  if (target > now) return target;
  queue.advance_to(Millis{now}, [&](TimerId id) { fire(id); });
  dispatch();
  const std::optional<Millis> next = queue.next_deadline();
  if (!next) return kNever;
  // Everything due by now has fired, so the next deadline lies ahead; never spin on it.
  return std::max(next->count(), now + 1);
}

// Called by advance_to() for a timer that is due. A claimed or queued record has a change on its
// way (its wheel entry may be for an older due time): the reconcile that follows rearms it. The
// version in the compare-and-swap catches a change made between these reads and the swap.
void SchedulerCore::fire(TimerId id) {
  TaskRecord* record = by_id_[id];
  std::uint64_t word = record->word_.load(std::memory_order_acquire);
  if (state_of(word) != kPending ||
      (record->refs_.load(std::memory_order_acquire) & kQueued) != 0 ||
      !record->word_.compare_exchange_strong(word, make_word(version_of(word), kRunning),
                                             std::memory_order_acq_rel)) {
    return;
  }
  put_id(record);
  due_.push_back(record);  // the scheduler's reference goes with it to the worker
}

// A cancelled or dropped record leaves the wheel and the scheduler lets go of it.
template <typename Queue>
void SchedulerCore::forget(Queue& queue, TaskRecord* record) {
  if (record->timer_id_ == kNewRecord) {
    record->timer_id_ = kGoneRecord;
  } else {
    queue.cancel(record->timer_id_);
    put_id(record);
  }
  release(record);  // the scheduler's reference
}

TimerId SchedulerCore::take_id(TaskRecord* record) {
  TimerId id;
  if (free_ids_.empty()) {
    DELAYQ_CHECK(timers_.size() < kGoneRecord);
    id = static_cast<TimerId>(timers_.size());
    timers_.emplace_back();
    by_id_.push_back(record);
  } else {
    id = free_ids_.back();
    free_ids_.pop_back();
    by_id_[id] = record;
  }
  record->timer_id_ = id;
  ++table_size_;
  return id;
}

void SchedulerCore::put_id(TaskRecord* record) {
  DELAYQ_CHECK(record->timer_id_ < kGoneRecord);
  by_id_[record->timer_id_] = nullptr;
  free_ids_.push_back(record->timer_id_);
  record->timer_id_ = kGoneRecord;
  --table_size_;
}

void SchedulerCore::dispatch() {
  if (due_.empty()) return;
  const std::size_t n = due_.size();
  {
    std::lock_guard lock(work_mutex_);
    work_.insert(work_.end(), due_.begin(), due_.end());
  }
  due_.clear();
  if (n >= workers_.size()) {
    work_cv_.notify_all();
  } else {
    for (std::size_t i = 0; i < n; ++i) work_cv_.notify_one();
  }
}

// Shutdown, on the timer thread, once the marker is out of the inbox. Apply what came after it,
// settle every record still pending (run it now or drop it), then seal the inbox and take what
// is left: a caller that held a claim during the sweep has queued its record by the time the
// sweep gets past it, and a record scheduled after the seal is dropped by its producer.
template <typename Queue>
void SchedulerCore::finish(Queue& queue) {
  const ShutdownMode mode = mode_;
  drain(queue, std::numeric_limits<std::size_t>::max());
  if (mode == ShutdownMode::kRunPendingNow) {
    queue.advance_to(Millis::max(), [&](TimerId id) { fire(id); });
  } else {
    // Tasks already due run, as shutdown() promises: only those still to come are dropped.
    queue.advance_to(Millis{now_units()}, [&](TimerId id) { fire(id); });
  }
  const std::uint64_t settled = mode == ShutdownMode::kRunPendingNow ? kRunning : kDropped;
  for (TaskRecord* record : by_id_) {
    if (record == nullptr) continue;
    if (!settle(record, settled)) continue;  // cancelled: its queued change forgets it
    queue.cancel(record->timer_id_);
    put_id(record);
    if (settled == kRunning) {
      due_.push_back(record);
    } else {
      release(record);
    }
  }
  dispatch();
  sealed_.store(true, std::memory_order_seq_cst);
  drain(queue, std::numeric_limits<std::size_t>::max());
  DELAYQ_CHECK(table_size_ == 0);
}

void SchedulerCore::worker_main() noexcept {
#ifdef __linux__
  pthread_setname_np(pthread_self(), "delayq-worker");
#endif
  for (;;) {
    TaskRecord* record;
    {
      std::unique_lock lock(work_mutex_);
      work_cv_.wait(lock, [&] { return !work_.empty() || workers_stop_; });
      if (work_.empty()) return;
      record = work_.front();
      work_.pop_front();
    }
    run_task(record);
  }
}

void SchedulerCore::run_task(TaskRecord* record) noexcept {
  const std::uint64_t version = version_of(record->word_.load(std::memory_order_acquire));
  std::uint64_t outcome = kDone;
  try {
    record->run();
  } catch (...) {
    outcome = kFailed;
    report(std::current_exception());
  }
  record->destroy_task();
  finish_task(record, version, outcome);
  release(record);
}

void SchedulerCore::report(std::exception_ptr error) noexcept {
  if (options_.on_task_exception) {
    try {
      options_.on_task_exception(std::move(error));
    } catch (...) {  // documented: swallowed, the worker carries on
    }
    return;
  }
  try {
    std::rethrow_exception(std::move(error));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "delayq::Scheduler: task threw: %s\n", e.what());
  } catch (...) {
    std::fprintf(stderr, "delayq::Scheduler: task threw a non-std exception\n");
  }
}

void SchedulerCore::shutdown(ShutdownMode mode) {
  std::lock_guard guard(shutdown_mutex_);
  if (stopped_) return;
  const auto self = std::this_thread::get_id();
  DELAYQ_CHECK(self != timer_.get_id() && "shutdown() called from a task");
  for (const auto& worker : workers_) {
    DELAYQ_CHECK(self != worker.get_id() && "shutdown() called from a task");
  }
  // Records pushed before the marker were accepted; the timer thread drops new ones after it.
  mode_ = mode;
  closing_.store(true, std::memory_order_seq_cst);
  inbox_.push(&closing_marker_);
  {
    std::lock_guard lock(wake_mutex_);
    wake_ = true;
  }
  wake_cv_.notify_one();
  timer_.join();
  {
    std::lock_guard lock(work_mutex_);
    workers_stop_ = true;
  }
  work_cv_.notify_all();
  for (auto& worker : workers_) worker.join();
  stopped_ = true;
}

// Claims a pending task, sets its due time to due_of(its scheduler), queues the change and
// releases the claim as a new version; false if the task is not pending. The claim keeps the
// scheduler alive, so due_of may read its clock.
template <typename DueOf>
bool move_task(TaskRecord* record, DueOf due_of) noexcept {
  std::uint64_t word;
  if (record == nullptr || !claim(record, word)) return false;
  SchedulerCore& core = *record->core_;
  const SchedulerClock::time_point due = due_of(core);
  record->due_ns_.store(due.time_since_epoch().count(), std::memory_order_relaxed);
  core.queue_change(record, core.to_units(due));
  record->word_.store(make_word(version_of(word) + 1, kPending), std::memory_order_release);
  return true;
}

}  // namespace detail

// ManualSchedulerClock

ManualSchedulerClock::~ManualSchedulerClock() {
  DELAYQ_CHECK(watchers_.empty() && "a Scheduler still runs on this ManualSchedulerClock");
}

void ManualSchedulerClock::advance(SchedulerClock::duration by) {
  if (by <= by.zero()) return;
  // Up to the clock's last instant, never past it (which would wrap around to the past).
  SchedulerClock::rep current = now_ns_.load();
  SchedulerClock::rep target = 0;
  do {
    target = current > std::numeric_limits<SchedulerClock::rep>::max() - by.count()
                 ? std::numeric_limits<SchedulerClock::rep>::max()
                 : current + by.count();
  } while (!now_ns_.compare_exchange_weak(current, target));
  wake_watchers();
}

void ManualSchedulerClock::advance_to(SchedulerClock::time_point to) {
  const SchedulerClock::rep target = to.time_since_epoch().count();
  SchedulerClock::rep current = now_ns_.load();
  do {
    if (current >= target) return;
  } while (!now_ns_.compare_exchange_weak(current, target));
  wake_watchers();
}

void ManualSchedulerClock::wake_watchers() {
  std::lock_guard lock(mutex_);
  for (detail::SchedulerCore* core : watchers_) core->clock_moved();
}

void ManualSchedulerClock::watch(detail::SchedulerCore* core) {
  std::lock_guard lock(mutex_);
  watchers_.push_back(core);
}

void ManualSchedulerClock::unwatch(detail::SchedulerCore* core) noexcept {
  std::lock_guard lock(mutex_);
  std::erase(watchers_, core);
}

const char* task_state_name(TaskState state) noexcept {
  switch (state) {
    case TaskState::kPending:
      return "pending";
    case TaskState::kRunning:
      return "running";
    case TaskState::kDone:
      return "done";
    case TaskState::kFailed:
      return "failed";
    case TaskState::kCancelled:
      return "cancelled";
    case TaskState::kDropped:
      return "dropped";
  }
  return "unknown";
}

// TaskHandle

TaskHandle::TaskHandle(const TaskHandle& other) noexcept : record_(other.record_) {
  if (record_ != nullptr) record_->refs_.fetch_add(1, std::memory_order_relaxed);
}

TaskHandle::~TaskHandle() {
  if (record_ != nullptr) detail::release(record_);
}

bool TaskHandle::cancel() noexcept {
  std::uint64_t word;
  if (record_ == nullptr || !detail::claim(record_, word)) return false;
  record_->core_->queue_change(record_, detail::kNever);
  // Won: the captures go now, not when the last handle does, and before the state says so.
  detail::end_claimed(record_, word, detail::kCancelled);
  return true;
}

bool TaskHandle::reschedule_at(SchedulerClock::time_point due) noexcept {
  return detail::move_task(record_, [due](const detail::SchedulerCore&) { return due; });
}

bool TaskHandle::reschedule_after(SchedulerClock::duration delay) noexcept {
  return detail::move_task(
      record_, [delay](const detail::SchedulerCore& core) { return core.now() + delay; });
}

TaskState TaskHandle::state() const noexcept {
  if (record_ == nullptr) return TaskState::kDropped;
  const std::uint64_t state = detail::state_of(record_->word_.load(std::memory_order_acquire));
  if (state == detail::kClaimed) return TaskState::kPending;
  return static_cast<TaskState>(detail::outcome_of(state));
}

SchedulerClock::time_point TaskHandle::due() const noexcept {
  if (record_ == nullptr) return {};
  return SchedulerClock::time_point(
      SchedulerClock::duration(record_->due_ns_.load(std::memory_order_relaxed)));
}

TaskState TaskHandle::wait() const noexcept {
  if (record_ == nullptr) return TaskState::kDropped;
  for (;;) {
    const std::uint64_t word = record_->word_.load(std::memory_order_acquire);
    if (detail::is_final(detail::state_of(word))) {
      return static_cast<TaskState>(detail::state_of(word));
    }
    // Every move to a final state notifies; moves between pending and claimed do not, so a
    // waiter may sleep through them, which is fine.
    record_->word_.wait(word, std::memory_order_acquire);
  }
}

// Scheduler

Scheduler::Scheduler(SchedulerOptions options)
    : default_shutdown_(options.shutdown),
      clock_(options.clock),
      core_(std::make_unique<detail::SchedulerCore>(std::move(options))) {}

Scheduler::~Scheduler() {
  core_->shutdown(default_shutdown_);
}

void Scheduler::shutdown(ShutdownMode mode) {
  core_->shutdown(mode);
}

std::size_t Scheduler::workers() const noexcept {
  return core_->workers();
}

TaskHandle Scheduler::submit(detail::TaskRecord* record, SchedulerClock::time_point due) {
  record->core_ = core_.get();
  record->due_ns_.store(due.time_since_epoch().count(), std::memory_order_relaxed);
  record->timer_id_ = detail::kNewRecord;
  // The handle's reference, the scheduler's, and the inbox's bit.
  record->refs_.store(2 | detail::kQueued, std::memory_order_relaxed);
  if (!core_->submit(record, core_->to_units(due))) {
    record->refs_.store(1, std::memory_order_relaxed);
    record->word_.store(detail::make_word(0, detail::kDropped), std::memory_order_relaxed);
    record->destroy_task();
  }
  return TaskHandle(record);
}

}  // namespace delayq
