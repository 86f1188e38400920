// record_table.h — the timer thread's table of the records it holds in the wheel: the wheel's
// Timers (a wheel::TimerTable the queue is built over) and, for each timer id, its record. Ids
// are reused, so the table is as large as the most records ever pending at once. A record's
// timer_id_ is its id while it is in the table, or one of two marks while it is not: kNewRecord
// (accepted, still in the inbox) or kGoneRecord (handed to a worker, cancelled or dropped).
// add() and remove() are O(1) (amortised: the table grows). Timer thread only.
#pragma once

#include <cstddef>
#include <limits>
#include <vector>

#include "delayq/scheduler.h"
#include "wheel/timer.h"

namespace delayq::detail {

inline constexpr wheel::TimerId kNewRecord = std::numeric_limits<wheel::TimerId>::max();
inline constexpr wheel::TimerId kGoneRecord = kNewRecord - 1;

class RecordTable {
 public:
  RecordTable() = default;
  RecordTable(const RecordTable&) = delete;
  RecordTable& operator=(const RecordTable&) = delete;

  // The Timers the wheel is built over; they grow with the table.
  [[nodiscard]] wheel::TimerTable& timers() noexcept { return timers_; }
  // Gives `record` a free id (sets its timer_id_) and returns it.
  wheel::TimerId add(TaskRecord* record);
  // Frees the id of `record`, which must be in the table; its timer_id_ becomes kGoneRecord.
  void remove(TaskRecord* record);
  // The record of a live id.
  [[nodiscard]] TaskRecord* at(wheel::TimerId id) const noexcept { return by_id_[id]; }
  // Records in the table.
  [[nodiscard]] std::size_t size() const noexcept { return size_; }
  // Every slot by id: a record, or nullptr for a free id. remove() may be called while walking
  // it (it empties a slot; it never moves one).
  [[nodiscard]] const std::vector<TaskRecord*>& slots() const noexcept { return by_id_; }

 private:
  wheel::TimerTable timers_;
  std::vector<TaskRecord*> by_id_;
  std::vector<wheel::TimerId> free_ids_;
  std::size_t size_ = 0;
};

}  // namespace delayq::detail
