// pet_auto_feed.cc — a pet finishes its meal in 4 hours and an auto-feed card feeds it again
// then; a speed-up card moves that time 2 hours earlier (reschedule). Pet 1 gets the card early
// (fed at 2 h), pet 2 never (fed at 4 h), pet 3 only at 3.5 h, when 2 h has already passed (fed
// at once). One "hour" lasts 500 ms here (so a loaded machine has 250 ms of slack before pet 3's
// meal ends), and the run takes about 2.4 s. Exits 1 if a pet is fed at the wrong time.
#include <atomic>
#include <chrono>
#include <cstdio>
#include <thread>

#include "delayq/scheduler.h"

namespace {

using namespace std::chrono_literals;
using Clock = delayq::SchedulerClock;

constexpr auto kHour = 500ms;
const Clock::time_point kStart = Clock::now();

double hours_since_start() {
  return std::chrono::duration<double>(Clock::now() - kStart) / kHour;
}

struct Pet {
  int id = 0;
  Clock::time_point fed_at;
  delayq::TaskHandle feeding;
};

void start_meal(delayq::Scheduler& scheduler, Pet& pet) {
  pet.feeding = scheduler.schedule(
      [&pet] {
        pet.fed_at = Clock::now();
        std::printf("%4.2f h  pet %d: meal over, auto-fed\n", hours_since_start(), pet.id);
      },
      4 * kHour);
}

// The speed-up card: the meal ends 2 hours earlier than planned (at once if that has passed).
bool speed_up(Pet& pet) {
  const bool moved = pet.feeding.reschedule_at(pet.feeding.due() - 2 * kHour);
  std::printf("%4.2f h  pet %d: speed-up card %s\n", hours_since_start(), pet.id,
              moved ? "used, feeding moved 2 h earlier" : "refused, already fed");
  return moved;
}

}  // namespace

int main() {
  delayq::Scheduler scheduler;
  Pet pets[3];
  for (int i = 0; i < 3; ++i) {
    pets[i].id = i + 1;
    start_meal(scheduler, pets[i]);
  }
  std::printf("%4.2f h  pets 1-3 start a 4 h meal\n", hours_since_start());

  std::this_thread::sleep_until(kStart + 1 * kHour);
  const bool first = speed_up(pets[0]);
  std::this_thread::sleep_until(kStart + 7 * kHour / 2);
  const bool third = speed_up(pets[2]);
  for (Pet& pet : pets) pet.feeding.wait();

  int failures = 0;
  const auto expect = [&](bool ok, const char* what) {
    if (!ok) {
      std::printf("WRONG: %s\n", what);
      ++failures;
    }
  };
  expect(first && third, "both speed-up cards are accepted");
  for (Pet& pet : pets) {
    expect(pet.feeding.state() == delayq::TaskState::kDone, "every pet is fed once");
  }
  expect(pets[0].fed_at >= kStart + 2 * kHour && pets[0].fed_at < kStart + 4 * kHour,
         "pet 1 is fed at 2 h, not at 4 h");
  expect(pets[1].fed_at >= kStart + 4 * kHour, "pet 2 is fed at 4 h");
  expect(pets[2].fed_at >= kStart + 7 * kHour / 2 && pets[2].fed_at < kStart + 4 * kHour,
         "pet 3 is fed as soon as its card is used");
  expect(!pets[0].feeding.reschedule(1h), "a fed pet's feeding can no longer move");
  if (failures != 0) {
    std::printf("%d outcomes wrong\n", failures);
    return 1;
  }
  std::printf("all outcomes as expected\n");
  return 0;
}
