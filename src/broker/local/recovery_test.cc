// Recovery's progress reports: about every `every` of the scan (checked each 4096 records), in
// growing order, and a last one when every record is loaded, which says so.
#include "broker/local/recovery.h"

#include <gtest/gtest.h>

#include <vector>

#include "store/memory_store.h"

namespace delayq::broker::local {
namespace {

TEST(RecoveryTest, ReportsItsProgressAndThenThatItIsDone) {
  engine::ManualClock clock;
  engine::Engine before(clock);
  store::MemoryStore store;
  constexpr std::uint64_t kJobs = 10'000;
  const engine::ClientId producer = before.connect();
  for (std::uint64_t i = 0; i < kJobs; ++i) {
    engine::PutRequest put;
    put.tube = "t";
    put.due = Due::after(std::chrono::hours(1));
    ASSERT_TRUE(before.put(producer, put).is_ok());
  }
  const store::WriteSet written = before.take_mutations();
  const store::WriteSet* sets[] = {&written};
  ASSERT_TRUE(store.write(sets, false).is_ok());

  engine::Engine after(clock);
  std::vector<RecoveryProgress> reports;
  auto recovered = recover(
      store, after, [&reports](const RecoveryProgress& p) { reports.push_back(p); },
      std::chrono::milliseconds(0));
  ASSERT_TRUE(recovered.is_ok()) << recovered.status().to_string();
  EXPECT_EQ(recovered.value().jobs, kJobs);
  ASSERT_EQ(reports.size(), 3U);  // at 4096, at 8192, and the end
  EXPECT_EQ(reports[0].jobs, 4096U);
  EXPECT_EQ(reports[1].jobs, 8192U);
  for (const RecoveryProgress& p : reports) EXPECT_EQ(p.estimated, kJobs);
  EXPECT_FALSE(reports[1].done);
  EXPECT_NEAR(reports[1].percent(), 81.92, 0.01);
  EXPECT_TRUE(reports[2].done);
  EXPECT_EQ(reports[2].jobs, kJobs);
  EXPECT_EQ(reports[2].percent(), 100.0);
  EXPECT_EQ(reports[2].seconds_left(), 0.0);
  EXPECT_EQ(after.jobs(), kJobs);
}

TEST(RecoveryTest, AnEstimateBelowTheTruthNeverReadsAsDoneOrNegative) {
  RecoveryProgress p;
  p.jobs = 500;
  p.estimated = 400;
  p.took = std::chrono::milliseconds(1000);
  EXPECT_LT(p.percent(), 100.0);
  EXPECT_EQ(p.seconds_left(), 0.0);
  EXPECT_EQ(p.rate(), 500.0);
  p.estimated = 1500;
  EXPECT_EQ(p.seconds_left(), 2.0);
}

}  // namespace
}  // namespace delayq::broker::local
