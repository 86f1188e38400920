// scheduler_core.cc — the callers' side of SchedulerCore (scheduler_core.h) that is not on
// their hot path: starting and stopping, and waking the timer thread. Submitting records and
// changes, and deciding to wake, are inline in the header, where Scheduler calls them. The timer
// thread's side is in timer_thread.cc.
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
  // The ring is made on the timer thread, where a failure to allocate it could not be thrown.
  if (options.wheel == WheelKind::kHashed &&
      options.hashed_slots > SchedulerOptions::kMaxHashedSlots) {
    throw std::invalid_argument("SchedulerOptions::hashed_slots is over 16,777,216");
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

// The timer thread reads the clock holding wake_mutex_ before it waits, so taking the mutex here
// orders this notify after that read: either the read saw the move or the thread is waiting.
void SchedulerCore::clock_moved() noexcept {
  { std::lock_guard lock(wake_mutex_); }
  wake_cv_.notify_one();
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
