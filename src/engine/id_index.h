// id_index.h — job id -> slot, in 4 bytes a bucket.
// An open-addressing table (linear probing, backward-shift deletion) that stores only slot
// numbers; the id a bucket stands for is read back from the caller's table through `id_of`, so
// the index costs 4 bytes per bucket and at most 1.6 buckets per job (it doubles past 80% full).
// Lookups cost one probe and one read of the job in the common case. Growing does not stop the
// world: the old table is drained into the new one a few buckets per insert and erase (a whole
// probe run at a time, so that a lookup in the old table never meets a half-moved run), and
// lookups meanwhile try the new table, then the old. A rehash of ten million ids in one go held
// the server for a few hundred milliseconds. A new table comes from calloc, whose large blocks
// are fresh zero pages from the kernel (an empty bucket is 0, a bucket holds slot + 1): its pages
// are faulted in as the drain and the inserts reach them, not all at once as a fill would (a
// 4 MiB fill with its page faults held the server for milliseconds). Not thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <optional>

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
  // Grows the table now to hold `count` ids, so that filling it does not rehash on the way (all
  // at once: for recovery, before anyone is served).
  void reserve(std::size_t count);
  bool erase(JobId id);
  [[nodiscard]] std::size_t size() const noexcept { return size_; }
  [[nodiscard]] std::size_t memory_bytes() const noexcept {
    return (buckets_.size() + old_.size()) * sizeof(Slot);
  }
  // Whether an old table is still being drained (for tests).
  [[nodiscard]] bool growing() const noexcept { return !old_.empty(); }

 private:
  // Buckets, zeroed. A bucket holds slot + 1, so that 0 is empty and calloc's zero pages are an
  // empty table.
  class Table {
   public:
    Table() = default;
    explicit Table(std::size_t size);
    [[nodiscard]] Slot& operator[](std::size_t i) noexcept { return data_.get()[i]; }
    [[nodiscard]] Slot operator[](std::size_t i) const noexcept { return data_.get()[i]; }
    [[nodiscard]] std::size_t size() const noexcept { return size_; }
    [[nodiscard]] bool empty() const noexcept { return size_ == 0; }

   private:
    struct Free {
      void operator()(Slot* p) const noexcept { std::free(p); }
    };
    std::unique_ptr<Slot, Free> data_;
    std::size_t size_ = 0;
  };
  static constexpr Slot kEmpty = 0;
  // Buckets looked at per insert or erase while the old table drains: it is empty long before
  // the new one must grow (the new table grows at 80% full, the old drains in a fifth of that).
  static constexpr std::size_t kDrainPerStep = 8;
  [[nodiscard]] static std::size_t home(JobId id, unsigned shift) noexcept {
    // Fibonacci hashing: ids are consecutive, the multiply spreads them over the high bits.
    return static_cast<std::size_t>((id * 0x9E3779B97F4A7C15ULL) >> shift);
  }
  [[nodiscard]] std::size_t home(JobId id) const noexcept { return home(id, shift_); }
  void grow();
  void drain(std::size_t budget);  // moves whole probe runs of old_, `budget` buckets or more
  // In `table` (buckets_ or old_, whose shift is `shift`): where id is, and taking it out.
  [[nodiscard]] std::optional<std::size_t> where(const Table& table, unsigned shift,
                                                 JobId id) const;
  void erase_at(Table& table, std::size_t i, unsigned shift);

  // The id of the job whose bucket holds `stored` (its slot + 1).
  [[nodiscard]] JobId id_of(Slot stored) const { return id_of_(context_, stored - 1); }

  IdOf id_of_;
  const void* context_;
  Table buckets_;
  std::size_t mask_ = 0;
  unsigned shift_ = 64;
  std::size_t size_ = 0;
  // The table being drained (empty when none): its shift, where draining began (an empty bucket,
  // so no probe run crosses it) and how many buckets from there it has moved.
  Table old_;
  unsigned old_shift_ = 64;
  std::size_t drain_start_ = 0;
  std::size_t drained_ = 0;
};

}  // namespace delayq::engine
