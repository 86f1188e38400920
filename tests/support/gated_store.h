// gated_store.h — a Store for tests that holds writes at a gate. While the gate is closed, a
// write blocks (on the committer's thread) until it opens, as a slow fsync would; the test can
// wait until a write is held, so it knows which batch is not durable yet without timing
// anything. It can also fail every write and sync from a moment on, as a full or failing disk
// would. Everything else goes straight to the store inside. Thread-safe.
#pragma once

#include <chrono>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>

#include "store/store.h"

namespace delayq::testing {

class GatedStore final : public store::Store {
 public:
  explicit GatedStore(std::unique_ptr<store::Store> inner) : inner_(std::move(inner)) {}

  void close_gate() {
    const std::lock_guard lock(mutex_);
    open_ = false;
  }
  void open_gate() {
    {
      const std::lock_guard lock(mutex_);
      open_ = true;
    }
    changed_.notify_all();
  }
  // Waits until a write is held at the closed gate; false if none is within `timeout`.
  bool wait_held(std::chrono::milliseconds timeout) {
    std::unique_lock lock(mutex_);
    return changed_.wait_for(lock, timeout, [this] { return held_ > 0; });
  }
  // Writes that have passed the gate (each one batch of the committer), failed ones included.
  [[nodiscard]] std::size_t writes() const {
    const std::lock_guard lock(mutex_);
    return writes_;
  }
  // From now on every write and sync fails with `error`.
  void fail_writes(Status error) {
    const std::lock_guard lock(mutex_);
    failure_ = std::move(error);
  }
  // From now on reading job `id`'s body fails with `error` (a damaged blob file).
  void fail_body(JobId id, Status error) {
    const std::lock_guard lock(mutex_);
    bad_bodies_[id] = std::move(error);
  }

  Status write(std::span<const store::WriteSet* const> sets, bool sync) override {
    {
      std::unique_lock lock(mutex_);
      ++held_;
      changed_.notify_all();
      changed_.wait(lock, [this] { return open_; });
      --held_;
      ++writes_;
      if (!failure_.is_ok()) return failure_;
    }
    return inner_->write(sets, sync);
  }
  Status sync() override {
    {
      const std::lock_guard lock(mutex_);
      if (!failure_.is_ok()) return failure_;
    }
    return inner_->sync();
  }
  Status scan(const std::function<Status(store::JobRecord&&)>& visit) override {
    return inner_->scan(visit);
  }
  Result<std::optional<std::string>> far_get(const std::string& key) override {
    return inner_->far_get(key);
  }
  Status far_scan(const std::string& prefix, const std::string& start,
                  const std::function<bool(std::string_view, std::string_view)>& visit) override {
    return inner_->far_scan(prefix, start, visit);
  }
  Result<Delivery> read_attachment(JobId id) override { return inner_->read_attachment(id); }
  Status scan_webhooks(const std::function<Status(std::string, Webhook)>& visit) override {
    return inner_->scan_webhooks(visit);
  }
  Status scan_max_attempts(
      const std::function<Status(std::string, std::uint32_t)>& visit) override {
    return inner_->scan_max_attempts(visit);
  }
  Status scan_flows(const std::function<Status(std::string, FlowSettings)>& visit) override {
    return inner_->scan_flows(visit);
  }
  Status scan_schedules(const std::function<Status(std::string, std::string)>& visit) override {
    return inner_->scan_schedules(visit);
  }
  Result<std::optional<std::string>> read_schedule(std::string_view name) override {
    return inner_->read_schedule(name);
  }
  Result<std::string> read_body(JobId id) override {
    {
      const std::lock_guard lock(mutex_);
      if (const auto it = bad_bodies_.find(id); it != bad_bodies_.end()) return it->second;
    }
    return inner_->read_body(id);
  }
  [[nodiscard]] JobId next_id() const override { return inner_->next_id(); }
  [[nodiscard]] std::uint64_t estimated_jobs() const override { return inner_->estimated_jobs(); }
  Status checkpoint(const std::string& dir) override { return inner_->checkpoint(dir); }

 private:
  std::unique_ptr<store::Store> inner_;
  mutable std::mutex mutex_;
  std::condition_variable changed_;
  bool open_ = true;
  int held_ = 0;
  std::size_t writes_ = 0;
  Status failure_ = Status::ok();
  std::map<JobId, Status> bad_bodies_;
};

}  // namespace delayq::testing
