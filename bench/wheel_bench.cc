// wheel_bench.cc — the three timer queues side by side: schedule, cancel, expiry and a TTR-like
// mix at 10^4, 10^6 and 10^7 pending timers with deadlines uniform over one hour at 1 ms.
// Every figure is a per-timer cost from one timed phase (manual time), so set-up (filling the
// queue, shuffling) is never in it. Counters: per_op = time per timer of the phase; per_tick =
// time per tick advanced (expiry); bytes_per_timer = the queue's memory plus the caller's Timer
// per pending timer. Results and the command: docs/BENCHMARKS.md
#include <benchmark/benchmark.h>
#include <malloc.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "wheel/hashed_wheel.h"
#include "wheel/heap_timer.h"
#include "wheel/hierarchical_wheel.h"

namespace {

using delayq::wheel::HashedWheel;
using delayq::wheel::HeapTimer;
using delayq::wheel::HierarchicalWheel;
using delayq::wheel::Millis;
using delayq::wheel::Time;
using delayq::wheel::time_at;
using delayq::wheel::Timer;
using delayq::wheel::TimerId;
using delayq::wheel::TimerTable;
using Clock = std::chrono::steady_clock;

constexpr Time kEpoch = time_at(1'700'000'000'000);
constexpr Millis kHour{3'600'000};

struct Hierarchical {
  static constexpr const char* kName = "hierarchical";
  using Queue = HierarchicalWheel;
  static Queue make(TimerTable& timers) { return Queue(timers, {.start = kEpoch}); }
  static constexpr Millis kTick{1};
  static constexpr Millis kExpiryWindow = kHour;
  static constexpr std::size_t kMaxMixPending = 10'000'000;
};
struct Heap {
  static constexpr const char* kName = "heap";
  using Queue = HeapTimer;
  static Queue make(TimerTable& timers) { return Queue(timers, {.start = kEpoch}); }
  static constexpr Millis kTick{1};
  static constexpr Millis kExpiryWindow = kHour;
  static constexpr std::size_t kMaxMixPending = 10'000'000;
};
// The classic ring: 3600 buckets of 1 s. Deadlines round up to the second.
struct HashedSeconds {
  static constexpr const char* kName = "hashed:3600x1s";
  using Queue = HashedWheel;
  static Queue make(TimerTable& timers) {
    return Queue(timers, {.slots = 3600, .tick = kTick, .start = kEpoch});
  }
  static constexpr Millis kTick{1000};
  static constexpr Millis kExpiryWindow = kHour;
  static constexpr std::size_t kMaxMixPending = 10'000'000;
};
// The same ring at the 1 ms precision delayq promises: every tick walks n/3600 timers. Its expiry
// is measured over the first minute only, and its TTR mix (a full hour) stops at 10^6: an hour at
// 10^7 would walk for minutes.
struct HashedMillis {
  static constexpr const char* kName = "hashed:3600x1ms";
  using Queue = HashedWheel;
  static Queue make(TimerTable& timers) {
    return Queue(timers, {.slots = 3600, .tick = kTick, .start = kEpoch});
  }
  static constexpr Millis kTick{1};
  static constexpr Millis kExpiryWindow{60'000};
  static constexpr std::size_t kMaxMixPending = 1'000'000;
};

// Deadlines uniform over the hour after kEpoch, and a random cancel order; built once per size.
struct Workload {
  std::vector<Time> deadlines;
  std::vector<TimerId> shuffled;

  explicit Workload(std::size_t n) : deadlines(n), shuffled(n) {
    std::mt19937_64 rng(20261122);
    for (auto& d : deadlines)
      d = kEpoch + Millis{1 + static_cast<std::int64_t>(rng() % kHour.count())};
    std::iota(shuffled.begin(), shuffled.end(), TimerId{0});
    std::shuffle(shuffled.begin(), shuffled.end(), rng);
  }
  static const Workload& of(std::size_t n) {
    static std::vector<std::unique_ptr<Workload>> cache;
    for (const auto& w : cache) {
      if (w->deadlines.size() == n) return *w;
    }
    cache.push_back(std::make_unique<Workload>(n));
    return *cache.back();
  }
};

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

void set_per_op(benchmark::State& state, double seconds, double ops) {
  state.counters["per_op"] = benchmark::Counter(seconds * 1e9 / ops);
}

template <typename Q>
void fill(Q& queue, const Workload& work) {
  for (TimerId id = 0; id < work.deadlines.size(); ++id) queue.schedule(id, work.deadlines[id]);
}

template <typename K>
void BM_Schedule(benchmark::State& state, std::size_t n) {
  const Workload& work = Workload::of(n);
  double seconds = 0;
  double bytes = 0;
  for (auto _ : state) {
    TimerTable timers(n);
    auto queue = K::make(timers);
    const auto start = Clock::now();
    fill(queue, work);
    const double s = seconds_since(start);
    state.SetIterationTime(s);
    seconds += s;
    bytes = static_cast<double>(queue.memory_bytes() + n * sizeof(Timer)) / static_cast<double>(n);
  }
  set_per_op(state, seconds, static_cast<double>(n) * static_cast<double>(state.iterations()));
  state.counters["bytes_per_timer"] = bytes;
}

// Fills a queue of n timers and times cancelling the first `cancels` of them in random order.
template <typename K>
void run_cancels(benchmark::State& state, std::size_t n, std::size_t cancels) {
  const Workload& work = Workload::of(n);
  double seconds = 0;
  for (auto _ : state) {
    TimerTable timers(n);
    auto queue = K::make(timers);
    fill(queue, work);
    const auto start = Clock::now();
    for (std::size_t i = 0; i < cancels; ++i) {
      benchmark::DoNotOptimize(queue.cancel(work.shuffled[i]));
    }
    const double s = seconds_since(start);
    state.SetIterationTime(s);
    seconds += s;
  }
  set_per_op(state, seconds,
             static_cast<double>(cancels) * static_cast<double>(state.iterations()));
}

// Cancel at n pending: a tenth of the timers, so n barely moves.
template <typename K>
void BM_Cancel(benchmark::State& state, std::size_t n) {
  run_cancels<K>(state, n, n / 10);
}

// Cancel every timer: the queue drains to empty, and the wheels pay for reclaiming their stale
// entries along the way.
template <typename K>
void BM_CancelAll(benchmark::State& state, std::size_t n) {
  run_cancels<K>(state, n, n);
}

template <typename K>
void BM_Expire(benchmark::State& state, std::size_t n) {
  const Workload& work = Workload::of(n);
  double seconds = 0;
  double fired = 0;
  for (auto _ : state) {
    TimerTable timers(n);
    auto queue = K::make(timers);
    fill(queue, work);
    std::size_t count = 0;
    const auto start = Clock::now();
    queue.advance_to(kEpoch + K::kExpiryWindow, [&](TimerId) { ++count; });
    const double s = seconds_since(start);
    state.SetIterationTime(s);
    seconds += s;
    fired += static_cast<double>(count);
  }
  set_per_op(state, seconds, fired);
  const auto ticks = static_cast<double>(K::kExpiryWindow / K::kTick);
  state.counters["per_tick"] =
      benchmark::Counter(seconds * 1e9 / (ticks * static_cast<double>(state.iterations())));
  state.counters["fired"] = fired / static_cast<double>(state.iterations());
}

// A TTR-like life: every timer is scheduled, 95% are cancelled in random order before they are
// due (jobs deleted in time), and the rest fire as time runs through the hour.
template <typename K>
void BM_TtrMix(benchmark::State& state, std::size_t n) {
  const Workload& work = Workload::of(n);
  double seconds = 0;
  for (auto _ : state) {
    TimerTable timers(n);
    auto queue = K::make(timers);
    const auto start = Clock::now();
    fill(queue, work);
    for (std::size_t i = 0; i < n * 95 / 100; ++i) queue.cancel(work.shuffled[i]);
    std::size_t count = 0;
    queue.advance_to(kEpoch + kHour, [&](TimerId) { ++count; });
    const double s = seconds_since(start);
    benchmark::DoNotOptimize(count);
    state.SetIterationTime(s);
    seconds += s;
  }
  set_per_op(state, seconds, static_cast<double>(n) * static_cast<double>(state.iterations()));
}

template <typename K>
void register_all() {
  for (const std::int64_t n : {10'000, 1'000'000, 10'000'000}) {
    const std::int64_t iterations = n >= 10'000'000 ? 2 : n >= 1'000'000 ? 5 : 200;
    const std::string suffix = std::string("/wheel:") + K::kName + "/pending:" + std::to_string(n);
    const auto add = [&](const char* name, auto* fn, std::int64_t iters) {
      benchmark::RegisterBenchmark((std::string(name) + suffix).c_str(), fn,
                                   static_cast<std::size_t>(n))
          ->Iterations(iters)
          ->UseManualTime()
          ->Unit(benchmark::kMillisecond);
    };
    add("BM_Schedule", BM_Schedule<K>, iterations);
    add("BM_Cancel", BM_Cancel<K>, iterations);
    add("BM_CancelAll", BM_CancelAll<K>, iterations);
    add("BM_Expire", BM_Expire<K>, iterations);
    if (static_cast<std::size_t>(n) <= K::kMaxMixPending) {
      add("BM_TtrMix", BM_TtrMix<K>, n >= 10'000'000 ? 1 : iterations);
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  // glibc moves its mmap and trim thresholds with the largest mapped block freed so far, so
  // whether a queue's big blocks come fresh from the kernel (page faults inside the timed region)
  // or from the heap would depend on what earlier iterations allocated. Fixed here, every queue
  // and every table layout is measured alike: blocks from the heap, which is never trimmed.
  mallopt(M_MMAP_THRESHOLD, 32 << 20);
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
  register_all<Hierarchical>();
  register_all<Heap>();
  register_all<HashedSeconds>();
  register_all<HashedMillis>();
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
