#include "timing/clock.h"

#include <boost/asio/steady_timer.hpp>

namespace delayq::timing {
namespace {

class AsioTimer final : public Timer {
 public:
  explicit AsioTimer(boost::asio::io_context& io) : timer_(io) {}
  void expires_at(SteadyTime at) override { timer_.expires_at(at); }
  void expires_after(std::chrono::microseconds delay) override { timer_.expires_after(delay); }
  void async_wait(std::function<void(bool expired)> done) override {
    timer_.async_wait(
        [done = std::move(done)](const boost::system::error_code& error) { done(!error); });
  }
  void cancel() override { timer_.cancel(); }

 private:
  boost::asio::steady_timer timer_;
};

class SystemClock final : public Clock {
 public:
  explicit SystemClock(boost::asio::io_context& io) : io_(io) {}
  [[nodiscard]] SteadyTime steady_now() const override { return SteadyClock::now(); }
  [[nodiscard]] std::int64_t now_unix_ms() const override {
    return std::chrono::floor<std::chrono::milliseconds>(
               std::chrono::system_clock::now().time_since_epoch())
        .count();
  }
  [[nodiscard]] std::unique_ptr<Timer> timer() override { return std::make_unique<AsioTimer>(io_); }

 private:
  boost::asio::io_context& io_;
};

}  // namespace

std::unique_ptr<Clock> system_clock(boost::asio::io_context& io) {
  return std::make_unique<SystemClock>(io);
}

}  // namespace delayq::timing
