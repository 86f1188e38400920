#include "timing/coarse_timers.h"

#include <algorithm>
#include <vector>

namespace delayq::timing {

CoarseTimers::CoarseTimers(Clock& clock, std::chrono::microseconds slack)
    : state_(std::make_shared<State>(State{clock, slack, clock.timer(), {}, {}, {}, {}, 1})) {}

CoarseTimers::~CoarseTimers() {
  state_->due.clear();
  state_->timer->cancel();
}

CoarseTimers::Id CoarseTimers::at(SteadyTime when, std::function<void()> run) {
  const Id id = state_->next++;
  state_->due.emplace(std::pair(when, id), std::move(run));
  state_->when.emplace(id, when);
  arm(state_);
  return id;
}

void CoarseTimers::cancel(Id id) {
  const auto it = state_->when.find(id);
  if (it == state_->when.end()) return;
  state_->due.erase(std::pair(it->second, id));
  state_->when.erase(it);
  // The timer stays set: firing with nothing due costs less than setting it again.
}

// The timer at the earliest deadline, but never sooner than `slack` after it last fired; set
// again only if that comes more than `slack` before the time it is set for.
void CoarseTimers::arm(const std::shared_ptr<State>& state) {
  if (state->due.empty()) return;
  SteadyTime target = state->due.begin()->first.first;
  if (state->fired) target = std::max(target, *state->fired + state->slack);
  if (state->armed && *state->armed <= target + state->slack) return;
  state->armed = target;
  state->timer->expires_at(target);
  state->timer->async_wait([weak = std::weak_ptr<State>(state)](bool expired) {
    if (const auto alive = weak.lock(); alive && expired) fire(alive);
  });
}

void CoarseTimers::fire(const std::shared_ptr<State>& state) {
  const SteadyTime now = state->clock.steady_now();
  state->armed.reset();
  state->fired = now;
  std::vector<std::function<void()>> runs;
  while (!state->due.empty() && state->due.begin()->first.first <= now) {
    const auto first = state->due.begin();
    state->when.erase(first->first.second);
    runs.push_back(std::move(first->second));
    state->due.erase(first);
  }
  arm(state);
  for (auto& run : runs) run();
}

}  // namespace delayq::timing
