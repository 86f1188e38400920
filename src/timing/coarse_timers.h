// coarse_timers.h — deadlines by the thousand on one Timer of a Clock, each met at most `slack`
// after its time: the Timer fires at most once per `slack` and is set again only for a deadline
// more than `slack` before the time it is set for. Setting an Asio timer that becomes the
// process's earliest is a system call (timerfd_settime), which on a virtual machine cost more
// than the rest of a reserve; deadlines that are made and dropped at every request (the safety
// net of a reserve with a timeout, a prefetched job's give-back) go here. On one executor.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <unordered_map>
#include <utility>

#include "timing/clock.h"

namespace delayq::timing {

class CoarseTimers {
 public:
  using Id = std::uint64_t;  // 0: none

  CoarseTimers(Clock& clock, std::chrono::microseconds slack);
  ~CoarseTimers();  // drops what is pending, uncalled
  CoarseTimers(const CoarseTimers&) = delete;
  CoarseTimers& operator=(const CoarseTimers&) = delete;

  // `run` at `when` or up to `slack` after it (never before), unless cancelled first.
  Id at(SteadyTime when, std::function<void()> run);
  // Drops a deadline not yet met; an id that ran, was cancelled or is 0 is left alone.
  void cancel(Id id);
  [[nodiscard]] std::size_t pending() const { return state_->due.size(); }

 private:
  struct State {
    Clock& clock;
    std::chrono::microseconds slack;
    std::unique_ptr<Timer> timer;
    std::optional<SteadyTime> armed;  // when `timer` fires, if it is set
    std::optional<SteadyTime> fired;  // when it last fired
    std::map<std::pair<SteadyTime, Id>, std::function<void()>> due;
    std::unordered_map<Id, SteadyTime> when;
    Id next = 1;
  };
  static void arm(const std::shared_ptr<State>& state);
  static void fire(const std::shared_ptr<State>& state);

  std::shared_ptr<State> state_;
};

}  // namespace delayq::timing
