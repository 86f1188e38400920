// job.h — the words for a job that the engine, the store and the front-ends share.
// A job id is a 64-bit number, handed out in increasing order from 1 and never reused, across
// restarts too; the engine stops at 2^48 - 1 (89 years of 100,000 puts a second). Times on the wire
// and on disk are milliseconds since the Unix epoch (*_unix_ms); the lifecycle is drawn in
// docs/design/lifecycle.md and docs/protocol.md.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <string_view>

namespace delayq {

using JobId = std::uint64_t;

// How far ahead a job may be due, whichever way it is asked: a delay of at most 100 years, a
// time at most the last millisecond of 9999, so that every time shown (RFC 3339, a year of four
// digits) can be written. The front-ends refuse what is beyond.
inline constexpr std::int64_t kMaxDelayMs = std::int64_t{100} * 365 * 24 * 3600 * 1000;
inline constexpr std::int64_t kLastDueUnixMs = 253402300799999;  // 9999-12-31T23:59:59.999Z

// When a job is due, as every layer takes it, from the protocol parsers to the engine: a delay
// from the moment the server receives the call, or an absolute time. Either way the server
// computes the due time itself, on its own clock; a delay of 0, or a time not in the future, means
// ready at once.
struct Due {
  bool absolute = false;
  std::int64_t ms = 0;  // absolute: Unix ms, 0 to kLastDueUnixMs; else a delay, 0 to kMaxDelayMs

  static constexpr Due after(std::chrono::milliseconds delay) { return {false, delay.count()}; }
  static constexpr Due at(std::int64_t unix_ms) { return {true, unix_ms}; }
  friend bool operator==(const Due&, const Due&) = default;
};

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

// A job as the engine and every broker report it: what peek, reserve and stats-job show, less
// the body.
struct JobView {
  JobId id = 0;
  std::string tube;
  JobState state = JobState::kReady;
  std::uint32_t priority = 0;
  std::int64_t due_unix_ms = 0;       // delayed: when it becomes ready; else when it did
  std::int64_t deadline_unix_ms = 0;  // reserved: when its TTR lapses; else 0
  std::int64_t created_unix_ms = 0;
  std::int64_t delay_ms = 0;  // the delay it was last put, released or rescheduled with
  std::chrono::seconds ttr{0};
  JobCounters counters;
  std::string key;
  std::string group;
  bool attached = false;  // the job has an attachment (its Delivery), read with its body
};

// A tube's flow control (docs/flow-control.md): which of its ready jobs a reserve may take,
// by their group. Jobs with no group are never held back. All off: the tube's order is
// beanstalkd's, (priority, id).
struct FlowSettings {
  // At most this many jobs of one group reserved at once (webhook deliveries count); 0: none.
  std::uint32_t group_concurrency = 0;
  // Groups take turns among ready jobs of the best priority (the one served longest ago first).
  bool fair = false;
  // At most rate_jobs reserves of one group per rate_period, in a token bucket of rate_burst
  // (the reserves a group may take at once after a quiet spell); rate_jobs 0: none.
  std::uint32_t rate_jobs = 0;
  std::chrono::milliseconds rate_period{1000};
  std::uint32_t rate_burst = 1;
  // fair: a group's turns in proportion to its weight (1 to kMaxGroupWeight; a group not named
  // has 1), at most kMaxGroupWeights named.
  std::map<std::string, std::uint32_t, std::less<>> group_weights{};

  static constexpr std::uint32_t kMaxGroupWeight = 1000;
  static constexpr std::size_t kMaxGroupWeights = 1000;
  // Whether flow control is on. Off, the burst and the weights mean nothing and are not kept.
  [[nodiscard]] bool any() const noexcept {
    return group_concurrency != 0 || fair || rate_jobs != 0;
  }
  friend bool operator==(const FlowSettings&, const FlowSettings&) = default;
};

// One tube's counts, as beanstalkd's stats-tube reports them.
struct TubeStats {
  std::string name;
  std::uint64_t urgent = 0, ready = 0, reserved = 0, delayed = 0, buried = 0;
  std::uint64_t total_jobs = 0;  // ever put into the tube
  std::uint64_t using_clients = 0, watching_clients = 0, waiting_clients = 0;
  std::uint64_t deletes = 0, pauses = 0;
  std::chrono::seconds pause{0};
  std::chrono::milliseconds pause_left{0};
  std::uint32_t max_attempts = 0;  // delayq's extension: 0, none
  // How long its oldest ready job has waited, from the due_unix_ms it shows (when it became
  // ready; a job back from a lapsed TTR, a lost worker or a kick from buried keeps that earlier
  // time); 0 with no ready job. Second resolution.
  std::chrono::milliseconds oldest_ready_age{0};
  // Flow control: the settings, groups whose ready jobs are held back (at their concurrency or
  // over their rate), and groups with a ready job that may be taken now (each waiting its turn
  // under fair).
  FlowSettings flow;
  std::uint64_t groups_held = 0, groups_ready = 0;
};

// The jobs and tubes of a whole server. Connections, producers, workers and command counters
// are the front-ends' (a broker serves sessions, not connections).
struct ServerStats {
  std::uint64_t urgent = 0, ready = 0, reserved = 0, delayed = 0, buried = 0;
  std::uint64_t total_jobs = 0, job_timeouts = 0, tubes = 0;
  std::uint64_t deletes = 0, buries = 0;  // jobs deleted and buried since the start
  std::uint64_t waiting = 0;              // sessions waiting in reserve
  JobId next_id = 1;
};

}  // namespace delayq
