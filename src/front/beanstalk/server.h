// server.h — the beanstalkd front-end: a TCP acceptor and one Connection per client, over a
// broker::Broker, all on the broker's executor. A connection reads bytes into its Conversation
// (conversation.h), which runs each command through one handler per verb (commands.cc) and
// queues the replies; a reply leaves once the broker completes it (when what it reports is
// durable) and in command order. Limits are in ServerOptions.
// Protocol and every difference from beanstalkd: docs/protocol.md
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <unordered_set>

#include "broker/broker.h"
#include "front/beanstalk/conversation.h"
#include "front/listener.h"

namespace delayq::front::beanstalk {

struct ServerOptions {
  // An IPv4 or IPv6 address, or a host name (bound at the first of its addresses that can be).
  // Default: 127.0.0.1 (loopback only).
  std::string address = "127.0.0.1";
  std::uint16_t port = 11300;  // Default: 11300, beanstalkd's. 0 picks a free port.
  // Largest job body in bytes; larger puts get JOB_TOO_BIG. Default: 65535, as beanstalkd.
  std::size_t max_job_bytes = 65535;
  // Connections beyond this are answered OUT_OF_MEMORY and closed. Default: 10000.
  std::size_t max_connections = 10000;
  // A command (its line and its body) must arrive whole within this of its first byte: a
  // connection that trickles one (a slowloris), or stops halfway, is closed (within a second of
  // the timeout, or as its next bytes come). Idle connections and waiting reserves are not
  // concerned. Default: 60 s.
  std::chrono::seconds command_timeout{60};
  // Where the server counts its operations and connections; null: a registry of its own, which
  // nobody reads. Must outlive the server.
  metrics::Registry* metrics = nullptr;
};

class Connection;

class Server {
 public:
  Server(boost::asio::io_context& io, broker::Broker& broker, ServerOptions options);
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

  [[nodiscard]] Context& context() noexcept { return context_; }
  [[nodiscard]] const ServerOptions& options() const noexcept { return options_; }
  void closed(const std::shared_ptr<Connection>& connection) { connections_.erase(connection); }
  // A connection began to wait for the rest of a command: looked at every second until none
  // does, and closed once it has waited past the command timeout.
  void watch_partial();
  // Where connections read their bytes (one at a time: all run on one thread), 16 KiB.
  [[nodiscard]] std::span<char> read_buffer() { return {read_buffer_.get(), kReadBufferBytes}; }

 private:
  ServerOptions options_;
  std::unique_ptr<metrics::Registry> own_metrics_;  // when the options give none
  Context context_;
  Listener listener_;
  std::unordered_set<std::shared_ptr<Connection>> connections_;
  boost::asio::steady_timer partial_look_;
  bool looking_ = false;
  static constexpr std::size_t kReadBufferBytes = 16384;
  std::unique_ptr<char[]> read_buffer_ = std::make_unique<char[]>(kReadBufferBytes);
};

}  // namespace delayq::front::beanstalk
