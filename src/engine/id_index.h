// id_index.h — job id -> slot, in 4 bytes a bucket.
// An open-addressing table (linear probing, backward-shift deletion) that stores only slot
// numbers; the id a bucket stands for is read back from the caller's table through `id_of`, so
// the index costs 4 bytes per bucket and at most 1.6 buckets per job (it doubles past 80% full).
// Lookups cost one probe and one read of the job in the common case. Not thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "base/job.h"

namespace delayq::engine {

class IdIndex {
 public:
  using Slot = std::uint32_t;
  // id_of(context, slot) must return the id of the job in `slot` for every slot in the index.
  using IdOf = JobId (*)(const void* context, Slot slot);
  IdIndex(IdOf lookup, const void* context);

  // id must not be present (the caller guarantees it: checking would cost a read per probe).
  void insert(JobId id, Slot slot);
  [[nodiscard]] std::optional<Slot> find(JobId id) const;
  // Grows the table now to hold `count` ids, so that filling it does not rehash on the way.
  void reserve(std::size_t count);
  bool erase(JobId id);
  [[nodiscard]] std::size_t size() const noexcept { return size_; }
  [[nodiscard]] std::size_t memory_bytes() const noexcept {
    return buckets_.capacity() * sizeof(Slot);
  }

 private:
  static constexpr Slot kEmpty = ~Slot{0};
  [[nodiscard]] std::size_t home(JobId id) const noexcept {
    // Fibonacci hashing: ids are consecutive, the multiply spreads them over the high bits.
    return static_cast<std::size_t>((id * 0x9E3779B97F4A7C15ULL) >> shift_);
  }
  void grow();

  [[nodiscard]] JobId id_of(Slot slot) const { return id_of_(context_, slot); }

  IdOf id_of_;
  const void* context_;
  std::vector<Slot> buckets_;
  std::size_t mask_ = 0;
  unsigned shift_ = 64;
  std::size_t size_ = 0;
};

}  // namespace delayq::engine
