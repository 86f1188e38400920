// committer.h — group commit: engine steps in, durable batches out, on a thread of its own.
// The engine thread submits each step's WriteSet with a callback and goes on with the next step;
// the committer takes everything queued since its last write, writes it as one batch and calls
// the callbacks in submission order once the batch is as durable as the policy asks. Under
// `always` many clients share one fsync; under load the batches grow by themselves.
// A failed write is sticky: it and every later callback get the error (the caller must stop:
// the engine has moved on from state the disk does not hold). Thread-safe.
// Time (the `interval:MS` pacing, the sync times reported) comes from a Committer::Clock:
// steady_clock unless one is injected. On steady_clock the thread sleeps until the next interval
// sync is due. An injected clock moves only when told, so the thread never sleeps on real time:
// whoever moves the clock calls poke(), which returns once the thread has acted on the new time.
// Tests advance a manual clock that way instead of sleeping.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "base/status.h"
#include "store/store.h"

namespace delayq::store {

// How long an acknowledged change may sit outside stable storage.
//   always       each batch is fsynced before its callbacks run: nothing acknowledged is lost,
//                even on power loss. The default.
//   interval:MS  batches are written (so they survive the process being killed) and fsynced at
//                most MS ms apart: a power cut loses up to MS ms of acknowledged changes.
//   none         written, never fsynced by us (the OS flushes when it likes): a power cut may
//                lose anything not yet flushed. For tests and throwaway data.
struct Durability {
  enum class Mode : std::uint8_t { kAlways, kInterval, kNone };
  Mode mode = Mode::kAlways;
  std::chrono::milliseconds interval{0};

  // "always", "none" or "interval:<ms>" with 1 <= ms <= 60000.
  static Result<Durability> parse(std::string_view text);
  [[nodiscard]] std::string to_string() const;
};

struct CommitterStats {
  std::uint64_t steps = 0;    // WriteSets committed (written without error)
  std::uint64_t batches = 0;  // store writes that succeeded
  std::uint64_t syncs = 0;    // fsyncs
};

// What one batch took, for metrics: how many steps it held and, if it was fsynced, how long the
// write and the fsync took together. A sync of writes made through written() holds 0 steps.
struct BatchReport {
  std::size_t steps = 0;
  bool synced = false;
  std::chrono::nanoseconds sync_time{0};
};

class Committer {
 public:
  using Done = std::function<void(const Status&)>;
  using Observer = std::function<void(const BatchReport&)>;
  // A monotonic clock. The committer thread reads it, at times with its lock held, so it must be
  // cheap and must not call back into the committer.
  using Clock = std::function<std::chrono::steady_clock::time_point()>;

  // observer (optional) runs on the committer thread after each successful batch. clock
  // (optional): an injected clock, which moves only when told (see the header comment).
  // Default: steady_clock.
  Committer(Store& store, Durability durability, Observer observer = {}, Clock clock = {});
  // Commits what is queued (and under interval syncs it), then stops the thread.
  ~Committer();
  Committer(const Committer&) = delete;
  Committer& operator=(const Committer&) = delete;

  // Queues one step; done runs on the committer thread (it must be quick and must not call
  // back into the committer). A step shared with the caller is only read here: the caller may
  // read it too until done runs (the local broker serves the bodies it holds from it).
  void submit(std::shared_ptr<const WriteSet> set, Done done);
  void submit(WriteSet set, Done done) {
    submit(std::make_shared<const WriteSet>(std::move(set)), std::move(done));
  }
  // Hands over steps the caller has done with (it shared them for reading), to be freed on the
  // committer's thread at its next round: freeing a batch's writes is work the caller's thread
  // is spared. The thread is woken for them only once they hold kRetiredWake bytes, so an idle
  // committer holds less than that.
  void retire(std::vector<std::shared_ptr<const WriteSet>> sets);
  // Waits until everything submitted before the call is committed; returns the sticky error.
  Status flush();
  // Under interval: the caller has written to the store itself, without a sync (the local
  // broker writes its batches on its own thread, which saves two thread hand-offs a batch); the
  // committer syncs that write with its own within the interval. Call it after each such write.
  // Returns the sticky error (a failed sync: stop). Costs a lock, and a wake-up only when
  // everything was synced before.
  Status written();
  // Wakes the committer thread to read its clock again and act on it (an interval sync that has
  // come due runs), and waits until it has; returns the sticky error. For an injected clock that
  // moved: on steady_clock the thread wakes by itself when a sync is due.
  Status poke();
  [[nodiscard]] CommitterStats stats() const;

 private:
  struct Step {
    std::shared_ptr<const WriteSet> set;
    Done done;
  };
  void run();
  void wait_for_work(std::unique_lock<std::mutex>& lock);
  void commit(std::vector<Step>& steps);
  [[nodiscard]] bool unsynced() const { return unsynced_ || written_ != written_synced_; }
  [[nodiscard]] std::chrono::steady_clock::time_point now() const;

  Store& store_;
  const Durability durability_;
  const Observer observer_;
  const Clock clock_;  // empty: steady_clock
  mutable std::mutex mutex_;
  std::condition_variable wake_;
  std::condition_variable idle_;
  // Steps queued, and the batch being committed (committer thread only): swapped, then cleared,
  // so both keep their capacity and a step costs no allocation of its own.
  std::vector<Step> queue_;
  std::vector<Step> batch_;
  std::vector<std::shared_ptr<const WriteSet>> retired_;  // retire()'s, freed at the next round
  std::size_t retired_bytes_ = 0;                         // their values' bytes
  static constexpr std::size_t kRetiredWake = std::size_t{1} << 20;
  std::uint64_t submitted_ = 0;
  std::uint64_t committed_ = 0;
  std::uint64_t pokes_ = 0;     // poke() calls
  std::uint64_t answered_ = 0;  // pokes seen before a round of the thread that has finished
  bool stopping_ = false;
  bool unsynced_ = false;             // a batch of the committer's own is written, not synced
  std::uint64_t written_ = 0;         // written() calls
  std::uint64_t written_synced_ = 0;  // of them, those made before the last sync began
  Status error_;
  CommitterStats stats_;
  std::chrono::steady_clock::time_point last_sync_;
  std::thread thread_;
};

}  // namespace delayq::store
