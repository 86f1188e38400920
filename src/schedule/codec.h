// codec.h — a schedule as it is stored: its definition and its state in one value, the same bytes
// in RocksDB (under store::kSchedulePrefix + name) and in Redis. The layout is drawn in codec.cc.
// A stored value is read back exactly (decode(encode(x)) == x); a value of another format version
// is kUnknownFormat, a damaged one kCorruption naming the schedule.
#pragma once

#include <string>
#include <string_view>

#include "base/status.h"
#include "schedule/definition.h"
#include "schedule/planner.h"

namespace delayq::schedule {

inline constexpr std::uint8_t kRecordVersion = 1;

struct Record {
  Definition definition;
  State state;

  friend bool operator==(const Record&, const Record&) = default;
};

[[nodiscard]] std::string encode(const Record& record);
[[nodiscard]] Result<Record> decode(std::string_view name, std::string_view bytes);

}  // namespace delayq::schedule
