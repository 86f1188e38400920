// metrics.h — what a node counts for `GET /metrics`, and its Prometheus text exposition
// (version 0.0.4: # HELP / # TYPE lines, then samples). Histograms have fixed bucket bounds and
// are thread-safe (relaxed atomics: the committer thread observes fsyncs); everything else
// belongs to the node's io_context thread. Counting an operation is a hash lookup on two short
// strings with no allocation, cheap enough for every command of every protocol.
// Gauges of jobs by tube and state are read from the engine when the page is rendered.
#pragma once

#include <atomic>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "engine/engine.h"

namespace delayq::local {

class Histogram {
 public:
  // bounds: the buckets' upper bounds, ascending (a +Inf bucket is implied).
  explicit Histogram(std::vector<double> bounds);
  void observe(double value) noexcept;
  // Appends the _bucket, _sum and _count samples of `name` (HELP and TYPE lines first).
  void render(std::string& out, std::string_view name, std::string_view help) const;
  [[nodiscard]] std::uint64_t count() const noexcept;

 private:
  std::vector<double> bounds_;
  std::vector<std::atomic<std::uint64_t>> buckets_;  // per bucket, not cumulative; last: +Inf
  std::atomic<double> sum_{0};
};

// The protocols a node serves, for labels.
enum class Protocol : std::uint8_t { kBeanstalk, kHttp, kCount };
[[nodiscard]] std::string_view protocol_name(Protocol protocol);

class Metrics {
 public:
  Metrics();

  // Seconds from a delayed job's due time to the moment it became ready.
  Histogram fire_lateness;
  // Steps (one per turn of the event loop that changed something) per store write.
  Histogram commit_batch;
  // Time of a store write and its fsync, for batches that were fsynced.
  Histogram fsync;

  // One operation and how it ended. op and result must outlive the Metrics (string literals,
  // static tables): they are kept as views.
  void count_op(Protocol protocol, std::string_view op, std::string_view result);
  [[nodiscard]] std::uint64_t ops(Protocol protocol, std::string_view op,
                                  std::string_view result) const;
  void connection_opened(Protocol protocol);
  void connection_closed(Protocol protocol);

  // The whole page: these metrics, then the engine's gauges.
  [[nodiscard]] std::string render(const engine::Engine& engine) const;

 private:
  struct OpKey {
    Protocol protocol;
    std::string_view op;
    std::string_view result;
    bool operator==(const OpKey&) const = default;
  };
  struct OpHash {
    std::size_t operator()(const OpKey& key) const noexcept;
  };
  std::unordered_map<OpKey, std::uint64_t, OpHash> ops_;
  std::uint64_t open_[static_cast<std::size_t>(Protocol::kCount)] = {};
  std::uint64_t total_[static_cast<std::size_t>(Protocol::kCount)] = {};
};

// Escapes a label value for the exposition format (backslash, double quote, newline).
[[nodiscard]] std::string escape_label(std::string_view value);

}  // namespace delayq::local
