// schedule_contract_test — broker/schedules.h's contract, for every broker of the contract suite
// (its instantiation is broker_contract_test.cc's). Runs are real jobs with keys
// "<name>@<instant>": the cases read them the way a worker would, across a restart too. Schedules
// here run every second or two, so a case takes a few seconds of real time; which runs came is
// asserted, never how late.
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "broker/contract_fixture.h"
#include "broker/schedules.h"
#include "schedule/definition.h"

namespace delayq::testing {
namespace {

using broker::ScheduleView;
using schedule::Definition;

Definition every_second(std::string name, std::string tube) {
  Definition d;
  d.name = std::move(name);
  d.tube = std::move(tube);
  d.every = 1s;
  d.body = "run";
  return d;
}

// The fixture's calls, for schedules.
class ScheduleContract : public BrokerContract {
 protected:
  broker::Schedules& schedules() { return broker_->schedules(); }
  Result<ScheduleView> set(Definition d) {
    return call<ScheduleView>([&](auto done) { schedules().set(std::move(d), std::move(done)); });
  }
  Result<ScheduleView> get(const std::string& name) {
    return call<ScheduleView>([&](auto done) { schedules().get(name, std::move(done)); });
  }
  Result<ScheduleView> pause(const std::string& name, bool paused) {
    return call<ScheduleView>([&](auto done) { schedules().pause(name, paused, std::move(done)); });
  }
  Result<ScheduleView> remove(const std::string& name) {
    return call<ScheduleView>([&](auto done) { schedules().remove(name, std::move(done)); });
  }
  // Reserves and deletes the next run that comes, returning its instant (from its key).
  std::int64_t take_run(Session& worker, const std::string& tube, const std::string& name) {
    auto job = reserve_waiting(worker, tube);
    EXPECT_TRUE(job.is_ok()) << job.status().to_string();
    if (!job.is_ok()) return -1;
    EXPECT_TRUE(erase(worker, JobRef::by_id(job.value().view.id)).is_ok());
    const auto run = schedule::parse_run_key(job.value().view.key);
    EXPECT_TRUE(run && run->name == name) << "key " << job.value().view.key;
    return run ? run->instant_unix_ms : -1;
  }
};

TEST_P(ScheduleContract, ASetScheduleReadsBackWithItsNextRunPutAhead) {
  Definition d = every_second("heartbeat", "beats");
  // Within kLead, so put ahead; nothing runs during the case.
  d.start_unix_ms = wall_ms() + schedule::kLead.count() - 2'000;
  d.priority = 5;
  d.group = "team:1";
  auto made = set(d);
  ASSERT_TRUE(made.is_ok()) << made.status().to_string();
  EXPECT_TRUE(made.value().created);
  EXPECT_EQ(made.value().definition.tube, "beats");
  ASSERT_TRUE(made.value().next_unix_ms);
  EXPECT_EQ(*made.value().next_unix_ms, *d.start_unix_ms);
  auto again = get("heartbeat");
  ASSERT_TRUE(again.is_ok());
  EXPECT_EQ(again.value().definition, made.value().definition);
  EXPECT_FALSE(again.value().created);
  // The first run waits as a delayed job, keyed by its instant.
  Session& s = session();
  auto run = peek(s, JobRef::by_key("beats", schedule::run_key("heartbeat", *d.start_unix_ms)));
  ASSERT_TRUE(run.is_ok()) << run.status().to_string();
  EXPECT_EQ(run.value().view.state, JobState::kDelayed);
  EXPECT_EQ(run.value().view.due_unix_ms, *d.start_unix_ms);
  EXPECT_EQ(run.value().view.priority, 5U);
  EXPECT_EQ(run.value().view.group, "team:1");
  EXPECT_EQ(run.value().body, "run");
}

// A run further off than kLead has no job yet: a schedule costs nothing in the tube until then.
TEST_P(ScheduleContract, ARunFurtherOffThanTheLeadHasNoJobYet) {
  Definition d = every_second("later", "lt");
  d.start_unix_ms = wall_ms() + schedule::kLead.count() + 60'000;
  auto made = set(d);
  ASSERT_TRUE(made.is_ok()) << made.status().to_string();
  ASSERT_TRUE(made.value().next_unix_ms);
  EXPECT_EQ(*made.value().next_unix_ms, *d.start_unix_ms);
  EXPECT_EQ(made.value().state.runs, 0U);
  Session& s = session();
  EXPECT_EQ(peek(s, JobRef::by_key("lt", schedule::run_key("later", *d.start_unix_ms))).code(),
            Code::kNotFound);
  auto again = get("later");
  ASSERT_TRUE(again.is_ok());
  EXPECT_EQ(again.value().next_unix_ms, d.start_unix_ms);
}

TEST_P(ScheduleContract, BadDefinitionsAreRefusedNamingTheField) {
  Definition d = every_second("bad", "t");
  d.every = {};
  d.cron = "0 9 31 2-13 *";
  auto refused = set(d);
  EXPECT_EQ(refused.code(), Code::kInvalidArgument);
  EXPECT_TRUE(refused.status().message().starts_with("cron")) << refused.status().message();
  d.cron = "0 9 * * *";
  d.zone = "Europe/Atlantis";
  refused = set(d);
  EXPECT_EQ(refused.code(), Code::kInvalidArgument);
  EXPECT_TRUE(refused.status().message().starts_with("tz")) << refused.status().message();
  d.zone = "UTC";
  d.url = "http://127.0.0.1:9/hook";
  EXPECT_EQ(set(d).code(), Code::kConflict) << "a url in a tube without a webhook";
  EXPECT_EQ(get("bad").code(), Code::kNotFound);
}

// Every instant of a one-second schedule comes once, across a restart: none lost, none doubled.
TEST_P(ScheduleContract, EachRunComesOnceAcrossARestart) {
  ASSERT_TRUE(set(every_second("tick", "ticks")).is_ok());
  std::vector<std::int64_t> instants;
  {
    Session& worker = session();
    for (int i = 0; i < 2; ++i) instants.push_back(take_run(worker, "ticks", "tick"));
  }
  restart();
  Session& worker = session();
  for (int i = 0; i < 2; ++i) instants.push_back(take_run(worker, "ticks", "tick"));
  for (std::size_t i = 1; i < instants.size(); ++i) {
    EXPECT_EQ(instants[i] - instants[i - 1], 1000) << "run " << i << " lost or doubled";
  }
  auto view = get("tick");
  ASSERT_TRUE(view.is_ok());
  EXPECT_EQ(view.value().state.misfires, 0U);
  EXPECT_GE(view.value().state.runs, 4U);
}

// Down through the run put ahead: it is missed, as the instants after it, and the misfire rule
// (skip here) settles them all.
TEST_P(ScheduleContract, ARunPutAheadAndMissedWhileDownIsSettledByTheMisfireRule) {
  Definition d = every_second("late", "late");
  d.misfire = schedule::Misfire::kSkip;
  auto made = set(d);
  ASSERT_TRUE(made.is_ok());
  const std::int64_t ahead = *made.value().next_unix_ms;
  close();
  run_for(2500ms);  // with no broker: the run put ahead is reached 1.5 s late, missed
  reopen_fresh();
  Session& s = session();
  ASSERT_TRUE(run_until([&] {
    auto view = get("late");
    return view.is_ok() && view.value().state.misfires >= 1;
  }));
  EXPECT_EQ(peek(s, JobRef::by_key("late", schedule::run_key("late", ahead))).code(),
            Code::kNotFound)
      << "the run put ahead fired after the downtime";
}

TEST_P(ScheduleContract, PauseWithdrawsTheRunPutAheadAndResumeGoesOn) {
  Definition d = every_second("paused", "p");
  d.every = 2s;
  d.misfire = schedule::Misfire::kSkip;
  auto made = set(d);
  ASSERT_TRUE(made.is_ok());
  const std::int64_t ahead = *made.value().next_unix_ms;
  auto paused = pause("paused", true);
  ASSERT_TRUE(paused.is_ok());
  EXPECT_TRUE(paused.value().definition.paused);
  EXPECT_FALSE(paused.value().next_unix_ms);
  Session& s = session();
  EXPECT_EQ(peek(s, JobRef::by_key("p", schedule::run_key("paused", ahead))).code(),
            Code::kNotFound);
  auto resumed = pause("paused", false);
  ASSERT_TRUE(resumed.is_ok());
  ASSERT_TRUE(resumed.value().next_unix_ms);
  const std::int64_t next = take_run(s, "p", "paused");
  EXPECT_EQ(next, *resumed.value().next_unix_ms);
}

TEST_P(ScheduleContract, RemoveDeletesTheScheduleAndTheRunPutAhead) {
  Definition d = every_second("gone", "g");
  d.every = 60s;
  auto made = set(d);
  ASSERT_TRUE(made.is_ok());
  ASSERT_TRUE(remove("gone").is_ok());
  EXPECT_EQ(get("gone").code(), Code::kNotFound);
  EXPECT_EQ(remove("gone").code(), Code::kNotFound);
  EXPECT_EQ(pause("never-set", true).code(), Code::kNotFound);
  Session& s = session();
  EXPECT_EQ(
      peek(s, JobRef::by_key("g", schedule::run_key("gone", *made.value().next_unix_ms))).code(),
      Code::kNotFound);
}

TEST_P(ScheduleContract, ASetOverAScheduleWithdrawsTheRunItPutAheadAndPutsItsOwn) {
  Definition d = every_second("moved", "mv");
  d.every = 8s;  // within kLead: each set puts its first run ahead
  auto first = set(d);
  ASSERT_TRUE(first.is_ok());
  ASSERT_TRUE(first.value().next_unix_ms);
  d.every = 9s;
  d.body = "second";
  auto second = set(d);
  ASSERT_TRUE(second.is_ok()) << second.status().to_string();
  EXPECT_FALSE(second.value().created);
  ASSERT_TRUE(second.value().next_unix_ms);
  ASSERT_NE(*second.value().next_unix_ms, *first.value().next_unix_ms);
  EXPECT_EQ(second.value().state.runs, 1U) << "the withdrawn run is not counted";
  Session& s = session();
  EXPECT_EQ(
      peek(s, JobRef::by_key("mv", schedule::run_key("moved", *first.value().next_unix_ms))).code(),
      Code::kNotFound);
  auto ahead =
      peek(s, JobRef::by_key("mv", schedule::run_key("moved", *second.value().next_unix_ms)));
  ASSERT_TRUE(ahead.is_ok()) << ahead.status().to_string();
  EXPECT_EQ(ahead.value().body, "second");
}

TEST_P(ScheduleContract, TriggerAndBackfillPutRunsDueNow) {
  Definition d = every_second("manual", "m");
  d.every = 60s;
  d.start_unix_ms = (wall_ms() / 60'000 - 10) * 60'000;  // ten minutes ago, on the minute
  ASSERT_TRUE(set(d).is_ok());
  auto triggered =
      call<PutResult>([&](auto done) { schedules().trigger("manual", std::move(done)); });
  ASSERT_TRUE(triggered.is_ok()) << triggered.status().to_string();
  EXPECT_EQ(triggered.value().job.state, JobState::kReady);
  EXPECT_TRUE(schedule::parse_run_key(triggered.value().job.key));
  const std::int64_t from = *d.start_unix_ms + 60'000;
  auto filled = call<std::vector<PutResult>>(
      [&](auto done) { schedules().backfill("manual", from, from + 120'000, std::move(done)); });
  ASSERT_TRUE(filled.is_ok()) << filled.status().to_string();
  ASSERT_EQ(filled.value().size(), 3U);
  for (std::size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(filled.value()[i].job.key,
              schedule::run_key("manual", from + 60'000 * static_cast<std::int64_t>(i)));
    EXPECT_EQ(filled.value()[i].job.state, JobState::kReady);
  }
  // The same range again puts nothing new: those runs' jobs are still there.
  auto twice = call<std::vector<PutResult>>(
      [&](auto done) { schedules().backfill("manual", from, from + 120'000, std::move(done)); });
  ASSERT_TRUE(twice.is_ok());
  for (const PutResult& put : twice.value()) EXPECT_FALSE(put.inserted);
  EXPECT_EQ(
      call<PutResult>([&](auto done) { schedules().trigger("none", std::move(done)); }).code(),
      Code::kNotFound);
}

// A backfill counts the runs it put, and the latest of their instants is the last run (it has
// come); the same range again puts and counts nothing. Paused: no run is put ahead meanwhile.
TEST_P(ScheduleContract, ABackfillCountsTheRunsItPutAndItsLatestIsTheLastRun) {
  Definition d = every_second("filled", "f");
  d.every = 60s;
  d.paused = true;
  d.start_unix_ms = (wall_ms() / 60'000 - 10) * 60'000;  // ten minutes ago, on the minute
  ASSERT_TRUE(set(d).is_ok());
  const std::int64_t from = *d.start_unix_ms + 60'000;
  const auto fill = [&] {
    return call<std::vector<PutResult>>(
        [&](auto done) { schedules().backfill("filled", from, from + 120'000, std::move(done)); });
  };
  ASSERT_TRUE(fill().is_ok());
  const auto counted = [&](std::uint64_t runs) {
    return run_until([&] {
      auto view = get("filled");
      return view.is_ok() && view.value().state.runs == runs &&
             view.value().state.last_run_unix_ms == from + 120'000;
    });
  };
  EXPECT_TRUE(counted(3)) << "runs " << get("filled").value().state.runs;
  ASSERT_TRUE(fill().is_ok());
  run_for(300ms);  // room for a count that should not come (Redis counts later)
  EXPECT_TRUE(counted(3)) << "runs " << get("filled").value().state.runs;
}

TEST_P(ScheduleContract, OverlapSkipRunsNothingWhileThePreviousRunsJobExists) {
  Definition d = every_second("single", "one");
  d.overlap = schedule::Overlap::kSkip;
  ASSERT_TRUE(set(d).is_ok());
  Session& s = session();
  auto first = reserve_waiting(s, "one");  // held, not deleted: it still exists
  ASSERT_TRUE(first.is_ok());
  ASSERT_TRUE(run_until([&] {
    auto view = get("single");
    return view.is_ok() && view.value().state.overlaps >= 2;
  }));
  EXPECT_EQ(reserve(s, {"one"}).code(), Code::kTimedOut) << "a run was put beside the first";
}

TEST_P(ScheduleContract, ListingIsByNameAndPaged) {
  for (const char* name : {"c", "a", "b"}) {
    Definition d = every_second(name, "list");
    d.every = 3600s;
    ASSERT_TRUE(set(d).is_ok());
  }
  const auto names = [&](std::string after, std::size_t limit) {
    auto listed = call<std::vector<ScheduleView>>(
        [&](auto done) { schedules().list(after, limit, std::move(done)); });
    EXPECT_TRUE(listed.is_ok());
    std::vector<std::string> out;
    if (listed.is_ok()) {
      for (const auto& view : listed.value()) out.push_back(view.definition.name);
    }
    return out;
  };
  EXPECT_EQ(names("", 10), (std::vector<std::string>{"a", "b", "c"}));
  EXPECT_EQ(names("a", 1), (std::vector<std::string>{"b"}));
  restart();
  EXPECT_EQ(names("", 10), (std::vector<std::string>{"a", "b", "c"}));
}

INSTANTIATE_TEST_SUITE_P(Brokers, ScheduleContract,
                         ::testing::Values(BrokerKind::kLocalMemory, BrokerKind::kLocalRocks,
                                           BrokerKind::kRedis, BrokerKind::kRedisCluster,
                                           BrokerKind::kRedisPrefetch),
                         [](const auto& brokers) { return kind_name(brokers.param); });

}  // namespace
}  // namespace delayq::testing
