#include "store/committer.h"

#include <charconv>
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

Committer::Committer(Store& store, Durability durability, Observer observer)
    : store_(store),
      durability_(durability),
      observer_(std::move(observer)),
      thread_([this] { run(); }) {}

Committer::~Committer() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_one();
  thread_.join();
}

void Committer::submit(WriteSet set, Done done) {
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

CommitterStats Committer::stats() const {
  std::lock_guard lock(mutex_);
  return stats_;
}

void Committer::run() {
  std::unique_lock lock(mutex_);
  for (;;) {
    if (durability_.mode == Durability::Mode::kInterval && unsynced_) {
      wake_.wait_until(lock, last_sync_ + durability_.interval,
                       [&] { return stopping_ || !queue_.empty(); });
    } else {
      wake_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
    }
    batch_.swap(queue_);
    lock.unlock();
    commit(batch_);
    const std::size_t steps = batch_.size();
    batch_.clear();
    lock.lock();
    committed_ += steps;
    idle_.notify_all();
    if (stopping_ && queue_.empty()) break;
  }
  // Under interval the last batches were written but maybe not synced: a clean stop syncs them.
  if (unsynced_ && error_.is_ok()) {
    const Status synced = store_.sync();
    if (synced.is_ok()) {
      ++stats_.syncs;
      unsynced_ = false;
    } else {
      error_ = synced;
    }
  }
}

// Runs without the lock held, so the engine thread can keep queueing the next batch meanwhile.
void Committer::commit(std::vector<Step>& steps) {
  const bool always = durability_.mode == Durability::Mode::kAlways;
  Status status;
  {
    std::lock_guard lock(mutex_);
    status = error_;
  }
  bool wrote = false;
  const auto started = std::chrono::steady_clock::now();
  if (status.is_ok() && !steps.empty()) {
    std::vector<const WriteSet*> sets;
    sets.reserve(steps.size());
    for (const Step& step : steps) sets.push_back(&step.set);
    status = store_.write(sets, always);
    wrote = true;
  }
  const auto now = std::chrono::steady_clock::now();
  bool synced = wrote && always;
  if (status.is_ok() && durability_.mode == Durability::Mode::kInterval && (unsynced_ || wrote) &&
      now - last_sync_ >= durability_.interval) {
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
      last_sync_ = now;
      unsynced_ = false;
    } else if (wrote && status.is_ok() && durability_.mode == Durability::Mode::kInterval) {
      unsynced_ = true;
    }
  }
  if (observer_ && wrote && status.is_ok()) {
    observer_({steps.size(), synced,
               synced ? std::chrono::steady_clock::now() - started : std::chrono::nanoseconds{0}});
  }
  for (Step& step : steps) {
    if (step.done) step.done(status);
  }
}

}  // namespace delayq::store
