// clock.h — where the engine's time comes from: two clocks. The wall clock (milliseconds since
// the Unix epoch) says when absolute due times have come: a job due at 18:00 fires when the wall
// clock says 18:00, never before. The steady clock (monotonic, any origin) measures everything
// relative that lives only in memory: TTRs, reserve timeouts, pauses, DEADLINE_SOON. A step of
// the wall clock (NTP, an operator) moves the first and not the second, so it neither holds a
// worker's job for an hour nor lapses it early. The engine never lets its own wall time run
// backwards: a wall clock that steps back is held at the latest time seen (Engine::now()).
#pragma once

#include <chrono>
#include <cstdint>
#include <limits>

namespace delayq::engine {

using Millis = std::chrono::milliseconds;

// a / b rounded toward minus infinity (b > 0): times before the epoch round down too, so a
// millisecond or a bucket never straddles it.
[[nodiscard]] constexpr std::int64_t floor_div(std::int64_t a, std::int64_t b) {
  return a / b - (a % b < 0 ? 1 : 0);
}

// now + a delay, held at the largest time instead of overflowing (a due time that far out never
// comes, which is what such a delay asks for).
[[nodiscard]] constexpr std::int64_t later(std::int64_t now_ms, std::int64_t delay_ms) {
  if (delay_ms > 0 && now_ms > std::numeric_limits<std::int64_t>::max() - delay_ms) {
    return std::numeric_limits<std::int64_t>::max();
  }
  return now_ms + delay_ms;
}

inline constexpr std::int64_t kMicrosPerMilli = 1000;

// Milliseconds as microseconds, held at the largest time (which never comes).
[[nodiscard]] constexpr std::int64_t micros(std::int64_t ms) {
  return ms > std::numeric_limits<std::int64_t>::max() / kMicrosPerMilli
             ? std::numeric_limits<std::int64_t>::max()
             : ms * kMicrosPerMilli;
}

class Clock {
 public:
  virtual ~Clock() = default;
  // The wall clock: milliseconds since the Unix epoch, rounded down (a time that has fully come).
  [[nodiscard]] virtual std::int64_t now_unix_ms() const = 0;
  // The millisecond a delay counts from: not before the real present, so a job put with a delay
  // of d is due no earlier than d after the moment it arrived (rounded up where now_unix_ms()
  // rounds down). Defaults to now_unix_ms(), right for clocks that hold whole milliseconds.
  [[nodiscard]] virtual std::int64_t start_unix_ms() const { return now_unix_ms(); }
  // The same two to the microsecond, which is how finely a delay counts (a job put 0.3 ms into a
  // millisecond with a delay of 1 s is due 0.3 ms into the millisecond 1 s later). Default to the
  // milliseconds above, right for clocks that hold whole milliseconds.
  [[nodiscard]] virtual std::int64_t now_unix_us() const { return now_unix_ms() * 1000; }
  [[nodiscard]] virtual std::int64_t start_unix_us() const { return start_unix_ms() * 1000; }
  // The steady clock: milliseconds from any origin, never going back, not moved by steps of the
  // wall clock; rounded down, and its start rounded up, as the wall clock's.
  [[nodiscard]] virtual std::int64_t steady_ms() const = 0;
  [[nodiscard]] virtual std::int64_t steady_start_ms() const { return steady_ms(); }
  // The steady clock to the microsecond (default: its milliseconds), for the wall clock's lead
  // over it, which two readings to the millisecond would show 1 ms apart from one read to the
  // next whenever their milliseconds begin at different moments.
  [[nodiscard]] virtual std::int64_t steady_us() const { return steady_ms() * 1000; }
};

// The system's clocks: std::chrono::system_clock and std::chrono::steady_clock.
class SystemClock final : public Clock {
 public:
  [[nodiscard]] std::int64_t now_unix_ms() const override {
    return std::chrono::floor<Millis>(std::chrono::system_clock::now().time_since_epoch()).count();
  }
  [[nodiscard]] std::int64_t now_unix_us() const override {
    return std::chrono::floor<std::chrono::microseconds>(
               std::chrono::system_clock::now().time_since_epoch())
        .count();
  }
  [[nodiscard]] std::int64_t start_unix_us() const override {
    return std::chrono::ceil<std::chrono::microseconds>(
               std::chrono::system_clock::now().time_since_epoch())
        .count();
  }
  [[nodiscard]] std::int64_t steady_ms() const override {
    return std::chrono::floor<Millis>(std::chrono::steady_clock::now().time_since_epoch()).count();
  }
  [[nodiscard]] std::int64_t steady_start_ms() const override {
    return std::chrono::ceil<Millis>(std::chrono::steady_clock::now().time_since_epoch()).count();
  }
  [[nodiscard]] std::int64_t steady_us() const override {
    return std::chrono::floor<std::chrono::microseconds>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
  }
};

// Clocks that move only when told: for tests and simulations. Time passing moves both; a step
// of the wall clock moves only it.
class ManualClock final : public Clock {
 public:
  explicit ManualClock(std::int64_t start_unix_ms = 1'700'000'000'000) : now_(start_unix_ms) {}
  [[nodiscard]] std::int64_t now_unix_ms() const override { return now_; }
  [[nodiscard]] std::int64_t steady_ms() const override { return steady_; }
  // Forward: time passes until the wall clock says unix_ms. Backward: the wall clock steps back.
  void set(std::int64_t unix_ms) {
    if (unix_ms > now_) steady_ += unix_ms - now_;
    now_ = unix_ms;
  }
  // Time passes (by >= 0); a negative `by` steps the wall clock back, as set() does.
  void advance(Millis by) { set(now_ + by.count()); }
  // The wall clock steps by `by`, either way, while no time passes.
  void step_wall(Millis by) { now_ += by.count(); }

 private:
  std::int64_t now_;
  std::int64_t steady_ = 1'000'000;
};

}  // namespace delayq::engine
