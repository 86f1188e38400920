#include "front/beanstalk/yaml.h"

#include <sys/resource.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <random>

namespace delayq::front::beanstalk {
namespace {

// This process's id in `stats`: 16 random hex digits drawn at the first call, as beanstalkd's.
const std::string& server_id() {
  static const std::string id = [] {
    std::random_device random;
    const std::uint64_t value = std::uint64_t{random()} << 32 | random();
    char hex[17];
    std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(value));
    return std::string(hex);
  }();
  return id;
}

// A YAML double-quoted scalar: `"` and `\` escaped by `\`, control bytes as \xHH (a key put over
// HTTP may hold any character).
std::string quoted(std::string_view text) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out = "\"";
  for (const char c : text) {
    const auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || u == 0x7f) {
      out.append("\\x").append(1, kHex[u >> 4]).append(1, kHex[u & 15]);
      continue;
    }
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

void line(std::string& yaml, std::string_view key, std::uint64_t value) {
  yaml.append(key).append(": ").append(std::to_string(value)).append("\n");
}

void line(std::string& yaml, std::string_view key, std::string_view value) {
  yaml.append(key).append(": ").append(value).append("\n");
}

std::string seconds_text(const timeval& t) {
  char text[32];
  std::snprintf(text, sizeof text, "%ld.%06ld", static_cast<long>(t.tv_sec),
                static_cast<long>(t.tv_usec));
  return text;
}

// The verbs with a cmd-* line in `stats`, in beanstalkd 1.12's order.
constexpr Verb kCountedVerbs[] = {Verb::kPut,
                                  Verb::kPeek,
                                  Verb::kPeekReady,
                                  Verb::kPeekDelayed,
                                  Verb::kPeekBuried,
                                  Verb::kReserve,
                                  Verb::kReserveWithTimeout,
                                  Verb::kDelete,
                                  Verb::kRelease,
                                  Verb::kUse,
                                  Verb::kWatch,
                                  Verb::kIgnore,
                                  Verb::kBury,
                                  Verb::kKick,
                                  Verb::kTouch,
                                  Verb::kStats,
                                  Verb::kStatsJob,
                                  Verb::kStatsTube,
                                  Verb::kListTubes,
                                  Verb::kListTubeUsed,
                                  Verb::kListTubesWatched,
                                  Verb::kPauseTube};

}  // namespace

// beanstalkd reads a nanosecond clock, so some time has always passed since a deadline was set
// and a fresh 10 s TTR shows 9. Here the deadline was rounded up to a whole millisecond and
// `now_ms` down, so the same moment can read up to 10.001 s: count 2 ms less.
std::int64_t seconds_until(std::int64_t unix_ms, std::int64_t now_ms) {
  return std::max<std::int64_t>(0, unix_ms - now_ms - 2) / 1000;
}

std::string stats_yaml(const ServerStats& s, const Tally& tally, const ServerFacts& facts) {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  utsname host{};
  uname(&host);
  std::string yaml = "---\n";
  line(yaml, "current-jobs-urgent", s.urgent);
  line(yaml, "current-jobs-ready", s.ready);
  line(yaml, "current-jobs-reserved", s.reserved);
  line(yaml, "current-jobs-delayed", s.delayed);
  line(yaml, "current-jobs-buried", s.buried);
  for (const Verb verb : kCountedVerbs) {
    line(yaml, "cmd-" + std::string(verb_name(verb)),
         tally.commands[static_cast<std::size_t>(verb)]);
  }
  line(yaml, "job-timeouts", s.job_timeouts);
  line(yaml, "total-jobs", s.total_jobs);
  line(yaml, "max-job-size", facts.max_job_bytes);
  line(yaml, "current-tubes", s.tubes);
  line(yaml, "current-connections", tally.connections);
  line(yaml, "current-producers", tally.producers);
  line(yaml, "current-workers", tally.workers);
  line(yaml, "current-waiting", s.waiting);
  line(yaml, "total-connections", tally.total_connections);
  line(yaml, "pid", static_cast<std::uint64_t>(::getpid()));
  line(yaml, "version", "\"1.12 (delayq " DELAYQ_VERSION ")\"");
  line(yaml, "rusage-utime", seconds_text(usage.ru_utime));
  line(yaml, "rusage-stime", seconds_text(usage.ru_stime));
  line(yaml, "uptime", facts.uptime_seconds);
  for (const std::string_view binlog :
       {"binlog-oldest-index", "binlog-current-index", "binlog-records-migrated",
        "binlog-records-written", "binlog-max-size"}) {
    line(yaml, binlog, std::uint64_t{0});
  }
  line(yaml, "draining", facts.draining ? "true" : "false");
  // As beanstalkd 1.12 prints them: strings bare, except the version and `os`, whose
  // "#1 SMP ..." a YAML reader would take for a comment unquoted (beanstalkd 1.13 quotes it).
  line(yaml, "id", server_id());
  line(yaml, "hostname", host.nodename);
  line(yaml, "os", quoted(host.version));
  line(yaml, "platform", host.machine);
  return yaml;
}

std::string job_yaml(const broker::Job& found) {
  const JobView& job = found.view;
  const std::int64_t now = found.as_of_unix_ms;
  std::int64_t time_left = 0;
  if (job.state == JobState::kReserved) time_left = seconds_until(job.deadline_unix_ms, now);
  if (job.state == JobState::kDelayed) time_left = seconds_until(job.due_unix_ms, now);
  const auto whole = [](std::int64_t n) {
    return static_cast<std::uint64_t>(std::max<std::int64_t>(0, n));
  };
  std::string yaml = "---\n";
  line(yaml, "id", job.id);
  line(yaml, "tube", job.tube);
  line(yaml, "state", state_name(job.state));
  line(yaml, "pri", job.priority);
  line(yaml, "age", whole(now - job.created_unix_ms) / 1000);
  line(yaml, "delay", whole(job.delay_ms / 1000));
  line(yaml, "ttr", whole(job.ttr.count()));
  line(yaml, "time-left", whole(time_left));
  line(yaml, "file", std::uint64_t{0});
  line(yaml, "reserves", job.counters.reserves);
  line(yaml, "timeouts", job.counters.timeouts);
  line(yaml, "releases", job.counters.releases);
  line(yaml, "buries", job.counters.buries);
  line(yaml, "kicks", job.counters.kicks);
  // delayq's push delivery, only when set: a job's own URL and Content-Type, how its last
  // failed attempt ended, and the trace context it was put with.
  const Delivery& delivery = found.delivery;
  if (!delivery.url.empty()) line(yaml, "url", quoted(delivery.url));
  if (!delivery.content_type.empty()) line(yaml, "content-type", quoted(delivery.content_type));
  if (delivery.last_attempt_unix_ms != 0) {
    line(yaml, "last-status", static_cast<std::uint64_t>(std::max(0, delivery.last_status)));
    line(yaml, "last-error", quoted(delivery.last_error));
  }
  if (!delivery.traceparent.empty()) line(yaml, "traceparent", quoted(delivery.traceparent));
  if (!delivery.tracestate.empty()) line(yaml, "tracestate", quoted(delivery.tracestate));
  return yaml;
}

std::string tube_yaml(const TubeStats& t) {
  std::string yaml = "---\n";
  line(yaml, "name", t.name);
  line(yaml, "current-jobs-urgent", t.urgent);
  line(yaml, "current-jobs-ready", t.ready);
  line(yaml, "current-jobs-reserved", t.reserved);
  line(yaml, "current-jobs-delayed", t.delayed);
  line(yaml, "current-jobs-buried", t.buried);
  line(yaml, "total-jobs", t.total_jobs);
  line(yaml, "current-using", t.using_clients);
  line(yaml, "current-watching", t.watching_clients);
  line(yaml, "current-waiting", t.waiting_clients);
  line(yaml, "cmd-delete", t.deletes);
  line(yaml, "cmd-pause-tube", t.pauses);
  line(yaml, "pause", static_cast<std::uint64_t>(std::max<std::int64_t>(0, t.pause.count())));
  line(yaml, "pause-time-left", static_cast<std::uint64_t>(seconds_until(t.pause_left.count(), 0)));
  // delayq's extension, only when set: beanstalkd's keys first and alone otherwise.
  if (t.max_attempts != 0) line(yaml, "max-attempts", std::uint64_t{t.max_attempts});
  if (t.flow.any()) {
    line(yaml, "group-concurrency", std::uint64_t{t.flow.group_concurrency});
    line(yaml, "fair", std::uint64_t{t.flow.fair ? 1U : 0U});
    line(yaml, "group-rate-jobs", std::uint64_t{t.flow.rate_jobs});
    line(yaml, "group-rate-period-ms",
         static_cast<std::uint64_t>(std::max<std::int64_t>(0, t.flow.rate_period.count())));
    line(yaml, "group-burst", std::uint64_t{t.flow.rate_burst});
    line(yaml, "group-weights", std::uint64_t{t.flow.group_weights.size()});
    line(yaml, "groups-held", t.groups_held);
    line(yaml, "groups-ready", t.groups_ready);
  }
  return yaml;
}

std::string list_yaml(const std::vector<std::string>& names) {
  std::string yaml = "---\n";
  for (const std::string& name : names) yaml += "- " + name + "\n";
  return yaml;
}

std::string group_yaml(const std::vector<JobView>& jobs) {
  std::string yaml = "---\n";
  for (const JobView& job : jobs) {
    yaml += "- id: " + std::to_string(job.id) + "\n";
    yaml += "  state: " + std::string(state_name(job.state)) + "\n";
    yaml += "  due-unix-ms: " + std::to_string(job.due_unix_ms) + "\n";
    if (!job.key.empty()) yaml += "  key: " + quoted(job.key) + "\n";
  }
  return yaml;
}

}  // namespace delayq::front::beanstalk
