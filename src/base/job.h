// job.h — the words for a job that the engine, the store and the front-ends share.
// A job id is a 64-bit number, handed out in increasing order from 1 and never reused, across
// restarts too; the engine stops at 2^48 - 1 (89 years of 100,000 puts a second). Times on the wire
// and on disk are milliseconds since the Unix epoch (*_unix_ms); the lifecycle is drawn in
// ../shared/DESIGN.md and docs/protocol.md.
#pragma once

#include <cstdint>
#include <string_view>

namespace delayq {

using JobId = std::uint64_t;

// The order is part of the storage format (docs/storage-format.md): append only.
enum class JobState : std::uint8_t { kDelayed = 0, kReady = 1, kReserved = 2, kBuried = 3 };
inline constexpr std::uint8_t kJobStateCount = 4;

[[nodiscard]] constexpr std::string_view state_name(JobState state) noexcept {
  switch (state) {
    case JobState::kDelayed:
      return "delayed";
    case JobState::kReady:
      return "ready";
    case JobState::kReserved:
      return "reserved";
    case JobState::kBuried:
      return "buried";
  }
  return "unknown";
}

// What beanstalkd's stats-job reports about a job's history.
struct JobCounters {
  std::uint32_t reserves = 0;
  std::uint32_t timeouts = 0;
  std::uint32_t releases = 0;
  std::uint32_t buries = 0;
  std::uint32_t kicks = 0;

  friend bool operator==(const JobCounters&, const JobCounters&) = default;
  [[nodiscard]] bool zero() const noexcept { return *this == JobCounters{}; }
};

}  // namespace delayq
