// server.h — the HTTP/1.1 front-end (Boost.Beast) over a broker::Broker, on the broker's
// executor: an acceptor and one connection object per client, keep-alive, one request at a time
// per connection (pipelined requests wait their turn). Each request goes to the Api; its answer
// comes when the broker completes it, once what it reports is durable, so a 201 means the job
// is on disk. While a long-poll reserve waits, the connection watches its socket: a client that
// goes away ends the wait, and a reserved job whose answer cannot be written is ready again.
// Limits (ServerOptions) answer 413 and 431; an idle connection is closed after idle_timeout.
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl/context.hpp>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <unordered_set>
#include <vector>

#include "broker/broker.h"
#include "front/families.h"
#include "front/http/api.h"
#include "front/listener.h"

namespace delayq::front::http {

struct ServerOptions {
  // An IPv4 or IPv6 address, or a host name (bound at the first of its addresses that can be).
  // Default: 127.0.0.1 (loopback only).
  std::string address = "127.0.0.1";
  std::uint16_t port = 8080;  // Default: 8080. 0 picks a free port.
  // Largest request header block. Default: 8 KiB; larger ones get 431.
  std::uint32_t max_header_bytes = 8192;
  // Largest request body. Default: 1 MiB (a 65535-byte job in base64 and JSON fits with room);
  // larger ones get 413. The job body limit itself is ApiOptions::max_job_bytes.
  std::uint64_t max_body_bytes = 1 << 20;
  // Connections beyond this are answered 503 (closed at once over TLS). Default: 10000.
  std::size_t max_connections = 10000;
  // A connection with no request in progress for this long is closed. Default: 60 s.
  std::chrono::seconds idle_timeout{60};
  // TLS: a PEM certificate chain and its PEM private key, both or neither (TLS 1.2 and up).
  // Default: none, plain HTTP.
  std::string tls_cert_file;
  std::string tls_key_file;
  ApiOptions api;
  // Where the server and its API count (operations, connections) and the API reads the other
  // layers' counts (/v1/stats); null: a registry of its own. Must outlive the server.
  metrics::Registry* metrics = nullptr;
};

class Connection;

class Server {
 public:
  Server(boost::asio::io_context& io, broker::Broker& broker, ServerOptions options);
  // A server with no broker yet, to listen while the broker starts (a recovery of many jobs
  // takes minutes): GET /healthz answers 200, and every other request 503 with code
  // "starting" and the progress last set by starting(). serve() then hands every request after
  // it to the API over `broker`.
  Server(boost::asio::io_context& io, ServerOptions options);
  void starting(std::string message, std::string progress_json = "{}");
  void serve(broker::Broker& broker);
  [[nodiscard]] bool serving() const noexcept { return api_ != nullptr; }
  // The answer to a request that comes before serve().
  [[nodiscard]] Response starting_answer(std::string_view method, std::string_view target) const;
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // Binds and starts accepting. Errors: the address or port cannot be bound.
  Status start();
  // Where it listens, as ADDR:PORT ([ADDR]:PORT for IPv6; the chosen port after port 0).
  [[nodiscard]] std::string local_address() const;
  // Stops accepting; a reserve waiting on a connection is answered 503 `stopping` (Retry-After:
  // 1): the server is going away. Requests after it are served, each closing its connection,
  // but one that would wait (a long-poll) is answered 503 `stopping` at once too.
  void stop_accepting();
  [[nodiscard]] bool is_stopping() const noexcept { return stopping_; }
  // Stops accepting and closes every connection.
  void stop();

  [[nodiscard]] Api& api() { return *api_; }
  [[nodiscard]] ProtocolCounts& counts() { return counts_; }
  [[nodiscard]] const ServerOptions& options() const noexcept { return options_; }
  void closed(const std::shared_ptr<Connection>& connection) { connections_.erase(connection); }

 private:
  broker::Broker* broker_ = nullptr;  // null until serve()
  ServerOptions options_;
  std::unique_ptr<metrics::Registry> own_metrics_;  // when the options give none
  metrics::Registry& metrics_;
  ProtocolCounts counts_;
  std::unique_ptr<Api> api_;
  std::string starting_message_ = "the server is starting";
  std::string starting_progress_ = "{}";
  std::unique_ptr<boost::asio::ssl::context> tls_;  // set by start() when TLS is asked for
  Listener listener_;
  std::unordered_set<std::shared_ptr<Connection>> connections_;
  bool stopping_ = false;  // stop_accepting() was called
};

}  // namespace delayq::front::http
