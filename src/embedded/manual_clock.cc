// manual_clock.cc — ManualSchedulerClock (include/delayq/scheduler.h): a clock that moves only
// when a test says, and wakes the timer thread of every scheduler running on it when it does.
// now() is one atomic load; advance() is a compare-and-swap loop, then one mutex held while the
// watchers are woken, so a scheduler that unwatches waits for a wake-up in progress.
#include <limits>
#include <vector>

#include "base/check.h"
#include "delayq/scheduler.h"
#include "embedded/scheduler_core.h"

namespace delayq {

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

}  // namespace delayq
