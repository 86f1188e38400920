// The local broker's durability rule, with the committer's writes held at a gate (a slow fsync):
// a completion runs only once every change it reports is durable, and waits for nothing else.
// Each test fails on one of the two errors: a reply sent before what it depends on is durable,
// or a reply held back by an unrelated batch. No timing is asserted: the gate says which batch
// is not durable, and the io_context is polled until it has nothing left to run.
#include "broker/local/local_broker.h"

#include <gtest/gtest.h>

#include <boost/asio/io_context.hpp>
#include <chrono>
#include <map>
#include <optional>

#include "store/memory_store.h"
#include "support/gated_store.h"

namespace delayq::broker::local {
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

// A put's delay is the job's delay as given, counted from its creation: never shortened by the
// time the call took between the front-end and the engine (a millisecond tick in between once
// made a 1 h delay read back as 3,599,999 ms).
TEST_F(LocalBrokerTest, APutsDelayReadsBackAsGiven) {
  // A clock a millisecond later at every reading: the worst case of a call crossing a tick.
  class TickingClock final : public engine::Clock {
   public:
    [[nodiscard]] std::int64_t now_unix_ms() const override { return ++now_; }
    [[nodiscard]] std::int64_t steady_ms() const override { return now_; }

   private:
    mutable std::int64_t now_ = 1'700'000'000'000;
  } clock;
  NodeOptions options;
  options.clock = &clock;
  auto opened = LocalBroker::open(io_, options, std::make_unique<store::MemoryStore>());
  ASSERT_TRUE(opened.is_ok()) << opened.status().to_string();
  auto producer = opened.value()->open_session({});
  for (int i = 0; i < 3; ++i) {
    broker::PutRequest request;
    request.tube = "later";
    request.body = "body";
    request.due = Due::after(1h);
    std::optional<Result<broker::PutResult>> done;
    producer->put(request, [&done](Result<broker::PutResult> r) { done.emplace(std::move(r)); });
    ASSERT_TRUE(run_until([&] { return done.has_value(); }));
    ASSERT_TRUE(done->is_ok()) << done->status().to_string();
    const JobView& job = done->value().job;
    ASSERT_EQ(job.delay_ms, 3'600'000) << "put " << i;
    ASSERT_EQ(job.due_unix_ms - job.created_unix_ms, 3'600'000) << "put " << i;
  }
}

// A failed write or fsync is never retried and acknowledged (after a failed fsync the page cache
// may have dropped the data): the put it held is never answered, readiness fails, and the node
// says it must stop (delayqd then exits 1, for a supervisor to restart it into recovery).
TEST_F(LocalBrokerTest, AFailedWriteIsNeverAcknowledgedAndTheNodeMustStop) {
  std::optional<Status> fatal;
  broker_->on_fatal([&fatal](const Status& status) { fatal = status; });
  auto producer = broker_->open_session({});
  ASSERT_NE(put_durably(*producer, "t"), 0U);
  EXPECT_TRUE(broker_->health().is_ok());

  gate_->fail_writes(Status(Code::kIOError, "fsync: Input/output error"));
  std::optional<JobId> lost;
  put(*producer, "t", &lost);
  ASSERT_TRUE(run_until([&] { return fatal.has_value(); }));
  EXPECT_EQ(fatal->code(), Code::kIOError);
  EXPECT_EQ(broker_->health().code(), Code::kIOError);
  const std::size_t tried = gate_->writes();
  // Later turns neither retry the write nor answer the put.
  for (int i = 0; i < 20; ++i) {
    io_.restart();
    io_.run_one_for(std::chrono::milliseconds(5));
  }
  EXPECT_FALSE(lost.has_value()) << "a put was acknowledged after its write failed";
  EXPECT_EQ(gate_->writes(), tried) << "a failed write was tried again";
}

// A reserved job whose body cannot be read (a damaged blob file) is buried, and the reserve
// says so: left reserved by a client never told its id, it came back at its TTR and failed
// again. The next reserve takes the next job.
TEST_F(LocalBrokerTest, AReservedJobWhoseBodyCannotBeReadIsBuried) {
  auto session = broker_->open_session({});
  const JobId damaged = put_durably(*session, "t");
  const JobId sound = put_durably(*session, "t");
  gate_->fail_body(damaged, Status(Code::kCorruption, "Header CRC mismatch"));
  std::optional<Result<broker::Job>> first;
  reserve(*session, "t", &first);
  ASSERT_TRUE(run_until([&] { return first.has_value(); }));
  ASSERT_FALSE(first->is_ok());
  EXPECT_EQ(first->status().code(), Code::kCorruption);
  EXPECT_EQ(first->status().message(), "job " + std::to_string(damaged) +
                                           " cannot be read, and is buried: Header CRC mismatch");
  std::optional<Result<broker::Job>> seen;
  session->peek(broker::JobRef::by_id(damaged), false,
                [&seen](Result<broker::Job> job) { seen.emplace(std::move(job)); });
  ASSERT_TRUE(run_until([&] { return seen.has_value(); }));
  ASSERT_TRUE(seen->is_ok()) << seen->status().to_string();
  EXPECT_EQ(seen->value().view.state, JobState::kBuried);
  std::optional<Result<broker::Job>> second;
  reserve(*session, "t", &second);
  ASSERT_TRUE(run_until([&] { return second.has_value(); }));
  ASSERT_TRUE(second->is_ok()) << second->status().to_string();
  EXPECT_EQ(second->value().view.id, sound);
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

// Bodies not yet in the store are read from the batches the committer holds: a job's newest,
// whether its body was rewritten in the same batch (a debounce of a put in the same turn) or in
// a later one, and each job its own. The peeks read them while both batches are held.
TEST_F(LocalBrokerTest, BodiesNotYetDurableReadBackAsTheirNewestVersion) {
  auto producer = broker_->open_session({});
  const auto put_keyed = [&](std::string body, std::string key) {
    broker::PutRequest request;
    request.tube = "t";
    request.body = std::move(body);
    request.key = std::move(key);
    request.debounce = 60s;
    producer->put(request, [](Result<broker::PutResult> result) {
      ASSERT_TRUE(result.is_ok()) << result.status().to_string();
    });
  };
  std::map<std::string, std::optional<Result<broker::Job>>> peeked;
  const auto peek = [&](const std::string& key) {
    producer->peek(broker::JobRef::by_key("t", key), true,
                   [&, key](Result<broker::Job> job) { peeked[key].emplace(std::move(job)); });
  };
  gate_->close_gate();
  put_keyed("first", "a");  // one turn: one batch, with key a's body twice
  put_keyed("second", "a");
  put_keyed("other", "b");
  poll();
  ASSERT_TRUE(gate_->wait_held(10s));
  put_keyed("third", "c");  // a batch queued behind the held one
  put_keyed("fourth", "b");
  poll();
  for (const std::string key : {"a", "b", "c"}) peek(key);
  poll();
  EXPECT_TRUE(peeked.empty()) << "a peek was answered before the batch it reads was durable";
  gate_->open_gate();
  ASSERT_TRUE(run_until([&] { return peeked.size() == 3; }));
  const std::map<std::string, std::string> newest = {
      {"a", "second"}, {"b", "fourth"}, {"c", "third"}};
  for (const auto& [key, body] : newest) {
    ASSERT_TRUE(peeked[key]->is_ok()) << key << ": " << peeked[key]->status().to_string();
    EXPECT_EQ(peeked[key]->value().body, body) << key;
  }
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
  auto admin = broker_->open_admin();
  admin->stats([&](Result<ServerStats> s) { stats.emplace(std::move(s)); });
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

// --- push delivery's state: webhooks and what a job keeps about its delivery

TEST_F(LocalBrokerTest, AWebhookCompletesOnceStoredAndThenTellsTheDeliverer) {
  int changes = 0;
  broker_->on_webhooks_changed([&changes] { ++changes; });
  auto admin = broker_->open_admin();
  Webhook hook;
  hook.url = "http://127.0.0.1:9/in";
  hook.secrets = {"k1"};
  gate_->close_gate();
  std::optional<Result<Webhook>> set;
  admin->set_webhook("orders", hook, [&set](Result<Webhook> r) { set.emplace(std::move(r)); });
  poll();
  EXPECT_FALSE(set.has_value()) << "completed before the webhook was durable";
  EXPECT_EQ(changes, 0);
  gate_->open_gate();
  ASSERT_TRUE(run_until([&] { return set.has_value(); }));
  ASSERT_TRUE(set->is_ok()) << set->status().to_string();
  EXPECT_EQ(changes, 1);
  ASSERT_EQ(broker_->webhooks().size(), 1U);
  EXPECT_EQ(broker_->webhooks()[0].second, hook);
  std::vector<std::pair<std::string, Webhook>> stored;
  ASSERT_TRUE(gate_
                  ->scan_webhooks([&stored](std::string tube, Webhook found) {
                    stored.emplace_back(std::move(tube), std::move(found));
                    return Status::ok();
                  })
                  .is_ok());
  ASSERT_EQ(stored.size(), 1U);
  EXPECT_EQ(stored[0].first, "orders");
  EXPECT_EQ(stored[0].second, hook);

  std::optional<Result<Webhook>> removed;
  admin->remove_webhook("orders", [&](Result<Webhook> r) { removed.emplace(std::move(r)); });
  ASSERT_TRUE(run_until([&] { return removed.has_value(); }));
  EXPECT_TRUE(removed->is_ok());
  EXPECT_EQ(changes, 2);
  EXPECT_TRUE(broker_->webhooks().empty());
  std::optional<Result<Webhook>> again;
  admin->get_webhook("orders", [&](Result<Webhook> r) { again.emplace(std::move(r)); });
  ASSERT_TRUE(run_until([&] { return again.has_value(); }));
  EXPECT_EQ(again->code(), Code::kNotFound);
}

TEST_F(LocalBrokerTest, AJobKeepsItsUrlAndItsLastAttemptUntilItIsDeleted) {
  auto session = broker_->open_session({});
  broker::PutRequest request;
  request.tube = "calls";
  request.body = "{}";
  request.url = "http://127.0.0.1:9/own";
  request.content_type = "application/json";
  std::optional<Result<broker::PutResult>> refused;
  session->put(request, [&](Result<broker::PutResult> r) { refused.emplace(std::move(r)); });
  ASSERT_TRUE(run_until([&] { return refused.has_value(); }));
  EXPECT_EQ(refused->code(), Code::kConflict) << "a url into a tube without a webhook";

  Webhook hook;
  hook.url = "http://127.0.0.1:9/tube";
  std::optional<Result<Webhook>> set;
  auto admin = broker_->open_admin();
  admin->set_webhook("calls", hook, [&](Result<Webhook> r) { set.emplace(std::move(r)); });
  std::optional<Result<broker::PutResult>> put;
  session->put(request, [&](Result<broker::PutResult> r) { put.emplace(std::move(r)); });
  ASSERT_TRUE(run_until([&] { return put.has_value(); }));
  ASSERT_TRUE(put->is_ok()) << put->status().to_string();
  const JobId id = put->value().job.id;

  std::optional<Result<JobView>> noted;
  session->note_attempt(id, 503, "HTTP 503",
                        [&](Result<JobView> r) { noted.emplace(std::move(r)); });
  ASSERT_TRUE(run_until([&] { return noted.has_value(); }));
  ASSERT_TRUE(noted->is_ok());
  std::optional<Result<broker::Job>> peeked;
  session->peek(broker::JobRef::by_id(id), false,
                [&](Result<broker::Job> r) { peeked.emplace(std::move(r)); });
  ASSERT_TRUE(run_until([&] { return peeked.has_value(); }));
  ASSERT_TRUE(peeked->is_ok());
  const Delivery& delivery = peeked->value().delivery;
  EXPECT_EQ(delivery.url, "http://127.0.0.1:9/own");
  EXPECT_EQ(delivery.content_type, "application/json");
  EXPECT_EQ(delivery.last_status, 503);
  EXPECT_EQ(delivery.last_error, "HTTP 503");
  EXPECT_GT(delivery.last_attempt_unix_ms, 0);
  auto stored = gate_->read_attachment(id);
  ASSERT_TRUE(stored.is_ok()) << stored.status().to_string();
  EXPECT_EQ(stored.value(), delivery);

  std::optional<Result<JobId>> erased;
  session->erase(broker::JobRef::by_id(id), [&](Result<JobId> r) { erased.emplace(std::move(r)); });
  ASSERT_TRUE(run_until([&] { return erased.has_value(); }));
  ASSERT_TRUE(erased->is_ok());
  EXPECT_EQ(gate_->read_attachment(id).code(), Code::kNotFound) << "attachment left behind";
}

// Below the free space it keeps, the node refuses puts and says it is not ready; everything else
// goes on, and puts pass again as soon as a measure finds room.
TEST_F(LocalBrokerTest, ADiskShortOfItsReserveRefusesPutsOnlyUntilThereIsRoom) {
  std::uint64_t free = 64 << 20;
  NodeOptions options;
  options.min_free_disk_bytes = 1 << 20;
  options.free_disk = [&free] { return std::optional<std::uint64_t>(free); };
  options.disk_check_interval = 0ms;  // measure at every question
  auto opened = LocalBroker::open(io_, options, std::make_unique<store::MemoryStore>());
  ASSERT_TRUE(opened.is_ok()) << opened.status().to_string();
  auto broker = std::move(opened).value();
  auto session = broker->open_session({});
  const auto try_put = [&] {
    broker::PutRequest request;
    request.tube = "orders";
    request.body = "body";
    std::optional<Result<broker::PutResult>> done;
    session->put(request, [&](Result<broker::PutResult> r) { done.emplace(std::move(r)); });
    EXPECT_TRUE(run_until([&] { return done.has_value(); }));
    return done.value_or(Status(Code::kTimedOut, "no completion"));
  };
  auto first = try_put();
  ASSERT_TRUE(first.is_ok()) << first.status().to_string();
  auto second = try_put();
  ASSERT_TRUE(second.is_ok()) << second.status().to_string();
  EXPECT_TRUE(broker->health().is_ok());

  free = 512 << 10;
  auto refused = try_put();
  EXPECT_EQ(refused.status().code(), Code::kNoSpace);
  EXPECT_NE(refused.status().message().find("0.5 MiB free"), std::string::npos)
      << refused.status().message();
  EXPECT_EQ(broker->health().code(), Code::kNoSpace);

  std::optional<Result<broker::Job>> reserved;
  reserve(*session, "orders", &reserved);
  ASSERT_TRUE(run_until([&] { return reserved.has_value(); }));
  ASSERT_TRUE(reserved->is_ok()) << reserved->status().to_string();
  EXPECT_EQ(reserved->value().view.id, first.value().job.id);
  std::optional<Result<JobId>> erased;
  session->erase(broker::JobRef::by_id(second.value().job.id),
                 [&](Result<JobId> r) { erased.emplace(std::move(r)); });
  ASSERT_TRUE(run_until([&] { return erased.has_value(); }));
  EXPECT_TRUE(erased->is_ok()) << erased->status().to_string();

  free = 2 << 20;
  EXPECT_TRUE(broker->health().is_ok());
  auto again = try_put();
  EXPECT_TRUE(again.is_ok()) << again.status().to_string();
}

// The disk is measured once a check interval, and sooner when what was written since the last
// measure may have used up the margin above the reserve: a burst of puts cannot run past it for
// a whole interval.
TEST_F(LocalBrokerTest, TheDiskIsMeasuredAgainOnceWritesMayHaveUsedTheMargin) {
  std::uint64_t free = (1 << 20) + 8000;
  int measures = 0;
  NodeOptions options;
  options.min_free_disk_bytes = 1 << 20;
  options.free_disk = [&] {
    ++measures;
    return std::optional<std::uint64_t>(free);
  };
  options.disk_check_interval = 1h;
  auto opened = LocalBroker::open(io_, options, std::make_unique<store::MemoryStore>());
  ASSERT_TRUE(opened.is_ok()) << opened.status().to_string();
  auto broker = std::move(opened).value();
  EXPECT_EQ(measures, 1) << "measured at open";
  auto session = broker->open_session({});
  const auto try_put = [&](std::size_t bytes) {
    broker::PutRequest request;
    request.tube = "orders";
    request.body = std::string(bytes, 'x');
    std::optional<Result<broker::PutResult>> done;
    session->put(request, [&](Result<broker::PutResult> r) { done.emplace(std::move(r)); });
    EXPECT_TRUE(run_until([&] { return done.has_value(); }));
    return done.value_or(Status(Code::kTimedOut, "no completion"));
  };
  ASSERT_TRUE(try_put(100).is_ok());
  ASSERT_TRUE(try_put(100).is_ok());
  EXPECT_EQ(measures, 1) << "far from the reserve, within the interval: no measure";
  ASSERT_TRUE(try_put(10'000).is_ok());  // more than the margin: the next put measures
  free = (1 << 20) - 1;
  EXPECT_EQ(try_put(100).status().code(), Code::kNoSpace);
  EXPECT_EQ(measures, 2);
}

}  // namespace
}  // namespace delayq::broker::local
