#include "schedule/recurrence.h"

#include <algorithm>

#include "base/job.h"
#include "base/names.h"

namespace delayq::schedule {
namespace {

using Seconds = cctz::time_point<cctz::seconds>;

// a / b rounded toward minus infinity (b > 0).
std::int64_t floor_div(std::int64_t a, std::int64_t b) {
  return a / b - (a % b < 0 ? 1 : 0);
}

// Letters, digits, '_', '+', '-', in '/'-separated parts, none empty or "." or "..".
bool looks_like_a_zone_name(std::string_view name) {
  if (name.empty() || name.size() > 64) return false;
  std::size_t start = 0;
  while (start <= name.size()) {
    auto slash = name.find('/', start);
    if (slash == std::string_view::npos) slash = name.size();
    const std::string_view part = name.substr(start, slash - start);
    if (part.empty() || part == "." || part == "..") return false;
    for (const char c : part) {
      const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                      c == '_' || c == '+' || c == '-';
      if (!ok) return false;
    }
    start = slash + 1;
  }
  return true;
}

}  // namespace

Result<Zone> Zone::load(std::string_view name) {
  Zone zone;
  zone.name = std::string(name);
  // cctz also takes "localtime" (the host's zone) and "Fixed/..." names: not IANA names, and not
  // the same on every node.
  if (!looks_like_a_zone_name(name) || name == "localtime" || name.starts_with("Fixed/") ||
      !cctz::load_time_zone(zone.name, &zone.tz)) {
    return Status(Code::kInvalidArgument,
                  "tz: " + quoted_name(zone.name) +
                      " is not a time zone of the tz database (an IANA name "
                      "such as Europe/Paris, America/New_York or UTC)");
  }
  return zone;
}

Result<Recurrence> Recurrence::cron(std::string_view expression, std::string_view zone) {
  auto parsed = Cron::parse(expression);
  if (!parsed.is_ok()) return parsed.status();
  auto loaded = Zone::load(zone);
  if (!loaded.is_ok()) return loaded.status();
  Recurrence r;
  r.cron_ = std::move(parsed).value();
  r.zone_ = std::move(loaded).value();
  return r;
}

Result<Recurrence> Recurrence::every(std::chrono::milliseconds interval,
                                     std::int64_t start_unix_ms) {
  if (interval.count() < 1) {
    return Status(Code::kInvalidArgument, "every: the interval must be at least 1 ms");
  }
  Recurrence r;
  r.zone_.name = "UTC";
  r.zone_.tz = cctz::utc_time_zone();
  r.interval_ = interval;
  r.start_unix_ms_ = start_unix_ms;
  return r;
}

std::optional<std::int64_t> Recurrence::next_after(std::int64_t after_unix_ms) const {
  if (after_unix_ms >= kLastDueUnixMs) return std::nullopt;
  std::optional<std::int64_t> next;
  if (cron_) {
    next = next_cron(after_unix_ms);
  } else if (after_unix_ms < start_unix_ms_) {
    next = start_unix_ms_;
  } else {
    const std::int64_t n = floor_div(after_unix_ms - start_unix_ms_, interval_.count()) + 1;
    next = start_unix_ms_ + n * interval_.count();
  }
  if (next && *next > kLastDueUnixMs) return std::nullopt;
  return next;
}

// The local times the expression matches, from the civil time of `after` on, each made an
// instant (or two, or none) by the rules in the header; the least instant after `after` wins.
// An instant's least mapping never goes back as local times go forward, so the walk stops at
// the first local time whose least instant comes after the best found.
std::optional<std::int64_t> Recurrence::next_cron(std::int64_t after_unix_ms) const {
  const cctz::time_zone& tz = zone_.tz;
  const Seconds after{cctz::seconds(floor_div(after_unix_ms, 1000))};
  cctz::civil_second from = cctz::convert(after, tz);
  const bool both = cron_->wildcard_time();
  if (both) {
    // In the first pass of a repeated hour, the second pass's earlier local times come after.
    const auto here = tz.lookup(from);
    if (here.kind == cctz::time_zone::civil_lookup::REPEATED && after < here.trans) {
      from = std::min(from, cctz::convert(here.trans, tz));
    }
  }
  std::optional<Seconds> best;
  const auto consider = [&](Seconds at) {
    if (at > after && (!best || at < *best)) best = at;
  };
  for (auto local = cron_->next(from); local; local = cron_->next(*local + 1)) {
    const auto found = tz.lookup(*local);
    using Kind = cctz::time_zone::civil_lookup;
    const Seconds least = found.kind == Kind::SKIPPED ? found.trans : found.pre;
    if (best && least > *best) break;
    consider(least);
    if (found.kind == Kind::REPEATED && both) consider(found.post);
  }
  if (!best) return std::nullopt;
  return best->time_since_epoch().count() * 1000;
}

std::vector<std::int64_t> Recurrence::runs(std::int64_t after_unix_ms, std::size_t count) const {
  std::vector<std::int64_t> out;
  std::int64_t at = after_unix_ms;
  while (out.size() < count) {
    const auto next = next_after(at);
    if (!next) break;
    out.push_back(*next);
    at = *next;
  }
  return out;
}

std::string Zone::format(std::int64_t unix_ms) const {
  const cctz::time_point<std::chrono::milliseconds> at{std::chrono::milliseconds(unix_ms)};
  return cctz::format("%Y-%m-%dT%H:%M:%E3S%Ez", at, tz);
}

std::string Recurrence::format(std::int64_t unix_ms) const {
  return zone_.format(unix_ms);
}

}  // namespace delayq::schedule
