#include "store/memory_store.h"

#include <utility>
#include <vector>

namespace delayq::store {

Status MemoryStore::write(std::span<const WriteSet* const> sets, bool /*sync*/) {
  const std::lock_guard lock(mutex_);
  for (const WriteSet* set : sets) {
    for (const WriteSet::Op& op : set->ops()) {
      switch (op.kind) {
        case WriteSet::Kind::kRecord:
          records_[op.id] = op.value;
          break;
        case WriteSet::Kind::kBody:
          bodies_[op.id] = op.value;
          break;
        case WriteSet::Kind::kErase:
          records_.erase(op.id);
          bodies_.erase(op.id);
          break;
        case WriteSet::Kind::kAttachment:
          attachments_[op.id] = op.value;
          break;
        case WriteSet::Kind::kEraseAttachment:
          attachments_.erase(op.id);
          break;
        case WriteSet::Kind::kWebhook:
          webhooks_[op.tube] = op.value;
          break;
        case WriteSet::Kind::kEraseWebhook:
          webhooks_.erase(op.tube);
          break;
        case WriteSet::Kind::kMaxAttempts:
          if (const auto n = decode_u32(op.value); n && *n != 0) {
            max_attempts_[op.tube] = *n;
          } else {
            max_attempts_.erase(op.tube);
          }
          break;
        case WriteSet::Kind::kFlow:
          if (op.value.empty()) {
            flows_.erase(op.tube);
          } else {
            flows_[op.tube] = op.value;
          }
          break;
        case WriteSet::Kind::kSchedule:
          schedules_[op.tube] = op.value;
          break;
        case WriteSet::Kind::kEraseSchedule:
          schedules_.erase(op.tube);
          break;
        case WriteSet::Kind::kFarPut:
        case WriteSet::Kind::kFarPutFresh:
        case WriteSet::Kind::kFarErase:
        case WriteSet::Kind::kFarCount: {
          const Status s = far_writes(
              op,
              [this](std::string key, std::optional<std::string_view> value) {
                if (value) {
                  far_[std::move(key)] = std::string(*value);
                } else {
                  far_.erase(key);
                }
              },
              [this](JobId id) { records_.erase(id); });
          if (!s.is_ok()) return s;
          break;
        }
      }
    }
    if (set->next_id()) next_id_ = *set->next_id();
  }
  return Status::ok();
}

Result<std::optional<std::string>> MemoryStore::far_get(const std::string& key) {
  const std::lock_guard lock(mutex_);
  const auto it = far_.find(key);
  if (it == far_.end()) return std::optional<std::string>();
  return std::optional<std::string>(it->second);
}

Status MemoryStore::far_scan(const std::string& prefix, const std::string& start,
                             const std::function<bool(std::string_view, std::string_view)>& visit) {
  // A copy, so that visit may read (or the committer write) while the scan goes on.
  std::vector<std::pair<std::string, std::string>> entries;
  {
    const std::lock_guard lock(mutex_);
    for (auto it = far_.lower_bound(start); it != far_.end() && it->first.starts_with(prefix);
         ++it) {
      entries.emplace_back(*it);
    }
  }
  for (const auto& [key, value] : entries) {
    if (!visit(key, value)) break;
  }
  return Status::ok();
}

Status MemoryStore::scan(const std::function<Status(JobRecord&&)>& visit) {
  for (const auto& [id, bytes] : records_) {
    auto record = decode_record(id, bytes);
    if (!record.is_ok()) return record.status();
    if (Status s = visit(std::move(record).value()); !s.is_ok()) return s;
  }
  return Status::ok();
}

Result<std::string> MemoryStore::read_body(JobId id) {
  const std::lock_guard lock(mutex_);
  const auto it = bodies_.find(id);
  if (it == bodies_.end()) return Status(Code::kNotFound, "no body for job " + std::to_string(id));
  return it->second;
}

Result<Delivery> MemoryStore::read_attachment(JobId id) {
  const std::lock_guard lock(mutex_);
  const auto it = attachments_.find(id);
  if (it == attachments_.end()) {
    return Status(Code::kNotFound, "no attachment for job " + std::to_string(id));
  }
  return decode_delivery(id, it->second);
}

Status MemoryStore::scan_webhooks(const std::function<Status(std::string, Webhook)>& visit) {
  for (const auto& [tube, bytes] : webhooks_) {
    auto webhook = decode_webhook(tube, bytes);
    if (!webhook.is_ok()) return webhook.status();
    if (Status s = visit(tube, std::move(webhook).value()); !s.is_ok()) return s;
  }
  return Status::ok();
}

Status MemoryStore::scan_max_attempts(
    const std::function<Status(std::string, std::uint32_t)>& visit) {
  for (const auto& [tube, n] : max_attempts_) {
    if (Status s = visit(tube, n); !s.is_ok()) return s;
  }
  return Status::ok();
}

Status MemoryStore::scan_flows(const std::function<Status(std::string, FlowSettings)>& visit) {
  for (const auto& [tube, bytes] : flows_) {
    auto flow = decode_flow(tube, bytes);
    if (!flow.is_ok()) return flow.status();
    if (Status s = visit(tube, flow.value()); !s.is_ok()) return s;
  }
  return Status::ok();
}

Status MemoryStore::scan_schedules(const std::function<Status(std::string, std::string)>& visit) {
  for (const auto& [name, value] : schedules_) {
    if (Status s = visit(name, value); !s.is_ok()) return s;
  }
  return Status::ok();
}

Result<std::optional<std::string>> MemoryStore::read_schedule(std::string_view name) {
  const std::lock_guard lock(mutex_);
  const auto it = schedules_.find(std::string(name));
  if (it == schedules_.end()) return std::optional<std::string>();
  return std::optional<std::string>(it->second);
}

}  // namespace delayq::store
