#include "schedule/planner.h"

#include <algorithm>
#include <deque>

namespace delayq::schedule {
namespace {

// The instants in (cursor, now], sorted into those reached on time and those missed; of the
// missed, the latest kMaxCatchUpRuns within max_lateness (the candidates for a catch-up).
struct Reached {
  std::vector<std::int64_t> on_time;
  std::deque<std::int64_t> catch_up;
  std::uint64_t missed = 0;
};

bool past_end(const Definition& d, std::int64_t instant) {
  return d.end_unix_ms && instant > *d.end_unix_ms;
}

bool limit_reached(const Definition& d, const State& state) {
  return d.limit && state.runs >= *d.limit;
}

Reached reach(const Compiled& schedule, std::int64_t cursor, std::int64_t now) {
  const Definition& d = schedule.definition;
  Reached reached;
  std::int64_t at = cursor;
  std::uint64_t seen = 0;
  while (true) {
    const auto next = schedule.recurrence.next_after(at);
    if (!next || *next > now || past_end(d, *next)) break;
    at = *next;
    if (now - at <= kOnTime.count()) {
      reached.on_time.push_back(at);
      continue;
    }
    ++reached.missed;
    if (now - at <= d.max_lateness.count()) {
      reached.catch_up.push_back(at);
      if (reached.catch_up.size() > kMaxCatchUpRuns) reached.catch_up.pop_front();
    }
    if (++seen == kMaxCountedMisses) {
      // Too many to count one by one: go on from the start of the catch-up window (or, if that
      // is what was too long, from the on-time margin); `missed` is then a lower bound.
      const std::int64_t window = now - std::max(d.max_lateness, kOnTime).count() - 1;
      at = std::max(at, at >= window ? now - kOnTime.count() - 1 : window);
      seen = 0;
    }
  }
  return reached;
}

// Puts runs and skips overlaps, in the order offered, within the schedule's limit.
class Offer {
 public:
  Offer(const Compiled& schedule, State& state, const Environment& environment, Step& step)
      : d_(schedule.definition), state_(state), environment_(environment), step_(step) {}

  void run(std::int64_t instant, std::int64_t due) {
    if (limit_reached(d_, state_)) return;
    if (d_.overlap != Overlap::kAllow && previous_exists()) {
      if (d_.overlap == Overlap::kBufferOne && !state_.buffered_unix_ms) {
        state_.buffered_unix_ms = instant;
      } else {
        ++state_.overlaps;
      }
      return;
    }
    put(instant, due);
  }

  // The buffered run, once the previous run's job is gone.
  void buffered(std::int64_t now) {
    if (!state_.buffered_unix_ms || previous_exists() || limit_reached(d_, state_)) return;
    const std::int64_t instant = *state_.buffered_unix_ms;
    state_.buffered_unix_ms.reset();
    put(instant, now);
  }

  // ahead: a run whose instant has not come (it becomes the last run when it does).
  void put(std::int64_t instant, std::int64_t due, bool ahead = false) {
    step_.put.push_back({instant, due});
    ++state_.runs;
    if (ahead) {
      state_.ahead_unix_ms = instant;
      return;
    }
    state_.last_run_unix_ms = std::max(state_.last_run_unix_ms.value_or(instant), instant);
    just_put_ = true;
  }

 private:
  bool previous_exists() const {
    // A run put in this step is not in the broker yet, but will be.
    return just_put_ || (state_.last_run_unix_ms &&
                         environment_.exists(run_key(d_.name, *state_.last_run_unix_ms)));
  }

  const Definition& d_;
  State& state_;
  const Environment& environment_;
  Step& step_;
  bool just_put_ = false;
};

std::int64_t jittered(const Definition& d, const Environment& environment, std::int64_t instant) {
  if (d.jitter.count() == 0) return instant;
  return instant +
         std::clamp<std::int64_t>(environment.draw(d.jitter.count()), 0, d.jitter.count());
}

// The missed instants, by the schedule's misfire rule: runs due now, and the rest counted.
void catch_up(const Definition& d, State& state, const Reached& reached, std::int64_t now,
              Offer& offer) {
  if (reached.missed == 0) return;
  std::uint64_t offered = 0;
  if (d.misfire == Misfire::kOnce && !reached.catch_up.empty()) {
    offer.run(reached.catch_up.back(), now);
    offered = 1;
  } else if (d.misfire == Misfire::kAll) {
    for (const std::int64_t instant : reached.catch_up) offer.run(instant, now);
    offered = reached.catch_up.size();
  }
  state.misfires += reached.missed - offered;
}

}  // namespace

State start(const Compiled& schedule, std::int64_t now_unix_ms, const State* previous) {
  State state;
  if (previous != nullptr) {
    state.runs = previous->runs;
    state.misfires = previous->misfires;
    state.overlaps = previous->overlaps;
    state.last_run_unix_ms = previous->last_run_unix_ms;
  }
  state.cursor_unix_ms = now_unix_ms;
  const auto& begin = schedule.definition.start_unix_ms;
  if (begin && *begin - 1 > now_unix_ms) state.cursor_unix_ms = *begin - 1;
  return state;
}

Step step(const Compiled& schedule, State& state, std::int64_t now, const Environment& env) {
  const Definition& d = schedule.definition;
  Step out;
  if (d.paused) return out;
  if (state.ahead_unix_ms && *state.ahead_unix_ms <= now) {
    const std::int64_t ahead = *state.ahead_unix_ms;
    state.ahead_unix_ms.reset();
    if (now - ahead > kOnTime.count() && env.withdraw(run_key(d.name, ahead))) {
      // Missed like the instants after it: the misfire rule settles it with them.
      --state.runs;
      state.cursor_unix_ms = ahead - 1;
    } else {
      state.last_run_unix_ms = ahead;
    }
  }
  if (state.ahead_unix_ms) {
    out.wake_unix_ms = *state.ahead_unix_ms;
    return out;
  }
  Offer offer(schedule, state, env, out);
  offer.buffered(now);
  if (state.cursor_unix_ms < now) {
    const Reached reached = reach(schedule, state.cursor_unix_ms, now);
    catch_up(d, state, reached, now, offer);
    for (const std::int64_t instant : reached.on_time)
      offer.run(instant, jittered(d, env, instant));
    state.cursor_unix_ms = now;
  }
  if (d.overlap == Overlap::kAllow && !limit_reached(d, state)) {
    const auto next = schedule.recurrence.next_after(state.cursor_unix_ms);
    if (next && !past_end(d, *next) && *next - now <= kLead.count()) {
      offer.put(*next, jittered(d, env, *next), /*ahead=*/true);
      state.cursor_unix_ms = *next;
    }
  }
  if (!state.buffered_unix_ms) {
    out.wake_unix_ms = wake(schedule, state);
    return out;
  }
  // buffer_one: look again soon whether the previous run's job is gone, or at the next instant.
  out.wake_unix_ms = now + kBufferPoll.count();
  const auto next = schedule.recurrence.next_after(state.cursor_unix_ms);
  if (!limit_reached(d, state) && next && !past_end(d, *next)) {
    out.wake_unix_ms = std::min(*out.wake_unix_ms, *next);
  }
  return out;
}

std::optional<std::int64_t> wake(const Compiled& schedule, const State& state) {
  const Definition& d = schedule.definition;
  if (d.paused) return std::nullopt;
  if (state.ahead_unix_ms) return state.ahead_unix_ms;
  if (state.buffered_unix_ms) return state.cursor_unix_ms;  // past: at once
  if (limit_reached(d, state)) return std::nullopt;
  const auto next = schedule.recurrence.next_after(state.cursor_unix_ms);
  if (!next || past_end(d, *next)) return std::nullopt;
  return d.overlap == Overlap::kAllow ? *next - kLead.count() : *next;
}

std::optional<std::int64_t> next_run(const Compiled& schedule, const State& state,
                                     std::int64_t now_unix_ms) {
  const Definition& d = schedule.definition;
  if (d.paused) return std::nullopt;
  if (state.ahead_unix_ms) return state.ahead_unix_ms;
  if (limit_reached(d, state)) return std::nullopt;
  const auto next = schedule.recurrence.next_after(std::max(state.cursor_unix_ms, now_unix_ms));
  if (!next || past_end(d, *next)) return std::nullopt;
  return next;
}

std::optional<std::int64_t> pending_ahead(const State& state, std::int64_t now_unix_ms) {
  if (state.ahead_unix_ms && *state.ahead_unix_ms > now_unix_ms) return state.ahead_unix_ms;
  return std::nullopt;
}

void withdraw_ahead(State& state, std::int64_t now_unix_ms, bool deleted) {
  if (!state.ahead_unix_ms) return;
  if (deleted) {
    // Every instant before the withdrawn one was settled when it was put.
    --state.runs;
    state.cursor_unix_ms = now_unix_ms;
  } else {
    state.last_run_unix_ms = state.ahead_unix_ms;
  }
  state.ahead_unix_ms.reset();
}

std::vector<std::int64_t> upcoming(const Compiled& schedule, std::int64_t after_unix_ms,
                                   std::size_t count) {
  const Definition& d = schedule.definition;
  if (d.start_unix_ms) after_unix_ms = std::max(after_unix_ms, *d.start_unix_ms - 1);
  std::vector<std::int64_t> runs = schedule.recurrence.runs(after_unix_ms, count);
  while (!runs.empty() && past_end(d, runs.back())) runs.pop_back();
  return runs;
}

Run trigger(State& state, std::int64_t now_unix_ms) {
  ++state.runs;
  state.last_run_unix_ms = std::max(state.last_run_unix_ms.value_or(now_unix_ms), now_unix_ms);
  return {now_unix_ms, now_unix_ms};
}

Result<std::vector<Run>> backfill(const Compiled& schedule, State& state, std::int64_t from,
                                  std::int64_t to, std::int64_t now_unix_ms) {
  if (to < from) return Status(Code::kInvalidArgument, "to: before from");
  // A future instant put now would run again when it comes, once its job is deleted. A `to` a
  // little ahead (a client's clock, a time rounded up to the millisecond) puts the past ones.
  if (to > now_unix_ms + kOnTime.count()) {
    return Status(Code::kInvalidArgument,
                  "to: in the future: a backfill puts past instants (a trigger puts a run now)");
  }
  to = std::min(to, now_unix_ms);
  std::vector<Run> runs;
  for (auto at = schedule.recurrence.next_after(from - 1); at && *at <= to;
       at = schedule.recurrence.next_after(*at)) {
    if (runs.size() == kMaxCatchUpRuns) {
      return Status(
          Code::kInvalidArgument,
          "from, to: more than " + std::to_string(kMaxCatchUpRuns) + " runs in the range");
    }
    runs.push_back({*at, now_unix_ms});
  }
  state.runs += runs.size();
  return runs;
}

}  // namespace delayq::schedule
