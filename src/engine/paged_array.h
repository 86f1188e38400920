// paged_array.h — a growable array in fixed pages of kPerPage elements, for the engine's job
// table. Elements never move once made (as in a std::deque) and indexing is a divide and a
// modulo by a power of two. Unlike std::deque's 512-byte chunks, a page holds thousands of
// elements, so a million jobs cost a few hundred allocations instead of tens of thousands: the
// table's memory does not interleave in the heap with the server's short-lived allocations, whose
// freed holes would otherwise stay pinned between long-lived chunks (with std::deque, ~8 MiB of
// such holes at 10^6 pending jobs: docs/BENCHMARKS.md). It only grows; the engine reuses freed
// slots itself.
#pragma once

#include <cstddef>
#include <memory>
#include <vector>

namespace delayq::engine {

template <typename T, std::size_t kPerPage>
class PagedArray {
  static_assert(kPerPage > 0 && (kPerPage & (kPerPage - 1)) == 0, "a power of two per page");

 public:
  [[nodiscard]] T& operator[](std::size_t i) noexcept { return pages_[i / kPerPage][i % kPerPage]; }
  [[nodiscard]] const T& operator[](std::size_t i) const noexcept {
    return pages_[i / kPerPage][i % kPerPage];
  }
  [[nodiscard]] std::size_t size() const noexcept { return size_; }
  // Bytes of the pages (allocated whole) and of the page table.
  [[nodiscard]] std::size_t memory_bytes() const noexcept {
    return pages_.size() * kPerPage * sizeof(T) + pages_.capacity() * sizeof(pages_[0]);
  }

  // Appends a default-made element and returns it.
  T& emplace_back() {
    if (size_ == pages_.size() * kPerPage) pages_.push_back(std::make_unique<T[]>(kPerPage));
    return (*this)[size_++];
  }

 private:
  std::vector<std::unique_ptr<T[]>> pages_;
  std::size_t size_ = 0;
};

}  // namespace delayq::engine
