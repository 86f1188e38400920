// paged_array.h — a growable array in fixed pages of kPerPage elements, for tables indexed by a
// dense number (the engine's jobs, the timer queues' timers). Elements never move once made (as
// in a std::deque) and indexing is a divide and a modulo by a power of two. Growing never copies
// or touches what exists: a std::vector of a million timers copied 8 MB and faulted in 8 MB of
// new pages at once, holding the server for milliseconds. A page's memory is allocated whole and
// left untouched until its elements are made, one at a time, so a page's first use costs nothing
// up front either. Unlike std::deque's 512-byte chunks, a page holds thousands of elements, so a
// million jobs cost a few hundred allocations instead of tens of thousands: the table's memory
// does not interleave in the heap with the server's short-lived allocations, whose freed holes
// would otherwise stay pinned between long-lived chunks (with std::deque, ~8 MiB of such holes at
// 10^6 pending jobs: docs/BENCHMARKS.md). It only grows; its owners reuse freed indexes themselves.
#pragma once

#include <cstddef>
#include <memory>
#include <new>
#include <utility>
#include <vector>

namespace delayq {

template <typename T, std::size_t kPerPage>
class PagedArray {
  static_assert(kPerPage > 0 && (kPerPage & (kPerPage - 1)) == 0, "a power of two per page");

 public:
  PagedArray() = default;
  // `count` value-initialised elements.
  explicit PagedArray(std::size_t count) { resize(count); }
  PagedArray(const PagedArray&) = delete;
  PagedArray& operator=(const PagedArray&) = delete;
  PagedArray(PagedArray&& other) noexcept
      : pages_(std::move(other.pages_)), size_(std::exchange(other.size_, 0)) {}
  PagedArray& operator=(PagedArray&& other) noexcept {
    if (this != &other) {
      destroy();
      pages_ = std::move(other.pages_);
      size_ = std::exchange(other.size_, 0);
    }
    return *this;
  }
  ~PagedArray() { destroy(); }

  [[nodiscard]] T& operator[](std::size_t i) noexcept { return page(i / kPerPage)[i % kPerPage]; }
  [[nodiscard]] const T& operator[](std::size_t i) const noexcept {
    return page(i / kPerPage)[i % kPerPage];
  }
  [[nodiscard]] std::size_t size() const noexcept { return size_; }
  // Bytes of the pages (allocated whole) and of the page table.
  [[nodiscard]] std::size_t memory_bytes() const noexcept {
    return pages_.size() * kPerPage * sizeof(T) + pages_.capacity() * sizeof(pages_[0]);
  }

  // Appends a value-initialised element and returns it.
  T& emplace_back() {
    if (size_ == pages_.size() * kPerPage) {
      pages_.push_back(Page(
          static_cast<T*>(::operator new (kPerPage * sizeof(T), std::align_val_t{alignof(T)}))));
    }
    T* made = ::new (page(size_ / kPerPage) + size_ % kPerPage) T();  // raw memory until now
    ++size_;
    return *made;
  }
  // Grows to `count` elements (never shrinks).
  void resize(std::size_t count) {
    while (size_ < count) emplace_back();
  }

 private:
  struct FreePage {
    void operator()(T* page) const noexcept {
      ::operator delete (page, std::align_val_t{alignof(T)});
    }
  };
  using Page = std::unique_ptr<T[], FreePage>;

  [[nodiscard]] T* page(std::size_t n) const noexcept { return pages_[n].get(); }
  void destroy() noexcept {
    for (std::size_t i = 0; i < size_; ++i) (*this)[i].~T();
    size_ = 0;
  }

  std::vector<Page> pages_;
  std::size_t size_ = 0;
};

}  // namespace delayq
