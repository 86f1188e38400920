// planner.h — where a schedule has got to (State), and the one set of rules that moves it on:
// which runs to put at a moment, which instants count as missed or as skipped overlaps, and when
// to look again. Both brokers keep a State beside each Definition and call these functions (the
// local broker on its node's thread; in Redis mode, the node that owns the schedule's shard),
// then put the runs they answer and store the new State in one atomic step. Pure: the moment,
// the random draw and whether a job exists are inputs; nothing here reads a clock.
//
// A schedule's instants, one by one, are each settled exactly once: run (a job keyed
// run_key(name, instant)), missed (counted in `misfires`), or skipped by overlap (`overlaps`).
// `cursor` is the latest settled instant. With overlap "allow", the next run is put kLead before
// its instant (or as the previous instant comes, if that is later), as a delayed job due at its
// instant plus jitter: it fires with the precision of any job, and a restart finds it on disk.
// Until then a schedule holds no job: a million schedules a day apart hold the few due within
// kLead. With "skip" and "buffer_one" the run is put at its instant, once the previous run's job
// is known to be gone.
//
//   time ──●────────────|──●────────────|──●──▶   allow: kLead before each ●, that ● is put
//                       put(i+1)        put(i+2)
//
// An instant is missed when it is reached more than kOnTime late (the server was down, the
// schedule paused, or the node overloaded); what then runs is the schedule's misfire rule. A run
// put ahead whose instant was missed so (the server was down through it) is withdrawn while its
// job is still delayed, and settled by the rule with the others.
// Costs: step() walks the instants since the cursor (up to kMaxCountedMisses of them).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "schedule/definition.h"

namespace delayq::schedule {

// A run reached within this of its instant is on time; later, it is missed.
inline constexpr Millis kOnTime{1000};
// allow: how long before its instant a run is put ahead, as a delayed job. It covers a step that
// comes late (a busy node, Redis slow to answer) without the run firing late.
inline constexpr Millis kLead{10'000};
// buffer_one: how often a run waiting behind the previous one looks whether that job is gone.
inline constexpr Millis kBufferPoll{250};
// A catch-up counts at most this many missed instants; beyond it, `misfires` is a lower bound.
inline constexpr std::uint64_t kMaxCountedMisses = 1'000'000;

struct State {
  std::int64_t cursor_unix_ms = 0;  // every instant at or before it is settled
  // allow: the run put ahead of its instant (its job waits, delayed); the cursor is it.
  std::optional<std::int64_t> ahead_unix_ms;
  std::optional<std::int64_t> last_run_unix_ms;  // the latest run whose instant has come
  std::optional<std::int64_t> buffered_unix_ms;  // buffer_one: the run waiting its turn
  std::uint64_t runs = 0;                        // runs put (triggers and backfills included)
  std::uint64_t misfires = 0;                    // instants missed and not run
  std::uint64_t overlaps = 0;  // runs skipped because the previous one's job still existed

  friend bool operator==(const State&, const State&) = default;
};

// A run to put: a job with key run_key(name, instant), due at due_unix_ms.
struct Run {
  std::int64_t instant_unix_ms = 0;
  std::int64_t due_unix_ms = 0;

  friend bool operator==(const Run&, const Run&) = default;
};

// What a broker supplies: whether a job with this key exists in the schedule's tube (in any
// state); a random draw in [0, bound] for jitter; and the withdrawal of a run put ahead whose
// instant was missed (its job deleted if no worker has had it: true if it was).
struct Environment {
  std::function<bool(std::string_view key)> exists;
  std::function<std::int64_t(std::int64_t bound)> draw;
  std::function<bool(std::string_view key)> withdraw;
};

struct Step {
  std::vector<Run> put;                      // in this order, then the State stored
  std::optional<std::int64_t> wake_unix_ms;  // call step() again then; nullopt: not by time
};

// A new schedule (or one replaced: counts and last run carried over from `previous`). Nothing
// before now, or before its start, runs.
[[nodiscard]] State start(const Compiled& schedule, std::int64_t now_unix_ms,
                          const State* previous = nullptr);
// Moves the schedule on to `now_unix_ms`: settles the instants that have come, puts the next
// run ahead (allow), and says when to come back. Cheap when nothing is due.
[[nodiscard]] Step step(const Compiled& schedule, State& state, std::int64_t now_unix_ms,
                        const Environment& environment);
// When step() next has something to do for this state (nullopt: nothing by time; at or before
// now: at once). What a step answers as its wake, and what a restart wakes a stored schedule at.
[[nodiscard]] std::optional<std::int64_t> wake(const Compiled& schedule, const State& state);
// The next instant that will run, as shown to users (nullopt: paused, ended, or none comes).
[[nodiscard]] std::optional<std::int64_t> next_run(const Compiled& schedule, const State& state,
                                                   std::int64_t now_unix_ms);

// A run put ahead whose instant has not come: the broker deletes its job when the schedule is
// paused, replaced or removed, then reports whether it did (false: the job had left the delayed
// state, so it runs and stays counted).
[[nodiscard]] std::optional<std::int64_t> pending_ahead(const State& state,
                                                        std::int64_t now_unix_ms);
void withdraw_ahead(State& state, std::int64_t now_unix_ms, bool deleted);

// Up to `count` instants strictly after `after_unix_ms` that the schedule's span allows (start
// and end; not its limit, pause or jitter): what GET .../next and a preview answer.
[[nodiscard]] std::vector<std::int64_t> upcoming(const Compiled& schedule,
                                                 std::int64_t after_unix_ms, std::size_t count);

// One run now (POST .../trigger): key run_key(name, now), due now.
[[nodiscard]] Run trigger(State& state, std::int64_t now_unix_ms);
// The schedule's instants in [from, to], each a run due now; kInvalidArgument if there are more
// than kMaxCatchUpRuns, `to` is before `from`, or `to` is more than kOnTime after now (up to
// that, instants after now are left out).
[[nodiscard]] Result<std::vector<Run>> backfill(const Compiled& schedule, State& state,
                                                std::int64_t from_unix_ms, std::int64_t to_unix_ms,
                                                std::int64_t now_unix_ms);

}  // namespace delayq::schedule
