// recurrence.h — when a schedule runs: a cron expression read in a time zone, or a fixed
// interval in absolute time. next_after() gives the first run strictly after a moment, so a
// caller walks the runs one by one and never gets one twice.
// A cron expression matches local (civil) times; each becomes an instant by the zone's rules,
// from the system's tz database (cctz over /usr/share/zoneinfo):
//   - a local time that does not exist (clocks jump forward) runs at the first instant after
//     the jump;
//   - a local time that occurs twice (clocks fall back) runs once, at its first occurrence, unless
//     the minute or hour field starts with `*` (Cron::wildcard_time()): such a schedule follows
//     the clock and runs at both (an hourly schedule does not lose the repeated hour);
//   - two local times that become the same instant run once.
// Runs fall on whole seconds (cron) or on start + k * interval (every). Immutable; cheap to copy
// (the zone is shared by cctz). The rules for users, with examples: docs/schedules.md
#pragma once

#include <cctz/time_zone.h>

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "schedule/cron.h"

namespace delayq::schedule {

// An IANA time zone ("Europe/Paris", "UTC", "Etc/GMT+5"). kInvalidArgument for a name the tz
// database does not have, and for anything that is not such a name ("localtime", paths).
struct Zone {
  static Result<Zone> load(std::string_view name);
  // An instant as RFC 3339 in this zone, with its offset ("2026-03-29T03:00:00.000+02:00").
  [[nodiscard]] std::string format(std::int64_t unix_ms) const;
  std::string name;
  cctz::time_zone tz;
};

class Recurrence {
 public:
  static Result<Recurrence> cron(std::string_view expression, std::string_view zone);
  // Every `interval` (at least 1 ms) from `start_unix_ms`: runs at start, start + interval, ...
  static Result<Recurrence> every(std::chrono::milliseconds interval, std::int64_t start_unix_ms);

  // The first run strictly after `after_unix_ms`; nullopt when none comes (a cron expression
  // that matches no date after it, or none by the last due time a job may have,
  // kLastDueUnixMs: the end of 9999).
  [[nodiscard]] std::optional<std::int64_t> next_after(std::int64_t after_unix_ms) const;
  // Up to `count` runs strictly after `after_unix_ms`, in order.
  [[nodiscard]] std::vector<std::int64_t> runs(std::int64_t after_unix_ms, std::size_t count) const;
  // A run as RFC 3339 in the zone, with its offset ("2026-03-29T03:00:00.000+02:00"); UTC for an
  // interval.
  [[nodiscard]] std::string format(std::int64_t unix_ms) const;

  [[nodiscard]] const std::optional<Cron>& cron_expression() const noexcept { return cron_; }
  [[nodiscard]] const Zone& zone() const noexcept { return zone_; }

 private:
  [[nodiscard]] std::optional<std::int64_t> next_cron(std::int64_t after_unix_ms) const;

  std::optional<Cron> cron_;
  Zone zone_;
  std::chrono::milliseconds interval_{0};
  std::int64_t start_unix_ms_ = 0;
};

}  // namespace delayq::schedule
