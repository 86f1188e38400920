#include "store/committer.h"

#include <charconv>
#include <iterator>
#include <vector>

namespace delayq::store {

Result<Durability> Durability::parse(std::string_view text) {
  if (text == "always") return Durability{Mode::kAlways, {}};
  if (text == "none") return Durability{Mode::kNone, {}};
  constexpr std::string_view kPrefix = "interval:";
  if (text.starts_with(kPrefix)) {
    const std::string_view digits = text.substr(kPrefix.size());
    int ms = 0;
    const auto [end, error] = std::from_chars(digits.data(), digits.data() + digits.size(), ms);
    if (error == std::errc() && end == digits.data() + digits.size() && ms >= 1 && ms <= 60000) {
      return Durability{Mode::kInterval, std::chrono::milliseconds{ms}};
    }
  }
  return Status(Code::kInvalidArgument,
                "durability must be always, none or interval:<ms> (1..60000), not '" +
                    std::string(text) + "'");
}

std::string Durability::to_string() const {
  switch (mode) {
    case Mode::kAlways:
      return "always";
    case Mode::kNone:
      return "none";
    case Mode::kInterval:
      return "interval:" + std::to_string(interval.count());
  }
  return "unknown";
}

Committer::Committer(Store& store, Durability durability, Observer observer, Clock clock)
    : store_(store),
      durability_(durability),
      observer_(std::move(observer)),
      clock_(std::move(clock)),
      last_sync_(now()),
      thread_([this] { run(); }) {}

Committer::~Committer() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_one();
  thread_.join();
}

void Committer::retire(std::vector<std::shared_ptr<const WriteSet>> sets) {
  std::size_t bytes = 0;
  for (const auto& set : sets) {
    for (const WriteSet::Op& op : set->ops()) bytes += op.value.size();
  }
  bool wake = false;
  {
    const std::lock_guard lock(mutex_);
    if (retired_.empty()) {
      retired_ = std::move(sets);
    } else {
      retired_.insert(retired_.end(), std::make_move_iterator(sets.begin()),
                      std::make_move_iterator(sets.end()));
    }
    retired_bytes_ += bytes;
    wake = retired_bytes_ >= kRetiredWake;
  }
  if (wake) wake_.notify_one();
}

void Committer::submit(std::shared_ptr<const WriteSet> set, Done done) {
  {
    std::lock_guard lock(mutex_);
    queue_.push_back(Step{std::move(set), std::move(done)});
    ++submitted_;
  }
  wake_.notify_one();
}

Status Committer::flush() {
  std::unique_lock lock(mutex_);
  const std::uint64_t target = submitted_;
  idle_.wait(lock, [&] { return committed_ >= target; });
  return error_;
}

Status Committer::written() {
  bool wake = false;
  Status error;
  {
    std::lock_guard lock(mutex_);
    wake = !unsynced();
    ++written_;
    error = error_;
  }
  if (wake) wake_.notify_one();
  return error;
}

Status Committer::poke() {
  std::unique_lock lock(mutex_);
  const std::uint64_t ticket = ++pokes_;
  wake_.notify_one();
  idle_.wait(lock, [&] { return answered_ >= ticket; });
  return error_;
}

CommitterStats Committer::stats() const {
  std::lock_guard lock(mutex_);
  return stats_;
}

std::chrono::steady_clock::time_point Committer::now() const {
  return clock_ ? clock_() : std::chrono::steady_clock::now();
}

void Committer::run() {
  std::unique_lock lock(mutex_);
  for (;;) {
    wait_for_work(lock);
    // A round that starts after a poke reads the clock after it, so it answers the poke.
    const std::uint64_t pokes = pokes_;
    batch_.swap(queue_);
    std::vector<std::shared_ptr<const WriteSet>> retired;
    retired.swap(retired_);
    retired_bytes_ = 0;
    lock.unlock();
    retired.clear();
    commit(batch_);
    const std::size_t steps = batch_.size();
    batch_.clear();
    lock.lock();
    committed_ += steps;
    answered_ = pokes;
    idle_.notify_all();
    if (stopping_ && queue_.empty()) break;
  }
  // Under interval the last batches were written but maybe not synced: a clean stop syncs them.
  if (unsynced() && error_.is_ok()) {
    const Status synced = store_.sync();
    if (synced.is_ok()) {
      ++stats_.syncs;
      unsynced_ = false;
      written_synced_ = written_;
    } else {
      error_ = synced;
    }
  }
}

// Sleeps until steps are queued, the destructor or poke() wakes the thread, or an interval sync
// comes due: on steady_clock a timed wait; an injected clock has no real time to wait for, so
// the thread waits for a poke (and checks the clock once, in case it moved unpoked). After a
// failure nothing is synced again, so there is no sync to wait for.
void Committer::wait_for_work(std::unique_lock<std::mutex>& lock) {
  const auto woken = [&] {
    return stopping_ || !queue_.empty() || pokes_ != answered_ || retired_bytes_ >= kRetiredWake;
  };
  if (durability_.mode != Durability::Mode::kInterval || !error_.is_ok()) {
    wake_.wait(lock, woken);
    return;
  }
  // Under interval a write made elsewhere (written()) also starts the wait for its sync.
  wake_.wait(lock, [&] { return woken() || unsynced(); });
  if (woken()) return;
  const auto due = last_sync_ + durability_.interval;
  if (clock_) {
    wake_.wait(lock, [&] { return woken() || clock_() >= due; });
  } else {
    wake_.wait_until(lock, due, woken);
  }
}

// Runs without the lock held, so the engine thread can keep queueing the next batch meanwhile.
void Committer::commit(std::vector<Step>& steps) {
  const bool always = durability_.mode == Durability::Mode::kAlways;
  Status status;
  bool unsynced_before = false;
  std::uint64_t written_before = 0;  // outside writes a sync begun from here covers
  {
    std::lock_guard lock(mutex_);
    status = error_;
    unsynced_before = unsynced();
    written_before = written_;
  }
  bool wrote = false;
  const auto started = now();
  if (status.is_ok() && !steps.empty()) {
    std::vector<const WriteSet*> sets;
    sets.reserve(steps.size());
    for (const Step& step : steps) sets.push_back(step.set.get());
    status = store_.write(sets, always);
    wrote = true;
  }
  const auto written = now();
  bool synced = wrote && always;
  if (status.is_ok() && durability_.mode == Durability::Mode::kInterval &&
      (unsynced_before || wrote) && written - last_sync_ >= durability_.interval) {
    status = store_.sync();
    synced = true;
  }
  {
    std::lock_guard lock(mutex_);
    if (!status.is_ok() && error_.is_ok()) error_ = status;
    if (wrote && status.is_ok()) {
      stats_.steps += steps.size();
      ++stats_.batches;
    }
    if (synced) {
      ++stats_.syncs;
      last_sync_ = written;
      unsynced_ = false;
      written_synced_ = written_before;
    } else if (wrote && status.is_ok() && durability_.mode == Durability::Mode::kInterval) {
      unsynced_ = true;
    }
  }
  if (observer_ && (wrote || synced) && status.is_ok()) {
    observer_({steps.size(), synced, synced ? now() - started : std::chrono::nanoseconds{0}});
  }
  for (Step& step : steps) {
    if (step.done) step.done(status);
  }
}

}  // namespace delayq::store
