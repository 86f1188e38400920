#include "engine/id_index.h"

#include "base/check.h"

namespace delayq::engine {

IdIndex::IdIndex(IdOf lookup, const void* context) : id_of_(lookup), context_(context) {
  buckets_.assign(16, kEmpty);
  mask_ = 15;
  shift_ = 60;
}

void IdIndex::insert(JobId id, Slot slot) {
  DELAYQ_CHECK(slot != kEmpty);
  if ((size_ + 1) * 5 > buckets_.size() * 4) grow();
  std::size_t i = home(id);
  while (buckets_[i] != kEmpty) i = (i + 1) & mask_;
  buckets_[i] = slot;
  ++size_;
}

std::optional<IdIndex::Slot> IdIndex::find(JobId id) const {
  for (std::size_t i = home(id);; i = (i + 1) & mask_) {
    const Slot slot = buckets_[i];
    if (slot == kEmpty) return std::nullopt;
    if (id_of(slot) == id) return slot;
  }
}

bool IdIndex::erase(JobId id) {
  std::size_t i = home(id);
  for (;; i = (i + 1) & mask_) {
    if (buckets_[i] == kEmpty) return false;
    if (id_of(buckets_[i]) == id) break;
  }
  // Backward shift: pull later members of the probe run into the hole when their home allows,
  // so no tombstones are needed and lookups stay short.
  std::size_t hole = i;
  for (std::size_t j = (i + 1) & mask_; buckets_[j] != kEmpty; j = (j + 1) & mask_) {
    const std::size_t want = home(id_of(buckets_[j]));
    // Movable when the hole lies cyclically in [want, j).
    if (((j - want) & mask_) >= ((j - hole) & mask_)) {
      buckets_[hole] = buckets_[j];
      hole = j;
    }
  }
  buckets_[hole] = kEmpty;
  --size_;
  return true;
}

void IdIndex::reserve(std::size_t count) {
  while (count * 5 > buckets_.size() * 4) grow();
}

void IdIndex::grow() {
  std::vector<Slot> old;
  old.swap(buckets_);
  buckets_.assign(old.size() * 2, kEmpty);
  mask_ = buckets_.size() - 1;
  --shift_;
  for (const Slot slot : old) {
    if (slot == kEmpty) continue;
    std::size_t i = home(id_of(slot));
    while (buckets_[i] != kEmpty) i = (i + 1) & mask_;
    buckets_[i] = slot;
  }
}

}  // namespace delayq::engine
