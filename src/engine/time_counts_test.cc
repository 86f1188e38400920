#include "engine/time_counts.h"

#include <gtest/gtest.h>

#include <vector>

namespace delayq::engine {
namespace {

std::vector<std::uint64_t> count(const TimeCounts& times, std::vector<std::int64_t> edges) {
  std::vector<std::uint64_t> out(edges.size() + 1, 0);
  times.count(edges, out);
  return out;
}

TEST(TimeCounts, CountsBetweenEdgesRoundedDownToWholeBuckets) {
  TimeCounts times(60'000);
  for (std::int64_t t : {0, 59'999, 60'000, 119'999, 120'000, 3'600'000}) times.add(t);
  EXPECT_EQ(times.total(), 6U);
  // 30 s rounds down to 0, 90 s to 60 s: the edges fall on whole minutes.
  EXPECT_EQ(count(times, {30'000, 90'000}), (std::vector<std::uint64_t>{0, 2, 4}));
  EXPECT_EQ(count(times, {60'000, 120'000, 180'000}), (std::vector<std::uint64_t>{2, 2, 1, 1}));
  EXPECT_EQ(count(times, {}), (std::vector<std::uint64_t>{6}));
  EXPECT_EQ(count(times, {10'000'000}), (std::vector<std::uint64_t>{6, 0}));
  EXPECT_EQ(TimeCounts::round_down(90'000, 60'000), 60'000);
}

TEST(TimeCounts, RemovingTheLastOfABucketFreesIt) {
  TimeCounts times(1000);
  EXPECT_FALSE(times.earliest().has_value());
  times.add(5'500);
  times.add(5'900);
  times.add(7'000);
  EXPECT_EQ(times.earliest(), 5'000);
  times.remove(5'500);
  EXPECT_EQ(times.earliest(), 5'000);
  times.remove(5'900);
  EXPECT_EQ(times.earliest(), 7'000);
  times.remove(7'000);
  EXPECT_FALSE(times.earliest().has_value());
  EXPECT_EQ(times.total(), 0U);
}

TEST(TimeCounts, TimesBeforeTheEpochRoundTowardMinusInfinity) {
  TimeCounts times(1000);
  times.add(-1);
  times.add(-1000);
  times.add(-1001);
  EXPECT_EQ(times.earliest(), -2000);
  EXPECT_EQ(count(times, {-1000, 0}), (std::vector<std::uint64_t>{1, 2, 0}));
  EXPECT_EQ(TimeCounts::round_down(-1, 1000), -1000);
}

TEST(TimeCounts, RemovingWhatWasNeverAddedIsAProgrammersMistake) {
  TimeCounts times(1000);
  times.add(1'000);
  EXPECT_DEATH(times.remove(5'000), "");
}

}  // namespace
}  // namespace delayq::engine
