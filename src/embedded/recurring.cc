// recurring.cc — Scheduler::every and Scheduler::cron: a recurring task is a chain of one-shot
// tasks, each scheduled by the run before it as that run ends, so runs never overlap and a
// cancel() needs only to stop the chain. The instants of a cron expression are
// schedule::Recurrence's, the same as delayqd's schedules.
#include <algorithm>
#include <stdexcept>
#include <string>

#include "delayq/scheduler.h"
#include "schedule/recurrence.h"

namespace delayq {
namespace detail {

using std::chrono::milliseconds;

// The instants of a recurring task, one after another.
class Instants {
 public:
  virtual ~Instants() = default;
  // The due time, on the scheduler's clock, of the first instant after `previous` (the due time
  // of the run that just began, or the start) that is not before the present; `skipped` grows by
  // the instants passed over. nullopt: no instant comes.
  virtual std::optional<SchedulerClock::time_point> next(const Scheduler& scheduler,
                                                         SchedulerClock::time_point previous,
                                                         std::uint64_t& skipped) = 0;
};

// start + k * period on the scheduler's clock.
class Period final : public Instants {
 public:
  explicit Period(SchedulerClock::duration period) : period_(period) {}
  std::optional<SchedulerClock::time_point> next(const Scheduler& scheduler,
                                                 SchedulerClock::time_point previous,
                                                 std::uint64_t& skipped) override {
    SchedulerClock::time_point next = later(previous, period_);
    const SchedulerClock::time_point now = scheduler.now();
    if (next < now) {
      const auto behind = static_cast<std::uint64_t>((now - next) / period_);
      next += period_ * static_cast<SchedulerClock::rep>(behind);
      if (next < now) next += period_;
      skipped += static_cast<std::uint64_t>((next - previous) / period_) - 1;
    }
    return next;
  }

 private:
  SchedulerClock::duration period_;
};

// A cron expression's instants in Unix time, mapped onto the scheduler's clock through the wall
// clock at the moment each is scheduled.
class Calendar final : public Instants {
 public:
  explicit Calendar(schedule::Recurrence recurrence) : recurrence_(std::move(recurrence)) {}
  std::optional<SchedulerClock::time_point> next(const Scheduler& scheduler,
                                                 SchedulerClock::time_point /*previous*/,
                                                 std::uint64_t& skipped) override {
    const SchedulerClock::time_point now = scheduler.now();
    const std::int64_t wall_ms =
        std::chrono::duration_cast<milliseconds>(scheduler.wall_now().time_since_epoch()).count();
    // The instant of the run that just began, or the wall clock's present at the start.
    std::int64_t after = last_unix_ms_.value_or(wall_ms);
    std::optional<std::int64_t> next = recurrence_.next_after(after);
    // Instants already past: skipped, counted (at most a bounded number are walked one by one).
    constexpr int kMostWalked = 100'000;
    for (int walked = 0; next && *next < wall_ms && walked < kMostWalked; ++walked) {
      ++skipped;
      next = recurrence_.next_after(*next);
    }
    if (next && *next < wall_ms) next = recurrence_.next_after(wall_ms - 1);
    if (!next) return std::nullopt;
    last_unix_ms_ = *next;
    return now +
           std::chrono::duration_cast<SchedulerClock::duration>(milliseconds(*next - wall_ms));
  }

 private:
  schedule::Recurrence recurrence_;
  std::optional<std::int64_t> last_unix_ms_;
};

class Recurring : public std::enable_shared_from_this<Recurring> {
 public:
  Recurring(Scheduler& scheduler, std::function<void()> task, std::unique_ptr<Instants> instants)
      : scheduler_(scheduler), task_(std::move(task)), instants_(std::move(instants)) {}

  // Schedules the run after `previous`; false when none comes or the scheduler takes no more.
  bool arm(SchedulerClock::time_point previous) {
    std::lock_guard lock(mutex_);
    if (cancelled_) return false;
    std::uint64_t skipped = 0;
    const auto due = instants_->next(scheduler_, previous, skipped);
    skipped_.fetch_add(skipped, std::memory_order_relaxed);
    if (!due) {
      current_ = TaskHandle();
      return false;
    }
    current_ =
        scheduler_.schedule_at([self = shared_from_this(), due = *due] { self->run(due); }, *due);
    return current_.state() != TaskState::kDropped;
  }

  // A run not yet begun never begins (its task is cancelled, or run() sees `cancelled_`); one
  // under way finishes. Still recurring: a run was scheduled and not dropped.
  bool cancel() noexcept {
    std::lock_guard lock(mutex_);
    if (cancelled_) return false;
    cancelled_ = true;
    (void)current_.cancel();
    return current_.state() != TaskState::kDropped;
  }

  [[nodiscard]] std::optional<SchedulerClock::time_point> next() const noexcept {
    std::lock_guard lock(mutex_);
    if (cancelled_ || current_.state() != TaskState::kPending) return std::nullopt;
    return current_.due();
  }
  [[nodiscard]] std::uint64_t runs() const noexcept {
    return runs_.load(std::memory_order_relaxed);
  }
  [[nodiscard]] std::uint64_t skipped() const noexcept {
    return skipped_.load(std::memory_order_relaxed);
  }

 private:
  // On a worker: the run, then the next one scheduled, even when this one throws (the
  // exception then goes on to the scheduler's handler).
  void run(SchedulerClock::time_point due) {
    {
      // Handed to a worker before a cancel() that then returned: it must not begin.
      std::lock_guard lock(mutex_);
      if (cancelled_) return;
    }
    runs_.fetch_add(1, std::memory_order_relaxed);
    try {
      task_();
    } catch (...) {
      arm(due);
      throw;
    }
    arm(due);
  }

  Scheduler& scheduler_;  // used only by runs and by the first arm(), while it lives
  std::function<void()> task_;
  mutable std::mutex mutex_;  // guards instants_, current_ and cancelled_
  std::unique_ptr<Instants> instants_;
  TaskHandle current_;
  bool cancelled_ = false;
  std::atomic<std::uint64_t> runs_{0};
  std::atomic<std::uint64_t> skipped_{0};
};

}  // namespace detail

bool RecurringHandle::cancel() noexcept {
  return state_ != nullptr && state_->cancel();
}

bool RecurringHandle::active() const noexcept {
  return state_ != nullptr && state_->next().has_value();
}

std::optional<SchedulerClock::time_point> RecurringHandle::next() const noexcept {
  return state_ != nullptr ? state_->next() : std::nullopt;
}

std::uint64_t RecurringHandle::runs() const noexcept {
  return state_ != nullptr ? state_->runs() : 0;
}

std::uint64_t RecurringHandle::skipped() const noexcept {
  return state_ != nullptr ? state_->skipped() : 0;
}

RecurringHandle Scheduler::start_every(std::function<void()> task,
                                       SchedulerClock::duration period) {
  if (period <= SchedulerClock::duration::zero()) {
    throw std::invalid_argument("every: the period must be more than zero");
  }
  auto state = std::make_shared<detail::Recurring>(*this, std::move(task),
                                                   std::make_unique<detail::Period>(period));
  state->arm(now());
  return RecurringHandle(std::move(state));
}

RecurringHandle Scheduler::start_cron(std::function<void()> task, std::string_view expression,
                                      std::string_view zone) {
  auto recurrence = schedule::Recurrence::cron(expression, zone);
  // The message names its field already ("cron: ...", "tz: ...").
  if (!recurrence.is_ok()) throw std::invalid_argument(recurrence.status().message());
  auto state = std::make_shared<detail::Recurring>(
      *this, std::move(task), std::make_unique<detail::Calendar>(std::move(recurrence).value()));
  state->arm(now());
  return RecurringHandle(std::move(state));
}

}  // namespace delayq
