// The HTTP server before its broker is there (a long recovery at start), over a real loopback
// socket: /healthz says alive, every other request 503 "starting" with the progress last set
// and a Retry-After; a connection opened then is served by the API once serve() has run.
#include "front/http/server.h"

#include <gtest/gtest.h>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/post.hpp>
#include <boost/json.hpp>
#include <future>
#include <string>
#include <thread>

#include "front/http/client.h"
#include "support/fake_broker.h"

namespace delayq::front::http {
namespace {

namespace json = boost::json;

class StartingServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ServerOptions options;
    options.port = 0;
    server_.emplace(io_, options);
    ASSERT_TRUE(server_->start().is_ok());
    const std::string address = server_->local_address();
    port_ = static_cast<std::uint16_t>(std::stoi(address.substr(address.rfind(':') + 1)));
    thread_ = std::thread([this] { io_.run(); });
  }
  void TearDown() override {
    on_io([this] { server_->stop(); });
    work_.reset();
    io_.stop();
    thread_.join();
  }
  // Runs f on the server's thread and waits for it.
  template <typename F>
  void on_io(F f) {
    std::promise<void> done;
    boost::asio::post(io_, [&] {
      f();
      done.set_value();
    });
    done.get_future().wait();
  }

  boost::asio::io_context io_;
  boost::asio::executor_work_guard<boost::asio::io_context::executor_type> work_ =
      boost::asio::make_work_guard(io_);
  testing::FakeBroker broker_;  // outlives the server's API and its session
  std::optional<Server> server_;
  std::uint16_t port_ = 0;
  std::thread thread_;
};

TEST_F(StartingServerTest, AnswersHealthAndProgressUntilItServes) {
  Client client("127.0.0.1", port_);
  auto alive = client.request("GET", "/healthz");
  ASSERT_TRUE(alive.is_ok()) << alive.status().to_string();
  EXPECT_EQ(alive.value().status, 200U);

  on_io([this] {
    server_->starting("recovering: 4096 of about 10000 jobs loaded (41%)",
                      R"({"phase":"recovery","jobs_loaded":4096})");
  });
  for (const char* target : {"/readyz", "/v1/stats", "/v1/tubes/a/jobs"}) {
    SCOPED_TRACE(target);
    auto starting = client.request("GET", target);
    ASSERT_TRUE(starting.is_ok()) << starting.status().to_string();
    EXPECT_EQ(starting.value().status, 503U);
    EXPECT_EQ(starting.value().headers["retry-after"], "1");
    const json::object body = json::parse(starting.value().body).as_object();
    EXPECT_EQ(body.at("error").at("code").as_string(), "starting");
    EXPECT_EQ(body.at("error").at("message").as_string(),
              "recovering: 4096 of about 10000 jobs loaded (41%)");
    EXPECT_EQ(body.at("progress").at("jobs_loaded").to_number<int>(), 4096);
  }
  EXPECT_EQ(broker_.call_count(), 0U);

  // The same connection, once the broker serves: the API answers.
  on_io([this] { server_->serve(broker_); });
  auto ready = client.request("GET", "/readyz");
  ASSERT_TRUE(ready.is_ok()) << ready.status().to_string();
  EXPECT_EQ(ready.value().status, 200U) << ready.value().body;
  EXPECT_EQ(ready.value().headers.count("retry-after"), 0U);
}

}  // namespace
}  // namespace delayq::front::http
