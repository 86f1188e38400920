#include "front/listener.h"

#include <spdlog/spdlog.h>
#include <sys/socket.h>

#include <algorithm>
#include <boost/asio/ip/address.hpp>
#include <cctype>
#include <chrono>
#include <vector>

namespace delayq::front {

using boost::asio::ip::tcp;

namespace {

// ADDR:PORT, [ADDR]:PORT for IPv6.
std::string endpoint_text(const tcp::endpoint& endpoint) {
  const std::string ip = endpoint.address().to_string();
  return (endpoint.address().is_v6() ? "[" + ip + "]" : ip) + ":" + std::to_string(endpoint.port());
}

// Letters, digits, '-', '_' and '.', at most 253 of them, and not digits and dots alone: what a
// resolver is asked about. Anything else is refused before a lookup (which could wait on DNS) is
// tried; so are the short numeric forms the resolver would take as IPv4 ("0", "127.1").
bool is_host_name(const std::string& text) {
  if (text.empty() || text.size() > 253) return false;
  const bool allowed = std::all_of(text.begin(), text.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '-' || c == '_' || c == '.';
  });
  const bool numeric = std::all_of(text.begin(), text.end(), [](char c) {
    return std::isdigit(static_cast<unsigned char>(c)) != 0 || c == '.';
  });
  return allowed && !numeric;
}

// The address without the brackets an IPv6 address is written in beside a port.
std::string bare(const std::string& address) {
  if (address.size() >= 2 && address.front() == '[' && address.back() == ']') {
    return address.substr(1, address.size() - 2);
  }
  return address;
}

}  // namespace

Status check_listen_address(std::string_view what, const std::string& address) {
  const std::string host = bare(address);
  boost::system::error_code error;
  (void)boost::asio::ip::make_address(host, error);
  if (!error || is_host_name(host)) return Status::ok();
  return Status{Code::kInvalidArgument, "bad " + std::string(what) + "listen address '" + address +
                                            "': neither an IP address nor a host name"};
}

Listener::Listener(boost::asio::io_context& io, std::string what, Full full, OnSocket on_socket,
                   Refusal refusal)
    : what_(std::move(what)),
      full_(std::move(full)),
      on_socket_(std::move(on_socket)),
      refusal_(std::move(refusal)),
      acceptor_(io.get_executor()),
      retry_(io) {}

Status Listener::start(const std::string& address, std::uint16_t port) {
  if (acceptor_.is_open()) return {Code::kConflict, "already listening"};
  if (Status s = check_listen_address(what_, address); !s.is_ok()) return s;
  const std::string host = bare(address);
  std::vector<tcp::endpoint> endpoints;
  boost::system::error_code error;
  if (const auto ip = boost::asio::ip::make_address(host, error); !error) {
    endpoints.emplace_back(ip, port);
  } else {  // a host name: every address it has, in the resolver's order
    tcp::resolver resolver(acceptor_.get_executor());
    const auto results = resolver.resolve(
        host, std::to_string(port), tcp::resolver::passive | tcp::resolver::numeric_service, error);
    if (error) {
      return {Code::kIOError,
              "cannot resolve " + what_ + "listen address '" + address + "': " + error.message()};
    }
    for (const auto& result : results) endpoints.push_back(result.endpoint());
    if (endpoints.empty()) {
      return {Code::kInvalidArgument,
              "bad " + what_ + "listen address '" + address + "': the name has no address"};
    }
  }
  // The first address that can be bound, as beanstalkd does.
  for (const tcp::endpoint& endpoint : endpoints) {
    error = {};
    acceptor_.open(endpoint.protocol(), error);
    if (!error) acceptor_.set_option(boost::asio::socket_base::reuse_address(true), error);
    if (!error) acceptor_.bind(endpoint, error);
    if (!error) acceptor_.listen(boost::asio::socket_base::max_listen_connections, error);
    if (!error) break;
    boost::system::error_code ignored;
    acceptor_.close(ignored);
  }
  if (error) {
    return {Code::kIOError, "cannot listen " + (what_.empty() ? "" : "for " + what_) + "on " +
                                address + ":" + std::to_string(port) + ": " + error.message()};
  }
  accept();
  return Status::ok();
}

std::string Listener::local_address() const {
  boost::system::error_code error;
  const auto endpoint = acceptor_.local_endpoint(error);
  return error ? "" : endpoint_text(endpoint);
}

void Listener::accept() {
  acceptor_.async_accept([this](const boost::system::error_code& error, Socket socket) {
    if (error == boost::asio::error::operation_aborted || !acceptor_.is_open()) return;
    if (error) {
      retry_.expires_after(std::chrono::milliseconds(100));
      retry_.async_wait([this](const boost::system::error_code& e) {
        if (!e) accept();
      });
      return;
    }
    // The next accept first: it takes the memory Asio kept from the one that just completed,
    // which is larger than a connection's first wait needs and would stay with it while idle.
    accept();
    boost::system::error_code ignored;
    if (full_()) {
      ++refused_;
      const auto now = std::chrono::steady_clock::now();
      if (now - warned_ >= std::chrono::seconds(10)) {
        spdlog::warn("{}connections refused at the connection limit since the last such line: {}",
                     logged_as(), refused_);
        refused_ = 0;
        warned_ = now;
      }
      refuse(socket);
    } else {
      if (spdlog::should_log(spdlog::level::debug)) {
        boost::system::error_code unknown;
        const auto peer = socket.remote_endpoint(unknown);
        spdlog::debug("{}connection from {}", logged_as(), unknown ? "?" : endpoint_text(peer));
      }
      socket.set_option(tcp::no_delay(true), ignored);
      on_socket_(std::move(socket));
    }
  });
}

// A connection over the limit: its refusal, if it fits the empty send buffer at once, then the
// close, without waiting. Best effort: what the client has sent already (one read's worth at
// most) is read first, since unread bytes at the close make it a reset; bytes that arrive after
// the close still do, and a client that sent its command at once may then see the reset
// instead of the refusal.
void Listener::refuse(Socket& socket) {
  const std::string refusal = refusal_ ? refusal_() : std::string();
  const int fd = socket.native_handle();
  if (!refusal.empty()) {
    char scratch[4096];
    (void)::recv(fd, scratch, sizeof scratch, MSG_DONTWAIT);
    (void)::send(fd, refusal.data(), refusal.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
  }
  boost::system::error_code ignored;
  socket.shutdown(tcp::socket::shutdown_send, ignored);
  socket.close(ignored);
}

void Listener::stop() {
  boost::system::error_code ignored;
  retry_.cancel();
  acceptor_.close(ignored);
}

}  // namespace delayq::front
