// worker_pool_test.cc — the worker pool (worker_pool.h) without a timer thread: records handed
// over as the timer thread hands them (moved to running, a reference for the worker) run once,
// in order on one worker, end kDone or kFailed with the exception sent to the handler, have
// their callables destroyed, and are released; stop() finishes what is queued. No sleeps: the
// test waits on the records' final states and on stop().
#include "embedded/worker_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "embedded/task_record.h"

namespace delayq::detail {
namespace {

// A record as the timer thread hands it over: running, with the worker's reference and one the
// test keeps (dropped by keep.reset()), so the test can read its final word.
template <typename F>
TaskRecord* running_record(F task) {
  auto* record = new TaskRecordOf<F>(std::move(task));
  record->word_.store(make_word(7, kRunning));
  record->refs_.store(2);
  return record;
}

std::uint64_t final_state(TaskRecord* record) {
  for (;;) {
    const std::uint64_t word = record->word_.load(std::memory_order_acquire);
    if (is_final(state_of(word))) return state_of(word);
    record->word_.wait(word, std::memory_order_acquire);
  }
}

TEST(SchedulerWorkerPoolTest, RunsInOrderOnOneWorkerAndReleases) {
  const WorkerPool::ExceptionHandler no_handler;
  WorkerPool pool(1, no_handler);
  EXPECT_EQ(pool.size(), 1U);
  EXPECT_FALSE(pool.runs_on(std::this_thread::get_id()));
  std::mutex mutex;
  std::vector<int> order;
  auto captured = std::make_shared<int>(0);
  std::vector<TaskRecord*> due;
  for (int i = 0; i < 5; ++i) {
    due.push_back(running_record([&, i, captured] {
      std::lock_guard lock(mutex);
      order.push_back(i);
    }));
  }
  std::vector<TaskRecord*> kept = due;
  pool.hand_over(due);
  EXPECT_TRUE(due.empty());
  for (TaskRecord* record : kept) {
    EXPECT_EQ(final_state(record), kDone);
    EXPECT_EQ(version_of(record->word_.load()), 7U);  // the version it ran at
    release(record);
  }
  EXPECT_EQ(captured.use_count(), 1);  // every callable destroyed, not only run
  pool.stop();
  EXPECT_EQ(order, (std::vector<int>{0, 1, 2, 3, 4}));
}

TEST(SchedulerWorkerPoolTest, AThrowingTaskFailsAndTheHandlerGetsItsException) {
  std::mutex mutex;
  std::vector<std::string> errors;
  const WorkerPool::ExceptionHandler handler = [&](std::exception_ptr error) {
    try {
      std::rethrow_exception(error);
    } catch (const std::exception& e) {
      std::lock_guard lock(mutex);
      errors.emplace_back(e.what());
    }
    throw std::runtime_error("from the handler: swallowed");
  };
  WorkerPool pool(2, handler);
  std::vector<TaskRecord*> due{running_record([] { throw std::runtime_error("boom"); }),
                               running_record([] {})};
  std::vector<TaskRecord*> kept = due;
  pool.hand_over(due);
  EXPECT_EQ(final_state(kept[0]), kFailed);
  EXPECT_EQ(final_state(kept[1]), kDone);
  for (TaskRecord* record : kept) release(record);
  pool.stop();
  EXPECT_EQ(errors, (std::vector<std::string>{"boom"}));
}

TEST(SchedulerWorkerPoolTest, StopFinishesWhatIsQueued) {
  const WorkerPool::ExceptionHandler no_handler;
  std::atomic<int> ran{0};
  std::vector<TaskRecord*> kept;
  {
    WorkerPool pool(1, no_handler);
    std::vector<TaskRecord*> due;
    for (int i = 0; i < 100; ++i) due.push_back(running_record([&ran] { ++ran; }));
    kept = due;
    pool.hand_over(due);
    pool.stop();
    EXPECT_EQ(ran.load(), 100);
    pool.stop();  // a second stop, and the destructor's, change nothing
  }
  for (TaskRecord* record : kept) {
    EXPECT_EQ(state_of(record->word_.load()), kDone);
    release(record);
  }
}

}  // namespace
}  // namespace delayq::detail
