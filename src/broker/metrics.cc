#include "broker/metrics.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>

#include "base/check.h"

namespace delayq::broker {
namespace {

template <typename... Args>
void append(std::string& out, fmt::format_string<Args...> format, Args&&... args) {
  fmt::format_to(std::back_inserter(out), format, std::forward<Args>(args)...);
}

}  // namespace

Histogram::Histogram(std::vector<double> bounds)
    : bounds_(std::move(bounds)), buckets_(bounds_.size() + 1) {
  DELAYQ_CHECK(std::is_sorted(bounds_.begin(), bounds_.end()));
}

void Histogram::observe(double value) noexcept {
  const auto bucket = static_cast<std::size_t>(
      std::lower_bound(bounds_.begin(), bounds_.end(), value) - bounds_.begin());
  buckets_[bucket].fetch_add(1, std::memory_order_relaxed);
  sum_.fetch_add(value, std::memory_order_relaxed);
}

std::uint64_t Histogram::count() const noexcept {
  std::uint64_t total = 0;
  for (const auto& bucket : buckets_) total += bucket.load(std::memory_order_relaxed);
  return total;
}

std::vector<std::uint64_t> Histogram::buckets() const {
  std::vector<std::uint64_t> out;
  out.reserve(buckets_.size());
  for (const auto& bucket : buckets_) out.push_back(bucket.load(std::memory_order_relaxed));
  return out;
}

std::optional<double> Histogram::quantile(double q) const {
  const std::vector<std::uint64_t> counts = buckets();
  std::uint64_t total = 0;
  for (const std::uint64_t n : counts) total += n;
  if (total == 0) return std::nullopt;
  const double rank = std::clamp(q, 0.0, 1.0) * static_cast<double>(total);
  double below = 0;
  for (std::size_t i = 0; i < bounds_.size(); ++i) {
    const auto here = static_cast<double>(counts[i]);
    if (counts[i] > 0 && below + here >= rank) {
      const double low = i == 0 ? 0.0 : bounds_[i - 1];
      return low + (bounds_[i] - low) * (rank - below) / here;
    }
    below += here;
  }
  return bounds_.empty() ? std::nullopt : std::optional<double>(bounds_.back());
}

void Histogram::render(std::string& out, std::string_view name, std::string_view help) const {
  fmt::format_to(std::back_inserter(out), "# HELP {} {}\n# TYPE {} histogram\n", name, help, name);
  std::uint64_t cumulative = 0;
  for (std::size_t i = 0; i < buckets_.size(); ++i) {
    cumulative += buckets_[i].load(std::memory_order_relaxed);
    if (i < bounds_.size()) {
      fmt::format_to(std::back_inserter(out), "{}_bucket{{le=\"{}\"}} {}\n", name, bounds_[i],
                     cumulative);
    } else {
      fmt::format_to(std::back_inserter(out), "{}_bucket{{le=\"+Inf\"}} {}\n", name, cumulative);
    }
  }
  fmt::format_to(std::back_inserter(out), "{}_sum {}\n{}_count {}\n", name,
                 sum_.load(std::memory_order_relaxed), name, cumulative);
}

std::string escape_label(std::string_view value) {
  std::string out;
  out.reserve(value.size());
  for (const char c : value) {
    if (c == '\\' || c == '"') {
      out += '\\';
      out += c;
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

Metrics::Metrics()
    // 1 ms ticks: most jobs fire within a millisecond; the tail shows a busy or stalled loop.
    : fire_lateness({0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 5}),
      commit_batch({1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024}),
      fsync({0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1}),
      delivery_latency(
          {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30}),
      delivery_lateness(
          {0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 5, 30, 60}) {}

void Metrics::count_delivery(std::string_view tube, std::string_view outcome) {
  ++deliveries_[{std::string(tube), outcome}];
}

void Metrics::count_attempt(std::string_view tube, std::string_view result) {
  ++attempts_[{std::string(tube), result}];
}

std::size_t Metrics::OpHash::operator()(const OpKey& key) const noexcept {
  const std::hash<std::string_view> hash;
  return (hash(key.op) * 31 + hash(key.result)) * 7 + hash(key.protocol);
}

void Metrics::count_op(std::string_view protocol, std::string_view op, std::string_view result) {
  ++ops_[OpKey{protocol, op, result}];
}

std::uint64_t Metrics::ops(std::string_view protocol, std::string_view op,
                           std::string_view result) const {
  const auto it = ops_.find(OpKey{protocol, op, result});
  return it == ops_.end() ? 0 : it->second;
}

void Metrics::connection_opened(std::string_view protocol) {
  Connections& c = connections_[protocol];
  ++c.open;
  ++c.total;
}

void Metrics::connection_closed(std::string_view protocol) {
  --connections_[protocol].open;
}

std::map<std::string_view, std::uint64_t> Metrics::deliveries(std::string_view tube) const {
  std::map<std::string_view, std::uint64_t> out;
  for (const auto& [key, count] : deliveries_) {
    if (key.first == tube) out[key.second] = count;
  }
  return out;
}

std::map<std::string_view, std::uint64_t> Metrics::open_connections() const {
  std::map<std::string_view, std::uint64_t> open;
  for (const auto& [protocol, c] : connections_) open[protocol] = c.open;
  return open;
}

std::string Metrics::render(std::span<const TubeStats> tubes, const ServerStats& server) const {
  std::string out;

  append(out, "# HELP delayq_jobs Jobs by tube and state.\n# TYPE delayq_jobs gauge\n");
  for (const TubeStats& stats : tubes) {
    const std::pair<std::string_view, std::uint64_t> counts[] = {{"ready", stats.ready},
                                                                 {"delayed", stats.delayed},
                                                                 {"reserved", stats.reserved},
                                                                 {"buried", stats.buried}};
    const std::string tube = escape_label(stats.name);
    for (const auto& [state, value] : counts) {
      append(out, "delayq_jobs{{tube=\"{}\",state=\"{}\"}} {}\n", tube, state, value);
    }
  }
  append(out, "# HELP delayq_jobs_created_total Jobs put since the data directory was created.\n");
  append(out, "# TYPE delayq_jobs_created_total counter\n");
  append(out, "delayq_jobs_created_total {}\n", server.next_id - 1);
  append(out, "# HELP delayq_job_timeouts_total Reservations whose TTR lapsed since the start.\n");
  append(out, "# TYPE delayq_job_timeouts_total counter\ndelayq_job_timeouts_total {}\n",
         server.job_timeouts);
  append(out, "# HELP delayq_jobs_deleted_total Jobs deleted since the start.\n");
  append(out, "# TYPE delayq_jobs_deleted_total counter\ndelayq_jobs_deleted_total {}\n",
         server.deletes);
  append(out, "# HELP delayq_jobs_buried_total Jobs buried since the start.\n");
  append(out, "# TYPE delayq_jobs_buried_total counter\ndelayq_jobs_buried_total {}\n",
         server.buries);
  append(out, "# HELP delayq_waiting_clients Clients waiting in reserve.\n");
  append(out, "# TYPE delayq_waiting_clients gauge\ndelayq_waiting_clients {}\n", server.waiting);

  // Sorted, so that the page is stable from one scrape to the next.
  std::map<std::tuple<std::string_view, std::string_view, std::string_view>, std::uint64_t> ops;
  for (const auto& [key, count] : ops_) {
    ops[{key.protocol, key.op, key.result}] = count;
  }
  append(out, "# HELP delayq_operations_total Operations by protocol, kind and result.\n");
  append(out, "# TYPE delayq_operations_total counter\n");
  for (const auto& [key, count] : ops) {
    append(out, "delayq_operations_total{{protocol=\"{}\",op=\"{}\",result=\"{}\"}} {}\n",
           std::get<0>(key), escape_label(std::get<1>(key)), escape_label(std::get<2>(key)), count);
  }

  append(out, "# HELP delayq_connections Open connections by protocol.\n");
  append(out, "# TYPE delayq_connections gauge\n");
  for (const auto& [protocol, c] : connections_) {
    append(out, "delayq_connections{{protocol=\"{}\"}} {}\n", protocol, c.open);
  }
  append(out,
         "# HELP delayq_connections_total Connections accepted since the start, by protocol.\n");
  append(out, "# TYPE delayq_connections_total counter\n");
  for (const auto& [protocol, c] : connections_) {
    append(out, "delayq_connections_total{{protocol=\"{}\"}} {}\n", protocol, c.total);
  }

  fire_lateness.render(out, "delayq_fire_lateness_seconds",
                       "From a delayed job's due time to the moment it became ready.");
  commit_batch.render(out, "delayq_commit_batch_steps",
                      "Engine steps written to the store in one batch.");
  fsync.render(out, "delayq_fsync_seconds", "Store write plus fsync, per fsynced batch.");

  append(out, "# HELP delayq_webhook_deliveries_total Push deliveries by tube and outcome.\n");
  append(out, "# TYPE delayq_webhook_deliveries_total counter\n");
  for (const auto& [key, count] : deliveries_) {
    append(out, "delayq_webhook_deliveries_total{{tube=\"{}\",outcome=\"{}\"}} {}\n",
           escape_label(key.first), key.second, count);
  }
  append(out, "# HELP delayq_webhook_attempts_total Push delivery attempts by tube and result.\n");
  append(out, "# TYPE delayq_webhook_attempts_total counter\n");
  for (const auto& [key, count] : attempts_) {
    append(out, "delayq_webhook_attempts_total{{tube=\"{}\",result=\"{}\"}} {}\n",
           escape_label(key.first), key.second, count);
  }
  append(out, "# HELP delayq_webhook_in_flight Push delivery requests under way.\n");
  append(out, "# TYPE delayq_webhook_in_flight gauge\ndelayq_webhook_in_flight {}\n",
         deliveries_in_flight);
  delivery_latency.render(out, "delayq_webhook_latency_seconds",
                          "From a push delivery request's start to its answer or failure.");
  delivery_lateness.render(out, "delayq_webhook_lateness_seconds",
                           "From a job's due time to the start of its first delivery attempt.");
  if (!shard_overdue.empty()) {
    append(out,
           "# HELP delayq_shard_overdue_seconds How far a shard's earliest timer is behind the "
           "present (0: none is); one that keeps growing is not being fired.\n");
    append(out, "# TYPE delayq_shard_overdue_seconds gauge\n");
    for (std::size_t shard = 0; shard < shard_overdue.size(); ++shard) {
      append(out, "delayq_shard_overdue_seconds{{shard=\"{}\"}} {}\n", shard, shard_overdue[shard]);
    }
  }
  if (schedules >= 0) {
    append(out, "# HELP delayq_schedules Recurring schedules kept.\n");
    append(out, "# TYPE delayq_schedules gauge\ndelayq_schedules {}\n", schedules);
    append(out, "# HELP delayq_schedule_runs_total Runs put by schedules (jobs).\n");
    append(out, "# TYPE delayq_schedule_runs_total counter\ndelayq_schedule_runs_total {}\n",
           schedule_runs);
    append(out,
           "# HELP delayq_schedule_misfires_total Schedule instants missed and not run (server "
           "down, schedule paused), by each schedule's misfire rule.\n");
    append(out,
           "# TYPE delayq_schedule_misfires_total counter\ndelayq_schedule_misfires_total {}\n",
           schedule_misfires);
    append(out,
           "# HELP delayq_schedule_overlaps_skipped_total Schedule runs skipped because the "
           "previous run's job still existed.\n");
    append(out,
           "# TYPE delayq_schedule_overlaps_skipped_total counter\n"
           "delayq_schedule_overlaps_skipped_total {}\n",
           schedule_overlaps);
  }
  if (shard_channels_subscribed >= 0) {
    append(out,
           "# HELP delayq_shard_channels_subscribed Shards whose channel this node is subscribed "
           "to (of delayq_shard_overdue_seconds' shards): one that is not wakes reserves here "
           "late.\n");
    append(out,
           "# TYPE delayq_shard_channels_subscribed gauge\ndelayq_shard_channels_subscribed {}\n",
           shard_channels_subscribed);
  }
  return out;
}

}  // namespace delayq::broker
