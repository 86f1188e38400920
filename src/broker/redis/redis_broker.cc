#include "broker/redis/redis_broker.h"

#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <charconv>
#include <cmath>
#include <list>
#include <map>
#include <numeric>
#include <random>
#include <set>
#include <sstream>
#include <thread>
#include <tuple>
#include <unordered_map>

#include "base/names.h"
#include "broker/put_rules.h"
#include "broker/redis/jobs_lua.h"
#include "broker/redis/layout.h"
#include "redis/slot.h"
#include "store/record.h"

namespace delayq::redis_broker {
namespace asio = boost::asio;
using broker::Callback;
using redis::Command;
using redis::Reply;
using redis::ReplyType;
using SteadyClock = std::chrono::steady_clock;

namespace {

std::int64_t to_int(std::string_view text, std::int64_t fallback = 0) {
  std::int64_t value = fallback;
  std::from_chars(text.data(), text.data() + text.size(), value);
  return value;
}

// The replicas that INFO replication shows online and acknowledging ("slaveK:...,state=online,
// offset=...,lag=N": seconds since its last acknowledgement, sent every second): a paused or
// unreachable replica stays online for Redis's repl-timeout (60 s), but its lag grows.
int replicas_acknowledging(const std::string& info) {
  int count = 0;
  std::istringstream lines(info);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("slave", 0) != 0 || line.find("state=online") == std::string::npos) continue;
    const auto lag = line.find("lag=");
    if (lag != std::string::npos && to_int(line.substr(lag + 4)) <= 2) ++count;
  }
  return count;
}

// A time from jobs.lua: milliseconds, with their microseconds as a fraction.
double to_ms(std::string_view text, double fallback) {
  double value = fallback;
  std::from_chars(text.data(), text.data() + text.size(), value);
  return value;
}

std::int64_t unix_ms_now() {
  return std::chrono::duration_cast<Millis>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// Redis over its maxmemory refuses writes (under noeviction) with an error reply starting "OOM".
bool is_out_of_memory(const std::string& error) {
  return error.starts_with("OOM ");
}

// An error reply: out of memory is kNoSpace, as a full disk is for the local broker; anything
// else an error of the store.
Status error_status(const std::string& error) {
  if (is_out_of_memory(error)) return {Code::kNoSpace, "Redis is out of memory: " + error};
  return {Code::kIOError, "Redis: " + error};
}

// jobs.lua answers {<the op's reply>, <readied>}; an error of the call itself is not wrapped.
struct Answer {
  Reply reply;
  Reply readied;  // {tube, head} for each tube whose best ready job the call made better
};
Answer split_answer(Reply wrapped) {
  Answer answer;
  if (wrapped.type == ReplyType::kArray && wrapped.elements.size() == 2) {
    answer.reply = std::move(wrapped.elements[0]);
    answer.readied = std::move(wrapped.elements[1]);
  } else {
    answer.reply = std::move(wrapped);
  }
  return answer;
}

// A script's reply: {'ok', ...} or {'<error>', message}.
Status status_of(const Reply& reply) {
  if (reply.type != ReplyType::kArray || reply.elements.empty()) {
    return {Code::kIOError, "Redis answered " + redis::describe(reply)};
  }
  const std::string& code = reply.elements[0].str;
  if (code == "ok" || code == "exists") return Status::ok();
  const std::string message = reply.elements.size() > 1 ? reply.elements[1].str : code;
  if (code == "notfound") return {Code::kNotFound, message};
  if (code == "conflict") return {Code::kConflict, message};
  return {Code::kIOError, code + ": " + message};
}

// {'ok', id, record, attachment, now} -> a job.
Result<broker::Job> job_of(const Reply& reply) {
  if (reply.elements.size() < 5) return Status(Code::kIOError, "short job reply");
  const auto id = static_cast<JobId>(to_int(reply.elements[1].str));
  auto record = decode_record(id, reply.elements[2].str);
  if (!record.is_ok()) return record.status();
  broker::Job job{std::move(record.value().view),
                  std::move(record.value().body),
                  to_int(reply.elements[4].str),
                  {}};
  if (reply.elements[3].type == ReplyType::kString) {
    auto delivery = store::decode_delivery(id, reply.elements[3].str);
    if (!delivery.is_ok()) return delivery.status();
    job.delivery = std::move(delivery).value();
  }
  return job;
}

struct Pause {
  std::int64_t until_unix_ms = 0;
  std::int64_t seconds = 0;
  std::uint64_t count = 0;
};

}  // namespace

// What a session's reserves need of it: who it is in Redis, and the jobs it holds with their
// TTR deadlines (for DEADLINE_SOON), kept by the session as replies come.
struct SessionState {
  std::string holder;  // "<node>/<n>", or "*/<name>" shared by the sessions of that name
  bool alive = true;
  struct Held {
    SteadyClock::time_point deadline;
    std::uint32_t reserves = 0;
  };
  std::map<JobId, Held> held;
  // This session's puts, numbered as made (1, 2, ...); those Redis has not answered yet; and
  // what waits until every put up to a number has been answered (HTTP shares one session among
  // all requests: a reserve waits only for the puts made before it, never for later ones).
  std::uint64_t puts_made = 0;
  std::set<std::uint64_t> puts_open;
  std::vector<std::pair<std::uint64_t, std::function<void()>>> after_puts;
  [[nodiscard]] bool puts_open_up_to(std::uint64_t mark) const {
    return !puts_open.empty() && *puts_open.begin() <= mark;
  }
  std::uint64_t put_made() {
    puts_open.insert(++puts_made);
    return puts_made;
  }
  void put_done(std::uint64_t number) {
    puts_open.erase(number);
    std::vector<std::function<void()>> ready;
    std::erase_if(after_puts, [&](auto& entry) {
      if (puts_open_up_to(entry.first)) return false;
      ready.push_back(std::move(entry.second));
      return true;
    });
    for (auto& action : ready) action();
  }

  // When the first held job enters its last second (nullopt: none will).
  [[nodiscard]] std::optional<SteadyClock::time_point> soon_at() const {
    std::optional<SteadyClock::time_point> first;
    const auto now = SteadyClock::now();
    for (const auto& [id, job] : held) {
      if (job.deadline <= now) continue;  // lapsed: no longer held
      const auto at = job.deadline - std::chrono::seconds(1);
      if (!first || at < *first) first = at;
    }
    return first;
  }
  [[nodiscard]] bool deadline_soon() const {
    const auto at = soon_at();
    return at && *at <= SteadyClock::now();
  }
  void hold(const broker::Job& job) {
    const auto now = SteadyClock::now();
    // Jobs whose TTR lapsed are held no more (their worker may never say a word about them).
    std::erase_if(held, [now](const auto& entry) { return entry.second.deadline <= now; });
    const auto left = std::max<std::int64_t>(0, job.view.deadline_unix_ms - job.as_of_unix_ms);
    held[job.view.id] = {now + Millis{left}, job.view.counters.reserves};
  }
};

// A reserve waiting, or trying shards.
struct Waiter {
  std::shared_ptr<SessionState> session;
  std::uint64_t ticket = 0;
  std::vector<std::string> tubes;
  bool watch_list = false;
  std::optional<SteadyClock::time_point> deadline;
  Callback<broker::Job> done;
  std::unique_ptr<asio::steady_timer> timer;
  // At the deadline and a grace after it (keep_deadline()): answers TIMED_OUT even with calls
  // still under way, which only an unreachable Redis keeps that long.
  std::unique_ptr<asio::steady_timer> late;
  void stop_timers() {
    if (timer) timer->cancel();
    if (late) late->cancel();
  }
  bool trying = false;
  bool again = false;        // a shard became worth trying while it tried
  bool probed = false;       // this try asked the shards whose heads were unknown
  std::uint32_t misses = 0;  // shards this try found with no job as good as the node thought
  bool rescanned = false;    // let in every message sent before answering DEADLINE_SOON or
                             // TIMED_OUT (give_up())
  bool finished = false;
  bool handed = false;  // carried by a firing or put under way: still waiting, as clients see
  std::uint64_t puts_before = 0;  // the session's puts made before this reserve (SessionState)
};

// A tube's best ready job in each shard, as the node knows it (a reserve tries the shard with
// the best first): set by the shards' answers and by messages. A generation per shard tells an
// answer whether a message came while it was on its way (after_answer()). `trying` counts the
// reserves of the tube under way in each shard: a message while one is wakes nobody more (its
// answer says what the shard has left).
struct Hint {
  std::vector<Head> heads;
  std::vector<std::uint32_t> generation;
  std::vector<std::uint32_t> trying;
  // How many ready jobs the shard's last answer said it held, up to 8 (0: not said): so many
  // reserves may go there at once (attempt()).
  std::vector<std::uint32_t> depth;
};

struct Owned {
  std::int64_t epoch = 0;
  std::unique_ptr<asio::steady_timer> timer;
  bool firing = false;
  bool again = false;
  // The last firing's answer was lost: the next hands no waiter a job (one it may have
  // reserved for them is theirs until its TTR lapses, and must not happen over and over).
  bool failed = false;
};

struct TubeUse {
  std::uint64_t using_clients = 0;
  std::uint64_t watching = 0;
};

struct RedisBroker::Core : std::enable_shared_from_this<RedisBroker::Core> {
  Core(asio::io_context& io_in, RedisBrokerOptions options_in)
      : io(io_in),
        options(std::move(options_in)),
        client(io.get_executor(), options.client),
        script(std::string(kJobsLua)),
        names(options.prefix),
        lease_timer(io),
        resync_timer(io),
        conf_timer(io),
        started(SteadyClock::now()) {}

  // --- calls: jobs.lua on a shard (write: wait for a replica, as the options say)
  void call(std::uint32_t shard, std::vector<std::string> args, bool write,
            std::function<void(Result<Reply>)> done);
  std::uint32_t next_shard() { return static_cast<std::uint32_t>(rotor++ % shards); }
  // The calls the node makes for itself in bursts of one a shard (lease renewals every lease/3;
  // every 5 s, the overdue gauge's look and the look for lost messages), sent a few at a time
  // (kTrickle every kTrickleGap, more when there are more than kTrickleSteps times that, so that
  // a burst is sent within kTrickleSteps gaps), so that a burst never stands in a primary's
  // queue in front of the calls clients wait for (firings, reserves, deletes), which share its
  // connections. By time, not by answers: a primary that stops answering holds up no other's.
  static constexpr std::size_t kTrickle = 8;
  static constexpr std::size_t kTrickleSteps = 64;
  static constexpr std::chrono::milliseconds kTrickleGap{2};
  void trickle(std::vector<std::function<void()>> sends) {
    const std::size_t each = std::max(kTrickle, (sends.size() + kTrickleSteps - 1) / kTrickleSteps);
    trickle_from(std::make_shared<std::vector<std::function<void()>>>(std::move(sends)), 0, each);
  }
  void trickle_from(const std::shared_ptr<std::vector<std::function<void()>>>& sends,
                    std::size_t from, std::size_t each);

  // --- puts: those made in one turn of the executor go together, one call per shard
  // (putmany), which spares Redis a script call per job. Keyless, groupless puts of a turn all
  // go to one shard (the next in turn) so that they can. Any other call sends what is gathered
  // first, so that a session's calls still take effect in the order made.
  struct PendingPut {
    std::vector<std::string> args;  // the 9 of a job in jobs.lua's put
    std::function<void(Result<Reply>)> done;
  };
  void queue_put(std::uint32_t shard, std::vector<std::string> args,
                 std::function<void(Result<Reply>)> done);
  void flush_puts();
  std::uint32_t burst_shard();
  std::map<std::uint32_t, std::vector<PendingPut>> pending_puts;
  std::optional<std::uint32_t> burst;
  bool flush_posted = false;

  // Whether the primary of `slot` has a replica in sync, as INFO replication last said (CLUSTER
  // SLOTS leaves out replicas that have not replicated a byte yet, so it cannot tell).
  [[nodiscard]] bool replicated(std::uint16_t slot) const;
  void check_replicas(std::function<void()> done);

  // --- waking reserves
  Hint& hint(const std::string& tube);
  void notify_ready(std::uint32_t shard, const std::string& tube, const Head& head);
  void notify_readied(std::uint32_t shard, const Reply& readied);
  void learn(std::uint32_t shard, const std::vector<std::string>& tubes,
             const std::vector<std::uint32_t>& generations, const std::vector<Reply>& answer,
             std::size_t at);
  // Every shard's best of the tube unknown; an answer on its way must not undo that.
  void forget_heads(Hint& h) {
    for (std::uint32_t shard = 0; shard < shards; ++shard) forget_head(h, shard);
  }
  static void forget_head(Hint& h, std::uint32_t shard) {
    h.heads[shard] = Head{};
    ++h.generation[shard];
  }
  // A reserve of the tubes ended without its answer (an error, or its waiter went away): a
  // message it held back (notify_ready) goes to another waiter.
  void pass_on(const std::vector<std::string>& tubes);
  // `untaken`: leaving out the tubes another reserve here is trying in the shard; with `deep`,
  // only those that as many are trying as the shard last said it held ready jobs of.
  [[nodiscard]] static Head best_of(const std::vector<const Hint*>& tubes, std::uint32_t shard,
                                    bool untaken = false, bool deep = false);
  void wake(const std::string& tube, std::size_t count);
  void pump();
  void try_reserve(const std::shared_ptr<Waiter>& waiter);
  void attempt(const std::shared_ptr<Waiter>& waiter);
  // Tries again the waiters that waited for a reserve call to the shard to answer.
  void resume_deferred(std::uint32_t shard);
  void finish(const std::shared_ptr<Waiter>& waiter, Result<broker::Job> result);
  void give_up(const std::shared_ptr<Waiter>& waiter);
  void keep_deadline(const std::shared_ptr<Waiter>& waiter);
  void probe_shards(std::vector<std::string> tubes, std::vector<std::uint32_t> which,
                    std::function<void(bool)> done, bool trickled = false);
  // `trickled`: a round of the node's own (resync()), whose calls go a few at a time.
  void send_probes(const std::string& key, std::vector<std::string> tubes,
                   std::vector<std::uint32_t> which, std::vector<std::function<void(bool)>> dones,
                   bool trickled = false);
  struct ProbeRound {
    std::string key;
    std::vector<std::string> tubes;
    std::vector<std::uint32_t> which;
    std::size_t left = 0;
    bool found = false;
    std::vector<std::function<void(bool)>> dones;
  };
  // One shard's probe call of a round, and what its answer teaches.
  void probe_one(const std::shared_ptr<ProbeRound>& round, std::uint32_t shard);
  [[nodiscard]] std::vector<std::string> open_tubes(const Waiter& waiter) const;
  [[nodiscard]] std::vector<std::uint32_t> every_shard_number() const {
    std::vector<std::uint32_t> all(shards);
    std::iota(all.begin(), all.end(), 0u);
    return all;
  }
  void arm(const std::shared_ptr<Waiter>& waiter);
  [[nodiscard]] bool paused(const std::string& tube) const;

  // --- firing and leases
  void lease_tick();
  void heartbeat(bool over_memory);
  void acquire(std::vector<std::uint32_t> candidates, std::size_t index, std::size_t want);
  void fire(std::uint32_t shard);
  // The reserves a firing or a put may hand jobs to (fire(), flush_puts()), marked as trying.
  std::vector<std::shared_ptr<Waiter>> handed_to_call(std::vector<std::string>& args,
                                                      const std::set<std::string>* only = nullptr);
  // After that call: each waiter gets its job (`served`, a job reply or nil), or goes on.
  void after_handing(const std::vector<std::shared_ptr<Waiter>>& handed, const Reply* served);
  void arm_fire(std::uint32_t shard, std::chrono::microseconds delay);
  void on_event(const std::string& payload);
  void resync();
  // A tube's webhook is delivered by one node: the owner of the shard its name hashes to, so
  // that the webhook's rate and concurrency hold for the whole cluster. Its deliveries move
  // with that shard's lease.
  [[nodiscard]] std::uint32_t delivery_shard(const std::string& tube) const {
    return shard_of_name(tube, "", shards);
  }
  // A lease was taken or lost: the deliverer hears of it if a webhook's deliveries move.
  void ownership_changed(std::uint32_t shard);

  // --- tube configuration
  void load_conf(std::function<void(Status)> done);
  void publish_conf();
  void watch_pauses();

  asio::io_context& io;
  RedisBrokerOptions options;
  redis::Client client;
  redis::Script script;
  Names names;
  std::uint32_t shards = 0;
  std::string node;
  std::string subscribe_refused;  // the SSUBSCRIBE error last logged (resync())
  // When a job message last came on the node-wide channel: only nodes of an older version,
  // from before the shard channels, send them there (give_up() then trusts no channel).
  std::optional<SteadyClock::time_point> older_node_heard;
  std::uint64_t sessions = 0;
  std::uint64_t rotor = 0;
  bool draining = false;
  bool closed = false;
  broker::Metrics metrics;

  std::map<std::string, Webhook> webhook_map;
  std::map<std::string, Pause> pauses;
  std::set<std::string> ever_paused;  // every tube pauses has named
  std::map<std::string, std::uint32_t> max_attempts;
  std::function<void()> webhooks_handler;
  std::map<std::string, TubeUse> uses;

  std::unordered_map<std::string, Hint> hints;
  std::list<std::shared_ptr<Waiter>> waiters;
  // Waiters (still trying) waiting for a reserve call of another to a shard to answer
  // (attempt()): shard -> waiters.
  std::unordered_map<std::uint32_t, std::vector<std::shared_ptr<Waiter>>> deferred;
  // Probe rounds under way, by what they ask (the tubes and shards): who waits for the next.
  std::unordered_map<std::string, std::vector<std::function<void(bool)>>> probing;

  std::map<std::uint32_t, Owned> owned;
  std::set<std::string> live;                                   // as of the last heartbeat
  SteadyClock::time_point last_heartbeat = SteadyClock::now();  // the last one answered
  bool out_of_memory = false;  // the last heartbeat was refused: Redis is over its maxmemory
  std::map<std::string, int> replicas;  // primary -> replicas online
  // primary -> until when writes do not WAIT for its replica (one did not answer in time)
  std::map<std::string, SteadyClock::time_point> no_wait_until;
  asio::steady_timer replica_timer{io};
  // How many of this node's reserves wait, as last told to Redis (names.waiting), and whether a
  // report is due: reported 10 ms after a change, so that bursts cost one write.
  std::size_t reported_waiting = 0;
  bool report_due = false;
  asio::steady_timer report_timer{io};
  void report_waiting();
  [[nodiscard]] std::size_t waiting_here() const;
  bool leasing = false;    // a lease_tick's calls are under way
  bool resigned = false;   // closing: leases handed back, none renewed or taken again
  bool announced = false;  // told the others this node joined (they rebalance at once)
  asio::steady_timer lease_timer;
  asio::steady_timer resync_timer;
  asio::steady_timer conf_timer;  // at the end of the first pause to end
  SteadyClock::time_point started;
};

using Core = RedisBroker::Core;

// --- calls

void Core::call(std::uint32_t shard, std::vector<std::string> args, bool write,
                std::function<void(Result<Reply>)> done) {
  if (!pending_puts.empty()) flush_puts();
  const std::vector<std::string> keys = shard_keys(names.prefix, shard);
  const auto slot = redis::key_slot(keys.front());
  std::vector<std::string_view> key_views(keys.begin(), keys.end());
  std::vector<std::string_view> views(args.begin(), args.end());
  views.push_back(node);  // jobs.lua's run() takes the caller last
  redis::Request request;
  request.slot = slot;
  // Only puts make Redis hold more; every other call frees memory or keeps it level, and runs
  // while Redis is over its maxmemory, so that workers can drain it and jobs still fire.
  const bool grows = args.front() == "put" || args.front() == "putmany";
  request.commands.push_back(script.call(key_views, views, !grows));
  request.script = &script;
  const bool wait = write && options.wait_for_replica && replicated(slot);
  if (wait) {
    // On a connection of their own (the client's), so that a replica that stops answering
    // holds up only the calls that wait for it, not reserves, firings and leases.
    request.replicas = 1;
    request.replica_timeout = options.wait_timeout;
  }
  client.run(std::move(request), [self = shared_from_this(), shard, slot,
                                  done = std::move(done)](Result<std::vector<Reply>> replies) {
    if (self->closed) return;
    // A WAIT that saw no replica: no WAIT to that primary for the next 5 s (then one tries
    // again), or every write behind it would wait out its second too.
    if (replies.is_ok() && replies.value().size() > 1 &&
        replies.value()[1].type == ReplyType::kInteger && replies.value()[1].integer == 0) {
      self->no_wait_until[self->client.primary_of(slot)] = SteadyClock::now() + Millis{5000};
    }
    if (!replies.is_ok()) {
      // The call may have run without its answer coming back: what it made ready here, this
      // node will not hear (it skips its own messages). Every tube's best in the shard is
      // unknown: the next reserve asks, and waiting ones at the next look (resync).
      for (auto& [tube, h] : self->hints) forget_head(h, shard);
      // Redis could not be reached in time, or a connection broke: an error of the store, not a
      // reserve's timeout.
      return done(Status(Code::kIOError, "Redis: " + replies.status().message()));
    }
    Answer answer = split_answer(std::move(replies.value().front()));
    if (answer.reply.is_error()) return done(error_status(answer.reply.str));
    // The tubes whose best ready job the call made better: this node's waiting reserves learn
    // of it now, not from the message (which it skips).
    self->notify_readied(shard, answer.readied);
    done(std::move(answer.reply));
  });
}

void Core::trickle_from(const std::shared_ptr<std::vector<std::function<void()>>>& sends,
                        std::size_t from, std::size_t each) {
  if (closed) return;
  const std::size_t to = std::min(from + each, sends->size());
  for (std::size_t i = from; i < to; ++i) (*sends)[i]();
  if (to == sends->size()) return;
  auto timer = std::make_shared<asio::steady_timer>(io, kTrickleGap);
  timer->async_wait(
      [self = shared_from_this(), sends, to, each, timer](const boost::system::error_code& error) {
        if (!error) self->trickle_from(sends, to, each);
      });
}

std::uint32_t Core::burst_shard() {
  if (!burst) burst = next_shard();
  return *burst;
}

void Core::queue_put(std::uint32_t shard, std::vector<std::string> args,
                     std::function<void(Result<Reply>)> done) {
  pending_puts[shard].push_back({std::move(args), std::move(done)});
  if (flush_posted) return;
  flush_posted = true;
  asio::post(io, [self = shared_from_this()] {
    self->flush_posted = false;
    if (!self->pending_puts.empty()) self->flush_puts();
  });
}

void Core::flush_puts() {
  constexpr std::size_t kMostPerCall = 100;  // bounds how long one script holds its shard
  auto all = std::move(pending_puts);
  pending_puts.clear();
  burst.reset();
  for (auto& [shard, puts] : all) {
    for (std::size_t from = 0; from < puts.size(); from += kMostPerCall) {
      const std::size_t count = std::min(kMostPerCall, puts.size() - from);
      // The reserves waiting here for the tubes of the jobs put ready (no delay) are served by
      // the call itself, as a firing's are: no second call between the put and the worker.
      std::set<std::string> ready_tubes;
      for (std::size_t i = from; i < from + count; ++i) {
        const auto& job = puts[i].args;  // tube pri delay_or_at absolute ...
        if (job[2] == "0" && job[3] == "0") ready_tubes.insert(job[0]);
      }
      std::vector<std::string> waiting;
      const auto handed = ready_tubes.empty() ? std::vector<std::shared_ptr<Waiter>>{}
                                              : handed_to_call(waiting, &ready_tubes);
      if (count == 1) {
        std::vector<std::string> args = {"put", std::to_string(shards), std::to_string(shard)};
        args.insert(args.end(), puts[from].args.begin(), puts[from].args.end());
        args.insert(args.end(), waiting.begin(), waiting.end());
        call(shard, std::move(args), true,
             [self = shared_from_this(), handed,
              done = std::move(puts[from].done)](Result<Reply> reply) {
               // {ok, id, due, replaced, now, served}
               const Reply* served = reply.is_ok() && reply.value().elements.size() > 5
                                         ? &reply.value().elements[5]
                                         : nullptr;
               self->after_handing(handed, served);
               done(std::move(reply));
             });
        continue;
      }
      std::vector<std::string> args = {"putmany", std::to_string(shards), std::to_string(shard),
                                       std::to_string(count)};
      auto dones = std::make_shared<std::vector<std::function<void(Result<Reply>)>>>();
      for (std::size_t i = from; i < from + count; ++i) {
        args.insert(args.end(), puts[i].args.begin(), puts[i].args.end());
        dones->push_back(std::move(puts[i].done));
      }
      args.insert(args.end(), waiting.begin(), waiting.end());
      call(shard, std::move(args), true,
           [self = shared_from_this(), handed, dones](Result<Reply> reply) {
             if (!reply.is_ok() || reply.value().elements.size() != dones->size() + 3) {
               const Status failed =
                   reply.is_ok() ? Status(Code::kIOError, "Redis: a putmany reply of " +
                                                              redis::describe(reply.value()))
                                 : reply.status();
               self->after_handing(handed, nullptr);
               for (auto& done : *dones) done(failed);
               return;
             }
             // {ok, now, <a put's reply>..., served}: each put that went in gets the present
             // as a single put's reply has it.
             auto& elements = reply.value().elements;
             self->after_handing(handed, &elements.back());
             for (std::size_t i = 0; i < dones->size(); ++i) {
               Reply& one = elements[i + 2];
               if (!one.elements.empty() && one.elements[0].str == "ok") {
                 one.elements.push_back(elements[1]);
               }
               (*dones)[i](std::move(one));
             }
           });
    }
  }
}

bool Core::replicated(std::uint16_t slot) const {
  const std::string primary = client.primary_of(slot);
  const auto it = replicas.find(primary);
  if (it == replicas.end() || it->second == 0) return false;
  const auto off = no_wait_until.find(primary);
  return off == no_wait_until.end() || off->second <= SteadyClock::now();
}

// INFO replication on every primary, every 5 s: "connected_slaves:N" and each
// "slaveK:...,state=online,...".
void Core::check_replicas(std::function<void()> done) {
  const auto primaries = client.primaries();
  auto left = std::make_shared<std::size_t>(primaries.size());
  auto finished = std::make_shared<std::function<void()>>(std::move(done));
  auto self = shared_from_this();
  const auto again = [self] {
    self->replica_timer.expires_after(Millis{5000});
    self->replica_timer.async_wait([self](const boost::system::error_code& error) {
      if (!error && !self->closed) self->check_replicas(nullptr);
    });
  };
  if (primaries.empty()) {
    if (*finished) (*finished)();
    return again();
  }
  for (const auto& address : primaries) {
    client.run_at(address, Command{"INFO", "replication"},
                  [self, address = address, left, finished, again](Result<Reply> reply) {
                    if (self->closed) return;
                    int online = 0;
                    if (reply.is_ok()) online = replicas_acknowledging(reply.value().str);
                    self->replicas[address] = online;
                    if (--*left > 0) return;
                    if (*finished) (*finished)();
                    again();
                  });
  }
}

// --- waking reserves

Hint& Core::hint(const std::string& tube) {
  auto [it, inserted] = hints.try_emplace(tube);
  if (inserted) {
    it->second.heads.assign(shards, Head{});
    it->second.generation.assign(shards, 0);
    it->second.trying.assign(shards, 0);
    it->second.depth.assign(shards, 0);
  }
  return it->second;
}

// A tube's ready set in a shard gained a job better than its best (from a call's answer, or
// another node's message). One waiting reserve goes to see, not all of them: at a job at a
// time, every other would find nothing, a call each. A reserve that takes a job wakes two others
// if its shard holds more, one if any shard may (attempt()), so a burst reaches every waiter in
// a few rounds.
void Core::notify_ready(std::uint32_t shard, const std::string& tube, const Head& head) {
  if (shard >= shards) return;
  const auto it = hints.find(tube);
  // No reserve here has asked for the tube since its hint was dropped (resync()): the next one
  // finds every shard's best unknown and asks them.
  if (it == hints.end()) return;
  Hint& h = it->second;
  h.heads[shard] = after_message(h.heads[shard], head);
  ++h.generation[shard];
  if (h.trying[shard] == 0) wake(tube, 1);
}

// A call's answer lists the tubes whose best ready job in the shard it made better: {tube, head}.
void Core::notify_readied(std::uint32_t shard, const Reply& readied) {
  for (const auto& pair : readied.elements) {
    if (pair.elements.size() == 2) {
      notify_ready(shard, pair.elements[0].str, Head::parse(pair.elements[1].str));
    }
  }
}

// A shard's answer to a call made when the tubes' generations there were `generations`: at
// `at`, its heads of those tubes, in their order (as Head::parse() reads them), and after them
// how many ready jobs each has there (up to 8).
void Core::learn(std::uint32_t shard, const std::vector<std::string>& tubes,
                 const std::vector<std::uint32_t>& generations, const std::vector<Reply>& answer,
                 std::size_t at) {
  if (answer.size() <= at || answer[at].elements.size() != tubes.size()) return;
  const Reply& heads = answer[at];
  const Reply* depths = answer.size() > at + 1 && answer[at + 1].elements.size() == tubes.size()
                            ? &answer[at + 1]
                            : nullptr;
  for (std::size_t i = 0; i < tubes.size(); ++i) {
    Hint& h = hint(tubes[i]);
    h.heads[shard] = after_answer(h.heads[shard], Head::parse(heads.elements[i].str),
                                  h.generation[shard] != generations[i]);
    h.depth[shard] =
        depths == nullptr ? 0 : static_cast<std::uint32_t>(depths->elements[i].integer);
  }
}

void Core::pass_on(const std::vector<std::string>& tubes) {
  for (const auto& tube : tubes) {
    const Hint& h = hint(tube);
    if (std::any_of(h.heads.begin(), h.heads.end(),
                    [](const Head& head) { return head.kind != Head::Kind::kNone; })) {
      wake(tube, 1);
    }
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
    const Head& head = h->heads[shard];
    if (head.kind == Head::Kind::kUnknown) return head;
    if (head.known() && (!best.known() || head.before(best))) best = head;
  }
  return best;
}

std::vector<std::string> Core::open_tubes(const Waiter& waiter) const {
  std::vector<std::string> tubes;
  for (const auto& tube : waiter.tubes) {
    if (!paused(tube)) tubes.push_back(tube);
  }
  return tubes;
}

// Up to `count` reserves waiting on the tube try the shards that may hold jobs, the longest
// waiting first; with none waiting idle, those trying other shards look again when done.
void Core::wake(const std::string& tube, std::size_t count) {
  if (paused(tube)) return;
  // try_reserve may finish a waiter, which erases it: walk a copy.
  const std::vector<std::shared_ptr<Waiter>> now(waiters.begin(), waiters.end());
  for (const auto& waiter : now) {
    if (count == 0) break;
    if (waiter->finished ||
        std::find(waiter->tubes.begin(), waiter->tubes.end(), tube) == waiter->tubes.end()) {
      continue;
    }
    if (waiter->trying) {
      waiter->again = true;
      continue;
    }
    --count;
    try_reserve(waiter);
  }
}

bool Core::paused(const std::string& tube) const {
  const auto it = pauses.find(tube);
  return it != pauses.end() && it->second.until_unix_ms > unix_ms_now();
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
  std::size_t holding = 0;
  for (std::uint32_t shard = 0; shard < shards; ++shard) {
    const Head all = best_of(hinted, shard);
    if (all.kind == Head::Kind::kUnknown) unknown.push_back(shard);
    if (all.known()) ++holding;
  }
  for (std::uint32_t shard = 0; shard < shards && holding > 0; ++shard) {
    const Head all = best_of(hinted, shard);
    if (!all.known()) continue;
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
  if (!unknown.empty() && !waiter->probed) {
    waiter->probed = true;
    return probe_shards(tubes, std::move(unknown),
                        [self = shared_from_this(), waiter](bool) { self->attempt(waiter); });
  }
  if (!first && taken) {
    deferred[*taken].push_back(waiter);
    return;
  }
  // A shard whose head a probe could not learn is tried when no known one is left.
  if (!first && !unknown.empty()) first = unknown[next_shard() % unknown.size()];
  if (!first || waiter->misses > shards + 16) {
    waiter->trying = false;
    if (waiter->again) return try_reserve(waiter);
    return give_up(waiter);
  }
  const std::uint32_t shard = *first;
  std::vector<std::string> args = {"reserve", waiter->session->holder,
                                   second.known() ? second.text() : ""};
  std::vector<std::uint32_t> generations;
  for (const auto& tube : tubes) {
    generations.push_back(hint(tube).generation[shard]);
    ++hint(tube).trying[shard];
  }
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
           self->finish(waiter, reply.status());
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
           if (h.heads[shard].known()) {
             self->wake(tube, 2);
           } else if (std::any_of(h.heads.begin(), h.heads.end(), [](const Head& head) {
                        return head.kind != Head::Kind::kNone;
                      })) {
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
  report_timer.expires_after(Millis{10});
  report_timer.async_wait([self = shared_from_this()](const boost::system::error_code& error) {
    self->report_due = false;
    if (error || self->closed) return;
    const std::size_t now = self->waiting_here();
    if (now == self->reported_waiting) return;
    self->reported_waiting = now;
    self->client.run(redis::key_slot(self->names.waiting),
                     Command{"HSET", self->names.waiting, self->node, std::to_string(now)},
                     [](Result<Reply>) {});
  });
}

void Core::give_up(const std::shared_ptr<Waiter>& waiter) {
  const bool soon = waiter->watch_list && waiter->session->deadline_soon();
  const bool expired = waiter->deadline && *waiter->deadline <= SteadyClock::now();
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
    return client.sync_shards([self = shared_from_this(), waiter](std::vector<bool> held) {
      // A node of an older version heard from in the last minute publishes on the node-wide
      // channel, over the cluster bus, which the PINGs do not wait for: every shard is asked.
      const bool older = self->older_node_heard &&
                         SteadyClock::now() - *self->older_node_heard < std::chrono::minutes(1);
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
// with whether any holds one. One round at a time asks the same question: a caller that comes
// while one is under way waits for the next, sent when it ends (not for the one under way, which
// was sent before the caller came and might not see a job put just before). So a thousand
// reserves waiting on a tube cost one round, not a thousand, when every shard must be asked
// (reserves of a tube the node knows nothing of yet, a resync's look), and while Redis is out of
// reach each round's calls retry until their deadline.
void Core::probe_shards(std::vector<std::string> tubes, std::vector<std::uint32_t> which,
                        std::function<void(bool)> done, bool trickled) {
  if (which.empty() || tubes.empty()) return done(false);
  std::string key;
  for (const auto& tube : tubes) key += tube + '\0';
  key += '|';
  for (const std::uint32_t shard : which) key += std::to_string(shard) + ',';
  if (const auto under_way = probing.find(key); under_way != probing.end()) {
    under_way->second.push_back(std::move(done));
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
  std::vector<std::function<void()>> sends;
  for (const std::uint32_t shard : round->which) {
    sends.emplace_back(
        [self = shared_from_this(), round, shard] { self->probe_one(round, shard); });
  }
  if (trickled) return trickle(std::move(sends));
  for (auto& send : sends) send();
}

void Core::probe_one(const std::shared_ptr<ProbeRound>& round, std::uint32_t shard) {
  std::vector<std::string> args = {"probe"};
  args.insert(args.end(), round->tubes.begin(), round->tubes.end());
  // The generations as the call leaves (a trickled one leaves after the round began).
  std::vector<std::uint32_t> generations;
  for (const auto& tube : round->tubes) generations.push_back(hint(tube).generation[shard]);
  call(shard, std::move(args), false,
       [self = shared_from_this(), round, shard,
        generations = std::move(generations)](Result<Reply> reply) {
         if (reply.is_ok())
           self->learn(shard, round->tubes, generations, reply.value().elements, 1);
         for (const auto& tube : round->tubes) {
           if (self->hint(tube).heads[shard].kind != Head::Kind::kNone) round->found = true;
         }
         if (--round->left > 0) return;
         // The callers that came meanwhile, and those that ask again from this round's
         // answers (still counted as waiting, so they join), go in the next round, sent after
         // all of them came.
         auto& waiting = self->probing[round->key];
         auto next = std::exchange(waiting, {});
         for (auto& done : round->dones) done(round->found);
         auto& again = self->probing[round->key];
         next.insert(next.end(), std::make_move_iterator(again.begin()),
                     std::make_move_iterator(again.end()));
         self->probing.erase(round->key);
         if (!next.empty() && !self->closed) {
           self->send_probes(round->key, round->tubes, round->which, std::move(next));
         }
       });
}

void Core::arm(const std::shared_ptr<Waiter>& waiter) {
  std::optional<SteadyClock::time_point> at = waiter->deadline;
  if (waiter->watch_list) {
    if (const auto soon = waiter->session->soon_at(); soon && (!at || *soon < *at)) at = soon;
  }
  if (!at) return;
  if (!waiter->timer) waiter->timer = std::make_unique<asio::steady_timer>(io);
  waiter->timer->expires_at(*at);
  waiter->timer->async_wait(
      [self = shared_from_this(), waiter](const boost::system::error_code& error) {
        if (error || waiter->finished || waiter->trying) return;
        self->give_up(waiter);
      });
}

// A reserve's timeout is kept when Redis is out of reach: its calls (a try, a probe, the PINGs
// before TIMED_OUT, the puts its connection made before it) retry for the client's request
// timeout (10 s), so a grace after the deadline, it answers TIMED_OUT without them. A job one of
// them reserves after all is released at once (finish()).
void Core::keep_deadline(const std::shared_ptr<Waiter>& waiter) {
  constexpr Millis kGrace{1000};
  if (!waiter->deadline) return;
  if (!waiter->late) waiter->late = std::make_unique<asio::steady_timer>(io);
  waiter->late->expires_at(*waiter->deadline + kGrace);
  waiter->late->async_wait(
      [self = shared_from_this(), waiter](const boost::system::error_code& error) {
        if (error || waiter->finished) return;
        self->finish(waiter, Status(Code::kTimedOut, "no job became ready in time"));
      });
}

void Core::finish(const std::shared_ptr<Waiter>& waiter, Result<broker::Job> result) {
  if (waiter->finished) {
    // Cancelled while a script reserved a job for it: the reservation, which nobody got, is
    // undone at once (uncounted: no attempt of the job was used).
    if (result.is_ok()) {
      const JobId id = result.value().view.id;
      call(shard_of_id(id, shards),
           {"release", waiter->session->holder, std::to_string(id), "", "",
            std::to_string(result.value().view.counters.reserves), "1"},
           true, [](Result<Reply>) {});
    }
    return;
  }
  waiter->finished = true;
  waiter->stop_timers();
  waiters.remove(waiter);
  report_waiting();
  if (result.is_ok()) waiter->session->hold(result.value());
  auto done = std::move(waiter->done);
  if (waiter->session->alive) done(std::move(result));
}

// --- firing and leases

void Core::lease_tick() {
  if (closed || resigned || leasing) return;
  leasing = true;
  lease_timer.cancel();
  heartbeat(false);
}

// The heartbeat, then the leases. Sent first as a call Redis refuses while over its maxmemory,
// which is how the node learns that it is (puts then get OUT_OF_MEMORY, and /readyz says so),
// and then again as one it runs anyway, so that the node stays alive and keeps its leases.
void Core::heartbeat(bool over_memory) {
  // A script request (not a bare command): a node lacking the library gets it and the
  // heartbeat is sent again, rather than failing until the next tick.
  redis::Request request;
  request.slot = redis::key_slot(names.nodes);
  request.commands.push_back(
      script.call({names.nodes}, {"heartbeat", node, std::to_string(options.lease.count()), node},
                  over_memory));
  request.script = &script;
  client.run(std::move(request), [self = shared_from_this(),
                                  over_memory](Result<std::vector<Reply>> replies) {
    if (self->closed || self->resigned) return;
    Result<Reply> reply =
        replies.is_ok() ? Result<Reply>(split_answer(std::move(replies.value().front())).reply)
                        : Result<Reply>(replies.status());
    if (!over_memory) {
      self->out_of_memory =
          reply.is_ok() && reply.value().is_error() && is_out_of_memory(reply.value().str);
      if (self->out_of_memory) return self->heartbeat(true);
    }
    self->leasing = false;
    if (reply.is_ok() && status_of(reply.value()).is_ok() && reply.value().elements.size() > 1) {
      self->last_heartbeat = SteadyClock::now();
      self->live.clear();
      for (const auto& name : reply.value().elements[1].elements) {
        self->live.insert(name.str);
      }
      if (!self->announced) {
        self->announced = true;
        self->client.run(redis::key_slot(self->names.events),
                         Command{"PUBLISH", self->names.events, "l"}, [](Result<Reply>) {});
      }
    }
    const std::size_t alive = std::max<std::size_t>(1, self->live.size());
    const std::size_t share = (self->shards + alive - 1) / alive;
    // Renew what is held; a lease lost (fenced) stops its firing. No WAIT: a renewal that a
    // failover loses only ends the lease sooner (another node takes it, and fencing stops this
    // one), and one held up behind a replica that stopped answering would lose it here.
    std::vector<std::function<void()>> renewals;
    for (const auto& [shard, own] : self->owned) {
      renewals.emplace_back([self, shard = shard, epoch = own.epoch] {
        const auto mine = self->owned.find(shard);
        if (self->resigned || mine == self->owned.end() || mine->second.epoch != epoch) return;
        self->call(shard,
                   {"renew", self->node, std::to_string(self->options.lease.count()),
                    std::to_string(epoch)},
                   false, [self, shard, epoch](Result<Reply> renewed) {
                     const auto held = self->owned.find(shard);
                     if (renewed.is_ok() && renewed.value().type == ReplyType::kArray &&
                         !renewed.value().elements.empty() &&
                         renewed.value().elements[0].str == "fenced" && held != self->owned.end() &&
                         held->second.epoch == epoch) {
                       spdlog::warn("shard {}: lease lost", shard);
                       self->owned.erase(held);
                       self->ownership_changed(shard);
                     }
                   });
      });
    }
    self->trickle(std::move(renewals));
    if (self->owned.size() > share) {
      // Hand the surplus back, so that a node that joined gets its share.
      std::size_t surplus = self->owned.size() - share;
      while (surplus-- > 0) {
        auto last = std::prev(self->owned.end());
        const std::uint32_t shard = last->first;
        self->call(shard, {"resign", self->node}, false, [](Result<Reply>) {});
        self->owned.erase(last);
        self->ownership_changed(shard);
      }
      // The others take them now rather than at their next renewal.
      self->client.run(redis::key_slot(self->names.events),
                       Command{"PUBLISH", self->names.events, "l"}, [](Result<Reply>) {});
    } else if (self->owned.size() < share) {
      std::vector<std::uint32_t> candidates;
      const auto offset =
          static_cast<std::uint32_t>(std::hash<std::string>{}(self->node) % self->shards);
      for (std::uint32_t i = 0; i < self->shards; ++i) {
        const std::uint32_t shard = (offset + i) % self->shards;
        if (!self->owned.contains(shard)) candidates.push_back(shard);
      }
      self->acquire(std::move(candidates), 0, share - self->owned.size());
    }
    self->lease_timer.expires_after(self->options.lease / 3);
    self->lease_timer.async_wait([self](const boost::system::error_code& error) {
      if (!error) self->lease_tick();
    });
  });
}

void Core::ownership_changed(std::uint32_t shard) {
  const bool moves = std::any_of(webhook_map.begin(), webhook_map.end(), [&](const auto& entry) {
    return delivery_shard(entry.first) == shard;
  });
  if (!moves) return;
  // Posted: the handler starts and ends lanes, whose sessions call back into this core.
  asio::post(io, [self = shared_from_this()] {
    if (!self->closed && self->webhooks_handler) self->webhooks_handler();
  });
}

void Core::acquire(std::vector<std::uint32_t> candidates, std::size_t index, std::size_t want) {
  if (closed || resigned || want == 0 || index >= candidates.size()) return;
  const std::uint32_t shard = candidates[index];
  // No WAIT, as for renewals: a lease that a failover loses is taken again, and two owners of a
  // shard fire nothing twice (the firing call moves each job once); waiting for a replica that
  // stopped answering would hold up the firing of the shards still to be taken.
  call(shard, {"acquire", node, std::to_string(options.lease.count())}, false,
       [self = shared_from_this(), candidates = std::move(candidates), index, want,
        shard](Result<Reply> reply) mutable {
         if (self->closed) return;
         const bool taken = reply.is_ok() && reply.value().type == ReplyType::kArray &&
                            reply.value().elements.size() > 1 &&
                            reply.value().elements[0].str == "ok";
         if (self->resigned) {  // taken as the node closed: handed back at once
           if (taken) self->call(shard, {"resign", self->node}, false, [](Result<Reply>) {});
           return;
         }
         std::size_t still = want;
         if (taken) {
           Owned& own = self->owned[shard];
           own.epoch = reply.value().elements[1].integer;
           own.timer = std::make_unique<asio::steady_timer>(self->io);
           spdlog::debug("shard {}: owned, epoch {}", shard, own.epoch);
           --still;
           self->ownership_changed(shard);
           self->fire(shard);
         }
         self->acquire(std::move(candidates), index + 1, still);
       });
}

void Core::fire(std::uint32_t shard) {
  auto it = owned.find(shard);
  if (it == owned.end() || closed) return;
  Owned& own = it->second;
  if (own.firing) {
    own.again = true;
    return;
  }
  own.firing = true;
  own.again = false;
  std::vector<std::string> args = {"fire", std::to_string(own.epoch),
                                   std::to_string(options.fire_batch)};
  std::vector<std::shared_ptr<Waiter>> handed;
  if (!own.failed) handed = handed_to_call(args);
  // No WAIT: a firing a failover loses is done again by the shard's owner, from the due time.
  call(shard, std::move(args), false,
       [self = shared_from_this(), shard, handed = std::move(handed)](Result<Reply> reply) {
         const bool served = reply.is_ok() && reply.value().elements.size() > 5 &&
                             reply.value().elements[0].str == "ok";
         self->after_handing(handed, served ? &reply.value().elements[5] : nullptr);
         auto found = self->owned.find(shard);
         if (found == self->owned.end()) return;
         Owned& mine = found->second;
         mine.firing = false;
         mine.failed = !reply.is_ok();
         if (reply.is_ok() && !reply.value().elements.empty() &&
             reply.value().elements[0].str == "fenced") {
           spdlog::warn("shard {}: fenced off: another node owns it", shard);
           self->owned.erase(found);
           self->ownership_changed(shard);
           return;
         }
         if (!reply.is_ok() || reply.value().type != ReplyType::kArray ||
             reply.value().elements.size() < 5) {
           if (!reply.is_ok())
             spdlog::warn("shard {}: firing failed: {}", shard, reply.status().to_string());
           return self->arm_fire(shard, Millis{100});
         }
         const auto& elements = reply.value().elements;
         for (const auto& late : elements[4].elements) {  // microseconds
           self->metrics.fire_lateness.observe(static_cast<double>(to_int(late.str)) / 1e6);
         }
         const auto moved = elements[1].integer;
         const double head = to_ms(elements[2].str, -1);
         const double now = to_ms(elements[3].str, 0);
         if (mine.again || moved >= static_cast<std::int64_t>(self->options.fire_batch)) {
           return self->fire(shard);
         }
         // Until the next timer's microsecond by Redis's clock, counted from the call's present.
         std::chrono::microseconds delay = self->options.resync;
         if (head >= 0) {
           const auto until =
               static_cast<std::int64_t>(std::ceil(std::max(0.0, head - now) * 1000));
           delay = std::min(delay, std::chrono::microseconds{until});
         }
         self->arm_fire(shard, delay);
       });
}

// A reserve waiting here for tubes of which no shard is known to hold a ready job would be woken
// by what a firing or a put makes ready, and then reserve it: one more round trip to Redis
// between the due time (or the put) and the worker. So the call reserves for it: the longest
// waiting first, a few at a time (each costs the call a look at its tubes), and only while
// nothing is known elsewhere, so that one never gets a worse job than another shard holds.
// Appends `holder n tube...` for each to `args` (jobs.lua's serve()); for a put, `only` the
// waiters of the tubes it puts ready jobs in.
std::vector<std::shared_ptr<Waiter>> Core::handed_to_call(std::vector<std::string>& args,
                                                          const std::set<std::string>* only) {
  constexpr std::size_t kMostWaiters = 8;
  constexpr std::size_t kMostLooked = 32;  // waiters looked at, handed or not
  constexpr std::size_t kMostTubes = 8;
  std::vector<std::shared_ptr<Waiter>> handed;
  std::unordered_map<std::string, bool> empty;  // tube -> no shard known to hold a ready job
  std::size_t looked = 0;
  for (const auto& waiter : waiters) {
    if (handed.size() == kMostWaiters || looked == kMostLooked) break;
    if (waiter->finished || waiter->trying) continue;
    ++looked;
    const auto tubes = open_tubes(*waiter);
    if (tubes.empty() || tubes.size() > kMostTubes) continue;
    if (only != nullptr && std::none_of(tubes.begin(), tubes.end(),
                                        [&](const auto& tube) { return only->contains(tube); })) {
      continue;
    }
    const bool nothing_known = std::all_of(tubes.begin(), tubes.end(), [&](const auto& tube) {
      const auto [it, inserted] = empty.try_emplace(tube, false);
      if (inserted) {
        const Hint& h = hint(tube);
        it->second = std::all_of(h.heads.begin(), h.heads.end(),
                                 [](const Head& head) { return head.kind == Head::Kind::kNone; });
      }
      return it->second;
    });
    if (!nothing_known) continue;
    waiter->trying = true;
    waiter->handed = true;
    waiter->again = false;
    args.push_back(waiter->session->holder);
    args.push_back(std::to_string(tubes.size()));
    args.insert(args.end(), tubes.begin(), tubes.end());
    handed.push_back(waiter);
  }
  return handed;
}

void Core::after_handing(const std::vector<std::shared_ptr<Waiter>>& handed, const Reply* served) {
  for (std::size_t i = 0; i < handed.size(); ++i) {
    const auto& waiter = handed[i];
    waiter->trying = false;
    waiter->handed = false;
    const Reply* job =
        served != nullptr && i < served->elements.size() ? &served->elements[i] : nullptr;
    if (job != nullptr && job->type == ReplyType::kArray) {
      // (A waiter that went away meanwhile: finish() undoes the reservation.)
      finish(waiter, job_of(*job));
    } else if (waiter->finished) {
      pass_on(open_tubes(*waiter));
    } else {
      // What the node knows may have changed during the call: a try (which costs no call when
      // no shard is known to hold a job of its tubes) goes by it, and waits again if need be.
      try_reserve(waiter);
    }
  }
}

void Core::arm_fire(std::uint32_t shard, std::chrono::microseconds delay) {
  auto it = owned.find(shard);
  if (it == owned.end()) return;
  it->second.timer->expires_after(delay);
  it->second.timer->async_wait(
      [self = shared_from_this(), shard](const boost::system::error_code& error) {
        if (!error) self->fire(shard);
      });
}

// "r dq:{s} tube node head": tube's best ready job in shard s is now `head` (Head::parse()), by
// a call of `node` (which learnt it from the call's answer and skips its own message). Nodes of
// older versions sent "r dq:{s} tube [node]" when the tube's ready set stopped being empty: the
// head is then unknown. "t dq:{s} ms": shard s has a timer earlier than it had. "c": a tube's
// configuration changed. "l": a node gave leases up.
void Core::on_event(const std::string& payload) {
  if (payload == "c") {
    load_conf([](Status) {});
    return;
  }
  if (payload == "l") {
    lease_tick();
    return;
  }
  if (payload.size() < 4 || payload[1] != ' ') return;
  const auto open = payload.find('{');
  const auto close = payload.find('}', open);
  if (open == std::string::npos || close == std::string::npos) return;
  const auto shard = static_cast<std::uint32_t>(
      to_int(std::string_view(payload).substr(open + 1, close - open - 1)));
  const std::string rest = close + 2 <= payload.size() ? payload.substr(close + 2) : std::string();
  if (payload[0] == 'r') {
    const std::string_view fields(rest);
    const auto space = fields.find(' ');
    const std::string_view tube = fields.substr(0, space);
    std::string_view from;
    std::string_view head = "?";
    if (space != std::string_view::npos) {
      from = fields.substr(space + 1);
      if (const auto second = from.find(' '); second != std::string_view::npos) {
        head = from.substr(second + 1);
        from = from.substr(0, second);
      }
    }
    if (from == node) return;
    notify_ready(shard, std::string(tube), Head::parse(head));
  } else if (payload[0] == 't' && owned.contains(shard)) {
    fire(shard);
  }
}

void Core::resync() {
  if (closed) return;
  if (const auto refused = client.shard_subscribe_error(); refused != subscribe_refused) {
    subscribe_refused = refused;
    if (!refused.empty()) {
      spdlog::warn(
          "redis: the shard channels cannot be subscribed ({}): reserves here hear of jobs "
          "made ready through other nodes only every 5 s (an ACL must allow the channels "
          "{}:{{*}}:events)",
          refused, options.prefix);
    }
  }
  // Every tube a reserve waits for is looked for in every shard again (one probe round per
  // tube, shared by its waiters): what a lost message hid, they find.
  std::set<std::string> waited;
  for (const auto& waiter : waiters) waited.insert(waiter->tubes.begin(), waiter->tubes.end());
  // The hints of tubes no reserve here waits for, no session here watches and no webhook
  // delivers go (a few KiB each): a node must not keep something for every tube it heard of.
  std::erase_if(hints, [&](const auto& entry) {
    const auto& [tube, h] = entry;
    if (waited.contains(tube) || webhook_map.contains(tube)) return false;
    if (const auto use = uses.find(tube); use != uses.end() && use->second.watching > 0) {
      return false;
    }
    return std::all_of(h.trying.begin(), h.trying.end(), [](std::uint32_t n) { return n == 0; });
  });
  for (const auto& tube : waited) {
    if (paused(tube)) continue;
    probe_shards(
        {tube}, every_shard_number(),
        [self = shared_from_this()](bool found) {
          if (found) self->pump();
        },
        true);
  }
  // Every shard's earliest timer, for the overdue gauge: seen from every node, so that a shard
  // its owner stopped firing shows on the others' pages too.
  metrics.shard_overdue.resize(shards);
  std::vector<std::function<void()>> looks;
  for (std::uint32_t shard = 0; shard < shards; ++shard) {
    looks.emplace_back([self = shared_from_this(), shard] {
      self->call(shard, {"overdue"}, false, [self, shard](Result<Reply> reply) {
        if (!reply.is_ok() || reply.value().elements.size() < 3) return;
        const auto head = to_int(reply.value().elements[1].str, -1);
        const auto now = to_int(reply.value().elements[2].str);
        self->metrics.shard_overdue[shard] =
            head >= 0 && head < now ? static_cast<double>(now - head) / 1000.0 : 0.0;
      });
    });
  }
  trickle(std::move(looks));
  resync_timer.expires_after(std::max(options.resync * 5, Millis{1000}));
  resync_timer.async_wait([self = shared_from_this()](const boost::system::error_code& error) {
    if (!error) self->resync();
  });
}

// --- tube configuration

void Core::load_conf(std::function<void(Status)> done) {
  auto left = std::make_shared<int>(3);
  auto failed = std::make_shared<Status>();
  auto step = [left, failed, done](Status status) {
    if (!status.is_ok()) *failed = std::move(status);
    if (--*left == 0) done(*failed);
  };
  auto self = shared_from_this();
  client.run(redis::key_slot(names.webhooks), Command{"HGETALL", names.webhooks},
             [self, step](Result<Reply> r) {
               if (!r.is_ok()) return step(r.status());
               std::map<std::string, Webhook> loaded;
               for (std::size_t i = 0; i + 1 < r.value().elements.size(); i += 2) {
                 const auto& tube = r.value().elements[i].str;
                 auto webhook = store::decode_webhook(tube, r.value().elements[i + 1].str);
                 if (webhook.is_ok()) loaded.emplace(tube, std::move(webhook).value());
               }
               const bool changed = loaded != self->webhook_map;
               self->webhook_map = std::move(loaded);
               if (changed && self->webhooks_handler) self->webhooks_handler();
               step(Status::ok());
             });
  client.run(redis::key_slot(names.pauses), Command{"HGETALL", names.pauses},
             [self, step](Result<Reply> r) {
               if (!r.is_ok()) return step(r.status());
               std::map<std::string, Pause> loaded;
               for (std::size_t i = 0; i + 1 < r.value().elements.size(); i += 2) {
                 const std::string& value = r.value().elements[i + 1].str;
                 Pause pause;
                 const auto first = value.find(' ');
                 const auto second = value.find(' ', first + 1);
                 pause.until_unix_ms = to_int(value.substr(0, first));
                 pause.seconds = to_int(value.substr(first + 1, second - first - 1));
                 pause.count = static_cast<std::uint64_t>(to_int(value.substr(second + 1)));
                 loaded.emplace(r.value().elements[i].str, pause);
               }
               self->pauses = std::move(loaded);
               self->watch_pauses();
               step(Status::ok());
             });
  client.run(redis::key_slot(names.max_attempts), Command{"HGETALL", names.max_attempts},
             [self, step](Result<Reply> r) {
               if (!r.is_ok()) return step(r.status());
               std::map<std::string, std::uint32_t> loaded;
               for (std::size_t i = 0; i + 1 < r.value().elements.size(); i += 2) {
                 loaded.emplace(r.value().elements[i].str,
                                static_cast<std::uint32_t>(to_int(r.value().elements[i + 1].str)));
               }
               self->max_attempts = std::move(loaded);
               step(Status::ok());
             });
}

// When a pause ends, every shard may have ready jobs of its tube that reserves skipped (and a
// reserve may have cleared their hints while the pause held): look at them all again.
void Core::watch_pauses() {
  const auto now = unix_ms_now();
  std::int64_t first = 0;
  for (const auto& [tube, pause] : pauses) {
    if (pause.until_unix_ms > now && (first == 0 || pause.until_unix_ms < first)) {
      first = pause.until_unix_ms;
    }
  }
  if (first == 0) {
    conf_timer.cancel();
  } else {
    conf_timer.expires_after(Millis{first - now});
    conf_timer.async_wait([self = shared_from_this()](const boost::system::error_code& error) {
      if (!error) self->watch_pauses();
    });
  }
  // A paused tube's jobs are answered as none (reserves skip them): a tube whose pause may have
  // ended must be looked at again.
  for (const auto& [tube, pause] : pauses) ever_paused.insert(tube);
  for (auto& [tube, h] : hints) {
    if (!paused(tube) && ever_paused.contains(tube)) forget_heads(h);
  }
  pump();
}

void Core::publish_conf() {
  client.run(redis::key_slot(names.events), Command{"PUBLISH", names.events, "c"},
             [](Result<Reply>) {});
}

// --- sessions

namespace {

class RedisSession final : public broker::Session {
 public:
  RedisSession(std::shared_ptr<Core> core, broker::SessionOptions options);
  ~RedisSession() override;
  RedisSession(const RedisSession&) = delete;
  RedisSession& operator=(const RedisSession&) = delete;

  Status use(std::string_view tube) override;
  [[nodiscard]] std::string used() const override { return used_; }
  Result<std::size_t> watch(std::string_view tube) override;
  Result<std::size_t> ignore(std::string_view tube) override;
  [[nodiscard]] std::vector<std::string> watched() const override { return watched_; }

  void put(broker::PutRequest request, Callback<broker::PutResult> done) override;
  std::uint64_t reserve(broker::ReserveRequest request, Callback<broker::Job> done) override;
  bool cancel_reserve(std::uint64_t ticket) override;
  bool stop_waiting(std::uint64_t ticket) override;
  void reserve_job(JobId id, Callback<broker::Job> done) override;
  void erase(broker::JobRef job, Callback<JobId> done) override;
  void release(broker::ReleaseRequest request, Callback<JobView> done) override;
  void bury(JobId id, std::optional<std::uint32_t> priority, Callback<JobView> done) override;
  void touch(JobId id, Callback<JobView> done) override;
  void peek(broker::JobRef job, bool with_body, Callback<broker::Job> done) override;
  void peek_next(std::string tube, JobState state, Callback<broker::Job> done) override;
  void kick(std::string tube, std::size_t bound, Callback<std::size_t> done) override;
  void kick_job(JobId id, Callback<JobView> done) override;
  void update(broker::JobRef job, broker::Update update, Callback<JobView> done) override;
  void list_group(std::string tube, std::string group,
                  Callback<std::vector<JobView>> done) override;
  void cancel_group(std::string tube, std::string group, Callback<std::size_t> done) override;
  void pause_tube(std::string tube, broker::Seconds pause, Callback<TubeStats> done) override;
  void pause_existing(const std::string& tube, broker::Seconds pause, Callback<TubeStats> done);
  void stats_tube(std::string tube, Callback<TubeStats> done) override;
  void set_max_attempts(std::string tube, std::uint32_t max_attempts,
                        Callback<std::uint32_t> done) override;
  void list_tubes(Callback<std::vector<TubeStats>> done) override;
  void stats(Callback<ServerStats> done) override;
  void set_webhook(std::string tube, Webhook webhook, Callback<Webhook> done) override;
  void get_webhook(std::string tube, Callback<Webhook> done) override;
  void remove_webhook(std::string tube, Callback<Webhook> done) override;
  void note_attempt(JobId id, int status, std::string error, Callback<JobView> done) override;
  void due_counts(std::string /*tube*/, std::vector<broker::Due> /*edges*/,
                  Callback<broker::DueCounts> done) override {
    post(std::move(done),
         Result<broker::DueCounts>(
             Status(Code::kNotSupported,
                    "due counts: in Redis mode the shards keep no counts by due time, and counting "
                    "would visit every delayed job")));
  }
  void list_jobs(std::string /*tube*/, JobState /*state*/, std::size_t /*limit*/,
                 Callback<broker::JobList> done) override {
    post(std::move(done),
         Result<broker::JobList>(Status(
             Code::kNotSupported,
             "listing a tube's jobs: not in Redis mode (peek, or look a job up by id or key)")));
  }
  void backup(std::string dir, Callback<broker::BackupResult> done) override {
    post(std::move(done),
         Result<broker::BackupResult>(Status(
             Code::kNotSupported, "backup: the jobs are in Redis, not in " + dir +
                                      "'s server; back up Redis (RDB snapshots or the AOF)")));
  }

 private:
  // Completes `done` later on the executor, unless the session is gone by then.
  template <typename T>
  void post(Callback<T> done, Result<T> result) {
    asio::post(core_->io,
               [state = state_, done = std::move(done), result = std::move(result)]() mutable {
                 if (state->alive) done(std::move(result));
               });
  }
  // A script on a shard whose reply is a job: `then` gets it, or the failure.
  void job_call(std::uint32_t shard, std::vector<std::string> args, bool write,
                std::function<void(Result<broker::Job>)> then);
  // done(view) for a job reply, on this session's behalf.
  Callback<broker::Job> view_of(Callback<JobView> done);
  // Every shard, each with `args`; `then` gets the replies by shard, or the first failure.
  void every_shard(std::vector<std::string> args, bool write,
                   std::function<void(Result<std::vector<Reply>>)> then);
  // Tube stats summed over every shard; `tubes` empty: every tube with jobs.
  struct Sums {
    std::map<std::string, TubeStats> tubes;
    std::uint64_t timeouts = 0;  // TTRs lapsed
  };
  void tube_stats(std::vector<std::string> tubes, std::function<void(Result<Sums>)> then);
  // Every tube that exists here (exists(), its stats with this node's counts).
  [[nodiscard]] std::vector<TubeStats> existing(Sums sums) const;
  [[nodiscard]] bool exists(const TubeStats& stats) const;
  [[nodiscard]] static bool has_jobs(const TubeStats& stats);
  [[nodiscard]] TubeStats with_local(TubeStats stats) const;
  [[nodiscard]] std::uint32_t shard_for(const std::string& tube, const broker::JobRef& job) const;
  [[nodiscard]] std::vector<std::string> ref_args(const broker::JobRef& job) const;
  [[nodiscard]] Status check(const std::string& tube) const {
    return check_tube_name(tube, core_->options.max_name_bytes);
  }
  void count_use(const std::string& tube, int by);
  void count_watch(const std::string& tube, int by);
  void count(const std::string& tube, std::uint64_t TubeUse::*field, int by);

  std::shared_ptr<Core> core_;
  std::shared_ptr<SessionState> state_ = std::make_shared<SessionState>();
  std::string used_;
  std::vector<std::string> watched_;
  std::map<std::uint64_t, std::shared_ptr<Waiter>> waits_;
  std::uint64_t next_ticket_ = 1;
};

RedisSession::RedisSession(std::shared_ptr<Core> core, broker::SessionOptions options)
    : core_(std::move(core)) {
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
      waiter->stop_timers();
      core_->waiters.remove(waiter);
    }
  }
  // Its reserved jobs are ready again at once (a job reserved again since is left alone).
  for (const auto& [id, held] : state_->held) {
    core_->call(
        shard_of_id(id, core_->shards),
        {"release", state_->holder, std::to_string(id), "", "", std::to_string(held.reserves)},
        true, [](Result<Reply>) {});
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

void RedisSession::every_shard(std::vector<std::string> args, bool write,
                               std::function<void(Result<std::vector<Reply>>)> then) {
  const std::uint32_t shards = core_->shards;
  auto replies = std::make_shared<std::vector<Reply>>(shards);
  auto left = std::make_shared<std::uint32_t>(shards);
  auto failure = std::make_shared<std::optional<Status>>();
  auto finish = std::make_shared<std::function<void(Result<std::vector<Reply>>)>>(std::move(then));
  for (std::uint32_t shard = 0; shard < shards; ++shard) {
    core_->call(shard, args, write,
                [state = state_, replies, left, failure, finish, shard](Result<Reply> reply) {
                  if (!reply.is_ok()) {
                    if (!*failure) *failure = reply.status();
                  } else if (Status s = status_of(reply.value());
                             !s.is_ok() && s.code() != Code::kNotFound) {
                    if (!*failure) *failure = s;
                  } else {
                    (*replies)[shard] = std::move(reply.value());
                  }
                  if (--*left > 0 || !state->alive) return;
                  if (*failure) return (*finish)(**failure);
                  (*finish)(std::move(*replies));
                });
  }
}

void RedisSession::tube_stats(std::vector<std::string> tubes,
                              std::function<void(Result<Sums>)> then) {
  std::vector<std::string> args = {"stats"};
  args.insert(args.end(), tubes.begin(), tubes.end());
  every_shard(std::move(args), false, [then = std::move(then)](Result<std::vector<Reply>> replies) {
    if (!replies.is_ok()) return then(replies.status());
    Sums sums;
    for (const auto& reply : replies.value()) {
      for (std::size_t i = 1; i < reply.elements.size(); ++i) {
        const auto& row = reply.elements[i].elements;
        if (row.size() < 9) continue;
        TubeStats& t = sums.tubes[row[0].str];
        t.name = row[0].str;
        const auto n = [&](std::size_t k) { return static_cast<std::uint64_t>(row[k].integer); };
        t.ready += n(1);
        t.urgent += n(2);
        t.reserved += n(3);
        t.delayed += n(4);
        t.buried += n(5);
        t.total_jobs += n(6);
        t.deletes += n(7);
        sums.timeouts += n(8);
      }
    }
    then(std::move(sums));
  });
}

TubeStats RedisSession::with_local(TubeStats stats) const {
  if (const auto it = core_->uses.find(stats.name); it != core_->uses.end()) {
    stats.using_clients = it->second.using_clients;
    stats.watching_clients = it->second.watching;
  }
  for (const auto& waiter : core_->waiters) {
    if (std::find(waiter->tubes.begin(), waiter->tubes.end(), stats.name) != waiter->tubes.end()) {
      ++stats.waiting_clients;
    }
  }
  if (const auto it = core_->pauses.find(stats.name); it != core_->pauses.end()) {
    stats.pauses = it->second.count;
    const auto left = it->second.until_unix_ms - unix_ms_now();
    if (left > 0) {
      stats.pause = std::chrono::seconds(it->second.seconds);
      stats.pause_left = Millis{left};
    }
  }
  if (const auto it = core_->max_attempts.find(stats.name); it != core_->max_attempts.end()) {
    stats.max_attempts = it->second;
  }
  return stats;
}

std::uint32_t RedisSession::shard_for(const std::string& tube, const broker::JobRef& job) const {
  if (job.id != 0) return shard_of_id(job.id, core_->shards);
  return shard_of_name(tube, job.key, core_->shards);
}

std::vector<std::string> RedisSession::ref_args(const broker::JobRef& job) const {
  if (job.id != 0) return {std::to_string(job.id), "", ""};
  return {"", job.tube, job.key};
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
  const std::uint32_t shard = !request.key.empty() ? shard_of_name(tube, request.key, core_->shards)
                              : !request.group.empty()
                                  ? shard_of_name(tube, request.group, core_->shards)
                                  : core_->burst_shard();
  std::string attachment;
  if (!request.url.empty() || !request.content_type.empty()) {
    Delivery delivery;
    delivery.url = std::move(request.url);
    delivery.content_type = std::move(request.content_type);
    attachment = store::encode_delivery(delivery);
  }
  const auto ttr = std::max<std::int64_t>(1, request.ttr.count());
  const bool attached = !attachment.empty();
  std::string tail = new_record_tail(static_cast<std::uint32_t>(ttr), tube, request.key,
                                     request.group, request.body);
  const std::uint64_t number = state_->put_made();
  core_->queue_put(
      shard,
      {tube, std::to_string(request.priority), std::to_string(request.due.ms),
       request.due.absolute ? "1" : "0", request.replace ? "1" : "0", request.key, request.group,
       std::move(attachment), std::move(tail)},
      [state = state_, number, tube, priority = request.priority, due = request.due, ttr,
       key = request.key, group = request.group, attached,
       done = std::move(done)](Result<Reply> reply) {
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
        if (e.size() < 5) return done(Status(Code::kIOError, "Redis: a short put reply"));
        // The script answers the id, the due time, the job it replaced and its present (as
        // integers); the rest the put said.
        JobView& job = result.job;
        job.id = static_cast<JobId>(e[1].integer);
        job.due_unix_ms = e[2].integer;
        job.created_unix_ms = e[4].integer;
        job.state = job.due_unix_ms > job.created_unix_ms ? JobState::kDelayed : JobState::kReady;
        job.delay_ms = due.absolute ? std::max<std::int64_t>(0, due.ms - job.created_unix_ms)
                                    : std::max<std::int64_t>(0, due.ms);
        job.tube = tube;
        job.priority = priority;
        job.ttr = std::chrono::seconds(ttr);
        job.key = key;
        job.group = group;
        job.attached = attached;
        result.replaced = static_cast<JobId>(e[3].integer);
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
  if (request.timeout) waiter->deadline = SteadyClock::now() + *request.timeout;
  waiter->done = std::move(done);
  waiter->ticket = next_ticket_++;
  // Only reserves still to answer are kept: a worker's connection makes millions.
  std::erase_if(waits_, [](const auto& wait) { return wait.second->finished; });
  waits_[waiter->ticket] = waiter;
  core_->waiters.push_back(waiter);
  core_->keep_deadline(waiter);
  // Never inside this call: the first try starts from the executor.
  asio::post(core_->io, [core = core_, waiter] {
    // (A wake() may have started its first try already: one try at a time, or a second job
    // would be reserved for it and handed back.)
    if (!waiter->finished && !waiter->trying) core->try_reserve(waiter);
  });
  return waiter->ticket;
}

bool RedisSession::cancel_reserve(std::uint64_t ticket) {
  const auto it = waits_.find(ticket);
  if (it == waits_.end() || it->second->finished) return false;
  auto waiter = it->second;
  waits_.erase(it);
  auto done = std::move(waiter->done);
  waiter->finished = true;
  waiter->stop_timers();
  core_->waiters.remove(waiter);
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
  waiter->deadline = SteadyClock::now();
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
           true, [state = state_, done = std::move(done)](Result<broker::Job> job) {
             if (job.is_ok()) state->hold(job.value());
             done(std::move(job));
           });
}

void RedisSession::erase(broker::JobRef job, Callback<JobId> done) {
  const std::uint32_t shard = shard_for(job.tube, job);
  std::vector<std::string> args = {"erase", state_->holder};
  const auto ref = ref_args(job);
  args.insert(args.end(), ref.begin(), ref.end());
  core_->call(shard, std::move(args), true,
              [state = state_, done = std::move(done)](Result<Reply> reply) {
                if (!state->alive) return;
                if (!reply.is_ok()) return done(reply.status());
                if (Status s = status_of(reply.value()); !s.is_ok()) return done(s);
                const auto id = static_cast<JobId>(to_int(reply.value().elements[1].str));
                state->held.erase(id);
                done(id);
              });
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
           [state = state_, done = view_of(std::move(done))](Result<broker::Job> job) {
             if (job.is_ok()) state->hold(job.value());
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
  // buried job: every shard says which it would kick first (at most kMost), and each kicks as
  // many as it holds of the first of them all. Two round trips, each to every shard at once;
  // more while a shard had more to list and the bound is not reached.
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

    void ask() {
      left = core->shards;
      listed_all = true;
      candidates.clear();
      const std::size_t most = std::min(kMost, bound - kicked);
      for (std::uint32_t shard = 0; shard < core->shards; ++shard) {
        core->call(shard, {"kickable", tube, what, std::to_string(most)}, false,
                   [self = shared_from_this(), shard, most](Result<Reply> reply) {
                     self->listed(shard, most, reply);
                   });
      }
    }
    void listed(std::uint32_t shard, std::size_t most, const Result<Reply>& reply) {
      if (!reply.is_ok()) {
        failed = reply.status();
      } else if (reply.value().elements.size() > 1) {
        const auto& pairs = reply.value().elements[1].elements;
        if (pairs.size() >= most) listed_all = false;
        for (const auto& pair : pairs) {
          if (pair.elements.size() != 2) continue;
          candidates.emplace_back(to_ms(pair.elements[1].str, 0),
                                  static_cast<JobId>(to_int(pair.elements[0].str)), shard);
        }
      }
      if (--left > 0) return;
      if (!failed.is_ok()) return finish();
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
    void finish() {
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
  every_shard({"group", tube, group, "1"}, true,
              [done = std::move(done)](Result<std::vector<Reply>> replies) {
                if (!replies.is_ok()) return done(replies.status());
                std::size_t deleted = 0;
                for (const auto& reply : replies.value()) {
                  if (reply.elements.size() > 1)
                    deleted += static_cast<std::size_t>(reply.elements[1].integer);
                }
                done(deleted);
              });
}

// --- tubes and the server

void RedisSession::pause_tube(std::string tube, broker::Seconds pause, Callback<TubeStats> done) {
  if (Status s = check(tube); !s.is_ok()) return post(std::move(done), Result<TubeStats>(s));
  stats_tube(tube, [self = this, state = state_, tube, pause,
                    done = std::move(done)](Result<TubeStats> exists) mutable {
    if (!state->alive) return;
    if (!exists.is_ok()) return done(exists.status());
    self->pause_existing(tube, pause, std::move(done));
  });
}

void RedisSession::pause_existing(const std::string& tube, broker::Seconds pause,
                                  Callback<TubeStats> done) {
  // The shards' scripts enforce it, on Redis's clock; the global entry is what stats show.
  const auto seconds = pause.count();
  every_shard({"pause", tube, std::to_string(seconds * 1000)}, true,
              [core = core_, state = state_, tube, seconds, self = this,
               done = std::move(done)](Result<std::vector<Reply>> replies) mutable {
                if (!state->alive) return;
                if (!replies.is_ok()) return done(replies.status());
                Pause& p = core->pauses[tube];
                p = {seconds == 0 ? 0 : unix_ms_now() + seconds * 1000, seconds, p.count + 1};
                core->watch_pauses();
                core->client.run(
                    redis::key_slot(core->names.pauses),
                    Command{"HSET", core->names.pauses, tube,
                            std::to_string(p.until_unix_ms) + " " + std::to_string(seconds) + " " +
                                std::to_string(p.count)},
                    [core, state, tube, self, done = std::move(done)](Result<Reply> reply) mutable {
                      if (!state->alive) return;
                      if (!reply.is_ok()) return done(reply.status());
                      core->publish_conf();
                      self->stats_tube(tube, std::move(done));
                    });
              });
}

void RedisSession::stats_tube(std::string tube, Callback<TubeStats> done) {
  if (Status s = check(tube); !s.is_ok()) return post(std::move(done), Result<TubeStats>(s));
  tube_stats({tube},
             [self = this, state = state_, tube, done = std::move(done)](Result<Sums> sums) {
               if (!state->alive) return;
               if (!sums.is_ok()) return done(sums.status());
               TubeStats stats;
               stats.name = tube;
               if (const auto it = sums.value().tubes.find(tube); it != sums.value().tubes.end()) {
                 stats = it->second;
               }
               stats = self->with_local(std::move(stats));
               if (!self->exists(stats)) return done(Status(Code::kNotFound, "no such tube"));
               done(std::move(stats));
             });
}

void RedisSession::set_max_attempts(std::string tube, std::uint32_t max_attempts,
                                    Callback<std::uint32_t> done) {
  if (Status s = check(tube); !s.is_ok()) return post(std::move(done), Result<std::uint32_t>(s));
  // Every shard's scripts read it where they run; the global copy is what stats show.
  every_shard(
      {"max_attempts", tube, std::to_string(max_attempts)}, true,
      [core = core_, state = state_, tube, max_attempts,
       done = std::move(done)](Result<std::vector<Reply>> replies) mutable {
        if (!replies.is_ok()) return done(replies.status());
        Command command = max_attempts == 0 ? Command{"HDEL", core->names.max_attempts, tube}
                                            : Command{"HSET", core->names.max_attempts, tube,
                                                      std::to_string(max_attempts)};
        if (max_attempts == 0)
          core->max_attempts.erase(tube);
        else
          core->max_attempts[tube] = max_attempts;
        core->client.run(redis::key_slot(core->names.max_attempts), std::move(command),
                         [core, state, max_attempts, done = std::move(done)](Result<Reply> reply) {
                           if (!state->alive) return;
                           if (!reply.is_ok()) return done(reply.status());
                           core->publish_conf();
                           done(max_attempts);
                         });
      });
}

// A tube exists while it holds jobs or a client here uses, watches or waits for it (a reserve
// naming it: an HTTP long-poll, a webhook's delivery); "default" always does.
bool RedisSession::has_jobs(const TubeStats& stats) {
  return stats.ready + stats.reserved + stats.delayed + stats.buried > 0;
}

// A tube with a webhook exists as long as the webhook does, as on a single delayqd.
bool RedisSession::exists(const TubeStats& stats) const {
  return has_jobs(stats) ||
         stats.using_clients + stats.watching_clients + stats.waiting_clients > 0 ||
         stats.name == "default" || core_->webhook_map.contains(stats.name);
}

std::vector<TubeStats> RedisSession::existing(Sums sums) const {
  // Only tubes with jobs and tubes this node's clients name can exist (the shards also remember
  // tubes long gone: with_local() is not spent on those).
  std::set<std::string> named = {"default"};
  for (const auto& [name, use] : core_->uses) named.insert(name);
  for (const auto& [name, webhook] : core_->webhook_map) named.insert(name);
  for (const auto& waiter : core_->waiters) {
    named.insert(waiter->tubes.begin(), waiter->tubes.end());
  }
  for (const auto& name : named) sums.tubes.try_emplace(name).first->second.name = name;
  std::vector<TubeStats> list;
  for (auto& [name, stats] : sums.tubes) {
    if (!has_jobs(stats) && !named.contains(name)) continue;
    TubeStats local = with_local(std::move(stats));
    if (exists(local)) list.push_back(std::move(local));
  }
  return list;
}

void RedisSession::list_tubes(Callback<std::vector<TubeStats>> done) {
  tube_stats({}, [self = this, state = state_, done = std::move(done)](Result<Sums> sums) {
    if (!state->alive) return;
    if (!sums.is_ok()) return done(sums.status());
    done(self->existing(std::move(sums).value()));
  });
}

void RedisSession::stats(Callback<ServerStats> done) {
  tube_stats({}, [self = this, state = state_, done = std::move(done)](Result<Sums> sums) mutable {
    if (!state->alive) return;
    if (!sums.is_ok()) return done(sums.status());
    ServerStats stats;
    stats.job_timeouts = sums.value().timeouts;
    for (const auto& [name, t] : sums.value().tubes) {
      stats.total_jobs += t.total_jobs;
      stats.deletes += t.deletes;
    }
    for (const auto& t : self->existing(std::move(sums).value())) {
      stats.urgent += t.urgent;
      stats.ready += t.ready;
      stats.reserved += t.reserved;
      stats.delayed += t.delayed;
      stats.buried += t.buried;
      ++stats.tubes;
    }
    // Reserves waiting on every live node: this one's as it is, the others' as they last said.
    auto core = self->core_;
    core->client.run(redis::key_slot(core->names.waiting), Command{"HGETALL", core->names.waiting},
                     [core, state, stats, done = std::move(done)](Result<Reply> reply) mutable {
                       if (!state->alive) return;
                       stats.waiting = core->waiting_here();
                       if (reply.is_ok()) {
                         const auto& e = reply.value().elements;
                         for (std::size_t i = 0; i + 1 < e.size(); i += 2) {
                           if (e[i].str != core->node && core->live.contains(e[i].str)) {
                             stats.waiting += static_cast<std::uint64_t>(to_int(e[i + 1].str));
                           }
                         }
                       }
                       done(stats);
                     });
  });
}

void RedisSession::set_webhook(std::string tube, Webhook webhook, Callback<Webhook> done) {
  if (Status s = check(tube); !s.is_ok()) return post(std::move(done), Result<Webhook>(s));
  core_->client.run(redis::key_slot(core_->names.webhooks),
                    Command{"HSET", core_->names.webhooks, tube, store::encode_webhook(webhook)},
                    [core = core_, state = state_, tube, webhook,
                     done = std::move(done)](Result<Reply> reply) mutable {
                      if (!reply.is_ok()) {
                        if (state->alive) done(reply.status());
                        return;
                      }
                      core->webhook_map[tube] = webhook;
                      core->publish_conf();
                      if (core->webhooks_handler) core->webhooks_handler();
                      if (state->alive) done(std::move(webhook));
                    });
}

void RedisSession::get_webhook(std::string tube, Callback<Webhook> done) {
  const auto it = core_->webhook_map.find(tube);
  if (it == core_->webhook_map.end()) {
    return post(std::move(done),
                Result<Webhook>(Status(Code::kNotFound, "tube " + tube + " has no webhook")));
  }
  post(std::move(done), Result<Webhook>(it->second));
}

void RedisSession::remove_webhook(std::string tube, Callback<Webhook> done) {
  const auto it = core_->webhook_map.find(tube);
  if (it == core_->webhook_map.end()) {
    return post(std::move(done),
                Result<Webhook>(Status(Code::kNotFound, "tube " + tube + " has no webhook")));
  }
  Webhook old = it->second;
  core_->client.run(redis::key_slot(core_->names.webhooks),
                    Command{"HDEL", core_->names.webhooks, tube},
                    [core = core_, state = state_, tube, old,
                     done = std::move(done)](Result<Reply> reply) mutable {
                      if (!reply.is_ok()) {
                        if (state->alive) done(reply.status());
                        return;
                      }
                      core->webhook_map.erase(tube);
                      core->publish_conf();
                      if (core->webhooks_handler) core->webhooks_handler();
                      if (state->alive) done(std::move(old));
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
             delivery.last_attempt_unix_ms = unix_ms_now();
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

}  // namespace

// --- the broker

namespace {

// What is stored is of layout 2 (timer pages, MessagePack records; jobs.lua), marked "layout" in
// dq:meta. A cluster from before the mark holds layout 1, which is upgraded here, shard by
// shard, once none of its nodes is alive (they would not read layout 2); a newer layout is
// refused. `wait` runs the event loop until its argument is set.
template <typename Wait>
Status check_layout(Core& core, bool first_start, const Wait& wait) {
  // A command on the primary serving `key`'s slot.
  const auto ask = [&](const std::string& key, Command command) -> Result<Reply> {
    std::optional<Result<Reply>> answer;
    core.client.run(redis::key_slot(key), std::move(command),
                    [&](Result<Reply> r) { answer.emplace(std::move(r)); });
    wait(answer);
    if (answer->is_ok() && answer->value().is_error()) {
      return Status(Code::kIOError, "redis: " + answer->value().str);
    }
    return std::move(*answer);
  };
  if (first_start) {
    return ask(core.names.meta, Command{"HSET", core.names.meta, "layout", std::to_string(kLayout)})
        .status();
  }
  // Layout 1 until marked. Its nodes must be gone: wait up to two leases for their
  // announcements to lapse (and look at the mark again each time: another new node may have
  // upgraded meanwhile, and be the live node seen).
  const auto deadline = SteadyClock::now() + core.options.lease * 2;
  for (;;) {
    auto layout = ask(core.names.meta, Command{"HGET", core.names.meta, "layout"});
    if (!layout.is_ok()) return layout.status();
    if (!layout.value().is_nil()) {
      const auto version = to_int(layout.value().str);
      if (version == kLayout) return Status::ok();
      return Status(Code::kUnknownFormat, "the cluster's jobs are stored in layout " +
                                              layout.value().str + ", newer than this delayqd's (" +
                                              std::to_string(kLayout) +
                                              "): run a delayqd as new as the one that wrote them");
    }
    auto time = ask(core.names.nodes, Command{"TIME"});
    if (!time.is_ok()) return time.status();
    auto nodes =
        ask(core.names.nodes, Command{"ZRANGE", core.names.nodes, "0", "-1", "WITHSCORES"});
    if (!nodes.is_ok()) return nodes.status();
    const auto& t = time.value().elements;
    const std::int64_t now_ms =
        t.size() == 2 ? to_int(t[0].str) * 1000 + to_int(t[1].str) / 1000 : 0;
    std::string alive;
    const auto& entries = nodes.value().elements;
    for (std::size_t i = 0; i + 1 < entries.size(); i += 2) {
      if (to_int(entries[i + 1].str) > now_ms)
        alive += (alive.empty() ? "" : ", ") + entries[i].str;
    }
    if (alive.empty()) break;
    if (SteadyClock::now() >= deadline) {
      return Status(Code::kConflict,
                    "the cluster's jobs are stored in layout 1, which this delayqd upgrades at "
                    "its start once no older node runs; still running: " +
                        alive + " (docs/redis-mode.md, \"Layouts and upgrades\")");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
  }
  for (std::uint32_t shard = 0; shard < core.shards; ++shard) {
    for (std::int64_t from = 0; from >= 0;) {
      std::optional<Result<Reply>> answer;
      core.call(shard, {"upgrade", std::to_string(from)}, true,
                [&](Result<Reply> r) { answer.emplace(std::move(r)); });
      wait(answer);
      if (!answer->is_ok()) return answer->status();
      const auto& reply = answer->value();
      if (reply.elements.size() < 2 || reply.elements[0].str != "ok") {
        return Status(Code::kIOError, "redis: shard " + std::to_string(shard) +
                                          " could not be upgraded: " + reply.str);
      }
      from = reply.elements[1].type == ReplyType::kInteger ? reply.elements[1].integer : -1;
    }
  }
  if (Status s =
          ask(core.names.meta, Command{"HSET", core.names.meta, "layout", std::to_string(kLayout)})
              .status();
      !s.is_ok()) {
    return s;
  }
  spdlog::info("redis: jobs upgraded from layout 1 to layout {} ({} shards)", kLayout, core.shards);
  return Status::ok();
}

}  // namespace

Result<std::unique_ptr<RedisBroker>> RedisBroker::open(asio::io_context& io,
                                                       RedisBrokerOptions options) {
  if (Status s = check_prefix(options.prefix); !s.is_ok()) return s;
  if (options.shards == 0 || options.shards > 16384) {
    return Status(Code::kInvalidArgument, "shards must be 1 to 16384");
  }
  auto core = std::make_shared<Core>(io, std::move(options));
  std::random_device random;
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  core->node = std::string(host) + ":" + std::to_string(::getpid()) + ":" +
               std::to_string(random() % 1000000);

  // Runs io until `done` is set; each step is bounded by the client's request timeout.
  const auto wait = [&io](const auto& done) {
    io.restart();
    while (!done.has_value() && !io.stopped()) io.run_one();
  };
  std::optional<Status> started;
  core->client.start([&](Status s) { started = std::move(s); });
  wait(started);
  if (!started->is_ok()) return *started;

  for (const auto& address : core->client.primaries()) {
    // The jobs' code is a function library (FCALL): Redis 7.0 or later.
    std::optional<Result<Reply>> server;
    core->client.run_at(address, Command{"INFO", "server"},
                        [&](Result<Reply> r) { server.emplace(std::move(r)); });
    wait(server);
    if (!server->is_ok()) return server->status();
    const std::string& info = server->value().str;
    if (const auto at = info.find("redis_version:"); at != std::string::npos) {
      const std::string version = info.substr(at + 14, info.find_first_of("\r\n", at) - at - 14);
      if (to_int(version.substr(0, version.find('.'))) < 7) {
        return Status(Code::kInvalidArgument, "redis " + address + " is version " + version +
                                                  ": delayq needs Redis 7.0 or later (functions)");
      }
    }
    // A Redis that evicts keys under memory pressure would drop jobs: refuse it.
    std::optional<Result<Reply>> policy;
    core->client.run_at(address, Command{"CONFIG", "GET", "maxmemory-policy"},
                        [&](Result<Reply> r) { policy.emplace(std::move(r)); });
    wait(policy);
    if (!policy->is_ok()) return policy->status();
    const Reply& reply = policy->value();
    if (reply.is_error()) {
      spdlog::warn("redis {}: cannot check maxmemory-policy ({}); it must be noeviction", address,
                   reply.str);
    } else if (reply.elements.size() == 2 && reply.elements[1].str != "noeviction") {
      return Status(Code::kInvalidArgument, "redis " + address + " has maxmemory-policy " +
                                                reply.elements[1].str +
                                                ": it may evict jobs; delayq needs noeviction");
    }
    std::optional<Result<Reply>> aof;
    core->client.run_at(address, Command{"CONFIG", "GET", "appendonly"},
                        [&](Result<Reply> r) { aof.emplace(std::move(r)); });
    wait(aof);
    if (aof->is_ok() && aof->value().elements.size() == 2 && aof->value().elements[1].str == "no") {
      spdlog::warn(
          "redis {}: appendonly is off: a restart of it loses jobs since its last snapshot",
          address);
    }
  }
  std::optional<bool> checked;
  core->check_replicas([&] { checked = true; });
  wait(checked);
  for (const auto& [address, online] : core->replicas) {
    if (online == 0) {
      spdlog::warn("redis {}: no replica: if it fails, its jobs are gone until it comes back",
                   address);
    }
  }

  // The layout: the shard count is the first start's.
  std::optional<Result<Reply>> meta;
  core->client.run(
      redis::key_slot(core->names.meta),
      Command{"HSETNX", core->names.meta, "shards", std::to_string(core->options.shards)},
      [&](Result<Reply> r) { meta.emplace(std::move(r)); });
  wait(meta);
  if (!meta->is_ok()) return meta->status();
  const bool first_start = meta->value().integer == 1;
  meta.reset();
  core->client.run(redis::key_slot(core->names.meta), Command{"HGET", core->names.meta, "shards"},
                   [&](Result<Reply> r) { meta.emplace(std::move(r)); });
  wait(meta);
  if (!meta->is_ok()) return meta->status();
  core->shards = static_cast<std::uint32_t>(to_int(meta->value().str));
  if (core->shards == 0) return Status(Code::kCorruption, "dq:meta holds no shard count");
  if (core->shards != core->options.shards) {
    spdlog::warn(
        "the cluster's layout has {} shards (set at its first start); --redis-shards {} "
        "is ignored",
        core->shards, core->options.shards);
  }
  if (Status s = check_layout(*core, first_start, wait); !s.is_ok()) return s;

  std::optional<Status> conf;
  core->load_conf([&](Status s) { conf = std::move(s); });
  wait(conf);
  if (!conf->is_ok()) return *conf;

  std::weak_ptr<Core> weak = core;
  core->client.subscribe(
      std::string(core->names.events),
      [weak](std::string payload) {
        auto self = weak.lock();
        if (!self) return;
        if (payload.starts_with("r ") || payload.starts_with("t ")) {
          self->older_node_heard = SteadyClock::now();
        }
        self->on_event(payload);
      },
      [weak] {
        auto self = weak.lock();
        if (!self) return;
        // Messages may have been lost while unsubscribed: look everywhere again.
        for (auto& [tube, h] : self->hints) self->forget_heads(h);
        self->pump();
        for (auto& [shard, own] : self->owned) self->fire(shard);
      });
  std::vector<std::string> channels;
  for (std::uint32_t shard = 0; shard < core->shards; ++shard) {
    channels.push_back(shard_channel(core->options.prefix, shard));
  }
  core->client.subscribe_shards(
      std::move(channels),
      [weak](std::size_t, std::string payload) {
        if (auto self = weak.lock()) self->on_event(payload);
      },
      [weak](std::size_t index) {
        auto self = weak.lock();
        if (!self) return;
        // The shard's messages may have been lost while unsubscribed: look there again.
        const auto shard = static_cast<std::uint32_t>(index);
        for (auto& [tube, h] : self->hints) Core::forget_head(h, shard);
        self->pump();
        if (self->owned.contains(shard)) self->fire(shard);
      });
  core->lease_tick();
  core->resync();
  io.restart();
  spdlog::info("redis: {} primaries, {} shards, node {}", core->client.primaries().size(),
               core->shards, core->node);
  return std::unique_ptr<RedisBroker>(new RedisBroker(std::move(core)));
}

RedisBroker::~RedisBroker() {
  core_->closed = true;
  core_->replica_timer.cancel();
  core_->report_timer.cancel();
  core_->lease_timer.cancel();
  core_->resync_timer.cancel();
  for (auto& [shard, own] : core_->owned) own.timer->cancel();
  // Requests under way hold the core through their completions, and the client's connections
  // hold those: closing them breaks the cycle.
  core_->client.close();
}

std::unique_ptr<broker::Session> RedisBroker::open_session(broker::SessionOptions options) {
  return std::make_unique<RedisSession>(core_, options);
}

void RedisBroker::set_draining(bool draining) {
  core_->draining = draining;
}
bool RedisBroker::draining() const {
  return core_->draining;
}
Status RedisBroker::health() const {
  if (core_->out_of_memory) {
    return {Code::kNoSpace, "Redis is out of memory (over its maxmemory): writes are refused"};
  }
  if (core_->draining) return {Code::kDraining, "draining"};
  // No heartbeat answered for a whole lease: Redis is out of reach (and this node's shards may
  // be another's by now).
  const auto silent = SteadyClock::now() - core_->last_heartbeat;
  if (silent > core_->options.lease) {
    return {Code::kIOError,
            "Redis has not answered for " +
                std::to_string(std::chrono::duration_cast<std::chrono::seconds>(silent).count()) +
                " s"};
  }
  return Status::ok();
}
broker::Seconds RedisBroker::uptime() const {
  return std::chrono::duration_cast<broker::Seconds>(SteadyClock::now() - core_->started);
}
broker::Metrics& RedisBroker::metrics() {
  core_->metrics.shard_channels_subscribed =
      static_cast<std::int64_t>(core_->client.shard_channels_subscribed());
  return core_->metrics;
}

std::vector<std::pair<std::string, Webhook>> RedisBroker::webhooks() const {
  return {core_->webhook_map.begin(), core_->webhook_map.end()};
}
bool RedisBroker::delivers(std::string_view tube) const {
  return core_->owned.contains(core_->delivery_shard(std::string(tube)));
}

void RedisBroker::on_webhooks_changed(std::function<void()> handler) {
  core_->webhooks_handler = std::move(handler);
}

Status RedisBroker::close() {
  // Hand the leases back so that other nodes fire these shards at once rather than after the
  // lease runs out, and leave the live nodes, so that the others count their shares without
  // this one (sent, not waited for: the io_context may not run again). The message that leases
  // are free goes once the shards are: a node that hears it takes them at once.
  core_->resigned = true;
  core_->lease_timer.cancel();
  auto left = std::make_shared<std::size_t>(core_->owned.size() + 1);
  const auto announce = [core = core_, left](Result<Reply>) {
    if (--*left == 0) {
      core->client.run(redis::key_slot(core->names.events),
                       Command{"PUBLISH", core->names.events, "l"}, [](Result<Reply>) {});
    }
  };
  for (auto& [shard, own] : core_->owned) {
    own.timer->cancel();
    core_->call(shard, {"resign", core_->node}, false, announce);
  }
  core_->client.run(redis::key_slot(core_->names.nodes),
                    Command{"ZREM", core_->names.nodes, core_->node}, announce);
  core_->client.run(redis::key_slot(core_->names.waiting),
                    Command{"HDEL", core_->names.waiting, core_->node}, [](Result<Reply>) {});
  core_->owned.clear();
  return Status::ok();
}

const std::string& RedisBroker::node_name() const {
  return core_->node;
}
std::uint32_t RedisBroker::shards() const {
  return core_->shards;
}
std::size_t RedisBroker::owned_shards() const {
  return core_->owned.size();
}

}  // namespace delayq::redis_broker
