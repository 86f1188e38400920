// schedule_runs — prints the runs of a cron expression in a zone, strictly after one Unix
// millisecond and up to another, one per line in Unix ms: what tests/schedule/reference.py
// checks against instants it computes on its own. Usage: schedule_runs ZONE CRON AFTER_MS TO_MS
#include <cstdio>
#include <cstdlib>
#include <string>

#include "schedule/recurrence.h"

int main(int argc, char** argv) {
  if (argc != 5) {
    std::fprintf(stderr, "usage: schedule_runs ZONE CRON AFTER_MS TO_MS\n");
    return 2;
  }
  auto recurrence = delayq::schedule::Recurrence::cron(argv[2], argv[1]);
  if (!recurrence.is_ok()) {
    std::fprintf(stderr, "%s\n", recurrence.status().message().c_str());
    return 1;
  }
  const long long to = std::atoll(argv[4]);
  for (auto at = recurrence.value().next_after(std::atoll(argv[3])); at && *at <= to;
       at = recurrence.value().next_after(*at)) {
    std::printf("%lld\n", static_cast<long long>(*at));
  }
  return 0;
}
