// scheduler_bench.cc — delayq::Scheduler side by side with a naive scheduler built the way
// java.util.concurrent.ScheduledThreadPoolExecutor is (one binary heap under one mutex, a
// condition variable, workers that take the head when it is due), in one run, at 10^4 and 10^6
// pending tasks. Per implementation and size it reports: schedule throughput from 1 and 2
// threads, cancel throughput from 1 thread, fire lateness percentiles, and the CPU time and
// context switches of the whole process while it sits idle with tasks pending an hour away.
// A plain program rather than Google Benchmark, because each figure needs several threads, a
// pre-filled scheduler and a flush at the end of the timed phase. Results: docs/BENCHMARKS.md
//
//   scheduler_bench [--pending 10000,1000000] [--impls a,b,...] [--rounds N] [--lateness N]
//                   [--idle 0|1]
// BENCH_DEBUG=1 in the environment prints, per round, the callers' time and the flush apart.
#include <malloc.h>
#include <sys/resource.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <numeric>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "delayq/scheduler.h"

namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

// ---- the naive scheduler ------------------------------------------------------------------

// ScheduledThreadPoolExecutor's design in C++: every task is a shared_ptr (its handle) holding a
// std::function, its due time, a sequence number for ties and its index in the heap; the heap
// and a condition variable sit under one mutex. Workers take the head when it is due; one of
// them (the leader) waits until then, the others wait to be signalled. remove_on_cancel = true
// is STPE's setRemoveOnCancelPolicy(true): cancel removes the task from the heap in O(log n);
// false is STPE's default: cancel only marks the task, which stays in the heap (and in memory)
// until its due time.
class NaiveScheduler {
 public:
  struct Task {
    std::atomic<int> state{0};  // 0 pending, 1 taken by a worker, 2 cancelled
    std::function<void()> fn;
    Clock::time_point due;
    std::uint64_t seq = 0;
    std::size_t index = kNotQueued;  // guarded by the mutex
  };
  using Handle = std::shared_ptr<Task>;
  static constexpr std::size_t kNotQueued = static_cast<std::size_t>(-1);

  NaiveScheduler(std::size_t workers, bool remove_on_cancel) : remove_on_cancel_(remove_on_cancel) {
    for (std::size_t i = 0; i < workers; ++i) workers_.emplace_back([this] { work(); });
  }
  ~NaiveScheduler() {
    {
      std::lock_guard lock(mutex_);
      stop_ = true;
    }
    available_.notify_all();
    for (auto& worker : workers_) worker.join();
  }
  NaiveScheduler(const NaiveScheduler&) = delete;
  NaiveScheduler& operator=(const NaiveScheduler&) = delete;

  Handle schedule_at(std::function<void()> fn, Clock::time_point due) {
    auto task = std::make_shared<Task>();
    task->fn = std::move(fn);
    task->due = due;
    bool head;
    {
      std::lock_guard lock(mutex_);
      task->seq = seq_++;
      heap_.push_back(task);
      task->index = heap_.size() - 1;
      sift_up(heap_.size() - 1);
      head = heap_[0] == task;
      if (head) leader_ = {};
    }
    if (head) available_.notify_one();
    return task;
  }

  bool cancel(const Handle& task) {
    int expected = 0;
    if (!task->state.compare_exchange_strong(expected, 2)) return false;
    if (remove_on_cancel_) {
      std::lock_guard lock(mutex_);
      if (task->index != kNotQueued) remove_at(task->index);
    }
    return true;
  }

 private:
  static bool before(const Task& a, const Task& b) {
    return a.due < b.due || (a.due == b.due && a.seq < b.seq);
  }
  void place(std::size_t i, Handle task) {
    task->index = i;
    heap_[i] = std::move(task);
  }
  void sift_up(std::size_t i) {
    Handle task = std::move(heap_[i]);
    while (i > 0) {
      const std::size_t parent = (i - 1) / 2;
      if (!before(*task, *heap_[parent])) break;
      place(i, std::move(heap_[parent]));
      i = parent;
    }
    place(i, std::move(task));
  }
  void sift_down(std::size_t i) {
    Handle task = std::move(heap_[i]);
    const std::size_t n = heap_.size();
    for (;;) {
      std::size_t child = 2 * i + 1;
      if (child >= n) break;
      if (child + 1 < n && before(*heap_[child + 1], *heap_[child])) ++child;
      if (!before(*heap_[child], *task)) break;
      place(i, std::move(heap_[child]));
      i = child;
    }
    place(i, std::move(task));
  }
  Handle remove_at(std::size_t i) {
    Handle removed = std::move(heap_[i]);
    removed->index = kNotQueued;
    Handle last = std::move(heap_.back());
    heap_.pop_back();
    if (i < heap_.size()) {
      place(i, std::move(last));
      sift_down(i);
      if (heap_[i]->index == i) sift_up(i);
    }
    return removed;
  }
  void work() {
    const auto me = std::this_thread::get_id();
    std::unique_lock lock(mutex_);
    for (;;) {
      if (stop_) return;
      if (heap_.empty()) {
        available_.wait(lock);
        continue;
      }
      const Clock::time_point due = heap_[0]->due;
      if (due > Clock::now()) {
        if (leader_ != std::thread::id{}) {
          available_.wait(lock);
          continue;
        }
        leader_ = me;
        available_.wait_until(lock, due);
        if (leader_ == me) leader_ = {};
        continue;
      }
      Handle task = remove_at(0);
      if (leader_ == std::thread::id{} && !heap_.empty()) available_.notify_one();
      lock.unlock();
      int expected = 0;
      if (task->state.compare_exchange_strong(expected, 1)) task->fn();
      task.reset();
      lock.lock();
    }
  }

  const bool remove_on_cancel_;
  std::mutex mutex_;
  std::condition_variable available_;
  std::vector<Handle> heap_;
  std::uint64_t seq_ = 0;
  std::thread::id leader_;
  bool stop_ = false;
  std::vector<std::thread> workers_;
};

// ---- the implementations under test, behind one shape ----------------------------------------

struct Delayq {
  using Handle = delayq::TaskHandle;
  explicit Delayq(delayq::WheelKind kind)
      : measurable(kind != delayq::WheelKind::kHashed), scheduler(options(kind)) {}
  static delayq::SchedulerOptions options(delayq::WheelKind kind) {
    delayq::SchedulerOptions options;
    options.workers = 2;
    options.wheel = kind;
    return options;
  }
  template <typename F>
  Handle schedule(F&& fn, Clock::duration delay) {
    return scheduler.schedule(std::forward<F>(fn), delay);
  }
  template <typename F>
  Handle schedule_at(F&& fn, Clock::time_point due) {
    return scheduler.schedule_at(std::forward<F>(fn), due);
  }
  bool cancel(Handle& handle) { return handle.cancel(); }
  // Every change made so far has reached the wheel: a task due now has been through the inbox
  // after all of them, fired and run.
  void flush() {
    scheduler.schedule([] {}, 0ms).wait();
  }
  bool measurable;
  delayq::Scheduler scheduler;
};

struct Naive {
  using Handle = NaiveScheduler::Handle;
  explicit Naive(bool remove_on_cancel) : scheduler(2, remove_on_cancel) {}
  template <typename F>
  Handle schedule(F&& fn, Clock::duration delay) {
    return scheduler.schedule_at(std::forward<F>(fn), Clock::now() + delay);
  }
  template <typename F>
  Handle schedule_at(F&& fn, Clock::time_point due) {
    return scheduler.schedule_at(std::forward<F>(fn), due);
  }
  bool cancel(Handle& handle) { return scheduler.cancel(handle); }
  void flush() {}  // every call takes effect before it returns
  bool measurable = true;
  NaiveScheduler scheduler;
};

// ---- measurements -----------------------------------------------------------------------------

struct Config {
  std::vector<std::size_t> pending{10'000, 1'000'000};
  std::vector<std::string> impls{"delayq", "delayq:heap", "delayq:hashed", "naive", "naive:mark"};
  std::size_t rounds = 8;               // the first is a warm-up
  std::size_t lateness_tasks = 20'000;  // 0 skips the lateness phase
  bool idle = true;                     // --idle 0 skips the idle phase
};

struct Result {
  std::string impl;
  std::size_t pending = 0;
  double schedule1_ns = 0;  // per op, median over rounds
  double schedule2_ns = 0;
  double cancel_ns = 0;
  double late_p50_us = 0;
  double late_p99_us = 0;
  double late_p999_us = 0;
  double late_max_us = 0;
  double idle_cpu_ms = 0;
  long idle_switches = 0;
};

double median(std::vector<double> values) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  return values[values.size() / 2];
}

double ns_per_op(Clock::duration elapsed, std::size_t ops) {
  return std::chrono::duration<double, std::nano>(elapsed).count() / static_cast<double>(ops);
}

// Delays uniform over [1 h, 2 h) at microsecond resolution: nothing fires while measured.
std::vector<Clock::duration> far_delays(std::size_t n, std::mt19937_64& rng) {
  std::vector<Clock::duration> delays(n);
  for (auto& delay : delays) delay = 1h + std::chrono::microseconds(rng() % 3'600'000'000ULL);
  return delays;
}

// A second producer thread that lives as long as a run, as a service's threads do: a thread
// created per phase would start with a fresh malloc arena every time, and both schedulers'
// figures would mostly measure glibc's arena handling.
class Helper {
 public:
  Helper() : thread_([this] { loop(); }) {}
  ~Helper() {
    run_async({});
    thread_.join();
  }
  Helper(const Helper&) = delete;
  Helper& operator=(const Helper&) = delete;

  // Starts `job` on the helper (an empty job ends it); wait() blocks until it has finished.
  void run_async(std::function<void()> job) {
    std::lock_guard lock(mutex_);
    job_ = std::move(job);
    posted_ = true;
    done_ = false;
    cv_.notify_all();
  }
  void wait() {
    std::unique_lock lock(mutex_);
    cv_.wait(lock, [&] { return done_; });
  }

 private:
  void loop() {
    for (;;) {
      std::function<void()> job;
      {
        std::unique_lock lock(mutex_);
        cv_.wait(lock, [&] { return posted_; });
        posted_ = false;
        job = std::move(job_);
      }
      if (!job) return;
      job();
      std::lock_guard lock(mutex_);
      done_ = true;
      cv_.notify_all();
    }
  }

  std::mutex mutex_;
  std::condition_variable cv_;
  std::function<void()> job_;
  bool posted_ = false;
  bool done_ = false;
  std::thread thread_;
};

// Schedules delays.size() tasks from the calling thread, or from it and the helper (half each),
// and returns the time until every task has reached the scheduler's queue.
template <typename Impl>
Clock::duration schedule_phase(Impl& impl, std::vector<typename Impl::Handle>& handles,
                               const std::vector<Clock::duration>& delays, Helper* helper,
                               std::atomic<long>* sink) {
  const std::size_t n = delays.size();
  const std::size_t threads = helper == nullptr ? 1 : 2;
  std::atomic<bool> go{false};
  std::atomic<bool> ready{false};
  const auto produce = [&](std::size_t t) {
    for (std::size_t i = t * n / threads; i < (t + 1) * n / threads; ++i) {
      handles[i] = impl.schedule([sink] { sink->fetch_add(1); }, delays[i]);
    }
  };
  if (helper != nullptr) {
    helper->run_async([&] {
      ready.store(true);
      while (!go.load(std::memory_order_acquire)) {
      }
      produce(1);
    });
    while (!ready.load()) std::this_thread::yield();
  }
  const auto start = Clock::now();
  go.store(true, std::memory_order_release);
  produce(0);
  if (helper != nullptr) helper->wait();
  const auto pushed = Clock::now();
  impl.flush();
  if (std::getenv("BENCH_DEBUG") != nullptr) {
    std::fprintf(stderr, "  %zu threads: producers %.1f ns/op, flush %.1f ns/op\n", threads,
                 ns_per_op(pushed - start, n), ns_per_op(Clock::now() - pushed, n));
  }
  return Clock::now() - start;
}

// Drops the handles, each on the thread that made it.
template <typename Handle>
void reset(std::vector<Handle>& handles, Helper* helper) {
  const std::size_t half = helper == nullptr ? handles.size() : handles.size() / 2;
  if (helper != nullptr) {
    helper->run_async([&] {
      for (std::size_t i = half; i < handles.size(); ++i) handles[i] = {};
    });
  }
  for (std::size_t i = 0; i < half; ++i) handles[i] = {};
  if (helper != nullptr) helper->wait();
}

template <typename Impl>
Clock::duration cancel_phase(Impl& impl, std::vector<typename Impl::Handle>& handles,
                             const std::vector<std::size_t>& order) {
  const auto start = Clock::now();
  std::size_t won = 0;
  for (std::size_t i : order) won += impl.cancel(handles[i]) ? 1U : 0U;
  const auto pushed = Clock::now();
  impl.flush();
  const auto elapsed = Clock::now() - start;
  if (std::getenv("BENCH_DEBUG") != nullptr) {
    std::fprintf(stderr, "  cancel: caller %.1f ns/op, flush %.1f ns/op\n",
                 ns_per_op(pushed - start, order.size()),
                 ns_per_op(Clock::now() - pushed, order.size()));
  }
  if (won != order.size()) std::fprintf(stderr, "cancel lost %zu times\n", order.size() - won);
  return elapsed;
}

template <typename Impl>
void throughput(Impl& impl, const Config& config, std::size_t pending, Result& result,
                std::mt19937_64& rng) {
  // Each round adds a tenth of `pending` (at least 10^4) and cancels them again.
  const std::size_t batch = std::max<std::size_t>(pending / 10, 10'000);
  std::vector<typename Impl::Handle> handles(batch);
  std::vector<std::size_t> order(batch);
  std::iota(order.begin(), order.end(), 0);
  std::atomic<long> sink{0};
  std::vector<double> schedule1;
  std::vector<double> schedule2;
  std::vector<double> cancel;
  Helper helper;
  for (std::size_t round = 0; round < config.rounds; ++round) {
    for (Helper* second : {static_cast<Helper*>(nullptr), &helper}) {
      const auto delays = far_delays(batch, rng);
      std::shuffle(order.begin(), order.end(), rng);
      const auto scheduled = schedule_phase(impl, handles, delays, second, &sink);
      const auto cancelled = cancel_phase(impl, handles, order);
      if (round > 0) {  // round 0 warms the allocator and the caches up
        (second == nullptr ? schedule1 : schedule2).push_back(ns_per_op(scheduled, batch));
        if (second == nullptr) cancel.push_back(ns_per_op(cancelled, batch));
      }
      reset(handles, second);
    }
  }
  result.schedule1_ns = median(schedule1);
  result.schedule2_ns = median(schedule2);
  result.cancel_ns = median(cancel);
}

// Tasks due over the next two seconds, each recording how late it started.
template <typename Impl>
void lateness(Impl& impl, const Config& config, Result& result, std::mt19937_64& rng) {
  const std::size_t n = config.lateness_tasks;
  std::vector<std::int64_t> late_ns(n, -1);
  std::atomic<std::size_t> ran{0};
  const auto base = Clock::now() + 100ms;
  std::vector<typename Impl::Handle> handles;
  handles.reserve(n);
  for (std::size_t i = 0; i < n; ++i) {
    const auto due = base + std::chrono::microseconds(rng() % 2'000'000);
    handles.push_back(impl.schedule_at(
        [&late_ns, &ran, i, due] {
          late_ns[i] = std::chrono::nanoseconds(Clock::now() - due).count();
          ran.fetch_add(1, std::memory_order_release);
        },
        due));
  }
  const auto limit = Clock::now() + 60s;
  while (ran.load(std::memory_order_acquire) < n && Clock::now() < limit) {
    std::this_thread::sleep_for(10ms);
  }
  if (ran.load() < n) std::fprintf(stderr, "only %zu of %zu tasks ran\n", ran.load(), n);
  std::sort(late_ns.begin(), late_ns.end());
  const auto at = [&](double q) {
    return static_cast<double>(late_ns[static_cast<std::size_t>(q * static_cast<double>(n - 1))]) /
           1000.0;
  };
  result.late_p50_us = at(0.50);
  result.late_p99_us = at(0.99);
  result.late_p999_us = at(0.999);
  result.late_max_us = at(1.0);
  if (late_ns.front() < 0) std::fprintf(stderr, "a task ran early\n");
}

// CPU time and context switches of the whole process over 2 s with nothing due for an hour.
void idle(Result& result) {
  const auto usage = [] {
    rusage u{};
    getrusage(RUSAGE_SELF, &u);
    return u;
  };
  const auto cpu_us = [](const rusage& u) {
    return (u.ru_utime.tv_sec + u.ru_stime.tv_sec) * 1'000'000L + u.ru_utime.tv_usec +
           u.ru_stime.tv_usec;
  };
  std::this_thread::sleep_for(200ms);
  const rusage before = usage();
  std::this_thread::sleep_for(2s);
  const rusage after = usage();
  result.idle_cpu_ms = static_cast<double>(cpu_us(after) - cpu_us(before)) / 1000.0;
  result.idle_switches =
      (after.ru_nvcsw + after.ru_nivcsw) - (before.ru_nvcsw + before.ru_nivcsw) - 1;  // our sleep
}

template <typename Impl>
Result run(Impl& impl, const std::string& name, const Config& config, std::size_t pending) {
  Result result;
  result.impl = name;
  result.pending = pending;
  std::mt19937_64 rng(12345);
  std::atomic<long> sink{0};
  std::vector<typename Impl::Handle> base(pending);
  const auto delays = far_delays(pending, rng);
  for (std::size_t i = 0; i < pending; ++i) {
    base[i] = impl.schedule([&sink] { sink.fetch_add(1); }, delays[i]);
  }
  impl.flush();
  // The flush waits for a task due now to run, which on the 1 s hashed ring means waiting for
  // the next tick: its throughput cannot be told apart from that wait, so it is not measured.
  if (impl.measurable) throughput(impl, config, pending, result, rng);
  if (config.lateness_tasks > 0) lateness(impl, config, result, rng);
  if (config.idle) idle(result);
  return result;
}

Result run_named(const std::string& name, const Config& config, std::size_t pending) {
  if (name == "delayq") {
    Delayq impl(delayq::WheelKind::kHierarchical);
    return run(impl, "delayq (hierarchical, 100 us)", config, pending);
  }
  if (name == "delayq:heap") {
    Delayq impl(delayq::WheelKind::kHeap);
    return run(impl, "delayq (heap, 100 us)", config, pending);
  }
  if (name == "delayq:hashed") {
    Delayq impl(delayq::WheelKind::kHashed);
    return run(impl, "delayq (hashed 3600 x 1 s)", config, pending);
  }
  if (name == "naive") {
    Naive impl(true);
    return run(impl, "naive (heap + mutex, remove on cancel)", config, pending);
  }
  if (name == "naive:mark") {
    Naive impl(false);
    return run(impl, "naive (heap + mutex, mark on cancel)", config, pending);
  }
  std::fprintf(stderr, "unknown implementation %s\n", name.c_str());
  std::exit(2);
}

std::vector<std::string> split(const char* text) {
  std::vector<std::string> parts;
  std::string part;
  for (const char* p = text;; ++p) {
    if (*p == ',' || *p == '\0') {
      if (!part.empty()) parts.push_back(part);
      part.clear();
      if (*p == '\0') break;
    } else {
      part.push_back(*p);
    }
  }
  return parts;
}

Config parse(int argc, char** argv) {
  Config config;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    const char* value = argv[i + 1];
    if (flag == "--pending") {
      config.pending.clear();
      for (const auto& part : split(value)) config.pending.push_back(std::stoull(part));
    } else if (flag == "--impls") {
      config.impls = split(value);
    } else if (flag == "--rounds") {
      config.rounds = std::stoull(value);
    } else if (flag == "--lateness") {
      config.lateness_tasks = std::stoull(value);
    } else if (flag == "--idle") {
      config.idle = std::stoull(value) != 0;
    } else {
      std::fprintf(stderr, "unknown flag %s\n", flag.c_str());
      std::exit(2);
    }
  }
  return config;
}

void print(const std::vector<Result>& results) {
  for (std::size_t pending : {std::size_t{10'000}, std::size_t{1'000'000}}) {
    const Result* naive = nullptr;
    for (const auto& r : results) {
      if (r.pending == pending && r.impl.rfind("naive (heap + mutex, remove", 0) == 0) naive = &r;
    }
    bool any = false;
    for (const auto& r : results) any = any || r.pending == pending;
    if (!any) continue;
    std::printf("\n**%zu pending** (ratio: the naive scheduler's time per op / this one's)\n\n",
                pending);
    std::printf(
        "| scheduler | schedule, 1 thread | schedule, 2 threads | cancel, 1 thread | "
        "lateness p50 / p99 / p99.9 / max | idle 2 s: CPU, switches |\n");
    std::printf("|---|---:|---:|---:|---:|---:|\n");
    for (const auto& r : results) {
      if (r.pending != pending) continue;
      const auto cell = [&](double ns, double naive_ns) {
        char text[96];
        if (ns == 0) {
          std::snprintf(text, sizeof text, "n/a");
        } else if (naive != nullptr) {
          std::snprintf(text, sizeof text, "%.0f ns, %.2f M/s, %.1fx", ns, 1000.0 / ns,
                        naive_ns / ns);
        } else {
          std::snprintf(text, sizeof text, "%.0f ns, %.2f M/s", ns, 1000.0 / ns);
        }
        return std::string(text);
      };
      std::printf("| %s | %s | %s | %s | %.0f / %.0f / %.0f / %.0f us | %.1f ms, %ld |\n",
                  r.impl.c_str(), cell(r.schedule1_ns, naive ? naive->schedule1_ns : 0).c_str(),
                  cell(r.schedule2_ns, naive ? naive->schedule2_ns : 0).c_str(),
                  cell(r.cancel_ns, naive ? naive->cancel_ns : 0).c_str(), r.late_p50_us,
                  r.late_p99_us, r.late_p999_us, r.late_max_us, r.idle_cpu_ms, r.idle_switches);
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  const Config config = parse(argc, argv);
  // Keep freed memory in the process: otherwise glibc hands the top of the heap back to the
  // kernel after every cancel phase and the next schedule phase pays page faults for it again,
  // which is noise in both schedulers' figures, not a property of either.
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
  mallopt(M_MMAP_THRESHOLD, 1 << 30);
  std::vector<Result> results;
  for (std::size_t pending : config.pending) {
    for (const auto& name : config.impls) {
      results.push_back(run_named(name, config, pending));
      const Result& r = results.back();
      std::fprintf(stderr,
                   "%-40s pending %8zu: schedule %6.1f / %6.1f ns, cancel %6.1f ns, late p50 "
                   "%.0f p99 %.0f max %.0f us, idle %.1f ms %ld switches\n",
                   r.impl.c_str(), pending, r.schedule1_ns, r.schedule2_ns, r.cancel_ns,
                   r.late_p50_us, r.late_p99_us, r.late_max_us, r.idle_cpu_ms, r.idle_switches);
    }
  }
  print(results);
  return 0;
}
