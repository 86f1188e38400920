// server.h — the beanstalkd front-end: a TCP acceptor and one Session per connection, over a
// local::Node, all on the node's io_context thread. A session reads bytes, parses commands
// (parser.h), runs each through one handler per verb (session.cc), and queues the replies; a
// reply leaves only once the batch holding everything before it is durable (Node::barrier()),
// and in command order. A session waiting in reserve keeps reading (to see the client go) but
// runs no further commands until its wait ends, as beanstalkd. Limits are in ServerOptions.
// Protocol and every difference from beanstalkd: docs/protocol.md
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <unordered_set>

#include "broker/local/node.h"
#include "front/beanstalk/parser.h"
#include "front/listener.h"

namespace delayq::front::beanstalk {

struct ServerOptions {
  // An IPv4 or IPv6 address, or a host name (bound at the first of its addresses that can be).
  // Default: 127.0.0.1 (loopback only).
  std::string address = "127.0.0.1";
  std::uint16_t port = 11300;  // Default: 11300, beanstalkd's. 0 picks a free port.
  // Largest job body in bytes; larger puts get JOB_TOO_BIG. Default: 65535, as beanstalkd.
  std::size_t max_job_bytes = 65535;
  // Connections beyond this are accepted and closed at once. Default: 10000.
  std::size_t max_connections = 10000;
};

class Session;

class Server {
 public:
  Server(boost::asio::io_context& io, local::Node& node, ServerOptions options);
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // Binds and starts accepting. Errors: the address or port cannot be bound.
  Status start();
  // Where it listens, as ADDR:PORT ([ADDR]:PORT for IPv6; the chosen port after port 0).
  [[nodiscard]] std::string local_address() const;
  // Stops accepting new connections; open ones carry on.
  void stop_accepting();
  // Stops accepting and closes every connection.
  void stop();
  // Drain mode (the node's: SIGUSR1, as beanstalkd): puts are refused with DRAINING.
  [[nodiscard]] bool draining() const noexcept { return node_.draining(); }

  [[nodiscard]] local::Node& node() { return node_; }
  [[nodiscard]] const ServerOptions& options() const noexcept { return options_; }
  [[nodiscard]] const ParserLimits& limits() const noexcept { return limits_; }
  [[nodiscard]] std::uint64_t uptime_seconds() const;
  void closed(const std::shared_ptr<Session>& session) { sessions_.erase(session); }

 private:
  void flush_all();

  boost::asio::io_context& io_;
  local::Node& node_;
  ServerOptions options_;
  ParserLimits limits_;
  Listener listener_;
  std::uint64_t durable_listener_ = 0;
  std::unordered_set<std::shared_ptr<Session>> sessions_;
  std::int64_t started_unix_ms_ = 0;
};

}  // namespace delayq::front::beanstalk
