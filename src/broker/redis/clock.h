// clock.h — the Redis broker's time: a steady clock for what lives in memory (reserve
// timeouts, TTRs a session holds, lease renewals, back-offs), the wall clock for pauses (kept in
// Redis as Unix times), and timers on the steady one. Due times are not here: jobs.lua reads
// Redis's clock. The real clock is the system's with Asio's timers (system_clock()); the unit
// tests' moves only when told, and fires its timers as it moves (no test sleeps).
// Timers, like Asio's: re-setting or cancelling one ends its waits under way, which are then
// called with false; a wait is called once, on the executor, never inside the call.
#pragma once

#include <boost/asio/io_context.hpp>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>

namespace delayq::redis_broker {

using SteadyClock = std::chrono::steady_clock;
using SteadyTime = SteadyClock::time_point;

class Timer {
 public:
  virtual ~Timer() = default;
  virtual void expires_at(SteadyTime at) = 0;
  virtual void expires_after(std::chrono::microseconds delay) = 0;
  // `done(true)` at the expiry; `done(false)` once cancelled or set again before.
  virtual void async_wait(std::function<void(bool expired)> done) = 0;
  virtual void cancel() = 0;
};

class Clock {
 public:
  virtual ~Clock() = default;
  [[nodiscard]] virtual SteadyTime steady_now() const = 0;
  // Milliseconds since the Unix epoch.
  [[nodiscard]] virtual std::int64_t now_unix_ms() const = 0;
  [[nodiscard]] virtual std::unique_ptr<Timer> timer() = 0;
};

// std::chrono's clocks, with boost::asio::steady_timer on `io`.
[[nodiscard]] std::shared_ptr<Clock> system_clock(boost::asio::io_context& io);

}  // namespace delayq::redis_broker
