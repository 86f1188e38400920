// flow_bench — what a reserve costs the engine under flow control (docs/flow-control.md), in
// one process, no store, no network: a reserve and a release of the job taken, again and
// again, in a tube whose ready jobs are spread over G groups (two each), with no setting, with
// group_concurrency 1, and with fair turns; and a job's put, reserve and delete in a tube with no
// setting. A tube with no setting is the baseline: its cost
// must not change with flow control in the code (built without DELAYQ_FLOW_BENCH_SETTINGS, this
// file measures only that, so that it also builds against the engine from before flow control).
// Results and the commands: docs/BENCHMARKS.md ("Flow control").
#include <benchmark/benchmark.h>

#include <string>

#include "engine/clock.h"
#include "engine/engine.h"

namespace {

using namespace delayq;
using namespace delayq::engine;

enum class Setting : int { kNone = 0, kConcurrency = 1, kFair = 2 };

void reserve_release(benchmark::State& state) {
  const auto groups = static_cast<std::size_t>(state.range(0));
  const auto setting = static_cast<Setting>(state.range(1));
  ManualClock clock;
  Engine engine(clock);
#ifdef DELAYQ_FLOW_BENCH_SETTINGS
  FlowSettings flow;
  flow.group_concurrency = setting == Setting::kConcurrency ? 1 : 0;
  flow.fair = setting == Setting::kFair;
  if (flow.any() && !engine.set_flow("t", flow).is_ok()) state.SkipWithError("set_flow");
#else
  if (setting != Setting::kNone) state.SkipWithError("built without flow control");
#endif
  const ClientId producer = engine.connect();
  const ClientId worker = engine.connect();
  std::vector<std::string> names;
  for (std::size_t g = 0; g < groups; ++g) names.push_back("g" + std::to_string(g));
  for (int round = 0; round < 2; ++round) {
    for (const std::string& name : names) {
      PutRequest put;
      put.tube = "t";
      put.body = "x";
      put.group = name;
      if (!engine.put(producer, put).is_ok()) state.SkipWithError("put");
    }
  }
  (void)engine.take_mutations();
  const std::vector<std::string> tubes = {"t"};
  for (auto _ : state) {
    auto got = engine.reserve_from(worker, tubes, Millis{0});
    if (!got.is_ok() || got.value().kind != ReserveResult::Kind::kReserved) {
      state.SkipWithError("no job");
      break;
    }
    if (!engine.release(worker, got.value().job.id, 0, Millis{0}).is_ok()) {
      state.SkipWithError("release");
      break;
    }
    benchmark::DoNotOptimize(engine.take_mutations());
  }
  state.SetItemsProcessed(state.iterations());
}

// A job's whole life on a tube with no setting, ready at once: put, reserve, delete.
void put_reserve_delete(benchmark::State& state) {
  ManualClock clock;
  Engine engine(clock);
  const ClientId producer = engine.connect();
  const ClientId worker = engine.connect();
  const std::vector<std::string> tubes = {"t"};
  PutRequest put;
  put.tube = "t";
  put.body = "x";
  put.group = "g";
  for (auto _ : state) {
    auto made = engine.put(producer, put);
    auto got = engine.reserve_from(worker, tubes, Millis{0});
    if (!made.is_ok() || !got.is_ok() || got.value().kind != ReserveResult::Kind::kReserved ||
        !engine.erase(worker, got.value().job.id).is_ok()) {
      state.SkipWithError("put, reserve or delete failed");
      break;
    }
    benchmark::DoNotOptimize(engine.take_mutations());
  }
  state.SetItemsProcessed(state.iterations());
}

BENCHMARK(put_reserve_delete)->Unit(benchmark::kNanosecond);

BENCHMARK(reserve_release)
    ->ArgNames({"groups", "setting"})
    ->ArgsProduct({{10, 1'000, 100'000}, {0, 1, 2}})
    ->Unit(benchmark::kNanosecond);

}  // namespace

BENCHMARK_MAIN();
