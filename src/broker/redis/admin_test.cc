// admin_test.cc — the server-wide calls on a node over a scripted Redis (fixture.h): stats summed
// over every shard, what Redis mode cannot do (admin.cc), and how pauses, webhooks and max
// attempts are written to every shard and reach every node (tube_config.cc). No process, no
// sleep: the test answers every call.
#include <gtest/gtest.h>

#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "broker/redis/fixture.h"
#include "broker/redis/layout.h"
#include "broker/redis/replies.h"
#include "store/record.h"

namespace delayq::broker::redis::testing {
namespace {

using Sessions = NodeTest;
using TubeConfig = NodeTest;

using delayq::redis::Reply;

// A tube's row of a stats answer: ready, urgent, reserved, delayed, buried, total, deletes,
// timeouts.
Reply stats_row(const std::string& tube, std::vector<std::int64_t> counts) {
  std::vector<Reply> row = {Reply::string(tube)};
  for (const auto n : counts) row.push_back(Reply::number(n));
  return reply::array(std::move(row));
}

// Answers an each call of stats: one ready job of "default" in every shard it names.
void answer_each_one_in(ScriptedRedis& redis, Call& call, std::size_t shards) {
  std::vector<Reply> each(shards, reply::ok({stats_row("default", {1, 0, 0, 0, 0, 1, 0, 0})}));
  redis.answer(call, reply::ok({reply::array(std::move(each))}));
}

// The oldest unanswered call of command `op` whose first argument is `first`.
std::optional<Call> take_named(ScriptedRedis& redis, const std::string& op,
                               const std::string& first) {
  for (auto it = redis.calls.begin(); it != redis.calls.end(); ++it) {
    const auto args = it->args();
    if (it->op() == op && !args.empty() && args[0] == first) {
      Call call = std::move(*it);
      redis.calls.erase(it);
      return call;
    }
  }
  return std::nullopt;
}

// --- admin.cc: stats, tubes, what Redis mode cannot do

TEST_F(Sessions, StatsSumsEveryShardAndCountsTheOtherLiveNodesWaiting) {
  // The heartbeat tells who is alive: this node and one other.
  Call heartbeat = take("heartbeat");
  redis->answer(
      heartbeat,
      reply::ok({reply::array({Reply::string(broker->node_name()), Reply::string("other:1:1")})}));
  settle();
  // One reserve waits here.
  auto worker = session();
  Outcome<broker::Job> waiting;
  worker->reserve({}, waiting.callback());
  settle();
  answer_all("probe",
             reply::ok({reply::array({Reply::string("")}), reply::array({Reply::number(0)})}));
  settle();

  auto s = session();

  auto admin = broker->open_admin();
  Outcome<ServerStats> got;
  admin->stats(got.callback());
  ASSERT_EQ(redis->count("each"), 1U) << "every shard in one call";
  std::map<std::uint32_t, Reply> rows = {
      {0, reply::ok({stats_row("default", {1, 1, 0, 2, 0, 10, 4, 1})})},
      {1, reply::ok({stats_row("emails", {2, 0, 1, 0, 1, 7, 2, 0})})},
      {2, reply::ok({stats_row("default", {3, 0, 1, 0, 0, 5, 1, 2}),
                     stats_row("gone", {0, 0, 0, 0, 0, 9, 9, 0})})},
      {3, reply::ok()}};
  ASSERT_EQ(redis->answer_each("stats",
                               [&](std::uint32_t shard, const std::vector<std::string>& args) {
                                 EXPECT_TRUE(args.empty()) << "every tube";
                                 return rows[shard];
                               }),
            kShards);
  settle();
  auto waiting_counts = take_named(*redis, "HGETALL", "dq:waiting");
  ASSERT_TRUE(waiting_counts.has_value());
  redis->answer(*waiting_counts,
                reply::array({Reply::string(broker->node_name()), Reply::string("5"),
                              Reply::string("other:1:1"), Reply::string("3"),
                              Reply::string("gone:1:1"), Reply::string("7")}));
  EXPECT_FALSE(got.done());
  settle();
  ASSERT_TRUE(got.done());
  ASSERT_TRUE(got.result->is_ok()) << got.result->status().to_string();
  const ServerStats& stats = got.result->value();
  EXPECT_EQ(stats.ready, 6U);
  EXPECT_EQ(stats.urgent, 1U);
  EXPECT_EQ(stats.reserved, 2U);
  EXPECT_EQ(stats.delayed, 2U);
  EXPECT_EQ(stats.buried, 1U);
  EXPECT_EQ(stats.total_jobs, 31U);
  EXPECT_EQ(stats.deletes, 16U);
  EXPECT_EQ(stats.job_timeouts, 3U);
  EXPECT_EQ(stats.tubes, 2U) << "default and emails; gone holds no job";
  EXPECT_EQ(stats.waiting, 1U + 3U) << "this node's own, and the live other's";
}

TEST_F(Sessions, StatsTubeOfAnUnknownTubeIsNotFoundButDefaultAlwaysExists) {
  broker::SessionOptions options;
  options.watch_default = false;  // nobody here uses or watches "default"
  auto s = broker->open_session(options);
  auto admin = broker->open_admin();
  Outcome<TubeStats> unknown;
  admin->stats_tube("old", unknown.callback());
  ASSERT_EQ(redis->answer_each(
                "stats",
                [&](std::uint32_t shard, const std::vector<std::string>& args) {
                  EXPECT_EQ(args, std::vector<std::string>{"old"});
                  // Shard 1 remembers the tube's counts, but holds none of its
                  // jobs.
                  return shard == 1 ? reply::ok({stats_row("old", {0, 0, 0, 0, 0, 5, 5, 0})})
                                    : reply::ok();
                }),
            kShards);
  settle();
  ASSERT_TRUE(unknown.done());
  EXPECT_EQ(unknown.result->status().code(), Code::kNotFound);

  Outcome<TubeStats> fallback;
  admin->stats_tube("default", fallback.callback());
  ASSERT_EQ(answer_each("stats", reply::ok()), kShards);
  settle();
  ASSERT_TRUE(fallback.done());
  ASSERT_TRUE(fallback.result->is_ok()) << fallback.result->status().to_string();
  EXPECT_EQ(fallback.result->value().name, "default");
  EXPECT_EQ(fallback.result->value().ready, 0U);
}

TEST_F(Sessions, StatsTubeSumsTheTubesShardsWithThisNodesUsers) {
  auto s = session();
  auto admin = broker->open_admin();
  Outcome<TubeStats> got;
  admin->stats_tube("default", got.callback());
  ASSERT_EQ(redis->answer_each(
                "stats",
                [&](std::uint32_t shard, const std::vector<std::string>&) {
                  return shard == 3 ? reply::ok()
                                    : reply::ok({stats_row("default", {2, 1, 1, 1, 0, 6, 3, 0})});
                }),
            kShards);
  settle();
  ASSERT_TRUE(got.done());
  ASSERT_TRUE(got.result->is_ok()) << got.result->status().to_string();
  EXPECT_EQ(got.result->value().ready, 6U);
  EXPECT_EQ(got.result->value().urgent, 3U);
  EXPECT_EQ(got.result->value().total_jobs, 18U);
  EXPECT_EQ(got.result->value().deletes, 9U);
  EXPECT_EQ(got.result->value().using_clients, 1U);
  EXPECT_EQ(got.result->value().watching_clients, 1U);
}

// A /metrics scrape or a dashboard's refresh reads every shard's stats: at 16,384 shards, a
// call a shard was 16,384 calls each time. Reads go in calls across slots (jobs.lua's each) of
// up to 64 shards of one primary, one at a time, each reading until its replies hold 112 rows.
TEST_F(Sessions, StatsOfManyShardsGoInCallsOf64OneAtATime) {
  constexpr std::uint32_t kMany = 200;
  open_node({}, kMany);
  auto admin = broker->open_admin();
  Outcome<TubeStats> got;
  admin->stats_tube("default", got.callback());
  std::vector<std::size_t> sizes;
  std::set<std::uint32_t> named;
  while (auto call = redis->take("each")) {
    EXPECT_EQ(redis->count("each"), 0U) << "two calls side by side";
    EXPECT_TRUE(call->commands[0][1].ends_with("_slots")) << call->commands[0][1];
    const auto shards = shards_named(*call, 4);
    ASSERT_FALSE(shards.empty());
    // Its keys are all of its first shard's: jobs.lua names the others' after them.
    EXPECT_EQ(call->keys(), shard_keys("dq", shards.front()));
    const auto args = call->args();
    EXPECT_EQ(std::vector<std::string>(args.begin(), args.begin() + 4),
              (std::vector<std::string>{"112", "1", "stats", "default"}));
    sizes.push_back(shards.size());
    named.insert(shards.begin(), shards.end());
    std::vector<Reply> each(shards.size(),
                            reply::ok({stats_row("default", {1, 0, 0, 0, 0, 1, 0, 0})}));
    redis->answer(*call, reply::ok({reply::array(std::move(each))}));
    settle();
  }
  EXPECT_EQ(sizes, (std::vector<std::size_t>{64, 64, 64, 8}));
  EXPECT_EQ(named.size(), kMany);
  EXPECT_EQ(redis->count("stats"), 0U);
  ASSERT_TRUE(got.done());
  ASSERT_TRUE(got.result->is_ok()) << got.result->status().to_string();
  EXPECT_EQ(got.result->value().ready, kMany);
}

// The shards a call did not read ('-1': its rows were spent) go in the read's next call, after
// those of the calls already waiting.
TEST_F(Sessions, ShardsACallAcrossSlotsLeftUnreadGoInTheReadsNextCall) {
  constexpr std::uint32_t kMany = 100;
  open_node({}, kMany);
  auto admin = broker->open_admin();
  Outcome<TubeStats> got;
  admin->stats_tube("default", got.callback());
  Call first = take("each");
  const auto shards = shards_named(first, 4);
  ASSERT_EQ(shards.size(), 64U);
  std::vector<Reply> each(14, reply::ok({stats_row("default", {1, 0, 0, 0, 0, 1, 0, 0})}));
  each.resize(64, Reply::string("-1"));
  redis->answer(first, reply::ok({reply::array(std::move(each))}));
  settle();
  Call second = take("each");
  EXPECT_EQ(shards_named(second, 4).size(), 36U);
  answer_each_one_in(*redis, second, 36);
  settle();
  Call third = take("each");
  EXPECT_EQ(shards_named(third, 4), std::vector<std::uint32_t>(shards.begin() + 14, shards.end()));
  EXPECT_FALSE(got.done());
  answer_each_one_in(*redis, third, 50);
  settle();
  ASSERT_TRUE(got.done());
  ASSERT_TRUE(got.result->is_ok()) << got.result->status().to_string();
  EXPECT_EQ(got.result->value().ready, 14U + 36U + 50U);
  EXPECT_EQ(redis->count("each") + redis->count("stats"), 0U);
}

// A shard the call could not read (not served by that primary: '-2') is asked by a call of its
// own; the stats wait for it.
TEST_F(Sessions, AShardAReadAcrossSlotsMissedIsAskedAlone) {
  constexpr std::uint32_t kMany = 100;
  open_node({}, kMany);
  auto admin = broker->open_admin();
  Outcome<TubeStats> got;
  admin->stats_tube("default", got.callback());
  Call first = take("each");
  const auto shards = shards_named(first, 4);
  ASSERT_EQ(shards.size(), 64U);
  std::vector<Reply> each(shards.size(), reply::ok());
  each[3] = Reply::string("-2");
  redis->answer(first, reply::ok({reply::array(std::move(each))}));
  settle();
  Call alone = take("stats");
  EXPECT_EQ(shard_of(alone), shards[3]);
  EXPECT_EQ(alone.args(), std::vector<std::string>{"default"});
  EXPECT_EQ(answer_each("stats", reply::ok()), 36U);
  settle();
  EXPECT_FALSE(got.done()) << "answered before the shard asked alone";
  redis->answer(alone, reply::ok({stats_row("default", {5, 0, 0, 0, 0, 5, 0, 0})}));
  settle();
  ASSERT_TRUE(got.done());
  ASSERT_TRUE(got.result->is_ok()) << got.result->status().to_string();
  EXPECT_EQ(got.result->value().ready, 5U);
}

// A read across slots that fails (Redis out of reach: no answer within its time) fails the
// stats at once, and its calls still waiting their turn are not sent: each would wait out its
// own time in turn.
TEST_F(Sessions, AReadAcrossSlotsThatFailsEndsAtOnceAndSendsNoMoreCalls) {
  constexpr std::uint32_t kMany = 200;
  open_node({}, kMany);
  auto admin = broker->open_admin();
  Outcome<TubeStats> got;
  admin->stats_tube("default", got.callback());
  Call first = take("each");
  EXPECT_EQ(redis->count("each"), 0U) << "the next calls sent before the first was answered";
  redis->fail(first, Status(Code::kIOError, "no reply within 10000 ms"));
  settle();
  ASSERT_TRUE(got.done());
  EXPECT_EQ(got.result->status().code(), Code::kIOError);
  EXPECT_EQ(redis->count("each") + redis->count("stats"), 0U);
  // The lane is free for the next read.
  Outcome<TubeStats> again;
  admin->stats_tube("default", again.callback());
  EXPECT_EQ(answer_each("stats", reply::ok({stats_row("default", {1, 0, 0, 0, 0, 1, 0, 0})})), 64U);
  settle();
  std::size_t rest = 0;
  for (std::size_t n = 1; n > 0; rest += n) {
    n = answer_each("stats", reply::ok());
    settle();
  }
  EXPECT_EQ(rest, 64U + 64U + 8U);
  ASSERT_TRUE(again.done());
  ASSERT_TRUE(again.result->is_ok()) << again.result->status().to_string();
  EXPECT_EQ(again.result->value().ready, 64U);
}

// Each read has a lane of its own: a scrape's read waits for no dashboard's (at a primary out of
// reach, each call waits out its time).
TEST_F(Sessions, TwoReadsAcrossSlotsAtOnceEachHaveACallUnderWay) {
  constexpr std::uint32_t kMany = 200;
  open_node({}, kMany);
  auto admin = broker->open_admin();
  Outcome<TubeStats> one;
  Outcome<TubeStats> two;
  admin->stats_tube("default", one.callback());
  admin->stats_tube("default", two.callback());
  EXPECT_EQ(redis->count("each"), 2U);
  Call first = take("each");
  redis->fail(first, Status(Code::kIOError, "no reply within 5000 ms"));
  settle();
  ASSERT_TRUE(one.done());
  EXPECT_FALSE(two.done());
  EXPECT_EQ(redis->count("each"), 1U) << "the other read's call";
}

TEST_F(Sessions, DueCountsListJobsAndBackupAreNotSupportedAndAnsweredOnTheExecutor) {
  auto s = session();
  auto admin = broker->open_admin();
  const std::size_t before = redis->calls.size();
  Outcome<broker::DueCounts> due;
  Outcome<broker::JobList> jobs;
  Outcome<broker::BackupResult> backup;
  admin->due_counts("default", {Due::after(Millis{1000})}, due.callback());
  admin->list_jobs("default", JobState::kDelayed, 10, jobs.callback());
  admin->backup("/tmp/backup", backup.callback());
  EXPECT_FALSE(due.done() || jobs.done() || backup.done()) << "answered inside the call";
  settle();
  ASSERT_TRUE(due.done() && jobs.done() && backup.done());
  EXPECT_EQ(due.result->status().code(), Code::kNotSupported);
  EXPECT_EQ(jobs.result->status().code(), Code::kNotSupported);
  EXPECT_EQ(backup.result->status().code(), Code::kNotSupported);
  EXPECT_EQ(redis->calls.size(), before) << "Redis asked nothing";
}

// --- pauses, webhooks, max attempts (admin.cc, tube_config.cc)

// Answers a load of the tubes' settings (three HGETALLs): each hash's fields and values.
void answer_conf(ScriptedRedis& redis, const std::vector<std::string>& webhooks,
                 const std::vector<std::string>& pauses,
                 const std::vector<std::string>& max_attempts,
                 const std::vector<std::string>& flows = {}) {
  const auto hash = [](const std::vector<std::string>& flat) {
    std::vector<Reply> out;
    for (const auto& s : flat) out.push_back(Reply::string(s));
    return reply::array(std::move(out));
  };
  for (const auto& [key, flat] :
       {std::pair{"dq:webhooks", &webhooks}, std::pair{"dq:pauses", &pauses},
        std::pair{"dq:max-attempts", &max_attempts}, std::pair{"dq:flows", &flows}}) {
    auto call = take_named(redis, "HGETALL", key);
    ASSERT_TRUE(call.has_value()) << "no HGETALL of " << key;
    redis.answer(*call, hash(*flat));
  }
}

// pause-tube default 30, with a client using the tube, past its first step: does the tube exist?
class Pausing : public TubeConfig {
 protected:
  void SetUp() override {
    TubeConfig::SetUp();
    s_ = session();
    admin_ = broker->open_admin();
    admin_->pause_tube("default", std::chrono::seconds(30), got_.callback());
    ASSERT_EQ(answer_each("stats", reply::ok()), kShards);
    settle();
  }
  void TearDown() override {
    admin_.reset();  // before the node closes
    s_.reset();
    TubeConfig::TearDown();
  }

  std::unique_ptr<broker::Session> s_;
  std::unique_ptr<broker::Admin> admin_;
  Outcome<TubeStats> got_;
};

TEST_F(Pausing, PauseTubeSendsPauseToEveryShardThenRecordsAndAnnouncesIt) {
  ASSERT_EQ(redis->count("pause"), kShards);
  while (auto call = redis->take("pause")) {
    EXPECT_EQ(call->args(), (std::vector<std::string>{"default", "30000"}));
    EXPECT_EQ(call->replicas, 1) << "a write";
    redis->answer(*call, reply::ok());
  }
  settle();
  const std::int64_t until = clock->now_unix_ms() + 30000;
  auto record = take_named(*redis, "HSET", "dq:pauses");
  ASSERT_TRUE(record.has_value());
  EXPECT_EQ(record->args(),
            (std::vector<std::string>{"dq:pauses", "default", std::to_string(until) + " 30 1"}));
  EXPECT_EQ(redis->count("PUBLISH"), 0U) << "announced before it is recorded";
  redis->answer(*record, Reply::number(1));
  settle();
  auto announce = take_named(*redis, "PUBLISH", "dq:events");
  ASSERT_TRUE(announce.has_value());
  EXPECT_EQ(announce->args(), (std::vector<std::string>{"dq:events", "c"}));
  ASSERT_EQ(answer_each("stats", reply::ok()), kShards);
  settle();
  ASSERT_TRUE(got_.done());
  ASSERT_TRUE(got_.result->is_ok()) << got_.result->status().to_string();
  EXPECT_EQ(got_.result->value().pause, std::chrono::seconds(30));
  EXPECT_EQ(got_.result->value().pause_left, Millis{30000});
  EXPECT_EQ(got_.result->value().pauses, 1U);
}

// A Redis over its maxmemory refuses the record of a pause (a plain HSET, where the scripts
// still run): the shards' pause is taken back and the pause refused as out of space, so no
// node's reserves are left reading the tube's shards as empty with nothing to end the pause.
TEST_F(Pausing, APauseRedisRefusesToRecordIsTakenBackAndRefused) {
  answer_all("pause", reply::ok());
  settle();
  auto record = take_named(*redis, "HSET", "dq:pauses");
  ASSERT_TRUE(record.has_value());
  redis->answer(*record, Reply::error("OOM command not allowed when used memory > 'maxmemory'."));
  settle();
  EXPECT_FALSE(got_.done()) << "answered before the shards' pause is taken back";
  ASSERT_EQ(redis->count("pause"), kShards);
  while (auto call = redis->take("pause")) {
    EXPECT_EQ(call->args(), (std::vector<std::string>{"default", "0"}));
    redis->answer(*call, reply::ok());
  }
  settle();
  ASSERT_TRUE(got_.done());
  EXPECT_EQ(got_.result->status().code(), Code::kNoSpace) << got_.result->status().to_string();
  EXPECT_EQ(redis->count("PUBLISH"), 0U);
  // Nor max attempts: refused with nothing changed.
  Outcome<std::uint32_t> attempts;
  admin_->set_max_attempts("default", 4, attempts.callback());
  auto attempts_record = take_named(*redis, "HSET", "dq:max-attempts");
  ASSERT_TRUE(attempts_record.has_value());
  redis->answer(*attempts_record,
                Reply::error("OOM command not allowed when used memory > 'maxmemory'."));
  settle();
  ASSERT_TRUE(attempts.done());
  EXPECT_EQ(attempts.result->status().code(), Code::kNoSpace);
  EXPECT_EQ(redis->count("max_attempts"), 0U);
}

TEST_F(TubeConfig, PauseTubeOfATubeThatDoesNotExistIsNotFoundAndPausesNothing) {
  auto s = session();
  auto admin = broker->open_admin();
  Outcome<TubeStats> got;
  admin->pause_tube("nosuch", std::chrono::seconds(30), got.callback());
  ASSERT_EQ(answer_each("stats", reply::ok()), kShards);
  settle();
  ASSERT_TRUE(got.done());
  EXPECT_EQ(got.result->status().code(), Code::kNotFound);
  EXPECT_EQ(redis->count("pause"), 0U);
}

// A reserve of "default" waiting, every shard found with none of its jobs, when another node
// pauses the tube for 7 s; then the shards' answers at a look after the pause.
class PauseEnd : public TubeConfig {
 protected:
  void SetUp() override {
    TubeConfig::SetUp();
    s_ = session();
    s_->reserve({}, got_.callback());
    settle();
    ASSERT_EQ(answer_all("probe", none()), kShards);
    settle();
    redis->publish("c");
    settle();
    const std::int64_t until = clock->now_unix_ms() + 7000;
    answer_conf(*redis, {}, {"default", std::to_string(until) + " 7 1"}, {});
    settle();
  }
  void TearDown() override {
    s_.reset();  // before the node closes
    TubeConfig::TearDown();
  }
  static Reply none() {
    return reply::ok({reply::array({Reply::string("")}), reply::array({Reply::number(0)})});
  }
  // Every shard probed; `shard` answers that it holds job `id`, and hands it to the reserve.
  void hand_out(std::uint32_t shard, JobId id) {
    ASSERT_EQ(redis->count("probe"), kShards);
    const std::string head = "1024:1799999999000:" + std::to_string(id);
    while (auto probe = redis->take("probe")) {
      answer_probe(*probe, {shard_of(*probe) == shard ? head : ""});
    }
    settle();
    Call reserve = take("reserve");
    EXPECT_EQ(shard_of(reserve), shard);
    redis->answer(reserve, reserved(ready_job(id), {""}));
    settle();
    ASSERT_TRUE(got_.done());
    ASSERT_TRUE(got_.result->is_ok()) << got_.result->status().to_string();
    EXPECT_EQ(got_.result->value().view.id, id);
  }

  std::unique_ptr<broker::Session> s_;
  Outcome<broker::Job> got_;
};

TEST_F(PauseEnd, APausedTubeIsSkippedByReservesUntilItsPauseEnds) {
  // A job made ready meanwhile is left alone.
  redis->publish_shard(1, "r dq:{1} default other:1:1 1024:1799999999000:5");
  settle();
  EXPECT_EQ(redis->count("reserve"), 0U);
  EXPECT_EQ(redis->count("probe"), 0U);
  clock->advance(Millis{6999});
  EXPECT_EQ(redis->count("reserve"), 0U);
  EXPECT_EQ(redis->count("probe"), 0U);
  EXPECT_FALSE(got_.done());
  // The pause ends: every shard may hold jobs the reserves skipped.
  clock->advance(Millis{1});
  hand_out(1, 5);
}

// A shard whose primary's clock runs behind this node's still reads the tube as paused when the
// node looks at the pause's end: the node looks again a second later, and ten seconds later.
TEST_F(PauseEnd, APauseEndIsLookedAtAgainForShardsWhoseClockRunsBehind) {
  clock->advance(Millis{7000});
  // Every shard still says none: their clock has not reached the end.
  ASSERT_EQ(answer_all("probe", none()), kShards);
  settle();
  clock->advance(Millis{999});
  EXPECT_EQ(redis->count("probe"), 0U);
  EXPECT_FALSE(got_.done());
  clock->advance(Millis{1});
  hand_out(2, 6);
}

Webhook a_webhook() {
  Webhook webhook;
  webhook.url = "https://example.com/jobs";
  webhook.concurrency = 3;
  return webhook;
}

TEST_F(TubeConfig, SetWebhookRecordsItAnnouncesItAndRunsTheWebhooksHandler) {
  int changed = 0;
  broker->on_webhooks_changed([&changed] { ++changed; });
  auto s = session();
  auto admin = broker->open_admin();
  Outcome<Webhook> got;
  admin->set_webhook("emails", a_webhook(), got.callback());
  auto record = take_named(*redis, "HSET", "dq:webhooks");
  ASSERT_TRUE(record.has_value());
  EXPECT_EQ(record->args(), (std::vector<std::string>{"dq:webhooks", "emails",
                                                      store::encode_webhook(a_webhook())}));
  settle();
  EXPECT_EQ(changed, 0) << "before Redis has it";
  EXPECT_TRUE(broker->webhooks().empty());
  redis->answer(*record, Reply::number(1));
  settle();
  EXPECT_EQ(changed, 1);
  ASSERT_TRUE(got.done());
  ASSERT_TRUE(got.result->is_ok()) << got.result->status().to_string();
  EXPECT_EQ(got.result->value(), a_webhook());
  ASSERT_EQ(broker->webhooks().size(), 1U);
  EXPECT_EQ(broker->webhooks()[0].first, "emails");
  auto announce = take_named(*redis, "PUBLISH", "dq:events");
  ASSERT_TRUE(announce.has_value());
  EXPECT_EQ(announce->args()[1], "c");
}

TEST_F(TubeConfig, AConfMessageReloadsWebhooksPausesMaxAttemptsAndFlowControl) {
  int changed = 0;
  broker->on_webhooks_changed([&changed] { ++changed; });
  redis->publish("c");
  settle();
  EXPECT_EQ(redis->count("HGETALL"), 4U);
  const std::int64_t until = clock->now_unix_ms() + 60000;
  const std::string encoded = store::encode_webhook(a_webhook());
  FlowSettings flow;
  flow.group_concurrency = 2;
  answer_conf(*redis, {"emails", encoded}, {"default", std::to_string(until) + " 60 3"},
              {"default", "5"}, {"default", store::encode_flow(flow)});
  settle();
  EXPECT_EQ(changed, 1);
  ASSERT_EQ(broker->webhooks().size(), 1U);
  EXPECT_EQ(broker->webhooks()[0], std::pair(std::string("emails"), a_webhook()));

  auto s = session();

  auto admin = broker->open_admin();
  Outcome<TubeStats> got;
  admin->stats_tube("default", got.callback());
  ASSERT_EQ(answer_each("stats", reply::ok()), kShards);
  settle();
  ASSERT_TRUE(got.done());
  ASSERT_TRUE(got.result->is_ok()) << got.result->status().to_string();
  EXPECT_EQ(got.result->value().pauses, 3U);
  EXPECT_EQ(got.result->value().pause, std::chrono::seconds(60));
  EXPECT_EQ(got.result->value().pause_left, Millis{60000});
  EXPECT_EQ(got.result->value().max_attempts, 5U);
  EXPECT_EQ(got.result->value().flow, flow);

  // The same settings again: the webhooks did not change, and their handler is not run.
  redis->publish("c");
  settle();
  answer_conf(*redis, {"emails", encoded}, {"default", std::to_string(until) + " 60 3"},
              {"default", "5"}, {"default", store::encode_flow(flow)});
  settle();
  EXPECT_EQ(changed, 1);
}

TEST_F(TubeConfig, SetMaxAttemptsRecordsItThenTellsEveryShardAndZeroRemovesIt) {
  auto s = session();
  auto admin = broker->open_admin();
  Outcome<std::uint32_t> set;
  admin->set_max_attempts("default", 4, set.callback());
  auto record = take_named(*redis, "HSET", "dq:max-attempts");
  ASSERT_TRUE(record.has_value());
  EXPECT_EQ(record->args(), (std::vector<std::string>{"dq:max-attempts", "default", "4"}));
  EXPECT_EQ(redis->count("max_attempts"), 0U);
  redis->answer(*record, Reply::number(1));
  settle();
  ASSERT_EQ(redis->count("max_attempts"), kShards);
  while (auto call = redis->take("max_attempts")) {
    EXPECT_EQ(call->args(), (std::vector<std::string>{"default", "4"}));
    EXPECT_EQ(call->replicas, 1) << "a write";
    redis->answer(*call, reply::ok());
  }
  settle();
  ASSERT_TRUE(set.done());
  EXPECT_EQ(set.result->value(), 4U);
  EXPECT_TRUE(take_named(*redis, "PUBLISH", "dq:events").has_value());

  Outcome<std::uint32_t> removed;
  admin->set_max_attempts("default", 0, removed.callback());
  auto erase = take_named(*redis, "HDEL", "dq:max-attempts");
  ASSERT_TRUE(erase.has_value());
  EXPECT_EQ(erase->args(), (std::vector<std::string>{"dq:max-attempts", "default"}));
  redis->answer(*erase, Reply::number(1));
  settle();
  answer_all("max_attempts", reply::ok());
  settle();
  ASSERT_TRUE(removed.done());
  EXPECT_EQ(removed.result->value(), 0U);
}

}  // namespace
}  // namespace delayq::broker::redis::testing
