// engine.h — delayq's state machine: jobs, tubes, clients, keys and groups. Pure logic: no
// sockets, no files, no threads; time comes from the injected Clock, and every change that must
// survive a restart is appended to mutations(), which the caller commits to the store before it
// answers anyone (see store/committer.h). Not thread-safe: one engine belongs to one thread.
//
// Costs: put, delete, release, bury, touch, reschedule and key lookups are O(1) or O(log n) in
// the jobs of one tube; time passes in O(jobs due) over the hierarchical wheel. peek-delayed and
// kicking delayed jobs walk the wheel in time order (O(jobs due before the tube's first)).
// A pending delayed job costs ~63 bytes of RAM (docs/BENCHMARKS.md); bodies stay on disk, and
// with a far tier (EngineOptions::window, far.cc) a job due beyond the window costs none.
// Semantics follow beanstalkd 1.12 (docs/protocol.md); the lifecycle is in
// docs/design/lifecycle.md.
#pragma once

#include <array>
#include <boost/container/small_vector.hpp>
#include <chrono>
#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <tuple>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "base/job.h"
#include "base/names.h"
#include "base/paged_array.h"
#include "base/status.h"
#include "engine/clock.h"
#include "engine/id_index.h"
#include "engine/time_counts.h"
#include "store/far_reader.h"
#include "store/record.h"
#include "wheel/hierarchical_wheel.h"

namespace delayq::engine {

using ClientId = std::uint64_t;
// A reserve waiting for a job. Ids grow with each wait: in id order is first come, first served.
using WaitId = std::uint64_t;
using Seconds = std::chrono::seconds;

struct EngineOptions {
  // Largest tube name, key and group, in bytes. Default: 200 (beanstalkd's tube name limit).
  std::size_t max_name_bytes = kDefaultMaxNameBytes;
  // Jobs with a priority below this are "urgent" in the stats. Default: 1024, as beanstalkd.
  std::uint32_t urgent_priority = 1024;
  // A client waiting in reserve with a job whose TTR ends within this margin is told
  // DEADLINE_SOON. Default: 1 s, as beanstalkd.
  Millis deadline_soon_margin{1000};
  // The far tier (docs/design/far-tier.md). With `far` set, a delayed job due `window` or more
  // ahead is kept on disk only, in `far`, and loaded back into memory ahead of its time; every
  // operation finds it there. `window` nullopt: no job goes far, and the far jobs an earlier run
  // left are loaded back. `far` null: no far tier (nothing is read). `far` must outlive the engine.
  std::optional<Millis> window;
  store::FarReader* far = nullptr;
};

struct PutRequest {
  std::string_view tube;  // empty: the client's used tube
  std::uint32_t priority = 0;
  // When the job becomes ready (a delay counts from the put's microsecond: due_in()).
  Due due;
  Seconds ttr{60};  // 0 is taken as 1 s, as beanstalkd does
  std::string_view body;
  // A key is unique among the jobs of a tube. Putting a key that is taken returns the job that
  // holds it unless replace is set; then that job is deleted and the new one takes the key
  // (kConflict if the holder is reserved: a worker is on it).
  std::string_view key;
  std::string_view group;
  bool replace = false;
  // Debounce (broker.h's PutRequest): with a key; `due` and `replace` are then not read.
  std::optional<Millis> debounce;
  std::optional<Millis> max_wait;
  // Set: kept with the job, on disk only, and read with its body (push delivery's facts).
  const Delivery* attachment = nullptr;
};

struct PutResult {
  JobId id = 0;
  bool inserted = true;    // false: the key was taken and id is the job that holds it
  JobId replaced = 0;      // the job deleted to make way, 0 if none
  bool debounced = false;  // the key's pending holder took the put: id is its id
};

using delayq::JobView;
using delayq::ServerStats;
using delayq::TubeStats;

// The answer to a reserve: a job, or why there is none. kWaiting: the answer comes later,
// through take_wakeups().
struct ReserveResult {
  enum class Kind : std::uint8_t { kReserved, kWaiting, kDeadlineSoon, kTimedOut };
  Kind kind = Kind::kWaiting;
  JobView job;      // kReserved only
  WaitId wait = 0;  // kWaiting only: the wait its wakeup names, for cancel_wait()
};

struct Wakeup {
  ClientId client = 0;
  WaitId wait = 0;
  ReserveResult result;
};

// Maps keyed by std::string that can be searched with a std::string_view, without a copy.
struct StringHash {
  using is_transparent = void;
  std::size_t operator()(std::string_view text) const noexcept {
    return std::hash<std::string_view>{}(text);
  }
};
template <typename Value>
using StringMap = std::unordered_map<std::string, Value, StringHash, std::equal_to<>>;

class Engine {
 public:
  explicit Engine(Clock& clock, EngineOptions options = {});
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // --- clients: a broker's sessions. New clients use and watch "default".
  // A client waiting in reserve sends nothing but disconnect until its wait ends (the front-end
  // holds its next commands, as beanstalkd does); use, watch, ignore and reserve check it.
  ClientId connect();
  // watch_default false: a client that uses and watches nothing until told to, and is not
  // counted among a tube's users (a session whose callers name their tubes per reserve).
  ClientId connect(bool watch_default);
  // Its reserved jobs become ready again (invariant 4), its wait ends, its tubes are let go.
  void disconnect(ClientId client);
  Status use(ClientId client, std::string_view tube);
  Result<std::size_t> watch(ClientId client, std::string_view tube);   // tubes now watched
  Result<std::size_t> ignore(ClientId client, std::string_view tube);  // kNotIgnored if last
  [[nodiscard]] const std::string& used_tube(ClientId client) const;
  [[nodiscard]] std::vector<std::string> watched_tubes(ClientId client) const;

  // --- the lifecycle (beanstalkd's commands). Jobs reserved by another client are kNotFound.
  Result<PutResult> put(ClientId client, const PutRequest& request);
  // A job from the tubes the client watches. timeout: nullopt waits for ever, 0 answers at once
  // (kTimedOut if nothing is ready). A client has at most one such wait.
  ReserveResult reserve(ClientId client, std::optional<Millis> timeout);
  // A job from the tubes named (kInvalidArgument for a bad name), in a wait of its own: a client
  // may have any number of these waiting at once (HTTP long-polls), beside one on its watch list.
  // DEADLINE_SOON does not apply to them.
  Result<ReserveResult> reserve_from(ClientId client, const std::vector<std::string>& tubes,
                                     std::optional<Millis> timeout);
  // Ends a waiting reserve with no job (its client went away or half-closed): false if it was
  // not waiting. No wakeup follows.
  bool cancel_wait(WaitId wait);
  Result<JobView> reserve_job(ClientId client, JobId id);  // any job not reserved
  Status erase(ClientId client, JobId id);                 // delete
  Status release(ClientId client, JobId id, std::uint32_t priority, Millis delay);
  Status bury(ClientId client, JobId id, std::uint32_t priority);
  Status touch(ClientId client, JobId id);
  // Kicks up to `bound` buried jobs of the tube, or if it has none, up to `bound` delayed ones
  // (earliest first); returns how many.
  std::size_t kick(std::string_view tube, std::size_t bound);
  Status kick_job(JobId id);  // a buried or delayed job to ready
  Status pause_tube(std::string_view tube, Seconds pause);

  [[nodiscard]] Result<JobView> peek(JobId id) const;
  [[nodiscard]] Result<JobView> peek_ready(std::string_view tube) const;
  [[nodiscard]] Result<JobView> peek_delayed(std::string_view tube) const;
  [[nodiscard]] Result<JobView> peek_buried(std::string_view tube) const;

  // --- delayq's extensions: keys, reschedule, groups. Reschedule moves a delayed or ready job
  // to a new due time (kConflict for reserved or buried jobs).
  [[nodiscard]] Result<JobView> peek_key(std::string_view tube, std::string_view key) const;
  Result<JobId> find_key(std::string_view tube, std::string_view key) const;
  // A delay counts as a put's does (due_in()), from this microsecond, and is what stats report
  // as the job's delay; for a time, the delay reported is due - now. A delay <= 0, or a time not
  // in the future, makes the job ready now.
  Status reschedule(JobId id, Due due);
  // A new priority for a job in any state (a ready job moves in its tube's order).
  Status set_priority(JobId id, std::uint32_t priority);
  // A tube's max_attempts (0: none, the default): a reservation of one of its jobs that ends
  // without a delete or a bury (released, TTR lapsed, worker gone) buries the job instead when
  // it was the job's max_attempts-th. Kept whether the tube exists or not; persisted.
  Status set_max_attempts(std::string_view tube, std::uint32_t max_attempts);
  void restore_max_attempts(std::string_view tube, std::uint32_t max_attempts);
  // A tube's flow control (docs/flow-control.md): which ready jobs a reserve may take, by their
  // group. Kept whether the tube exists or not; persisted. Setting it sorts the tube's ready jobs
  // anew, O(its ready jobs + every reserved job), and starts every group's turns and rate afresh.
  Status set_flow(std::string_view tube, const FlowSettings& flow);
  [[nodiscard]] FlowSettings flow(std::string_view tube) const;
  void restore_flow(std::string_view tube, const FlowSettings& flow);
  // ok, or kInvalidArgument: what tube names allow (beanstalkd's characters and length).
  [[nodiscard]] Status check_tube_name(std::string_view name) const;
  // A tube served from outside the engine (a webhook delivers its jobs) is kept: it exists, with
  // its counts and its pause, while it has no job and no client; unkept, it goes once unused.
  // kInvalidArgument for a bad name. Not persisted: the broker keeps its tubes at each start.
  Status keep_tube(std::string_view name, bool keep);
  // Keeps `delivery` with the job in place of what it had (kNotFound if there is no such job).
  // The engine stores it and never reads it: the broker reads it back from the store.
  Status attach(JobId id, const Delivery& delivery);
  // Jobs of a group in any state, by id; cancel deletes those not reserved and says how many.
  [[nodiscard]] std::vector<JobView> list_group(std::string_view tube,
                                                std::string_view group) const;
  std::size_t cancel_group(std::string_view tube, std::string_view group);

  // --- time. advance() makes due jobs ready, lapses TTRs, ends pauses and waits; call it when
  // next_wakeup_us() has come (and after any operation, which is cheap when nothing is due).
  void advance();
  // A time (Unix microseconds) no later than the first at which advance() has something to do,
  // so the caller can sleep until then and call advance(); the wheel may answer the start of the
  // slot that holds the next job, so a far deadline takes a few such wakeups (at most 8).
  [[nodiscard]] std::optional<std::int64_t> next_wakeup_us() const;
  // The engine's present on the wall clock, held at the latest time seen if the clock steps back:
  // in milliseconds (rounded down) and in microseconds.
  [[nodiscard]] std::int64_t now() const;
  [[nodiscard]] std::int64_t now_us() const;
  [[nodiscard]] const EngineOptions& options() const noexcept { return options_; }
  // The present and a time `delay` from it on the steady clock, which TTRs, reserve timeouts,
  // pauses and DEADLINE_SOON run on (never early, as due_in(); never moved by a wall step).
  [[nodiscard]] std::int64_t steady_now() const;
  [[nodiscard]] std::int64_t steady_now_us() const;
  [[nodiscard]] std::int64_t steady_after(Millis delay) const;
  // A steady time as the wall clock would show it now (for what is reported, e.g. a
  // reservation's end): through the wall clock's lead over the steady clock, both read to the
  // microsecond, so that the answer does not flicker by 1 ms from one read to the next as two
  // readings to the millisecond would (it moves only as the lead does: a step, or NTP's
  // slewing carrying it across a millisecond).
  [[nodiscard]] std::int64_t steady_to_unix(std::int64_t steady_ms) const;

  // Called with its exact due time (Unix microseconds) each time a delayed job becomes ready by
  // the passing of time (for the fire lateness metric). Default: none.
  void on_fire(std::function<void(std::int64_t due_unix_us)> observer) {
    on_fire_ = std::move(observer);
  }

  // --- what happened. Wakeups answer waiting reserves; mutations must be committed before any
  // reply to the operations that made them is sent.
  std::vector<Wakeup> take_wakeups();
  store::WriteSet take_mutations();
  // The far tier reads the store, which may not hold yet what the engine has written: each
  // take_mutations() is numbered (epoch(): the last one's number), and the caller tells the
  // engine, with settle(n), once everything taken up to number n is in the store. Until then
  // the engine keeps in memory what it wrote to the far tier. Without settle() nothing leaves
  // memory, which is correct and keeps the far tier's memory.
  [[nodiscard]] std::uint64_t epoch() const noexcept { return epoch_; }
  void settle(std::uint64_t epoch);
  // The first failed read of the far tier (an I/O error, a record that does not decode): ok if
  // none. The caller stops the node, as for a failed write.
  [[nodiscard]] const Status& far_error() const noexcept { return far_error_; }
  [[nodiscard]] const store::WriteSet& mutations() const noexcept { return mutations_; }

  // --- stats
  [[nodiscard]] Result<JobView> stats_job(JobId id) const { return peek(id); }
  [[nodiscard]] Result<TubeStats> stats_tube(std::string_view tube) const;
  [[nodiscard]] ServerStats stats() const;
  // Delayed jobs by due time: out[i] counts those due between edges[i-1] (included) and
  // edges[i] (excluded), out[0] those due before edges[0], out.back() those due at or after the
  // last edge; edges ascending (kInvalidArgument otherwise), rounded down to whole minutes
  // (kDueBucketMs). Of one tube (kNotFound if it does not exist), or of all when `tube` is empty.
  // Costs O(tubes + minutes holding jobs due before the last edge); visits no job.
  [[nodiscard]] Result<std::vector<std::uint64_t>> due_counts(
      std::string_view tube, std::span<const std::int64_t> edges) const;
  static constexpr std::int64_t kDueBucketMs = 60'000;
  // The first `limit` jobs of a tube in a state, in the order they will be served: ready by
  // (priority, id), delayed by due time, reserved by TTR end, buried oldest first. Ready and
  // buried cost O(limit log limit); delayed and reserved visit the jobs of every tube in that
  // order until `limit` of this one are found, at most kListVisits of them (then `complete` is
  // false). kNotFound if the tube does not exist.
  struct JobList {
    std::vector<JobView> jobs;
    bool complete = true;
  };
  [[nodiscard]] Result<JobList> list_jobs(std::string_view tube, JobState state,
                                          std::size_t limit) const;
  static constexpr std::size_t kListVisits = 100'000;
  // Every tube, in beanstalkd's list order: each appended when made (at a put, use or watch,
  // or in recovery), a dropped one's place taken by the last.
  [[nodiscard]] std::vector<std::string> tubes() const;
  [[nodiscard]] std::size_t jobs() const noexcept { return index_.size() + far_out_; }
  // Jobs kept on disk only (the far tier), not in memory.
  [[nodiscard]] std::size_t far_jobs() const noexcept { return far_out_; }
  // Bytes the engine's indexes hold (jobs, timers, wheel, id index), without allocator slack.
  [[nodiscard]] std::size_t memory_bytes() const;

  // --- recovery: feed every stored record in id order, then finish. Reserved jobs come back ready;
  // delayed jobs keep their due time (overdue ones are ready at the first advance()); buried jobs
  // stay buried, in id order. Nothing is written to mutations().
  // Sizes the indexes for about `count` jobs first (optional; an estimate is fine).
  void reserve_jobs(std::size_t count);
  Status restore(const store::JobRecord& record);
  void finish_restore(JobId next_id);
  // The far tier's counts (FarReader::far_counts()): `count` far jobs of the tube due in the
  // minute. Before finish_restore().
  Status restore_far(std::string_view tube, std::int64_t minute, std::uint64_t count);

 private:
  using Slot = std::uint32_t;
  using TubeNo = std::uint32_t;
  static constexpr Slot kNoSlot = ~Slot{0};

  // The in-memory record of a job: 32 bytes. What a pending delayed job needs and nothing more;
  // rarer facts (key, group, counters, a delay that cannot be derived) live in Extra.
  struct Job {
    // id (48 bits) | state << 48 | has_extra << 50 | created's milliseconds << 51 | spilled << 61;
    // 0 = free
    std::uint64_t bits = 0;
    std::int64_t due_unix_ms = 0;  // see JobView::due_unix_ms
    std::uint32_t created_unix_s = 0;
    std::uint32_t priority = 0;
    std::uint32_t ttr_seconds = 0;
    TubeNo tube = 0;

    [[nodiscard]] JobId id() const noexcept { return bits & kIdMask; }
    [[nodiscard]] JobState state() const noexcept {
      return static_cast<JobState>((bits >> 48) & 3U);
    }
    [[nodiscard]] bool has_extra() const noexcept { return (bits >> 50 & 1U) != 0; }
    void set_state(JobState state) noexcept {
      bits = (bits & ~(std::uint64_t{3} << 48)) | std::uint64_t{static_cast<std::uint8_t>(state)}
                                                      << 48;
    }
    [[nodiscard]] std::int64_t created_unix_ms() const noexcept {
      return std::int64_t{created_unix_s} * 1000 + static_cast<std::int64_t>(bits >> 51 & 1023U);
    }
    // A new job's id and creation time (ms >= 0); state ready, no extra.
    void set_id_and_created(JobId id, std::int64_t created_ms) noexcept {
      bits = id | static_cast<std::uint64_t>(created_ms % 1000) << 51;
      created_unix_s = static_cast<std::uint32_t>(created_ms / 1000);
    }
    void set_has_extra(bool on) noexcept {
      bits = on ? bits | std::uint64_t{1} << 50 : bits & ~(std::uint64_t{1} << 50);
    }
    // Written to the far tier and out of the wheel, still counted; in memory until settled.
    [[nodiscard]] bool spilled() const noexcept { return (bits >> 61 & 1U) != 0; }
    void set_spilled(bool on) noexcept {
      bits = on ? bits | std::uint64_t{1} << 61 : bits & ~(std::uint64_t{1} << 61);
    }
  };
  static constexpr std::uint64_t kIdMask = (std::uint64_t{1} << 48) - 1;
  // Jobs by slot, 4096 (128 KiB) a page.
  using JobTable = PagedArray<Job, 4096>;

  struct Extra {
    std::string key;
    std::string group;
    JobCounters counters;
    std::optional<std::int64_t> delay_ms;  // unset: due - created
    std::uint64_t bury_order = 0;          // buried: place in the tube's buried list
    bool attached = false;                 // an attachment lies on disk beside the body
  };
  struct Reservation {
    ClientId client = 0;
    std::int64_t deadline_steady_ms = 0;  // when its TTR lapses, on the steady clock
  };
  // Flow control's state of one group of a tube (flow.cc). A ready job of a tube with flow
  // control is in its group's `waiting` heap, or it is the group's head: the one job of the
  // group in the tube's heap, there while the group may be served (below its concurrency, within
  // its rate). So the tube's heap holds only jobs a reserve may take, and every reserve, wait
  // and peek reads it as it would without flow control.
  struct FlowGroup {
    std::vector<Slot> waiting;  // binary heap by (priority, id)
    Slot head = kNoSlot;
    bool limited = true;  // false: the jobs with no group, which nothing holds back
    std::uint32_t reserved = 0;
    // fair: the head's turn (its start in virtual time), and the end of the group's last turn
    std::uint64_t start = 0, finish = 0;
    // rate: a token bucket, as filled at tokens_at (steady ms)
    double tokens = 0;
    std::int64_t tokens_at = 0;
    std::int64_t timer_at = 0;  // its entry in flow_timers_, 0 if none
  };
  struct Flow {
    FlowSettings settings;
    StringMap<FlowGroup> groups;     // "" holds the jobs with no group
    std::uint64_t virtual_time = 0;  // fair: the start of the turn served last
    // fair: the turn of each head in the tube's heap, beside it (turns[i] is ready[i]'s), so
    // that comparing two heads looks nothing up.
    std::vector<std::uint64_t> turns;
    // rate: a group without a bucket gets a full one (the settings were set since the start), else
    // one filled from empty at the engine's start: buckets are not stored, and a restart must not
    // give a group a fresh burst.
    bool afresh = false;
  };
  struct Tube {
    std::string name;
    // Binary heap by (priority, id); with flow control, of its groups' heads, and under fair by
    // (priority, the head's turn, id).
    std::vector<Slot> ready;
    std::unique_ptr<Flow> flow;            // none: no flow control
    std::map<std::uint64_t, Slot> buried;  // by bury order
    StringMap<Slot> keys;
    StringMap<std::unordered_set<Slot>> groups;
    std::uint64_t counts[kJobStateCount] = {};
    std::uint64_t urgent = 0, total_jobs = 0, deletes = 0, pauses = 0;
    std::uint64_t using_clients = 0, watching_clients = 0, waiting_clients = 0;
    std::int64_t pause_until_steady_ms = 0;
    Seconds pause{0};
    bool pinned = false;         // "default" is never dropped
    bool kept = false;           // nor is a tube kept_tube() keeps
    std::size_t order = 0;       // its place in tube_order_
    bool ready_changed = false;  // in changed_tubes_: may have a job for a wait
    std::set<WaitId> waits;      // the waits that name it, in arrival order
    // Its delayed jobs by due minute, its ready jobs by the second they became ready.
    TimeCounts due{kDueBucketMs};
    TimeCounts ready_since{1000};
    // Of `due`, the far tier's jobs (spilled ones not yet settled included), as stored.
    TimeCounts far_due{kDueBucketMs};
    [[nodiscard]] std::uint64_t jobs() const noexcept {
      return counts[0] + counts[1] + counts[2] + counts[3];
    }
  };
  struct Client {
    TubeNo used = 0;
    bool internal = false;  // connect(false): not a user of a tube until told to
    // In place for the usual one or two tubes: an idle connection's client allocates nothing.
    boost::container::small_vector<TubeNo, 2> watched;
    std::vector<Slot> reserved;
    WaitId watch_wait = 0;      // its wait on its watch list, 0 if none
    std::vector<WaitId> waits;  // every wait of its, that one included
  };
  struct Wait {
    ClientId client = 0;
    std::vector<TubeNo> tubes;
    bool watch_list = true;  // on the client's watch list: DEADLINE_SOON applies
    std::optional<std::int64_t> deadline_steady_ms;
    std::int64_t alarm_steady_ms = 0;  // when it must be looked at again
  };

  // jobs and slots
  Job& job(Slot slot) { return jobs_[slot]; }
  const Job& job(Slot slot) const { return jobs_[slot]; }
  [[nodiscard]] std::optional<Slot> find(JobId id) const { return index_.find(id); }
  Slot allocate_slot();
  // A job in a fresh slot, indexed by id, key and group; not yet in any state's index.
  Slot new_job(JobId id, TubeNo tube_no, std::int64_t created_ms, std::uint32_t priority,
               std::uint32_t ttr_seconds, std::string_view key, std::string_view group);
  void kick_slot(Slot slot);
  // A stored record's job in a fresh slot (new_job()), in no state's index yet.
  Slot revive(const store::JobRecord& record, TubeNo no);
  void free_slot(Slot slot);
  Extra& extra(Slot slot);
  [[nodiscard]] const Extra* extra_if(Slot slot) const;
  [[nodiscard]] JobView view(Slot slot) const;
  [[nodiscard]] store::JobRecord record(Slot slot) const;
  // Writes the job's record; a delayed job due at or past the horizon goes to the far tier
  // instead (spill). fresh: a job put in this step, which has no record on disk yet.
  void persist(Slot slot, bool fresh = false);
  [[nodiscard]] std::int64_t delay_of(Slot slot) const;
  void keep_delay(Slot slot);

  // state moves: leave() takes a job out of its state's index, enter_*() puts it in one
  void leave(Slot slot);
  void enter_ready(Slot slot);
  // A delayed job is due late_us (0 to 999) into its millisecond due_unix_ms; its timer keeps
  // late_us in the place a ready job keeps its heap position. A due time counted from a moment
  // inside a millisecond is thus exact to the microsecond in memory; it is reported as its
  // millisecond (rounded down, so no job is ever handed out before the time it shows), and
  // stored as that with a flag (JobRecord::due_inside), which recovery reads as the end of
  // the millisecond: never early after a restart either.
  void enter_delayed(Slot slot, std::int64_t due_unix_ms, std::uint32_t late_us = 0);
  [[nodiscard]] std::int64_t exact_due_us(Slot slot) const;
  [[nodiscard]] bool due_before(Slot a, Slot b) const;
  template <typename Visit>
  void visit_delayed_in_order(Visit&& visit) const;
  struct DueTime {
    std::int64_t unix_ms;
    std::uint32_t late_us;
  };
  // When something put, released or rescheduled now with `delay` is due, on the wall clock:
  // counted from the clock's start_unix_us(), so that it comes no earlier than the real moment
  // plus the delay; `start_ms`, if given, gets that moment rounded down to the millisecond. A due
  // time is absolute and stored: a job due at 18:00 fires at 18:00 by the wall clock.
  [[nodiscard]] DueTime due_in(Millis delay, std::int64_t* start_ms = nullptr) const;
  Status reschedule(JobId id, DueTime due, std::optional<Millis> delay);
  void enter_reserved(Slot slot, ClientId client);
  void enter_buried(Slot slot);
  void count(Slot slot, int delta);
  // leave + drop key and group + free the slot + erase on disk; drop_tube: let the tube go if
  // nothing holds it any more
  void destroy(Slot slot, bool drop_tube = true);
  Status check_reserved_by(ClientId client, JobId id, Slot* slot) const;
  // A reservation of the job ended without a delete or bury: whether its tube's max_attempts
  // says it is buried now (it then is: buries counted, persisted).
  bool bury_if_attempts_used(Slot slot);

  // ready heaps: a tube's, or a flow group's waiting jobs (fair: nullptr). With `fair`, the
  // heap is a fair tube's, of heads ordered by (priority, turn, id), their turns kept beside
  // them in fair->turns; `turn` is the turn of the head pushed.
  [[nodiscard]] bool ready_less(Slot a, Slot b) const;
  [[nodiscard]] bool heap_less(Slot a, std::uint64_t turn_a, Slot b, std::uint64_t turn_b) const;
  void heap_set(std::vector<Slot>& heap, Flow* fair, std::size_t position, Slot slot,
                std::uint64_t turn);
  void heap_push(std::vector<Slot>& heap, Flow* fair, Slot slot, std::uint64_t turn = 0);
  void heap_remove(std::vector<Slot>& heap, Flow* fair, std::size_t position);
  void heap_sift_up(std::vector<Slot>& heap, Flow* fair, std::size_t position);
  void heap_sift_down(std::vector<Slot>& heap, Flow* fair, std::size_t position);
  [[nodiscard]] static Flow* fair_of(const Tube& t) {
    return t.flow && t.flow->settings.fair ? t.flow.get() : nullptr;
  }

  // flow control (flow.cc)
  [[nodiscard]] std::string_view group_of(Slot slot) const;
  FlowGroup& flow_group(Flow& flow, Slot slot);
  [[nodiscard]] bool may_serve(const Flow& flow, FlowGroup& group);
  void refill(const Flow& flow, FlowGroup& group);
  void flow_push(TubeNo no, Slot slot);    // a job of the tube became ready
  void flow_remove(TubeNo no, Slot slot);  // a ready job leaves the ready state
  void flow_taken(Slot slot);              // a job of a flow tube is being reserved
  void flow_freed(Slot slot);              // a reservation of a flow tube's job ended
  // Puts the group's head in the tube's heap or takes it out, as may_serve() says now; drops the
  // group when nothing of it is left to remember.
  void flow_refresh(TubeNo no, std::string_view name);
  void arm_flow_timer(TubeNo no, std::string_view name, FlowGroup& group, std::int64_t at);
  void rebuild_flow(TubeNo no, const FlowSettings* flow, bool afresh);
  void apply_flow(std::string_view tube, const FlowSettings& flow, bool afresh);
  void expire_flow_timers();
  // A flow tube's ready jobs that are not in its heap (behind their group's head, or held back).
  [[nodiscard]] std::vector<Slot> behind_heads(const Tube& t) const;

  // the far tier (far.cc)
  [[nodiscard]] bool far_on() const noexcept { return options_.far != nullptr; }
  // A job by id for an operation that changes it: in memory (a spilled one back in the wheel),
  // or loaded from the far tier; nullopt if there is none.
  std::optional<Slot> take(JobId id);
  void unspill(Slot slot);
  // A far job's record into memory, delayed; its far entries erased, its near record written
  // at the end of the step (unwritten_).
  Slot materialize(const store::JobRecord& record);
  void write_unwritten();
  std::optional<Slot> load_far(JobId id);
  [[nodiscard]] std::optional<store::JobRecord> read_far(JobId id) const;
  [[nodiscard]] std::optional<JobId> far_holder(const Tube& t, std::string_view key) const;
  // Whether the store's far entries for the id are to be skipped: the job is in memory (which
  // wins), or its far entries are erased in a write not yet settled.
  [[nodiscard]] bool far_stale(JobId id) const {
    return index_.find(id).has_value() || unsettled_.contains(id);
  }
  void far_count(TubeNo no, std::int64_t due_unix_ms, int delta);
  void unsettle(JobId id);
  void write_far_counts();  // the minutes far_count() changed, into mutations_
  void evict(Slot slot);
  // Out of every index but its state's (leave() does that one), and its slot freed.
  void forget(Slot slot);
  // Loads the far jobs the horizon has passed, at most kLoadsPerAdvance a call.
  void load_due();
  // A delayed job wherever it is, in the order due_before() keeps: in memory (`slot`), or on
  // disk only (`record`).
  struct DelayedPick {
    std::int64_t due_unix_ms = 0;
    std::uint32_t late_us = 0;
    JobId id = 0;
    std::optional<Slot> slot;
    store::JobRecord record;
    [[nodiscard]] auto order() const { return std::tie(due_unix_ms, late_us, id); }
    [[nodiscard]] JobView view(const Engine& engine) const;
  };
  [[nodiscard]] DelayedPick pick(Slot slot) const;
  static void by_due(std::vector<DelayedPick>& picks, std::size_t limit);  // sorts, keeps limit
  // The tube's delayed jobs outside the wheel (spilled, or on disk only): the first `limit`.
  [[nodiscard]] std::vector<DelayedPick> far_first(TubeNo no, std::size_t limit) const;
  // Where a scan of the tube's far jobs by due time starts: its earliest far job's minute.
  [[nodiscard]] static std::int64_t first_far_due(const Tube& t);
  // The tube's earliest delayed job, in the wheel or not.
  [[nodiscard]] std::optional<DelayedPick> earliest_anywhere(TubeNo no) const;
  // The microsecond a record's due time is kept to in memory: the last of its millisecond if it
  // was due inside it, as recovery reads it (never early).
  [[nodiscard]] static std::uint32_t late_us_of(const store::JobRecord& r) {
    return r.due_inside ? static_cast<std::uint32_t>(kMicrosPerMilli - 1) : 0;
  }
  [[nodiscard]] JobView view(const store::JobRecord& record) const;
  // The far tier's jobs of a group that are not in memory, by id.
  [[nodiscard]] std::vector<JobId> far_group(const Tube& t, std::string_view group) const;
  void far_failed(const Status& status) const;
  // What the far tier's jobs cost memory, if any: a loader's wakeup.
  [[nodiscard]] std::optional<std::int64_t> far_wakeup_us() const;
  static constexpr std::size_t kLoadsPerAdvance = 4096;

  // tubes
  Result<TubeNo> tube_ref(std::string_view name);  // finds or creates
  [[nodiscard]] const Tube* find_tube(std::string_view name) const;
  Tube& tube(TubeNo no) { return *tubes_[no]; }
  [[nodiscard]] const Tube& tube(TubeNo no) const { return *tubes_[no]; }
  void maybe_drop_tube(TubeNo no);
  [[nodiscard]] bool paused(const Tube& tube) const {
    return tube.pause_until_steady_ms > steady_now();
  }
  [[nodiscard]] Status check_name(std::string_view what, std::string_view name) const;
  [[nodiscard]] std::optional<Slot> earliest_delayed(TubeNo tube) const;

  // clients, waiting and time
  Client& client(ClientId id);
  [[nodiscard]] const Client& client(ClientId id) const;
  std::optional<Slot> best_ready(std::span<const TubeNo> tubes) const;
  ReserveResult hand_out(ClientId client_id, Slot slot);
  [[nodiscard]] bool deadline_soon(const Client& client) const;
  WaitId start_wait(ClientId client, std::vector<TubeNo> tubes, bool watch_list,
                    std::optional<Millis> timeout);
  void end_wait(WaitId wait);
  void arm_alarm(WaitId id, Wait& wait);
  void dispatch();
  // The wheel reached a delayed job's millisecond: it fires, or waits in imminent_ for its
  // microsecond.
  void on_timer(Slot slot, std::int64_t now_us);
  void fire(Slot slot);   // a delayed job is due
  void lapse(Slot slot);  // a reserved job's TTR ended
  void expire_alarms();

  Clock& clock_;
  EngineOptions options_;
  mutable std::int64_t latest_now_us_ = 0;
  mutable std::int64_t latest_steady_ = 0;
  // When the engine started (steady ms): a group's rate bucket made since counts as empty then,
  // unless its tube's settings were set since (afresh_flows_).
  std::int64_t started_steady_ms_ = 0;
  std::set<std::string, std::less<>> afresh_flows_;

  JobTable jobs_;
  std::vector<Slot> free_slots_;
  wheel::TimerTable timers_;
  wheel::HierarchicalWheel wheel_;
  // Delayed jobs whose millisecond has come and whose microsecond has not, by exact due time:
  // the wheel's millisecond ticks, refined. Every job here is due before every job in the wheel
  // but those in the wheel's present (see visit_delayed_in_order()).
  std::set<std::pair<std::int64_t, Slot>> imminent_;
  IdIndex index_;
  std::unordered_map<Slot, Extra> extras_;
  std::unordered_map<Slot, Reservation> reservations_;
  JobId next_id_ = 1;
  JobId last_restored_id_ = 0;
  bool next_id_dirty_ = false;
  std::function<void(std::int64_t)> on_fire_;
  std::uint64_t next_bury_order_ = 1;

  std::vector<std::unique_ptr<Tube>> tubes_;
  std::vector<TubeNo> free_tubes_;
  StringMap<TubeNo> tube_by_name_;
  // The tubes in beanstalkd's list order: each appended when made; a dropped one's place taken
  // by the last.
  std::vector<TubeNo> tube_order_;
  std::set<std::pair<std::int64_t, TubeNo>> pauses_;  // by end, on the steady clock
  std::set<std::pair<std::int64_t, Slot>> ttrs_;      // reserved jobs by TTR end, steady
  StringMap<std::uint32_t> max_attempts_;             // by tube name, never 0
  StringMap<FlowSettings> flows_;                     // by tube name, each with any() on
  // Flow groups to look at again (a rate's next token, a bucket full again), on the steady
  // clock: (when, tube, group).
  std::set<std::tuple<std::int64_t, TubeNo, std::string>> flow_timers_;

  std::unordered_map<ClientId, Client> clients_;
  ClientId next_client_ = 1;
  std::map<WaitId, Wait> waits_;  // by id, which is arrival order: first come, first served
  WaitId next_wait_ = 1;
  std::set<std::pair<std::int64_t, WaitId>> alarms_;  // on the steady clock
  // Tubes that got a ready job, or whose pause ended, since the last dispatch(): only their
  // waits can be served (after a dispatch no wait can).
  std::vector<TubeNo> changed_tubes_;
  void ready_changed(TubeNo no);

  std::uint64_t total_jobs_ = 0, job_timeouts_ = 0, deletes_ = 0, buries_ = 0;
  std::uint64_t state_counts_[kJobStateCount] = {};
  std::uint64_t urgent_ = 0;

  std::vector<Wakeup> wakeups_;
  store::WriteSet mutations_;
  std::uint64_t epoch_ = 0;  // take_mutations() calls

  // The far tier. Delayed jobs due at or past horizon_ (Unix ms) are spilled; every far job due
  // before it is loaded, or being loaded by an open pass of load_due(). Nothing spills before
  // the first pass, which recovery owes (far jobs restored may be due).
  std::int64_t horizon_ = std::numeric_limits<std::int64_t>::max();
  bool pass_open_ = false;
  bool pass_owed_ = true;
  std::size_t far_out_ = 0;  // far jobs not in memory
  // The jobs spilled and still in memory, with the epoch of their latest spill: evicted once it
  // is settled.
  std::unordered_map<Slot, std::uint64_t> spilled_at_;
  // Ids whose far entries an unsettled write erases, with the epoch of the latest such write.
  std::unordered_map<JobId, std::uint64_t> unsettled_;
  // Jobs back from the far tier in this step whose near record nothing has written yet, with
  // that record.
  std::unordered_map<Slot, store::JobRecord> unwritten_;
  mutable Status far_error_;
  std::set<std::pair<std::string, std::int64_t>> far_counts_dirty_;  // (tube, minute)
};

}  // namespace delayq::engine
