#include "broker/redis/session.h"

#include <algorithm>
#include <tuple>

#include "base/names.h"
#include "broker/put_rules.h"
#include "store/record.h"

namespace delayq::broker::redis {

RedisSession::RedisSession(std::shared_ptr<Core> core, broker::SessionOptions options)
    : Handle(std::move(core)) {
  ++core_->sessions;
  // (A node's name is host:pid:n, never "*": the two kinds of holder never meet.)
  state_->holder = options.holder.empty() ? core_->node + "/" + std::to_string(core_->sessions)
                                          : "*/" + options.holder;
  if (options.watch_default) {
    used_ = "default";
    watched_ = {"default"};
    count_use(used_, 1);
    count_watch(used_, 1);
  }
}

RedisSession::~RedisSession() {
  state_->alive = false;
  for (auto& [ticket, waiter] : waits_) {
    if (!waiter->finished) {
      waiter->finished = true;
      waiter->stop_timers(*core_->coarse);
      core_->unlist(waiter);
      core_->report_waiting();  // the other nodes' stats count it no more
    }
  }
  // A prefetched job never reached the client: it is given back uncounted. Its other reserved
  // jobs are ready again at once (a job reserved again since is left alone).
  core_->give_back(*state_);
  state_->after_prefetch = nullptr;
  for (const auto& [id, held] : state_->held) {
    core_->give_back_reservation(state_->holder, id, held.reserves, false);
  }
  if (!used_.empty()) count_use(used_, -1);
  for (const auto& tube : watched_) count_watch(tube, -1);
}

void RedisSession::count_use(const std::string& tube, int by) {
  count(tube, &TubeUse::using_clients, by);
}

void RedisSession::count_watch(const std::string& tube, int by) {
  count(tube, &TubeUse::watching, by);
}

// A tube's entry goes when nobody here uses or watches it.
void RedisSession::count(const std::string& tube, std::uint64_t TubeUse::*field, int by) {
  const auto it = core_->uses.try_emplace(tube).first;
  TubeUse& use = it->second;
  use.*field = static_cast<std::uint64_t>(static_cast<std::int64_t>(use.*field) + by);
  if (use.using_clients == 0 && use.watching == 0) core_->uses.erase(it);
}

Status RedisSession::use(std::string_view tube) {
  const std::string name(tube);
  if (Status s = check(name); !s.is_ok()) return s;
  if (!used_.empty()) count_use(used_, -1);
  used_ = name;
  count_use(used_, 1);
  return Status::ok();
}

Result<std::size_t> RedisSession::watch(std::string_view tube) {
  const std::string name(tube);
  if (Status s = check(name); !s.is_ok()) return s;
  if (std::find(watched_.begin(), watched_.end(), name) == watched_.end()) {
    if (watched_.size() >= kMaxWatchedTubes) return watch_limit();
    watched_.push_back(name);
    count_watch(name, 1);
  }
  return watched_.size();
}

Result<std::size_t> RedisSession::ignore(std::string_view tube) {
  const std::string name(tube);
  if (Status s = check(name); !s.is_ok()) return s;
  const auto it = std::find(watched_.begin(), watched_.end(), name);
  if (it != watched_.end()) {
    if (watched_.size() == 1) return Status(Code::kNotIgnored, "the last watched tube");
    remove_as_beanstalkd(watched_, it);
    count_watch(name, -1);
  }
  return watched_.size();
}

// --- helpers

void RedisSession::job_call(std::uint32_t shard, std::vector<std::string> args, bool write,
                            std::function<void(Result<broker::Job>)> then) {
  core_->call(shard, std::move(args), write,
              [state = state_, then = std::move(then)](Result<Reply> reply) {
                if (!state->alive) return;
                if (!reply.is_ok()) return then(reply.status());
                if (Status s = status_of(reply.value()); !s.is_ok()) return then(s);
                then(job_of(reply.value()));
              });
}

Callback<broker::Job> RedisSession::view_of(Callback<JobView> done) {
  return [done = std::move(done)](Result<broker::Job> job) {
    if (!job.is_ok()) return done(job.status());
    done(std::move(job.value().view));
  };
}

std::uint32_t RedisSession::shard_for(const std::string& tube, const broker::JobRef& job) const {
  if (job.id != 0) return shard_of_id(job.id, core_->shards);
  return core_->key_shard(tube, job.key);
}

std::vector<std::string> RedisSession::ref_args(const broker::JobRef& job) const {
  if (job.id != 0) return {std::to_string(job.id), "", ""};
  return {"", job.tube, job.key};
}

std::vector<std::string> put_arguments(broker::PutRequest& request, const std::string& tube) {
  std::string attachment;
  Delivery delivery;
  delivery.url = std::move(request.url);
  delivery.content_type = std::move(request.content_type);
  delivery.traceparent = std::move(request.traceparent);
  delivery.tracestate = std::move(request.tracestate);
  if (!delivery.empty()) attachment = store::encode_delivery(delivery);
  const auto ttr = std::max<std::int64_t>(1, request.ttr.count());
  std::string tail = new_record_tail(static_cast<std::uint32_t>(ttr), tube, request.key,
                                     request.group, request.body);
  // A debounce rides in replace's place: 'd<debounce>:<max_wait>' (ops.lua's put_one).
  std::string replace = request.replace ? "1" : "0";
  if (request.debounce && !request.key.empty()) {
    replace = "d" + std::to_string(request.debounce->count()) + ":" +
              (request.max_wait ? std::to_string(request.max_wait->count()) : "");
  }
  return {tube,
          std::to_string(request.priority),
          std::to_string(request.debounce ? request.debounce->count() : request.due.ms),
          request.due.absolute ? "1" : "0",
          std::move(replace),
          request.key,
          request.group,
          std::move(attachment),
          std::move(tail)};
}

// --- jobs

void RedisSession::put(broker::PutRequest request, Callback<broker::PutResult> done) {
  const std::string tube = request.tube.empty() ? used_ : request.tube;
  broker::PutContext context;
  context.max_name_bytes = core_->options.max_name_bytes;
  context.draining = core_->draining;
  context.tube_has_webhook = !request.url.empty() && core_->webhook_map.contains(tube);
  Status bad = broker::check_put(request, tube, context);
  if (!bad.is_ok()) return post(std::move(done), Result<broker::PutResult>(bad));
  const std::uint32_t shard =
      core_->flows.contains(tube) ? core_->home_of(tube)
      : !request.key.empty()      ? shard_of_name(tube, request.key, core_->shards)
      : !request.group.empty()    ? shard_of_name(tube, request.group, core_->shards)
                                  : core_->burst_shard();
  const auto ttr = std::max<std::int64_t>(1, request.ttr.count());
  std::vector<std::string> args = put_arguments(request, tube);
  const bool attached = !args[7].empty();
  const std::uint64_t number = state_->put_made();
  core_->queue_put(shard, std::move(args),
                   [state = state_, number, tube, priority = request.priority, due = request.due,
                    ttr, debounce = request.debounce.has_value(), key = request.key,
                    group = request.group, attached, done = std::move(done)](Result<Reply> reply) {
                     state->put_done(number);
                     if (!state->alive) return;
                     if (!reply.is_ok()) return done(reply.status());
                     if (Status s = status_of(reply.value()); !s.is_ok()) return done(s);
                     const auto& e = reply.value().elements;
                     broker::PutResult result;
                     if (e[0].str == "exists") {
                       auto holder = job_of(reply.value());
                       if (!holder.is_ok()) return done(holder.status());
                       result.job = std::move(holder.value().view);
                       result.inserted = false;
                       return done(std::move(result));
                     }
                     if (e.size() < 5)
                       return done(Status(Code::kIOError, "Redis: a short put reply"));
                     // The script answers the id, the due time, the job it replaced (a debounce:
                     // the job's first put and its counters) and its present (as integers); the
                     // rest the put said.
                     JobView& job = result.job;
                     job.id = static_cast<JobId>(e[1].integer);
                     job.due_unix_ms = e[2].integer;
                     const std::int64_t now = e[4].integer;
                     result.debounced = e[0].str == "debounced";
                     job.created_unix_ms = now;
                     if (result.debounced) {
                       const auto& kept = e[3].elements;
                       if (kept.size() < 6) {
                         return done(Status(Code::kIOError, "Redis: a short debounce reply"));
                       }
                       const auto counter = [&kept](std::size_t i) {
                         return static_cast<std::uint32_t>(kept[i].integer);
                       };
                       job.created_unix_ms = kept[0].integer;
                       job.counters = {counter(1), counter(2), counter(3), counter(4), counter(5)};
                     }
                     job.state = job.due_unix_ms > now ? JobState::kDelayed : JobState::kReady;
                     job.delay_ms = due.absolute ? std::max<std::int64_t>(0, due.ms - now)
                                    : debounce   ? std::max<std::int64_t>(0, job.due_unix_ms - now)
                                                 : std::max<std::int64_t>(0, due.ms);
                     job.tube = tube;
                     job.priority = priority;
                     job.ttr = std::chrono::seconds(ttr);
                     job.key = key;
                     job.group = group;
                     job.attached = attached;
                     if (!result.debounced) result.replaced = static_cast<JobId>(e[3].integer);
                     done(std::move(result));
                   });
}

std::uint64_t RedisSession::reserve(broker::ReserveRequest request, Callback<broker::Job> done) {
  auto waiter = std::make_shared<Waiter>();
  waiter->session = state_;
  waiter->puts_before = state_->puts_made;
  waiter->watch_list = request.tubes.empty();
  waiter->tubes = waiter->watch_list ? watched_ : request.tubes;
  for (const auto& tube : waiter->tubes) {
    if (Status s = check(tube); !s.is_ok()) {
      post(std::move(done), Result<broker::Job>(s));
      return 0;
    }
  }
  waiter->began = core_->clock->steady_now();
  if (request.timeout) waiter->deadline = waiter->began + *request.timeout;
  waiter->done = std::move(done);
  waiter->ticket = next_ticket_++;
  // Only reserves still to answer are kept: a worker's connection makes millions.
  std::erase_if(waits_, [](const auto& wait) { return wait.second->finished; });
  waits_[waiter->ticket] = waiter;
  worker_ = waiter->watch_list;
  ride_along(*waiter);
  core_->list(waiter);
  core_->keep_deadline(waiter);
  // Never inside this call: the first try starts from the executor. (A wake() may have started
  // it already: one try at a time, or a second job would be reserved for it and handed back.)
  asio::post(core_->io, [core = core_, waiter] { core->start(waiter); });
  return waiter->ticket;
}

bool RedisSession::cancel_reserve(std::uint64_t ticket) {
  const auto it = waits_.find(ticket);
  if (it == waits_.end() || it->second->finished) return false;
  auto waiter = it->second;
  waits_.erase(it);
  auto done = std::move(waiter->done);
  waiter->finished = true;
  waiter->stop_timers(*core_->coarse);
  core_->unlist(waiter);
  core_->report_waiting();
  post(std::move(done), Result<broker::Job>(Status(Code::kTimedOut, "the reserve was cancelled")));
  return true;
}

bool RedisSession::stop_waiting(std::uint64_t ticket) {
  const auto it = waits_.find(ticket);
  if (it == waits_.end() || it->second->finished) return false;
  const auto waiter = it->second;
  // Its time is up: a try under way answers the job it finds, or ends in give_up(); a waiter at
  // rest goes to give_up() now. There, before TIMED_OUT, the messages already sent are let in,
  // for a job put through another node and not announced here yet.
  waiter->deadline = core_->clock->steady_now();
  core_->keep_deadline(waiter);
  if (!waiter->trying) {
    if (waiter->timer) waiter->timer->cancel();
    asio::post(core_->io, [core = core_, waiter] {
      if (!waiter->finished && !waiter->trying) core->give_up(waiter);
    });
  }
  return true;
}

void RedisSession::reserve_job(JobId id, Callback<broker::Job> done) {
  job_call(shard_of_id(id, core_->shards), {"reserve_job", state_->holder, std::to_string(id)},
           true,
           [state = state_, clock = core_->clock, done = std::move(done)](Result<broker::Job> job) {
             if (job.is_ok()) state->hold(job.value(), clock->steady_now());
             done(std::move(job));
           });
}

std::vector<std::string> RedisSession::prefetch_tubes(const broker::JobRef& job) const {
  // A worker's delete: of a job by id that this session reserved, from a connection's session
  // (not one shared by name, as HTTP's) whose last reserve was of its watch list and that has
  // none waiting, nor a job prefetched already.
  if (core_->options.prefetch.count() <= 0 || !worker_ || job.id == 0 ||
      state_->holder.starts_with("*/") || !state_->held.contains(job.id) || state_->prefetched ||
      state_->prefetching || std::any_of(waits_.begin(), waits_.end(), [](const auto& wait) {
        return !wait.second->finished;
      })) {
    return {};
  }
  std::vector<std::string> tubes = core_->open_tubes(watched_);
  // A reserve waiting here for one of them comes first.
  if (core_->waited_for(tubes)) return {};
  return tubes;
}

void RedisSession::erase(broker::JobRef job, Callback<JobId> done) {
  const std::uint32_t shard = shard_for(job.tube, job);
  auto prefetch = std::make_shared<SessionState::PrefetchCall>();
  const auto bound = core_->begin_prefetch(*state_, shard, prefetch_tubes(job), *prefetch);
  auto answered = [core = core_, state = state_, shard, prefetch,
                   done = std::move(done)](Result<Reply> reply) {
    if (!prefetch->tubes.empty()) {
      core->prefetch_answered(state, shard, prefetch->tubes, prefetch->generations, reply);
    }
    auto after = std::exchange(state->after_prefetch, nullptr);
    if (!state->alive) return;
    if (!reply.is_ok()) {
      done(reply.status());
    } else if (Status s = status_of(reply.value()); !s.is_ok()) {
      done(s);
    } else {
      const auto id = static_cast<JobId>(to_int(reply.value().elements[1].str));
      state->held.erase(id);
      done(id);
    }
    // A reserve that came while the call was under way (pipelined after the delete).
    if (after) after();
  };
  if (job.id == 0) {
    // By key: a call of its own (it may be answered 'moved', to the tube's home shard).
    std::vector<std::string> args = {"erase", state_->holder};
    const auto ref = ref_args(job);
    args.insert(args.end(), ref.begin(), ref.end());
    return core_->call(shard, std::move(args), true, std::move(answered));
  }
  // By id: with the other deletes of this turn to the shard (Core::queue_erase()).
  std::vector<std::string> args = {state_->holder, std::to_string(job.id), bound.value_or(""),
                                   std::to_string(prefetch->tubes.size())};
  args.insert(args.end(), prefetch->tubes.begin(), prefetch->tubes.end());
  const std::size_t index = core_->queue_erase(shard, {std::move(args), std::move(answered)});
  state_->queued_erase.reset();
  if (!bound) state_->queued_erase = {core_->erase_turn, shard, index, prefetch};
}

// A reserve pipelined behind this session's delete, both read in one turn: the delete's call, not
// sent yet, reserves the reserve's job too, as a prefetch that the reserve takes at once. The
// client asked for both, so whatever the prefetch option says, this changes nothing that others
// see; a reserve at rest here for the tubes still comes first.
void RedisSession::ride_along(const Waiter& waiter) {
  const auto queued = std::exchange(state_->queued_erase, std::nullopt);
  if (!queued || queued->turn != core_->erase_turn || state_->prefetching || state_->prefetched ||
      state_->holder.starts_with("*/")) {
    return;
  }
  const auto pending = core_->pending_erases.find(queued->shard);
  if (pending == core_->pending_erases.end() || queued->index >= pending->second.size()) return;
  std::vector<std::string> tubes = core_->open_tubes(waiter);
  if (core_->waited_for(tubes)) return;
  const SessionState::PrefetchCall& call = *queued->prefetch;
  const auto bound =
      core_->begin_prefetch(*state_, queued->shard, std::move(tubes), *queued->prefetch);
  if (!bound) return;
  auto& args = pending->second[queued->index].args;  // holder id bound k
  args[2] = *bound;
  args[3] = std::to_string(call.tubes.size());
  args.insert(args.end(), call.tubes.begin(), call.tubes.end());
}

void RedisSession::release(broker::ReleaseRequest request, Callback<JobView> done) {
  const JobId id = request.id;
  job_call(shard_of_id(id, core_->shards),
           {"release", state_->holder, std::to_string(id),
            request.priority ? std::to_string(*request.priority) : std::string(),
            std::to_string(request.delay.count()),
            request.reservation ? std::to_string(*request.reservation) : std::string()},
           true, [state = state_, id, done = view_of(std::move(done))](Result<broker::Job> job) {
             if (job.is_ok()) state->held.erase(id);
             done(std::move(job));
           });
}

void RedisSession::bury(JobId id, std::optional<std::uint32_t> priority, Callback<JobView> done) {
  job_call(shard_of_id(id, core_->shards),
           {"bury", state_->holder, std::to_string(id), priority ? std::to_string(*priority) : ""},
           true, [state = state_, id, done = view_of(std::move(done))](Result<broker::Job> job) {
             if (job.is_ok()) state->held.erase(id);
             done(std::move(job));
           });
}

void RedisSession::touch(JobId id, Callback<JobView> done) {
  job_call(shard_of_id(id, core_->shards), {"touch", state_->holder, std::to_string(id)}, true,
           [state = state_, clock = core_->clock,
            done = view_of(std::move(done))](Result<broker::Job> job) {
             if (job.is_ok()) state->hold(job.value(), clock->steady_now());
             done(std::move(job));
           });
}

void RedisSession::peek(broker::JobRef job, bool with_body, Callback<broker::Job> done) {
  std::vector<std::string> args = {"peek"};
  const auto ref = ref_args(job);
  args.insert(args.end(), ref.begin(), ref.end());
  job_call(shard_for(job.tube, job), std::move(args), false,
           [with_body, done = std::move(done)](Result<broker::Job> found) {
             if (found.is_ok() && !with_body) found.value().body.clear();
             done(std::move(found));
           });
}

void RedisSession::peek_next(std::string tube, JobState state, Callback<broker::Job> done) {
  if (Status s = check(tube); !s.is_ok()) return post(std::move(done), Result<broker::Job>(s));
  if (state == JobState::kReserved) {
    return post(
        std::move(done),
        Result<broker::Job>(Status(Code::kInvalidArgument, "peek: ready, delayed or buried only")));
  }
  every_shard(
      {"peek_next", tube, std::string(state_name(state))}, false,
      [state, done = std::move(done)](Result<std::vector<Reply>> replies) {
        if (!replies.is_ok()) return done(replies.status());
        std::optional<broker::Job> best;
        for (const auto& reply : replies.value()) {
          if (reply.elements.empty() || reply.elements[0].str != "ok") continue;
          auto job = job_of(reply);
          if (!job.is_ok()) return done(job.status());
          const JobView& v = job.value().view;
          const bool better =
              !best ||
              (state == JobState::kReady
                   ? std::tuple(v.priority, v.created_unix_ms, v.id) <
                         std::tuple(best->view.priority, best->view.created_unix_ms, best->view.id)
               : state == JobState::kDelayed ? std::pair(v.due_unix_ms, v.id) <
                                                   std::pair(best->view.due_unix_ms, best->view.id)
                                             : v.id < best->view.id);
          if (better) best = std::move(job.value());
        }
        if (!best) return done(Status(Code::kNotFound, "no such job"));
        done(std::move(*best));
      });
}

void RedisSession::kick(std::string tube, std::size_t bound, Callback<std::size_t> done) {
  if (Status s = check(tube); !s.is_ok()) return post(std::move(done), Result<std::size_t>(s));
  if (bound == 0) return post(std::move(done), Result<std::size_t>(std::size_t{0}));
  // Buried jobs first (the lowest ids), delayed ones (the earliest due) only if no shard has a
  // buried job: every shard says which it would kick first (at most kMost), in calls across
  // slots, and each kicks as many as it holds of the first of them all. Two round trips; more
  // while a shard had more to list and the bound is not reached.
  static constexpr std::size_t kMost = 1000;
  struct Kick : std::enable_shared_from_this<Kick> {
    std::shared_ptr<Core> core;
    std::shared_ptr<SessionState> state;
    std::string tube;
    std::size_t bound = 0;
    Callback<std::size_t> done;
    std::string what = "buried";
    std::size_t left = 0;
    std::size_t kicked = 0;
    bool listed_all = true;  // no shard had more than it listed
    std::vector<std::tuple<double, JobId, std::uint32_t>> candidates;  // order, id, shard
    Status failed;
    bool ended = false;  // Core::kick_ended() called

    // A kick dropped unfinished (its session went while it listed: its callbacks are not run)
    // ends its hold of the tube's wakes here.
    ~Kick() {
      if (!ended && !core->closed) core->kick_ended(tube);
    }
    void ask() {
      const std::size_t most = std::min(kMost, bound - kicked);
      redis::every_shard(core, state, {"kickable", tube, what, std::to_string(most)}, false,
                         [self = shared_from_this(), most](Result<std::vector<Reply>> lists) {
                           self->listed(most, lists);
                         });
    }
    void listed(std::size_t most, const Result<std::vector<Reply>>& lists) {
      if (!lists.is_ok()) {
        failed = lists.status();
        return finish();
      }
      listed_all = true;
      candidates.clear();
      for (std::uint32_t shard = 0; shard < lists.value().size(); ++shard) {
        const Reply& reply = lists.value()[shard];
        if (reply.elements.size() < 2) continue;
        const auto& pairs = reply.elements[1].elements;
        if (pairs.size() >= most) listed_all = false;
        for (const auto& pair : pairs) {
          if (pair.elements.size() != 2) continue;
          candidates.emplace_back(to_ms(pair.elements[1].str, 0),
                                  static_cast<JobId>(to_int(pair.elements[0].str)), shard);
        }
      }
      if (candidates.empty() && what == "buried" && kicked == 0) {
        what = "delayed";
        return ask();
      }
      std::sort(candidates.begin(), candidates.end());
      std::map<std::uint32_t, std::size_t> per_shard;
      for (std::size_t i = 0; i < candidates.size() && kicked + i < bound; ++i) {
        ++per_shard[std::get<2>(candidates[i])];
      }
      if (per_shard.empty()) return finish();
      left = per_shard.size();
      const std::size_t before = kicked;
      for (const auto& [chosen, count] : per_shard) {
        core->call(chosen, {"kick", tube, what, std::to_string(count)}, true,
                   [self = shared_from_this(), before](Result<Reply> kick) {
                     if (!kick.is_ok()) {
                       self->failed = kick.status();
                     } else if (kick.value().elements.size() > 1) {
                       self->kicked += static_cast<std::size_t>(kick.value().elements[1].integer);
                     }
                     if (--self->left > 0) return;
                     const bool more = !self->listed_all && self->kicked > before &&
                                       self->kicked < self->bound && self->failed.is_ok();
                     if (more) return self->ask();
                     self->finish();
                   });
      }
    }
    // Every round's wakes are held from the start to here (Core::kick_started()).
    void finish() {
      ended = true;
      core->kick_ended(tube);
      if (!state->alive) return;
      if (failed.is_ok()) {
        done(kicked);
      } else {
        done(failed);
      }
    }
  };
  auto k = std::make_shared<Kick>();
  k->core = core_;
  k->state = state_;
  k->tube = std::move(tube);
  k->bound = bound;
  k->done = std::move(done);
  core_->kick_started(k->tube);
  k->ask();
}

void RedisSession::kick_job(JobId id, Callback<JobView> done) {
  job_call(shard_of_id(id, core_->shards), {"kick_job", std::to_string(id)}, true,
           view_of(std::move(done)));
}

void RedisSession::update(broker::JobRef job, broker::Update update, Callback<JobView> done) {
  if (!update.due && !update.priority) {
    return post(std::move(done),
                Result<JobView>(Status(Code::kInvalidArgument, "nothing to update")));
  }
  std::vector<std::string> args = {"update"};
  const auto ref = ref_args(job);
  args.insert(args.end(), ref.begin(), ref.end());
  args.push_back(update.due ? std::to_string(update.due->ms) : "");
  args.push_back(update.due && update.due->absolute ? "1" : "0");
  args.push_back(update.priority ? std::to_string(*update.priority) : "");
  job_call(shard_for(job.tube, job), std::move(args), true, view_of(std::move(done)));
}

void RedisSession::list_group(std::string tube, std::string group,
                              Callback<std::vector<JobView>> done) {
  every_shard({"group", tube, group, "0"}, false,
              [done = std::move(done)](Result<std::vector<Reply>> replies) {
                if (!replies.is_ok()) return done(replies.status());
                std::vector<JobView> views;
                for (const auto& reply : replies.value()) {
                  for (std::size_t i = 1; i + 1 < reply.elements.size(); i += 2) {
                    const auto id = static_cast<JobId>(to_int(reply.elements[i].str));
                    auto record = decode_record(id, reply.elements[i + 1].str);
                    if (!record.is_ok()) return done(record.status());
                    views.push_back(std::move(record.value().view));
                  }
                }
                std::sort(views.begin(), views.end(),
                          [](const JobView& a, const JobView& b) { return a.id < b.id; });
                done(std::move(views));
              });
}

void RedisSession::cancel_group(std::string tube, std::string group, Callback<std::size_t> done) {
  // How many each shard holds, in calls across slots; then the cancel, a call in each shard that
  // holds some. A job of the group put meanwhile may stay: its put and the cancel overlapped.
  every_shard({"group", tube, group, "n"}, false,
              [core = core_, state = state_, tube, group,
               done = std::move(done)](Result<std::vector<Reply>> counts) mutable {
                if (!counts.is_ok()) return done(counts.status());
                std::vector<std::uint32_t> holding;
                for (std::uint32_t shard = 0; shard < counts.value().size(); ++shard) {
                  const Reply& count = counts.value()[shard];
                  if (count.elements.size() > 1 && count.elements[1].integer > 0)
                    holding.push_back(shard);
                }
                if (holding.empty()) return done(std::size_t{0});
                on_shards(core, state, std::move(holding), {"group", tube, group, "1"}, true,
                          [done = std::move(done)](Result<std::vector<Reply>> replies) {
                            if (!replies.is_ok()) return done(replies.status());
                            std::size_t deleted = 0;
                            for (const auto& reply : replies.value()) {
                              if (reply.elements.size() > 1) {
                                deleted += static_cast<std::size_t>(reply.elements[1].integer);
                              }
                            }
                            done(deleted);
                          });
              });
}

void RedisSession::note_attempt(JobId id, int status, std::string error, Callback<JobView> done) {
  // The attempt's outcome joins what the job keeps (its URL and content type stay).
  job_call(shard_of_id(id, core_->shards), {"peek", std::to_string(id), "", ""}, false,
           [core = core_, state = state_, id, status, error = std::move(error),
            done = std::move(done)](Result<broker::Job> job) mutable {
             if (!job.is_ok()) return done(job.status());
             Delivery delivery = std::move(job.value().delivery);
             delivery.last_status = status;
             delivery.last_error = std::move(error);
             delivery.last_attempt_unix_ms = core->clock->now_unix_ms();
             core->call(
                 shard_of_id(id, core->shards),
                 {"note", state->holder, std::to_string(id), store::encode_delivery(delivery)},
                 true, [state, done = std::move(done)](Result<Reply> reply) {
                   if (!state->alive) return;
                   if (!reply.is_ok()) return done(reply.status());
                   if (Status s = status_of(reply.value()); !s.is_ok()) return done(s);
                   auto noted = job_of(reply.value());
                   if (!noted.is_ok()) return done(noted.status());
                   done(std::move(noted.value().view));
                 });
           });
}

}  // namespace delayq::broker::redis
