// scheduler.cc — the public face of the embedded scheduler (include/delayq/scheduler.h):
// Scheduler, which fills in a new task record and submits it to its SchedulerCore, and
// TaskHandle, whose cancel() and reschedule() claim a pending record, change it and queue the
// change for the timer thread (task_record.h has the rules, scheduler_core.h the machinery).
// Every call is lock-free unless it must wake a sleeping timer thread.
#include "delayq/scheduler.h"

#include <memory>
#include <utility>

#include "embedded/scheduler_core.h"
#include "embedded/task_record.h"

namespace delayq {
namespace detail {
namespace {

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
  core.queue_change(record, core.since_start(due));
  record->word_.store(make_word(version_of(word) + 1, kPending), std::memory_order_release);
  return true;
}

}  // namespace
}  // namespace detail

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
  return detail::move_task(record_, [delay](const detail::SchedulerCore& core) {
    return detail::later(core.now(), delay);
  });
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
  if (!core_->submit(record, core_->since_start(due))) {
    record->refs_.store(1, std::memory_order_relaxed);
    record->word_.store(detail::make_word(0, detail::kDropped), std::memory_order_relaxed);
    record->destroy_task();
  }
  return TaskHandle(record);
}

}  // namespace delayq
