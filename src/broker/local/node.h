// node.h — the machinery under the local broker: the engine, the RocksDB store and the
// committer, driven from one Asio io_context thread. The broker calls the engine through
// engine() on that thread, then touched(): the node then (once per turn of the event loop) runs
// the completions that became sendable, hands the engine's mutations to the committer as one
// batch, delivers wakeups to waiting clients and re-arms its timer for the engine's next
// wakeup, so an idle node sleeps.
// Batches are numbered; the node knows, for every job changed in a batch not yet durable, the
// latest such batch (batch_of), so a completion waits for the batch its result depends on and
// no other (when_durable). That is how "nothing acknowledged is lost" holds while many clients
// share one fsync, and a reply about an old job does not wait for other clients' puts.
// Not thread-safe except where noted: everything runs on the io_context's thread.
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "base/status.h"
#include "broker/broker.h"
#include "broker/local/recovery.h"
#include "engine/engine.h"
#include "metrics/registry.h"
#include "store/committer.h"
#include "store/rocks_store.h"

namespace delayq::broker::local {

struct NodeOptions {
  std::string data_dir = "var/delayq";  // Default: var/delayq (relative to the working dir).
  store::Durability durability;         // Default: always.
  store::RocksStoreOptions store;       // Defaults: see rocks_store.h.
  engine::EngineOptions engine;         // Defaults: see engine.h.
  // Called with recovery's progress about every 100 ms while open() loads the jobs, and once at
  // the end, on the opening thread (to log it, or to let a listener answer in between).
  RecoveryReport on_recovery;
  // The wall clock; null: the system's. Must outlive the node (tests drive their own).
  engine::Clock* clock = nullptr;
  // Where the node registers its metrics families; null: a registry of its own, which nobody
  // reads. Must outlive the node.
  metrics::Registry* metrics = nullptr;
  // Free space kept on the file system of the data directory: below it, puts are refused
  // (kNoSpace) and the node is not ready until there is room again; reads, deletes and every
  // other change go on (they write little). The room is for RocksDB to flush its write buffers
  // and compact, so that a full disk never fails a write (which stops the node). 0: no reserve.
  // Default: 256 MiB.
  std::uint64_t min_free_disk_bytes = std::uint64_t{256} << 20;
  // How free space is measured: null, statvfs of data_dir; nullopt from it, unknown (puts go on).
  std::function<std::optional<std::uint64_t>()> free_disk;
  // Free space is measured at most this often, and also as soon as what was written since the
  // last measure may have used up the margin above the reserve. Default: 1 s.
  std::chrono::milliseconds disk_check_interval{1000};
};

class Node {
 public:
  // Opens the store, recovers every job and starts the committer. Errors: the store's (a
  // directory that fails its checks is refused, see docs/storage-format.md).
  static Result<std::unique_ptr<Node>> open(boost::asio::io_context& io,
                                            const NodeOptions& options);
  // The same over a store already open (options.data_dir and options.store are not used): for
  // tests that put a store of their own under a node.
  static Result<std::unique_ptr<Node>> open(boost::asio::io_context& io, const NodeOptions& options,
                                            std::unique_ptr<store::Store> store);
  ~Node();
  Node(const Node&) = delete;
  Node& operator=(const Node&) = delete;

  [[nodiscard]] engine::Engine& engine() { return *engine_; }
  // The jobs recovered at open, and of them the far tier's (counted, not read).
  [[nodiscard]] std::uint64_t recovered_jobs() const noexcept { return recovered_jobs_; }
  [[nodiscard]] std::uint64_t recovered_far_jobs() const noexcept { return recovered_far_; }

  // A job's body: from this turn's mutations or the batches not yet written, else the store.
  Result<std::string> body(JobId id);
  // A job's attachment, found the same way (kNotFound if it has none).
  Result<Delivery> attachment(JobId id);

  // Tubes' webhooks, recovered at open. set/remove change them and join the open batch: a
  // completion that waits for barrier() after the call sees them durable. remove: false if the
  // tube had none.
  [[nodiscard]] const std::map<std::string, Webhook>& webhooks() const noexcept {
    return webhooks_;
  }
  void set_webhook(const std::string& tube, const Webhook& webhook);
  bool remove_webhook(const std::string& tube);
  // Who hears, once a change of the webhooks is durable, that they changed.
  void on_webhooks_changed(std::function<void()> handler) {
    on_webhooks_changed_ = std::move(handler);
  }

  // The sequence number of the batch that will hold everything done so far: a result that
  // depends on the whole state (a count, an error) waits for it.
  [[nodiscard]] std::uint64_t barrier() const;
  // The batch holding the latest change of job `id` that is not yet durable, or 0 if every
  // change of it is (the job's erasure counts as a change). O(changes since the last call).
  [[nodiscard]] std::uint64_t batch_of(JobId id);
  // Runs `completion` on this thread once batch `batch` is durable: in the next turn if it
  // already is, never inside this call. If the store fails first, it never runs.
  void when_durable(std::uint64_t batch, std::function<void()> completion);

  // Something was done to the engine: commit, deliver wakeups and re-arm the timer soon.
  void touched();

  // What else a turn drives (the schedules): tick() runs in each turn before time passes in the
  // engine, and next_wake_us() (Unix microseconds) joins the engine's wakeup in arming the timer.
  class Ticker {
   public:
    virtual ~Ticker() = default;
    virtual void tick() = 0;
    [[nodiscard]] virtual std::optional<std::int64_t> next_wake_us() const = 0;
  };
  void set_ticker(Ticker* ticker) { ticker_ = ticker; }
  // Changes of the node's own (not the engine's), committed in the engine's open batch: what is
  // staged here becomes durable with, and never apart from, the engine's changes of this turn.
  [[nodiscard]] store::WriteSet& staged() noexcept { return staged_; }
  // Calls visit(name, value) for every stored schedule, by name (the schedules' open).
  Status scan_schedules(const std::function<Status(std::string, std::string)>& visit);
  // A schedule's record as last written, staged or not yet durable included (nullopt: none).
  [[nodiscard]] Result<std::optional<std::string>> schedule(std::string_view name);

  // Who hears about what. on_wakeup(wait): a waiting reserve ended. on_fatal: the store
  // failed; the node must stop.
  using WakeupHandler = std::function<void(const engine::ReserveResult&)>;
  void on_wakeup(engine::WaitId wait, WakeupHandler handler);
  void forget(engine::WaitId wait);
  void on_fatal(std::function<void(const Status&)> handler) { on_fatal_ = std::move(handler); }

  // Drain mode (SIGUSR1, as beanstalkd): every front-end refuses puts.
  void set_draining(bool draining) { draining_ = draining; }
  [[nodiscard]] bool draining() const noexcept { return draining_; }
  // Whether the node serves: false once the store has failed (readiness probes).
  [[nodiscard]] bool healthy() const noexcept { return !failed_; }
  // kNoSpace while the data directory's file system has less than min_free_disk_bytes free
  // (see NodeOptions), else ok. Cheap: measures only when the last measure is too old.
  Status space();
  // Since open(), on the engine's clock (which never runs backwards).
  [[nodiscard]] std::chrono::seconds uptime() const {
    return std::chrono::seconds{std::max<std::int64_t>(0, engine_->now() - started_unix_ms_) /
                                1000};
  }

  // Where the node's metrics are (NodeOptions::metrics, or its own).
  [[nodiscard]] metrics::Registry& metrics() noexcept { return *metrics_; }

  // Copies the store into `dir` (see broker::Session::backup) once everything done so far is
  // durable, on a thread of its own so that the node goes on serving; `done` runs on this
  // thread, never inside this call, and not at all if the node is destroyed first.
  void backup(std::string dir, std::function<void(Result<broker::BackupResult>)> done);

  // Commits what is pending and waits for the committer (used at shutdown).
  Status close();

 private:
  Node(boost::asio::io_context& io, const NodeOptions& options);
  void turn();
  void run_ready();
  void index_open_batch();
  void commit();
  void deliver_wakeups();
  void arm_timer();
  void on_committed(std::uint64_t seq, const Status& status);

  boost::asio::io_context& io_;
  const std::string data_dir_;  // where a backup may not go
  const store::Durability durability_;
  engine::SystemClock system_clock_;
  std::unique_ptr<store::Store> store_;
  std::unique_ptr<engine::Engine> engine_;
  std::unique_ptr<store::Committer> committer_;
  boost::asio::steady_timer timer_;
  std::optional<std::int64_t> armed_for_;  // the engine time timer_ is set for
  std::uint64_t recovered_jobs_ = 0;
  std::uint64_t recovered_far_ = 0;
  std::uint64_t submitted_ = 0;  // sequence of the last batch handed to the committer
  std::uint64_t durable_ = 0;    // sequence of the last batch the committer reported durable
  bool turn_posted_ = false;
  bool in_turn_ = false;
  bool failed_ = false;
  bool draining_ = false;
  std::int64_t started_unix_ms_ = 0;
  std::int64_t turn_unix_us_ = 0;  // when this turn began: fire lateness is measured from it
  // Free space (space()): the last measure, when it was taken, what was written since.
  std::function<std::optional<std::uint64_t>()> free_disk_;
  std::uint64_t min_free_disk_ = 0;
  std::chrono::steady_clock::duration disk_check_interval_{};
  std::chrono::steady_clock::time_point disk_checked_at_{};
  std::uint64_t disk_free_ = 0;
  std::uint64_t written_since_check_ = 0;
  bool disk_low_ = false;
  void measure_disk(std::chrono::steady_clock::time_point now);
  std::unique_ptr<metrics::Registry> own_metrics_;  // when the options give none
  metrics::Registry* metrics_;
  metrics::Histogram& fire_lateness_;
  // Steps (one per turn of the event loop that changed something) per store write, and the time
  // of a store write and its fsync, for batches that were fsynced.
  metrics::Histogram& commit_batch_;
  metrics::Histogram& fsync_;
  // Batches submitted and not yet durable: the jobs they change, and the bodies they put (the
  // store cannot serve those yet), read from the batch the committer writes, not copied.
  struct Unsynced {
    using Values = std::vector<std::pair<JobId, const std::string*>>;  // by id, then op order
    std::uint64_t epoch = 0;  // the engine's take_mutations() it holds (Engine::settle())
    std::vector<JobId> jobs;
    std::shared_ptr<const store::WriteSet> set;  // under `always`: what the values point into
    Values bodies;
    Values attachments;  // encoded
    // Schedules written (nullopt: erased), by name.
    std::map<std::string, std::optional<std::string>, std::less<>> schedules;
  };
  // The newest value of a job's op of kind `kind` not yet in the store, if any.
  const std::string* unstored(JobId id, store::WriteSet::Kind kind);
  std::map<std::string, Webhook> webhooks_;
  std::function<void()> on_webhooks_changed_;
  bool backing_up_ = false;
  std::thread backup_thread_;  // the last backup's; joined before the next and at destruction
  void webhooks_changed();
  store::WriteSet staged_;  // the node's own changes (webhooks), committed with the engine's
  Ticker* ticker_ = nullptr;
  std::map<std::uint64_t, Unsynced> unsynced_;
  // Job -> the latest batch not yet durable that changes it (the open batch included).
  std::unordered_map<JobId, std::uint64_t> batch_of_;
  std::size_t indexed_ops_ = 0;  // ops of the engine's open batch already in batch_of_
  // Completions waiting for their batch, and those whose batch is durable (the turn runs them).
  // waiting_ is sorted by batch; almost every completion waits for the open batch, so it joins
  // at the back, and leaves from the front: no allocation of a tree node per reply.
  std::deque<std::pair<std::uint64_t, std::function<void()>>> waiting_;
  // The room on_committed() takes the completions due into, kept between batches: a batch of a
  // hundred puts would allocate it afresh each time.
  std::vector<std::function<void()>> spare_due_;
  std::vector<std::function<void()>> ready_;
  std::vector<std::function<void()>> running_;  // ready_ being run (run_ready)
  std::unordered_map<engine::WaitId, WakeupHandler> waiters_;
  std::function<void(const Status&)> on_fatal_;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace delayq::broker::local
