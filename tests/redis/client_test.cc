// The Redis client against real redis-server processes: a single server, a 3-primary cluster,
// and every redirection and retry the client handles (MOVED, ASK, TRYAGAIN, CLUSTERDOWN,
// LOADING, READONLY, a missing function, a broken connection, a silent node), each provoked for
// real.
#include "redis/client.h"

#include <gtest/gtest.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <functional>
#include <memory>
#include <optional>
#include <random>
#include <set>

#include "protocol/server_process.h"
#include "redis/slot.h"
#include "redis_servers.h"

namespace delayq::redis {
namespace {

using testing::RedisCluster;
using testing::RedisServer;
using testing::TempDir;
using namespace std::chrono_literals;

constexpr Millis kWaitLimit{20000};

class RedisClientTest : public ::testing::Test {
 protected:
  ClientOptions options(const std::string& seeds) {
    ClientOptions result;
    std::size_t from = 0;
    while (from <= seeds.size()) {
      const auto comma = seeds.find(',', from);
      result.seeds.push_back(seeds.substr(from, comma - from));
      if (comma == std::string::npos) break;
      from = comma + 1;
    }
    return result;
  }

  // Runs the io_context until `result` is set, for at most kWaitLimit.
  template <typename T>
  void run_until(const std::optional<T>& result) {
    io_.restart();
    const auto deadline = std::chrono::steady_clock::now() + kWaitLimit;
    while (!result && std::chrono::steady_clock::now() < deadline) io_.run_for(10ms);
  }

  Status start(Client& client) {
    std::optional<Status> status;
    client.start([&](Status done) { status = std::move(done); });
    run_until(status);
    return status.value_or(Status(Code::kTimedOut, "start did not complete"));
  }

  Result<Reply> run(Client& client, std::string_view key, Command command) {
    std::optional<Result<Reply>> result;
    client.run(key_slot(key), std::move(command),
               [&](Result<Reply> done) { result.emplace(std::move(done)); });
    run_until(result);
    if (!result) return Status(Code::kTimedOut, "the request did not complete");
    return std::move(*result);
  }

  // "OK", "\"value\"", "(error) ...", or the failure.
  std::string text(const Result<Reply>& result) {
    return result.is_ok() ? describe(result.value()) : "failed: " + result.status().to_string();
  }

  // A started client of `server` that takes a node for dead after 300 ms of silence (for tests
  // that pause the server).
  std::unique_ptr<Client> impatient_client(const RedisServer& server) {
    auto opts = options(server.address());
    opts.connection.reply_timeout = 300ms;
    auto client = std::make_unique<Client>(io_.get_executor(), opts);
    EXPECT_TRUE(start(*client).is_ok());
    return client;
  }

  // In `delay`, on the io_context's thread (blocking calls to the servers are fine in a test).
  void later(Millis delay, std::function<void()> action) {
    auto timer = std::make_shared<boost::asio::steady_timer>(io_, delay);
    timer->async_wait(
        [timer, action = std::move(action)](const boost::system::error_code&) { action(); });
  }

  boost::asio::io_context io_;
  TempDir dir_;
};

// --- a single Redis

TEST_F(RedisClientTest, ASingleRedisServesEverySlot) {
  RedisServer server(dir_.path() / "single");
  ASSERT_EQ(server.start(), "");
  Client client(io_.get_executor(), options(server.address()));
  ASSERT_TRUE(start(client).is_ok());
  EXPECT_TRUE(client.standalone());
  EXPECT_EQ(client.primary_of(0), server.address());
  EXPECT_EQ(client.primary_of(kSlotCount - 1), server.address());
  for (const auto* key : {"a", "b", "{x}c", "somekey"}) {
    EXPECT_EQ(text(run(client, key, Command{"SET", key, "v"})), "OK");
    EXPECT_EQ(text(run(client, key, Command{"GET", key})), "\"v\"");
  }
}

TEST_F(RedisClientTest, NoSeedAnsweringSaysWhyForEach) {
  const auto port = testing::free_port();
  Client client(io_.get_executor(), options("127.0.0.1:" + std::to_string(port)));
  const auto status = start(client);
  EXPECT_EQ(status.code(), Code::kIOError);
  EXPECT_NE(status.message().find("127.0.0.1:" + std::to_string(port)), std::string::npos)
      << status.message();
  EXPECT_NE(status.message().find("refused"), std::string::npos) << status.message();
}

// Ten thousand commands in flight on one connection complete, each with its own reply, in order.
TEST_F(RedisClientTest, PipelinedCommandsCompleteInOrder) {
  RedisServer server(dir_.path() / "single");
  ASSERT_EQ(server.start(), "");
  Client client(io_.get_executor(), options(server.address()));
  ASSERT_TRUE(start(client).is_ok());
  constexpr int kCount = 10000;
  std::vector<std::int64_t> seen;
  std::optional<bool> all;
  for (int i = 0; i < kCount; ++i) {
    client.run(key_slot("counter"), Command{"INCR", "counter"}, [&](Result<Reply> reply) {
      seen.push_back(reply.is_ok() ? reply->integer : -1);
      if (seen.size() == kCount) all = true;
    });
  }
  run_until(all);
  ASSERT_EQ(seen.size(), std::size_t{kCount});
  for (int i = 0; i < kCount; ++i) ASSERT_EQ(seen[static_cast<std::size_t>(i)], i + 1);
}

TEST_F(RedisClientTest, ABrokenConnectionIsReplacedForTheNextCommand) {
  RedisServer server(dir_.path() / "single");
  ASSERT_EQ(server.start(), "");
  Client client(io_.get_executor(), options(server.address()));
  ASSERT_TRUE(start(client).is_ok());
  ASSERT_EQ(text(run(client, "k", Command{"SET", "k", "1"})), "OK");
  // Kills every normal client but the one that asks: the client under test.
  const auto killed =
      testing::call(server.port(), Command{"CLIENT", "KILL", "TYPE", "normal", "SKIPME", "yes"});
  ASSERT_GE(killed.integer, 1) << describe(killed);
  io_.restart();
  io_.run_for(100ms);  // the client reads the close
  EXPECT_EQ(text(run(client, "k", Command{"GET", "k"})), "\"1\"");
  EXPECT_GE(client.stats().reconnects, 1U);
}

// A request that may run twice (Request::send_again) is sent again when its connection breaks
// after it was written; another fails with kIOError, as it may have run.
TEST_F(RedisClientTest, ARequestThatMayRunTwiceIsSentAgainWhenItsConnectionBreaksAfterItIsSent) {
  RedisServer server(dir_.path() / "single");
  ASSERT_EQ(server.start(), "");
  Client client(io_.get_executor(), options(server.address()));
  ASSERT_TRUE(start(client).is_ok());
  const auto pop = [&](const std::string& list, bool send_again) {
    Request request;
    request.slot = key_slot(list);
    request.commands.push_back(Command{"BLPOP", list, "5"});
    request.send_again = send_again;
    std::optional<Result<std::vector<Reply>>> result;
    client.run(std::move(request),
               [&](Result<std::vector<Reply>> done) { result.emplace(std::move(done)); });
    // While the BLPOP waits in Redis, its connection is killed; then the list gets a value.
    later(200ms, [&] {
      EXPECT_EQ(
          testing::call(server.port(), Command{"CLIENT", "KILL", "TYPE", "normal", "SKIPME", "yes"})
              .integer,
          1);
    });
    later(600ms, [&, list] {
      EXPECT_EQ(testing::call(server.port(), Command{"LPUSH", list, "v"}).integer, 1);
    });
    run_until(result);
    io_.run_for(600ms);  // the LPUSH, whichever way the request ended
    return result.value_or(Status(Code::kTimedOut, "the request did not complete"));
  };
  const auto again = pop("again", true);
  ASSERT_TRUE(again.is_ok()) << again.status().to_string();
  ASSERT_EQ(again.value().size(), 1U);
  EXPECT_EQ(describe(again.value()[0]), "[\"again\", \"v\"]");
  EXPECT_EQ(client.stats().sent_again, 1U);
  const auto once = pop("once", false);
  ASSERT_FALSE(once.is_ok());
  EXPECT_EQ(once.status().code(), Code::kIOError);
  EXPECT_NE(once.status().message().find("may have run"), std::string::npos);
  EXPECT_EQ(client.stats().sent_again, 1U);
}

// A node that accepts and then says nothing (a paused VM) fails what was sent to it once the
// reply timeout passes: the outcome is unknown, which the error says.
TEST_F(RedisClientTest, ASilentNodeFailsItsCommandsAfterTheReplyTimeout) {
  RedisServer server(dir_.path() / "single");
  ASSERT_EQ(server.start(), "");
  const auto owned = impatient_client(server);
  Client& client = *owned;
  server.pause();
  const auto result = run(client, "k", Command{"SET", "k", "1"});
  server.resume();
  ASSERT_FALSE(result.is_ok());
  EXPECT_EQ(result.code(), Code::kIOError);
  EXPECT_NE(result.status().message().find("no reply"), std::string::npos) << text(result);
  EXPECT_NE(result.status().message().find("may have run"), std::string::npos) << text(result);
}

// A single Redis and its replica.
class RedisReplicatedTest : public RedisClientTest {
 protected:
  void SetUp() override {
    ASSERT_EQ(primary_.start(), "");
    replica_ = std::make_unique<RedisServer>(
        dir_.path() / "replica",
        std::vector<std::string>{"--replicaof", "127.0.0.1", std::to_string(primary_.port())});
    ASSERT_EQ(replica_->start(), "");
  }
  RedisServer primary_{dir_.path() / "primary"};
  std::unique_ptr<RedisServer> replica_;
};

// Requests that wait for a replica share WAITs: the first one written goes out at once, and
// the 49 written while it is in flight are covered by one more. Each answer says the replica
// has the write, and it does.
TEST_F(RedisReplicatedTest, RequestsThatWaitForAReplicaShareWaits) {
  Client client(io_.get_executor(), options(primary_.address()));
  ASSERT_TRUE(start(client).is_ok());
  // The replica is in sync once a WAIT sees it.
  std::optional<Result<std::vector<Reply>>> synced;
  for (int tries = 0; tries < 50; ++tries) {
    synced.reset();
    Request request{key_slot("k"), {Command{"SET", "k", "0"}}};
    request.replicas = 1;
    client.run(std::move(request),
               [&](Result<std::vector<Reply>> done) { synced.emplace(std::move(done)); });
    run_until(synced);
    if (synced && synced->is_ok() && synced->value().back().integer == 1) break;
  }
  ASSERT_TRUE(synced && synced->is_ok() && synced->value().back().integer == 1)
      << "the replica never caught up";
  const auto waits_before = client.stats().waits;

  constexpr int kCount = 50;
  std::vector<std::string> answers;
  std::optional<bool> all;
  for (int i = 0; i < kCount; ++i) {
    Request request{key_slot("k"), {Command{"SET", "k" + std::to_string(i), "v"}}};
    request.replicas = 1;
    request.replica_timeout = 5000ms;
    client.run(std::move(request), [&](Result<std::vector<Reply>> done) {
      answers.push_back(done.is_ok() ? describe(done.value()[0]) + " " + describe(done.value()[1])
                                     : done.status().to_string());
      if (answers.size() == kCount) all = true;
    });
  }
  run_until(all);
  ASSERT_EQ(answers.size(), std::size_t{kCount});
  for (const auto& answer : answers) EXPECT_EQ(answer, "OK (integer) 1");
  EXPECT_EQ(client.stats().waits - waits_before, 2U);
  for (int i = 0; i < kCount; ++i) {
    EXPECT_EQ(describe(testing::call(replica_->port(), Command{"GET", "k" + std::to_string(i)})),
              "\"v\"");
  }
}

// A replica that stops answering (paused) holds up the writes that wait for it for one WAIT's
// timeout, not one each: the first WAIT comes back short (0 replicas), and the writes sent
// behind it get its answer as soon as they have run. Requests that do not wait are not held up.
TEST_F(RedisReplicatedTest, AStoppedReplicaHoldsUpWritesForOneWaitNotOneEach) {
  Client client(io_.get_executor(), options(primary_.address()));
  ASSERT_TRUE(start(client).is_ok());
  replica_->pause();
  constexpr int kCount = 20;
  std::vector<std::string> answers;
  std::optional<bool> all;
  for (int i = 0; i < kCount; ++i) {
    Request request{key_slot("k"), {Command{"INCR", "n"}}};
    request.replicas = 1;
    request.replica_timeout = 200ms;
    client.run(std::move(request), [&](Result<std::vector<Reply>> done) {
      answers.push_back(done.is_ok() ? describe(done.value()[1]) : done.status().to_string());
      if (answers.size() == kCount) all = true;
    });
  }
  // A request that does not wait, sent meanwhile on the other connection, is answered first.
  std::optional<std::string> plain;
  client.run(key_slot("other"), Command{"INCR", "other"},
             [&](Result<Reply> done) { plain = text(done); });
  run_until(plain);
  EXPECT_EQ(plain, "(integer) 1");
  EXPECT_TRUE(answers.empty());
  run_until(all);
  replica_->resume();
  ASSERT_EQ(answers.size(), std::size_t{kCount});
  for (const auto& answer : answers) EXPECT_EQ(answer, "(integer) 0");
  EXPECT_EQ(client.stats().waits, 1U);
  EXPECT_EQ(describe(testing::call(primary_.port(), Command{"GET", "n"})), "\"20\"");
}

// A server that is down: nothing was sent, so the client retries until the request's deadline.
TEST_F(RedisClientTest, AServerThatIsDownTimesTheRequestOut) {
  RedisServer server(dir_.path() / "single");
  ASSERT_EQ(server.start(), "");
  auto opts = options(server.address());
  opts.request_timeout = 400ms;
  Client client(io_.get_executor(), opts);
  ASSERT_TRUE(start(client).is_ok());
  server.kill9();
  io_.restart();
  io_.run_for(50ms);
  const auto result = run(client, "k", Command{"GET", "k"});
  ASSERT_FALSE(result.is_ok());
  EXPECT_EQ(result.code(), Code::kTimedOut) << text(result);
  EXPECT_NE(result.status().message().find("refused"), std::string::npos) << text(result);
}

// The server restarts with a dataset it takes a while to load: LOADING answers until it has.
TEST_F(RedisClientTest, LoadingIsWaitedOut) {
  // Each key takes 500 us to load, and the server answers clients every 1 KiB loaded.
  RedisServer server(dir_.path() / "single", {"--key-load-delay", "500",
                                              "--loading-process-events-interval-bytes", "1024"});
  ASSERT_EQ(server.start(), "");
  for (int i = 0; i < 2000; ++i) {
    (void)testing::call(server.port(), Command{"SET", "key" + std::to_string(i), "v"});
  }
  ASSERT_EQ(describe(testing::call(server.port(), Command{"SAVE"})), "OK");
  Client client(io_.get_executor(), options(server.address()));
  ASSERT_TRUE(start(client).is_ok());
  server.kill9();
  io_.restart();
  io_.run_for(100ms);             // the client reads the close, as it would while it waits for work
  ASSERT_EQ(server.start(), "");  // answers PING with LOADING for about a second
  EXPECT_EQ(testing::call(server.port(), Command{"GET", "key7"}).error_code(), "LOADING");
  EXPECT_EQ(text(run(client, "key7", Command{"GET", "key7"})), "\"v\"");
  EXPECT_GE(client.stats().loading, 1U);
}

// The address names a replica (an old primary after a failover, a stale DNS name): writes are
// answered READONLY until it is promoted.
TEST_F(RedisClientTest, ReadOnlyIsRetriedUntilTheNodeIsPrimaryAgain) {
  RedisServer primary(dir_.path() / "primary");
  RedisServer replica(dir_.path() / "replica");
  ASSERT_EQ(primary.start(), "");
  ASSERT_EQ(replica.start(), "");
  ASSERT_EQ(describe(testing::call(
                replica.port(), Command{"REPLICAOF", "127.0.0.1", std::to_string(primary.port())})),
            "OK");
  Client client(io_.get_executor(), options(replica.address()));
  ASSERT_TRUE(start(client).is_ok());
  later(300ms, [&] { (void)testing::call(replica.port(), Command{"REPLICAOF", "NO", "ONE"}); });
  EXPECT_EQ(text(run(client, "k", Command{"SET", "k", "1"})), "OK");
  EXPECT_GE(client.stats().read_only, 1U);
  EXPECT_EQ(describe(testing::call(replica.port(), Command{"GET", "k"})), "\"1\"");
}

// A single Redis, a client started on it, and a script that adds args[1] to keys[1].
class RedisScriptTest : public RedisClientTest {
 protected:
  void SetUp() override {
    ASSERT_EQ(server_.start(), "");  // its port is known from here on
    client_.emplace(io_.get_executor(), options(server_.address()));
    ASSERT_TRUE(start(*client_).is_ok());
  }

  // Sends the script's call for `key` (without waiting); its result lands in `result`.
  void add(const std::string& key, std::string_view by,
           std::optional<Result<std::vector<Reply>>>& result) {
    client_->run(Request{key_slot(key), {script_.call({key}, {by})}, &script_},
                 [&result](Result<std::vector<Reply>> done) { result.emplace(std::move(done)); });
  }

  // "(integer) N", or "failed".
  std::string added(const std::optional<Result<std::vector<Reply>>>& result) {
    run_until(result);
    return result && result->is_ok() ? describe(result->value().front()) : std::string("failed");
  }

  RedisServer server_{dir_.path() / "single"};
  std::optional<Client> client_;
  const Script script_{
      "local function run(keys, args) return redis.call('INCRBY', keys[1], args[1]) end"};
};

TEST_F(RedisScriptTest, AScriptIsLoadedWhereItIsMissing) {
  auto eval = [&](std::string_view by) {
    std::optional<Result<std::vector<Reply>>> result;
    add("n", by, result);
    return added(result);
  };
  EXPECT_EQ(eval("2"), "(integer) 2");  // loaded ahead of the connection's first call
  EXPECT_EQ(eval("3"), "(integer) 5");  // loaded: no reload
  EXPECT_EQ(client_->stats().library_loads_sent, 1U);
  EXPECT_EQ(client_->stats().function_loads, 0U);
  // Gone from the node (an operator's FLUSH): the call fails, the library is loaded, the call
  // is sent again.
  ASSERT_EQ(describe(testing::call(server_.port(), Command{"FUNCTION", "FLUSH"})), "OK");
  EXPECT_EQ(eval("4"), "(integer) 9");
  EXPECT_EQ(client_->stats().function_loads, 1U);
  EXPECT_EQ(client_->stats().library_loads_sent, 1U);
}

// What a node does at its start: many calls of a library at once, on a Redis that has never
// seen it. The library is loaded once, ahead of them, and no call fails on the way.
TEST_F(RedisScriptTest, ABurstOfFirstCallsLoadsTheLibraryOnceAndNoCallFails) {
  constexpr std::size_t kCalls = 50;
  std::vector<std::optional<Result<std::vector<Reply>>>> results(kCalls);
  for (std::size_t i = 0; i < kCalls; ++i) add("n" + std::to_string(i), "1", results[i]);
  for (const auto& result : results) EXPECT_EQ(added(result), "(integer) 1");
  EXPECT_EQ(client_->stats().function_loads, 0U);
  const std::string stats = testing::call(server_.port(), Command{"INFO", "commandstats"}).str;
  auto line = [&](std::string_view name) {  // "cmdstat_<name>:calls=N,...,failed_calls=N"
    const auto at = stats.find("cmdstat_" + std::string(name) + ":");
    return at == std::string::npos ? std::string() : stats.substr(at, stats.find('\r', at) - at);
  };
  EXPECT_NE(line("fcall").find(":calls=50,"), std::string::npos) << stats;
  EXPECT_NE(line("fcall").find(",failed_calls=0"), std::string::npos) << stats;
  EXPECT_NE(line("function|load").find(":calls=1,"), std::string::npos) << stats;
}

// Subscriptions (a channel and a shard channel) whose node stops answering (SIGSTOP: the
// connection stays open) are noticed by their PINGs and made again once the node is back;
// messages flow again.
TEST_F(RedisClientTest, ASilentSubscriptionIsMadeAgain) {
  RedisServer server(dir_.path() / "single");
  ASSERT_EQ(server.start(), "");
  const auto owned = impatient_client(server);
  Client& client = *owned;
  int subscribed = 0;
  int shard_subscribed = 0;
  std::vector<std::string> messages;
  client.subscribe(
      "events", [&](std::string message) { messages.push_back(std::move(message)); },
      [&] { ++subscribed; });
  client.subscribe_shards(
      {"{s}events"},
      [&](std::size_t index, std::string message) {
        messages.push_back(std::to_string(index) + " " + message);
      },
      [&](std::size_t index) {
        EXPECT_EQ(index, 0U);
        ++shard_subscribed;
      });
  const auto run_while = [&](const std::function<bool()>& condition) {
    io_.restart();
    for (int i = 0; i < 300 && condition(); ++i) io_.run_for(10ms);
  };
  run_while([&] { return subscribed == 0 || shard_subscribed == 0; });
  ASSERT_EQ(subscribed, 1);
  ASSERT_EQ(shard_subscribed, 1);
  server.pause();
  io_.restart();
  io_.run_for(6000ms);  // the PINGs at 5 s go unanswered
  server.resume();
  run_while([&] { return subscribed < 2 || shard_subscribed < 2; });
  EXPECT_EQ(subscribed, 2);
  EXPECT_EQ(shard_subscribed, 2);
  EXPECT_EQ(client.stats().shard_subscriptions, 2U);
  EXPECT_EQ(testing::call(server.port(), Command{"PUBLISH", "events", "hello"}).integer, 1);
  EXPECT_EQ(testing::call(server.port(), Command{"SPUBLISH", "{s}events", "shard"}).integer, 1);
  run_while([&] { return messages.size() < 2; });
  EXPECT_EQ(messages, (std::vector<std::string>{"hello", "0 shard"}));
}

// sync_shards() completes only after every message published before it has come, and says
// which channels held: all of them here; none while their node does not answer.
TEST_F(RedisClientTest, SyncShardsLetsInEveryMessageSentBeforeIt) {
  RedisServer server(dir_.path() / "single");
  ASSERT_EQ(server.start(), "");
  const auto owned = impatient_client(server);
  Client& client = *owned;
  const std::vector<std::string> channels = {"{a}events", "{b}events"};
  int subscribed = 0;
  std::vector<std::string> messages;
  client.subscribe_shards(
      channels, [&](std::size_t, std::string message) { messages.push_back(message); },
      [&](std::size_t) { ++subscribed; });
  io_.restart();
  for (int i = 0; i < 300 && subscribed < 2; ++i) io_.run_for(10ms);
  ASSERT_EQ(subscribed, 2);
  for (std::size_t round = 0; round < 20; ++round) {
    for (const auto& channel : channels) {
      ASSERT_EQ(
          testing::call(server.port(), Command{"SPUBLISH", channel, std::to_string(round)}).integer,
          1);
    }
    std::optional<std::vector<bool>> held;
    std::size_t heard = 0;
    client.sync_shards([&](std::vector<bool> result) {
      heard = messages.size();
      held = std::move(result);
    });
    run_until(held);
    ASSERT_TRUE(held);
    EXPECT_EQ(*held, std::vector<bool>({true, true}));
    EXPECT_EQ(heard, 2 * (round + 1)) << "round " << round;
  }
  server.pause();
  std::optional<std::vector<bool>> held;
  client.sync_shards([&](std::vector<bool> result) { held = std::move(result); });
  run_until(held);
  server.resume();
  ASSERT_TRUE(held);
  EXPECT_EQ(*held, std::vector<bool>({false, false}));
}

// An SSUBSCRIBE the server keeps refusing (an ACL without the channel) is said, and tried
// again ever more slowly, not five times a second; once allowed, it holds.
TEST_F(RedisClientTest, ARefusedShardChannelIsToldAndTriedAgainMoreSlowly) {
  RedisServer server(dir_.path() / "single");
  ASSERT_EQ(server.start(), "");
  ASSERT_EQ(describe(testing::call(
                server.port(), Command{"ACL", "SETUSER", "default", "resetchannels", "&events"})),
            "OK");
  Client client(io_.get_executor(), options(server.address()));
  ASSERT_TRUE(start(client).is_ok());
  int subscribed = 0;
  client.subscribe_shards(
      {"{s}events"}, [](std::size_t, std::string) {}, [&](std::size_t) { ++subscribed; });
  io_.restart();
  io_.run_for(4000ms);
  EXPECT_EQ(subscribed, 0);
  EXPECT_EQ(client.shard_subscribe_error().rfind("NOPERM", 0), 0U)
      << client.shard_subscribe_error();
  // At 200 ms, doubling: 0, 0.2, 0.6, 1.4, 3.0 s (20 at a steady 200 ms).
  EXPECT_GE(client.stats().shard_subscribe_errors, 3U);
  EXPECT_LE(client.stats().shard_subscribe_errors, 6U);
  ASSERT_EQ(
      describe(testing::call(server.port(), Command{"ACL", "SETUSER", "default", "allchannels"})),
      "OK");
  io_.restart();
  for (int i = 0; i < 700 && subscribed == 0; ++i) io_.run_for(10ms);
  EXPECT_EQ(subscribed, 1);
  EXPECT_EQ(client.shard_subscribe_error(), "");
}

// --- a cluster

class RedisClusterTest : public RedisClientTest {
 protected:
  void SetUp() override { ASSERT_EQ(cluster_.start(), ""); }

  // The first steps of a slot migration, as redis-cli --cluster reshard takes them.
  void begin_migration(std::uint16_t slot, RedisServer& from, RedisServer& to) {
    const auto number = std::to_string(slot);
    ASSERT_EQ(describe(testing::call(to.port(), Command{"CLUSTER", "SETSLOT", number, "IMPORTING",
                                                        RedisCluster::node_id(from)})),
              "OK");
    ASSERT_EQ(describe(testing::call(from.port(), Command{"CLUSTER", "SETSLOT", number, "MIGRATING",
                                                          RedisCluster::node_id(to)})),
              "OK");
  }
  void move_key(RedisServer& from, RedisServer& to, std::string_view key) {
    ASSERT_EQ(
        describe(testing::call(from.port(), Command{"MIGRATE", "127.0.0.1",
                                                    std::to_string(to.port()), key, "0", "5000"})),
        "OK");
  }
  // The last step: every primary learns the slot's new owner.
  void end_migration(std::uint16_t slot, RedisServer& to) {
    const auto id = RedisCluster::node_id(to);
    for (auto& server : cluster_.servers()) {
      ASSERT_EQ(describe(testing::call(server->port(), Command{"CLUSTER", "SETSLOT",
                                                               std::to_string(slot), "NODE", id})),
                "OK");
    }
  }
  RedisServer& other_than(const RedisServer& server) {
    for (auto& candidate : cluster_.servers()) {
      if (candidate.get() != &server) return *candidate;
    }
    std::abort();
  }

  RedisCluster cluster_{dir_.path() / "cluster", 3, 0};
};

TEST_F(RedisClusterTest, ReadsTheTopologyAndSendsEachKeyToItsPrimary) {
  Client client(io_.get_executor(), options(cluster_.seeds()));
  ASSERT_TRUE(start(client).is_ok());
  EXPECT_FALSE(client.standalone());
  ASSERT_EQ(client.primaries().size(), 3U);
  for (std::uint16_t slot = 0; slot < kSlotCount; slot += 1000) {
    ASSERT_NE(cluster_.primary_of(slot), nullptr);
    EXPECT_EQ(client.primary_of(slot), cluster_.primary_of(slot)->address()) << slot;
  }
  for (int i = 0; i < 300; ++i) {
    const auto key = "key" + std::to_string(i);
    ASSERT_EQ(text(run(client, key, Command{"SET", key, std::to_string(i)})), "OK");
  }
  EXPECT_EQ(client.stats().moved, 0U);
  std::int64_t total = 0;
  for (auto& server : cluster_.servers()) {
    const auto size = testing::call(server->port(), Command{"DBSIZE"}).integer;
    EXPECT_GT(size, 50) << server->address();  // the keys spread over every primary
    total += size;
  }
  EXPECT_EQ(total, 300);
}

// Redis's own CLUSTER KEYSLOT agrees with key_slot() on random binary keys.
TEST_F(RedisClusterTest, KeySlotAgreesWithRedisOnRandomKeys) {
  std::mt19937 random(12345);
  const auto port = cluster_.servers().front()->port();
  for (int i = 0; i < 500; ++i) {
    std::string key(random() % 12, '\0');
    for (auto& c : key) {
      c = random() % 8 == 0 ? "{}"[random() % 2] : static_cast<char>(random() % 256);
    }
    const auto reply = testing::call(port, Command{"CLUSTER", "KEYSLOT", key});
    ASSERT_EQ(reply.integer, key_slot(key)) << "key of " << key.size() << " bytes, seed 12345";
  }
}

TEST_F(RedisClusterTest, MovedUpdatesTheSlotAndResends) {
  Client client(io_.get_executor(), options(cluster_.seeds()));
  ASSERT_TRUE(start(client).is_ok());
  const std::string key = "{moving}k";
  const auto slot = key_slot(key);
  ASSERT_EQ(text(run(client, key, Command{"SET", key, "before"})), "OK");
  RedisServer& from = *cluster_.primary_of(slot);
  RedisServer& to = other_than(from);
  begin_migration(slot, from, to);
  move_key(from, to, key);
  end_migration(slot, to);
  EXPECT_EQ(text(run(client, key, Command{"GET", key})), "\"before\"");
  EXPECT_EQ(client.stats().moved, 1U);
  EXPECT_EQ(client.primary_of(slot), to.address());
  EXPECT_EQ(text(run(client, key, Command{"SET", key, "after"})), "OK");
  EXPECT_EQ(client.stats().moved, 1U);  // the map was updated: no second redirection
}

// In the middle of a migration the old owner sends a key that has left to the new one (ASK),
// for that one command: the slot stays where it was in the map.
TEST_F(RedisClusterTest, AskSendsOneCommandToTheImportingNode) {
  Client client(io_.get_executor(), options(cluster_.seeds()));
  ASSERT_TRUE(start(client).is_ok());
  const std::string key = "{asking}k";
  const auto slot = key_slot(key);
  ASSERT_EQ(text(run(client, key, Command{"SET", key, "v"})), "OK");
  RedisServer& from = *cluster_.primary_of(slot);
  RedisServer& to = other_than(from);
  begin_migration(slot, from, to);
  move_key(from, to, key);
  EXPECT_EQ(text(run(client, key, Command{"GET", key})), "\"v\"");
  EXPECT_EQ(client.stats().ask, 1U);
  EXPECT_EQ(client.primary_of(slot), from.address());
  // A new key of the slot goes to the importing node too.
  EXPECT_EQ(text(run(client, key, Command{"SET", "{asking}new", "n"})), "OK");
  EXPECT_EQ(client.stats().ask, 2U);
  EXPECT_EQ(describe(testing::call(to.port(), Command{"ASKING"})), "OK");
  EXPECT_EQ(testing::call(from.port(), Command{"EXISTS", "{asking}new"}).integer, 0);
}

// A command over two keys of a slot half migrated is answered TRYAGAIN until the migration
// ends; then MOVED sends it to the new owner.
TEST_F(RedisClusterTest, TryAgainWaitsForTheMigrationToEnd) {
  Client client(io_.get_executor(), options(cluster_.seeds()));
  ASSERT_TRUE(start(client).is_ok());
  const std::string a = "{split}a";
  const std::string b = "{split}b";
  const auto slot = key_slot(a);
  ASSERT_EQ(text(run(client, a, Command{"SET", a, "1"})), "OK");
  ASSERT_EQ(text(run(client, b, Command{"SET", b, "2"})), "OK");
  RedisServer& from = *cluster_.primary_of(slot);
  RedisServer& to = other_than(from);
  begin_migration(slot, from, to);
  move_key(from, to, a);
  later(300ms, [&] {
    move_key(from, to, b);
    end_migration(slot, to);
  });
  EXPECT_EQ(text(run(client, a, Command{"MGET", a, b})), "[\"1\", \"2\"]");
  EXPECT_GE(client.stats().try_again, 1U);
  EXPECT_EQ(client.primary_of(slot), to.address());
}

// A slot no node serves: CLUSTERDOWN until one takes it again.
TEST_F(RedisClusterTest, ClusterDownIsRetriedUntilTheSlotIsServed) {
  Client client(io_.get_executor(), options(cluster_.seeds()));
  ASSERT_TRUE(start(client).is_ok());
  const std::string key = "{down}k";
  const auto slot = key_slot(key);
  RedisServer& owner = *cluster_.primary_of(slot);
  ASSERT_EQ(
      describe(testing::call(owner.port(), Command{"CLUSTER", "DELSLOTS", std::to_string(slot)})),
      "OK");
  ASSERT_EQ(testing::call(owner.port(), Command{"GET", key}).error_code(), "CLUSTERDOWN");
  later(500ms, [&] {
    (void)testing::call(owner.port(), Command{"CLUSTER", "ADDSLOTS", std::to_string(slot)});
  });
  EXPECT_EQ(text(run(client, key, Command{"SET", key, "back"})), "OK");
  EXPECT_GE(client.stats().cluster_down, 1U);
}

// Shard channels are subscribed each on the primary that serves its slot (one connection per
// primary), and a message sent there with SPUBLISH comes to the channel's index.
TEST_F(RedisClusterTest, ShardChannelsAreSubscribedOnTheirSlotsPrimaries) {
  Client client(io_.get_executor(), options(cluster_.seeds()));
  ASSERT_TRUE(start(client).is_ok());
  std::vector<std::string> channels;
  for (int i = 0; i < 12; ++i) channels.push_back("dq:{" + std::to_string(i) + "}:events");
  std::vector<int> subscribed(channels.size());
  std::vector<std::pair<std::size_t, std::string>> messages;
  client.subscribe_shards(
      channels,
      [&](std::size_t index, std::string message) { messages.emplace_back(index, message); },
      [&](std::size_t index) { ++subscribed.at(index); });
  io_.restart();
  for (int i = 0; i < 300 && std::count(subscribed.begin(), subscribed.end(), 0) > 0; ++i) {
    io_.run_for(10ms);
  }
  ASSERT_EQ(subscribed, std::vector<int>(channels.size(), 1));
  std::set<std::string> primaries;
  for (std::size_t i = 0; i < channels.size(); ++i) {
    RedisServer& owner = *cluster_.primary_of(key_slot(channels[i]));
    primaries.insert(owner.address());
    EXPECT_EQ(describe(testing::call(owner.port(), Command{"PUBSUB", "SHARDNUMSUB", channels[i]})),
              "[\"" + channels[i] + "\", (integer) 1]");
    EXPECT_EQ(
        testing::call(owner.port(), Command{"SPUBLISH", channels[i], std::to_string(i)}).integer,
        1);
  }
  EXPECT_EQ(primaries.size(), 3U);  // the channels spread over every primary
  io_.restart();
  for (int i = 0; i < 300 && messages.size() < channels.size(); ++i) io_.run_for(10ms);
  ASSERT_EQ(messages.size(), channels.size());
  std::sort(messages.begin(), messages.end());  // from three connections: in no set order
  for (std::size_t i = 0; i < channels.size(); ++i) {
    EXPECT_EQ(messages[i], std::make_pair(i, std::to_string(i)));
  }
}

// A shard channel whose slot moves to another primary is subscribed there, and its messages
// come from there.
TEST_F(RedisClusterTest, AShardChannelFollowsItsSlotToAnotherPrimary) {
  Client client(io_.get_executor(), options(cluster_.seeds()));
  ASSERT_TRUE(start(client).is_ok());
  const std::string channel = "{moving}events";
  const auto slot = key_slot(channel);
  int subscribed = 0;
  std::vector<std::string> messages;
  client.subscribe_shards(
      {channel}, [&](std::size_t, std::string message) { messages.push_back(message); },
      [&](std::size_t) { ++subscribed; });
  io_.restart();
  for (int i = 0; i < 300 && subscribed == 0; ++i) io_.run_for(10ms);
  ASSERT_EQ(subscribed, 1);
  RedisServer& from = *cluster_.primary_of(slot);
  RedisServer& to = other_than(from);
  begin_migration(slot, from, to);
  end_migration(slot, to);
  io_.restart();
  for (int i = 0; i < 300 && subscribed < 2; ++i) io_.run_for(10ms);
  EXPECT_EQ(subscribed, 2);
  EXPECT_EQ(client.stats().shard_subscriptions, 2U);
  EXPECT_EQ(describe(testing::call(from.port(), Command{"PUBSUB", "SHARDNUMSUB", channel})),
            "[\"" + channel + "\", (integer) 0]");
  EXPECT_EQ(testing::call(to.port(), Command{"SPUBLISH", channel, "there"}).integer, 1);
  io_.restart();
  for (int i = 0; i < 300 && messages.empty(); ++i) io_.run_for(10ms);
  EXPECT_EQ(messages, std::vector<std::string>{"there"});
}

// A slot whose requests meet a migration (ASK) is not vouched for by sync_shards(): its
// scripts may run, and publish, on the importing node.
TEST_F(RedisClusterTest, SyncShardsDoesNotVouchForASlotThatMigrates) {
  Client client(io_.get_executor(), options(cluster_.seeds()));
  ASSERT_TRUE(start(client).is_ok());
  const std::vector<std::string> channels = {"{migrating}events", "{staying}events"};
  int subscribed = 0;
  client.subscribe_shards(
      channels, [](std::size_t, std::string) {}, [&](std::size_t) { ++subscribed; });
  io_.restart();
  for (int i = 0; i < 300 && subscribed < 2; ++i) io_.run_for(10ms);
  ASSERT_EQ(subscribed, 2);
  const auto sync = [&] {
    std::optional<std::vector<bool>> held;
    client.sync_shards([&](std::vector<bool> result) { held = std::move(result); });
    run_until(held);
    return held.value_or(std::vector<bool>{});
  };
  EXPECT_EQ(sync(), std::vector<bool>({true, true}));
  const std::string key = "{migrating}k";
  ASSERT_EQ(text(run(client, key, Command{"SET", key, "v"})), "OK");
  RedisServer& from = *cluster_.primary_of(key_slot(key));
  RedisServer& to = other_than(from);
  begin_migration(key_slot(key), from, to);
  move_key(from, to, key);
  EXPECT_EQ(text(run(client, key, Command{"GET", key})), "\"v\"");  // by ASK
  EXPECT_EQ(sync(), std::vector<bool>({false, true}));
}

// A script that waits for a replica runs on the slot's primary, and its WAIT's answer comes
// after the script's.
TEST_F(RedisClusterTest, AScriptThatWaitsForAReplicaRunsOnTheSlotsPrimary) {
  Client client(io_.get_executor(), options(cluster_.seeds()));
  ASSERT_TRUE(start(client).is_ok());
  const Script script(
      "local function run(keys, args) redis.call('SET', keys[1], args[1]); "
      "return redis.call('GET', keys[1]) end");
  const std::string key = "{script}k";
  std::optional<Result<std::vector<Reply>>> result;
  Request request{key_slot(key), {script.call({key}, {"x"})}, &script};
  request.replicas = 1;
  request.replica_timeout = 100ms;
  client.run(std::move(request),
             [&](Result<std::vector<Reply>> done) { result.emplace(std::move(done)); });
  run_until(result);
  ASSERT_TRUE(result && result->is_ok());
  ASSERT_EQ(result->value().size(), 2U);
  EXPECT_EQ(describe(result->value()[0]), "\"x\"");
  EXPECT_EQ(describe(result->value()[1]), "(integer) 0");  // no replicas in this cluster
  EXPECT_EQ(
      describe(testing::call(cluster_.primary_of(key_slot(key))->port(), Command{"GET", key})),
      "\"x\"");
}

}  // namespace
}  // namespace delayq::redis
