// webhook_receiver.h — a webhook's receiver for tests: an HTTP/1.1 server on 127.0.0.1, one
// thread per connection, answering each request from a script the test gives (status, headers,
// a wait, 1xx answers first), over TLS too (OpenSSL, with a certificate the test names). It
// keeps every request it read, with the moment its first byte came. Loopback only; it stops by
// itself at destruction.
#pragma once

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <poll.h>
#include <pthread.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <condition_variable>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <iostream>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

namespace delayq::testing {

using Millis = std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;
using WallClock = std::chrono::system_clock;

inline std::string lower(std::string text) {
  for (char& c : text) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return text;
}

// One request as the receiver read it. `arrived` is when its first byte came (steady clock and
// wall clock), so "not before the due time" compares the earliest moment that can be seen.
struct Received {
  std::string method;
  std::string target;
  std::string version;
  std::map<std::string, std::string> headers;  // names lower-cased; repeats joined by ", "
  std::string body;
  Clock::time_point arrived;
  WallClock::time_point arrived_wall;
  std::size_t connection = 0;
  std::string tls_version;  // "TLSv1.3" and the like; empty over plain HTTP
  std::string sni;          // the server name the TLS client sent; empty if none (or plain HTTP)

  // The header's value, or "<no NAME>" (so that EXPECT_EQ shows what is missing).
  [[nodiscard]] std::string header(std::string_view name) const {
    const auto it = headers.find(std::string(name));
    return it == headers.end() ? "<no " + std::string(name) + ">" : it->second;
  }
  [[nodiscard]] bool has(std::string_view name) const {
    return headers.count(std::string(name)) != 0;
  }
};

// How to answer one request: a status, extra headers, and a wait before answering (to force
// the deliverer's timeout). The wait ends early when the receiver stops.
struct Answer {
  unsigned status = 200;
  std::vector<std::pair<std::string, std::string>> headers;
  Millis delay{0};
  std::vector<unsigned> interim = {};  // 1xx answers sent first (100 Continue, 103 Early Hints)
  std::string raw = {};  // when set, the bytes sent instead of an answer made of the above
  bool close = false;    // the connection closed after the answer, which does not say so
};

// Called (from the connection's thread) with the request's index in arrival order, 0 first.
using Script = std::function<Answer(std::size_t index, const Received&)>;

inline Script always(unsigned status, Millis delay = Millis{0}) {
  return [status, delay](std::size_t, const Received&) { return Answer{status, {}, delay}; };
}
// The statuses in order, then 200 for every later request.
inline Script statuses(std::vector<unsigned> script) {
  return [script = std::move(script)](std::size_t index, const Received&) {
    return Answer{index < script.size() ? script[index] : 200u, {}, Millis{0}};
  };
}

// A certificate and its private key, PEM files: what a TLS receiver presents.
struct TlsIdentity {
  std::filesystem::path certificate;
  std::filesystem::path key;
};

class Receiver {
 public:
  // Plain HTTP; or, given `tls`, HTTPS: every connection must complete a TLS handshake (with
  // OpenSSL's defaults, TLS 1.2 or 1.3) presenting that certificate before a request is read.
  explicit Receiver(Script script = always(200), std::optional<TlsIdentity> tls = std::nullopt)
      : script_(std::move(script)) {
    if (tls.has_value()) tls_ = make_tls_context(*tls);
    listen_fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_port = 0;
    if (listen_fd_ < 0 || ::inet_pton(AF_INET, "127.0.0.1", &address.sin_addr) != 1 ||
        ::bind(listen_fd_, reinterpret_cast<const sockaddr*>(&address), sizeof address) != 0 ||
        ::listen(listen_fd_, 128) != 0 || ::pipe2(wake_, O_CLOEXEC) != 0) {
      std::perror("receiver");
      std::abort();  // no test can go on without its receiver
    }
    socklen_t length = sizeof address;
    ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&address), &length);
    port_ = ntohs(address.sin_port);
    acceptor_ = std::thread([this] { accept_loop(); });
  }
  ~Receiver() { stop(); }
  Receiver(const Receiver&) = delete;
  Receiver& operator=(const Receiver&) = delete;

  [[nodiscard]] std::uint16_t port() const noexcept { return port_; }
  // The URL of `target` here, naming this host (which must resolve to 127.0.0.1).
  [[nodiscard]] std::string url(std::string_view target = "/hook",
                                std::string_view host = "127.0.0.1") const {
    return std::string(tls_ != nullptr ? "https://" : "http://") + std::string(host) + ":" +
           std::to_string(port_) + std::string(target);
  }
  [[nodiscard]] std::vector<Received> requests() const {
    std::lock_guard lock(mutex_);
    return requests_;
  }
  [[nodiscard]] std::size_t count() const {
    std::lock_guard lock(mutex_);
    return requests_.size();
  }
  // True once at least n requests came, false if they did not within `timeout`.
  bool wait_for_count(std::size_t n, Millis timeout) const {
    std::unique_lock lock(mutex_);
    return changed_.wait_for(lock, timeout, [&] { return requests_.size() >= n; });
  }
  // The most requests that were read and not yet answered at one moment.
  [[nodiscard]] int max_in_flight() const {
    std::lock_guard lock(mutex_);
    return max_in_flight_;
  }
  // Connections accepted, whether or not a request came on them.
  [[nodiscard]] std::size_t connections() const {
    std::lock_guard lock(mutex_);
    return accepted_;
  }
  // TLS mode: handshakes that completed, and why each that failed did (OpenSSL's reason, such
  // as "tlsv1 alert unknown ca" when the client refused the certificate).
  [[nodiscard]] std::size_t handshakes() const {
    std::lock_guard lock(mutex_);
    return handshakes_;
  }
  [[nodiscard]] std::vector<std::string> failed_handshakes() const {
    std::lock_guard lock(mutex_);
    return failed_handshakes_;
  }
  // True once at least n handshakes failed, false if they did not within `timeout`.
  bool wait_for_failed_handshakes(std::size_t n, Millis timeout) const {
    std::unique_lock lock(mutex_);
    return changed_.wait_for(lock, timeout, [&] { return failed_handshakes_.size() >= n; });
  }

  // Ends every connection (a request being waited on gets no answer) and joins every thread.
  void stop() {
    {
      std::lock_guard lock(mutex_);
      if (stopping_) return;
      stopping_ = true;
    }
    changed_.notify_all();
    // Never read: the pipe stays readable, so every poll() on it wakes from now on.
    if (::write(wake_[1], "x", 1) < 0) std::perror("receiver wake");
    acceptor_.join();
    std::vector<std::thread> threads;
    {
      std::lock_guard lock(mutex_);
      threads.swap(connections_);
    }
    for (std::thread& thread : threads) thread.join();
    ::close(listen_fd_);
    ::close(wake_[0]);
    ::close(wake_[1]);
  }

 private:
  static constexpr std::size_t kMaxRequest = 4 << 20;
  using TlsContext = std::unique_ptr<SSL_CTX, decltype(&SSL_CTX_free)>;

  // One accepted connection: its socket and, in TLS mode, the OpenSSL session over it (the
  // socket is then non-blocking, and every byte goes through the session).
  struct Link {
    int fd = -1;
    SSL* ssl = nullptr;
    std::string tls_version;
    std::string sni;
  };

  static TlsContext make_tls_context(const TlsIdentity& identity) {
    TlsContext context(SSL_CTX_new(TLS_server_method()), &SSL_CTX_free);
    if (context == nullptr ||
        SSL_CTX_use_certificate_chain_file(context.get(), identity.certificate.c_str()) != 1 ||
        SSL_CTX_use_PrivateKey_file(context.get(), identity.key.c_str(), SSL_FILETYPE_PEM) != 1 ||
        SSL_CTX_check_private_key(context.get()) != 1) {
      std::cerr << "receiver: cannot use " << identity.certificate << " and " << identity.key
                << "\n";
      ERR_print_errors_fp(stderr);
      std::abort();  // no test can go on without its receiver
    }
    return context;
  }

  void accept_loop() {
    for (;;) {
      pollfd fds[2] = {{listen_fd_, POLLIN, 0}, {wake_[0], POLLIN, 0}};
      if (::poll(fds, 2, -1) < 0) {
        if (errno == EINTR) continue;
        return;
      }
      if (fds[1].revents != 0) return;
      if ((fds[0].revents & POLLIN) == 0) continue;
      const int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (fd < 0) continue;
      std::lock_guard lock(mutex_);
      if (stopping_) {
        ::close(fd);
        return;
      }
      const std::size_t connection = accepted_++;
      changed_.notify_all();
      connections_.emplace_back([this, fd, connection] { serve(fd, connection); });
    }
  }

  // One connection: a TLS handshake in TLS mode, then requests one after the other
  // (keep-alive) until the peer closes, asks to close, or the receiver stops.
  void serve(int fd, std::size_t connection) {
    Link link;
    link.fd = fd;
    if (tls_ == nullptr || start_tls(link)) answer_requests(link, connection);
    if (link.ssl != nullptr) {
      // A close_notify if it can go at once and the session is sound; no wait for the peer's.
      if (!link.tls_version.empty()) (void)SSL_shutdown(link.ssl);
      SSL_free(link.ssl);
    }
    ::close(fd);
  }

  // The server's side of the TLS handshake; false if it failed (the reason is kept) or the
  // receiver stopped.
  bool start_tls(Link& link) {
    // OpenSSL writes with write(), not send(MSG_NOSIGNAL): to a peer that has gone it would
    // raise SIGPIPE and end the test binary. Blocked in this thread only, such a write fails
    // with EPIPE instead, and delayqd (forked from another thread) inherits nothing.
    sigset_t pipe_signal;
    sigemptyset(&pipe_signal);
    sigaddset(&pipe_signal, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &pipe_signal, nullptr);
    ::fcntl(link.fd, F_SETFL, ::fcntl(link.fd, F_GETFL) | O_NONBLOCK);
    link.ssl = SSL_new(tls_.get());
    if (link.ssl == nullptr || SSL_set_fd(link.ssl, link.fd) != 1) {
      ERR_print_errors_fp(stderr);
      std::abort();
    }
    for (;;) {
      ERR_clear_error();
      const int result = SSL_accept(link.ssl);
      if (result == 1) break;
      if (tls_wait(link, result)) continue;
      const unsigned long error = ERR_get_error();
      const char* reason = error != 0 ? ERR_reason_error_string(error) : nullptr;
      {
        std::lock_guard lock(mutex_);
        if (stopping_) return false;  // not a failure of the handshake
        failed_handshakes_.emplace_back(reason != nullptr ? reason : "closed by the client");
      }
      changed_.notify_all();
      return false;
    }
    link.tls_version = SSL_get_version(link.ssl);
    const char* sni = SSL_get_servername(link.ssl, TLSEXT_NAMETYPE_host_name);
    link.sni = sni != nullptr ? sni : "";
    {
      std::lock_guard lock(mutex_);
      ++handshakes_;
    }
    changed_.notify_all();
    return true;
  }

  // After an SSL_* call on the non-blocking socket returned `result`: waits for what OpenSSL
  // needs and returns true to call again; false on an error, the peer closing, or a stop.
  bool tls_wait(const Link& link, int result) {
    switch (SSL_get_error(link.ssl, result)) {
      case SSL_ERROR_WANT_READ:
        return wait_for(link.fd, POLLIN);
      case SSL_ERROR_WANT_WRITE:
        return wait_for(link.fd, POLLOUT);
      default:
        return false;
    }
  }

  // Waits until `fd` is ready for `events` (or has failed); false once the receiver stops.
  bool wait_for(int fd, short events) {
    for (;;) {
      pollfd fds[2] = {{fd, events, 0}, {wake_[0], POLLIN, 0}};
      if (::poll(fds, 2, -1) < 0) {
        if (errno == EINTR) continue;
        return false;
      }
      return fds[1].revents == 0;
    }
  }

  void answer_requests(Link& link, std::size_t connection) {
    std::string in;
    for (;;) {
      Received request;
      if (!read_request(link, in, request)) break;
      request.connection = connection;
      request.tls_version = link.tls_version;
      request.sni = link.sni;
      std::size_t index = 0;
      {
        std::lock_guard lock(mutex_);
        index = requests_.size();
        requests_.push_back(request);
        max_in_flight_ = std::max(max_in_flight_, ++in_flight_);
      }
      changed_.notify_all();
      const Answer answer = script_(index, request);
      bool stopped = false;
      {
        std::unique_lock lock(mutex_);
        if (answer.delay > Millis{0}) {
          stopped = changed_.wait_for(lock, answer.delay, [this] { return stopping_; });
        }
        // Before the answer is written: the deliverer cannot start its next request before it
        // has read this answer, so in-flight counts never overlap by a race of ours.
        --in_flight_;
      }
      if (stopped || !send_all(link, format(answer)) || answer.close) break;
      const std::string connection_header = lower(request.header("connection"));
      if (connection_header == "close" ||
          (request.version == "HTTP/1.0" && connection_header != "keep-alive")) {
        break;
      }
    }
  }

  // Appends what one read gives; false on end of file, an error, or the receiver stopping.
  bool fill(Link& link, std::string& in) {
    char buffer[65536];
    for (;;) {
      ssize_t n = 0;
      if (link.ssl != nullptr) {
        // Read first, wait after: bytes OpenSSL already holds would not make poll() wake.
        ERR_clear_error();
        const int result = SSL_read(link.ssl, buffer, static_cast<int>(sizeof buffer));
        if (result <= 0) {
          if (tls_wait(link, result)) continue;
          return false;
        }
        n = result;
      } else {
        if (!wait_for(link.fd, POLLIN)) return false;
        n = ::recv(link.fd, buffer, sizeof buffer, 0);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return false;
      }
      in.append(buffer, static_cast<std::size_t>(n));
      return in.size() <= kMaxRequest;
    }
  }

  // One whole request out of `in` (reading more as needed); what follows it stays in `in`.
  bool read_request(Link& link, std::string& in, Received& request) {
    const auto stamp = [&request] {
      request.arrived = Clock::now();
      request.arrived_wall = WallClock::now();
    };
    bool started = !in.empty();
    if (started) stamp();
    std::size_t head_end = 0;
    while ((head_end = in.find("\r\n\r\n")) == std::string::npos) {
      if (!fill(link, in)) return false;
      if (!started) {
        stamp();
        started = true;
      }
    }
    std::istringstream head(in.substr(0, head_end));
    in.erase(0, head_end + 4);
    std::string line;
    std::getline(head, line);
    if (!line.empty() && line.back() == '\r') line.pop_back();
    std::istringstream first(line);
    first >> request.method >> request.target >> request.version;
    while (std::getline(head, line)) {
      if (!line.empty() && line.back() == '\r') line.pop_back();
      const std::size_t colon = line.find(':');
      if (colon == std::string::npos) continue;
      const std::string name = lower(line.substr(0, colon));
      std::string value = line.substr(colon + 1);
      value.erase(0, value.find_first_not_of(" \t"));
      value.erase(value.find_last_not_of(" \t") + 1);
      auto [it, added] = request.headers.emplace(name, value);
      if (!added) it->second += ", " + value;
    }
    if (lower(request.header("transfer-encoding")).find("chunked") != std::string::npos) {
      return read_chunked(link, in, request.body);
    }
    std::size_t length = 0;
    if (request.has("content-length")) {
      const std::string text = request.header("content-length");
      const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), length);
      if (error != std::errc{} || length > kMaxRequest) return false;
    }
    while (in.size() < length) {
      if (!fill(link, in)) return false;
    }
    request.body = in.substr(0, length);
    in.erase(0, length);
    return true;
  }

  bool read_line(Link& link, std::string& in, std::string& line) {
    std::size_t end = 0;
    while ((end = in.find("\r\n")) == std::string::npos) {
      if (!fill(link, in)) return false;
    }
    line = in.substr(0, end);
    in.erase(0, end + 2);
    return true;
  }

  bool read_chunked(Link& link, std::string& in, std::string& body) {
    for (;;) {
      std::string line;
      if (!read_line(link, in, line)) return false;
      std::size_t size = 0;
      const auto [end, error] = std::from_chars(line.data(), line.data() + line.size(), size, 16);
      if (error != std::errc{} || size > kMaxRequest) return false;
      if (size == 0) break;
      while (in.size() < size + 2) {
        if (!fill(link, in)) return false;
      }
      body.append(in, 0, size);
      in.erase(0, size + 2);
    }
    for (;;) {  // trailers, up to the empty line
      std::string line;
      if (!read_line(link, in, line)) return false;
      if (line.empty()) return true;
    }
  }

  static std::string format(const Answer& answer) {
    if (!answer.raw.empty()) return answer.raw;
    const std::string body = answer.status / 100 == 2 ? "ok\n" : "not now\n";
    std::string out;
    for (const unsigned status : answer.interim) {
      out += "HTTP/1.1 " + std::to_string(status) + " Interim\r\n\r\n";
    }
    out += "HTTP/1.1 " + std::to_string(answer.status) +
           (answer.status == 200 ? " OK" : " Scripted") + "\r\n";
    out += "Content-Type: text/plain\r\nContent-Length: " + std::to_string(body.size()) + "\r\n";
    for (const auto& [name, value] : answer.headers) out += name + ": " + value + "\r\n";
    return out + "\r\n" + body;
  }

  bool send_all(Link& link, std::string_view bytes) {
    if (link.ssl != nullptr) {
      for (;;) {  // without SSL_MODE_ENABLE_PARTIAL_WRITE, a write succeeds whole or not at all
        ERR_clear_error();
        const int result = SSL_write(link.ssl, bytes.data(), static_cast<int>(bytes.size()));
        if (result > 0) return true;
        if (!tls_wait(link, result)) return false;
      }
    }
    while (!bytes.empty()) {
      const ssize_t n = ::send(link.fd, bytes.data(), bytes.size(), MSG_NOSIGNAL);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return false;
      bytes.remove_prefix(static_cast<std::size_t>(n));
    }
    return true;
  }

  const Script script_;
  TlsContext tls_{nullptr, &SSL_CTX_free};  // null: plain HTTP
  int listen_fd_ = -1;
  int wake_[2] = {-1, -1};
  std::uint16_t port_ = 0;
  std::thread acceptor_;

  mutable std::mutex mutex_;
  mutable std::condition_variable changed_;  // a request came, or the receiver is stopping
  bool stopping_ = false;
  std::vector<std::thread> connections_;
  std::vector<Received> requests_;
  int in_flight_ = 0;
  int max_in_flight_ = 0;
  std::size_t accepted_ = 0;
  std::size_t handshakes_ = 0;
  std::vector<std::string> failed_handshakes_;
};

}  // namespace delayq::testing
