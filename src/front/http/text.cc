#include "front/http/text.h"

#include <array>
#include <boost/json.hpp>
#include <charconv>
#include <cmath>
#include <cstdio>

#include "base/job.h"
#include "base/names.h"

namespace delayq::front::http {
namespace json = boost::json;

namespace {

constexpr std::int64_t kMaxDurationMs = kMaxDelayMs;  // a TTR or a timeout too

bool is_digit(char c) {
  return c >= '0' && c <= '9';
}

Status bad_duration(std::string_view text, std::string_view why) {
  return {Code::kInvalidArgument, "bad duration " + quoted_name(text) + ": " + std::string(why) +
                                      " (examples: \"48h\", \"1h30m\", \"1500ms\", 250)"};
}

// Days from 1970-01-01 to the given civil date (proleptic Gregorian).
std::int64_t days_from_civil(std::int64_t y, unsigned m, unsigned d) {
  y -= m <= 2 ? 1 : 0;
  const std::int64_t era = (y >= 0 ? y : y - 399) / 400;
  const auto yoe = static_cast<unsigned>(y - era * 400);
  const unsigned doy = (153 * (m + (m > 2 ? -3U : 9U)) + 2) / 5 + d - 1;
  const unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + static_cast<std::int64_t>(doe) - 719468;
}

bool leap(std::int64_t y) {
  return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
}

}  // namespace

std::string format_duration(Millis duration) {
  static constexpr std::pair<std::string_view, std::int64_t> kUnits[] = {
      {"d", 86'400'000}, {"h", 3'600'000}, {"m", 60'000}, {"s", 1000}, {"ms", 1}};
  std::int64_t left = std::max<std::int64_t>(0, duration.count());
  if (left == 0) return "0ms";
  std::string out;
  for (const auto& [unit, ms] : kUnits) {
    if (left >= ms) {
      out += std::to_string(left / ms);
      out += unit;
      left %= ms;
    }
  }
  return out;
}

Result<Millis> parse_duration(std::string_view text) {
  if (text.empty()) return bad_duration(text, "empty");
  bool digits_only = true;
  for (const char c : text) digits_only = digits_only && is_digit(c);
  if (digits_only) {
    if (text.size() > 13) return bad_duration(text, "too long");
    std::int64_t ms = 0;
    for (const char c : text) ms = ms * 10 + (c - '0');
    if (ms > kMaxDurationMs) return bad_duration(text, "more than 100 years");
    return Millis{ms};
  }
  // Units from largest to smallest; each one used at most once, in this order.
  struct Unit {
    std::string_view name;
    double ms;
  };
  static constexpr std::array<Unit, 5> kUnits = {
      {{"d", 86400000.0}, {"h", 3600000.0}, {"m", 60000.0}, {"s", 1000.0}, {"ms", 1.0}}};
  double total = 0;
  std::size_t next_unit = 0;
  std::size_t i = 0;
  while (i < text.size()) {
    const std::size_t start = i;
    while (i < text.size() && is_digit(text[i])) ++i;
    if (i < text.size() && text[i] == '.') {
      const std::size_t point = ++i;
      while (i < text.size() && is_digit(text[i])) ++i;
      if (i == point) return bad_duration(text, "a digit must follow the point");
    }
    if (i == start || text[start] == '.') return bad_duration(text, "a number must come first");
    if (i - start > 15) return bad_duration(text, "number too long");
    const double number = std::stod(std::string(text.substr(start, i - start)));
    const std::size_t unit_start = i;
    while (i < text.size() && text[i] >= 'a' && text[i] <= 'z') ++i;
    const std::string_view unit = text.substr(unit_start, i - unit_start);
    if (unit.empty()) return bad_duration(text, "a unit must follow each number (d h m s ms)");
    std::size_t u = next_unit;
    while (u < kUnits.size() && kUnits[u].name != unit) ++u;
    if (u == kUnits.size()) {
      return bad_duration(text, "unknown unit '" + std::string(unit) + "' or units out of order");
    }
    total += number * kUnits[u].ms;
    next_unit = u + 1;
  }
  if (total > static_cast<double>(kMaxDurationMs)) return bad_duration(text, "more than 100 years");
  return Millis{static_cast<std::int64_t>(std::ceil(total))};
}

Result<Rate> parse_rate(std::string_view text) {
  const Status bad(
      Code::kInvalidArgument,
      "a rate is <jobs>/<duration>, e.g. \"10/s\" or \"600/1m\", not " + quoted_name(text));
  const std::size_t slash = text.find('/');
  if (slash == std::string_view::npos || slash == 0) return bad;
  std::uint64_t jobs = 0;
  for (const char c : text.substr(0, slash)) {
    if (c < '0' || c > '9' || jobs > 1'000'000) return bad;
    jobs = jobs * 10 + static_cast<std::uint64_t>(c - '0');
  }
  if (jobs == 0 || jobs > 1'000'000) {
    return Status(Code::kInvalidArgument, "a rate's jobs: 1 to 1,000,000");
  }
  std::string period(text.substr(slash + 1));
  if (!period.empty() && period[0] >= 'a' && period[0] <= 'z') period.insert(0, "1");
  auto duration = parse_duration(period);
  if (!duration.is_ok()) return bad;
  if (duration.value() < Millis{1} || duration.value() > Millis{86'400'000}) {
    return Status(Code::kInvalidArgument, "a rate's period: 1ms to 1d");
  }
  return Rate{static_cast<std::uint32_t>(jobs), duration.value()};
}

std::string format_rate(Rate rate) {
  return std::to_string(rate.jobs) + "/" + format_duration(rate.period);
}

Result<std::int64_t> parse_instant(std::string_view text) {
  auto bad = [&text](std::string_view why) {
    return Status(Code::kInvalidArgument,
                  "bad time " + quoted_name(text) + ": " + std::string(why) +
                      " (RFC 3339, e.g. \"2026-11-24T10:00:00Z\", or Unix milliseconds)");
  };
  std::size_t i = 0;
  auto number = [&](std::size_t digits, std::int64_t* out) {
    if (i + digits > text.size()) return false;
    std::int64_t value = 0;
    for (std::size_t k = 0; k < digits; ++k) {
      if (!is_digit(text[i + k])) return false;
      value = value * 10 + (text[i + k] - '0');
    }
    i += digits;
    *out = value;
    return true;
  };
  auto expect = [&](std::string_view chars) {
    if (i >= text.size() || chars.find(text[i]) == std::string_view::npos) return false;
    ++i;
    return true;
  };
  std::int64_t year = 0, month = 0, day = 0, hour = 0, minute = 0, second = 0;
  if (!number(4, &year) || !expect("-") || !number(2, &month) || !expect("-") || !number(2, &day) ||
      !expect("Tt ") || !number(2, &hour) || !expect(":") || !number(2, &minute) || !expect(":") ||
      !number(2, &second)) {
    return bad("expected YYYY-MM-DDTHH:MM:SS");
  }
  static constexpr int kDays[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  if (year < 1970) return bad("before 1970");
  if (month < 1 || month > 12 || day < 1 ||
      day > kDays[month - 1] + (month == 2 && leap(year) ? 1 : 0) || hour > 23 || minute > 59 ||
      second > 59) {
    return bad("no such date or time");
  }
  // Fractions: milliseconds, rounded up beyond them (a due time must never come early).
  std::int64_t ms = 0;
  if (i < text.size() && text[i] == '.') {
    ++i;
    const std::size_t start = i;
    std::int64_t scale = 100;
    bool rest = false;
    while (i < text.size() && is_digit(text[i])) {
      if (scale > 0) {
        ms += (text[i] - '0') * scale;
        scale /= 10;
      } else if (text[i] != '0') {
        rest = true;
      }
      ++i;
    }
    if (i == start) return bad("digits must follow the '.'");
    if (rest) ++ms;
  }
  std::int64_t offset_minutes = 0;
  if (expect("Zz")) {
  } else if (i < text.size() && (text[i] == '+' || text[i] == '-')) {
    const bool minus = text[i] == '-';
    ++i;
    std::int64_t oh = 0, om = 0;
    if (!number(2, &oh) || !expect(":") || !number(2, &om) || oh > 23 || om > 59) {
      return bad("bad UTC offset (expected +HH:MM)");
    }
    offset_minutes = (minus ? -1 : 1) * (oh * 60 + om);
  } else {
    return bad("a time zone must end it ('Z' or +HH:MM)");
  }
  if (i != text.size()) return bad("unexpected text after the time zone");
  const std::int64_t days =
      days_from_civil(year, static_cast<unsigned>(month), static_cast<unsigned>(day));
  const std::int64_t seconds = days * 86400 + hour * 3600 + minute * 60 + second;
  const std::int64_t unix_ms = (seconds - offset_minutes * 60) * 1000 + ms;
  if (unix_ms < 0) return bad("before 1970");
  if (unix_ms > kLastDueUnixMs) return bad("after 9999-12-31T23:59:59.999Z");
  return unix_ms;
}

std::string format_instant(std::int64_t unix_ms) {
  const std::int64_t ms = ((unix_ms % 1000) + 1000) % 1000;
  const std::int64_t total_seconds = (unix_ms - ms) / 1000;
  std::int64_t days = total_seconds / 86400;
  std::int64_t rest = total_seconds % 86400;
  if (rest < 0) {
    rest += 86400;
    --days;
  }
  // Civil date from days since 1970-01-01.
  days += 719468;
  const std::int64_t era = (days >= 0 ? days : days - 146096) / 146097;
  const auto doe = static_cast<unsigned>(days - era * 146097);
  const unsigned yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
  const unsigned doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
  const unsigned mp = (5 * doy + 2) / 153;
  const unsigned d = doy - (153 * mp + 2) / 5 + 1;
  const unsigned m = mp < 10 ? mp + 3 : mp - 9;
  const std::int64_t y = static_cast<std::int64_t>(yoe) + era * 400 + (m <= 2 ? 1 : 0);
  // "YYYY-MM-DDTHH:MM:SS.mmmZ", digit by digit (this runs for every job an answer shows).
  std::string out = "0000-00-00T00:00:00.000Z";
  auto put = [&out](std::size_t at, std::size_t width, std::int64_t value) {
    for (std::size_t i = 0; i < width; ++i) {
      out[at + width - 1 - i] = static_cast<char>('0' + value % 10);
      value /= 10;
    }
  };
  put(0, 4, y);
  put(5, 2, m);
  put(8, 2, d);
  put(11, 2, rest / 3600);
  put(14, 2, rest / 60 % 60);
  put(17, 2, rest % 60);
  put(20, 3, ms);
  return out;
}

namespace {
constexpr std::string_view kAlphabet =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

int base64_value(char c) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return c - 'a' + 26;
  if (c >= '0' && c <= '9') return c - '0' + 52;
  if (c == '+') return 62;
  if (c == '/') return 63;
  return -1;
}
}  // namespace

std::string base64_encode(std::string_view bytes) {
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  std::size_t i = 0;
  for (; i + 3 <= bytes.size(); i += 3) {
    const auto n = static_cast<std::uint32_t>(static_cast<unsigned char>(bytes[i])) << 16 |
                   static_cast<std::uint32_t>(static_cast<unsigned char>(bytes[i + 1])) << 8 |
                   static_cast<unsigned char>(bytes[i + 2]);
    out += kAlphabet[n >> 18];
    out += kAlphabet[n >> 12 & 63];
    out += kAlphabet[n >> 6 & 63];
    out += kAlphabet[n & 63];
  }
  const std::size_t left = bytes.size() - i;
  if (left > 0) {
    std::uint32_t n = static_cast<std::uint32_t>(static_cast<unsigned char>(bytes[i])) << 16;
    if (left == 2) n |= static_cast<std::uint32_t>(static_cast<unsigned char>(bytes[i + 1])) << 8;
    out += kAlphabet[n >> 18];
    out += kAlphabet[n >> 12 & 63];
    out += left == 2 ? kAlphabet[n >> 6 & 63] : '=';
    out += '=';
  }
  return out;
}

Result<std::string> base64_decode(std::string_view text) {
  if (text.size() % 4 != 0) {
    return Status(Code::kInvalidArgument, "bad base64: length is not a multiple of 4");
  }
  std::string out;
  out.reserve(text.size() / 4 * 3);
  for (std::size_t i = 0; i < text.size(); i += 4) {
    const bool last = i + 4 == text.size();
    int v[4];
    int padding = 0;
    for (std::size_t k = 0; k < 4; ++k) {
      const char c = text[i + k];
      if (c == '=' && last && k >= 2) {
        v[k] = 0;
        ++padding;
        continue;
      }
      v[k] = padding > 0 ? -1 : base64_value(c);
      if (v[k] < 0) {
        return Status(Code::kInvalidArgument,
                      "bad base64: unexpected character at " + std::to_string(i + k));
      }
    }
    const auto n = static_cast<std::uint32_t>(v[0] << 18 | v[1] << 12 | v[2] << 6 | v[3]);
    out += static_cast<char>(n >> 16 & 0xFF);
    if (padding < 2) out += static_cast<char>(n >> 8 & 0xFF);
    if (padding < 1) out += static_cast<char>(n & 0xFF);
  }
  return out;
}

bool valid_utf8(std::string_view bytes) noexcept {
  std::size_t i = 0;
  while (i < bytes.size()) {
    const auto c = static_cast<unsigned char>(bytes[i]);
    std::size_t extra = 0;
    std::uint32_t code = 0;
    if (c < 0x80) {
      ++i;
      continue;
    } else if ((c & 0xE0) == 0xC0) {
      extra = 1;
      code = c & 0x1FU;
    } else if ((c & 0xF0) == 0xE0) {
      extra = 2;
      code = c & 0x0FU;
    } else if ((c & 0xF8) == 0xF0) {
      extra = 3;
      code = c & 0x07U;
    } else {
      return false;
    }
    if (i + extra >= bytes.size()) return false;
    for (std::size_t k = 1; k <= extra; ++k) {
      const auto next = static_cast<unsigned char>(bytes[i + k]);
      if ((next & 0xC0) != 0x80) return false;
      code = code << 6 | (next & 0x3FU);
    }
    // Overlong forms, surrogates and code points beyond Unicode are not UTF-8.
    static constexpr std::uint32_t kMin[] = {0, 0x80, 0x800, 0x10000};
    if (code < kMin[extra] || code > 0x10FFFF || (code >= 0xD800 && code <= 0xDFFF)) return false;
    i += extra + 1;
  }
  return true;
}

void append_string(std::string& out, std::string_view text) {
  static constexpr char kHex[] = "0123456789abcdef";
  out += '"';
  for (const char c : text) {
    const auto u = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (u < 0x20) {
      out += "\\u00";
      out += kHex[u >> 4];
      out += kHex[u & 15];
    } else {
      out += c;
    }
  }
  out += '"';
}

namespace {

void write(std::string& out, const json::value& value);

void write(std::string& out, const json::object& object) {
  out += '{';
  bool first = true;
  for (const auto& [key, item] : object) {
    if (!first) out += ',';
    first = false;
    append_string(out, key);
    out += ':';
    write(out, item);
  }
  out += '}';
}

void write(std::string& out, const json::value& value) {
  switch (value.kind()) {
    case json::kind::object:
      return write(out, value.get_object());
    case json::kind::array: {
      out += '[';
      bool first = true;
      for (const json::value& item : value.get_array()) {
        if (!first) out += ',';
        first = false;
        write(out, item);
      }
      out += ']';
      return;
    }
    case json::kind::double_: {
      const double number = value.get_double();
      if (!std::isfinite(number)) break;  // Boost.JSON's own spelling (no JSON has one)
      // The shortest text that reads back as the same double, plain where that is shorter.
      char text[64];
      const auto written = std::to_chars(text, text + sizeof text, number);
      out.append(text, written.ptr);
      return;
    }
    case json::kind::string:
      return append_string(out, value.get_string());
    default:
      break;
  }
  out += json::serialize(value);
}

}  // namespace

std::string to_text(const json::value& value) {
  std::string out;
  write(out, value);
  return out;
}

std::string to_text(const json::object& object) {
  std::string out;
  write(out, object);
  return out;
}

}  // namespace delayq::front::http
