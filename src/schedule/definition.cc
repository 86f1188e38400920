#include "schedule/definition.h"

#include <algorithm>
#include <charconv>

#include "base/job.h"
#include "base/names.h"

namespace delayq::schedule {
namespace {

bool valid_name_char(char c) noexcept {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
         c == '_' || c == '.' || c == ':';
}

Status invalid(std::string message) {
  return {Code::kInvalidArgument, std::move(message)};
}

Status check_fields(const Definition& d, std::size_t max_name_bytes) {
  if (d.name.empty() || d.name.size() > kMaxScheduleNameBytes ||
      !std::all_of(d.name.begin(), d.name.end(), valid_name_char)) {
    return invalid("name: 1 to " + std::to_string(kMaxScheduleNameBytes) +
                   " bytes of letters, digits and -_.:");
  }
  if (d.name.size() + 16 > max_name_bytes) {  // "@" and up to 15 digits
    return invalid("name: a run's key (name@instant) would be longer than " +
                   std::to_string(max_name_bytes) + " bytes");
  }
  if (Status s = check_tube_name(d.tube, max_name_bytes); !s.is_ok()) {
    return invalid("tube: " + s.message());
  }
  if (Status s = check_name("group", d.group, max_name_bytes); !s.is_ok()) {
    return invalid("group: " + s.message());
  }
  if (d.cron.size() > kMaxCronBytes || !std::all_of(d.cron.begin(), d.cron.end(), [](char c) {
        return (c >= 0x20 && c < 0x7F) || c == '\t';
      })) {
    return invalid("cron: at most " + std::to_string(kMaxCronBytes) +
                   " bytes of printable ASCII (fields apart by spaces or tabs)");
  }
  if (d.cron.empty() == (d.every.count() == 0)) {
    return invalid("cron, every: exactly one of the two is needed");
  }
  if (d.every.count() != 0 && d.every < kMinEvery) {
    return invalid("every: the interval must be at least 1s");
  }
  if (d.ttr.count() < 0 || d.ttr.count() > 0xFFFFFFFFLL) return invalid("ttr: out of range");
  if (d.jitter.count() < 0 || d.jitter > kMaxJitter) return invalid("jitter: 0 to 24h");
  if (d.max_lateness.count() < 0) return invalid("max_lateness: must not be negative");
  if (d.limit && *d.limit == 0) return invalid("limit: at least 1");
  for (const auto& [field, at] :
       {std::pair{"start_at", d.start_unix_ms}, std::pair{"end_at", d.end_unix_ms}}) {
    if (at && (*at < 0 || *at > kLastDueUnixMs))
      return invalid(std::string(field) + ": out of range");
  }
  if (d.start_unix_ms && d.end_unix_ms && *d.end_unix_ms < *d.start_unix_ms) {
    return invalid("end_at: before start_at");
  }
  return Status::ok();
}

}  // namespace

std::string_view misfire_name(Misfire misfire) noexcept {
  switch (misfire) {
    case Misfire::kSkip:
      return "skip";
    case Misfire::kOnce:
      return "once";
    case Misfire::kAll:
      return "all";
  }
  return "once";
}

std::string_view overlap_name(Overlap overlap) noexcept {
  switch (overlap) {
    case Overlap::kAllow:
      return "allow";
    case Overlap::kSkip:
      return "skip";
    case Overlap::kBufferOne:
      return "buffer_one";
  }
  return "allow";
}

std::optional<Misfire> parse_misfire(std::string_view text) noexcept {
  for (const Misfire m : {Misfire::kSkip, Misfire::kOnce, Misfire::kAll}) {
    if (misfire_name(m) == text) return m;
  }
  return std::nullopt;
}

std::optional<Overlap> parse_overlap(std::string_view text) noexcept {
  for (const Overlap o : {Overlap::kAllow, Overlap::kSkip, Overlap::kBufferOne}) {
    if (overlap_name(o) == text) return o;
  }
  return std::nullopt;
}

Result<Compiled> compile(Definition definition, std::int64_t now_unix_ms,
                         std::size_t max_name_bytes) {
  if (Status s = check_fields(definition, max_name_bytes); !s.is_ok()) return s;
  auto zone = Zone::load(definition.zone);
  if (!zone.is_ok()) return zone.status();
  if (definition.every.count() != 0 && !definition.start_unix_ms) {
    // An interval counts from a fixed moment, kept with the definition, so that a restart or
    // another node computes the same instants: its first run, one interval after the moment it
    // is set. That run is its start_at, so no earlier instant is listed or backfilled. An end
    // before it is refused (one before the start made a definition that no longer checked at
    // the next start, and vanished).
    definition.start_unix_ms = now_unix_ms + definition.every.count();
    if (definition.end_unix_ms && *definition.end_unix_ms < *definition.start_unix_ms) {
      return Status(Code::kInvalidArgument,
                    "end_at: before the first run (one interval from now, as start_at is not "
                    "given)");
    }
  }
  auto recurrence = definition.cron.empty()
                        ? Recurrence::every(definition.every, *definition.start_unix_ms)
                        : Recurrence::cron(definition.cron, definition.zone);
  if (!recurrence.is_ok()) return recurrence.status();
  if (!definition.cron.empty() && !recurrence.value().next_after(now_unix_ms)) {
    return Status(Code::kInvalidArgument, "cron: '" + definition.cron + "' matches no date");
  }
  return Compiled{std::move(definition), std::move(recurrence).value()};
}

std::string run_key(std::string_view name, std::int64_t instant_unix_ms) {
  std::string key(name);
  key += '@';
  key += std::to_string(instant_unix_ms);
  return key;
}

std::optional<RunOf> parse_run_key(std::string_view key) {
  const auto at = key.rfind('@');
  if (at == std::string_view::npos || at == 0 || at + 1 == key.size()) return std::nullopt;
  RunOf run{key.substr(0, at), 0};
  const char* first = key.data() + at + 1;
  const char* last = key.data() + key.size();
  const auto [end, error] = std::from_chars(first, last, run.instant_unix_ms);
  if (error != std::errc() || end != last || run.instant_unix_ms < 0 ||
      run.instant_unix_ms > kLastDueUnixMs) {
    return std::nullopt;
  }
  if (!std::all_of(run.name.begin(), run.name.end(), valid_name_char)) return std::nullopt;
  return run;
}

}  // namespace delayq::schedule
