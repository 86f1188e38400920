// Recovery tests over the wire: put jobs in every state into the real delayqd, stop it (SIGTERM,
// or SIGKILL right after the last reply), start it again on the same data directory, and check
// what a client sees: every acknowledged job is back with its tube, priority, TTR and body;
// reserved jobs are ready again; delayed jobs keep their due time (absolute, so the downtime
// counts); buried jobs stay buried; deleted ones stay gone; ids go on growing.
// Timing bounds as in beanstalk_test.cc: never early (1 ms slack for the server's clock), late by
// at most kLateBy.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "server_process.h"

namespace delayq::testing {
namespace {

using std::chrono::duration_cast;
using std::chrono::microseconds;

constexpr Millis kLateBy{700};  // a restart in between: allow a little more than elsewhere
// The timed job's delay: longer than a restart takes on a loaded machine, so that it is still
// delayed after one.
constexpr std::uint32_t kDueInSeconds = 6;

std::int64_t micros_between(WallClock::time_point from, WallClock::time_point to) {
  return duration_cast<microseconds>(to - from).count();
}

// A job as stats-job and peek should show it after the restart.
struct Expected {
  std::uint64_t id = 0;
  std::string tube;
  std::string state;
  std::uint32_t priority = 0;
  std::uint32_t ttr_seconds = 0;
  std::string body;
};

// What Scenario::run() did, to check after the restart.
struct Scenario {
  std::vector<Expected> jobs;
  std::uint64_t deleted = 0;
  std::uint64_t due_in = 0;  // alone in tube "timed", due kDueInSeconds after its put
  std::uint64_t max_id = 0;
  WallClock::time_point due_in_sent;
  Clock::time_point due_in_inserted;
};

class RestartTest : public ::testing::Test {
 protected:
  // The server's flags beyond the harness's: a durability mode, for the tests below.
  explicit RestartTest(std::vector<std::string> flags = {})
      : server_(dir_.path() / "data", std::move(flags)) {}
  void SetUp() override { ASSERT_EQ(server_.start(), ""); }
  void TearDown() override {
    if (server_.running()) {
      EXPECT_EQ(server_.stop(), "exited 0");
    }
  }

  std::unique_ptr<Client> connect() {
    auto client = std::make_unique<Client>(server_.port());
    EXPECT_TRUE(client->connected()) << client->error();
    return client;
  }

  static std::uint64_t put(Client& client, std::string_view body, std::uint32_t priority = 0,
                           std::uint32_t delay_seconds = 0, std::uint32_t ttr_seconds = 60) {
    const std::string reply = client.call(put_command(body, priority, delay_seconds, ttr_seconds));
    const auto id = inserted_id(reply);
    EXPECT_TRUE(id.has_value()) << "put got " << reply;
    return id.value_or(0);
  }

  static Yaml stats_job(Client& client, std::uint64_t id) {
    return parse_yaml(client.call("stats-job " + std::to_string(id) + "\r\n"));
  }

  // Jobs in every state. Ends with a put, so that a kill right after it follows an INSERTED.
  static Scenario run_scenario(Client& c) {
    Scenario s;
    const auto add = [&s](std::uint64_t id, std::string tube, std::string state,
                          std::uint32_t priority, std::uint32_t ttr, std::string body) {
      s.jobs.push_back({id, std::move(tube), std::move(state), priority, ttr, std::move(body)});
      s.max_id = std::max(s.max_id, id);
    };
    // Buried, with a new priority.
    const auto buried = put(c, "to bury", 1, 0, 21);
    EXPECT_EQ(c.call("reserve\r\n"), job_reply("RESERVED", buried, "to bury"));
    EXPECT_EQ(c.call("bury " + std::to_string(buried) + " 7\r\n"), "BURIED\r\n");
    add(buried, "default", "buried", 7, 21, "to bury");
    // Reserved when the server stops: ready after the restart.
    const auto reserved = put(c, "to reserve", 2, 0, 30);
    EXPECT_EQ(c.call("reserve\r\n"), job_reply("RESERVED", reserved, "to reserve"));
    add(reserved, "default", "ready", 2, 30, "to reserve");
    // Ready, one of them with a binary body.
    add(put(c, "ready one", 100, 0, 11), "default", "ready", 100, 11, "ready one");
    const std::string binary("ready\r\n\0two\xff", 13);
    add(put(c, binary, 200, 0, 12), "default", "ready", 200, 12, binary);
    // Ready in another tube.
    EXPECT_EQ(c.call("use other\r\n"), "USING other\r\n");
    add(put(c, "in other", 3, 0, 13), "other", "ready", 3, 13, "in other");
    EXPECT_EQ(c.call("use default\r\n"), "USING default\r\n");
    // Released with a delay: delayed, with the new priority.
    const auto released = put(c, "to release", 0, 0, 15);
    EXPECT_EQ(c.call("reserve\r\n"), job_reply("RESERVED", released, "to release"));
    EXPECT_EQ(c.call("release " + std::to_string(released) + " 50 100\r\n"), "RELEASED\r\n");
    add(released, "default", "delayed", 50, 15, "to release");
    // Deleted: gone for good.
    s.deleted = put(c, "to delete");
    s.max_id = std::max(s.max_id, s.deleted);
    EXPECT_EQ(c.call("delete " + std::to_string(s.deleted) + "\r\n"), "DELETED\r\n");
    // Delayed far and near.
    add(put(c, "due in 100", 6, 100, 16), "default", "delayed", 6, 16, "due in 100");
    EXPECT_EQ(c.call("use timed\r\n"), "USING timed\r\n");
    s.due_in_sent = WallClock::now();
    s.due_in = put(c, "due later", 5, kDueInSeconds, 14);
    s.due_in_inserted = Clock::now();
    add(s.due_in, "timed", "delayed", 5, 14, "due later");
    return s;
  }

  // Checks everything the scenario left, on the restarted server.
  void check_scenario(const Scenario& s) {
    auto c = connect();
    // First: the timed job is still delayed, and a worker waits for it.
    EXPECT_EQ(stats_job(*c, s.due_in)["state"], "delayed");
    auto worker = connect();
    EXPECT_EQ(worker->call("watch timed\r\n"), "WATCHING 2\r\n");
    EXPECT_EQ(worker->call("ignore default\r\n"), "WATCHING 1\r\n");
    ASSERT_TRUE(worker->send("reserve-with-timeout 20\r\n"));

    for (const Expected& job : s.jobs) {
      const Yaml stats = stats_job(*c, job.id);
      ASSERT_EQ(stats.error, "") << "job " << job.id;
      if (job.id != s.due_in) {
        EXPECT_EQ(stats["state"], job.state) << "job " << job.id;
      }
      EXPECT_EQ(stats["tube"], job.tube) << "job " << job.id;
      EXPECT_EQ(stats["pri"], std::to_string(job.priority)) << "job " << job.id;
      EXPECT_EQ(stats["ttr"], std::to_string(job.ttr_seconds)) << "job " << job.id;
      EXPECT_EQ(c->call("peek " + std::to_string(job.id) + "\r\n"),
                job_reply("FOUND", job.id, job.body));
    }
    EXPECT_EQ(c->call("peek " + std::to_string(s.deleted) + "\r\n"), "NOT_FOUND\r\n");
    const Yaml tube = parse_yaml(c->call("stats-tube default\r\n"));
    EXPECT_EQ(tube["current-jobs-ready"], "3");
    EXPECT_EQ(tube["current-jobs-reserved"], "0");
    EXPECT_EQ(tube["current-jobs-delayed"], "2");
    EXPECT_EQ(tube["current-jobs-buried"], "1");
    EXPECT_EQ(c->call("peek-buried\r\n"), job_reply("FOUND", s.jobs[0].id, "to bury"));

    // The delayed job comes when it was due, downtime included.
    EXPECT_EQ(worker->reply(Millis{22000}), job_reply("RESERVED", s.due_in, "due later"));
    const std::int64_t due_ms = kDueInSeconds * 1000;
    EXPECT_GE(micros_between(s.due_in_sent, WallClock::now()), due_ms * 1000 - 1000) << "early";
    EXPECT_LE(millis_between(s.due_in_inserted, Clock::now()), due_ms + kLateBy.count()) << "late";

    // Ids go on from the largest ever handed out.
    const auto next = put(*c, "after the restart");
    EXPECT_GT(next, s.max_id);
  }

  // The scenario, SIGKILL right after its last reply, a restart, and the check.
  void kill_nine_right_after_the_replies() {
    Scenario scenario;
    {
      auto c = connect();
      scenario = run_scenario(*c);
      EXPECT_EQ(server_.kill9(), "killed by signal 9");
      ASSERT_FALSE(HasFailure());
    }
    ASSERT_EQ(server_.start(), "");
    check_scenario(scenario);
  }

  TempDir dir_;
  ServerProcess server_;
};

// Under interval and none a reply waits for the batch's write (not its fsync), which SIGKILL
// does not undo: every acknowledged change survives the kill as under always.
class RestartUnderIntervalTest : public RestartTest {
 protected:
  RestartUnderIntervalTest() : RestartTest({"--fsync", "interval:50"}) {}
};
class RestartUnderNoneTest : public RestartTest {
 protected:
  RestartUnderNoneTest() : RestartTest({"--fsync", "none"}) {}
};

TEST_F(RestartUnderIntervalTest, KillNineRightAfterTheRepliesLosesNothingAcknowledged) {
  kill_nine_right_after_the_replies();
}

// A window of 1 s: the scenario's delayed jobs (due in 6 s and in 100 s, and the one released
// with a delay of 100 s) are on disk only when the server is killed; after the restart they are
// shown, counted and peeked from there, and the timed one comes back and fires on time.
class RestartWithAShortWindowTest : public RestartTest {
 protected:
  RestartWithAShortWindowTest() : RestartTest({"--window", "1"}) {}
};

TEST_F(RestartWithAShortWindowTest, KillNineRightAfterTheRepliesLosesNothingAcknowledged) {
  kill_nine_right_after_the_replies();
}

TEST_F(RestartUnderNoneTest, KillNineRightAfterTheRepliesLosesNothingAcknowledged) {
  kill_nine_right_after_the_replies();
}

TEST_F(RestartTest, SigtermThenRestartKeepsEveryJob) {
  Scenario scenario;
  {
    auto c = connect();
    scenario = run_scenario(*c);
    ASSERT_FALSE(HasFailure());
    EXPECT_EQ(server_.stop(), "exited 0");
  }
  ASSERT_EQ(server_.start(), "");
  check_scenario(scenario);
}

TEST_F(RestartTest, KillNineRightAfterTheRepliesLosesNothingAcknowledged) {
  kill_nine_right_after_the_replies();
}

TEST_F(RestartTest, KillNineAfterPipelinedPutsKeepsEveryInsertedJob) {
  constexpr int kJobs = 300;
  std::vector<std::uint64_t> ids;
  {
    auto c = connect();
    std::string puts;
    for (int i = 0; i < kJobs; ++i) {
      puts += put_command("job " + std::to_string(i), static_cast<std::uint32_t>(i),
                          static_cast<std::uint32_t>(i % 3 * 50));
    }
    ASSERT_TRUE(c->send(puts));
    for (int i = 0; i < kJobs; ++i) {
      const std::string reply = c->reply();
      const auto id = inserted_id(reply);
      ASSERT_TRUE(id.has_value()) << "put " << i << " got " << reply;
      ids.push_back(*id);
    }
    EXPECT_EQ(server_.kill9(), "killed by signal 9");
  }
  ASSERT_EQ(server_.start(), "");
  auto c = connect();
  for (int i = 0; i < kJobs; ++i) {
    const auto id = ids[static_cast<std::size_t>(i)];
    EXPECT_EQ(c->call("peek " + std::to_string(id) + "\r\n"),
              job_reply("FOUND", id, "job " + std::to_string(i)));
    const Yaml job = stats_job(*c, id);
    EXPECT_EQ(job["state"], i % 3 == 0 ? "ready" : "delayed") << "job " << id;
    EXPECT_EQ(job["pri"], std::to_string(i)) << "job " << id;
  }
  EXPECT_EQ(parse_yaml(c->call("stats\r\n"))["current-jobs-ready"], std::to_string(kJobs / 3));
}

TEST_F(RestartTest, JobDueWhileTheServerIsDownIsReadyAfterTheRestart) {
  std::uint64_t id = 0;
  Clock::time_point sent;
  {
    auto c = connect();
    sent = Clock::now();
    id = put(*c, "due while down", 0, 1);
    EXPECT_EQ(server_.stop(), "exited 0");
  }
  std::this_thread::sleep_until(sent + Millis{1200});
  ASSERT_EQ(server_.start(), "");
  auto c = connect();
  EXPECT_EQ(stats_job(*c, id)["state"], "ready");
  EXPECT_EQ(c->call("reserve-with-timeout 0\r\n"), job_reply("RESERVED", id, "due while down"));
}

TEST_F(RestartTest, MaxAttemptsBuriesAfterTheLastFailedReservationAndSurvivesARestart) {
  std::uint64_t id = 0;
  {
    auto c = connect();
    EXPECT_EQ(c->call("max-attempts flaky 2\r\n"), "MAX_ATTEMPTS 2\r\n");
    EXPECT_EQ(c->call("use flaky\r\n"), "USING flaky\r\n");
    EXPECT_EQ(c->call("watch flaky\r\n"), "WATCHING 2\r\n");
    id = put(*c, "flaky job");
    EXPECT_EQ(server_.kill9(), "killed by signal 9");
  }
  ASSERT_EQ(server_.start(), "");
  auto c = connect();
  EXPECT_EQ(parse_yaml(c->call("stats-tube flaky\r\n"))["max-attempts"], "2");
  EXPECT_EQ(c->call("watch flaky\r\n"), "WATCHING 2\r\n");
  const std::string number = std::to_string(id);
  EXPECT_EQ(c->call("reserve-with-timeout 0\r\n"), job_reply("RESERVED", id, "flaky job"));
  EXPECT_EQ(c->call("release " + number + " 0 0\r\n"), "RELEASED\r\n");
  EXPECT_EQ(c->call("reserve-with-timeout 0\r\n"), job_reply("RESERVED", id, "flaky job"));
  EXPECT_EQ(c->call("release " + number + " 0 0\r\n"), "BURIED\r\n");
  EXPECT_EQ(stats_job(*c, id)["state"], "buried");
  EXPECT_EQ(c->call("max-attempts flaky 0\r\n"), "MAX_ATTEMPTS 0\r\n");
  EXPECT_FALSE(parse_yaml(c->call("stats-tube flaky\r\n")).has("max-attempts"));
}

// Flow control's settings are on disk; its counts are not, and need not be: a reservation does
// not outlive a restart (its job is ready again), so every group starts with none reserved.
TEST_F(RestartTest, FlowControlSurvivesAKillAndItsCountsStartExact) {
  {
    auto c = connect();
    EXPECT_EQ(c->call("flow-tube fc concurrency=1 fair=1\r\n"), "FLOW 1 1 0/1000 1\r\n");
    EXPECT_EQ(c->call("use fc\r\n"), "USING fc\r\n");
    EXPECT_EQ(c->call("watch fc\r\n"), "WATCHING 2\r\n");
    for (int i = 0; i < 3; ++i) {
      EXPECT_TRUE(inserted_id(c->call("putx 0 0 60 1 group=a\r\nx\r\n")).has_value());
    }
    EXPECT_TRUE(c->call("reserve-with-timeout 0\r\n").starts_with("RESERVED "));
    EXPECT_EQ(c->call("reserve-with-timeout 0\r\n"), "TIMED_OUT\r\n");
    EXPECT_EQ(server_.kill9(), "killed by signal 9");
  }
  ASSERT_EQ(server_.start(), "");
  auto c = connect();
  const Yaml tube = parse_yaml(c->call("stats-tube fc\r\n"));
  EXPECT_EQ(tube["group-concurrency"], "1");
  EXPECT_EQ(tube["fair"], "1");
  EXPECT_EQ(tube["current-jobs-ready"], "3");
  EXPECT_EQ(tube["groups-ready"], "1");
  EXPECT_EQ(c->call("watch fc\r\n"), "WATCHING 2\r\n");
  EXPECT_TRUE(c->call("reserve-with-timeout 0\r\n").starts_with("RESERVED "));
  EXPECT_EQ(c->call("reserve-with-timeout 0\r\n"), "TIMED_OUT\r\n") << "still one at a time";
  EXPECT_EQ(parse_yaml(c->call("stats-tube fc\r\n"))["groups-held"], "1");
}

TEST_F(RestartTest, IdsAreNotReusedAfterEveryJobIsDeleted) {
  {
    auto c = connect();
    for (std::uint64_t expected = 1; expected <= 3; ++expected) {
      EXPECT_EQ(put(*c, "x"), expected);
      EXPECT_EQ(c->call("delete " + std::to_string(expected) + "\r\n"), "DELETED\r\n");
    }
    EXPECT_EQ(server_.stop(), "exited 0");
  }
  ASSERT_EQ(server_.start(), "");
  {
    auto c = connect();
    EXPECT_EQ(put(*c, "y"), 4U);
    EXPECT_EQ(c->call("delete 4\r\n"), "DELETED\r\n");
    EXPECT_EQ(server_.kill9(), "killed by signal 9");
  }
  ASSERT_EQ(server_.start(), "");
  auto c = connect();
  EXPECT_GT(put(*c, "z"), 4U);
}

}  // namespace
}  // namespace delayq::testing
