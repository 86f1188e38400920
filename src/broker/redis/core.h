// core.h — the inside of the Redis broker, shared by its files: one Core per node, on the
// io_context's thread, holding what the node knows (each tube's best ready job per shard, the
// reserves waiting here, the shards it owns, the tubes' settings) and the calls that change it.
// Its rooms, one file each:
//   calls.cc        jobs.lua on a shard, replica WAIT, puts gathered per turn, the trickle
//   waking.cc       reserves: waiting, trying shards, probe rounds, DEADLINE_SOON, timeouts
//   leases.cc       heartbeats, leases and fencing, firing, the channels' messages, resync
//   tube_config.cc  webhooks, pauses and max attempts as every node reads them
//   session.cc      a client's session: tubes, job calls (handle.cc: what it shares with admin.cc)
//   admin.cc        the server-wide calls: tube and server stats, pauses, webhooks
//   redis_broker.cc opening (checks, layouts, subscriptions) and the Broker surface
// Redis is reached only through a Caller and time only through a Clock (caller.h, timing/clock.h),
// so the unit tests run a Core over a scripted Redis and a clock they move by hand. The design:
// docs/redis-mode.md
#pragma once

#include <algorithm>
#include <bit>
#include <boost/asio/io_context.hpp>
#include <cmath>
#include <deque>
#include <functional>
#include <list>
#include <map>
#include <memory>
#include <numeric>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "base/names.h"
#include "broker/redis/caller.h"
#include "broker/redis/layout.h"
#include "broker/redis/redis_broker.h"
#include "broker/redis/replies.h"
#include "redis/slot.h"
#include "timing/coarse_timers.h"

namespace delayq::broker::redis {
namespace asio = boost::asio;
using broker::Callback;
using delayq::redis::Command;
using delayq::redis::Reply;
using delayq::redis::ReplyType;
using timing::Clock;
using timing::CoarseTimers;
using timing::SteadyClock;
using timing::SteadyTime;
using timing::Timer;

struct Pause {
  std::int64_t until_unix_ms = 0;
  std::int64_t seconds = 0;
  std::uint64_t count = 0;
};

// What a session's reserves need of it: who it is in Redis, and the jobs it holds with their
// TTR deadlines (for DEADLINE_SOON), kept by the session as replies come.
struct SessionState {
  std::string holder;  // "<node>/<n>", or "*/<name>" shared by the sessions of that name
  bool alive = true;
  struct Held {
    SteadyTime deadline;
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

  // When the first held job enters its last second (nullopt: none will), as of `now`.
  [[nodiscard]] std::optional<SteadyTime> soon_at(SteadyTime now) const {
    std::optional<SteadyTime> first;
    for (const auto& [id, job] : held) {
      if (job.deadline <= now) continue;  // lapsed: no longer held
      const auto at = job.deadline - std::chrono::seconds(1);
      if (!first || at < *first) first = at;
    }
    return first;
  }
  [[nodiscard]] bool deadline_soon(SteadyTime now) const {
    const auto at = soon_at(now);
    return at && *at <= now;
  }
  // A delete's prefetch: the tubes it reserves from, and their generations as the call leaves.
  struct PrefetchCall {
    std::vector<std::string> tubes;
    std::vector<std::uint32_t> generations;
  };
  // This session's delete gathered this turn and not sent yet, without a prefetch (its turn, its
  // place in Core::pending_erases): a reserve pipelined behind it rides with it.
  struct QueuedErase {
    std::uint64_t turn = 0;
    std::uint32_t shard = 0;
    std::size_t index = 0;
    std::shared_ptr<PrefetchCall> prefetch;
  };
  std::optional<QueuedErase> queued_erase;
  // A prefetch (RedisBrokerOptions::prefetch): the job a delete reserved for this session's
  // next reserve (held, and in `held`), when that was, and the deadline that gives it back;
  // `prefetching` while such a delete's call is under way, and a reserve that came meanwhile (a
  // pipelined one), which waits for its answer.
  std::optional<broker::Job> prefetched;
  SteadyTime prefetched_at;
  CoarseTimers::Id give_back_at = 0;
  bool prefetching = false;
  std::function<void()> after_prefetch;

  void hold(const broker::Job& job, SteadyTime now) {
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
  std::optional<SteadyTime> deadline;
  SteadyTime began{};  // when the reserve came
  Callback<broker::Job> done;
  std::unique_ptr<Timer> timer;
  // At the deadline, and while Redis answers after it (keep_deadline()): answers TIMED_OUT
  // even with calls still under way, once Redis is silent. Core::coarse's.
  CoarseTimers::Id late = 0;
  std::optional<std::uint64_t> answered_seen;  // ClientStats::answered at the last such look
  void stop_timers(CoarseTimers& coarse) {
    if (timer) timer->cancel();
    coarse.cancel(std::exchange(late, 0));
  }
  bool trying = false;
  bool again = false;           // a shard became worth trying while it tried
  bool probed = false;          // this try asked the shards whose heads were unknown
  std::uint64_t probed_at = 0;  // then, as Core::looks_again counted
  std::uint32_t misses = 0;     // shards this try found with no job as good as the node thought
  bool rescanned = false;       // let in every message sent before answering DEADLINE_SOON or
                                // TIMED_OUT (give_up())
  bool finished = false;
  bool handed = false;  // carried by a firing or put under way: still waiting, as clients see
  std::uint64_t puts_before = 0;  // the session's puts made before this reserve (SessionState)
  // Its place in Core::waiters while listed there (Core::list(), unlist()), and in the list of
  // each of its tubes (Core::waiters_of); its rank in the order they came (Core::arrivals).
  std::list<std::shared_ptr<Waiter>>::iterator place;
  std::vector<std::pair<std::string, std::list<std::shared_ptr<Waiter>>::iterator>> tube_places;
  std::uint64_t arrival = 0;
  bool listed = false;
};

// A tube's best ready job in each shard, as the node knows it (a reserve tries the shard with
// the best first): set by the shards' answers and by messages. A generation per shard tells an
// answer whether a message came while it was on its way (after_answer()). `trying` counts the
// reserves of the tube under way in each shard: a message while one is wakes nobody more (its
// answer says what the shard has left).
// The shards a tube's best may be in (a job, or unknown) are kept as bits too, so that a reserve
// walks those and not every shard: at 16,384 shards, walking them all was most of a node's CPU.
class Hint {
 public:
  // Every shard's best unknown.
  explicit Hint(std::uint32_t shards)
      : generation(shards, 0),
        trying(shards, 0),
        depth(shards, 0),
        heads_(shards),
        live_((shards + 63) / 64, 0) {
    for (std::uint32_t shard = 0; shard < shards; ++shard) live_[shard / 64] |= bit(shard);
  }
  [[nodiscard]] const Head& head(std::uint32_t shard) const { return heads_[shard]; }
  void set(std::uint32_t shard, const Head& head) {
    const bool was = heads_[shard].kind != Head::Kind::kNone;
    const bool is = head.kind != Head::Kind::kNone;
    heads_[shard] = head;
    if (was != is) live_[shard / 64] ^= bit(shard);
  }
  // Whether some shard's best is a job or unknown.
  [[nodiscard]] bool any() const {
    return std::any_of(live_.begin(), live_.end(), [](std::uint64_t word) { return word != 0; });
  }
  // Those shards, a bit each (shard s is bit s % 64 of word s / 64).
  [[nodiscard]] const std::vector<std::uint64_t>& live() const { return live_; }

  std::vector<std::uint32_t> generation;
  std::vector<std::uint32_t> trying;
  // How many ready jobs the shard's last answer said it held, up to 8 (0: not said): so many
  // reserves may go there at once (attempt()).
  std::vector<std::uint32_t> depth;
  // When a job of the tube last came ready in any shard, as a call's answer or a message said
  // (or a firing handed one out): the tubes whose reserves a firing carries (handed_to_call()).
  SteadyTime readied_at{};
  // Whether the shard is known to hold a job of the tube that no reserve here is taking.
  [[nodiscard]] bool untaken_job(std::uint32_t shard) const {
    return heads_[shard].known() && trying[shard] == 0;
  }
  // Shards where another node's message ('h') made the known best worse than a job known: that
  // message may be older than the answer the job was known from, so the node's own message of
  // the job, if it comes, restores it (heard_ready()). An answer (learn()) clears it.
  std::set<std::uint32_t> lowered;

 private:
  static std::uint64_t bit(std::uint32_t shard) { return std::uint64_t{1} << (shard % 64); }
  std::vector<Head> heads_;
  std::vector<std::uint64_t> live_;
};

// Calls `f(shard)` for each shard whose bit is set in `bits` (as Hint::live()), in order.
template <typename F>
void for_each_shard(const std::vector<std::uint64_t>& bits, F&& f) {
  for (std::size_t word = 0; word < bits.size(); ++word) {
    for (std::uint64_t left = bits[word]; left != 0; left &= left - 1) {
      f(static_cast<std::uint32_t>(word * 64 + static_cast<std::size_t>(std::countr_zero(left))));
    }
  }
}

struct Owned {
  std::int64_t epoch = 0;
  std::unique_ptr<Timer> timer;
  std::optional<SteadyTime> armed_at;  // when `timer` fires the shard, if it is armed
  bool firing = false;
  bool again = false;
  // Redis's clock ahead of the steady clock, in milliseconds, as the shard's answers (firings,
  // looks) showed it, and when: the largest of those within two looks' time, each being short
  // by its answer's way back. A timer told on the shard's channel is armed from it
  // (RedisBroker::Core::told_timer()), without a call.
  double redis_ahead_ms = 0;
  std::optional<SteadyTime> redis_clock_seen;
  // The last firing's answer was lost: the next hands no waiter a job, so that an outage
  // does not have every firing reserve jobs nobody gets (given back once Redis answers the
  // node's `lost` call: note_lost()).
  bool failed = false;
};

struct TubeUse {
  std::uint64_t using_clients = 0;
  std::uint64_t watching = 0;
};

struct RedisBroker::Core : std::enable_shared_from_this<RedisBroker::Core> {
  // Over `client` (client_caller(), or a test's fake) and `clock` (system_clock(), or a test's).
  Core(asio::io_context& io_in, RedisBrokerOptions options_in, std::unique_ptr<Caller> client_in,
       std::shared_ptr<Clock> clock_in);

  // --- calls: jobs.lua on a shard (write: wait for a replica, as the options say). A call
  // whose answer is lost (a connection broke after it was sent) is sent again by the client
  // (Request::send_again): one that changes something carries a number, under which jobs.lua
  // keeps its answer until the node has it, and answers it again rather than run twice.
  void call(std::uint32_t shard, std::vector<std::string> args, bool write,
            std::function<void(Result<Reply>)> done);
  std::uint64_t calls_made = 0;
  std::optional<ShardKeys> keys_named;  // what call() names, made at its first call
  // jobs.lua calls made, by op (call(), call_across_slots(), the heartbeat): /metrics.
  std::map<std::string, std::uint64_t, std::less<>> calls_by_op;
  // Per shard, ",<number>" for each call answered since the shard's last call was made; and
  // when a call last said to keep the shard's answers for another minute.
  std::unordered_map<std::uint32_t, std::string> answers_had;
  std::unordered_map<std::uint32_t, SteadyTime> answers_refreshed;
  static constexpr std::chrono::seconds kAnswersRefresh{10};
  static constexpr std::size_t kMostForgotten = 256;  // answers a call says the node has
  // Numbered calls that failed (no answer within the request's time: Redis stopped, swamped
  // or cut off) may have run, or may still run once Redis reads them. The node asks the shard
  // what became of them (jobs.lua's `lost`, kMostLostAsked at a time, again a second after an
  // ask that failed): a call that ran gives back at once the jobs it reserved for waiters
  // here, which never got them (a firing's, a put's, a reserve's, a prefetch's); a call that
  // had not run is voided, so that it never runs after the node gave up on it, for as long as
  // the node's kept answers live there. Voided numbers are forgotten after kVoidedLife.
  struct LostCall {
    std::string number;
    std::string op;
    std::vector<std::string> holders;  // whom the call may reserve jobs for (holders_of())
  };
  void note_lost(std::uint32_t shard, LostCall lost);
  void ask_lost(std::uint32_t shard);
  void forget_voided();                                                 // at each resync
  std::unordered_map<std::uint32_t, std::vector<LostCall>> lost_calls;  // not asked yet
  std::set<std::uint32_t> asking_lost;  // shards with a `lost` call under way
  struct Voided {
    SteadyTime at;
    std::uint32_t shard;
    std::string number;
  };
  std::deque<Voided> voided;
  static constexpr std::chrono::minutes kVoidedLife{10};
  std::uint64_t lost_ran = 0;      // lost calls found to have run (/metrics)
  std::uint64_t lost_void = 0;     // and found not to have, voided
  std::uint64_t lost_unknown = 0;  // the kept answers gone (expired): nothing to go by
  static constexpr std::size_t kMostLostAsked = 100;
  // The shard of the next turn's keyless puts: turns take the shards in order.
  std::uint32_t next_shard() { return static_cast<std::uint32_t>(rotor++ % shards); }
  // The calls the node makes for itself in bursts (every 5 s the probes for lost messages; a call
  // a shard where a renewal or a look across slots could not serve it), sent a few
  // at a time (kTrickle every kTrickleGap, more when there are more than kTrickleSteps times
  // that, so that a burst is sent within kTrickleSteps gaps), so that a burst never stands in a
  // primary's queue in front of the calls clients wait for (firings, reserves, deletes), which
  // share its connections. By time, not by answers: a primary that stops answering holds up no
  // other's.
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
  // --- deletes by id: those made in one turn go together too, one call per shard (erasemany),
  // each with its prefetch's tubes (none: no prefetch) and the bound that goes with them.
  struct PendingErase {
    std::vector<std::string> args;            // holder id bound k tube...
    std::function<void(Result<Reply>)> done;  // with erase's reply for this one
  };
  // Its place among the shard's pending deletes.
  std::size_t queue_erase(std::uint32_t shard, PendingErase erase);
  void flush_erases();
  std::map<std::uint32_t, std::vector<PendingErase>> pending_erases;
  std::uint64_t erase_turn = 0;  // counts flush_erases(): a queued delete's turn
  // Puts and deletes gathered this turn are sent at its end (once a turn).
  void post_flush();

  // Whether the primary of `slot` has a replica in sync, as INFO replication last said (CLUSTER
  // SLOTS leaves out replicas that have not replicated a byte yet, so it cannot tell).
  [[nodiscard]] bool replicated(std::uint16_t slot) const;
  void check_replicas(std::function<void()> done);

  // --- waking reserves
  Hint& hint(const std::string& tube);
  void notify_ready(std::uint32_t shard, const std::string& tube, const Head& head,
                    bool wake_one = true);
  // Kicks under way (listing or kicking), by tube: the reserves their calls would wake wait for
  // the kick's end, so that each takes the best job of all kicked, not the first shard's
  // (protocol.md).
  std::map<std::string, std::size_t, std::less<>> kicks_under_way;
  std::map<std::string, std::size_t, std::less<>> wakes_held;
  void kick_started(const std::string& tube);
  void kick_ended(const std::string& tube);
  // --- the hand-over of a job another node's call made ready (its message): one node at a time
  // looks, in an order every node computes alike from the job (turn_after()), each passing the
  // turn on (a "p" message) when it has no reserve of the tube waiting idle.
  void heard_ready(std::uint32_t shard, const std::string& tube, std::string_view from,
                   std::string_view head);
  // The tube's best in the shard changed for the worse by another node's call (it took one).
  void heard_head(std::uint32_t shard, const std::string& tube, std::string_view from,
                  std::string_view head);
  void start_round(std::uint32_t shard, const std::string& tube, std::string_view from,
                   std::string_view head);
  void wake_known();
  // Says on the node-wide channel that this node has reserves of the tube ("w"), for the nodes
  // that left it out of the tube's turns.
  void say_waiting_for(const std::string& tube);
  void take_turn(std::uint32_t shard, const std::string& tube, std::string_view from,
                 std::string_view head);
  // The live node whose turn comes after `after` (the first: after none), leaving out `from`
  // and the tube's nodes without waiters.
  [[nodiscard]] std::optional<std::string> turn_after(std::uint32_t shard, const std::string& tube,
                                                      std::string_view from, std::string_view head,
                                                      const std::string* after) const;
  // Whether every live node takes turns (a name ending in kTakesTurns); else, while a node of an
  // older version is live, a message wakes a reserve on every node, as that version expects.
  [[nodiscard]] bool taking_turns() const;
  static constexpr std::string_view kTakesTurns = "+h";
  // Per tube, the nodes that passed a turn at one of its jobs with no reserve of it ever asked
  // for (no hint): left out of its rounds until they say they have one ("w" on the node-wide
  // channel, sent as a node makes a tube's hint), so a node without workers of a tube costs
  // its jobs no hop.
  std::map<std::string, std::set<std::string>, std::less<>> without_waiters;
  void notify_readied(std::uint32_t shard, const Reply& readied);
  void learn(std::uint32_t shard, const std::vector<std::string>& tubes,
             const std::vector<std::uint32_t>& generations, const std::vector<Reply>& answer,
             std::size_t at);
  // Every shard's best of the tube unknown; an answer on its way must not undo that.
  void forget_heads(Hint& h) {
    for (std::uint32_t shard = 0; shard < shards; ++shard) forget_head(h, shard);
  }
  static void forget_head(Hint& h, std::uint32_t shard) {
    h.set(shard, Head{});
    ++h.generation[shard];
  }
  // A reserve of the tubes ended without its answer (an error, or its waiter went away): a
  // message it held back (notify_ready) goes to another waiter.
  void pass_on(const std::vector<std::string>& tubes);
  // `untaken`: leaving out the tubes another reserve here is trying in the shard; with `deep`,
  // only those that as many are trying as the shard last said it held ready jobs of.
  [[nodiscard]] static Head best_of(const std::vector<const Hint*>& tubes, std::uint32_t shard,
                                    bool untaken = false, bool deep = false);
  // Returns how many it started.
  std::size_t wake(const std::string& tube, std::size_t count);
  void pump();
  void try_reserve(const std::shared_ptr<Waiter>& waiter);
  void attempt(const std::shared_ptr<Waiter>& waiter);
  // How long a waiter waits for the shards it probes once another is known to hold a job.
  static constexpr std::chrono::milliseconds kProbePatience{200};
  // Tries again the waiters that waited for a reserve call to the shard to answer.
  void resume_deferred(std::uint32_t shard);
  void finish(const std::shared_ptr<Waiter>& waiter, Result<broker::Job> result);
  // A reservation nobody got (its reserve gone, its answer lost) made ready again at once,
  // uncounted: no attempt of the job was used.
  void undo_reservation(const std::string& holder, const broker::Job& job);
  // A reservation given back (a closed session's, a prefetch undone): its `release` call.
  void give_back_reservation(const std::string& holder, JobId id, std::uint32_t reserves,
                             bool undo);
  // The jobs script's calls sent and not yet answered: a stopping node waits for them
  // (RedisBroker::settle()), since an answer may carry a reservation for a session that has
  // gone, which is then given back by one more call.
  std::size_t calls_under_way = 0;
  // A waiter's first try: its session's prefetched job if it fits (else that is given back),
  // or try_reserve(). A pipelined reserve waits for its delete's prefetch first.
  void start(const std::shared_ptr<Waiter>& waiter);
  // --- prefetch (RedisBrokerOptions::prefetch; the session's side in session.cc)
  // Whether a reserve at rest here (waiting, no call of its own under way) wants any of the
  // tubes.
  [[nodiscard]] bool waited_for(const std::vector<std::string>& tubes) const;
  // For a delete's prefetch of the tubes in `shard`: the best job known in the other shards (its
  // head's text, "" for none), or nullopt if the shard is known to hold none of them.
  [[nodiscard]] std::optional<std::string> prefetch_bound(const std::vector<std::string>& tubes,
                                                          std::uint32_t shard);
  // A delete's call in `shard` (made or still gathered) takes the session's next job from
  // `tubes` too, if the shard may hold one as good as the others' (prefetch_bound()): `call`
  // gets the tubes, the shard's tries count them and the session is prefetching. The bound for
  // the call's arguments, or nullopt (no prefetch).
  std::optional<std::string> begin_prefetch(SessionState& session, std::uint32_t shard,
                                            std::vector<std::string> tubes,
                                            SessionState::PrefetchCall& call);
  // The session's prefetched job, ready again where it was and its reserve uncounted.
  void give_back(SessionState& session);
  // The answer of a delete that prefetched from the tubes in `shard` (their generations as it
  // left): what the shard holds next is learnt, and the job it reserved, if any, is held for the
  // session until its next reserve or the hold's end (given back at once if the session is gone).
  void prefetch_answered(const std::shared_ptr<SessionState>& session, std::uint32_t shard,
                         const std::vector<std::string>& tubes,
                         const std::vector<std::uint32_t>& generations, const Result<Reply>& reply);
  void give_up(const std::shared_ptr<Waiter>& waiter);
  void keep_deadline(const std::shared_ptr<Waiter>& waiter);
  // The waiter's `late` look at `at`: TIMED_OUT then, unless Redis answered since the last
  // look (keep_deadline()).
  void arm_late(const std::shared_ptr<Waiter>& waiter, SteadyTime at);
  // No heartbeat answered for more than half a lease: Redis is taken as out of reach, and
  // reserves stop waiting for calls that will not come back.
  [[nodiscard]] bool out_of_reach() const {
    return clock->steady_now() - last_heartbeat > options.lease / 2;
  }
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
  // The tubes' generations in the shard, as a call that leaves now carries them (learn()).
  [[nodiscard]] std::vector<std::uint32_t> generations_at(const std::vector<std::string>& tubes,
                                                          std::uint32_t shard) {
    std::vector<std::uint32_t> generations;
    for (const auto& tube : tubes) generations.push_back(hint(tube).generation[shard]);
    return generations;
  }
  // One shard's probe call of a round, and what its answer teaches.
  void probe_one(const std::shared_ptr<ProbeRound>& round, std::uint32_t shard);
  // The same for shards of one primary, in one call across slots (probe_all).
  void probe_together(const std::shared_ptr<ProbeRound>& round, std::vector<std::uint32_t> part);
  // A shard of the round answered: the round ends when all have.
  void probed(const std::shared_ptr<ProbeRound>& round, std::uint32_t shard);
  // The tubes not paused, of the waiter's or of `tubes`.
  [[nodiscard]] std::vector<std::string> open_tubes(const Waiter& waiter) const {
    return open_tubes(waiter.tubes);
  }
  [[nodiscard]] std::vector<std::string> open_tubes(const std::vector<std::string>& tubes) const;
  // The shards where some hinted tube's best is a job or unknown (as Hint::live()): the others
  // have none to give.
  [[nodiscard]] std::vector<std::uint64_t> may_hold(const std::vector<const Hint*>& hinted) const;
  // Whether some shard is known to hold a job of the waiter's open tubes.
  [[nodiscard]] bool holds_a_job(const Waiter& waiter);
  // A waiter waiting for a round of probes (attempt()): it goes on at the round's end, or at the
  // patience's (kProbePatience) once a job is known.
  struct ProbeWait {
    std::shared_ptr<Waiter> waiter;
    bool known = false;  // a shard was known to hold a job as the round began
    bool moved_on = false;
    CoarseTimers::Id patience = 0;
  };
  void arm_patience(const std::shared_ptr<ProbeWait>& wait);
  void go_on(ProbeWait& wait);
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
  // Nodes of a version from before the shard channels subscribe to none: more live nodes than
  // shard 0's channel has subscribers means one of them is live (older_node_live), before any
  // message of it is heard. Asked after each heartbeat (PUBSUB SHARDNUMSUB) while a live node's
  // name does not say it takes turns.
  void count_subscribers();
  bool older_node_live = false;
  // Takes free shards of `parts` (per_primary() of the node's rotation), one call across slots
  // at a time from `index`, until the node holds its share (share(), as of the latest heartbeat:
  // a node that joined meanwhile lowers it; each call takes at most what is left of it). A
  // shard that a part's primary does not serve (the map is behind) goes at the end, alone, by
  // a call that follows MOVED. The shards a call took are looked at together (look_together()),
  // which fires those with a timer due and arms the others, rather than fired one by one. One
  // node over 16,384 shards held them all about 4 s after its start taking them a call a shard
  // and firing each (BENCHMARKS.md, "Taking the leases").
  void acquire(std::vector<std::vector<std::uint32_t>> parts, std::size_t index);
  // The shards each live node should fire: all of them over the live nodes, rounded up.
  [[nodiscard]] std::size_t share() const {
    const std::size_t alive = std::max<std::size_t>(1, live.size());
    return (shards + alive - 1) / alive;
  }
  // Renews the leases held, at the epochs held: calls of kShardsPerCall shards that one primary
  // serves, each shard such a call did not renew by a call of its own.
  static constexpr std::size_t kShardsPerCall = 64;
  // `items` in parts of at most kShardsPerCall, each part's shards (shard_of(item)) served by one
  // primary, as the map says now: what one call across slots may cover.
  template <typename T, typename ShardOf>
  [[nodiscard]] std::vector<std::vector<T>> per_primary(const std::vector<T>& items,
                                                        ShardOf shard_of) const {
    std::map<std::string, std::vector<T>> by_primary;
    for (const T& item : items) {
      by_primary[client->primary_of(
                     delayq::redis::key_slot(shard_base(names.prefix, shard_of(item))))]
          .push_back(item);
    }
    std::vector<std::vector<T>> parts;
    for (auto& [primary, all] : by_primary) {
      for (std::size_t from = 0; from < all.size(); from += kShardsPerCall) {
        const auto to = std::min(all.size(), from + kShardsPerCall);
        parts.emplace_back(all.begin() + static_cast<std::ptrdiff_t>(from),
                           all.begin() + static_cast<std::ptrdiff_t>(to));
      }
    }
    return parts;
  }
  // jobs.lua's `args` on the shards named in them, through the registration that may touch keys
  // of other slots, routed by `first`'s owner key; done with the op's reply. Such calls of one
  // op go to each primary one at a time, the next once the one before was answered, so that
  // Redis runs other clients' commands between them and none waits behind more than one of
  // each op (about 0.6 ms at kShardsPerCall). Measured at 16,384 shards: 32 calls of 512
  // shards, sent 8 at a time, held Redis for up to 100 ms, and jobs due then fired that late.
  // One lane per op: renewals never wait behind a look whose answer is slow to come.
  struct AcrossSlotsOptions {
    bool every_key = false;  // the call's keys are all of `first`'s (each names the others')
    std::string lane;        // the lane, if not the op's (a read's own: reads wait for no other)
    std::function<bool()> wanted;  // a call whose turn comes when this says no is not sent
  };
  void call_across_slots(std::uint32_t first, std::vector<std::string> args,
                         std::function<void(Result<Reply>)> done, AcrossSlotsOptions how);
  void call_across_slots(std::uint32_t first, std::vector<std::string> args,
                         std::function<void(Result<Reply>)> done);
  std::uint64_t read_lanes = 0;  // numbers each read's lane
  // A group's listing ("0") or count ("n"), not its cancel.
  [[nodiscard]] static bool group_read(const std::vector<std::string>& args) {
    return args.front() == "group" && args.size() > 3 && (args[3] == "0" || args[3] == "n");
  }
  // Whether a read of every shard goes in calls across slots (jobs.lua's each): stats, a peek at
  // the next job, what a kick would take, a group's listing or count. A shard whose walk of its
  // timers (to a tube's delayed jobs) would cost more than a call's rows is asked alone.
  [[nodiscard]] static bool read_across_slots(const std::vector<std::string>& args) {
    const std::string& op = args.front();
    return op == "stats" || op == "peek_next" || op == "kickable" || group_read(args);
  }
  // The rows of replies such a call reads before it leaves the rest of its shards to the next,
  // a shard counting its rows and one: a row cost Redis about 9 us (a tube's stats), a shard
  // about 8 us in an each (10 to 13 us in a call of its own), so about 1 ms of Redis a call.
  static constexpr std::size_t kRowsPerRead = 112;
  struct AcrossSlots {
    bool busy = false;
    std::deque<std::function<void()>> waiting;
  };
  using Lane = std::pair<std::string, std::string>;  // {primary, op}
  std::map<Lane, AcrossSlots> across_slots;
  void next_across_slots(const Lane& lane);
  // A new round of `op` (every shard's renewal, or look) makes the calls of the one before that
  // still wait to be sent needless: they are dropped, so that a primary slow to answer gathers
  // no queue.
  void new_round_across_slots(const std::string& op) {
    for (auto& [lane, calls] : across_slots) {
      if (lane.second == op) calls.waiting.clear();
    }
  }
  void renew_held();
  void renew_together(std::vector<std::pair<std::uint32_t, std::int64_t>> held);
  void renew(std::uint32_t shard, std::int64_t epoch);
  // Every shard's earliest timer, the same way (look_all): the overdue gauge, and for a shard
  // held, a firing if it is due or its timer armed earlier if the owner's is later. A shard such
  // a call could not look at is asked by a call of its own (look_alone()).
  void look_together(std::vector<std::uint32_t> part);
  void look_alone(std::uint32_t shard);
  // The shards this node owns forget their tubes that have held nothing for
  // options.forget_empty_tubes (jobs.lua's tidy_all), in calls of up to kShardsPerCall shards
  // of one primary, each looking at about kTubesPerTidy tubes (0.5 to 2.7 ms of Redis);
  // the shards a call left or did not finish go in the next. resync() calls it, at most every
  // sixth of that time.
  void tidy_owned();
  void tidy_together(std::vector<std::uint32_t> part);
  static constexpr std::size_t kTubesPerTidy = 100;
  std::optional<std::chrono::steady_clock::time_point> last_tidy;
  void looked(std::uint32_t shard, std::int64_t earliest_ms, double now_ms);
  // An answer of `own`'s shard said Redis's present was `now_ms` (received just now). The
  // largest within two looks' time (look_period()) is kept.
  void saw_redis_clock(Owned& own, double now_ms);
  // A message said the owned `shard` has a timer at `at_ms` (Redis's clock) earlier than its
  // owner was to look: armed for it by the shard's clock as last seen. Fired at once instead
  // when that clock is older than three looks (or unknown: the shard just taken, its channel
  // subscribed again), while its slot migrates, when the time has come, or when a firing is
  // under way (whose answer may name a later timer: fired again once it answers).
  void told_timer(std::uint32_t shard, double at_ms);
  // How often every shard is looked at (resync()).
  [[nodiscard]] std::chrono::microseconds look_period() const {
    return std::max<std::chrono::microseconds>(options.resync * 5, Millis{1000});
  }
  // The overdue gauge of `shard`: how far its earliest timer (< 0: none) is behind the present,
  // both in milliseconds on Redis's clock.
  void set_overdue(std::uint32_t shard, double earliest_ms, double now_ms) {
    if (shard < shard_overdue.size()) {
      shard_overdue[shard] =
          earliest_ms >= 0 && earliest_ms < now_ms ? (now_ms - earliest_ms) / 1000 : 0.0;
    }
  }
  void fire(std::uint32_t shard);
  // The reserves a firing or a put may hand jobs to (fire(), flush_puts()), marked as trying:
  // for a put, reserves of `only` (its ready jobs' tubes); for a firing, reserves of the tubes
  // whose jobs came ready here in the last kReadiedLately, or while no tube's did, the longest
  // waiting. So reserves of a tube that never fires, however long they have waited, do not take
  // the places of the workers a firing's jobs are for.
  std::vector<std::shared_ptr<Waiter>> handed_to_call(std::vector<std::string>& args,
                                                      const std::set<std::string>* only = nullptr);
  static constexpr Millis kReadiedLately{10'000};
  // After that call: each waiter gets its job (`served`, a job reply or nil), or goes on.
  void after_handing(const std::vector<std::shared_ptr<Waiter>>& handed, const Reply* served);
  void arm_fire(std::uint32_t shard, std::chrono::microseconds delay);
  // From Redis's present `now_ms` to a timer at `at_ms` (both as Redis's clock says, in
  // milliseconds with their fraction): at least 0, at most an hour (a job may be due in the
  // year 9999, which no steady clock's time point holds; a shard armed an hour ahead is fired
  // then, finds nothing due and is armed again).
  [[nodiscard]] static std::chrono::microseconds until_timer(double at_ms, double now_ms) {
    constexpr double kMostMs = 3'600'000;
    return std::chrono::microseconds{
        static_cast<std::int64_t>(std::ceil(std::clamp(at_ms - now_ms, 0.0, kMostMs) * 1000))};
  }
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

  // --- flow control: a tube with settings lives whole in its home shard (flow.lua), where one
  // script sees each group's reservations and turns; every shard's f says so.
  [[nodiscard]] std::uint32_t home_of(const std::string& tube) const {
    return shard_of_name(tube, "", shards);
  }
  // The shard where a job of the tube with this key lives, or would.
  [[nodiscard]] std::uint32_t key_shard(const std::string& tube, const std::string& key) const {
    return flows.contains(tube) ? home_of(tube) : shard_of_name(tube, key, shards);
  }
  // The home shard a call's answer sends it to ({'moved', home}: a tube pinned since this node
  // last read the settings, which it then reads again); nullopt for any other answer, or for a
  // home that is no other shard (the answer then stands, as an error).
  std::optional<std::uint32_t> moved_to(const Reply& answer, std::uint32_t shard);

  // --- tube configuration
  void load_conf(std::function<void(Status)> done);
  void publish_conf();
  void watch_pauses();

  asio::io_context& io;
  RedisBrokerOptions options;
  std::unique_ptr<Caller> client;
  std::shared_ptr<Clock> clock;
  delayq::redis::Script script;
  Names names;
  std::uint32_t shards = 0;
  std::string node;
  std::string subscribe_refused;  // the SSUBSCRIBE error last logged (resync())
  // When a job message last came on the node-wide channel: only nodes of an older version,
  // from before the shard channels, send them there (give_up() then trusts no channel).
  std::optional<SteadyTime> older_node_heard;
  // A node of an older version heard from in the last minute: it publishes on the node-wide
  // channel, over the cluster bus, which the shard connections' PINGs do not wait for.
  // Or one is live now (older_node_live).
  [[nodiscard]] bool older_node_recent() const {
    return older_node_live ||
           (older_node_heard && clock->steady_now() - *older_node_heard < std::chrono::minutes(1));
  }
  std::uint64_t sessions = 0;
  std::uint64_t rotor = 0;
  bool draining = false;
  bool closed = false;
  std::unique_ptr<metrics::Registry> own_metrics;  // when the options give none
  metrics::Registry& registry;
  metrics::Histogram& fire_lateness;
  // Jobs prefetched (RedisBrokerOptions::prefetch), by outcome: "taken" by the next reserve, or
  // "given_back".
  metrics::Counters& prefetches;
  // Per shard, how far its earliest timer (a delayed job's due time, a reservation's TTR end) is
  // behind the present, in seconds, 0 when none is; as this node last looked.
  std::vector<double> shard_overdue;
  // Recurring schedules (schedules.h) hear here when a lease is taken or lost, and when a
  // shard's channel says one of its schedules changed ('s').
  std::function<void(std::uint32_t shard)> on_ownership;
  std::function<void(std::uint32_t shard, std::string name)> on_schedule_changed;

  std::map<std::string, Webhook> webhook_map;
  std::map<std::string, Pause> pauses;
  std::set<std::string> ever_paused;  // every tube pauses has named
  std::map<std::string, std::uint32_t> max_attempts;
  std::map<std::string, FlowSettings, std::less<>> flows;  // every pinned tube's
  std::function<void()> webhooks_handler;
  std::map<std::string, TubeUse> uses;

  std::unordered_map<std::string, Hint> hints;
  // Counts the times every tube's heads in some shard were made unknown because messages may
  // have been missed (a channel subscribed, at the start too, or again; a pause ended), not
  // because a call failed: a try that probed before looks again (attempt()), where after a
  // failed probe it tries the unknown shards in turn.
  std::uint64_t looks_again = 0;
  std::list<std::shared_ptr<Waiter>> waiters;
  // In `waiters`, and out of it, in constant time (thousands may wait on a node).
  void list(const std::shared_ptr<Waiter>& waiter) {
    waiter->place = waiters.insert(waiters.end(), waiter);
    waiter->arrival = ++arrivals;
    waiter->tube_places.clear();
    for (const auto& tube : waiter->tubes) {
      if (std::any_of(waiter->tube_places.begin(), waiter->tube_places.end(),
                      [&](const auto& placed) { return placed.first == tube; })) {
        continue;  // named twice
      }
      auto& of = waiters_of[tube];
      waiter->tube_places.emplace_back(tube, of.insert(of.end(), waiter));
    }
    waiter->listed = true;
  }
  void unlist(const std::shared_ptr<Waiter>& waiter) {
    if (!std::exchange(waiter->listed, false)) return;
    waiters.erase(waiter->place);
    for (const auto& [tube, place] : waiter->tube_places) {
      const auto of = waiters_of.find(tube);
      of->second.erase(place);
      if (of->second.empty()) waiters_of.erase(of);
    }
    waiter->tube_places.clear();
  }
  // The waiters of each tube, longest waiting first: what a wake of the tube walks, so that a
  // node holding thousands of reserves of other tubes does not walk them for each job.
  std::unordered_map<std::string, std::list<std::shared_ptr<Waiter>>> waiters_of;
  std::uint64_t arrivals = 0;
  [[nodiscard]] const std::list<std::shared_ptr<Waiter>>& waiters_of_tube(
      const std::string& tube) const {
    static const std::list<std::shared_ptr<Waiter>> kNone;
    const auto it = waiters_of.find(tube);
    return it == waiters_of.end() ? kNone : it->second;
  }
  // Waiters (still trying) waiting for a reserve call of another to a shard to answer
  // (attempt()): shard -> waiters.
  std::unordered_map<std::uint32_t, std::vector<std::shared_ptr<Waiter>>> deferred;
  // Probe rounds under way, by the tubes they ask: who waits for the next, and the shards it
  // will ask (each that one of them asked for). By the tubes alone, not the shards too: while
  // Redis is out of reach each failed call makes one more shard unknown, and rounds keyed by
  // their shards would each start one of their own.
  struct NextProbe {
    std::vector<std::function<void(bool)>> dones;
    std::set<std::uint32_t> which;
  };
  std::unordered_map<std::string, NextProbe> probing;

  std::map<std::uint32_t, Owned> owned;
  std::set<std::string> live;      // as of the last heartbeat
  SteadyTime last_heartbeat;       // the last one answered
  bool heartbeat_failing = false;  // said once in the log when it starts, once when it ends
  // Warnings about shards, one line a second at most of each kind: an outage fails every
  // shard's calls at once, and a line for each (hundreds a node) would bury the log. Those held
  // back are counted in the next line of the kind.
  struct ShardWarnings {
    SteadyTime last{};
    std::size_t held = 0;
  };
  std::map<std::string, ShardWarnings, std::less<>> shard_warnings;
  void shard_warning(const std::string& what, std::uint32_t shard, const std::string& detail = {});
  bool out_of_memory = false;  // the last heartbeat was refused: Redis is over its maxmemory
  std::map<std::string, int> replicas;  // primary -> replicas online
  // primary -> until when writes do not WAIT for its replica (one did not answer in time)
  std::map<std::string, SteadyTime> no_wait_until;
  std::unique_ptr<Timer> replica_timer;
  // How many of this node's reserves wait, as last told to Redis (names.waiting), and whether a
  // report is due: reported 10 ms after a change, so that bursts cost one write.
  std::size_t reported_waiting = 0;
  bool report_due = false;
  std::unique_ptr<Timer> report_timer;
  void report_waiting();
  // The deadlines made and dropped at every request (a reserve's `late`, a prefetch's give-back),
  // met up to 10 ms late.
  std::unique_ptr<CoarseTimers> coarse;
  // Every kSweepEvery heartbeats, and at one that sees a node leave, the counts in
  // names.waiting of nodes not live are looked for; one not live at two looks in a row is
  // deleted (a node that crashed, seen or not).
  static constexpr int kSweepEvery = 30;
  int heartbeats_since_sweep = 0;
  std::set<std::string> not_live_waiting;  // found at the last look, or seen leaving since
  void sweep_waiting();
  // The layout's record (dq:meta: shards, layout), written again where it is missing: a Redis
  // that came back empty (no persistence, a FLUSHALL) would otherwise take the shard count of
  // the next node to start, splitting the nodes over two layouts. At every heartbeat.
  void keep_meta();
  [[nodiscard]] std::size_t waiting_here() const;
  bool leasing = false;    // a lease_tick's calls are under way
  bool walking = false;    // acquire() is under way: one walk at a time
  bool resigned = false;   // closing: leases handed back, none renewed or taken again
  bool announced = false;  // told the others this node joined (they rebalance at once)
  std::unique_ptr<Timer> lease_timer;
  std::unique_ptr<Timer> resync_timer;
  std::unique_ptr<Timer> conf_timer;  // at the end of the first pause to end
  SteadyTime started;
};

using Core = RedisBroker::Core;

}  // namespace delayq::broker::redis
