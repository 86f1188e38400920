#include "broker/local/recovery.h"

#include <algorithm>

namespace delayq::local {

Result<RecoveryStats> recover(store::Store& store, engine::Engine& engine) {
  DELAYQ_CHECK(engine.jobs() == 0);
  const auto start = std::chrono::steady_clock::now();
  RecoveryStats stats;
  // A bad estimate costs a rehash or some unused buckets, never correctness.
  engine.reserve_jobs(static_cast<std::size_t>(
      std::min<std::uint64_t>(store.estimated_jobs(), std::uint64_t{1} << 32)));
  Status scanned = store.scan([&](store::JobRecord&& record) {
    ++stats.jobs;
    return engine.restore(record);
  });
  if (!scanned.is_ok()) return scanned;
  engine.finish_restore(store.next_id());
  engine.advance();  // overdue delayed jobs become ready now
  stats.took = std::chrono::duration_cast<std::chrono::milliseconds>(
      std::chrono::steady_clock::now() - start);
  return stats;
}

}  // namespace delayq::local
