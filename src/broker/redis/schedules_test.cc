// schedules_test.cc — recurring schedules in Redis mode (schedules.h) over a scripted Redis
// (fixture.h): what the owner of a schedule's shard does when it takes the lease and finds a
// step whose end nobody saw, when its write meets another's, when a run put ahead is reached
// late, and when the shard's channel says a schedule changed. Each step reads the record first.
// The answers are the test's; the Lua side of the same (marks, withdrawals) runs against real
// Redis in the contract suite (tests/broker/schedule_contract_test.cc) and the kill -9 test
// (tests/protocol/schedule_test.cc).
#include "broker/redis/schedules.h"

#include <gtest/gtest.h>

#include "broker/redis/fixture.h"
#include "broker/redis/layout.h"

namespace delayq::broker::redis::testing {
namespace {

using delayq::redis::Reply;

constexpr std::int64_t kNow = 1'800'000'000'000;  // the ManualClock's start

class ScheduleTest : public NodeTest {
 protected:
  // The node takes every shard; each shard's schedules are read (answered by answer_loads()).
  void own_every_shard() {
    Call heartbeat = take("heartbeat");
    redis->answer(heartbeat, reply::ok({reply::array({Reply::string(broker->node_name())})}));
    settle();
    take("PUBLISH");  // the node announced itself
    grant_acquires();
    ASSERT_EQ(broker->owned_shards(), kShards);
  }
  // Answers each shard's read of its schedules: `stored` in its name's shard, none elsewhere.
  void answer_loads(const std::string& name, const StoredSchedule& stored) {
    const std::uint32_t home = shard_of_name("", name, kShards);
    std::size_t loads = 0;
    while (auto call = redis->take("schedule_all")) {
      ++loads;
      std::vector<Reply> pairs;
      if (shard_of(*call) == home) {
        pairs = {Reply::string(name), Reply::string(encode_stored(stored))};
      }
      redis->answer(*call, reply::ok({reply::array(std::move(pairs))}));
    }
    EXPECT_EQ(loads, kShards);
    settle();
  }
  // Answers the read a step makes first with `stored`.
  void answer_read(const StoredSchedule& stored) {
    Call read = take("schedule_get");
    EXPECT_EQ(read.args(), (std::vector<std::string>{"tick"}));
    redis->answer(read, reply::ok({Reply::string(encode_stored(stored))}));
    settle();
  }
  // A one-second schedule of tube "ticks" at version `version`, its run put ahead at `ahead`.
  static StoredSchedule every_second(std::uint64_t version, std::int64_t ahead) {
    StoredSchedule stored;
    stored.version = version;
    stored.generation = "g1";
    stored.record.definition.name = "tick";
    stored.record.definition.tube = "ticks";
    stored.record.definition.every = std::chrono::seconds(1);
    stored.record.definition.start_unix_ms = kNow - 10'000;
    stored.record.state.cursor_unix_ms = ahead;
    stored.record.state.ahead_unix_ms = ahead;
    stored.record.state.last_run_unix_ms = ahead - 1000;
    stored.record.state.runs = 10;
    return stored;
  }
  // The record a schedule_save call writes, decoded.
  static StoredSchedule written(const Call& save) {
    auto stored = decode_stored(save.args().at(0), save.args().at(2));
    EXPECT_TRUE(stored.is_ok()) << stored.status().to_string();
    return stored.is_ok() ? stored.value() : StoredSchedule{};
  }
};

TEST_F(ScheduleTest, AStepWhoseEndNobodySawIsPutAgainThenClearedWhenTheLeaseIsTaken) {
  own_every_shard();
  StoredSchedule stored = every_second(7, kNow + 1000);
  stored.intent = {{kNow + 1000, kNow + 1000}};
  answer_loads("tick", stored);
  answer_read(stored);  // due at once: the step reads the record first

  // Its run put again, marked with the version that holds the intent, in the run's own shard.
  Call put = take("putrun");
  const std::string key = schedule::run_key("tick", kNow + 1000);
  EXPECT_EQ(shard_of(put), shard_of_name("ticks", key, kShards));
  const auto args = put.args();
  ASSERT_GE(args.size(), 6U);
  EXPECT_EQ(std::vector<std::string>(args.begin() + 2, args.begin() + 6),
            (std::vector<std::string>{"tick", "g1", std::to_string(kNow + 1000), "7"}));
  EXPECT_EQ(redis->count("schedule_save"), 0U) << "the intent cleared before its runs are put";
  redis->answer(put, reply::ok({Reply::string("marked")}));
  settle();

  // Then the record without it, over the version read.
  Call save = take("schedule_save");
  EXPECT_EQ(shard_of(save), shard_of_name("", "tick", kShards));
  EXPECT_EQ(save.args().at(1), "7");
  EXPECT_EQ(save.args().at(3), "0") << "the owner's own write is not announced";
  const StoredSchedule cleared = written(save);
  EXPECT_EQ(cleared.version, 8U);
  EXPECT_TRUE(cleared.intent.empty());
  EXPECT_EQ(cleared.record.state, stored.record.state);
  redis->answer(save, reply::ok());
  settle();
  // The run put ahead is not due yet: nothing more until it is.
  EXPECT_EQ(redis->count("putrun") + redis->count("schedule_save"), 0U);
}

TEST_F(ScheduleTest, AtItsInstantTheNextRunIsWrittenAsIntentPutThenCleared) {
  own_every_shard();
  answer_loads("tick", every_second(3, kNow + 1000));
  EXPECT_EQ(redis->count("schedule_save") + redis->count("schedule_get"), 0U);
  clock->advance(std::chrono::milliseconds(1000));
  settle();
  answer_read(every_second(3, kNow + 1000));

  Call intent = take("schedule_save");
  EXPECT_EQ(intent.args().at(1), "3");
  const StoredSchedule next = written(intent);
  EXPECT_EQ(next.version, 4U);
  ASSERT_EQ(next.intent.size(), 1U);
  EXPECT_EQ(next.intent[0].instant_unix_ms, kNow + 2000);
  EXPECT_EQ(next.record.state.ahead_unix_ms, kNow + 2000);
  EXPECT_EQ(next.record.state.last_run_unix_ms, kNow + 1000);
  EXPECT_EQ(redis->count("putrun"), 0U) << "a run put before its intent is written";
  redis->answer(intent, reply::ok());
  settle();

  Call put = take("putrun");
  EXPECT_EQ(put.args().at(4), std::to_string(kNow + 2000));
  EXPECT_EQ(put.args().at(5), "4");
  redis->answer(put, reply::ok({Reply::string("put"), Reply::number(42)}));
  settle();
  Call clear = take("schedule_save");
  EXPECT_EQ(clear.args().at(1), "4");
  EXPECT_TRUE(written(clear).intent.empty());
  EXPECT_EQ(written(clear).version, 5U);
}

TEST_F(ScheduleTest, AStepWhoseWriteMeetsAnotherPutsNothingAndReadsTheScheduleAgain) {
  own_every_shard();
  answer_loads("tick", every_second(3, kNow + 1000));
  clock->advance(std::chrono::milliseconds(1000));
  settle();
  answer_read(every_second(3, kNow + 1000));
  Call intent = take("schedule_save");
  redis->answer(intent, reply::code("conflict", "the schedule changed meanwhile"));
  settle();
  EXPECT_EQ(redis->count("putrun"), 0U);
  // Stepped again at once, from what the other write left: another node moved it on.
  answer_read(every_second(9, kNow + 2000));
  EXPECT_EQ(redis->count("schedule_save"), 0U) << "nothing to do before its run put ahead";
  clock->advance(std::chrono::milliseconds(1000));
  settle();
  answer_read(every_second(9, kNow + 2000));
  // Its version is what the next write names.
  Call next = take("schedule_save");
  EXPECT_EQ(next.args().at(1), "9");
}

TEST_F(ScheduleTest, ARunPutAheadReachedLateIsWithdrawnThenSettledByTheMisfireRule) {
  own_every_shard();
  // The node was away: the run put ahead, due a second after the start, is reached 3.5 s late.
  clock->advance(std::chrono::milliseconds(4500));
  answer_loads("tick", every_second(3, kNow + 1000));
  answer_read(every_second(3, kNow + 1000));

  Call unrun = take("unrun");
  const std::string key = schedule::run_key("tick", kNow + 1000);
  EXPECT_EQ(shard_of(unrun), shard_of_name("ticks", key, kShards));
  EXPECT_EQ(unrun.args(), (std::vector<std::string>{"tick", "g1", std::to_string(kNow + 1000), "3",
                                                    "ticks", key, "1"}));
  EXPECT_EQ(redis->count("schedule_save"), 0U) << "planned before the withdrawal's answer";
  redis->answer(unrun, reply::ok({Reply::string("deleted")}));
  settle();

  // Missed: the withdrawn run's instant and the two after it (more than 1 s late). misfire
  // "once": one run for them (the latest, due now); then the one on time, and the next ahead.
  Call intent = take("schedule_save");
  const StoredSchedule next = written(intent);
  EXPECT_EQ(next.intent, (std::vector<schedule::Run>{{kNow + 3000, kNow + 4500},
                                                     {kNow + 4000, kNow + 4000},
                                                     {kNow + 5000, kNow + 5000}}));
  EXPECT_EQ(next.record.state.misfires, 2U);
  EXPECT_EQ(next.record.state.runs, 12U) << "10, less the withdrawn one, and three";
}

TEST_F(ScheduleTest, ARunPutAheadThatAWorkerTookIsCountedAsRun) {
  own_every_shard();
  clock->advance(std::chrono::milliseconds(4500));
  answer_loads("tick", every_second(3, kNow + 1000));
  answer_read(every_second(3, kNow + 1000));
  Call unrun = take("unrun");
  redis->answer(unrun, reply::ok({Reply::string("taken")}));
  settle();
  // Its instant ran; of the two missed after it, one run.
  const StoredSchedule next = written(take("schedule_save"));
  EXPECT_EQ(next.intent, (std::vector<schedule::Run>{{kNow + 3000, kNow + 4500},
                                                     {kNow + 4000, kNow + 4000},
                                                     {kNow + 5000, kNow + 5000}}));
  EXPECT_EQ(next.record.state.misfires, 1U);
  EXPECT_EQ(next.record.state.runs, 13U);
}

TEST_F(ScheduleTest, AChangeAnnouncedOnItsShardsChannelIsReadAgainByTheOwner) {
  own_every_shard();
  answer_loads("tick", every_second(3, kNow + 60'000));
  const std::uint32_t home = shard_of_name("", "tick", kShards);
  redis->publish_shard(home, "s dq:{" + std::to_string(home) + "} tick");
  settle();
  Call read = take("schedule_get");
  EXPECT_EQ(read.args(), (std::vector<std::string>{"tick"}));
  // Gone: it is stepped no more.
  redis->answer(read, reply::ok({Reply::string("")}));
  settle();
  clock->advance(std::chrono::milliseconds(61'000));
  settle();
  EXPECT_EQ(redis->count("schedule_save") + redis->count("putrun"), 0U);
}

TEST_F(ScheduleTest, AStoredRecordReadsBackExactly) {
  StoredSchedule stored = every_second(12, kNow + 1000);
  stored.intent = {{kNow + 1000, kNow + 1200}, {kNow + 2000, kNow + 2000}};
  stored.record.definition.body = std::string("a\0b:c", 5);
  auto back = decode_stored("tick", encode_stored(stored));
  ASSERT_TRUE(back.is_ok()) << back.status().to_string();
  EXPECT_EQ(back.value().version, 12U);
  EXPECT_EQ(back.value().generation, "g1");
  EXPECT_EQ(back.value().intent, stored.intent);
  EXPECT_EQ(back.value().record, stored.record);
  EXPECT_EQ(decode_stored("tick", "x:g1:0:").code(), Code::kCorruption);
  EXPECT_EQ(decode_stored("tick", "3:g1:1:5,").code(), Code::kCorruption);
}

}  // namespace
}  // namespace delayq::broker::redis::testing
