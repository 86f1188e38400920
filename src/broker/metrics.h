// metrics.h — what a server counts for `GET /metrics`, and its Prometheus text exposition
// (version 0.0.4: # HELP / # TYPE lines, then samples). The broker owns one Metrics; front-ends
// count their operations and connections in it under their protocol's name, and the broker its
// fire lateness and commits. Histograms have fixed bucket bounds and are thread-safe (relaxed
// atomics: a committer thread observes fsyncs); everything else belongs to the broker's
// executor. Counting an operation is a hash lookup on three short strings with no allocation,
// cheap enough for every command of every protocol. Gauges of jobs by tube and state come from
// the broker's stats, passed in when the page is rendered.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "base/job.h"

namespace delayq::broker {

class Histogram {
 public:
  // bounds: the buckets' upper bounds, ascending (a +Inf bucket is implied).
  explicit Histogram(std::vector<double> bounds);
  void observe(double value) noexcept;
  // Appends the _bucket, _sum and _count samples of `name` (HELP and TYPE lines first).
  void render(std::string& out, std::string_view name, std::string_view help) const;
  [[nodiscard]] std::uint64_t count() const noexcept;
  [[nodiscard]] const std::vector<double>& bounds() const noexcept { return bounds_; }
  // Observations per bucket (not cumulative), the +Inf bucket last.
  [[nodiscard]] std::vector<std::uint64_t> buckets() const;
  // The value below which a fraction q (0 to 1) of the observations fall, interpolated linearly
  // inside its bucket as Prometheus's histogram_quantile() does (the first bucket from 0); the
  // last bound when it falls in +Inf; nullopt with no observation.
  [[nodiscard]] std::optional<double> quantile(double q) const;

 private:
  std::vector<double> bounds_;
  std::vector<std::atomic<std::uint64_t>> buckets_;  // per bucket, not cumulative; last: +Inf
  std::atomic<double> sum_{0};
};

class Metrics {
 public:
  Metrics();

  // Seconds from a delayed job's due time to the moment it became ready.
  Histogram fire_lateness;
  // Steps (one per turn of the event loop that changed something) per store write.
  Histogram commit_batch;
  // Time of a store write and its fsync, for batches that were fsynced.
  Histogram fsync;
  // Push delivery: seconds from a request's start to its answer or failure, and from a job's
  // due time to the start of its first attempt.
  Histogram delivery_latency;
  Histogram delivery_lateness;

  // Push delivery, by tube: what became of each delivery (delivered, released, buried), each
  // attempt's result (2xx, 3xx, 4xx, 5xx, error), and the requests under way. outcome and
  // result must outlive the Metrics, as count_op's; the tube is copied.
  void count_delivery(std::string_view tube, std::string_view outcome);
  void count_attempt(std::string_view tube, std::string_view result);
  // A tube's deliveries by outcome, as count_delivery() counted them (none: empty).
  [[nodiscard]] std::map<std::string_view, std::uint64_t> deliveries(std::string_view tube) const;
  std::int64_t deliveries_in_flight = 0;

  // Sharded brokers (Redis mode): per shard, how far its earliest timer (a delayed job's due
  // time, a reservation's TTR end) is behind the present, in seconds, 0 when none is; as this
  // node last looked. A shard whose value keeps growing is not being fired. Empty otherwise.
  std::vector<double> shard_overdue;
  // Sharded brokers: how many shards' channels this node is subscribed to now (a shard whose
  // channel is not is asked at every poll, and its jobs wake reserves here only at the next
  // look). -1 otherwise.
  std::int64_t shard_channels_subscribed = -1;

  // Recurring schedules, where the broker keeps them: how many there are (-1: it keeps none), and
  // since the server started, the runs put, the instants missed and the runs skipped by overlap,
  // all schedules together (each one's own counts are in the API: a label per schedule would
  // make a series per schedule).
  std::int64_t schedules = -1;
  std::uint64_t schedule_runs = 0;
  std::uint64_t schedule_misfires = 0;
  std::uint64_t schedule_overlaps = 0;

  // One operation of a protocol ("beanstalk", "http") and how it ended. protocol, op and result
  // must outlive the Metrics (string literals, static tables): they are kept as views.
  void count_op(std::string_view protocol, std::string_view op, std::string_view result);
  [[nodiscard]] std::uint64_t ops(std::string_view protocol, std::string_view op,
                                  std::string_view result) const;
  // Connections of a protocol (a name of static storage, as above). declare_protocol makes the
  // page show its counts from the start, at 0.
  void declare_protocol(std::string_view protocol) { connections_[protocol]; }
  void connection_opened(std::string_view protocol);
  void connection_closed(std::string_view protocol);
  // Connections open now, by protocol.
  [[nodiscard]] std::map<std::string_view, std::uint64_t> open_connections() const;

  // The whole page: jobs by tube and state, the server's counts, then these metrics.
  [[nodiscard]] std::string render(std::span<const TubeStats> tubes,
                                   const ServerStats& server) const;

 private:
  struct OpKey {
    std::string_view protocol;
    std::string_view op;
    std::string_view result;
    bool operator==(const OpKey&) const = default;
  };
  struct OpHash {
    std::size_t operator()(const OpKey& key) const noexcept;
  };
  std::unordered_map<OpKey, std::uint64_t, OpHash> ops_;
  struct Connections {
    std::uint64_t open = 0;
    std::uint64_t total = 0;
  };
  std::map<std::string_view, Connections> connections_;  // by protocol, sorted for the page
  std::map<std::pair<std::string, std::string_view>, std::uint64_t, std::less<>> deliveries_;
  std::map<std::pair<std::string, std::string_view>, std::uint64_t, std::less<>> attempts_;
};

// Escapes a label value for the exposition format (backslash, double quote, newline).
[[nodiscard]] std::string escape_label(std::string_view value);

}  // namespace delayq::broker
