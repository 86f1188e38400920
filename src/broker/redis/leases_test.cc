// leases_test.cc — a node's leases and firing over a scripted Redis (fixture.h): the heartbeat
// and what its answer makes the node take, renew or hand back; when an owned shard is fired (at
// once, at its next timer's microsecond, after a failure) and what a firing hands to the
// reserves waiting here; and what the broker's surface says of it all (health(), delivers(),
// close(), the webhooks' handler). No process, no sleep: the test answers every call and moves
// the clock.
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <optional>
#include <set>

#include "broker/families.h"
#include "broker/redis/fixture.h"
#include "broker/redis/layout.h"

namespace delayq::broker::redis::testing {
namespace {

using std::chrono::microseconds;
using std::chrono::milliseconds;

// Redis's clock in a firing's answer, as jobs.lua writes it (milliseconds, to the microsecond):
// the node counts only from it to the next timer, so any present will do. Times here are
// multiples of 1/8 ms, exact in a double.
constexpr const char* kRedisNow = "1800000000000.000";
constexpr microseconds kThird = milliseconds(5000) / 3;  // the default lease's third, 1666 ms

class LeaseTest : public NodeTest {
 protected:
  // The node's first look at every shard's earliest timer, sent as it opens, answered: nothing
  // anywhere. (A look at shards it takes waits for it: one look at a time per primary.)
  void SetUp() override {
    NodeTest::SetUp();
    if (auto look = redis->take("look_all")) {
      answer_look(*look, std::vector<std::string>(look->args().size(), "-1"));
    }
  }

  // The shards in the order this node tries to take them: all of them, from a place its name
  // picks (so that nodes starting together do not all ask for the same shard first).
  [[nodiscard]] std::vector<std::uint32_t> rotation() const {
    const std::uint32_t shards = broker->shards();
    const auto offset =
        static_cast<std::uint32_t>(std::hash<std::string>{}(broker->node_name()) % shards);
    std::vector<std::uint32_t> order;
    for (std::uint32_t i = 0; i < shards; ++i) order.push_back((offset + i) % shards);
    return order;
  }

  // Answers the heartbeat waiting: this node lives, and `others`.
  void answer_heartbeat(const std::vector<std::string>& others = {}) {
    Call call = take("heartbeat");
    std::vector<delayq::redis::Reply> names = {delayq::redis::Reply::string(broker->node_name())};
    for (const auto& other : others) names.push_back(delayq::redis::Reply::string(other));
    redis->answer(call, reply::ok({reply::array(std::move(names))}));
    settle();
  }

  // Grants every acquire_all (grant_acquires()), then answers the look at the shards each took:
  // nothing due in any of them, or with `due`, a timer due now in each (they are fired).
  std::vector<std::uint32_t> acquire_all(std::int64_t epoch = 1, bool due = false) {
    std::vector<std::uint32_t> taken = grant_acquires(epoch);
    while (auto look = redis->take("look_all")) {
      answer_look(*look, std::vector<std::string>(look->args().size(), due ? kDueNow : "-1"));
    }
    return taken;
  }
  static constexpr const char* kDueNow = "1800000000000";  // kRedisNow, in whole milliseconds

  // A firing's answer: `moved` jobs, the next timer at `next_at` ("-1": none), the reserves
  // handed to it answered with `served`, and `late` (microseconds) for each delayed job fired.
  static delayq::redis::Reply fired(std::int64_t moved = 0, const std::string& next_at = "-1",
                                    delayq::redis::Reply served = reply::array({}),
                                    const std::vector<std::string>& late = {}) {
    std::vector<delayq::redis::Reply> lateness;
    for (const auto& l : late) lateness.push_back(delayq::redis::Reply::string(l));
    return reply::ok({delayq::redis::Reply::number(moved), delayq::redis::Reply::string(next_at),
                      delayq::redis::Reply::string(kRedisNow), reply::array(std::move(lateness)),
                      std::move(served)});
  }

  // Answers the oldest call of `op` waiting with `r`.
  void answer_next(const std::string& op, const delayq::redis::Reply& r) {
    auto call = redis->take(op);
    ASSERT_TRUE(call) << "no " << op << " call";
    redis->answer(*call, r);
    settle();
  }

  // The latest five-second look (look_all), taken out; looks before it stay unanswered.
  // The look_all call under way at the latest; any before it are answered "no timer" (a node
  // sends the next once the one before was answered).
  std::optional<Call> latest_look() {
    std::optional<Call> latest;
    while (auto call = redis->take("look_all")) {
      if (latest) answer_look(*latest, std::vector<std::string>(latest->args().size(), "-1"));
      latest = std::move(call);
    }
    return latest;
  }
  // Answers `look` with each shard's earliest timer in whole milliseconds ("-1": none, "-2":
  // not served there), Redis's present being kRedisNow.
  void answer_look(Call& look, const std::vector<std::string>& times) {
    std::vector<delayq::redis::Reply> each;
    for (const auto& t : times) each.push_back(delayq::redis::Reply::string(t));
    redis->answer(
        look, reply::ok({reply::array(std::move(each)), delayq::redis::Reply::string(kRedisNow)}));
    settle();
  }

  // Answers every firing waiting with nothing moved and no timer.
  void answer_fires() {
    answer_all("fire", fired());
    settle();
  }

  // The opening of a node alone: heartbeat, every shard taken (rotation()[i] with epoch i + 1)
  // and fired, nothing due; the firings look again after resync.
  void own_every_shard() {
    answer_heartbeat();
    take("PUBLISH");  // the node announced itself
    ASSERT_EQ(acquire_all().size(), kShards);
    answer_fires();
    ASSERT_EQ(broker->owned_shards(), kShards);
  }

  // The epoch own_every_shard() took `shard` with.
  [[nodiscard]] std::string epoch_of(std::uint32_t shard) const {
    const auto order = rotation();
    return std::to_string(std::find(order.begin(), order.end(), shard) - order.begin() + 1);
  }

  // A shard's timer message ('t'), as a call that gave the shard an earlier timer publishes it:
  // by default a timer due at once.
  void timer_message(std::uint32_t shard, const std::string& at = kDueNow) {
    redis->publish_shard(shard, "t dq:{" + std::to_string(shard) + "} " + at);
    settle();
  }

  // Answers a firing that carried a waiting reserve: it moved one job, `id`, and served it to
  // that reserve.
  void serve_from(Call& fire, JobId id) {
    JobView job = ready_job(id);
    job.state = JobState::kReserved;
    job.deadline_unix_ms = clock->now_unix_ms() + 60'000;
    job.counters.reserves = 1;
    redis->answer(fire, fired(1, "-1", reply::array({reply::job(job, clock->now_unix_ms())})));
    settle();
  }

  // A reserve of "default" waiting here, every shard having answered that it holds no job.
  void wait_for_a_job(broker::Session& s, Outcome<broker::Job>& got) {
    s.reserve({}, got.callback());
    settle();
    answer_empty_probes();
    ASSERT_FALSE(got.done());
  }
  void answer_empty_probes() {
    answer_all("probe", reply::ok({reply::array({delayq::redis::Reply::string("")}),
                                   reply::array({delayq::redis::Reply::number(0)})}));
    settle();
  }

  // The shards the waiting calls of `op` go to.
  [[nodiscard]] std::multiset<std::uint32_t> shards_of(const std::string& op) const {
    std::multiset<std::uint32_t> out;
    for (const auto& call : redis->calls) {
      if (call.op() == op) out.insert(shard_of(call));
    }
    return out;
  }
};

using Leases = LeaseTest;
using Firing = LeaseTest;

// --- heartbeats and leases

TEST_F(Leases, TheHeartbeatAfterOpenNamesTheNodeAndItsLeaseAndRunsOnlyWhileRedisHasRoom) {
  ASSERT_EQ(redis->count("heartbeat"), 1U);
  Call heartbeat = take("heartbeat");
  EXPECT_EQ(heartbeat.keys(), std::vector<std::string>{"dq:nodes"});
  EXPECT_EQ(heartbeat.args(), (std::vector<std::string>{broker->node_name(), "5000"}));
  EXPECT_EQ(heartbeat.caller(), broker->node_name());
  EXPECT_FALSE(heartbeat.over_memory());
  EXPECT_EQ(redis->count("acquire_all"), 0U) << "a shard asked for before the heartbeat answered";
}

TEST_F(Leases, TheHeartbeatCarriesTheLeaseOfTheOptionsAndComesEveryThirdOfIt) {
  RedisBrokerOptions options;
  options.lease = milliseconds(3000);
  open_node(options);
  Call heartbeat = take("heartbeat");
  EXPECT_EQ(heartbeat.args(), (std::vector<std::string>{broker->node_name(), "3000"}));
  redis->answer(heartbeat,
                reply::ok({reply::array({delayq::redis::Reply::string(broker->node_name())})}));
  settle();
  clock->advance(milliseconds(1000) - microseconds(1));
  EXPECT_EQ(redis->count("heartbeat"), 0U);
  clock->advance(microseconds(1));
  EXPECT_EQ(redis->count("heartbeat"), 1U);
}

// An owner has its shards forget the tubes that hold nothing (jobs.lua's tidy_all), in one call
// across them, every sixth of the time after which a tube is forgotten: here 60 s, so every
// second five-second look. The shards a call left (its budget spent) go in the next.
TEST_F(Leases, AnOwnersShardsForgetTheirEmptyTubesEverySixthOfTheTimeAfterWhichTheyDo) {
  RedisBrokerOptions options;
  options.forget_empty_tubes = milliseconds(60'000);
  open_node(options);
  if (auto look = redis->take("look_all")) {
    answer_look(*look, std::vector<std::string>(look->args().size(), "-1"));
  }
  own_every_shard();
  EXPECT_EQ(redis->count("tidy_all"), 0U) << "nothing was owned at the first look";
  std::vector<std::string> expected = {"60000", "100"};  // forgotten after, tubes a call looks at
  for (std::uint32_t shard = 0; shard < kShards; ++shard) {
    expected.push_back("dq:{" + std::to_string(shard) + "}");
  }
  for (int round = 0; round < 2; ++round) {
    clock->advance(milliseconds(5000));
    answer_all("renew_all", reply::ok({reply::array({})}));
    EXPECT_EQ(redis->count("tidy_all"), 0U) << "round " << round << ": 5 s after the last";
    clock->advance(milliseconds(5000));
    Call tidy = take("tidy_all");
    std::vector<std::string> args = tidy.args();
    const std::vector<std::string> order(args.begin() + 2, args.end());
    std::sort(args.begin() + 2, args.end());
    EXPECT_EQ(args, expected) << "round " << round;
    EXPECT_EQ(tidy.keys(), shard_keys("dq", shard_of(tidy))) << "the first shard's, every one";
    if (round == 0) {
      redis->answer(tidy, reply::ok({reply::array(std::vector<delayq::redis::Reply>(
                              kShards, delayq::redis::Reply::number(0)))}));
      settle();
      EXPECT_EQ(redis->count("tidy_all"), 0U) << "every shard looked at";
      continue;
    }
    // The call's budget spent after its first shard: the others go in the next call.
    std::vector<delayq::redis::Reply> counts = {delayq::redis::Reply::number(2)};
    for (std::uint32_t i = 1; i < kShards; ++i)
      counts.push_back(delayq::redis::Reply::string("-1"));
    redis->answer(tidy, reply::ok({reply::array(std::move(counts))}));
    settle();
    Call rest = take("tidy_all");
    EXPECT_EQ(rest.args(),
              (std::vector<std::string>{"60000", "100", order[1], order[2], order[3]}));
    redis->answer(rest, reply::ok({reply::array(std::vector<delayq::redis::Reply>(
                            kShards - 1, delayq::redis::Reply::number(0)))}));
    settle();
    EXPECT_EQ(redis->count("tidy_all"), 0U);
  }
}

TEST_F(Leases, TheFirstHeartbeatAnsweredAnnouncesTheNodeAndNoLaterOneDoes) {
  answer_heartbeat();
  Call announce = take("PUBLISH");
  EXPECT_EQ(announce.args(), (std::vector<std::string>{"dq:events", "l"}));
  acquire_all();
  answer_fires();
  clock->advance(kThird);
  answer_heartbeat();
  EXPECT_EQ(redis->count("PUBLISH"), 0U);
}

// dq:waiting holds each node's count of waiting reserves (the stats sum them): a node that
// leaves dq:nodes (its lease lapsed: it crashed) has its count deleted by the nodes that see it
// go, at once.
TEST_F(Leases, ANodeGoneFromTheHeartbeatHasItsCountOfWaitingReservesDeleted) {
  answer_heartbeat({"node-b", "node-c"});
  acquire_all();
  answer_fires();
  clock->advance(kThird);
  answer_heartbeat({"node-c"});
  // Seen leaving is a first look; the counts are looked at at once, and node-b's deleted.
  Call look = take("HGETALL");
  EXPECT_EQ(look.args(), std::vector<std::string>{"dq:waiting"});
  redis->answer(
      look,
      reply::array({delayq::redis::Reply::string("node-b"), delayq::redis::Reply::string("2"),
                    delayq::redis::Reply::string("node-c"), delayq::redis::Reply::string("0")}));
  settle();
  Call gone = take("HDEL");
  EXPECT_EQ(gone.args(), (std::vector<std::string>{"dq:waiting", "node-b"}));
  clock->advance(kThird);
  answer_heartbeat({"node-c"});
  EXPECT_EQ(redis->count("HGETALL") + redis->count("HDEL"), 0U) << "deleted once, when seen gone";
}

// A node that died while no node saw it go (all were down) leaves its count in dq:waiting: every
// 30 heartbeats the counts of nodes not live are looked for, and one found at two looks in a row
// is deleted. A node that has just started is live by the second look.
TEST_F(Leases, ACountOfANodeNotLiveAtTwoLooksInARowIsDeleted) {
  using delayq::redis::Reply;
  answer_heartbeat();
  acquire_all();
  answer_fires();
  for (int i = 1; i < 30; ++i) {
    clock->advance(kThird);
    answer_heartbeat();
  }
  Call look = take("HGETALL");
  EXPECT_EQ(look.args(), std::vector<std::string>{"dq:waiting"});
  redis->answer(look, reply::array({Reply::string("ghost"), Reply::string("3"),
                                    Reply::string("node-new"), Reply::string("1"),
                                    Reply::string(broker->node_name()), Reply::string("0")}));
  settle();
  EXPECT_EQ(redis->count("HDEL"), 0U) << "deleted at the first look";
  for (int i = 0; i < 30; ++i) {
    clock->advance(kThird);
    answer_heartbeat({"node-new"});
  }
  Call again = take("HGETALL");
  redis->answer(again, reply::array({Reply::string("ghost"), Reply::string("3"),
                                     Reply::string("node-new"), Reply::string("1")}));
  settle();
  EXPECT_EQ(take("HDEL").args(), (std::vector<std::string>{"dq:waiting", "ghost"}));
}

// A node unheard of for longer than its lease may have had its count deleted by the others: it
// says it again, though it has not changed.
TEST_F(Leases, AHeartbeatAnsweredAfterMoreThanALeaseSaysTheWaitingCountAgain) {
  answer_heartbeat();
  acquire_all();
  answer_fires();
  clock->advance(kThird);
  Call late = take("heartbeat");
  clock->advance(milliseconds(5001));
  redis->answer(late,
                reply::ok({reply::array({delayq::redis::Reply::string(broker->node_name())})}));
  settle();
  clock->advance(milliseconds(10));
  Call said = take("HSET");
  EXPECT_EQ(said.args(), (std::vector<std::string>{"dq:waiting", broker->node_name(), "0"}));
}

TEST_F(Leases, TheOnlyLiveNodeAsksForEveryShardInItsOwnRotationInOneCall) {
  answer_heartbeat();
  Call call = take("acquire_all");
  // Allowed to touch the other shards' keys, beside the one key that routes it.
  EXPECT_TRUE(call.commands[0][1].ends_with("_slots")) << call.commands[0][1];
  const auto order = rotation();
  EXPECT_EQ(call.keys(), std::vector<std::string>{"dq:{" + std::to_string(order[0]) + "}:owner"});
  std::vector<std::string> expected = {broker->node_name(), "5000", "4"};
  for (const auto shard : order) expected.push_back("dq:{" + std::to_string(shard) + "}");
  EXPECT_EQ(call.args(), expected);
  answer_acquire(std::move(call), {1, 2, 3, 4});
  EXPECT_EQ(broker->owned_shards(), kShards);
  EXPECT_EQ(redis->count("acquire_all"), 0U);
  // Their timers looked at in one call, not a firing each.
  Call look = take("look_all");
  EXPECT_EQ(shards_named(look, 0), order);
  EXPECT_EQ(redis->count("fire"), 0U);
}

// At 16,384 shards a call a shard took about 4 s to hold them all, and a shard not yet held is not
// fired.
TEST_F(Leases, AWalkOfManyShardsGoesAtMost64ACallOneAtATimeEachShardOnce) {
  constexpr std::uint32_t kMany = 1100;
  open_node({}, kMany);
  answer_heartbeat({"other-node"});
  std::vector<std::size_t> sizes;
  std::vector<std::string> mosts;
  std::set<std::uint32_t> named;
  std::int64_t epoch = 1;
  while (auto call = redis->take("acquire_all")) {
    EXPECT_EQ(redis->count("acquire_all"), 0U) << "two calls of a walk side by side";
    const auto shards = shards_named(*call, 3);
    sizes.push_back(shards.size());
    mosts.push_back(call->args()[2]);
    named.insert(shards.begin(), shards.end());
    const auto most = std::stoul(call->args()[2]);
    std::vector<std::int64_t> got;
    for (std::size_t i = 0; i < shards.size(); ++i) got.push_back(i < most ? epoch++ : -1);
    answer_acquire(*call, got);
  }
  // The share, 550: nine calls of 64, each allowed what was left of it (the last took 38).
  EXPECT_EQ(sizes, (std::vector<std::size_t>{64, 64, 64, 64, 64, 64, 64, 64, 64}));
  EXPECT_EQ(mosts, (std::vector<std::string>{"550", "486", "422", "358", "294", "230", "166", "102",
                                             "38"}));
  EXPECT_EQ(named.size(), 576U);
  EXPECT_EQ(broker->owned_shards(), 550U);
}

TEST_F(Leases, OneOfTwoLiveNodesAsksForHalfTheShards) {
  answer_heartbeat({"other-node"});
  Call call = take("acquire_all");
  EXPECT_EQ(call.args()[2], "2");
  const auto order = rotation();
  answer_acquire(std::move(call), {1, 2, -1, -1});
  EXPECT_EQ(broker->owned_shards(), kShards / 2);
  EXPECT_EQ(shards_named(take("look_all"), 0), (std::vector<std::uint32_t>{order[0], order[1]}));
  EXPECT_EQ(redis->count("acquire_all"), 0U);
}

// Nodes started together: the first to be answered sees itself alone and walks towards every
// shard. When another announces itself, the walk under way stops at the new share (what the call
// under way took beyond it is handed back at once), and the heartbeat that brings the news starts
// no second walk beside it.
TEST_F(Leases, AWalkUnderWayStopsAtTheShareOnceAnotherNodeJoins) {
  constexpr std::uint32_t kMany = 200;
  open_node({}, kMany);
  answer_heartbeat();
  take("PUBLISH");  // the node announced itself
  const auto numbered = [](std::int64_t from) {
    std::vector<std::int64_t> got;
    for (std::int64_t epoch = from; epoch < from + 64; ++epoch) got.push_back(epoch);
    return got;
  };
  answer_acquire(take("acquire_all"), numbered(1));
  Call second = take("acquire_all");
  ASSERT_EQ(second.args()[2], "136");
  redis->publish("l");  // another node joined
  settle();
  answer_heartbeat({"newcomer"});
  EXPECT_EQ(redis->count("acquire_all"), 0U) << "a second walk beside the first";
  const auto named = shards_named(second, 3);
  answer_acquire(std::move(second), numbered(65));
  EXPECT_EQ(broker->owned_shards(), kMany / 2);
  EXPECT_EQ(shards_of("resign"), std::multiset<std::uint32_t>(named.begin() + 36, named.end()));
  EXPECT_EQ(redis->count("acquire_all"), 0U) << "the walk went on past the share";
}

// A call that failed took nothing the node knows of: the walk goes on with the next part, and
// the next heartbeat's walk asks for the failed part's shards again.
TEST_F(Leases, AWalksCallThatFailedIsPassedOverAndItsShardsAskedForAtTheNextHeartbeat) {
  constexpr std::uint32_t kMany = 100;
  open_node({}, kMany);
  answer_heartbeat();
  Call first = take("acquire_all");
  const auto lost = shards_named(first, 3);
  ASSERT_EQ(lost.size(), 64U);
  redis->fail(first, Status(Code::kIOError, "no reply within 5000 ms"));
  settle();
  EXPECT_EQ(acquire_all().size(), 36U) << "the next part";
  EXPECT_EQ(broker->owned_shards(), 36U);
  clock->advance(kThird);
  answer_heartbeat();
  Call again = take("acquire_all");
  EXPECT_EQ(shards_named(again, 3), lost);
  EXPECT_EQ(again.args()[2], "64");
}

TEST_F(Leases, AShardHeldByAnotherNodeIsNeitherOwnedNorFired) {
  answer_heartbeat({"other-node"});
  const auto order = rotation();
  answer_acquire(take("acquire_all"), {0, 5, 6, -1});
  EXPECT_EQ(broker->owned_shards(), 2U);
  EXPECT_EQ(shards_named(take("look_all"), 0), (std::vector<std::uint32_t>{order[1], order[2]}));
}

// A shard that the call's primary no longer serves (the map is behind: a slot moved) is asked
// for again at the end of the walk, by a call of its own routed by its own key (which follows
// the redirection), and not a third time in that walk.
TEST_F(Leases, AShardNotServedWhereTheCallWentIsAskedForAloneAtTheEnd) {
  answer_heartbeat();
  const auto order = rotation();
  answer_acquire(take("acquire_all"), {1, -2, 2, -2});
  Call alone = take("acquire_all");
  EXPECT_EQ(alone.keys(), std::vector<std::string>{"dq:{" + std::to_string(order[1]) + "}:owner"});
  EXPECT_EQ(alone.args(), (std::vector<std::string>{broker->node_name(), "5000", "2",
                                                    "dq:{" + std::to_string(order[1]) + "}"}));
  answer_acquire(std::move(alone), {3});
  Call last = take("acquire_all");
  EXPECT_EQ(shards_named(last, 3), std::vector<std::uint32_t>{order[3]});
  EXPECT_EQ(last.args()[2], "1");
  answer_acquire(std::move(last), {-2});
  EXPECT_EQ(redis->count("acquire_all"), 0U);
  EXPECT_EQ(broker->owned_shards(), 3U);
  answer_fires();
  // The next heartbeat's walk asks for it again.
  clock->advance(kThird);
  answer_heartbeat();
  Call again = take("acquire_all");
  EXPECT_EQ(shards_named(again, 3), std::vector<std::uint32_t>{order[3]});
}

// renew_all's answer: for each shard named, whether it was renewed.
delayq::redis::Reply renewed_all(const std::vector<bool>& renewed) {
  std::vector<delayq::redis::Reply> each;
  for (const bool r : renewed) each.push_back(delayq::redis::Reply::number(r ? 1 : 0));
  return reply::ok({reply::array(std::move(each))});
}

TEST_F(Leases, RenewalsGoEveryThirdOfTheLeaseInOneCallWithEachShardsEpoch) {
  own_every_shard();
  clock->advance(kThird - microseconds(1));
  EXPECT_EQ(redis->count("heartbeat"), 0U);
  clock->advance(microseconds(1));
  answer_heartbeat();
  EXPECT_EQ(redis->count("acquire"), 0U) << "a node holding its share asks for more";
  Call call = take("renew_all");
  // Allowed to touch the other shards' keys, beside the one key that routes it.
  EXPECT_TRUE(call.commands[0][1].ends_with("_slots")) << call.commands[0][1];
  EXPECT_EQ(call.keys(), std::vector<std::string>{"dq:{0}:owner"});
  std::vector<std::string> expected = {broker->node_name(), "5000"};
  for (std::uint32_t shard = 0; shard < kShards; ++shard) {
    expected.push_back("dq:{" + std::to_string(shard) + "}");
    expected.push_back(epoch_of(shard));
  }
  EXPECT_EQ(call.args(), expected);
  redis->answer(call, renewed_all({true, true, true, true}));
  settle();
  EXPECT_EQ(redis->count("renew") + redis->count("renew_all"), 0U);
  EXPECT_EQ(broker->owned_shards(), kShards);
}

TEST_F(Leases, RenewalsOfManyShardsGoAtMost64ACallOneAtATimeEachShardOnce) {
  constexpr std::uint32_t kMany = 1100;
  open_node({}, kMany);
  answer_heartbeat();
  ASSERT_EQ(acquire_all().size(), kMany);
  answer_fires();
  clock->advance(kThird);
  answer_heartbeat();
  std::vector<std::size_t> sizes;
  std::set<std::string> named;
  while (auto call = redis->take("renew_all")) {
    EXPECT_EQ(redis->count("renew_all"), 0U) << "a second call to the primary before an answer";
    const auto args = call->args();
    const std::size_t size = (args.size() - 2) / 2;
    sizes.push_back(size);
    for (std::size_t i = 2; i < args.size(); i += 2) named.insert(args[i]);
    redis->answer(*call, renewed_all(std::vector<bool>(size, true)));
    settle();
  }
  std::vector<std::size_t> expected(kMany / 64, 64);
  expected.push_back(kMany % 64);
  EXPECT_EQ(sizes, expected);
  EXPECT_EQ(named.size(), kMany) << "a shard renewed twice";
  EXPECT_EQ(redis->count("renew"), 0U);
}

TEST_F(Leases, AShardTheCallDidNotRenewIsRenewedByACallOfItsOwn) {
  own_every_shard();
  clock->advance(kThird);
  answer_heartbeat();
  answer_next("renew_all", renewed_all({true, false, true, true}));
  Call own = take("renew");
  EXPECT_EQ(shard_of(own), 1U);
  EXPECT_EQ(own.args(), (std::vector<std::string>{broker->node_name(), "5000", epoch_of(1)}));
  redis->answer(own, reply::ok());
  settle();
  EXPECT_EQ(redis->count("renew") + redis->count("renew_all"), 0U);
  EXPECT_EQ(broker->owned_shards(), kShards);
}

TEST_F(Leases, ARenewalOfManyThatFailsIsSentAgainAsOneCallAShard) {
  own_every_shard();
  clock->advance(kThird);
  answer_heartbeat();
  Call together = take("renew_all");
  redis->fail(together, Status(Code::kIOError, "connection reset"));
  settle();
  EXPECT_EQ(shards_of("renew"), (std::multiset<std::uint32_t>{0, 1, 2, 3}));
}

TEST_F(Leases, ARenewalAnsweredFencedDropsTheShardAndTheNextHeartbeatAsksForItAgain) {
  own_every_shard();
  clock->advance(kThird);
  answer_heartbeat();
  answer_next("renew_all", renewed_all({true, true, false, true}));
  Call lost = take("renew");
  const std::uint32_t shard = shard_of(lost);
  EXPECT_EQ(shard, 2U);
  redis->answer(lost, reply::code("fenced", "lost"));
  settle();
  EXPECT_EQ(broker->owned_shards(), kShards - 1);
  answer_all("fire", fired());
  timer_message(shard);
  EXPECT_EQ(redis->count("fire"), 0U) << "a lost shard fired";
  clock->advance(kThird);
  answer_heartbeat();
  Call again = take("acquire_all");
  EXPECT_EQ(shards_named(again, 3), std::vector<std::uint32_t>{shard});
  EXPECT_EQ(redis->count("acquire_all"), 0U);
}

TEST_F(Leases, AFencedRenewalOfAnEarlierEpochLeavesTheLeaseTakenSinceAlone) {
  own_every_shard();
  clock->advance(kThird);
  answer_heartbeat();
  // Shard `s` is lost by a firing and taken again while its renewal of epoch 1 is under way.
  const std::uint32_t s = rotation()[0];
  std::vector<bool> renewed(kShards, true);
  renewed[s] = false;
  answer_next("renew_all", renewed_all(renewed));
  std::optional<Call> old_renewal = redis->take("renew");
  ASSERT_TRUE(old_renewal);
  ASSERT_EQ(shard_of(*old_renewal), s);
  answer_all("fire", fired());
  timer_message(s);
  Call firing = take("fire");
  redis->answer(firing, reply::code("fenced", "not the owner"));
  settle();
  ASSERT_EQ(broker->owned_shards(), kShards - 1);
  clock->advance(kThird);
  answer_heartbeat();
  Call retake = take("acquire_all");
  ASSERT_EQ(shards_named(retake, 3), std::vector<std::uint32_t>{s});
  answer_acquire(std::move(retake), {9});
  ASSERT_EQ(broker->owned_shards(), kShards);
  redis->answer(*old_renewal, reply::code("fenced", "lost"));
  settle();
  EXPECT_EQ(broker->owned_shards(), kShards) << "the lease of epoch 9 dropped";
}

TEST_F(Leases, ANodeHoldingMoreThanItsShareResignsTheSurplusAndPublishesL) {
  own_every_shard();
  clock->advance(kThird);
  answer_heartbeat({"newcomer"});
  // Two shards for each of two nodes: the highest two go back.
  EXPECT_EQ(shards_of("resign"), (std::multiset<std::uint32_t>{2, 3}));
  while (auto call = redis->take("resign")) {
    EXPECT_EQ(call->args(), std::vector<std::string>{broker->node_name()});
  }
  EXPECT_EQ(broker->owned_shards(), kShards / 2);
  Call freed = take("PUBLISH");
  EXPECT_EQ(freed.args(), (std::vector<std::string>{"dq:events", "l"}));
  EXPECT_EQ(redis->count("acquire_all"), 0U);
}

TEST_F(Leases, ALeasesMessageSendsTheHeartbeatAtOnceButNotBesideOneUnderWay) {
  answer_heartbeat({"other-node"});
  acquire_all();
  answer_fires();
  redis->publish("l");
  settle();
  ASSERT_EQ(redis->count("heartbeat"), 1U);
  redis->publish("l");
  settle();
  EXPECT_EQ(redis->count("heartbeat"), 1U);
  // The other node left: this one takes the shards it gave up.
  answer_heartbeat();
  EXPECT_EQ(acquire_all().size(), kShards / 2);
}

TEST_F(Leases, AHeartbeatLostStillRenewsTheLeasesHeldAndTriesAgainAThirdLater) {
  own_every_shard();
  clock->advance(kThird);
  Call heartbeat = take("heartbeat");
  redis->fail(heartbeat, Status(Code::kIOError, "no reply within 5000 ms"));
  settle();
  EXPECT_EQ(redis->count("renew_all"), 1U);
  EXPECT_EQ(redis->count("acquire_all") + redis->count("resign"), 0U);
  EXPECT_TRUE(broker->health().is_ok());
  clock->advance(kThird);
  EXPECT_EQ(redis->count("heartbeat"), 1U);
}

TEST_F(Leases, AHeartbeatRefusedForMemoryMarksTheNodeNoSpaceAndIsSentAgainAllowingOom) {
  Call refused = take("heartbeat");
  redis->answer(refused, delayq::redis::Reply::error(
                             "OOM command not allowed when used memory > 'maxmemory'."));
  settle();
  EXPECT_EQ(broker->health().code(), Code::kNoSpace);
  Call again = take("heartbeat");
  EXPECT_TRUE(again.over_memory());
  EXPECT_EQ(again.args(), (std::vector<std::string>{broker->node_name(), "5000"}));
  redis->answer(again,
                reply::ok({reply::array({delayq::redis::Reply::string(broker->node_name())})}));
  settle();
  // The node lives on and takes its shards; it stays out of room until a heartbeat says so.
  EXPECT_EQ(acquire_all().size(), kShards);
  answer_fires();
  EXPECT_EQ(broker->health().code(), Code::kNoSpace);
  clock->advance(kThird);
  Call next = take("heartbeat");
  EXPECT_FALSE(next.over_memory());
  redis->answer(next,
                reply::ok({reply::array({delayq::redis::Reply::string(broker->node_name())})}));
  settle();
  EXPECT_TRUE(broker->health().is_ok()) << broker->health().to_string();
}

TEST_F(Leases, HealthSaysIOErrorOnceNoHeartbeatIsAnsweredForAWholeLease) {
  answer_heartbeat();
  // The next heartbeat, at a third, is never answered.
  clock->advance(milliseconds(5000));
  EXPECT_EQ(redis->count("heartbeat"), 1U);
  EXPECT_TRUE(broker->health().is_ok()) << broker->health().to_string();
  clock->advance(microseconds(1));
  const Status silent = broker->health();
  EXPECT_EQ(silent.code(), Code::kIOError);
  EXPECT_EQ(silent.message(), "Redis has not answered for 5 s");
  answer_heartbeat();
  EXPECT_TRUE(broker->health().is_ok()) << broker->health().to_string();
}

TEST_F(Leases, CloseResignsEveryShardAndLeavesTheNodesThenPublishesL) {
  own_every_shard();
  ASSERT_TRUE(broker->close().is_ok());
  EXPECT_EQ(broker->owned_shards(), 0U);
  EXPECT_EQ(shards_of("resign"), (std::multiset<std::uint32_t>{0, 1, 2, 3}));
  Call leave = take("ZREM");
  EXPECT_EQ(leave.args(), (std::vector<std::string>{"dq:nodes", broker->node_name()}));
  EXPECT_EQ(take("HDEL").args(), (std::vector<std::string>{"dq:waiting", broker->node_name()}));
  redis->answer(leave, delayq::redis::Reply::number(1));
  for (int i = 0; i < 3; ++i) {
    Call resign = take("resign");
    EXPECT_EQ(resign.args(), std::vector<std::string>{broker->node_name()});
    redis->answer(resign, reply::ok());
  }
  settle();
  EXPECT_EQ(redis->count("PUBLISH"), 0U) << "leases said free before they are";
  Call last = take("resign");
  redis->answer(last, reply::ok());
  settle();
  EXPECT_EQ(take("PUBLISH").args(), (std::vector<std::string>{"dq:events", "l"}));
}

TEST_F(Leases, AfterCloseNoHeartbeatAndNoFiringIsSent) {
  own_every_shard();
  ASSERT_TRUE(broker->close().is_ok());
  clock->advance(milliseconds(5000));
  timer_message(0);
  redis->publish("l");
  settle();
  EXPECT_EQ(redis->count("heartbeat"), 0U);
  EXPECT_EQ(redis->count("fire"), 0U);
  EXPECT_EQ(redis->count("renew"), 0U);
}

TEST_F(Leases, ShardsTakenAsTheNodeClosesAreHandedBackAtOnce) {
  answer_heartbeat();
  Call acquire = take("acquire_all");
  ASSERT_TRUE(broker->close().is_ok());
  answer_acquire(std::move(acquire), {3, 0, 4, 5});
  const auto order = rotation();
  EXPECT_EQ(shards_of("resign"), (std::multiset<std::uint32_t>{order[0], order[2], order[3]}));
  EXPECT_EQ(broker->owned_shards(), 0U);
  EXPECT_EQ(redis->count("fire") + redis->count("look_all"), 0U);
  EXPECT_EQ(redis->count("acquire_all"), 0U);
}

TEST_F(Leases, DeliversFollowsTheLeaseOfTheTubesDeliveryShard) {
  const std::string tube = "mail";
  const std::uint32_t delivery = shard_of_name(tube, "", kShards);
  answer_heartbeat();
  // The tube's shard is held by another node at first, then taken by the next walk.
  Call walk = take("acquire_all");
  std::vector<std::int64_t> got;
  for (const auto shard : rotation()) got.push_back(shard == delivery ? 0 : 1);
  answer_acquire(std::move(walk), got);
  Call first_look = take("look_all");
  answer_look(first_look, std::vector<std::string>(kShards - 1, "-1"));
  EXPECT_FALSE(broker->delivers(tube));
  clock->advance(kThird);
  answer_heartbeat();
  answer_acquire(take("acquire_all"), {2});
  EXPECT_TRUE(broker->delivers(tube));
  Call look = take("look_all");
  answer_look(look, {kDueNow});
  std::optional<Call> firing;
  while (auto call = redis->take("fire")) {
    if (shard_of(*call) == delivery) firing = std::move(call);
  }
  ASSERT_TRUE(firing);
  redis->answer(*firing, reply::code("fenced", "not the owner"));
  settle();
  EXPECT_FALSE(broker->delivers(tube));
}

TEST_F(Leases, TheWebhooksHandlerRunsWhenTheLeaseOfAWebhooksTubeMoves) {
  int changes = 0;
  broker->on_webhooks_changed([&] { ++changes; });
  const std::string tube = "mail";
  const std::uint32_t delivery = shard_of_name(tube, "", kShards);
  auto s = session();
  auto admin = broker->open_admin();
  Webhook hook;
  hook.url = "http://127.0.0.1:9/hook";
  Outcome<Webhook> set;
  admin->set_webhook(tube, hook, set.callback());
  settle();
  Call write = take("HSET");
  redis->answer(write, delayq::redis::Reply::number(1));
  settle();
  ASSERT_TRUE(set.done());
  ASSERT_EQ(changes, 1);
  answer_heartbeat();
  acquire_all(1, true);
  EXPECT_EQ(changes, 2) << "the tube's delivery shard taken";
  // Losing another shard moves no delivery; losing the tube's does.
  for (const bool tubes : {false, true}) {
    const auto it = std::find_if(redis->calls.begin(), redis->calls.end(), [&](const Call& c) {
      return c.op() == "fire" && (shard_of(c) == delivery) == tubes;
    });
    ASSERT_NE(it, redis->calls.end());
    Call firing = std::move(*it);
    redis->calls.erase(it);
    redis->answer(firing, reply::code("fenced", "not the owner"));
    settle();
    EXPECT_EQ(changes, tubes ? 3 : 2);
  }
}

// --- firing

// A shard taken is looked at (its earliest timer), with the others its call took: fired at once
// when something in it is due, with its epoch and the batch; armed for its timer otherwise.
TEST_F(Firing, AnAcquiredShardIsFiredAtOnceIfDueWithItsEpochAndTheBatchElseArmed) {
  answer_heartbeat();
  answer_acquire(take("acquire_all"), {42, 43, 0, 0});
  const auto order = rotation();
  Call look = take("look_all");
  ASSERT_EQ(shards_named(look, 0), (std::vector<std::uint32_t>{order[0], order[1]}));
  answer_look(look, {kDueNow, "1800000000250"});
  Call fire = take("fire");
  EXPECT_EQ(shard_of(fire), order[0]);
  EXPECT_EQ(fire.args(), (std::vector<std::string>{"42", "1000"}));
  EXPECT_EQ(redis->count("fire"), 0U) << "a shard fired before its timer";
  clock->advance(milliseconds(250));
  Call later = take("fire");
  EXPECT_EQ(shard_of(later), order[1]);
  EXPECT_EQ(later.args(), (std::vector<std::string>{"43", "1000"}));
}

TEST_F(Firing, TheFiringBatchIsTheOptions) {
  RedisBrokerOptions options;
  options.fire_batch = 10;
  open_node(options);
  answer_heartbeat();
  acquire_all(7, true);
  ASSERT_EQ(redis->count("fire"), kShards);
  while (auto fire = redis->take("fire")) {
    // rotation()[i] was taken with epoch 7 + i.
    EXPECT_EQ(fire->args(), (std::vector<std::string>{
                                std::to_string(std::stoi(epoch_of(shard_of(*fire))) + 6), "10"}));
  }
}

TEST_F(Firing, TheNextTimerArmsTheFiringAtItsMicrosecond) {
  own_every_shard();
  timer_message(2);
  Call fire = take("fire");
  redis->answer(fire, fired(0, "1800000000250.125"));
  clock->advance(microseconds(250'125 - 1));
  EXPECT_EQ(redis->count("fire"), 0U) << "fired early";
  clock->advance(microseconds(1));
  ASSERT_EQ(redis->count("fire"), 1U);
  EXPECT_EQ(shard_of(take("fire")), 2U);
}

// The shard's answers told its owner Redis's clock: a timer message arms the shard for the
// timer's microsecond without a call, and never later than it was armed.
TEST_F(Firing, ATimerMessageArmsTheShardForItsMicrosecondByTheClockItsAnswersShowed) {
  own_every_shard();  // answered at kRedisNow, at the present of the steady clock
  timer_message(2, "1800000000250.125");
  EXPECT_EQ(redis->count("fire"), 0U) << "a call to learn what the message said";
  clock->advance(microseconds(250'125 - 1));
  EXPECT_EQ(redis->count("fire"), 0U) << "fired early";
  clock->advance(microseconds(1));
  ASSERT_EQ(redis->count("fire"), 1U);
  EXPECT_EQ(shard_of(take("fire")), 2U);
  // Armed at +100 ms by a message, a later message leaves it; an earlier one moves it.
  timer_message(3, "1800000000350.125");
  timer_message(3, "1800000000400.125");
  clock->advance(milliseconds(100) - microseconds(1));
  EXPECT_EQ(redis->count("fire"), 0U);
  clock->advance(microseconds(1));
  EXPECT_EQ(shards_of("fire"), (std::multiset<std::uint32_t>{3}));
  timer_message(1, "1800000000500.125");
  timer_message(1, "1800000000450.125");
  clock->advance(milliseconds(100) - microseconds(1));
  EXPECT_EQ(shards_of("fire"), (std::multiset<std::uint32_t>{3}));
  clock->advance(microseconds(1));
  EXPECT_EQ(shards_of("fire"), (std::multiset<std::uint32_t>{3, 1}));
  // Armed by a firing's answer (a timer 750 ms after its present, kRedisNow), a message of a
  // timer 200 ms away by the shard's clock as first seen moves it there.
  Call firing = take("fire");
  EXPECT_EQ(shard_of(firing), 3U);
  redis->answer(firing, fired(0, "1800000000750.125"));
  settle();
  timer_message(3, "1800000000650.125");
  clock->advance(milliseconds(200) - microseconds(1));
  EXPECT_EQ(shards_of("fire"), (std::multiset<std::uint32_t>{1}));
  clock->advance(microseconds(1));
  EXPECT_EQ(shards_of("fire"), (std::multiset<std::uint32_t>{3, 1}));
}

// Without a recent answer of the shard (its five-second looks unanswered), the message fires the
// shard at once, as it does during a firing (then again once that answers).
TEST_F(Firing, ATimerMessageFiresAtOnceWhenTheShardsClockIsOldOrAFiringIsUnderWay) {
  own_every_shard();
  clock->advance(milliseconds(15'000) + microseconds(1));
  timer_message(2, "1800000016000.000");
  ASSERT_EQ(shards_of("fire"), (std::multiset<std::uint32_t>{2}));
  Call firing = take("fire");
  redis->answer(firing, fired());
  settle();
  clock->advance(milliseconds(1));
  timer_message(2, "1800000016000.000");
  EXPECT_EQ(redis->count("fire"), 0U) << "the answer's clock not used";
  timer_message(1);
  Call under_way = take("fire");
  timer_message(1, "1800000016000.000");
  EXPECT_EQ(redis->count("fire"), 0U) << "two firings of a shard side by side";
  redis->answer(under_way, fired());
  settle();
  EXPECT_EQ(shards_of("fire"), (std::multiset<std::uint32_t>{1}));
}

TEST_F(Firing, ATimerInTheYear9999ArmsTheFiringAnHourAheadAndNoFurther) {
  own_every_shard();
  timer_message(2);
  Call fire = take("fire");
  redis->answer(fire, fired(0, "253402300799000.000"));  // 9999-12-31T23:59:59Z
  clock->advance(std::chrono::hours(1) - microseconds(1));
  EXPECT_EQ(redis->count("fire"), 0U);
  clock->advance(microseconds(1));
  ASSERT_EQ(redis->count("fire"), 1U) << "not fired an hour on";
  EXPECT_EQ(shard_of(take("fire")), 2U);
}

TEST_F(Firing, TheFiveSecondLookAsksEveryShardInOneCallAndFiresAnOwnedOneOnlyWhenDue) {
  own_every_shard();  // the node's first look, and that at the shards it took: no timer anywhere
  clock->advance(milliseconds(5000) - microseconds(1));
  EXPECT_FALSE(latest_look()) << "a look before five seconds";
  clock->advance(microseconds(1));
  auto look = latest_look();
  ASSERT_TRUE(look);
  EXPECT_TRUE(look->commands[0][1].ends_with("_slots")) << look->commands[0][1];
  EXPECT_EQ(look->args(), (std::vector<std::string>{"dq:{0}", "dq:{1}", "dq:{2}", "dq:{3}"}));
  EXPECT_EQ(redis->count("fire") + redis->count("overdue"), 0U);
  // Shard 1's timer is due (a message lost), 2's in 300 ms; 3 was not looked at there.
  answer_look(*look, {"-1", "1800000000000", "1800000000300", "-2"});
  EXPECT_EQ(shards_of("fire"), (std::multiset<std::uint32_t>{1, 3}));
  answer_fires();
  clock->advance(milliseconds(300) - microseconds(1));
  EXPECT_EQ(redis->count("fire"), 0U);
  clock->advance(microseconds(1));
  EXPECT_EQ(shards_of("fire"), (std::multiset<std::uint32_t>{2}));
}

TEST_F(Firing, LooksGoOneCallAtATimeAndANewRoundDropsTheCallsOfTheOneBeforeNotYetSent) {
  constexpr std::uint32_t kMany = 200;  // four calls a round: 64, 64, 64, 8
  open_node({}, kMany);
  auto first = redis->take("look_all");
  ASSERT_TRUE(first);
  EXPECT_EQ(first->args().size(), 64U);
  EXPECT_EQ(redis->count("look_all"), 0U) << "a second call before the first was answered";
  clock->advance(milliseconds(5000));  // the next round, with the first call still unanswered
  EXPECT_EQ(redis->count("look_all"), 0U);
  answer_look(*first, std::vector<std::string>(64, "-1"));
  std::size_t calls = 0;
  std::set<std::string> named;
  while (auto call = redis->take("look_all")) {
    EXPECT_EQ(redis->count("look_all"), 0U) << "a second call before an answer";
    ++calls;
    for (const auto& shard : call->args()) named.insert(shard);
    answer_look(*call, std::vector<std::string>(call->args().size(), "-1"));
  }
  EXPECT_EQ(calls, 4U) << "the first round's calls not yet sent went too";
  EXPECT_EQ(named.size(), kMany);
}

TEST_F(Firing, ALookArmsAnOwnersTimerEarlierButNeverLater) {
  own_every_shard();
  timer_message(0);
  answer_next("fire", fired(0, "1800000007000.000"));  // shard 0 armed at 7 s
  clock->advance(milliseconds(5000));
  auto look = latest_look();
  ASSERT_TRUE(look);
  // Shard 0's earliest timer at 6 s (a message lost), shard 1's at 8 s (nothing armed for it).
  answer_look(*look, {"1800000001000", "1800000003000", "-1", "-1"});
  EXPECT_EQ(redis->count("fire"), 0U);
  clock->advance(milliseconds(1000) - microseconds(1));
  EXPECT_EQ(redis->count("fire"), 0U);
  clock->advance(microseconds(1));
  EXPECT_EQ(shards_of("fire"), (std::multiset<std::uint32_t>{0}));
  answer_fires();
  clock->advance(milliseconds(2000) - microseconds(1));
  EXPECT_EQ(redis->count("fire"), 0U) << "fired at the timer the look replaced";
  clock->advance(microseconds(1));
  EXPECT_EQ(shards_of("fire"), (std::multiset<std::uint32_t>{1}));
}

TEST_F(Firing, TheFiveSecondLookSetsEveryShardsOverdueGaugeAndOneThatFailsAsksEachAlone) {
  answer_heartbeat({"other-node"});
  acquire_all();
  answer_fires();
  const auto order = rotation();
  clock->advance(milliseconds(5000));
  auto look = latest_look();
  ASSERT_TRUE(look);
  std::vector<std::string> times(kShards, "-1");
  times[order[2]] = "1799999997500";  // another node's shard, left 2.5 s behind
  answer_look(*look, times);
  EXPECT_EQ(redis->count("fire") + redis->count("overdue"), 0U);
  std::string page;
  metrics::Page out(page);
  metrics.render(out);
  EXPECT_NE(
      page.find("delayq_shard_overdue_seconds{shard=\"" + std::to_string(order[2]) + "\"} 2.5"),
      std::string::npos)
      << page;
  clock->advance(milliseconds(5000));
  look = latest_look();
  ASSERT_TRUE(look);
  redis->fail(*look, Status(Code::kIOError, "connection reset"));
  settle();
  EXPECT_EQ(shards_of("fire"), (std::multiset<std::uint32_t>{order[0], order[1]}));
  EXPECT_EQ(shards_of("overdue"), (std::multiset<std::uint32_t>{order[2], order[3]}));
}

TEST_F(Firing, WhileAShardsChannelIsNotSubscribedItsOwnerLooksEveryResync) {
  RedisBrokerOptions options;
  options.resync = milliseconds(400);
  open_node(options);
  own_every_shard();
  redis->unsubscribed = {1};
  for (const std::uint32_t shard : {1U, 2U}) {
    timer_message(shard);
    answer_next("fire", fired(0, "1800000001500.000"));  // 1.5 s away
  }
  clock->advance(milliseconds(400) - microseconds(1));
  EXPECT_EQ(redis->count("fire"), 0U);
  clock->advance(microseconds(1));
  EXPECT_EQ(shards_of("fire"), (std::multiset<std::uint32_t>{1}));
  answer_next("fire", fired(0, "1800000001100.000"));  // 1.1 s away: 700 ms after this answer
  clock->advance(milliseconds(400));
  EXPECT_EQ(shards_of("fire"), (std::multiset<std::uint32_t>{1}));
  answer_next("fire", fired(0, "1800000000300.000"));  // 300 ms away
  clock->advance(milliseconds(300) - microseconds(1));
  EXPECT_EQ(redis->count("fire"), 0U);
  clock->advance(microseconds(1));
  EXPECT_EQ(shards_of("fire"), (std::multiset<std::uint32_t>{1}));
}

TEST_F(Firing, AFiringThatMovedAFullBatchFiresAgainAtOnce) {
  own_every_shard();
  timer_message(3);
  answer_next("fire", fired(1000, "1800000000000.000"));
  settle();
  Call again = take("fire");
  EXPECT_EQ(shard_of(again), 3U);
  redis->answer(again, fired(999, "1800000000100.000"));
  settle();
  EXPECT_EQ(redis->count("fire"), 0U) << "a batch not full fired again at once";
}

TEST_F(Firing, AMessageDuringAFiringFiresAgainOnceItAnswers) {
  own_every_shard();
  timer_message(1);
  Call first = take("fire");
  timer_message(1);
  EXPECT_EQ(redis->count("fire"), 0U) << "two firings of a shard side by side";
  redis->answer(first, fired());
  settle();
  Call again = take("fire");
  EXPECT_EQ(shard_of(again), 1U);
}

TEST_F(Firing, AFailedFiringIsTriedAgainAfter100Milliseconds) {
  own_every_shard();
  timer_message(0);
  Call lost = take("fire");
  redis->fail(lost, Status(Code::kIOError, "connection reset"));
  settle();
  EXPECT_EQ(broker->owned_shards(), kShards);
  clock->advance(milliseconds(100) - microseconds(1));
  EXPECT_EQ(redis->count("fire"), 0U);
  clock->advance(microseconds(1));
  ASSERT_EQ(redis->count("fire"), 1U);
  EXPECT_EQ(shard_of(take("fire")), 0U);
}

TEST_F(Firing, AFiringAnsweredWithSomethingElseIsTriedAgainAfter100Milliseconds) {
  own_every_shard();
  timer_message(0);
  answer_next("fire", reply::ok({delayq::redis::Reply::number(0)}));
  clock->advance(milliseconds(100) - microseconds(1));
  EXPECT_EQ(redis->count("fire"), 0U);
  clock->advance(microseconds(1));
  EXPECT_EQ(redis->count("fire"), 1U);
}

TEST_F(Firing, AFencedFiringDropsTheShard) {
  own_every_shard();
  timer_message(1);
  answer_next("fire", reply::code("fenced", "not the owner"));
  settle();
  EXPECT_EQ(broker->owned_shards(), kShards - 1);
  clock->advance(milliseconds(5000));
  auto look = latest_look();
  ASSERT_TRUE(look);
  answer_look(*look, std::vector<std::string>(kShards, "1800000000000"));  // all due
  EXPECT_EQ(shards_of("fire"), (std::multiset<std::uint32_t>{0, 2, 3}));
  answer_fires();
  timer_message(1);
  EXPECT_EQ(redis->count("fire"), 0U);
}

TEST_F(Firing, ATimerMessageFiresAnOwnedShardAtOnceAndIsIgnoredForAnother) {
  answer_heartbeat({"other-node"});
  acquire_all();
  answer_fires();
  const auto order = rotation();
  timer_message(order[2]);
  EXPECT_EQ(redis->count("fire"), 0U) << "a shard of another node fired";
  timer_message(order[1]);
  Call fire = take("fire");
  EXPECT_EQ(shard_of(fire), order[1]);
  EXPECT_EQ(fire.args(), (std::vector<std::string>{"2", "1000"}));
}

TEST_F(Firing, AShardChannelSubscribedAgainFiresTheShardIfOwned) {
  answer_heartbeat({"other-node"});
  acquire_all();
  answer_fires();
  const auto order = rotation();
  redis->shard_resubscribed(order[3]);
  settle();
  EXPECT_EQ(redis->count("fire"), 0U);
  redis->shard_resubscribed(order[0]);
  settle();
  EXPECT_EQ(shards_of("fire"), std::multiset<std::uint32_t>{order[0]});
}

TEST_F(Firing, TheEventsChannelSubscribedAgainFiresEveryShardOwned) {
  answer_heartbeat({"other-node"});
  acquire_all();
  answer_fires();
  redis->resubscribed();
  settle();
  const auto order = rotation();
  EXPECT_EQ(shards_of("fire"), (std::multiset<std::uint32_t>{order[0], order[1]}));
}

TEST_F(Firing, EachDelayedJobFiredIsCountedInTheFireLateness) {
  own_every_shard();
  const metrics::Histogram& fire_lateness = *metrics.find_histogram(broker::kFireLateness);
  const auto before = fire_lateness.count();
  timer_message(2);
  answer_next("fire", fired(2, "-1", reply::array({}), {"2500", "1200000"}));
  settle();
  EXPECT_EQ(fire_lateness.count(), before + 2);
}

TEST_F(Firing, AFiringHandsAWaitingReserveToItsCallAndAServedJobAnswersItWithNoReserve) {
  own_every_shard();
  auto s = session();
  Outcome<broker::Job> got;
  wait_for_a_job(*s, got);
  timer_message(2);
  Call fire = take("fire");
  const auto args = fire.args();
  ASSERT_EQ(args.size(), 5U);
  EXPECT_TRUE(args[2].starts_with(broker->node_name() + "/")) << args[2];
  EXPECT_EQ(std::vector<std::string>(args.begin() + 3, args.end()),
            (std::vector<std::string>{"1", "default"}));
  serve_from(fire, 6);
  ASSERT_TRUE(got.done());
  ASSERT_TRUE(got.result->is_ok()) << got.result->status().to_string();
  EXPECT_EQ(got.result->value().view.id, 6U);
  EXPECT_EQ(got.calls, 1);
  EXPECT_EQ(redis->count("reserve"), 0U);
}

// Once a tube's jobs come ready here, a firing carries its reserves, not those of a tube that
// never fires, however long they have waited (before any did, it carries the longest waiting).
TEST_F(Firing, AFiringCarriesTheReservesOfATubeThatFiresHereNotLongerWaitingOnesOfAnother) {
  own_every_shard();
  auto first = session();
  Outcome<broker::Job> first_got;
  wait_for_a_job(*first, first_got);
  std::vector<std::unique_ptr<broker::Session>> idle;
  std::deque<Outcome<broker::Job>> idle_got(40);
  for (auto& got : idle_got) {
    idle.push_back(session());
    broker::ReserveRequest request;
    request.tubes = {"idle"};
    idle.back()->reserve(request, got.callback());
  }
  settle();
  while (redis->count("probe") > 0) answer_empty_probes();  // the rounds they share
  timer_message(2);
  Call fire = take("fire");
  auto args = fire.args();
  ASSERT_EQ(args.size(), 2U + 8 * 3);  // the 8 longest waiting, whatever their tubes
  EXPECT_EQ(std::vector<std::string>(args.begin() + 3, args.begin() + 5),
            (std::vector<std::string>{"1", "default"}));
  EXPECT_EQ(std::vector<std::string>(args.begin() + 6, args.begin() + 8),
            (std::vector<std::string>{"1", "idle"}));
  serve_from(fire, 6);
  ASSERT_TRUE(first_got.done() && first_got.result->is_ok());
  // "default" fired lately: the next firing carries the reserve of it that came last.
  auto second = session();
  Outcome<broker::Job> second_got;
  wait_for_a_job(*second, second_got);
  timer_message(3);
  args = take("fire").args();
  ASSERT_EQ(args.size(), 5U);
  EXPECT_EQ(std::vector<std::string>(args.begin() + 3, args.end()),
            (std::vector<std::string>{"1", "default"}));
}

TEST_F(Firing, AFiringThatServedNothingLeavesTheReserveWaiting) {
  own_every_shard();
  auto s = session();
  Outcome<broker::Job> got;
  wait_for_a_job(*s, got);
  timer_message(2);
  answer_next("fire", fired(0, "-1", reply::array({delayq::redis::Reply{}})));
  settle();
  EXPECT_FALSE(got.done());
  EXPECT_EQ(redis->count("reserve") + redis->count("probe"), 0U);
  // Still waiting: the next firing carries it again.
  timer_message(3);
  EXPECT_EQ(take("fire").args().size(), 5U);
}

TEST_F(Firing, AfterALostFiringTheNextOfTheShardHandsNoWaiterAJob) {
  own_every_shard();
  auto s = session();
  Outcome<broker::Job> got;
  wait_for_a_job(*s, got);
  timer_message(2);
  Call lost = take("fire");
  ASSERT_EQ(lost.args().size(), 5U);
  redis->fail(lost, Status(Code::kIOError, "connection reset"));
  settle();
  answer_empty_probes();  // the shard's heads, unknown after the lost call, asked again
  clock->advance(milliseconds(100));
  Call retry = take("fire");
  EXPECT_EQ(shard_of(retry), 2U);
  EXPECT_EQ(retry.args(), (std::vector<std::string>{epoch_of(2), "1000"}))
      << "the job the lost call may have reserved for the waiter is handed out again";
  redis->answer(retry, fired());
  settle();
  // That firing answered: the next hands the waiter again.
  timer_message(2);
  EXPECT_EQ(take("fire").args().size(), 5U);
  EXPECT_FALSE(got.done());
}

}  // namespace
}  // namespace delayq::broker::redis::testing
