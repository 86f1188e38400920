#include "engine/time_counts.h"

#include "base/check.h"

namespace delayq::engine {

void TimeCounts::remove(std::int64_t unix_ms) {
  const auto it = buckets_.find(bucket(unix_ms));
  DELAYQ_CHECK(it != buckets_.end() && it->second > 0);
  if (--it->second == 0) buckets_.erase(it);
  --total_;
}

std::optional<std::int64_t> TimeCounts::earliest() const {
  if (buckets_.empty()) return std::nullopt;
  return buckets_.begin()->first * width_ms_;
}

void TimeCounts::count(std::span<const std::int64_t> edges, std::span<std::uint64_t> out) const {
  DELAYQ_CHECK(out.size() == edges.size() + 1);
  // Walk up to the last edge; whatever lies beyond it is the rest of the total.
  std::uint64_t seen = 0;
  auto it = buckets_.begin();
  for (std::size_t i = 0; i < edges.size(); ++i) {
    const std::int64_t end = bucket(edges[i]);
    for (; it != buckets_.end() && it->first < end; ++it) {
      out[i] += it->second;
      seen += it->second;
    }
  }
  out[edges.size()] += total_ - seen;
}

}  // namespace delayq::engine
