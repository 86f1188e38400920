// broker_contract_test — broker.h's contract, one suite for every broker: the local broker over
// memory and over RocksDB, the Redis broker over one redis-server and over a 3 + 3 cluster
// (contract_brokers.h). A new broker is done when it passes these cases and those of
// schedule_contract_test.cc; the fixture and its checks are contract_fixture.h's.
// Where the brokers differ by design (docs/redis-mode.md), a case asserts each one's documented
// answer, from Capabilities.
#include <gtest/gtest.h>

#include <algorithm>
#include <boost/asio/io_context.hpp>
#include <chrono>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "base/names.h"
#include "broker/contract_fixture.h"

namespace delayq::testing {
namespace {

// ---------------------------------------------------------------------------------------------
// The session's own tubes: use, watch, ignore.

TEST_P(BrokerContract, ASessionUsesAndWatchesDefaultAndChangesBoth) {
  Session& s = session();
  EXPECT_EQ(s.used(), "default");
  EXPECT_EQ(s.watched(), std::vector<std::string>{"default"});
  ASSERT_TRUE(s.use("emails").is_ok());
  EXPECT_EQ(s.used(), "emails");
  auto watching = s.watch("emails");
  ASSERT_TRUE(watching.is_ok());
  EXPECT_EQ(watching.value(), 2U);
  auto left = s.ignore("default");
  ASSERT_TRUE(left.is_ok());
  EXPECT_EQ(left.value(), 1U);
  EXPECT_EQ(s.ignore("emails").code(), Code::kNotIgnored);
  EXPECT_EQ(s.watched(), std::vector<std::string>{"emails"});
}

TEST_P(BrokerContract, ASessionForNamedTubesWatchesNothing) {
  Session& s = session({.watch_default = false, .holder = "http"});
  EXPECT_TRUE(s.watched().empty());
}

TEST_P(BrokerContract, ASessionWatchesAtMostTheLimitOfTubes) {
  Session& s = session();
  for (std::size_t i = 1; i < kMaxWatchedTubes; ++i) {
    ASSERT_TRUE(s.watch("t" + std::to_string(i)).is_ok()) << i;
  }
  EXPECT_EQ(s.watched().size(), kMaxWatchedTubes);
  const auto past = s.watch("one-more");
  EXPECT_EQ(past.code(), Code::kLimit);
  EXPECT_NE(past.status().message().find("at most 10000 tubes"), std::string::npos)
      << past.status().message();
  EXPECT_EQ(s.watch("bad name").code(), Code::kInvalidArgument) << "a bad name is still one";
  auto again = s.watch("t1");
  ASSERT_TRUE(again.is_ok()) << "a tube already watched is not past the limit";
  EXPECT_EQ(again.value(), kMaxWatchedTubes);
  auto refused =
      call<TubeStats>([&](auto done) { admin().stats_tube("one-more", std::move(done)); });
  EXPECT_EQ(refused.code(), Code::kNotFound) << "a refused watch made its tube";
  ASSERT_TRUE(s.ignore("t1").is_ok());
  auto after = s.watch("one-more");
  ASSERT_TRUE(after.is_ok()) << after.status().to_string();
  EXPECT_EQ(after.value(), kMaxWatchedTubes);
}

TEST_P(BrokerContract, BadTubeNamesAreInvalidArguments) {
  Session& s = session();
  EXPECT_EQ(s.use("-starts-with-dash").code(), Code::kInvalidArgument);
  EXPECT_EQ(s.watch("has space").code(), Code::kInvalidArgument);
  EXPECT_EQ(s.use(std::string(201, 'a')).code(), Code::kInvalidArgument);
  EXPECT_EQ(s.used(), "default") << "a refused use changed the used tube";
}

// ---------------------------------------------------------------------------------------------
// put

TEST_P(BrokerContract, APutJobReadsBackWithItsBodyAndFields) {
  Session& s = session();
  PutRequest request;
  request.tube = "orders";
  request.priority = 7;
  request.ttr = 30s;
  request.body = std::string("bytes\0with\r\nanything", 20);
  request.key = "order:1";
  request.group = "user:9";
  auto put_result = put(s, request);
  ASSERT_TRUE(put_result.is_ok()) << put_result.status().to_string();
  const JobView& job = put_result.value().job;
  EXPECT_TRUE(put_result.value().inserted);
  EXPECT_EQ(put_result.value().replaced, 0U);
  EXPECT_NE(job.id, 0U);
  EXPECT_EQ(job.state, JobState::kReady);
  EXPECT_EQ(job.tube, "orders");

  auto read = peek(s, JobRef::by_id(job.id));
  ASSERT_TRUE(read.is_ok()) << read.status().to_string();
  EXPECT_EQ(read.value().body, request.body);
  EXPECT_EQ(read.value().view.tube, "orders");
  EXPECT_EQ(read.value().view.priority, 7U);
  EXPECT_EQ(read.value().view.ttr, 30s);
  EXPECT_EQ(read.value().view.key, "order:1");
  EXPECT_EQ(read.value().view.group, "user:9");
  EXPECT_EQ(read.value().view.state, JobState::kReady);

  auto by_key = peek(s, JobRef::by_key("orders", "order:1"), /*body=*/false);
  ASSERT_TRUE(by_key.is_ok()) << by_key.status().to_string();
  EXPECT_EQ(by_key.value().view.id, job.id);
  EXPECT_TRUE(by_key.value().body.empty()) << "peek without the body read it";
}

TEST_P(BrokerContract, APutGoesToTheUsedTubeWhenItNamesNone) {
  Session& s = session();
  ASSERT_TRUE(s.use("chosen").is_ok());
  PutRequest request;
  auto result = put(s, request);
  ASSERT_TRUE(result.is_ok()) << result.status().to_string();
  EXPECT_EQ(result.value().job.tube, "chosen");
}

TEST_P(BrokerContract, APutWithLongNamesIsRefusedAndNothingIsPut) {
  Session& s = session();
  PutRequest long_key;
  long_key.tube = "t";
  long_key.key = std::string(201, 'k');
  EXPECT_EQ(put(s, long_key).code(), Code::kInvalidArgument);
  PutRequest long_group;
  long_group.tube = "t";
  long_group.group = std::string(201, 'g');
  EXPECT_EQ(put(s, long_group).code(), Code::kInvalidArgument);
  PutRequest bad_tube;
  bad_tube.tube = "no spaces";
  EXPECT_EQ(put(s, bad_tube).code(), Code::kInvalidArgument);
  auto next =
      call<broker::Job>([&](auto done) { s.peek_next("t", JobState::kReady, std::move(done)); });
  EXPECT_EQ(next.code(), Code::kNotFound);
}

TEST_P(BrokerContract, ADueTimeOutOfRangeIsRefused) {
  // Beyond both the extensions' 100 years and beanstalkd's 2^32 - 1 seconds.
  constexpr std::int64_t kBeyondDelayMs = std::int64_t{0xFFFF'FFFF} * 1000 + 1;
  static_assert(kBeyondDelayMs > kMaxDelayMs);
  Session& s = session();
  for (const Due due : {Due::after(-1ms), Due::after(std::chrono::milliseconds(kBeyondDelayMs)),
                        Due::at(-1), Due::at(kLastDueUnixMs + 1)}) {
    PutRequest request;
    request.tube = "range";
    request.due = due;
    EXPECT_EQ(put(s, request).code(), Code::kInvalidArgument) << due.absolute << " " << due.ms;
  }
  PutRequest longest;  // beanstalkd's largest delay
  longest.tube = "range";
  longest.due = Due::after(std::chrono::milliseconds(kBeyondDelayMs - 1));
  auto taken = put(s, longest);
  ASSERT_TRUE(taken.is_ok()) << taken.status().to_string();
  EXPECT_EQ(taken.value().job.delay_ms, kBeyondDelayMs - 1);
  PutRequest last;
  last.tube = "range";
  last.due = Due::at(kLastDueUnixMs);
  auto accepted = put(s, last);
  ASSERT_TRUE(accepted.is_ok()) << accepted.status().to_string();
  EXPECT_EQ(accepted.value().job.due_unix_ms, kLastDueUnixMs);
  ASSERT_TRUE(tube_becomes("range", [](const TubeStats& t) { return t.total_jobs == 2; }));
}

TEST_P(BrokerContract, ATakenKeyReturnsItsHolderUnlessReplaced) {
  Session& s = session();
  const JobView first = put_ok(s, "rate", 100, Due::after(1h), "order:123");
  ASSERT_NE(first.id, 0U);

  PutRequest again;
  again.tube = "rate";
  again.key = "order:123";
  again.due = Due::after(2h);
  auto retried = put(s, again);
  ASSERT_TRUE(retried.is_ok()) << retried.status().to_string();
  EXPECT_FALSE(retried.value().inserted);
  EXPECT_EQ(retried.value().job.id, first.id);

  again.replace = true;
  again.body = "new";
  auto replaced = put(s, again);
  ASSERT_TRUE(replaced.is_ok()) << replaced.status().to_string();
  EXPECT_TRUE(replaced.value().inserted);
  EXPECT_EQ(replaced.value().replaced, first.id);
  EXPECT_NE(replaced.value().job.id, first.id);
  EXPECT_EQ(peek(s, JobRef::by_id(first.id)).code(), Code::kNotFound);
  auto holder = peek(s, JobRef::by_key("rate", "order:123"));
  ASSERT_TRUE(holder.is_ok()) << holder.status().to_string();
  EXPECT_EQ(holder.value().view.id, replaced.value().job.id);
  EXPECT_EQ(holder.value().body, "new");

  // The same key in another tube is another job.
  const JobView other = put_ok(s, "other", 100, {}, "order:123");
  EXPECT_NE(other.id, replaced.value().job.id);
}

TEST_P(BrokerContract, ReplacingAKeyWhoseHolderIsReservedIsAConflict) {
  Session& producer = session();
  Session& worker = session();
  const JobView held = put_ok(producer, "k", 100, {}, "the-key");
  auto reserved = reserve_waiting(worker, "k");
  ASSERT_TRUE(reserved.is_ok()) << reserved.status().to_string();
  ASSERT_EQ(reserved.value().view.id, held.id);
  PutRequest replace;
  replace.tube = "k";
  replace.key = "the-key";
  replace.replace = true;
  EXPECT_EQ(put(producer, replace).code(), Code::kConflict);
  auto still = peek(producer, JobRef::by_id(held.id));
  ASSERT_TRUE(still.is_ok());
  EXPECT_EQ(still.value().view.state, JobState::kReserved);
}

TEST_P(BrokerContract, ADrainingBrokerRefusesPutsAndSaysSo) {
  Session& s = session();
  broker_->set_draining(true);
  EXPECT_TRUE(broker_->draining());
  EXPECT_EQ(broker_->health().code(), Code::kDraining);
  PutRequest request;
  request.tube = "t";
  EXPECT_EQ(put(s, request).code(), Code::kDraining);
  broker_->set_draining(false);
  EXPECT_TRUE(broker_->health().is_ok());
  EXPECT_TRUE(put(s, request).is_ok());
}

TEST_P(BrokerContract, AJobsOwnUrlNeedsItsTubesWebhook) {
  Session& s = session();
  PutRequest request;
  request.tube = "hooked";
  request.url = "http://127.0.0.1:9/own";
  EXPECT_EQ(put(s, request).code(), Code::kConflict);

  Webhook hook;
  hook.url = "http://127.0.0.1:9/tube";
  auto set =
      call<Webhook>([&](auto done) { admin().set_webhook("hooked", hook, std::move(done)); });
  ASSERT_TRUE(set.is_ok()) << set.status().to_string();
  // The tube's jobs would be delivered by the server's deliverer, which no case runs: the job
  // stays where the broker put it.
  request.content_type = "application/json";
  auto accepted = put(s, request);
  ASSERT_TRUE(accepted.is_ok()) << accepted.status().to_string();
  auto read = peek(s, JobRef::by_id(accepted.value().job.id));
  ASSERT_TRUE(read.is_ok()) << read.status().to_string();
  EXPECT_EQ(read.value().delivery.url, "http://127.0.0.1:9/own");
  EXPECT_EQ(read.value().delivery.content_type, "application/json");
}

TEST_P(BrokerContract, ATtrOfZeroIsTakenAsOneSecond) {
  Session& s = session();
  PutRequest request;
  request.tube = "t";
  request.ttr = 0s;
  auto result = put(s, request);
  ASSERT_TRUE(result.is_ok());
  auto read = peek(s, JobRef::by_id(result.value().job.id), false);
  ASSERT_TRUE(read.is_ok());
  EXPECT_EQ(read.value().view.ttr, 1s);
}

TEST_P(BrokerContract, IdsAreDistinctAndNeverReusedAcrossARestart) {
  Session& s = session();
  std::set<JobId> seen;
  JobId last = 0;
  for (int i = 0; i < 5; ++i) {
    const JobView job = put_ok(s, "ids");
    EXPECT_TRUE(seen.insert(job.id).second) << "id " << job.id << " handed out twice";
    if (can_.sequential_ids) {
      EXPECT_GT(job.id, last);
    }
    last = job.id;
  }
  for (const JobId id : seen) ASSERT_TRUE(erase(s, JobRef::by_id(id)).is_ok());
  restart();
  Session& after = session();
  for (int i = 0; i < 5; ++i) {
    const JobView job = put_ok(after, "ids");
    EXPECT_TRUE(seen.insert(job.id).second) << "id " << job.id << " reused after a restart";
    if (can_.sequential_ids) {
      EXPECT_GT(job.id, last);
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Due times: never early, absolute and relative.

TEST_P(BrokerContract, ADelayedJobIsNeverHandedOutEarly) {
  Session& producer = session();
  Session& worker = session();
  const std::int64_t before = wall_ms();
  const JobView job = put_ok(producer, "later", 100, Due::after(300ms));
  EXPECT_EQ(job.state, JobState::kDelayed);
  EXPECT_GE(job.due_unix_ms, before + 300);
  EXPECT_EQ(job.delay_ms, 300);
  auto got = reserve_waiting(worker, "later");
  const std::int64_t at = wall_ms();
  ASSERT_TRUE(got.is_ok()) << got.status().to_string();
  EXPECT_EQ(got.value().view.id, job.id);
  EXPECT_GE(at, job.due_unix_ms) << "handed out " << job.due_unix_ms - at << " ms early";
}

TEST_P(BrokerContract, AnAbsoluteDueTimeIsKeptAndOneInThePastIsReadyAtOnce) {
  Session& s = session();
  const std::int64_t at = wall_ms() + 3'600'000;
  const JobView later = put_ok(s, "abs", 100, Due::at(at));
  EXPECT_EQ(later.state, JobState::kDelayed);
  EXPECT_EQ(later.due_unix_ms, at);
  const JobView past = put_ok(s, "abs", 100, Due::at(1'000'000'000'000));
  EXPECT_EQ(past.state, JobState::kReady);
  auto got = reserve(s, {"abs"});
  ASSERT_TRUE(got.is_ok()) << got.status().to_string();
  EXPECT_EQ(got.value().view.id, past.id);
}

// ---------------------------------------------------------------------------------------------
// reserve

TEST_P(BrokerContract, ReservesTakeTheBestPriorityFirst) {
  Session& producer = session();
  Session& worker = session();
  const JobView low = put_ok(producer, "prio", 50);
  const JobView high = put_ok(producer, "prio", 1);
  const JobView mid = put_ok(producer, "prio", 10);
  ASSERT_TRUE(tube_becomes("prio", [](const TubeStats& t) { return t.ready == 3; }));
  std::vector<JobId> order;
  for (int i = 0; i < 3; ++i) {
    auto got = reserve_waiting(worker, "prio");
    ASSERT_TRUE(got.is_ok()) << got.status().to_string();
    EXPECT_EQ(got.value().view.state, JobState::kReserved);
    order.push_back(got.value().view.id);
  }
  EXPECT_EQ(order, (std::vector<JobId>{high.id, mid.id, low.id}));
}

// A worker watching hundreds of tubes, few of which hold jobs: each poll takes the best of
// them, and sees every job put before it (over Redis, the many tubes' heads come back in one
// string a shard, and the tubes a shard never held are answered without a look).
TEST_P(BrokerContract, APollOverHundredsOfTubesTakesTheBestJobOfThem) {
  Session& producer = session();
  Session& worker = session();
  std::vector<std::string> tubes;
  for (int i = 0; i < 300; ++i) tubes.push_back("many-" + std::to_string(i));
  const JobView low = put_ok(producer, tubes[10], 50);
  const JobView high = put_ok(producer, tubes[250], 5);
  const JobView mid = put_ok(producer, tubes[150], 20);
  std::vector<JobId> order;
  for (int i = 0; i < 3; ++i) {
    auto got = reserve(worker, tubes, 0ms);
    ASSERT_TRUE(got.is_ok()) << got.status().to_string();
    order.push_back(got.value().view.id);
  }
  EXPECT_EQ(order, (std::vector<JobId>{high.id, mid.id, low.id}));
  EXPECT_EQ(reserve(worker, tubes, 0ms).code(), Code::kTimedOut);
  // A job put into one of them while the worker waits reaches it.
  auto out = std::make_shared<std::optional<Result<broker::Job>>>();
  inside_call_ = true;
  (void)worker.reserve(broker::ReserveRequest{tubes, std::chrono::milliseconds(kWait)},
                       expect_once(out));
  inside_call_ = false;
  run_for(50ms);
  const JobView late = put_ok(producer, tubes[299], 7);
  ASSERT_TRUE(run_until([&] { return out->has_value(); }));
  ASSERT_TRUE((*out)->is_ok()) << (*out)->status().to_string();
  EXPECT_EQ((*out)->value().view.id, late.id);
}

TEST_P(BrokerContract, AReserveWithNoWaitOnAnEmptyTubeTimesOut) {
  Session& s = session();
  EXPECT_EQ(reserve(s, {"empty"}, 0ms).code(), Code::kTimedOut);
  EXPECT_EQ(reserve(s, {}, 0ms).code(), Code::kTimedOut) << "the watch list (default)";
}

TEST_P(BrokerContract, AReserveWithATimeoutEndsWhenItPasses) {
  Session& s = session();
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(reserve(s, {"empty"}, 200ms).code(), Code::kTimedOut);
  EXPECT_GE(std::chrono::steady_clock::now() - start, 200ms) << "ended before its timeout";
}

TEST_P(BrokerContract, AWaitingReserveGetsAJobPutAfterIt) {
  Session& producer = session();
  Session& worker = session();
  auto out = std::make_shared<std::optional<Result<broker::Job>>>();
  inside_call_ = true;
  const std::uint64_t ticket =
      worker.reserve(broker::ReserveRequest{{"wake"}, std::nullopt}, expect_once(out));
  inside_call_ = false;
  EXPECT_NE(ticket, 0U);
  run_for(50ms);
  EXPECT_FALSE(out->has_value()) << "a reserve on an empty tube completed";
  const JobView job = put_ok(producer, "wake");
  ASSERT_TRUE(run_until([&] { return out->has_value(); }));
  ASSERT_TRUE((*out)->is_ok()) << (*out)->status().to_string();
  EXPECT_EQ((*out)->value().view.id, job.id);
  EXPECT_EQ((*out)->value().body, "body of wake");
  EXPECT_FALSE(worker.cancel_reserve(ticket)) << "an answered reserve could still be cancelled";
}

TEST_P(BrokerContract, ACancelledReserveEndsTimedOutOnce) {
  Session& s = session();
  auto out = std::make_shared<std::optional<Result<broker::Job>>>();
  inside_call_ = true;
  const std::uint64_t ticket =
      s.reserve(broker::ReserveRequest{{"never"}, std::nullopt}, expect_once(out));
  inside_call_ = false;
  ASSERT_NE(ticket, 0U);
  run_for(20ms);
  inside_call_ = true;
  EXPECT_TRUE(s.cancel_reserve(ticket));
  inside_call_ = false;
  ASSERT_TRUE(run_until([&] { return out->has_value(); }));
  EXPECT_EQ((*out)->code(), Code::kTimedOut);
  EXPECT_FALSE(s.cancel_reserve(ticket));
  // A job put now is not handed to the cancelled reserve.
  Session& producer = session();
  const JobView job = put_ok(producer, "never");
  auto left = reserve_waiting(producer, "never");
  ASSERT_TRUE(left.is_ok()) << left.status().to_string();
  EXPECT_EQ(left.value().view.id, job.id);
}

TEST_P(BrokerContract, AReserveOnTheWatchListTakesFromEveryWatchedTube) {
  Session& producer = session();
  Session& worker = session();
  ASSERT_TRUE(worker.watch("second").is_ok());
  const JobView job = put_ok(producer, "second");
  auto got = call<broker::Job>([&](auto done) {
    (void)worker.reserve(broker::ReserveRequest{{}, std::chrono::milliseconds(kWait)},
                         std::move(done));
  });
  ASSERT_TRUE(got.is_ok()) << got.status().to_string();
  EXPECT_EQ(got.value().view.id, job.id);
}

TEST_P(BrokerContract, ReserveJobTakesADelayedJobByIdButNotAReservedOne) {
  Session& producer = session();
  Session& worker = session();
  const JobView job = put_ok(producer, "byid", 100, Due::after(1h));
  const std::int64_t before = wall_ms();
  auto got = call<broker::Job>([&](auto done) { worker.reserve_job(job.id, std::move(done)); });
  ASSERT_TRUE(got.is_ok()) << got.status().to_string();
  EXPECT_EQ(got.value().view.state, JobState::kReserved);
  // Taken early, it became ready then: its due time is not an hour ahead any more (it is when
  // it last became ready, never in the future), so that a restart's ready job does not say so.
  EXPECT_LE(got.value().view.due_unix_ms, wall_ms() + 1) << "due still in the future";
  EXPECT_GE(got.value().view.due_unix_ms, before - 1000);
  auto seen = peek(producer, JobRef::by_id(job.id));
  ASSERT_TRUE(seen.is_ok()) << seen.status().to_string();
  EXPECT_LE(seen.value().view.due_unix_ms, wall_ms() + 1);
  auto again = call<broker::Job>([&](auto done) { producer.reserve_job(job.id, std::move(done)); });
  EXPECT_EQ(again.code(), Code::kNotFound);
}

// ---------------------------------------------------------------------------------------------
// One holder: a reserved job is finished only by the session that holds it.

TEST_P(BrokerContract, OnlyTheHolderFinishesAReservedJob) {
  Session& holder = session();
  Session& other = session();
  const JobView job = put_ok(holder, "held");
  auto got = reserve_waiting(holder, "held");
  ASSERT_TRUE(got.is_ok()) << got.status().to_string();
  EXPECT_EQ(release(other, job.id).code(), Code::kConflict);
  EXPECT_EQ(bury(other, job.id).code(), Code::kConflict);
  EXPECT_EQ(touch(other, job.id).code(), Code::kConflict);
  EXPECT_EQ(erase(other, JobRef::by_id(job.id)).code(), Code::kConflict);
  EXPECT_EQ(reserve(other, {"held"}).code(), Code::kTimedOut) << "a reserved job handed out twice";
  auto touched = touch(holder, job.id);
  ASSERT_TRUE(touched.is_ok()) << touched.status().to_string();
  auto deleted = erase(holder, JobRef::by_id(job.id));
  ASSERT_TRUE(deleted.is_ok()) << deleted.status().to_string();
  EXPECT_EQ(deleted.value(), job.id);
  EXPECT_EQ(peek(holder, JobRef::by_id(job.id)).code(), Code::kNotFound);
}

TEST_P(BrokerContract, OperationsOnAMissingJobAreNotFound) {
  Session& s = session();
  const JobView job = put_ok(s, "gone");
  ASSERT_TRUE(erase(s, JobRef::by_id(job.id)).is_ok());
  EXPECT_EQ(erase(s, JobRef::by_id(job.id)).code(), Code::kNotFound);
  EXPECT_EQ(peek(s, JobRef::by_id(job.id)).code(), Code::kNotFound);
  EXPECT_EQ(kick_job(s, job.id).code(), Code::kNotFound);
  EXPECT_EQ(erase(s, JobRef::by_key("gone", "no-such-key")).code(), Code::kNotFound);
  EXPECT_EQ(update(s, JobRef::by_key("gone", "no-such-key"),
                   {.due = Due::after(1s), .priority = std::nullopt})
                .code(),
            Code::kNotFound);
  // release, bury and touch answer NOT_FOUND in beanstalkd for a job one does not hold, however
  // it is missing: kNotFound or kConflict, both mapped to it.
  for (const Code code :
       {release(s, job.id).code(), bury(s, job.id).code(), touch(s, job.id).code()}) {
    EXPECT_TRUE(code == Code::kNotFound || code == Code::kConflict) << code_name(code);
  }
}

TEST_P(BrokerContract, AClosedSessionsReservedJobsAreReadyAgain) {
  Session& producer = session();
  Session& worker = session();
  const JobView job = put_ok(producer, "lost");
  auto got = reserve_waiting(worker, "lost");
  ASSERT_TRUE(got.is_ok()) << got.status().to_string();
  end_session(worker);
  Session& next = session();
  auto again = reserve_waiting(next, "lost");
  ASSERT_TRUE(again.is_ok()) << again.status().to_string();
  EXPECT_EQ(again.value().view.id, job.id);
  EXPECT_EQ(again.value().view.counters.reserves, 2U);
}

TEST_P(BrokerContract, ALapsedTtrMakesTheJobReadyAgain) {
  Session& producer = session();
  Session& worker = session();
  PutRequest request;
  request.tube = "ttr";
  request.ttr = 1s;
  auto put_result = put(producer, request);
  ASSERT_TRUE(put_result.is_ok());
  // A TTR is a duration, kept by a steady clock: the reported deadline is only its wall-clock
  // reading, which two clocks' rounding may put a millisecond either way.
  const auto reserved_no_earlier_than = std::chrono::steady_clock::now();
  auto got = reserve_waiting(worker, "ttr");
  ASSERT_TRUE(got.is_ok()) << got.status().to_string();
  EXPECT_GT(got.value().view.deadline_unix_ms, got.value().view.due_unix_ms);
  auto again = reserve_waiting(producer, "ttr");
  const auto taken_back = std::chrono::steady_clock::now();
  ASSERT_TRUE(again.is_ok()) << again.status().to_string();
  EXPECT_EQ(again.value().view.id, put_result.value().job.id);
  EXPECT_GE(taken_back - reserved_no_earlier_than, request.ttr)
      << "taken back before its TTR lapsed";
  // In Redis mode the reservation's end is told to the shard's owner, which fires it then: not
  // at a periodic look, seconds later.
  EXPECT_LT(taken_back - reserved_no_earlier_than, request.ttr + 1s)
      << "taken back more than a second after its TTR lapsed";
  EXPECT_EQ(again.value().view.counters.timeouts, 1U);
  // The first worker's hold is over.
  EXPECT_EQ(erase(worker, JobRef::by_id(put_result.value().job.id)).code(), Code::kConflict);
}

TEST_P(BrokerContract, AReserveOfAHolderWhoseJobIsAboutToLapseSaysDeadlineSoon) {
  Session& s = session();
  PutRequest request;
  request.tube = "default";
  request.ttr = 1s;
  ASSERT_TRUE(put(s, request).is_ok());
  ASSERT_TRUE(reserve_waiting(s, "default").is_ok());
  // Within the last second of the TTR, with nothing ready: DEADLINE_SOON (watch list only).
  auto soon = call<broker::Job>([&](auto done) {
    (void)s.reserve(broker::ReserveRequest{{}, 3000ms}, std::move(done));
  });
  EXPECT_EQ(soon.code(), Code::kDeadlineSoon) << soon.status().to_string();
}

// ---------------------------------------------------------------------------------------------
// release, bury, kick, touch

TEST_P(BrokerContract, AReleaseWithADelayMakesTheJobDelayedWithItsNewPriority) {
  Session& s = session();
  const JobView job = put_ok(s, "rel", 100);
  ASSERT_TRUE(reserve_waiting(s, "rel").is_ok());
  const std::int64_t before = wall_ms();
  auto released = release(s, job.id, 200ms, 5);
  ASSERT_TRUE(released.is_ok()) << released.status().to_string();
  EXPECT_EQ(released.value().state, JobState::kDelayed);
  EXPECT_EQ(released.value().priority, 5U);
  EXPECT_GE(released.value().due_unix_ms, before + 200);
  auto again = reserve_waiting(s, "rel");
  ASSERT_TRUE(again.is_ok()) << again.status().to_string();
  EXPECT_GE(wall_ms(), released.value().due_unix_ms);
  EXPECT_EQ(again.value().view.counters.releases, 1U);
  EXPECT_EQ(again.value().view.priority, 5U);
}

TEST_P(BrokerContract, AReleaseOfAnotherReservationLeavesTheJobAlone) {
  Session& s = session();
  const JobView job = put_ok(s, "resv");
  auto got = reserve_waiting(s, "resv");
  ASSERT_TRUE(got.is_ok());
  broker::ReleaseRequest stale;
  stale.id = job.id;
  stale.reservation = got.value().view.counters.reserves + 1;
  auto r = call<JobView>([&](auto done) { s.release(stale, std::move(done)); });
  EXPECT_FALSE(r.is_ok()) << "a release of a reservation that is not the job's went through";
  auto read = peek(s, JobRef::by_id(job.id), false);
  ASSERT_TRUE(read.is_ok());
  EXPECT_EQ(read.value().view.state, JobState::kReserved);
}

TEST_P(BrokerContract, BuriedJobsAreKickedFirstThenDelayedOnes) {
  Session& s = session();
  const JobView buried = put_ok(s, "kick");
  const JobView delayed = put_ok(s, "kick", 100, Due::after(1h));
  ASSERT_TRUE(reserve_waiting(s, "kick").is_ok());
  auto b = bury(s, buried.id);
  ASSERT_TRUE(b.is_ok()) << b.status().to_string();
  EXPECT_EQ(b.value().state, JobState::kBuried);
  EXPECT_EQ(reserve(s, {"kick"}).code(), Code::kTimedOut) << "a buried job was reserved";

  auto kicked = kick(s, "kick", 10);
  ASSERT_TRUE(kicked.is_ok()) << kicked.status().to_string();
  EXPECT_EQ(kicked.value(), 1U) << "only the buried job, while there is one";
  auto read = peek(s, JobRef::by_id(delayed.id), false);
  ASSERT_TRUE(read.is_ok());
  EXPECT_EQ(read.value().view.state, JobState::kDelayed);
  auto second = kick(s, "kick", 10);
  ASSERT_TRUE(second.is_ok());
  EXPECT_EQ(second.value(), 1U) << "the delayed job, once none is buried";
  ASSERT_TRUE(tube_becomes("kick", [](const TubeStats& t) { return t.ready == 2; }));
}

TEST_P(BrokerContract, KickJobTakesABuriedOrDelayedJobOnly) {
  Session& s = session();
  const JobView ready = put_ok(s, "kj");
  const JobView delayed = put_ok(s, "kj", 100, Due::after(1h));
  EXPECT_EQ(kick_job(s, ready.id).code(), Code::kConflict);
  auto kicked = kick_job(s, delayed.id);
  ASSERT_TRUE(kicked.is_ok()) << kicked.status().to_string();
  EXPECT_EQ(kicked.value().state, JobState::kReady);
  EXPECT_EQ(kicked.value().counters.kicks, 1U);
}

TEST_P(BrokerContract, TouchMovesTheTtrsEnd) {
  Session& s = session();
  PutRequest request;
  request.tube = "touch";
  request.ttr = 5s;
  ASSERT_TRUE(put(s, request).is_ok());
  auto got = reserve_waiting(s, "touch");
  ASSERT_TRUE(got.is_ok());
  run_for(20ms);
  auto touched = touch(s, got.value().view.id);
  ASSERT_TRUE(touched.is_ok()) << touched.status().to_string();
  EXPECT_GT(touched.value().deadline_unix_ms, got.value().view.deadline_unix_ms);
}

// ---------------------------------------------------------------------------------------------
// update (reschedule, reprioritise) by id and by key

TEST_P(BrokerContract, ARescheduleByKeyMovesAPendingJob) {
  Session& s = session();
  const JobView job = put_ok(s, "feed", 100, Due::after(4h), "pet:7");
  const std::int64_t at = wall_ms() + 2 * 3'600'000;
  auto moved =
      update(s, JobRef::by_key("feed", "pet:7"), {.due = Due::at(at), .priority = std::nullopt});
  ASSERT_TRUE(moved.is_ok()) << moved.status().to_string();
  EXPECT_EQ(moved.value().id, job.id);
  EXPECT_EQ(moved.value().due_unix_ms, at);
  EXPECT_EQ(moved.value().state, JobState::kDelayed);
  auto now = update(s, JobRef::by_id(job.id), {.due = Due::after(0ms), .priority = 3});
  ASSERT_TRUE(now.is_ok()) << now.status().to_string();
  EXPECT_EQ(now.value().state, JobState::kReady);
  EXPECT_EQ(now.value().priority, 3U);
  auto got = reserve_waiting(s, "feed");
  ASSERT_TRUE(got.is_ok());
  EXPECT_EQ(got.value().view.id, job.id);
}

TEST_P(BrokerContract, AnUpdateOfAReservedJobOrAnEmptyOneIsRefused) {
  Session& s = session();
  const JobView job = put_ok(s, "upd");
  EXPECT_EQ(update(s, JobRef::by_id(job.id), {}).code(), Code::kInvalidArgument);
  ASSERT_TRUE(reserve_waiting(s, "upd").is_ok());
  EXPECT_EQ(
      update(s, JobRef::by_id(job.id), {.due = Due::after(1s), .priority = std::nullopt}).code(),
      Code::kConflict);
}

// ---------------------------------------------------------------------------------------------
// groups

TEST_P(BrokerContract, AGroupIsListedAndCancelledLeavingItsReservedJob) {
  Session& s = session();
  Session& worker = session();
  const JobView a = put_ok(s, "g", 100, Due::after(1h), "", "player:1");
  const JobView b = put_ok(s, "g", 100, {}, "", "player:1");
  const JobView other = put_ok(s, "g", 100, Due::after(1h), "", "player:2");
  auto got = reserve_waiting(worker, "g");
  ASSERT_TRUE(got.is_ok());
  ASSERT_EQ(got.value().view.id, b.id);

  auto listed = call<std::vector<JobView>>(
      [&](auto done) { s.list_group("g", "player:1", std::move(done)); });
  ASSERT_TRUE(listed.is_ok()) << listed.status().to_string();
  std::set<JobId> ids;
  for (const JobView& job : listed.value()) ids.insert(job.id);
  EXPECT_EQ(ids, (std::set<JobId>{a.id, b.id}));

  auto cancelled =
      call<std::size_t>([&](auto done) { s.cancel_group("g", "player:1", std::move(done)); });
  ASSERT_TRUE(cancelled.is_ok()) << cancelled.status().to_string();
  EXPECT_EQ(cancelled.value(), 1U) << "the reserved job is not cancelled";
  EXPECT_EQ(peek(s, JobRef::by_id(a.id)).code(), Code::kNotFound);
  EXPECT_TRUE(peek(s, JobRef::by_id(b.id)).is_ok());
  EXPECT_TRUE(peek(s, JobRef::by_id(other.id)).is_ok());
  auto none =
      call<std::size_t>([&](auto done) { s.cancel_group("g", "player:none", std::move(done)); });
  ASSERT_TRUE(none.is_ok() || none.code() == Code::kNotFound) << none.status().to_string();
  if (none.is_ok()) {
    EXPECT_EQ(none.value(), 0U);
  }
}

// ---------------------------------------------------------------------------------------------
// peek-next, tubes, stats

TEST_P(BrokerContract, PeekNextFindsTheNextJobInEachState) {
  Session& s = session();
  const JobView soon = put_ok(s, "pn", 100, Due::after(1h));
  put_ok(s, "pn", 100, Due::after(2h));
  const JobView ready = put_ok(s, "pn", 1);
  auto peek_next = [&](JobState state) {
    return call<broker::Job>([&](auto done) { s.peek_next("pn", state, std::move(done)); });
  };
  EXPECT_EQ(peek_next(JobState::kBuried).code(), Code::kNotFound);
  auto d = peek_next(JobState::kDelayed);
  ASSERT_TRUE(d.is_ok()) << d.status().to_string();
  EXPECT_EQ(d.value().view.id, soon.id);
  EXPECT_EQ(d.value().body, "body of pn");
  ASSERT_TRUE(run_until([&] {
    auto r = peek_next(JobState::kReady);
    return r.is_ok() && r.value().view.id == ready.id;
  }));
  EXPECT_EQ(peek_next(JobState::kReserved).code(), Code::kInvalidArgument);
}

TEST_P(BrokerContract, APausedTubeHandsOutNothingUntilThePauseEnds) {
  Session& s = session();
  auto missing =
      call<TubeStats>([&](auto done) { admin().pause_tube("nope", 10s, std::move(done)); });
  EXPECT_EQ(missing.code(), Code::kNotFound);
  const JobView job = put_ok(s, "paused");
  auto paused =
      call<TubeStats>([&](auto done) { admin().pause_tube("paused", 60s, std::move(done)); });
  ASSERT_TRUE(paused.is_ok()) << paused.status().to_string();
  EXPECT_EQ(paused.value().pause, 60s);
  EXPECT_LE(paused.value().pause_left, 60s) << "more time left than the pause asked";
  EXPECT_GT(paused.value().pause_left, 50s);
  EXPECT_EQ(reserve(s, {"paused"}, 100ms).code(), Code::kTimedOut);
  auto resumed =
      call<TubeStats>([&](auto done) { admin().pause_tube("paused", 0s, std::move(done)); });
  ASSERT_TRUE(resumed.is_ok()) << resumed.status().to_string();
  auto got = reserve_waiting(s, "paused");
  ASSERT_TRUE(got.is_ok()) << got.status().to_string();
  EXPECT_EQ(got.value().view.id, job.id);
}

TEST_P(BrokerContract, TubeAndServerCountsFollowTheJobs) {
  Session& s = session();
  put_ok(s, "counted");
  put_ok(s, "counted", 100, Due::after(1h));
  const JobView to_bury = put_ok(s, "counted", 0);
  ASSERT_TRUE(reserve_waiting(s, "counted").is_ok());
  ASSERT_TRUE(bury(s, to_bury.id).is_ok());
  ASSERT_TRUE(tube_becomes("counted", [](const TubeStats& t) {
    return t.ready == 1 && t.delayed == 1 && t.buried == 1 && t.reserved == 0 && t.total_jobs == 3;
  }));
  EXPECT_EQ(stats_tube("no-such-tube").code(), Code::kNotFound);
  auto server = call<ServerStats>([&](auto done) { admin().stats(std::move(done)); });
  ASSERT_TRUE(server.is_ok()) << server.status().to_string();
  EXPECT_GE(server.value().ready, 1U);
  EXPECT_GE(server.value().delayed, 1U);
  EXPECT_GE(server.value().buried, 1U);

  auto tubes =
      call<std::vector<TubeStats>>([&](auto done) { admin().list_tubes(std::move(done)); });
  ASSERT_TRUE(tubes.is_ok()) << tubes.status().to_string();
  std::vector<std::string> names;
  for (const TubeStats& t : tubes.value()) names.push_back(t.name);
  EXPECT_NE(std::find(names.begin(), names.end(), "counted"), names.end());
  EXPECT_NE(std::find(names.begin(), names.end(), "default"), names.end());
}

TEST_P(BrokerContract, MaxAttemptsBuriesAJobAtItsLastReservation) {
  Session& s = session();
  auto set =
      call<std::uint32_t>([&](auto done) { admin().set_max_attempts("ma", 2, std::move(done)); });
  ASSERT_TRUE(set.is_ok()) << set.status().to_string();
  EXPECT_EQ(set.value(), 2U);
  const JobView job = put_ok(s, "ma");
  ASSERT_TRUE(reserve_waiting(s, "ma").is_ok());
  auto first = release(s, job.id);
  ASSERT_TRUE(first.is_ok()) << first.status().to_string();
  EXPECT_EQ(first.value().state, JobState::kReady);
  ASSERT_TRUE(reserve_waiting(s, "ma").is_ok());
  auto second = release(s, job.id);
  ASSERT_TRUE(second.is_ok()) << second.status().to_string();
  EXPECT_EQ(second.value().state, JobState::kBuried) << "the second attempt was the last";
  ASSERT_TRUE(tube_becomes("ma", [](const TubeStats& t) { return t.max_attempts == 2; }));
}

// ---------------------------------------------------------------------------------------------
// webhooks and delivery notes

TEST_P(BrokerContract, AWebhookIsSetReadAndRemoved) {
  EXPECT_EQ(call<Webhook>([&](auto done) { admin().get_webhook("wh", std::move(done)); }).code(),
            Code::kNotFound);
  Webhook hook;
  hook.url = "https://example.invalid/hook";
  hook.headers = {{"X-Token", "t"}};
  hook.max_attempts = 3;
  hook.secrets = {"s1", "s2"};
  auto set = call<Webhook>([&](auto done) { admin().set_webhook("wh", hook, std::move(done)); });
  ASSERT_TRUE(set.is_ok()) << set.status().to_string();
  auto got = call<Webhook>([&](auto done) { admin().get_webhook("wh", std::move(done)); });
  ASSERT_TRUE(got.is_ok()) << got.status().to_string();
  EXPECT_EQ(got.value(), hook);
  bool listed = false;
  for (const auto& [tube, w] : broker_->webhooks()) listed = listed || (tube == "wh" && w == hook);
  EXPECT_TRUE(listed) << "webhooks() does not list it";
  auto removed = call<Webhook>([&](auto done) { admin().remove_webhook("wh", std::move(done)); });
  ASSERT_TRUE(removed.is_ok()) << removed.status().to_string();
  EXPECT_EQ(call<Webhook>([&](auto done) { admin().remove_webhook("wh", std::move(done)); }).code(),
            Code::kNotFound);
}

TEST_P(BrokerContract, AFailedAttemptIsKeptWithTheJob) {
  Session& s = session();
  const JobView job = put_ok(s, "attempts");
  auto noted = call<JobView>(
      [&](auto done) { s.note_attempt(job.id, 503, "service unavailable", std::move(done)); });
  ASSERT_TRUE(noted.is_ok()) << noted.status().to_string();
  auto read = peek(s, JobRef::by_id(job.id));
  ASSERT_TRUE(read.is_ok()) << read.status().to_string();
  EXPECT_EQ(read.value().delivery.last_status, 503);
  EXPECT_EQ(read.value().delivery.last_error, "service unavailable");
  EXPECT_EQ(read.value().body, "body of attempts");
}

TEST_P(BrokerContract, APutsTraceContextIsKeptReservedWithTheJobAndSurvivesAnAttempt) {
  Session& s = session();
  PutRequest request;
  request.tube = "traced";
  request.body = "x";
  request.traceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
  request.tracestate = "congo=t61rcWkgMzE";
  auto traced = put(s, request);
  ASSERT_TRUE(traced.is_ok()) << traced.status().to_string();
  const JobId id = traced.value().job.id;
  auto read = peek(s, JobRef::by_id(id));
  ASSERT_TRUE(read.is_ok()) << read.status().to_string();
  EXPECT_EQ(read.value().delivery.traceparent, request.traceparent);
  EXPECT_EQ(read.value().delivery.tracestate, request.tracestate);
  auto noted = call<JobView>([&](auto done) { s.note_attempt(id, 500, "x", std::move(done)); });
  ASSERT_TRUE(noted.is_ok()) << noted.status().to_string();
  auto reserved = reserve(s, {"traced"});
  ASSERT_TRUE(reserved.is_ok()) << reserved.status().to_string();
  EXPECT_EQ(reserved.value().view.id, id);
  EXPECT_EQ(reserved.value().delivery.traceparent, request.traceparent);
  EXPECT_EQ(reserved.value().delivery.tracestate, request.tracestate);
  EXPECT_EQ(reserved.value().delivery.last_status, 500);

  for (const auto& [parent, state] : std::vector<std::pair<std::string, std::string>>{
           {"", "a=b"},
           {"00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01", ""},
           {"00-00000000000000000000000000000000-00f067aa0ba902b7-01", ""},
           {"00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01", ""},
           {"ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", ""},
           {"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-x", ""},
           {"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", std::string(513, 'a')}}) {
    request.traceparent = parent;
    request.tracestate = state;
    auto refused = put(s, request);
    EXPECT_EQ(refused.code(), Code::kInvalidArgument) << parent << " / " << state.size();
  }
  request.traceparent = "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-later";
  request.tracestate.clear();
  EXPECT_TRUE(put(s, request).is_ok()) << "a later version may carry more after the flags";
}

// ---------------------------------------------------------------------------------------------
// What one broker cannot do, it says with kNotSupported; the others answer.

TEST_P(BrokerContract, DueCountsAreCountedOrNotSupported) {
  Session& s = session();
  put_ok(s, "due", 100, Due::after(30min));
  put_ok(s, "due", 100, Due::after(3h));
  auto counts = call<broker::DueCounts>([&](auto done) {
    admin().due_counts("due", {Due::after(1h), Due::after(2h)}, std::move(done));
  });
  if (!can_.due_counts) {
    EXPECT_EQ(counts.code(), Code::kNotSupported) << counts.status().to_string();
    return;
  }
  ASSERT_TRUE(counts.is_ok()) << counts.status().to_string();
  EXPECT_EQ(counts.value().jobs, (std::vector<std::uint64_t>{1, 0, 1}));
}

TEST_P(BrokerContract, ListJobsListsInServingOrderOrIsNotSupported) {
  Session& s = session();
  const JobView second = put_ok(s, "lj", 5, Due::after(2h));
  const JobView first = put_ok(s, "lj", 9, Due::after(1h));
  auto list = call<broker::JobList>(
      [&](auto done) { admin().list_jobs("lj", JobState::kDelayed, 10, std::move(done)); });
  if (!can_.list_jobs) {
    EXPECT_EQ(list.code(), Code::kNotSupported) << list.status().to_string();
    return;
  }
  ASSERT_TRUE(list.is_ok()) << list.status().to_string();
  ASSERT_EQ(list.value().jobs.size(), 2U);
  EXPECT_EQ(list.value().jobs[0].id, first.id);
  EXPECT_EQ(list.value().jobs[1].id, second.id);
  EXPECT_TRUE(list.value().complete);
}

TEST_P(BrokerContract, ABackupIsMadeOrNotSupported) {
  Session& s = session();
  put_ok(s, "bk");
  const auto dir = std::filesystem::temp_directory_path() /
                   ("delayq-contract-backup-" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  auto relative =
      call<broker::BackupResult>([&](auto done) { admin().backup("rel/dir", std::move(done)); });
  EXPECT_FALSE(relative.is_ok());
  auto made =
      call<broker::BackupResult>([&](auto done) { admin().backup(dir.string(), std::move(done)); });
  std::filesystem::remove_all(dir);
  if (!can_.backup) {
    EXPECT_EQ(made.code(), Code::kNotSupported) << made.status().to_string();
    return;
  }
  ASSERT_TRUE(made.is_ok()) << made.status().to_string();
  EXPECT_EQ(made.value().jobs, 1U);
  EXPECT_GT(made.value().bytes, 0U);
  // A place where nothing can be written (even by root) is the request's fault, not the store's.
  auto unwritable = call<broker::BackupResult>(
      [&](auto done) { admin().backup("/proc/delayq-backup", std::move(done)); });
  EXPECT_EQ(unwritable.code(), Code::kInvalidArgument) << unwritable.status().to_string();
  EXPECT_NE(unwritable.status().message().find("cannot create /proc/delayq-backup.tmp"),
            std::string::npos)
      << unwritable.status().message();
}

// ---------------------------------------------------------------------------------------------
// Durability: what was acknowledged is there after a restart (or on another node).

TEST_P(BrokerContract, EveryAcknowledgedChangeOutlivesTheBroker) {
  Session& s = session();
  const JobView kept = put_ok(s, "durable", 4, Due::after(1h), "k1", "g1");
  const JobView deleted = put_ok(s, "durable");
  const JobView buried = put_ok(s, "durable", 0);
  ASSERT_TRUE(erase(s, JobRef::by_id(deleted.id)).is_ok());
  ASSERT_TRUE(reserve_waiting(s, "durable").is_ok());
  ASSERT_TRUE(bury(s, buried.id).is_ok());
  Webhook hook;
  hook.url = "http://127.0.0.1:9/";
  ASSERT_TRUE(call<Webhook>([&](auto done) {
                admin().set_webhook("durable", hook, std::move(done));
              }).is_ok());
  restart();

  Session& after = session();
  auto k = peek(after, JobRef::by_key("durable", "k1"));
  ASSERT_TRUE(k.is_ok()) << k.status().to_string();
  EXPECT_EQ(k.value().view.id, kept.id);
  EXPECT_EQ(k.value().view.state, JobState::kDelayed);
  EXPECT_EQ(k.value().view.priority, 4U);
  EXPECT_EQ(k.value().view.group, "g1");
  EXPECT_EQ(k.value().body, "body of durable");
  EXPECT_EQ(peek(after, JobRef::by_id(deleted.id)).code(), Code::kNotFound);
  auto b = peek(after, JobRef::by_id(buried.id), false);
  ASSERT_TRUE(b.is_ok()) << b.status().to_string();
  EXPECT_EQ(b.value().view.state, JobState::kBuried);
  ASSERT_TRUE(run_until([&] {
    auto w = call<Webhook>([&](auto done) { admin().get_webhook("durable", std::move(done)); });
    return w.is_ok() && w.value() == hook;
  }));
}

INSTANTIATE_TEST_SUITE_P(Brokers, BrokerContract,
                         ::testing::Values(BrokerKind::kLocalMemory, BrokerKind::kLocalRocks,
                                           BrokerKind::kRedis, BrokerKind::kRedisCluster,
                                           BrokerKind::kRedisPrefetch),
                         [](const auto& brokers) { return kind_name(brokers.param); });

}  // namespace
}  // namespace delayq::testing
