// cpp_client_test.cc — the C++ client (include/delayq/client.h) against the real delayqd: binary
// bodies, keys, groups, due times (never early), every error a call maps, calls from several
// coroutines on one client taking turns, close() during a waiting reserve, and the worker loop
// (deletes, releases with backoff, touches a slow handler, stops); and docs/clients.md's snippet,
// as written. Every wait is bounded.
#include <gtest/gtest.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/use_future.hpp>
#include <chrono>
#include <future>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "delayq/client.h"
#include "protocol/server_process.h"

namespace delayq::client {
namespace {

namespace asio = boost::asio;
using namespace std::chrono_literals;
using testing::ServerProcess;
using testing::TempDir;

// Waits this long for a test's coroutine before calling it stuck.
constexpr auto kBound = 20s;

class CppClientTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_EQ(server_.start(), ""); }

  // Runs `task` on the test's io_context until it ends (at most kBound) and gives its result or
  // rethrows its exception.
  template <typename T>
  T run(Task<T> task) {
    std::future<T> done = asio::co_spawn(io_, std::move(task), asio::use_future);
    io_.restart();
    const auto deadline = std::chrono::steady_clock::now() + kBound;
    while (done.wait_for(0s) != std::future_status::ready &&
           std::chrono::steady_clock::now() < deadline) {
      io_.run_one_for(100ms);
    }
    if (done.wait_for(0s) != std::future_status::ready) {
      ADD_FAILURE() << "the coroutine did not end within " << kBound.count() << " s";
      io_.stop();
      throw std::runtime_error("stuck");
    }
    return done.get();
  }

  // A client connected to the server, for a test's coroutine.
  Task<std::unique_ptr<Client>> connected() {
    auto client = std::make_unique<Client>(io_.get_executor());
    co_await client->connect("127.0.0.1", server_.port());
    co_return client;
  }

  // The code a call throws, or {} if it returned.
  template <typename T>
  std::error_code code_of(Task<T> task) {
    try {
      run(std::move(task));
    } catch (const std::system_error& e) {
      return e.code();
    }
    return {};
  }

  static Task<void> sleep(Millis how_long) {
    asio::steady_timer timer(co_await asio::this_coro::executor, how_long);
    co_await timer.async_wait(asio::use_awaitable);
  }

  TempDir dir_;
  ServerProcess server_{dir_.path()};
  asio::io_context io_;
};

TEST_F(CppClientTest, ABinaryBodyIsPutReservedAndDeletedAsItWas) {
  const std::string body("a\r\nb\0c\xff", 7);
  run([&]() -> Task<void> {
    auto client = co_await connected();
    co_await client->use("bin");
    co_await client->watch("bin");
    const PutResult put = co_await client->put(body, {.priority = 5, .ttr = 30s});
    EXPECT_TRUE(put.inserted);
    const std::optional<Job> job = co_await client->reserve(1s);
    EXPECT_TRUE(job.has_value());
    if (!job) co_return;
    EXPECT_EQ(job->id, put.id);
    EXPECT_EQ(job->body, body);
    const Stats stats = co_await client->stats_job(job->id);
    EXPECT_EQ(stats.at("tube"), "bin");
    EXPECT_EQ(stats.at("state"), "reserved");
    EXPECT_EQ(stats.at("pri"), "5");
    EXPECT_EQ(stats.at("ttr"), "30");
    co_await client->erase(job->id);
    EXPECT_FALSE((co_await client->peek(job->id)).has_value());
  }());
}

TEST_F(CppClientTest, AKeyedPutAnswersTheJobHoldingTheKeyUnlessItReplacesIt) {
  run([&]() -> Task<void> {
    auto client = co_await connected();
    const PutOptions keyed{.due = Due::after(1h), .key = "order:1", .group = "shop"};
    const PutResult first = co_await client->put("one", keyed);
    const PutResult again = co_await client->put("two", keyed);
    EXPECT_TRUE(first.inserted);
    EXPECT_FALSE(again.inserted);
    EXPECT_EQ(again.id, first.id);
    PutOptions replacing = keyed;
    replacing.replace = true;
    const PutResult replaced = co_await client->put("three", replacing);
    EXPECT_TRUE(replaced.inserted);
    EXPECT_NE(replaced.id, first.id);
    const std::optional<Job> held = co_await client->peek_key("default", "order:1");
    EXPECT_TRUE(held.has_value());
    if (held) {
      EXPECT_EQ(held->body, "three");
    }
    co_await client->reschedule_key("default", "order:1", Due::after(2h));
    co_await client->put("four", {.due = Due::after(1h), .group = "shop"});
    EXPECT_EQ(co_await client->cancel_group("default", "shop"), 2U);
    EXPECT_FALSE((co_await client->peek_key("default", "order:1")).has_value());
  }());
}

TEST_F(CppClientTest, APutCarriesItsTraceContextAndADebounceMovesTheKeysJob) {
  run([&]() -> Task<void> {
    auto client = co_await connected();
    constexpr std::string_view kParent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
    const PutResult traced = co_await client->put(
        "t", {.due = Due::after(1h), .traceparent = kParent, .tracestate = "vendor=1"});
    const Stats stats = co_await client->stats_job(traced.id);
    EXPECT_EQ(stats.at("traceparent"), kParent);
    EXPECT_EQ(stats.at("tracestate"), "vendor=1");

    const PutOptions coalesce{.key = "sync:7", .debounce = 10min, .max_wait = 1h};
    const PutResult first = co_await client->put("first", coalesce);
    EXPECT_TRUE(first.inserted);
    EXPECT_FALSE(first.debounced);
    const PutResult second = co_await client->put("second", coalesce);
    EXPECT_FALSE(second.inserted);
    EXPECT_TRUE(second.debounced);
    EXPECT_EQ(second.id, first.id);
    const std::optional<Job> held = co_await client->peek_key("default", "sync:7");
    EXPECT_TRUE(held.has_value());
    if (held) {
      EXPECT_EQ(held->body, "second");
    }
    // A debounce needs its key.
    try {
      (void)co_await client->put("x", {.debounce = 1s});
      ADD_FAILURE() << "a debounce without a key was taken";
    } catch (const std::system_error& e) {
      EXPECT_EQ(e.code(), make_error_code(Errc::bad_format));
    }
  }());
}

TEST_F(CppClientTest, ADelayedJobIsNeverReservedBeforeItsDueTime) {
  run([&]() -> Task<void> {
    auto client = co_await connected();
    // On the wall clock, the clock due times are kept on (server_process.h, WallClock).
    const auto sent = std::chrono::system_clock::now();
    const PutResult put = co_await client->put("later", {.due = Due::after(1500ms)});
    EXPECT_FALSE((co_await client->reserve(0s)).has_value());
    const std::optional<Job> job = co_await client->reserve(5s);
    const auto waited = std::chrono::system_clock::now() - sent;
    EXPECT_TRUE(job.has_value());
    if (job) {
      EXPECT_EQ(job->id, put.id);
    }
    EXPECT_GE(waited, 1500ms);
    // An absolute due time in the past is now.
    const PutResult past =
        co_await client->put("now", {.due = Due::at(std::chrono::system_clock::now() - 1h)});
    const std::optional<Job> ready = co_await client->reserve(1s);
    EXPECT_TRUE(ready.has_value());
    if (ready) {
      EXPECT_EQ(ready->id, past.id);
    }
  }());
}

TEST_F(CppClientTest, EachRefusalIsItsOwnErrorCode) {
  std::unique_ptr<Client> client = run(connected());
  EXPECT_EQ(code_of(client->erase(999'999)), Errc::not_found);
  EXPECT_EQ(code_of(client->touch(999'999)), Errc::not_found);
  EXPECT_EQ(code_of(client->reschedule(999'999, Due::after(1s))), Errc::not_found);
  EXPECT_EQ(code_of(client->ignore("default")), Errc::not_ignored);
  // A token that would break the line is refused before anything is sent.
  EXPECT_EQ(code_of(client->put("x", {.key = "two words"})), Errc::bad_format);
  EXPECT_EQ(code_of(client->put("x", {.group = "tab\there"})), Errc::bad_format);
  EXPECT_EQ(code_of(client->use("")), Errc::bad_format);
  EXPECT_EQ(code_of(client->put("x", {.url = "https://example.test/hook"})), Errc::conflict)
      << "a url for a tube without a webhook";
  const PutResult put = run(client->put("held"));
  ASSERT_TRUE(run(client->reserve(1s)).has_value());
  EXPECT_EQ(code_of(client->reschedule(put.id, Due::after(1s))), Errc::conflict);
  // The connection is still in step after every refusal.
  run(client->erase(put.id));
  EXPECT_FALSE(run(client->peek(put.id)).has_value());
}

TEST_F(CppClientTest, CallsFromManyCoroutinesOnOneClientTakeTurns) {
  std::unique_ptr<Client> client = run(connected());
  std::vector<std::future<PutResult>> puts;
  for (int i = 0; i < 50; ++i) {
    puts.push_back(asio::co_spawn(io_, client->put("job " + std::to_string(i)), asio::use_future));
  }
  std::set<JobId> ids;
  run([&]() -> Task<void> {
    while (puts.back().wait_for(0s) != std::future_status::ready) co_await sleep(1ms);
  }());
  for (auto& put : puts) ids.insert(put.get().id);
  EXPECT_EQ(ids.size(), 50U);
  for (int i = 0; i < 50; ++i) {
    const std::optional<Job> job = run(client->reserve(1s));
    ASSERT_TRUE(job.has_value());
    EXPECT_EQ(job->body, "job " + std::to_string(i)) << "puts went in the order they were made";
  }
}

TEST_F(CppClientTest, CloseEndsAWaitingReserveAndTheCallsBehindIt) {
  std::unique_ptr<Client> client = run(connected());
  auto reserve = asio::co_spawn(io_, client->reserve(), asio::use_future);
  auto behind = asio::co_spawn(io_, client->put("x"), asio::use_future);
  run(sleep(200ms));
  client->close();
  EXPECT_FALSE(client->connected());
  run(sleep(50ms));
  ASSERT_EQ(reserve.wait_for(0s), std::future_status::ready);
  ASSERT_EQ(behind.wait_for(0s), std::future_status::ready);
  try {
    reserve.get();
    ADD_FAILURE() << "the reserve returned a job";
  } catch (const std::system_error& e) {
    EXPECT_EQ(e.code(), Errc::not_connected);
  }
  try {
    behind.get();
    ADD_FAILURE() << "the put behind it was sent";
  } catch (const std::system_error& e) {
    EXPECT_EQ(e.code(), Errc::not_connected);
  }
  EXPECT_EQ(code_of(client->put("after")), Errc::not_connected);
  run(client->connect("127.0.0.1", server_.port()));
  EXPECT_TRUE(run(client->put("again")).inserted);
}

TEST_F(CppClientTest, TheWorkerDeletesWhatItsHandlerDidAndReleasesWhatThrew) {
  std::unique_ptr<Client> producer = run(connected());
  run(producer->use("work"));
  const JobId good = run(producer->put("good")).id;
  const JobId bad = run(producer->put("bad")).id;
  std::vector<std::string> seen;
  Worker worker(io_.get_executor(),
                {.port = server_.port(),
                 .tubes = {"work"},
                 .concurrency = 2,
                 .backoff_min = 30s,
                 .backoff_max = 60s},
                [&](const Job& job) -> Task<void> {
                  seen.push_back(job.body);
                  if (job.body == "bad") throw std::runtime_error("failed");
                  co_return;
                });
  auto running = asio::co_spawn(io_, worker.run(), asio::use_future);
  run([&]() -> Task<void> {
    for (int i = 0; i < 500 && worker.done() + worker.failed() < 2; ++i) co_await sleep(10ms);
  }());
  worker.stop();
  run([&]() -> Task<void> {
    while (running.wait_for(0s) != std::future_status::ready) co_await sleep(10ms);
  }());
  running.get();
  EXPECT_EQ(worker.done(), 1U);
  EXPECT_EQ(worker.failed(), 1U);
  EXPECT_EQ(std::multiset<std::string>(seen.begin(), seen.end()),
            (std::multiset<std::string>{"good", "bad"}));
  EXPECT_FALSE(run(producer->peek(good)).has_value());
  const Stats stats = run(producer->stats_job(bad));
  EXPECT_EQ(stats.at("state"), "delayed") << "released with a backoff of 15 to 30 s";
  EXPECT_EQ(stats.at("releases"), "1");
  EXPECT_EQ(worker.backoff(1), 30s);
  EXPECT_EQ(worker.backoff(2), 60s);
  EXPECT_EQ(worker.backoff(9), 60s);
}

TEST_F(CppClientTest, TheWorkerTouchesAJobWhoseHandlerOutlivesItsTtr) {
  std::unique_ptr<Client> producer = run(connected());
  const JobId id = run(producer->put("slow", {.ttr = 2s})).id;
  Worker worker(io_.get_executor(), {.port = server_.port()},
                [&](const Job&) -> Task<void> { co_await sleep(3500ms); });
  auto running = asio::co_spawn(io_, worker.run(), asio::use_future);
  run([&]() -> Task<void> {
    for (int i = 0; i < 1000 && worker.done() == 0; ++i) co_await sleep(10ms);
  }());
  worker.stop();
  run([&]() -> Task<void> {
    while (running.wait_for(0s) != std::future_status::ready) co_await sleep(10ms);
  }());
  running.get();
  EXPECT_EQ(worker.done(), 1U) << "the job was still its own when the handler returned";
  EXPECT_GE(worker.touched(), 2U) << "a 2 s TTR touched every second over 3.5 s";
  EXPECT_FALSE(run(producer->peek(id)).has_value());
}

TEST_F(CppClientTest, AConnectionRefusedIsASystemErrorNamingTheAddress) {
  Client client(io_.get_executor());
  const std::uint16_t port = server_.port();
  ASSERT_EQ(server_.stop(), "exited 0");
  try {
    run(client.connect("127.0.0.1", port));
    ADD_FAILURE() << "connected to a stopped server";
  } catch (const std::system_error& e) {
    EXPECT_EQ(e.code(), std::errc::connection_refused);
    EXPECT_NE(std::string(e.what()).find("127.0.0.1:" + std::to_string(port)), std::string::npos)
        << e.what();
  }
  EXPECT_FALSE(client.connected());
}

TEST_F(CppClientTest, AWorkerRefusesOptionsItCannotRunWith) {
  Worker none(io_.get_executor(), {.port = server_.port(), .concurrency = 0},
              [](const Job&) -> Task<void> { co_return; });
  EXPECT_THROW(run(none.run()), std::invalid_argument);
  Worker backwards(io_.get_executor(),
                   {.port = server_.port(), .backoff_min = 10s, .backoff_max = 1s},
                   [](const Job&) -> Task<void> { co_return; });
  EXPECT_THROW(run(backwards.run()), std::invalid_argument);
}

// docs/clients.md's C++ snippet, as the page shows it: its first ```cpp block, taken at configure
// time (tests/CMakeLists.txt), with its port, 11300, made the test server's. It puts a reminder
// 48 h ahead by key, then moves it by that key to `new_time`.
Task<PutResult> clients_md_snippet(std::string body, std::uint16_t port, SystemTime new_time) {
#include "clients_md_snippet.inc"
  co_return put;
}

TEST_F(CppClientTest, TheSnippetOfDocsClientsMdRunsAsWritten) {
  const SystemTime new_time = std::chrono::system_clock::now() + 72h;
  const PutResult put = run(clients_md_snippet("rate your order 1001", server_.port(), new_time));
  EXPECT_TRUE(put.inserted);
  const Stats stats = run([&]() -> Task<Stats> {
    auto client = co_await connected();
    co_return co_await client->stats_job(put.id);
  }());
  EXPECT_EQ(stats.at("tube"), "reminders");
  EXPECT_EQ(stats.at("state"), "delayed");
  // Moved from 48 h to 72 h ahead by its key (time-left in whole seconds).
  const long long left = std::stoll(stats.at("time-left"));
  EXPECT_GE(left, 72 * 3600 - 5);
  EXPECT_LE(left, 72 * 3600);
}

}  // namespace
}  // namespace delayq::client
