// listener.h — the TCP acceptor every front-end shares: binds (SO_REUSEADDR), accepts in a loop
// on the io_context, sets TCP_NODELAY and hands each connection over. Connections beyond the
// front-end's limit (its `full()` says so) are accepted, sent the front-end's refusal (what
// `refusal()` gives, best effort, without waiting), and closed at once; after a failed accept
// (out of descriptors or buffers, which leaves the acceptor readable) it waits 100 ms instead of
// spinning. Listens on an address or on a host name (resolved once, at start). Runs on the
// io_context's thread; not thread-safe.
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <cstdint>
#include <functional>
#include <string>

#include "base/status.h"

namespace delayq::front {

// A connection's socket. Bound to the io_context's own executor type rather than the type-erased
// any_io_executor: 8 bytes instead of 56 in the socket and in every operation waiting on it,
// which is most of what an idle connection costs (docs/BENCHMARKS.md).
using Executor = boost::asio::io_context::executor_type;
using Socket = boost::asio::basic_stream_socket<boost::asio::ip::tcp, Executor>;

// Whether `address` can be listened on as written: an IPv4 or IPv6 address (the latter bare or
// in brackets) or a host name. Nothing is resolved. Errors (kInvalidArgument) name it with
// `what` ("" or "HTTP "), as Listener::start's do.
Status check_listen_address(std::string_view what, const std::string& address);

class Listener {
 public:
  using Full = std::function<bool()>;
  using OnSocket = std::function<void(Socket)>;
  using Refusal = std::function<std::string()>;
  // what: how errors name it ("" or "HTTP "). refusal: the bytes a connection over the limit
  // gets before its close ("" or none: nothing).
  Listener(boost::asio::io_context& io, std::string what, Full full, OnSocket on_socket,
           Refusal refusal = {});

  // Binds and starts accepting. address: an IPv4 or IPv6 address (the latter bare or in
  // brackets), or a host name, which is resolved and bound at the first of its addresses that
  // can be. Errors: an address that is neither (kInvalidArgument), a name that cannot be
  // resolved or an address or port that cannot be bound (kIOError), already listening
  // (kConflict).
  Status start(const std::string& address, std::uint16_t port);
  // The bound address as ADDR:PORT ([ADDR]:PORT for IPv6; the chosen port after port 0), or ""
  // when not listening.
  [[nodiscard]] std::string local_address() const;
  void stop();

 private:
  void accept();
  void refuse(Socket& socket);
  // How the log names it: "beanstalkd " or what_.
  [[nodiscard]] std::string_view logged_as() const {
    return what_.empty() ? "beanstalkd " : std::string_view(what_);
  }

  std::string what_;
  // Connections refused at the limit since the last warning (at most one every 10 s).
  std::uint64_t refused_ = 0;
  std::chrono::steady_clock::time_point warned_{};
  Full full_;
  OnSocket on_socket_;
  Refusal refusal_;
  boost::asio::basic_socket_acceptor<boost::asio::ip::tcp, Executor> acceptor_;
  boost::asio::steady_timer retry_;
};

}  // namespace delayq::front
