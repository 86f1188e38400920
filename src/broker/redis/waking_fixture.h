// waking_fixture.h — the fixture of the tests of a node's reserves (waking_test.cc,
// reserve_end_test.cc): a node over a scripted Redis (fixture.h) with helpers that answer the
// calls reserves make (probes, reserves, the waiting count) and make reserve requests.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <deque>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "broker/redis/fixture.h"
#include "broker/redis/layout.h"

namespace delayq::broker::redis::testing {

class WakingTest : public NodeTest {
 protected:
  using Reply = delayq::redis::Reply;

  // A head as jobs.lua writes it, "priority:created:id", all created at one millisecond.
  static std::string head(std::uint32_t priority, JobId id) {
    return std::to_string(priority) + ":1799999999000:" + std::to_string(id);
  }
  // The name in Redis of the n-th session this node opened.
  [[nodiscard]] std::string holder(int n) const {
    return broker->node_name() + "/" + std::to_string(n);
  }
  // The session a reserve call was made for (its first argument), "" if none.
  static std::string who(const Call& call) {
    const auto args = call.args();
    return args.empty() ? std::string() : args[0];
  }
  // The id of the job a reserve got; 0 if it got none (yet).
  static JobId id_of(const Outcome<broker::Job>& got) {
    return got.done() && got.result->is_ok() ? got.result->value().view.id : 0;
  }
  // Answers every probe of one tube waiting now: its head in each shard of `heads` (depth as in
  // `depths`, else 1), none elsewhere. Returns how many it answered.
  std::size_t answer_probes(const std::map<std::uint32_t, std::string>& heads = {},
                            const std::map<std::uint32_t, std::int64_t>& depths = {}) {
    std::size_t answered = 0;
    while (auto probe = redis->take("probe")) {
      const std::uint32_t shard = shard_of(*probe);
      const auto it = heads.find(shard);
      const auto depth = depths.find(shard);
      if (it == heads.end()) {
        answer_probe(*probe, {""});
      } else {
        answer_probe(*probe, {it->second}, {depth == depths.end() ? 1 : depth->second});
      }
      ++answered;
    }
    return answered;
  }
  // Answers every probe waiting: shard `failed`'s with a connection reset, the others' with no
  // job.
  void fail_probes_of(std::uint32_t failed) {
    while (auto probe = redis->take("probe")) {
      if (shard_of(*probe) == failed) {
        redis->fail(*probe, Status(Code::kIOError, "connection reset"));
      } else {
        answer_probe(*probe, {""});
      }
    }
  }
  // Answers probe rounds, each saying no shard holds a job, until none is asked: every reserve
  // made so far waits.
  void rest() {
    settle();
    while (redis->count("probe") > 0) {
      answer_probes();
      settle();
    }
  }
  // A reserve of a session of its own, waiting idle: every shard probed, none holds a job.
  std::unique_ptr<broker::Session> waiting(Outcome<broker::Job>& got) {
    auto s = session();
    s->reserve({}, got.callback());
    rest();
    EXPECT_EQ(redis->count("reserve"), 0U);
    return s;
  }
  // A reserve-with-timeout 0 of a session of its own, every probe answered with no job and its
  // PINGs with every channel held: it answers TIMED_OUT. How many probes it sent after the PINGs.
  std::size_t poll_nothing() {
    auto s = session();
    Outcome<broker::Job> got;
    broker::ReserveRequest request;
    request.timeout = std::chrono::seconds(0);
    s->reserve(request, got.callback());
    rest();
    EXPECT_EQ(redis->syncs_waiting(), 1U);
    redis->answer_syncs(std::vector<bool>(kShards, true));
    settle();
    const std::size_t asked = redis->count("probe");
    rest();
    EXPECT_TRUE(got.done() && got.result->status().code() == Code::kTimedOut);
    return asked;
  }
  // Answers a reserve call with a miss ("worse" or "notfound") and the shard's heads after it.
  void miss(Call& call, const std::string& code, const std::vector<std::string>& heads) {
    std::vector<Reply> h;
    std::vector<Reply> d;
    for (const auto& one : heads) {
      h.push_back(Reply::string(one));
      d.push_back(Reply::number(one.empty() ? 0 : 1));
    }
    redis->answer(call, reply::array({Reply::string(code), Reply::string("missed"),
                                      reply::array(std::move(h)), reply::array(std::move(d))}));
  }
  // Answers the sync_shards() round waiting: every shard channel held throughout.
  void let_messages_in() {
    redis->answer_syncs(std::vector<bool>(kShards, true));
    settle();
  }
  // A message on shard `shard`'s channel from another node: `tube`'s best there is `best`.
  void announce(std::uint32_t shard, const std::string& best, const std::string& tube = "default") {
    const std::string index = std::to_string(shard);
    redis->publish_shard(shard, "r dq:{" + index + "} " + tube + " other-node " + best);
    settle();
  }
  // A call of `s` to `shard` whose answer is lost (an erase): what the shard holds is unknown
  // now, which wakes nobody by itself.
  void lose_an_answer(broker::Session& s, std::uint32_t shard) {
    Outcome<JobId> erased;
    s.erase(broker::JobRef::by_id(kShards + shard), erased.callback());
    settle();
    Call erase = take("erase");
    EXPECT_EQ(shard_of(erase), shard);
    redis->fail(erase, Status(Code::kIOError, "connection reset"));
    settle();
    EXPECT_EQ(redis->count("probe"), 0U);
  }
  // `s` reserves job `id` (of its shard), held for `ttr`; afterwards no shard is known to hold
  // another job of "default".
  void hold(broker::Session& s, JobId id, std::chrono::seconds ttr) {
    Outcome<broker::Job> got;
    s.reserve({}, got.callback());
    settle();
    answer_probes({{shard_of_id(id, kShards), head(1024, id)}});
    settle();
    Call reserve = take("reserve");
    JobView job = ready_job(id);
    job.ttr = ttr;
    redis->answer(reserve, reserved(job, {""}));
    settle();
    ASSERT_TRUE(got.done() && got.result->is_ok());
  }
  // Another node paused `tube` for `length`: the node hears "c" and reads the pauses.
  void paused_elsewhere(const std::string& tube, std::chrono::seconds length) {
    redis->publish("c");
    settle();
    const auto until = clock->now_unix_ms() + length.count() * 1000;
    while (auto read = redis->take("HGETALL")) {
      const bool pauses = !read->args().empty() && read->args()[0] == "dq:pauses";
      redis->answer(*read,
                    pauses ? reply::array({Reply::string(tube),
                                           Reply::string(std::to_string(until) + " " +
                                                         std::to_string(length.count()) + " 1")})
                           : reply::array({}));
    }
    settle();
  }
  // Redis busy but answering: for `length`, every 30 ms, a put of `other` made and answered.
  void answer_others_for(broker::Session& other, Millis length) {
    for (Millis passed{0}; passed < length; passed += Millis{30}) {
      broker::PutRequest put;
      put.body = "x";
      other.put(put, [](Result<broker::PutResult>) {});
      settle();
      Call call = take("put");
      const auto now = Reply::number(clock->now_unix_ms());
      redis->answer(call, reply::ok({Reply::number(9), now, Reply::number(0), now}));
      settle();
      clock->advance(std::min(Millis{30}, length - passed));
    }
  }
  // `producer` puts a ready job of "default"; its call, which must carry the reserve of `waiter`
  // (a holder()) last.
  Call put_carrying(broker::Session& producer, Outcome<broker::PutResult>& put,
                    const std::string& waiter) {
    broker::PutRequest request;
    request.body = "hello";
    producer.put(request, put.callback());
    settle();
    Call call = take("put");
    const auto args = call.args();
    EXPECT_GE(args.size(), 3U);
    if (args.size() >= 3) {
      EXPECT_EQ(std::vector<std::string>(args.end() - 3, args.end()),
                (std::vector<std::string>{waiter, "1", "default"}));
    }
    return call;
  }
  // A reserve that waits at most `timeout`, of the watch list unless `tubes` are named.
  static broker::ReserveRequest within(Millis timeout, std::vector<std::string> tubes = {}) {
    broker::ReserveRequest request;
    request.timeout = timeout;
    request.tubes = std::move(tubes);
    return request;
  }
};

}  // namespace delayq::broker::redis::testing
