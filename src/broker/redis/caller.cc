#include "broker/redis/caller.h"

namespace delayq::broker::redis {
namespace {

class ClientCaller final : public Caller {
 public:
  ClientCaller(boost::asio::any_io_executor executor, delayq::redis::ClientOptions options)
      : client_(std::move(executor), std::move(options)) {}

  void start(std::function<void(Status)> done) override { client_.start(std::move(done)); }
  void close() override { client_.close(); }
  void run(delayq::redis::Request request,
           delayq::redis::Callback<std::vector<delayq::redis::Reply>> done) override {
    client_.run(std::move(request), std::move(done));
  }
  void run(std::uint16_t slot, delayq::redis::Command command,
           delayq::redis::Callback<delayq::redis::Reply> done) override {
    client_.run(slot, std::move(command), std::move(done));
  }
  void run_at(const std::string& address, delayq::redis::Command command,
              delayq::redis::Callback<delayq::redis::Reply> done) override {
    client_.run_at(address, std::move(command), std::move(done));
  }
  void subscribe(std::string channel, std::function<void(std::string)> message,
                 std::function<void()> subscribed) override {
    client_.subscribe(std::move(channel), std::move(message), std::move(subscribed));
  }
  void subscribe_shards(std::vector<std::string> channels,
                        std::function<void(std::size_t, std::string)> message,
                        std::function<void(std::size_t)> subscribed) override {
    client_.subscribe_shards(std::move(channels), std::move(message), std::move(subscribed));
  }
  void sync_shards(std::function<void(std::vector<bool>)> done) override {
    client_.sync_shards(std::move(done));
  }
  [[nodiscard]] std::string shard_subscribe_error() const override {
    return client_.shard_subscribe_error();
  }
  [[nodiscard]] std::size_t shard_channels_subscribed() const override {
    return client_.shard_channels_subscribed();
  }
  [[nodiscard]] bool shard_channel_subscribed(std::size_t index) const override {
    return client_.shard_channel_subscribed(index);
  }
  [[nodiscard]] bool unsettled(std::uint16_t slot) const override {
    return client_.unsettled(slot);
  }
  [[nodiscard]] delayq::redis::ClientStats stats() const override { return client_.stats(); }
  [[nodiscard]] std::vector<std::string> primaries() const override { return client_.primaries(); }
  [[nodiscard]] std::string primary_of(std::uint16_t slot) const override {
    return client_.primary_of(slot);
  }

 private:
  delayq::redis::Client client_;
};

}  // namespace

std::unique_ptr<Caller> client_caller(boost::asio::any_io_executor executor,
                                      delayq::redis::ClientOptions options) {
  return std::make_unique<ClientCaller>(std::move(executor), std::move(options));
}

}  // namespace delayq::broker::redis
