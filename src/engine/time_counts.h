// time_counts.h — how many jobs fall in each stretch of time: counts in fixed-width buckets of
// Unix time (a minute of due times, a second of ready times), in order, so that a tube can say
// how many of its delayed jobs come due between two instants without visiting a job, and since
// when its oldest ready job has waited. The engine keeps two per tube (engine.h); the dashboard's
// due histogram and oldest-ready age read them.
//
// Costs: add() and remove() are O(log B) for B non-empty buckets, allocating a bucket (~48 bytes)
// when the first job enters it; count() is O(the buckets before the last edge). Times
// round down to the bucket width: counts are exact for edges on whole buckets. Owned by one
// thread.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <span>

#include "engine/clock.h"

namespace delayq::engine {

class TimeCounts {
 public:
  explicit TimeCounts(std::int64_t width_ms) : width_ms_(width_ms) {}

  void add(std::int64_t unix_ms, std::uint64_t n = 1) {
    if (n == 0) return;
    buckets_[bucket(unix_ms)] += n;
    total_ += n;
  }
  // `unix_ms` must have been added and not removed since.
  void remove(std::int64_t unix_ms);

  [[nodiscard]] std::uint64_t total() const noexcept { return total_; }
  // The count of the bucket that holds `unix_ms`, and that bucket's number (its start / width).
  [[nodiscard]] std::uint64_t at(std::int64_t unix_ms) const {
    const auto it = buckets_.find(bucket(unix_ms));
    return it == buckets_.end() ? 0 : it->second;
  }
  [[nodiscard]] std::int64_t bucket_of(std::int64_t unix_ms) const { return bucket(unix_ms); }
  [[nodiscard]] std::int64_t width_ms() const noexcept { return width_ms_; }
  // The start of the earliest non-empty bucket.
  [[nodiscard]] std::optional<std::int64_t> earliest() const;
  // A time rounded down, toward minus infinity, to a multiple of width_ms: the start of its
  // bucket, where count() puts an edge.
  [[nodiscard]] static std::int64_t round_down(std::int64_t unix_ms, std::int64_t width_ms) {
    return floor_div(unix_ms, width_ms) * width_ms;
  }
  // Adds to out[i] the jobs between edge i-1 (included) and edge i (excluded), each edge rounded
  // down to its bucket: out[0] those before the first edge, out[n] those at or after the last.
  // edges ascending; out.size() == edges.size() + 1.
  void count(std::span<const std::int64_t> edges, std::span<std::uint64_t> out) const;

 private:
  // A time's bucket number: one division, and no product that could overflow.
  [[nodiscard]] std::int64_t bucket(std::int64_t unix_ms) const {
    return floor_div(unix_ms, width_ms_);
  }

  std::int64_t width_ms_;
  std::map<std::int64_t, std::uint64_t> buckets_;  // bucket number -> jobs in it, none empty
  std::uint64_t total_ = 0;
};

}  // namespace delayq::engine
