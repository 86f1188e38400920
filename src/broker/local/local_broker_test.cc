// The local broker's durability rule, with the committer's writes held at a gate (a slow fsync):
// a completion runs only once every change it reports is durable, and waits for nothing else.
// Each test fails on one of the two errors: a reply sent before what it depends on is durable,
// or a reply held back by an unrelated batch. No timing is asserted: the gate says which batch
// is not durable, and the io_context is polled until it has nothing left to run.
#include "broker/local/local_broker.h"

#include <gtest/gtest.h>

#include <boost/asio/io_context.hpp>
#include <chrono>
#include <optional>

#include "support/gated_store.h"

namespace delayq::local {
namespace {

using namespace std::chrono_literals;

class LocalBrokerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto gated = std::make_unique<testing::GatedStore>(std::make_unique<store::MemoryStore>());
    gate_ = gated.get();
    NodeOptions options;  // durability always
    auto opened = LocalBroker::open(io_, options, std::move(gated));
    ASSERT_TRUE(opened.is_ok()) << opened.status().to_string();
    broker_ = std::move(opened).value();
  }
  void TearDown() override {
    if (gate_ != nullptr) gate_->open_gate();  // let the committer finish before the broker goes
  }

  // Runs what is ready until nothing is; the committer's answers arrive from its thread.
  void poll() {
    io_.restart();
    while (io_.poll() > 0) {
    }
  }
  // Runs the loop until `done` holds, waiting for the committer's thread at most 10 s.
  template <typename Done>
  bool run_until(Done done) {
    const auto deadline = std::chrono::steady_clock::now() + 10s;
    while (!done() && std::chrono::steady_clock::now() < deadline) {
      io_.restart();
      io_.run_one_for(10ms);
    }
    return done();
  }

  JobId put(broker::Session& session, std::string tube, std::optional<JobId>* done) {
    broker::PutRequest request;
    request.tube = std::move(tube);
    request.body = "body";
    JobId id = 0;
    session.put(request, [done](Result<broker::PutResult> result) {
      ASSERT_TRUE(result.is_ok()) << result.status().to_string();
      *done = result.value().job.id;
    });
    return id;
  }
  JobId put_durably(broker::Session& session, std::string tube) {
    std::optional<JobId> done;
    put(session, std::move(tube), &done);
    EXPECT_TRUE(run_until([&] { return done.has_value(); }));
    return done.value_or(0);
  }
  std::uint64_t reserve(broker::Session& session, std::string tube,
                        std::optional<Result<broker::Job>>* done,
                        std::optional<broker::Millis> timeout = 0ms) {
    return session.reserve(broker::ReserveRequest{{std::move(tube)}, timeout},
                           [done](Result<broker::Job> job) { done->emplace(std::move(job)); });
  }

  boost::asio::io_context io_;
  testing::GatedStore* gate_ = nullptr;
  std::unique_ptr<LocalBroker> broker_;
};

TEST_F(LocalBrokerTest, ReserveOfADurableJobDoesNotWaitForAnUnrelatedFsync) {
  auto producer = broker_->open_session({});
  auto worker = broker_->open_session({});
  const JobId old_job = put_durably(*producer, "old");
  ASSERT_NE(old_job, 0U);

  gate_->close_gate();
  std::optional<JobId> other;
  put(*producer, "new", &other);
  poll();  // the turn submits the batch holding the new put: its write is held
  ASSERT_TRUE(gate_->wait_held(10s));
  std::optional<Result<broker::Job>> reserved;
  reserve(*worker, "old", &reserved);
  poll();
  ASSERT_TRUE(reserved.has_value()) << "the reserve waited for another client's fsync";
  ASSERT_TRUE(reserved->is_ok()) << reserved->status().to_string();
  EXPECT_EQ(reserved->value().view.id, old_job);
  EXPECT_EQ(reserved->value().body, "body");
  EXPECT_FALSE(other.has_value()) << "a put was acknowledged before its batch was durable";

  gate_->open_gate();
  EXPECT_TRUE(run_until([&] { return other.has_value(); }));
}

TEST_F(LocalBrokerTest, ReserveOfAJobWhosePutIsNotDurableWaitsForIt) {
  auto producer = broker_->open_session({});
  auto worker = broker_->open_session({});
  gate_->close_gate();
  std::optional<JobId> put_done;
  put(*producer, "t", &put_done);
  std::optional<Result<broker::Job>> reserved;
  reserve(*worker, "t", &reserved);  // the same turn: the job is ready, its put not durable
  poll();
  ASSERT_TRUE(gate_->wait_held(10s));
  poll();
  EXPECT_FALSE(put_done.has_value());
  EXPECT_FALSE(reserved.has_value()) << "RESERVED before the put it reports was durable";

  gate_->open_gate();
  ASSERT_TRUE(run_until([&] { return put_done.has_value() && reserved.has_value(); }));
  ASSERT_TRUE(reserved->is_ok());
  EXPECT_EQ(reserved->value().view.id, *put_done);
}

TEST_F(LocalBrokerTest, WaitingReserveWokenByAPutWaitsForThatPut) {
  auto producer = broker_->open_session({});
  auto worker = broker_->open_session({});
  std::optional<Result<broker::Job>> reserved;
  const std::uint64_t ticket = reserve(*worker, "t", &reserved, std::nullopt);
  EXPECT_NE(ticket, 0U);
  poll();
  EXPECT_FALSE(reserved.has_value());

  gate_->close_gate();
  std::optional<JobId> put_done;
  put(*producer, "t", &put_done);
  poll();
  ASSERT_TRUE(gate_->wait_held(10s));
  poll();
  EXPECT_FALSE(reserved.has_value());
  gate_->open_gate();
  ASSERT_TRUE(run_until([&] { return reserved.has_value(); }));
  ASSERT_TRUE(reserved->is_ok());
  EXPECT_EQ(reserved->value().view.id, put_done.value_or(0));
}

TEST_F(LocalBrokerTest, PeekAndTouchOfDurableJobsAnswerWhileAnotherBatchIsHeld) {
  auto producer = broker_->open_session({});
  auto worker = broker_->open_session({});
  const JobId job = put_durably(*producer, "old");
  std::optional<Result<broker::Job>> reserved;
  reserve(*worker, "old", &reserved);
  ASSERT_TRUE(run_until([&] { return reserved.has_value(); }));

  gate_->close_gate();
  std::optional<JobId> other;
  put(*producer, "new", &other);
  poll();
  ASSERT_TRUE(gate_->wait_held(10s));
  std::optional<Result<broker::Job>> peeked;
  std::optional<Result<JobView>> touched;
  producer->peek(broker::JobRef::by_id(job), true,
                 [&](Result<broker::Job> found) { peeked.emplace(std::move(found)); });
  worker->touch(job, [&](Result<JobView> view) { touched.emplace(std::move(view)); });
  poll();
  ASSERT_TRUE(peeked.has_value());
  EXPECT_TRUE(peeked->is_ok());
  ASSERT_TRUE(touched.has_value());
  EXPECT_TRUE(touched->is_ok());
  EXPECT_FALSE(other.has_value());
}

TEST_F(LocalBrokerTest, DeleteAndCountsWaitForTheBatchThatHoldsThem) {
  auto producer = broker_->open_session({});
  const JobId job = put_durably(*producer, "t");
  gate_->close_gate();
  std::optional<Result<JobId>> deleted;
  producer->erase(broker::JobRef::by_id(job),
                  [&](Result<JobId> id) { deleted.emplace(std::move(id)); });
  std::optional<Result<ServerStats>> stats;
  producer->stats([&](Result<ServerStats> s) { stats.emplace(std::move(s)); });
  poll();
  ASSERT_TRUE(gate_->wait_held(10s));
  poll();
  EXPECT_FALSE(deleted.has_value()) << "DELETED before the delete was durable";
  EXPECT_FALSE(stats.has_value()) << "stats reported a count that was not durable yet";
  gate_->open_gate();
  ASSERT_TRUE(run_until([&] { return deleted.has_value() && stats.has_value(); }));
  EXPECT_TRUE(deleted->is_ok());
  ASSERT_TRUE(stats->is_ok());
  EXPECT_EQ(stats->value().ready, 0U);
}

TEST_F(LocalBrokerTest, ADestroyedSessionSeesNoCompletionAndItsJobsAreReadyAgain) {
  auto producer = broker_->open_session({});
  const JobId job = put_durably(*producer, "t");
  auto worker = broker_->open_session({});
  std::optional<Result<broker::Job>> reserved;
  reserve(*worker, "t", &reserved);
  ASSERT_TRUE(run_until([&] { return reserved.has_value(); }));
  ASSERT_TRUE(reserved->is_ok());

  gate_->close_gate();
  bool ran = false;
  broker::PutRequest request;
  request.tube = "t";
  worker->put(request, [&ran](const Result<broker::PutResult>&) { ran = true; });
  worker.reset();
  poll();
  gate_->open_gate();
  std::optional<Result<broker::Job>> peeked;
  producer->peek(broker::JobRef::by_id(job), false,
                 [&](Result<broker::Job> found) { peeked.emplace(std::move(found)); });
  ASSERT_TRUE(run_until([&] { return peeked.has_value(); }));
  EXPECT_FALSE(ran);
  ASSERT_TRUE(peeked->is_ok());
  EXPECT_EQ(peeked->value().view.state, JobState::kReady);
}

TEST_F(LocalBrokerTest, CancelledReserveCompletesTimedOut) {
  auto worker = broker_->open_session({});
  std::optional<Result<broker::Job>> reserved;
  const std::uint64_t ticket = reserve(*worker, "t", &reserved, std::nullopt);
  poll();
  ASSERT_FALSE(reserved.has_value());
  EXPECT_TRUE(worker->cancel_reserve(ticket));
  EXPECT_FALSE(worker->cancel_reserve(ticket));
  ASSERT_TRUE(run_until([&] { return reserved.has_value(); }));
  EXPECT_EQ(reserved->code(), Code::kTimedOut);
}

}  // namespace
}  // namespace delayq::local
