// layout_test.cc — the record bytes the node and jobs.lua share: a put's tail behind the head
// that jobs.lua packs (MessagePack, cmsgpack) reads back as the job that was put.
#include "broker/redis/layout.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "redis/slot.h"

namespace delayq::broker::redis {
namespace {

// What jobs.lua's cmsgpack.pack(2, 1, 0, 1024, 1764170000123.5, 0, 1764169990123.25, 10000)
// makes in Redis 7.0 (layout 2, flags, state delayed, priority, due, deadline, created, delay),
// as redis-cli printed it: unsigned integers and two doubles.
const std::string kDelayedHead(
    "\x02\x01\x00\xcd\x04\x00\xcb\x42\x79\xac\x0b\x9e\x6f\xb8\x00\x00\xcb\x42\x79\xac\x0b"
    "\x9b\xfe\xb4\x00\xcd\x27\x10",
    28);

// cmsgpack.pack(2, 0, 1, 0, 5, 0, 5, 0): a ready job, every value a one-byte integer.
const std::string kReadyHead("\x02\x00\x01\x00\x05\x00\x05\x00", 8);

// A shard's channel shares its keys' slot: the shard's calls may SPUBLISH to it.
TEST(RedisLayoutTest, AShardsChannelIsInItsKeysSlot) {
  for (const std::uint32_t shard : {0U, 7U, 127U, 4095U}) {
    const auto channel = shard_channel("dq", shard);
    EXPECT_EQ(channel, "dq:{" + std::to_string(shard) + "}:events");
    for (const auto& key : shard_keys("dq", shard)) {
      EXPECT_EQ(delayq::redis::key_slot(channel), delayq::redis::key_slot(key)) << key;
    }
  }
}

// The keys a call adds are its shard's keys, in order, then the node's answers' key if asked,
// for any prefix and shard of every width, within the size said; a template made for one shard
// serves another of the same width.
TEST(RedisLayoutTest, TheKeysACallAddsAreItsShardsKeysAndItsAnswersKey) {
  for (const std::string prefix : {"dq", "a-much-longer-prefix_of_64_bytes_at_most"}) {
    ShardKeys writer(prefix, "host:17:42+h");
    for (const std::uint32_t shard : {0U, 7U, 10U, 99U, 128U, 16383U, 4096U, 5U}) {
      for (const bool answers : {false, true}) {
        std::vector<std::string> keys = shard_keys(prefix, shard);
        EXPECT_EQ(keys.size(), kShardKeyCount);
        if (answers) keys.push_back(shard_base(prefix, shard) + ":ans:host:17:42+h");
        delayq::redis::Command added{"FCALL"};
        writer.add(shard, answers, added);
        added.arg("after");
        delayq::redis::Command named{"FCALL"};
        for (const auto& key : keys) named.arg(key);
        named.arg("after");
        std::string got;
        added.encode(got);
        std::string want;
        named.encode(want);
        EXPECT_EQ(got, want) << prefix << " " << shard << " " << answers;
        EXPECT_EQ(added.size(), keys.size() + 2);
        EXPECT_EQ(shard_slot(shard), delayq::redis::key_slot(keys.back())) << shard;
        EXPECT_EQ(writer.size(shard, answers),
                  want.size() - std::string_view("*26\r\n$5\r\nFCALL\r\n$5\r\nafter\r\n").size())
            << prefix << " " << shard;
      }
    }
  }
}

TEST(RedisLayoutTest, APutsTailBehindItsHeadReadsBackAsTheJob) {
  const std::string bytes = kDelayedHead + new_record_tail(60, "emails", "order-17", "user-3",
                                                           std::string("body\0bytes", 10));
  auto record = decode_record(77, bytes);
  ASSERT_TRUE(record.is_ok()) << record.status().message();
  const JobView& job = record.value().view;
  EXPECT_EQ(job.id, 77u);
  EXPECT_EQ(job.state, JobState::kDelayed);
  EXPECT_EQ(job.priority, 1024u);
  EXPECT_EQ(job.due_unix_ms, 1764170000123);
  EXPECT_EQ(job.deadline_unix_ms, 0);
  EXPECT_EQ(job.created_unix_ms, 1764169990123);
  EXPECT_EQ(job.delay_ms, 10000);
  EXPECT_EQ(job.ttr, std::chrono::seconds(60));
  EXPECT_EQ(job.tube, "emails");
  EXPECT_EQ(job.key, "order-17");
  EXPECT_EQ(job.group, "user-3");
  EXPECT_TRUE(job.attached);
  EXPECT_EQ(job.counters.reserves, 0u);
  EXPECT_EQ(job.counters.timeouts, 0u);
  EXPECT_EQ(job.counters.releases, 0u);
  EXPECT_EQ(job.counters.buries, 0u);
  EXPECT_EQ(job.counters.kicks, 0u);
  EXPECT_EQ(record.value().holder, "");
  EXPECT_EQ(record.value().body, std::string("body\0bytes", 10));
}

TEST(RedisLayoutTest, AnEmptyKeyGroupAndBodyReadBackEmpty) {
  auto record = decode_record(1, kReadyHead + new_record_tail(1, "default", "", "", ""));
  ASSERT_TRUE(record.is_ok());
  EXPECT_EQ(record.value().view.state, JobState::kReady);
  EXPECT_FALSE(record.value().view.attached);
  EXPECT_EQ(record.value().view.tube, "default");
  EXPECT_EQ(record.value().view.key, "");
  EXPECT_EQ(record.value().view.group, "");
  EXPECT_EQ(record.value().body, "");
}

TEST(RedisLayoutTest, ATruncatedRecordIsCorrupt) {
  const std::string bytes = kReadyHead + new_record_tail(1, "default", "k", "", "x");
  // Cut inside the strings (the body alone may be any length, so cut before it).
  auto record = decode_record(9, bytes.substr(0, bytes.size() - 4));
  ASSERT_FALSE(record.is_ok());
  EXPECT_EQ(record.status().code(), Code::kCorruption);
}

// Every cut before the body's start is refused, none read past the bytes (ASan checks that);
// so is a record of another layout.
TEST(RedisLayoutTest, EveryCutBeforeTheBodyAndAnotherLayoutAreCorrupt) {
  const std::string tail = new_record_tail(120, "emails", std::string(40, 'k'), "g", "");
  const std::string bytes = kDelayedHead + tail;
  ASSERT_TRUE(decode_record(1, bytes).is_ok());
  for (std::size_t size = 0; size < bytes.size(); ++size) {
    EXPECT_EQ(decode_record(1, bytes.substr(0, size)).status().code(), Code::kCorruption) << size;
  }
  std::string other = bytes;
  other[0] = '\x01';  // a layout 1 record starts with its flags, 0 or 1
  EXPECT_EQ(decode_record(1, other).status().code(), Code::kCorruption);
}

TEST(RedisHeadTest, ParsesWhatJobsLuaWrites) {
  EXPECT_EQ(Head::parse("").kind, Head::Kind::kNone);
  const Head head = Head::parse("1024:1764170000123:4611686018427387");
  ASSERT_TRUE(head.known());
  EXPECT_EQ(head.priority, 1024u);
  EXPECT_EQ(head.created_unix_ms, 1764170000123);
  EXPECT_EQ(head.id, 4611686018427387u);
  EXPECT_EQ(head.text(), "1024:1764170000123:4611686018427387");
  EXPECT_EQ(Head::parse("4294967295:0:1").priority, 4294967295u);
  for (const char* unknown : {"?", "5", "5:1", "5:1:", ":1:5", "5::5", "5:1:x", "x:1:5", "5:1:5 ",
                              "5:1:5:", "4294967296:1:1", "-1:2:3", "1:-2:3", "+1:2:3"}) {
    EXPECT_EQ(Head::parse(unknown).kind, Head::Kind::kUnknown) << unknown;
  }
}

TEST(RedisHeadTest, ThePriorityFirstThenTheAgeThenTheId) {
  const Head a = Head::parse("5:1000:900");
  const Head b = Head::parse("7:10:100");
  const Head c = Head::parse("5:1000:901");
  const Head older = Head::parse("5:999:5000");  // another shard's: a larger id, put earlier
  EXPECT_TRUE(a.before(b));
  EXPECT_FALSE(b.before(a));
  EXPECT_TRUE(a.before(c));
  EXPECT_FALSE(a.before(a));
  EXPECT_TRUE(older.before(a));
  EXPECT_FALSE(a.before(older));
  // Neither none nor unknown is before anything, nor anything before them.
  for (const Head& other : {Head::parse(""), Head::parse("?")}) {
    EXPECT_FALSE(a.before(other));
    EXPECT_FALSE(other.before(a));
  }
}

TEST(RedisHeadTest, AMessageStandsUnlessABetterJobIsKnown) {
  const Head none = Head::parse("");
  const Head unknown = Head::parse("?");
  const Head good = Head::parse("1:7:50");
  const Head bad = Head::parse("9:7:10");
  EXPECT_EQ(after_message(none, bad).text(), "9:7:10");
  EXPECT_EQ(after_message(unknown, bad).text(), "9:7:10");
  EXPECT_EQ(after_message(bad, good).text(), "1:7:50");
  EXPECT_EQ(after_message(good, bad).text(), "1:7:50");  // taken elsewhere? a reserve will learn
  // An older node's message names no job: the shard must be asked.
  EXPECT_EQ(after_message(good, unknown).kind, Head::Kind::kUnknown);
}

TEST(RedisHeadTest, AnAnswerReplacesWhatIsKnownUnlessAMessageCameMeanwhile) {
  const Head none = Head::parse("");
  const Head unknown = Head::parse("?");
  const Head good = Head::parse("1:7:50");
  const Head bad = Head::parse("9:7:10");
  // Nothing came meanwhile: the answer is the shard as the call left it, better or worse.
  EXPECT_EQ(after_answer(good, bad, false).text(), "9:7:10");
  EXPECT_EQ(after_answer(good, none, false).kind, Head::Kind::kNone);
  EXPECT_EQ(after_answer(unknown, none, false).kind, Head::Kind::kNone);
  // A message came: which is newer cannot be told, so the better stands.
  EXPECT_EQ(after_answer(good, bad, true).text(), "1:7:50");
  EXPECT_EQ(after_answer(bad, good, true).text(), "1:7:50");
  EXPECT_EQ(after_answer(good, none, true).text(), "1:7:50");
  EXPECT_EQ(after_answer(none, bad, true).text(), "9:7:10");
  EXPECT_EQ(after_answer(unknown, good, true).kind, Head::Kind::kUnknown);
}

// --- the turns nodes take at a job another node made ready

TEST(RedisTurnsTest, EachNodeHasOneTurnInAnOrderEveryNodeComputesAlikeWithoutTheMaker) {
  const std::set<std::string> nodes = {"a+h", "b+h", "c+h", "d+h"};
  const std::string head = "1024:1799999999000:42";
  std::vector<std::string> order;
  std::optional<std::string> turn = next_turn(nodes, 3, "b+h", head, nullptr);
  while (turn) {
    ASSERT_LT(order.size(), nodes.size()) << "a node had two turns";
    order.push_back(*turn);
    turn = next_turn(nodes, 3, "b+h", head, &order.back());
  }
  std::vector<std::string> sorted = order;
  std::sort(sorted.begin(), sorted.end());
  EXPECT_EQ(sorted, (std::vector<std::string>{"a+h", "c+h", "d+h"})) << "the maker has no turn";
  // A node that knows another too (it joined since): the others' order stands around it.
  std::set<std::string> more = nodes;
  more.insert("e+h");
  std::vector<std::string> seen;
  for (turn = next_turn(more, 3, "b+h", head, nullptr); turn;
       turn = next_turn(more, 3, "b+h", head, &seen.back())) {
    seen.push_back(*turn);
  }
  std::erase(seen, "e+h");
  EXPECT_EQ(seen, order);
}

TEST(RedisTurnsTest, JobsStartTheirRoundsAtEveryNodeInTurn) {
  const std::set<std::string> nodes = {"a+h", "b+h", "c+h"};
  std::map<std::string, int> first;
  for (int id = 1; id <= 300; ++id) {
    const std::string head = "1024:1799999999000:" + std::to_string(id);
    ++first[*next_turn(nodes, static_cast<std::uint32_t>(id % 7), "", head, nullptr)];
  }
  ASSERT_EQ(first.size(), 3U);
  for (const auto& [node, count] : first) EXPECT_GT(count, 60) << node;
}

TEST(RedisTurnsTest, NoTurnWithNoOtherNode) {
  EXPECT_FALSE(next_turn({"a+h"}, 0, "a+h", "1:2:3", nullptr).has_value());
  const std::string a = "a+h";
  EXPECT_FALSE(next_turn({"a+h"}, 0, "b+h", "1:2:3", &a).has_value());
}

}  // namespace
}  // namespace delayq::broker::redis
