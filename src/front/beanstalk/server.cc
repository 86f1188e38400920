#include "front/beanstalk/server.h"

#include <chrono>

#include "front/beanstalk/session.h"

namespace delayq::front::beanstalk {

Server::Server(boost::asio::io_context& io, local::Node& node, ServerOptions options)
    : io_(io),
      node_(node),
      options_(std::move(options)),
      listener_(
          io, "", [this] { return sessions_.size() >= options_.max_connections; },
          [this](boost::asio::ip::tcp::socket socket) {
            auto session = std::make_shared<Session>(*this, std::move(socket));
            sessions_.insert(session);
            session->start();
          }) {
  limits_.max_job_bytes = options_.max_job_bytes;
  durable_listener_ = node_.on_durable([this] { flush_all(); });
  started_unix_ms_ = node_.engine().now();
}

Server::~Server() {
  stop();
  node_.remove_durable(durable_listener_);
}

Status Server::start() {
  return listener_.start(options_.address, options_.port);
}

std::string Server::local_address() const {
  return listener_.local_address();
}

void Server::stop_accepting() {
  listener_.stop();
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
