// timer.h — what every timer queue in delayq::wheel shares: ids, the caller-owned timer record,
// the tick arithmetic and the TimerQueue concept that HierarchicalWheel, HashedWheel and HeapTimer
// all satisfy (so tests and benchmarks run the same code over each).
//
// Ownership: the caller owns one Timer per timer id, in a TimerTable (a paged array, so that
// growing it never moves or copies the timers it holds) it hands to the queue at construction
// (ids are indexes into it). The caller may grow it at any time but never shrink it (a cancelled
// timer's entry may still refer to its id), and never writes a Timer itself. A queue stores only
// (tick, id, generation) entries in compact arrays: nothing per timer.
//
// Time: deadlines and the present are Time, points on the caller's timeline in milliseconds from
// its epoch (the engine's: the Unix epoch); ticks are lengths, Millis. A queue with a tick of k ms
// fires a timer at the first tick boundary at or after its deadline: never early, at most one tick
// late. Time never runs backwards inside a queue, and a queue reads no clock: it is told the time.
// Not thread-safe: one queue belongs to one thread. Algorithms: docs/design/timing-wheel.md
#pragma once

#include <chrono>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>

#include "base/check.h"
#include "base/paged_array.h"

namespace delayq::wheel {

using Millis = std::chrono::milliseconds;

// The caller's clock, as the queues know it: a name for their times' epoch. They never read it
// (now() is never defined); they are told the time by advance_to().
struct Timeline {
  using duration = Millis;
  using rep = duration::rep;
  using period = duration::period;
  using time_point = std::chrono::time_point<Timeline, duration>;
  static constexpr bool is_steady = true;
  static time_point now() noexcept;
};
using Time = Timeline::time_point;

// The Time `ms` milliseconds after the epoch.
[[nodiscard]] constexpr Time time_at(std::int64_t ms) noexcept {
  return Time{Millis{ms}};
}

// Index of a timer in the caller's TimerTable.
using TimerId = std::uint32_t;

// Per-timer state, owned by the caller and written only by the queue it is scheduled on.
// generation is odd while the timer is scheduled and even while it is idle; every schedule, cancel
// and fire bumps it, so an entry whose generation no longer matches is stale (cancel is O(1): it
// bumps the generation and leaves the entry to be dropped later). HierarchicalWheel differs: it
// keeps which timers are scheduled in a bitmap of its own, its cancel and its firing clear the
// bit without touching the Timer, and each schedule moves the generation on by one, so the
// parity means nothing there; ask the queue's scheduled(id), which every queue has. position is
// used by HeapTimer (index in its heap); the wheels never read or write it, so a caller that owns a
// wheel may keep 32 bits of its own there (the engine keeps a ready job's place in its tube's ready
// heap).
struct Timer {
  std::uint32_t generation = 0;
  std::uint32_t position = 0;

  [[nodiscard]] bool scheduled() const noexcept { return (generation & 1U) != 0; }
};

// The caller's timers, indexed by TimerId; 64 KiB pages.
using TimerTable = PagedArray<Timer, 8192>;

// The generation schedule() gives timer `id` of `timers`. Scheduling a timer that is already
// scheduled, or an id outside the table, is a caller's bug: it aborts. A queue stores its entry
// first and then sets the Timer, so running out of memory leaves the timer idle.
inline std::uint32_t next_generation(const TimerTable& timers, TimerId id) {
  DELAYQ_CHECK(id < timers.size());
  DELAYQ_CHECK(!timers[id].scheduled());
  return timers[id].generation + 1;
}

// Generations are 32 bits, so after 2^32 bumps one comes round again, and a stale entry left
// behind by a lazy cancel could pass for live. Queues that cancel lazily therefore drop every
// stale entry whenever a generation they hand out starts a new epoch of 2^30 bumps: no stale
// entry outlives 2^31 bumps of its timer's generation. Epochs start half-way (at 2^29 + 1), so a
// timer's first generation, 1, does not start one.
inline constexpr std::uint32_t kGenerationEpoch = std::uint32_t{1} << 30;
[[nodiscard]] constexpr bool starts_epoch(std::uint32_t generation) noexcept {
  return generation % kGenerationEpoch == kGenerationEpoch / 2 + 1;
}

// Marks timer `id` idle for a queue's cancel(); false if it was not scheduled.
inline bool disarm(TimerTable& timers, TimerId id) {
  DELAYQ_CHECK(id < timers.size());
  Timer& timer = timers[id];
  if (!timer.scheduled()) return false;
  ++timer.generation;
  return true;
}

// The last tick advance_to() can reach: the last tick boundary at or before the latest Time.
// A timer whose deadline rounds up beyond it can never fire without firing early, so it never
// fires, and next_deadline() does not offer it. With 1 ms ticks every deadline is reachable.
[[nodiscard]] constexpr std::uint64_t last_tick(Millis tick) noexcept {
  return static_cast<std::uint64_t>(std::numeric_limits<Millis::rep>::max()) /
         static_cast<std::uint64_t>(tick.count());
}

// Ticks are unsigned 64-bit counts of tick_ms since the caller's epoch; negative times map to 0.
// A deadline rounds up (never early) and the present rounds down (never claims time not yet come).
[[nodiscard]] constexpr std::uint64_t deadline_tick(Time deadline, Millis tick) noexcept {
  const auto ms = deadline.time_since_epoch().count();
  if (ms <= 0) return 0;
  const auto k = static_cast<std::uint64_t>(tick.count());
  const auto u = static_cast<std::uint64_t>(ms);
  return u / k + (u % k != 0 ? 1 : 0);
}

[[nodiscard]] constexpr std::uint64_t now_tick(Time now, Millis tick) noexcept {
  const auto ms = now.time_since_epoch().count();
  if (ms <= 0) return 0;
  return static_cast<std::uint64_t>(ms) / static_cast<std::uint64_t>(tick.count());
}

// The time of a tick boundary, saturating at the latest Time.
[[nodiscard]] constexpr Time tick_time(std::uint64_t tick, Millis tick_size) noexcept {
  const auto k = static_cast<std::uint64_t>(tick_size.count());
  constexpr auto kMax = static_cast<std::uint64_t>(std::numeric_limits<Millis::rep>::max());
  if (tick > kMax / k) return Time::max();
  return Time{Millis{static_cast<Millis::rep>(tick * k)}};
}

// The interface every timer queue implements.
//   schedule(id, deadline)   the timer must be idle; a deadline at or before now() is due now and
//                            fires on the next advance_to(), even advance_to(now()).
//   cancel(id)               true if it was scheduled (it will not fire), false if idle.
//   reschedule(id, deadline) cancel (if scheduled) then schedule; true if it was scheduled.
//   advance_to(t, fire)      moves now() to t and calls fire(id) for every timer due by t, in
//                            order of deadline tick, then of scheduling; returns how many fired.
//                            fire may schedule, cancel and reschedule any timer (a timer it makes
//                            due by t fires within the same call), but must not call advance_to.
//                            A t earlier than now() fires nothing and leaves now() unchanged.
//                            fire must not throw: advance_to is noexcept.
//   next_deadline()          nullopt when no scheduled timer can fire (none is scheduled, or all
//                            lie beyond last_tick()); otherwise a time no later than the earliest
//                            firing time (the wheels may answer the start of the slot that holds
//                            it), so a caller can sleep until then and advance.
//   size()                   timers scheduled.
template <typename Q>
concept TimerQueue = requires(Q q, const Q cq, TimerId id, Time t) {
  { q.schedule(id, t) } -> std::same_as<void>;
  { q.cancel(id) } -> std::same_as<bool>;
  { q.reschedule(id, t) } -> std::same_as<bool>;
  {
    q.advance_to(t, [](TimerId) {})
    } -> std::same_as<std::size_t>;
  { cq.next_deadline() } -> std::same_as<std::optional<Time>>;
  { cq.now() } -> std::same_as<Time>;
  { cq.size() } -> std::same_as<std::size_t>;
  { cq.scheduled(id) } -> std::same_as<bool>;
  { cq.memory_bytes() } -> std::same_as<std::size_t>;
};

}  // namespace delayq::wheel
