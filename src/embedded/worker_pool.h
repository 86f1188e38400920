// worker_pool.h — the threads that run due tasks. The timer thread hands them records already
// moved to running (hand_over()); a worker runs the callable, destroys it, publishes kDone or
// kFailed and drops the reference that came with the record. A task that throws goes to the
// exception handler on the worker, which carries on. Tasks run in the order handed over, one
// per free worker, so a slow task delays only those queued behind it once every worker is busy,
// never the timer thread. hand_over() takes one mutex per batch; stop() and the destructor
// join the threads once the queue is empty. Thread-safe.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "delayq/scheduler.h"

namespace delayq::detail {

class WorkerPool {
 public:
  using ExceptionHandler = std::function<void(std::exception_ptr)>;

  // Starts `workers` threads (0: hardware_concurrency(), or 2 where that is unknown).
  // `on_exception` (empty: print to stderr) must outlive the pool. Throws std::system_error when
  // a thread cannot be started, with those already started stopped.
  WorkerPool(std::size_t workers, const ExceptionHandler& on_exception);
  ~WorkerPool() { stop(); }
  WorkerPool(const WorkerPool&) = delete;
  WorkerPool& operator=(const WorkerPool&) = delete;

  // Queues every record of `due` (each moved to running, with a reference for the worker) in
  // order, wakes as many workers, and clears `due`.
  void hand_over(std::vector<TaskRecord*>& due);
  // Lets the workers finish what is queued, then joins them. Later calls return at once.
  void stop();
  [[nodiscard]] std::size_t size() const noexcept { return threads_.size(); }
  // Whether the calling thread is one of the workers.
  [[nodiscard]] bool runs_on(std::thread::id thread) const noexcept;

 private:
  void worker_main() noexcept;
  void run(TaskRecord* record) noexcept;
  void report(std::exception_ptr error) noexcept;

  const ExceptionHandler& on_exception_;
  std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<TaskRecord*> queue_;
  bool stop_ = false;
  std::vector<std::thread> threads_;
};

}  // namespace delayq::detail
