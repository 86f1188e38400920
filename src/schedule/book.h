// book.h — the schedules a node runs, in memory: each one's name and when it next wakes, nothing
// more. Definitions and states live in the broker's store (RocksDB, or the schedule's shard in
// Redis), read when a schedule steps or is shown, so a stored schedule costs a node only its
// name and its wake. A broker fills it at start (from its store, or in Redis mode from the shards
// it owns), asks due() at each turn, steps each schedule that is due through planner.h and sets
// when to wake it next. Not thread-safe: one node's loop.
// Costs: set, contains and erase are O(log n); due() is O(schedules due); list() O(log n + limit).
#pragma once

#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace delayq::schedule {

class Book {
 public:
  // Adds the schedule if new, and sets when it wakes (nullopt: not by time).
  void set(std::string_view name, std::optional<std::int64_t> wake_unix_ms);
  [[nodiscard]] bool contains(std::string_view name) const;
  bool erase(std::string_view name);

  // Up to `limit` names whose wake is at or before `now_unix_ms`, earliest first.
  [[nodiscard]] std::vector<std::string> due(std::int64_t now_unix_ms, std::size_t limit) const;
  [[nodiscard]] std::optional<std::int64_t> next_wake() const;
  // Up to `limit` names that sort after `after`, in name order.
  [[nodiscard]] std::vector<std::string> list(std::string_view after, std::size_t limit) const;
  [[nodiscard]] std::size_t size() const noexcept { return wakes_by_name_.size(); }

 private:
  static constexpr std::int64_t kNever = std::numeric_limits<std::int64_t>::max();  // none
  std::map<std::string, std::int64_t, std::less<>> wakes_by_name_;
  std::set<std::pair<std::int64_t, std::string_view>> wakes_;  // names point into the map
};

}  // namespace delayq::schedule
