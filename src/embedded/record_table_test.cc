// record_table_test.cc — the timer thread's record table (record_table.h): ids are handed out
// densely and reused once freed, a record's timer_id_ follows it in and out, and the wheel's
// Timers grow with the table.
#include "embedded/record_table.h"

#include <gtest/gtest.h>

#include <vector>

namespace delayq::detail {
namespace {

struct NoTask {
  void operator()() const noexcept {}
};

// Records made on the stack: the table never frees or runs them.
using Record = TaskRecordOf<NoTask>;

TEST(SchedulerRecordTableTest, IdsAreDenseAndReused) {
  RecordTable table;
  Record a(NoTask{});
  Record b(NoTask{});
  Record c(NoTask{});
  a.timer_id_ = b.timer_id_ = c.timer_id_ = kNewRecord;

  EXPECT_EQ(table.add(&a), 0U);
  EXPECT_EQ(table.add(&b), 1U);
  EXPECT_EQ(a.timer_id_, 0U);
  EXPECT_EQ(b.timer_id_, 1U);
  EXPECT_EQ(table.size(), 2U);
  EXPECT_EQ(table.timers().size(), 2U);
  EXPECT_EQ(table.at(1), &b);

  table.remove(&a);
  EXPECT_EQ(a.timer_id_, kGoneRecord);
  EXPECT_EQ(table.size(), 1U);
  EXPECT_EQ(table.slots(), (std::vector<TaskRecord*>{nullptr, &b}));

  // The freed id comes back before the table grows.
  EXPECT_EQ(table.add(&c), 0U);
  EXPECT_EQ(table.at(0), &c);
  EXPECT_EQ(table.timers().size(), 2U);
  EXPECT_EQ(table.size(), 2U);
  for (TaskRecord* record : table.slots()) table.remove(record);
  EXPECT_EQ(table.size(), 0U);
  EXPECT_EQ(table.slots(), (std::vector<TaskRecord*>{nullptr, nullptr}));
  a.destroy_task();
  b.destroy_task();
  c.destroy_task();
}

}  // namespace
}  // namespace delayq::detail
