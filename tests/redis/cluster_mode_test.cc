// delayqd --redis as users run it: two nodes over one Redis Cluster. A job put through one node
// is found, rescheduled, reserved and deleted by key through the other; a node killed with
// SIGKILL leaves its shards to the other, which fires them once the lease runs out, never early
// and none lost; a Redis primary killed under load fails over, and every put that was answered
// INSERTED is still there. The first two use the cluster the test run shares
// (DELAYQ_TEST_CLUSTER_SEEDS_FILE, from scripts/redis-cluster.sh); the failover test starts one
// of its own with the same script, since it kills a primary. A shard nobody fires shows on the
// overdue gauge of /metrics until a live node takes it. A one-second schedule runs on while
// either node is killed with SIGKILL, again and again: no run lost, none doubled. Group
// concurrency holds across the nodes, and a killed node's reservations free their groups.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <bit>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <iostream>
#include <iterator>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <thread>
#include <vector>

#include "broker/redis/layout.h"
#include "protocol/run_counter.h"
#include "protocol/server_process.h"
#include "redis/slot.h"
#include "redis_servers.h"
#include "support/lossy_proxy.h"
#include "support/seed.h"
#include "support/webhook_receiver.h"

namespace delayq::testing {
namespace {

using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

std::string read_line_of(const std::filesystem::path& file) {
  std::ifstream in(file);
  std::string line;
  std::getline(in, line);
  return line;
}

// The first line a shell command prints.
std::string read_line_of_command(const std::string& command) {
  std::string line;
  if (FILE* out = ::popen(command.c_str(), "r")) {
    char buffer[256];
    if (std::fgets(buffer, sizeof buffer, out) != nullptr) line = buffer;
    ::pclose(out);
  }
  while (!line.empty() && (line.back() == '\n' || line.back() == '\r')) line.pop_back();
  return line;
}

std::string shared_seeds() {
  const char* file = std::getenv("DELAYQ_TEST_CLUSTER_SEEDS_FILE");
  return file == nullptr ? std::string() : read_line_of(file);
}

// A delayqd node over Redis, outside the harness's own Redis mode (each test picks its nodes).
std::unique_ptr<ServerProcess> node(const TempDir& dir, const std::string& seeds,
                                    const std::string& prefix) {
  return std::make_unique<ServerProcess>(
      dir.path(), std::vector<std::string>{"--redis", seeds, "--redis-prefix", prefix});
}

// The body of GET <path>, by its Content-Length.
std::string http_body(std::uint16_t port, const std::string& path) {
  Client http(port);
  if (!http.send("GET " + path + " HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")) return "";
  std::size_t length = 0;
  while (auto line = http.read_line(Millis{15000})) {
    if (*line == "\r\n") return http.read_exact(length, Millis{15000}).value_or("");
    if (line->rfind("Content-Length: ", 0) == 0) length = std::stoul(line->substr(16));
  }
  return "";
}

// A sample of /metrics by its name and labels ("name" or "name{label=\"value\"}"); -1 if none.
double metric_of(std::uint16_t port, const std::string& sample) {
  const std::string page = http_body(port, "/metrics");
  const auto at = page.find("\n" + sample + " ");
  return at == std::string::npos ? -1.0 : std::stod(page.substr(at + sample.size() + 2));
}

std::string unique_prefix(const TempDir& dir) {
  const auto name = dir.path().filename().string();
  std::string prefix = "t";
  for (const char c : name) prefix.push_back(std::isalnum(static_cast<unsigned char>(c)) ? c : '-');
  return prefix;
}

std::int64_t unix_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// One reserve-with-timeout and, if it got a job, that job's delete: the job's id, if any.
std::optional<std::uint64_t> take_one(Client& worker, int timeout_seconds) {
  const std::string reply = worker.call(
      "reserve-with-timeout " + std::to_string(timeout_seconds) + "\r\n", Millis{15000});
  if (reply.rfind("RESERVED ", 0) != 0) return std::nullopt;
  const auto id = std::stoull(reply.substr(9));
  EXPECT_EQ(worker.call("delete " + std::to_string(id) + "\r\n", Millis{15000}), "DELETED\r\n");
  return id;
}

class ClusterModeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    seeds_ = shared_seeds();
    if (seeds_.empty())
      GTEST_SKIP() << "DELAYQ_TEST_CLUSTER_SEEDS_FILE is not set (ctest -L redis sets it)";
  }
  // Two nodes over the shared cluster, under a prefix of this test's own, and a client of each
  // (for ASSERT_NO_FATAL_FAILURE).
  void start_two_nodes() {
    const auto prefix = unique_prefix(dir_);
    a_ = node(dir_, seeds_, prefix);
    b_ = node(dir_, seeds_, prefix);
    ASSERT_EQ(a_->start(), "");
    ASSERT_EQ(b_->start(), "");
    on_a_ = std::make_unique<Client>(a_->port());
    on_b_ = std::make_unique<Client>(b_->port());
  }
  std::string seeds_;
  TempDir dir_;
  std::unique_ptr<ServerProcess> a_;
  std::unique_ptr<ServerProcess> b_;
  std::unique_ptr<Client> on_a_;
  std::unique_ptr<Client> on_b_;
};

TEST_F(ClusterModeTest, AJobPutThroughOneNodeIsHandledByKeyThroughTheOther) {
  ASSERT_NO_FATAL_FAILURE(start_two_nodes());
  Client& on_a = *on_a_;
  Client& on_b = *on_b_;
  ASSERT_EQ(on_a.call("use orders\r\n"), "USING orders\r\n");
  const auto id = inserted_id(on_a.call("putx 0 60000 10 5 key=order-42\r\nhello\r\n"));
  ASSERT_TRUE(id);
  EXPECT_EQ(on_b.call("peek-key orders order-42\r\n"), job_reply("FOUND", *id, "hello"));
  EXPECT_EQ(parse_yaml(on_b.call("stats-job " + std::to_string(*id) + "\r\n"))["state"], "delayed");
  EXPECT_EQ(on_b.call("reschedule-key orders order-42 0\r\n"), "RESCHEDULED\r\n");
  ASSERT_EQ(on_a.call("watch orders\r\n"), "WATCHING 2\r\n");
  EXPECT_EQ(on_a.call("reserve-with-timeout 5\r\n"), job_reply("RESERVED", *id, "hello"));
  // Reserved through A: B may not delete it ...
  EXPECT_EQ(on_b.call("delete-key orders order-42\r\n"), "NOT_FOUND\r\n");
  // ... until A lets it go.
  EXPECT_EQ(on_a.call("release " + std::to_string(*id) + " 0 0\r\n"), "RELEASED\r\n");
  EXPECT_EQ(on_b.call("delete-key orders order-42\r\n"), "DELETED\r\n");
  EXPECT_EQ(on_a.call("peek " + std::to_string(*id) + "\r\n"), "NOT_FOUND\r\n");
}

// A job reserved by a worker on node A, a reserve waiting on node B, then `end` ends A's worker
// (its connection, or node A itself): the job reaches B's reserve within `within`, not after
// its 120 s TTR.
void expect_the_job_moves_to_b(
    const TempDir& dir, const std::string& seeds,
    const std::function<void(ServerProcess& a, std::unique_ptr<Client>& worker)>& end,
    std::chrono::seconds within) {
  const auto prefix = unique_prefix(dir);
  auto a = node(dir, seeds, prefix);
  auto b = node(dir, seeds, prefix);
  ASSERT_EQ(a->start(), "");
  ASSERT_EQ(b->start(), "");
  auto worker = std::make_unique<Client>(a->port());
  const auto id = inserted_id(worker->call(put_command("work", 0, 0, 120)));
  ASSERT_TRUE(id);
  EXPECT_EQ(worker->call("reserve\r\n"), job_reply("RESERVED", *id, "work"));
  Client other(b->port());
  ASSERT_TRUE(other.send("reserve-with-timeout 10\r\n"));
  end(*a, worker);
  const auto started = Clock::now();
  EXPECT_EQ(other.reply(Millis{11000}), job_reply("RESERVED", *id, "work"));
  EXPECT_LT(Clock::now() - started, within);
}

// A closed connection's reservations go back at once, on whichever node the next worker is.
TEST_F(ClusterModeTest, AClosedConnectionsJobGoesToAWorkerOnTheOtherNode) {
  expect_the_job_moves_to_b(
      dir_, seeds_, [](ServerProcess&, std::unique_ptr<Client>& worker) { worker.reset(); }, 2s);
}

// A node stopped with SIGTERM closes its connections and waits until their reservations are
// given back: the job goes to a worker on the other node at once.
TEST_F(ClusterModeTest, AStoppedNodesReservedJobGoesToAWorkerOnTheOtherNodeAtOnce) {
  expect_the_job_moves_to_b(
      dir_, seeds_,
      [](ServerProcess& a, std::unique_ptr<Client>&) { EXPECT_EQ(a.stop(), "exited 0"); }, 3s);
}

// Reserves take jobs in priority order across shards, through either node: each node
// knows every shard's best job of a tube (from the shards' answers and from the messages the
// others' calls publish), tries the best shard first, and a shard whose best was taken meanwhile
// answers so. Jobs put one round trip at a time land in different shards.
TEST_F(ClusterModeTest, ReservesTakeTheBestJobOfEveryShardInPriorityOrder) {
  ASSERT_NO_FATAL_FAILURE(start_two_nodes());
  Client& on_a = *on_a_;
  Client& on_b = *on_b_;
  std::mt19937_64 random(test_seed());
  std::vector<std::uint32_t> priorities(60);
  for (std::size_t i = 0; i < priorities.size(); ++i) {
    priorities[i] = static_cast<std::uint32_t>(100 + 3 * i);
  }
  std::shuffle(priorities.begin(), priorities.end(), random);
  // priority -> id, in the order reserves must take them
  std::map<std::uint32_t, std::uint64_t> pending;
  std::set<std::uint64_t> shards;
  auto put_through = [&](Client& client, std::size_t from, std::size_t to) {
    for (std::size_t i = from; i < to; ++i) {
      const std::string tube = i % 2 == 0 ? "p1" : "p2";  // two tubes, one watch list
      ASSERT_EQ(client.call("use " + tube + "\r\n"), "USING " + tube + "\r\n");
      const auto id = inserted_id(client.call(put_command("j", priorities[i])));
      ASSERT_TRUE(id);
      pending[priorities[i]] = *id;
      shards.insert(*id % 128);
    }
  };
  auto take_in_order = [&](Client& worker, std::size_t count, const std::string& who) {
    for (std::size_t n = 0; n < count; ++n) {
      ASSERT_FALSE(pending.empty());
      const auto [priority, id] = *pending.begin();
      EXPECT_EQ(worker.call("reserve-with-timeout 5\r\n", Millis{15000}),
                job_reply("RESERVED", id, "j"))
          << who << ", reserve " << n << ": the job of priority " << priority;
      EXPECT_EQ(worker.call("delete " + std::to_string(id) + "\r\n"), "DELETED\r\n");
      pending.erase(pending.begin());
    }
  };
  for (Client* worker : {&on_a, &on_b}) {
    ASSERT_EQ(worker->call("watch p1\r\n"), "WATCHING 2\r\n");
    ASSERT_EQ(worker->call("watch p2\r\n"), "WATCHING 3\r\n");
  }
  put_through(on_a, 0, 40);
  EXPECT_GE(shards.size(), 20u);  // the default 128 shards, one put a turn: spread out
  // B has looked at no shard yet: it asks them all, and takes the best ten.
  take_in_order(on_b, 10, "through B");
  // A knows the best of each shard as its puts left them: where B took it, the shard says so.
  take_in_order(on_a, 10, "through A");
  // Puts through B, some better than every job left: A learns of them from B's messages.
  put_through(on_b, 40, 60);
  std::this_thread::sleep_for(500ms);  // messages cross the cluster bus (milliseconds)
  take_in_order(on_a, 20, "through A, after B's puts");
  take_in_order(on_b, pending.size(), "through B, the rest");
  EXPECT_EQ(on_a.call("reserve-with-timeout 0\r\n"), "TIMED_OUT\r\n");
}

// A poll (reserve-with-timeout 0) through one node finds the job whose put the other node has
// just answered, whichever shard holds it: the poll asks no shard the node knows to be empty,
// but first lets in every message sent before it (one PING per primary), and the put's message
// was sent before its answer.
TEST_F(ClusterModeTest, APollThroughOneNodeFindsAJobJustPutThroughTheOther) {
  ASSERT_NO_FATAL_FAILURE(start_two_nodes());
  Client& on_a = *on_a_;
  Client& on_b = *on_b_;
  ASSERT_EQ(on_a.call("use polled\r\n"), "USING polled\r\n");
  ASSERT_EQ(on_b.call("watch polled\r\n"), "WATCHING 2\r\n");
  ASSERT_EQ(on_b.call("ignore default\r\n"), "WATCHING 1\r\n");
  EXPECT_EQ(on_b.call("reserve-with-timeout 0\r\n"), "TIMED_OUT\r\n");  // B: no shard has one
  std::set<std::uint64_t> shards;
  for (int i = 0; i < 60; ++i) {
    const std::string body = "job " + std::to_string(i);
    const auto id = inserted_id(on_a.call(put_command(body)));
    ASSERT_TRUE(id);
    shards.insert(*id % 128);
    ASSERT_EQ(on_b.call("reserve-with-timeout 0\r\n"), job_reply("RESERVED", *id, body)) << i;
    ASSERT_EQ(on_b.call("delete " + std::to_string(*id) + "\r\n"), "DELETED\r\n");
  }
  EXPECT_GE(shards.size(), 30U);  // keyless puts take the shards in turn
}

// Jobs of one priority come out in the order they were put, across shards, though ids follow
// the puts only within a shard: here one shard's counter is far ahead of the others (200 jobs of
// one group), so a job put there has the largest id of all, and must still come out in turn.
TEST_F(ClusterModeTest, JobsOfOnePriorityComeOutOldestFirstAcrossShards) {
  ASSERT_NO_FATAL_FAILURE(start_two_nodes());
  Client& on_a = *on_a_;
  Client& on_b = *on_b_;
  ASSERT_EQ(on_a.call("use warm\r\n"), "USING warm\r\n");
  for (int i = 0; i < 200; ++i) {
    ASSERT_TRUE(inserted_id(on_a.call("putx 0 60000 10 1 group=g\r\nw\r\n")));
  }
  ASSERT_EQ(on_a.call("use fifo\r\n"), "USING fifo\r\n");
  std::vector<std::uint64_t> put_order;
  std::uint64_t largest = 0;
  for (int i = 0; i < 140; ++i) {  // one put a turn: every one of the 128 shards in turn
    const auto id = inserted_id(on_a.call(put_command("f", 10)));
    ASSERT_TRUE(id);
    put_order.push_back(*id);
    largest = std::max(largest, *id);
    std::this_thread::sleep_for(2ms);  // ages are compared to the millisecond
  }
  // The job in the group's shard has an id far above the others (seq 200 and more against 1 or
  // 2): in id order it would come last.
  EXPECT_GT(largest, put_order.back() + 128 * 100);
  for (Client* worker : {&on_b, &on_a}) {
    ASSERT_EQ(worker->call("watch fifo\r\n"), "WATCHING 2\r\n");
  }
  for (std::size_t i = 0; i < put_order.size(); ++i) {
    Client& worker = i % 2 == 0 ? on_b : on_a;  // both nodes, alternately
    EXPECT_EQ(worker.call("reserve-with-timeout 5\r\n", Millis{15000}),
              job_reply("RESERVED", put_order[i], "f"))
        << "reserve " << i;
    EXPECT_EQ(worker.call("delete " + std::to_string(put_order[i]) + "\r\n"), "DELETED\r\n");
  }
}

// A kick with a worker waiting on the node: the worker gets the best job of all kicked, not the
// first that one shard's kick made ready (each shard's kick answers on its own).
TEST_F(ClusterModeTest, AWorkerWaitingDuringAKickGetsTheBestJobKicked) {
  const auto prefix = unique_prefix(dir_);
  auto a = node(dir_, seeds_, prefix);
  ASSERT_EQ(a->start(), "");
  Client producer(a->port());
  ASSERT_EQ(producer.call("use kicked\r\n"), "USING kicked\r\n");
  std::map<std::uint64_t, std::uint64_t> by_priority;  // keyless puts: shards taken in turn
  for (const std::uint64_t priority : {5U, 1U, 3U}) {
    const auto id = inserted_id(producer.call("put " + std::to_string(priority) + " 100 10 1\r\n" +
                                              std::to_string(priority) + "\r\n"));
    ASSERT_TRUE(id);
    by_priority[priority] = *id;
  }
  std::set<std::uint64_t> shards;
  for (const auto& [priority, id] : by_priority) shards.insert(id % 128);
  ASSERT_EQ(shards.size(), 3U) << "the three jobs share a shard";
  Client worker(a->port());
  ASSERT_EQ(worker.call("watch kicked\r\n"), "WATCHING 2\r\n");
  ASSERT_TRUE(worker.send("reserve-with-timeout 10\r\n"));
  std::this_thread::sleep_for(200ms);  // the reserve waits
  EXPECT_EQ(producer.call("kick 3\r\n"), "KICKED 3\r\n");
  EXPECT_EQ(worker.reply(Millis{11000}), job_reply("RESERVED", by_priority[1], "1"));
}

// kick takes the first jobs of all shards: every shard lists what it would kick first, at most
// 1,000 a round, so a kick of more than that from one shard takes a second round.
TEST_F(ClusterModeTest, KickTakesTheEarliestDelayedJobsOfAllShards) {
  const auto prefix = unique_prefix(dir_);
  auto a = node(dir_, seeds_, prefix);
  ASSERT_EQ(a->start(), "");
  Client on_a(a->port());
  ASSERT_EQ(on_a.call("use many\r\n"), "USING many\r\n");
  std::vector<std::uint64_t> grouped;  // one shard, due in the order put
  for (int i = 0; i < 1050; ++i) {
    const auto id =
        inserted_id(on_a.call("putx 0 " + std::to_string(100000 + i) + " 10 1 group=g\r\nx\r\n"));
    ASSERT_TRUE(id);
    grouped.push_back(*id);
  }
  std::vector<std::uint64_t> early;  // keyless: other shards, due before every grouped job
  for (int i = 0; i < 5; ++i) {
    const auto id =
        inserted_id(on_a.call("putx 0 " + std::to_string(50000 + i) + " 10 1\r\ny\r\n"));
    ASSERT_TRUE(id);
    early.push_back(*id);
  }
  EXPECT_EQ(on_a.call("kick 1010\r\n", Millis{15000}), "KICKED 1010\r\n");
  const Yaml tube = parse_yaml(on_a.call("stats-tube many\r\n"));
  EXPECT_EQ(tube["current-jobs-ready"], "1010");
  EXPECT_EQ(tube["current-jobs-delayed"], "45");
  auto state = [&](std::uint64_t id) {
    return parse_yaml(on_a.call("stats-job " + std::to_string(id) + "\r\n"))["state"];
  };
  for (const auto id : early) EXPECT_EQ(state(id), "ready") << id;
  EXPECT_EQ(state(grouped[0]), "ready");
  EXPECT_EQ(state(grouped[1004]), "ready");
  EXPECT_EQ(state(grouped[1005]), "delayed");
  EXPECT_EQ(state(grouped[1049]), "delayed");
  EXPECT_EQ(on_a.call("kick 100\r\n", Millis{15000}), "KICKED 45\r\n");
}

// peek-delayed and kick read every shard in calls across slots, each shard's walk of its timers
// up to the tube's delayed jobs bounded; a shard where that walk is longer is asked by a call of
// its own. Two shards, each holding about 150 timers of another tube before the one of "late":
// both walks are too long to share a call, and every answer is still right.
TEST_F(ClusterModeTest, PeekDelayedAndKickFindAJobBehindManyTimersOfAnotherTube) {
  const auto prefix = unique_prefix(dir_);
  ServerProcess server(dir_.path(),
                       {"--redis", seeds_, "--redis-prefix", prefix, "--redis-shards", "2"});
  ASSERT_EQ(server.start(), "");
  Client c(server.port());
  ASSERT_EQ(c.call("use early\r\n"), "USING early\r\n");
  std::optional<std::uint64_t> first_early;
  for (int i = 0; i < 300; ++i) {
    const auto id = inserted_id(c.call("put 0 " + std::to_string(1000 + i) + " 10 1\r\ne\r\n"));
    ASSERT_TRUE(id);
    if (!first_early) first_early = id;
  }
  ASSERT_EQ(c.call("use late\r\n"), "USING late\r\n");
  const auto late = inserted_id(c.call("put 0 5000 10 1\r\nl\r\n"));
  ASSERT_TRUE(late);
  EXPECT_EQ(c.call("peek-delayed\r\n", Millis{15000}), job_reply("FOUND", *late, "l"));
  EXPECT_EQ(c.call("kick 5\r\n", Millis{15000}), "KICKED 1\r\n");
  EXPECT_EQ(c.call("peek-ready\r\n", Millis{15000}), job_reply("FOUND", *late, "l"));
  EXPECT_EQ(c.call("peek-delayed\r\n", Millis{15000}), "NOT_FOUND\r\n");
  ASSERT_EQ(c.call("use early\r\n"), "USING early\r\n");
  EXPECT_EQ(c.call("peek-delayed\r\n", Millis{15000}), job_reply("FOUND", *first_early, "e"));
  EXPECT_EQ(c.call("kick 200\r\n", Millis{15000}), "KICKED 200\r\n");
  EXPECT_EQ(parse_yaml(c.call("stats-tube early\r\n", Millis{15000}))["current-jobs-delayed"],
            "100");
}

// A process's resident memory in KiB (VmRSS), -1 if it cannot be read. It tells nothing of a
// server built with AddressSanitizer, which keeps freed memory aside (its quarantine).
#if defined(__SANITIZE_ADDRESS__)
constexpr bool kRssTellsLeaks = false;
#else
constexpr bool kRssTellsLeaks = true;
#endif
std::int64_t rss_kib(pid_t pid) {
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::stoll(line.substr(6));
  }
  return -1;
}

// A worker's connection holds nothing for the jobs it took: 20,000 jobs put, reserved and
// deleted over one connection (a hundred of each command at a time) leave the node's memory
// where the first 2,000 left it. A node that kept each answered reserve until the connection
// closed grew by about 270 bytes a job (5 MiB here).
TEST_F(ClusterModeTest, AWorkersConnectionKeepsNothingForTheJobsItTook) {
  if (!kRssTellsLeaks) GTEST_SKIP() << "a sanitizer build's memory does not tell a leak";
  auto a = node(dir_, seeds_, unique_prefix(dir_));
  ASSERT_EQ(a->start(), "");
  Client worker(a->port());
  constexpr int kBatch = 100;
  const auto work = [&](int jobs) {
    for (int done = 0; done < jobs; done += kBatch) {
      std::string puts;
      for (int i = 0; i < kBatch; ++i) puts += put_command("x", 0, 0, 60);
      ASSERT_TRUE(worker.send(puts));
      for (int i = 0; i < kBatch; ++i) ASSERT_TRUE(inserted_id(worker.reply(Millis{15000})));
      std::string reserves;
      for (int i = 0; i < kBatch; ++i) reserves += "reserve-with-timeout 5\r\n";
      ASSERT_TRUE(worker.send(reserves));
      std::string deletes;
      for (int i = 0; i < kBatch; ++i) {
        const std::string reply = worker.reply(Millis{15000});
        ASSERT_EQ(reply.rfind("RESERVED ", 0), 0U) << reply;
        deletes += "delete " + std::to_string(std::stoull(reply.substr(9))) + "\r\n";
      }
      ASSERT_TRUE(worker.send(deletes));
      for (int i = 0; i < kBatch; ++i) ASSERT_EQ(worker.reply(Millis{15000}), "DELETED\r\n");
    }
  };
  ASSERT_NO_FATAL_FAILURE(work(2000));
  const std::int64_t before = rss_kib(a->pid());
  ASSERT_NO_FATAL_FAILURE(work(20000));
  const std::int64_t after = rss_kib(a->pid());
  ASSERT_GT(before, 0);
  EXPECT_LT(after - before, 2048) << "KiB grown over 20,000 jobs: " << before << " -> " << after;
}

// Nor does a node keep something for every tube it ever saw: 1,000 tubes used, watched and
// left by one client at a time leave its memory where 1,000 others left it, once a look at the
// shards (every 5 s) has passed. A node that kept what it knew of each tube's best job in each
// shard grew by about 4 KiB a tube.
TEST_F(ClusterModeTest, ANodeKeepsNothingForTubesNobodyUsesAnyMore) {
  if (!kRssTellsLeaks) GTEST_SKIP() << "a sanitizer build's memory does not tell a leak";
  auto a = node(dir_, seeds_, unique_prefix(dir_));
  ASSERT_EQ(a->start(), "");
  Client client(a->port());
  const auto round = [&](const std::string& name) {
    for (int i = 0; i < 1000; ++i) {
      const std::string tube = name + std::to_string(i);
      ASSERT_TRUE(client.send("use " + tube + "\r\n" + put_command("x", 0, 0, 60) + "watch " +
                              tube + "\r\nreserve-with-timeout 5\r\n"));
      ASSERT_EQ(client.reply(), "USING " + tube + "\r\n");
      ASSERT_TRUE(inserted_id(client.reply()));
      ASSERT_EQ(client.reply(), "WATCHING 2\r\n");
      const std::string reserved = client.reply(Millis{15000});
      ASSERT_EQ(reserved.rfind("RESERVED ", 0), 0U) << reserved;
      ASSERT_EQ(client.call("delete " + std::to_string(std::stoull(reserved.substr(9))) +
                            "\r\nignore " + tube + "\r\nuse default\r\n"),
                "DELETED\r\n");
      ASSERT_EQ(client.reply(), "WATCHING 1\r\n");
      ASSERT_EQ(client.reply(), "USING default\r\n");
    }
    std::this_thread::sleep_for(6s);
  };
  ASSERT_NO_FATAL_FAILURE(round("first-"));
  const std::int64_t before = rss_kib(a->pid());
  ASSERT_NO_FATAL_FAILURE(round("second-"));
  const std::int64_t after = rss_kib(a->pid());
  ASSERT_GT(before, 0);
  EXPECT_LT(after - before, 2048) << "KiB grown over 1,000 tubes: " << before << " -> " << after;
}

// One node delivers a webhook tube's jobs (so its rate and concurrency hold for the cluster):
// the owner of the shard the tube's name hashes to. When that node dies, the deliveries move
// with the shard's lease to a live node.
TEST_F(ClusterModeTest, AWebhooksDeliveriesMoveToALiveNodeWhenItsNodeDies) {
  Receiver receiver;
  const auto prefix = unique_prefix(dir_);
  auto a = node(dir_, seeds_, prefix);
  ASSERT_EQ(a->start(), "");
  // Alone, `a` owns every shard, and so the tube's delivery.
  Client http(a->http_port());
  const std::string hook = R"({"url":"http://127.0.0.1:)" + std::to_string(receiver.port()) +
                           R"(/hook","concurrency":1})";
  ASSERT_TRUE(http.send("PUT /v1/tubes/hooked/webhook HTTP/1.1\r\nHost: x\r\nContent-Length: " +
                        std::to_string(hook.size()) + "\r\n\r\n" + hook));
  ASSERT_EQ(http.read_line().value_or("<none>"), "HTTP/1.1 200 OK\r\n");
  Client producer(a->port());
  ASSERT_EQ(producer.call("use hooked\r\n"), "USING hooked\r\n");
  const auto first = inserted_id(producer.call("put 0 0 30 5\r\nfirst\r\n"));
  ASSERT_TRUE(first);
  const auto delivered = [&](std::uint64_t id, std::chrono::seconds within) {
    const auto give_up = Clock::now() + within;
    while (Clock::now() < give_up) {
      for (const Received& request : receiver.requests()) {
        if (request.header("delayq-job-id") == std::to_string(id)) return true;
      }
      std::this_thread::sleep_for(50ms);
    }
    return false;
  };
  ASSERT_TRUE(delivered(*first, 10s)) << "the only node did not deliver";
  // `b` joins and takes half the shards; the tube's may move to it or stay. Then `a` dies: its
  // shards, that one among them if it stayed, go to `b` once their leases run out.
  auto b = node(dir_, seeds_, prefix);
  ASSERT_EQ(b->start(), "");
  std::this_thread::sleep_for(2500ms);  // the nodes share the shards out
  a->kill9();
  Client on_b(b->port());
  ASSERT_EQ(on_b.call("use hooked\r\n"), "USING hooked\r\n");
  const auto second = inserted_id(on_b.call("put 0 0 30 6\r\nsecond\r\n"));
  ASSERT_TRUE(second);
  // The lease is 5 s, renewed and taken every third of it; 5 s more for a loaded machine.
  EXPECT_TRUE(delivered(*second, 12s)) << "nobody delivers the tube after its node died";
}

// A node's count of waiting reserves (dq:waiting, which `stats` sums over the live nodes) goes
// when the node dies: the other deletes it once the dead node's lease has lapsed.
TEST_F(ClusterModeTest, ADeadNodesCountOfWaitingReservesIsDeleted) {
  ASSERT_NO_FATAL_FAILURE(start_two_nodes());
  const std::string port =
      seeds_.substr(seeds_.find(':') + 1, seeds_.find(',') - seeds_.find(':') - 1);
  const auto counts = [&] {
    return read_line_of_command("redis-cli -c -p " + port + " hvals " + unique_prefix(dir_) +
                                ":waiting");
  };
  ASSERT_TRUE(on_a_->send("reserve-with-timeout 60\r\n"));
  const auto said = Clock::now() + 5s;
  while (counts() != "1" && Clock::now() < said) std::this_thread::sleep_for(50ms);
  ASSERT_EQ(counts(), "1") << "the waiting reserve was not counted";
  a_->kill9();
  // The lease is 5 s, the other's heartbeat comes every third of it; 5 s more for a loaded
  // machine.
  const auto gone = Clock::now() + 12s;
  while (!counts().empty() && Clock::now() < gone) std::this_thread::sleep_for(100ms);
  EXPECT_EQ(counts(), "") << "the dead node's count is still there";
}

// The body of a RESERVED reply ("RESERVED <id> <bytes>\r\n<body>\r\n").
std::string body_of(const std::string& reply) {
  const auto from = reply.find("\r\n") + 2;
  return reply.substr(from, reply.size() - from - 2);
}

// Group concurrency holds across nodes: a tube with flow control lives in one shard, whose
// scripts count each group's reservations, so workers on both nodes never hold two jobs of a
// group. A node killed with a job reserved frees its group's slot once the reservation lapses,
// and the counts end exact.
TEST_F(ClusterModeTest, GroupConcurrencyHoldsAcrossNodesAndAKilledNodesSlotIsFreedAtItsTtr) {
  ASSERT_NO_FATAL_FAILURE(start_two_nodes());
  const std::uint64_t seed = test_seed();
  std::mt19937_64 random(seed);
  Client& on_a = *on_a_;
  Client& on_b = *on_b_;
  ASSERT_EQ(on_a.call("flow-tube fc concurrency=1\r\n"), "FLOW 1 0 0/1000 1\r\n");
  // B may not have heard of the settings yet: its puts reach the tube's shard all the same.
  for (Client* c : {&on_a, &on_b}) ASSERT_EQ(c->call("use fc\r\n"), "USING fc\r\n");
  constexpr int kGroups = 4;
  constexpr int kEach = 10;
  for (int i = 0; i < kEach; ++i) {
    for (int g = 0; g < kGroups; ++g) {
      Client& producer = (i + g) % 2 == 0 ? on_a : on_b;
      const std::string group = "g" + std::to_string(g);
      ASSERT_TRUE(
          inserted_id(producer.call("putx 0 0 60 2 group=" + group + "\r\n" + group + "\r\n")));
    }
  }
  // Four workers, two on each node, each holding at most one job at a time.
  std::vector<std::unique_ptr<Client>> workers;
  for (int w = 0; w < 4; ++w) {
    workers.push_back(std::make_unique<Client>(w < 2 ? a_->port() : b_->port()));
    ASSERT_EQ(workers.back()->call("watch fc\r\n"), "WATCHING 2\r\n");
  }
  std::vector<std::optional<std::pair<std::uint64_t, std::string>>> holding(workers.size());
  std::set<std::string> held;
  int deleted = 0;
  const auto give_up = Clock::now() + 60s;
  while (deleted < kGroups * kEach && Clock::now() < give_up) {
    for (std::size_t w = 0; w < workers.size(); ++w) {
      if (holding[w]) continue;
      const std::string reply = workers[w]->call("reserve-with-timeout 0\r\n");
      if (reply.rfind("RESERVED ", 0) != 0) continue;
      const std::string group = body_of(reply);
      EXPECT_TRUE(held.insert(group).second)
          << "two jobs of group " << group << " reserved at once (seed " << seed << ")";
      holding[w] = {std::stoull(reply.substr(9)), group};
    }
    std::vector<std::size_t> busy;
    for (std::size_t w = 0; w < workers.size(); ++w) {
      if (holding[w]) busy.push_back(w);
    }
    if (busy.empty()) continue;
    const std::size_t w = busy[random() % busy.size()];
    ASSERT_EQ(workers[w]->call("delete " + std::to_string(holding[w]->first) + "\r\n"),
              "DELETED\r\n");
    held.erase(holding[w]->second);
    holding[w].reset();
    ++deleted;
  }
  ASSERT_EQ(deleted, kGroups * kEach);

  // A job of group k reserved through B, with a TTR of 2 s, and B killed.
  for (int i = 0; i < 2; ++i) {
    ASSERT_TRUE(inserted_id(on_a.call("putx 0 0 2 1 group=k\r\nk\r\n")));
  }
  ASSERT_EQ(on_b.call("watch fc\r\n"), "WATCHING 2\r\n");
  ASSERT_EQ(on_b.call("reserve-with-timeout 5\r\n").rfind("RESERVED ", 0), 0U);
  ASSERT_EQ(b_->kill9(), "killed by signal 9");
  ASSERT_EQ(on_a.call("watch fc\r\n"), "WATCHING 2\r\n");
  EXPECT_EQ(on_a.call("reserve-with-timeout 0\r\n"), "TIMED_OUT\r\n") << "k's slot is taken";
  // Its reservation lapses (at 2 s, or when A holds the shard after B's lease, 5 s): then
  // one k job, and the other only once that one is deleted.
  std::vector<std::uint64_t> taken;
  for (int i = 0; i < 2; ++i) {
    const std::string reply = on_a.call("reserve-with-timeout 20\r\n", Millis{25000});
    ASSERT_EQ(reply.rfind("RESERVED ", 0), 0U) << reply;
    EXPECT_EQ(body_of(reply), "k");
    taken.push_back(std::stoull(reply.substr(9)));
    if (i == 0) {
      EXPECT_EQ(on_a.call("reserve-with-timeout 0\r\n"), "TIMED_OUT\r\n");
    }
    ASSERT_EQ(on_a.call("delete " + std::to_string(taken.back()) + "\r\n"), "DELETED\r\n");
  }
  EXPECT_NE(taken[0], taken[1]);
  auto stats = parse_yaml(on_a.call("stats-tube fc\r\n"));
  EXPECT_EQ(stats["current-jobs-ready"], "0");
  EXPECT_EQ(stats["current-jobs-reserved"], "0");
  EXPECT_EQ(stats["groups-held"], "0");
  EXPECT_EQ(stats["groups-ready"], "0");
  EXPECT_EQ(stats["group-concurrency"], "1");
}

// Two nodes share the shards out; `jobs` jobs go in through the first, due from 1.5 s on,
// `spacing_ms` apart; then `end` ends the first node and the second takes every job. None may
// be lost, reserved twice or early. Returns the latest a job came, in ms after its due time.
std::int64_t latest_after_a_node_ends(const TempDir& dir, const std::string& seeds, int jobs,
                                      int spacing_ms,
                                      const std::function<void(ServerProcess&)>& end) {
  const auto prefix = unique_prefix(dir);
  auto a = node(dir, seeds, prefix);
  auto b = node(dir, seeds, prefix);
  EXPECT_EQ(a->start(), "");
  EXPECT_EQ(b->start(), "");
  std::this_thread::sleep_for(2500ms);  // the nodes share the shards out
  Client producer(a->port());
  std::map<std::uint64_t, std::int64_t> due;  // id -> due, Unix ms
  for (int i = 0; i < jobs; ++i) {
    const std::int64_t delay = 1500 + spacing_ms * i;
    const auto before = unix_ms();
    const auto id =
        inserted_id(producer.call("putx 0 " + std::to_string(delay) + " 30 1\r\nx\r\n"));
    EXPECT_TRUE(id) << i;
    if (id) due[*id] = before + delay;
  }
  end(*a);
  Client worker(b->port());
  std::map<std::uint64_t, std::int64_t> got;  // id -> when reserved, Unix ms
  const auto give_up = Clock::now() + 20s;
  while (got.size() < due.size() && Clock::now() < give_up) {
    if (const auto id = take_one(worker, 1)) {
      EXPECT_TRUE(got.emplace(*id, unix_ms()).second) << "job " << *id << " reserved twice";
    }
  }
  EXPECT_EQ(got.size(), due.size()) << "jobs lost";
  std::int64_t latest = 0;
  for (const auto& [id, at] : got) {
    EXPECT_TRUE(due.contains(id)) << id;
    EXPECT_GE(at, due[id]) << "job " << id << " fired early";
    latest = std::max(latest, at - due[id]);
  }
  return latest;
}

// The nodes are killed in turn while a worker on the other takes every run of a one-second
// schedule: whichever node stepped it, or held its runs' shards, the other takes over (once the
// lease runs out, so the runs of that gap come late, by the misfire rule "all") and no instant
// is lost or doubled.
TEST_F(ClusterModeTest, KillingEitherNodeDuringASchedulesRunsLosesNoRunAndDoublesNone) {
  ASSERT_NO_FATAL_FAILURE(start_two_nodes());
  const std::uint64_t seed = test_seed();
  std::mt19937_64 random(seed);
  {
    front::http::Client http("127.0.0.1", a_->http_port());
    auto made =
        http.request("PUT", "/v1/schedules/tick",
                     R"({"tube":"ticks","every":"1s","ttr":2,"misfire":"all","max_lateness":"1h"})",
                     Millis{4000});
    ASSERT_TRUE(made.is_ok()) << made.status().to_string();
    ASSERT_EQ(made.value().status, 201U) << made.value().body;
  }
  RunCounter worker{.tube = "ticks"};
  constexpr int kKills = 4;
  for (int round = 0; round < kKills; ++round) {
    ServerProcess& victim = round % 2 == 0 ? *a_ : *b_;
    ServerProcess& survivor = round % 2 == 0 ? *b_ : *a_;
    front::http::Client http("127.0.0.1", survivor.http_port());
    // Work for 1 to 2.5 s, kill -9, work 2 s more through the other, start it again.
    for (const Millis work :
         {Millis{1000 + static_cast<std::int64_t>(random() % 1500)}, Millis{2000}}) {
      const auto until = std::chrono::steady_clock::now() + work;
      while (std::chrono::steady_clock::now() < until) ASSERT_TRUE(worker.take(http));
      if (victim.running()) {
        ASSERT_EQ(victim.kill9(), "killed by signal 9");
      }
    }
    ASSERT_EQ(victim.start(), "");
  }
  front::http::Client http("127.0.0.1", a_->http_port());
  ASSERT_NO_FATAL_FAILURE(worker.drain(http));
  worker.check(10);
}

TEST_F(ClusterModeTest, ADeadNodesShardsFireWithinTheLeaseNeverEarly) {
  const std::int64_t latest =
      latest_after_a_node_ends(dir_, seeds_, 100, 10, [](ServerProcess& a) { a.kill9(); });
  // The lease is 5 s; the survivor renews (and takes leases) every third of it; 5 s more for a
  // loaded machine (a sanitizer build, tests side by side).
  EXPECT_LE(latest, 5000 + 1700 + 5000) << "the dead node's shards fired too late";
}

// A node stopped with SIGTERM hands its leases back as it closes and leaves the live nodes:
// the other takes its shards at once, not when the leases (5 s) run out as after a crash.
TEST_F(ClusterModeTest, AStoppedNodesShardsFireAtOnceNeverEarly) {
  const std::int64_t latest = latest_after_a_node_ends(
      dir_, seeds_, 60, 0, [](ServerProcess& a) { EXPECT_EQ(a.stop(), "exited 0"); });
  // Within a few tens of ms here; 3 s for a loaded machine is still well inside the lease.
  EXPECT_LT(latest, 3000) << "the stopped node's shards waited for their leases";
}

// --- a cluster of the test's own

class ScriptCluster {
 public:
  explicit ScriptCluster(std::filesystem::path dir) : dir_(std::move(dir)) {}
  ~ScriptCluster() { run("stop"); }
  std::string start() {
    if (run("start") != 0) return "scripts/redis-cluster.sh start failed";
    seeds_ = read_line_of(dir_ / "seeds");
    return seeds_.empty() ? "no seeds" : "";
  }
  [[nodiscard]] const std::string& seeds() const { return seeds_; }
  // Every node stopped (SIGTERM: Redis writes its AOF out), then started again from its files.
  std::string restart() {
    if (run("stop") != 0) return "scripts/redis-cluster.sh stop failed";
    if (run("restart") != 0) return "scripts/redis-cluster.sh restart failed";
    return "";
  }
  // The PID of the node that started as the first primary (redis-cli gives the first three
  // addresses the slots).
  [[nodiscard]] pid_t first_primary() const {
    return static_cast<pid_t>(std::stol(read_line_of(dir_ / "node0" / "redis.pid")));
  }
  [[nodiscard]] std::string first_primary_address() const {
    return seeds_.substr(0, seeds_.find(','));
  }
  // The PIDs of the replicas (the last three nodes the script started).
  [[nodiscard]] std::vector<pid_t> replicas() const {
    std::vector<pid_t> pids;
    for (int i = 3; i < 6; ++i) {
      const auto file = dir_ / ("node" + std::to_string(i)) / "redis.pid";
      pids.push_back(static_cast<pid_t>(std::stol(read_line_of(file))));
    }
    return pids;
  }

 private:
  int run(const std::string& action) {
    const std::string command = std::string(DELAYQ_REDIS_CLUSTER_SCRIPT) + " " + action + " " +
                                dir_.string() + (action == "start" ? " 3 1" : "") +
                                " >/dev/null 2>&1";
    return std::system(command.c_str());
  }
  std::filesystem::path dir_;
  std::string seeds_;
};

// A cluster of the test's own and one node on it, its keys under `prefix`; start() says what
// failed ("" when both run).
struct ClusterWithNode {
  TempDir dir;
  ScriptCluster cluster{dir.path() / "cluster"};
  std::unique_ptr<ServerProcess> server;
  std::string start(const std::string& prefix) {
    if (std::string failed = cluster.start(); !failed.empty()) return failed;
    server = node(dir, cluster.seeds(), prefix);
    return server->start();
  }
};

TEST(RedisFailoverTest, AKilledPrimaryFailsOverAndNoAnsweredPutIsLost) {
  ClusterWithNode own;
  ASSERT_EQ(own.start("failover"), "");
  ScriptCluster& cluster = own.cluster;
  const auto& server = own.server;
  Client producer(server->port());
  std::vector<std::uint64_t> inserted;
  int failed = 0;
  const auto start = Clock::now();
  std::optional<Clock::time_point> killed;
  Millis longest{0};  // the slowest put: one that waited out the failover
  Clock::time_point last_inserted;
  // Puts for 12 s; the first primary dies after 1 s (cluster-node-timeout is 2 s).
  while (Clock::now() - start < 12s) {
    if (!killed && Clock::now() - start > 1s) {
      ::kill(cluster.first_primary(), SIGKILL);
      killed = Clock::now();
    }
    const auto sent = Clock::now();
    const std::string reply = producer.call(put_command("job", 0, 3600), Millis{15000});
    longest = std::max(longest, std::chrono::duration_cast<Millis>(Clock::now() - sent));
    if (const auto id = inserted_id(reply)) {
      inserted.push_back(*id);
      last_inserted = Clock::now();
    } else {
      ++failed;
      ASSERT_TRUE(reply.rfind("INTERNAL_ERROR", 0) == 0) << reply;
    }
  }
  ASSERT_TRUE(killed);
  EXPECT_GT(inserted.size(), 100U);
  // Every put answered INSERTED survived: WAIT had a replica take it before the answer.
  Client checker(server->port());
  std::size_t found = 0;
  for (const auto id : inserted) {
    const std::string reply = checker.call("peek " + std::to_string(id) + "\r\n");
    if (reply.rfind("FOUND ", 0) == 0)
      ++found;
    else
      ADD_FAILURE() << "job " << id << " was answered INSERTED and is gone: " << reply;
  }
  EXPECT_EQ(found, inserted.size());
  // Service resumed: puts were answered again in the loop's last second, well after the
  // failover (node timeout 2 s, then the election). How long a put was held across it is
  // printed, not asserted: it is the election's time, which a loaded machine stretches.
  EXPECT_GT(last_inserted, start + 11s) << "no put was answered after the failover";
  std::printf("failover: %zu puts answered, %d failed, the slowest took %lld ms\n", inserted.size(),
              failed, static_cast<long long>(longest.count()));
}

// Replicas that stop answering (paused: still "online" to their primaries until the
// replication timeout) hold up no reserve and no firing, and writes wait for them only until a
// WAIT has seen none: a job due meanwhile fires on time, and puts are answered at once again.
TEST(RedisReplicaTest, StoppedReplicasHoldUpNeitherFiringsNorPutsForLong) {
  ClusterWithNode own;
  ASSERT_EQ(own.start("replicas"), "");
  ScriptCluster& cluster = own.cluster;
  const auto& server = own.server;
  Client producer(server->port());
  Client worker(server->port());
  ASSERT_EQ(worker.call("watch due\r\n"), "WATCHING 2\r\n");
  ASSERT_EQ(producer.call("use due\r\n"), "USING due\r\n");
  const auto sent = Clock::now();
  const auto due = inserted_id(producer.call(put_command("due in 2 s", 0, 2)));
  ASSERT_TRUE(due.has_value());
  ASSERT_TRUE(worker.send("reserve-with-timeout 10\r\n"));
  std::string got;
  Clock::time_point got_at;
  std::thread waiting([&] {
    got = worker.reply(Millis{15000});
    got_at = Clock::now();
  });
  // (No ASSERT until the thread is joined.)
  EXPECT_EQ(producer.call("use other\r\n"), "USING other\r\n");
  const std::vector<pid_t> replicas = cluster.replicas();
  for (const pid_t pid : replicas) EXPECT_EQ(::kill(pid, SIGSTOP), 0);
  // Puts, one at a time, for 4 s; then the job due meanwhile.
  int slow = 0;
  int puts = 0;
  while (Clock::now() - sent < 4s) {
    const auto before = Clock::now();
    EXPECT_TRUE(inserted_id(producer.call(put_command("p", 0, 3600), Millis{15000})));
    if (Clock::now() - before > 500ms) ++slow;
    ++puts;
  }
  waiting.join();
  const auto late = std::chrono::duration_cast<Millis>(got_at - sent - 2s);
  for (const pid_t pid : replicas) ::kill(pid, SIGCONT);
  EXPECT_EQ(got, job_reply("RESERVED", *due, "due in 2 s"));
  std::printf("stopped replicas: %d puts, %d of them over 500 ms; the due job came %lld ms late\n",
              puts, slow, static_cast<long long>(late.count()));
  // The first write to each of the 3 primaries waits out its WAIT (1 s); the rest do not (a
  // loaded machine may slow a few more).
  EXPECT_LE(slow, 6) << "puts kept waiting for the stopped replicas";
  EXPECT_GT(puts, 50) << "puts kept waiting for the stopped replicas";
  EXPECT_LT(late.count(), 900) << "the firing waited behind the writes' WAITs";
}

// Slots move from one primary to another (redis-cli --cluster reshard, which migrates keys in
// batches) while jobs are put, fire and are reserved: scripts of a shard caught half-moved get
// TRYAGAIN or ASK and are retried, and every job put comes out exactly once.
TEST(RedisReshardTest, JobsFlowWhileSlotsMigrate) {
  TempDir dir;
  ScriptCluster cluster(dir.path() / "cluster");
  ASSERT_EQ(cluster.start(), "");
  const std::string from = cluster.first_primary_address();
  const auto second = cluster.seeds().substr(from.size() + 1);
  const std::string to = second.substr(0, second.find(','));
  const auto id_of = [](const std::string& address) {
    return read_line_of_command("redis-cli -p " + address.substr(address.rfind(':') + 1) +
                                " cluster myid");
  };
  const std::string marker = (dir.path() / "resharded").string();
  const std::string reshard =
      "(redis-cli --cluster reshard " + from + " --cluster-from " + id_of(from) + " --cluster-to " +
      id_of(to) + " --cluster-slots 3000 --cluster-yes >" + (dir.path() / "reshard.log").string() +
      " 2>&1; echo $? >" + marker + ") &";
  auto server = node(dir, cluster.seeds(), "reshard");
  ASSERT_EQ(server->start(), "");
  Client producer(server->port());
  Client worker(server->port());
  std::set<std::uint64_t> put;
  std::set<std::uint64_t> got;
  ASSERT_EQ(std::system(reshard.c_str()), 0);
  const auto start = Clock::now();
  bool done = false;
  // Until the reshard ends, and 2 s more; at most 60 s.
  std::optional<Clock::time_point> ended;
  while (Clock::now() - start < 60s && (!ended || Clock::now() - *ended < 2s)) {
    if (!ended && std::filesystem::exists(marker)) ended = Clock::now();
    for (int i = 0; i < 10; ++i) {
      const auto id = inserted_id(
          producer.call("putx 0 " + std::to_string(i * 20) + " 60 1\r\nx\r\n", Millis{15000}));
      ASSERT_TRUE(id) << "a put failed during the reshard";
      put.insert(*id);
    }
    while (const auto id = take_one(worker, 0)) {
      EXPECT_TRUE(got.insert(*id).second) << "job " << *id << " came out twice";
    }
  }
  done = ended.has_value();
  ASSERT_TRUE(done) << "the reshard did not end within 60 s";
  EXPECT_EQ(read_line_of(marker), "0") << "redis-cli --cluster reshard failed";
  // What is left fires within a second.
  const auto drain_until = Clock::now() + 5s;
  while (got.size() < put.size() && Clock::now() < drain_until) {
    const auto id = take_one(worker, 1);
    if (id) {
      EXPECT_TRUE(got.insert(*id).second) << "job " << *id << " came out twice";
    }
  }
  EXPECT_EQ(got, put) << put.size() << " put, " << got.size() << " reserved";
  EXPECT_GT(put.size(), 100U);
  double redirected = 0;  // the node's calls met the moving slots
  for (const std::string reply :
       {"MOVED", "ASK", "TRYAGAIN", "CLUSTERDOWN", "LOADING", "READONLY"}) {
    const double count =
        metric_of(server->http_port(), "delayq_redis_redirections_total{reply=\"" + reply + "\"}");
    ASSERT_GE(count, 0) << reply << " is missing from /metrics";
    redirected += count;
  }
  EXPECT_GT(redirected, 0);
}

// A slot migration left half done at each of its steps (in redis-cli --cluster reshard's order):
// the shard whose slot it is may wait, every other shard's jobs come out, and once an operator
// ends it with `redis-cli --cluster fix` (which completes or rolls back), every job put before
// comes out once and puts go on.
enum class MigrationStep {
  kImporting,
  kMigrating,
  kSomeKeysMoved,
  kAllKeysMoved,
  kTargetOwns,
  kDone  // every primary told the target owns it
};

// A move of `slot` from the primary that serves it to another, as redis-cli --cluster reshard
// moves one, up to and including `last`: its primaries, and the first reply that was not OK
// ("" if none).
struct SlotMove {
  RedisServer* source = nullptr;
  RedisServer* target = nullptr;
  std::string failed;
};
SlotMove move_slot(RedisCluster& cluster, std::uint16_t slot, MigrationStep last) {
  SlotMove move;
  move.source = cluster.primary_of(slot);
  if (move.source == nullptr) return {.failed = "no primary serves the slot"};
  move.target = cluster.servers()[0].get() == move.source ? cluster.servers()[1].get()
                                                          : cluster.servers()[0].get();
  const std::string number = std::to_string(slot);
  const auto set = [&](RedisServer& at, const std::string& how, const RedisServer& whose) {
    const std::string reply = describe(
        call(at.port(), {"CLUSTER", "SETSLOT", number, how, RedisCluster::node_id(whose)}));
    if (reply != "OK" && move.failed.empty()) move.failed = "SETSLOT " + how + ": " + reply;
  };
  set(*move.target, "IMPORTING", *move.source);
  if (last >= MigrationStep::kMigrating) set(*move.source, "MIGRATING", *move.target);
  if (last >= MigrationStep::kSomeKeysMoved) {
    const auto keys = call(move.source->port(), {"CLUSTER", "GETKEYSINSLOT", number, "1000"});
    if (keys.elements.size() < 2) return {move.source, move.target, "fewer than 2 keys"};
    const std::size_t moving =
        last == MigrationStep::kSomeKeysMoved ? keys.elements.size() / 2 : keys.elements.size();
    delayq::redis::Command migrate{
        "MIGRATE", "127.0.0.1", std::to_string(move.target->port()), "", "0", "5000", "KEYS"};
    for (std::size_t i = 0; i < moving; ++i) migrate.arg(keys.elements[i].str);
    const std::string reply = describe(call(move.source->port(), migrate));
    if (reply != "OK" && move.failed.empty()) move.failed = "MIGRATE: " + reply;
  }
  if (last >= MigrationStep::kTargetOwns) set(*move.target, "NODE", *move.target);
  if (last >= MigrationStep::kDone) {
    for (const auto& other : cluster.servers()) {
      if (other.get() != move.target) set(*other, "NODE", *move.target);
    }
  }
  return move;
}

class RedisHalfMigrationTest : public ::testing::TestWithParam<MigrationStep> {};

TEST_P(RedisHalfMigrationTest, AnInterruptedSlotMigrationLosesNoJobOnceFixed) {
  const MigrationStep step = GetParam();
  TempDir dir;
  RedisCluster cluster(dir.path() / "cluster", 3, 0);
  ASSERT_EQ(cluster.start(), "");
  auto server = node(dir, cluster.seeds(), "half");
  ASSERT_EQ(server->start(), "");
  Client producer(server->port());
  std::set<std::uint64_t> put;
  for (int i = 0; i < 256; ++i) {  // two a shard, due in 2 s
    const auto id = inserted_id(producer.call("put 0 2 60 1\r\nx\r\n"));
    ASSERT_TRUE(id);
    put.insert(*id);
  }
  const std::string shard = std::to_string(*put.begin() % 128);
  const SlotMove move =
      move_slot(cluster, delayq::redis::key_slot("half:{" + shard + "}:seq"), step);
  ASSERT_EQ(move.failed, "");
  RedisServer* target = move.target;
  // Left so while the jobs fall due: those of every other shard come out.
  Client worker(server->port());
  std::set<std::uint64_t> got;
  const auto take = [&](int seconds) {
    if (const auto id = take_one(worker, seconds)) {
      EXPECT_TRUE(got.insert(*id).second) << "job " << *id << " came out twice";
    }
  };
  // Due 2 s after their puts; on a loaded machine they may come out later, so this waits for
  // them (up to 30 s), not for a time.
  const auto others_out = [&] {
    return std::all_of(put.begin(), put.end(), [&](std::uint64_t id) {
      return got.contains(id) || std::to_string(id % 128) == shard;
    });
  };
  const auto others_by = Clock::now() + 30s;
  while (!others_out() && Clock::now() < others_by) take(1);
  for (const auto id : put) {
    EXPECT_TRUE(got.contains(id) || std::to_string(id % 128) == shard)
        << "job " << id << " of another shard waited for the migration";
  }
  // An operator ends it (completing it, or rolling it back). Run again if it says it could not,
  // as an operator would: on a loaded machine the nodes may not yet agree on the slot's state.
  const auto log = dir.path() / "fix.log";
  const std::string fix =
      "redis-cli --cluster fix " + target->address() + " --cluster-yes >>" + log.string() + " 2>&1";
  int fixed = -1;
  for (int attempt = 0; attempt < 5 && fixed != 0; ++attempt) {
    if (attempt > 0) std::this_thread::sleep_for(1s);
    fixed = std::system(fix.c_str());
  }
  ASSERT_EQ(fixed, 0) << [&] {
    std::ifstream in(log);
    return std::string(std::istreambuf_iterator<char>(in), {});
  }();
  const auto give_up = Clock::now() + 30s;
  while (got.size() < put.size() && Clock::now() < give_up) take(1);
  EXPECT_EQ(got, put) << put.size() << " put, " << got.size() << " reserved";
  EXPECT_TRUE(inserted_id(producer.call(put_command("after"), Millis{15000})));
}

std::string step_name(const ::testing::TestParamInfo<MigrationStep>& step) {
  static const char* const kNames[] = {"Importing", "Migrating", "SomeKeysMoved", "AllKeysMoved",
                                       "TargetOwns"};
  return kNames[static_cast<int>(step.param)];
}

INSTANTIATE_TEST_SUITE_P(EachStep, RedisHalfMigrationTest,
                         ::testing::Values(MigrationStep::kImporting, MigrationStep::kMigrating,
                                           MigrationStep::kSomeKeysMoved,
                                           MigrationStep::kAllKeysMoved,
                                           MigrationStep::kTargetOwns),
                         step_name);

// The stats read many shards in one call (of the shards of one primary, by the node's map of
// the slots), until the replies hold so many rows; the shards left go in the next call. Jobs of
// 40 tubes, one put a turn, so that each shard holds two tubes: more rows than one call reads.
// Then a slot moved whole to another primary under the node, whose map is behind: a shard its
// call's primary no longer serves is asked by a call of its own, which follows the redirection.
// Every job is counted each time.
TEST(RedisReadAcrossSlotsTest, StatsCountEveryJobAlsoRightAfterASlotMovedUnderTheNode) {
  TempDir dir;
  RedisCluster cluster(dir.path() / "cluster", 3, 0);
  ASSERT_EQ(cluster.start(), "");
  auto server = node(dir, cluster.seeds(), "moved");
  ASSERT_EQ(server->start(), "");
  Client producer(server->port());
  for (int i = 0; i < 256; ++i) {
    ASSERT_EQ(producer.call("use t" + std::to_string(i % 40) + "\r\n"),
              "USING t" + std::to_string(i % 40) + "\r\n");
    ASSERT_TRUE(inserted_id(producer.call("put 0 0 60 1\r\nx\r\n")));
  }
  Client admin(server->port());
  const auto counted = [&] {
    EXPECT_EQ(parse_yaml(admin.call("stats\r\n", Millis{15000}))["current-jobs-ready"], "256");
    EXPECT_EQ(parse_yaml(admin.call("stats-tube t0\r\n", Millis{15000}))["current-jobs-ready"],
              "7");  // 0, 40, ..., 240
    // "---\n- default\n- t0\n" ... "- t39\n": 4 + 10 + 10 x 5 + 30 x 6 bytes.
    EXPECT_EQ(admin.call("list-tubes\r\n", Millis{15000}).substr(0, 6), "OK 244");
  };
  counted();
  ASSERT_EQ(
      move_slot(cluster, delayq::redis::key_slot("moved:{14}:seq"), MigrationStep::kDone).failed,
      "");
  counted();
}

// The whole cluster stops and starts again from its AOF files under a running node: every job
// is still there, and the delayed ones fire when due.
TEST(RedisRestartTest, AWholeClusterRestartedFromItsAofLosesNoJob) {
  ClusterWithNode own;
  ASSERT_EQ(own.start("restart"), "");
  ScriptCluster& cluster = own.cluster;
  const auto& server = own.server;
  Client producer(server->port());
  std::set<std::uint64_t> put;
  for (int i = 0; i < 300; ++i) {
    // A third ready now, the rest due 4 to 6 s from now.
    const int delay = i % 3 == 0 ? 0 : 4000 + 7 * i;
    const auto id =
        inserted_id(producer.call("putx 0 " + std::to_string(delay) + " 60 1\r\nx\r\n"));
    ASSERT_TRUE(id);
    put.insert(*id);
  }
  ASSERT_EQ(cluster.restart(), "");
  Client worker(server->port());
  std::set<std::uint64_t> got;
  const auto give_up = Clock::now() + 30s;
  while (got.size() < put.size() && Clock::now() < give_up) {
    const auto id = take_one(worker, 1);
    if (id) {
      EXPECT_TRUE(got.insert(*id).second) << "job " << *id << " came out twice";
    }
  }
  EXPECT_EQ(got, put) << put.size() << " put, " << got.size() << " reserved after the restart";
}

// GET <path> over a connection of its own; the status line ("HTTP/1.1 200 OK\r\n").
std::string http_status(std::uint16_t port, const std::string& path) {
  Client http(port);
  if (!http.send("GET " + path + " HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")) return "";
  return http.read_line(Millis{15000}).value_or("");
}

bool wait_for_status(std::uint16_t port, const std::string& path, const std::string& code) {
  const auto give_up = Clock::now() + 15s;
  while (Clock::now() < give_up) {
    if (http_status(port, path).find(" " + code + " ") != std::string::npos) return true;
    std::this_thread::sleep_for(100ms);
  }
  return false;
}

// While Redis is out of reach the node says it is not ready, and puts fail with an error, not
// a timeout; once Redis is back, it serves again by itself.
// One node over a Redis of its own, which the tests make unreachable.
class RedisDownTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(redis_.start(), "");
    server_ = node(dir_, redis_.address(), "down");
    ASSERT_EQ(server_->start(), "");
  }
  // `reserve-with-timeout seconds` answers TIMED_OUT within `within` of being sent.
  void expect_timed_out(Client& worker, int seconds, Millis within) {
    const auto asked = std::chrono::steady_clock::now();
    EXPECT_EQ(
        worker.call("reserve-with-timeout " + std::to_string(seconds) + "\r\n", Millis{20000}),
        "TIMED_OUT\r\n");
    EXPECT_LT(std::chrono::steady_clock::now() - asked, within);
  }
  TempDir dir_;
  RedisServer redis_{dir_.path() / "redis"};
  std::unique_ptr<ServerProcess> server_;
};

TEST_F(RedisDownTest, ANodeIsNotReadyWhileRedisIsOutOfReachAndRecoversByItself) {
  EXPECT_TRUE(wait_for_status(server_->http_port(), "/readyz", "200"));
  redis_.kill9();
  EXPECT_TRUE(wait_for_status(server_->http_port(), "/readyz", "503"));
  // A reserve's timeout is kept, not its calls' 10 s of retries (this took about 15 s once, and
  // a grace of 1 s after the timeout later): with Redis out of reach, at the timeout.
  Client worker(server_->port());
  expect_timed_out(worker, 2, std::chrono::seconds(4));
  Client producer(server_->port());
  EXPECT_EQ(producer.call(put_command("x"), Millis{20000}).rfind("INTERNAL_ERROR", 0), 0U);
  ASSERT_EQ(redis_.start(), "");  // the same port, empty
  EXPECT_TRUE(wait_for_status(server_->http_port(), "/readyz", "200"));
  EXPECT_TRUE(inserted_id(producer.call(put_command("back"))));
}

// A Redis that stops reading (SIGSTOP: its connections stay open, nothing is answered): once the
// node knows (no heartbeat answered for half a lease, /readyz 503), a reserve answers TIMED_OUT at
// its timeout and a put an error within the 10 s a request is given; once Redis goes on, the
// delayed job put before comes when due and puts pass again.
TEST_F(RedisDownTest, AStoppedRedisTimesReservesOutOnTimeAndLosesNoAcknowledgedPut) {
  Client producer(server_->port());
  const auto delayed = inserted_id(producer.call("put 0 5 60 7\r\ndelayed\r\n"));
  ASSERT_TRUE(delayed);
  Client worker(server_->port());
  redis_.pause();
  // In the outage's first second, before the heartbeat tells the node: its calls go unanswered,
  // and the reserve answers once Redis has been silent a while (not a second later).
  expect_timed_out(worker, 1, Millis{1300});
  EXPECT_TRUE(wait_for_status(server_->http_port(), "/readyz", "503"));
  expect_timed_out(worker, 1, Millis{1500});
  // Into a tube of its own: a put answered with an error may still have run, once Redis reads
  // what was sent (its answer lost, as redis-mode.md says).
  Client other(server_->port());
  ASSERT_EQ(other.call("use other\r\n"), "USING other\r\n");
  const auto put_at = std::chrono::steady_clock::now();
  EXPECT_EQ(other.call(put_command("x"), Millis{20000}).rfind("INTERNAL_ERROR", 0), 0U);
  EXPECT_LT(std::chrono::steady_clock::now() - put_at, std::chrono::seconds(11));
  redis_.resume();
  const std::string got = worker.call("reserve-with-timeout 10\r\n", Millis{15000});
  EXPECT_EQ(got.rfind("RESERVED " + std::to_string(*delayed) + " ", 0), 0U) << got;
  EXPECT_TRUE(inserted_id(producer.call(put_command("back"), Millis{15000})));
}

// A firing that got no answer within its 10 s (Redis stopped while it was on its way) may have
// run when Redis goes on, and handed its job to the reserve waiting here, which never got it.
// The node asks what became of the call once Redis answers: the job is given back at once and
// the reserve, still waiting, gets it, not when its TTR (2 minutes) lapses.
TEST_F(RedisDownTest, AFiringThatGotNoAnswerInTimeGivesBackWhatItHandedAWaiterOnceRedisIsBack) {
  Client worker(server_->port());
  ASSERT_EQ(worker.call("watch due\r\n"), "WATCHING 2\r\n");
  ASSERT_TRUE(worker.send("reserve-with-timeout 45\r\n"));
  Client producer(server_->port());
  ASSERT_EQ(producer.call("use due\r\n"), "USING due\r\n");
  const auto id = inserted_id(producer.call("put 0 2 120 4\r\nlate\r\n"));
  ASSERT_TRUE(id);
  std::this_thread::sleep_for(1s);
  redis_.pause();  // the firing at 2 s waits, then fails at 12 s
  std::this_thread::sleep_for(12500ms);
  redis_.resume();
  const auto resumed = Clock::now();
  const std::string reserved = worker.read_line(Millis{40000}).value_or("");
  EXPECT_EQ(reserved.rfind("RESERVED " + std::to_string(*id) + " ", 0), 0U) << reserved;
  EXPECT_LT(Clock::now() - resumed, 10s);
  EXPECT_GE(metric_of(server_->http_port(), "delayq_redis_lost_calls_total{found=\"ran\"}") +
                metric_of(server_->http_port(), "delayq_redis_lost_calls_total{found=\"void\"}"),
            1);
}

// Answers lost on their way back: one node over a Redis behind a proxy that breaks the node's
// connection just after Redis ran a call, before its answer passes. The call is sent again and
// answered as it ran (jobs.lua kept its answer): not run twice, not reported as failed.
class RedisLostAnswerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(redis_.start(), "");
    proxy_ = std::make_unique<LossyProxy>(redis_.port());
    server_ = node(dir_, proxy_->address(), "lost");
    ASSERT_EQ(server_->start(), "");
  }
  TempDir dir_;
  RedisServer redis_{dir_.path() / "redis"};
  std::unique_ptr<LossyProxy> proxy_;
  std::unique_ptr<ServerProcess> server_;
};

TEST_F(RedisLostAnswerTest, APutAndADeleteWhoseAnswersAreLostAreAnsweredAsTheyRanAndRunOnce) {
  Client producer(server_->port());
  ASSERT_EQ(producer.call("use lost\r\n"), "USING lost\r\n");
  proxy_->lose_answer_to({"lose-this-answer"});
  const auto id = inserted_id(producer.call(put_command("lose-this-answer")));
  ASSERT_TRUE(id) << "the put whose answer was lost was not answered INSERTED";
  EXPECT_EQ(proxy_->answers_lost(), 1);
  // Three puts in one write go as one call (putmany), whose answer is kept in short.
  proxy_->lose_answer_to({"lose-these-answers"});
  ASSERT_TRUE(producer.send(put_command("lose-these-answers") + put_command("b", 0, 0) +
                            put_command("c", 0, 0)));
  std::set<std::uint64_t> ids = {*id};
  for (int i = 0; i < 3; ++i) {
    const auto one = inserted_id(producer.reply(Millis{15000}));
    ASSERT_TRUE(one) << "put " << i << " of the call whose answer was lost";
    EXPECT_TRUE(ids.insert(*one).second);
  }
  EXPECT_EQ(proxy_->answers_lost(), 2);
  Client worker(server_->port());
  ASSERT_EQ(worker.call("watch lost\r\n"), "WATCHING 2\r\n");
  std::set<std::uint64_t> got;
  for (int i = 0; i < 4; ++i) {
    const std::string reserved = worker.call("reserve-with-timeout 0\r\n");
    ASSERT_EQ(reserved.rfind("RESERVED ", 0), 0U) << reserved;
    got.insert(std::stoull(reserved.substr(9)));
  }
  EXPECT_EQ(got, ids);
  EXPECT_EQ(worker.call("reserve-with-timeout 0\r\n"), "TIMED_OUT\r\n") << "a put ran twice";
  proxy_->lose_answer_to({"\r\nerase\r\n"});
  EXPECT_EQ(worker.call("delete " + std::to_string(*id) + "\r\n"), "DELETED\r\n");
  EXPECT_EQ(proxy_->answers_lost(), 3);
  // The three calls whose answers were lost, and any sent on the same connection before them;
  // each broke its connection.
  EXPECT_GE(metric_of(server_->http_port(), "delayq_redis_calls_sent_again_total"), 3);
  EXPECT_GE(metric_of(server_->http_port(), "delayq_redis_reconnects_total"), 3);
  EXPECT_EQ(worker.call("peek " + std::to_string(*id) + "\r\n"), "NOT_FOUND\r\n");
  // The answers kept for the node, per shard, live at most a minute past its last call there.
  const auto kept = call(redis_.port(), {"KEYS", "lost:*:ans:*"});
  ASSERT_FALSE(kept.elements.empty());
  for (const auto& key : kept.elements) {
    const auto ttl = call(redis_.port(), {"PTTL", key.str}).integer;
    EXPECT_GT(ttl, 0) << key.str;
    EXPECT_LE(ttl, 60000) << key.str;
  }
}

// jobs.lua called as the node calls it: the same numbered call sent twice (its answer lost the
// first time) is answered the same and runs once. A putmany of jobs put plainly keeps its answer
// in short and makes it again from its own arguments; one with a job refused keeps it whole.
// The library a node loaded into the Redis at `port` with its first call (delayq_<sha>, also
// the name of its function); empty if none within 10 s.
std::string delayq_library(std::uint16_t port) {
  for (const auto give_up = Clock::now() + 10s; Clock::now() < give_up;) {
    for (const auto& library : call(port, {"FUNCTION", "LIST"}).elements) {
      for (std::size_t i = 0; i + 1 < library.elements.size(); i += 2) {
        if (library.elements[i].str == "library_name" &&
            library.elements[i + 1].str.rfind("delayq_", 0) == 0) {
          return library.elements[i + 1].str;
        }
      }
    }
    std::this_thread::sleep_for(50ms);
  }
  return "";
}

TEST_F(RedisLostAnswerTest, ANumberedCallSentTwiceIsAnsweredTheSameAndRunsOnce) {
  const std::string function = delayq_library(redis_.port());
  ASSERT_FALSE(function.empty());
  const auto fcall = [&](const std::vector<std::string>& args, const std::string& number) {
    std::vector<std::string> keys = broker::redis::shard_keys("lost", 5);
    keys.push_back("lost:{5}:ans:test-node");
    delayq::redis::Command command{"FCALL", function, std::to_string(keys.size())};
    for (const auto& key : keys) command.arg(key);
    for (const auto& arg : args) command.arg(arg);
    command.arg(number).arg("test-node");
    return describe(call(redis_.port(), command));
  };
  const std::string tail = broker::redis::new_record_tail(60, "twice", "", "", "body");
  const auto job = [&](const std::string& due, const std::string& absolute,
                       const std::string& key) {
    // tube pri delay_or_at absolute replace key group attachment tail
    return std::vector<std::string>{"twice", "0", due, absolute, "0", key, "", "", tail};
  };
  const auto putmany = [&](const std::vector<std::vector<std::string>>& jobs) {
    std::vector<std::string> args = {"putmany", "128", "5", std::to_string(jobs.size())};
    for (const auto& one : jobs) args.insert(args.end(), one.begin(), one.end());
    return args;
  };
  const auto stored = [&] { return call(redis_.port(), {"HLEN", "lost:{5}:j"}).integer; };
  // Ready, due in 5 s, due at an instant: three due times made again.
  const auto plain = putmany(
      {job("0", "0", ""), job("5000", "0", ""), job(std::to_string(unix_ms() + 9000), "1", "k")});
  const std::string first = fcall(plain, "+1");
  ASSERT_EQ(first.rfind("[[\"ok\"", 0), 0U) << first;
  EXPECT_EQ(fcall(plain, "1"), first);
  EXPECT_EQ(stored(), 3);
  // The key is taken now: that job is refused ("exists"), the other goes in.
  const auto refused = putmany({job("0", "0", "k"), job("0", "0", "")});
  const std::string second = fcall(refused, "2,1");
  ASSERT_NE(second.find("\"exists\""), std::string::npos) << second;
  EXPECT_EQ(fcall(refused, "2"), second);
  EXPECT_EQ(stored(), 4);
  // What became of calls given up on: 3 ran (a putmany kept in short: the reserves it served,
  // none), 7 had not, and is voided: sent after, it runs nothing. Asked again, the same. 2 ran
  // (kept whole: its replies).
  ASSERT_EQ(fcall(putmany({job("0", "0", "")}), "3").rfind("[[\"ok\"", 0), 0U);
  EXPECT_EQ(stored(), 5);
  const std::string lost = fcall({"lost", "3", "7"}, "");
  EXPECT_EQ(lost, "[[\"ok\", [[\"ran\", [\"ok\", []]], \"void\"]], []]");
  EXPECT_EQ(fcall(putmany({job("0", "0", "")}), "7"), "[[\"void\"], []]");
  EXPECT_EQ(stored(), 5);
  EXPECT_EQ(fcall({"lost", "3", "7"}, ""), lost);
  const std::string whole = fcall({"lost", "2"}, "");
  EXPECT_EQ(whole.rfind("[[\"ok\", [[\"ran\", [\"ok\", ", 0), 0U) << whole;
  EXPECT_NE(whole.find("\"exists\""), std::string::npos) << whole;
  // With the node's kept answers gone (expired), nothing tells, and nothing is written.
  EXPECT_EQ(call(redis_.port(), {"DEL", "lost:{5}:ans:test-node"}).integer, 1);
  EXPECT_EQ(fcall({"lost", "8"}, ""), "[[\"ok\", [\"unknown\"]], []]");
  EXPECT_EQ(call(redis_.port(), {"EXISTS", "lost:{5}:ans:test-node"}).integer, 0);
}

// A firing hands the job falling due to the reserve waiting for it, in its call: with that
// call's answer lost, the worker still gets the job at once, not when its TTR (a minute) ends.
TEST_F(RedisLostAnswerTest, AFiringWhoseAnswerIsLostStillHandsItsJobToTheWaitingWorker) {
  Client worker(server_->port());
  ASSERT_EQ(worker.call("watch due\r\n"), "WATCHING 2\r\n");
  ASSERT_TRUE(worker.send("reserve-with-timeout 10\r\n"));
  std::this_thread::sleep_for(200ms);  // the reserve waits on the node
  Client producer(server_->port());
  ASSERT_EQ(producer.call("use due\r\n"), "USING due\r\n");
  // The answer that hands the job to the worker carries its body.
  proxy_->lose_answer_with("handed-over");
  const auto id = inserted_id(producer.call("put 0 1 60 11\r\nhanded-over\r\n"));
  const auto put_at = Clock::now();
  ASSERT_TRUE(id);
  const std::string reserved = worker.read_line(Millis{15000}).value_or("");
  EXPECT_EQ(reserved.rfind("RESERVED " + std::to_string(*id) + " ", 0), 0U) << reserved;
  EXPECT_LT(Clock::now() - put_at, 4s);
  EXPECT_EQ(proxy_->answers_lost(), 1) << "no answer handing the job over was lost";
}

// A Redis over its maxmemory (noeviction, as delayqd demands) refuses writes: puts get
// OUT_OF_MEMORY and HTTP 507, as for a full disk, the node is not ready, and puts pass again once
// Redis has room.
TEST(RedisFullTest, PutsAreRefusedWhileRedisIsOverItsMaxmemoryAndPassAgainAfter) {
  TempDir dir;
  RedisServer redis(dir.path() / "redis");
  ASSERT_EQ(redis.start(), "");
  auto server = node(dir, redis.address(), "full");
  ASSERT_EQ(server->start(), "");
  Client producer(server->port());
  ASSERT_TRUE(inserted_id(producer.call(put_command("before"))));
  const auto delayed = inserted_id(producer.call("put 0 2 60 7\r\ndelayed\r\n"));
  ASSERT_TRUE(delayed);
  // A schedule's status line for a request of its own.
  const auto set_schedule = [&](const std::string& name) {
    const std::string body = R"({"tube":"beats","every":"1s"})";
    Client http(server->http_port());
    EXPECT_TRUE(http.send("PUT /v1/schedules/" + name + " HTTP/1.1\r\nHost: x\r\nContent-Length: " +
                          std::to_string(body.size()) + "\r\n\r\n" + body));
    return http.read_line(Millis{15000}).value_or("");
  };
  ASSERT_EQ(set_schedule("beat"), "HTTP/1.1 201 Created\r\n");
  ASSERT_EQ(call(redis.port(), {"CONFIG", "SET", "maxmemory", "1"}).str, "OK");
  EXPECT_EQ(producer.call(put_command("refused"), Millis{15000}), "OUT_OF_MEMORY\r\n");
  // A schedule's set is a put too; its runs wait (their steps are refused and tried again).
  EXPECT_EQ(set_schedule("refused"), "HTTP/1.1 507 Insufficient Storage\r\n");
  // Everything but a put goes on, so that workers drain Redis: reserves, deletes, and the
  // firing of jobs falling due (the delayed job, after its 2 s).
  Client worker(server->port());
  for (int i = 0; i < 2; ++i) {  // take_one deletes what it reserves, and checks the delete
    EXPECT_TRUE(take_one(worker, 10)) << "job " << i << " of 2 not reserved while Redis is full";
  }
  Client http(server->http_port());
  ASSERT_TRUE(
      http.send("POST /v1/tubes/default/jobs HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}"));
  EXPECT_EQ(http.read_line(Millis{15000}).value_or(""), "HTTP/1.1 507 Insufficient Storage\r\n");
  EXPECT_TRUE(wait_for_status(server->http_port(), "/readyz", "503"));  // at the next heartbeat
  const auto metrics = front::http::Client("127.0.0.1", server->http_port())
                           .request("GET", "/metrics", "", Millis{4000});
  ASSERT_TRUE(metrics.is_ok()) << metrics.status().to_string();
  EXPECT_NE(metrics.value().body.find("\ndelayq_store_full 1\n"), std::string::npos);
  ASSERT_EQ(call(redis.port(), {"CONFIG", "SET", "maxmemory", "0"}).str, "OK");
  EXPECT_TRUE(wait_for_status(server->http_port(), "/readyz", "200"));
  EXPECT_TRUE(inserted_id(producer.call(put_command("after"))));
  const std::string reserved = producer.call("reserve-with-timeout 0\r\n", Millis{15000});
  EXPECT_EQ(reserved.rfind("RESERVED ", 0), 0U) << reserved;
  // With room again, the schedule's runs come on: two of them, the first perhaps the one put
  // ahead before Redis was full (firing went on meanwhile), the second put by a step since.
  EXPECT_EQ(worker.call("watch beats\r\n"), "WATCHING 2\r\n");
  EXPECT_EQ(worker.call("ignore default\r\n"), "WATCHING 1\r\n");
  for (int i = 0; i < 2; ++i) {
    EXPECT_TRUE(take_one(worker, 10)) << "run " << i << " of the schedule did not come";
  }
}

}  // namespace
}  // namespace delayq::testing

namespace delayq::testing {
namespace {

// delayq_shard_overdue_seconds of one shard, as the node's /metrics shows it; -1 if absent.
double overdue_of(std::uint16_t port, int shard) {
  return metric_of(port, "delayq_shard_overdue_seconds{shard=\"" + std::to_string(shard) + "\"}");
}

// A shard nobody fires (its lease held by a node that does not exist) shows on the gauge, and
// the gauge goes back to 0 once a live node takes the lease and fires what was due.
// A Redis that comes back empty (no persistence, a FLUSHALL) loses the layout's record: the
// running node writes it again at its next heartbeat, so that a node started later with
// another --redis-shards takes the running nodes' count, not its own.
TEST(RedisEmptyAgainTest, ARunningNodeWritesTheLayoutAgainAndALaterNodeTakesIt) {
  TempDir dir;
  RedisServer redis(dir.path() / "redis");
  ASSERT_EQ(redis.start(), "");
  auto first = std::make_unique<ServerProcess>(
      dir.path() / "first", std::vector<std::string>{"--redis", redis.address(), "--redis-prefix",
                                                     "e", "--redis-shards", "16"});
  ASSERT_EQ(first->start(), "");
  ASSERT_EQ(call(redis.port(), {"HGET", "e:meta", "shards"}).str, "16");
  ASSERT_EQ(call(redis.port(), {"FLUSHALL"}).str, "OK");
  std::string shards;
  for (int i = 0; i < 100 && shards != "16"; ++i) {
    std::this_thread::sleep_for(Millis{100});
    shards = call(redis.port(), {"HGET", "e:meta", "shards"}).str;
  }
  EXPECT_EQ(shards, "16") << "not written again within 10 s";
  EXPECT_EQ(call(redis.port(), {"HGET", "e:meta", "layout"}).str, "2");
  auto later = std::make_unique<ServerProcess>(
      dir.path() / "later", std::vector<std::string>{"--redis", redis.address(), "--redis-prefix",
                                                     "e", "--redis-shards", "4"});
  ASSERT_EQ(later->start(), "");
  // One layout: what one node puts, the other finds.
  Client producer(later->port());
  const auto id = inserted_id(producer.call(put_command("after")));
  ASSERT_TRUE(id);
  Client other(first->port());
  EXPECT_EQ(other.call("peek " + std::to_string(*id) + "\r\n").rfind("FOUND ", 0), 0U);
}

TEST(RedisOverdueTest, AShardNobodyFiresShowsAsOverdueUntilItIsFiredAgain) {
  TempDir dir;
  RedisServer redis(dir.path() / "redis");
  ASSERT_EQ(redis.start(), "");
  // Two shards, both leased for a minute to a node that never renews, before any node starts.
  ASSERT_EQ(call(redis.port(), {"HSET", "od:meta", "shards", "2"}).integer, 1);
  for (const std::string shard : {"0", "1"}) {
    ASSERT_EQ(call(redis.port(), {"SET", "od:{" + shard + "}:owner", "gone", "PX", "60000"}).str,
              "OK");
  }
  auto server = node(dir, redis.address(), "od");
  ASSERT_EQ(server->start(), "");
  Client producer(server->port());
  const auto id = inserted_id(producer.call("put 0 1 60 1\r\nx\r\n"));
  ASSERT_TRUE(id);
  const int shard = static_cast<int>(*id % 2);

  // The node looks every 5 s: within 12 s it has seen the job at least 3 s overdue.
  double seen = 0;
  for (const auto give_up = Clock::now() + 12s; Clock::now() < give_up && seen < 3.0;) {
    std::this_thread::sleep_for(500ms);
    seen = overdue_of(server->http_port(), shard);
  }
  EXPECT_GE(seen, 3.0);
  EXPECT_EQ(overdue_of(server->http_port(), 1 - shard), 0.0);

  // The lease ends: the node takes the shard, fires the job, and the gauge falls back to 0.
  ASSERT_EQ(call(redis.port(), {"DEL", "od:{" + std::to_string(shard) + "}:owner"}).integer, 1);
  Client worker(server->port());
  EXPECT_EQ(take_one(worker, 10), id);
  double after = -1;
  for (const auto give_up = Clock::now() + 12s; Clock::now() < give_up && after != 0.0;) {
    std::this_thread::sleep_for(500ms);
    after = overdue_of(server->http_port(), shard);
  }
  EXPECT_EQ(after, 0.0);
}

// A node takes its leases in calls of up to 64 shards. With the answer of one such call lost,
// those shards' leases are the node's in Redis but not in the node: its next walk (every lease/3)
// takes them again with a new epoch, rather than leave them unfired until they lapse, which here
// would be a minute. Their jobs fire.
TEST(RedisLostLeaseTest, LeasesWhoseAnswerWasLostAreTakenAgainAtTheNextWalk) {
  TempDir dir;
  RedisServer redis(dir.path() / "redis");
  ASSERT_EQ(redis.start(), "");
  LossyProxy proxy(redis.port());
  proxy.lose_answer_to({"\r\nacquire_all\r\n"});
  auto server = node(dir, proxy.address(), "walk");
  ASSERT_EQ(server->start(), "");
  for (const auto give_up = Clock::now() + 15s;
       Clock::now() < give_up && proxy.answers_lost() == 0;) {
    std::this_thread::sleep_for(20ms);
  }
  ASSERT_EQ(proxy.answers_lost(), 1);
  constexpr int kShards = 128;  // the default
  const auto owner = [](int shard) { return "walk:{" + std::to_string(shard) + "}:owner"; };
  // The walk's next call (the other 64 shards) follows the lost one at once: every lease is
  // taken before they are stretched.
  const auto leased = [&] {
    int n = 0;
    for (int shard = 0; shard < kShards; ++shard) {
      n += static_cast<int>(call(redis.port(), {"EXISTS", owner(shard)}).integer);
    }
    return n;
  };
  for (const auto give_up = Clock::now() + 10s; Clock::now() < give_up && leased() < kShards;) {
    std::this_thread::sleep_for(20ms);
  }
  for (int shard = 0; shard < kShards; ++shard) {
    EXPECT_EQ(call(redis.port(), {"PEXPIRE", owner(shard), "60000"}).integer, 1) << shard;
  }
  Client producer(server->port());
  ASSERT_EQ(producer.call("use walk\r\n"), "USING walk\r\n");
  std::set<std::uint64_t> put;
  for (int i = 0; i < 2 * kShards; ++i) {  // ids go round the shards
    const auto id = inserted_id(producer.call("put 0 1 60 1\r\nx\r\n"));
    ASSERT_TRUE(id);
    put.insert(*id);
  }
  double owned = 0;
  for (const auto give_up = Clock::now() + 20s; Clock::now() < give_up && owned != kShards;) {
    std::this_thread::sleep_for(200ms);
    owned = metric_of(server->http_port(), "delayq_shards_owned");
  }
  EXPECT_EQ(owned, kShards);
  // Every lease is the node's; the lost call's were taken twice (epoch 2), the others once.
  const std::string name = call(redis.port(), {"GET", owner(0)}).str;
  int twice = 0;
  for (int shard = 0; shard < kShards; ++shard) {
    EXPECT_EQ(call(redis.port(), {"GET", owner(shard)}).str, name) << shard;
    const std::string epoch =
        call(redis.port(), {"GET", "walk:{" + std::to_string(shard) + "}:epoch"}).str;
    EXPECT_TRUE(epoch == "1" || epoch == "2") << shard << ": " << epoch;
    twice += epoch == "2" ? 1 : 0;
  }
  EXPECT_EQ(twice, 64);
  Client worker(server->port());
  ASSERT_EQ(worker.call("watch walk\r\n"), "WATCHING 2\r\n");
  std::set<std::uint64_t> got;
  for (std::size_t i = 0; i < put.size(); ++i) {
    const auto id = take_one(worker, 10);
    ASSERT_TRUE(id) << "job " << i << " of " << put.size() << " did not fire";
    got.insert(*id);
  }
  EXPECT_EQ(got, put);
}

// jobs.lua's tidy_all, called as a node calls it on the shards it owns: a tube that holds
// nothing in a shard is forgotten there (its name and counts) once two looks saw it so, or at
// once with 0; one with jobs, or paused, stays. The server's totals keep the forgotten counts,
// and the tube, put to again, counts anew.
TEST(RedisTidyTest, ATubeThatHoldsNothingIsForgottenAndTheTotalsKeepItsCounts) {
  TempDir dir;
  RedisServer redis(dir.path() / "redis");
  ASSERT_EQ(redis.start(), "");
  auto server = node(dir, redis.address(), "tidy");
  ASSERT_EQ(server->start(), "");
  Client client(server->port());
  std::map<std::string, std::vector<std::uint64_t>> ids;
  for (const std::string tube : {"gone", "kept", "paused"}) {
    ASSERT_EQ(client.call("use " + tube + "\r\n"), "USING " + tube + "\r\n");
    for (int i = 0; i < 3; ++i) {
      const auto id = inserted_id(client.call(put_command(tube)));
      ASSERT_TRUE(id);
      ids[tube].push_back(*id);
    }
  }
  ASSERT_EQ(client.call("pause-tube paused 3600\r\n"), "PAUSED\r\n");
  for (const std::string tube : {"gone", "paused"}) {
    for (const auto id : ids[tube]) {
      ASSERT_EQ(client.call("delete " + std::to_string(id) + "\r\n"), "DELETED\r\n");
    }
  }
  ASSERT_EQ(client.call("use kept\r\n"), "USING kept\r\n");
  const auto before = parse_yaml(client.call("stats\r\n"));
  ASSERT_EQ(before["total-jobs"], "9");
  ASSERT_EQ(before["cmd-delete"], "6");
  ASSERT_EQ(metric_of(server->http_port(), "delayq_jobs_deleted_total"), 6.0);

  const std::string function = delayq_library(redis.port());
  ASSERT_FALSE(function.empty());
  constexpr int kShards = 128;
  // A look at every shard, as a node sends it: a call, then one with the shards it left ('-1',
  // its budget of 100 tubes spent) while some are left. The tubes it forgot (of the shards a
  // call went through), and the calls in `calls`.
  int calls = 0;
  const auto tidy = [&](const std::string& after) {
    const std::vector<std::string> keys = broker::redis::shard_keys("tidy", 0);
    std::vector<std::string> shards;
    for (int shard = 0; shard < kShards; ++shard)
      shards.push_back("tidy:{" + std::to_string(shard) + "}");
    int forgotten = 0;
    for (int sent = 0; !shards.empty() && sent < 10 * kShards; ++sent, ++calls) {
      delayq::redis::Command command{"FCALL", function, std::to_string(keys.size())};
      for (const auto& key : keys) command.arg(key);
      command.arg("tidy_all").arg(after).arg("100");
      for (const auto& shard : shards) command.arg(shard);
      command.arg("").arg("test-node");
      const auto reply = call(redis.port(), command);  // {{'ok', {forgotten, ...}}, readied}
      EXPECT_EQ(reply.elements.size(), 2U) << describe(reply);
      if (reply.elements.size() != 2 || reply.elements[0].elements.size() != 2) break;
      const auto& counts = reply.elements[0].elements[1].elements;
      EXPECT_EQ(counts.size(), shards.size()) << describe(reply);
      std::vector<std::string> left;
      for (std::size_t i = 0; i < counts.size() && i < shards.size(); ++i) {
        if (counts[i].type == delayq::redis::ReplyType::kInteger) {
          forgotten += static_cast<int>(counts[i].integer);
        } else {
          EXPECT_EQ(counts[i].str, "-1") << shards[i];
          left.push_back(shards[i]);
        }
      }
      shards = std::move(left);
    }
    EXPECT_TRUE(shards.empty());
    return forgotten;
  };
  // Where each tube is known, and its fields in the shards' counts.
  const auto shards_knowing = [&](const std::string& tube) {
    int shards = 0;
    for (int shard = 0; shard < kShards; ++shard) {
      const std::string base = "tidy:{" + std::to_string(shard) + "}";
      shards += static_cast<int>(call(redis.port(), {"SISMEMBER", base + ":tubes", tube}).integer);
      for (const char* counter : {"n", "x", "o", "v", "d", "e"}) {
        shards += static_cast<int>(
            call(redis.port(), {"HEXISTS", base + ":c", tube + '\0' + counter}).integer);
      }
    }
    return shards;
  };
  ASSERT_GT(shards_knowing("gone"), 0);
  EXPECT_EQ(tidy("3600000"), 0) << "forgotten at the first look";
  EXPECT_GT(shards_knowing("gone"), 0);
  EXPECT_EQ(tidy("3600000"), 0) << "forgotten before its hour";
  EXPECT_GE(tidy("0"), 1);
  EXPECT_EQ(shards_knowing("gone"), 0);
  EXPECT_GT(shards_knowing("kept"), 0);
  EXPECT_GT(shards_knowing("paused"), 0);
  EXPECT_EQ(tidy("0"), 0) << "forgotten twice";

  const auto after = parse_yaml(client.call("stats\r\n"));
  EXPECT_EQ(after["total-jobs"], "9");
  EXPECT_EQ(after["cmd-delete"], "6");
  EXPECT_EQ(metric_of(server->http_port(), "delayq_jobs_deleted_total"), 6.0);
  EXPECT_EQ(after["current-jobs-ready"], "3");
  EXPECT_EQ(parse_yaml(client.call("stats-tube kept\r\n"))["total-jobs"], "3");
  EXPECT_EQ(client.call("stats-tube gone\r\n"), "NOT_FOUND\r\n");
  EXPECT_EQ(client.call("list-tubes\r\n").find("- gone\n"), std::string::npos);
  ASSERT_EQ(client.call("use gone\r\n"), "USING gone\r\n");
  ASSERT_TRUE(inserted_id(client.call(put_command("gone"))));
  EXPECT_EQ(parse_yaml(client.call("stats-tube gone\r\n"))["total-jobs"], "1");
  EXPECT_EQ(parse_yaml(client.call("stats\r\n"))["total-jobs"], "10");

  // A job put and deleted between two looks (in the same shard): the tube has not been empty
  // there since the first, and is kept until a later look finds no job put since the one
  // before.
  const auto put_and_delete = [&] {  // through a connection of its own, which then closes
    Client producer(server->port());
    ASSERT_EQ(producer.call("use between\r\n"), "USING between\r\n");
    // With a key: in the key's shard both times.
    const auto id = inserted_id(producer.call("putx 0 0 60 1 key=same\r\nx\r\n"));
    ASSERT_TRUE(id);
    ASSERT_EQ(producer.call("delete " + std::to_string(*id) + "\r\n"), "DELETED\r\n");
  };
  put_and_delete();
  EXPECT_EQ(tidy("1"), 0) << "forgotten at its first look";
  put_and_delete();
  std::this_thread::sleep_for(10ms);
  EXPECT_EQ(tidy("1"), 0) << "forgotten with a job put since the last look";
  EXPECT_GT(shards_knowing("between"), 0);
  std::this_thread::sleep_for(10ms);
  EXPECT_EQ(tidy("1"), 1);
  EXPECT_EQ(shards_knowing("between"), 0);

  // 300 tubes a shard remembers (each put a job once): one look goes through them all, in calls
  // that stop at 100 tubes, the totals the same throughout.
  for (int i = 0; i < 300; ++i) {
    const std::string tube = "t" + std::to_string(i);
    ASSERT_EQ(call(redis.port(), {"SADD", "tidy:{7}:tubes", tube}).integer, 1);
    ASSERT_EQ(call(redis.port(), {"HSET", "tidy:{7}:c", tube + '\0' + 'n', "1"}).integer, 1);
  }
  EXPECT_EQ(parse_yaml(client.call("stats\r\n"))["total-jobs"], "312");
  const auto left = [&] {  // of those 300 (the shard may hold one of the tubes above)
    int n = 0;
    for (const auto& tube : call(redis.port(), {"SMEMBERS", "tidy:{7}:tubes"}).elements) {
      n += tube.str.size() > 1 && tube.str[0] == 't' && std::isdigit(tube.str[1]) ? 1 : 0;
    }
    return n;
  };
  const int calls_before = calls;
  tidy("0");
  EXPECT_EQ(left(), 0) << "one look went through the whole set";
  EXPECT_GE(calls - calls_before, 3) << "one call went through 300 tubes";
  EXPECT_EQ(parse_yaml(client.call("stats\r\n"))["total-jobs"], "312");
}

// How many FCALLs of operation `op` (a quoted argument: "\"reserve\"") a MONITOR connection
// shows within `window`. (Bounded by time, not by a pause in the stream.)
int calls_seen(Client& monitor, std::string_view op, Millis window = Millis{1000}) {
  int calls = 0;
  for (const auto until = Clock::now() + window; Clock::now() < until;) {
    const auto line = monitor.read_line(Millis{50});
    if (line && line->find("\"FCALL\"") != std::string::npos &&
        line->find(op) != std::string::npos) {
      ++calls;
    }
  }
  return calls;
}

// The shards asked what they hold over `window`: one a probe call, n a probe_all call of n.
int shards_probed(Client& monitor, Millis window = Millis{1000}) {
  int shards = 0;
  for (const auto until = Clock::now() + window; Clock::now() < until;) {
    const auto line = monitor.read_line(Millis{50});
    if (!line || line->find("\"FCALL\"") == std::string::npos) continue;
    constexpr std::string_view kAll = "\"probe_all\" \"";
    if (const auto at = line->find(kAll); at != std::string::npos) {
      shards += std::stoi(line->substr(at + kAll.size()));
    } else if (line->find("\"probe\"") != std::string::npos) {
      ++shards;
    }
  }
  return shards;
}

// One delayqd node over a Redis of its own.
class RedisWakeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(redis_.start(), "");
    server_ = node(dir_, redis_.address(), "wk");
    ASSERT_EQ(server_->start(), "");
    // Until the node has subscribed every shard's channel (read every SSUBSCRIBE's answer: a
    // loaded machine may run the node late, after Redis counts them), a reserve about to answer
    // TIMED_OUT asks the shards not yet subscribed; and until it has taken every shard's lease
    // (one shard after another, each fired as it is taken: on a loaded machine the walk was
    // seen still under way as a test began). The counts below assume a settled node.
    for (const auto until = Clock::now() + 10s; Clock::now() < until;) {
      if (metric_of(server_->http_port(), "delayq_shard_channels_subscribed") == 128 &&
          metric_of(server_->http_port(), "delayq_shards_owned") == 128) {
        break;
      }
      std::this_thread::sleep_for(20ms);
    }
    ASSERT_EQ(metric_of(server_->http_port(), "delayq_shard_channels_subscribed"), 128);
    ASSERT_EQ(metric_of(server_->http_port(), "delayq_shards_owned"), 128);
  }
  // Puts one ready job through `producer` and returns which of the workers (each waiting in a
  // reserve) got it, its delete answered and its next reserve sent; -1 if none within 10 s.
  static int one_ready_job(Client& producer, const std::array<Client*, 2>& workers, int n) {
    const auto id =
        inserted_id(producer.call("put 0 0 60 1\r\n" + std::to_string(n % 10) + "\r\n"));
    if (!id) return -1;
    for (const auto give_up = Clock::now() + 10s; Clock::now() < give_up;) {
      for (int w = 0; w < 2; ++w) {
        Client& worker = *workers[static_cast<std::size_t>(w)];
        const auto line = worker.read_line(Millis{20});
        if (!line) continue;
        EXPECT_EQ(*line, "RESERVED " + std::to_string(*id) + " 1\r\n");
        (void)worker.read_line();  // the body
        EXPECT_EQ(worker.call("delete " + std::to_string(*id) + "\r\n"), "DELETED\r\n");
        EXPECT_TRUE(worker.send("reserve-with-timeout 20\r\n"));
        return w;
      }
    }
    return -1;
  }
  // Puts `jobs` ready jobs one at a time (one_ready_job()), MONITOR on Redis meanwhile: how
  // many each worker got, and the reserve calls Redis ran (-1: a job reached no worker).
  struct OneAtATime {
    std::array<int, 2> got{};
    int reserves = -1;
  };
  OneAtATime jobs_one_at_a_time(Client& producer, const std::array<Client*, 2>& workers, int jobs) {
    OneAtATime out;
    Client monitor(redis_.port());
    if (monitor.call("MONITOR\r\n") != "+OK\r\n") return out;
    for (int n = 1; n <= jobs; ++n) {
      const int w = one_ready_job(producer, workers, n);
      if (w == -1) {
        ADD_FAILURE() << "job " << n << " reached no worker";
        return out;
      }
      ++out.got[static_cast<std::size_t>(w)];
      std::this_thread::sleep_for(20ms);  // a message that would wake another arrives by now
    }
    std::this_thread::sleep_for(300ms);
    out.reserves = calls_seen(monitor, "\"reserve\"");
    return out;
  }
  TempDir dir_;
  RedisServer redis_{dir_.path() / "redis"};
  std::unique_ptr<ServerProcess> server_;
};

// A ready job put while reserves wait on the node reaches the longest waiting one in the put's
// own call: no reserve call at all (one each before), and no other reserve woken for it.
// (Counted with MONITOR: a reserve call is an FCALL whose operation is "reserve".)
TEST_F(RedisWakeTest, AReadyJobPutWhileReservesWaitIsHandedOutByItsPut) {
  Client producer(server_->port());
  Client first(server_->port());
  Client second(server_->port());
  const std::array<Client*, 2> workers{&first, &second};
  for (Client* worker : workers) ASSERT_TRUE(worker->send("reserve-with-timeout 20\r\n"));

  const auto one_job = [&](int n) { return one_ready_job(producer, workers, n); };
  // The first reserves look through every shard once; after a job, all is settled.
  ASSERT_NE(one_job(0), -1);
  std::this_thread::sleep_for(300ms);

  constexpr int kJobs = 20;
  const auto [got, reserves] = jobs_one_at_a_time(producer, workers, kJobs);
  ASSERT_NE(reserves, -1);
  // Room for a resync's look (every 5 s, one per shard that may hold a job).
  EXPECT_LE(reserves, 3) << "reserve calls for " << kJobs << " jobs, one at a time";
  // The longest waiting reserve goes first: the workers take turns.
  EXPECT_EQ(got[0], kJobs / 2);
  EXPECT_EQ(got[1], kJobs / 2);
}

// A job made ready through a node with no worker, while a worker waits on each of two other
// nodes, is tried by one of them only: the nodes take turns at it (the one whose turn it is
// goes, another only if it has no worker free), and the other hears that it was taken. Before,
// both woke a reserve for each job and one of the two missed: twice the reserve calls.
TEST_F(RedisWakeTest, ThreeNodesTakeTurnsAtAJobOneReserveCallEach) {
  auto a = node(dir_, redis_.address(), "wk");
  auto b = node(dir_, redis_.address(), "wk");
  ASSERT_EQ(a->start(), "");
  ASSERT_EQ(b->start(), "");
  Client producer(server_->port());
  Client on_a(a->port());
  Client on_b(b->port());
  const std::array<Client*, 2> workers{&on_a, &on_b};
  for (Client* worker : workers) ASSERT_TRUE(worker->send("reserve-with-timeout 20\r\n"));
  const auto one_job = [&](int n) { return one_ready_job(producer, workers, n); };
  // The first reserves look through every shard; the nodes learn of each other (heartbeats).
  ASSERT_NE(one_job(0), -1);
  std::this_thread::sleep_for(2500ms);

  constexpr int kJobs = 20;
  const auto [got, reserves] = jobs_one_at_a_time(producer, workers, kJobs);
  ASSERT_NE(reserves, -1);
  // Room for a resync's look (every 5 s, one per shard that may hold a job).
  EXPECT_LE(reserves, kJobs + 3) << "reserve calls for " << kJobs << " jobs, one at a time";
  // Each job starts its round at another node.
  EXPECT_GT(got[0], 0);
  EXPECT_GT(got[1], 0);
}

// A reserve that takes a shard's best ready job tells every node what the shard's best is now
// ("h" on the shard's channel): the next job, then none. Without it, the nodes that did not
// take the job would each ask for it again.
TEST_F(RedisWakeTest, AReserveThatTakesAShardsBestTellsEveryNodeWhatIsLeft) {
  Client listener(redis_.port());
  std::string channels;
  for (int shard = 0; shard < 128; ++shard)
    channels += " wk:{" + std::to_string(shard) + "}:events";
  ASSERT_TRUE(listener.send("SSUBSCRIBE" + channels + "\r\n"));
  std::this_thread::sleep_for(200ms);
  // Two ready jobs put in one write go to one shard.
  Client producer(server_->port());
  ASSERT_TRUE(producer.send("put 0 0 60 1\r\na\r\nput 0 0 60 1\r\nb\r\n"));
  const auto first = inserted_id(producer.reply());
  const auto second = inserted_id(producer.reply());
  ASSERT_TRUE(first && second);
  Client worker(server_->port());
  // The "h" messages that come within `window`, their payloads.
  const auto heads_told = [&](Millis window) {
    std::vector<std::string> told;
    for (const auto until = Clock::now() + window; Clock::now() < until;) {
      const auto line = listener.read_line(Millis{20});
      if (line && line->rfind("h wk:{", 0) == 0) told.push_back(line->substr(0, line->size() - 2));
    }
    return told;
  };
  (void)heads_told(Millis{300});  // the subscriptions' answers, and the puts' "r"
  const std::string got = worker.call("reserve-with-timeout 5\r\n");
  ASSERT_EQ(got.rfind("RESERVED " + std::to_string(*first) + " ", 0), 0U) << got;
  auto told = heads_told(Millis{500});
  ASSERT_EQ(told.size(), 1U);
  EXPECT_NE(told[0].find(" default "), std::string::npos) << told[0];
  EXPECT_EQ(told[0].substr(told[0].rfind(':') + 1), std::to_string(*second)) << told[0];
  // The second taken: none left (the message ends with the node's name and an empty head).
  EXPECT_EQ(worker.call("delete " + std::to_string(*first) + "\r\n"), "DELETED\r\n");
  const std::string next = worker.call("reserve-with-timeout 5\r\n");
  ASSERT_EQ(next.rfind("RESERVED " + std::to_string(*second) + " ", 0), 0U) << next;
  told = heads_told(Millis{500});
  ASSERT_EQ(told.size(), 1U);
  EXPECT_EQ(told[0].back(), ' ') << told[0];
}

// A job that falls due while a reserve waits on the node that fires its shard reaches that
// reserve in the firing's own call: no reserve call at all (one each before), so one round
// trip to Redis less between the due time and the worker.
TEST_F(RedisWakeTest, AFiringHandsItsJobToAWaitingReserveInTheSameCall) {
  Client producer(server_->port());
  Client first(server_->port());
  Client second(server_->port());
  const std::array<Client*, 2> workers{&first, &second};
  for (Client* worker : workers) ASSERT_TRUE(worker->send("reserve-with-timeout 20\r\n"));
  std::this_thread::sleep_for(300ms);  // the first reserves look through every shard once

  Client monitor(redis_.port());
  ASSERT_EQ(monitor.call("MONITOR\r\n"), "+OK\r\n");
  constexpr int kJobs = 10;
  std::set<std::uint64_t> put;
  for (int n = 0; n < kJobs; ++n) {
    const auto id = inserted_id(producer.call("put 0 1 60 1\r\nd\r\n"));
    ASSERT_TRUE(id.has_value());
    put.insert(*id);
    std::this_thread::sleep_for(100ms);  // due one at a time
  }
  std::set<std::uint64_t> got;
  for (const auto give_up = Clock::now() + 10s; got.size() < kJobs && Clock::now() < give_up;) {
    for (Client* worker : workers) {
      const auto line = worker->read_line(Millis{20});
      if (!line) continue;
      ASSERT_EQ(line->rfind("RESERVED ", 0), 0U) << *line;
      const auto id = std::stoull(line->substr(9));
      (void)worker->read_line();  // the body
      got.insert(id);
      EXPECT_EQ(worker->call("delete " + std::to_string(id) + "\r\n"), "DELETED\r\n");
      EXPECT_TRUE(worker->send("reserve-with-timeout 20\r\n"));
    }
  }
  EXPECT_EQ(got, put);
  std::this_thread::sleep_for(300ms);
  const int reserves = calls_seen(monitor, "\"reserve\"");
  // Room for a resync's look (every 5 s, one per shard that may hold a job).
  EXPECT_LE(reserves, 2) << "reserve calls for " << kJobs << " jobs that fell due one at a time";
}

// Reserves that must ask every shard (the first reserves of a tube the node knows nothing of)
// share the rounds of calls: eight workers polling a new tube at once cost at most two rounds
// (the one under way when they come, which they do not trust, and the next), not one each.
// (When Redis is out of reach, each round's calls retry until their deadline: a round per
// waiting reserve held 200 MiB for 800 of them.) Polls of a tube the node knows to be empty
// ask no shard: before TIMED_OUT they only let in the messages already sent (a PING per
// primary).
TEST_F(RedisWakeTest, ReservesThatAskEveryShardShareTheirRounds) {
  constexpr int kWorkers = 8;
  constexpr int kShards = 128;
  std::vector<std::unique_ptr<Client>> workers;
  for (int w = 0; w < kWorkers; ++w) {
    workers.push_back(std::make_unique<Client>(server_->port()));
    ASSERT_EQ(workers.back()->call("watch polled\r\n"), "WATCHING 2\r\n");
    ASSERT_EQ(workers.back()->call("ignore default\r\n"), "WATCHING 1\r\n");
  }
  Client monitor(redis_.port());
  ASSERT_EQ(monitor.call("MONITOR\r\n"), "+OK\r\n");
  for (auto& worker : workers) ASSERT_TRUE(worker->send("reserve-with-timeout 0\r\n"));
  for (auto& worker : workers) EXPECT_EQ(worker->reply(), "TIMED_OUT\r\n");
  const int first = shards_probed(monitor);
  EXPECT_GE(first, kShards);
  // Two rounds, and room for one look of the node's own (every 5 s, a round per waited tube);
  // eight polls that shared nothing would make eight.
  EXPECT_LE(first, 3 * kShards) << "shards probed for " << kWorkers << " first polls at once";
  for (auto& worker : workers) ASSERT_TRUE(worker->send("reserve-with-timeout 0\r\n"));
  for (auto& worker : workers) EXPECT_EQ(worker->reply(), "TIMED_OUT\r\n");
  // Room for one look of the node's own.
  EXPECT_LE(shards_probed(monitor), kShards)
      << "shards probed for " << kWorkers << " polls of a tube known to be empty";
}

// Eight workers of one node drain a backlog spread over many shards: each job costs one reserve
// call. A shard whose best job another reserve of the node is taking is passed over (or waited
// for, when no other shard holds one), not asked as well: that call found the job gone, or the
// shard's next job worse than another shard's best, and tried again (seven calls a job were
// measured draining a backlog this way).
TEST_F(RedisWakeTest, EightWorkersDrainABacklogWithOneReserveCallAJob) {
  constexpr int kJobs = 240;
  constexpr int kWorkers = 8;
  Client producer(server_->port());
  std::string puts;
  for (int n = 0; n < kJobs; ++n) {
    // A key each, so that the jobs spread over the shards (a job lives in its key's shard).
    puts += "putx 0 0 60 1 key=k" + std::to_string(n) + "\r\nb\r\n";
  }
  ASSERT_TRUE(producer.send(puts));
  for (int n = 0; n < kJobs; ++n) ASSERT_TRUE(inserted_id(producer.reply())) << "put " << n;

  std::vector<std::unique_ptr<Client>> workers;
  for (int w = 0; w < kWorkers; ++w) workers.push_back(std::make_unique<Client>(server_->port()));
  Client monitor(redis_.port());
  ASSERT_EQ(monitor.call("MONITOR\r\n"), "+OK\r\n");
  std::atomic<int> served{0};
  std::vector<std::thread> threads;
  for (auto& worker : workers) {
    threads.emplace_back([&served, &client = *worker] {
      for (;;) {
        const std::string reply = client.call("reserve-with-timeout 1\r\n");
        if (reply.rfind("RESERVED ", 0) != 0) return;
        const auto id = reply.substr(9, reply.find(' ', 9) - 9);
        if (client.call("delete " + id + "\r\n") != "DELETED\r\n") return;
        ++served;
      }
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(served.load(), kJobs);
  // Room for a resync's look (every 5 s, one call per shard that may hold a job).
  EXPECT_LE(calls_seen(monitor, "\"reserve\""), kJobs + 16)
      << "reserve calls for " << kJobs << " jobs drained by " << kWorkers << " workers";
}

// A reserve a worker sends in the same write as its delete rides with the delete's call, which
// reserves its job (no prefetch option needed: the client asked for both): no reserve call.
TEST_F(RedisWakeTest, AReservePipelinedBehindItsDeleteRidesWithTheDeletesCall) {
  Client producer(server_->port());
  ASSERT_TRUE(producer.send("put 0 0 60 1\r\na\r\nput 0 0 60 1\r\nb\r\nput 0 0 60 1\r\nc\r\n"));
  std::vector<std::uint64_t> ids;
  for (int i = 0; i < 3; ++i) {
    const auto id = inserted_id(producer.reply());
    ASSERT_TRUE(id);
    ids.push_back(*id);
  }
  Client worker(server_->port());
  const std::string first = worker.call("reserve-with-timeout 5\r\n");
  ASSERT_EQ(first.rfind("RESERVED " + std::to_string(ids[0]) + " ", 0), 0U) << first;
  Client monitor(redis_.port());
  ASSERT_EQ(monitor.call("MONITOR\r\n"), "+OK\r\n");
  for (std::size_t i = 1; i < ids.size(); ++i) {
    ASSERT_TRUE(worker.send("delete " + std::to_string(ids[i - 1]) + "\r\nreserve\r\n"));
    EXPECT_EQ(worker.reply(), "DELETED\r\n");
    const std::string next = worker.reply();
    EXPECT_EQ(next.rfind("RESERVED " + std::to_string(ids[i]) + " ", 0), 0U) << next;
  }
  EXPECT_EQ(worker.call("delete " + std::to_string(ids.back()) + "\r\n"), "DELETED\r\n");
  EXPECT_EQ(calls_seen(monitor, "\"reserve\"", Millis{300}), 0);
}

// A burst of ready jobs reaches every waiting reserve at once, each woken reserve waking others
// while the shard holds more: eight workers reserve once each, and eight jobs put in one write
// reach all of them within 1.5 s. Without that, jobs would wait for the look a node takes by
// itself every five seconds; two rounds 2.5 s apart make sure one of them misses that look.
TEST_F(RedisWakeTest, ABurstReachesEveryWaitingReserveWithoutTheFiveSecondLook) {
  Client producer(server_->port());
  constexpr int kWorkers = 8;
  for (int round = 0; round < 2; ++round) {
    const auto round_start = Clock::now();
    std::vector<std::unique_ptr<Client>> workers;
    for (int w = 0; w < kWorkers; ++w) {
      workers.push_back(std::make_unique<Client>(server_->port()));
      ASSERT_TRUE(workers.back()->send("reserve-with-timeout 30\r\n"));
    }
    // The first reserves look through every shard once before they wait.
    std::this_thread::sleep_for(500ms);
    std::string burst;
    for (int n = 0; n < kWorkers; ++n) burst += "put 0 0 60 1\r\nb\r\n";
    const auto start = Clock::now();
    ASSERT_TRUE(producer.send(burst));
    for (int n = 0; n < kWorkers; ++n) ASSERT_TRUE(inserted_id(producer.reply()));
    int served = 0;
    for (auto& worker : workers) {
      const auto left = std::chrono::duration_cast<Millis>(start + 1500ms - Clock::now());
      const std::string reply = worker->reply(std::max(left, Millis{1}));
      if (reply.rfind("RESERVED ", 0) != 0) continue;
      ++served;
      // Deleted, so that no job of this round comes back (released) to the next.
      const auto id = reply.substr(9, reply.find(' ', 9) - 9);
      EXPECT_EQ(worker->call("delete " + id + "\r\n"), "DELETED\r\n");
    }
    EXPECT_EQ(served, kWorkers) << "workers served within 1.5 s of the burst, round " << round;
    std::this_thread::sleep_until(round_start + 2500ms);
  }
}

// An owner never fires an idle shard: over 5.5 s, which hold a five-second look (one call for
// every shard's earliest timer), no firing at all (one a second each before). A reservation's
// end is told to the owner, which fires it then: a job whose TTR of 1 s lapses reaches the next
// worker well within a second of it (at the five-second look before).
TEST_F(RedisWakeTest, AnIdleShardIsNeverFiredAndATtrLapsesAtItsEnd) {
  std::this_thread::sleep_for(1s);  // the leases taken, one at a time, each fired as taken
  Client monitor(redis_.port());
  ASSERT_EQ(monitor.call("MONITOR\r\n"), "+OK\r\n");
  EXPECT_EQ(calls_seen(monitor, "\"fire\"", Millis{5500}), 0) << "firings of idle shards";

  Client producer(server_->port());
  Client holder(server_->port());
  Client next(server_->port());
  ASSERT_TRUE(inserted_id(producer.call("put 0 0 1 1\r\nx\r\n")));
  const std::string reserved = holder.call("reserve-with-timeout 5\r\n");
  const auto taken = Clock::now();
  ASSERT_EQ(reserved.rfind("RESERVED ", 0), 0U) << reserved;
  const std::string again = next.call("reserve-with-timeout 10\r\n", Millis{15000});
  const auto lapsed = Clock::now();
  EXPECT_EQ(again, reserved);
  EXPECT_LT(lapsed - taken, 1700ms)
      << "a TTR of 1 s lapsed after " << std::chrono::duration_cast<Millis>(lapsed - taken).count()
      << " ms";
}

// Delayed jobs put into quiet shards cost their owner no firing before they are due: each put's
// message (`t`) carries the due time, for which the owner arms without a call; then each job
// reaches the worker, none before its delay.
TEST_F(RedisWakeTest, DelayedJobsPutIntoQuietShardsCostNoFiringBeforeTheyAreDue) {
  Client monitor(redis_.port());
  ASSERT_EQ(monitor.call("MONITOR\r\n"), "+OK\r\n");
  Client producer(server_->port());
  const auto put_at = Clock::now();
  for (int n = 0; n < 8; ++n) ASSERT_TRUE(inserted_id(producer.call("put 0 2 60 1\r\nx\r\n")));
  EXPECT_EQ(calls_seen(monitor, "\"fire\"", Millis{1500}), 0) << "firings before the jobs were due";
  Client worker(server_->port());
  for (int n = 0; n < 8; ++n) {
    const std::string got = worker.call("reserve-with-timeout 5\r\n", Millis{6000});
    ASSERT_EQ(got.rfind("RESERVED ", 0), 0U) << got;
    EXPECT_GE(Clock::now() - put_at, 2s) << "job " << n << " reserved before its delay";
  }
}

// --- prefetch (--redis-prefetch): a worker's delete reserves its next job

// A node over a Redis of its own, every job in one shard, with prefetch on (300 ms).
class RedisPrefetchTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(redis_.start(), "");
    ASSERT_EQ(start_node(), "");
  }
  std::string start_node() {
    server_ = std::make_unique<ServerProcess>(
        dir_.path(), std::vector<std::string>{"--redis", redis_.address(), "--redis-prefix", "pf",
                                              "--redis-shards", "1", "--redis-prefetch", "300"});
    return server_->start();
  }
  // n ready jobs with ttr seconds put in one write; their ids in order.
  std::vector<std::uint64_t> put_jobs(int n, int ttr) {
    Client producer(server_->port());
    std::string puts;
    for (int i = 0; i < n; ++i) {
      puts += "put 0 0 " + std::to_string(ttr) + " 1\r\n" + std::to_string(i % 10) + "\r\n";
    }
    EXPECT_TRUE(producer.send(puts));
    std::vector<std::uint64_t> ids;
    for (int i = 0; i < n; ++i) {
      const auto id = inserted_id(producer.reply());
      EXPECT_TRUE(id) << "put " << i;
      if (id) ids.push_back(*id);
    }
    return ids;
  }
  static std::uint64_t reserved_id(const std::string& reply) {
    EXPECT_EQ(reply.rfind("RESERVED ", 0), 0U) << reply;
    return reply.rfind("RESERVED ", 0) == 0 ? std::stoull(reply.substr(9)) : 0;
  }
  TempDir dir_;
  RedisServer redis_{dir_.path() / "redis"};
  std::unique_ptr<ServerProcess> server_;
};

// A worker taking jobs one at a time makes one call a job: its delete's, which reserves the next
// job, and the reserve that follows asks Redis nothing. Every job comes once, in order.
TEST_F(RedisPrefetchTest, AWorkerDrainsABacklogWithOneCallAJobInOrder) {
  constexpr int kJobs = 60;
  const auto ids = put_jobs(kJobs, 60);
  ASSERT_EQ(ids.size(), static_cast<std::size_t>(kJobs));
  Client worker(server_->port());
  Client monitor(redis_.port());
  ASSERT_EQ(monitor.call("MONITOR\r\n"), "+OK\r\n");
  std::vector<std::uint64_t> got;
  for (int n = 0; n < kJobs; ++n) {
    const auto id = reserved_id(worker.call("reserve-with-timeout 1\r\n"));
    if (id == 0) break;
    got.push_back(id);
    ASSERT_EQ(worker.call("delete " + std::to_string(id) + "\r\n"), "DELETED\r\n");
  }
  EXPECT_EQ(got, ids);
  EXPECT_EQ(worker.call("reserve-with-timeout 0\r\n"), "TIMED_OUT\r\n");
  // The first reserve's call, and room for a resync's look and the last reserve's.
  EXPECT_LE(calls_seen(monitor, "\"reserve\"", Millis{500}), 4)
      << "reserve calls for " << kJobs << " jobs taken one at a time";
}

// A job prefetched for a worker that does not ask for it is reserved meanwhile (as others see
// it), and ready again once the hold is over, its reserve uncounted: another worker gets it.
// A pipelined delete + reserve gets the job the delete reserved.
TEST_F(RedisPrefetchTest, AJobNotAskedForIsGivenBackUncountedAndAPipelinedReserveGetsIt) {
  const auto ids = put_jobs(3, 60);
  ASSERT_EQ(ids.size(), 3U);
  Client worker(server_->port());
  Client other(server_->port());
  EXPECT_EQ(reserved_id(worker.call("reserve\r\n")), ids[0]);
  // Pipelined: the reserve is read while the delete's call is under way, and waits for it.
  ASSERT_TRUE(worker.send("delete " + std::to_string(ids[0]) + "\r\nreserve\r\n"));
  EXPECT_EQ(worker.reply(), "DELETED\r\n");
  EXPECT_EQ(reserved_id(worker.reply()), ids[1]);
  EXPECT_EQ(worker.call("delete " + std::to_string(ids[1]) + "\r\n"), "DELETED\r\n");
  // ids[2] is held for the worker now.
  const std::string held = other.call("stats-job " + std::to_string(ids[2]) + "\r\n");
  EXPECT_NE(held.find("state: reserved"), std::string::npos) << held;
  EXPECT_EQ(other.call("reserve-with-timeout 0\r\n"), "TIMED_OUT\r\n");
  const auto asked = Clock::now();
  EXPECT_EQ(reserved_id(other.call("reserve-with-timeout 5\r\n", Millis{10000})), ids[2]);
  EXPECT_LT(Clock::now() - asked, 1500ms) << "the hold is 300 ms";
  const std::string stats = other.call("stats-job " + std::to_string(ids[2]) + "\r\n");
  EXPECT_NE(stats.find("reserves: 1\n"), std::string::npos) << stats;
  EXPECT_NE(stats.find("releases: 0\n"), std::string::npos) << stats;
}

// Deletes read in one turn go to their shard in one call (erasemany), each answered as alone:
// three jobs and an id that names none, in one write.
TEST_F(RedisPrefetchTest, DeletesSentTogetherGoInOneCallEachAnsweredAsAlone) {
  const auto ids = put_jobs(3, 60);
  ASSERT_EQ(ids.size(), 3U);
  Client producer(server_->port());
  Client monitor(redis_.port());
  ASSERT_EQ(monitor.call("MONITOR\r\n"), "+OK\r\n");
  std::string deletes;
  for (const auto id : ids) deletes += "delete " + std::to_string(id) + "\r\n";
  deletes += "delete " + std::to_string(ids.back() + 1) + "\r\n";
  ASSERT_TRUE(producer.send(deletes));
  for (int i = 0; i < 3; ++i) EXPECT_EQ(producer.reply(), "DELETED\r\n") << "delete " << i;
  EXPECT_EQ(producer.reply(), "NOT_FOUND\r\n");
  for (const auto id : ids) {
    EXPECT_EQ(producer.call("peek " + std::to_string(id) + "\r\n"), "NOT_FOUND\r\n");
  }
  EXPECT_EQ(calls_seen(monitor, "\"erasemany\" \"4\"", Millis{300}), 1);
}

// A node killed with SIGKILL while four workers take jobs through it (their deletes gathered
// into shared calls, each prefetching a next job) and a producer puts more: a node started again
// hands out every job whose put was acknowledged and whose delete was not (those prefetched or
// reserved for the dead workers once their TTR lapses), and none whose delete was.
TEST_F(RedisPrefetchTest, ANodeKilledUnderWorkersAndAProducerLosesNoAcknowledgedDeleteOrPut) {
  const auto first = put_jobs(200, 1);
  ASSERT_EQ(first.size(), 200U);
  std::mutex mutex;
  std::set<std::uint64_t> put(first.begin(), first.end());  // acknowledged
  std::set<std::uint64_t> deleted;                          // acknowledged
  std::set<std::uint64_t> deleting;  // sent, not acknowledged: may be gone or not
  std::atomic<bool> stop{false};
  std::vector<std::thread> threads;
  for (int w = 0; w < 4; ++w) {
    threads.emplace_back([&] {
      Client worker(server_->port());
      while (!stop) {
        const std::string reply = worker.call("reserve-with-timeout 1\r\n", Millis{3000});
        if (reply.rfind("RESERVED ", 0) != 0) return;
        const auto id = std::stoull(reply.substr(9));
        {
          const std::lock_guard lock(mutex);
          deleting.insert(id);
        }
        if (worker.call("delete " + std::to_string(id) + "\r\n", Millis{3000}) != "DELETED\r\n") {
          return;
        }
        const std::lock_guard lock(mutex);
        deleting.erase(id);
        deleted.insert(id);
      }
    });
  }
  threads.emplace_back([&] {
    Client producer(server_->port());
    while (!stop) {
      const auto id = inserted_id(producer.call("put 0 0 1 1\r\nx\r\n", Millis{3000}));
      if (!id) return;
      const std::lock_guard lock(mutex);
      put.insert(*id);
    }
  });
  for (const auto until = Clock::now() + 20s; Clock::now() < until;) {
    std::this_thread::sleep_for(5ms);
    const std::lock_guard lock(mutex);
    if (deleted.size() >= 100) break;
  }
  server_->kill9();
  stop = true;
  for (auto& thread : threads) thread.join();
  ASSERT_GE(deleted.size(), 100U);

  ASSERT_EQ(start_node(), "");
  std::set<std::uint64_t> missing;  // acknowledged, no delete sent, not handed out yet
  for (const auto id : put) {
    if (!deleted.contains(id) && !deleting.contains(id)) missing.insert(id);
  }
  Client worker(server_->port());
  // (Jobs held for the dead workers come back once the new node holds the shard's lease, which
  // the dead one's blocks for up to 5 s, and fires their TTR lapses.)
  while (!missing.empty()) {
    const std::string reply = worker.call("reserve-with-timeout 10\r\n", Millis{15000});
    if (reply.rfind("RESERVED ", 0) != 0) break;
    const auto id = std::stoull(reply.substr(9));
    EXPECT_FALSE(deleted.contains(id)) << "job " << id << " came back after its delete";
    missing.erase(id);  // (a put whose answer the kill lost may be there too)
    ASSERT_EQ(worker.call("delete " + std::to_string(id) + "\r\n"), "DELETED\r\n");
  }
  EXPECT_TRUE(missing.empty()) << missing.size() << " acknowledged jobs lost";
}

// --- layout 2: timers in pages, MessagePack records; the upgrade from layout 1

// One delayqd node over a Redis of its own, every job in one shard, so that every timer shares
// its pages.
class RedisTimersTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(redis_.start(), "");
    server_ = std::make_unique<ServerProcess>(
        dir_.path(), std::vector<std::string>{"--redis", redis_.address(), "--redis-prefix", "pg",
                                              "--redis-shards", "1"});
    ASSERT_EQ(server_->start(), "");
  }
  // Every page holds at least a quarter of 128 entries, unless it is the shard's only one.
  void expect_no_page_under_a_quarter() {
    const auto index = call(redis_.port(), {"ZRANGE", "pg:{0}:ti", "0", "-1"});
    if (index.elements.size() < 2) return;
    for (const auto& name : index.elements) {
      const auto entries = call(redis_.port(), {"HGET", "pg:{0}:tp", name.str}).str.size() / 13;
      EXPECT_GE(entries, 32u) << "a page of " << entries << " of " << index.elements.size();
    }
  }
  TempDir dir_;
  RedisServer redis_{dir_.path() / "redis"};
  std::unique_ptr<ServerProcess> server_;
};

// 600 jobs due over about 3 s, put in random
// order (each delay a whole second, the puts spread in time), 480 of them deleted before they
// are due. Every other job comes out once and never before its time; the pages split on the
// way (more than 128 timers), the deletes leave none under a quarter full (each that falls
// there joins a neighbour), and none is left once all have fired.
TEST_F(RedisTimersTest, ManyTimersInOneShardFireOnceNeverEarlyAndLeaveNoPage) {
  Client producer(server_->port());
  std::mt19937_64 random(test_seed());
  std::map<std::uint64_t, std::int64_t> due;  // id -> not before (unix ms)
  std::vector<std::uint64_t> ids;
  for (int i = 0; i < 600; ++i) {
    const auto delay = static_cast<std::uint32_t>(1 + random() % 3);
    const auto before = unix_ms();
    const auto id = inserted_id(producer.call(put_command("job", 0, delay)));
    ASSERT_TRUE(id);
    due[*id] = before + delay * 1000;
    ids.push_back(*id);
  }
  EXPECT_GT(call(redis_.port(), {"HLEN", "pg:{0}:tp"}).integer, 2);
  std::shuffle(ids.begin(), ids.end(), random);
  for (std::size_t i = 0; i < 480; ++i) {
    ASSERT_EQ(producer.call("delete " + std::to_string(ids[i]) + "\r\n"), "DELETED\r\n");
    due.erase(ids[i]);
  }
  expect_no_page_under_a_quarter();
  Client worker(server_->port());
  std::set<std::uint64_t> seen;
  while (seen.size() < due.size()) {
    const std::string reply = worker.call("reserve-with-timeout 10\r\n", Millis{15000});
    ASSERT_EQ(reply.rfind("RESERVED ", 0), 0u) << reply << " after " << seen.size();
    const auto at = unix_ms();
    const auto id = std::stoull(reply.substr(9));
    ASSERT_TRUE(due.contains(id)) << "job " << id << " was deleted or never put";
    EXPECT_GE(at, due[id]) << "job " << id << " came out early";
    EXPECT_TRUE(seen.insert(id).second) << "job " << id << " came out twice";
    ASSERT_EQ(worker.call("delete " + std::to_string(id) + "\r\n"), "DELETED\r\n");
  }
  EXPECT_EQ(worker.call("reserve-with-timeout 1\r\n", Millis{5000}), "TIMED_OUT\r\n");
  EXPECT_EQ(call(redis_.port(), {"HLEN", "pg:{0}:tp"}).integer, 0);
  EXPECT_EQ(call(redis_.port(), {"ZCARD", "pg:{0}:ti"}).integer, 0);
}

// Random changes to one shard's timers (puts in pipelined batches, so that several share a
// due time; releases with delays, touches, buries, kicks, deletes; delays and TTRs long enough
// that nothing fires or lapses meanwhile), then most delayed jobs deleted, then the pages as
// Redis holds them: each page
// non-empty, at most 128 entries (at least 32 beside others), in order, named in the index at or
// before its first entry and after every entry of the page before, one entry for each delayed job
// and none other; and in t, the sorted set of reservations, each reserved job and none other.
TEST_F(RedisTimersTest, PagesHoldExactlyTheDelayedJobsInOrderAfterRandomChanges) {
  Client client(server_->port());
  std::mt19937_64 random(test_seed());
  enum class State { kDelayed, kReady, kReserved, kBuried };
  std::map<std::uint64_t, State> jobs;
  const auto pick = [&](State state) -> std::optional<std::uint64_t> {
    std::vector<std::uint64_t> of;
    for (const auto& [id, s] : jobs) {
      if (s == state) of.push_back(id);
    }
    if (of.empty()) return std::nullopt;
    return of[random() % of.size()];
  };
  const auto delay = [&] { return std::to_string(100 + random() % 3 * 100); };
  for (int step = 0; step < 4000; ++step) {
    const auto roll = random() % 10;
    if (roll < 4) {
      const auto n = 1 + random() % 8;
      std::string batch;
      std::vector<State> states;
      for (std::uint64_t i = 0; i < n; ++i) {
        const bool ready = random() % 5 == 0;
        batch += ready ? put_command("r", 0, 0, 600) : "put 0 " + delay() + " 600 1\r\nd\r\n";
        states.push_back(ready ? State::kReady : State::kDelayed);
      }
      ASSERT_TRUE(client.send(batch));
      for (const State state : states) {
        const auto id = inserted_id(client.reply());
        ASSERT_TRUE(id);
        jobs[*id] = state;
      }
      continue;
    }
    if (roll == 4) {
      const std::string reply = client.call("reserve-with-timeout 0\r\n");
      if (reply.rfind("RESERVED ", 0) == 0) jobs[std::stoull(reply.substr(9))] = State::kReserved;
      continue;
    }
    if (roll == 5) {
      if (const auto id = pick(State::kReserved)) {
        ASSERT_EQ(client.call("release " + std::to_string(*id) + " 0 " + delay() + "\r\n"),
                  "RELEASED\r\n");
        jobs[*id] = State::kDelayed;
      }
      continue;
    }
    if (roll == 6) {
      if (const auto id = pick(State::kReserved)) {
        ASSERT_EQ(client.call("touch " + std::to_string(*id) + "\r\n"), "TOUCHED\r\n");
      }
      continue;
    }
    if (roll == 7) {
      if (const auto id = pick(State::kReserved)) {
        ASSERT_EQ(client.call("bury " + std::to_string(*id) + " 0\r\n"), "BURIED\r\n");
        jobs[*id] = State::kBuried;
      }
      continue;
    }
    if (roll == 8) {
      const auto id = random() % 2 == 0 ? pick(State::kDelayed) : pick(State::kBuried);
      if (id) {
        ASSERT_EQ(client.call("kick-job " + std::to_string(*id) + "\r\n"), "KICKED\r\n");
        jobs[*id] = State::kReady;
      }
      continue;
    }
    if (jobs.empty()) continue;
    auto it = jobs.begin();
    std::advance(it, static_cast<std::ptrdiff_t>(random() % jobs.size()));
    if (it->second == State::kReserved || random() % 3 != 0) continue;
    ASSERT_EQ(client.call("delete " + std::to_string(it->first) + "\r\n"), "DELETED\r\n");
    jobs.erase(it);
  }
  // Then all but 150 delayed jobs deleted in random order, in pipelined batches of 1 to 16
  // (one call each): pages fall under a quarter full one at a time and several in one call.
  std::vector<std::uint64_t> doomed;
  for (const auto& [id, state] : jobs) {
    if (state == State::kDelayed) doomed.push_back(id);
  }
  std::shuffle(doomed.begin(), doomed.end(), random);
  while (doomed.size() > 150) {
    const auto n = std::min<std::size_t>(1 + random() % 16, doomed.size() - 150);
    std::string batch;
    for (std::size_t i = doomed.size() - n; i < doomed.size(); ++i) {
      batch += "delete " + std::to_string(doomed[i]) + "\r\n";
    }
    ASSERT_TRUE(client.send(batch));
    for (std::size_t i = 0; i < n; ++i) {
      ASSERT_EQ(client.reply(), "DELETED\r\n");
      jobs.erase(doomed.back());
      doomed.pop_back();
    }
  }
  std::set<std::uint64_t> delayed;
  std::set<std::uint64_t> reserved;
  for (const auto& [id, state] : jobs) {
    if (state == State::kDelayed) delayed.insert(id);
    if (state == State::kReserved) reserved.insert(id);
  }
  const auto index = call(redis_.port(), {"ZRANGE", "pg:{0}:ti", "0", "-1"});
  const auto fields = call(redis_.port(), {"HKEYS", "pg:{0}:tp"});
  ASSERT_EQ(index.elements.size(), fields.elements.size());
  std::set<std::uint64_t> entries;
  std::pair<std::uint64_t, std::uint64_t> previous{0, 0};
  const auto be = [](std::string_view bytes) {
    std::uint64_t value = 0;
    for (const char c : bytes) value = value << 8 | static_cast<unsigned char>(c);
    return value;
  };
  for (const auto& name : index.elements) {
    const std::string page = call(redis_.port(), {"HGET", "pg:{0}:tp", name.str}).str;
    ASSERT_FALSE(page.empty());
    ASSERT_EQ(page.size() % 13, 0u);
    ASSERT_LE(page.size() / 13, 128u);
    // Named at or before its first entry, after every entry of the page before it.
    const std::pair<std::uint64_t, std::uint64_t> named{be(name.str.substr(0, 6)),
                                                        be(name.str.substr(6, 7))};
    EXPECT_LT(previous, named) << "a page named at or before an entry of the page before";
    EXPECT_LE(named, std::make_pair(be(page.substr(0, 6)), be(page.substr(6, 7))));
    for (std::size_t at = 0; at < page.size(); at += 13) {
      const std::pair<std::uint64_t, std::uint64_t> entry{be(page.substr(at, 6)),
                                                          be(page.substr(at + 6, 7))};
      EXPECT_LT(previous, entry) << "entries out of order, or pages overlapping";
      previous = entry;
      EXPECT_TRUE(entries.insert(entry.second).second) << "two timers of job " << entry.second;
    }
  }
  expect_no_page_under_a_quarter();
  // A few reservations at the end, so that some are held when the sets are read.
  for (int i = 0; i < 3; ++i) {
    const std::string reply = client.call("reserve-with-timeout 0\r\n");
    if (reply.rfind("RESERVED ", 0) == 0) reserved.insert(std::stoull(reply.substr(9)));
  }
  EXPECT_EQ(entries, delayed);
  EXPECT_GT(delayed.size(), 128u);  // more than a page
  std::set<std::uint64_t> lapses;
  for (const auto& member : call(redis_.port(), {"ZRANGE", "pg:{0}:t", "0", "-1"}).elements) {
    lapses.insert(std::stoull(member.str));
  }
  EXPECT_EQ(lapses, reserved);
  EXPECT_FALSE(reserved.empty());
}

// The target for Redis's memory: a pending job with a 100-byte body costs at most 250 bytes
// (used_memory before and after 20,000 puts due in an hour, over the default 128 shards).
TEST(RedisMemoryTest, APendingJobWithA100ByteBodyCostsAtMost250BytesOfRedis) {
  TempDir dir;
  RedisServer redis(dir.path() / "redis");
  ASSERT_EQ(redis.start(), "");
  ServerProcess server(dir.path(), {"--redis", redis.address(), "--redis-prefix", "mem"});
  ASSERT_EQ(server.start(), "");
  Client producer(server.port());
  const auto used = [&] {
    const std::string info = call(redis.port(), {"INFO", "memory"}).str;
    const auto at = info.find("used_memory:");
    return std::stoll(info.substr(at + 12));
  };
  // One put first: the tube's counters and names exist before the count starts.
  ASSERT_TRUE(inserted_id(producer.call(put_command(std::string(100, 'x'), 0, 3600))));
  const auto before = used();
  constexpr int kJobs = 20000;
  constexpr int kBatch = 100;
  for (int sent = 0; sent < kJobs; sent += kBatch) {
    std::string batch;
    for (int i = 0; i < kBatch; ++i) batch += put_command(std::string(100, 'x'), 0, 3600);
    ASSERT_TRUE(producer.send(batch));
    for (int i = 0; i < kBatch; ++i) ASSERT_TRUE(inserted_id(producer.reply()));
  }
  const double per_job = static_cast<double>(used() - before) / kJobs;
  EXPECT_LE(per_job, 250.0);
  EXPECT_GE(per_job, 100.0);  // the bodies are in there
  std::cout << "bytes of Redis per pending job: " << per_job << "\n";
}

// A layout 1 record: struct '>BBI4ddddI4I4I4I4I4I4' (flags, state, priority, due, deadline,
// created, delay, TTR, five counters), four '>I4'-length strings (tube, key, group, holder), the
// body: what delayqd wrote before layout 2.
std::string layout1_record(int state, double due, double created, std::string_view tube,
                           std::string_view key, std::string_view body, double deadline = 0) {
  std::string out;
  const auto be = [&out](std::uint64_t value, int bytes) {
    for (int shift = 8 * (bytes - 1); shift >= 0; shift -= 8) {
      out.push_back(static_cast<char>((value >> shift) & 0xff));
    }
  };
  be(0, 1);
  be(static_cast<std::uint64_t>(state), 1);
  be(1024, 4);
  for (const double time : {due, deadline, created, due > created ? due - created : 0.0}) {
    be(std::bit_cast<std::uint64_t>(time), 8);
  }
  be(60, 4);
  for (int counter = 0; counter < 5; ++counter) be(0, 4);
  for (const std::string_view text :
       {tube, key, std::string_view(),
        deadline > 0 ? std::string_view("gone:1") : std::string_view()}) {
    be(text.size(), 4);
    out.append(text);
  }
  out.append(body);
  return out;
}

// Jobs stored by a layout 1 delayqd (written here by hand, as it wrote them: records, the timer
// sorted set, the ready set, counters) are upgraded when a newer node starts: the timers move
// into pages, the delayed job fires on time, the ready one is reserved, one is found by its
// key; the cluster is marked layout 2. Before that, a live node of layout 1 holds the start up.
TEST(RedisUpgradeTest, ALayoutOneClusterIsUpgradedAtStartOnceItsNodesAreGone) {
  TempDir dir;
  RedisServer redis(dir.path() / "redis");
  ASSERT_EQ(redis.start(), "");
  const auto port = redis.port();
  ASSERT_EQ(call(port, {"HSET", "up:meta", "shards", "2"}).integer, 1);
  const auto now = static_cast<double>(unix_ms());
  const double soon = now + 6000.25;
  const double later = now + 3600000.5;
  // A layout 1 job: its record, and its timer in t if it has one (due time or TTR end).
  const auto put_v1 = [&](int shard, int id, const std::string& record, double timer) {
    const std::string base = "up:{" + std::to_string(shard) + "}";
    ASSERT_EQ(call(port, {"HSET", base + ":j", std::to_string(id), record}).integer, 1);
    if (timer == 0) return;
    const auto score = std::to_string(static_cast<std::int64_t>(std::ceil(timer)));
    ASSERT_EQ(call(port, {"ZADD", base + ":t", score, std::to_string(id)}).integer, 1);
  };
  // Shard 0: job 2 ready, job 4 delayed an hour with a key. Shard 1: job 3 due in 6 s, job 5
  // reserved by a node that is gone, its TTR ending in 5 s.
  const double lapse = now + 5000.5;
  ASSERT_NO_FATAL_FAILURE(put_v1(0, 2, layout1_record(1, now, now, "default", "", "ready"), 0));
  ASSERT_EQ(call(port, {"ZADD", "up:{0}:r", "0",
                        std::string("default\0", 8) + "0000001024" + std::string("\0", 1) +
                            "0000000000000002"})
                .integer,
            1);
  ASSERT_NO_FATAL_FAILURE(
      put_v1(0, 4, layout1_record(0, later, now, "default", "k1", "hour"), later));
  ASSERT_EQ(call(port, {"HSET", "up:{0}:k", std::string("default\0k1", 10), "4"}).integer, 1);
  ASSERT_NO_FATAL_FAILURE(put_v1(1, 3, layout1_record(0, soon, now, "default", "", "soon"), soon));
  ASSERT_NO_FATAL_FAILURE(
      put_v1(1, 5, layout1_record(2, now, now, "default", "", "held", lapse), lapse));
  // And 1,500 more delayed an hour in shard 0 (ids 1002 to 4000), more than one upgrade call
  // takes.
  ASSERT_EQ(
      call(port, {"EVAL",
                  "for i = 1, 1500 do redis.call('HSET', KEYS[1], 1000 + 2 * i, ARGV[1]); "
                  "redis.call('ZADD', KEYS[2], ARGV[2], 1000 + 2 * i) end return 1",
                  "2", "up:{0}:j", "up:{0}:t", layout1_record(0, later, now, "default", "", "more"),
                  std::to_string(static_cast<std::int64_t>(std::ceil(later)))})
          .integer,
      1);
  ASSERT_EQ(call(port, {"HSET", "up:{0}:c", std::string("default\0d", 9), "1501"}).integer, 1);
  ASSERT_EQ(call(port, {"HSET", "up:{1}:c", std::string("default\0d", 9), "1",
                        std::string("default\0v", 9), "1"})
                .integer,
            2);
  for (const std::string shard : {"0", "1"}) {
    ASSERT_EQ(call(port, {"SADD", "up:{" + shard + "}:tubes", "default"}).integer, 1);
    ASSERT_EQ(call(port, {"SET", "up:{" + shard + "}:seq", "2000"}).str, "OK");
  }
  // A node of layout 1 alive (its announcement lasts another 2 s): the new one waits for it.
  const auto redis_now_ms = [&] {
    const auto time = call(port, {"TIME"});
    return std::stoll(time.elements.at(0).str) * 1000 + std::stoll(time.elements.at(1).str) / 1000;
  };
  ASSERT_EQ(
      call(port, {"ZADD", "up:nodes", std::to_string(redis_now_ms() + 2000), "old-node"}).integer,
      1);
  const auto started = Clock::now();
  ServerProcess server(dir.path(), {"--redis", redis.address(), "--redis-prefix", "up"});
  ASSERT_EQ(server.start(), "");
  EXPECT_GE(Clock::now() - started, 1500ms);  // it waited for the old node's lease to lapse
  EXPECT_EQ(call(port, {"HGET", "up:meta", "layout"}).str, "2");
  EXPECT_EQ(call(port, {"EXISTS", "up:{0}:t"}).integer, 0);
  std::size_t entries = 0;
  for (const auto& page : call(port, {"HVALS", "up:{0}:tp"}).elements)
    entries += page.str.size() / 13;
  EXPECT_EQ(entries, 1501u);
  EXPECT_EQ(call(port, {"ZRANGE", "up:{1}:t", "0", "-1"}).elements.size(), 1u);  // job 5's TTR
  EXPECT_GE(call(port, {"ZCARD", "up:{0}:ti"}).integer, 12);  // pages of at most 128
  EXPECT_EQ(call(port, {"ZCARD", "up:{1}:ti"}).integer, 1);

  Client client(server.port());
  EXPECT_EQ(client.call("peek 4\r\n"), job_reply("FOUND", 4, "hour"));
  EXPECT_EQ(client.call("peek 4000\r\n"), job_reply("FOUND", 4000, "more"));
  const std::string stats = client.call("stats-job 4\r\n");
  EXPECT_NE(stats.find("state: delayed"), std::string::npos) << stats;
  EXPECT_EQ(client.call("reserve-with-timeout 0\r\n"), job_reply("RESERVED", 2, "ready"));
  EXPECT_EQ(client.call("delete 2\r\n"), "DELETED\r\n");
  // Job 5's TTR lapses (it comes back ready, reserved here), then job 3 falls due.
  EXPECT_EQ(client.call("reserve-with-timeout 10\r\n", Millis{15000}),
            job_reply("RESERVED", 5, "held"));
  EXPECT_EQ(client.call("delete 5\r\n"), "DELETED\r\n");
  const std::string reply = client.call("reserve-with-timeout 10\r\n", Millis{15000});
  EXPECT_EQ(reply, job_reply("RESERVED", 3, "soon"));
  const double at_ms = static_cast<double>(std::chrono::duration_cast<std::chrono::microseconds>(
                                               std::chrono::system_clock::now().time_since_epoch())
                                               .count()) /
                       1000.0;
  EXPECT_GE(at_ms, soon) << "job 3 came out early";
  EXPECT_EQ(client.call("delete 3\r\n"), "DELETED\r\n");
  // The hour's job: kicked, then reserved.
  EXPECT_EQ(client.call("kick-job 4\r\n"), "KICKED\r\n");
  EXPECT_EQ(client.call("reserve-with-timeout 5\r\n", Millis{10000}),
            job_reply("RESERVED", 4, "hour"));
}

// A newer layout than this build's is refused at start, and nothing is changed.
TEST(RedisUpgradeTest, ANewerLayoutIsRefused) {
  TempDir dir;
  RedisServer redis(dir.path() / "redis");
  ASSERT_EQ(redis.start(), "");
  ASSERT_EQ(call(redis.port(), {"HSET", "nw:meta", "shards", "2", "layout", "3"}).integer, 2);
  ServerProcess server(dir.path(), {"--redis", redis.address(), "--redis-prefix", "nw"});
  EXPECT_NE(server.start(Millis{10000}), "");  // (its reason, on delayqd's stderr, names layout 3)
  EXPECT_EQ(call(redis.port(), {"HGET", "nw:meta", "layout"}).str, "3");
  EXPECT_EQ(call(redis.port(), {"EXISTS", "nw:nodes"}).integer, 0);  // it never took part
}

}  // namespace
}  // namespace delayq::testing
