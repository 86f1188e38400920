// client.h — a small blocking HTTP/1.1 client (Boost.Beast) for the `delayq` command-line tool
// and the tests: one keep-alive connection to one server, reopened when the server closed it.
// Each request waits at most `timeout` for its answer. Not thread-safe.
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
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
  // url: "http://HOST:PORT" (a trailing "/" allowed) or "HOST:PORT". https:// and paths are
  // refused (kInvalidArgument), not dropped.
  static Result<std::unique_ptr<Client>> connect_to(std::string_view url);
  Client(std::string host, std::uint16_t port);
  // Sent as `Authorization: Bearer <token>` with every request (empty: none).
  void set_token(std::string token) { token_ = std::move(token); }

  Result<ClientResponse> request(std::string_view method, std::string_view target,
                                 std::string_view body = {},
                                 std::chrono::milliseconds timeout = std::chrono::seconds(30));

 private:
  Status open();

  std::string host_;
  std::uint16_t port_;
  std::string token_;
  boost::asio::io_context io_;
  std::unique_ptr<boost::asio::ip::tcp::socket> socket_;
};

}  // namespace delayq::front::http
