// turns_test.cc — the turns nodes take at a job another node made ready, over a scripted Redis
// (waking_fixture.h): only the node whose turn it is sends a reserve; a node with no reserve
// waiting passes the turn on; a job another node took is not asked for again. No process, no
// sleep: the test answers every call and publishes every message.
#include "broker/redis/layout.h"
#include "broker/redis/waking_fixture.h"

namespace delayq::broker::redis::testing {
namespace {

using delayq::redis::Reply;

class Turns : public WakingTest {
 protected:
  // The heartbeat answered: this node and `others` are live.
  void live(const std::vector<std::string>& others) {
    Call call = take("heartbeat");
    nodes_ = {broker->node_name()};
    std::vector<Reply> names = {Reply::string(broker->node_name())};
    for (const auto& other : others) {
      nodes_.insert(other);
      names.push_back(Reply::string(other));
    }
    redis->answer(call, reply::ok({reply::array(std::move(names))}));
    settle();
  }
  // A head of "default" in `shard`, of a job `above` or later, whose round (`from`'s job) goes
  // first to `first` and then, if given, to `second`.
  [[nodiscard]] std::string head_for(const std::string& first, std::uint32_t shard,
                                     const std::string& from,
                                     const std::optional<std::string>& second = {},
                                     JobId above = 1) const {
    for (JobId id = above; id < above + 10000; ++id) {
      const std::string h = head(1024, id);
      if (next_turn(nodes_, shard, from, h, nullptr) != first) continue;
      if (second && next_turn(nodes_, shard, from, h, &first) != second) continue;
      return h;
    }
    ADD_FAILURE() << "no such head";
    return {};
  }
  // The "p" messages this node published: each one's payload, on its channel.
  std::vector<std::pair<std::string, std::string>> passes() {
    std::vector<std::pair<std::string, std::string>> sent;
    while (auto call = redis->take("SPUBLISH")) {
      sent.emplace_back(call->commands[0].at(1), call->commands[0].at(2));
    }
    return sent;
  }
  static JobId head_id(const std::string& head) {
    return std::stoull(head.substr(head.rfind(':') + 1));
  }
  void message(const std::string& payload) {
    redis->publish_shard(1, payload);
    settle();
  }
  std::set<std::string> nodes_;
};

TEST_F(Turns, AJobAnotherNodeMadeReadyIsTriedOnlyByTheNodeWhoseTurnItIs) {
  live({"b+h", "c+h"});
  Outcome<broker::Job> got;
  auto s = waiting(got);
  const std::string job = head_for("b+h", 1, "c+h", broker->node_name());
  message("r dq:{1} default c+h " + job);
  EXPECT_EQ(redis->count("reserve"), 0U) << "tried on another node's turn";
  EXPECT_TRUE(passes().empty());
  // b+h had no reserve waiting: the turn comes here.
  message("p dq:{1} default c+h " + broker->node_name() + " " + job);
  Call reserve = take("reserve");
  EXPECT_EQ(shard_of(reserve), 1U);
  redis->answer(reserve, reserved(ready_job(head_id(job)), {""}));
  settle();
  EXPECT_EQ(id_of(got), head_id(job));
  EXPECT_TRUE(passes().empty());
}

TEST_F(Turns, AJobWhoseRoundStartsHereIsTriedAtOnce) {
  live({"b+h", "c+h"});
  Outcome<broker::Job> got;
  auto s = waiting(got);
  message("r dq:{1} default c+h " + head_for(broker->node_name(), 1, "c+h"));
  EXPECT_EQ(redis->count("reserve"), 1U);
  EXPECT_TRUE(passes().empty());
}

TEST_F(Turns, ANodeWithNoReserveWaitingPassesTheTurnToTheNextAndTheLastEndsTheRound) {
  live({"b+h", "c+h"});
  const std::string job = head_for(broker->node_name(), 1, "c+h");
  message("r dq:{1} default c+h " + job);
  EXPECT_EQ(passes(),
            (std::vector<std::pair<std::string, std::string>>{
                {"dq:{1}:events", "p dq:{1} default c+h b+h " + job + " " + broker->node_name()}}))
      << "a pass that does not say no reserve here ever asked for the tube";
  // Here last: nobody after it.
  const std::string last = head_for("b+h", 1, "c+h", broker->node_name());
  message("r dq:{1} default c+h " + last);
  message("p dq:{1} default c+h " + broker->node_name() + " " + last);
  EXPECT_TRUE(passes().empty());
  EXPECT_EQ(redis->count("reserve"), 0U);
}

TEST_F(Turns, ANodeThatNeverHadAReserveOfTheTubeIsLeftOutOfItsRoundsUntilItHasOne) {
  live({"b+h", "c+h"});
  Outcome<broker::Job> got;
  auto s = waiting(got);
  // Making the tube's hint, this node says it has a reserve of it.
  std::vector<std::string> said;
  while (auto call = redis->take("PUBLISH")) said.push_back(call->commands[0].at(2));
  EXPECT_EQ(std::count(said.begin(), said.end(), "w default " + broker->node_name()), 1);
  // b+h passes a turn, and has no reserve of the tube: its turns come here now.
  message("p dq:{1} default c+h c+h " + head(1024, 1) + " b+h");
  const std::string job = head_for("b+h", 1, "c+h", broker->node_name());
  message("r dq:{1} default c+h " + job);
  Call reserve = take("reserve");
  redis->answer(reserve, reserved(ready_job(head_id(job)), {""}));
  settle();
  EXPECT_EQ(id_of(got), head_id(job));
  // b+h has a reserve of it now: its turns are its own again.
  redis->publish("w default b+h");
  settle();
  Outcome<broker::Job> again;
  auto s2 = waiting(again);
  message("r dq:{1} default c+h " + head_for("b+h", 1, "c+h", {}, head_id(job) + 1));
  EXPECT_EQ(redis->count("reserve"), 0U) << "took b+h's turn";
}

TEST_F(Turns, AJobWhoseRoundWasLostIsTakenAtTheNodesPeriodicLook) {
  live({"b+h", "c+h"});
  Outcome<broker::Job> got;
  auto s = waiting(got);
  // b+h's turn, and b+h is gone (killed before its heartbeat lapsed): no pass comes.
  message("r dq:{1} default c+h " + head_for("b+h", 1, "c+h"));
  ASSERT_EQ(redis->count("reserve"), 0U);
  clock->advance(std::chrono::milliseconds(5000));
  settle();
  Call reserve = take("reserve");
  EXPECT_EQ(shard_of(reserve), 1U);
}

TEST_F(Turns, WhileANodeOfAnOlderVersionSeemsLiveTheFirstStillPassesItsTurnOn) {
  // This node sees an older one live; b+h may not yet, and waits for its turn.
  live({"b+h", "older"});
  const std::string job = head_for(broker->node_name(), 1, "older");
  message("r dq:{1} default older " + job);
  EXPECT_EQ(
      passes(),
      (std::vector<std::pair<std::string, std::string>>{
          {"dq:{1}:events", "p dq:{1} default older b+h " + job + " " + broker->node_name()}}));
}

TEST_F(Turns, ATurnAtAJobOfATubePausedHereIsPassedOn) {
  live({"b+h", "c+h"});
  Outcome<broker::Job> got;
  auto s = waiting(got);
  paused_elsewhere("default", std::chrono::seconds(3));
  const std::string job = head_for(broker->node_name(), 1, "c+h", std::string("b+h"));
  message("r dq:{1} default c+h " + job);
  EXPECT_EQ(redis->count("reserve"), 0U);
  EXPECT_EQ(passes(), (std::vector<std::pair<std::string, std::string>>{
                          {"dq:{1}:events", "p dq:{1} default c+h b+h " + job}}))
      << "b+h may see the pause over already";
}

TEST_F(Turns, AReserveUnderWayInTheShardKeepsTheTurnForAnotherWaitingHere) {
  live({"b+h", "c+h"});
  Outcome<broker::Job> first;
  auto s1 = waiting(first);
  Outcome<broker::Job> second;
  auto s2 = session();
  s2->reserve({}, second.callback());
  settle();
  // One reserve goes to shard 1 for a job there; another job comes ready there meanwhile.
  const std::string job = head_for(broker->node_name(), 1, "c+h");
  message("r dq:{1} default c+h " + job);
  Call under_way = take("reserve");
  const std::string next = head_for(broker->node_name(), 1, "c+h", {}, head_id(job) + 1);
  message("r dq:{1} default c+h " + next);
  EXPECT_TRUE(passes().empty()) << "passed on while the answer under way wakes the other";
  EXPECT_EQ(redis->count("reserve"), 0U);
  redis->answer(under_way, reserved(ready_job(head_id(job)), {next}));
  settle();
  EXPECT_EQ(redis->count("reserve"), 1U) << "the answer said the shard holds more";
}

TEST_F(Turns, WhileANodeOfAnOlderVersionIsLiveEveryNodeTriesAsThatVersionExpects) {
  live({"b+h", "older"});
  Outcome<broker::Job> got;
  auto s = waiting(got);
  message("r dq:{1} default older " + head_for("b+h", 1, "older"));
  EXPECT_EQ(redis->count("reserve"), 1U);
  EXPECT_TRUE(passes().empty());
}

TEST_F(Turns, AJobAnotherNodeTookIsNotAskedForAndTheJobItLeftGetsARound) {
  live({"b+h", "c+h"});
  Outcome<broker::Job> got;
  auto s = waiting(got);
  message("r dq:{1} default c+h " + head_for("b+h", 1, "c+h"));
  ASSERT_EQ(redis->count("reserve"), 0U);
  // b+h took it, and shard 1 holds nothing more: a new reserve here asks nobody for it.
  message("h dq:{1} default b+h ");
  Outcome<broker::Job> later;
  auto s2 = session();
  s2->reserve({}, later.callback());
  settle();
  EXPECT_EQ(redis->count("reserve"), 0U) << "asked for the job another node took";
  EXPECT_FALSE(later.done());
  // b+h takes another, leaving one whose round starts here: the longest waiting tries.
  message("h dq:{1} default b+h " + head_for(broker->node_name(), 1, "b+h"));
  Call reserve = take("reserve");
  EXPECT_EQ(who(reserve), holder(1));
}

TEST_F(Turns, ANodesOwnMessageWakesNobodyWhenItKnewTheJobAndOneWhenAnOlderMessageHidIt) {
  live({"b+h", "c+h"});
  Outcome<broker::Job> got;
  auto s = waiting(got);
  // Known already (another node's turn): this node's own message of the job wakes nobody.
  const std::string job = head_for("b+h", 1, "c+h");
  message("r dq:{1} default c+h " + job);
  message("r dq:{1} default " + broker->node_name() + " " + job);
  EXPECT_EQ(redis->count("reserve"), 0U);
  // A message of a call before this node's (b+h took what was there then) hid a job this
  // node's own call made ready: its own message brings it back, to its own waiting reserve.
  message("h dq:{1} default b+h ");
  message("r dq:{1} default " + broker->node_name() + " " + job);
  EXPECT_EQ(redis->count("reserve"), 1U);
}

}  // namespace
}  // namespace delayq::broker::redis::testing
