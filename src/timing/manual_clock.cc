#include "timing/manual_clock.h"

#include <boost/asio/post.hpp>
#include <set>
#include <utility>
#include <vector>

#include "base/check.h"

namespace delayq::timing {
namespace {
class ManualTimer;
}  // namespace

struct ManualClock::State {
  explicit State(boost::asio::io_context& context, std::int64_t start)
      : io(context), start_unix_ms(start) {}
  boost::asio::io_context& io;
  std::int64_t start_unix_ms;
  SteadyTime now = kSteadyStart;
  std::set<ManualTimer*> timers;
};

namespace {

class ManualTimer final : public Timer {
 public:
  explicit ManualTimer(std::shared_ptr<ManualClock::State> state) : state_(std::move(state)) {
    state_->timers.insert(this);
  }
  ~ManualTimer() override {
    cancel();
    state_->timers.erase(this);
  }
  ManualTimer(const ManualTimer&) = delete;
  ManualTimer& operator=(const ManualTimer&) = delete;

  void expires_at(SteadyTime at) override {
    end_waits(false);
    expiry_ = at;
  }
  void expires_after(std::chrono::microseconds delay) override { expires_at(state_->now + delay); }
  void async_wait(std::function<void(bool expired)> done) override {
    waits_.push_back(std::move(done));
    fire_if_due();  // an expiry already past completes at once, on the loop
  }
  void cancel() override { end_waits(false); }

  [[nodiscard]] bool waiting() const { return !waits_.empty(); }
  [[nodiscard]] SteadyTime expiry() const { return expiry_; }
  void fire_if_due() {
    if (expiry_ <= state_->now) end_waits(true);
  }
  void drop() { waits_.clear(); }

 private:
  void end_waits(bool expired) {
    for (auto& done : std::exchange(waits_, {})) {
      boost::asio::post(state_->io, [done = std::move(done), expired] { done(expired); });
    }
  }

  std::shared_ptr<ManualClock::State> state_;
  SteadyTime expiry_{};
  std::vector<std::function<void(bool expired)>> waits_;
};

}  // namespace

ManualClock::ManualClock(boost::asio::io_context& io, std::int64_t start_unix_ms)
    : state_(std::make_shared<State>(io, start_unix_ms)) {}

SteadyTime ManualClock::steady_now() const {
  return state_->now;
}

std::int64_t ManualClock::now_unix_ms() const {
  return state_->start_unix_ms +
         std::chrono::floor<std::chrono::milliseconds>(state_->now - kSteadyStart).count();
}

std::unique_ptr<Timer> ManualClock::timer() {
  return std::make_unique<ManualTimer>(state_);
}

std::optional<SteadyTime> ManualClock::next_expiry() const {
  std::optional<SteadyTime> next;
  for (const ManualTimer* timer : state_->timers) {
    if (timer->waiting() && (!next || timer->expiry() < *next)) next = timer->expiry();
  }
  return next;
}

std::size_t ManualClock::armed() const {
  std::size_t count = 0;
  for (const ManualTimer* timer : state_->timers) count += timer->waiting() ? 1U : 0U;
  return count;
}

void ManualClock::set(SteadyTime to) {
  state_->now = std::max(state_->now, to);
  // (A handler run later may destroy timers; none runs here: waits are only posted.)
  for (ManualTimer* timer : state_->timers) timer->fire_if_due();
}

void ManualClock::settle() {
  for (int round = 0; round < 1000; ++round) {
    state_->io.restart();
    if (state_->io.poll() == 0) return;
  }
}

void ManualClock::advance(std::chrono::microseconds by) {
  DELAYQ_CHECK(by.count() >= 0);
  const SteadyTime to = state_->now + by;
  settle();
  for (auto next = next_expiry(); next && *next <= to; next = next_expiry()) {
    set(*next);
    settle();
  }
  set(to);
  settle();
}

void ManualClock::drop_waits() {
  for (ManualTimer* timer : state_->timers) timer->drop();
}

}  // namespace delayq::timing
