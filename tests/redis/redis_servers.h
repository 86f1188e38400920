// redis_servers.h — real redis-server processes for the Redis tests: single servers, and a
// cluster of them made with `redis-cli --cluster create`, on free loopback ports, each in its
// own directory, stopped by PID (SIGKILL if the test process dies first). Also call(), a
// blocking RESP round trip the tests use to set up and inspect the servers behind the client
// under test. Every wait is bounded; a failure comes back as text for ASSERT_EQ(..., "").
// Needs Debian's redis-server and redis-cli on PATH (scripts/install-deps.sh).
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "redis/reply.h"

namespace delayq::testing {

using Millis = std::chrono::milliseconds;

// A loopback TCP port no one listens on at the moment of asking.
[[nodiscard]] std::uint16_t free_port();

// One command to 127.0.0.1:port and its reply; a failure to connect or to hear back reads as an
// error reply "<...>" saying so.
[[nodiscard]] redis::Reply call(std::uint16_t port, const redis::Command& command,
                                Millis timeout = Millis{5000});

class RedisServer {
 public:
  // `args` go to redis-server after the harness's own (port, bind, dir, no snapshots).
  RedisServer(std::filesystem::path dir, std::vector<std::string> args = {});
  ~RedisServer();  // SIGKILL and reap, if running
  RedisServer(const RedisServer&) = delete;
  RedisServer& operator=(const RedisServer&) = delete;

  // Starts it and waits until it answers PING (any answer, LOADING too). "" or why not. If its
  // port (or its cluster bus port) was taken since it was picked, it starts on new ones.
  [[nodiscard]] std::string start(Millis timeout = Millis{10000});
  // SIGKILL and reap.
  void kill9();
  // SIGSTOP / SIGCONT: a node that stops answering without closing its connections.
  void pause();
  void resume();

  [[nodiscard]] std::uint16_t port() const noexcept { return port_; }
  [[nodiscard]] std::string address() const { return "127.0.0.1:" + std::to_string(port_); }
  [[nodiscard]] pid_t pid() const noexcept { return pid_; }
  [[nodiscard]] const std::filesystem::path& dir() const noexcept { return dir_; }

 private:
  [[nodiscard]] std::string start_once(Millis timeout);

  std::filesystem::path dir_;
  std::vector<std::string> args_;
  std::uint16_t port_;
  pid_t pid_ = -1;
};

// primaries x (1 + replicas) cluster-enabled servers under `dir`, joined into one cluster with
// the slots spread evenly over the primaries.
class RedisCluster {
 public:
  RedisCluster(std::filesystem::path dir, int primaries, int replicas_per_primary,
               std::vector<std::string> args = {});

  // Starts every server, creates the cluster, and waits until every node says it is ok and
  // knows every other. "" or why not.
  [[nodiscard]] std::string start(Millis timeout = Millis{60000});

  [[nodiscard]] std::vector<std::unique_ptr<RedisServer>>& servers() noexcept { return servers_; }
  // "127.0.0.1:p1,127.0.0.1:p2,..."
  [[nodiscard]] std::string seeds() const;
  // The server that serves `slot` now, as CLUSTER SLOTS on the first live server says; null if
  // none does.
  [[nodiscard]] RedisServer* primary_of(std::uint16_t slot);
  // Its 40-character node id (CLUSTER MYID).
  [[nodiscard]] static std::string node_id(const RedisServer& server);

 private:
  std::filesystem::path dir_;
  int primaries_;
  int replicas_;
  std::vector<std::unique_ptr<RedisServer>> servers_;
};

}  // namespace delayq::testing
