#include "engine/engine.h"

#include <algorithm>
#include <limits>

namespace delayq::engine {
namespace {

constexpr std::string_view kDefaultTube = "default";
constexpr JobId kMaxJobId = (JobId{1} << 48) - 1;

}  // namespace

Engine::Engine(Clock& clock, EngineOptions options)
    : clock_(clock),
      options_(options),
      latest_now_us_(clock.now_unix_us()),
      wheel_(timers_, wheel::HierarchicalWheelOptions{.tick = Millis{1},
                                                      .start = wheel::time_at(floor_div(
                                                          latest_now_us_, kMicrosPerMilli))}),
      index_([](const void* jobs,
                Slot slot) { return (*static_cast<const JobTable*>(jobs))[slot].id(); },
             &jobs_) {
  started_steady_ms_ = steady_now();
  const auto no = tube_ref(kDefaultTube);
  DELAYQ_CHECK(no.is_ok());
  tube(no.value()).pinned = true;
}

Engine::~Engine() = default;

std::int64_t Engine::now_us() const {
  latest_now_us_ = std::max(latest_now_us_, clock_.now_unix_us());
  return latest_now_us_;
}

std::int64_t Engine::now() const {
  return floor_div(now_us(), kMicrosPerMilli);
}

Engine::DueTime Engine::due_in(Millis delay, std::int64_t* start_ms) const {
  const std::int64_t start_us = std::max(now_us(), clock_.start_unix_us());
  const std::int64_t start = floor_div(start_us, kMicrosPerMilli);
  if (start_ms != nullptr) *start_ms = start;
  const std::int64_t due = later(start, delay.count());
  // A due time held at the largest one never comes: no microseconds to refine.
  if (due == std::numeric_limits<std::int64_t>::max()) return {due, 0};
  return {due, static_cast<std::uint32_t>(start_us - start * kMicrosPerMilli)};
}

std::int64_t Engine::steady_now() const {
  return floor_div(steady_now_us(), kMicrosPerMilli);
}

// The steady present to the microsecond, never behind a millisecond read before.
std::int64_t Engine::steady_now_us() const {
  const std::int64_t read_us = clock_.steady_us();
  latest_steady_ = std::max(latest_steady_, floor_div(read_us, kMicrosPerMilli));
  return std::max(read_us, latest_steady_ * kMicrosPerMilli);
}

std::int64_t Engine::steady_after(Millis delay) const {
  return later(std::max(steady_now(), clock_.steady_start_ms()), delay.count());
}

std::int64_t Engine::steady_to_unix(std::int64_t steady_ms) const {
  return later(steady_ms, floor_div(now_us() - steady_now_us(), kMicrosPerMilli));
}

// ---------------------------------------------------------------------------------------------
// Jobs and their slots

Engine::Slot Engine::allocate_slot() {
  if (!free_slots_.empty()) {
    const Slot slot = free_slots_.back();
    free_slots_.pop_back();
    return slot;
  }
  DELAYQ_CHECK(jobs_.size() < kNoSlot);
  timers_.emplace_back();
  jobs_.emplace_back();
  return static_cast<Slot>(jobs_.size() - 1);
}

Engine::Slot Engine::new_job(JobId id, TubeNo tube_no, std::int64_t created_ms,
                             std::uint32_t priority, std::uint32_t ttr_seconds,
                             std::string_view key, std::string_view group) {
  const Slot slot = allocate_slot();
  Job& j = job(slot);
  j.set_id_and_created(id, created_ms);
  j.priority = priority;
  j.ttr_seconds = std::max<std::uint32_t>(1, ttr_seconds);  // 0 is 1 s, as beanstalkd
  j.tube = tube_no;
  j.due_unix_ms = created_ms;
  index_.insert(id, slot);
  if (!key.empty() || !group.empty()) {
    Extra& more = extra(slot);
    Tube& t = tube(tube_no);
    if (!key.empty()) {
      more.key = std::string(key);
      t.keys.emplace(more.key, slot);
    }
    if (!group.empty()) {
      more.group = std::string(group);
      t.groups[more.group].insert(slot);
    }
  }
  return slot;
}

void Engine::free_slot(Slot slot) {
  job(slot) = Job{};
  free_slots_.push_back(slot);
}

Engine::Extra& Engine::extra(Slot slot) {
  job(slot).set_has_extra(true);
  return extras_[slot];
}

const Engine::Extra* Engine::extra_if(Slot slot) const {
  if (!job(slot).has_extra()) return nullptr;
  return &extras_.at(slot);
}

std::int64_t Engine::delay_of(Slot slot) const {
  const Extra* more = extra_if(slot);
  if (more != nullptr && more->delay_ms) return *more->delay_ms;
  const Job& j = job(slot);
  return std::max<std::int64_t>(0, j.due_unix_ms - j.created_unix_ms());
}

// Moving a job's due time (a kick) must not change the delay it reports, which is derived from
// the due time unless it was set: set it first.
void Engine::keep_delay(Slot slot) {
  const std::int64_t delay = delay_of(slot);
  Extra& more = extra(slot);
  if (!more.delay_ms) more.delay_ms = delay;
}

JobView Engine::view(Slot slot) const {
  const Job& j = job(slot);
  JobView v;
  v.id = j.id();
  v.tube = tube(j.tube).name;
  v.state = j.state();
  v.priority = j.priority;
  v.due_unix_ms = j.due_unix_ms;
  if (j.state() == JobState::kReserved) {
    v.deadline_unix_ms = steady_to_unix(reservations_.at(slot).deadline_steady_ms);
  }
  v.created_unix_ms = j.created_unix_ms();
  v.delay_ms = delay_of(slot);
  v.ttr = Seconds{j.ttr_seconds};
  if (const Extra* more = extra_if(slot)) {
    v.counters = more->counters;
    v.key = more->key;
    v.group = more->group;
    v.attached = more->attached;
  }
  return v;
}

store::JobRecord Engine::record(Slot slot) const {
  const Job& j = job(slot);
  store::JobRecord r;
  r.id = j.id();
  r.tube = tube(j.tube).name;
  r.priority = j.priority;
  r.state = j.state();
  r.due_unix_ms = j.due_unix_ms;
  r.due_inside = j.state() == JobState::kDelayed && timers_[slot].position != 0;
  r.created_unix_ms = j.created_unix_ms();
  r.delay_ms = delay_of(slot);
  r.ttr_seconds = j.ttr_seconds;
  if (const Extra* more = extra_if(slot)) {
    r.counters = more->counters;
    r.key = more->key;
    r.group = more->group;
    r.attached = more->attached;
  }
  return r;
}

// ---------------------------------------------------------------------------------------------
// State moves. Every job is in exactly one state's index: delayed and reserved jobs hold a
// timer on the wheel, ready jobs sit in their tube's heap, buried ones in its buried list.

void Engine::count(Slot slot, int delta) {
  const Job& j = job(slot);
  Tube& t = tube(j.tube);
  const auto state = static_cast<std::size_t>(j.state());
  const auto change = static_cast<std::uint64_t>(static_cast<std::int64_t>(delta));
  t.counts[state] += change;
  state_counts_[state] += change;
  TimeCounts* times = j.state() == JobState::kDelayed ? &t.due
                      : j.state() == JobState::kReady ? &t.ready_since
                                                      : nullptr;
  if (times != nullptr) {
    if (delta > 0) {
      times->add(j.due_unix_ms);
    } else {
      times->remove(j.due_unix_ms);
    }
  }
  if (j.state() == JobState::kReady && j.priority < options_.urgent_priority) {
    t.urgent += change;
    urgent_ += change;
  }
}

void Engine::leave(Slot slot) {
  Job& j = job(slot);
  DELAYQ_CHECK(!j.spilled());  // take() brings a spilled job back first
  count(slot, -1);
  switch (j.state()) {
    case JobState::kDelayed:
      if (!wheel_.cancel(slot)) imminent_.erase({exact_due_us(slot), slot});
      break;
    case JobState::kReady: {
      Tube& t = tube(j.tube);
      if (t.flow) {
        flow_remove(j.tube, slot);
      } else {
        heap_remove(t.ready, nullptr, timers_[slot].position);
      }
      break;
    }
    case JobState::kReserved: {
      const auto it = reservations_.find(slot);
      ttrs_.erase({it->second.deadline_steady_ms, slot});
      auto& held = client(it->second.client).reserved;
      held.erase(std::find(held.begin(), held.end(), slot));
      reservations_.erase(it);
      if (tube(j.tube).flow) flow_freed(slot);
      break;
    }
    case JobState::kBuried:
      tube(j.tube).buried.erase(extras_.at(slot).bury_order);
      break;
  }
}

void Engine::enter_ready(Slot slot) {
  job(slot).set_state(JobState::kReady);
  Tube& t = tube(job(slot).tube);
  if (t.flow) {
    flow_push(job(slot).tube, slot);
  } else {
    heap_push(t.ready, nullptr, slot);
  }
  count(slot, +1);
  ready_changed(job(slot).tube);
}

void Engine::ready_changed(TubeNo no) {
  Tube& t = tube(no);
  if (t.ready_changed) return;
  t.ready_changed = true;
  changed_tubes_.push_back(no);
}

void Engine::enter_delayed(Slot slot, std::int64_t due_unix_ms, std::uint32_t late_us) {
  DELAYQ_CHECK(late_us < kMicrosPerMilli);
  Job& j = job(slot);
  j.set_state(JobState::kDelayed);
  j.due_unix_ms = due_unix_ms;
  timers_[slot].position = late_us;
  // A due millisecond the wheel has already reached goes straight to imminent_ if it has a
  // microsecond to wait for; a whole millisecond (an overdue job recovered, or a due time given
  // in milliseconds) goes into the wheel's present, which the next advance() fires, as compact
  // as the rest of the wheel.
  if (late_us > 0 && due_unix_ms <= wheel_.now().time_since_epoch().count()) {
    imminent_.emplace(exact_due_us(slot), slot);
  } else {
    wheel_.schedule(slot, wheel::time_at(due_unix_ms));
  }
  count(slot, +1);
}

// Only for a job whose due millisecond the wheel has reached or is about to: far due times
// (up to the largest int64 of milliseconds) have no microsecond count.
std::int64_t Engine::exact_due_us(Slot slot) const {
  return job(slot).due_unix_ms * kMicrosPerMilli + timers_[slot].position;
}

void Engine::enter_reserved(Slot slot, ClientId client_id) {
  Job& j = job(slot);
  j.set_state(JobState::kReserved);
  const std::int64_t deadline = steady_after(Seconds{j.ttr_seconds});
  ttrs_.emplace(deadline, slot);
  reservations_[slot] = Reservation{client_id, deadline};
  client(client_id).reserved.push_back(slot);
  ++extra(slot).counters.reserves;
  count(slot, +1);
  if (tube(j.tube).flow) flow_refresh(j.tube, group_of(slot));
}

void Engine::enter_buried(Slot slot) {
  job(slot).set_state(JobState::kBuried);
  Extra& more = extra(slot);
  more.bury_order = next_bury_order_++;
  tube(job(slot).tube).buried.emplace(more.bury_order, slot);
  count(slot, +1);
}

void Engine::destroy(Slot slot, bool drop_tube) {
  const JobId id = job(slot).id();
  const TubeNo tube_no = job(slot).tube;
  leave(slot);
  const Extra* more = extra_if(slot);
  const bool attached = more != nullptr && more->attached;
  forget(slot);
  mutations_.erase(id);
  if (attached) mutations_.erase_attachment(id);
  if (drop_tube) maybe_drop_tube(tube_no);
}

void Engine::forget(Slot slot) {
  const JobId id = job(slot).id();
  if (const Extra* more = extra_if(slot)) {
    Tube& t = tube(job(slot).tube);
    if (!more->key.empty()) t.keys.erase(more->key);
    if (!more->group.empty()) {
      const auto group = t.groups.find(more->group);
      group->second.erase(slot);
      if (group->second.empty()) t.groups.erase(group);
    }
    extras_.erase(slot);
  }
  index_.erase(id);
  unwritten_.erase(slot);
  free_slot(slot);
}

Status Engine::check_reserved_by(ClientId client_id, JobId id, Slot* slot) const {
  const auto found = find(id);
  if (!found || job(*found).state() != JobState::kReserved ||
      reservations_.at(*found).client != client_id) {
    return {Code::kNotFound, "job " + std::to_string(id) + " is not reserved by this client"};
  }
  *slot = *found;
  return Status::ok();
}

// ---------------------------------------------------------------------------------------------
// Ready heaps: (priority, id), smallest first; a job's place is kept in its Timer's position,
// which the wheel leaves to us (a ready job holds no timer).

bool Engine::ready_less(Slot a, Slot b) const {
  return heap_less(a, 0, b, 0);
}

// Without fair turns every turn is 0, and the order is ready_less()'s.
bool Engine::heap_less(Slot a, std::uint64_t turn_a, Slot b, std::uint64_t turn_b) const {
  const Job& x = job(a);
  const Job& y = job(b);
  if (x.priority != y.priority) return x.priority < y.priority;
  if (turn_a != turn_b) return turn_a < turn_b;
  return x.id() < y.id();
}

void Engine::heap_set(std::vector<Slot>& heap, Flow* fair, std::size_t position, Slot slot,
                      std::uint64_t turn) {
  heap[position] = slot;
  if (fair != nullptr) fair->turns[position] = turn;
  timers_[slot].position = static_cast<std::uint32_t>(position);
}

void Engine::heap_sift_up(std::vector<Slot>& heap, Flow* fair, std::size_t position) {
  const auto turn_at = [fair](std::size_t i) { return fair != nullptr ? fair->turns[i] : 0; };
  const Slot slot = heap[position];
  const std::uint64_t turn = turn_at(position);
  while (position > 0) {
    const std::size_t parent = (position - 1) / 2;
    if (!heap_less(slot, turn, heap[parent], turn_at(parent))) break;
    heap_set(heap, fair, position, heap[parent], turn_at(parent));
    position = parent;
  }
  heap_set(heap, fair, position, slot, turn);
}

void Engine::heap_sift_down(std::vector<Slot>& heap, Flow* fair, std::size_t position) {
  const auto turn_at = [fair](std::size_t i) { return fair != nullptr ? fair->turns[i] : 0; };
  const Slot slot = heap[position];
  const std::uint64_t turn = turn_at(position);
  const std::size_t size = heap.size();
  for (;;) {
    std::size_t child = 2 * position + 1;
    if (child >= size) break;
    if (child + 1 < size &&
        heap_less(heap[child + 1], turn_at(child + 1), heap[child], turn_at(child))) {
      ++child;
    }
    if (!heap_less(heap[child], turn_at(child), slot, turn)) break;
    heap_set(heap, fair, position, heap[child], turn_at(child));
    position = child;
  }
  heap_set(heap, fair, position, slot, turn);
}

void Engine::heap_push(std::vector<Slot>& heap, Flow* fair, Slot slot, std::uint64_t turn) {
  heap.push_back(slot);
  if (fair != nullptr) fair->turns.push_back(turn);
  heap_sift_up(heap, fair, heap.size() - 1);
}

void Engine::heap_remove(std::vector<Slot>& heap, Flow* fair, std::size_t position) {
  DELAYQ_CHECK(position < heap.size());
  const Slot last = heap.back();
  heap.pop_back();
  std::uint64_t last_turn = 0;
  if (fair != nullptr) {
    last_turn = fair->turns.back();
    fair->turns.pop_back();
  }
  if (position == heap.size()) return;
  heap_set(heap, fair, position, last, last_turn);
  heap_sift_up(heap, fair, position);
  heap_sift_down(heap, fair, timers_[last].position);
}

// ---------------------------------------------------------------------------------------------
// Tubes

Status Engine::check_name(std::string_view what, std::string_view name) const {
  return delayq::check_name(what, name, options_.max_name_bytes);
}

Status Engine::set_max_attempts(std::string_view name, std::uint32_t max_attempts) {
  if (Status s = check_tube_name(name); !s.is_ok()) return s;
  restore_max_attempts(name, max_attempts);
  mutations_.put_max_attempts(name, max_attempts);
  return Status::ok();
}

void Engine::restore_max_attempts(std::string_view name, std::uint32_t max_attempts) {
  if (max_attempts == 0) {
    if (const auto it = max_attempts_.find(name); it != max_attempts_.end()) {
      max_attempts_.erase(it);
    }
  } else {
    max_attempts_[std::string(name)] = max_attempts;
  }
}

bool Engine::bury_if_attempts_used(Slot slot) {
  if (max_attempts_.empty()) return false;  // the common case: one branch, no lookup
  const auto it = max_attempts_.find(tube(job(slot).tube).name);
  if (it == max_attempts_.end()) return false;
  Extra& more = extra(slot);
  if (more.counters.reserves < it->second) return false;
  more.counters.buries++;
  ++buries_;
  enter_buried(slot);
  persist(slot);
  return true;
}

Status Engine::check_tube_name(std::string_view name) const {
  return delayq::check_tube_name(name, options_.max_name_bytes);
}

Result<Engine::TubeNo> Engine::tube_ref(std::string_view name) {
  if (const auto it = tube_by_name_.find(name); it != tube_by_name_.end()) {
    return it->second;
  }
  if (Status s = check_tube_name(name); !s.is_ok()) return s;
  TubeNo no = 0;
  if (!free_tubes_.empty()) {
    no = free_tubes_.back();
    free_tubes_.pop_back();
  } else {
    DELAYQ_CHECK(tubes_.size() < std::numeric_limits<TubeNo>::max());
    no = static_cast<TubeNo>(tubes_.size());
    tubes_.emplace_back();
  }
  tubes_[no] = std::make_unique<Tube>();
  tubes_[no]->name = std::string(name);
  tubes_[no]->order = tube_order_.size();
  tube_by_name_.emplace(tubes_[no]->name, no);
  tube_order_.push_back(no);
  if (const auto flow = flows_.find(name); flow != flows_.end()) {
    tubes_[no]->flow = std::make_unique<Flow>();
    tubes_[no]->flow->settings = flow->second;
    tubes_[no]->flow->afresh = afresh_flows_.contains(name);
  }
  return no;
}

Status Engine::keep_tube(std::string_view name, bool keep) {
  if (!keep) {
    if (const auto it = tube_by_name_.find(name); it != tube_by_name_.end()) {
      const TubeNo no = it->second;
      tube(no).kept = false;
      maybe_drop_tube(no);
    }
    return Status::ok();
  }
  auto no = tube_ref(name);
  if (!no.is_ok()) return no.status();
  tube(no.value()).kept = true;
  return Status::ok();
}

const Engine::Tube* Engine::find_tube(std::string_view name) const {
  const auto it = tube_by_name_.find(name);
  return it == tube_by_name_.end() ? nullptr : tubes_[it->second].get();
}

void Engine::maybe_drop_tube(TubeNo no) {
  const Tube& t = tube(no);
  if (t.pinned || t.kept || t.jobs() != 0 || t.using_clients != 0 || t.watching_clients != 0 ||
      t.waiting_clients != 0) {
    return;
  }
  pauses_.erase({t.pause_until_steady_ms, no});
  const std::size_t place = t.order;
  DELAYQ_CHECK(place < tube_order_.size() && tube_order_[place] == no);
  remove_as_beanstalkd(tube_order_, tube_order_.begin() + static_cast<std::ptrdiff_t>(place));
  if (place < tube_order_.size()) tube(tube_order_[place]).order = place;
  tube_by_name_.erase(t.name);
  tubes_[no].reset();
  free_tubes_.push_back(no);
}

// By exact due time (without forming it: far due times have no microsecond count), then id.
bool Engine::due_before(Slot a, Slot b) const {
  const Job& x = job(a);
  const Job& y = job(b);
  if (x.due_unix_ms != y.due_unix_ms) return x.due_unix_ms < y.due_unix_ms;
  if (timers_[a].position != timers_[b].position) {
    return timers_[a].position < timers_[b].position;  // the earlier within the millisecond
  }
  return x.id() < y.id();
}

// imminent_ first (all due before anything in the wheel, except an overdue job restored or
// moved into the wheel's present, which fires at the next advance()), then the wheel slot by
// slot, stopping as visit_in_order() does.
template <typename Visit>
void Engine::visit_delayed_in_order(Visit&& visit) const {
  bool done = false;
  for (const auto& entry : imminent_) done = visit(entry.second) || done;
  const std::int64_t present = wheel_.now().time_since_epoch().count();
  bool stop = false;
  wheel_.visit_in_order([&](wheel::TimerId id) {
    if (done) {  // imminent_ was enough: only the wheel's present may still hold an earlier job
      if (job(id).due_unix_ms > present) return true;
    }
    stop = visit(id) || stop;
    return stop || done;
  });
}

std::optional<Engine::Slot> Engine::earliest_delayed(TubeNo tube_no) const {
  std::optional<Slot> best;
  visit_delayed_in_order([&](Slot slot) {
    const Job& j = job(slot);
    if (j.state() != JobState::kDelayed || j.tube != tube_no) return false;
    if (!best || due_before(slot, *best)) best = slot;
    return true;
  });
  return best;
}

// ---------------------------------------------------------------------------------------------
// Clients

Engine::Client& Engine::client(ClientId id) {
  const auto it = clients_.find(id);
  DELAYQ_CHECK(it != clients_.end());
  return it->second;
}

const Engine::Client& Engine::client(ClientId id) const {
  const auto it = clients_.find(id);
  DELAYQ_CHECK(it != clients_.end());
  return it->second;
}

ClientId Engine::connect() {
  const ClientId id = next_client_++;
  const TubeNo no = tube_by_name_.find(kDefaultTube)->second;
  Client& c = clients_[id];
  c.used = no;
  c.watched.push_back(no);
  tube(no).using_clients++;
  tube(no).watching_clients++;
  return id;
}

ClientId Engine::connect(bool watch_default) {
  if (watch_default) return connect();
  const ClientId id = next_client_++;
  Client& c = clients_[id];
  c.used = tube_by_name_.find(kDefaultTube)->second;
  c.internal = true;
  return id;
}

void Engine::disconnect(ClientId id) {
  Client& c = client(id);
  while (!c.waits.empty()) end_wait(c.waits.back());
  while (!c.reserved.empty()) {
    const Slot slot = c.reserved.back();
    leave(slot);
    if (!bury_if_attempts_used(slot)) enter_ready(slot);
  }
  if (!c.internal) tube(c.used).using_clients--;
  maybe_drop_tube(c.used);
  for (const TubeNo no : c.watched) {
    tube(no).watching_clients--;
    maybe_drop_tube(no);
  }
  clients_.erase(id);
  dispatch();
}

Status Engine::use(ClientId id, std::string_view name) {
  auto no = tube_ref(name);
  if (!no.is_ok()) return no.status();
  Client& c = client(id);
  DELAYQ_CHECK(c.watch_wait == 0);  // a waiting client sends nothing but a disconnect
  const TubeNo old = c.used;
  c.used = no.value();
  tube(c.used).using_clients++;
  tube(old).using_clients--;
  maybe_drop_tube(old);
  return Status::ok();
}

Result<std::size_t> Engine::watch(ClientId id, std::string_view name) {
  Client& c = client(id);
  DELAYQ_CHECK(c.watch_wait == 0);  // a waiting client sends nothing but a disconnect
  // A tube watched already exists: looked up, not made, so that a watch refused makes no tube.
  if (const auto known = tube_by_name_.find(name);
      known != tube_by_name_.end() &&
      std::find(c.watched.begin(), c.watched.end(), known->second) != c.watched.end()) {
    return c.watched.size();
  }
  if (c.watched.size() >= kMaxWatchedTubes) {
    if (Status s = check_tube_name(name); !s.is_ok()) return s;
    return watch_limit();
  }
  auto no = tube_ref(name);
  if (!no.is_ok()) return no.status();
  c.watched.push_back(no.value());
  tube(no.value()).watching_clients++;
  return c.watched.size();
}

Result<std::size_t> Engine::ignore(ClientId id, std::string_view name) {
  Client& c = client(id);
  DELAYQ_CHECK(c.watch_wait == 0);
  const auto it = tube_by_name_.find(name);
  if (it == tube_by_name_.end()) return c.watched.size();
  const auto pos = std::find(c.watched.begin(), c.watched.end(), it->second);
  if (pos == c.watched.end()) return c.watched.size();
  if (c.watched.size() == 1) return Status(Code::kNotIgnored, "the last watched tube");
  const TubeNo no = *pos;
  remove_as_beanstalkd(c.watched, pos);
  tube(no).watching_clients--;
  maybe_drop_tube(no);
  return c.watched.size();
}

const std::string& Engine::used_tube(ClientId id) const {
  return tube(client(id).used).name;
}

std::vector<std::string> Engine::watched_tubes(ClientId id) const {
  std::vector<std::string> names;
  for (const TubeNo no : client(id).watched) names.push_back(tube(no).name);
  return names;
}

// ---------------------------------------------------------------------------------------------
// The lifecycle

Result<PutResult> Engine::put(ClientId client_id, const PutRequest& request) {
  if (Status s = check_name("key", request.key); !s.is_ok()) return s;
  if (Status s = check_name("group", request.group); !s.is_ok()) return s;
  if (next_id_ > kMaxJobId) return Status(Code::kLimit, "job ids are exhausted");
  if (free_slots_.empty() && jobs_.size() >= kNoSlot) {
    return Status(Code::kLimit, "too many jobs held at once");
  }
  Client& c = client(client_id);
  TubeNo tube_no = c.used;
  if (!request.tube.empty()) {
    auto no = tube_ref(request.tube);
    if (!no.is_ok()) return no.status();
    tube_no = no.value();
  }
  PutResult result;
  const bool debounce = request.debounce.has_value() && !request.key.empty();
  JobId keep_id = 0;          // debounced: the holder's id, which the job keeps
  std::int64_t first_ms = 0;  // debounced: the holder's first put
  JobCounters counters;
  if (!request.key.empty()) {
    Tube& t = tube(tube_no);
    std::optional<Slot> held;
    std::optional<JobId> far_held;
    if (const auto it = t.keys.find(request.key); it != t.keys.end()) {
      held = it->second;
    } else {
      far_held = far_holder(t, request.key);
    }
    if ((held || far_held) && !request.replace && !debounce) {
      return PutResult{held ? job(*held).id() : *far_held, false, 0, false};
    }
    if (held || far_held) held = take(held ? job(*held).id() : *far_held);
    if (held) {
      const Slot holder = *held;
      if (job(holder).state() == JobState::kReserved) {
        return Status(Code::kConflict, "the job holding the key is reserved");
      }
      if (debounce && job(holder).state() != JobState::kBuried) {
        keep_id = job(holder).id();
        first_ms = job(holder).created_unix_ms();
        if (const Extra* more = extra_if(holder)) counters = more->counters;
        result.debounced = true;
      } else {
        result.replaced = job(holder).id();
        t.deletes++;
        ++deletes_;
      }
      destroy(holder, /*drop_tube=*/false);  // the new job goes into it
    }
  }
  const std::int64_t now_ms = now();
  // Delays count from here, the put's moment (see Clock::start_unix_us()); rounded down to the
  // millisecond, as the due time is, it is also the job's creation time, so that its delay reads
  // back exactly as due - created.
  std::int64_t start = 0;
  const Millis delay =
      debounce ? *request.debounce : Millis{request.due.absolute ? 0 : request.due.ms};
  const DueTime after_delay = due_in(delay, &start);
  const JobId id = keep_id != 0 ? keep_id : next_id_++;
  if (keep_id == 0) next_id_dirty_ = true;
  const auto ttr = static_cast<std::uint32_t>(
      std::clamp<Seconds::rep>(request.ttr.count(), 0, std::numeric_limits<std::uint32_t>::max()));
  if (keep_id == 0) first_ms = start;
  const Slot slot =
      new_job(id, tube_no, first_ms, request.priority, ttr, request.key, request.group);
  job(slot).due_unix_ms = now_ms;
  DueTime due{now_ms, 0};
  if (debounce) {
    due = after_delay;
    // Never past the first put + max_wait: a stream of puts cannot hold the job back for ever.
    if (request.max_wait && later(first_ms, request.max_wait->count()) < due.unix_ms) {
      due = {later(first_ms, request.max_wait->count()), 0};
    }
    if (!counters.zero()) extra(slot).counters = counters;
    if (keep_id != 0) extra(slot).delay_ms = std::max<std::int64_t>(0, due.unix_ms - now_ms);
  } else if (request.due.absolute) {
    due.unix_ms = request.due.ms;
  } else if (request.due.ms > 0) {
    due = after_delay;
  }
  if (due.unix_ms > now_ms) {
    enter_delayed(slot, due.unix_ms, due.late_us);
  } else {
    enter_ready(slot);
  }
  if (keep_id == 0) {
    ++total_jobs_;
    tube(tube_no).total_jobs++;
  }
  if (request.attachment != nullptr) extra(slot).attached = true;
  persist(slot, /*fresh=*/keep_id == 0);
  mutations_.put_body(id, request.body);
  if (request.attachment != nullptr) mutations_.put_attachment(id, *request.attachment);
  dispatch();
  result.id = id;
  return result;
}

std::optional<Engine::Slot> Engine::best_ready(std::span<const TubeNo> tubes) const {
  std::optional<Slot> best;
  for (const TubeNo no : tubes) {
    const Tube& t = tube(no);
    if (t.ready.empty() || paused(t)) continue;
    if (!best || ready_less(t.ready.front(), *best)) best = t.ready.front();
  }
  return best;
}

ReserveResult Engine::hand_out(ClientId client_id, Slot slot) {
  if (tube(job(slot).tube).flow) flow_taken(slot);
  leave(slot);
  enter_reserved(slot, client_id);
  return ReserveResult{ReserveResult::Kind::kReserved, view(slot)};
}

bool Engine::deadline_soon(const Client& c) const {
  // From the present rounded up, as a TTR's deadline counts: a TTR no longer than the margin is
  // within it from the moment of the reserve (beanstalkd: deadline <= now + margin), not only
  // from the next millisecond. A warning, so never late rather than never early.
  const std::int64_t soon =
      std::max(steady_now(), clock_.steady_start_ms()) + options_.deadline_soon_margin.count();
  return std::any_of(c.reserved.begin(), c.reserved.end(),
                     [&](Slot slot) { return reservations_.at(slot).deadline_steady_ms <= soon; });
}

ReserveResult Engine::reserve(ClientId client_id, std::optional<Millis> timeout) {
  Client& c = client(client_id);
  DELAYQ_CHECK(c.watch_wait == 0);
  const auto best = best_ready(c.watched);
  if (!best && deadline_soon(c)) return ReserveResult{ReserveResult::Kind::kDeadlineSoon, {}};
  if (best) return hand_out(client_id, *best);
  if (timeout && timeout->count() <= 0) return ReserveResult{ReserveResult::Kind::kTimedOut, {}};
  const WaitId wait = start_wait(client_id, {c.watched.begin(), c.watched.end()}, true, timeout);
  client(client_id).watch_wait = wait;
  return ReserveResult{ReserveResult::Kind::kWaiting, {}, wait};
}

Result<ReserveResult> Engine::reserve_from(ClientId client_id,
                                           const std::vector<std::string>& names,
                                           std::optional<Millis> timeout) {
  (void)client(client_id);  // checks it exists
  std::vector<TubeNo> tubes;
  tubes.reserve(names.size());
  // Each tube once: the order does not matter, the best job of them all is taken.
  const auto each_once = [&] {
    std::sort(tubes.begin(), tubes.end());
    tubes.erase(std::unique(tubes.begin(), tubes.end()), tubes.end());
  };
  // A tube named here but empty is let go again unless the wait holds it.
  const auto let_go = [&] {
    for (const TubeNo no : tubes) maybe_drop_tube(no);
  };
  for (const std::string& name : names) {
    auto no = tube_ref(name);
    if (!no.is_ok()) {
      each_once();
      let_go();
      return no.status();
    }
    tubes.push_back(no.value());
  }
  each_once();
  ReserveResult result{ReserveResult::Kind::kTimedOut, {}};
  if (const auto best = best_ready(tubes)) {
    result = hand_out(client_id, *best);
  } else if (!timeout || timeout->count() > 0) {
    result.kind = ReserveResult::Kind::kWaiting;
    result.wait = start_wait(client_id, tubes, false, timeout);
  }
  let_go();
  return result;
}

bool Engine::cancel_wait(WaitId wait) {
  if (waits_.count(wait) == 0) return false;
  end_wait(wait);
  return true;
}

Result<JobView> Engine::reserve_job(ClientId client_id, JobId id) {
  const auto found = take(id);
  if (!found || job(*found).state() == JobState::kReserved) {
    return Status(Code::kNotFound, "no job " + std::to_string(id) + " to reserve");
  }
  const Slot slot = *found;
  const bool was_ready = job(slot).state() == JobState::kReady;
  // A delayed job taken early became ready now, as a kicked one does: its due time says so
  // (never in the future once not delayed), and it keeps the delay it reports.
  const bool was_delayed = job(slot).state() == JobState::kDelayed;
  if (was_delayed) keep_delay(slot);
  if (tube(job(slot).tube).flow) flow_taken(slot);
  leave(slot);
  if (was_delayed) job(slot).due_unix_ms = std::min(job(slot).due_unix_ms, now());
  enter_reserved(slot, client_id);
  // A reserved job comes back ready after a restart; one taken from the delayed or buried list
  // must say so on disk, or it would come back delayed or buried.
  if (!was_ready) persist(slot);
  return view(slot);
}

Status Engine::erase(ClientId client_id, JobId id) {
  const auto found = take(id);
  if (!found || (job(*found).state() == JobState::kReserved &&
                 reservations_.at(*found).client != client_id)) {
    return {Code::kNotFound, "no job " + std::to_string(id)};
  }
  tube(job(*found).tube).deletes++;
  ++deletes_;
  destroy(*found);
  dispatch();  // a reservation ended: flow control may free its group's next job
  return Status::ok();
}

Status Engine::release(ClientId client_id, JobId id, std::uint32_t priority, Millis delay) {
  Slot slot = 0;
  if (Status s = check_reserved_by(client_id, id, &slot); !s.is_ok()) return s;
  leave(slot);
  Job& j = job(slot);
  j.priority = priority;
  Extra& more = extra(slot);
  more.counters.releases++;
  if (bury_if_attempts_used(slot)) {  // its last attempt: the dead letter
    dispatch();
    return Status::ok();
  }
  more.delay_ms = std::max<std::int64_t>(0, delay.count());
  const std::int64_t now_ms = now();
  if (delay.count() > 0) {
    const DueTime due = due_in(delay);
    enter_delayed(slot, due.unix_ms, due.late_us);
  } else {
    j.due_unix_ms = now_ms;
    enter_ready(slot);
  }
  persist(slot);
  dispatch();
  return Status::ok();
}

Status Engine::bury(ClientId client_id, JobId id, std::uint32_t priority) {
  Slot slot = 0;
  if (Status s = check_reserved_by(client_id, id, &slot); !s.is_ok()) return s;
  leave(slot);
  job(slot).priority = priority;
  extra(slot).counters.buries++;
  ++buries_;
  enter_buried(slot);
  persist(slot);
  dispatch();
  return Status::ok();
}

Status Engine::touch(ClientId client_id, JobId id) {
  Slot slot = 0;
  if (Status s = check_reserved_by(client_id, id, &slot); !s.is_ok()) return s;
  Reservation& r = reservations_.at(slot);
  ttrs_.erase({r.deadline_steady_ms, slot});
  r.deadline_steady_ms = steady_after(Seconds{job(slot).ttr_seconds});
  ttrs_.emplace(r.deadline_steady_ms, slot);
  return Status::ok();
}

std::size_t Engine::kick(std::string_view name, std::size_t bound) {
  const auto it = tube_by_name_.find(name);
  if (it == tube_by_name_.end()) return 0;
  const TubeNo no = it->second;
  std::size_t kicked = 0;
  const bool buried = !tube(no).buried.empty();
  while (kicked < bound) {
    std::optional<Slot> slot;
    if (buried) {
      if (tube(no).buried.empty()) break;
      slot = tube(no).buried.begin()->second;
    } else {
      const auto first = earliest_anywhere(no);
      if (!first) break;
      slot = take(first->id);  // a far one into memory
      if (!slot) break;
    }
    kick_slot(*slot);
    ++kicked;
  }
  dispatch();
  return kicked;
}

Status Engine::kick_job(JobId id) {
  const auto found = take(id);
  if (!found ||
      (job(*found).state() != JobState::kBuried && job(*found).state() != JobState::kDelayed)) {
    return {Code::kNotFound, "no buried or delayed job " + std::to_string(id)};
  }
  kick_slot(*found);
  dispatch();
  return Status::ok();
}

// A buried or delayed job to ready; it keeps the delay it reports.
void Engine::kick_slot(Slot slot) {
  keep_delay(slot);
  leave(slot);
  extra(slot).counters.kicks++;
  job(slot).due_unix_ms = std::min(job(slot).due_unix_ms, now());
  enter_ready(slot);
  persist(slot);
}

Status Engine::pause_tube(std::string_view name, Seconds pause) {
  const auto it = tube_by_name_.find(name);
  if (it == tube_by_name_.end()) return {Code::kNotFound, "no tube " + std::string(name)};
  Tube& t = tube(it->second);
  pauses_.erase({t.pause_until_steady_ms, it->second});
  t.pauses++;
  t.pause = std::max(pause, Seconds{0});
  t.pause_until_steady_ms = 0;
  if (pause.count() > 0) {
    t.pause_until_steady_ms =
        steady_after(Millis{std::min<std::int64_t>(pause.count(), 1LL << 40) * 1000});
    pauses_.emplace(t.pause_until_steady_ms, it->second);
  } else {
    ready_changed(it->second);
    dispatch();
  }
  return Status::ok();
}

Result<JobView> Engine::peek(JobId id) const {
  if (const auto found = find(id)) return view(*found);
  if (far_on() && !unsettled_.contains(id)) {
    if (const auto record = read_far(id)) return view(*record);
  }
  return Status(Code::kNotFound, "no job " + std::to_string(id));
}

Result<JobView> Engine::peek_ready(std::string_view name) const {
  const Tube* t = find_tube(name);
  if (t == nullptr || t->counts[static_cast<int>(JobState::kReady)] == 0) {
    return Status(Code::kNotFound, "no ready job");
  }
  if (!t->ready.empty()) return view(t->ready.front());
  // Every group with ready jobs is held back by flow control: the best of them.
  const auto held = behind_heads(*t);
  return view(*std::min_element(held.begin(), held.end(),
                                [this](Slot a, Slot b) { return ready_less(a, b); }));
}

Result<JobView> Engine::peek_delayed(std::string_view name) const {
  const auto it = tube_by_name_.find(name);
  if (it == tube_by_name_.end() || tube(it->second).counts[0] == 0) {
    return Status(Code::kNotFound, "no delayed job");
  }
  const auto first = earliest_anywhere(it->second);
  if (!first) return Status(Code::kNotFound, "no delayed job");
  return first->view(*this);
}

Result<JobView> Engine::peek_buried(std::string_view name) const {
  const Tube* t = find_tube(name);
  if (t == nullptr || t->buried.empty()) return Status(Code::kNotFound, "no buried job");
  return view(t->buried.begin()->second);
}

// ---------------------------------------------------------------------------------------------
// Keys, reschedule, groups

Result<JobId> Engine::find_key(std::string_view name, std::string_view key) const {
  const Tube* t = find_tube(name);
  if (t != nullptr) {
    if (const auto it = t->keys.find(key); it != t->keys.end()) {
      return job(it->second).id();
    }
    if (const auto id = far_holder(*t, key)) return *id;
  }
  return Status(Code::kNotFound, "no job with key " + std::string(key));
}

Result<JobView> Engine::peek_key(std::string_view name, std::string_view key) const {
  auto id = find_key(name, key);
  if (!id.is_ok()) return id.status();
  return peek(id.value());
}

Status Engine::reschedule(JobId id, Due due) {
  if (due.absolute) return reschedule(id, DueTime{due.ms, 0}, std::nullopt);
  if (due.ms <= 0) return reschedule(id, DueTime{now(), 0}, Millis{0});
  return reschedule(id, due_in(Millis{due.ms}), Millis{due.ms});
}

Status Engine::reschedule(JobId id, DueTime due, std::optional<Millis> delay) {
  const auto found = take(id);
  if (!found) return {Code::kNotFound, "no job " + std::to_string(id)};
  const Slot slot = *found;
  const JobState state = job(slot).state();
  if (state != JobState::kDelayed && state != JobState::kReady) {
    return {Code::kConflict, "job " + std::to_string(id) + " is " + std::string(state_name(state))};
  }
  leave(slot);
  const std::int64_t now_ms = now();
  extra(slot).delay_ms = delay ? std::max<std::int64_t>(0, delay->count())
                               : std::max<std::int64_t>(0, due.unix_ms - now_ms);
  if (due.unix_ms > now_ms) {
    enter_delayed(slot, due.unix_ms, due.late_us);
  } else {
    job(slot).due_unix_ms = now_ms;
    enter_ready(slot);
  }
  persist(slot);
  dispatch();
  return Status::ok();
}

Status Engine::attach(JobId id, const Delivery& delivery) {
  const auto slot = take(id);
  if (!slot) return {Code::kNotFound, "no job " + std::to_string(id)};
  Extra& more = extra(*slot);
  if (!more.attached) {
    more.attached = true;
    persist(*slot);
  }
  mutations_.put_attachment(id, delivery);
  return Status::ok();
}

Status Engine::set_priority(JobId id, std::uint32_t priority) {
  const auto found = take(id);
  if (!found) return {Code::kNotFound, "no job " + std::to_string(id)};
  const Slot slot = *found;
  if (job(slot).priority == priority) return Status::ok();
  const bool ready = job(slot).state() == JobState::kReady;
  if (ready) leave(slot);
  job(slot).priority = priority;
  if (ready) enter_ready(slot);
  persist(slot);
  if (ready) dispatch();
  return Status::ok();
}

std::vector<JobView> Engine::list_group(std::string_view name, std::string_view group) const {
  std::vector<JobView> views;
  const Tube* t = find_tube(name);
  if (t == nullptr) return views;
  if (const auto it = t->groups.find(group); it != t->groups.end()) {
    for (const Slot slot : it->second) views.push_back(view(slot));
  }
  for (const JobId id : far_group(*t, group)) {
    if (const auto record = read_far(id)) views.push_back(view(*record));
  }
  std::sort(views.begin(), views.end(),
            [](const JobView& a, const JobView& b) { return a.id < b.id; });
  return views;
}

std::size_t Engine::cancel_group(std::string_view name, std::string_view group) {
  const auto tube_it = tube_by_name_.find(name);
  if (tube_it == tube_by_name_.end()) return 0;
  Tube& t = tube(tube_it->second);
  for (const JobId id : far_group(t, group)) load_far(id);  // into memory, and its group
  const auto it = t.groups.find(group);
  if (it == t.groups.end()) return 0;
  std::vector<Slot> doomed;
  for (const Slot slot : it->second) {
    if (job(slot).state() != JobState::kReserved) doomed.push_back(slot);
  }
  for (const Slot slot : doomed) {
    if (job(slot).spilled()) unspill(slot);
  }
  // By id, so the store sees the same order on every run.
  std::sort(doomed.begin(), doomed.end(),
            [this](Slot a, Slot b) { return job(a).id() < job(b).id(); });
  t.deletes += doomed.size();
  deletes_ += doomed.size();
  for (const Slot slot : doomed) destroy(slot);  // may drop the tube: `t` is dead after this
  return doomed.size();
}

// ---------------------------------------------------------------------------------------------
// Time and waiting

WaitId Engine::start_wait(ClientId client_id, std::vector<TubeNo> tubes, bool watch_list,
                          std::optional<Millis> timeout) {
  const WaitId id = next_wait_++;
  for (const TubeNo no : tubes) {
    tube(no).waiting_clients++;
    tube(no).waits.insert(id);
  }
  Wait& w = waits_[id];
  w.client = client_id;
  w.tubes = std::move(tubes);
  w.watch_list = watch_list;
  if (timeout) w.deadline_steady_ms = steady_after(*timeout);
  client(client_id).waits.push_back(id);
  arm_alarm(id, w);
  return id;
}

void Engine::end_wait(WaitId id) {
  const auto it = waits_.find(id);
  DELAYQ_CHECK(it != waits_.end());
  const Wait& w = it->second;
  alarms_.erase({w.alarm_steady_ms, id});
  Client& c = client(w.client);
  c.waits.erase(std::find(c.waits.begin(), c.waits.end(), id));
  if (c.watch_wait == id) c.watch_wait = 0;
  const std::vector<TubeNo> tubes = std::move(it->second.tubes);
  waits_.erase(it);
  for (const TubeNo no : tubes) {
    tube(no).waiting_clients--;
    tube(no).waits.erase(id);
    maybe_drop_tube(no);
  }
}

// A wait must be looked at again when it times out or, on a watch list, when one of its
// client's reserved jobs enters the DEADLINE_SOON margin, whichever is first.
void Engine::arm_alarm(WaitId id, Wait& w) {
  alarms_.erase({w.alarm_steady_ms, id});
  std::optional<std::int64_t> when = w.deadline_steady_ms;
  if (w.watch_list) {
    for (const Slot slot : client(w.client).reserved) {
      const std::int64_t soon =
          reservations_.at(slot).deadline_steady_ms - options_.deadline_soon_margin.count();
      if (!when || soon < *when) when = soon;
    }
  }
  if (!when) return;
  w.alarm_steady_ms = *when;
  alarms_.emplace(*when, id);
}

void Engine::expire_alarms() {
  const std::int64_t now_ms = steady_now();
  while (!alarms_.empty() && alarms_.begin()->first <= now_ms) {
    const WaitId id = alarms_.begin()->second;
    Wait& w = waits_.at(id);
    const ClientId client_id = w.client;
    if (w.watch_list && deadline_soon(client(client_id))) {
      end_wait(id);
      wakeups_.push_back({client_id, id, {ReserveResult::Kind::kDeadlineSoon, {}}});
    } else if (w.deadline_steady_ms && *w.deadline_steady_ms <= now_ms) {
      end_wait(id);
      wakeups_.push_back({client_id, id, {ReserveResult::Kind::kTimedOut, {}}});
    } else {
      arm_alarm(id, w);  // its client's reserved jobs changed since the alarm was set
    }
  }
}

// Hands ready jobs to waits, first come first served, each the best job among its tubes. Only
// the waits on a tube that changed can be served, so only they are looked at: O(those waits x
// their tubes) when a job became ready, however many wait on other tubes.
void Engine::dispatch() {
  if (changed_tubes_.empty()) return;
  std::vector<WaitId> candidates;
  for (const TubeNo no : changed_tubes_) {
    if (!tubes_[no]) continue;
    Tube& t = tube(no);
    t.ready_changed = false;
    candidates.insert(candidates.end(), t.waits.begin(), t.waits.end());
  }
  changed_tubes_.clear();
  std::sort(candidates.begin(), candidates.end());
  candidates.erase(std::unique(candidates.begin(), candidates.end()), candidates.end());
  for (const WaitId id : candidates) {
    const auto it = waits_.find(id);
    if (it == waits_.end()) continue;
    const ClientId client_id = it->second.client;
    const auto best = best_ready(it->second.tubes);
    if (!best) continue;
    end_wait(id);
    wakeups_.push_back({client_id, id, hand_out(client_id, *best)});
  }
}

void Engine::on_timer(Slot slot, std::int64_t now_us) {
  if (timers_[slot].position != 0) {
    const std::int64_t exact = exact_due_us(slot);
    if (exact > now_us) {
      imminent_.emplace(exact, slot);
      return;
    }
  }
  fire(slot);
}

// A delayed job's due time has come.
void Engine::fire(Slot slot) {
  const std::int64_t exact = exact_due_us(slot);
  count(slot, -1);
  if (on_fire_) on_fire_(exact);
  enter_ready(slot);
}

// A reserved job's TTR lapsed: the job is ready again (invariant 4).
void Engine::lapse(Slot slot) {
  const auto it = reservations_.find(slot);
  auto& held = client(it->second.client).reserved;
  held.erase(std::find(held.begin(), held.end(), slot));
  reservations_.erase(it);
  if (tube(job(slot).tube).flow) flow_freed(slot);
  count(slot, -1);
  extra(slot).counters.timeouts++;
  ++job_timeouts_;
  if (bury_if_attempts_used(slot)) return;
  enter_ready(slot);
}

void Engine::advance() {
  load_due();  // far jobs coming due, into the wheel before it moves
  // Due times by the wall clock; TTRs and pauses by the steady one.
  const std::int64_t wall_us = now_us();
  wheel_.advance_to(wheel::time_at(floor_div(wall_us, kMicrosPerMilli)),
                    [this, wall_us](wheel::TimerId id) { on_timer(id, wall_us); });
  while (!imminent_.empty() && imminent_.begin()->first <= wall_us) {
    const Slot slot = imminent_.begin()->second;
    imminent_.erase(imminent_.begin());
    fire(slot);
  }
  const std::int64_t steady = steady_now();
  while (!ttrs_.empty() && ttrs_.begin()->first <= steady) {
    const Slot slot = ttrs_.begin()->second;
    ttrs_.erase(ttrs_.begin());
    lapse(slot);
  }
  while (!pauses_.empty() && pauses_.begin()->first <= steady) {
    tube(pauses_.begin()->second).pause_until_steady_ms = 0;
    ready_changed(pauses_.begin()->second);
    pauses_.erase(pauses_.begin());
  }
  expire_flow_timers();
  // Jobs that became ready go to their waiters before waits end: a wait whose timeout (or
  // DEADLINE_SOON margin) falls on the same millisecond as a due job gets the job, as beanstalkd.
  dispatch();
  expire_alarms();
}

std::optional<std::int64_t> Engine::next_wakeup_us() const {
  std::optional<std::int64_t> when;
  const auto consider = [&when](std::int64_t t) {
    if (!when || t < *when) when = t;
  };
  if (!imminent_.empty()) consider(imminent_.begin()->first);
  if (const auto far = far_wakeup_us()) consider(*far);
  if (const auto deadline = wheel_.next_deadline())
    consider(micros(deadline->time_since_epoch().count()));
  // A steady time comes after as long on the wall clock as it reads now, not as the engine
  // holds it: after a step back the two differ, and the caller sleeps by the wall clock.
  std::optional<std::int64_t> steady;
  const auto consider_steady = [&steady](std::int64_t t) {
    if (!steady || t < *steady) steady = t;
  };
  if (!ttrs_.empty()) consider_steady(ttrs_.begin()->first);
  if (!pauses_.empty()) consider_steady(pauses_.begin()->first);
  if (!alarms_.empty()) consider_steady(alarms_.begin()->first);
  if (!flow_timers_.empty()) consider_steady(std::get<0>(*flow_timers_.begin()));
  if (steady) {
    consider(
        micros(later(clock_.now_unix_ms(), std::max<std::int64_t>(0, *steady - steady_now()))));
  }
  return when;
}

std::vector<Wakeup> Engine::take_wakeups() {
  std::vector<Wakeup> out;
  out.swap(wakeups_);
  return out;
}

store::WriteSet Engine::take_mutations() {
  write_unwritten();
  write_far_counts();
  if (next_id_dirty_) {
    mutations_.set_next_id(next_id_);
    next_id_dirty_ = false;
  }
  store::WriteSet out;
  if (mutations_.ops().empty()) {
    // A step that changed no job (at most the id mark): the room stays for the next one.
    if (const auto id = mutations_.next_id()) out.set_next_id(*id);
    mutations_.clear();
  } else {
    std::swap(out, mutations_);
    // The next step's are likely about as many: room made once, not grown op by op (a large
    // step, a cancel of many jobs, does not size the next one; a step of one op, a busy one's
    // next).
    mutations_.reserve(std::clamp<std::size_t>(2 * out.ops().size(), 64, 2048));
  }
  ++epoch_;
  return out;
}

// ---------------------------------------------------------------------------------------------
// Stats

Result<TubeStats> Engine::stats_tube(std::string_view name) const {
  const Tube* t = find_tube(name);
  if (t == nullptr) return Status(Code::kNotFound, "no tube " + std::string(name));
  TubeStats s;
  s.name = t->name;
  s.urgent = t->urgent;
  s.delayed = t->counts[static_cast<int>(JobState::kDelayed)];
  s.ready = t->counts[static_cast<int>(JobState::kReady)];
  s.reserved = t->counts[static_cast<int>(JobState::kReserved)];
  s.buried = t->counts[static_cast<int>(JobState::kBuried)];
  s.total_jobs = t->total_jobs;
  s.using_clients = t->using_clients;
  s.watching_clients = t->watching_clients;
  s.waiting_clients = t->waiting_clients;
  s.deletes = t->deletes;
  s.pauses = t->pauses;
  s.pause = t->pause;
  // The pause ends on the millisecond at or after the asked length (steady_after rounds up);
  // what is left is never shown as more than was asked.
  if (paused(*t)) {
    s.pause_left = std::min(Millis{t->pause_until_steady_ms - steady_now()},
                            std::chrono::duration_cast<Millis>(t->pause));
  }
  if (!paused(*t)) s.pause = Seconds{0};
  if (const auto it = max_attempts_.find(name); it != max_attempts_.end()) {
    s.max_attempts = it->second;
  }
  if (const auto since = t->ready_since.earliest()) {
    s.oldest_ready_age = Millis{std::max<std::int64_t>(0, now() - *since)};
  }
  if (t->flow) {
    s.flow = t->flow->settings;
    for (const auto& [group, state] : t->flow->groups) {
      if (!state.limited) continue;  // the jobs with no group are no group
      if (state.head != kNoSlot) {
        s.groups_ready++;
      } else if (!state.waiting.empty()) {
        s.groups_held++;
      }
    }
  }
  return s;
}

Result<Engine::JobList> Engine::list_jobs(std::string_view name, JobState state,
                                          std::size_t limit) const {
  const auto found = tube_by_name_.find(name);
  if (found == tube_by_name_.end()) return Status(Code::kNotFound, "no tube " + std::string(name));
  const TubeNo no = found->second;
  const Tube& t = tube(no);
  JobList list;
  std::vector<Slot> slots;
  switch (state) {
    case JobState::kReady: {
      // Best first through the heap: a parent is served before its children. With flow
      // control the heap holds the jobs a reserve may take now, by the tube's order (fair
      // turns included).
      const Flow* fair = fair_of(t);
      const auto worse = [this, &t, fair](std::size_t a, std::size_t b) {
        return fair != nullptr ? heap_less(t.ready[b], fair->turns[b], t.ready[a], fair->turns[a])
                               : ready_less(t.ready[b], t.ready[a]);
      };
      std::vector<std::size_t> frontier;
      if (!t.ready.empty()) frontier.push_back(0);
      while (!frontier.empty() && slots.size() < limit) {
        std::pop_heap(frontier.begin(), frontier.end(), worse);
        const std::size_t at = frontier.back();
        frontier.pop_back();
        slots.push_back(t.ready[at]);
        for (const std::size_t child : {2 * at + 1, 2 * at + 2}) {
          if (child < t.ready.size()) {
            frontier.push_back(child);
            std::push_heap(frontier.begin(), frontier.end(), worse);
          }
        }
      }
      if (t.flow && slots.size() < limit) {
        // Then the jobs behind their group's head or held back, by (priority, id): O(them).
        std::vector<Slot> rest = behind_heads(t);
        const std::size_t n = std::min(limit - slots.size(), rest.size());
        std::partial_sort(rest.begin(), rest.begin() + static_cast<std::ptrdiff_t>(n), rest.end(),
                          [this](Slot a, Slot b) { return ready_less(a, b); });
        slots.insert(slots.end(), rest.begin(), rest.begin() + static_cast<std::ptrdiff_t>(n));
      }
      break;
    }
    case JobState::kDelayed: {
      if (t.counts[static_cast<int>(JobState::kDelayed)] == 0 || limit == 0) break;
      std::size_t visits = 0;
      // Slots come in time order, jobs within one in none: finish the slot, then sort.
      visit_delayed_in_order([&](Slot id) {
        if (++visits > kListVisits) {
          list.complete = false;
          return true;
        }
        const Job& j = job(id);
        if (j.state() == JobState::kDelayed && j.tube == no) slots.push_back(id);
        return slots.size() >= limit;
      });
      std::sort(slots.begin(), slots.end(), [this](Slot a, Slot b) { return due_before(a, b); });
      if (slots.size() > limit) slots.resize(limit);
      if (t.far_due.total() == 0) break;
      // With the far tier's first `limit`, by due time.
      std::vector<DelayedPick> picks = far_first(no, limit);
      for (const Slot slot : slots) picks.push_back(pick(slot));
      by_due(picks, limit);
      for (const DelayedPick& p : picks) list.jobs.push_back(p.view(*this));
      return list;
    }
    case JobState::kReserved: {
      std::size_t visits = 0;
      for (auto it = ttrs_.begin(); it != ttrs_.end() && slots.size() < limit; ++it) {
        if (++visits > kListVisits) {
          list.complete = false;
          break;
        }
        if (job(it->second).tube == no) slots.push_back(it->second);
      }
      break;
    }
    case JobState::kBuried:
      for (auto it = t.buried.begin(); it != t.buried.end() && slots.size() < limit; ++it) {
        slots.push_back(it->second);
      }
      break;
  }
  list.jobs.reserve(slots.size());
  for (const Slot slot : slots) list.jobs.push_back(view(slot));
  return list;
}

Result<std::vector<std::uint64_t>> Engine::due_counts(std::string_view tube,
                                                      std::span<const std::int64_t> edges) const {
  if (!std::is_sorted(edges.begin(), edges.end())) {
    return Status(Code::kInvalidArgument, "the edges must be in ascending order");
  }
  std::vector<std::uint64_t> out(edges.size() + 1, 0);
  if (!tube.empty()) {
    const Tube* t = find_tube(tube);
    if (t == nullptr) return Status(Code::kNotFound, "no tube " + std::string(tube));
    t->due.count(edges, out);
    return out;
  }
  for (const auto& t : tubes_) {
    if (t) t->due.count(edges, out);
  }
  return out;
}

ServerStats Engine::stats() const {
  ServerStats s;
  s.urgent = urgent_;
  s.delayed = state_counts_[static_cast<int>(JobState::kDelayed)];
  s.ready = state_counts_[static_cast<int>(JobState::kReady)];
  s.reserved = state_counts_[static_cast<int>(JobState::kReserved)];
  s.buried = state_counts_[static_cast<int>(JobState::kBuried)];
  s.total_jobs = total_jobs_;
  s.job_timeouts = job_timeouts_;
  s.deletes = deletes_;
  s.buries = buries_;
  s.tubes = tube_by_name_.size();
  s.waiting = waits_.size();
  s.next_id = next_id_;
  return s;
}

std::vector<std::string> Engine::tubes() const {
  std::vector<std::string> names;
  names.reserve(tube_order_.size());
  for (const TubeNo no : tube_order_) names.push_back(tube(no).name);
  return names;
}

std::size_t Engine::memory_bytes() const {
  return jobs_.memory_bytes() + timers_.memory_bytes() + wheel_.memory_bytes() +
         index_.memory_bytes() + free_slots_.capacity() * sizeof(Slot);
}

// ---------------------------------------------------------------------------------------------
// Recovery

void Engine::reserve_jobs(std::size_t count) {
  index_.reserve(count);
}

Status Engine::restore(const store::JobRecord& r) {
  const auto corrupt = [&r](const std::string& what) {
    return Status(Code::kCorruption, "job record " + std::to_string(r.id) + ": " + what);
  };
  if (r.id == 0 || r.id > kMaxJobId) return corrupt("id out of range");
  // The store hands records over in id order, which makes the duplicate check free.
  if (r.id <= last_restored_id_) return corrupt("id out of order or seen twice");
  if (!check_name("key", r.key).is_ok() || !check_name("group", r.group).is_ok()) {
    return corrupt("key or group too long");
  }
  auto no = tube_ref(r.tube);
  if (!no.is_ok()) return corrupt(no.status().message());
  if (!r.key.empty() && tube(no.value()).keys.contains(r.key)) {
    return corrupt("key held by another job");
  }
  const Slot slot = revive(r, no.value());
  switch (r.state) {
    case JobState::kDelayed:
      // An overdue job fires at the first advance().
      enter_delayed(slot, r.due_unix_ms, late_us_of(r));
      break;
    case JobState::kReady:
    case JobState::kReserved:
      enter_ready(slot);
      break;
    case JobState::kBuried:
      enter_buried(slot);
      break;
  }
  // total-jobs counts puts since start, as beanstalkd's: recovered jobs are not puts.
  next_id_ = std::max(next_id_, r.id + 1);
  last_restored_id_ = r.id;
  return Status::ok();
}

Engine::Slot Engine::revive(const store::JobRecord& r, TubeNo no) {
  const std::int64_t created = std::max<std::int64_t>(0, r.created_unix_ms);
  const Slot slot = new_job(r.id, no, created, r.priority, r.ttr_seconds, r.key, r.group);
  job(slot).due_unix_ms = r.due_unix_ms;
  const bool derived_delay = r.delay_ms == std::max<std::int64_t>(0, r.due_unix_ms - created);
  if (!r.counters.zero() || !derived_delay || r.attached) {
    Extra& more = extra(slot);
    more.counters = r.counters;
    if (!derived_delay) more.delay_ms = r.delay_ms;
    more.attached = r.attached;
  }
  return slot;
}

void Engine::finish_restore(JobId next_id) {
  next_id_ = std::max(next_id_, next_id);
  next_id_dirty_ = false;
  mutations_.clear();
}

}  // namespace delayq::engine
