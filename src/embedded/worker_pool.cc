// worker_pool.cc — the threads that run due tasks (worker_pool.h).
#include "embedded/worker_pool.h"

#include <cstdio>
#include <utility>
#ifdef __linux__
#include <pthread.h>
#endif

#include "embedded/task_record.h"

namespace delayq::detail {
namespace {

std::size_t default_workers() noexcept {
  const unsigned n = std::thread::hardware_concurrency();
  return n == 0 ? 2 : n;
}

}  // namespace

WorkerPool::WorkerPool(std::size_t workers, const ExceptionHandler& on_exception)
    : on_exception_(on_exception) {
  if (workers == 0) workers = default_workers();
  // A thread the system will not start (too many workers, no memory) makes the constructor
  // throw, with those already started stopped: the destructor does not run for it.
  try {
    threads_.reserve(workers);
    for (std::size_t i = 0; i < workers; ++i) threads_.emplace_back([this] { worker_main(); });
  } catch (...) {
    stop();
    throw;
  }
}

void WorkerPool::hand_over(std::vector<TaskRecord*>& due) {
  if (due.empty()) return;
  const std::size_t n = due.size();
  {
    std::lock_guard lock(mutex_);
    queue_.insert(queue_.end(), due.begin(), due.end());
  }
  due.clear();
  if (n >= threads_.size()) {
    cv_.notify_all();
  } else {
    for (std::size_t i = 0; i < n; ++i) cv_.notify_one();
  }
}

void WorkerPool::stop() {
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
  }
  cv_.notify_all();
  for (auto& thread : threads_) {
    if (thread.joinable()) thread.join();
  }
}

bool WorkerPool::runs_on(std::thread::id thread) const noexcept {
  for (const auto& worker : threads_) {
    if (worker.get_id() == thread) return true;
  }
  return false;
}

void WorkerPool::worker_main() noexcept {
#ifdef __linux__
  pthread_setname_np(pthread_self(), "delayq-worker");
#endif
  for (;;) {
    TaskRecord* record;
    {
      std::unique_lock lock(mutex_);
      cv_.wait(lock, [&] { return !queue_.empty() || stop_; });
      if (queue_.empty()) return;
      record = queue_.front();
      queue_.pop_front();
    }
    run(record);
  }
}

void WorkerPool::run(TaskRecord* record) noexcept {
  const std::uint64_t version = version_of(record->word_.load(std::memory_order_acquire));
  std::uint64_t outcome = kDone;
  try {
    record->run();
  } catch (...) {
    outcome = kFailed;
    report(std::current_exception());
  }
  record->destroy_task();
  finish_task(record, version, outcome);
  release(record);
}

void WorkerPool::report(std::exception_ptr error) noexcept {
  if (on_exception_) {
    try {
      on_exception_(std::move(error));
    } catch (...) {  // documented: swallowed, the worker carries on
    }
    return;
  }
  try {
    std::rethrow_exception(std::move(error));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "delayq::Scheduler: task threw: %s\n", e.what());
  } catch (...) {
    std::fprintf(stderr, "delayq::Scheduler: task threw a non-std exception\n");
  }
}

}  // namespace delayq::detail
