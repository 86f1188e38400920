// engine_bench — the engine and the RocksDB store in one process, no network: how fast steps of
// puts, reserve+deletes and reschedules commit under a durability policy, how much RAM a pending
// delayed job costs, and how long a restart takes. Steps are handed to the committer as a server
// would (up to `--in-flight` unacknowledged steps), and a phase ends when all are durable.
//
//   engine_bench [--jobs N] [--batch B] [--durability always|none|interval:MS] [--dir DIR]
//                [--ops N] [--in-flight K] [--reopen] [--write-buffer-mb M] [--block-cache-mb M]
//                [--window MS] [--near N] [--resume] [--seed S]
// Defaults: 1000000 jobs of 100-byte bodies, batches of 256, always, ./build/engine-bench-data,
// 200000 operations for the reserve+delete and reschedule phases, 4 steps in flight, and
// RocksStoreOptions' defaults for RocksDB's memory, and no far tier (--window MS: jobs due more
// than MS ahead are kept on disk only, as delayqd's --window). --near N adds N puts due within
// the hour (1 to 59 minutes), which stay in memory whatever the window, before the reschedules.
// --reopen only times the restart of the jobs a previous run left in DIR. --resume recovers
// them and runs the reschedule phases only (--jobs as in that run): a store of 10^8 jobs is put
// once and then measured as often as wanted (give each run its own --seed, the random jobs'
// sequence, default 1: the jobs a run moved are the store's freshest writes).
// Prints one Markdown table row per phase (docs/BENCHMARKS.md).
#include <malloc.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <mutex>
#include <random>
#include <string>

#include "broker/local/recovery.h"
#include "engine/engine.h"
#include "store/committer.h"
#include "store/rocks_store.h"

namespace {

using namespace delayq;
using Clock = std::chrono::steady_clock;

struct Options {
  std::uint64_t jobs = 1'000'000;
  std::uint64_t batch = 256;
  std::uint64_t ops = 200'000;
  int in_flight = 4;
  std::string durability = "always";
  std::string dir = "build/engine-bench-data";
  bool reopen = false;
  bool resume = false;
  std::int64_t window_ms = 0;
  std::uint64_t near = 0;
  std::uint64_t seed = 1;
  store::RocksStoreOptions store;
};

[[noreturn]] void usage() {
  std::fprintf(stderr,
               "usage: engine_bench [--jobs N] [--batch B] [--durability D] [--dir DIR] "
               "[--ops N] [--in-flight K] [--reopen] [--write-buffer-mb M] "
               "[--block-cache-mb M] [--window MS] [--near N] [--resume] [--seed S]\n");
  std::exit(2);
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (flag == "--reopen") {
      o.reopen = true;
      continue;
    }
    if (flag == "--resume") {
      o.resume = true;
      continue;
    }
    if (i + 1 >= argc) usage();
    const std::string value = argv[++i];
    if (flag == "--jobs") {
      o.jobs = std::stoull(value);
    } else if (flag == "--batch") {
      o.batch = std::stoull(value);
    } else if (flag == "--ops") {
      o.ops = std::stoull(value);
    } else if (flag == "--in-flight") {
      o.in_flight = std::stoi(value);
    } else if (flag == "--durability") {
      o.durability = value;
    } else if (flag == "--dir") {
      o.dir = value;
    } else if (flag == "--write-buffer-mb") {
      o.store.write_buffer_bytes = std::stoull(value) << 20;
    } else if (flag == "--block-cache-mb") {
      o.store.block_cache_bytes = std::stoull(value) << 20;
    } else if (flag == "--window") {
      o.window_ms = std::stoll(value);
    } else if (flag == "--near") {
      o.near = std::stoull(value);
    } else if (flag == "--seed") {
      o.seed = std::stoull(value);
    } else {
      usage();
    }
  }
  if (o.batch == 0 || o.in_flight < 1) usage();
  return o;
}

// Resident set size in bytes, after giving freed heap back to the system.
std::size_t resident_bytes() {
  malloc_trim(0);
  std::ifstream statm("/proc/self/statm");
  std::size_t pages = 0;
  std::size_t resident = 0;
  statm >> pages >> resident;
  return resident * static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
}

void check(const Status& status, const char* what) {
  if (!status.is_ok()) {
    std::fprintf(stderr, "engine_bench: %s: %s\n", what, status.to_string().c_str());
    std::exit(1);
  }
}

// Feeds engine steps to the committer the way a server does: at most `limit` steps unanswered,
// and while at the limit it sleeps (as a server sits in epoll), leaving the cores to RocksDB.
class Pipeline {
 public:
  Pipeline(store::Committer& committer, int limit) : committer_(committer), limit_(limit) {}
  void submit(engine::Engine& engine) {
    {
      std::unique_lock lock(mutex_);
      answered_.wait(lock, [&] { return in_flight_ < limit_; });
      ++in_flight_;
    }
    engine.settle(settled_.load());  // as the server's node does once a batch is committed
    engine.advance();  // a turn of the server: the far tier's loader keeps its horizon ahead
    store::WriteSet set = engine.take_mutations();
    committer_.submit(std::move(set), [this, epoch = engine.epoch()](const Status& status) {
      check(status, "commit");
      std::lock_guard lock(mutex_);
      settled_.store(epoch);
      --in_flight_;
      answered_.notify_one();
    });
  }
  void drain(engine::Engine& engine) {
    check(committer_.flush(), "flush");
    engine.settle(settled_.load());
  }

 private:
  store::Committer& committer_;
  const int limit_;
  std::mutex mutex_;
  std::condition_variable answered_;
  int in_flight_ = 0;
  std::atomic<std::uint64_t> settled_{0};
};

void row(const Options& o, const char* phase, std::uint64_t ops, double seconds,
         const std::string& note = {}) {
  std::printf("| %s | %s | %llu | %.0f | %.2f | %s |\n", phase, o.durability.c_str(),
              static_cast<unsigned long long>(ops), static_cast<double>(ops) / seconds,
              seconds * 1e9 / static_cast<double>(ops) / 1000.0, note.c_str());
  std::fflush(stdout);
}

double since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// Opens the directory again and recovers every pending job; returns how many.
engine::EngineOptions engine_options(const Options& o, store::Store& store) {
  engine::EngineOptions options;
  options.far = &store;
  if (o.window_ms > 0) options.window = engine::Millis{o.window_ms};
  return options;
}

// Opens the directory again and recovers every pending job, then runs the first turn (the far
// tier's first load); returns how many jobs there are.
std::size_t restart(const Options& o, engine::Clock& clock) {
  const auto start = Clock::now();
  auto reopened = store::RocksStore::open(o.dir, o.store);
  check(reopened.status(), "reopen");
  engine::Engine recovered(clock, engine_options(o, *reopened.value()));
  const auto result = broker::local::recover(*reopened.value(), recovered);
  check(result.status(), "recover");
  const double seconds = since(start);
  recovered.advance();
  const double first_turn = since(start);
  std::printf(
      "restart: %zu pending jobs (%zu far) back in %.2f s, first turn done at %.2f s, engine "
      "%zu B/job in memory\n",
      recovered.jobs(), recovered.far_jobs(), seconds, first_turn,
      recovered.memory_bytes() / std::max<std::size_t>(1, recovered.jobs() - recovered.far_jobs()));
  check(recovered.far_error(), "far read");
  return recovered.jobs();
}

}  // namespace

int main(int argc, char** argv) {
  const Options o = parse(argc, argv);
  auto durability = store::Durability::parse(o.durability);
  check(durability.status(), "durability");
  engine::SystemClock clock;
  if (o.reopen) {
    restart(o, clock);
    return 0;
  }
  if (!o.resume) std::filesystem::remove_all(o.dir);

  std::printf("| phase | durability | operations | per second | us each | notes |\n");
  std::printf("|---|---|---:|---:|---:|---|\n");
  const std::size_t rss_start = resident_bytes();
  auto opened = store::RocksStore::open(o.dir, o.store);
  check(opened.status(), "open");
  auto store = std::move(opened).value();
  auto engine = std::make_unique<engine::Engine>(clock, engine_options(o, *store));
  if (o.resume) check(broker::local::recover(*store, *engine).status(), "recover");
  engine->advance();  // the far tier's first pass sets its horizon
  const engine::ClientId client = engine->connect();
  std::mt19937_64 rng(o.seed);
  // Bodies of random letters, each its own: repeated bytes would flatter the table compression.
  std::string body(100, 'b');
  const auto refill = [&body, &rng] {
    for (std::size_t i = 0; i < body.size(); i += 8) {
      std::uint64_t bits = rng();
      for (std::size_t j = i; j < std::min(i + 8, body.size()); ++j, bits >>= 8) {
        body[j] = static_cast<char>('a' + (bits & 0xFFU) % 26);
      }
    }
  };
  {
    store::Committer committer(*store, durability.value());
    Pipeline pipeline(committer, o.in_flight);

    // Runs `step` `count` times, a batch of them to each step handed to the committer, until all
    // are durable; returns the seconds it took.
    const auto run = [&](std::uint64_t count, const auto& step) {
      const auto start = Clock::now();
      for (std::uint64_t i = 0; i < count; ++i) {
        step();
        if ((i + 1) % o.batch == 0) pipeline.submit(*engine);
      }
      pipeline.submit(*engine);
      pipeline.drain(*engine);
      return since(start);
    };
    // A due time `base` to `base + spread` ms from now.
    const auto due_in = [&](std::int64_t base, std::int64_t spread) {
      return base + static_cast<std::int64_t>(rng() % static_cast<std::uint64_t>(spread));
    };
    engine::PutRequest put;
    put.body = body;
    put.priority = 1024;
    const auto put_delayed = [&](std::int64_t base, std::int64_t spread) {
      put.due = Due::after(engine::Millis{due_in(base, spread)});
      refill();
      check(engine->put(client, put).status(), "put");
    };

    // Puts: delayed 1 h to 49 h, so they all stay pending.
    if (!o.resume) {
      const double put_seconds = run(o.jobs, [&] { put_delayed(3'600'000, 172'800'000); });
      const std::size_t rss = resident_bytes();
      const std::size_t engine_bytes = engine->memory_bytes();
      row(o, "put (delayed, 100-byte body)", o.jobs, put_seconds,
          "RSS " + std::to_string((rss - rss_start) / o.jobs) + " B/job, engine " +
              std::to_string(engine_bytes / o.jobs) + " B/job, " +
              std::to_string(engine->far_jobs()) + " far");
    }

    // Puts due within the hour: in memory whatever the window.
    if (o.near > 0 && !o.resume) {
      row(o, "put (due in 1 to 59 min)", o.near,
          run(o.near, [&] { put_delayed(60'000, 3'480'000); }));
    }

    // Reschedules of random jobs of the first puts by id: to a due time 1 h ahead (with a
    // window of an hour, into memory), then to one 2 h to 50 h ahead (where they were: far to
    // far for the jobs left in the far tier).
    const auto reschedule = [&](std::int64_t base, std::int64_t spread) {
      const JobId id = 1 + rng() % o.jobs;
      check(engine->reschedule(id, Due::at(engine->now() + due_in(base, spread))), "reschedule");
    };
    row(o, "reschedule (to 1 h ahead)", o.ops, run(o.ops, [&] { reschedule(3'600'000, 1'000); }));
    row(o, "reschedule (to 2 h to 50 h ahead)", o.ops,
        run(o.ops, [&] { reschedule(7'200'000, 172'800'000); }));
    if (o.resume) return 0;

    // Reserve + delete: a second tube of ready jobs, then take and finish them in batches.
    check(engine->use(client, "work"), "use");
    check(engine->watch(client, "work").status(), "watch");
    check(engine->ignore(client, "default").status(), "ignore");
    put.due = Due::after(engine::Millis{0});
    run(o.ops, [&] { check(engine->put(client, put).status(), "put"); });
    row(o, "reserve + delete", o.ops, run(o.ops, [&] {
          const auto got = engine->reserve(client, engine::Millis{0});
          if (got.kind != engine::ReserveResult::Kind::kReserved) {
            check({Code::kNotFound, "empty"}, "reserve");
          }
          check(engine->erase(client, got.job.id), "delete");
        }));
    const auto stats = committer.stats();
    std::printf("\ncommitter: %llu steps in %llu batches, %llu fsyncs\n",
                static_cast<unsigned long long>(stats.steps),
                static_cast<unsigned long long>(stats.batches),
                static_cast<unsigned long long>(stats.syncs));
  }

  // Restart: close everything, open the directory again and recover every pending job.
  const std::uint64_t pending = engine->jobs();
  engine.reset();
  store.reset();
  const std::size_t recovered = restart(o, clock);
  if (recovered != pending) {
    std::fprintf(stderr, "engine_bench: recovered %zu of %llu jobs\n", recovered,
                 static_cast<unsigned long long>(pending));
    return 1;
  }
  return 0;
}
