// definition.h — a recurring schedule as a user sets it (PUT /v1/schedules/{name}), and the one
// check every broker and front-end makes of it: compile() refuses what cannot run, with a message
// naming the field ("cron: day of month at 7: 32 is outside 1-31", "tz: unknown time zone ..."),
// and pairs what it accepts with its Recurrence. Pure; no clock. The rules for users, with every
// field's default and limit: docs/schedules.md
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "base/status.h"
#include "schedule/recurrence.h"

namespace delayq::schedule {

using Millis = std::chrono::milliseconds;

// What happens to instants the server did not reach in time (it was down, or the schedule
// paused): none of them run (kSkip); one run for them all, if the latest is within
// max_lateness (kOnce, the default); or each of those within max_lateness runs (kAll).
enum class Misfire : std::uint8_t { kSkip, kOnce, kAll };
// What a run does while the previous run's job still exists, in any state: it runs anyway
// (kAllow, the default); it does not run (kSkip); or it waits until that job is gone, one run
// at most, later ones skipped (kBufferOne).
enum class Overlap : std::uint8_t { kAllow, kSkip, kBufferOne };

[[nodiscard]] std::string_view misfire_name(Misfire misfire) noexcept;
[[nodiscard]] std::string_view overlap_name(Overlap overlap) noexcept;
[[nodiscard]] std::optional<Misfire> parse_misfire(std::string_view text) noexcept;
[[nodiscard]] std::optional<Overlap> parse_overlap(std::string_view text) noexcept;

// Limits, each said in docs/schedules.md.
inline constexpr std::size_t kMaxScheduleNameBytes = 180;  // a run's key adds "@" and 13 digits
inline constexpr std::size_t kMaxCatchUpRuns = 1000;       // misfire "all", and a backfill
inline constexpr Millis kMinEvery{1000};                   // the shortest interval
inline constexpr Millis kMaxJitter{std::chrono::hours(24)};
inline constexpr std::size_t kMaxCronBytes = 1024;  // six fields listing every value: 526

struct Definition {
  std::string name;  // 1-180 bytes of letters, digits and "-_.:"
  std::string tube;  // where its runs are put
  // Exactly one of: a cron expression (cron.h), or an interval from start_unix_ms (without one,
  // compile() sets it to the first run, one interval after the moment the schedule is set).
  std::string cron;
  Millis every{0};
  std::string zone = "UTC";  // IANA name; cron fields are matched in its local time
  // Each run's job.
  std::string body;
  std::uint32_t priority = 0;
  std::chrono::seconds ttr{60};
  std::string url;  // push delivery: the job's own URL (its tube needs a webhook)
  std::string content_type;
  std::string group;
  // The schedule's span and length: no run before start or after end; at most `limit` runs.
  std::optional<std::int64_t> start_unix_ms;
  std::optional<std::int64_t> end_unix_ms;
  std::optional<std::uint64_t> limit;
  // Each scheduled run is due at its instant plus a random amount in [0, jitter], drawn once per
  // run (the job keeps its due time).
  Millis jitter{0};
  Misfire misfire = Misfire::kOnce;
  Millis max_lateness{std::chrono::hours(1)};
  Overlap overlap = Overlap::kAllow;
  bool paused = false;

  friend bool operator==(const Definition&, const Definition&) = default;
};

// A definition that can run, with its recurrence.
struct Compiled {
  Definition definition;
  Recurrence recurrence;
};

// kInvalidArgument naming the field for anything out of range. `now_unix_ms` anchors an
// interval without start_unix_ms; max_name_bytes is the broker's limit on tube names, keys and
// groups (a run's key is the name, "@" and its instant).
[[nodiscard]] Result<Compiled> compile(Definition definition, std::int64_t now_unix_ms,
                                       std::size_t max_name_bytes);

// The key of the run at `instant_unix_ms`: "<name>@<instant>". The same run always has the
// same key, so a run put twice (a retry, a restart, another node) is one job.
[[nodiscard]] std::string run_key(std::string_view name, std::int64_t instant_unix_ms);
// The schedule name and instant of a run's key; nullopt for a key no schedule makes.
struct RunOf {
  std::string_view name;
  std::int64_t instant_unix_ms = 0;
};
[[nodiscard]] std::optional<RunOf> parse_run_key(std::string_view key);

}  // namespace delayq::schedule
