// scheduler_core.cc — the callers' side of SchedulerCore (scheduler_core.h): starting and
// stopping, submitting records and changes to the inbox, and waking the timer thread, which
// callers do only when it sleeps past what they queued (or once per kWakeBatch pushes). The
// timer thread's side is in timer_thread.cc.
#include "embedded/scheduler_core.h"

#include <stdexcept>
#include <utility>

#include "base/check.h"
#include "embedded/task_record.h"

namespace delayq::detail {

SchedulerCore::SchedulerCore(SchedulerOptions options)
    : options_(checked(std::move(options))),
      clock_(options_.clock),
      start_(now()),
      workers_(options_.workers, options_.on_task_exception) {
  if (clock_ != nullptr) clock_->watch(this);
  // A timer thread the system will not start makes the constructor throw, with nothing left
  // watching the clock; the workers' destructor stops them.
  try {
    timer_ = std::thread([this] { timer_main(); });
  } catch (...) {
    if (clock_ != nullptr) clock_->unwatch(this);
    throw;
  }
}

SchedulerOptions SchedulerCore::checked(SchedulerOptions options) {
  if (options.tick.count() < 0) throw std::invalid_argument("SchedulerOptions::tick < 0");
  if (options.wheel == WheelKind::kHashed && options.hashed_slots == 0) {
    throw std::invalid_argument("SchedulerOptions::hashed_slots is 0");
  }
  return options;
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

Micros SchedulerCore::since_start(SchedulerClock::time_point due) const noexcept {
  // Compared before subtracting: a time near time_point::min() or max() would overflow.
  if (due <= start_) return Micros{0};
  if (due - start_ >= kFarthest) return kFarthest;
  return std::chrono::ceil<Micros>(due - start_);
}

// The timer thread reads the clock holding wake_mutex_ before it waits, so taking the mutex here
// orders this notify after that read: either the read saw the move or the thread is waiting.
void SchedulerCore::clock_moved() noexcept {
  { std::lock_guard lock(wake_mutex_); }
  wake_cv_.notify_one();
}

bool SchedulerCore::submit(TaskRecord* record, Micros due) {
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

void SchedulerCore::queue_change(TaskRecord* record, Micros due) {
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
void SchedulerCore::notify(Micros due) {
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

void SchedulerCore::wake_timer() {
  {
    std::lock_guard lock(wake_mutex_);
    wake_ = true;
  }
  wake_cv_.notify_one();
}

void SchedulerCore::shutdown(ShutdownMode mode) {
  std::lock_guard guard(shutdown_mutex_);
  if (stopped_) return;
  const auto self = std::this_thread::get_id();
  DELAYQ_CHECK(self != timer_.get_id() && "shutdown() called from a task");
  DELAYQ_CHECK(!workers_.runs_on(self) && "shutdown() called from a task");
  // Records pushed before the marker were accepted; the timer thread drops new ones after it.
  mode_ = mode;
  closing_.store(true, std::memory_order_seq_cst);
  inbox_.push(&closing_marker_);
  wake_timer();
  timer_.join();
  workers_.stop();
  stopped_ = true;
}

}  // namespace delayq::detail
