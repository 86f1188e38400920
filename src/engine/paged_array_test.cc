// paged_array_test.cc — PagedArray: indexes across page boundaries, elements that stay where they
// were made while the array grows, and the memory it reports.
#include "engine/paged_array.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

namespace delayq::engine {
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

}  // namespace
}  // namespace delayq::engine
