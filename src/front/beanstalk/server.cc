#include "front/beanstalk/server.h"

#include <vector>

#include "front/beanstalk/connection.h"

namespace delayq::front::beanstalk {

Server::Server(boost::asio::io_context& io, broker::Broker& broker, ServerOptions options)
    : options_(std::move(options)),
      own_metrics_(options_.metrics == nullptr ? std::make_unique<metrics::Registry>() : nullptr),
      context_{broker, ParserLimits{}, Tally{},
               ProtocolCounts(options_.metrics != nullptr ? *options_.metrics : *own_metrics_,
                              "beanstalk")},
      listener_(
          io, "", [this] { return connections_.size() >= options_.max_connections; },
          [this](Socket socket) {
            auto connection = std::make_shared<Connection>(*this, std::move(socket));
            connections_.insert(connection);
            connection->start();
          },
          // The protocol's reply for a server out of a resource, which any command may get: a
          // client over the limit reads it as the answer to its first command.
          [] { return std::string("OUT_OF_MEMORY\r\n"); }),
      partial_look_(io) {
  context_.limits.max_job_bytes = options_.max_job_bytes;
}

Server::~Server() {
  stop();
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

void Server::watch_partial() {
  if (looking_) return;
  looking_ = true;
  partial_look_.expires_after(std::chrono::seconds(1));
  partial_look_.async_wait([this](const boost::system::error_code& error) {
    if (error) return;  // stopped (or destroyed): touches nothing
    looking_ = false;
    const auto now = std::chrono::steady_clock::now();
    std::vector<std::shared_ptr<Connection>> stalled;
    bool partial = false;
    for (const auto& connection : connections_) {
      if (connection->stalled(now)) {
        stalled.push_back(connection);
      } else {
        partial = partial || connection->partial();
      }
    }
    for (const auto& connection : stalled) connection->close();
    if (partial) watch_partial();
  });
}

void Server::stop() {
  partial_look_.cancel();
  stop_accepting();
  // close() removes the connection from connections_: iterate over a copy.
  const auto connections = connections_;
  for (const auto& connection : connections) connection->close();
}

}  // namespace delayq::front::beanstalk
