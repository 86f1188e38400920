// record_table.cc — ids for the records the timer thread holds in the wheel (record_table.h).
#include "embedded/record_table.h"

#include "base/check.h"

namespace delayq::detail {

wheel::TimerId RecordTable::add(TaskRecord* record) {
  wheel::TimerId id;
  if (free_ids_.empty()) {
    DELAYQ_CHECK(timers_.size() < kGoneRecord);
    id = static_cast<wheel::TimerId>(timers_.size());
    timers_.emplace_back();
    by_id_.push_back(record);
  } else {
    id = free_ids_.back();
    free_ids_.pop_back();
    by_id_[id] = record;
  }
  record->timer_id_ = id;
  ++size_;
  return id;
}

void RecordTable::remove(TaskRecord* record) {
  DELAYQ_CHECK(record->timer_id_ < kGoneRecord);
  by_id_[record->timer_id_] = nullptr;
  free_ids_.push_back(record->timer_id_);
  record->timer_id_ = kGoneRecord;
  --size_;
}

}  // namespace delayq::detail
