// flow.cc — the engine's flow control (docs/flow-control.md): group concurrency, fair turns and
// a rate per group, as the order in which a tube's ready jobs may be taken. Only tubes with a
// setting on pay for it; the others keep one heap by (priority, id), as before.
//
// A flow tube's ready jobs are kept per group (FlowGroup, engine.h). Each group that may be
// served now has its best job, its head, in the tube's heap; the rest wait in the group's own
// heap. A reserve takes the tube's best head, as it would take the best job of any tube; the
// group's next job then becomes its head if the group may still be served. So a reserve costs
// O(log groups + log jobs of the group), and held-back groups cost nothing until they are freed.
//
// Fair turns are start-time fair queueing: a head's turn is max(the virtual time, the end of its
// group's last turn), a turn lasts 1 / the group's weight, and serving a head moves the virtual
// time to its turn. Groups therefore alternate, however many jobs each holds,
// and a group that comes back after a quiet spell starts at the present, not with credit.
#include <algorithm>
#include <cmath>

#include "engine/engine.h"

namespace delayq::engine {
namespace {

// A turn of weight 1, in virtual time; divisible by every weight up to 16, so that small weights
// share turns exactly.
constexpr std::uint64_t kTurn = 720'720;

// A rate's tokens per millisecond.
double per_ms(const FlowSettings& settings) {
  return static_cast<double>(settings.rate_jobs) /
         static_cast<double>(settings.rate_period.count());
}

}  // namespace

std::string_view Engine::group_of(Slot slot) const {
  const Extra* more = extra_if(slot);
  return more == nullptr ? std::string_view() : std::string_view(more->group);
}

Engine::FlowGroup& Engine::flow_group(Flow& flow, Slot slot) {
  const std::string_view name = group_of(slot);
  auto it = flow.groups.find(name);
  if (it == flow.groups.end()) {
    it = flow.groups.emplace(std::string(name), FlowGroup{}).first;
    FlowGroup& group = it->second;
    group.limited = !name.empty();
    group.tokens_at = steady_now();
    const double burst = flow.settings.rate_burst;
    group.tokens =
        flow.afresh || flow.settings.rate_jobs == 0
            ? burst
            : std::min(burst, per_ms(flow.settings) *
                                  static_cast<double>(group.tokens_at - started_steady_ms_));
  }
  return it->second;
}

void Engine::refill(const Flow& flow, FlowGroup& group) {
  const std::int64_t now = steady_now();
  if (now <= group.tokens_at) return;
  group.tokens =
      std::min(static_cast<double>(flow.settings.rate_burst),
               group.tokens + per_ms(flow.settings) * static_cast<double>(now - group.tokens_at));
  group.tokens_at = now;
}

bool Engine::may_serve(const Flow& flow, FlowGroup& group) {
  if (!group.limited) return true;
  const FlowSettings& s = flow.settings;
  if (s.group_concurrency != 0 && group.reserved >= s.group_concurrency) return false;
  if (s.rate_jobs == 0) return true;
  refill(flow, group);
  return group.tokens >= 1.0;
}

void Engine::flow_push(TubeNo no, Slot slot) {
  Tube& t = tube(no);
  Flow& flow = *t.flow;
  FlowGroup& group = flow_group(flow, slot);
  Flow* fair = fair_of(t);
  if (group.head != kNoSlot && ready_less(slot, group.head)) {
    // The new job is the group's best: it takes the head's place, with the head's turn.
    const Slot old = group.head;
    heap_remove(t.ready, fair, timers_[old].position);
    heap_push(group.waiting, nullptr, old);
    group.head = slot;
    heap_push(t.ready, fair, slot, group.start);
    return;
  }
  heap_push(group.waiting, nullptr, slot);
  if (group.head == kNoSlot) flow_refresh(no, group_of(slot));
}

void Engine::flow_remove(TubeNo no, Slot slot) {
  Tube& t = tube(no);
  FlowGroup& group = t.flow->groups.find(group_of(slot))->second;
  if (group.head == slot) {
    heap_remove(t.ready, fair_of(t), timers_[slot].position);
    group.head = kNoSlot;
  } else {
    heap_remove(group.waiting, nullptr, timers_[slot].position);
  }
  flow_refresh(no, group_of(slot));
}

void Engine::flow_taken(Slot slot) {
  Flow& flow = *tube(job(slot).tube).flow;
  FlowGroup& group = flow_group(flow, slot);
  group.reserved++;
  if (flow.settings.fair && group.head == slot) {
    flow.virtual_time = std::max(flow.virtual_time, group.start);
    const auto weight = flow.settings.group_weights.find(group_of(slot));
    group.finish =
        group.start + kTurn / (weight == flow.settings.group_weights.end() ? 1 : weight->second);
  }
  if (group.limited && flow.settings.rate_jobs != 0) {
    refill(flow, group);
    group.tokens -= 1.0;  // a reserve by id may take a job over the rate: the bucket owes it
  }
}

void Engine::flow_freed(Slot slot) {
  const TubeNo no = job(slot).tube;
  FlowGroup& group = tube(no).flow->groups.find(group_of(slot))->second;
  DELAYQ_CHECK(group.reserved > 0);
  group.reserved--;
  flow_refresh(no, group_of(slot));
}

void Engine::flow_refresh(TubeNo no, std::string_view name) {
  Tube& t = tube(no);
  Flow& flow = *t.flow;
  const auto it = flow.groups.find(name);
  if (it == flow.groups.end()) return;
  FlowGroup& group = it->second;
  Flow* fair = fair_of(t);
  const bool serve = may_serve(flow, group);
  if (serve && group.head == kNoSlot && !group.waiting.empty()) {
    const Slot next = group.waiting.front();
    heap_remove(group.waiting, nullptr, 0);
    group.head = next;
    group.start = std::max(flow.virtual_time, group.finish);
    heap_push(t.ready, fair, next, group.start);
    ready_changed(no);
  } else if (!serve && group.head != kNoSlot) {
    const Slot head = group.head;
    heap_remove(t.ready, fair, timers_[head].position);
    heap_push(group.waiting, nullptr, head);
    group.head = kNoSlot;
  }
  const bool rated = group.limited && flow.settings.rate_jobs != 0;
  if (group.head == kNoSlot && group.waiting.empty() && group.reserved == 0) {
    // Nothing of it is left but its bucket: kept until full again, so that emptying a group
    // and filling it anew does not make a fresh burst.
    const double burst = flow.settings.rate_burst;
    if (!rated || group.tokens >= burst) {
      if (group.timer_at != 0) flow_timers_.erase({group.timer_at, no, std::string(name)});
      flow.groups.erase(it);
      return;
    }
    arm_flow_timer(no, name, group,
                   group.tokens_at + static_cast<std::int64_t>(std::ceil((burst - group.tokens) /
                                                                         per_ms(flow.settings))));
  } else if (rated && group.head == kNoSlot && !group.waiting.empty() &&
             (flow.settings.group_concurrency == 0 ||
              group.reserved < flow.settings.group_concurrency)) {
    // Held back by the rate alone: looked at again when its next token comes.
    arm_flow_timer(no, name, group,
                   group.tokens_at + std::max<std::int64_t>(
                                         1, static_cast<std::int64_t>(std::ceil(
                                                (1.0 - group.tokens) / per_ms(flow.settings)))));
  }
}

void Engine::arm_flow_timer(TubeNo no, std::string_view name, FlowGroup& group, std::int64_t at) {
  if (group.timer_at == at) return;
  std::string key(name);
  if (group.timer_at != 0) flow_timers_.erase({group.timer_at, no, key});
  group.timer_at = at;
  flow_timers_.emplace(at, no, std::move(key));
}

void Engine::expire_flow_timers() {
  const std::int64_t now = steady_now();
  while (!flow_timers_.empty() && std::get<0>(*flow_timers_.begin()) <= now) {
    auto node = flow_timers_.extract(flow_timers_.begin());
    const auto& [at, no, name] = node.value();
    if (no >= tubes_.size() || !tubes_[no] || !tubes_[no]->flow) continue;
    const auto it = tubes_[no]->flow->groups.find(name);
    if (it == tubes_[no]->flow->groups.end() || it->second.timer_at != at) continue;
    it->second.timer_at = 0;
    flow_refresh(no, name);
  }
}

std::vector<Engine::Slot> Engine::behind_heads(const Tube& t) const {
  std::vector<Slot> slots;
  if (t.flow) {
    for (const auto& [name, group] : t.flow->groups) {
      slots.insert(slots.end(), group.waiting.begin(), group.waiting.end());
    }
  }
  return slots;
}

// Sorts the tube's ready jobs anew under `flow` (none: one heap), counting its reservations.
void Engine::rebuild_flow(TubeNo no, const FlowSettings* flow, bool afresh) {
  Tube& t = tube(no);
  std::vector<Slot> ready = behind_heads(t);
  ready.insert(ready.end(), t.ready.begin(), t.ready.end());
  if (t.flow) {
    for (const auto& [name, group] : t.flow->groups) {
      if (group.timer_at != 0) flow_timers_.erase({group.timer_at, no, name});
    }
  }
  t.ready.clear();
  t.flow.reset();
  if (flow != nullptr) {
    t.flow = std::make_unique<Flow>();
    t.flow->settings = *flow;
    t.flow->afresh = afresh;
    for (const auto& [slot, reservation] : reservations_) {
      if (job(slot).tube == no) flow_group(*t.flow, slot).reserved++;
    }
  }
  for (const Slot slot : ready) {
    if (t.flow) {
      flow_push(no, slot);
    } else {
      heap_push(t.ready, nullptr, slot);
    }
  }
  if (t.flow) {
    // Groups with only reservations were made above and may hold nothing to serve.
    std::vector<std::string> names;
    for (const auto& [name, group] : t.flow->groups) names.push_back(name);
    for (const std::string& name : names) flow_refresh(no, name);
  }
  ready_changed(no);
}

Status Engine::set_flow(std::string_view name, const FlowSettings& flow) {
  if (Status s = check_tube_name(name); !s.is_ok()) return s;
  if (Status s = check_flow(flow, options_.max_name_bytes); !s.is_ok()) return s;
  FlowSettings normal = flow;  // a weight of 1 is every group's: not kept
  std::erase_if(normal.group_weights, [](const auto& entry) { return entry.second == 1; });
  apply_flow(name, normal, true);
  mutations_.put_flow(name, normal);
  dispatch();
  return Status::ok();
}

FlowSettings Engine::flow(std::string_view name) const {
  const auto it = flows_.find(name);
  return it == flows_.end() ? FlowSettings{} : it->second;
}

void Engine::restore_flow(std::string_view name, const FlowSettings& flow) {
  apply_flow(name, flow, false);
}

void Engine::apply_flow(std::string_view name, const FlowSettings& flow, bool afresh) {
  if (afresh) afresh_flows_.emplace(name);
  if (flow.any()) {
    flows_[std::string(name)] = flow;
  } else if (const auto it = flows_.find(name); it != flows_.end()) {
    flows_.erase(it);
  }
  if (const auto it = tube_by_name_.find(name); it != tube_by_name_.end()) {
    rebuild_flow(it->second, flow.any() ? &flow : nullptr, afresh);
  }
}

}  // namespace delayq::engine
