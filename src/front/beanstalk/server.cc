#include "front/beanstalk/server.h"

#include <chrono>

#include "front/beanstalk/session.h"

namespace delayq::front::beanstalk {

Server::Server(boost::asio::io_context& io, local::Node& node, ServerOptions options)
    : io_(io), node_(node), options_(std::move(options)), acceptor_(io), accept_retry_(io) {
  limits_.max_job_bytes = options_.max_job_bytes;
  durable_listener_ = node_.on_durable([this] { flush_all(); });
  started_unix_ms_ = node_.engine().now();
}

Server::~Server() {
  stop();
  node_.remove_durable(durable_listener_);
}

Status Server::start() {
  boost::system::error_code error;
  const auto address = boost::asio::ip::make_address(options_.address, error);
  if (error) return {Code::kInvalidArgument, "bad listen address '" + options_.address + "'"};
  const boost::asio::ip::tcp::endpoint endpoint(address, options_.port);
  acceptor_.open(endpoint.protocol(), error);
  if (!error) acceptor_.set_option(boost::asio::socket_base::reuse_address(true), error);
  if (!error) acceptor_.bind(endpoint, error);
  if (!error) acceptor_.listen(boost::asio::socket_base::max_listen_connections, error);
  if (error) {
    return {Code::kIOError, "cannot listen on " + options_.address + ":" +
                                std::to_string(options_.port) + ": " + error.message()};
  }
  accept();
  return Status::ok();
}

std::uint16_t Server::port() const {
  boost::system::error_code error;
  const auto endpoint = acceptor_.local_endpoint(error);
  return error ? 0 : endpoint.port();
}

void Server::accept() {
  acceptor_.async_accept(
      [this](const boost::system::error_code& error, boost::asio::ip::tcp::socket socket) {
        if (error == boost::asio::error::operation_aborted || !acceptor_.is_open()) return;
        if (!error) {
          if (sessions_.size() >= options_.max_connections) {
            boost::system::error_code ignored;
            socket.close(ignored);
          } else {
            boost::system::error_code ignored;
            socket.set_option(boost::asio::ip::tcp::no_delay(true), ignored);
            auto session = std::make_shared<Session>(*this, std::move(socket));
            sessions_.insert(session);
            session->start();
          }
        } else {
          // Out of descriptors or buffers: the pending connection keeps the acceptor readable,
          // so accepting again at once would spin. Try again a little later.
          accept_retry_.expires_after(std::chrono::milliseconds(100));
          accept_retry_.async_wait([this](const boost::system::error_code& e) {
            if (!e) accept();
          });
          return;
        }
        accept();
      });
}

void Server::stop_accepting() {
  boost::system::error_code ignored;
  accept_retry_.cancel();
  acceptor_.close(ignored);
}

void Server::stop() {
  stop_accepting();
  // close() removes the session from sessions_: iterate over a copy.
  const auto sessions = sessions_;
  for (const auto& session : sessions) session->close();
}

void Server::flush_all() {
  for (const auto& session : sessions_) session->flush();
}

std::uint64_t Server::uptime_seconds() const {
  return static_cast<std::uint64_t>(
             std::max<std::int64_t>(0, node_.engine().now() - started_unix_ms_)) /
         1000;
}

}  // namespace delayq::front::beanstalk
