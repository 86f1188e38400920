// far.cc — the far tier (docs/design/far-tier.md): delayed jobs due beyond the window live on
// disk only and come back into memory ahead of their time, or when an operation needs them.
//
// A spilled job is written to the far tier and taken out of the wheel at once, but stays in
// memory (indexed by id, key and group) until the write that holds it is settled: until then
// the store may not show it, and memory is what every read finds first. The store's far entries
// of a job that is in memory, or whose erasure is not settled yet, are stale and skipped.
#include <algorithm>
#include <limits>

#include "engine/engine.h"

namespace delayq::engine {

void Engine::persist(Slot slot, bool fresh) {
  Job& j = job(slot);
  DELAYQ_CHECK(!j.spilled());
  // A job back from the far tier in this step has no near record on disk: a near write is its
  // first, and a spill has none to drop.
  if (!unwritten_.empty() && unwritten_.erase(slot) != 0) fresh = true;
  if (!far_on() || j.state() != JobState::kDelayed || j.due_unix_ms < horizon_) {
    mutations_.put_record(record(slot));
    return;
  }
  // Spilled: on disk only from the next settle() on; counted where it was (as a far job now).
  mutations_.far_put(record(slot), fresh);
  const bool in_wheel = wheel_.cancel(slot);
  DELAYQ_CHECK(in_wheel);  // due past the horizon: in the wheel, not imminent_
  j.set_spilled(true);
  far_count(j.tube, j.due_unix_ms, +1);
  spilled_at_[slot] = epoch_ + 1;
}

void Engine::unspill(Slot slot) {
  Job& j = job(slot);
  DELAYQ_CHECK(j.spilled());
  mutations_.far_erase(record(slot));
  far_count(j.tube, j.due_unix_ms, -1);
  j.set_spilled(false);
  spilled_at_.erase(slot);
  unsettle(j.id());
  wheel_.schedule(slot, wheel::time_at(j.due_unix_ms));
  unwritten_.insert_or_assign(slot, record(slot));  // near again on disk
}

std::optional<Engine::Slot> Engine::take(JobId id) {
  if (const auto slot = find(id)) {
    if (job(*slot).spilled()) unspill(*slot);
    return slot;
  }
  return load_far(id);
}

std::optional<Engine::Slot> Engine::load_far(JobId id) {
  if (!far_on() || far_stale(id)) return std::nullopt;
  const auto record = read_far(id);
  if (!record) return std::nullopt;
  return materialize(*record);
}

Engine::Slot Engine::materialize(const store::JobRecord& r) {
  const auto no = tube_ref(r.tube);
  DELAYQ_CHECK(no.is_ok());  // a far job's tube exists: its far count holds it
  Tube& t = tube(no.value());
  far_count(no.value(), r.due_unix_ms, -1);
  --far_out_;
  // Counted as delayed while far; enter_delayed() counts it again.
  t.counts[static_cast<int>(JobState::kDelayed)]--;
  state_counts_[static_cast<int>(JobState::kDelayed)]--;
  t.due.remove(r.due_unix_ms);
  mutations_.far_erase(r);
  unsettle(r.id);
  const Slot slot = revive(r, no.value());
  enter_delayed(slot, r.due_unix_ms, late_us_of(r));
  unwritten_.insert_or_assign(slot, record(slot));
  return slot;
}

// A job that comes back from the far tier needs its near record, but the operation that took it
// often writes one itself, or spills the job again (a reschedule from far to far): the record,
// as it was when the job came back, is written at the end of the step if nothing else wrote it.
void Engine::write_unwritten() {
  for (const auto& [slot, r] : unwritten_) mutations_.put_record(r);
  unwritten_.clear();
}

std::optional<store::JobRecord> Engine::read_far(JobId id) const {
  auto got = options_.far->far_job(id);
  if (!got.is_ok()) {
    far_failed(got.status());
    return std::nullopt;
  }
  return std::move(got).value();
}

std::optional<JobId> Engine::far_holder(const Tube& t, std::string_view key) const {
  if (!far_on() || t.far_due.total() == 0) return std::nullopt;
  auto got = options_.far->far_key(t.name, key);
  if (!got.is_ok()) {
    far_failed(got.status());
    return std::nullopt;
  }
  if (!got.value() || far_stale(*got.value())) return std::nullopt;
  return got.value();
}

void Engine::far_failed(const Status& status) const {
  if (far_error_.is_ok()) far_error_ = status;
}

void Engine::far_count(TubeNo no, std::int64_t due_unix_ms, int delta) {
  Tube& t = tube(no);
  if (delta > 0) {
    t.far_due.add(due_unix_ms);
  } else {
    t.far_due.remove(due_unix_ms);
  }
  // Written once per minute and step, at take_mutations(): puts of one step often share a minute.
  far_counts_dirty_.emplace(t.name, t.far_due.bucket_of(due_unix_ms));
}

void Engine::write_far_counts() {
  for (const auto& [name, minute] : far_counts_dirty_) {
    const Tube* t = find_tube(name);
    const std::uint64_t count = t == nullptr ? 0 : t->far_due.at(minute * kDueBucketMs);
    mutations_.far_count(name, minute, count);
  }
  far_counts_dirty_.clear();
}

void Engine::unsettle(JobId id) {
  unsettled_[id] = epoch_ + 1;
}

void Engine::evict(Slot slot) {
  spilled_at_.erase(slot);
  forget(slot);
  ++far_out_;
}

// Both maps hold only what batches not yet settled wrote: a few batches' worth.
void Engine::settle(std::uint64_t epoch) {
  std::erase_if(unsettled_, [epoch](const auto& entry) { return entry.second <= epoch; });
  std::vector<Slot> settled;
  for (const auto& [slot, spilled] : spilled_at_) {
    if (spilled <= epoch) settled.push_back(slot);  // its latest spill is stored
  }
  for (const Slot slot : settled) evict(slot);
}

Status Engine::restore_far(std::string_view name, std::int64_t minute, std::uint64_t count) {
  auto no = tube_ref(name);
  if (!no.is_ok()) {
    return Status(Code::kCorruption,
                  "far count of tube " + std::string(name) + ": " + no.status().message());
  }
  Tube& t = tube(no.value());
  const std::int64_t at = minute * kDueBucketMs;
  t.far_due.add(at, count);
  t.due.add(at, count);
  t.counts[static_cast<int>(JobState::kDelayed)] += count;
  state_counts_[static_cast<int>(JobState::kDelayed)] += count;
  far_out_ += count;
  return Status::ok();
}

void Engine::load_due() {
  if (!far_on()) return;
  const std::int64_t now_ms = now();
  const std::optional<Millis>& window = options_.window;
  if (!pass_open_) {
    if (!pass_owed_ && (!window || later(now_ms, window->count()) < horizon_)) return;
    // The next pass comes a sixteenth of the window later (at most a minute): it loads what
    // falls due in that step, at least a window ahead of its time.
    const std::int64_t step =
        window ? std::clamp<std::int64_t>(window->count() / 16, 1, 60'000) : 0;
    horizon_ =
        window ? later(now_ms, window->count() + step) : std::numeric_limits<std::int64_t>::max();
    pass_open_ = true;
    pass_owed_ = false;
  }
  // Spilled jobs the horizon has passed go back into the wheel.
  std::vector<Slot> back;
  for (const auto& [slot, epoch] : spilled_at_) {
    if (job(slot).due_unix_ms < horizon_) back.push_back(slot);
  }
  std::sort(back.begin(), back.end());  // an order that does not hang on the hash map's
  for (const Slot slot : back) unspill(slot);
  std::size_t budget = kLoadsPerAdvance;
  for (std::size_t no = 0; no < tubes_.size(); ++no) {
    if (!tubes_[no] || tubes_[no]->far_due.total() == 0) continue;
    std::vector<JobId> ids;
    const Status scanned = options_.far->far_by_due(tubes_[no]->name, first_far_due(*tubes_[no]),
                                                    [&](std::int64_t due, JobId id) {
                                                      if (due >= horizon_) return false;
                                                      if (!far_stale(id)) ids.push_back(id);
                                                      return ids.size() < budget;
                                                    });
    if (!scanned.is_ok()) {
      far_failed(scanned);
      return;
    }
    for (const JobId id : ids) load_far(id);
    budget -= ids.size();
    if (budget == 0) return;  // the pass goes on at the next advance()
  }
  pass_open_ = false;
}

Engine::DelayedPick Engine::pick(Slot slot) const {
  const Job& j = job(slot);
  return {j.due_unix_ms, timers_[slot].position, j.id(), slot, {}};
}

JobView Engine::DelayedPick::view(const Engine& engine) const {
  return slot ? engine.view(*slot) : engine.view(record);
}

void Engine::by_due(std::vector<DelayedPick>& picks, std::size_t limit) {
  std::sort(picks.begin(), picks.end(),
            [](const DelayedPick& a, const DelayedPick& b) { return a.order() < b.order(); });
  if (picks.size() > limit) picks.resize(limit);
}

std::vector<Engine::DelayedPick> Engine::far_first(TubeNo no, std::size_t limit) const {
  std::vector<DelayedPick> picks;
  const Tube& t = tube(no);
  if (!far_on() || t.far_due.total() == 0 || limit == 0) return picks;
  for (const auto& [slot, epoch] : spilled_at_) {
    if (job(slot).tube == no) picks.push_back(pick(slot));
  }
  std::size_t from_disk = 0;
  const Status scanned =
      options_.far->far_by_due(t.name, first_far_due(t), [&](std::int64_t, JobId id) {
        if (far_stale(id)) return true;
        auto record = read_far(id);
        if (!record) return false;
        picks.push_back(
            {record->due_unix_ms, late_us_of(*record), id, std::nullopt, std::move(*record)});
        return ++from_disk < limit;
      });
  if (!scanned.is_ok()) far_failed(scanned);
  by_due(picks, limit);
  return picks;
}

// Where a tube's far entries worth reading start: the minute of its earliest far job. Entries
// before it are stale (their jobs were loaded, moved or deleted), and so are the store's
// deletions of them, which a scan from the tube's first key would walk over on every pass.
std::int64_t Engine::first_far_due(const Tube& t) {
  return t.far_due.earliest().value_or(0);
}

std::optional<Engine::DelayedPick> Engine::earliest_anywhere(TubeNo no) const {
  std::vector<DelayedPick> picks = far_first(no, 1);
  if (const auto slot = earliest_delayed(no)) picks.push_back(pick(*slot));
  by_due(picks, 1);
  if (picks.empty()) return std::nullopt;
  return std::move(picks.front());
}

std::vector<JobId> Engine::far_group(const Tube& t, std::string_view group) const {
  std::vector<JobId> ids;
  if (!far_on() || t.far_due.total() == 0) return ids;
  const Status scanned = options_.far->far_group(t.name, group, [&](JobId id) {
    if (!far_stale(id)) ids.push_back(id);
    return true;
  });
  if (!scanned.is_ok()) far_failed(scanned);
  return ids;
}

std::optional<std::int64_t> Engine::far_wakeup_us() const {
  if (!far_on()) return std::nullopt;
  if (pass_open_) return now_us();
  if (far_out_ == 0 && spilled_at_.empty()) return std::nullopt;
  if (pass_owed_) return now_us();
  if (!options_.window || horizon_ == std::numeric_limits<std::int64_t>::max()) return std::nullopt;
  return micros(horizon_ - options_.window->count());  // the window's end reaches the horizon
}

JobView Engine::view(const store::JobRecord& r) const {
  JobView v;
  v.id = r.id;
  v.tube = r.tube;
  v.state = r.state;
  v.priority = r.priority;
  v.due_unix_ms = r.due_unix_ms;
  v.created_unix_ms = r.created_unix_ms;
  v.delay_ms = r.delay_ms;
  v.ttr = Seconds{r.ttr_seconds};
  v.counters = r.counters;
  v.key = r.key;
  v.group = r.group;
  v.attached = r.attached;
  return v;
}

}  // namespace delayq::engine
