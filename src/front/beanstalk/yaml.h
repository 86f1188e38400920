// yaml.h — the YAML documents of beanstalkd's stats commands (stats, stats-job, stats-tube,
// list-tubes, list-tubes-watched) and delayq's list-group, as beanstalkd 1.12 prints them:
// strings bare, except the version and `os` (see stats_yaml). Pure functions of what the broker
// and the front-end report; the caller wraps a document in "OK <bytes>\r\n...\r\n".
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "broker/broker.h"
#include "front/beanstalk/conversation.h"

namespace delayq::front::beanstalk {

// What `stats` reports of the process and the server besides the broker's counts.
struct ServerFacts {
  std::size_t max_job_bytes = 0;
  std::uint64_t uptime_seconds = 0;
  bool draining = false;
};

[[nodiscard]] std::string stats_yaml(const ServerStats& stats, const Tally& tally,
                                     const ServerFacts& facts);
[[nodiscard]] std::string job_yaml(const broker::Job& job);
[[nodiscard]] std::string tube_yaml(const TubeStats& tube);
[[nodiscard]] std::string list_yaml(const std::vector<std::string>& names);
[[nodiscard]] std::string group_yaml(const std::vector<JobView>& jobs);

// Whole seconds left until `unix_ms`, as beanstalkd shows them (see yaml.cc).
[[nodiscard]] std::int64_t seconds_until(std::int64_t unix_ms, std::int64_t now_ms);

}  // namespace delayq::front::beanstalk
