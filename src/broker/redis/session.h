// session.h — a client's session on the Redis broker: the tubes it uses and watches, counted
// per node for stats; its reserves as Waiters of the Core; its job calls, each one jobs.lua call
// on the shard that holds the job (session.cc); its server-wide calls (session_admin.cc).
#pragma once

#include <boost/asio/post.hpp>

#include "broker/redis/core.h"

namespace delayq::redis_broker {

class RedisSession final : public broker::Session {
 public:
  RedisSession(std::shared_ptr<Core> core, broker::SessionOptions options);
  ~RedisSession() override;
  RedisSession(const RedisSession&) = delete;
  RedisSession& operator=(const RedisSession&) = delete;

  Status use(std::string_view tube) override;
  [[nodiscard]] std::string used() const override { return used_; }
  Result<std::size_t> watch(std::string_view tube) override;
  Result<std::size_t> ignore(std::string_view tube) override;
  [[nodiscard]] std::vector<std::string> watched() const override { return watched_; }

  void put(broker::PutRequest request, Callback<broker::PutResult> done) override;
  std::uint64_t reserve(broker::ReserveRequest request, Callback<broker::Job> done) override;
  bool cancel_reserve(std::uint64_t ticket) override;
  bool stop_waiting(std::uint64_t ticket) override;
  void reserve_job(JobId id, Callback<broker::Job> done) override;
  void erase(broker::JobRef job, Callback<JobId> done) override;
  void release(broker::ReleaseRequest request, Callback<JobView> done) override;
  void bury(JobId id, std::optional<std::uint32_t> priority, Callback<JobView> done) override;
  void touch(JobId id, Callback<JobView> done) override;
  void peek(broker::JobRef job, bool with_body, Callback<broker::Job> done) override;
  void peek_next(std::string tube, JobState state, Callback<broker::Job> done) override;
  void kick(std::string tube, std::size_t bound, Callback<std::size_t> done) override;
  void kick_job(JobId id, Callback<JobView> done) override;
  void update(broker::JobRef job, broker::Update update, Callback<JobView> done) override;
  void list_group(std::string tube, std::string group,
                  Callback<std::vector<JobView>> done) override;
  void cancel_group(std::string tube, std::string group, Callback<std::size_t> done) override;
  void pause_tube(std::string tube, broker::Seconds pause, Callback<TubeStats> done) override;
  void pause_existing(const std::string& tube, broker::Seconds pause, Callback<TubeStats> done);
  void stats_tube(std::string tube, Callback<TubeStats> done) override;
  void set_max_attempts(std::string tube, std::uint32_t max_attempts,
                        Callback<std::uint32_t> done) override;
  void list_tubes(Callback<std::vector<TubeStats>> done) override;
  void stats(Callback<ServerStats> done) override;
  void set_webhook(std::string tube, Webhook webhook, Callback<Webhook> done) override;
  void get_webhook(std::string tube, Callback<Webhook> done) override;
  void remove_webhook(std::string tube, Callback<Webhook> done) override;
  void note_attempt(JobId id, int status, std::string error, Callback<JobView> done) override;
  void due_counts(std::string /*tube*/, std::vector<broker::Due> /*edges*/,
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
  void backup(std::string dir, Callback<broker::BackupResult> done) override {
    post(std::move(done),
         Result<broker::BackupResult>(Status(
             Code::kNotSupported, "backup: the jobs are in Redis, not in " + dir +
                                      "'s server; back up Redis (RDB snapshots or the AOF)")));
  }

 private:
  // Completes `done` later on the executor, unless the session is gone by then.
  template <typename T>
  void post(Callback<T> done, Result<T> result) {
    asio::post(core_->io,
               [state = state_, done = std::move(done), result = std::move(result)]() mutable {
                 if (state->alive) done(std::move(result));
               });
  }
  // A script on a shard whose reply is a job: `then` gets it, or the failure.
  void job_call(std::uint32_t shard, std::vector<std::string> args, bool write,
                std::function<void(Result<broker::Job>)> then);
  // done(view) for a job reply, on this session's behalf.
  Callback<broker::Job> view_of(Callback<JobView> done);
  // Every shard, each with `args`; `then` gets the replies by shard, or the first failure.
  void every_shard(std::vector<std::string> args, bool write,
                   std::function<void(Result<std::vector<Reply>>)> then);
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
  [[nodiscard]] std::uint32_t shard_for(const std::string& tube, const broker::JobRef& job) const;
  [[nodiscard]] std::vector<std::string> ref_args(const broker::JobRef& job) const;
  [[nodiscard]] Status check(const std::string& tube) const {
    return check_tube_name(tube, core_->options.max_name_bytes);
  }
  void count_use(const std::string& tube, int by);
  void count_watch(const std::string& tube, int by);
  void count(const std::string& tube, std::uint64_t TubeUse::*field, int by);

  std::shared_ptr<Core> core_;
  std::shared_ptr<SessionState> state_ = std::make_shared<SessionState>();
  std::string used_;
  std::vector<std::string> watched_;
  std::map<std::uint64_t, std::shared_ptr<Waiter>> waits_;
  std::uint64_t next_ticket_ = 1;
};

}  // namespace delayq::redis_broker
