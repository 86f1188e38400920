#include "redis_servers.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <thread>

#include "protocol/server_process.h"

namespace delayq::testing {
namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

std::uint16_t free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t size = sizeof address;
  std::uint16_t port = 0;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&address), size) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &size) == 0) {
    port = ntohs(address.sin_port);
  }
  ::close(fd);
  return port;
}

redis::Reply call(std::uint16_t port, const redis::Command& command, Millis timeout) {
  Client client(port);
  if (!client.connected())
    return redis::Reply::error("<cannot connect to port " + std::to_string(port) + ">");
  std::string wire;
  command.encode(wire);
  if (!client.send(wire))
    return redis::Reply::error("<cannot send to port " + std::to_string(port) + ">");
  redis::ReplyReader reader;
  const auto deadline = Clock::now() + timeout;
  // RESP is read line by line: a bulk string holding "\r\n" arrives in pieces, which the reader
  // puts together.
  while (Clock::now() < deadline) {
    auto line = client.read_line(std::chrono::duration_cast<Millis>(deadline - Clock::now()));
    if (!line) break;
    reader.feed(*line);
    auto next = reader.next();
    if (!next.is_ok()) return redis::Reply::error("<" + next.status().to_string() + ">");
    if (next.value()) return std::move(*next.value());
  }
  return redis::Reply::error("<no reply to " + command.name() + " from port " +
                             std::to_string(port) + ">");
}

namespace {

// Forks and execs argv[0] (found on PATH) with stdout and stderr to `log`; the child dies with
// the test process. Returns its pid, or -1.
pid_t spawn(std::vector<std::string> argv, const std::string& log) {
  const pid_t pid = ::fork();
  if (pid != 0) return pid;
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
  if (fd >= 0) {
    ::dup2(fd, STDOUT_FILENO);
    ::dup2(fd, STDERR_FILENO);
  }
  std::vector<char*> raw;
  for (auto& value : argv) raw.push_back(value.data());
  raw.push_back(nullptr);
  ::execvp(raw[0], raw.data());
  std::perror("exec");
  std::_Exit(127);
}

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace

// --- RedisServer

RedisServer::RedisServer(fs::path dir, std::vector<std::string> args)
    : dir_(std::move(dir)), args_(std::move(args)), port_(free_port()) {
  fs::create_directories(dir_);
}

RedisServer::~RedisServer() {
  kill9();
}

// A port from free_port() is free when it is picked, not when the server binds it: a client
// socket of another test may take it in between (both come from the ephemeral range). A start
// that fails on a taken port is retried on new ports, a few times.
std::string RedisServer::start(Millis timeout) {
  constexpr int kAttempts = 5;
  for (int attempt = 1;; ++attempt) {
    std::string error = start_once(timeout);
    if (error.find("Address already in use") == std::string::npos || attempt == kAttempts) {
      return error;
    }
    port_ = free_port();
    for (std::size_t i = 0; i + 1 < args_.size(); ++i) {
      if (args_[i] == "--cluster-port") args_[i + 1] = std::to_string(free_port());
    }
  }
}

std::string RedisServer::start_once(Millis timeout) {
  std::vector<std::string> argv = {"redis-server", "--port",    std::to_string(port_),
                                   "--bind",       "127.0.0.1", "--dir",
                                   dir_.string(),  "--save",    "",
                                   "--appendonly", "no"};
  argv.insert(argv.end(), args_.begin(), args_.end());
  const auto log = (dir_ / "redis.log").string();
  pid_ = spawn(argv, log);
  if (pid_ < 0) return "fork failed";
  const auto deadline = Clock::now() + timeout;
  while (Clock::now() < deadline) {
    int status = 0;
    if (::waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      return "redis-server exited at start: " + read_file(log);
    }
    const auto reply = call(port_, redis::Command{"PING"}, Millis{500});
    // The answer must be this server's: a server of another test that took the port first
    // answers too, while this one is failing to bind it (and exits, to be retried above).
    if ((reply.type == redis::ReplyType::kStatus || reply.error_code() == "LOADING") &&
        call(port_, redis::Command{"INFO", "server"}, Millis{500})
                .str.find("\nprocess_id:" + std::to_string(pid_) + "\r") != std::string::npos) {
      return "";
    }
    std::this_thread::sleep_for(Millis{20});
  }
  return "redis-server on port " + std::to_string(port_) + " did not answer within " +
         std::to_string(timeout.count()) + " ms";
}

void RedisServer::kill9() {
  if (pid_ <= 0) return;
  ::kill(pid_, SIGKILL);
  int status = 0;
  ::waitpid(pid_, &status, 0);
  pid_ = -1;
}

void RedisServer::pause() {
  if (pid_ > 0) ::kill(pid_, SIGSTOP);
}

void RedisServer::resume() {
  if (pid_ > 0) ::kill(pid_, SIGCONT);
}

// --- RedisCluster

RedisCluster::RedisCluster(fs::path dir, int primaries, int replicas_per_primary,
                           std::vector<std::string> args)
    : dir_(std::move(dir)), primaries_(primaries), replicas_(replicas_per_primary) {
  const int count = primaries * (1 + replicas_per_primary);
  for (int i = 0; i < count; ++i) {
    std::vector<std::string> node_args = {"--cluster-enabled",      "yes",
                                          "--cluster-config-file",  "nodes.conf",
                                          "--cluster-port",         std::to_string(free_port()),
                                          "--cluster-node-timeout", "2000"};
    node_args.insert(node_args.end(), args.begin(), args.end());
    servers_.push_back(
        std::make_unique<RedisServer>(dir_ / ("node" + std::to_string(i)), std::move(node_args)));
  }
}

std::string RedisCluster::start(Millis timeout) {
  for (auto& server : servers_) {
    if (auto error = server->start(); !error.empty()) return error;
  }
  std::vector<std::string> argv = {"redis-cli", "--cluster", "create"};
  for (auto& server : servers_) argv.push_back(server->address());
  argv.insert(argv.end(), {"--cluster-replicas", std::to_string(replicas_), "--cluster-yes"});
  const auto log = (dir_ / "cluster-create.log").string();
  const pid_t pid = spawn(argv, log);
  const auto deadline = Clock::now() + timeout;
  int status = 0;
  while (::waitpid(pid, &status, WNOHANG) == 0) {
    if (Clock::now() > deadline) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      return "redis-cli --cluster create did not finish in time";
    }
    std::this_thread::sleep_for(Millis{50});
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    return "redis-cli --cluster create failed: " + read_file(log);
  }
  const auto known = "cluster_known_nodes:" + std::to_string(servers_.size());
  for (auto& server : servers_) {
    for (;;) {
      const auto info = call(server->port(), redis::Command{"CLUSTER", "INFO"}).str;
      if (info.find("cluster_state:ok") != std::string::npos &&
          info.find(known) != std::string::npos) {
        break;
      }
      if (Clock::now() > deadline) return "node " + server->address() + " is not ready: " + info;
      std::this_thread::sleep_for(Millis{50});
    }
  }
  return "";
}

std::string RedisCluster::seeds() const {
  std::string list;
  for (const auto& server : servers_) {
    if (!list.empty()) list += ",";
    list += server->address();
  }
  return list;
}

RedisServer* RedisCluster::primary_of(std::uint16_t slot) {
  for (auto& asked : servers_) {
    if (asked->pid() <= 0) continue;
    const auto slots = call(asked->port(), redis::Command{"CLUSTER", "SLOTS"});
    for (const auto& range : slots.elements) {
      if (range.elements.size() < 3 || range.elements[0].integer > slot ||
          range.elements[1].integer < slot) {
        continue;
      }
      const auto port = range.elements[2].elements[1].integer;
      for (auto& server : servers_) {
        if (server->port() == port) return server.get();
      }
    }
    return nullptr;
  }
  return nullptr;
}

std::string RedisCluster::node_id(const RedisServer& server) {
  return call(server.port(), redis::Command{"CLUSTER", "MYID"}).str;
}

}  // namespace delayq::testing
