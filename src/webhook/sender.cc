#include "webhook/sender.h"

#include <sys/socket.h>

#include <algorithm>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <cerrno>
#include <cstring>
#include <string_view>
#include <utility>

#include "webhook/tls_peer.h"

namespace delayq::webhook {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using asio::ip::tcp;

// What of an answer waits in a connection's buffer for the parser: its head (16 KiB at most)
// and a chunked body's framing, bounded so that a receiver whose chunk-size line never ends
// cannot grow the server's memory (a body's own bytes are taken as they come).
constexpr std::size_t kMaxBuffered = 128 * 1024;

struct Sender::Connection {
  std::unique_ptr<beast::tcp_stream> plain;
  std::unique_ptr<beast::ssl_stream<beast::tcp_stream>> tls;
  beast::flat_buffer buffer{kMaxBuffered};

  beast::tcp_stream& lowest() { return tls ? beast::get_lowest_layer(*tls) : *plain; }
};

namespace {

constexpr auto kAwait = asio::use_awaitable;
using Clock = std::chrono::steady_clock;

struct Exchange {
  Response response;
  bool keep_alive = false;
  bool timed_out = false;
  bool heard = false;  // some of an answer came (so the receiver has the request)
};

// Whether an idle connection is of no more use: the receiver closed it (end of stream), or
// sent on it unasked (a TLS close_notify, stray bytes), or it failed. A kept-alive connection
// that is still open has nothing to read.
bool stale(int fd) {
  char byte = 0;
  const ssize_t got = ::recv(fd, &byte, 1, MSG_PEEK | MSG_DONTWAIT);
  return got >= 0 || (errno != EAGAIN && errno != EWOULDBLOCK);
}

// Reads until the buffer holds an answer's status line, and gives a line without a reason
// phrase ("HTTP/1.1 200", which the grammar refuses and common clients accept) its space, so
// that the parser takes it: a receiver that acted and answered so would otherwise get the job
// again, attempt after attempt. A line not ended within 64 bytes is left to the parser.
template <typename Stream>
asio::awaitable<beast::error_code> read_status_line(Stream& stream, beast::flat_buffer& buffer,
                                                    bool& heard) {
  constexpr std::size_t kLongest = 64;
  constexpr std::string_view kBare = "HTTP/1.1 200";  // its shape: 12 bytes before the CRLF
  beast::error_code error;
  for (;;) {
    const auto* data = static_cast<const char*>(buffer.data().data());
    const std::string_view held(data, buffer.size());
    heard = heard || !held.empty();
    const std::size_t end = held.find("\r\n");
    if (end == std::string_view::npos && held.size() < kLongest) {
      const std::size_t got = co_await stream.async_read_some(buffer.prepare(kLongest),
                                                              asio::redirect_error(kAwait, error));
      buffer.commit(got);
      // The end of the stream named as the parser would have named it.
      if (error == asio::error::eof) {
        error = buffer.size() == 0 ? http::error::end_of_stream : http::error::partial_message;
      }
      if (error) co_return error;
      continue;
    }
    const bool bare = end == kBare.size() && held.starts_with("HTTP/") &&
                      std::all_of(held.begin() + 9, held.begin() + 12,
                                  [](char c) { return c >= '0' && c <= '9'; }) &&
                      held[8] == ' ';
    if (bare) {
      buffer.commit(asio::buffer_copy(buffer.prepare(1), asio::buffer(" ", 1)));
      auto* bytes = static_cast<char*>(buffer.data().data());
      std::memmove(bytes + end + 1, bytes + end, buffer.size() - end - 1);
      bytes[end] = ' ';
    }
    co_return error;
  }
}

template <typename Stream>
asio::awaitable<Exchange> exchange(Stream& stream, beast::flat_buffer& buffer,
                                   http::request<http::string_body>& request, std::size_t limit) {
  Exchange out;
  beast::error_code error;
  co_await http::async_write(stream, request, asio::redirect_error(kAwait, error));
  // Interim answers (100 Continue, 103 Early Hints...) come before the final one and are
  // skipped: taking one for the answer would leave the real one on the connection, to be read
  // as the answer to the next request sent on it.
  constexpr int kMaxInterim = 16;
  for (int interim = 0; !error && interim <= kMaxInterim; ++interim) {
    http::response_parser<http::string_body> parser;
    parser.header_limit(static_cast<std::uint32_t>(std::min<std::size_t>(limit, 16 * 1024)));
    parser.body_limit(limit);
    error = co_await read_status_line(stream, buffer, out.heard);
    if (error) break;
    co_await http::async_read(stream, buffer, parser, asio::redirect_error(kAwait, error));
    // An answer whose body is over the bound, or whose chunked framing is (kMaxBuffered), still
    // answers: its status counts (a 2xx is a delivery), and the connection, with the rest of
    // the body in it, is not reused.
    const bool too_long =
        (error == http::error::body_limit || error == http::error::buffer_overflow) &&
        parser.is_header_done();
    if (error && !too_long) break;
    const auto& answer = parser.get();
    const int status = static_cast<int>(answer.result_int());
    // 101 Switching Protocols was not asked for: it ends HTTP on this connection.
    if (status >= 100 && status < 200 && status != 101 && interim < kMaxInterim) continue;
    out.response.status = status;
    out.response.retry_after = std::string(answer[http::field::retry_after]);
    out.keep_alive = !too_long && status >= 200 && answer.keep_alive();
    co_return out;
  }
  out.timed_out = error == beast::error::timeout;
  out.response.error = out.timed_out ? "timed out" : error.message();
  co_return out;
}

}  // namespace

Sender::Sender(asio::io_context& io, SenderOptions options)
    : io_(io), options_(std::move(options)), tls_(asio::ssl::context::tls_client) {}

Sender::~Sender() {
  *alive_ = false;
}

Result<std::unique_ptr<Sender>> Sender::make(asio::io_context& io, SenderOptions options) {
  std::unique_ptr<Sender> sender(new Sender(io, std::move(options)));
  beast::error_code error;
  (void)sender->tls_.set_verify_mode(asio::ssl::verify_peer, error);
  if (!sender->options_.ca_file.empty()) {
    (void)sender->tls_.load_verify_file(sender->options_.ca_file, error);
    if (error) {
      return Status(Code::kInvalidArgument,
                    "cannot read CA file " + sender->options_.ca_file + ": " + error.message());
    }
  }
  return sender;
}

asio::ssl::context& Sender::tls() {
  if (!std::exchange(system_cas_loaded_, true)) {
    beast::error_code error;
    (void)tls_.set_default_verify_paths(error);
  }
  return tls_;
}

void Sender::post(Request request, std::function<void(Response)> done) {
  asio::co_spawn(
      io_,
      [this, alive = alive_, request = std::move(request),
       done = std::move(done)]() mutable -> asio::awaitable<void> {
        const auto deadline = Clock::now() + request.timeout;
        http::request<http::string_body> message{http::verb::post, request.url.target, 11};
        const bool v6 = request.url.host.find(':') != std::string::npos;
        const std::string host = v6 ? "[" + request.url.host + "]" : request.url.host;
        message.set(http::field::host, request.url.port == (request.url.tls ? "443" : "80")
                                           ? host
                                           : host + ":" + request.url.port);
        message.set(http::field::user_agent, "delayq-webhook");
        for (const auto& [name, value] : request.headers) message.set(name, value);
        message.body() = std::move(request.body);
        message.prepare_payload();
        const std::string origin = request.url.origin();
        // Idle connections the receiver has closed (its keep-alive timeout) are dropped as they
        // are taken. One may still be closed as the request goes: if it fails before any answer
        // comes, for anything but time, the request goes once more, on a new connection.
        for (int round = 0; round < 2; ++round) {
          std::unique_ptr<Connection> connection;
          bool reused = false;
          for (auto& idle = idle_[origin]; round == 0 && !idle.empty() && !connection;) {
            connection = std::move(idle.back());
            idle.pop_back();
            if (stale(connection->lowest().socket().native_handle())) connection.reset();
          }
          if (connection) {
            reused = true;
          } else {
            connection = std::make_unique<Connection>();
            std::string error;
            beast::error_code code;
            tcp::resolver resolver(io_);
            const auto endpoints = co_await resolver.async_resolve(
                request.url.host, request.url.port, asio::redirect_error(kAwait, code));
            if (!*alive) co_return;
            if (code) {
              done(Response{0, {}, "resolve " + request.url.host + ": " + code.message()});
              co_return;
            }
            if (request.url.tls) {
              connection->tls = std::make_unique<beast::ssl_stream<beast::tcp_stream>>(io_, tls());
              expect_peer(connection->tls->native_handle(), request.url.host);
            } else {
              connection->plain = std::make_unique<beast::tcp_stream>(io_);
            }
            connection->lowest().expires_at(deadline);
            co_await connection->lowest().async_connect(endpoints,
                                                        asio::redirect_error(kAwait, code));
            if (!*alive) co_return;
            if (!code && connection->tls) {
              co_await connection->tls->async_handshake(asio::ssl::stream_base::client,
                                                        asio::redirect_error(kAwait, code));
              if (!*alive) co_return;
              if (code) {
                std::string why = "tls: " + code.message();
                const long verified = SSL_get_verify_result(connection->tls->native_handle());
                if (verified != X509_V_OK) {
                  why += std::string(" (") + X509_verify_cert_error_string(verified) + ")";
                }
                done(Response{0, {}, std::move(why)});
                co_return;
              }
            }
            if (code) {
              const bool late = code == beast::error::timeout;
              done(Response{0, {}, late ? "connect timed out" : "connect: " + code.message()});
              co_return;
            }
          }
          connection->lowest().expires_at(deadline);
          // Not a conditional expression: g++ 12 mishandles a co_await in each of its arms.
          Exchange result;
          if (connection->tls) {
            result = co_await exchange(*connection->tls, connection->buffer, message,
                                       options_.max_response_bytes);
          } else {
            result = co_await exchange(*connection->plain, connection->buffer, message,
                                       options_.max_response_bytes);
          }
          if (!*alive) co_return;
          if (result.response.status == 0 && reused && !result.timed_out && !result.heard) {
            continue;
          }
          if (result.response.status != 0 && result.keep_alive) {
            connection->lowest().expires_never();
            auto& idle = idle_[origin];
            if (idle.size() < options_.max_idle_per_origin) idle.push_back(std::move(connection));
          }
          done(std::move(result.response));
          co_return;
        }
        done(Response{0, {}, "the connection closed twice"});
      },
      asio::detached);
}

}  // namespace delayq::webhook
