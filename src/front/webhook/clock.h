// clock.h — the deliverer's time, injected: the steady clock its rate schedule, waits and
// latencies run on, the wall clock of signatures, lateness and Retry-After dates, and timers on
// the steady one. delayqd's is system_clock(): std::chrono's clocks with Asio's timers on the
// deliverer's executor; the deliverer's unit tests move one by hand and fire its timers as it
// moves, so no test sleeps. Not engine/clock.h: front-ends may not include the engine, it has
// no timers, and its whole milliseconds are too coarse for a rate's interval (10 µs at 100000
// requests a second). The same interface as the Redis broker's (broker/redis/clock.h), which a
// front-end may not include either: one copy in a layer below both would serve both.
// Timers behave as Asio's: setting or cancelling one ends its waits under way, which are then
// called with false; a wait is called once, on the executor, never inside the call; a wait whose
// expiry has come may still be called with true after a cancel() (its call was already queued).
#pragma once

#include <boost/asio/io_context.hpp>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>

namespace delayq::webhook {

using SteadyClock = std::chrono::steady_clock;
using SteadyTime = SteadyClock::time_point;

class Timer {
 public:
  virtual ~Timer() = default;  // ends its waits under way, as cancel() does
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

}  // namespace delayq::webhook
