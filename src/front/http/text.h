// text.h — the HTTP API's small text formats, pure functions: durations ("48h", "1h30m",
// "1500ms", or a number of milliseconds), instants (RFC 3339 such as "2026-11-24T10:00:00Z" or
// "...+02:00", with optional fractions of a second; or Unix milliseconds), base64 for bodies
// that are not UTF-8, UTF-8 validation, and JSON text (string literals, numbers as people write
// them). Boost has base64 only in a detail namespace, so it is here, small and tested. Every
// parser says what was wrong in its error.
#pragma once

#include <boost/json/fwd.hpp>
#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>

#include "base/status.h"

namespace delayq::front::http {

using Millis = std::chrono::milliseconds;

// A JSON string literal for `text` (UTF-8), appended to out.
void append_string(std::string& out, std::string_view text);
// JSON text for a tree, as boost::json::serialize writes it but for numbers with a fraction,
// written as people write them (0.5, 2.5, 1000) where Boost.JSON writes 5E-1, 2.5E0, 1E3.
[[nodiscard]] std::string to_text(const boost::json::value& value);
[[nodiscard]] std::string to_text(const boost::json::object& object);

// A duration: one or more <number><unit> with units d, h, m, s, ms (largest first, each at most
// once: "1d2h", "90s", "250ms", "1.5s"), or digits alone meaning milliseconds. At most 100 years.
Result<Millis> parse_duration(std::string_view text);
// A duration as parse_duration reads it, in whole units from the largest: "1h", "1m30s",
// "1s500ms", "0ms".
std::string format_duration(Millis duration);
// A rate, "<jobs>/<duration>": "10/s", "600/1m", "1/1500ms" (a unit alone means one of it).
// jobs 1 to 1,000,000; the duration as parse_duration reads it, at least 1 ms and at most a day.
struct Rate {
  std::uint32_t jobs = 0;
  Millis period{0};
};
Result<Rate> parse_rate(std::string_view text);
// "10/1s", "600/1m", "1/1s500ms": what parse_rate reads back.
std::string format_rate(Rate rate);
// An instant in RFC 3339 ("2026-11-24T10:00:00Z", "2026-11-24T10:00:00.250+02:00", a space for
// the T is accepted), as Unix milliseconds (fractions beyond the millisecond are rounded up, so
// a due time is never early). Years 1970-9999.
Result<std::int64_t> parse_instant(std::string_view text);
// Unix milliseconds as RFC 3339 in UTC with milliseconds: "2026-11-24T10:00:00.000Z".
std::string format_instant(std::int64_t unix_ms);

std::string base64_encode(std::string_view bytes);
// Standard alphabet with padding; whitespace is not allowed.
Result<std::string> base64_decode(std::string_view text);
[[nodiscard]] bool valid_utf8(std::string_view bytes) noexcept;

}  // namespace delayq::front::http
