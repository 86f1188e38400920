// families.h — the metrics families every broker registers under the same names, so that the
// page and its readers (the HTTP API's /v1/stats) are the same in every mode. Each is made in the
// registry on the first ask (metrics/registry.h); a broker keeps the references.
#pragma once

#include "metrics/registry.h"

namespace delayq::broker {

// The name /v1/stats reads fire lateness by.
inline constexpr char kFireLateness[] = "delayq_fire_lateness_seconds";

// Seconds from a delayed job's due time to the moment it became ready.
metrics::Histogram& fire_lateness(metrics::Registry& registry);

// Recurring schedules, in a broker that keeps them: how many there are, and since the server
// started the runs put, the instants missed and the runs skipped by overlap, all schedules
// together (each one's own counts are in the API: a label per schedule would make a series per
// schedule).
struct ScheduleFamilies {
  explicit ScheduleFamilies(metrics::Registry& registry);
  metrics::Counters& schedules;
  metrics::Counters& runs;
  metrics::Counters& misfires;
  metrics::Counters& overlaps;
};

}  // namespace delayq::broker
