// recovery.h — rebuilds an engine from a store at start.
// Reads every job record once, in id order, and feeds it to Engine::restore(); then sets the id
// high-water mark, so ids are never reused. Any record that fails its checks stops recovery
// with that record's error: a server must not start on half its jobs. Cost: one sequential scan
// of the job records (bodies are not read). Docs: docs/storage-format.md
#pragma once

#include <chrono>
#include <cstdint>

#include "base/status.h"
#include "engine/engine.h"
#include "store/store.h"

namespace delayq::local {

struct RecoveryStats {
  std::uint64_t jobs = 0;
  std::chrono::milliseconds took{0};
};

// `engine` must be new: no jobs, no clients.
Result<RecoveryStats> recover(store::Store& store, engine::Engine& engine);

}  // namespace delayq::local
