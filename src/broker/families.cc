#include "broker/families.h"

namespace delayq::broker {

metrics::Histogram& fire_lateness(metrics::Registry& registry) {
  // 1 ms ticks: most jobs fire within a millisecond; the tail shows a busy or stalled loop.
  return registry.histogram(kFireLateness,
                            "From a delayed job's due time to the moment it became ready.",
                            {0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 5});
}

ScheduleFamilies::ScheduleFamilies(metrics::Registry& registry)
    : schedules(registry.counters("delayq_schedules", "Recurring schedules kept.",
                                  metrics::Kind::kGauge)),
      runs(registry.counters("delayq_schedule_runs_total", "Runs put by schedules (jobs).",
                             metrics::Kind::kCounter)),
      misfires(registry.counters("delayq_schedule_misfires_total",
                                 "Schedule instants missed and not run (server down, schedule "
                                 "paused), by each schedule's misfire rule.",
                                 metrics::Kind::kCounter)),
      overlaps(
          registry.counters("delayq_schedule_overlaps_skipped_total",
                            "Schedule runs skipped because the previous run's job still existed.",
                            metrics::Kind::kCounter)) {}

}  // namespace delayq::broker
