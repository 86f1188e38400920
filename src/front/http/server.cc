#include "front/http/server.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>

#include <array>
#include <boost/asio/ssl.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <cerrno>
#include <optional>

#include "base/names.h"

namespace delayq::front::http {

namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
using boost::asio::ip::tcp;
// TCP with Beast's timeouts, on the io_context's own executor (see front::Socket).
using Stream = beast::basic_stream<tcp, Executor>;

class Connection : public std::enable_shared_from_this<Connection> {
 public:
  // tls: the server's TLS context, or null for plain HTTP.
  Connection(Server& server, Socket socket, boost::asio::ssl::context* tls) : server_(server) {
    if (tls != nullptr) {
      tls_.emplace(std::move(socket), *tls);
    } else {
      plain_.emplace(std::move(socket));
    }
  }

  void start() {
    beast::error_code ignored;
    loopback_ = lowest().socket().local_endpoint(ignored).address().is_loopback();
    server_.counts().opened();
    if (!tls_) return read();
    // The handshake gets the idle timeout too: a client that connects and says nothing goes.
    lowest().expires_after(server_.options().idle_timeout);
    tls_->async_handshake(boost::asio::ssl::stream_base::server,
                          [self = shared_from_this()](beast::error_code error) {
                            if (error) return self->close();
                            self->read();
                          });
  }

  // The server is stopping: a reserve waiting here is answered 503 at once, so that its client
  // retries (on another node, in Redis mode) rather than finds its connection cut.
  void stopping() {
    if (closed_ || ticket_ == 0) return;
    server_.api().cancel(std::exchange(ticket_, 0));
    keep_alive_ = false;
    Response response = Api::error(503, "stopping", "the server is stopping: retry");
    response.retry_after_seconds = 1;
    answer(std::move(response));
  }

  void close() {
    if (closed_) return;
    closed_ = true;
    if (ticket_ != 0) server_.api().cancel(std::exchange(ticket_, 0));
    if (answer_ && !writing_) server_.api().undeliverable(answer_->reserved);
    beast::error_code ignored;
    lowest().socket().shutdown(tcp::socket::shutdown_both, ignored);
    lowest().socket().close(ignored);
    server_.counts().closed();
    server_.closed(shared_from_this());
  }

 private:
  Stream& lowest() { return tls_ ? beast::get_lowest_layer(*tls_) : *plain_; }
  // Calls f with the stream requests and answers travel on: TLS over TCP, or TCP.
  template <typename F>
  void on_stream(F&& f) {
    if (tls_) {
      f(*tls_);
    } else {
      f(*plain_);
    }
  }

  // Reads the request line and headers first, then the body: a client that sent "Expect:
  // 100-continue" waits for a 100 before it sends its body (curl, for one, waits a whole second
  // if it gets none). The head is read here rather than by Beast's read_header, whose limit
  // bounds only the bytes not yet parsed: headers sent a line at a time would pass any size.
  void read() {
    parser_.emplace();
    parser_->header_limit(server_.options().max_header_bytes);
    parser_->body_limit(server_.options().max_body_bytes);
    head_bytes_ = 0;
    lowest().expires_after(server_.options().idle_timeout);
    parse_head();
  }

  // What the buffer holds that the parser has not taken.
  [[nodiscard]] std::string_view buffered() const {
    return {static_cast<const char*>(buffer_.data().data()), buffer_.size()};
  }

  // Parses what the buffer holds of the head; reads more while it is incomplete.
  void parse_head() {
    beast::error_code error;
    // Empty lines before the request line are skipped (RFC 9112 section 2.2: some clients end a
    // body with a CRLF it does not count); they count against the head's bound.
    while (!parser_->got_some() && buffered().starts_with("\r\n")) {
      buffer_.consume(2);
      head_bytes_ += 2;
    }
    const bool half_an_empty_line = !parser_->got_some() && buffered() == "\r";
    if (buffer_.size() > 0 && !half_an_empty_line) {
      const std::size_t used = parser_->put(buffer_.data(), error);
      buffer_.consume(used);
      head_bytes_ += used;
      if (error == bhttp::error::need_more) error = {};
    }
    // What follows a whole head (its body, pipelined requests) is not head; a whole head is
    // held to the bound too, its final CRLF included (the parser lets one byte more through).
    const std::size_t head = parser_->is_header_done() ? head_bytes_ : head_bytes_ + buffer_.size();
    if (!error && head > server_.options().max_header_bytes) error = bhttp::error::header_limit;
    if (error) return on_read(error);
    if (parser_->is_header_done()) return on_header();
    const std::size_t room = server_.options().max_header_bytes + 1 - head_bytes_;
    // A connection that has sent nothing yet waits with a buffer of one byte: 10,000 idle ones
    // cost no 4 KiB each. The first byte's arrival gives it the full buffer for the rest.
    read_more(buffer_.capacity() == 0 ? 1 : std::min<std::size_t>(room, 4096),
              &Connection::parse_head);
  }

  // Reads up to `want` bytes more into the buffer, then goes on with `next` (parse_head or
  // read_body). The client's end of input makes what it sent no request: end_of_stream if
  // nothing of it came, partial_message if some did.
  void read_more(std::size_t want, void (Connection::*next)()) {
    on_stream([this, want, next](auto& stream) {
      stream.async_read_some(buffer_.prepare(want), [self = shared_from_this(), next](
                                                        beast::error_code e, std::size_t n) {
        if (self->closed_) return;
        self->buffer_.commit(n);
        if (e == boost::asio::error::eof || e == boost::asio::ssl::error::stream_truncated) {
          e = self->head_bytes_ + self->buffer_.size() == 0 ? bhttp::error::end_of_stream
                                                            : bhttp::error::partial_message;
        }
        if (e) return self->on_read(e);
        ((*self).*next)();
      });
    });
  }

  void on_header() {
    const auto& request = parser_->get();
    // RFC 9112 section 3.2: an HTTP/1.1 request names its host once, and a server answers 400
    // to one that does not.
    if (request.version() >= 11 && request.count(bhttp::field::host) != 1) {
      return refuse(400, "bad_request", "an HTTP/1.1 request needs exactly one Host header");
    }
    auto target = origin_form(request.target(), request[bhttp::field::host]);
    if (!target.is_ok()) return refuse(400, "bad_request", target.status().message());
    target_ = std::move(target).value();
    if (request.method() == bhttp::verb::unknown) {
      return refuse(501, "unsupported",
                    "method " + std::string(request.method_string().substr(0, 32)) +
                        (request.method_string().size() > 32 ? "..." : "") + " is not implemented");
    }
    // A body is read as sent: one compressed (gzip) would be read as its compressed bytes.
    const auto [coding, codings_end] = request.equal_range(bhttp::field::content_encoding);
    for (auto it = coding; it != codings_end; ++it) {
      if (!beast::iequals(it->value(), "identity")) {
        return refuse(415, "unsupported_encoding",
                      "Content-Encoding " + quoted_name(it->value()) +
                          " is not supported: send the body as it is, uncompressed");
      }
    }
    // Only chunked is understood as a transfer coding; any other would leave the body's length
    // unknown and its bytes read as the next request (request smuggling).
    if (request.count(bhttp::field::transfer_encoding) != 0) {
      std::vector<std::string_view> codings;  // of every Transfer-Encoding line, in order
      const auto [first, end] = request.equal_range(bhttp::field::transfer_encoding);
      for (auto it = first; it != end; ++it) {
        for (const auto token : bhttp::token_list(it->value())) codings.push_back(token);
      }
      const auto is_chunked = [](std::string_view token) {
        return beast::iequals(token, "chunked");
      };
      const auto chunked = std::count_if(codings.begin(), codings.end(), is_chunked);
      if (codings.empty()) return refuse(400, "bad_request", "Transfer-Encoding: empty");
      if (chunked > 1) {
        return refuse(400, "bad_request", "Transfer-Encoding: chunked given more than once");
      }
      if (chunked == 1 && !is_chunked(codings.back())) {
        return refuse(400, "bad_request", "Transfer-Encoding: chunked must come last");
      }
      if (codings.size() != 1 || !parser_->chunked()) {
        return refuse(501, "unsupported", "Transfer-Encoding: only chunked is supported");
      }
    }
    // A request the API would refuse for want of a token is answered before its body comes
    // (asked only when a body is to come: the API asks again when it runs the request).
    if (!parser_->is_done() && server_.serving() &&
        !server_.api().admits(method_of(request), target_.path,
                              request[bhttp::field::authorization])) {
      keep_alive_ = false;  // the body, unread, must not be taken for the next request
      version_ = request.version();
      return dispatch(request);
    }
    const auto expect = request[bhttp::field::expect];
    if (request.version() >= 11 && beast::iequals(expect, "100-continue") && !parser_->is_done()) {
      static constexpr std::string_view kContinue = "HTTP/1.1 100 Continue\r\n\r\n";
      on_stream([this](auto& stream) {
        boost::asio::async_write(stream, boost::asio::buffer(kContinue.data(), kContinue.size()),
                                 [self = shared_from_this()](beast::error_code e, std::size_t) {
                                   if (e) return self->close();
                                   self->read_body();
                                 });
      });
      return;
    }
    read_body();
  }

  // Parses what the buffer holds of the body; reads more while it is incomplete. The parser
  // takes a body's bytes as they come, so what it leaves in the buffer is a chunked body's
  // framing not yet whole (a chunk's size line, the trailers): bounded as the head is, and made
  // of lines that end with CRLF. Otherwise a line that never ends would grow the buffer, and a
  // line ended by a bare LF hold the request unanswered, until the idle timeout.
  void read_body() {
    beast::error_code error;
    while (!parser_->is_done() && buffer_.size() > 0) {
      const std::size_t used = parser_->put(buffer_.data(), error);
      buffer_.consume(used);
      if (error == bhttp::error::need_more) {
        error = {};
        break;
      }
      if (error) return on_read(error);
    }
    if (parser_->is_done()) return on_read({});
    const std::size_t limit = server_.options().max_header_bytes;
    const std::string_view left = buffered();
    if (left.size() >= limit) {
      return refuse(
          400, "bad_request",
          "a chunk's size line, or the trailers, longer than " + std::to_string(limit) + " bytes");
    }
    for (std::size_t at = left.find('\n'); at != std::string_view::npos;
         at = left.find('\n', at + 1)) {
      if (at == 0 || left[at - 1] != '\r') {
        return refuse(400, "bad_request", "a line of the chunked body ends without CR");
      }
    }
    // Read as Beast's own read does: what the buffer has room for (about the 4 KiB the head was
    // read in), so that a connection's buffer does not grow for good with one long body; and
    // no more than the framing's bound leaves, so that a line over it is refused however it
    // arrives, not only when it comes in pieces.
    read_more(std::min(beast::read_size(buffer_, 65536), limit - left.size()),
              &Connection::read_body);
  }

  void on_read(beast::error_code error) {
    if (closed_) return;
    if (error == bhttp::error::body_limit) {
      return refuse(413, "too_large",
                    "the request body is larger than " +
                        std::to_string(server_.options().max_body_bytes) + " bytes");
    }
    if (error == bhttp::error::header_limit) {
      return refuse(431, "headers_too_large",
                    "the request line and headers are longer than " +
                        std::to_string(server_.options().max_header_bytes) + " bytes");
    }
    if (error) {
      // A request Beast could not parse gets a 400; a client gone, idle too long or a socket
      // error leaves nobody to answer.
      const bool malformed =
          error.category() == bhttp::make_error_code(bhttp::error::bad_method).category() &&
          error != bhttp::error::end_of_stream && error != bhttp::error::partial_message;
      if (!malformed) return close();
      // A line ended by a bare LF reads as a bad version (request line) or a bad field; so
      // does HTTP/2's preface (PRI * HTTP/2.0).
      const char* hint = error == bhttp::error::bad_version
                             ? " (HTTP/1.0 or HTTP/1.1, each line ending with CRLF)"
                         : error == bhttp::error::bad_line_ending ? " (each line ends with CRLF)"
                                                                  : "";
      return refuse(400, "bad_request", "malformed HTTP request: " + error.message() + hint);
    }
    const auto& request = parser_->get();
    keep_alive_ = request.keep_alive();
    version_ = request.version();
    dispatch(request);
  }

  // HEAD is answered as GET, without the body (a load balancer's health check, for one).
  static std::string_view method_of(const bhttp::request<bhttp::string_body>& request) {
    return request.method() == bhttp::verb::head ? std::string_view("GET")
                                                 : std::string_view(request.method_string());
  }

  // The request (its body read, or not needed) to the API.
  void dispatch(const bhttp::request<bhttp::string_body>& request) {
    head_ = request.method() == bhttp::verb::head;
    lowest().expires_never();
    if (!server_.serving()) {
      return answer(server_.starting_answer(method_of(request), target_.path));
    }
    // A request in the stopping server's last moments is served; its client then goes elsewhere.
    if (server_.is_stopping()) keep_alive_ = false;
    // Without tokens, whoever reaches the API may do anything: a web page must not.
    if (server_.options().api.tokens.empty()) {
      // A browser sends one Origin; two could hide a foreign one behind the first.
      std::optional<std::string> why;
      if (request.count(bhttp::field::origin) > 1) {
        why = "more than one Origin header";
      } else {
        why = foreign_request(target_.host, request[bhttp::field::origin], loopback_);
      }
      if (why) {
        return server_.api().refuse(
            method_of(request), target_.path, Api::error(403, "forbidden", *why),
            [self = shared_from_this()](Response response) { self->answer(std::move(response)); });
      }
    }
    if (spdlog::should_log(spdlog::level::trace)) {
      spdlog::trace("HTTP {} {}", std::string_view(request.method_string()), target_.path);
    }
    auto self = shared_from_this();
    const std::uint64_t ticket = server_.api().handle(
        method_of(request), target_.path, request.body(),
        [self](Response response) { self->answer(std::move(response)); },
        Api::Headers{request[bhttp::field::authorization], request["traceparent"],
                     request["tracestate"]});
    if (ticket != 0 && !answer_) {
      ticket_ = ticket;
      if (server_.is_stopping()) return stopping();  // it would wait past the end
      watch();
    }
  }

  // An answer without routing (the request could not be read): sent, then the connection closes.
  void refuse(unsigned status, std::string_view code, const std::string& message) {
    keep_alive_ = false;
    version_ = 11;
    head_ = false;
    answer(Api::error(status, code, message));
  }

  // The broker has completed the request: what the answer reports is durable.
  void answer(Response response) {
    ticket_ = 0;
    if (closed_) {
      server_.api().undeliverable(response.reserved);
      return;
    }
    answer_ = std::move(response);
    write();
  }

  // While a reserve waits: a readable socket with nothing to read means the client went away.
  void watch() {
    // Under TLS the bytes peeked are a record's, which tells the same: something, or an end.
    lowest().socket().async_wait(
        tcp::socket::wait_read, [self = shared_from_this()](beast::error_code error) {
          if (error || self->closed_ || self->ticket_ == 0) return;
          char byte = 0;
          const auto n =
              ::recv(self->lowest().socket().native_handle(), &byte, 1, MSG_PEEK | MSG_DONTWAIT);
          if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK)) return self->close();
          // A spurious wake-up: watch again. n > 0: the client sent its next request early; it
          // is read after this answer (and a close after it is seen only then).
          if (n < 0) self->watch();
        });
  }

  // The answer's bytes, written by hand: a handful of fixed headers need no serializer.
  void write() {
    writing_ = true;
    Response& a = *answer_;
    out_.clear();
    const auto status = static_cast<bhttp::status>(a.status);
    fmt::format_to(std::back_inserter(out_), "HTTP/1.{} {} {}\r\nServer: delayq\r\n",
                   version_ == 10 ? 0 : 1, a.status, bhttp::obsolete_reason(status));
    if (a.status != 204) {
      fmt::format_to(std::back_inserter(out_), "Content-Type: {}\r\nContent-Length: {}\r\n",
                     a.content_type, a.body.size());
    }
    if (!a.location.empty())
      fmt::format_to(std::back_inserter(out_), "Location: {}\r\n", a.location);
    if (!a.allow.empty()) fmt::format_to(std::back_inserter(out_), "Allow: {}\r\n", a.allow);
    if (a.retry_after_seconds != 0) {
      fmt::format_to(std::back_inserter(out_), "Retry-After: {}\r\n", a.retry_after_seconds);
    }
    if (!a.www_authenticate.empty()) {
      fmt::format_to(std::back_inserter(out_), "WWW-Authenticate: {}\r\n", a.www_authenticate);
    }
    out_ += a.headers;
    if (!keep_alive_) {
      out_ += "Connection: close\r\n";
    } else if (version_ == 10) {
      out_ += "Connection: keep-alive\r\n";
    }
    out_ += "\r\n";
    if (!head_) out_ += a.body;
    lowest().expires_after(server_.options().idle_timeout);
    on_stream([this](auto& stream) {
      boost::asio::async_write(stream, boost::asio::buffer(out_),
                               [self = shared_from_this()](beast::error_code error, std::size_t) {
                                 self->on_write(error);
                               });
    });
  }

  void on_write(beast::error_code error) {
    writing_ = false;
    std::vector<Reservation> reserved = std::move(answer_->reserved);
    answer_.reset();
    if (error) server_.api().undeliverable(reserved);
    if (closed_) return;
    if (error) return close();
    if (!keep_alive_) {
      if (tls_) {
        // TLS ends with close_notify, so that the client knows the answer is whole; a client
        // that does not answer it is given a second.
        lowest().expires_after(std::chrono::seconds(1));
        return tls_->async_shutdown(
            [self = shared_from_this()](beast::error_code) { self->close(); });
      }
      beast::error_code ignored;
      lowest().socket().shutdown(tcp::socket::shutdown_send, ignored);
      return drain();
    }
    read();
  }

  // A socket closed with bytes unread makes the kernel reset the connection, and a reset can
  // destroy the answer before the client reads it: a client still sending a body that the
  // answer refused (413) got "broken pipe" instead. So before it closes, the connection reads
  // and drops what comes, until the client closes its side or for a second at most.
  void drain() {
    lowest().expires_after(std::chrono::seconds(1));
    drain_more();
  }
  void drain_more() {
    lowest().async_read_some(boost::asio::buffer(dropped_),
                             [self = shared_from_this()](beast::error_code error, std::size_t) {
                               if (error || self->closed_) return self->close();
                               self->drain_more();
                             });
  }

  Server& server_;
  std::optional<Stream> plain_;
  std::optional<beast::ssl_stream<Stream>> tls_;
  beast::flat_buffer buffer_;
  std::size_t head_bytes_ = 0;  // of the request's line and headers, parsed so far
  Target target_;               // the request's, in origin form (on_header())
  bool loopback_ = false;       // reached at a loopback address
  bool head_ = false;           // the request being answered is a HEAD
  std::optional<bhttp::request_parser<bhttp::string_body>> parser_;
  std::string out_;  // the answer being written
  std::optional<Response> answer_;
  std::uint64_t ticket_ = 0;  // a reserve waiting in the Api
  unsigned version_ = 11;
  bool keep_alive_ = true;
  std::array<char, 4096> dropped_{};  // what drain() reads
  bool writing_ = false;
  bool closed_ = false;
};

Server::Server(boost::asio::io_context& io, broker::Broker& broker, ServerOptions options)
    : Server(io, std::move(options)) {
  serve(broker);
}

Server::Server(boost::asio::io_context& io, ServerOptions options)
    : options_(std::move(options)),
      own_metrics_(options_.metrics == nullptr ? std::make_unique<metrics::Registry>() : nullptr),
      metrics_(options_.metrics != nullptr ? *options_.metrics : *own_metrics_),
      counts_(metrics_, "http"),
      listener_(
          io, "HTTP ", [this] { return connections_.size() >= options_.max_connections; },
          [this](Socket socket) {
            auto connection = std::make_shared<Connection>(*this, std::move(socket), tls_.get());
            connections_.insert(connection);
            connection->start();
          },
          // Over the limit: a 503, unless the listener speaks TLS (no handshake is spent on it).
          [this] {
            if (tls_) return std::string();
            const std::string body =
                Api::error(503, "limit",
                           "too many connections (" + std::to_string(options_.max_connections) +
                               "); try again")
                    .body;
            return fmt::format(
                "HTTP/1.1 503 Service Unavailable\r\nServer: delayq\r\nContent-Type: "
                "application/json\r\nContent-Length: {}\r\nRetry-After: 1\r\nConnection: "
                "close\r\n\r\n{}",
                body.size(), body);
          }) {}

Server::~Server() {
  stop();
}

void Server::starting(std::string message, std::string progress_json) {
  starting_message_ = std::move(message);
  starting_progress_ = std::move(progress_json);
}

void Server::serve(broker::Broker& broker) {
  broker_ = &broker;
  api_ = std::make_unique<Api>(broker, metrics_, options_.api);
}

Response Server::starting_answer(std::string_view method, std::string_view target) const {
  const std::string_view path = target.substr(0, target.find('?'));
  if (path == "/healthz" && (method == "GET" || method == "HEAD")) {
    Response alive;
    alive.body = R"({"status":"ok"})";
    return alive;
  }
  // {"error": {...}} as every error, with the progress beside it.
  Response response = Api::error(503, "starting", starting_message_);
  if (const auto end = response.body.rfind('}'); end != std::string::npos) {
    response.body.insert(end, R"(,"progress":)" + starting_progress_);
  }
  response.retry_after_seconds = 1;
  return response;
}

Status Server::start() {
  if (!options_.tls_cert_file.empty() || !options_.tls_key_file.empty()) {
    if (options_.tls_cert_file.empty() || options_.tls_key_file.empty()) {
      return {Code::kInvalidArgument,
              "TLS wants both a certificate and a key (--tls-cert, --tls-key)"};
    }
    tls_ = std::make_unique<boost::asio::ssl::context>(boost::asio::ssl::context::tls_server);
    beast::error_code error;
    tls_->set_options(
        boost::asio::ssl::context::default_workarounds | boost::asio::ssl::context::no_sslv2 |
            boost::asio::ssl::context::no_sslv3 | boost::asio::ssl::context::no_tlsv1 |
            boost::asio::ssl::context::no_tlsv1_1,
        error);
    (void)tls_->use_certificate_chain_file(options_.tls_cert_file, error);
    if (error) {
      return {Code::kInvalidArgument,
              "cannot read TLS certificate " + options_.tls_cert_file + ": " + error.message()};
    }
    (void)tls_->use_private_key_file(options_.tls_key_file, boost::asio::ssl::context::pem, error);
    if (error) {
      return {Code::kInvalidArgument,
              "cannot read TLS key " + options_.tls_key_file + ": " + error.message()};
    }
  }
  return listener_.start(options_.address, options_.port);
}

std::string Server::local_address() const {
  return listener_.local_address();
}

void Server::stop_accepting() {
  stopping_ = true;
  listener_.stop();
  const auto connections = connections_;  // a connection may close as it answers
  for (const auto& connection : connections) connection->stopping();
}

void Server::stop() {
  stop_accepting();
  const auto connections = connections_;  // close() erases from connections_
  for (const auto& connection : connections) connection->close();
}

}  // namespace delayq::front::http
