// book.h — the schedules a node runs, in memory: each one's compiled definition and state, found
// by name, listed in name order, and woken in time order. A broker fills it at start (from its
// store, or in Redis mode from the shards it owns), asks due() at each turn, steps each schedule
// that is due through planner.h and says when to wake it next. Not thread-safe: one node's loop.
// Costs: find, put, erase and set_wake are O(log n); due() is O(schedules due).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "schedule/definition.h"
#include "schedule/planner.h"

namespace delayq::schedule {

class Book {
 public:
  struct Entry {
    Compiled schedule;
    State state;
    std::optional<std::int64_t> wake_unix_ms;  // when step() is due again; nullopt: not by time
  };

  // Adds a schedule, or replaces the one of that name; its wake is unset.
  Entry& put(Compiled schedule, State state);
  [[nodiscard]] Entry* find(std::string_view name);
  [[nodiscard]] const Entry* find(std::string_view name) const;
  bool erase(std::string_view name);
  void set_wake(Entry& entry, std::optional<std::int64_t> wake_unix_ms);

  // The names whose wake is at or before `now_unix_ms`, earliest first.
  [[nodiscard]] std::vector<std::string> due(std::int64_t now_unix_ms) const;
  [[nodiscard]] std::optional<std::int64_t> next_wake() const;
  // Up to `limit` schedules whose names sort after `after`, in name order.
  [[nodiscard]] std::vector<const Entry*> list(std::string_view after, std::size_t limit) const;
  [[nodiscard]] std::size_t size() const noexcept { return entries_.size(); }

 private:
  std::map<std::string, Entry, std::less<>> entries_;
  std::set<std::pair<std::int64_t, std::string_view>> wakes_;  // names point into entries_
};

}  // namespace delayq::schedule
