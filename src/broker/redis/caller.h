// caller.h — what the Redis broker asks of Redis, and nothing more: run a request on the primary
// of a slot or at a node, subscribe to the channels, say where slots live. The real one is a
// delayq::redis::Client (client_caller()); the broker's unit tests script a fake that answers each
// call by hand, so that waiters, probe rounds, leases and lost answers are tested without a
// process. Every member has the meaning redis/client.h gives it; completions run on the executor,
// never inside the call.
#pragma once

#include <boost/asio/any_io_executor.hpp>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "redis/client.h"

namespace delayq::broker::redis {

class Caller {
 public:
  virtual ~Caller() = default;

  virtual void start(std::function<void(Status)> done) = 0;
  virtual void close() = 0;
  virtual void run(delayq::redis::Request request,
                   delayq::redis::Callback<std::vector<delayq::redis::Reply>> done) = 0;
  virtual void run(std::uint16_t slot, delayq::redis::Command command,
                   delayq::redis::Callback<delayq::redis::Reply> done) = 0;
  virtual void run_at(const std::string& address, delayq::redis::Command command,
                      delayq::redis::Callback<delayq::redis::Reply> done) = 0;

  virtual void subscribe(std::string channel, std::function<void(std::string)> message,
                         std::function<void()> subscribed) = 0;
  virtual void subscribe_shards(std::vector<std::string> channels,
                                std::function<void(std::size_t, std::string)> message,
                                std::function<void(std::size_t)> subscribed) = 0;
  virtual void sync_shards(std::function<void(std::vector<bool>)> done) = 0;
  [[nodiscard]] virtual std::string shard_subscribe_error() const = 0;
  [[nodiscard]] virtual std::size_t shard_channels_subscribed() const = 0;
  [[nodiscard]] virtual bool shard_channel_subscribed(std::size_t index) const = 0;
  [[nodiscard]] virtual bool unsettled(std::uint16_t slot) const = 0;
  // What the client met so far: answers, requests sent again, redirections, reconnections.
  [[nodiscard]] virtual delayq::redis::ClientStats stats() const = 0;

  [[nodiscard]] virtual std::vector<std::string> primaries() const = 0;
  [[nodiscard]] virtual std::string primary_of(std::uint16_t slot) const = 0;
};

// A delayq::redis::Client on `executor`.
[[nodiscard]] std::unique_ptr<Caller> client_caller(boost::asio::any_io_executor executor,
                                                    delayq::redis::ClientOptions options);

}  // namespace delayq::broker::redis
