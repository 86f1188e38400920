// planner_test.cc — the rules that move a schedule on: runs put ahead and on time, misfires after
// downtime by each rule, overlaps, limits and span, jitter, trigger and backfill; then a random
// walk (printed seed) checking that every instant is settled exactly once, as a run, a misfire
// or an overlap, and that no run's key is ever put twice. The stored record reads back exactly.
#include "schedule/planner.h"

#include <gtest/gtest.h>

#include <map>
#include <random>
#include <set>

#include "schedule/codec.h"

namespace delayq::schedule {
namespace {

// gtest's Test::Run hides the planner's Run inside test bodies.
using PlannedRun = schedule::Run;

constexpr std::int64_t kT0 = 1'800'000'000'000;  // 2027-01-15T08:00:00Z, a whole minute

Compiled compiled(Definition d, std::int64_t now = kT0) {
  if (d.name.empty()) d.name = "s";
  if (d.tube.empty()) d.tube = "t";
  auto c = compile(std::move(d), now, 200);
  EXPECT_TRUE(c.is_ok()) << c.status().message();
  return std::move(c).value();
}

Definition every(std::chrono::milliseconds interval) {
  Definition d;
  d.every = interval;
  return d;
}

// A broker reduced to what the planner asks of it: the keys of the jobs that exist.
struct Jobs {
  std::set<std::string> keys;
  std::int64_t drawn = 0;  // what draw() answers
  std::vector<std::string> withdrawn;
  Environment environment() {
    return {[this](std::string_view key) { return keys.contains(std::string(key)); },
            [this](std::int64_t bound) { return std::min(drawn, bound); },
            [this](std::string_view key) {
              withdrawn.emplace_back(key);
              keys.erase(std::string(key));
              return true;
            }};
  }
  void add(const Compiled& s, const Step& step) {
    for (const PlannedRun& run : step.put)
      keys.insert(run_key(s.definition.name, run.instant_unix_ms));
  }
};

TEST(Planner, AllowPutsTheNextRunAheadDueAtItsInstant) {
  const Compiled s = compiled(every(std::chrono::seconds(10)));
  State state = start(s, kT0);
  Jobs jobs;
  Step first = step(s, state, kT0, jobs.environment());
  EXPECT_EQ(first.put, (std::vector<PlannedRun>{{kT0 + 10'000, kT0 + 10'000}}));
  EXPECT_EQ(first.wake_unix_ms, kT0 + 10'000);
  EXPECT_EQ(state.ahead_unix_ms, kT0 + 10'000);
  EXPECT_EQ(next_run(s, state, kT0), kT0 + 10'000);
  // Nothing more until that instant; then the one after it.
  EXPECT_TRUE(step(s, state, kT0 + 9'999, jobs.environment()).put.empty());
  Step second = step(s, state, kT0 + 10'001, jobs.environment());
  EXPECT_EQ(second.put, (std::vector<PlannedRun>{{kT0 + 20'000, kT0 + 20'000}}));
  EXPECT_EQ(state.last_run_unix_ms, kT0 + 10'000);
  EXPECT_EQ(state.runs, 2U);
  EXPECT_EQ(state.misfires, 0U);
}

TEST(Planner, JitterMovesTheDueTimeNotTheInstant) {
  Definition d = every(std::chrono::minutes(1));
  d.jitter = std::chrono::seconds(5);
  const Compiled s = compiled(d);
  State state = start(s, kT0);
  Jobs jobs;
  jobs.drawn = 99'999;  // more than the jitter: held to it
  const Step out = step(s, state, kT0 + 60'000 - kLead.count(), jobs.environment());
  EXPECT_EQ(out.put, (std::vector<PlannedRun>{{kT0 + 60'000, kT0 + 65'000}}));
}

// The server was down from just after kT0 until `now`: runs every 10 s were missed.
struct Downtime : ::testing::Test {
  Compiled s;
  State state;
  Jobs jobs;
  Step after(Definition d, std::int64_t now) {
    d.overlap = Overlap::kSkip;  // no run put ahead: the instants are truly missed
    s = compiled(std::move(d));
    state = start(s, kT0);
    EXPECT_TRUE(step(s, state, kT0, jobs.environment()).put.empty());
    return step(s, state, now, jobs.environment());
  }
};

TEST_F(Downtime, SkipRunsNothingAndCountsEveryMissedInstant) {
  Definition d = every(std::chrono::seconds(10));
  d.misfire = Misfire::kSkip;
  const Step out = after(d, kT0 + 95'000);
  EXPECT_TRUE(out.put.empty());
  EXPECT_EQ(state.misfires, 9U);
  EXPECT_EQ(out.wake_unix_ms, kT0 + 100'000);
}

TEST_F(Downtime, OnceRunsTheLatestMissedInstantNow) {
  const Step out = after(every(std::chrono::seconds(10)), kT0 + 95'000);
  EXPECT_EQ(out.put, (std::vector<PlannedRun>{{kT0 + 90'000, kT0 + 95'000}}));
  EXPECT_EQ(state.misfires, 8U);
  EXPECT_EQ(state.runs, 1U);
}

TEST_F(Downtime, OnceRunsNothingWhenTheLatestIsPastMaxLateness) {
  Definition d = every(std::chrono::seconds(10));
  d.max_lateness = std::chrono::seconds(3);
  const Step out = after(d, kT0 + 95'000);
  EXPECT_TRUE(out.put.empty());
  EXPECT_EQ(state.misfires, 9U);
}

TEST_F(Downtime, AllRunsEachMissedInstantWithinMaxLateness) {
  Definition d = every(std::chrono::seconds(10));
  d.misfire = Misfire::kAll;
  d.max_lateness = std::chrono::seconds(40);
  d.overlap = Overlap::kSkip;
  const Step out = after(d, kT0 + 95'000);
  // 60, 70, 80 and 90 s are within 40 s of 95 s; the first of them runs, the others overlap it.
  EXPECT_EQ(out.put, (std::vector<PlannedRun>{{kT0 + 60'000, kT0 + 95'000}}));
  EXPECT_EQ(state.misfires, 5U);
  EXPECT_EQ(state.overlaps, 3U);
}

TEST(Planner, AllWithAllowRunsEveryMissedInstantUpToTheCap) {
  Definition d = every(std::chrono::seconds(1));
  d.misfire = Misfire::kAll;
  d.max_lateness = std::chrono::hours(2);
  const Compiled s = compiled(d);
  State state = start(s, kT0);
  state.cursor_unix_ms = kT0;  // as if nothing was put ahead
  Jobs jobs;
  const Step out = step(s, state, kT0 + 3'600'500, jobs.environment());
  // 3,599 instants missed: the latest 1,000 run now; 3,600 s is on time; 3,601 s is put ahead.
  ASSERT_EQ(out.put.size(), kMaxCatchUpRuns + 2);
  EXPECT_EQ(out.put.front().instant_unix_ms, kT0 + 2'600'000);
  EXPECT_EQ(out.put[kMaxCatchUpRuns - 1].instant_unix_ms, kT0 + 3'599'000);
  EXPECT_EQ(out.put[kMaxCatchUpRuns].instant_unix_ms, kT0 + 3'600'000);
  EXPECT_EQ(out.put.back().instant_unix_ms, kT0 + 3'601'000);
  EXPECT_EQ(state.misfires, 2'599U);
  EXPECT_EQ(state.runs, kMaxCatchUpRuns + 2);
}

TEST(Planner, ARunPutAheadSurvivesAShortRestart) {
  const Compiled s = compiled(every(std::chrono::seconds(10)));
  State state = start(s, kT0);
  Jobs jobs;
  (void)step(s, state, kT0, jobs.environment());
  // Down from kT0 to 10.5 s: the run of 10 s, on disk, is reached on time and fires.
  const Step out = step(s, state, kT0 + 10'500, jobs.environment());
  EXPECT_EQ(out.put, (std::vector<PlannedRun>{{kT0 + 20'000, kT0 + 20'000}}));
  EXPECT_TRUE(jobs.withdrawn.empty());
  EXPECT_EQ(state.last_run_unix_ms, kT0 + 10'000);
  EXPECT_EQ(state.runs, 2U);
}

TEST(Planner, ARunPutAheadAndMissedIsSettledByTheMisfireRule) {
  const Compiled s = compiled(every(std::chrono::seconds(10)));
  State state = start(s, kT0);
  Jobs jobs;
  (void)step(s, state, kT0, jobs.environment());
  // Down from kT0 to 25 s: the run of 10 s is withdrawn; 10 and 20 s were missed, and once runs
  // the latest of them now.
  const Step out = step(s, state, kT0 + 25'000, jobs.environment());
  EXPECT_EQ(jobs.withdrawn, std::vector<std::string>{run_key("s", kT0 + 10'000)});
  EXPECT_EQ(out.put,
            (std::vector<PlannedRun>{{kT0 + 20'000, kT0 + 25'000}, {kT0 + 30'000, kT0 + 30'000}}));
  EXPECT_EQ(state.misfires, 1U);
  EXPECT_EQ(state.runs, 2U);
}

TEST(Planner, OverlapSkipRunsOnlyOnceThePreviousJobIsGone) {
  Definition d = every(std::chrono::seconds(10));
  d.overlap = Overlap::kSkip;
  const Compiled s = compiled(d);
  State state = start(s, kT0);
  Jobs jobs;
  EXPECT_EQ(step(s, state, kT0, jobs.environment()).wake_unix_ms, kT0 + 10'000);
  Step out = step(s, state, kT0 + 10'002, jobs.environment());
  EXPECT_EQ(out.put, (std::vector<PlannedRun>{{kT0 + 10'000, kT0 + 10'000}}));
  jobs.add(s, out);
  EXPECT_TRUE(step(s, state, kT0 + 20'001, jobs.environment()).put.empty());  // still there
  EXPECT_EQ(state.overlaps, 1U);
  jobs.keys.clear();  // a worker deleted it
  out = step(s, state, kT0 + 30'000, jobs.environment());
  EXPECT_EQ(out.put, (std::vector<PlannedRun>{{kT0 + 30'000, kT0 + 30'000}}));
}

TEST(Planner, BufferOneKeepsOneRunWaitingBehindThePrevious) {
  Definition d = every(std::chrono::seconds(10));
  d.overlap = Overlap::kBufferOne;
  const Compiled s = compiled(d);
  State state = start(s, kT0);
  Jobs jobs;
  (void)step(s, state, kT0, jobs.environment());
  jobs.add(s, step(s, state, kT0 + 10'000, jobs.environment()));
  Step out = step(s, state, kT0 + 20'000, jobs.environment());
  EXPECT_TRUE(out.put.empty());
  EXPECT_EQ(state.buffered_unix_ms, kT0 + 20'000);
  EXPECT_EQ(out.wake_unix_ms, kT0 + 20'000 + kBufferPoll.count());
  out = step(s, state, kT0 + 30'000, jobs.environment());  // a second one is skipped
  EXPECT_TRUE(out.put.empty());
  EXPECT_EQ(state.overlaps, 1U);
  jobs.keys.clear();
  out = step(s, state, kT0 + 31'000, jobs.environment());
  EXPECT_EQ(out.put, (std::vector<PlannedRun>{{kT0 + 20'000, kT0 + 31'000}}));
  EXPECT_FALSE(state.buffered_unix_ms);
  EXPECT_EQ(out.wake_unix_ms, kT0 + 40'000);
}

TEST(Planner, LimitAndEndStopTheSchedule) {
  Definition d = every(std::chrono::seconds(10));
  d.limit = 2;
  const Compiled limited = compiled(d);
  State state = start(limited, kT0);
  Jobs jobs;
  EXPECT_EQ(step(limited, state, kT0, jobs.environment()).put.size(), 1U);
  EXPECT_EQ(step(limited, state, kT0 + 10'000, jobs.environment()).put.size(), 1U);
  const Step done = step(limited, state, kT0 + 20'000, jobs.environment());
  EXPECT_TRUE(done.put.empty());
  EXPECT_FALSE(done.wake_unix_ms);
  EXPECT_FALSE(next_run(limited, state, kT0 + 20'000));

  d.limit.reset();
  d.end_unix_ms = kT0 + 15'000;
  const Compiled ending = compiled(d);
  state = start(ending, kT0);
  EXPECT_EQ(step(ending, state, kT0, jobs.environment()).put.size(), 1U);
  EXPECT_TRUE(step(ending, state, kT0 + 10'000, jobs.environment()).put.empty());
}

TEST(Planner, AStartInTheFutureRunsFirstAtTheStart) {
  Definition d = every(std::chrono::seconds(10));
  d.start_unix_ms = kT0 + 60'000;
  const Compiled s = compiled(d);
  State state = start(s, kT0);
  Jobs jobs;
  EXPECT_EQ(step(s, state, kT0, jobs.environment()).wake_unix_ms, kT0 + 60'000 - kLead.count());
  EXPECT_EQ(step(s, state, kT0 + 60'000 - kLead.count(), jobs.environment()).put,
            (std::vector<PlannedRun>{{kT0 + 60'000, kT0 + 60'000}}));
}

TEST(Planner, PausedPutsNothingAndAResumeCatchesUpByTheMisfireRule) {
  Definition d = every(std::chrono::seconds(10));
  d.misfire = Misfire::kSkip;
  Compiled s = compiled(d);
  State state = start(s, kT0);
  Jobs jobs;
  (void)step(s, state, kT0, jobs.environment());
  // Paused at 5 s: the run put ahead is withdrawn.
  ASSERT_EQ(pending_ahead(state, kT0 + 5'000), kT0 + 10'000);
  withdraw_ahead(state, kT0 + 5'000, /*deleted=*/true);
  EXPECT_EQ(state.runs, 0U);
  s.definition.paused = true;
  EXPECT_TRUE(step(s, state, kT0 + 50'000, jobs.environment()).put.empty());
  EXPECT_FALSE(next_run(s, state, kT0 + 50'000));
  s.definition.paused = false;
  const Step out = step(s, state, kT0 + 52'000, jobs.environment());
  EXPECT_EQ(out.put, (std::vector<PlannedRun>{{kT0 + 60'000, kT0 + 60'000}}));
  EXPECT_EQ(state.misfires, 5U);  // 10, 20, 30, 40 and 50 s
}

TEST(Planner, TriggerAndBackfillPutRunsNow) {
  Definition d = every(std::chrono::seconds(10));
  d.start_unix_ms = kT0 - 3'600'000;
  const Compiled s = compiled(d);
  State state = start(s, kT0);
  EXPECT_EQ(trigger(state, kT0 + 1), (PlannedRun{kT0 + 1, kT0 + 1}));
  auto runs = backfill(s, state, kT0 - 30'000, kT0 - 10'000, kT0 + 2);
  ASSERT_TRUE(runs.is_ok());
  EXPECT_EQ(runs.value(),
            (std::vector<PlannedRun>{
                {kT0 - 30'000, kT0 + 2}, {kT0 - 20'000, kT0 + 2}, {kT0 - 10'000, kT0 + 2}}));
  EXPECT_EQ(state.runs, 4U);
  EXPECT_EQ(backfill(s, state, kT0, kT0 - 1, kT0).status().code(), Code::kInvalidArgument);
  EXPECT_EQ(backfill(s, state, kT0, kT0 + 10'001'000, kT0 + 10'001'000).status().message(),
            "from, to: more than 1000 runs in the range");
  // Not a future instant: it would run again when it comes. A `to` up to a second ahead of the
  // present (a client's clock, a time rounded up) puts the instants up to the present only.
  EXPECT_EQ(backfill(s, state, kT0, kT0 + 10'000, kT0 + 8'999).status().code(),
            Code::kInvalidArgument);
  EXPECT_EQ(state.runs, 4U);
  auto near = backfill(s, state, kT0, kT0 + 10'000, kT0 + 9'999);
  ASSERT_TRUE(near.is_ok()) << near.status().to_string();
  EXPECT_EQ(near.value(), (std::vector<PlannedRun>{{kT0, kT0 + 9'999}}));
}

TEST(Planner, CronRunsFollowTheZone) {
  Definition d;
  d.cron = "0 9 * * *";
  d.zone = "Europe/Paris";
  const Compiled s = compiled(d);
  State state = start(s, kT0);
  Jobs jobs;
  // 09:00 in Paris on 16 January 2027 is 08:00 UTC; it is put kLead before.
  const std::int64_t nine = kT0 + 86'400'000;
  EXPECT_EQ(step(s, state, kT0, jobs.environment()).wake_unix_ms, nine - kLead.count());
  EXPECT_EQ(step(s, state, nine - kLead.count(), jobs.environment()).put,
            (std::vector<PlannedRun>{{nine, nine}}));
}

// A run far ahead is put kLead before its instant, not before: until then the schedule holds no
// job. A step that comes late still puts it, up to its instant.
TEST(Planner, AllowPutsARunOnlyKLeadAheadOfItsInstant) {
  const Compiled s = compiled(every(std::chrono::hours(1)));
  State state = start(s, kT0);
  Jobs jobs;
  const std::int64_t first = kT0 + 3'600'000;
  const std::int64_t at = first - kLead.count();
  Step out = step(s, state, kT0, jobs.environment());
  EXPECT_TRUE(out.put.empty());
  EXPECT_EQ(out.wake_unix_ms, at);
  EXPECT_EQ(wake(s, state), at);
  EXPECT_FALSE(state.ahead_unix_ms);
  EXPECT_EQ(next_run(s, state, kT0), first);
  EXPECT_TRUE(step(s, state, at - 1, jobs.environment()).put.empty());
  out = step(s, state, at + 5'000, jobs.environment());  // 5 s late: still ahead
  EXPECT_EQ(out.put, (std::vector<PlannedRun>{{first, first}}));
  EXPECT_EQ(state.ahead_unix_ms, first);
  EXPECT_EQ(out.wake_unix_ms, first);
  EXPECT_EQ(wake(s, state), first);
  EXPECT_EQ(state.runs, 1U);
  // Its instant comes: it becomes the last run, and the next is put kLead before its own.
  out = step(s, state, first, jobs.environment());
  EXPECT_TRUE(out.put.empty());
  EXPECT_EQ(state.last_run_unix_ms, first);
  EXPECT_EQ(out.wake_unix_ms, first + 3'600'000 - kLead.count());
  // Paused: no wake; a restart's wake of a stored state is where step() would come back.
  Compiled paused = s;
  paused.definition.paused = true;
  EXPECT_EQ(wake(paused, state), std::nullopt);
}

// A random walk of steps, downtimes, deletions and pauses: every instant the schedule reaches is
// settled once, and no key is put twice.
TEST(Planner, EveryInstantIsSettledExactlyOnce) {
  const std::uint64_t seed = std::random_device{}();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 random(seed);
  for (int round = 0; round < 200; ++round) {
    // Up to 30 s apart: some runs are put at the previous instant, some kLead before their own.
    Definition d = every(std::chrono::seconds(1 + random() % 30));
    d.misfire = static_cast<Misfire>(random() % 3);
    d.overlap = static_cast<Overlap>(random() % 3);
    d.max_lateness = std::chrono::seconds(random() % 20);
    const Compiled s = compiled(d);
    State state = start(s, kT0);
    Jobs jobs;
    std::set<std::string> ever;
    std::int64_t now = kT0;
    for (int i = 0; i < 60; ++i) {
      const Step out = step(s, state, now, jobs.environment());
      // A withdrawn run never ran: its instant may be put again.
      for (const std::string& key : jobs.withdrawn) ever.erase(key);
      jobs.withdrawn.clear();
      for (const PlannedRun& run : out.put) {
        const std::string key = run_key(s.definition.name, run.instant_unix_ms);
        ASSERT_TRUE(ever.insert(key).second) << key << " put twice";
        ASSERT_GE(run.due_unix_ms, std::min(run.instant_unix_ms, now));
        ASSERT_LE(run.instant_unix_ms - now, kLead.count()) << key << " put too far ahead";
      }
      jobs.add(s, out);
      if (random() % 3 == 0) jobs.keys.clear();  // workers finished
      // Mostly on time; sometimes down for up to 30 s.
      const auto late = static_cast<std::int64_t>(random() % 5);
      const auto down = static_cast<std::int64_t>(random() % 30'000);
      now = random() % 4 == 0 ? now + down : out.wake_unix_ms.value_or(now + 1000) + late;
    }
    const Step last = step(s, state, now, jobs.environment());
    for (const std::string& key : jobs.withdrawn) ever.erase(key);
    for (const PlannedRun& run : last.put) {
      ASSERT_TRUE(ever.insert(run_key(s.definition.name, run.instant_unix_ms)).second);
    }
    // Every instant up to the cursor is a run, a misfire or an overlap; the buffered one and the
    // one put ahead are counted where they stand.
    std::size_t instants = 0;
    for (auto at = s.recurrence.next_after(kT0); at && *at <= state.cursor_unix_ms;
         at = s.recurrence.next_after(*at)) {
      ++instants;
    }
    const std::size_t buffered = state.buffered_unix_ms ? 1 : 0;
    ASSERT_EQ(state.runs + state.misfires + state.overlaps + buffered, instants)
        << "round " << round << " misfire " << misfire_name(d.misfire) << " overlap "
        << overlap_name(d.overlap);
    ASSERT_EQ(state.runs, ever.size());
  }
}

TEST(Codec, ARecordReadsBackExactly) {
  Record record;
  record.definition = compiled(every(std::chrono::seconds(90))).definition;
  record.definition.body = std::string(70'000, 'x');
  record.definition.end_unix_ms = kT0 + 5;
  record.definition.limit = 7;
  record.definition.misfire = Misfire::kAll;
  record.definition.overlap = Overlap::kBufferOne;
  record.definition.paused = true;
  record.state.cursor_unix_ms = kT0;
  record.state.ahead_unix_ms = kT0 + 1;
  record.state.buffered_unix_ms = 0;
  record.state.runs = 3;
  const std::string bytes = encode(record);
  auto back = decode("s", bytes);
  ASSERT_TRUE(back.is_ok()) << back.status().message();
  EXPECT_EQ(back.value(), record);
  EXPECT_EQ(decode("s", bytes.substr(0, bytes.size() - 1)).status().code(), Code::kCorruption);
  EXPECT_EQ(decode("other", bytes).status().code(), Code::kCorruption);
  EXPECT_EQ(decode("s", "\x02").status().code(), Code::kUnknownFormat);
}

TEST(Definition, CompileRefusesWhatCannotRunNamingTheField) {
  const auto refused = [](Definition d, std::string_view field) {
    auto c = compile(std::move(d), kT0, 200);
    ASSERT_FALSE(c.is_ok()) << field;
    EXPECT_EQ(c.status().code(), Code::kInvalidArgument);
    EXPECT_TRUE(c.status().message().starts_with(field)) << c.status().message();
  };
  Definition d = every(std::chrono::seconds(1));
  d.name = "daily-report";
  d.tube = "reports";
  ASSERT_TRUE(compile(d, kT0, 200).is_ok());
  Definition bad = d;
  bad.name = "a b";
  refused(bad, "name");
  bad = d;
  bad.tube = "-x";
  refused(bad, "tube");
  bad = d;
  bad.cron = "* * * * *";
  refused(bad, "cron, every");
  bad = d;
  bad.every = std::chrono::milliseconds(10);
  refused(bad, "every");
  bad = d;
  bad.every = {};
  bad.cron = "0 9 32 * *";
  refused(bad, "cron");
  bad = d;
  bad.every = {};
  bad.cron = "0 0 30 2 *";  // valid fields, but no 30 February
  refused(bad, "cron");
  bad = d;
  bad.zone = "Mars/Olympus";
  refused(bad, "tz");
  bad = d;
  bad.jitter = std::chrono::hours(25);
  refused(bad, "jitter");
  bad = d;
  bad.start_unix_ms = kT0;
  bad.end_unix_ms = kT0 - 1;
  refused(bad, "end_at");
  // An interval without a start counts from its first run, one interval after the moment it is
  // set, kept in the definition as its start: no instant before it is listed or backfilled. An
  // end before that run is refused.
  const Compiled interval = compile(d, kT0, 200).value();
  EXPECT_EQ(interval.definition.start_unix_ms, kT0 + d.every.count());
  EXPECT_EQ(upcoming(interval, kT0 - 3'600'000, 2),
            (std::vector<std::int64_t>{kT0 + d.every.count(), kT0 + 2 * d.every.count()}));
  State state = start(interval, kT0, nullptr);
  const auto filled =
      backfill(interval, state, kT0 - 3'600'000, kT0 + d.every.count(), kT0 + d.every.count());
  ASSERT_TRUE(filled.is_ok());
  ASSERT_EQ(filled.value().size(), 1U);
  EXPECT_EQ(filled.value()[0].instant_unix_ms, kT0 + d.every.count());
  bad = d;
  bad.end_unix_ms = kT0 + d.every.count();
  EXPECT_TRUE(compile(bad, kT0, 200).is_ok());
  bad = d;
  bad.end_unix_ms = kT0 + d.every.count() - 1;
  refused(bad, "end_at");
}

TEST(Definition, RunKeysNameTheirScheduleAndInstant) {
  EXPECT_EQ(run_key("daily", kT0), "daily@1800000000000");
  const auto run = parse_run_key("daily@1800000000000");
  ASSERT_TRUE(run);
  EXPECT_EQ(run->name, "daily");
  EXPECT_EQ(run->instant_unix_ms, kT0);
  EXPECT_FALSE(parse_run_key("order-17"));
  EXPECT_FALSE(parse_run_key("a@12x"));
  EXPECT_FALSE(parse_run_key("@12"));
}

}  // namespace
}  // namespace delayq::schedule
