// contract_fixture.h — the fixture of the broker contract's suites (broker_contract_test.cc,
// schedule_contract_test.cc): a broker of each kind (contract_brokers.h) opened over a fresh
// state, and every call made through call(), which checks broker.h's completion rules on each
// one: it completes exactly once, on the executor, never inside the call that started it. Waits
// are bounded (kWait) and only wait for something to happen; no case asserts how fast it happens.
#pragma once

#include <gtest/gtest.h>

#include <boost/asio/io_context.hpp>
#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "broker/broker.h"
#include "broker/contract_brokers.h"

namespace delayq::testing {

using namespace std::chrono_literals;
using broker::Callback;
using broker::JobRef;
using broker::PutRequest;
using broker::PutResult;
using broker::Session;

constexpr auto kWait = 10s;  // the longest any one step is waited for

inline std::int64_t wall_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

class BrokerContract : public ::testing::TestWithParam<BrokerKind> {
 protected:
  void SetUp() override {
    std::string why;
    state_ = make_state(GetParam(), ::testing::UnitTest::GetInstance()->current_test_info()->name(),
                        &why);
    ASSERT_TRUE(state_ != nullptr) << why;
    can_ = state_->can();
    reopen_fresh();
  }
  void TearDown() override { close(); }

  // Closes the broker (everything done is durable) and destroys it; with a grace, after
  // running the executor that long first, as delayqd does when it stops (in Redis mode, the
  // node's leases go back in that time, and the next node takes them at once).
  void close(std::chrono::milliseconds grace = {}) {
    sessions_.clear();
    admin_.reset();
    if (broker_) {
      EXPECT_TRUE(broker_->close().is_ok());
      if (grace.count() > 0) run_for(grace);
      broker_.reset();
    }
    poll();
  }
  void reopen_fresh() {
    auto opened = state_->open(io_);
    ASSERT_TRUE(opened.is_ok()) << opened.status().to_string();
    broker_ = std::move(opened).value();
  }
  // A restart: the broker closed, and another opened over the same state.
  void restart() {
    close(std::chrono::milliseconds(200));
    reopen_fresh();
  }

  Session& session(broker::SessionOptions options = {}) {
    sessions_.push_back(broker_->open_session(std::move(options)));
    return *sessions_.back();
  }
  // The broker's server-wide calls, through one handle opened at the first.
  broker::Admin& admin() {
    if (!admin_) admin_ = broker_->open_admin();
    return *admin_;
  }
  void end_session(Session& s) {
    std::erase_if(sessions_, [&](const auto& p) { return p.get() == &s; });
  }

  void poll() {
    io_.restart();
    while (io_.poll() > 0) {
    }
  }
  // Runs the executor until `done` holds, at most kWait.
  bool run_until(const std::function<bool()>& done, std::chrono::milliseconds most = kWait) {
    const auto deadline = std::chrono::steady_clock::now() + most;
    while (!done() && std::chrono::steady_clock::now() < deadline) {
      io_.restart();
      io_.run_one_for(5ms);
    }
    return done();
  }
  // Runs the executor for about `time`, whatever happens.
  void run_for(std::chrono::milliseconds time) {
    const auto deadline = std::chrono::steady_clock::now() + time;
    while (std::chrono::steady_clock::now() < deadline) {
      io_.restart();
      io_.run_one_for(5ms);
    }
  }

  // A completion for a call, checked against broker.h's rules. The value lands in *out.
  template <typename T>
  Callback<T> expect_once(std::shared_ptr<std::optional<Result<T>>> out) {
    return [this, out](Result<T> result) {
      EXPECT_FALSE(inside_call_) << "completed inside the call that started it";
      EXPECT_TRUE(io_.get_executor().running_in_this_thread()) << "completed off the executor";
      EXPECT_FALSE(out->has_value()) << "completed twice";
      out->emplace(std::move(result));
    };
  }
  // Makes one call (`start` is given the completion) and waits for its completion.
  template <typename T>
  Result<T> call(const std::function<void(Callback<T>)>& start) {
    auto out = std::make_shared<std::optional<Result<T>>>();
    inside_call_ = true;
    start(expect_once<T>(out));
    inside_call_ = false;
    if (!run_until([&] { return out->has_value(); })) {
      return Status(Code::kIOError, "no completion within the wait");
    }
    return std::move(**out);
  }

  // --- the calls, as the cases use them
  Result<PutResult> put(Session& s, PutRequest request) {
    if (request.body.empty()) request.body = "body";
    return call<PutResult>([&](auto done) { s.put(std::move(request), std::move(done)); });
  }
  JobView put_ok(Session& s, const std::string& tube, std::uint32_t priority = 100, Due due = {},
                 std::string key = {}, std::string group = {}) {
    PutRequest request;
    request.tube = tube;
    request.priority = priority;
    request.due = due;
    request.key = std::move(key);
    request.group = std::move(group);
    request.body = "body of " + tube;
    auto result = put(s, std::move(request));
    EXPECT_TRUE(result.is_ok()) << result.status().to_string();
    return result.is_ok() ? result.value().job : JobView{};
  }
  Result<broker::Job> reserve(Session& s, std::vector<std::string> tubes,
                              std::optional<std::chrono::milliseconds> timeout = 0ms) {
    return call<broker::Job>([&](auto done) {
      (void)s.reserve(broker::ReserveRequest{std::move(tubes), timeout}, std::move(done));
    });
  }
  Result<broker::Job> peek(Session& s, JobRef ref, bool body = true) {
    return call<broker::Job>([&](auto done) { s.peek(std::move(ref), body, std::move(done)); });
  }
  Result<broker::Job> peek_next(Session& s, const std::string& tube, JobState state) {
    return call<broker::Job>([&](auto done) { s.peek_next(tube, state, std::move(done)); });
  }
  Result<JobId> erase(Session& s, JobRef ref) {
    return call<JobId>([&](auto done) { s.erase(std::move(ref), std::move(done)); });
  }
  Result<JobView> release(Session& s, JobId id, std::chrono::milliseconds delay = 0ms,
                          std::optional<std::uint32_t> priority = std::nullopt) {
    broker::ReleaseRequest request;
    request.id = id;
    request.delay = delay;
    request.priority = priority;
    return call<JobView>([&](auto done) { s.release(request, std::move(done)); });
  }
  Result<JobView> bury(Session& s, JobId id) {
    return call<JobView>([&](auto done) { s.bury(id, std::nullopt, std::move(done)); });
  }
  Result<JobView> touch(Session& s, JobId id) {
    return call<JobView>([&](auto done) { s.touch(id, std::move(done)); });
  }
  Result<std::size_t> kick(Session& s, const std::string& tube, std::size_t bound) {
    return call<std::size_t>([&](auto done) { s.kick(tube, bound, std::move(done)); });
  }
  Result<JobView> kick_job(Session& s, JobId id) {
    return call<JobView>([&](auto done) { s.kick_job(id, std::move(done)); });
  }
  Result<JobView> update(Session& s, JobRef ref, broker::Update u) {
    return call<JobView>([&](auto done) { s.update(std::move(ref), u, std::move(done)); });
  }
  Result<TubeStats> stats_tube(const std::string& tube) {
    return call<TubeStats>([&](auto done) { admin().stats_tube(tube, std::move(done)); });
  }
  // The tube's counts once `done` holds of them (Redis counts per shard, read by a round).
  bool tube_becomes(const std::string& tube, const std::function<bool(const TubeStats&)>& done) {
    return run_until([&] {
      auto stats = stats_tube(tube);
      return stats.is_ok() && done(stats.value());
    });
  }
  // Reserves from `tube`, waiting up to kWait for a job to be ready.
  Result<broker::Job> reserve_waiting(Session& s, const std::string& tube) {
    return reserve(s, {tube}, std::chrono::duration_cast<std::chrono::milliseconds>(kWait));
  }

  boost::asio::io_context io_;
  std::unique_ptr<ContractState> state_;
  Capabilities can_;
  std::unique_ptr<broker::Broker> broker_;
  std::vector<std::unique_ptr<Session>> sessions_;
  std::unique_ptr<broker::Admin> admin_;
  bool inside_call_ = false;
};

}  // namespace delayq::testing
