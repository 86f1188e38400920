// client.h — a small blocking HTTP/1.1 client (Boost.Beast) for the `delayq` command-line tool
// and the tests: one keep-alive connection to one server, over TCP or TLS, reopened when the
// server closed it. Each request waits at most `timeout` for its answer. Not thread-safe.
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/asio/ssl/stream.hpp>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>

#include "base/status.h"

namespace delayq::front::http {

struct ClientResponse {
  unsigned status = 0;
  std::string body;
  std::map<std::string, std::string> headers;  // names lower-cased
};

class Client {
 public:
  // url: "http://HOST:PORT", "https://HOST:PORT" (a trailing "/" allowed) or "HOST:PORT" (plain
  // HTTP). Paths are refused (kInvalidArgument), not dropped.
  static Result<std::unique_ptr<Client>> connect_to(std::string_view url);
  // tls: speak TLS, verifying the server's certificate (its chain, and that it names `host`)
  // against the system's certificate authorities, or those of set_ca_file().
  Client(std::string host, std::uint16_t port, bool tls = false);
  // Sent as `Authorization: Bearer <token>` with every request (empty: none).
  void set_token(std::string token) { token_ = std::move(token); }
  // TLS: the PEM file of the authorities to trust instead of the system's (a self-signed
  // server's own certificate, say). Read at the next connection.
  void set_ca_file(std::string path) { ca_file_ = std::move(path); }
  // A header every later request carries (name, value), such as a put's traceparent; an empty
  // value removes it.
  void set_header(std::string name, std::string value);

  Result<ClientResponse> request(std::string_view method, std::string_view target,
                                 std::string_view body = {},
                                 std::chrono::milliseconds timeout = std::chrono::seconds(30));

 private:
  using TlsStream = boost::asio::ssl::stream<boost::asio::ip::tcp::socket>;
  Status open(std::chrono::milliseconds timeout);
  // Runs the loop for at most `timeout`; false (and the connection closed) if `finished` is
  // not set by then.
  bool run(const bool& finished, std::chrono::milliseconds timeout);
  void drop();

  std::string host_;
  std::uint16_t port_;
  bool tls_ = false;
  std::string token_;
  std::string ca_file_;
  std::map<std::string, std::string> headers_;
  boost::asio::io_context io_;
  std::unique_ptr<boost::asio::ip::tcp::socket> socket_;  // plain HTTP
  std::unique_ptr<boost::asio::ssl::context> context_;    // TLS
  std::unique_ptr<TlsStream> stream_;                     // TLS
};

}  // namespace delayq::front::http
