// clock.h — time as the parts on an event loop see it, injected: a steady clock for what lives
// in memory (timeouts, rates, leases, back-offs), the wall clock in Unix milliseconds (signatures,
// lateness, pauses kept as Unix times), and timers on the steady one. delayqd's is
// system_clock(): std::chrono's clocks with Asio's timers. Unit tests use ManualClock
// (manual_clock.h), which moves only when told and fires its timers as it moves: no test sleeps.
// Users: the Redis broker's node (broker/redis) and push delivery's Deliverer (front/webhook).
// (The engine has its own, engine/clock.h: pure, without timers, in whole milliseconds.)
// Timers behave as Asio's: setting, cancelling or destroying one ends its waits under way, which
// are then called with false; a wait is called once, on the executor, never inside the call; a
// wait on a timer whose expiry has passed completes at once (on the executor); a wait whose
// expiry has come may still be called with true after a cancel() (its call was already queued).
#pragma once

#include <boost/asio/io_context.hpp>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>

namespace delayq::timing {

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
  // Milliseconds since the Unix epoch, rounded down.
  [[nodiscard]] virtual std::int64_t now_unix_ms() const = 0;
  [[nodiscard]] virtual std::unique_ptr<Timer> timer() = 0;
};

// std::chrono's clocks, with boost::asio::steady_timer on `io`.
[[nodiscard]] std::unique_ptr<Clock> system_clock(boost::asio::io_context& io);

}  // namespace delayq::timing
