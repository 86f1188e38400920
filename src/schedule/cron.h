// cron.h — a cron expression, as Vixie cron reads it, and the civil times it matches.
// Five fields (minute hour day-of-month month day-of-week) or six with seconds first; each a
// list of `*`, a value, a range `a-b`, with an optional step `/n` (`a/n` runs from a to the
// field's end); months JAN-DEC and days SUN-SAT by name, any case; day of week 0-7, 7 being
// Sunday; and @yearly (@annually), @monthly, @weekly, @daily (@midnight), @hourly. Day of month
// and day of week combine as Vixie cron combines them: when both are restricted (neither starts
// with `*`), a day matches if either does; otherwise both must (so `0 9 1-7 * MON` is "the
// first seven days, and every Monday", not "the first Monday").
// Times here are civil (a calendar and a clock, no zone): recurrence.h maps them to instants.
// Pure and immutable once parsed; costs: next() jumps field by field, a few dozen steps a match.
// The rules for users: docs/schedules.md
#pragma once

#include <cctz/civil_time.h>

#include <bitset>
#include <optional>
#include <string>
#include <string_view>

#include "base/status.h"

namespace delayq::schedule {

class Cron {
 public:
  // kInvalidArgument naming the field and the position (1-based, in `text`) of what is wrong:
  // "cron: day of month at 7: 32 is outside 1-31".
  static Result<Cron> parse(std::string_view text);

  [[nodiscard]] bool matches(const cctz::civil_second& at) const;
  // The first civil second at or after `from` that matches; nullopt if none ever does (such as
  // `0 0 30 2 *`): the search spans one cycle of the calendar, 400 years.
  [[nodiscard]] std::optional<cctz::civil_second> next(const cctz::civil_second& from) const;
  // Whether the minute or the hour field starts with `*`: such a schedule follows the clock
  // through a repeated hour (it runs at both occurrences of a local time), where a fixed time
  // of day runs once (recurrence.h).
  [[nodiscard]] bool wildcard_time() const noexcept { return wildcard_time_; }
  // The expression as given.
  [[nodiscard]] const std::string& text() const noexcept { return text_; }

 private:
  [[nodiscard]] bool day_matches(const cctz::civil_day& day) const;

  std::string text_;
  std::bitset<60> seconds_;
  std::bitset<60> minutes_;
  std::bitset<24> hours_;
  std::bitset<32> days_;       // 1-31
  std::bitset<13> months_;     // 1-12
  std::bitset<7> weekdays_;    // 0 Sunday .. 6 Saturday
  bool day_star_ = false;      // the day-of-month field starts with '*'
  bool weekday_star_ = false;  // the day-of-week field starts with '*'
  bool wildcard_time_ = false;
};

}  // namespace delayq::schedule
