#include "front/listener.h"

#include <chrono>

namespace delayq::front {

using boost::asio::ip::tcp;

Listener::Listener(boost::asio::io_context& io, std::string what, Full full, OnSocket on_socket)
    : what_(std::move(what)),
      full_(std::move(full)),
      on_socket_(std::move(on_socket)),
      acceptor_(io),
      retry_(io) {}

Status Listener::start(const std::string& address, std::uint16_t port) {
  boost::system::error_code error;
  const auto ip = boost::asio::ip::make_address(address, error);
  if (error) return {Code::kInvalidArgument, "bad " + what_ + "listen address '" + address + "'"};
  const tcp::endpoint endpoint(ip, port);
  acceptor_.open(endpoint.protocol(), error);
  if (!error) acceptor_.set_option(boost::asio::socket_base::reuse_address(true), error);
  if (!error) acceptor_.bind(endpoint, error);
  if (!error) acceptor_.listen(boost::asio::socket_base::max_listen_connections, error);
  if (error) {
    return {Code::kIOError, "cannot listen " + (what_.empty() ? "" : "for " + what_) + "on " +
                                address + ":" + std::to_string(port) + ": " + error.message()};
  }
  accept();
  return Status::ok();
}

std::uint16_t Listener::port() const {
  boost::system::error_code error;
  const auto endpoint = acceptor_.local_endpoint(error);
  return error ? 0 : endpoint.port();
}

void Listener::accept() {
  acceptor_.async_accept([this](const boost::system::error_code& error, tcp::socket socket) {
    if (error == boost::asio::error::operation_aborted || !acceptor_.is_open()) return;
    if (error) {
      retry_.expires_after(std::chrono::milliseconds(100));
      retry_.async_wait([this](const boost::system::error_code& e) {
        if (!e) accept();
      });
      return;
    }
    boost::system::error_code ignored;
    if (full_()) {
      socket.close(ignored);
    } else {
      socket.set_option(tcp::no_delay(true), ignored);
      on_socket_(std::move(socket));
    }
    accept();
  });
}

void Listener::stop() {
  boost::system::error_code ignored;
  retry_.cancel();
  acceptor_.close(ignored);
}

}  // namespace delayq::front
