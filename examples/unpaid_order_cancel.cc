// unpaid_order_cancel.cc — an order left unpaid for 10 minutes is cancelled. Paying cancels the
// timeout; a payment that arrives after the timeout fired is refused (and would be refunded).
// Exactly one of the two wins, and each side knows which. One "minute" lasts 100 ms here, so the
// run takes about 1.5 s. Exits 1 if any order ends in the wrong state.
#include <atomic>
#include <chrono>
#include <cstdio>
#include <thread>

#include "delayq/scheduler.h"

namespace {

using namespace std::chrono_literals;
using Clock = delayq::SchedulerClock;

constexpr auto kMinute = 100ms;
const Clock::time_point kStart = Clock::now();

double minutes_since_start() {
  return std::chrono::duration<double>(Clock::now() - kStart) / kMinute;
}

enum class Status { kUnpaid, kPaid, kCancelled };

struct Order {
  int id = 0;
  std::atomic<Status> status{Status::kUnpaid};
  Clock::time_point placed;
  Clock::time_point cancelled_at;
  delayq::TaskHandle timeout;
};

void place(delayq::Scheduler& scheduler, Order& order) {
  order.placed = Clock::now();
  order.timeout = scheduler.schedule(
      [&order] {
        order.cancelled_at = Clock::now();
        order.status = Status::kCancelled;
        std::printf("%5.1f min  order %d: unpaid after 10 min, cancelled\n", minutes_since_start(),
                    order.id);
      },
      10 * kMinute);
}

// Accepts the payment only if the timeout is cancelled first.
bool pay(Order& order) {
  if (!order.timeout.cancel()) {
    std::printf("%5.1f min  order %d: payment refused, the order was cancelled\n",
                minutes_since_start(), order.id);
    return false;
  }
  order.status = Status::kPaid;
  std::printf("%5.1f min  order %d: paid, timeout cancelled\n", minutes_since_start(), order.id);
  return true;
}

}  // namespace

int main() {
  delayq::Scheduler scheduler;
  Order a;
  Order b;
  Order c;
  a.id = 1;
  b.id = 2;
  c.id = 3;
  place(scheduler, a);
  place(scheduler, b);
  place(scheduler, c);
  std::printf("%5.1f min  orders 1-3 placed\n", minutes_since_start());

  std::this_thread::sleep_until(kStart + 3 * kMinute);
  const bool a_paid = pay(a);
  std::this_thread::sleep_until(kStart + 14 * kMinute);
  const bool c_paid = pay(c);  // too late
  // Order 2 is never paid.

  int failures = 0;
  const auto expect = [&](bool ok, const char* what) {
    if (!ok) {
      std::printf("WRONG: %s\n", what);
      ++failures;
    }
  };
  expect(a_paid && a.status == Status::kPaid, "order 1 is paid");
  expect(a.timeout.state() == delayq::TaskState::kCancelled, "order 1's timeout is cancelled");
  expect(b.timeout.wait() == delayq::TaskState::kDone && b.status == Status::kCancelled,
         "order 2 is cancelled by its timeout");
  expect(!c_paid && c.timeout.wait() == delayq::TaskState::kDone && c.status == Status::kCancelled,
         "order 3 is cancelled and its late payment refused");
  expect(b.cancelled_at >= b.placed + 10 * kMinute && c.cancelled_at >= c.placed + 10 * kMinute,
         "no order is cancelled before 10 min");
  if (failures != 0) {
    std::printf("%d outcomes wrong\n", failures);
    return 1;
  }
  std::printf("all outcomes as expected\n");
  return 0;
}
