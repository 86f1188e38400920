// manual_clock.h — a Clock for unit tests (never linked into delayqd): steady and wall time
// move only when the test says, and a timer's waits are posted to the io_context when their
// expiry comes, as Asio posts its handlers. set() moves time and posts what came due, leaving
// the test to run the loop; advance() moves time expiry by expiry, running the loop (settle())
// at each, so that what a timer's handler arms within the span fires too. Timers may outlive
// the clock (a handler may keep one).
#pragma once

#include <boost/asio/io_context.hpp>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>

#include "timing/clock.h"

namespace delayq::timing {

class ManualClock final : public Clock {
 public:
  static constexpr SteadyTime kSteadyStart{std::chrono::hours(1)};

  explicit ManualClock(boost::asio::io_context& io, std::int64_t start_unix_ms = 1'800'000'000'000);
  [[nodiscard]] SteadyTime steady_now() const override;
  // start_unix_ms plus the steady time passed, rounded down.
  [[nodiscard]] std::int64_t now_unix_ms() const override;
  [[nodiscard]] std::unique_ptr<Timer> timer() override;

  // The earliest expiry of a wait under way; nullopt if none waits.
  [[nodiscard]] std::optional<SteadyTime> next_expiry() const;
  // How many timers have waits under way.
  [[nodiscard]] std::size_t armed() const;
  // Time passes until `to` (never back); the waits whose expiry has come are posted, not run.
  void set(SteadyTime to);
  // Time passes by `by`, each timer's waits running at its own expiry, in order.
  void advance(std::chrono::microseconds by);
  // Runs what is ready on the io_context, with no time passing.
  void settle();
  // Drops every wait without calling it, as destroying an io_context drops the handlers it
  // holds (a wait's handler may hold what owns its timer).
  void drop_waits();

  struct State;

 private:
  std::shared_ptr<State> state_;
};

}  // namespace delayq::timing
