// session_test.cc — a client's calls on a node over a scripted Redis (fixture.h): which jobs.lua
// call each makes, on which shard, with or without a replica's WAIT, how answers, refusals and
// lost answers come back (calls.cc, session.cc). Server-wide calls are in admin_test.cc. No
// process, no sleep: the test answers every call.
#include <gtest/gtest.h>

#include <boost/asio/post.hpp>
#include <map>
#include <optional>

#include "base/names.h"
#include "broker/redis/fixture.h"
#include "broker/redis/layout.h"
#include "broker/redis/replies.h"

namespace delayq::broker::redis::testing {
namespace {

using Calls = NodeTest;
using Sessions = NodeTest;

using delayq::redis::Reply;

Reply text(const std::string& s) {
  return Reply::string(s);
}

// A put of `body` into the session's used tube, ready at once.
broker::PutRequest put_of(const std::string& body) {
  broker::PutRequest request;
  request.priority = 100;
  request.ttr = std::chrono::seconds(30);
  request.body = body;
  return request;
}

// A single put's answer: {ok, id, due, replaced, now, served}.
Reply put_answer(JobId id, std::int64_t due, JobId replaced, std::int64_t now) {
  return reply::ok({Reply::number(static_cast<std::int64_t>(id)), Reply::number(due),
                    Reply::number(static_cast<std::int64_t>(replaced)), Reply::number(now),
                    reply::array({})});
}

// One put of a putmany's answer: {ok, id, due, replaced}.
Reply one_put(JobId id, std::int64_t due) {
  return reply::ok(
      {Reply::number(static_cast<std::int64_t>(id)), Reply::number(due), Reply::number(0)});
}

// A key of `tube` whose jobs live in `shard`.
std::string key_in_shard(const std::string& tube, std::uint32_t shard, std::uint32_t shards) {
  for (int i = 0;; ++i) {
    std::string key = "k" + std::to_string(i);
    if (shard_of_name(tube, key, shards) == shard) return key;
  }
}

// Completes a write whose WAIT saw `acked` replicas (ScriptedRedis::answer says they all did).
void answer_waited(boost::asio::io_context& io, Call& call, Reply reply, std::int64_t acked) {
  std::vector<Reply> replies = {reply::array({std::move(reply), reply::array({})}),
                                Reply::number(acked)};
  boost::asio::post(io, [done = std::move(call.done), replies = std::move(replies)]() mutable {
    done(std::move(replies));
  });
}

// --- calls.cc: puts gathered per turn, WAIT, lost answers, error replies

TEST_F(Calls, PutsMadeInOneTurnGoAsOnePutmanyToOneShard) {
  auto s = session();
  Outcome<broker::PutResult> a;
  Outcome<broker::PutResult> b;
  Outcome<broker::PutResult> c;
  s->put(put_of("a"), a.callback());
  s->put(put_of("b"), b.callback());
  s->put(put_of("c"), c.callback());
  EXPECT_EQ(redis->count("put") + redis->count("putmany"), 0U) << "a put sent inside the call";
  settle();
  EXPECT_EQ(redis->count("put"), 0U);
  ASSERT_EQ(redis->count("putmany"), 1U);
  Call many = take("putmany");
  const auto args = many.args();
  ASSERT_EQ(args.size(), 3U + 3 * 9) << "shards shard n, then 9 arguments a put";
  EXPECT_EQ(args[0], std::to_string(kShards));
  EXPECT_EQ(args[1], std::to_string(shard_of(many)));
  EXPECT_EQ(args[2], "3");
  for (std::size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(args[3 + 9 * i], "default");
    EXPECT_EQ(args[3 + 9 * i + 1], "100");
  }
  const std::uint32_t shard = shard_of(many);
  const std::int64_t now = clock->now_unix_ms();
  redis->answer(many,
                reply::ok({Reply::number(now), one_put(4 + shard, now), one_put(8 + shard, now),
                           one_put(12 + shard, now), reply::array({})}));
  settle();
  ASSERT_TRUE(a.done() && b.done() && c.done());
  ASSERT_TRUE(a.result->is_ok()) << a.result->status().to_string();
  EXPECT_EQ(a.result->value().job.id, 4 + shard);
  EXPECT_EQ(b.result->value().job.id, 8 + shard);
  EXPECT_EQ(c.result->value().job.id, 12 + shard);
  EXPECT_EQ(c.result->value().job.created_unix_ms, now) << "the call's present, given to each";
}

TEST_F(Calls, KeylessPutsOfTheNextTurnGoToTheNextShard) {
  auto s = session();
  Outcome<broker::PutResult> first;
  Outcome<broker::PutResult> second;
  s->put(put_of("a"), first.callback());
  settle();
  s->put(put_of("b"), second.callback());
  settle();
  Call one = take("put");
  Call two = take("put");
  EXPECT_EQ(shard_of(two), (shard_of(one) + 1) % kShards);
}

// Deletes by id wait for the end of the turn too: those of one shard go as one erasemany, each
// answered with its own part; a lone one goes as erase.
TEST_F(Calls, DeletesByIdMadeInOneTurnGoAsOneEraseManyPerShard) {
  auto s = session();
  auto t = session();
  Outcome<JobId> a;
  Outcome<JobId> b;
  Outcome<JobId> c;
  s->erase(broker::JobRef::by_id(4), a.callback());
  t->erase(broker::JobRef::by_id(8), b.callback());
  s->erase(broker::JobRef::by_id(5), c.callback());
  EXPECT_EQ(redis->count("erase") + redis->count("erasemany"), 0U) << "sent before the turn's end";
  settle();
  Call many = take("erasemany");
  EXPECT_EQ(shard_of(many), 0U);
  const std::string holder_s = many.args().size() > 1 ? many.args()[1] : "";
  const std::string holder_t = many.args().size() > 5 ? many.args()[5] : "";
  EXPECT_NE(holder_s, holder_t);
  EXPECT_EQ(many.args(),
            (std::vector<std::string>{"2", holder_s, "4", "", "0", holder_t, "8", "", "0"}));
  Call lone = take("erase");
  EXPECT_EQ(shard_of(lone), 1U);
  EXPECT_EQ(lone.args(), (std::vector<std::string>{holder_s, "5", "", ""}));
  redis->answer(
      many,
      reply::ok({reply::array({reply::ok({text("4")}), reply::code("notfound", "no such job")})}));
  settle();
  ASSERT_TRUE(a.done() && a.result->is_ok()) << a.result->status().to_string();
  EXPECT_EQ(a.result->value(), 4U);
  ASSERT_TRUE(b.done());
  EXPECT_EQ(b.result->status().code(), Code::kNotFound);
  EXPECT_FALSE(c.done());
  redis->answer(lone, reply::ok({text("5")}));
  settle();
  ASSERT_TRUE(c.done() && c.result->is_ok());
}

// A session's calls take effect in the order made: a call after a delete gathered this turn
// sends the delete first.
TEST_F(Calls, ACallAfterAGatheredDeleteSendsTheDeleteFirst) {
  auto s = session();
  Outcome<JobId> erased;
  Outcome<broker::Job> peeked;
  s->erase(broker::JobRef::by_id(6), erased.callback());
  s->peek(broker::JobRef::by_id(6), true, peeked.callback());
  std::vector<std::string> ops;
  for (const auto& call : redis->calls) {
    if (call.op() == "erase" || call.op() == "peek") ops.push_back(call.op());
  }
  EXPECT_EQ(ops, (std::vector<std::string>{"erase", "peek"}));
}

TEST_F(Calls, ALonePutGoesAsPutAndItsAnswerBecomesThePutResult) {
  auto s = session();
  Outcome<broker::PutResult> got;
  s->put(put_of("hello"), got.callback());
  settle();
  EXPECT_EQ(redis->count("putmany"), 0U);
  Call put = take("put");
  const auto args = put.args();
  ASSERT_EQ(args.size(), 2U + 9);
  EXPECT_EQ(args[0], std::to_string(kShards));
  EXPECT_EQ(args[1], std::to_string(shard_of(put)));
  // tube pri delay absolute replace key group attachment tail
  EXPECT_EQ(std::vector<std::string>(args.begin() + 2, args.begin() + 10),
            (std::vector<std::string>{"default", "100", "0", "0", "0", "", "", ""}));
  EXPECT_EQ(args[10], new_record_tail(30, "default", "", "", "hello"));
  const std::int64_t now = clock->now_unix_ms();
  const JobId id = 40 + shard_of(put);
  redis->answer(put, put_answer(id, now, 0, now));
  EXPECT_FALSE(got.done());
  settle();
  ASSERT_TRUE(got.done());
  ASSERT_TRUE(got.result->is_ok()) << got.result->status().to_string();
  const broker::PutResult& r = got.result->value();
  EXPECT_TRUE(r.inserted);
  EXPECT_EQ(r.replaced, 0U);
  EXPECT_EQ(r.job.id, id);
  EXPECT_EQ(r.job.state, JobState::kReady);
  EXPECT_EQ(r.job.due_unix_ms, now);
  EXPECT_EQ(r.job.created_unix_ms, now);
  EXPECT_EQ(r.job.tube, "default");
  EXPECT_EQ(r.job.priority, 100U);
  EXPECT_EQ(r.job.ttr, std::chrono::seconds(30));
  EXPECT_EQ(r.job.delay_ms, 0);
}

TEST_F(Calls, ADelayedPutWithReplaceIsAnsweredDelayedWithTheJobItReplaced) {
  auto s = session();
  Outcome<broker::PutResult> got;
  auto request = put_of("x");
  request.due = Due::after(Millis{5000});
  request.key = "order-1";
  request.replace = true;
  s->put(request, got.callback());
  settle();
  Call put = take("put");
  const auto args = put.args();
  ASSERT_EQ(args.size(), 11U);
  EXPECT_EQ(args[4], "5000");
  EXPECT_EQ(args[6], "1") << "replace";
  EXPECT_EQ(args[7], "order-1");
  const std::int64_t now = clock->now_unix_ms();
  const JobId id = 20 + shard_of(put);
  redis->answer(put, put_answer(id, now + 5000, 8 + shard_of(put), now));
  settle();
  ASSERT_TRUE(got.done());
  ASSERT_TRUE(got.result->is_ok()) << got.result->status().to_string();
  EXPECT_EQ(got.result->value().job.state, JobState::kDelayed);
  EXPECT_EQ(got.result->value().job.due_unix_ms, now + 5000);
  EXPECT_EQ(got.result->value().job.delay_ms, 5000);
  EXPECT_EQ(got.result->value().job.key, "order-1");
  EXPECT_EQ(got.result->value().replaced, 8 + shard_of(put));
}

TEST_F(Calls, KeyedAndGroupedPutsGoOnTheirOwnToTheShardOfTheirName) {
  auto s = session();
  const std::string key = key_in_shard("default", 3, kShards);
  const std::string group = key_in_shard("default", 1, kShards);
  auto keyed = put_of("k");
  keyed.key = key;
  auto grouped = put_of("g");
  grouped.group = group;
  Outcome<broker::PutResult> a;
  Outcome<broker::PutResult> b;
  Outcome<broker::PutResult> c;
  s->put(put_of("plain"), a.callback());
  s->put(keyed, b.callback());
  s->put(grouped, c.callback());
  settle();
  ASSERT_EQ(redis->count("put"), 3U) << "each alone in its shard";
  std::map<std::uint32_t, std::vector<std::string>> by_shard;
  while (auto put = redis->take("put")) by_shard[shard_of(*put)] = put->args();
  ASSERT_EQ(by_shard.size(), 3U) << "the keyless put went to shard 1 or 3";
  ASSERT_TRUE(by_shard.contains(3));
  EXPECT_EQ(by_shard[3][7], key);
  ASSERT_TRUE(by_shard.contains(1));
  EXPECT_EQ(by_shard[1][8], group);
}

TEST_F(Calls, AKeyedPutWhoseKeyIsTakenAnswersTheJobHoldingIt) {
  auto s = session();
  auto request = put_of("x");
  request.key = "order-1";
  Outcome<broker::PutResult> got;
  s->put(request, got.callback());
  settle();
  Call put = take("put");
  EXPECT_EQ(shard_of(put), shard_of_name("default", "order-1", kShards));
  JobView holder = ready_job(16 + shard_of(put));
  holder.key = "order-1";
  Reply exists = reply::job(holder, clock->now_unix_ms());
  exists.elements[0] = text("exists");
  redis->answer(put, exists);
  settle();
  ASSERT_TRUE(got.done());
  ASSERT_TRUE(got.result->is_ok()) << got.result->status().to_string();
  EXPECT_FALSE(got.result->value().inserted);
  EXPECT_EQ(got.result->value().job.id, holder.id);
  EXPECT_EQ(got.result->value().job.key, "order-1");
}

// A shard that says the tube lives elsewhere (flow control pinned it there since this node
// read the settings): the put goes to that shard, with its id taken there, and the node reads
// the settings again.
TEST_F(Calls, APutAnsweredMovedGoesToTheTubesHomeShardAndTheSettingsAreReadAgain) {
  auto s = session();
  Outcome<broker::PutResult> got;
  s->put(put_of("x"), got.callback());
  settle();
  Call put = take("put");
  const std::uint32_t home = (shard_of(put) + 1) % kShards;
  const auto reloads = redis->count("HGETALL");
  redis->answer(put, reply::array({text("moved"), text(std::to_string(home))}));
  settle();
  EXPECT_EQ(redis->count("HGETALL"), reloads + 4) << "the tubes' settings are read again";
  Call again = take("put");
  EXPECT_EQ(shard_of(again), home);
  EXPECT_EQ(again.args()[1], std::to_string(home)) << "the id is taken in the home shard";
  EXPECT_FALSE(got.done());
  redis->answer(again, put_answer(kShards + home, clock->now_unix_ms(), 0, clock->now_unix_ms()));
  settle();
  ASSERT_TRUE(got.done());
  ASSERT_TRUE(got.result->is_ok()) << got.result->status().to_string();
  EXPECT_EQ(got.result->value().job.id, kShards + home);
}

TEST_F(Calls, APutItsChecksRefuseNeverReachesRedisAndIsAnsweredOnTheExecutor) {
  auto s = session();
  auto request = put_of("x");
  request.tube = std::string(kDefaultMaxNameBytes + 1, 'a');
  Outcome<broker::PutResult> got;
  s->put(request, got.callback());
  EXPECT_FALSE(got.done()) << "answered inside the call";
  settle();
  ASSERT_TRUE(got.done());
  EXPECT_EQ(got.result->status().code(), Code::kInvalidArgument);
  EXPECT_EQ(redis->count("put"), 0U);
  EXPECT_EQ(redis->count("putmany"), 0U);
}

TEST_F(Calls, WritesWaitForAReplicaAndReadsDoNot) {
  auto s = session();
  Outcome<broker::PutResult> put;
  Outcome<JobId> erased;
  Outcome<broker::Job> peeked;
  s->put(put_of("x"), put.callback());
  settle();
  s->erase(broker::JobRef::by_id(6), erased.callback());
  s->peek(broker::JobRef::by_id(7), true, peeked.callback());
  EXPECT_EQ(take("put").replicas, 1);
  EXPECT_EQ(take("erase").replicas, 1);
  EXPECT_EQ(take("peek").replicas, 0);
}

TEST_F(Calls, NoWriteWaitsWhenWaitForReplicaIsOff) {
  RedisBrokerOptions options;
  options.wait_for_replica = false;
  open_node(options);
  auto s = session();
  Outcome<JobId> erased;
  s->erase(broker::JobRef::by_id(6), erased.callback());
  settle();
  EXPECT_EQ(take("erase").replicas, 0);
}

TEST_F(Calls, AWaitThatSawNoReplicaTurnsWaitOffForThatPrimaryForFiveSeconds) {
  auto s = session();
  const auto erase_waits = [&](JobId id) {
    Outcome<JobId> erased;
    s->erase(broker::JobRef::by_id(id), erased.callback());
    settle();
    Call call = take("erase");
    const int replicas = call.replicas;
    redis->answer(call, reply::ok({text(std::to_string(id))}));
    settle();
    return replicas;
  };
  Outcome<JobId> first;
  s->erase(broker::JobRef::by_id(6), first.callback());
  settle();
  Call call = take("erase");
  ASSERT_EQ(call.replicas, 1);
  answer_waited(io, call, reply::ok({text("6")}), 0);
  settle();
  ASSERT_TRUE(first.done());
  ASSERT_TRUE(first.result->is_ok()) << "answered all the same";
  EXPECT_EQ(first.result->value(), 6U);
  EXPECT_EQ(erase_waits(10), 0);
  EXPECT_EQ(erase_waits(11), 0) << "every shard of that primary";
  clock->advance(Millis{4999});
  EXPECT_EQ(erase_waits(14), 0);
  clock->advance(Millis{1});
  EXPECT_EQ(erase_waits(18), 1);
}

TEST_F(Calls, ACallWhoseAnswerIsLostFailsWithIOErrorAndItsShardIsAskedAgain) {
  auto waiting = session();
  Outcome<broker::Job> w;
  waiting->reserve({}, w.callback());
  settle();
  ASSERT_EQ(
      answer_all("probe", reply::ok({reply::array({text("")}), reply::array({Reply::number(0)})})),
      kShards);
  settle();
  auto s = session();
  Outcome<JobId> erased;
  s->erase(broker::JobRef::by_id(6), erased.callback());
  settle();
  Call erase = take("erase");
  EXPECT_EQ(shard_of(erase), 2U);
  redis->fail(erase, Status(Code::kTimedOut, "no reply within 10000 ms"));
  settle();
  ASSERT_TRUE(erased.done());
  EXPECT_EQ(erased.result->status().code(), Code::kIOError) << "a store's error, not a timeout";
  // The erase may have run: what it made ready here, this node would not hear of.
  Outcome<broker::Job> next;
  s->reserve({}, next.callback());
  settle();
  ASSERT_EQ(redis->count("probe"), 1U);
  Call probe = take("probe");
  EXPECT_EQ(shard_of(probe), 2U);
  EXPECT_FALSE(w.done());
}

// A call that got no answer in time is asked about once Redis answers (`lost`), every second
// until it does. Found not to have run, it is voided there (it never runs after), and the node
// keeps the void ten minutes before its next call to the shard lets jobs.lua forget it.
TEST_F(Calls, ACallThatGotNoAnswerIsAskedAboutEverySecondAndIfItHadNotRunIsForgottenLater) {
  auto s = session();
  Outcome<JobId> erased;
  s->erase(broker::JobRef::by_id(6), erased.callback());
  settle();
  Call erase = take("erase");
  std::string number = erase.tag().substr(1);  // the shard's first: "+<number>"
  redis->fail(erase, Status(Code::kTimedOut, "no reply within 10000 ms"));
  settle();
  Call lost = take("lost");
  EXPECT_EQ(shard_of(lost), 2U);
  EXPECT_EQ(lost.args(), std::vector<std::string>{number});
  redis->fail(lost, Status(Code::kTimedOut, "no reply within 10000 ms"));
  settle();
  EXPECT_EQ(redis->count("lost"), 0U) << "asked again at once";
  clock->advance(Millis{999});
  EXPECT_EQ(redis->count("lost"), 0U);
  clock->advance(Millis{1});
  Call again = take("lost");
  EXPECT_EQ(again.args(), std::vector<std::string>{number});
  EXPECT_EQ(again.tag(), "") << "not numbered: asked again, it answers the same";
  // Another call to the shard fails meanwhile: asked about once this ask is answered.
  Outcome<JobId> other;
  s->erase(broker::JobRef::by_id(22), other.callback());
  settle();
  Call second = take("erase");
  const std::string second_number = second.tag().substr(0, second.tag().find(','));
  redis->fail(second, Status(Code::kTimedOut, "no reply within 10000 ms"));
  settle();
  EXPECT_EQ(redis->count("lost"), 0U) << "one ask at a time per shard";
  redis->answer(again, reply::ok({reply::array({text("void")})}));
  settle();
  Call third = take("lost");
  EXPECT_EQ(third.args(), std::vector<std::string>{second_number});
  redis->answer(third, reply::ok({reply::array({text("void")})}));
  settle();
  EXPECT_EQ(redis->count("release"), 0U);
  // Whether a call to shard 2 since the last look (the node's own, then an erase) lets it go.
  const auto forgotten = [&](JobId id) {
    Outcome<JobId> next;
    s->erase(broker::JobRef::by_id(id), next.callback());
    settle();
    bool told = false;
    while (!redis->calls.empty()) {
      Call call = std::move(redis->calls.front());
      redis->calls.pop_front();
      told = told || (call.script() && call.keys().size() >= 23 && shard_of(call) == 2 &&
                      call.tag().find("," + number) != std::string::npos);
    }
    return told;
  };
  EXPECT_FALSE(forgotten(10)) << "forgotten at once";
  clock->advance(std::chrono::minutes(9));
  EXPECT_FALSE(forgotten(14)) << "forgotten within 10 minutes";
  clock->advance(std::chrono::minutes(1) + std::chrono::seconds(5));  // the next 5-second look
  EXPECT_TRUE(forgotten(18)) << "kept past 10 minutes";
}

// An ask about lost calls names at most 100 of them; the rest go in the next, sent as it is
// answered.
TEST_F(Calls, LostCallsAreAskedAboutAHundredAtATime) {
  auto s = session();
  std::vector<Outcome<JobId>> erased(150);
  for (std::size_t i = 0; i < erased.size(); ++i) {
    s->erase(broker::JobRef::by_id(2 + 4 * i), erased[i].callback());
    settle();
  }
  while (redis->count("erase") > 0) {
    Call erase = take("erase");
    redis->fail(erase, Status(Code::kTimedOut, "no reply within 10000 ms"));
  }
  settle();
  const auto void_all = [&](Call& ask) {
    std::vector<Reply> each(ask.args().size(), text("void"));
    redis->answer(ask, reply::ok({reply::array(std::move(each))}));
    settle();
  };
  // The first to fail is asked about at once; the 149 that failed meanwhile wait for its answer.
  Call first = take("lost");
  EXPECT_EQ(first.args().size(), 1U);
  EXPECT_EQ(redis->count("lost"), 0U) << "one ask at a time per shard";
  void_all(first);
  Call second = take("lost");
  EXPECT_EQ(second.args().size(), 100U);
  void_all(second);
  Call third = take("lost");
  EXPECT_EQ(third.args().size(), 49U);
  void_all(third);
  EXPECT_EQ(redis->count("lost"), 0U);
}

// The answers a call says the node has are at most 256 (jobs.lua forgets them in one HDEL of
// as many arguments); more wait for the shard's next calls.
TEST_F(Calls, ACallLetsAShardForgetAtMost256AnswersTheRestGoWithTheNext) {
  auto s = session();
  const auto erase_tag = [&](JobId id) {
    Outcome<JobId> one;
    s->erase(broker::JobRef::by_id(id), one.callback());
    settle();
    return take("erase").tag();
  };
  // 300 calls to shard 2 under way at once, then all answered.
  std::vector<Outcome<JobId>> erased(300);
  for (std::size_t i = 0; i < erased.size(); ++i) {
    s->erase(broker::JobRef::by_id(2 + 4 * i), erased[i].callback());
    settle();
  }
  EXPECT_EQ(answer_all("erase", reply::ok({text("2")})), 300U);
  settle();
  const auto forgotten = [](const std::string& tag) {
    return std::count(tag.begin(), tag.end(), ',');
  };
  EXPECT_EQ(forgotten(erase_tag(2)), 256);
  EXPECT_EQ(forgotten(erase_tag(6)), 300 - 256);
}

// A call that changes something is numbered, with its node's kept answers as a 24th key; the
// shard's next numbered call says which answers came back, so that jobs.lua forgets them. A
// call that changes nothing is not numbered (asked again as it is if its answer is lost).
TEST_F(Calls, CallsThatChangeSomethingAreNumberedAndTheNextSaysWhichAnswersCameBack) {
  auto s = session();
  Outcome<JobId> first;
  s->erase(broker::JobRef::by_id(6), first.callback());
  settle();
  Call erase = take("erase");
  ASSERT_FALSE(erase.tag().empty());
  EXPECT_EQ(erase.tag().front(), '+') << "the shard's first: its kept answers live a minute";
  const std::string number = erase.tag().substr(1);
  EXPECT_EQ(number.find(','), std::string::npos) << "nothing answered yet: " << number;
  ASSERT_EQ(erase.keys().size(), 24U);
  EXPECT_EQ(erase.keys().back(), erase.keys().front().substr(0, erase.keys().front().size() - 4) +
                                     ":ans:" + erase.caller());
  redis->answer(erase, reply::ok({text("6")}));
  settle();
  ASSERT_TRUE(first.done() && first.result->is_ok());
  Outcome<broker::Job> peeked;
  s->peek(broker::JobRef::by_id(6), true, peeked.callback());
  settle();
  Call peek = take("peek");
  EXPECT_EQ(peek.tag(), "");
  EXPECT_EQ(peek.keys().size(), 23U);
  Outcome<JobId> second;
  s->erase(broker::JobRef::by_id(14), second.callback());  // the same shard (2 of 4)
  settle();
  Call again = take("erase");
  const std::string tag = again.tag();
  EXPECT_EQ(tag.substr(tag.find(',')), "," + number) << tag;
  EXPECT_NE(tag.substr(0, tag.find(',')), number);
  EXPECT_NE(tag.front(), '+') << "said again within 10 s";
  Outcome<JobId> third;
  s->erase(broker::JobRef::by_id(9), third.callback());  // shard 1
  settle();
  EXPECT_EQ(take("erase").tag().find(','), std::string::npos)
      << "answers of shard 2 told to 2 only";
  redis->answer(again, reply::ok({text("14")}));
  clock->advance(std::chrono::seconds(10));
  Outcome<JobId> fourth;
  s->erase(broker::JobRef::by_id(18), fourth.callback());
  settle();
  EXPECT_EQ(take("erase").tag().front(), '+') << "10 s on: the shard's answers live a minute more";
}

TEST_F(Calls, AnOomReplyIsNoSpaceAndAnyOtherErrorReplyAnIOError) {
  auto s = session();
  Outcome<broker::PutResult> put;
  s->put(put_of("x"), put.callback());
  settle();
  Call call = take("put");
  redis->answer(call, Reply::error("OOM command not allowed when used memory > 'maxmemory'."));
  Outcome<JobId> erased;
  s->erase(broker::JobRef::by_id(6), erased.callback());
  settle();
  Call erase = take("erase");
  redis->answer(erase, Reply::error("ERR Error running script"));
  settle();
  ASSERT_TRUE(put.done());
  EXPECT_EQ(put.result->status().code(), Code::kNoSpace);
  ASSERT_TRUE(erased.done());
  EXPECT_EQ(erased.result->status().code(), Code::kIOError);
}

TEST_F(Calls, NotFoundAndConflictRepliesKeepTheirCodes) {
  auto s = session();
  Outcome<JobId> erased;
  Outcome<JobView> buried;
  s->erase(broker::JobRef::by_id(6), erased.callback());
  s->bury(7, std::nullopt, buried.callback());
  Call erase = take("erase");
  Call bury = take("bury");
  redis->answer(erase, reply::code("notfound", "no such job"));
  redis->answer(bury, reply::code("conflict", "the job is reserved by another client"));
  settle();
  ASSERT_TRUE(erased.done() && buried.done());
  EXPECT_EQ(erased.result->status().code(), Code::kNotFound);
  EXPECT_EQ(buried.result->status().code(), Code::kConflict);
}

// --- session.cc: job calls on the job's shard, holding, peeks, kicks, groups

// A job reserved by the caller, as reserve_job and touch answer it.
JobView reserved_view(JobView job, std::int64_t now) {
  job.state = JobState::kReserved;
  job.deadline_unix_ms = now + job.ttr.count() * 1000;
  job.counters.reserves = 1;
  return job;
}

TEST_F(Sessions, EraseByIdGoesToTheJobsShardAndAnswersItsId) {
  auto s = session();
  Outcome<JobId> erased;
  s->erase(broker::JobRef::by_id(23), erased.callback());
  settle();
  Call call = take("erase");
  EXPECT_EQ(shard_of(call), 23 % kShards);
  const auto args = call.args();
  ASSERT_EQ(args.size(), 4U);
  EXPECT_TRUE(args[0].starts_with(broker->node_name() + "/")) << args[0];
  EXPECT_EQ(std::vector<std::string>(args.begin() + 1, args.end()),
            (std::vector<std::string>{"23", "", ""}));
  redis->answer(call, reply::ok({text("23")}));
  settle();
  ASSERT_TRUE(erased.done());
  ASSERT_TRUE(erased.result->is_ok()) << erased.result->status().to_string();
  EXPECT_EQ(erased.result->value(), 23U);
}

TEST_F(Sessions, EraseByKeyGoesToTheShardOfItsTubeAndKey) {
  auto s = session();
  Outcome<JobId> erased;
  const std::string key = key_in_shard("emails", 2, kShards);
  s->erase(broker::JobRef::by_key("emails", key), erased.callback());
  Call call = take("erase");
  EXPECT_EQ(shard_of(call), 2U);
  const auto args = call.args();
  ASSERT_EQ(args.size(), 4U);
  EXPECT_EQ(std::vector<std::string>(args.begin() + 1, args.end()),
            (std::vector<std::string>{"", "emails", key}));
  redis->answer(call, reply::ok({text("38")}));
  settle();
  ASSERT_TRUE(erased.done());
  EXPECT_EQ(erased.result->value(), 38U);
}

TEST_F(Sessions, ReleaseBuryAndTouchGoToTheJobsShardAndAnswerWithTheJob) {
  auto s = session();
  Outcome<JobView> released;
  Outcome<JobView> buried;
  Outcome<JobView> touched;
  broker::ReleaseRequest release;
  release.id = 6;
  release.priority = 5;
  release.delay = Millis{2000};
  s->release(release, released.callback());
  s->bury(7, 9, buried.callback());
  s->touch(9, touched.callback());
  Call r = take("release");
  Call b = take("bury");
  Call t = take("touch");
  EXPECT_EQ(shard_of(r), 2U);
  EXPECT_EQ(shard_of(b), 3U);
  EXPECT_EQ(shard_of(t), 1U);
  const auto tail = [](const Call& call) {
    const auto args = call.args();
    return std::vector<std::string>(args.begin() + 1, args.end());
  };
  EXPECT_EQ(tail(r), (std::vector<std::string>{"6", "5", "2000", ""}));
  EXPECT_EQ(tail(b), (std::vector<std::string>{"7", "9"}));
  EXPECT_EQ(tail(t), (std::vector<std::string>{"9"}));
  const std::int64_t now = clock->now_unix_ms();
  JobView six = ready_job(6);
  six.state = JobState::kDelayed;
  six.priority = 5;
  JobView seven = ready_job(7);
  seven.state = JobState::kBuried;
  seven.priority = 9;
  redis->answer(r, reply::job(six, now));
  redis->answer(b, reply::job(seven, now));
  redis->answer(t, reply::job(reserved_view(ready_job(9), now), now));
  settle();
  ASSERT_TRUE(released.done() && buried.done() && touched.done());
  ASSERT_TRUE(released.result->is_ok()) << released.result->status().to_string();
  EXPECT_EQ(released.result->value().id, 6U);
  EXPECT_EQ(released.result->value().state, JobState::kDelayed);
  EXPECT_EQ(buried.result->value().id, 7U);
  EXPECT_EQ(buried.result->value().state, JobState::kBuried);
  EXPECT_EQ(touched.result->value().id, 9U);
  EXPECT_EQ(touched.result->value().state, JobState::kReserved);
}

TEST_F(Sessions, ReserveJobHoldsTheJobAndTheSessionsEndReleasesWhatItStillHolds) {
  auto s = session();
  const std::int64_t now = clock->now_unix_ms();
  std::string holder;
  for (const JobId id : {JobId{10}, JobId{13}, JobId{7}}) {
    Outcome<broker::Job> got;
    s->reserve_job(id, got.callback());
    Call call = take("reserve_job");
    EXPECT_EQ(shard_of(call), id % kShards);
    EXPECT_EQ(call.args()[1], std::to_string(id));
    holder = call.args()[0];
    redis->answer(call, reply::job(reserved_view(ready_job(id), now), now));
    settle();
    ASSERT_TRUE(got.done());
    ASSERT_TRUE(got.result->is_ok()) << got.result->status().to_string();
    EXPECT_EQ(got.result->value().view.state, JobState::kReserved);
  }
  // One the session finished is no longer its to give back.
  Outcome<JobId> erased;
  s->erase(broker::JobRef::by_id(7), erased.callback());
  settle();
  Call erase = take("erase");
  redis->answer(erase, reply::ok({text("7")}));
  settle();
  ASSERT_TRUE(erased.done());
  s.reset();
  ASSERT_EQ(redis->count("release"), 2U);
  std::map<JobId, std::vector<std::string>> released;
  while (auto call = redis->take("release")) {
    EXPECT_EQ(shard_of(*call), to_int(call->args()[1]) % kShards);
    released[static_cast<JobId>(to_int(call->args()[1]))] = call->args();
  }
  EXPECT_EQ(released[10], (std::vector<std::string>{holder, "10", "", "", "1"}));
  EXPECT_EQ(released[13], (std::vector<std::string>{holder, "13", "", "", "1"}));
}

TEST_F(Sessions, AJobReserveJobDidNotGetIsNotReleasedAtTheSessionsEnd) {
  auto s = session();
  Outcome<broker::Job> got;
  s->reserve_job(10, got.callback());
  Call call = take("reserve_job");
  redis->answer(call, reply::code("conflict", "reserved by another client"));
  settle();
  ASSERT_TRUE(got.done());
  EXPECT_EQ(got.result->status().code(), Code::kConflict);
  s.reset();
  EXPECT_EQ(redis->count("release"), 0U);
}

// Answers a peek_next of "default" in `state` on every shard, asked in calls across slots (each):
// each shard's job, or none. How many shards it answered.
std::size_t answer_peeks(ScriptedRedis& redis, const std::string& state,
                         const std::map<std::uint32_t, JobView>& jobs, std::int64_t now) {
  EXPECT_EQ(redis.count("peek_next"), 0U) << "a call a shard";
  return redis.answer_each(
      "peek_next", [&](std::uint32_t shard, const std::vector<std::string>& args) {
        EXPECT_EQ(args, (std::vector<std::string>{"default", state}));
        const auto it = jobs.find(shard);
        return it == jobs.end() ? reply::code("notfound", "none") : reply::job(it->second, now);
      });
}

TEST_F(Sessions, PeekNextOfReadyTakesTheBestPriorityThenTheOldestThenTheLowestId) {
  auto s = session();
  Outcome<broker::Job> got;
  s->peek_next("default", JobState::kReady, got.callback());
  const std::int64_t now = clock->now_unix_ms();
  JobView urgent_old = ready_job(5);  // shard 1: the oldest, of a worse priority
  urgent_old.priority = 10;
  urgent_old.created_unix_ms = now - 9000;
  JobView later = ready_job(18);  // shard 2
  later.priority = 5;
  later.created_unix_ms = now - 1000;
  JobView same_time = ready_job(7);  // shard 3: as old as 18, a lower id
  same_time.priority = 5;
  same_time.created_unix_ms = now - 1000;
  ASSERT_EQ(answer_peeks(*redis, "ready", {{1, urgent_old}, {2, later}, {3, same_time}}, now),
            kShards);
  settle();
  ASSERT_TRUE(got.done());
  ASSERT_TRUE(got.result->is_ok()) << got.result->status().to_string();
  EXPECT_EQ(got.result->value().view.id, 7U);
}

TEST_F(Sessions, PeekNextOfReadyTakesAnOlderJobOverALowerId) {
  auto s = session();
  Outcome<broker::Job> got;
  s->peek_next("default", JobState::kReady, got.callback());
  const std::int64_t now = clock->now_unix_ms();
  JobView low_id = ready_job(4);  // shard 0
  low_id.created_unix_ms = now - 500;
  JobView older = ready_job(9);  // shard 1
  older.created_unix_ms = now - 800;
  ASSERT_EQ(answer_peeks(*redis, "ready", {{0, low_id}, {1, older}}, now), kShards);
  settle();
  ASSERT_TRUE(got.done());
  EXPECT_EQ(got.result->value().view.id, 9U);
}

TEST_F(Sessions, PeekNextOfBuriedTakesTheLowestIdAndOfDelayedTheEarliestDue) {
  auto s = session();
  const std::int64_t now = clock->now_unix_ms();
  Outcome<broker::Job> buried;
  s->peek_next("default", JobState::kBuried, buried.callback());
  JobView three = ready_job(3);
  three.state = JobState::kBuried;
  three.created_unix_ms = now;  // the newest: age does not count
  JobView five = ready_job(5);
  five.state = JobState::kBuried;
  JobView ten = ready_job(10);
  ten.state = JobState::kBuried;
  ASSERT_EQ(answer_peeks(*redis, "buried", {{3, three}, {1, five}, {2, ten}}, now), kShards);
  settle();
  ASSERT_TRUE(buried.done());
  EXPECT_EQ(buried.result->value().view.id, 3U);

  Outcome<broker::Job> delayed;
  s->peek_next("default", JobState::kDelayed, delayed.callback());
  const auto delayed_job = [&](JobId id, std::int64_t due_unix_ms) {
    JobView job = ready_job(id);
    job.state = JobState::kDelayed;
    job.due_unix_ms = due_unix_ms;
    return job;
  };
  ASSERT_EQ(answer_peeks(*redis, "delayed",
                         {{1, delayed_job(5, now + 3000)},
                          {2, delayed_job(6, now + 2000)},
                          {3, delayed_job(7, now + 2000)}},
                         now),
            kShards);
  settle();
  ASSERT_TRUE(delayed.done());
  EXPECT_EQ(delayed.result->value().view.id, 6U);
}

// A shard whose walk of its timers to the tube's first delayed job would cost more than a call
// across slots reads ('-2' in that call's answer) is asked by a call of its own.
TEST_F(Sessions, PeekNextOfDelayedAsksAShardWithALongWalkByACallOfItsOwn) {
  auto s = session();
  Outcome<broker::Job> got;
  s->peek_next("default", JobState::kDelayed, got.callback());
  const std::int64_t now = clock->now_unix_ms();
  JobView nearer = ready_job(6);
  nearer.state = JobState::kDelayed;
  nearer.due_unix_ms = now + 1000;
  JobView later = nearer;
  later.id = 5;
  later.due_unix_ms = now + 3000;
  ASSERT_EQ(redis->answer_each("peek_next",
                               [&](std::uint32_t shard, const std::vector<std::string>&) {
                                 return shard == 2   ? text("-2")
                                        : shard == 1 ? reply::job(later, now)
                                                     : reply::code("notfound", "none");
                               }),
            kShards);
  settle();
  EXPECT_FALSE(got.done());
  auto alone = redis->take("peek_next");
  ASSERT_TRUE(alone);
  EXPECT_EQ(shard_of(*alone), 2U);
  EXPECT_EQ(alone->args(), (std::vector<std::string>{"default", "delayed"}));
  redis->answer(*alone, reply::job(nearer, now));
  settle();
  ASSERT_TRUE(got.done());
  ASSERT_TRUE(got.result->is_ok()) << got.result->status().to_string();
  EXPECT_EQ(got.result->value().view.id, 6U);
  EXPECT_EQ(redis->count("peek_next"), 0U) << "the others read once";
}

TEST_F(Sessions, PeekNextFindingNothingAnywhereIsNotFoundAndOfReservedIsRefused) {
  auto s = session();
  Outcome<broker::Job> none;
  s->peek_next("default", JobState::kReady, none.callback());
  ASSERT_EQ(answer_peeks(*redis, "ready", {}, clock->now_unix_ms()), kShards);
  settle();
  ASSERT_TRUE(none.done());
  EXPECT_EQ(none.result->status().code(), Code::kNotFound);
  Outcome<broker::Job> reserved;
  s->peek_next("default", JobState::kReserved, reserved.callback());
  EXPECT_FALSE(reserved.done()) << "answered inside the call";
  settle();
  ASSERT_TRUE(reserved.done());
  EXPECT_EQ(reserved.result->status().code(), Code::kInvalidArgument);
  EXPECT_EQ(redis->count("each") + redis->count("peek_next"), 0U);
}

// A kickable answer: {ok, {id, order}...}.
Reply kickable(const std::vector<std::pair<JobId, std::string>>& jobs) {
  std::vector<Reply> pairs;
  for (const auto& [id, order] : jobs) {
    pairs.push_back(reply::array({text(std::to_string(id)), text(order)}));
  }
  return reply::ok({reply::array(std::move(pairs))});
}

// Answers a kick's listing of `state`, asking for `most`, in calls across slots: each shard's
// list from `lists` (an empty one where none is given). How many shards it answered.
std::size_t answer_kickables(ScriptedRedis& redis, const std::string& state,
                             const std::string& most, std::map<std::uint32_t, Reply> lists) {
  return redis.answer_each("kickable",
                           [&](std::uint32_t shard, const std::vector<std::string>& args) {
                             EXPECT_EQ(args, (std::vector<std::string>{"default", state, most}));
                             const auto it = lists.find(shard);
                             return it == lists.end() ? kickable({}) : it->second;
                           });
}

TEST_F(Sessions, KickAsksEveryShardThenKicksTheFirstOfAllWhereTheyAre) {
  auto s = session();
  Outcome<std::size_t> kicked;
  s->kick("default", 3, kicked.callback());
  EXPECT_EQ(redis->count("kickable"), 0U) << "not a call a shard";
  EXPECT_EQ(redis->count("kick"), 0U);
  std::map<std::uint32_t, Reply> lists = {{0, kickable({})},
                                          {1, kickable({{1, "1"}, {5, "5"}})},
                                          {2, kickable({{6, "6"}})},
                                          {3, kickable({{3, "3"}, {7, "7"}})}};
  ASSERT_EQ(answer_kickables(*redis, "buried", "3", lists), kShards);
  settle();
  // The first three of all are 1 and 5 (shard 1) and 3 (shard 3).
  ASSERT_EQ(redis->count("kick"), 2U);
  std::map<std::uint32_t, std::vector<std::string>> kicks;
  while (auto call = redis->take("kick")) {
    kicks[shard_of(*call)] = call->args();
    EXPECT_EQ(call->replicas, 1) << "a write";
    redis->answer(*call, reply::ok({Reply::number(shard_of(*call) == 1 ? 2 : 1)}));
  }
  EXPECT_EQ(kicks[1], (std::vector<std::string>{"default", "buried", "2"}));
  EXPECT_EQ(kicks[3], (std::vector<std::string>{"default", "buried", "1"}));
  EXPECT_FALSE(kicked.done());
  settle();
  ASSERT_TRUE(kicked.done());
  ASSERT_TRUE(kicked.result->is_ok()) << kicked.result->status().to_string();
  EXPECT_EQ(kicked.result->value(), 3U);
}

TEST_F(Sessions, KickWithNoBuriedJobAnywhereKicksTheEarliestDelayedOnes) {
  auto s = session();
  Outcome<std::size_t> kicked;
  s->kick("default", 2, kicked.callback());
  ASSERT_EQ(
      redis->answer_each("kickable",
                         [](std::uint32_t, const std::vector<std::string>& args) {
                           EXPECT_EQ(args, (std::vector<std::string>{"default", "buried", "2"}));
                           return kickable({});
                         }),
      kShards);
  settle();
  const std::int64_t now = clock->now_unix_ms();
  const auto at = [now](std::int64_t ms) { return std::to_string(now + ms); };
  std::map<std::uint32_t, Reply> lists = {{0, kickable({{4, at(3000)}})},
                                          {1, kickable({{5, at(1000)}, {9, at(4000)}})},
                                          {2, kickable({})},
                                          {3, kickable({{7, at(2000)}})}};
  ASSERT_EQ(answer_kickables(*redis, "delayed", "2", lists), kShards);
  EXPECT_EQ(redis->count("kickable"), 0U);
  settle();
  std::map<std::uint32_t, std::vector<std::string>> kicks;
  while (auto call = redis->take("kick")) {
    kicks[shard_of(*call)] = call->args();
    redis->answer(*call, reply::ok({Reply::number(1)}));
  }
  EXPECT_EQ(kicks.size(), 2U);
  EXPECT_EQ(kicks[1], (std::vector<std::string>{"default", "delayed", "1"}));
  EXPECT_EQ(kicks[3], (std::vector<std::string>{"default", "delayed", "1"}));
  settle();
  ASSERT_TRUE(kicked.done());
  EXPECT_EQ(kicked.result->value(), 2U);
}

// A shard whose listing would walk more timers than a call across slots allows ('-2') lists
// by a call of its own, and its jobs count with the others'.
TEST_F(Sessions, KickListsAShardWithALongWalkByACallOfItsOwn) {
  auto s = session();
  Outcome<std::size_t> kicked;
  s->kick("default", 2, kicked.callback());
  ASSERT_EQ(
      redis->answer_each(
          "kickable", [](std::uint32_t, const std::vector<std::string>&) { return kickable({}); }),
      kShards);
  settle();
  const std::int64_t now = clock->now_unix_ms();
  const auto at = [now](std::int64_t ms) { return std::to_string(now + ms); };
  ASSERT_EQ(
      redis->answer_each(
          "kickable",
          [&](std::uint32_t shard, const std::vector<std::string>&) {
            return shard == 3 ? text("-2") : shard == 1 ? kickable({{5, at(2000)}}) : kickable({});
          }),
      kShards);
  settle();
  auto alone = redis->take("kickable");
  ASSERT_TRUE(alone);
  EXPECT_EQ(shard_of(*alone), 3U);
  EXPECT_EQ(alone->args(), (std::vector<std::string>{"default", "delayed", "2"}));
  EXPECT_EQ(redis->count("kick"), 0U) << "the kick waits for every shard's list";
  redis->answer(*alone, kickable({{7, at(1000)}, {11, at(3000)}}));
  settle();
  std::map<std::uint32_t, std::vector<std::string>> kicks;
  while (auto call = redis->take("kick")) {
    kicks[shard_of(*call)] = call->args();
    redis->answer(*call, reply::ok({Reply::number(1)}));
  }
  EXPECT_EQ(kicks[1], (std::vector<std::string>{"default", "delayed", "1"}));
  EXPECT_EQ(kicks[3], (std::vector<std::string>{"default", "delayed", "1"}));
  settle();
  ASSERT_TRUE(kicked.done());
  EXPECT_EQ(kicked.result->value(), 2U);
}

TEST_F(Sessions, ListGroupAsksEveryShardInOneCallAndSortsTheJobsById) {
  auto s = session();
  Outcome<std::vector<JobView>> got;
  s->list_group("default", "batch-7", got.callback());
  ASSERT_EQ(redis->count("each"), 1U);
  ASSERT_EQ(redis->count("group"), 0U);
  const auto entries = [this](std::vector<JobId> ids) {
    std::vector<Reply> out = {text("ok")};
    for (const JobId id : ids) {
      JobView job = ready_job(id);
      job.group = "batch-7";
      out.push_back(text(std::to_string(id)));
      out.push_back(text(reply::record(job, "body")));
    }
    return reply::array(std::move(out));
  };
  std::map<std::uint32_t, Reply> lists = {
      {0, entries({})}, {1, entries({9, 5})}, {2, entries({6})}, {3, entries({3})}};
  EXPECT_EQ(
      redis->answer_each("group",
                         [&](std::uint32_t shard, const std::vector<std::string>& args) {
                           EXPECT_EQ(args, (std::vector<std::string>{"default", "batch-7", "0"}));
                           return lists[shard];
                         }),
      kShards);
  settle();
  ASSERT_TRUE(got.done());
  ASSERT_TRUE(got.result->is_ok()) << got.result->status().to_string();
  std::vector<JobId> ids;
  for (const auto& job : got.result->value()) ids.push_back(job.id);
  EXPECT_EQ(ids, (std::vector<JobId>{3, 5, 6, 9}));
  EXPECT_EQ(got.result->value().front().group, "batch-7");
}

// A group's cancel first counts the group's jobs in every shard, in calls across slots, then
// cancels them by a call in each shard that holds some: a write, with its replica's WAIT.
TEST_F(Sessions, CancelGroupCountsInEveryShardThenCancelsWhereTheGroupHasJobs) {
  auto s = session();
  Outcome<std::size_t> got;
  s->cancel_group("default", "batch-7", got.callback());
  EXPECT_EQ(redis->count("group"), 0U) << "not a call a shard";
  ASSERT_EQ(
      redis->answer_each("group",
                         [](std::uint32_t shard, const std::vector<std::string>& args) {
                           EXPECT_EQ(args, (std::vector<std::string>{"default", "batch-7", "n"}));
                           return reply::ok({Reply::number(shard == 2 ? 3 : 0)});
                         }),
      kShards);
  settle();
  EXPECT_FALSE(got.done());
  ASSERT_EQ(redis->count("group"), 1U);
  auto call = redis->take("group");
  EXPECT_EQ(shard_of(*call), 2U);
  EXPECT_EQ(call->args(), (std::vector<std::string>{"default", "batch-7", "1"}));
  EXPECT_EQ(call->replicas, 1) << "a write";
  redis->answer(*call, reply::ok({Reply::number(3)}));
  settle();
  ASSERT_TRUE(got.done());
  ASSERT_TRUE(got.result->is_ok()) << got.result->status().to_string();
  EXPECT_EQ(got.result->value(), 3U);
}

TEST_F(Sessions, CancelGroupOfAGroupWithNoJobCancelsNothingAndAFailedCancelFails) {
  auto s = session();
  Outcome<std::size_t> none;
  s->cancel_group("default", "gone", none.callback());
  redis->answer_each("group", [](std::uint32_t, const std::vector<std::string>&) {
    return reply::ok({Reply::number(0)});
  });
  settle();
  ASSERT_TRUE(none.done());
  ASSERT_TRUE(none.result->is_ok()) << none.result->status().to_string();
  EXPECT_EQ(none.result->value(), 0U);
  EXPECT_EQ(redis->count("group"), 0U);

  Outcome<std::size_t> failed;
  s->cancel_group("default", "batch-7", failed.callback());
  redis->answer_each("group", [](std::uint32_t shard, const std::vector<std::string>&) {
    return reply::ok({Reply::number(shard == 0 || shard == 3 ? 1 : 0)});
  });
  settle();
  ASSERT_EQ(redis->count("group"), 2U);
  auto first = redis->take("group");
  redis->answer(*first, reply::code("conflict", "not buried or delayed"));
  settle();
  ASSERT_TRUE(failed.done());
  EXPECT_FALSE(failed.result->is_ok());
  auto second = redis->take("group");
  ASSERT_TRUE(second);
  redis->answer(*second, reply::ok({Reply::number(1)}));
  settle();
  EXPECT_EQ(failed.calls, 1) << "answered once";
}

}  // namespace
}  // namespace delayq::broker::redis::testing
