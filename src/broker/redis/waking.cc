#include <algorithm>
#include <boost/asio/post.hpp>
#include <charconv>

#include "broker/redis/core.h"
#include "redis/slot.h"

namespace delayq::broker::redis {

Hint& Core::hint(const std::string& tube) {
  const auto [it, made] = hints.try_emplace(tube, shards);
  if (made) say_waiting_for(tube);
  return it->second;
}

void Core::say_waiting_for(const std::string& tube) {
  if (closed) return;
  client->run(delayq::redis::key_slot(names.events),
              Command{"PUBLISH", names.events, "w " + tube + " " + node}, [](Result<Reply>) {});
}

// A tube's ready set in a shard gained a job better than its best (from a call's answer, or
// another node's message). One waiting reserve goes to see, not all of them: at a job at a
// time, every other would find nothing, a call each. A reserve that takes a job wakes two others
// if its shard holds more, one if any shard may (attempt()), so a burst reaches every waiter in
// a few rounds.
void Core::notify_ready(std::uint32_t shard, const std::string& tube, const Head& head,
                        bool wake_one) {
  if (shard >= shards) return;
  const auto it = hints.find(tube);
  // No reserve here has asked for the tube since its hint was dropped (resync()): the next one
  // finds every shard's best unknown and asks them.
  if (it == hints.end()) return;
  Hint& h = it->second;
  h.set(shard, after_message(h.head(shard), head));
  ++h.generation[shard];
  h.readied_at = clock->steady_now();
  if (wake_one && h.trying[shard] == 0) {
    if (kicks_under_way.contains(tube)) {
      ++wakes_held[tube];
    } else {
      wake(tube, 1);
    }
  }
}

void Core::kick_started(const std::string& tube) {
  ++kicks_under_way[tube];
}

void Core::kick_ended(const std::string& tube) {
  const auto it = kicks_under_way.find(tube);
  if (it == kicks_under_way.end() || --it->second > 0) return;
  kicks_under_way.erase(it);
  const auto held = wakes_held.find(tube);
  if (held == wakes_held.end()) return;
  const std::size_t count = held->second;
  wakes_held.erase(held);
  wake(tube, count);
}

// Another node's call made `head` the tube's best ready job in the shard, and did not hand it to
// a reserve of its own. Every node learns of it; one at a time goes to take it, so that with
// idle workers on N nodes a job costs one reserve call, not N of which all but one miss.
void Core::heard_ready(std::uint32_t shard, const std::string& tube, std::string_view from,
                       std::string_view head) {
  if (from == node) {
    // This node's own call, whose answer said so already; unless another node's message that
    // came after the answer but told of a call before it ('h') made the node forget the job.
    const auto it = hints.find(tube);
    if (it == hints.end() || shard >= shards || it->second.lowered.erase(shard) == 0) return;
    const Head before = it->second.head(shard);
    const Head told = Head::parse(head);
    notify_ready(shard, tube, told, false);
    if (told.known() && (before.kind == Head::Kind::kNone || told.before(before)) &&
        it->second.trying[shard] == 0) {
      wake(tube, 1);
    }
    return;
  }
  notify_ready(shard, tube, Head::parse(head), false);
  start_round(shard, tube, from, head);
}

// A job another node made ready, or left: the node whose turn comes first takes it (or passes
// the turn on). While a node of an older version is live, every node wakes a reserve as well:
// nodes may disagree on that for a heartbeat or two, and the first then still passes the turn.
void Core::start_round(std::uint32_t shard, const std::string& tube, std::string_view from,
                       std::string_view head) {
  if (turn_after(shard, tube, from, head, nullptr) == node) {
    take_turn(shard, tube, from, head);
  } else if (!taking_turns()) {
    if (const auto it = hints.find(tube); it != hints.end() && it->second.trying[shard] == 0) {
      wake(tube, 1);
    }
  }
}

// Another node's reserve or delete took the tube's best ready job in the shard: what is left
// there replaces what this node knew (messages of a shard come in the order of its calls, and
// one that made the best better says so after this one), so that no reserve here asks for the
// job taken. A job left is another job's round of turns: no reserve of any node may have gone
// for it yet (it was not the best when put).
void Core::heard_head(std::uint32_t shard, const std::string& tube, std::string_view from,
                      std::string_view head) {
  if (shard >= shards || from == node) return;  // this node's own call: its answer said so
  const auto it = hints.find(tube);
  if (it == hints.end()) return;
  Hint& h = it->second;
  const Head told = Head::parse(head);
  if (const Head& known = h.head(shard); known.known() && !(told.known() && !known.before(told))) {
    h.lowered.insert(shard);
  }
  h.set(shard, told);
  ++h.generation[shard];
  if (told.known()) start_round(shard, tube, from, head);
}

// This node's turn at the job: a reserve waiting idle here takes it; with a reserve or a
// prefetch of the node under way in the shard, that call's answer says what the shard holds
// and wakes one if the job is left. Else the turn passes on to the next node, which every node
// hears (its channel's "p" message), also while the tube looks paused here (a pause's end
// reaches nodes at slightly different times).
// The last node's turn ends the round: the job waits for the next reserve of the tube on any
// node, which knows the shard holds it, or for the node's periodic look (wake_known()).
void Core::take_turn(std::uint32_t shard, const std::string& tube, std::string_view from,
                     std::string_view head) {
  const auto it = hints.find(tube);
  if (it != hints.end() && shard < shards) {
    if (it->second.trying[shard] == 0) {
      if (wake(tube, 1) > 0) return;
    } else if (waited_for({tube})) {
      return;  // the answer under way (a reserve's, a prefetch's) wakes it if the job is left
    }
  }
  const auto next = turn_after(shard, tube, from, head, &node);
  if (!next) return;
  const std::string channel = shard_channel(options.prefix, shard);
  std::string pass = "p " + shard_base(options.prefix, shard) + " " + tube + " " +
                     std::string(from) + " " + *next + " " + std::string(head);
  if (it == hints.end()) pass += " " + node;  // and no reserve here ever asked for the tube
  client->run(delayq::redis::key_slot(channel), Command{"SPUBLISH", channel, std::move(pass)},
              [](Result<Reply>) {});
}

// A node that does not know another yet (it joined since the last heartbeat) may take a turn
// that was not its own: at worst, two reserve calls for one job.
std::optional<std::string> Core::turn_after(std::uint32_t shard, const std::string& tube,
                                            std::string_view from, std::string_view head,
                                            const std::string* after) const {
  const auto without = without_waiters.find(tube);
  if (live.contains(node) && without == without_waiters.end()) {
    return next_turn(live, shard, from, head, after);
  }
  std::set<std::string> nodes = live;
  nodes.insert(node);
  if (without != without_waiters.end()) {
    for (const auto& name : without->second) {
      if (name != node) nodes.erase(name);
    }
  }
  return next_turn(nodes, shard, from, head, after);
}

// The periodic look's wake: a reserve of each tube waiting here goes to see where the node knows
// of a job. Turns leave reserves idle while their node knows of jobs (another's turn); one whose
// round was lost (a node killed before its heartbeat lapsed, a pass that failed) is taken here.
void Core::wake_known() {
  std::vector<std::string> tubes;
  for (const auto& [tube, of] : waiters_of) {
    const auto it = hints.find(tube);
    if (it == hints.end()) continue;
    bool known = false;
    for_each_shard(it->second.live(),
                   [&](std::uint32_t shard) { known = known || it->second.untaken_job(shard); });
    if (known) tubes.push_back(tube);
  }
  for (const auto& tube : tubes) wake(tube, 1);
}

bool Core::taking_turns() const {
  return !older_node_live && std::all_of(live.begin(), live.end(), [](const std::string& name) {
    return name.ends_with(kTakesTurns);
  });
}

// A call's answer lists the tubes whose best ready job in the shard it made better: {tube, head}.
void Core::notify_readied(std::uint32_t shard, const Reply& readied) {
  for (const auto& pair : readied.elements) {
    if (pair.elements.size() == 2) {
      notify_ready(shard, pair.elements[0].str, Head::parse(pair.elements[1].str));
    }
  }
}

namespace {

// A call's heads or depths, one per tube: an array, or (for many tubes, jobs.lua's heads()) one
// string of them joined by `separator`. Empty if not as many as `count`.
std::vector<std::string_view> parts_of(const Reply& reply, std::size_t count, char separator) {
  std::vector<std::string_view> parts;
  if (reply.type == ReplyType::kArray) {
    if (reply.elements.size() != count) return {};
    parts.reserve(count);
    for (const Reply& element : reply.elements) {
      parts.emplace_back(element.type == ReplyType::kInteger ? std::string_view() : element.str);
    }
    return parts;
  }
  if (reply.type != ReplyType::kString || count == 0) return {};
  parts.reserve(count);
  std::string_view rest = reply.str;
  for (;;) {
    const std::size_t end = rest.find(separator);
    parts.push_back(rest.substr(0, end));
    if (end == std::string_view::npos) break;
    rest.remove_prefix(end + 1);
  }
  if (parts.size() != count) return {};
  return parts;
}

}  // namespace

// A shard's answer to a call made when the tubes' generations there were `generations`: at
// `at`, its heads of those tubes, in their order (as Head::parse() reads them), and after them
// how many ready jobs each has there (up to 8); each an array, or a joined string (parts_of()).
void Core::learn(std::uint32_t shard, const std::vector<std::string>& tubes,
                 const std::vector<std::uint32_t>& generations, const std::vector<Reply>& answer,
                 std::size_t at) {
  if (answer.size() <= at) return;
  const std::vector<std::string_view> heads = parts_of(answer[at], tubes.size(), '\n');
  if (heads.size() != tubes.size()) return;
  const Reply* depths_reply = answer.size() > at + 1 ? &answer[at + 1] : nullptr;
  const bool counted = depths_reply != nullptr && depths_reply->type == ReplyType::kArray &&
                       depths_reply->elements.size() == tubes.size();
  const std::vector<std::string_view> depths = depths_reply != nullptr && !counted
                                                   ? parts_of(*depths_reply, tubes.size(), ',')
                                                   : std::vector<std::string_view>{};
  for (std::size_t i = 0; i < tubes.size(); ++i) {
    Hint& h = hint(tubes[i]);
    if (h.generation[shard] == generations[i]) h.lowered.erase(shard);  // not older than an 'h'
    h.set(shard, after_answer(h.head(shard), Head::parse(heads[i]),
                              h.generation[shard] != generations[i]));
    std::uint32_t depth = 0;
    if (counted) {
      depth = static_cast<std::uint32_t>(depths_reply->elements[i].integer);
    } else if (!depths.empty()) {
      std::from_chars(depths[i].data(), depths[i].data() + depths[i].size(), depth);
    }
    h.depth[shard] = depth;
  }
}

void Core::pass_on(const std::vector<std::string>& tubes) {
  for (const auto& tube : tubes) {
    if (hint(tube).any()) wake(tube, 1);
  }
}

// The best job of the tubes in the shard, as known: unknown if any tube's is.
Head Core::best_of(const std::vector<const Hint*>& tubes, std::uint32_t shard, bool untaken,
                   bool deep) {
  Head best;
  best.kind = Head::Kind::kNone;
  for (const Hint* h : tubes) {
    if (untaken && h->trying[shard] >= (deep ? std::max<std::uint32_t>(1, h->depth[shard]) : 1)) {
      continue;
    }
    const Head& head = h->head(shard);
    if (head.kind == Head::Kind::kUnknown) return head;
    if (head.known() && (!best.known() || head.before(best))) best = head;
  }
  return best;
}

std::vector<std::string> Core::open_tubes(const std::vector<std::string>& tubes) const {
  std::vector<std::string> open;
  for (const auto& tube : tubes) {
    if (!paused(tube)) open.push_back(tube);
  }
  return open;
}

// With no shard known to hold a job when the round began (the tube's first reserve asks every
// shard), the patience looks every kProbePatience whether the answers so far found one, and goes
// on then: a shard stuck behind a migration no longer holds up jobs other shards answered with.
// While none is found, the waiter waits for the round. The timer holds the node weakly: a round
// that never ends must not keep it.
void Core::arm_patience(const std::shared_ptr<ProbeWait>& wait) {
  wait->patience =
      coarse->at(clock->steady_now() + kProbePatience, [weak = weak_from_this(), wait] {
        wait->patience = 0;
        const auto self = weak.lock();
        if (!self || wait->moved_on || wait->waiter->finished) return;
        if (wait->known || self->holds_a_job(*wait->waiter)) return self->go_on(*wait);
        self->arm_patience(wait);
      });
}

// Once, whichever comes first: the round's last answer or the patience.
void Core::go_on(ProbeWait& wait) {
  if (std::exchange(wait.moved_on, true) || wait.waiter->finished) return;
  attempt(wait.waiter);
}

bool Core::holds_a_job(const Waiter& waiter) {
  std::vector<const Hint*> hinted;
  for (const auto& tube : open_tubes(waiter)) hinted.push_back(&hint(tube));
  bool known = false;
  for_each_shard(may_hold(hinted),
                 [&](std::uint32_t shard) { known = known || best_of(hinted, shard).known(); });
  return known;
}

std::vector<std::uint64_t> Core::may_hold(const std::vector<const Hint*>& hinted) const {
  std::vector<std::uint64_t> bits((shards + 63) / 64, 0);
  for (const Hint* h : hinted) {
    for (std::size_t word = 0; word < bits.size(); ++word) bits[word] |= h->live()[word];
  }
  return bits;
}

// Up to `count` reserves waiting on the tube try the shards that may hold jobs, the longest
// waiting first; with none waiting idle, those trying other shards look again when done.
std::size_t Core::wake(const std::string& tube, std::size_t count) {
  if (paused(tube)) return 0;
  // The tube's waiters only (a node may hold thousands of reserves of other tubes), and only
  // until `count` idle ones: those trying look again when done. Tried after the walk, since
  // try_reserve may finish a waiter, which takes it out of the list.
  std::vector<std::shared_ptr<Waiter>> idle;
  for (const auto& waiter : waiters_of_tube(tube)) {
    if (idle.size() == count) break;
    if (waiter->finished) continue;
    if (waiter->trying) {
      waiter->again = true;
      continue;
    }
    idle.push_back(waiter);
  }
  std::size_t woken = 0;
  for (const auto& waiter : idle) {
    if (waiter->finished || waiter->trying) continue;
    ++woken;
    try_reserve(waiter);
  }
  return woken;
}

bool Core::paused(const std::string& tube) const {
  const auto it = pauses.find(tube);
  return it != pauses.end() && it->second.until_unix_ms > clock->now_unix_ms();
}

void Core::pump() {
  // try_reserve may finish a waiter, which erases it: walk a copy.
  const std::vector<std::shared_ptr<Waiter>> now(waiters.begin(), waiters.end());
  for (const auto& waiter : now) {
    if (waiter->trying) {
      waiter->again = true;
    } else if (!waiter->finished) {
      try_reserve(waiter);
    }
  }
}

void Core::try_reserve(const std::shared_ptr<Waiter>& waiter) {
  waiter->trying = true;
  waiter->again = false;
  waiter->probed = false;
  waiter->misses = 0;
  attempt(waiter);
}

// One step of a try: the shard the node knows to hold the best job of the waiter's tubes is
// asked for it, with the best known elsewhere as a bound (a shard whose best is worse, because
// another node took what was known, answers so, and the next best is tried). Shards whose heads
// are not known are asked first, all at once. Every answer tells the node what the shard has
// left, so each miss corrects what it knew.
void Core::attempt(const std::shared_ptr<Waiter>& waiter) {
  if (waiter->finished) {
    waiter->trying = false;
    return pass_on(open_tubes(*waiter));
  }
  const std::vector<std::string> tubes = open_tubes(*waiter);
  std::vector<const Hint*> hinted;  // (an unordered_map's elements stay where they are)
  for (const auto& tube : tubes) hinted.push_back(&hint(tube));
  std::vector<std::uint32_t> unknown;
  std::optional<std::uint32_t> first;
  Head best;
  Head second;
  // A shard whose best job another reserve of this node is taking is passed over: one more call
  // there would find it gone, or find its next job worse than another shard's best and answer
  // so (measured: one job at a time, every such call found none; draining a backlog with eight
  // workers, seven calls a job). If no other shard is known to hold one, the waiter waits for an
  // answer from that shard (`taken`), which says what it holds next. A shard that is the only
  // one known to hold jobs of the tubes takes as many reserves at once as it last said it held.
  std::optional<std::uint32_t> taken;
  Head taken_head;
  std::vector<std::pair<std::uint32_t, Head>> known;
  for_each_shard(may_hold(hinted), [&](std::uint32_t shard) {
    const Head all = best_of(hinted, shard);
    if (all.kind == Head::Kind::kUnknown) unknown.push_back(shard);
    if (all.known()) known.emplace_back(shard, all);
  });
  const std::size_t holding = known.size();
  for (const auto& [shard, all] : known) {
    const Head head = best_of(hinted, shard, true, holding == 1);
    if ((!head.known() || all.before(head)) && (!taken || all.before(taken_head))) {
      taken = shard;
      taken_head = all;
    }
    if (head.known() && (!first || head.before(best))) {
      second = best;
      best = head;
      first = shard;
    } else if (head.known() && (!second.known() || head.before(second))) {
      second = head;
    }
  }
  // Shards made unknown since this try's probe (a channel subscribed meanwhile) are asked again:
  // tried blindly, the first would hand out its best whatever the others hold.
  if (!unknown.empty() && (!waiter->probed || waiter->probed_at != looks_again)) {
    waiter->probed = true;
    waiter->probed_at = looks_again;
    // While another shard is known to hold a job, a shard slow to answer (its slot migrating,
    // its primary failing over: the client retries for up to 10 s) holds the waiter up for
    // kProbePatience at most; it goes on with what is known then, and the late answers still
    // teach the node. Shards whose slot met a migration or failover lately are not waited for.
    if (first && std::all_of(unknown.begin(), unknown.end(), [this](std::uint32_t shard) {
          return client->unsettled(shard_slot(shard));
        })) {
      probe_shards(tubes, unknown, [](bool) {});  // asked, not waited for: on to `first`
    } else {
      auto wait =
          std::make_shared<ProbeWait>(ProbeWait{.waiter = waiter, .known = first.has_value()});
      arm_patience(wait);
      return probe_shards(tubes, std::move(unknown), [self = shared_from_this(), wait](bool) {
        self->coarse->cancel(std::exchange(wait->patience, 0));
        self->go_on(*wait);
      });
    }
  }
  if (!first && taken) {
    deferred[*taken].push_back(waiter);
    return;
  }
  // A shard whose head a probe could not learn is tried when no known one is left, a different
  // one after each miss (not from the put turns' rotor: keyless puts take the shards in order).
  if (!first && !unknown.empty()) first = unknown[waiter->misses % unknown.size()];
  if (!first || waiter->misses > shards + 16) {
    waiter->trying = false;
    if (waiter->again) return try_reserve(waiter);
    return give_up(waiter);
  }
  const std::uint32_t shard = *first;
  std::vector<std::string> args = {"reserve", waiter->session->holder,
                                   second.known() ? second.text() : ""};
  std::vector<std::uint32_t> generations = generations_at(tubes, shard);
  for (const auto& tube : tubes) ++hint(tube).trying[shard];
  args.insert(args.end(), tubes.begin(), tubes.end());
  // No WAIT: a reservation a failover loses only hands the job out again (at least once).
  call(shard, std::move(args), false,
       [self = shared_from_this(), waiter, shard, tubes,
        generations = std::move(generations)](Result<Reply> reply) {
         for (const auto& tube : tubes) --self->hint(tube).trying[shard];
         // The waiters that waited for this answer try again once it is taken in (below).
         const struct Resume {
           Core& core;
           std::uint32_t shard;
           ~Resume() { core.resume_deferred(shard); }
         } resume{*self, shard};
         if (!reply.is_ok()) {
           waiter->trying = false;
           // Redis out of reach (no heartbeat answered for half a lease): a reserve with a
           // timeout still to come waits on, and answers TIMED_OUT at it (keep_deadline()),
           // or its job once Redis is back. Other failures are answered.
           if (waiter->deadline && self->clock->steady_now() < *waiter->deadline &&
               self->out_of_reach()) {
             self->arm(waiter);
           } else {
             self->finish(waiter, reply.status());
           }
           return self->pass_on(tubes);
         }
         const auto& elements = reply.value().elements;
         const std::string& code = elements.empty() ? std::string() : elements[0].str;
         if (code == "worse" || code == "notfound") {
           // The shard holds nothing as good as the node thought (another node took it): it
           // now knows what the shard holds, and tries the best again.
           self->learn(shard, tubes, generations, elements, 2);
           ++waiter->misses;
           return self->attempt(waiter);
         }
         waiter->trying = false;
         const Status status = status_of(reply.value());
         if (!status.is_ok()) return self->finish(waiter, status);
         self->learn(shard, tubes, generations, elements, 5);
         self->finish(waiter, job_of(reply.value()));
         // This waiter is served: work it was woken for, or told of meanwhile, may be left (more
         // in this shard, or jobs in shards it did not get to): another waiter goes on.
         for (const auto& tube : tubes) {
           const Hint& h = self->hint(tube);
           if (h.head(shard).known()) {
             self->wake(tube, 2);
           } else if (h.any()) {
             self->wake(tube, 1);
           }
         }
       });
}

std::size_t Core::waiting_here() const {
  return static_cast<std::size_t>(std::count_if(waiters.begin(), waiters.end(), [](const auto& w) {
    return !w->finished && (!w->trying || w->handed);
  }));
}

void Core::resume_deferred(std::uint32_t shard) {
  const auto it = deferred.find(shard);
  if (it == deferred.end()) return;
  const auto waiting = std::move(it->second);
  deferred.erase(it);
  for (const auto& waiter : waiting) attempt(waiter);
}

void Core::report_waiting() {
  if (report_due || closed) return;
  report_due = true;
  report_timer->expires_after(Millis{10});
  report_timer->async_wait([self = shared_from_this()](bool expired) {
    self->report_due = false;
    if (!expired || self->closed) return;
    const std::size_t now = self->waiting_here();
    if (now == self->reported_waiting) return;
    self->reported_waiting = now;
    self->client->run(delayq::redis::key_slot(self->names.waiting),
                      Command{"HSET", self->names.waiting, self->node, std::to_string(now)},
                      [](Result<Reply>) {});
  });
}

void Core::give_up(const std::shared_ptr<Waiter>& waiter) {
  const bool soon = waiter->watch_list && waiter->session->deadline_soon(clock->steady_now());
  const bool expired = waiter->deadline && *waiter->deadline <= clock->steady_now();
  if ((soon || expired) && waiter->session->puts_open_up_to(waiter->puts_before)) {
    // A reserve sees the jobs its connection put before it, as beanstalkd runs a connection's
    // commands in order: it answers only once they are in Redis (their calls go on another
    // connection, and may reach Redis after this reserve's look).
    waiter->session->after_puts.emplace_back(waiter->puts_before,
                                             [self = shared_from_this(), waiter] {
                                               if (!waiter->finished && !waiter->trying)
                                                 self->give_up(waiter);
                                             });
    return;
  }
  if ((soon || expired) && !waiter->rescanned) {
    // About to answer DEADLINE_SOON or TIMED_OUT: the message of a job put through another node
    // (its put answered before this reserve came) may be on its way here still. So first every
    // message sent before now is let in (sync_shards(): a PING on each shard connection, not a
    // call per shard), and the waiter tries again by what the node then knows; a shard whose
    // channel did not hold throughout may hold a job not heard of, and is asked.
    waiter->rescanned = true;
    waiter->trying = true;
    return client->sync_shards([self = shared_from_this(), waiter](std::vector<bool> held) {
      // A node of an older version heard from lately: every shard is asked.
      const bool older = self->older_node_recent();
      for (std::uint32_t shard = 0; shard < self->shards; ++shard) {
        if (!older && shard < held.size() && held[shard]) continue;
        for (const auto& tube : self->open_tubes(*waiter)) forget_head(self->hint(tube), shard);
      }
      waiter->probed = false;
      waiter->misses = 0;
      self->attempt(waiter);
    });
  }
  if (soon) return finish(waiter, Status(Code::kDeadlineSoon, "a reserved job's TTR is ending"));
  if (expired) return finish(waiter, Status(Code::kTimedOut, "no job became ready in time"));
  arm(waiter);
  report_waiting();
}

// The shards `which` at once, in one round trip: the best ready job of each tube in each. Done
// with whether any holds one. One round at a time asks about the same tubes: a caller that comes
// while one is under way waits for the next, sent when it ends (not for the one under way, which
// was sent before the caller came and might not see a job put just before), and which asks every
// shard its callers asked for. So a thousand
// reserves waiting on a tube cost one round, not a thousand, when every shard must be asked
// (reserves of a tube the node knows nothing of yet, a resync's look), and while Redis is out of
// reach each round's calls retry until their deadline.
void Core::probe_shards(std::vector<std::string> tubes, std::vector<std::uint32_t> which,
                        std::function<void(bool)> done, bool trickled) {
  if (which.empty() || tubes.empty()) return done(false);
  std::string key;
  for (const auto& tube : tubes) key += tube + '\0';
  if (const auto under_way = probing.find(key); under_way != probing.end()) {
    under_way->second.dones.push_back(std::move(done));
    under_way->second.which.insert(which.begin(), which.end());
    return;
  }
  std::vector<std::function<void(bool)>> dones;
  dones.push_back(std::move(done));
  send_probes(key, std::move(tubes), std::move(which), std::move(dones), trickled);
}

void Core::send_probes(const std::string& key, std::vector<std::string> tubes,
                       std::vector<std::uint32_t> which,
                       std::vector<std::function<void(bool)>> dones, bool trickled) {
  probing[key];  // under way: who comes now waits for the next
  auto round = std::make_shared<ProbeRound>();
  round->key = key;
  round->tubes = std::move(tubes);
  round->which = std::move(which);
  round->left = round->which.size();
  round->dones = std::move(dones);
  // A round of more shards than a call across slots takes goes in such calls (a tube's first
  // reserves know nothing of any shard: at 16,384 shards, a call a shard held Redis for a third
  // of a second); fewer go a call a shard, all at once, which answers in one round trip.
  if (round->which.size() > kShardsPerCall) {
    for (auto& part : per_primary(round->which, [](std::uint32_t shard) { return shard; })) {
      probe_together(round, std::move(part));
    }
    return;
  }
  std::vector<std::function<void()>> sends;
  for (const std::uint32_t shard : round->which) {
    sends.emplace_back(
        [self = shared_from_this(), round, shard] { self->probe_one(round, shard); });
  }
  if (trickled) return trickle(std::move(sends));
  for (auto& send : sends) send();
}

void Core::probe_together(const std::shared_ptr<ProbeRound>& round,
                          std::vector<std::uint32_t> part) {
  std::vector<std::string> args = {"probe_all", std::to_string(part.size())};
  for (const auto shard : part) args.push_back(shard_base(names.prefix, shard));
  args.insert(args.end(), round->tubes.begin(), round->tubes.end());
  std::vector<std::vector<std::uint32_t>> generations;
  for (const auto shard : part) generations.push_back(generations_at(round->tubes, shard));
  const std::uint32_t first = part.front();
  call_across_slots(
      first, std::move(args),
      [self = shared_from_this(), round, part = std::move(part),
       generations = std::move(generations)](Result<Reply> answer) {
        // {'ok', {{heads, depths} or '-2' (a shard not served there) for each shard}}. A shard
        // left unanswered is probed by a call of its own.
        const Reply* each = nullptr;
        if (answer.is_ok() && answer.value().type == ReplyType::kArray &&
            answer.value().elements.size() > 1 && answer.value().elements[0].str == "ok" &&
            answer.value().elements[1].elements.size() == part.size()) {
          each = &answer.value().elements[1];
        }
        std::vector<std::function<void()>> alone;
        for (std::size_t i = 0; i < part.size(); ++i) {
          if (each != nullptr && each->elements[i].elements.size() == 2) {
            self->learn(part[i], round->tubes, generations[i], each->elements[i].elements, 0);
            self->probed(round, part[i]);
          } else {
            alone.emplace_back([self, round, shard = part[i]] { self->probe_one(round, shard); });
          }
        }
        self->trickle(std::move(alone));
      });
}

void Core::probe_one(const std::shared_ptr<ProbeRound>& round, std::uint32_t shard) {
  std::vector<std::string> args = {"probe"};
  args.insert(args.end(), round->tubes.begin(), round->tubes.end());
  // The generations as the call leaves (a trickled one leaves after the round began).
  std::vector<std::uint32_t> generations = generations_at(round->tubes, shard);
  call(shard, std::move(args), false,
       [self = shared_from_this(), round, shard,
        generations = std::move(generations)](Result<Reply> reply) {
         if (reply.is_ok())
           self->learn(shard, round->tubes, generations, reply.value().elements, 1);
         self->probed(round, shard);
       });
}

void Core::probed(const std::shared_ptr<ProbeRound>& round, std::uint32_t shard) {
  for (const auto& tube : round->tubes) {
    if (hint(tube).head(shard).kind != Head::Kind::kNone) round->found = true;
  }
  if (--round->left > 0) return;
  // The callers that came meanwhile, and those that ask again from this round's answers (still
  // counted as waiting, so they join), go in the next round, sent after all of them came.
  auto next = std::exchange(probing[round->key], {});
  for (auto& done : round->dones) done(round->found);
  auto& again = probing[round->key];
  next.dones.insert(next.dones.end(), std::make_move_iterator(again.dones.begin()),
                    std::make_move_iterator(again.dones.end()));
  next.which.insert(again.which.begin(), again.which.end());
  probing.erase(round->key);
  if (!next.dones.empty() && !closed) {
    send_probes(round->key, round->tubes,
                std::vector<std::uint32_t>(next.which.begin(), next.which.end()),
                std::move(next.dones));
  }
}

void Core::arm(const std::shared_ptr<Waiter>& waiter) {
  std::optional<SteadyClock::time_point> at = waiter->deadline;
  if (waiter->watch_list) {
    if (const auto soon = waiter->session->soon_at(clock->steady_now());
        soon && (!at || *soon < *at))
      at = soon;
  }
  if (!at) return;
  if (!waiter->timer) waiter->timer = clock->timer();
  waiter->timer->expires_at(*at);
  waiter->timer->async_wait([self = shared_from_this(), waiter](bool expired) {
    if (!expired || waiter->finished || waiter->trying) return;
    self->give_up(waiter);
  });
}

// A reserve's timeout is kept when Redis is out of reach: its calls (a try, a probe, the PINGs
// before TIMED_OUT, the puts its connection made before it) retry for the client's request
// timeout (10 s), so it answers TIMED_OUT without them. At its deadline when no heartbeat has
// been answered for more than half a lease (Redis is known to be out of reach). Else it waits on
// while Redis answers (on a loaded node, the PINGs before TIMED_OUT let in the messages sent
// before the deadline), for a grace of at most a second, and, if it waited a second or more,
// answers as soon as Redis has answered nothing for kQuiet: within about 50 ms of the deadline
// in an outage's first seconds. A shorter one (a poll: `reserve-with-timeout 0`) waits the
// grace out, so that a loaded node's slow calls do not keep it from a job put before it came.
// A job one of its calls reserves after all is released at once (finish()).
void Core::keep_deadline(const std::shared_ptr<Waiter>& waiter) {
  if (waiter->deadline) arm_late(waiter, *waiter->deadline);
}

void Core::arm_late(const std::shared_ptr<Waiter>& waiter, SteadyTime at) {
  static constexpr Millis kGrace{1000};
  static constexpr Millis kQuiet{40};
  coarse->cancel(waiter->late);
  waiter->late = coarse->at(at, [weak = weak_from_this(), waiter] {
    waiter->late = 0;
    const auto self = weak.lock();
    if (!self || waiter->finished) return;
    const SteadyTime now = self->clock->steady_now();
    const std::uint64_t answered = self->client->stats().answered;
    const bool heard = !waiter->answered_seen || *waiter->answered_seen != answered;
    waiter->answered_seen = answered;
    const auto grace_end = *waiter->deadline + kGrace;
    const bool poll = *waiter->deadline - waiter->began < kGrace;
    if (now < grace_end && (heard || poll) && !self->out_of_reach()) {
      return self->arm_late(waiter, std::min(now + kQuiet, grace_end));
    }
    self->finish(waiter, Status(Code::kTimedOut, "no job became ready in time"));
  });
}

void Core::finish(const std::shared_ptr<Waiter>& waiter, Result<broker::Job> result) {
  if (waiter->finished) {
    // Cancelled while a script reserved a job for it: the reservation, which nobody got, is
    // undone at once (uncounted: no attempt of the job was used).
    if (result.is_ok()) undo_reservation(waiter->session->holder, result.value());
    return;
  }
  waiter->finished = true;
  waiter->stop_timers(*coarse);
  unlist(waiter);
  report_waiting();
  if (result.is_ok()) waiter->session->hold(result.value(), clock->steady_now());
  auto done = std::move(waiter->done);
  if (waiter->session->alive) done(std::move(result));
}

void Core::undo_reservation(const std::string& holder, const broker::Job& job) {
  give_back_reservation(holder, job.view.id, job.view.counters.reserves, true);
}

void Core::give_back_reservation(const std::string& holder, JobId id, std::uint32_t reserves,
                                 bool undo) {
  std::vector<std::string> args = {"release", holder, std::to_string(id),
                                   "",        "",     std::to_string(reserves)};
  if (undo) args.emplace_back("1");
  call(shard_of_id(id, shards), std::move(args), true, [](Result<Reply>) {});
}

void Core::start(const std::shared_ptr<Waiter>& waiter) {
  if (waiter->finished || waiter->trying) return;
  SessionState& session = *waiter->session;
  if (session.prefetching) {
    session.after_prefetch = [self = shared_from_this(), waiter] { self->start(waiter); };
    return;
  }
  if (session.prefetched) {
    const std::vector<std::string> tubes = open_tubes(*waiter);
    const auto it = session.held.find(session.prefetched->view.id);
    const SteadyTime now = clock->steady_now();
    if (it != session.held.end() && it->second.deadline > now &&
        std::find(tubes.begin(), tubes.end(), session.prefetched->view.tube) != tubes.end()) {
      // Its TTR ran from the prefetch: the time since is taken off what the worker has left.
      broker::Job job = std::move(*session.prefetched);
      session.prefetched.reset();
      coarse->cancel(std::exchange(session.give_back_at, 0));
      job.as_of_unix_ms += std::chrono::duration_cast<Millis>(now - session.prefetched_at).count();
      prefetches.add({"taken"});
      return finish(waiter, std::move(job));
    }
    give_back(session);
  }
  try_reserve(waiter);
}

std::optional<std::string> Core::begin_prefetch(SessionState& session, std::uint32_t shard,
                                                std::vector<std::string> tubes,
                                                SessionState::PrefetchCall& call) {
  if (tubes.empty()) return std::nullopt;
  auto bound = prefetch_bound(tubes, shard);
  if (!bound) return std::nullopt;
  call.generations = generations_at(tubes, shard);
  for (const auto& tube : tubes) ++hint(tube).trying[shard];
  call.tubes = std::move(tubes);
  session.prefetching = true;
  return bound;
}

bool Core::waited_for(const std::vector<std::string>& tubes) const {
  return std::any_of(tubes.begin(), tubes.end(), [&](const auto& tube) {
    const auto& of = waiters_of_tube(tube);
    return std::any_of(of.begin(), of.end(),
                       [](const auto& waiter) { return !waiter->finished && !waiter->trying; });
  });
}

std::optional<std::string> Core::prefetch_bound(const std::vector<std::string>& tubes,
                                                std::uint32_t shard) {
  std::vector<const Hint*> hinted;
  for (const auto& tube : tubes) hinted.push_back(&hint(tube));
  if (best_of(hinted, shard).kind == Head::Kind::kNone) return std::nullopt;
  Head best;
  for_each_shard(may_hold(hinted), [&](std::uint32_t other) {
    if (other == shard) return;
    const Head head = best_of(hinted, other);
    if (head.known() && (!best.known() || head.before(best))) best = head;
  });
  return best.known() ? best.text() : std::string();
}

void Core::give_back(SessionState& session) {
  if (!session.prefetched) return;
  const JobId id = session.prefetched->view.id;
  undo_reservation(session.holder, *session.prefetched);
  session.held.erase(id);
  session.prefetched.reset();
  coarse->cancel(std::exchange(session.give_back_at, 0));
  prefetches.add({"given_back"});
}

void Core::prefetch_answered(const std::shared_ptr<SessionState>& session, std::uint32_t shard,
                             const std::vector<std::string>& tubes,
                             const std::vector<std::uint32_t>& generations,
                             const Result<Reply>& reply) {
  for (const auto& tube : tubes) --hint(tube).trying[shard];
  session->prefetching = false;
  // {'ok', id, the reserve's answer}: a job reply with the heads after it, or a miss with them.
  const Reply* part =
      reply.is_ok() && reply.value().elements.size() > 2 ? &reply.value().elements[2] : nullptr;
  std::optional<broker::Job> next;
  if (part != nullptr && !part->elements.empty()) {
    const bool taken = part->elements[0].str == "ok";
    learn(shard, tubes, generations, part->elements, taken ? 5 : 2);
    if (taken) {
      if (auto job = job_of(*part); job.is_ok()) next = std::move(job.value());
    }
  }
  resume_deferred(shard);
  // A job the shard still holds goes to a reserve waiting here, as after a reserve's answer (a
  // turn at it was kept for this answer: take_turn()); once this session's own pipelined
  // reserve has had the job prefetched for it.
  boost::asio::post(io, [self = shared_from_this(), shard, tubes] {
    if (self->closed) return;
    for (const auto& tube : tubes) {
      const auto it = self->hints.find(tube);
      if (it != self->hints.end() && it->second.untaken_job(shard)) self->wake(tube, 1);
    }
  });
  if (!next) return;
  session->prefetched = std::move(next);
  if (!session->alive) return give_back(*session);
  session->prefetched_at = clock->steady_now();
  session->hold(*session->prefetched, session->prefetched_at);
  session->give_back_at =
      coarse->at(session->prefetched_at + options.prefetch,
                 [weak_core = weak_from_this(), weak = std::weak_ptr<SessionState>(session)] {
                   const auto self = weak_core.lock();
                   const auto held = weak.lock();
                   if (!self || !held) return;
                   held->give_back_at = 0;
                   self->give_back(*held);
                 });
}

}  // namespace delayq::broker::redis
