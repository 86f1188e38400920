// session.h — a client's session on the Redis broker: the tubes it uses and watches, counted
// per node for stats; its reserves as Waiters of the Core; its job calls, each one jobs.lua call
// on the shard that holds the job.
#pragma once

#include "broker/redis/handle.h"

namespace delayq::broker::redis {

// The 9 arguments of jobs.lua's put of `request` into `tube`, whose checks (broker/put_rules.h)
// have passed; its url, content type and trace context move into the attachment.
[[nodiscard]] std::vector<std::string> put_arguments(broker::PutRequest& request,
                                                     const std::string& tube);

class RedisSession final : public broker::Session, private Handle {
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
  void note_attempt(JobId id, int status, std::string error, Callback<JobView> done) override;

 private:
  // A script on a shard whose reply is a job: `then` gets it, or the failure.
  void job_call(std::uint32_t shard, std::vector<std::string> args, bool write,
                std::function<void(Result<broker::Job>)> then);
  // done(view) for a job reply, on this session's behalf.
  Callback<broker::Job> view_of(Callback<JobView> done);
  [[nodiscard]] std::uint32_t shard_for(const std::string& tube, const broker::JobRef& job) const;
  [[nodiscard]] std::vector<std::string> ref_args(const broker::JobRef& job) const;
  // The open tubes a delete of `job` prefetches from (RedisBrokerOptions::prefetch), or none.
  [[nodiscard]] std::vector<std::string> prefetch_tubes(const broker::JobRef& job) const;
  void ride_along(const Waiter& waiter);
  void count_use(const std::string& tube, int by);
  void count_watch(const std::string& tube, int by);
  void count(const std::string& tube, std::uint64_t TubeUse::*field, int by);

  std::string used_;
  std::vector<std::string> watched_;
  std::map<std::uint64_t, std::shared_ptr<Waiter>> waits_;
  std::uint64_t next_ticket_ = 1;
  bool worker_ = false;  // the last reserve was of the watch list
};

}  // namespace delayq::broker::redis
