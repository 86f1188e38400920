// order_auto_rating.cc — an order completed 48 hours ago and still unrated is rated 5 stars
// automatically, unless the customer rates it first. The customer's rating cancels the automatic
// one; whoever wins the race decides, and each side knows whether it won. One "hour" lasts 20 ms
// here, so the run takes about 1.5 s. Exits 1 if any order ends with the wrong rating.
#include <atomic>
#include <chrono>
#include <cstdio>
#include <thread>

#include "delayq/scheduler.h"

namespace {

using namespace std::chrono_literals;
using Clock = delayq::SchedulerClock;

constexpr auto kHour = 20ms;
const Clock::time_point kStart = Clock::now();

double hours_since_start() {
  return std::chrono::duration<double>(Clock::now() - kStart) / kHour;
}

struct Order {
  int id = 0;
  std::atomic<int> stars{0};
  std::atomic<bool> rated_automatically{false};
  Clock::time_point completed;
  Clock::time_point rated_at;  // when the automatic rating ran
  delayq::TaskHandle auto_rating;
};

class RatingService {
 public:
  explicit RatingService(delayq::Scheduler& scheduler) : scheduler_(scheduler) {}

  void complete(Order& order) {
    order.completed = Clock::now();
    order.auto_rating = scheduler_.schedule(
        [&order] {
          order.rated_at = Clock::now();
          order.stars = 5;
          order.rated_automatically = true;
          std::printf("%5.1f h  order %d: no rating after 48 h, rated 5 stars automatically\n",
                      hours_since_start(), order.id);
        },
        48 * kHour);
  }

  // The customer's rating counts only if it cancels the automatic one first.
  bool rate(Order& order, int stars) {
    if (!order.auto_rating.cancel()) {
      std::printf("%5.1f h  order %d: customer's %d stars refused, already rated automatically\n",
                  hours_since_start(), order.id, stars);
      return false;
    }
    order.stars = stars;
    std::printf("%5.1f h  order %d: customer rated %d stars, automatic rating cancelled\n",
                hours_since_start(), order.id, stars);
    return true;
  }

 private:
  delayq::Scheduler& scheduler_;
};

}  // namespace

int main() {
  delayq::Scheduler scheduler;
  RatingService service(scheduler);
  Order orders[4];
  for (int i = 0; i < 4; ++i) {
    orders[i].id = i + 1;
    service.complete(orders[i]);
  }
  std::printf("%5.1f h  orders 1-4 completed\n", hours_since_start());

  std::this_thread::sleep_until(kStart + 5 * kHour);
  const bool second = service.rate(orders[1], 3);
  std::this_thread::sleep_until(kStart + 24 * kHour);
  const bool third = service.rate(orders[2], 4);
  std::this_thread::sleep_until(kStart + 72 * kHour);
  const bool fourth = service.rate(orders[3], 1);  // too late: 48 h have passed

  int failures = 0;
  const auto expect = [&](bool ok, const char* what) {
    if (!ok) {
      std::printf("WRONG: %s\n", what);
      ++failures;
    }
  };
  expect(orders[0].stars == 5 && orders[0].rated_automatically, "order 1 is rated 5 automatically");
  expect(second && orders[1].stars == 3 && !orders[1].rated_automatically,
         "order 2 keeps the customer's 3 stars");
  expect(third && orders[2].stars == 4 && !orders[2].rated_automatically,
         "order 3 keeps the customer's 4 stars");
  expect(!fourth && orders[3].stars == 5 && orders[3].rated_automatically,
         "order 4 is rated 5 automatically and the late rating is refused");
  expect(orders[1].auto_rating.state() == delayq::TaskState::kCancelled,
         "order 2's automatic rating is cancelled");
  for (const Order& order : orders) {
    // wait() also orders the task's writes before these reads.
    expect(order.auto_rating.wait() != delayq::TaskState::kDone ||
               order.rated_at >= order.completed + 48 * kHour,
           "no automatic rating before 48 h");
  }
  if (failures != 0) {
    std::printf("%d outcomes wrong\n", failures);
    return 1;
  }
  std::printf("all outcomes as expected\n");
  return 0;
}
