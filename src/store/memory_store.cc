#include "store/store.h"

namespace delayq::store {

Status MemoryStore::write(std::span<const WriteSet* const> sets, bool /*sync*/) {
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
      }
    }
    if (set->next_id()) next_id_ = *set->next_id();
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
  const auto it = bodies_.find(id);
  if (it == bodies_.end()) return Status(Code::kNotFound, "no body for job " + std::to_string(id));
  return it->second;
}

}  // namespace delayq::store
