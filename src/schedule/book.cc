#include "schedule/book.h"

namespace delayq::schedule {

Book::Entry& Book::put(Compiled schedule, State state) {
  std::string name = schedule.definition.name;
  erase(name);
  auto [it, inserted] =
      entries_.emplace(std::move(name), Entry{std::move(schedule), std::move(state), {}});
  return it->second;
}

Book::Entry* Book::find(std::string_view name) {
  const auto it = entries_.find(name);
  return it == entries_.end() ? nullptr : &it->second;
}

const Book::Entry* Book::find(std::string_view name) const {
  const auto it = entries_.find(name);
  return it == entries_.end() ? nullptr : &it->second;
}

bool Book::erase(std::string_view name) {
  const auto it = entries_.find(name);
  if (it == entries_.end()) return false;
  set_wake(it->second, std::nullopt);
  entries_.erase(it);
  return true;
}

void Book::set_wake(Entry& entry, std::optional<std::int64_t> wake_unix_ms) {
  // The key's view points at the map's own copy of the name, which lives as long as the entry.
  const std::string_view name = entries_.find(entry.schedule.definition.name)->first;
  if (entry.wake_unix_ms) wakes_.erase({*entry.wake_unix_ms, name});
  entry.wake_unix_ms = wake_unix_ms;
  if (wake_unix_ms) wakes_.emplace(*wake_unix_ms, name);
}

std::vector<std::string> Book::due(std::int64_t now_unix_ms) const {
  std::vector<std::string> names;
  for (auto it = wakes_.begin(); it != wakes_.end() && it->first <= now_unix_ms; ++it) {
    names.emplace_back(it->second);
  }
  return names;
}

std::optional<std::int64_t> Book::next_wake() const {
  if (wakes_.empty()) return std::nullopt;
  return wakes_.begin()->first;
}

std::vector<const Book::Entry*> Book::list(std::string_view after, std::size_t limit) const {
  std::vector<const Entry*> out;
  for (auto it = entries_.upper_bound(after); it != entries_.end() && out.size() < limit; ++it) {
    out.push_back(&it->second);
  }
  return out;
}

}  // namespace delayq::schedule
