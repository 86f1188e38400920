// scheduler_test.cc — delayq::Scheduler on real threads and a ManualSchedulerClock: never early
// and at most a tick late (checked exactly against the clock), cancel and reschedule racing with
// the timer, many tasks from several threads, the shutdown modes, exceptions. Time passes only
// when a test advances the clock; no test sleeps, and none asserts a wall-clock duration: a wait
// for another thread's work has a generous limit that only turns a hang into a failure.
// The *SlowTest suites (label slow) run on steady_clock, for what only real time shows: the
// timed sleep of the timer thread, and an idle timer thread that sleeps.
// Under ThreadSanitizer (make tsan-test) the bulk tests run at a tenth of their size.
#include "delayq/scheduler.h"

#include <dirent.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <future>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "support/seed.h"

namespace delayq {
namespace {

using namespace std::chrono_literals;
using Clock = SchedulerClock;

#ifdef __SANITIZE_THREAD__
constexpr std::size_t kScale = 10;
#else
constexpr std::size_t kScale = 1;
#endif

// The limit of every wait for another thread's work.
constexpr std::chrono::seconds kLimit{60};

// Polls `done` until it holds or `limit` passes, yielding the core meanwhile; for states no task
// signals (dropped, cancelled, shutdown begun). The limit only turns a hang into a failure.
template <typename Pred>
bool eventually(Pred done, std::chrono::seconds limit = kLimit) {
  const auto give_up = Clock::now() + limit;
  while (!done()) {
    if (Clock::now() > give_up) return false;
    std::this_thread::yield();
  }
  return true;
}

// Counts events on other threads (tasks that ran); a test waits for a count.
class Counter {
 public:
  void add() {
    {
      std::lock_guard lock(mutex_);
      ++count_;
    }
    changed_.notify_all();
  }
  // True once the count reaches `target`; false if `limit` passes first.
  bool reaches(std::size_t target, std::chrono::seconds limit = kLimit) {
    std::unique_lock lock(mutex_);
    return changed_.wait_for(lock, limit, [&] { return count_ >= target; });
  }
  [[nodiscard]] std::size_t value() {
    std::lock_guard lock(mutex_);
    return count_;
  }

 private:
  std::mutex mutex_;
  std::condition_variable changed_;
  std::size_t count_ = 0;
};

// A gate a thread can wait at (for at most kLimit).
class Gate {
 public:
  void open() {
    {
      std::lock_guard lock(mutex_);
      open_ = true;
    }
    opened_.notify_all();
  }
  bool wait() {
    std::unique_lock lock(mutex_);
    return opened_.wait_for(lock, kLimit, [&] { return open_; });
  }

 private:
  std::mutex mutex_;
  std::condition_variable opened_;
  bool open_ = false;
};

bool is_final(TaskState state) {
  return state != TaskState::kPending && state != TaskState::kRunning;
}

// Returns once the timer thread has made a pass at the clock's present or later: a task due in
// the past fires in the first pass after it is scheduled, and every task that pass fires has
// left kPending before any of them runs. So afterwards a task still pending was not due then.
// Needs a free worker.
bool pass(Scheduler& scheduler) {
  auto ran = std::make_shared<std::promise<void>>();
  std::future<void> done = ran->get_future();
  scheduler.schedule_at([ran] { ran->set_value(); }, Clock::time_point{});
  return done.wait_for(kLimit) == std::future_status::ready;
}

// shutdown() has begun once the scheduler refuses a task. The probes it accepts are due in the
// past, so they run at once (a shutdown that waits for due times does not wait for them).
bool shutdown_began(Scheduler& scheduler) {
  return eventually([&] {
    return scheduler.schedule_at([] {}, Clock::time_point{}).state() == TaskState::kDropped;
  });
}

std::uint64_t seed() {
  return testing::test_seed();
}

SchedulerOptions options_for(WheelKind kind, ManualSchedulerClock* clock) {
  SchedulerOptions options;
  options.workers = 2;
  options.wheel = kind;
  options.clock = clock;
  // The hashed ring at its classic 1 s tick would fire every test's tasks at a second boundary;
  // the 1 ms ring runs the same code. SchedulerHashedClassic covers the 1 s default.
  if (kind == WheelKind::kHashed) {
    options.tick = 1ms;
    options.hashed_slots = 512;
  }
  return options;
}

// A scheduler with `workers` workers and `wheel` at its natural tick, on `clock`.
SchedulerOptions on(ManualSchedulerClock& clock, std::size_t workers = 2,
                    WheelKind wheel = WheelKind::kHierarchical) {
  SchedulerOptions options;
  options.workers = workers;
  options.wheel = wheel;
  options.clock = &clock;
  return options;
}

// How late a task may fire: one tick.
Clock::duration tick_of(const SchedulerOptions& options) {
  if (options.tick.count() > 0) return options.tick;
  return options.wheel == WheelKind::kHashed ? Clock::duration(1s) : Clock::duration(100us);
}

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

class SchedulerWheelTest : public ::testing::TestWithParam<WheelKind> {};

INSTANTIATE_TEST_SUITE_P(Scheduler, SchedulerWheelTest,
                         ::testing::Values(WheelKind::kHierarchical, WheelKind::kHashed,
                                           WheelKind::kHeap),
                         wheel_name);

// The clock stops 1 ns before each of 500 due times (random to the nanosecond) and a tick after
// it; after each stop the timer thread makes a pass, and then every task due after the present is
// still pending (never early) and every task due a tick or more before it has fired (at most a
// tick late).
TEST_P(SchedulerWheelTest, NeverEarly) {
  ManualSchedulerClock clock;
  std::mt19937_64 rng(seed());
  constexpr std::size_t kTasks = 500;
  std::vector<Clock::time_point> due(kTasks);
  std::vector<Clock::time_point> ran(kTasks);
  Counter runs;
  const SchedulerOptions options = options_for(GetParam(), &clock);
  const Clock::duration tick = tick_of(options);
  Scheduler scheduler(options);
  std::vector<TaskHandle> handles;
  const Clock::time_point start = clock.now();
  std::vector<Clock::time_point> stops;
  for (std::size_t i = 0; i < kTasks; ++i) {
    due[i] = start + std::chrono::nanoseconds(1 + rng() % 150'000'000);
    handles.push_back(scheduler.schedule_at(
        [&ran, &runs, &clock, i] {
          ran[i] = clock.now();
          runs.add();
        },
        due[i]));
    stops.push_back(due[i] - 1ns);
    stops.push_back(due[i] + tick);
  }
  std::sort(stops.begin(), stops.end());
  for (const Clock::time_point stop : stops) {
    clock.advance_to(stop);
    ASSERT_TRUE(pass(scheduler));
    const Clock::time_point now = clock.now();
    for (std::size_t i = 0; i < kTasks; ++i) {
      const bool fired = handles[i].state() != TaskState::kPending;
      if (due[i] > now) {
        ASSERT_FALSE(fired) << "task " << i << " fired " << (due[i] - now).count() << " ns early";
      } else if (due[i] + tick <= now) {
        ASSERT_TRUE(fired) << "task " << i << " not fired " << (now - due[i]).count()
                           << " ns after its due time";
      }
    }
  }
  ASSERT_TRUE(runs.reaches(kTasks)) << runs.value() << " of " << kTasks << " ran";
  for (std::size_t i = 0; i < kTasks; ++i) {
    ASSERT_EQ(handles[i].wait(), TaskState::kDone) << i;
    EXPECT_GE(ran[i], due[i]) << "task " << i << " ran "
                              << std::chrono::nanoseconds(due[i] - ran[i]).count() << " ns early";
    EXPECT_EQ(handles[i].due(), due[i]);
  }
}

// A canceller moves the clock to just before or just after each task's due time and cancels it
// there, while the timer thread, woken by each move, fires what the clock made due: cancels land
// before, during and after the hand-over. Every 50 tasks the canceller lets the timer thread
// catch up, so that some cancels certainly come after the fire.
TEST_P(SchedulerWheelTest, CancelRacingWithFireHasExactlyOneOutcome) {
  ManualSchedulerClock clock;
  std::mt19937_64 rng(seed());
  const std::size_t tasks = 20'000 / kScale;
  std::vector<std::atomic<int>> runs(tasks);
  std::vector<Clock::time_point> aim(tasks);
  std::vector<char> won(tasks, 0);
  Counter ran;
  const SchedulerOptions options = options_for(GetParam(), &clock);
  Scheduler scheduler(options);
  std::vector<TaskHandle> handles(tasks);
  // Due times a few microseconds apart; each cancel is aimed within 300 us either side.
  const auto base = clock.now() + 5ms;
  const auto spacing = std::chrono::duration_cast<Clock::duration>(100ms) / tasks;
  for (std::size_t i = 0; i < tasks; ++i) {
    const auto due = base + spacing * static_cast<Clock::rep>(i);
    aim[i] = due + std::chrono::microseconds(static_cast<int>(rng() % 600) - 300);
    handles[i] = scheduler.schedule_at(
        [&runs, &ran, i] {
          runs[i].fetch_add(1);
          ran.add();
        },
        due);
  }
  std::thread canceller([&] {
    for (std::size_t i = 0; i < tasks; ++i) {
      clock.advance_to(aim[i]);
      if (i % 50 == 0) {
        ASSERT_TRUE(pass(scheduler));
      }
      won[i] = handles[i].cancel() ? 1 : 0;
    }
  });
  canceller.join();
  const auto cancelled = static_cast<std::size_t>(std::count(won.begin(), won.end(), 1));
  EXPECT_GT(cancelled, 0U) << "no cancel won: the race was not run";
  EXPECT_LT(cancelled, tasks) << "no cancel lost: the race was not run";
  clock.advance(100ms + tick_of(options));  // everything not cancelled is due
  ASSERT_TRUE(ran.reaches(tasks - cancelled)) << ran.value() << " of " << tasks - cancelled;
  for (std::size_t i = 0; i < tasks; ++i) {
    const TaskState state = handles[i].wait();
    if (won[i] != 0) {
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

// As above, with a mover that reschedules each task near its due time: alternately well after
// the old due time and just after the present.
TEST_P(SchedulerWheelTest, RescheduleRacingWithFireNeverRunsBeforeTheNewDueTime) {
  ManualSchedulerClock clock;
  std::mt19937_64 rng(seed());
  const std::size_t tasks = 10'000 / kScale;
  std::vector<Clock::time_point> ran(tasks);
  std::vector<std::atomic<int>> runs(tasks);
  std::vector<Clock::time_point> aim(tasks);
  std::vector<Clock::time_point> moved_to(tasks);
  std::vector<char> moved(tasks, 0);
  Counter done;
  const SchedulerOptions options = options_for(GetParam(), &clock);
  Scheduler scheduler(options);
  std::vector<TaskHandle> handles(tasks);
  const auto base = clock.now() + 5ms;
  const auto spacing = std::chrono::duration_cast<Clock::duration>(100ms) / tasks;
  for (std::size_t i = 0; i < tasks; ++i) {
    const auto due = base + spacing * static_cast<Clock::rep>(i);
    aim[i] = due + std::chrono::microseconds(static_cast<int>(rng() % 600) - 300);
    handles[i] = scheduler.schedule_at(
        [&ran, &runs, &done, &clock, i] {
          ran[i] = clock.now();
          runs[i].fetch_add(1);
          done.add();
        },
        due);
  }
  std::thread mover([&] {
    for (std::size_t i = 0; i < tasks; ++i) {
      clock.advance_to(aim[i]);
      if (i % 50 == 0) {
        ASSERT_TRUE(pass(scheduler));
      }
      moved_to[i] = clock.now() + std::chrono::microseconds(i % 2 == 0 ? 20'000 : 100);
      moved[i] = handles[i].reschedule_at(moved_to[i]) ? 1 : 0;
    }
  });
  mover.join();
  clock.advance(100ms + tick_of(options));  // every task is due, at its new time or its old
  ASSERT_TRUE(done.reaches(tasks)) << done.value() << " of " << tasks << " ran";
  std::size_t moves = 0;
  for (std::size_t i = 0; i < tasks; ++i) {
    ASSERT_EQ(handles[i].wait(), TaskState::kDone) << i;
    EXPECT_EQ(runs[i].load(), 1) << i;
    if (moved[i] != 0) {
      ++moves;
      EXPECT_GE(ran[i], moved_to[i]) << "task " << i << " ran before its new due time";
      EXPECT_EQ(handles[i].due(), moved_to[i]) << i;
    }
    EXPECT_FALSE(handles[i].reschedule(1h)) << i;
  }
  EXPECT_GT(moves, 0U) << "no reschedule won: the race was not run";
  EXPECT_LT(moves, tasks) << "no reschedule lost: the race was not run";
  std::printf("%zu of %zu reschedules won\n", moves, tasks);
}

TEST_P(SchedulerWheelTest, RescheduleLaterAndEarlier) {
  ManualSchedulerClock clock;
  Clock::time_point later_ran;
  Clock::time_point earlier_ran;
  const SchedulerOptions options = options_for(GetParam(), &clock);
  const Clock::duration tick = tick_of(options);
  Scheduler scheduler(options);
  TaskHandle later = scheduler.schedule([&] { later_ran = clock.now(); }, 20ms);
  TaskHandle earlier = scheduler.schedule([&] { earlier_ran = clock.now(); }, 1h);
  const auto later_due = clock.now() + 200ms;
  ASSERT_TRUE(later.reschedule_at(later_due));
  const auto earlier_due = clock.now() + 30ms;
  ASSERT_TRUE(earlier.reschedule_at(earlier_due));
  // Past the old due time of `later`: neither is due.
  clock.advance_to(earlier_due - 1ns);
  ASSERT_TRUE(pass(scheduler));
  EXPECT_EQ(later.state(), TaskState::kPending);
  EXPECT_EQ(earlier.state(), TaskState::kPending);
  clock.advance_to(earlier_due + tick);
  EXPECT_EQ(earlier.wait(), TaskState::kDone);
  EXPECT_EQ(later.state(), TaskState::kPending);
  clock.advance_to(later_due - 1ns);
  ASSERT_TRUE(pass(scheduler));
  EXPECT_EQ(later.state(), TaskState::kPending);
  clock.advance_to(later_due + tick);
  EXPECT_EQ(later.wait(), TaskState::kDone);
  EXPECT_GE(later_ran, later_due);
  EXPECT_GE(earlier_ran, earlier_due);
  EXPECT_FALSE(later.reschedule(1ms));
}

// Producers schedule a million tasks (a tenth under TSan) while they move the clock on, so the
// timer thread fires and the workers run tasks all the while.
TEST_P(SchedulerWheelTest, ManyTasksFromSeveralThreads) {
  ManualSchedulerClock clock;
  constexpr std::size_t kThreads = 4;
  const std::size_t per_thread = 250'000 / kScale;
  const std::size_t total = kThreads * per_thread;
  std::atomic<std::size_t> ran{0};
  std::atomic<std::size_t> early{0};
  std::promise<void> all_ran;
  const SchedulerOptions options = options_for(GetParam(), &clock);
  Scheduler scheduler(options);
  const std::uint64_t base_seed = seed();
  std::vector<std::thread> producers;
  for (std::size_t t = 0; t < kThreads; ++t) {
    producers.emplace_back([&, t] {
      std::mt19937_64 rng(base_seed + t);
      for (std::size_t i = 0; i < per_thread; ++i) {
        const auto due = clock.now() + std::chrono::microseconds(rng() % 300'000);
        scheduler.schedule_at(
            [&ran, &early, &all_ran, &clock, total, due] {
              if (clock.now() < due) early.fetch_add(1);
              if (ran.fetch_add(1, std::memory_order_acq_rel) + 1 == total) all_ran.set_value();
            },
            due);
        if (i % 256 == 0) clock.advance(1ms);
      }
    });
  }
  for (auto& producer : producers) producer.join();
  std::printf("%zu of %zu ran while they were scheduled\n", ran.load(), total);
  clock.advance(300ms + tick_of(options));
  ASSERT_EQ(all_ran.get_future().wait_for(120s), std::future_status::ready)
      << ran.load() << " of " << total << " ran";
  EXPECT_EQ(early.load(), 0U);
  scheduler.shutdown(ShutdownMode::kDropPending);
  EXPECT_EQ(ran.load(), total);
}

// Real time: how many times the timer thread wakes up over a second, and its CPU time.
class SchedulerWheelSlowTest : public ::testing::TestWithParam<WheelKind> {};

INSTANTIATE_TEST_SUITE_P(Scheduler, SchedulerWheelSlowTest,
                         ::testing::Values(WheelKind::kHierarchical, WheelKind::kHashed,
                                           WheelKind::kHeap),
                         wheel_name);

TEST_P(SchedulerWheelSlowTest, IdleTimerThreadSleeps) {
  Scheduler scheduler(options_for(GetParam(), nullptr));
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

// The timer thread's timed sleep on steady_clock: 500 tasks due within 150 ms of real time,
// each checking the real clock as it starts.
TEST_P(SchedulerWheelSlowTest, NeverEarlyOnTheRealClock) {
  std::mt19937_64 rng(seed());
  constexpr std::size_t kTasks = 500;
  std::vector<Clock::time_point> due(kTasks);
  std::vector<Clock::time_point> ran(kTasks);
  std::vector<TaskHandle> handles;
  Scheduler scheduler(options_for(GetParam(), nullptr));
  for (std::size_t i = 0; i < kTasks; ++i) {
    due[i] = Clock::now() + std::chrono::microseconds(rng() % 150'000);
    handles.push_back(scheduler.schedule_at([&ran, i] { ran[i] = Clock::now(); }, due[i]));
  }
  for (std::size_t i = 0; i < kTasks; ++i) {
    ASSERT_EQ(handles[i].wait(), TaskState::kDone) << i;
    EXPECT_GE(ran[i], due[i]) << "task " << i << " ran "
                              << std::chrono::nanoseconds(due[i] - ran[i]).count() << " ns early";
    EXPECT_EQ(handles[i].due(), due[i]);
  }
}

TEST(SchedulerTest, CancelBeforeDueMeansItNeverRuns) {
  ManualSchedulerClock clock;
  std::atomic<int> runs{0};
  Scheduler scheduler(on(clock));
  TaskHandle handle = scheduler.schedule([&] { runs.fetch_add(1); }, 50ms);
  TaskHandle copy = handle;
  EXPECT_EQ(handle.state(), TaskState::kPending);
  EXPECT_TRUE(copy.cancel());
  EXPECT_EQ(handle.state(), TaskState::kCancelled);
  EXPECT_FALSE(handle.cancel());
  EXPECT_FALSE(handle.reschedule(1ms));
  clock.advance(150ms);
  ASSERT_TRUE(pass(scheduler));
  EXPECT_EQ(runs.load(), 0);
  EXPECT_EQ(handle.wait(), TaskState::kCancelled);
}

TEST(SchedulerTest, CancelAfterTheTaskRanReturnsFalse) {
  std::atomic<int> runs{0};
  Scheduler scheduler;  // on steady_clock: a task due now needs no time to pass
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

// A session owns the handle of its timeout and cancels it when it goes; the timeout's callable
// holds the last reference to the session. Cancelling the timeout destroys the session, whose
// destructor cancels the same task: it must get false, not wait on itself, and so must a
// shutdown that drops the task.
struct Session {
  TaskHandle timeout;
  bool* cancelled_again = nullptr;
  ~Session() { *cancelled_again = timeout.cancel(); }
};

TEST(SchedulerTest, ACaptureThatCancelsItsOwnTaskAsItGoesDoesNotHang) {
  for (const bool by_shutdown : {false, true}) {
    SCOPED_TRACE(by_shutdown ? "dropped by shutdown" : "cancelled");
    bool cancelled_again = true;
    Scheduler scheduler;
    TaskHandle outside;
    {
      auto session = std::make_shared<Session>();
      session->cancelled_again = &cancelled_again;
      session->timeout = scheduler.schedule([session] {}, 1h);
      outside = session->timeout;
    }  // the task's callable holds the last reference to the session now
    if (by_shutdown) {
      scheduler.shutdown(ShutdownMode::kDropPending);
    } else {
      EXPECT_TRUE(outside.cancel());
    }
    EXPECT_FALSE(cancelled_again);
    EXPECT_EQ(outside.wait(), by_shutdown ? TaskState::kDropped : TaskState::kCancelled);
  }
}

// Options no scheduler can run with are refused by the constructor, which leaves nothing behind:
// the clock it would have run on can go on and be destroyed.
TEST(SchedulerTest, BadOptionsThrowAndLeaveNothingBehind) {
  ManualSchedulerClock clock;
  SchedulerOptions negative = on(clock);
  negative.tick = std::chrono::microseconds(-1);
  EXPECT_THROW(Scheduler{negative}, std::invalid_argument);
  SchedulerOptions no_slots = on(clock);
  no_slots.wheel = WheelKind::kHashed;
  no_slots.hashed_slots = 0;
  EXPECT_THROW(Scheduler{no_slots}, std::invalid_argument);
  SchedulerOptions huge_ring = on(clock);
  huge_ring.wheel = WheelKind::kHashed;
  huge_ring.hashed_slots = SchedulerOptions::kMaxHashedSlots + 1;  // made on the timer thread
  EXPECT_THROW(Scheduler{huge_ring}, std::invalid_argument);
  SchedulerOptions too_many = on(clock);
  too_many.workers = std::numeric_limits<std::size_t>::max();  // no vector holds that many
  EXPECT_ANY_THROW(Scheduler{too_many});
  clock.advance(1s);  // no scheduler is left watching the clock (its destructor would abort)
}

// Tasks already due when a dropping shutdown begins run; only those still to come are dropped.
TEST(SchedulerTest, ADroppingShutdownRunsWhatIsAlreadyDue) {
  ManualSchedulerClock clock;
  std::atomic<int> runs{0};
  Scheduler scheduler(on(clock));
  std::vector<TaskHandle> due;
  for (int i = 0; i < 200; ++i) due.push_back(scheduler.schedule([&] { runs.fetch_add(1); }, 1ms));
  TaskHandle later = scheduler.schedule([] {}, 1h);
  clock.advance(2ms);  // the timer thread may or may not have fired them yet
  scheduler.shutdown(ShutdownMode::kDropPending);
  for (const TaskHandle& handle : due) EXPECT_EQ(handle.state(), TaskState::kDone);
  EXPECT_EQ(runs.load(), 200);
  EXPECT_EQ(later.state(), TaskState::kDropped);
}

// Times at the ends of the clock's range: the earliest is in the past and runs at once (no
// overflow on the way); a manual clock moved by the longest step stops at its last instant.
TEST(SchedulerTest, TimesAtTheEndsOfTheClocksRange) {
  ManualSchedulerClock clock;
  Scheduler scheduler(on(clock));
  TaskHandle earliest = scheduler.schedule_at([] {}, SchedulerClock::time_point::min());
  TaskHandle hour_after =
      scheduler.schedule_at([] {}, SchedulerClock::time_point::min() + std::chrono::hours(1));
  EXPECT_EQ(earliest.wait(), TaskState::kDone);
  EXPECT_EQ(hour_after.wait(), TaskState::kDone);
  scheduler.shutdown(ShutdownMode::kDropPending);
  ManualSchedulerClock far;
  far.advance(1s);
  const auto before = far.now();
  far.advance(SchedulerClock::duration::max());
  EXPECT_GT(far.now(), before);
  EXPECT_EQ(far.now(), SchedulerClock::time_point::max());
}

TEST(SchedulerTest, MoveOnlyTasksAndTasksThatSchedule) {
  ManualSchedulerClock clock;
  std::atomic<int> value{0};
  std::promise<TaskHandle> second;
  Scheduler scheduler(on(clock));
  auto payload = std::make_unique<int>(41);
  TaskHandle first = scheduler.schedule(
      [&, payload = std::move(payload)] {
        value = *payload + 1;
        second.set_value(scheduler.schedule([] {}, 5ms));
      },
      1ms);
  clock.advance(1ms);
  EXPECT_EQ(first.wait(), TaskState::kDone);
  EXPECT_EQ(value.load(), 42);
  // The task scheduled from a task counts its delay from the clock's present too.
  const TaskHandle inner = second.get_future().get();
  EXPECT_EQ(inner.due(), clock.now() + 5ms);
  clock.advance(5ms - 1ns);
  ASSERT_TRUE(pass(scheduler));
  EXPECT_EQ(inner.state(), TaskState::kPending);
  clock.advance(1ns + tick_of({}));
  EXPECT_EQ(inner.wait(), TaskState::kDone);
}

TEST(SchedulerTest, ExceptionsGoToTheHandlerAndOtherTasksRun) {
  ManualSchedulerClock clock;
  std::mutex mutex;
  std::vector<std::string> messages;
  std::atomic<int> ran{0};
  SchedulerOptions options;
  options.workers = 1;  // the one worker must survive every throw
  options.clock = &clock;
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
  for (int i = 0; i < 10; ++i) {
    throwing.push_back(scheduler.schedule([] { throw std::runtime_error("boom"); }, 1ms));
    fine.push_back(scheduler.schedule([&] { ran.fetch_add(1); }, 2ms));
  }
  clock.advance(2ms + tick_of(options));
  for (auto& handle : throwing) EXPECT_EQ(handle.wait(), TaskState::kFailed);
  for (auto& handle : fine) EXPECT_EQ(handle.wait(), TaskState::kDone);
  EXPECT_EQ(ran.load(), 10);
  std::lock_guard lock(mutex);
  EXPECT_EQ(messages, std::vector<std::string>(10, "boom"));
}

TEST(SchedulerTest, AThrowingHandlerIsSwallowed) {
  ManualSchedulerClock clock;
  SchedulerOptions options;
  options.workers = 1;
  options.clock = &clock;
  options.on_task_exception = [](std::exception_ptr) { throw 1; };
  Scheduler scheduler(options);
  TaskHandle bad = scheduler.schedule([] { throw std::logic_error("x"); }, 0ms);
  TaskHandle good = scheduler.schedule([] {}, 1ms);
  clock.advance(1ms + tick_of(options));
  EXPECT_EQ(bad.wait(), TaskState::kFailed);
  EXPECT_EQ(good.wait(), TaskState::kDone);
}

TEST(SchedulerTest, ASlowTaskDoesNotDelayTheClock) {
  ManualSchedulerClock clock;
  Gate released;
  std::atomic<bool> release_seen{false};
  Scheduler scheduler(on(clock));
  // The slow task blocks until a later task releases it: if it held up the timer, the later
  // task would never be handed out and the slow one would wait out its limit.
  TaskHandle slow = scheduler.schedule([&] { release_seen = released.wait(); }, 0ms);
  TaskHandle later = scheduler.schedule([&] { released.open(); }, 20ms);
  clock.advance(20ms + tick_of({}));
  EXPECT_EQ(later.wait(), TaskState::kDone);
  EXPECT_EQ(slow.wait(), TaskState::kDone);
  EXPECT_TRUE(release_seen.load());
}

// The running task is let go only once the shutdown has dropped the pending ones, so the
// shutdown certainly began while it ran.
TEST(SchedulerTest, ShutdownDropsPendingAndFinishesRunning) {
  Gate started;
  Gate gate;
  std::atomic<bool> finished{false};
  std::atomic<int> pending_runs{0};
  Scheduler scheduler;  // nothing here waits for a due time
  TaskHandle running = scheduler.schedule(
      [&] {
        started.open();
        (void)gate.wait();
        finished = true;
      },
      0ms);
  std::vector<TaskHandle> pending;
  for (int i = 0; i < 100; ++i) {
    pending.push_back(scheduler.schedule([&] { pending_runs.fetch_add(1); }, 1h));
  }
  ASSERT_TRUE(started.wait());
  std::thread opener([&] {
    EXPECT_TRUE(eventually([&] { return pending.back().state() == TaskState::kDropped; }));
    EXPECT_FALSE(finished.load());
    gate.open();
  });
  scheduler.shutdown(ShutdownMode::kDropPending);
  opener.join();
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
  std::mutex mutex;
  std::vector<int> order;
  SchedulerOptions options;
  options.workers = 1;
  Scheduler scheduler(options);
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

// While shutdown() waits, a driver moves the clock through the due times in steps of 10 ms and
// cancels the far task on the way.
TEST(SchedulerTest, ShutdownRunsPendingWhenDue) {
  ManualSchedulerClock clock;
  constexpr int kTasks = 20;
  std::vector<Clock::time_point> due(kTasks);
  std::vector<Clock::time_point> ran(kTasks);
  Scheduler scheduler(on(clock));
  std::vector<TaskHandle> handles;
  for (int i = 0; i < kTasks; ++i) {
    const auto k = static_cast<std::size_t>(i);
    due[k] = clock.now() + std::chrono::milliseconds(20 + 10 * i);
    handles.push_back(scheduler.schedule_at([&ran, &clock, k] { ran[k] = clock.now(); }, due[k]));
  }
  TaskHandle far = scheduler.schedule([] {}, 1h);
  // Cancels and reschedules still work while shutdown waits.
  std::thread driver([&] {
    ASSERT_TRUE(shutdown_began(scheduler));
    for (int step = 1; step <= 25; ++step) {
      clock.advance(10ms);
      if (step == 3) {
        EXPECT_TRUE(far.cancel());
      }
    }
  });
  scheduler.shutdown(ShutdownMode::kRunPendingWhenDue);
  driver.join();
  for (int i = 0; i < kTasks; ++i) {
    const auto k = static_cast<std::size_t>(i);
    EXPECT_EQ(handles[k].state(), TaskState::kDone) << i;
    EXPECT_GE(ran[k], due[k]) << i;
  }
  EXPECT_EQ(far.state(), TaskState::kCancelled);
}

// A shutdown waiting for pending tasks ends as soon as the last one is cancelled, not at its old
// due time: the clock never moves here, so that time never comes.
TEST(SchedulerTest, ShutdownWhenDueEndsWhenTheLastPendingTaskIsCancelled) {
  ManualSchedulerClock clock;
  Scheduler scheduler(on(clock));
  TaskHandle far = scheduler.schedule([] {}, 60s);
  auto shutdown =
      std::async(std::launch::async, [&] { scheduler.shutdown(ShutdownMode::kRunPendingWhenDue); });
  EXPECT_TRUE(shutdown_began(scheduler));
  EXPECT_EQ(shutdown.wait_for(0s), std::future_status::timeout)
      << "shutdown returned with `far` still pending";
  EXPECT_TRUE(far.cancel());
  const bool ended = shutdown.wait_for(kLimit) == std::future_status::ready;
  EXPECT_TRUE(ended) << "shutdown still waits for the cancelled task";
  if (!ended) clock.advance(60s);  // let it end, so that the test can
  shutdown.get();
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

// Producers schedule, cancel and reschedule while shutdown() runs, and a driver moves the clock
// on meanwhile, so tasks fire too. Afterwards every task is final, ran at most once and only if
// its state says so, and its callable was destroyed exactly once; a task scheduled before
// shutdown() was called is not dropped unless the mode drops pending tasks.
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
    std::atomic<bool> shut_down{false};
    std::atomic<std::size_t> scheduled{0};
    {
      ManualSchedulerClock clock;
      Scheduler scheduler(options_for(WheelKind::kHierarchical, &clock));
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
            const auto delay =
                std::array<std::chrono::milliseconds, 4>{0ms, 3ms, 30ms, 1h}[local() % 4];
            mine.push_back(scheduler.schedule(
                [tracked = Tracked(&live), counts, i] { counts[i].fetch_add(1); },
                delay == 1h && mode == ShutdownMode::kRunPendingWhenDue ? 40ms : delay));
            early.push_back(!shutting_down.load());
            scheduled.fetch_add(1);
            if (i % 3 == 1) mine[local() % mine.size()].cancel();
            if (i % 3 == 2)
              mine[local() % mine.size()].reschedule(std::chrono::milliseconds(local() % 20));
          }
        });
      }
      // The clock moves 100 us at a time until shutdown() returns: under kRunPendingWhenDue it
      // waits for the last due time.
      std::thread driver([&] {
        while (!shut_down.load()) {
          clock.advance(100us);
          std::this_thread::yield();
        }
      });
      // Shutdown begins after a random share of the tasks (up to a third) was scheduled.
      const std::size_t head_start = rng() % (kProducers * kEach / 3);
      while (scheduled.load() < head_start) std::this_thread::yield();
      shutting_down.store(true);
      scheduler.shutdown(mode);
      shut_down.store(true);
      driver.join();
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
    std::atomic<int> ran{0};
    Scheduler scheduler;
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

// schedule(delay) and reschedule(delay) count from the scheduler's clock, rounded up to its
// resolution; a delay below zero is zero, one beyond 100 years is 100 years.
TEST(SchedulerClockTest, DelaysCountFromTheSchedulersClock) {
  ManualSchedulerClock clock(Clock::time_point(24h));
  Scheduler scheduler(on(clock, 1));
  EXPECT_EQ(scheduler.now(), clock.now());
  clock.advance(1500us);
  EXPECT_EQ(scheduler.now(), Clock::time_point(24h + 1500us));
  TaskHandle handle = scheduler.schedule([] {}, 10ms);
  EXPECT_EQ(handle.due(), clock.now() + 10ms);
  clock.advance(3ms);
  ASSERT_TRUE(handle.reschedule(5ms));
  EXPECT_EQ(handle.due(), clock.now() + 5ms);
  ASSERT_TRUE(handle.reschedule(std::chrono::duration<double, std::milli>(0.0000015)));
  EXPECT_EQ(handle.due(), clock.now() + 2ns) << "1.5 ns rounds up";
  EXPECT_EQ(scheduler.schedule([] {}, -5s).due(), clock.now());
  EXPECT_EQ(scheduler.schedule([] {}, std::chrono::years(1000)).due(),
            clock.now() + std::chrono::hours(24 * 365 * 100));
}

// Near the end of the clock's range a delay does not wrap around into the past: the task is due
// at the last instant. A delay that is not a number counts as zero; a period over 100 years is
// 100 years.
TEST(SchedulerClockTest, DelaysPastTheClocksEndStopAtItsLastInstant) {
  ManualSchedulerClock clock(Clock::time_point::max() - 1h);
  Scheduler scheduler(on(clock, 1));
  TaskHandle late = scheduler.schedule([] {}, 2h);
  EXPECT_EQ(late.due(), Clock::time_point::max());
  TaskHandle moved = scheduler.schedule([] {}, 1min);
  ASSERT_TRUE(moved.reschedule(3h));
  EXPECT_EQ(moved.due(), Clock::time_point::max());
  EXPECT_EQ(scheduler.schedule([] {}, std::chrono::duration<double>(std::nan(""))).due(),
            clock.now());
  ASSERT_TRUE(pass(scheduler));
  EXPECT_EQ(late.state(), TaskState::kPending) << "ran early";
  EXPECT_EQ(moved.state(), TaskState::kPending) << "ran early";
  ManualSchedulerClock other;
  Scheduler yearly(on(other, 1));
  EXPECT_EQ(yearly.every([] {}, std::chrono::hours::max()).next(),
            other.now() + std::chrono::hours(24 * 365 * 100));
}

TEST(SchedulerClockTest, ManualClockMovesOnlyForward) {
  ManualSchedulerClock clock(Clock::time_point(1h));
  clock.advance(-1s);
  clock.advance(0s);
  EXPECT_EQ(clock.now(), Clock::time_point(1h));
  clock.advance_to(Clock::time_point(30min));
  EXPECT_EQ(clock.now(), Clock::time_point(1h));
  clock.advance_to(Clock::time_point(2h));
  EXPECT_EQ(clock.now(), Clock::time_point(2h));
  clock.advance(1ns);
  EXPECT_EQ(clock.now(), Clock::time_point(2h + 1ns));
}

// Several schedulers may share a clock; moving it wakes each timer thread.
TEST(SchedulerClockTest, OneClockWakesEverySchedulerOnIt) {
  ManualSchedulerClock clock;
  Scheduler first(on(clock, 1));
  Scheduler second(on(clock, 1, WheelKind::kHeap));
  TaskHandle a = first.schedule([] {}, 1s);
  TaskHandle b = second.schedule([] {}, 2s);
  clock.advance(2s - 1ns);
  ASSERT_TRUE(pass(first));
  ASSERT_TRUE(pass(second));
  EXPECT_EQ(a.wait(), TaskState::kDone);
  EXPECT_EQ(b.state(), TaskState::kPending);
  clock.advance(1ns + tick_of({}));
  EXPECT_EQ(b.wait(), TaskState::kDone);
}

// The classic ring, 3600 slots of 1 s, as written: a task fires at the first one-second boundary
// at or after its due time, never before it and at most a second after.
TEST(SchedulerHashedClassic, OneSecondTicksNeverEarly) {
  ManualSchedulerClock clock;
  SchedulerOptions options;
  options.wheel = WheelKind::kHashed;
  options.workers = 1;
  options.clock = &clock;
  Clock::time_point ran;
  Scheduler scheduler(options);
  const auto due = clock.now() + 300ms;
  TaskHandle handle = scheduler.schedule_at([&] { ran = clock.now(); }, due);
  clock.advance_to(due - 1ns);
  ASSERT_TRUE(pass(scheduler));
  EXPECT_EQ(handle.state(), TaskState::kPending);
  clock.advance_to(due + 1s);
  EXPECT_EQ(handle.wait(), TaskState::kDone);
  EXPECT_GE(ran, due);
}

// The same on steady_clock: the timer thread sleeps on the real clock to the next boundary.
TEST(SchedulerSlowTest, HashedClassicOnTheRealClock) {
  SchedulerOptions options;
  options.wheel = WheelKind::kHashed;  // 3600 slots x 1 s: the classic ring, as written
  Clock::time_point ran;
  Scheduler scheduler(options);
  const auto due = Clock::now() + 300ms;
  TaskHandle handle = scheduler.schedule_at([&] { ran = Clock::now(); }, due);
  EXPECT_EQ(handle.wait(), TaskState::kDone);
  EXPECT_GE(ran, due);
}

// --- recurring tasks: every() and cron()

TEST(SchedulerRecurringTest, EveryRunsAtEachPeriodNeverEarly) {
  ManualSchedulerClock clock;
  std::mutex mutex;
  std::vector<Clock::time_point> ran;
  Counter runs;
  Scheduler scheduler(on(clock, 1));  // after what its tasks touch: destroyed (joined) first
  const Clock::time_point start = clock.now();
  RecurringHandle every = scheduler.every(
      [&] {
        {
          std::lock_guard lock(mutex);
          ran.push_back(clock.now());
        }
        runs.add();
      },
      10s);
  ASSERT_TRUE(every.active());
  EXPECT_EQ(every.next(), start + 10s);
  clock.advance_to(start + 10s - 1ns);
  ASSERT_TRUE(pass(scheduler));
  EXPECT_EQ(runs.value(), 0U);
  for (int k = 1; k <= 3; ++k) {
    clock.advance_to(start + k * 10s);
    ASSERT_TRUE(runs.reaches(static_cast<std::size_t>(k)));
    ASSERT_TRUE(eventually([&] { return every.next() == start + (k + 1) * 10s; }));
  }
  EXPECT_EQ(every.runs(), 3U);
  EXPECT_EQ(every.skipped(), 0U);
  std::lock_guard lock(mutex);
  ASSERT_EQ(ran.size(), 3U);
  for (std::size_t i = 0; i < ran.size(); ++i) {
    EXPECT_GE(ran[i], start + static_cast<int>(i + 1) * 10s) << "run " << i << " early";
  }
}

TEST(SchedulerRecurringTest, RunsNeverOverlapAndInstantsPassedMeanwhileAreSkipped) {
  ManualSchedulerClock clock;
  Gate release;
  Counter started;
  std::atomic<int> running{0};
  std::atomic<bool> overlapped{false};
  Scheduler scheduler(on(clock, 2));
  const Clock::time_point start = clock.now();
  RecurringHandle every = scheduler.every(
      [&] {
        if (running.fetch_add(1) != 0) overlapped = true;
        started.add();
        if (started.value() == 1) release.wait();
        running.fetch_sub(1);
      },
      10s);
  clock.advance_to(start + 10s);
  ASSERT_TRUE(started.reaches(1));
  clock.advance_to(start + 45s);  // 20 s, 30 s and 40 s pass while the first run is under way
  ASSERT_TRUE(pass(scheduler));
  EXPECT_EQ(started.value(), 1U);
  release.open();
  ASSERT_TRUE(eventually([&] { return every.next() == start + 50s; }));
  EXPECT_EQ(every.skipped(), 3U);
  clock.advance_to(start + 50s);
  ASSERT_TRUE(started.reaches(2));
  EXPECT_FALSE(overlapped.load());
}

TEST(SchedulerRecurringTest, CancelStopsEveryLaterRun) {
  ManualSchedulerClock clock;
  Counter runs;
  Scheduler scheduler(on(clock, 1));
  const Clock::time_point start = clock.now();
  RecurringHandle every = scheduler.every([&] { runs.add(); }, 1s);
  clock.advance_to(start + 1s);
  ASSERT_TRUE(runs.reaches(1));
  ASSERT_TRUE(eventually([&] { return every.active(); }));
  EXPECT_TRUE(every.cancel());
  EXPECT_FALSE(every.active());
  EXPECT_EQ(every.next(), std::nullopt);
  EXPECT_FALSE(every.cancel()) << "a second cancel";
  clock.advance_to(start + 10s);
  ASSERT_TRUE(pass(scheduler));
  EXPECT_EQ(runs.value(), 1U);
  EXPECT_EQ(every.runs(), 1U);
}

// A run already handed to the worker (queued behind a busy one) when cancel() comes: the cancel
// says the task was still recurring, and that run never begins.
TEST(SchedulerRecurringTest, ACancelStopsARunAlreadyHandedToAWorker) {
  ManualSchedulerClock clock;
  Scheduler scheduler(on(clock, 1));
  std::atomic<bool> busy{false};
  std::atomic<bool> release{false};
  TaskHandle blocker = scheduler.schedule(
      [&] {
        busy = true;
        while (!release) std::this_thread::yield();
      },
      0ms);
  ASSERT_TRUE(eventually([&] { return busy.load(); }));
  Counter runs;
  RecurringHandle every = scheduler.every([&] { runs.add(); }, 10ms);
  clock.advance(10ms);
  ASSERT_TRUE(eventually([&] { return !every.active(); })) << "the run was not handed out";
  EXPECT_TRUE(every.cancel()) << "it was still recurring";
  release = true;
  EXPECT_EQ(blocker.wait(), TaskState::kDone);
  clock.advance(1s);
  ASSERT_TRUE(pass(scheduler));
  EXPECT_EQ(runs.value(), 0U);
  EXPECT_EQ(every.runs(), 0U);
}

TEST(SchedulerRecurringTest, ARunThatThrowsGoesToTheHandlerAndTheTaskRecurs) {
  ManualSchedulerClock clock;
  SchedulerOptions options = on(clock, 1);
  Counter caught;
  options.on_task_exception = [&](std::exception_ptr) { caught.add(); };
  Scheduler scheduler(options);
  const Clock::time_point start = clock.now();
  RecurringHandle every = scheduler.every([] { throw std::runtime_error("boom"); }, 1s);
  clock.advance_to(start + 1s);
  ASSERT_TRUE(caught.reaches(1));
  ASSERT_TRUE(eventually([&] { return every.next() == start + 2s; }));
  clock.advance_to(start + 2s);
  ASSERT_TRUE(caught.reaches(2));
  EXPECT_EQ(every.runs(), 2U);
}

// 2026-03-29 in Europe/Paris: 02:00 CET becomes 03:00 CEST (01:00 UTC), so 02:30 does not
// exist that day and runs at 03:00; the next day's 02:30 is 00:30 UTC.
TEST(SchedulerRecurringTest, CronRunsAtTheZonesInstantsAcrossAClockChange) {
  using std::chrono::sys_days;
  const auto wall_start = sys_days{std::chrono::year{2026} / 3 / 29} + 30min;  // 00:30 UTC
  ManualSchedulerClock clock({}, wall_start);
  std::mutex mutex;
  std::vector<std::chrono::system_clock::time_point> walls;
  Counter runs;
  Scheduler scheduler(on(clock, 1));
  EXPECT_EQ(scheduler.wall_now(), wall_start);
  RecurringHandle daily = scheduler.cron(
      [&] {
        {
          std::lock_guard lock(mutex);
          walls.push_back(scheduler.wall_now());
        }
        runs.add();
      },
      "30 2 * * *", "Europe/Paris");
  const Clock::time_point start = clock.now();
  EXPECT_EQ(daily.next(), start + 30min) << "02:30 skipped by the clock change runs at 03:00";
  clock.advance_to(start + 30min - 1ns);
  ASSERT_TRUE(pass(scheduler));
  EXPECT_EQ(runs.value(), 0U);
  clock.advance_to(start + 30min);
  ASSERT_TRUE(runs.reaches(1));
  ASSERT_TRUE(eventually([&] { return daily.next() == start + 24h; }));
  clock.advance_to(start + 24h);
  ASSERT_TRUE(runs.reaches(2));
  std::lock_guard lock(mutex);
  ASSERT_EQ(walls.size(), 2U);
  EXPECT_EQ(walls[0], sys_days{std::chrono::year{2026} / 3 / 29} + 1h);
  EXPECT_EQ(walls[1], sys_days{std::chrono::year{2026} / 3 / 30} + 30min);
}

TEST(SchedulerRecurringTest, BadExpressionsZonesAndPeriodsThrowWithTheReason) {
  ManualSchedulerClock clock;
  Scheduler scheduler(on(clock, 1));
  const auto reason = [&](auto&& make) -> std::string {
    try {
      make();
    } catch (const std::invalid_argument& e) {
      return e.what();
    }
    return "nothing thrown";
  };
  EXPECT_EQ(reason([&] { scheduler.cron([] {}, "61 * * * *"); }).rfind("cron: minute at 1", 0), 0U);
  EXPECT_NE(reason([&] { scheduler.cron([] {}, "0 9 * * *", "Mars/Olympus"); }).find("Mars"),
            std::string::npos);
  EXPECT_NE(reason([&] { scheduler.every([] {}, 0s); }).find("period"), std::string::npos);
}

TEST(SchedulerRecurringTest, AShutdownEndsTheChain) {
  ManualSchedulerClock clock;
  Counter runs;
  auto scheduler = std::make_unique<Scheduler>(on(clock, 1));
  RecurringHandle every = scheduler->every([&] { runs.add(); }, 1s);
  EXPECT_TRUE(every.active());
  scheduler->shutdown(ShutdownMode::kDropPending);
  EXPECT_FALSE(every.active());
  EXPECT_FALSE(every.cancel());
  scheduler.reset();
  EXPECT_EQ(runs.value(), 0U);
  EXPECT_FALSE(every.active()) << "the handle outlives its scheduler";
}

}  // namespace
}  // namespace delayq
