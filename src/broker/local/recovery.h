// recovery.h — rebuilds an engine from a store at start.
// Reads every job record once, in id order, and feeds it to Engine::restore(); then sets the id
// high-water mark, so ids are never reused. Any record that fails its checks stops recovery
// with that record's error: a server must not start on half its jobs. Cost: one sequential scan
// of the job records (bodies are not read). Docs: docs/storage-format.md
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>

#include "base/status.h"
#include "engine/engine.h"
#include "store/store.h"

namespace delayq::broker::local {

struct RecoveryStats {
  std::uint64_t jobs = 0;
  std::chrono::milliseconds took{0};
};

// How far a recovery has come, for its progress reports.
struct RecoveryProgress {
  std::uint64_t jobs = 0;       // job records loaded so far
  std::uint64_t estimated = 0;  // the store's estimate of all of them (may be off either way)
  std::chrono::milliseconds took{0};
  bool done = false;  // the last report: every record is loaded
  // Percent of the estimate loaded, below 100 until done; the rate so far, in jobs per second;
  // and, at that rate, the seconds left (0 when nothing is known yet).
  [[nodiscard]] double percent() const;
  [[nodiscard]] double rate() const;
  [[nodiscard]] double seconds_left() const;
};
using RecoveryReport = std::function<void(const RecoveryProgress&)>;

// `engine` must be new: no jobs, no clients. `report`, if set, is called with the progress about
// every `every` of the scan (checked each 4096 records) and once at the end, on this thread.
Result<RecoveryStats> recover(store::Store& store, engine::Engine& engine,
                              const RecoveryReport& report = {},
                              std::chrono::milliseconds every = std::chrono::milliseconds(100));

}  // namespace delayq::broker::local
