// timer_queue_test.cc — every timer queue against ReferenceQueue, plus the edge cases of the
// TimerQueue contract. The random test prints its seed; DELAYQ_SEED=<n> replays one run.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <iostream>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "support/seed.h"
#include "wheel/hashed_wheel.h"
#include "wheel/heap_timer.h"
#include "wheel/hierarchical_wheel.h"
#include "wheel/reference_queue.h"

namespace delayq::wheel {
namespace {

constexpr Time kEpoch = time_at(1'700'000'000'000);  // a Unix time in ms: realistic high bits
constexpr Time kMaxTime = Time::max();

// One configuration of a queue under test. kOps random operations over kIds timer ids.
template <typename Q, std::int64_t kTickMs, std::uint32_t kSlots = 0>
struct Config {
  using Queue = Q;
  static constexpr Millis kTick{kTickMs};
  static constexpr bool kExactNextDeadline = !std::is_same_v<Q, HierarchicalWheel>;
  // Sweeps of cancelled entries start at 16 of them, not 4096, so the random tests sweep often.
  static Queue make(TimerTable& timers, Time start) {
    if constexpr (std::is_same_v<Q, HashedWheel>) {
      return Queue(timers,
                   {.slots = kSlots, .tick = kTick, .start = start, .min_sweep_entries = 16});
    } else if constexpr (std::is_same_v<Q, HierarchicalWheel>) {
      return Queue(timers, {.tick = kTick, .start = start, .min_sweep_entries = 16});
    } else {
      return Queue(timers, {.tick = kTick, .start = start});
    }
  }
};

using Hierarchical1ms = Config<HierarchicalWheel, 1>;
using Hierarchical7ms = Config<HierarchicalWheel, 7>;
using Heap1ms = Config<HeapTimer, 1>;
using Hashed4096x1ms = Config<HashedWheel, 1, 4096>;
using Hashed3600x1s = Config<HashedWheel, 1000, 3600>;  // the classic ring
using Hashed16x1ms = Config<HashedWheel, 1, 16>;        // many rounds per timer

// One queue plus what the test knows about it. fire() checks timing and, driven by its own RNG,
// schedules, reschedules and cancels from inside the callback. Two Sides given the same seeds
// and the same operations must behave identically.
template <typename Q>
class Side {
 public:
  Side(Q& queue, Millis tick, std::size_t ids, std::uint64_t seed)
      : queue_(queue), tick_(tick), rng_(seed), due_(ids), pending_(ids, 0) {}

  void schedule(TimerId id, Time deadline) {
    due_[id] = std::max(deadline, queue_.now());
    if (pending_[id]) {
      EXPECT_TRUE(queue_.reschedule(id, deadline));
    } else {
      queue_.schedule(id, deadline);
    }
    pending_[id] = 1;
    EXPECT_TRUE(queue_.scheduled(id)) << id;
  }

  bool cancel(TimerId id) {
    const bool was_pending = pending_[id] != 0;
    pending_[id] = 0;
    const bool cancelled = queue_.cancel(id);
    EXPECT_EQ(cancelled, was_pending) << "cancel of " << id;
    EXPECT_FALSE(queue_.scheduled(id)) << id;
    return cancelled;
  }

  std::size_t advance_to(Time t) {
    fired_.clear();
    return queue_.advance_to(t, [this](TimerId id) { on_fire(id); });
  }

  [[nodiscard]] const std::vector<TimerId>& fired() const { return fired_; }
  [[nodiscard]] bool pending(TimerId id) const { return pending_[id] != 0; }

 private:
  void on_fire(TimerId id) {
    const Time now = queue_.now();
    EXPECT_TRUE(pending_[id]) << "fired a timer that is not pending: " << id;
    EXPECT_FALSE(queue_.scheduled(id)) << "idle before its callback: " << id;
    EXPECT_GE((now - due_[id]).count(), 0) << "fired early: " << id;
    EXPECT_LT((now - due_[id]).count(), tick_.count()) << "fired late: " << id;
    pending_[id] = 0;
    fired_.push_back(id);
    const auto ids = static_cast<std::uint32_t>(pending_.size());
    switch (rng_() % 32) {
      case 0:
      case 1:  // again, soon or at once (fires within this advance if due by its target)
        schedule(id, now + Millis{static_cast<std::int64_t>(rng_() % 100)});
        break;
      case 2:  // cancel another timer, maybe one due at this very tick
        cancel(static_cast<TimerId>(rng_() % ids));
        break;
      case 3:
        schedule(static_cast<TimerId>(rng_() % ids),
                 now + Millis{static_cast<std::int64_t>(rng_() % 3)});
        break;
      default:
        break;
    }
  }

  Q& queue_;
  Millis tick_;
  std::mt19937_64 rng_;
  std::vector<Time> due_;
  std::vector<char> pending_;
  std::vector<TimerId> fired_;
};

template <typename C>
class TimerQueueTest : public ::testing::Test {
 protected:
  using Queue = typename C::Queue;
  TimerTable timers_ = TimerTable(64);
  Queue queue_ = C::make(timers_, kEpoch);
  std::vector<TimerId> fired_;

  std::size_t advance_to(Time t) {
    return queue_.advance_to(t, [this](TimerId id) { fired_.push_back(id); });
  }
};

using Configs = ::testing::Types<Hierarchical1ms, Hierarchical7ms, Heap1ms, Hashed4096x1ms,
                                 Hashed3600x1s, Hashed16x1ms>;
class ConfigNames {
 public:
  template <typename C>
  static std::string GetName(int index) {
    static const char* const kNames[] = {"Hierarchical1ms", "Hierarchical7ms", "Heap1ms",
                                         "Hashed4096x1ms",  "Hashed3600x1s",   "Hashed16x1ms"};
    return kNames[index];
  }
};
TYPED_TEST_SUITE(TimerQueueTest, Configs, ConfigNames);

// A deadline for a random schedule: past, now, near, far, years ahead, near the 64-bit limit, or
// the previous deadline again (equal deadlines must keep schedule order).
Time random_deadline(std::mt19937_64& rng, Time now, Time& previous) {
  const auto r = [&](std::uint64_t n) { return static_cast<std::int64_t>(rng() % n); };
  Time deadline;
  switch (rng() % 20) {
    case 0:
      deadline = now - Millis{1 + r(1'000'000)};
      break;
    case 1:
      deadline = now;
      break;
    case 2:
    case 3:
    case 4:
    case 5:
    case 6:
      deadline = now + Millis{1 + r(64)};
      break;
    case 7:
    case 8:
    case 9:
    case 10:
      deadline = now + Millis{1 + r(5'000)};
      break;
    case 11:
    case 12:
    case 13:
      deadline = now + Millis{1 + r(10'000'000)};
      break;
    case 14:
      deadline = now + Millis{1 + r(100'000'000'000)};
      break;  // up to ~3 years
    case 15:
      deadline = kMaxTime - Millis{r(1'000)};
      break;
    case 16:
      deadline = time_at(-r(1'000));
      break;  // before the epoch: due at once
    default:
      deadline = previous;
      break;
  }
  previous = deadline;
  return deadline;
}

// Dense load: every timer within two seconds, a quarter of them on the previous deadline, and
// time moving a few ticks at a time, so level-0 windows hold hundreds of timers at once.
Time dense_deadline(std::mt19937_64& rng, Time now, Time& previous) {
  if (rng() % 4 == 0 && previous >= now) return previous;
  previous = now + Millis{static_cast<std::int64_t>(rng() % 2'000)};
  return previous;
}

Millis dense_step(std::mt19937_64& rng) {
  return Millis{static_cast<std::int64_t>(rng() % 33)};
}

Millis random_step(std::mt19937_64& rng) {
  const auto r = [&](std::uint64_t n) { return static_cast<std::int64_t>(rng() % n); };
  const auto pick = rng() % 1000;
  if (pick < 200) return Millis{0};
  if (pick < 500) return Millis{1};
  if (pick < 800) return Millis{2 + r(63)};
  if (pick < 999) return Millis{65 + r(10'000)};
  return Millis{1'000'000 + r(9'000'000)};  // millions of ticks at 1 ms
}

// kSpread: every kind of deadline and step. kDense: see dense_deadline(). kChurn: dense, but
// mostly cancels and reschedules, so cancelled entries pile up and the queues sweep them often.
enum class Load { kSpread, kDense, kChurn };

template <typename C>
void run_against_reference(std::size_t ops, std::size_t ids, Load load = Load::kSpread) {
  const auto deadline_for = [load](std::mt19937_64& rng, Time now, Time& previous) {
    return load == Load::kSpread ? random_deadline(rng, now, previous)
                                 : dense_deadline(rng, now, previous);
  };
  using Queue = typename C::Queue;
  const std::uint64_t seed = testing::test_seed();
  SCOPED_TRACE("seed=" + std::to_string(seed));
  std::mt19937_64 rng(seed);

  TimerTable timers(ids);
  Queue queue = C::make(timers, kEpoch);
  ReferenceQueue model(C::kTick, kEpoch);
  Side<Queue> side(queue, C::kTick, ids, seed + 1);
  Side<ReferenceQueue> model_side(model, C::kTick, ids, seed + 1);
  Time previous = kEpoch;
  Time target = kEpoch;

  for (std::size_t op = 0; op < ops && !::testing::Test::HasFailure(); ++op) {
    const auto id = static_cast<TimerId>(rng() % ids);
    auto kind = rng() % 100;  // < 40 schedule, < 55 cancel, < 60 reschedule, < 95 advance
    if (load == Load::kChurn) {
      kind = kind < 25 ? 0 : kind < 55 ? 40 : kind < 90 ? 55 : kind < 98 ? 60 : 95;
    }
    if (kind < 40) {
      const Time deadline = deadline_for(rng, queue.now(), previous);
      side.schedule(id, deadline);
      model_side.schedule(id, deadline);
    } else if (kind < 55) {
      ASSERT_EQ(side.cancel(id), model_side.cancel(id)) << "op " << op;
    } else if (kind < 60) {
      const Time deadline = deadline_for(rng, queue.now(), previous);
      const bool was = model_side.pending(id);
      if (was) {  // reschedule proper; Side::schedule also covers it, this checks the result
        ASSERT_TRUE(queue.reschedule(id, deadline));
        ASSERT_TRUE(model.reschedule(id, deadline));
      }
      side.schedule(id, deadline);
      model_side.schedule(id, deadline);
    } else if (kind < 95) {
      if (rng() % 50 == 0)
        target -= Millis{1 + static_cast<std::int64_t>(rng() % 100)};
      else
        target = std::max(target, queue.now()) +
                 (load == Load::kSpread ? random_step(rng) : dense_step(rng));
      const std::size_t fired = side.advance_to(target);
      ASSERT_EQ(fired, model_side.advance_to(target)) << "op " << op;
      ASSERT_EQ(side.fired(), model_side.fired()) << "op " << op;
      ASSERT_EQ(queue.now(), model.now()) << "op " << op;
    } else {
      const auto expected = model.next_deadline();
      const auto actual = queue.next_deadline();
      ASSERT_EQ(actual.has_value(), expected.has_value()) << "op " << op;
      if (expected) {
        ASSERT_GE(*actual, queue.now()) << "op " << op;
        if (C::kExactNextDeadline) {
          ASSERT_EQ(*actual, *expected) << "op " << op;
        } else {
          ASSERT_LE(*actual, *expected) << "op " << op;
        }
      }
    }
    ASSERT_EQ(queue.size(), model.size()) << "op " << op;
    if constexpr (std::is_same_v<Queue, HierarchicalWheel>) {
      // Every stale entry comes from a cancel: the count can neither exceed them nor wrap.
      ASSERT_LE(queue.stale_entries(), op + 1) << "op " << op;
    }
  }
}

TYPED_TEST(TimerQueueTest, MatchesReferenceOnRandomOperations) {
  if constexpr (std::is_same_v<TypeParam, Hashed16x1ms>) {
    run_against_reference<TypeParam>(200'000, 256);
  } else {
    run_against_reference<TypeParam>(1'000'000, 4096);
  }
}

TYPED_TEST(TimerQueueTest, MatchesReferenceOnDenseRandomOperations) {
  if constexpr (std::is_same_v<TypeParam, Hashed16x1ms>) {
    run_against_reference<TypeParam>(50'000, 512, Load::kDense);
  } else {
    run_against_reference<TypeParam>(500'000, 8192, Load::kDense);
  }
}

TYPED_TEST(TimerQueueTest, MatchesReferenceUnderCancelChurn) {
  run_against_reference<TypeParam>(300'000, 2048, Load::kChurn);
}

TYPED_TEST(TimerQueueTest, EqualDeadlinesFireInScheduleOrder) {
  const Time at = kEpoch + Millis{5'000};
  for (TimerId id : {7U, 3U, 9U, 1U}) this->queue_.schedule(id, at);
  this->queue_.schedule(5, at - Millis{1'000});
  EXPECT_EQ(this->advance_to(at + TypeParam::kTick - Millis{1}), 5U);
  EXPECT_EQ(this->fired_, (std::vector<TimerId>{5, 7, 3, 9, 1}));
}

TYPED_TEST(TimerQueueTest, NeverFiresBeforeTheDeadline) {
  const Time at = kEpoch + Millis{123'456};
  this->queue_.schedule(1, at);
  EXPECT_EQ(this->advance_to(at - Millis{1}), 0U);
  EXPECT_TRUE(this->queue_.scheduled(1));
  EXPECT_EQ(this->advance_to(at + TypeParam::kTick), 1U);
  EXPECT_FALSE(this->queue_.scheduled(1));
}

TYPED_TEST(TimerQueueTest, PastDeadlineFiresOnNextAdvanceEvenByZero) {
  this->queue_.schedule(2, kEpoch - Millis{10'000});
  this->queue_.schedule(3, time_at(-5));
  EXPECT_EQ(this->queue_.next_deadline(), this->queue_.now());
  EXPECT_EQ(this->advance_to(this->queue_.now()), 2U);
  EXPECT_EQ(this->fired_, (std::vector<TimerId>{2, 3}));
}

TYPED_TEST(TimerQueueTest, CancelOfFiredOrIdleTimerReturnsFalse) {
  EXPECT_FALSE(this->queue_.cancel(4));
  this->queue_.schedule(4, kEpoch + Millis{10'000});
  this->advance_to(kEpoch + Millis{20'000});
  ASSERT_EQ(this->fired_, (std::vector<TimerId>{4}));
  EXPECT_FALSE(this->queue_.cancel(4));
  EXPECT_EQ(this->queue_.size(), 0U);
  EXPECT_FALSE(this->queue_.next_deadline().has_value());
}

TYPED_TEST(TimerQueueTest, CallbackCancelsSchedulesAndReschedules) {
  auto& queue = this->queue_;
  const Time at = kEpoch + Millis{60'000};
  queue.schedule(1, at);
  queue.schedule(2, at);  // cancelled by 1's callback before its turn
  queue.schedule(3, at);
  std::vector<TimerId> fired;
  queue.advance_to(at + Millis{120'000}, [&](TimerId id) {
    fired.push_back(id);
    if (id == 1) {
      EXPECT_TRUE(queue.cancel(2));
      queue.schedule(4, queue.now());                    // due now: after 3, in this advance
      queue.schedule(5, queue.now() + Millis{30'000});   // later in this advance
      queue.schedule(6, queue.now() + Millis{600'000});  // beyond this advance
    }
    if (id == 3 && std::count(fired.begin(), fired.end(), 3) == 1) {
      EXPECT_FALSE(queue.reschedule(3, queue.now() + Millis{1}));  // itself: idle while firing
    }
  });
  EXPECT_EQ(fired, (std::vector<TimerId>{1, 3, 4, 3, 5}));
  EXPECT_EQ(queue.size(), 1U);
  EXPECT_TRUE(this->queue_.scheduled(6));
}

TYPED_TEST(TimerQueueTest, DeadlineNearTheLimitOfTime) {
  const Time at = kMaxTime - Millis{1};
  this->queue_.schedule(8, at);
  this->queue_.schedule(9, kEpoch + Millis{1});
  EXPECT_EQ(this->advance_to(at - Millis{1}), 1U);
  EXPECT_EQ(this->fired_, (std::vector<TimerId>{9}));
  this->advance_to(kMaxTime);
  // The deadline's tick must be reachable to fire: at 1 ms it is; at 1 s or 7 ms ticks the last
  // tick boundary before the end of time is earlier than the deadline, so it never fires early.
  const bool reachable =
      deadline_tick(at, TypeParam::kTick) <= now_tick(kMaxTime, TypeParam::kTick);
  EXPECT_EQ(this->queue_.scheduled(8), !reachable);
  EXPECT_EQ(this->fired_.size(), reachable ? 2U : 1U);
  // A timer that can never fire is not offered as a deadline: a sleep loop ends.
  EXPECT_FALSE(this->queue_.next_deadline().has_value());
  EXPECT_EQ(this->queue_.size(), reachable ? 0U : 1U);
}

TYPED_TEST(TimerQueueTest, StaleEntryDoesNotFireAfterItsGenerationComesRoundAgain) {
  this->queue_.schedule(0, kEpoch + Millis{1'000'000});
  ASSERT_TRUE(this->queue_.cancel(0));  // a lazy queue keeps a stale entry for generation 1
  // White box: stand in for 2^32 bumps of the generation, which would take hours of schedules,
  // passing through one of the generations that start an epoch on the way.
  this->timers_[0].generation = kGenerationEpoch / 2;
  this->queue_.schedule(0, kEpoch + Millis{3'000'000});
  ASSERT_TRUE(this->queue_.cancel(0));
  this->timers_[0].generation = 0;
  this->queue_.schedule(0, kEpoch + Millis{2'000'000});  // generation 1 again
  EXPECT_EQ(this->advance_to(kEpoch + Millis{1'500'000}), 0U);
  EXPECT_EQ(this->advance_to(kEpoch + Millis{2'000'000} + TypeParam::kTick), 1U);
}

TYPED_TEST(TimerQueueTest, AdvancingBackwardsIsIgnored) {
  this->queue_.schedule(1, kEpoch + Millis{50'000});
  this->advance_to(kEpoch + Millis{40'000});
  const Time before = this->queue_.now();
  EXPECT_EQ(this->advance_to(kEpoch + Millis{10'000}), 0U);
  EXPECT_EQ(this->queue_.now(), before);
  EXPECT_EQ(this->advance_to(kEpoch + Millis{50'000}), 1U);
}

TYPED_TEST(TimerQueueTest, SleepingUntilNextDeadlineFiresEverythingInOrder) {
  const std::vector<std::int64_t> offsets_ms = {5, 70, 4'500, 300'000, 86'400'000, 31'536'000'000};
  for (std::size_t i = 0; i < offsets_ms.size(); ++i) {
    this->queue_.schedule(static_cast<TimerId>(i), kEpoch + Millis{offsets_ms[i]});
  }
  std::size_t wakeups = 0;
  while (const auto next = this->queue_.next_deadline()) {
    ASSERT_LT(++wakeups, 100U);  // a few per timer at most, never a tick-by-tick crawl
    this->advance_to(*next);
  }
  EXPECT_EQ(this->fired_, (std::vector<TimerId>{0, 1, 2, 3, 4, 5}));
}

TYPED_TEST(TimerQueueTest, CallerMayGrowTheTimerTableWhileFiring) {
  this->queue_.schedule(0, kEpoch + Millis{1});
  std::vector<TimerId> fired;
  this->queue_.advance_to(kEpoch + Millis{10'000}, [&](TimerId id) {
    fired.push_back(id);
    if (id == 0) {
      this->timers_.resize(100'000);
      this->queue_.schedule(99'999, this->queue_.now());
    }
  });
  EXPECT_EQ(fired, (std::vector<TimerId>{0, 99'999}));
  EXPECT_FALSE(this->queue_.scheduled(0));
  EXPECT_FALSE(this->queue_.scheduled(99'999));
}

using TimerQueueDeathTest = TimerQueueTest<Hierarchical1ms>;

TEST(TimerQueueDeathTest, SchedulingAScheduledTimerIsAProgrammingError) {
  TimerTable timers(2);
  HierarchicalWheel wheel(timers);
  wheel.schedule(0, time_at(10));
  EXPECT_DEATH(wheel.schedule(0, time_at(20)), "check failed");
  EXPECT_DEATH(wheel.schedule(2, time_at(20)), "check failed");
  HeapTimer heap(timers);
  EXPECT_DEATH(heap.schedule(2, time_at(20)), "check failed");
}

TEST(TimerQueueDeathTest, AdvancingFromInsideACallbackIsAProgrammingError) {
  TimerTable timers(1);
  HierarchicalWheel wheel(timers);
  wheel.schedule(0, time_at(1));
  EXPECT_DEATH(
      wheel.advance_to(time_at(5), [&](TimerId) { wheel.advance_to(time_at(6), [](TimerId) {}); }),
      "check failed");
}

static_assert(TimerQueue<HierarchicalWheel>);
static_assert(TimerQueue<HashedWheel>);
static_assert(TimerQueue<HeapTimer>);

}  // namespace
}  // namespace delayq::wheel
