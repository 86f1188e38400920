// scheduler_test.cc — delayq::Scheduler on real threads and the real clock: never early, cancel
// and reschedule racing with the timer, many tasks from several threads, the shutdown modes,
// exceptions, and an idle timer thread that sleeps. Timing is asserted one way only: a task never
// starts before its due time. Lateness is left to bench/scheduler_bench.cc; waits here have
// generous time limits so a loaded machine slows the tests down without failing them.
// Under ThreadSanitizer (make tsan-test) the bulk tests run at a tenth of their size.
#include "delayq/scheduler.h"

#include <dirent.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <mutex>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace delayq {
namespace {

using namespace std::chrono_literals;
using Clock = SchedulerClock;

#ifdef __SANITIZE_THREAD__
constexpr std::size_t kScale = 10;
#else
constexpr std::size_t kScale = 1;
#endif

// Polls `done` until it holds or `limit` passes; the limit only turns a hang into a failure.
template <typename Pred>
bool eventually(Pred done, std::chrono::seconds limit = 60s) {
  const auto give_up = Clock::now() + limit;
  while (!done()) {
    if (Clock::now() > give_up) return false;
    std::this_thread::sleep_for(1ms);
  }
  return true;
}

bool is_final(TaskState state) {
  return state != TaskState::kPending && state != TaskState::kRunning;
}

bool settles(const TaskHandle& handle, std::chrono::seconds limit = 60s) {
  return eventually([&] { return is_final(handle.state()); }, limit);
}

std::uint64_t seed() {
  const char* text = std::getenv("DELAYQ_SEED");
  const std::uint64_t value =
      text != nullptr ? std::stoull(text) : std::random_device{}() * 2654435761ULL;
  std::printf("DELAYQ_SEED=%llu\n", static_cast<unsigned long long>(value));
  return value;
}

SchedulerOptions options_for(WheelKind kind) {
  SchedulerOptions options;
  options.workers = 2;
  options.wheel = kind;
  // The hashed ring at its classic 1 s tick would make every test wait for a second boundary;
  // the 1 ms ring runs the same code. SchedulerHashedClassic covers the 1 s default.
  if (kind == WheelKind::kHashed) {
    options.tick = 1ms;
    options.hashed_slots = 512;
  }
  return options;
}

class SchedulerWheelTest : public ::testing::TestWithParam<WheelKind> {};

std::string wheel_name(const ::testing::TestParamInfo<WheelKind>& info) {
  switch (info.param) {
    case WheelKind::kHierarchical:
      return "hierarchical";
    case WheelKind::kHashed:
      return "hashed";
    case WheelKind::kHeap:
      return "heap";
  }
  return "unknown";
}

INSTANTIATE_TEST_SUITE_P(Scheduler, SchedulerWheelTest,
                         ::testing::Values(WheelKind::kHierarchical, WheelKind::kHashed,
                                           WheelKind::kHeap),
                         wheel_name);

TEST_P(SchedulerWheelTest, NeverEarly) {
  Scheduler scheduler(options_for(GetParam()));
  std::mt19937_64 rng(seed());
  constexpr std::size_t kTasks = 500;
  std::vector<Clock::time_point> due(kTasks);
  std::vector<Clock::time_point> ran(kTasks);
  std::vector<TaskHandle> handles;
  for (std::size_t i = 0; i < kTasks; ++i) {
    due[i] = Clock::now() + std::chrono::microseconds(rng() % 150'000);
    handles.push_back(scheduler.schedule_at([&ran, i] { ran[i] = Clock::now(); }, due[i]));
  }
  for (std::size_t i = 0; i < kTasks; ++i) {
    ASSERT_TRUE(settles(handles[i])) << i;
    ASSERT_EQ(handles[i].state(), TaskState::kDone) << i;
    EXPECT_GE(ran[i], due[i]) << "task " << i << " ran "
                              << std::chrono::nanoseconds(due[i] - ran[i]).count() << " ns early";
    EXPECT_EQ(handles[i].due(), due[i]);
  }
}

TEST_P(SchedulerWheelTest, CancelRacingWithFireHasExactlyOneOutcome) {
  Scheduler scheduler(options_for(GetParam()));
  std::mt19937_64 rng(seed());
  const std::size_t tasks = 20'000 / kScale;
  std::vector<std::atomic<int>> runs(tasks);
  std::vector<TaskHandle> handles(tasks);
  std::vector<Clock::time_point> aim(tasks);
  std::vector<char> won(tasks, 0);
  // Due times a microsecond or so apart; the canceller aims each cancel within 300 us either
  // side of its task's due time, so cancels land before, during and after the hand-over.
  const auto base = Clock::now() + 5ms;
  const auto spacing = std::chrono::duration_cast<Clock::duration>(100ms) / tasks;
  for (std::size_t i = 0; i < tasks; ++i) {
    const auto due = base + spacing * static_cast<Clock::rep>(i);
    aim[i] = due + std::chrono::microseconds(static_cast<int>(rng() % 600) - 300);
    handles[i] = scheduler.schedule_at([&runs, i] { runs[i].fetch_add(1); }, due);
  }
  std::thread canceller([&] {
    for (std::size_t i = 0; i < tasks; ++i) {
      while (Clock::now() < aim[i]) {
      }
      won[i] = handles[i].cancel() ? 1 : 0;
    }
  });
  canceller.join();
  std::size_t cancelled = 0;
  for (std::size_t i = 0; i < tasks; ++i) {
    ASSERT_TRUE(settles(handles[i])) << i;
    const TaskState state = handles[i].wait();
    if (won[i] != 0) {
      ++cancelled;
      EXPECT_EQ(state, TaskState::kCancelled) << i;
      EXPECT_EQ(runs[i].load(), 0) << "task " << i << " ran although cancel() returned true";
    } else {
      EXPECT_EQ(state, TaskState::kDone) << i;
      EXPECT_EQ(runs[i].load(), 1) << "task " << i << " did not run once although cancel() lost";
    }
    EXPECT_FALSE(handles[i].cancel()) << i;
  }
  std::printf("%zu of %zu cancels won\n", cancelled, tasks);
}

TEST_P(SchedulerWheelTest, RescheduleRacingWithFireNeverRunsBeforeTheNewDueTime) {
  Scheduler scheduler(options_for(GetParam()));
  std::mt19937_64 rng(seed());
  const std::size_t tasks = 10'000 / kScale;
  std::vector<Clock::time_point> ran(tasks);
  std::vector<std::atomic<int>> runs(tasks);
  std::vector<TaskHandle> handles(tasks);
  std::vector<Clock::time_point> aim(tasks);
  std::vector<Clock::time_point> moved_to(tasks);
  std::vector<char> moved(tasks, 0);
  // As above: each reschedule is aimed near its task's due time.
  const auto base = Clock::now() + 5ms;
  const auto spacing = std::chrono::duration_cast<Clock::duration>(100ms) / tasks;
  for (std::size_t i = 0; i < tasks; ++i) {
    const auto due = base + spacing * static_cast<Clock::rep>(i);
    aim[i] = due + std::chrono::microseconds(static_cast<int>(rng() % 600) - 300);
    handles[i] = scheduler.schedule_at(
        [&ran, &runs, i] {
          ran[i] = Clock::now();
          runs[i].fetch_add(1);
        },
        due);
  }
  std::thread mover([&] {
    for (std::size_t i = 0; i < tasks; ++i) {
      while (Clock::now() < aim[i]) {
      }
      // Alternately well after the original due time and just after now.
      moved_to[i] = Clock::now() + std::chrono::microseconds(i % 2 == 0 ? 20'000 : 100);
      moved[i] = handles[i].reschedule_at(moved_to[i]) ? 1 : 0;
    }
  });
  mover.join();
  std::size_t moves = 0;
  for (std::size_t i = 0; i < tasks; ++i) {
    ASSERT_TRUE(settles(handles[i])) << i;
    ASSERT_EQ(handles[i].state(), TaskState::kDone) << i;
    EXPECT_EQ(runs[i].load(), 1) << i;
    if (moved[i] != 0) {
      ++moves;
      EXPECT_GE(ran[i], moved_to[i]) << "task " << i << " ran before its new due time";
      EXPECT_EQ(handles[i].due(), moved_to[i]) << i;
    }
    EXPECT_FALSE(handles[i].reschedule(1h)) << i;
  }
  std::printf("%zu of %zu reschedules won\n", moves, tasks);
}

TEST_P(SchedulerWheelTest, RescheduleLaterAndEarlier) {
  Scheduler scheduler(options_for(GetParam()));
  Clock::time_point later_ran;
  Clock::time_point earlier_ran;
  TaskHandle later = scheduler.schedule([&] { later_ran = Clock::now(); }, 20ms);
  TaskHandle earlier = scheduler.schedule([&] { earlier_ran = Clock::now(); }, 1h);
  const auto later_due = Clock::now() + 200ms;
  ASSERT_TRUE(later.reschedule_at(later_due));
  const auto earlier_due = Clock::now() + 30ms;
  ASSERT_TRUE(earlier.reschedule_at(earlier_due));
  EXPECT_EQ(later.wait(), TaskState::kDone);
  EXPECT_EQ(earlier.wait(), TaskState::kDone);
  EXPECT_GE(later_ran, later_due);
  EXPECT_GE(earlier_ran, earlier_due);
  EXPECT_FALSE(later.reschedule(1ms));
}

TEST_P(SchedulerWheelTest, ManyTasksFromSeveralThreads) {
  Scheduler scheduler(options_for(GetParam()));
  constexpr std::size_t kThreads = 4;
  const std::size_t per_thread = 250'000 / kScale;
  std::atomic<std::size_t> ran{0};
  std::atomic<std::size_t> early{0};
  const std::uint64_t base_seed = seed();
  std::vector<std::thread> producers;
  for (std::size_t t = 0; t < kThreads; ++t) {
    producers.emplace_back([&, t] {
      std::mt19937_64 rng(base_seed + t);
      for (std::size_t i = 0; i < per_thread; ++i) {
        const auto due = Clock::now() + std::chrono::microseconds(rng() % 300'000);
        scheduler.schedule_at(
            [&ran, &early, due] {
              if (Clock::now() < due) early.fetch_add(1);
              ran.fetch_add(1, std::memory_order_relaxed);
            },
            due);
      }
    });
  }
  for (auto& producer : producers) producer.join();
  const std::size_t total = kThreads * per_thread;
  ASSERT_TRUE(eventually([&] { return ran.load() == total; }, 120s))
      << ran.load() << " of " << total << " ran";
  EXPECT_EQ(early.load(), 0U);
  scheduler.shutdown(ShutdownMode::kDropPending);
  EXPECT_EQ(ran.load(), total);
}

TEST_P(SchedulerWheelTest, IdleTimerThreadSleeps) {
  Scheduler scheduler(options_for(GetParam()));
  std::mt19937_64 rng(seed());
  std::vector<TaskHandle> handles;
  for (int i = 0; i < 1000; ++i) {
    handles.push_back(scheduler.schedule([] {}, 1h + std::chrono::seconds(rng() % 3600)));
  }
  // Let the timer thread take the inbox, then watch it for a second.
  std::this_thread::sleep_for(200ms);
  struct ThreadUsage {
    std::uint64_t cpu_ns = 0;
    std::uint64_t switches = 0;
    bool found = false;
  };
  // /proc/self/task/<tid>/: comm is the thread's name, schedstat starts with its CPU time in ns,
  // status counts its context switches (each wake-up is one).
  const auto timer_usage = [] {
    ThreadUsage usage;
    DIR* dir = opendir("/proc/self/task");
    if (dir == nullptr) return usage;
    while (const dirent* entry = readdir(dir)) {
      const std::string task = std::string("/proc/self/task/") + entry->d_name;
      std::string name;
      std::getline(std::ifstream(task + "/comm"), name);
      if (name != "delayq-timer") continue;
      std::ifstream(task + "/schedstat") >> usage.cpu_ns;
      std::ifstream status(task + "/status");
      for (std::string line; std::getline(status, line);) {
        if (line.find("ctxt_switches:") != std::string::npos) {
          usage.switches += std::stoull(line.substr(line.find(':') + 1));
        }
      }
      usage.found = true;
    }
    closedir(dir);
    return usage;
  };
  const ThreadUsage before = timer_usage();
  std::this_thread::sleep_for(1s);
  const ThreadUsage after = timer_usage();
  ASSERT_TRUE(before.found && after.found) << "no thread named delayq-timer in /proc/self/task";
  // A timer polling every millisecond would switch ~1000 times a second.
  EXPECT_LE(after.switches - before.switches, 2U);
  EXPECT_LT(after.cpu_ns - before.cpu_ns, 20'000'000U);
  std::printf("idle for 1 s: %llu context switches, %llu ns of CPU\n",
              static_cast<unsigned long long>(after.switches - before.switches),
              static_cast<unsigned long long>(after.cpu_ns - before.cpu_ns));
}

TEST(SchedulerTest, CancelBeforeDueMeansItNeverRuns) {
  Scheduler scheduler;
  std::atomic<int> runs{0};
  TaskHandle handle = scheduler.schedule([&] { runs.fetch_add(1); }, 50ms);
  TaskHandle copy = handle;
  EXPECT_EQ(handle.state(), TaskState::kPending);
  EXPECT_TRUE(copy.cancel());
  EXPECT_EQ(handle.state(), TaskState::kCancelled);
  EXPECT_FALSE(handle.cancel());
  EXPECT_FALSE(handle.reschedule(1ms));
  std::this_thread::sleep_for(150ms);
  EXPECT_EQ(runs.load(), 0);
  EXPECT_EQ(handle.wait(), TaskState::kCancelled);
}

TEST(SchedulerTest, CancelAfterTheTaskRanReturnsFalse) {
  Scheduler scheduler;
  std::atomic<int> runs{0};
  TaskHandle handle = scheduler.schedule([&] { runs.fetch_add(1); }, 0ms);
  EXPECT_EQ(handle.wait(), TaskState::kDone);
  EXPECT_FALSE(handle.cancel());
  EXPECT_EQ(handle.state(), TaskState::kDone);
  EXPECT_EQ(runs.load(), 1);
}

TEST(SchedulerTest, CancelReleasesWhatTheTaskCaptured) {
  Scheduler scheduler;
  auto resource = std::make_shared<int>(7);
  TaskHandle handle = scheduler.schedule([resource] { (void)*resource; }, 1h);
  EXPECT_EQ(resource.use_count(), 2);
  EXPECT_TRUE(handle.cancel());
  EXPECT_EQ(resource.use_count(), 1);
}

TEST(SchedulerTest, MoveOnlyTasksAndTasksThatSchedule) {
  Scheduler scheduler;
  std::atomic<int> value{0};
  std::atomic<bool> second_ran{false};
  auto payload = std::make_unique<int>(41);
  TaskHandle first = scheduler.schedule(
      [&, payload = std::move(payload)] {
        value = *payload + 1;
        scheduler.schedule([&] { second_ran = true; }, 5ms);
      },
      1ms);
  EXPECT_EQ(first.wait(), TaskState::kDone);
  EXPECT_EQ(value.load(), 42);
  EXPECT_TRUE(eventually([&] { return second_ran.load(); }));
}

TEST(SchedulerTest, ExceptionsGoToTheHandlerAndOtherTasksRun) {
  std::mutex mutex;
  std::vector<std::string> messages;
  SchedulerOptions options;
  options.workers = 1;  // the one worker must survive every throw
  options.on_task_exception = [&](std::exception_ptr error) {
    try {
      std::rethrow_exception(error);
    } catch (const std::exception& e) {
      std::lock_guard lock(mutex);
      messages.emplace_back(e.what());
    }
  };
  Scheduler scheduler(options);
  std::vector<TaskHandle> throwing;
  std::vector<TaskHandle> fine;
  std::atomic<int> ran{0};
  for (int i = 0; i < 10; ++i) {
    throwing.push_back(scheduler.schedule([] { throw std::runtime_error("boom"); }, 1ms));
    fine.push_back(scheduler.schedule([&] { ran.fetch_add(1); }, 2ms));
  }
  for (auto& handle : throwing) EXPECT_EQ(handle.wait(), TaskState::kFailed);
  for (auto& handle : fine) EXPECT_EQ(handle.wait(), TaskState::kDone);
  EXPECT_EQ(ran.load(), 10);
  std::lock_guard lock(mutex);
  EXPECT_EQ(messages, std::vector<std::string>(10, "boom"));
}

TEST(SchedulerTest, AThrowingHandlerIsSwallowed) {
  SchedulerOptions options;
  options.workers = 1;
  options.on_task_exception = [](std::exception_ptr) { throw 1; };
  Scheduler scheduler(options);
  TaskHandle bad = scheduler.schedule([] { throw std::logic_error("x"); }, 0ms);
  TaskHandle good = scheduler.schedule([] {}, 1ms);
  EXPECT_EQ(bad.wait(), TaskState::kFailed);
  EXPECT_EQ(good.wait(), TaskState::kDone);
}

TEST(SchedulerTest, ASlowTaskDoesNotDelayTheClock) {
  SchedulerOptions options;
  options.workers = 2;
  Scheduler scheduler(options);
  std::atomic<bool> released{false};
  // The slow task blocks until a later task releases it: if it held up the timer, the later
  // task would never be handed out and the slow one would never return.
  TaskHandle slow = scheduler.schedule(
      [&] {
        const auto limit = Clock::now() + 30s;
        while (!released.load() && Clock::now() < limit) std::this_thread::sleep_for(1ms);
      },
      0ms);
  TaskHandle later = scheduler.schedule([&] { released = true; }, 20ms);
  EXPECT_EQ(later.wait(), TaskState::kDone);
  EXPECT_EQ(slow.wait(), TaskState::kDone);
  EXPECT_TRUE(released.load());
}

TEST(SchedulerTest, ShutdownDropsPendingAndFinishesRunning) {
  Scheduler scheduler;
  std::atomic<bool> started{false};
  std::atomic<bool> finished{false};
  std::atomic<int> pending_runs{0};
  TaskHandle running = scheduler.schedule(
      [&] {
        started = true;
        std::this_thread::sleep_for(100ms);
        finished = true;
      },
      0ms);
  std::vector<TaskHandle> pending;
  for (int i = 0; i < 100; ++i) {
    pending.push_back(scheduler.schedule([&] { pending_runs.fetch_add(1); }, 1h));
  }
  ASSERT_TRUE(eventually([&] { return started.load(); }));
  scheduler.shutdown(ShutdownMode::kDropPending);
  EXPECT_TRUE(finished.load());
  EXPECT_EQ(running.state(), TaskState::kDone);
  for (auto& handle : pending) EXPECT_EQ(handle.state(), TaskState::kDropped);
  EXPECT_EQ(pending_runs.load(), 0);
  // After shutdown nothing is accepted, and handles answer without a scheduler behind them.
  TaskHandle late = scheduler.schedule([&] { pending_runs.fetch_add(1); }, 0ms);
  EXPECT_EQ(late.state(), TaskState::kDropped);
  EXPECT_FALSE(late.cancel());
  EXPECT_FALSE(pending[0].cancel());
  EXPECT_FALSE(pending[0].reschedule(1ms));
  scheduler.shutdown(ShutdownMode::kRunPendingNow);  // a second call does nothing
  EXPECT_EQ(pending_runs.load(), 0);
}

TEST(SchedulerTest, ShutdownRunsPendingNowInDueOrder) {
  SchedulerOptions options;
  options.workers = 1;
  Scheduler scheduler(options);
  std::mutex mutex;
  std::vector<int> order;
  std::vector<TaskHandle> handles;
  std::mt19937_64 rng(seed());
  std::vector<int> expected;
  for (int i = 0; i < 100; ++i) {
    const int minutes = static_cast<int>(rng() % 10'000);
    handles.push_back(scheduler.schedule(
        [&, minutes] {
          std::lock_guard lock(mutex);
          order.push_back(minutes);
        },
        std::chrono::minutes(60 + minutes)));
    expected.push_back(minutes);
  }
  EXPECT_TRUE(handles[5].cancel());
  expected.erase(expected.begin() + 5);
  scheduler.shutdown(ShutdownMode::kRunPendingNow);
  std::sort(expected.begin(), expected.end());
  EXPECT_EQ(order, expected);
  EXPECT_EQ(handles[5].state(), TaskState::kCancelled);
  for (std::size_t i = 0; i < handles.size(); ++i) {
    if (i != 5) {
      EXPECT_EQ(handles[i].state(), TaskState::kDone) << i;
    }
  }
}

TEST(SchedulerTest, ShutdownRunsPendingWhenDue) {
  Scheduler scheduler;
  constexpr int kTasks = 20;
  std::vector<Clock::time_point> due(kTasks);
  std::vector<Clock::time_point> ran(kTasks);
  std::vector<TaskHandle> handles;
  for (int i = 0; i < kTasks; ++i) {
    const auto k = static_cast<std::size_t>(i);
    due[k] = Clock::now() + std::chrono::milliseconds(20 + 10 * i);
    handles.push_back(scheduler.schedule_at([&ran, k] { ran[k] = Clock::now(); }, due[k]));
  }
  TaskHandle far = scheduler.schedule([] {}, 1h);
  // Cancels and reschedules still work while shutdown waits.
  std::thread changer([&] {
    std::this_thread::sleep_for(30ms);
    EXPECT_TRUE(far.cancel());
  });
  scheduler.shutdown(ShutdownMode::kRunPendingWhenDue);
  changer.join();
  for (int i = 0; i < kTasks; ++i) {
    const auto k = static_cast<std::size_t>(i);
    EXPECT_EQ(handles[k].state(), TaskState::kDone) << i;
    EXPECT_GE(ran[k], due[k]) << i;
  }
  EXPECT_EQ(far.state(), TaskState::kCancelled);
}

// A shutdown waiting for pending tasks ends as soon as the last one is cancelled, not at its old
// due time (a minute away here; the test allows 30 s).
TEST(SchedulerTest, ShutdownWhenDueEndsWhenTheLastPendingTaskIsCancelled) {
  Scheduler scheduler;
  TaskHandle far = scheduler.schedule([] {}, 60s);
  std::thread canceller([&] {
    std::this_thread::sleep_for(50ms);
    EXPECT_TRUE(far.cancel());
  });
  const auto start = Clock::now();
  scheduler.shutdown(ShutdownMode::kRunPendingWhenDue);
  canceller.join();
  EXPECT_LT(Clock::now() - start, 30s);
  EXPECT_EQ(far.state(), TaskState::kCancelled);
}

// Counts live copies of a task's captures: a callable destroyed twice drives it below zero, one
// never destroyed leaves it above.
struct Tracked {
  explicit Tracked(std::atomic<long>* counter) : live(counter) { live->fetch_add(1); }
  Tracked(const Tracked& other) : live(other.live) { live->fetch_add(1); }
  Tracked& operator=(const Tracked&) = delete;
  ~Tracked() { live->fetch_sub(1); }
  std::atomic<long>* live;
};

class ShutdownRaceTest : public ::testing::TestWithParam<ShutdownMode> {};

INSTANTIATE_TEST_SUITE_P(Scheduler, ShutdownRaceTest,
                         ::testing::Values(ShutdownMode::kDropPending, ShutdownMode::kRunPendingNow,
                                           ShutdownMode::kRunPendingWhenDue));

// Producers schedule, cancel and reschedule while shutdown() runs. Afterwards every task is
// final, ran at most once and only if its state says so, and its callable was destroyed exactly
// once; a task scheduled before shutdown() was called is not dropped unless the mode drops
// pending tasks.
TEST_P(ShutdownRaceTest, EveryTaskSettlesOnce) {
  const ShutdownMode mode = GetParam();
  std::mt19937_64 rng(seed());
  int overlapping_rounds = 0;  // rounds with tasks scheduled both before and after shutdown began
  for (int round = 0; round < 20; ++round) {
    std::atomic<long> live{0};
    constexpr int kProducers = 3;
    constexpr std::size_t kEach = 20'000 / kScale;
    std::vector<std::vector<TaskHandle>> handles(kProducers);
    std::vector<std::unique_ptr<std::atomic<int>[]>> runs(kProducers);
    // Per task: schedule() returned before shutdown() was called.
    std::vector<std::vector<bool>> before(kProducers);
    std::atomic<bool> shutting_down{false};
    {
      Scheduler scheduler(options_for(WheelKind::kHierarchical));
      std::vector<std::thread> producers;
      const std::uint64_t round_seed = rng();
      for (int t = 0; t < kProducers; ++t) {
        runs[static_cast<std::size_t>(t)] = std::make_unique<std::atomic<int>[]>(kEach);
        producers.emplace_back([&, t] {
          std::mt19937_64 local(round_seed + static_cast<std::uint64_t>(t));
          auto& mine = handles[static_cast<std::size_t>(t)];
          auto& early = before[static_cast<std::size_t>(t)];
          std::atomic<int>* counts = runs[static_cast<std::size_t>(t)].get();
          for (std::size_t i = 0; i < kEach; ++i) {
            // Due now, in a few milliseconds, or far off (never reached unless run at shutdown).
            const auto delay = std::array{0ms, 3ms, 30ms, 10'000ms}[local() % 4];
            mine.push_back(scheduler.schedule(
                [tracked = Tracked(&live), counts, i] { counts[i].fetch_add(1); },
                delay == 10'000ms && mode == ShutdownMode::kRunPendingWhenDue ? 40ms : delay));
            early.push_back(!shutting_down.load());
            if (i % 3 == 1) mine[local() % mine.size()].cancel();
            if (i % 3 == 2)
              mine[local() % mine.size()].reschedule(std::chrono::milliseconds(local() % 20));
          }
        });
      }
      std::this_thread::sleep_for(std::chrono::microseconds(rng() % 500));
      shutting_down.store(true);
      scheduler.shutdown(mode);
      for (auto& producer : producers) producer.join();
    }
    for (std::size_t t = 0; t < handles.size(); ++t) {
      for (std::size_t i = 0; i < handles[t].size(); ++i) {
        const TaskState state = handles[t][i].state();
        const int ran = runs[t][i].load();
        ASSERT_TRUE(is_final(state)) << task_state_name(state);
        if (state == TaskState::kDone) {
          ASSERT_EQ(ran, 1) << "round " << round;
        } else {
          ASSERT_EQ(ran, 0) << task_state_name(state) << " round " << round;
        }
        if (mode != ShutdownMode::kDropPending && before[t][i]) {
          ASSERT_NE(state, TaskState::kDropped) << "accepted before shutdown, round " << round;
        }
      }
    }
    const auto count_before = [&](bool value) {
      std::size_t n = 0;
      for (const auto& flags : before)
        n += static_cast<std::size_t>(std::count(flags.begin(), flags.end(), value));
      return n;
    };
    if (count_before(true) > 0 && count_before(false) > 0) ++overlapping_rounds;
    handles.clear();
    EXPECT_EQ(live.load(), 0) << "round " << round;
  }
  EXPECT_GT(overlapping_rounds, 0)
      << "shutdown never overlapped the producers: the race was not run";
}

// Tasks scheduled before shutdown() is called are never dropped by the modes that keep them,
// however little time the timer thread had to see them.
TEST(SchedulerTest, TasksScheduledBeforeShutdownAreKept) {
  for (int round = 0; round < 50; ++round) {
    Scheduler scheduler;
    std::atomic<int> ran{0};
    std::vector<TaskHandle> handles;
    for (int i = 0; i < 100; ++i) {
      handles.push_back(scheduler.schedule([&] { ran.fetch_add(1); }, 1h));
    }
    scheduler.shutdown(ShutdownMode::kRunPendingNow);
    ASSERT_EQ(ran.load(), 100) << "round " << round;
    for (auto& handle : handles) ASSERT_EQ(handle.state(), TaskState::kDone);
  }
}

// A task whose callable captures two pointers is one 64-byte record (a cache line) from the
// pool, with the inbox link inside it.
TEST(SchedulerTest, ASmallTaskIsOneCacheLine) {
  int a = 0;
  int b = 0;
  auto task = [&a, &b] { ++a, ++b; };
  static_assert(sizeof(task) == 16);
  EXPECT_EQ(sizeof(detail::TaskRecordOf<decltype(task)>), 64U);
}

TEST(SchedulerTest, HandlesOutliveTheScheduler) {
  TaskHandle pending;
  TaskHandle done;
  {
    Scheduler scheduler;
    pending = scheduler.schedule([] {}, 1h);
    done = scheduler.schedule([] {}, 0ms);
    EXPECT_EQ(done.wait(), TaskState::kDone);
  }
  EXPECT_EQ(pending.state(), TaskState::kDropped);
  EXPECT_FALSE(pending.cancel());
  EXPECT_FALSE(pending.reschedule(1ms));
  EXPECT_EQ(done.state(), TaskState::kDone);
  TaskHandle empty;
  EXPECT_FALSE(empty.valid());
  EXPECT_FALSE(empty.cancel());
}

TEST(SchedulerHashedClassic, OneSecondTicksNeverEarly) {
  SchedulerOptions options;
  options.wheel = WheelKind::kHashed;  // 3600 slots x 1 s: the classic ring, as written
  Scheduler scheduler(options);
  const auto due = Clock::now() + 300ms;
  Clock::time_point ran;
  TaskHandle handle = scheduler.schedule_at([&] { ran = Clock::now(); }, due);
  EXPECT_EQ(handle.wait(), TaskState::kDone);
  EXPECT_GE(ran, due);
}

}  // namespace
}  // namespace delayq
