#include "front/http/client.h"

#include <boost/asio/connect.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <cctype>

namespace delayq::front::http {

namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
using boost::asio::ip::tcp;

Result<std::unique_ptr<Client>> Client::connect_to(std::string_view url) {
  if (url.starts_with("https://")) {
    return Status(Code::kInvalidArgument,
                  "https:// is not spoken by this client: reach delayqd over http:// (on its own "
                  "machine, or through a tunnel such as ssh -L)");
  }
  if (url.starts_with("http://")) {
    url.remove_prefix(7);
  } else if (url.find("://") != std::string_view::npos) {
    return Status(Code::kInvalidArgument,
                  "bad server address '" + std::string(url) + "': expected http://HOST:PORT");
  }
  if (const auto slash = url.find('/'); slash != std::string_view::npos) {
    if (slash + 1 != url.size()) {
      return Status(Code::kInvalidArgument, "bad server address '" + std::string(url) +
                                                "': a path after HOST:PORT is not supported");
    }
    url = url.substr(0, slash);
  }
  const auto colon = url.rfind(':');
  if (colon == std::string_view::npos || colon == 0 || colon + 1 == url.size()) {
    return Status(Code::kInvalidArgument,
                  "bad server address '" + std::string(url) + "': expected http://HOST:PORT");
  }
  unsigned long port = 0;
  for (const char c : url.substr(colon + 1)) {
    if (!std::isdigit(static_cast<unsigned char>(c)) || port > 65535) {
      return Status(Code::kInvalidArgument, "bad port in '" + std::string(url) + "'");
    }
    port = port * 10 + static_cast<unsigned long>(c - '0');
  }
  if (port == 0 || port > 65535) {
    return Status(Code::kInvalidArgument, "bad port in '" + std::string(url) + "'");
  }
  return std::make_unique<Client>(std::string(url.substr(0, colon)),
                                  static_cast<std::uint16_t>(port));
}

Client::Client(std::string host, std::uint16_t port) : host_(std::move(host)), port_(port) {}

Status Client::open() {
  beast::error_code error;
  tcp::resolver resolver(io_);
  const auto endpoints = resolver.resolve(host_, std::to_string(port_), error);
  if (error) return {Code::kIOError, "cannot resolve " + host_ + ": " + error.message()};
  auto socket = std::make_unique<tcp::socket>(io_);
  boost::asio::connect(*socket, endpoints, error);
  if (error) {
    return {Code::kIOError,
            "cannot connect to " + host_ + ":" + std::to_string(port_) + ": " + error.message()};
  }
  socket->set_option(tcp::no_delay(true), error);
  socket_ = std::move(socket);
  return Status::ok();
}

Result<ClientResponse> Client::request(std::string_view method, std::string_view target,
                                       std::string_view body, std::chrono::milliseconds timeout) {
  bhttp::request<bhttp::string_body> request(bhttp::string_to_verb(method), target, 11);
  request.set(bhttp::field::host, host_);
  request.set(bhttp::field::user_agent, "delayq");
  if (!token_.empty()) request.set(bhttp::field::authorization, "Bearer " + token_);
  if (!body.empty()) request.set(bhttp::field::content_type, "application/json");
  request.body() = std::string(body);
  request.prepare_payload();

  // One retry: a kept-alive connection the server has closed since fails on first use.
  for (int attempt = 0; attempt < 2; ++attempt) {
    const bool fresh = socket_ == nullptr;
    if (fresh) {
      if (Status s = open(); !s.is_ok()) return s;
    }
    // Write and read asynchronously and run the loop for at most `timeout`: a blocking read
    // on a socket would wait for ever (Asio polls again on EAGAIN, whatever SO_RCVTIMEO says).
    beast::error_code error;
    bool finished = false;
    beast::flat_buffer buffer;
    bhttp::response_parser<bhttp::string_body> parser;
    parser.body_limit(64 << 20);
    bhttp::async_write(*socket_, request, [&](beast::error_code written, std::size_t) {
      if (written) {
        error = written;
        finished = true;
        return;
      }
      bhttp::async_read(*socket_, buffer, parser, [&](beast::error_code read, std::size_t) {
        error = read;
        finished = true;
      });
    });
    io_.restart();
    io_.run_for(timeout);
    if (!finished) {
      socket_->close(error);
      io_.restart();
      io_.run();  // the cancelled handlers
      socket_.reset();
      return Status(Code::kTimedOut, "no answer from " + host_ + ":" + std::to_string(port_) +
                                         " within " + std::to_string(timeout.count()) + " ms");
    }
    if (error) {
      socket_.reset();
      if (!fresh &&
          (error == bhttp::error::end_of_stream || error == boost::asio::error::connection_reset ||
           error == boost::asio::error::broken_pipe)) {
        continue;
      }
      return Status(Code::kIOError,
                    std::string(method) + " " + std::string(target) + ": " + error.message());
    }
    auto& message = parser.get();
    ClientResponse response;
    response.status = message.result_int();
    response.body = std::move(message.body());
    for (const auto& field : message) {
      std::string name(field.name_string());
      for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      response.headers[name] = std::string(field.value());
    }
    if (!message.keep_alive()) socket_.reset();
    return response;
  }
  return Status(Code::kIOError, "the server closed the connection");
}

}  // namespace delayq::front::http
