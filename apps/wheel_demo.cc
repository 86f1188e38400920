// wheel_demo.cc — a few seconds of the engine's timing wheel in real time: delayed jobs are
// scheduled, one is cancelled, one is moved earlier, and the loop sleeps until the next deadline
// (no ticking while idle), printing each job when it fires and how late it was.
// This is what `make run` shows until the delayqd server exists.
#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "wheel/hierarchical_wheel.h"

namespace {

using delayq::wheel::HierarchicalWheel;
using delayq::wheel::Millis;
using delayq::wheel::Time;
using delayq::wheel::Timer;
using delayq::wheel::TimerId;
using delayq::wheel::TimerTable;
using Clock = std::chrono::steady_clock;

struct Job {
  std::string what;
  Millis due;  // after the start: the wheel's times count from it
};

Millis since(Clock::time_point start) {
  return std::chrono::duration_cast<Millis>(Clock::now() - start);
}

}  // namespace

int main() {
  const Clock::time_point start = Clock::now();
  std::vector<Job> jobs = {
      {"order 1001 unpaid after '10 min': cancel it", Millis{1'000}},
      {"order 1002 delivered '48 h' ago: rate it 5 stars", Millis{2'500}},
      {"order 1003 delivered '48 h' ago: rate it 5 stars", Millis{2'500}},
      {"pet 7 finished its '4 h' meal: auto-feed", Millis{3'000}},
      {"plan 42 started '24 h' ago: send the reminder push", Millis{1'500}},
  };
  TimerTable timers(jobs.size());
  HierarchicalWheel wheel(timers);
  for (TimerId id = 0; id < jobs.size(); ++id) {
    wheel.schedule(id, Time{jobs[id].due});
    std::printf("%6lld ms  scheduled #%u for %5lld ms: %s\n",
                static_cast<long long>(since(start).count()), id,
                static_cast<long long>(jobs[id].due.count()), jobs[id].what.c_str());
  }
  std::printf("%6lld ms  the user rated order 1003 first: cancel #2 -> %s\n",
              static_cast<long long>(since(start).count()), wheel.cancel(2) ? "cancelled" : "gone");
  jobs[3].due = Millis{2'000};
  wheel.reschedule(3, Time{jobs[3].due});
  std::printf("%6lld ms  a speed-up card moves #3 to %lld ms\n",
              static_cast<long long>(since(start).count()),
              static_cast<long long>(jobs[3].due.count()));

  while (const auto next = wheel.next_deadline()) {
    std::this_thread::sleep_until(start + next->time_since_epoch());
    wheel.advance_to(Time{since(start)}, [&](TimerId id) {
      const Millis now = since(start);
      std::printf("%6lld ms  fired #%u (%lld ms late): %s\n", static_cast<long long>(now.count()),
                  id, static_cast<long long>((now - jobs[id].due).count()), jobs[id].what.c_str());
    });
  }
  std::printf("no timers left; a server would now sleep until the next put\n");
  return 0;
}
