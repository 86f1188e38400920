// paged_array_test.cc — PagedArray: indexes across page boundaries, elements that stay where they
// were made while the array grows, resize, moves, destruction, and the memory it reports.
#include "base/paged_array.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <utility>
#include <vector>

namespace delayq {
namespace {

TEST(PagedArray, ElementsKeepTheirValuesAndAddressesAcrossPages) {
  PagedArray<std::uint64_t, 8> array;
  std::vector<const std::uint64_t*> addresses;
  for (std::uint64_t i = 0; i < 100; ++i) {
    std::uint64_t& made = array.emplace_back();
    EXPECT_EQ(made, 0U);  // value-initialised
    made = i * 3;
    addresses.push_back(&made);
    EXPECT_EQ(array.size(), i + 1);
  }
  for (std::size_t i = 0; i < 100; ++i) {
    EXPECT_EQ(array[i], i * 3) << i;
    EXPECT_EQ(&array[i], addresses[i]) << i;  // growing never moved it
  }
  array[17] = 5;
  const auto& constant = array;
  EXPECT_EQ(constant[17], 5U);
}

TEST(PagedArray, MemoryIsWholePages) {
  PagedArray<std::uint64_t, 8> array;
  EXPECT_EQ(array.memory_bytes(), 0U);
  array.emplace_back();
  EXPECT_GE(array.memory_bytes(), 8 * sizeof(std::uint64_t));
  for (int i = 0; i < 8; ++i) array.emplace_back();  // 9 elements: a second page
  EXPECT_GE(array.memory_bytes(), 16 * sizeof(std::uint64_t));
  EXPECT_LT(array.memory_bytes(), 16 * sizeof(std::uint64_t) + 1024);
}

TEST(PagedArray, ResizeMakesValueInitialisedElementsAndNeverShrinks) {
  PagedArray<std::uint32_t, 4> array(6);
  EXPECT_EQ(array.size(), 6U);
  for (std::size_t i = 0; i < 6; ++i) EXPECT_EQ(array[i], 0U) << i;
  array[5] = 9;
  array.resize(11);
  EXPECT_EQ(array.size(), 11U);
  EXPECT_EQ(array[5], 9U);
  EXPECT_EQ(array[10], 0U);
  array.resize(3);
  EXPECT_EQ(array.size(), 11U);
}

// Counts its live instances, to see that every element made is destroyed once.
struct Counted {
  static inline int live = 0;
  int value = 7;
  Counted() { ++live; }
  Counted(const Counted&) = delete;
  Counted& operator=(const Counted&) = delete;
  ~Counted() { --live; }
};

TEST(PagedArray, MovesTakeTheElementsAndEveryElementIsDestroyedOnce) {
  {
    PagedArray<Counted, 4> array(10);
    EXPECT_EQ(Counted::live, 10);
    const Counted* third = &array[2];
    PagedArray<Counted, 4> moved(std::move(array));
    EXPECT_EQ(moved.size(), 10U);
    EXPECT_EQ(&moved[2], third);  // the pages moved, not the elements
    EXPECT_EQ(array.size(), 0U);  // NOLINT(bugprone-use-after-move): moved-from is empty
    PagedArray<Counted, 4> other(3);
    EXPECT_EQ(Counted::live, 13);
    other = std::move(moved);  // other's three go
    EXPECT_EQ(Counted::live, 10);
    EXPECT_EQ(other.size(), 10U);
    EXPECT_EQ(other[9].value, 7);
  }
  EXPECT_EQ(Counted::live, 0);
}

}  // namespace
}  // namespace delayq
