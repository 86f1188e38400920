#include "schedule/cron.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <charconv>
#include <vector>

namespace delayq::schedule {
namespace {

struct Field {
  const char* name;
  int min;
  int max;
  std::array<const char*, 13> names;  // by value from `min`; nullptr past the last
};

// The first value at or after `from` whose bit is set; nullopt if none.
template <std::size_t N>
std::optional<int> next_set(const std::bitset<N>& bits, int from) {
  for (auto i = static_cast<std::size_t>(from); i < N; ++i) {
    if (bits[i]) return static_cast<int>(i);
  }
  return std::nullopt;
}

constexpr Field kSecond{"second", 0, 59, {}};
constexpr Field kMinute{"minute", 0, 59, {}};
constexpr Field kHour{"hour", 0, 23, {}};
constexpr Field kDay{"day of month", 1, 31, {}};
constexpr Field kMonth{
    "month",
    1,
    12,
    {"jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec", nullptr}};
// 7 is Sunday too (folded into 0 once parsed).
constexpr Field kWeekday{
    "day of week", 0, 7, {"sun", "mon", "tue", "wed", "thu", "fri", "sat", nullptr}};

// A word of the expression and where it starts (1-based).
struct Word {
  std::string_view text;
  std::size_t at = 0;
};

std::vector<Word> words_of(std::string_view text) {
  std::vector<Word> words;
  std::size_t i = 0;
  while (i < text.size()) {
    while (i < text.size() && std::isspace(static_cast<unsigned char>(text[i])) != 0) ++i;
    const std::size_t start = i;
    while (i < text.size() && std::isspace(static_cast<unsigned char>(text[i])) == 0) ++i;
    if (i > start) words.push_back({text.substr(start, i - start), start + 1});
  }
  return words;
}

Status error(const Field& field, std::size_t at, const std::string& what) {
  return {Code::kInvalidArgument,
          "cron: " + std::string(field.name) + " at " + std::to_string(at) + ": " + what};
}

// A value by number or, where the field has them, by name.
Result<int> value_of(const Field& field, std::string_view token, std::size_t at) {
  if (token.empty()) return error(field, at, "a value is missing");
  int value = 0;
  const auto [end, ec] = std::from_chars(token.data(), token.data() + token.size(), value);
  if (ec == std::errc() && end == token.data() + token.size()) {
    if (value < field.min || value > field.max) {
      return error(field, at,
                   std::string(token) + " is outside " + std::to_string(field.min) + "-" +
                       std::to_string(field.max));
    }
    return value;
  }
  std::string lower(token);
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  for (std::size_t i = 0; i < field.names.size() && field.names[i] != nullptr; ++i) {
    if (lower == field.names[i]) return field.min + static_cast<int>(i);
  }
  return error(field, at, "'" + std::string(token) + "' is not a " + field.name);
}

// One item of a list: `*`, `v`, `a-b`, each with an optional `/step`; its values set in `out`
// (indexed by value).
template <std::size_t N>
Status parse_item(const Field& field, std::string_view item, std::size_t at, std::bitset<N>& out) {
  std::string_view range = item;
  int step = 1;
  if (const auto slash = item.find('/'); slash != std::string_view::npos) {
    range = item.substr(0, slash);
    const std::string_view text = item.substr(slash + 1);
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), step);
    if (ec != std::errc() || end != text.data() + text.size() || step < 1 ||
        step > field.max - field.min + 1) {
      return error(
          field, at + slash + 1,
          "step '" + std::string(text) + "' is not 1-" + std::to_string(field.max - field.min + 1));
    }
  }
  int first = field.min;
  int last = field.max;
  if (range != "*") {
    const auto dash = range.find('-');
    auto low = value_of(field, range.substr(0, dash), at);
    if (!low.is_ok()) return low.status();
    first = low.value();
    last = first;
    if (dash != std::string_view::npos) {
      auto high = value_of(field, range.substr(dash + 1), at + dash + 1);
      if (!high.is_ok()) return high.status();
      last = high.value();
      if (last < first) {
        return error(field, at, "range " + std::string(range) + " runs backwards");
      }
    } else if (item.find('/') != std::string_view::npos) {
      last = field.max;  // a/n: from a to the field's end
    }
  }
  for (int v = first; v <= last; v += step) out.set(static_cast<std::size_t>(v));
  return Status::ok();
}

template <std::size_t N>
Status parse_field(const Field& field, const Word& word, std::bitset<N>& out) {
  std::size_t start = 0;
  while (start <= word.text.size()) {
    auto comma = word.text.find(',', start);
    if (comma == std::string_view::npos) comma = word.text.size();
    const std::string_view item = word.text.substr(start, comma - start);
    if (item.empty()) return error(field, word.at + start, "an empty list item");
    if (Status s = parse_item(field, item, word.at + start, out); !s.is_ok()) return s;
    start = comma + 1;
  }
  return Status::ok();
}

std::string_view expand_macro(std::string_view text) {
  if (text == "@yearly" || text == "@annually") return "0 0 1 1 *";
  if (text == "@monthly") return "0 0 1 * *";
  if (text == "@weekly") return "0 0 * * 0";
  if (text == "@daily" || text == "@midnight") return "0 0 * * *";
  if (text == "@hourly") return "0 * * * *";
  return {};
}

}  // namespace

Result<Cron> Cron::parse(std::string_view text) {
  Cron cron;
  cron.text_ = std::string(text);
  std::vector<Word> words = words_of(text);
  if (words.size() == 1 && words[0].text.starts_with('@')) {
    const std::string_view expanded = expand_macro(words[0].text);
    if (expanded.empty()) {
      return Status(Code::kInvalidArgument,
                    "cron: '" + std::string(words[0].text) +
                        "' is not one of @yearly @annually @monthly @weekly @daily @midnight "
                        "@hourly");
    }
    words = words_of(expanded);
    for (auto& word : words) word.at = 1;  // errors cannot happen here; point at the macro
  }
  if (words.size() != 5 && words.size() != 6) {
    return Status(Code::kInvalidArgument,
                  "cron: 5 fields (minute hour day-of-month month day-of-week) or 6 (seconds "
                  "first), not " +
                      std::to_string(words.size()));
  }
  std::size_t i = 0;
  if (words.size() == 6) {
    if (Status s = parse_field(kSecond, words[i++], cron.seconds_); !s.is_ok()) return s;
  } else {
    cron.seconds_.set(0);
  }
  const Word& minute = words[i++];
  const Word& hour = words[i++];
  const Word& day = words[i++];
  const Word& month = words[i++];
  const Word& weekday = words[i++];
  std::bitset<8> weekdays;
  for (const Status& s :
       {parse_field(kMinute, minute, cron.minutes_), parse_field(kHour, hour, cron.hours_),
        parse_field(kDay, day, cron.days_), parse_field(kMonth, month, cron.months_),
        parse_field(kWeekday, weekday, weekdays)}) {
    if (!s.is_ok()) return s;
  }
  for (std::size_t d = 0; d < 7; ++d) cron.weekdays_[d] = weekdays[d];
  if (weekdays[7]) cron.weekdays_.set(0);
  cron.day_star_ = day.text.starts_with('*');
  cron.weekday_star_ = weekday.text.starts_with('*');
  cron.wildcard_time_ = minute.text.starts_with('*') || hour.text.starts_with('*');
  return cron;
}

bool Cron::day_matches(const cctz::civil_day& day) const {
  const bool by_day = days_[static_cast<std::size_t>(day.day())];
  // cctz::weekday runs Monday (0) to Sunday (6); cron's from Sunday (0).
  const auto weekday = (static_cast<int>(cctz::get_weekday(day)) + 1) % 7;
  const bool by_weekday = weekdays_[static_cast<std::size_t>(weekday)];
  if (day_star_ || weekday_star_) return by_day && by_weekday;
  return by_day || by_weekday;
}

bool Cron::matches(const cctz::civil_second& at) const {
  return months_[static_cast<std::size_t>(at.month())] && day_matches(cctz::civil_day(at)) &&
         hours_[static_cast<std::size_t>(at.hour())] &&
         minutes_[static_cast<std::size_t>(at.minute())] &&
         seconds_[static_cast<std::size_t>(at.second())];
}

// Within a day, the next hour, minute and second that match are found in the bitsets, not
// stepped to one by one (from 09:00:01, "0 9 * * *" looks at tomorrow next, not at 3,500
// seconds of today).
std::optional<cctz::civil_second> Cron::next(const cctz::civil_second& from) const {
  // The Gregorian calendar, days of the week included, repeats every 400 years (146,097 days,
  // a whole number of weeks): what matches no date in 400 years matches none. A shorter search
  // missed real ones: 29 February on a Sunday comes 28 and 40 years apart.
  const auto limit = from.year() + 400;
  cctz::civil_second at = from;
  while (at.year() <= limit) {
    if (!months_[static_cast<std::size_t>(at.month())]) {
      at = cctz::civil_second(cctz::civil_month(at) + 1);
      continue;
    }
    if (!day_matches(cctz::civil_day(at))) {
      at = cctz::civil_second(cctz::civil_day(at) + 1);
      continue;
    }
    const auto hour = next_set(hours_, at.hour());
    if (!hour) {
      at = cctz::civil_second(cctz::civil_day(at) + 1);
      continue;
    }
    if (*hour != at.hour()) at = cctz::civil_second(at.year(), at.month(), at.day(), *hour, 0, 0);
    const auto minute = next_set(minutes_, at.minute());
    if (!minute) {
      at = cctz::civil_second(cctz::civil_hour(at) + 1);
      continue;
    }
    if (*minute != at.minute()) {
      at = cctz::civil_second(at.year(), at.month(), at.day(), at.hour(), *minute, 0);
    }
    const auto second = next_set(seconds_, at.second());
    if (!second) {
      at = cctz::civil_second(cctz::civil_minute(at) + 1);
      continue;
    }
    return cctz::civil_second(at.year(), at.month(), at.day(), at.hour(), at.minute(), *second);
  }
  return std::nullopt;
}

}  // namespace delayq::schedule
