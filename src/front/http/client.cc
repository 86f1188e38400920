#include "front/http/client.h"

#include <boost/asio/connect.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <cctype>

#include "webhook/tls_peer.h"

namespace delayq::front::http {

namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
using boost::asio::ip::tcp;

Result<std::unique_ptr<Client>> Client::connect_to(std::string_view url) {
  bool tls = false;
  if (url.starts_with("https://")) {
    tls = true;
    url.remove_prefix(8);
  } else if (url.starts_with("http://")) {
    url.remove_prefix(7);
  } else if (url.find("://") != std::string_view::npos) {
    return Status(Code::kInvalidArgument, "bad server address '" + std::string(url) +
                                              "': expected http://HOST:PORT or https://HOST:PORT");
  }
  if (const auto slash = url.find('/'); slash != std::string_view::npos) {
    if (slash + 1 != url.size()) {
      return Status(Code::kInvalidArgument, "bad server address '" + std::string(url) +
                                                "': a path after HOST:PORT is not supported");
    }
    url = url.substr(0, slash);
  }
  // HOST:PORT, an IPv6 address in brackets ([::1]:8080): a host with a ':' outside them, or a
  // bracket left open, is no address to resolve.
  const auto bad_address = [&url](std::string_view why) {
    return Status(Code::kInvalidArgument,
                  "bad server address '" + std::string(url) + "': " + std::string(why));
  };
  std::string_view host_text;
  std::string_view port_text;
  if (url.starts_with('[')) {
    const auto close = url.find(']');
    if (close == std::string_view::npos || close == 1 || close + 1 >= url.size() ||
        url[close + 1] != ':') {
      return bad_address("expected http://[V6 ADDRESS]:PORT");
    }
    host_text = url.substr(1, close - 1);
    port_text = url.substr(close + 2);
  } else {
    const auto colon = url.rfind(':');
    if (colon == std::string_view::npos || colon == 0)
      return bad_address("expected http://HOST:PORT");
    host_text = url.substr(0, colon);
    port_text = url.substr(colon + 1);
    if (host_text.find_first_of(":[]") != std::string_view::npos) {
      return bad_address("an IPv6 address goes in brackets: http://[::1]:8080");
    }
  }
  unsigned long port = 0;
  for (const char c : port_text) {
    if (!std::isdigit(static_cast<unsigned char>(c)) || port > 65535) {
      return Status(Code::kInvalidArgument, "bad port in '" + std::string(url) + "'");
    }
    port = port * 10 + static_cast<unsigned long>(c - '0');
  }
  if (port == 0 || port > 65535) {
    return Status(Code::kInvalidArgument, "bad port in '" + std::string(url) + "'");
  }
  std::string host(host_text);
  return std::make_unique<Client>(std::move(host), static_cast<std::uint16_t>(port), tls);
}

Client::Client(std::string host, std::uint16_t port, bool tls)
    : host_(std::move(host)), port_(port), tls_(tls) {}

bool Client::run(const bool& finished, std::chrono::milliseconds timeout) {
  io_.restart();
  io_.run_for(timeout);
  if (finished) return true;
  drop();
  io_.restart();
  io_.run();  // the cancelled handlers
  return false;
}

void Client::drop() {
  beast::error_code ignored;
  if (socket_) socket_->close(ignored);
  if (stream_) stream_->lowest_layer().close(ignored);
  socket_.reset();
  stream_.reset();
}

Status Client::open(std::chrono::milliseconds timeout) {
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
  if (!tls_) {
    socket_ = std::move(socket);
    return Status::ok();
  }
  if (!context_) {
    context_ = std::make_unique<boost::asio::ssl::context>(boost::asio::ssl::context::tls_client);
    if (ca_file_.empty()) {
      context_->set_default_verify_paths(error);
    } else {
      context_->load_verify_file(ca_file_, error);
    }
    if (error) {
      const std::string what = ca_file_.empty() ? "the system's certificate authorities" : ca_file_;
      context_.reset();
      return {Code::kInvalidArgument, "cannot read " + what + ": " + error.message()};
    }
    context_->set_verify_mode(boost::asio::ssl::verify_peer);
  }
  stream_ = std::make_unique<TlsStream>(std::move(*socket), *context_);
  webhook::expect_peer(stream_->native_handle(), host_);
  bool finished = false;
  stream_->async_handshake(boost::asio::ssl::stream_base::client, [&](const beast::error_code& e) {
    error = e;
    finished = true;
  });
  if (!run(finished, timeout)) {
    return {Code::kTimedOut, "no TLS handshake with " + host_ + ":" + std::to_string(port_) +
                                 " within " + std::to_string(timeout.count()) + " ms"};
  }
  if (error) {
    drop();
    return {Code::kIOError, "TLS with " + host_ + ":" + std::to_string(port_) + ": " +
                                error.message() +
                                " (is the server's certificate trusted? --ca-file)"};
  }
  return Status::ok();
}

void Client::set_header(std::string name, std::string value) {
  if (value.empty()) {
    headers_.erase(name);
  } else {
    headers_[std::move(name)] = std::move(value);
  }
}

Result<ClientResponse> Client::request(std::string_view method, std::string_view target,
                                       std::string_view body, std::chrono::milliseconds timeout) {
  bhttp::request<bhttp::string_body> request(bhttp::string_to_verb(method), target, 11);
  // An IPv6 address in brackets, as in a URL; the port when not the scheme's.
  const std::string host = host_.find(':') != std::string::npos ? "[" + host_ + "]" : host_;
  request.set(bhttp::field::host,
              port_ == (tls_ ? 443 : 80) ? host : host + ":" + std::to_string(port_));
  request.set(bhttp::field::user_agent, "delayq");
  if (!token_.empty()) request.set(bhttp::field::authorization, "Bearer " + token_);
  for (const auto& [name, value] : headers_) request.set(name, value);
  if (!body.empty()) request.set(bhttp::field::content_type, "application/json");
  request.body() = std::string(body);
  request.prepare_payload();

  // One retry: a kept-alive connection the server has closed since fails on first use.
  for (int attempt = 0; attempt < 2; ++attempt) {
    const bool fresh = socket_ == nullptr && stream_ == nullptr;
    if (fresh) {
      if (Status s = open(timeout); !s.is_ok()) return s;
    }
    // Write and read asynchronously and run the loop for at most `timeout`: a blocking read
    // on a socket would wait for ever (Asio polls again on EAGAIN, whatever SO_RCVTIMEO says).
    beast::error_code error;
    bool finished = false;
    beast::flat_buffer buffer;
    bhttp::response_parser<bhttp::string_body> parser;
    parser.body_limit(64 << 20);
    const auto exchange = [&](auto& stream) {
      bhttp::async_write(stream, request, [&](beast::error_code written, std::size_t) {
        if (written) {
          error = written;
          finished = true;
          return;
        }
        bhttp::async_read(stream, buffer, parser, [&](beast::error_code read, std::size_t) {
          error = read;
          finished = true;
        });
      });
    };
    if (stream_) {
      exchange(*stream_);
    } else {
      exchange(*socket_);
    }
    if (!run(finished, timeout)) {
      return Status(Code::kTimedOut, "no answer from " + host_ + ":" + std::to_string(port_) +
                                         " within " + std::to_string(timeout.count()) + " ms");
    }
    if (error) {
      drop();
      if (!fresh &&
          (error == bhttp::error::end_of_stream || error == boost::asio::error::connection_reset ||
           error == boost::asio::error::broken_pipe ||
           error == boost::asio::ssl::error::stream_truncated)) {
        continue;
      }
      const bool tls_port = !tls_ && error == bhttp::error::end_of_stream;  // closed unanswered
      return Status(Code::kIOError,
                    std::string(method) + " " + std::string(target) + ": " + error.message() +
                        (tls_port ? " (closed unanswered: is this delayqd's HTTP port, and does it "
                                    "want https://?)"
                                  : ""));
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
    if (!message.keep_alive()) drop();
    return response;
  }
  return Status(Code::kIOError, "the server closed the connection");
}

}  // namespace delayq::front::http
