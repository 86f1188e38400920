// clock.h — where the engine's time comes from.
// The engine reads the present only through a Clock, in milliseconds since the Unix epoch, so
// tests drive a ManualClock instead of sleeping. The engine never lets its own time run
// backwards: a clock that steps back is held at the latest time seen (see Engine::now()).
#pragma once

#include <chrono>
#include <cstdint>

namespace delayq::engine {

using Millis = std::chrono::milliseconds;

class Clock {
 public:
  virtual ~Clock() = default;
  // Milliseconds since the Unix epoch, rounded down: a time that has fully come.
  [[nodiscard]] virtual std::int64_t now_unix_ms() const = 0;
  // The millisecond a delay counts from: not before the real present, so a job put with a delay
  // of d is due no earlier than d after the moment it arrived (rounded up where now_unix_ms()
  // rounds down). Defaults to now_unix_ms(), right for clocks that hold whole milliseconds.
  [[nodiscard]] virtual std::int64_t start_unix_ms() const { return now_unix_ms(); }
};

// The wall clock (std::chrono::system_clock).
class SystemClock final : public Clock {
 public:
  [[nodiscard]] std::int64_t now_unix_ms() const override {
    return std::chrono::floor<Millis>(std::chrono::system_clock::now().time_since_epoch()).count();
  }
  [[nodiscard]] std::int64_t start_unix_ms() const override {
    return std::chrono::ceil<Millis>(std::chrono::system_clock::now().time_since_epoch()).count();
  }
};

// A clock that moves only when told: for tests and simulations.
class ManualClock final : public Clock {
 public:
  explicit ManualClock(std::int64_t start_unix_ms = 1'700'000'000'000) : now_(start_unix_ms) {}
  [[nodiscard]] std::int64_t now_unix_ms() const override { return now_; }
  void set(std::int64_t unix_ms) { now_ = unix_ms; }
  void advance(Millis by) { now_ += by.count(); }

 private:
  std::int64_t now_;
};

}  // namespace delayq::engine
