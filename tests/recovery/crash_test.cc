// The crash test: runs crash_driver against one data directory, kills it with SIGKILL at random
// moments, and after every kill recovers the directory and checks it against the driver's log.
// Steps are atomic and commit in order, so the directory must hold exactly the jobs of some
// prefix of the steps that includes every acknowledged one: every acknowledged put is there with
// its due time, every acknowledged reschedule holds, every acknowledged delete is gone; steps
// written but not yet acknowledged may be there or not, but only whole and in order. Ids of
// committed puts only ever grow, across restarts.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <sstream>
#include <thread>
#include <vector>

#include "broker/local/recovery.h"
#include "engine/engine.h"
#include "store/rocks_store.h"

namespace delayq {
namespace {

namespace fs = std::filesystem;

using Jobs = std::map<JobId, std::int64_t>;  // id -> due

struct Op {
  std::string kind;
  JobId id = 0;
  std::int64_t due = 0;
};

struct Log {
  std::vector<std::vector<Op>> steps;  // in order
  std::size_t acknowledged = 0;        // steps 0 .. acknowledged-1 were acknowledged
};

pid_t start_driver(const fs::path& dir, const fs::path& log, std::uint64_t seed,
                   std::int64_t window_ms) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    const std::string seed_text = std::to_string(seed);
    const std::string window_text = std::to_string(window_ms);
    ::execl(DELAYQ_CRASH_DRIVER, "crash_driver", dir.c_str(), log.c_str(), seed_text.c_str(),
            window_text.c_str(), static_cast<char*>(nullptr));
    std::_Exit(127);
  }
  return pid;
}

// Reads one run's log. A line cut short by the kill is ignored: its step was never submitted.
Log read_log(const fs::path& path) {
  Log log;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    if (in.eof()) break;  // no newline: torn by the kill
    std::istringstream words(line);
    std::size_t step = 0;
    Op op;
    words >> step >> op.kind;
    if (op.kind == "ack") {
      EXPECT_EQ(step, log.acknowledged) << "acknowledgements out of order";
      log.acknowledged = step + 1;
      continue;
    }
    words >> op.id;
    if (op.kind != "del") words >> op.due;
    if (step >= log.steps.size()) log.steps.resize(step + 1);
    log.steps[step].push_back(op);
  }
  return log;
}

void apply(Jobs& jobs, const std::vector<Op>& step, JobId& last_put) {
  for (const Op& op : step) {
    if (op.kind == "put") {
      EXPECT_GT(op.id, last_put) << "a committed put reused or reordered an id";
      last_put = op.id;
      jobs[op.id] = op.due;
    } else if (op.kind == "due") {
      jobs[op.id] = op.due;
    } else {
      jobs.erase(op.id);
    }
  }
}

// The store's jobs as the recovered engine sees them.
Jobs recovered_jobs(engine::Engine& engine) {
  Jobs jobs;
  for (JobId id = 1; id < engine.stats().next_id; ++id) {
    const auto job = engine.peek(id);
    if (!job.is_ok()) continue;
    EXPECT_EQ(job.value().state, JobState::kDelayed) << "job " << id;
    jobs[id] = job.value().due_unix_ms;
  }
  return jobs;
}

// kills rounds of the driver, with a far tier of window_ms (0: none).
void crash_rounds(int kills, std::int64_t window_ms) {
  const auto seed =
      static_cast<std::uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
  std::cout << "seed " << seed << "\n";
  std::mt19937_64 rng(seed);
  const fs::path root = fs::temp_directory_path() / ("delayq-crash-" + std::to_string(::getpid()));
  fs::remove_all(root);
  fs::create_directories(root);
  const fs::path dir = root / "data";
  const int kKills = kills;
  Jobs model;  // what the directory holds after the last check
  JobId last_put = 0;
  std::size_t acknowledged_total = 0;
  std::size_t unacknowledged_kept = 0;
  std::size_t far_found = 0;  // far jobs seen by the recoveries, all rounds
  for (int round = 0; round < kKills; ++round) {
    const fs::path log_path = root / ("log-" + std::to_string(round));
    const pid_t pid = start_driver(dir, log_path, rng(), window_ms);
    ASSERT_GT(pid, 0);
    std::this_thread::sleep_for(std::chrono::milliseconds(150 + rng() % 400));
    ASSERT_EQ(::kill(pid, SIGKILL), 0);
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    ASSERT_TRUE(WIFSIGNALED(status)) << "round " << round << ": the driver exited by itself, "
                                     << "status " << status;

    const Log log = read_log(log_path);
    auto store = store::RocksStore::open(dir.string());
    ASSERT_TRUE(store.is_ok()) << "round " << round << ": " << store.status().to_string();
    engine::ManualClock clock(0);
    engine::EngineOptions options;
    options.far = store.value().get();  // far jobs are read where they are, not loaded
    engine::Engine engine(clock, options);
    auto recovered = broker::local::recover(*store.value(), engine);
    ASSERT_TRUE(recovered.is_ok()) << recovered.status().to_string();
    const Jobs on_disk = recovered_jobs(engine);
    far_found += engine.far_jobs();

    // Every acknowledged step must be in; then whole unacknowledged steps, in order, or none.
    for (std::size_t s = 0; s < log.acknowledged; ++s) apply(model, log.steps[s], last_put);
    std::size_t extra = 0;
    JobId last_put_candidate = last_put;
    Jobs candidate = model;
    bool matched = candidate == on_disk;
    while (!matched && log.acknowledged + extra < log.steps.size()) {
      apply(candidate, log.steps[log.acknowledged + extra], last_put_candidate);
      ++extra;
      matched = candidate == on_disk;
    }
    ASSERT_TRUE(matched) << "round " << round << ": the directory (" << on_disk.size()
                         << " jobs) matches no prefix of the steps that holds all "
                         << log.acknowledged << " acknowledged ones (" << model.size()
                         << " jobs after them)";
    model = candidate;
    last_put = last_put_candidate;
    ASSERT_GT(engine.stats().next_id, last_put) << "the id high-water mark went back";
    acknowledged_total += log.acknowledged;
    unacknowledged_kept += extra;
  }
  std::cout << kKills << " kills, " << acknowledged_total << " acknowledged steps, "
            << unacknowledged_kept << " written but unacknowledged steps found whole, "
            << model.size() << " jobs at the end, " << far_found << " far jobs recovered\n";
  if (window_ms > 0) {
    EXPECT_GT(far_found, 0U) << "no job was in the far tier at a kill";
  }
  EXPECT_GT(acknowledged_total, 500U);  // the driver got real work done between kills
  fs::remove_all(root);
}

TEST(CrashTest, EveryAcknowledgedChangeSurvivesSigkill) {
  crash_rounds(24, 0);
}

// Jobs due within 5 s and a window of 1 s: most go to the far tier and come back while the
// driver runs, by time or because a delete or reschedule needs them, and kills land among those
// moves.
TEST(CrashTest, EveryAcknowledgedChangeSurvivesSigkillWithJobsCrossingTiers) {
  crash_rounds(12, 1000);
}

}  // namespace
}  // namespace delayq
