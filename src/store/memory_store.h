// memory_store.h — a Store kept in std::maps, for unit tests of what sits above the store (the
// engine's recovery, the committer, the local broker). Loses everything on exit; sync() does
// nothing. Its target, delayq_store_memory, is linked by tests only, never by delayqd. Its reads
// of one job or schedule may run beside write() on another thread, as RocksStore's may.
#pragma once

#include <map>
#include <mutex>
#include <string>

#include "store/store.h"

namespace delayq::store {

class MemoryStore final : public Store {
 public:
  Status write(std::span<const WriteSet* const> sets, bool sync) override;
  Status sync() override { return Status::ok(); }
  Status scan(const std::function<Status(JobRecord&&)>& visit) override;
  Result<std::string> read_body(JobId id) override;
  Result<Delivery> read_attachment(JobId id) override;
  Status scan_webhooks(const std::function<Status(std::string, Webhook)>& visit) override;
  Status scan_max_attempts(const std::function<Status(std::string, std::uint32_t)>& visit) override;
  Status scan_flows(const std::function<Status(std::string, FlowSettings)>& visit) override;
  Status scan_schedules(const std::function<Status(std::string, std::string)>& visit) override;
  Result<std::optional<std::string>> read_schedule(std::string_view name) override;
  [[nodiscard]] JobId next_id() const override { return next_id_; }
  [[nodiscard]] std::uint64_t estimated_jobs() const override { return records_.size(); }
  [[nodiscard]] std::size_t records() const noexcept { return records_.size(); }
  [[nodiscard]] std::size_t bodies() const noexcept { return bodies_.size(); }
  [[nodiscard]] bool records_hold(JobId id) const { return records_.contains(id); }
  [[nodiscard]] const std::map<std::string, std::string>& far() const noexcept { return far_; }

  Result<std::optional<std::string>> far_get(const std::string& key) override;
  Status far_scan(const std::string& prefix, const std::string& start,
                  const std::function<bool(std::string_view, std::string_view)>& visit) override;

 private:
  std::map<JobId, std::string> records_;
  std::map<JobId, std::string> bodies_;
  std::map<JobId, std::string> attachments_;
  std::map<std::string, std::string> webhooks_;
  std::map<std::string, std::uint32_t> max_attempts_;
  std::map<std::string, std::string> flows_;
  std::map<std::string, std::string> schedules_;
  std::map<std::string, std::string> far_;  // the far tier, keyed as in RocksDB
  JobId next_id_ = 1;
  std::mutex mutex_;  // write() against the point reads
};

}  // namespace delayq::store
