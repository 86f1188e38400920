// admin.h — the server-wide calls on the Redis broker: tube stats summed over every shard with
// this node's own counts (users, watchers, waiting reserves, pauses), pauses and max attempts
// set on every shard and published to every node, webhooks, and the calls Redis mode cannot do.
#pragma once

#include <map>

#include "broker/redis/handle.h"

namespace delayq::broker::redis {

class RedisAdmin final : public broker::Admin, private Handle {
 public:
  explicit RedisAdmin(std::shared_ptr<Core> core) : Handle(std::move(core)) {}

  void pause_tube(std::string tube, broker::Seconds pause, Callback<TubeStats> done) override;
  void stats_tube(std::string tube, Callback<TubeStats> done) override;
  void set_max_attempts(std::string tube, std::uint32_t max_attempts,
                        Callback<std::uint32_t> done) override;
  void list_tubes(Callback<std::vector<TubeStats>> done) override;
  void stats(Callback<ServerStats> done) override;
  void set_webhook(std::string tube, Webhook webhook, Callback<Webhook> done) override;
  void get_webhook(std::string tube, Callback<Webhook> done) override;
  void remove_webhook(std::string tube, Callback<Webhook> done) override;
  void due_counts(std::string /*tube*/, std::vector<Due> /*edges*/,
                  Callback<broker::DueCounts> done) override {
    post(std::move(done),
         Result<broker::DueCounts>(
             Status(Code::kNotSupported,
                    "due counts: in Redis mode the shards keep no counts by due time, and counting "
                    "would visit every delayed job")));
  }
  void list_jobs(std::string /*tube*/, JobState /*state*/, std::size_t /*limit*/,
                 Callback<broker::JobList> done) override {
    post(std::move(done),
         Result<broker::JobList>(Status(
             Code::kNotSupported,
             "listing a tube's jobs: not in Redis mode (peek, or look a job up by id or key)")));
  }
  void set_flow(std::string tube, broker::FlowChange change, Callback<FlowSettings> done) override;
  void backup(std::string dir, Callback<broker::BackupResult> done) override {
    post(std::move(done),
         Result<broker::BackupResult>(
             Status(Code::kNotSupported, "backup to " + dir +
                                             ": the jobs are in Redis, not in this server; back up "
                                             "Redis (RDB snapshots or the AOF)")));
  }

 private:
  void pause_existing(const std::string& tube, broker::Seconds pause, Callback<TubeStats> done);
  void record_pause(const std::string& tube, std::int64_t seconds, Callback<TubeStats> done);
  void pin(const std::string& tube, FlowSettings flow, bool pinned, Callback<FlowSettings> done);
  // Tube stats summed over every shard; `tubes` empty: every tube with jobs.
  struct Sums {
    std::map<std::string, TubeStats> tubes;
    std::uint64_t timeouts = 0;  // TTRs lapsed
  };
  void tube_stats(std::vector<std::string> tubes, std::function<void(Result<Sums>)> then);
  // Every tube that exists here (exists(), its stats with this node's counts).
  [[nodiscard]] std::vector<TubeStats> existing(Sums sums) const;
  [[nodiscard]] bool exists(const TubeStats& stats) const;
  [[nodiscard]] static bool has_jobs(const TubeStats& stats);
  [[nodiscard]] TubeStats with_local(TubeStats stats) const;
};

}  // namespace delayq::broker::redis
