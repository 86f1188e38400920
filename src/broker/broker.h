// broker.h — the one contract between the front-ends (beanstalkd, HTTP) and the state they serve.
// A front-end opens a Session per client for its jobs, and an Admin for server-wide calls (tubes,
// counts, webhooks, backups); a Broker implementation keeps the jobs:
// broker/local/ on this machine (engine + RocksDB), and any other that implements this header.
// The front-ends include nothing else of the broker layer (their CMake targets link only this
// one), so adding a broker never touches a front-end. Architecture: docs/design/architecture.md
//
// Threads. A broker and its sessions belong to one executor (the io_context the broker was made
// with); every call is made on it. Each operation completes through the callback it is given,
// exactly once, on that executor, never inside the call that started it.
//
// Durability. A completion runs only once its result may be sent: every change it reports or
// relies on is as durable as the server's policy asks (store::Durability), and nothing more is
// waited for. So a reserve of a job stored an hour ago completes at once, while one whose put is
// still in an unsynced batch waits for that batch. A result that is not about one job (a count,
// an error, a timeout) waits for everything done before it. Completions of one session may run
// in any order; a front-end that answers in order (beanstalkd's pipelining) queues its replies.
//
// Order. Calls on one session take effect in the order they are made, each when it is made (a
// `use` then a `put` puts into the tube used). A session destroyed with operations under way
// never sees their completions (it may still have made their changes), its waiting reserves end,
// and its reserved jobs are ready again (docs/design/lifecycle.md, invariant 4).
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/job.h"
#include "base/status.h"
#include "base/webhook.h"

namespace delayq::broker {

class Schedules;  // schedules.h

using Millis = std::chrono::milliseconds;
using Seconds = std::chrono::seconds;

// A completion: the operation's value, or why it failed.
template <typename T>
using Callback = std::function<void(Result<T>)>;

// A job named by its id, or by its tube and key (unique among the tube's jobs).
struct JobRef {
  JobId id = 0;  // 0: by tube and key
  std::string tube;
  std::string key;

  static JobRef by_id(JobId id) { return {id, {}, {}}; }
  static JobRef by_key(std::string tube, std::string key) {
    return {0, std::move(tube), std::move(key)};
  }
};

// A job with its body, as reserve and peek report it. as_of_unix_ms: the broker's present when
// it was read (what stats-job's age and time-left count from). delivery: what push delivery
// keeps about it (empty for a job put without a URL or content type that never failed one).
struct Job {
  JobView view;
  std::string body;
  std::int64_t as_of_unix_ms = 0;
  Delivery delivery;
};

struct PutRequest {
  std::string tube;  // empty: the session's used tube
  std::uint32_t priority = 0;
  Due due;
  Seconds ttr{60};  // 0 is taken as 1 s, as beanstalkd does
  std::string body;
  // A key is unique among the jobs of a tube. Putting a key that is taken returns the job that
  // holds it (inserted = false) unless replace is set: then that job is deleted and the new one
  // takes the key (kConflict if the holder is reserved: a worker is on it).
  std::string key;
  std::string group;
  bool replace = false;
  // Debounce (docs/flow-control.md), with a key: a delayed or ready job holding the key takes
  // this put's body and fields and is due `debounce` from now, but never later than `max_wait`
  // after its first put (its created time, which it keeps, as it keeps its id); a buried holder
  // is replaced; a reserved one is kConflict. No holder: a new job due in `debounce`. `due` and
  // `replace` are then not read.
  std::optional<Millis> debounce;
  std::optional<Millis> max_wait;
  // Push delivery (docs/webhooks.md): a URL of the job's own, in place of its tube's webhook's
  // (kConflict if the tube has no webhook), and the Content-Type of its body. Empty: none.
  std::string url;
  std::string content_type;
  // W3C Trace Context (put_rules.h's check_trace): kept with the job, handed back with every
  // reservation and peek (Job::delivery) and sent with every push delivery attempt. Empty: none.
  std::string traceparent;
  std::string tracestate;
};

struct BackupResult {
  std::string dir;
  std::uint64_t jobs = 0;   // jobs the server held when the backup was asked for
  std::uint64_t bytes = 0;  // size of the copy's files
  Millis took{0};
};

// Delayed jobs by due time, as due_counts() answers (the dashboard's histogram).
struct DueCounts {
  // The edges as counted: absolute, ascending, each rounded down to a multiple of `resolution`.
  std::vector<std::int64_t> edges_unix_ms;
  // edges + 1 counts: due before the first edge, between each edge and the next (the first
  // included, the second not), at or after the last.
  std::vector<std::uint64_t> jobs;
  Millis resolution{60'000};
  std::int64_t as_of_unix_ms = 0;  // the broker's present, from which relative edges counted
};

// A tube's first jobs in one state, as list_jobs() answers.
struct JobList {
  std::vector<JobView> jobs;
  bool complete = true;  // false: the search stopped at its limit of jobs visited (see there)
};

struct PutResult {
  JobView job;             // the job put, or the one holding its key
  bool inserted = true;    // false: the key was taken, nothing was put
  JobId replaced = 0;      // the job deleted to make way, 0 if none
  bool debounced = false;  // a pending job moved (job.created_unix_ms: its first put)
};

struct ReserveRequest {
  // Tubes to take a job from. Empty: the session's watch list (then at most one such reserve of
  // a session waits at a time, as a beanstalkd connection's). Named: a reserve of its own, many
  // of which may wait side by side (HTTP long-polls); each must be a valid tube name.
  std::vector<std::string> tubes;
  // How long to wait for a job; nullopt waits until one comes or the reserve is cancelled, 0
  // answers at once.
  std::optional<Millis> timeout;
};

struct ReleaseRequest {
  JobId id = 0;
  std::optional<std::uint32_t> priority;  // nullopt: the job keeps its own
  Millis delay{0};
  // Set: release only if the job is still in this reservation (its reserves counter), so that a
  // reservation taken since, after a TTR lapsed, is left alone. What a front-end does with a job
  // whose reply could not be delivered.
  std::optional<std::uint32_t> reservation;
};

// A change to a tube's flow control (FlowSettings, docs/flow-control.md): each field set
// replaces the tube's, the others stay.
struct FlowChange {
  std::optional<std::uint32_t> group_concurrency{};
  std::optional<bool> fair{};
  std::optional<std::uint32_t> rate_jobs{};
  std::optional<Millis> rate_period{};
  std::optional<std::uint32_t> rate_burst{};
  // Weights to set, by group; 0 (or 1, the default) removes a group's.
  std::map<std::string, std::uint32_t> group_weights{};

  // `flow` with each field the change sets replaced: what was asked, unchecked.
  [[nodiscard]] FlowSettings merged_into(FlowSettings flow) const {
    for (const auto& [group, weight] : group_weights) {
      if (weight <= 1) {
        flow.group_weights.erase(group);
      } else {
        flow.group_weights[group] = weight;
      }
    }
    if (group_concurrency) flow.group_concurrency = *group_concurrency;
    if (fair) flow.fair = *fair;
    if (rate_jobs) flow.rate_jobs = *rate_jobs;
    if (rate_period) flow.rate_period = *rate_period;
    if (rate_burst) flow.rate_burst = *rate_burst;
    return flow;
  }

  // The tube's settings after the change. Left off (no concurrency, fair or rate), they are all
  // the defaults: a burst and weights are kept only while flow control is on. A change that
  // gives them (other than 1) to a tube whose flow control is off and stays off is refused,
  // kInvalidArgument; one that turns it off may carry them (a client that sends back every
  // setting it read), and they go with it.
  [[nodiscard]] Result<FlowSettings> applied_to(const FlowSettings& flow) const {
    FlowSettings after = merged_into(flow);
    if (after.any()) return after;
    const bool sets_more = (rate_burst && *rate_burst != 1) ||
                           std::any_of(group_weights.begin(), group_weights.end(),
                                       [](const auto& entry) { return entry.second > 1; });
    if (sets_more && !flow.any()) {
      return Status(Code::kInvalidArgument,
                    "group_burst and group_weights take effect with group_rate, fair or "
                    "group_concurrency: set one of those in the same change");
    }
    return FlowSettings{};
  }
};

struct Update {
  std::optional<Due> due;                 // reschedule: delayed or ready jobs only (kConflict)
  std::optional<std::uint32_t> priority;  // any state; a ready job moves in its tube's order
};

// Errors every operation may complete with, beside its own: kInvalidArgument (a name or value
// out of range, with a message for people), kIOError (the store failed: the server must stop).
// kNotSupported: this broker cannot do the call at all (each call below names where).
// kNotFound means no such job, key, tube or group; kConflict means the job exists but its state
// or holder forbids the operation (beanstalkd's NOT_FOUND for its own verbs; HTTP's 409).
class Session {
 public:
  virtual ~Session() = default;

  // --- this session's tubes: its own state, answered at once.
  // use: the tube puts go to. watch / ignore: the tubes a reserve without tubes takes from;
  // they return how many are watched now (ignore: kNotIgnored for the last one; watch: kLimit
  // for a new tube past kMaxWatchedTubes, base/names.h).
  virtual Status use(std::string_view tube) = 0;
  [[nodiscard]] virtual std::string used() const = 0;
  virtual Result<std::size_t> watch(std::string_view tube) = 0;
  virtual Result<std::size_t> ignore(std::string_view tube) = 0;
  [[nodiscard]] virtual std::vector<std::string> watched() const = 0;

  // --- jobs
  // put: errors kInvalidArgument (a name too long or a due time out of range: put_rules.h, the
  // checks every broker makes), kDraining (the server refuses new jobs), kNoSpace (no room on the
  // store's disk, or in Redis), kLimit (ids or job slots exhausted), kConflict (replace, and the
  // key's holder is reserved; a job's url in a tube without a webhook).
  virtual void put(PutRequest request, Callback<PutResult> done) = 0;
  // reserve: the job with the best (priority, id) among the ready jobs of the tubes, now or as
  // soon as one is ready. Errors kTimedOut (the timeout passed, or cancel_reserve), kDeadlineSoon
  // (a job this session holds is within a second of its TTR, and none is ready; watch list
  // only). Returns a ticket for cancel_reserve(), or 0 when the reserve was answered without
  // waiting (its completion may still wait for durability). The job is held by this session until
  // deleted, released, buried, or its TTR lapses.
  virtual std::uint64_t reserve(ReserveRequest request, Callback<Job> done) = 0;
  // Ends a waiting reserve with kTimedOut (a client that went away); false if the ticket is not
  // waiting any more.
  virtual bool cancel_reserve(std::uint64_t ticket) = 0;
  // Ends a waiting reserve as if its time had run out now (a beanstalkd client that half-closed):
  // it completes with a job ready now, which it may not have seen yet where ready jobs are spread
  // over many places, or else with kTimedOut; it waits no longer. false if the ticket is not
  // waiting any more.
  virtual bool stop_waiting(std::uint64_t ticket) = 0;
  // reserve_job: a job by id in any state but reserved (kNotFound if reserved by anyone).
  virtual void reserve_job(JobId id, Callback<Job> done) = 0;
  // erase (delete): any job not reserved by another session. Completes with its id.
  virtual void erase(JobRef job, Callback<JobId> done) = 0;
  // release, bury, touch: a job this session holds (kConflict if another holds it or it is not
  // reserved). touch restarts the TTR.
  virtual void release(ReleaseRequest request, Callback<JobView> done) = 0;
  virtual void bury(JobId id, std::optional<std::uint32_t> priority, Callback<JobView> done) = 0;
  virtual void touch(JobId id, Callback<JobView> done) = 0;
  // peek: a job in any state; with_body false skips reading the body (stats-job).
  virtual void peek(JobRef job, bool with_body, Callback<Job> done) = 0;
  // The next job of a tube in a state: ready (best priority), delayed (earliest due) or buried
  // (oldest); kNotFound if none.
  virtual void peek_next(std::string tube, JobState state, Callback<Job> done) = 0;
  // kick: up to `bound` buried jobs of the tube, or if it has none, up to `bound` delayed ones
  // (earliest first); completes with how many. kick_job: one buried or delayed job (kConflict
  // otherwise).
  virtual void kick(std::string tube, std::size_t bound, Callback<std::size_t> done) = 0;
  virtual void kick_job(JobId id, Callback<JobView> done) = 0;
  // update: reschedule and/or reprioritise a job (kInvalidArgument if the update is empty).
  virtual void update(JobRef job, Update update, Callback<JobView> done) = 0;
  // Jobs of a group in any state, by id; cancel deletes those not reserved and says how many.
  virtual void list_group(std::string tube, std::string group,
                          Callback<std::vector<JobView>> done) = 0;
  virtual void cancel_group(std::string tube, std::string group, Callback<std::size_t> done) = 0;

  // Keeps the outcome of a failed delivery attempt with a job (its URL and content type stay),
  // where peek and stats-job show it; the session need not hold the job.
  virtual void note_attempt(JobId id, int status, std::string error, Callback<JobView> done) = 0;
};

// Server-wide calls: tubes, the server's counts, push delivery's webhooks and backups; nothing
// that is one client's. Opened like a session (Broker::open_admin) and bound by the same rules
// (threads, durability, order; one destroyed with calls under way never sees their completions),
// so that a front-end's connection can hold one and go away. Errors as a Session's, and each
// call's own below.
class Admin {
 public:
  virtual ~Admin() = default;

  // --- tubes and the server
  // pause_tube: no job of the tube is reserved for `pause` (0 ends a pause). kNotFound if the
  // tube does not exist.
  virtual void pause_tube(std::string tube, Seconds pause, Callback<TubeStats> done) = 0;
  virtual void stats_tube(std::string tube, Callback<TubeStats> done) = 0;
  // max_attempts (pull workers; 0 ends it): a reservation that ends without a delete or a bury
  // (released, TTR lapsed, worker gone) buries the job when it was its max_attempts-th. The tube
  // need not exist; stats_tube shows it. Completes with the number set.
  virtual void set_max_attempts(std::string tube, std::uint32_t max_attempts,
                                Callback<std::uint32_t> done) = 0;
  // Flow control (docs/flow-control.md): applies the change to the tube's settings (all off ends
  // it). The tube need not exist; stats_tube shows them. Completes with the settings now in
  // force. kInvalidArgument for a rate period of 0 or a burst of 0; kConflict (Redis: the first
  // settings of a tube that has jobs, which could not all go to its one shard).
  virtual void set_flow(std::string tube, FlowChange change, Callback<FlowSettings> done) = 0;
  // Every tube that exists (has jobs, users or watchers, or is "default"), in the broker's
  // order: the local broker's is beanstalkd's (each appended when made, a dropped one's place
  // taken by the last), the Redis broker's by name. A front-end that wants another sorts.
  virtual void list_tubes(Callback<std::vector<TubeStats>> done) = 0;
  virtual void stats(Callback<ServerStats> done) = 0;
  // How many delayed jobs of a tube (of every tube: tube empty) come due between the edges,
  // each a delay from now or an absolute time; after taking delays from now and rounding down to
  // the resolution, they must ascend (kInvalidArgument). kNotFound if the tube does not exist;
  // kNotSupported where the broker keeps no such counts (Redis). Visits no job: the local broker
  // keeps counts per tube and minute (docs/http-api.md says what that costs).
  virtual void due_counts(std::string tube, std::vector<Due> edges, Callback<DueCounts> done) = 0;
  // The first `limit` jobs of a tube in a state, in the order they will be served: ready by
  // priority then id, delayed by due time, reserved by TTR end, buried oldest first. Delayed and
  // reserved jobs are found by visiting those of every tube in that order, at most 100,000 of
  // them (then complete is false). kNotFound if the tube does not exist; kNotSupported (Redis).
  virtual void list_jobs(std::string tube, JobState state, std::size_t limit,
                         Callback<JobList> done) = 0;

  // --- push delivery (docs/webhooks.md). A tube with a webhook has its due jobs POSTed by the
  // server. set_webhook replaces the tube's (the tube need not exist yet); get_webhook and
  // remove_webhook: kNotFound if it has none. Values are checked by the front-end.
  virtual void set_webhook(std::string tube, Webhook webhook, Callback<Webhook> done) = 0;
  virtual void get_webhook(std::string tube, Callback<Webhook> done) = 0;
  virtual void remove_webhook(std::string tube, Callback<Webhook> done) = 0;

  // --- backup: writes a consistent copy of the whole state into `dir`, a new
  // directory (absolute path, on the server's machine; its parent must exist): everything
  // acknowledged before the call is in it. A server started on the copy restores it. One backup
  // at a time: kConflict while another runs; kInvalidArgument for a relative path or one that
  // exists; kNotSupported where the state is not the server's own (Redis: back up Redis).
  virtual void backup(std::string dir, Callback<BackupResult> done) = 0;
};

struct SessionOptions {
  // true: the session uses and watches "default", as a new beanstalkd connection does, and is
  // counted among that tube's users and watchers. false: it uses and watches nothing until told,
  // for a front-end whose callers name their tubes per call (HTTP). Default: true.
  bool watch_default = true;
  // Non-empty: the session's reservations are held under this name, shared by every session
  // opened with it on every node of a broker that has many (HTTP: any caller, through any node,
  // may finish a job reserved over HTTP). Empty: the session's own. A broker whose sessions all
  // live in one process may ignore it; its front-end keeps one session for the name.
  std::string holder;
};

class Broker {
 public:
  virtual ~Broker() = default;

  // A client's session; the server-wide calls (one handle per caller that may go away).
  [[nodiscard]] virtual std::unique_ptr<Session> open_session(SessionOptions options) = 0;
  [[nodiscard]] virtual std::unique_ptr<Admin> open_admin() = 0;

  // Whether a session's calls take effect in the order they are made, also when each is made
  // before the ones before it complete (a single node: every call changes the engine at once).
  // Where not (over Redis, puts and deletes wait for the end of the turn, and calls to other
  // shards cross), a front-end that runs a client's pipelined commands waits for the answer of
  // those before: front/beanstalk/conversation.h says which may still overlap.
  [[nodiscard]] virtual bool applies_calls_in_order() const { return true; }

  // Drain mode (SIGUSR1, as beanstalkd): every put is refused with kDraining.
  virtual void set_draining(bool draining) = 0;
  [[nodiscard]] virtual bool draining() const = 0;
  // Whether the server may be sent work: ok, kDraining, kNoSpace (puts are refused until there
  // is room), or kIOError when the store has failed.
  [[nodiscard]] virtual Status health() const = 0;
  // How long this broker has been serving (stats' uptime), on its own clock.
  [[nodiscard]] virtual Seconds uptime() const = 0;
  // Recurring schedules (schedules.h): server-wide, as long-lived as the broker.
  [[nodiscard]] virtual Schedules& schedules() = 0;

  // Every tube's webhook, by tube name; whether this node delivers a tube's jobs (on a single
  // node, every tube's; over Redis, each tube's on one node at a time, the one holding its
  // delivery); and who to call (on the executor, after the change is durable) each time what
  // these say may have changed (a webhook set or removed, a tube's delivery come or gone): the
  // deliverer, which then reads them again. A tube's webhook is read through an Admin too.
  [[nodiscard]] virtual std::vector<std::pair<std::string, Webhook>> webhooks() const = 0;
  [[nodiscard]] virtual bool delivers(std::string_view /*tube*/) const { return true; }
  virtual void on_webhooks_changed(std::function<void()> handler) = 0;

  // Makes everything done so far durable and waits for it (at shutdown). Completions that
  // became due run on the executor afterwards, if it still runs.
  virtual Status close() = 0;
  // At shutdown, once the front-ends have closed their connections: runs `done` when the jobs
  // their sessions held are ready again where other nodes see them. On a single node at once,
  // inside the call (a restart makes them ready); over Redis on the executor, once those calls
  // are answered. The caller bounds the wait.
  virtual void settle(std::function<void()> done) { done(); }
};

}  // namespace delayq::broker
