// crash_driver — a process for the crash test to kill. It recovers the store in DIR, then applies
// steps of random puts (delayed far enough that they stay delayed), deletes and reschedules
// through the engine and the committer under `always`. Before submitting a step it appends the
// step's operations to LOG, and once the step is durable an acknowledgement:
//   <step> put <id> <due_unix_ms> | <step> del <id> | <step> due <id> <due_unix_ms> | <step> ack
// It runs until killed. Usage: crash_driver DIR LOG SEED [WINDOW_MS]
// With WINDOW_MS, the engine has a far tier of that window, and the jobs are due within seconds:
// they go to disk and come back (by time, or when deleted or rescheduled) while the driver runs.
#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "broker/local/recovery.h"
#include "engine/engine.h"
#include "store/committer.h"
#include "store/rocks_store.h"

using namespace delayq;

int main(int argc, char** argv) {
  if (argc != 4 && argc != 5) {
    std::fprintf(stderr, "usage: crash_driver DIR LOG SEED [WINDOW_MS]\n");
    return 2;
  }
  const std::int64_t window_ms = argc == 5 ? std::strtoll(argv[4], nullptr, 10) : 0;
  auto store = store::RocksStore::open(argv[1]);
  if (!store.is_ok()) {
    std::fprintf(stderr, "crash_driver: %s\n", store.status().to_string().c_str());
    return 1;
  }
  engine::SystemClock clock;
  engine::EngineOptions options;
  options.far = store.value().get();
  if (window_ms > 0) options.window = engine::Millis{window_ms};
  engine::Engine engine(clock, options);
  if (auto recovered = broker::local::recover(*store.value(), engine); !recovered.is_ok()) {
    std::fprintf(stderr, "crash_driver: %s\n", recovered.status().to_string().c_str());
    return 1;
  }
  const int log = ::open(argv[2], O_WRONLY | O_CREAT | O_APPEND, 0644);
  if (log < 0) return 1;
  store::Committer committer(*store.value(), store::Durability{});
  std::mt19937_64 rng(std::strtoull(argv[3], nullptr, 10));
  const engine::ClientId client = engine.connect();
  std::vector<JobId> live;  // jobs this run has put or found, deletable
  for (JobId id = 1; id < engine.stats().next_id; ++id) {
    if (engine.peek(id).is_ok()) live.push_back(id);
  }
  std::atomic<int> in_flight{0};
  std::atomic<std::uint64_t> settled{0};  // the engine's epoch committed, for Engine::settle()
  for (std::uint64_t step = 0;; ++step) {
    while (in_flight.load() > 8) std::this_thread::yield();
    engine.settle(settled.load());
    engine.advance();  // the far tier's loader; due jobs become ready (nothing is written)
    const std::string tag = std::to_string(step) + " ";
    std::string intents;  // the step's operations, as log lines
    const auto ops = 1 + rng() % 32;
    for (std::uint64_t i = 0; i < ops; ++i) {
      const auto dice = rng() % 10;
      const std::int64_t due =
          window_ms > 0 ? engine.now() + 100 + static_cast<std::int64_t>(rng() % 5'000)
                        : engine.now() + 3'600'000 + static_cast<std::int64_t>(rng() % 86'400'000);
      if (dice < 6 || live.empty()) {
        engine::PutRequest request;
        request.due = Due::at(due);
        request.priority = static_cast<std::uint32_t>(rng() % 2000);
        const std::string body(rng() % 300, 'x');
        request.body = body;
        const std::string key = "k" + std::to_string(rng());
        if (rng() % 4 == 0) request.key = key;
        auto put = engine.put(client, request);
        if (!put.is_ok()) return 1;
        live.push_back(put.value().id);
        intents += tag + "put " + std::to_string(put.value().id) + " " + std::to_string(due) + "\n";
      } else {
        const std::size_t pick = rng() % live.size();
        const JobId id = live[pick];
        if (dice < 8) {
          if (!engine.erase(client, id).is_ok()) return 1;
          live[pick] = live.back();
          live.pop_back();
          intents += tag + "del " + std::to_string(id) + "\n";
        } else {
          if (!engine.reschedule(id, Due::at(due)).is_ok()) return 1;
          intents += tag + "due " + std::to_string(id) + " " + std::to_string(due) + "\n";
        }
      }
    }
    if (::write(log, intents.data(), intents.size()) != static_cast<ssize_t>(intents.size()))
      return 1;
    ++in_flight;
    store::WriteSet set = engine.take_mutations();
    committer.submit(std::move(set), [&in_flight, &settled, epoch = engine.epoch(), log,
                                      ack = tag + "ack\n"](const Status& status) {
      if (!status.is_ok()) std::abort();
      if (::write(log, ack.data(), ack.size()) != static_cast<ssize_t>(ack.size())) std::abort();
      settled.store(epoch);
      --in_flight;
    });
  }
}
