// local_broker.h — the broker on this machine: broker.h's contract over one Node (the engine,
// RocksDB and the group committer). Each session is an engine client; an operation runs on the
// engine at once and its completion waits, through Node::when_durable, for the batch holding the
// latest change of the job it reports (Node::batch_of), or for everything done so far when the
// result is not about one job. A reserve's ticket is the engine's WaitId: a reserve that names
// its tubes is a wait of its own in the engine, beside the session's watch-list one.
// Everything runs on the io_context's thread. Made by delayqd, the only place that knows which
// broker runs.
#pragma once

#include <boost/asio/io_context.hpp>
#include <memory>

#include "broker/broker.h"
#include "broker/local/node.h"
#include "broker/local/schedules.h"

namespace delayq::broker::local {

class LocalBroker final : public broker::Broker {
 public:
  // Opens the data directory and recovers every job (see Node::open for the errors).
  static Result<std::unique_ptr<LocalBroker>> open(boost::asio::io_context& io,
                                                   const NodeOptions& options);
  // Over a store already open (tests; see Node::open).
  static Result<std::unique_ptr<LocalBroker>> open(boost::asio::io_context& io,
                                                   const NodeOptions& options,
                                                   std::unique_ptr<store::Store> store);

  [[nodiscard]] std::unique_ptr<broker::Session> open_session(
      broker::SessionOptions options) override;
  [[nodiscard]] std::unique_ptr<broker::Admin> open_admin() override;
  void set_draining(bool draining) override { node_->set_draining(draining); }
  [[nodiscard]] bool draining() const override { return node_->draining(); }
  [[nodiscard]] Status health() const override;
  [[nodiscard]] broker::Seconds uptime() const override { return node_->uptime(); }
  [[nodiscard]] broker::Schedules& schedules() override { return *schedules_; }
  Status close() override { return node_->close(); }
  [[nodiscard]] std::vector<std::pair<std::string, Webhook>> webhooks() const override {
    return {node_->webhooks().begin(), node_->webhooks().end()};
  }
  void on_webhooks_changed(std::function<void()> handler) override {
    node_->on_webhooks_changed(std::move(handler));
  }

  [[nodiscard]] std::uint64_t recovered_jobs() const noexcept { return node_->recovered_jobs(); }
  [[nodiscard]] std::uint64_t recovered_far_jobs() const noexcept {
    return node_->recovered_far_jobs();
  }
  // The store failed: the process must stop (called once, on the io_context's thread).
  void on_fatal(std::function<void(const Status&)> handler) { node_->on_fatal(std::move(handler)); }
  [[nodiscard]] Node& node() { return *node_; }

 private:
  explicit LocalBroker(std::unique_ptr<Node> node) : node_(std::move(node)) {}
  static Result<std::unique_ptr<LocalBroker>> over(std::unique_ptr<Node> node);
  std::unique_ptr<Node> node_;
  std::unique_ptr<LocalSchedules> schedules_;  // after node_: goes first
};

}  // namespace delayq::broker::local
