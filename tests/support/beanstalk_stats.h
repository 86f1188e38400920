// beanstalk_stats.h — the keys of beanstalkd 1.12's `stats` document, in its order: what a
// client that reads them expects, checked by the unit test of the conversation and by the
// protocol test of the real server.
#pragma once

#include <string>
#include <vector>

namespace delayq::testing {

inline const std::vector<std::string>& beanstalkd_stats_keys() {
  static const std::vector<std::string> keys = {
      "current-jobs-urgent",
      "current-jobs-ready",
      "current-jobs-reserved",
      "current-jobs-delayed",
      "current-jobs-buried",
      "cmd-put",
      "cmd-peek",
      "cmd-peek-ready",
      "cmd-peek-delayed",
      "cmd-peek-buried",
      "cmd-reserve",
      "cmd-reserve-with-timeout",
      "cmd-delete",
      "cmd-release",
      "cmd-use",
      "cmd-watch",
      "cmd-ignore",
      "cmd-bury",
      "cmd-kick",
      "cmd-touch",
      "cmd-stats",
      "cmd-stats-job",
      "cmd-stats-tube",
      "cmd-list-tubes",
      "cmd-list-tube-used",
      "cmd-list-tubes-watched",
      "cmd-pause-tube",
      "job-timeouts",
      "total-jobs",
      "max-job-size",
      "current-tubes",
      "current-connections",
      "current-producers",
      "current-workers",
      "current-waiting",
      "total-connections",
      "pid",
      "version",
      "rusage-utime",
      "rusage-stime",
      "uptime",
      "binlog-oldest-index",
      "binlog-current-index",
      "binlog-records-migrated",
      "binlog-records-written",
      "binlog-max-size",
      "draining",
      "id",
      "hostname",
      "os",
      "platform",
  };
  return keys;
}

}  // namespace delayq::testing
