#include "broker/local/recovery.h"

#include <algorithm>

namespace delayq::broker::local {

double RecoveryProgress::percent() const {
  if (done) return 100.0;
  if (estimated == 0) return 0.0;
  return std::min(99.9, 100.0 * static_cast<double>(jobs) / static_cast<double>(estimated));
}

double RecoveryProgress::rate() const {
  const double seconds = std::chrono::duration<double>(took).count();
  return seconds > 0 ? static_cast<double>(jobs) / seconds : 0.0;
}

double RecoveryProgress::seconds_left() const {
  if (done || rate() <= 0 || estimated <= jobs) return 0.0;
  return static_cast<double>(estimated - jobs) / rate();
}

Result<RecoveryStats> recover(store::Store& store, engine::Engine& engine,
                              const RecoveryReport& report, std::chrono::milliseconds every) {
  DELAYQ_CHECK(engine.jobs() == 0);
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  RecoveryProgress progress;
  progress.estimated = store.estimated_jobs();
  auto tell = [&](bool done) {
    progress.took = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start);
    progress.done = done;
    if (report) report(progress);
  };
  auto next_report = start + every;
  // A bad estimate costs a rehash or some unused buckets, never correctness.
  engine.reserve_jobs(static_cast<std::size_t>(
      std::min<std::uint64_t>(progress.estimated, std::uint64_t{1} << 32)));
  Status scanned = store.scan([&](store::JobRecord&& record) {
    if (++progress.jobs % 4096 == 0 && report && Clock::now() >= next_report) {
      tell(false);
      next_report = Clock::now() + every;
    }
    return engine.restore(record);
  });
  if (!scanned.is_ok()) return scanned;
  // The far tier's jobs stay on disk: only their counts by tube and due minute are read.
  Status far = store.far_counts([&engine](std::string tube, std::int64_t minute, std::uint64_t n) {
    return engine.restore_far(tube, minute, n);
  });
  if (!far.is_ok()) return far;
  engine.finish_restore(store.next_id());
  engine.advance();  // overdue delayed jobs become ready now
  tell(true);
  return RecoveryStats{progress.jobs, progress.took};
}

}  // namespace delayq::broker::local
