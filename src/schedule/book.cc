#include "schedule/book.h"

namespace delayq::schedule {

void Book::set(std::string_view name, std::optional<std::int64_t> wake_unix_ms) {
  auto it = wakes_by_name_.find(name);
  if (it == wakes_by_name_.end()) {
    it = wakes_by_name_.emplace(std::string(name), kNever).first;
  }
  // The view points at the map's own copy of the name, which lives as long as the entry.
  const std::string_view own = it->first;
  if (it->second != kNever) wakes_.erase({it->second, own});
  it->second = wake_unix_ms.value_or(kNever);
  if (it->second != kNever) wakes_.emplace(it->second, own);
}

bool Book::contains(std::string_view name) const {
  return wakes_by_name_.contains(name);
}

bool Book::erase(std::string_view name) {
  const auto it = wakes_by_name_.find(name);
  if (it == wakes_by_name_.end()) return false;
  if (it->second != kNever) wakes_.erase({it->second, std::string_view(it->first)});
  wakes_by_name_.erase(it);
  return true;
}

std::vector<std::string> Book::due(std::int64_t now_unix_ms, std::size_t limit) const {
  std::vector<std::string> names;
  for (auto it = wakes_.begin();
       it != wakes_.end() && it->first <= now_unix_ms && names.size() < limit; ++it) {
    names.emplace_back(it->second);
  }
  return names;
}

std::optional<std::int64_t> Book::next_wake() const {
  if (wakes_.empty()) return std::nullopt;
  return wakes_.begin()->first;
}

std::vector<std::string> Book::list(std::string_view after, std::size_t limit) const {
  std::vector<std::string> out;
  for (auto it = wakes_by_name_.upper_bound(after);
       it != wakes_by_name_.end() && out.size() < limit; ++it) {
    out.push_back(it->first);
  }
  return out;
}

}  // namespace delayq::schedule
