#include "engine/id_index.h"

#include <new>
#include <utility>

#include "base/check.h"

namespace delayq::engine {

IdIndex::Table::Table(std::size_t size)
    : data_(static_cast<Slot*>(std::calloc(size, sizeof(Slot)))), size_(size) {
  if (!data_) throw std::bad_alloc();
}

IdIndex::IdIndex(IdOf lookup, const void* context) : id_of_(lookup), context_(context) {
  buckets_ = Table(16);
  mask_ = 15;
  shift_ = 60;
}

void IdIndex::insert(JobId id, Slot slot) {
  DELAYQ_CHECK(slot != ~Slot{0});  // slot + 1 must not wrap to empty
  if (!old_.empty()) drain(kDrainPerStep);
  if ((size_ + 1) * 5 > buckets_.size() * 4) grow();
  std::size_t i = home(id);
  while (buckets_[i] != kEmpty) i = (i + 1) & mask_;
  buckets_[i] = slot + 1;
  ++size_;
}

std::optional<std::size_t> IdIndex::where(const Table& table, unsigned shift, JobId id) const {
  const std::size_t mask = table.size() - 1;
  for (std::size_t i = home(id, shift);; i = (i + 1) & mask) {
    const Slot slot = table[i];
    if (slot == kEmpty) return std::nullopt;
    if (id_of(slot) == id) return i;
  }
}

std::optional<IdIndex::Slot> IdIndex::find(JobId id) const {
  if (const auto i = where(buckets_, shift_, id)) return buckets_[*i] - 1;
  if (!old_.empty()) {
    if (const auto i = where(old_, old_shift_, id)) return old_[*i] - 1;
  }
  return std::nullopt;
}

bool IdIndex::erase(JobId id) {
  if (!old_.empty()) drain(kDrainPerStep);
  if (const auto i = where(buckets_, shift_, id)) {
    erase_at(buckets_, *i, shift_);
  } else if (const auto j = old_.empty() ? std::nullopt : where(old_, old_shift_, id)) {
    erase_at(old_, *j, old_shift_);  // inside a probe run not yet moved: it stays whole
  } else {
    return false;
  }
  --size_;
  return true;
}

// Backward shift: pull later members of the probe run into the hole when their home allows, so
// no tombstones are needed and lookups stay short.
void IdIndex::erase_at(Table& table, std::size_t i, unsigned shift) {
  const std::size_t mask = table.size() - 1;
  std::size_t hole = i;
  for (std::size_t j = (i + 1) & mask; table[j] != kEmpty; j = (j + 1) & mask) {
    const std::size_t want = home(id_of(table[j]), shift);
    // Movable when the hole lies cyclically in [want, j).
    if (((j - want) & mask) >= ((j - hole) & mask)) {
      table[hole] = table[j];
      hole = j;
    }
  }
  table[hole] = kEmpty;
}

void IdIndex::reserve(std::size_t count) {
  while (count * 5 > buckets_.size() * 4) grow();
  if (!old_.empty()) drain(old_.size());
}

// The table doubles; its entries move over later (drain()). An old table still draining is
// finished first (it cannot be: it drains in a fifth of the inserts that fill the new one).
void IdIndex::grow() {
  if (!old_.empty()) drain(old_.size());
  Table doubled(buckets_.size() * 2);
  old_ = std::exchange(buckets_, std::move(doubled));
  old_shift_ = shift_;
  mask_ = buckets_.size() - 1;
  --shift_;
  drain_start_ = 0;
  while (old_[drain_start_] != kEmpty) ++drain_start_;  // there is one: the table is < 80% full
  drained_ = 0;
}

// Looks at `budget` buckets of the old table from where the last call stopped, then on to the
// end of the probe run it is in, moving every entry into the new table: each run moves whole,
// and the next call starts at an empty bucket.
void IdIndex::drain(std::size_t budget) {
  const std::size_t mask = old_.size() - 1;
  std::size_t looked = 0;
  while (drained_ < old_.size()) {
    const std::size_t i = (drain_start_ + drained_) & mask;
    if (looked >= budget && old_[i] == kEmpty) return;
    if (old_[i] != kEmpty) {
      std::size_t k = home(id_of(old_[i]));
      while (buckets_[k] != kEmpty) k = (k + 1) & mask_;
      buckets_[k] = old_[i];
      old_[i] = kEmpty;
    }
    ++drained_;
    ++looked;
  }
  old_ = Table();
}

}  // namespace delayq::engine
