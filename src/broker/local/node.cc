#include "broker/local/node.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <sys/statvfs.h>

#include <algorithm>
#include <boost/asio/post.hpp>
#include <chrono>
#include <filesystem>
#include <iterator>

#include "broker/families.h"
#include "broker/local/recovery.h"

namespace delayq::broker::local {

namespace {

constexpr std::chrono::microseconds kLongestSleep{1'000'000};

std::int64_t unix_us() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace

Node::Node(boost::asio::io_context& io, const NodeOptions& options)
    : io_(io),
      data_dir_(options.data_dir),
      durability_(options.durability),
      timer_(io),
      started_unix_ms_(unix_us() / 1000),
      free_disk_(options.free_disk),
      min_free_disk_(options.min_free_disk_bytes),
      disk_check_interval_(options.disk_check_interval),
      own_metrics_(options.metrics == nullptr ? std::make_unique<metrics::Registry>() : nullptr),
      metrics_(options.metrics != nullptr ? options.metrics : own_metrics_.get()),
      fire_lateness_(broker::fire_lateness(*metrics_)),
      commit_batch_(metrics_->histogram("delayq_commit_batch_steps",
                                        "Engine steps written to the store in one batch.",
                                        {1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024})),
      fsync_(metrics_->histogram(
          "delayq_fsync_seconds", "Store write plus fsync, per fsynced batch.",
          {0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1})) {}

Node::~Node() {
  if (backup_thread_.joinable()) backup_thread_.join();
  *alive_ = false;
  timer_.cancel();
  committer_.reset();  // commits what is queued; its late callbacks see alive_ == false
}

Result<std::unique_ptr<Node>> Node::open(boost::asio::io_context& io, const NodeOptions& options) {
  const std::filesystem::path dir(options.data_dir);
  std::error_code error;
  if (dir.has_parent_path()) std::filesystem::create_directories(dir.parent_path(), error);
  auto store = store::RocksStore::open(options.data_dir, options.store);
  if (!store.is_ok()) return store.status();
  if (!store.value()->dropped().empty()) {
    spdlog::warn("{}: {}", options.data_dir, store.value()->dropped());
  }
  NodeOptions with_disk = options;
  if (!with_disk.free_disk) {
    with_disk.free_disk = [dir = options.data_dir]() -> std::optional<std::uint64_t> {
      struct statvfs fs {};
      if (::statvfs(dir.c_str(), &fs) != 0) return std::nullopt;
      return std::uint64_t{fs.f_bavail} * fs.f_frsize;
    };
  }
  return open(io, with_disk, std::move(store).value());
}

Result<std::unique_ptr<Node>> Node::open(boost::asio::io_context& io, const NodeOptions& options,
                                         std::unique_ptr<store::Store> store) {
  std::unique_ptr<Node> node(new Node(io, options));
  node->store_ = std::move(store);
  engine::EngineOptions engine = options.engine;
  engine.far = node->store_.get();
  node->engine_ = std::make_unique<engine::Engine>(
      options.clock != nullptr ? *options.clock : node->system_clock_, engine);
  auto recovered = recover(*node->store_, *node->engine_, options.on_recovery);
  if (!recovered.is_ok()) return recovered.status();
  Status webhooks = node->store_->scan_webhooks([raw = node.get()](std::string tube, Webhook hook) {
    (void)raw->engine_->keep_tube(tube, true);  // a name stored was checked when it was set
    raw->webhooks_.emplace(std::move(tube), std::move(hook));
    return Status::ok();
  });
  if (!webhooks.is_ok()) return webhooks;
  Status limits =
      node->store_->scan_max_attempts([raw = node.get()](std::string tube, std::uint32_t n) {
        raw->engine_->restore_max_attempts(tube, n);
        return Status::ok();
      });
  if (!limits.is_ok()) return limits;
  Status flows = node->store_->scan_flows([raw = node.get()](std::string tube, FlowSettings flow) {
    raw->engine_->restore_flow(tube, flow);
    return Status::ok();
  });
  if (!flows.is_ok()) return flows;
  node->recovered_far_ = node->engine_->far_jobs();
  // Every job: those read back, those of the far tier, and those its first load brought in.
  node->recovered_jobs_ = node->engine_->jobs();
  node->committer_ = std::make_unique<store::Committer>(
      *node->store_, options.durability,
      [&batch = node->commit_batch_, &fsync = node->fsync_](const store::BatchReport& report) {
        // A sync of the node's own writes (interval) holds no step of the committer's.
        if (report.steps > 0) batch.observe(static_cast<double>(report.steps));
        if (report.synced) fsync.observe(std::chrono::duration<double>(report.sync_time).count());
      });
  Node* raw = node.get();
  node->engine_->on_fire([raw](std::int64_t due_unix_us) {
    const double late_us = static_cast<double>(raw->turn_unix_us_ - due_unix_us);
    raw->fire_lateness_.observe(std::max(0.0, late_us) / 1e6);
  });
  if (node->min_free_disk_ > 0 && node->free_disk_) {
    node->measure_disk(std::chrono::steady_clock::now());  // says at start if space is short
  }
  node->touched();  // overdue jobs, and the first timer
  return node;
}

// Newest first: this turn's mutations, then the batches not yet written. Only a job changed in
// a batch not yet durable can have a value outside the store.
const std::string* Node::unstored(JobId id, store::WriteSet::Kind kind) {
  if (batch_of(id) == 0) return nullptr;
  const auto& pending = engine_->mutations().ops();
  for (auto op = pending.rbegin(); op != pending.rend(); ++op) {
    if (op->kind == kind && op->id == id) return &op->value;
  }
  for (auto batch = unsynced_.rbegin(); batch != unsynced_.rend(); ++batch) {
    const Unsynced::Values& values =
        kind == store::WriteSet::Kind::kBody ? batch->second.bodies : batch->second.attachments;
    // The last of the id's: the batch's newest.
    const auto after =
        std::upper_bound(values.begin(), values.end(), id,
                         [](JobId key, const auto& entry) { return key < entry.first; });
    if (after != values.begin() && std::prev(after)->first == id) return std::prev(after)->second;
  }
  return nullptr;
}

Status Node::scan_schedules(const std::function<Status(std::string, std::string)>& visit) {
  return store_->scan_schedules(visit);
}

// Newest first, as unstored(): this turn's staged changes, then the batches not yet written.
Result<std::optional<std::string>> Node::schedule(std::string_view name) {
  const auto& staged = staged_.ops();
  for (auto op = staged.rbegin(); op != staged.rend(); ++op) {
    if (op->tube != name) continue;
    if (op->kind == store::WriteSet::Kind::kSchedule) return std::optional<std::string>(op->value);
    if (op->kind == store::WriteSet::Kind::kEraseSchedule) return std::optional<std::string>();
  }
  for (auto batch = unsynced_.rbegin(); batch != unsynced_.rend(); ++batch) {
    const auto& written = batch->second.schedules;
    if (const auto it = written.find(name); it != written.end()) return it->second;
  }
  return store_->read_schedule(name);
}

Result<std::string> Node::body(JobId id) {
  if (const std::string* body = unstored(id, store::WriteSet::Kind::kBody)) return *body;
  return store_->read_body(id);
}

Result<Delivery> Node::attachment(JobId id) {
  if (const std::string* bytes = unstored(id, store::WriteSet::Kind::kAttachment)) {
    return store::decode_delivery(id, *bytes);
  }
  return store_->read_attachment(id);
}

void Node::set_webhook(const std::string& tube, const Webhook& webhook) {
  (void)engine_->keep_tube(tube, true);  // the broker checked the name
  webhooks_[tube] = webhook;
  staged_.put_webhook(tube, webhook);
  webhooks_changed();
}

bool Node::remove_webhook(const std::string& tube) {
  if (webhooks_.erase(tube) == 0) return false;
  (void)engine_->keep_tube(tube, false);
  staged_.erase_webhook(tube);
  webhooks_changed();
  return true;
}

namespace {

std::string mib(std::uint64_t bytes) {
  return fmt::format("{:.1f} MiB", static_cast<double>(bytes) / (1 << 20));
}

}  // namespace

Status Node::space() {
  if (min_free_disk_ == 0 || !free_disk_) return Status::ok();
  const auto now = std::chrono::steady_clock::now();
  // Measure when the last measure is old, or when what was written since may have taken the
  // node below its reserve (not again while it is below: the old measure holds until it is old).
  const bool maybe_low = !disk_low_ && written_since_check_ + min_free_disk_ > disk_free_;
  if (now - disk_checked_at_ >= disk_check_interval_ || maybe_low) measure_disk(now);
  if (!disk_low_) return Status::ok();
  return {Code::kNoSpace, "the data directory's disk has " + mib(disk_free_) +
                              " free, less than the " + mib(min_free_disk_) +
                              " kept free (--min-free-disk): no new jobs until there is room"};
}

void Node::measure_disk(std::chrono::steady_clock::time_point now) {
  disk_checked_at_ = now;
  written_since_check_ = 0;
  const std::optional<std::uint64_t> free = free_disk_();
  if (!free) return;  // unknown: keep the last verdict
  disk_free_ = *free;
  const bool low = disk_free_ < min_free_disk_;
  if (low && !disk_low_) {
    spdlog::warn(
        "the data directory's disk has {} free, less than the {} kept free: refusing "
        "new jobs until there is room (reads, deletes and workers go on)",
        mib(disk_free_), mib(min_free_disk_));
  } else if (!low && disk_low_) {
    spdlog::info("the data directory's disk has {} free again: accepting new jobs",
                 mib(disk_free_));
  }
  disk_low_ = low;
}

namespace {

std::uint64_t bytes_under(const std::filesystem::path& dir) {
  std::uint64_t bytes = 0;
  std::error_code error;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(dir, error)) {
    if (entry.is_regular_file(error)) bytes += entry.file_size(error);
  }
  return bytes;
}

Status check_backup_dir(const std::string& dir, const std::string& data_dir) {
  const std::filesystem::path path(dir);
  std::error_code error;
  if (dir.empty()) {
    return {Code::kInvalidArgument,
            "backup: dir: the new directory to write the copy into, an absolute path"};
  }
  if (dir.find('\0') != std::string::npos) {
    return {Code::kInvalidArgument, "backup: the path holds a NUL byte"};
  }
  if (!path.is_absolute()) {
    return {Code::kInvalidArgument, "backup: '" + dir + "' is not an absolute path"};
  }
  if (std::filesystem::exists(path, error)) {
    return {Code::kInvalidArgument, "backup: " + dir + " exists; name a new directory"};
  }
  // RocksDB writes the copy into <dir>.tmp first, and empties whatever is there.
  if (std::filesystem::exists(dir + ".tmp", error)) {
    return {Code::kInvalidArgument, "backup: " + dir +
                                        ".tmp exists, where the copy is written first; remove "
                                        "it or name another directory"};
  }
  // A copy inside the data directory would go with it.
  const auto inside = std::filesystem::weakly_canonical(path, error)
                          .lexically_relative(std::filesystem::weakly_canonical(data_dir, error));
  if (!error && !inside.empty() && *inside.begin() != "..") {
    return {Code::kInvalidArgument,
            "backup: " + dir + " is inside the data directory; name one outside it"};
  }
  if (!std::filesystem::is_directory(path.parent_path(), error)) {
    return {Code::kInvalidArgument,
            "backup: " + path.parent_path().string() + " is not a directory"};
  }
  // Where the copy cannot be written (no permission, a read-only file system) is the request's
  // fault, said as such, not a failure of the store: tried with the directory RocksDB makes.
  if (!std::filesystem::create_directory(dir + ".tmp", error) || error) {
    return {Code::kInvalidArgument, "backup: cannot create " + dir +
                                        ".tmp, where the copy is written first: " +
                                        (error ? error.message() : std::string("it exists"))};
  }
  std::filesystem::remove(dir + ".tmp", error);
  return Status::ok();
}

}  // namespace

void Node::backup(std::string dir, std::function<void(Result<broker::BackupResult>)> done) {
  // "/backups/today/" names the directory "/backups/today", as a shell would take it.
  while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
  Status refused = backing_up_ ? Status(Code::kConflict, "backup: another backup is running")
                               : check_backup_dir(dir, data_dir_);
  if (!refused.is_ok()) {
    boost::asio::post(io_,
                      [done = std::move(done), refused = std::move(refused)] { done(refused); });
    return;
  }
  backing_up_ = true;
  const std::uint64_t jobs = engine_->jobs();
  when_durable(barrier(), [this, dir = std::move(dir), jobs, done = std::move(done)]() mutable {
    if (backup_thread_.joinable()) backup_thread_.join();
    // `done` may hold the last reference to a front-end's connection: it is moved, never
    // copied, so that it is destroyed on this thread, not the backup's.
    backup_thread_ =
        std::thread([this, dir = std::move(dir), jobs, done = std::move(done)]() mutable {
          const auto start = std::chrono::steady_clock::now();
          Status copied = store_->checkpoint(dir);
          broker::BackupResult result{
              dir, jobs, copied.is_ok() ? bytes_under(dir) : 0,
              std::chrono::duration_cast<broker::Millis>(std::chrono::steady_clock::now() - start)};
          boost::asio::post(io_, [this, alive = alive_, done = std::move(done),
                                  copied = std::move(copied), result = std::move(result)] {
            if (!*alive) return;
            backing_up_ = false;
            if (!copied.is_ok()) return done(copied);
            done(result);
          });
        });
  });
  touched();
}

void Node::webhooks_changed() {
  when_durable(barrier(), [this] {
    if (on_webhooks_changed_) on_webhooks_changed_();
  });
  touched();
}

std::uint64_t Node::barrier() const {
  return engine_->mutations().empty() && staged_.empty() ? submitted_ : submitted_ + 1;
}

// The open batch's ops since the last call are indexed under the number it will get.
void Node::index_open_batch() {
  const auto& ops = engine_->mutations().ops();
  JobId last = 0;  // a put's record and body are two ops of one job: one lookup
  for (; indexed_ops_ < ops.size(); ++indexed_ops_) {
    const JobId id = ops[indexed_ops_].id;
    if (id != last && id != 0) batch_of_[id] = submitted_ + 1;
    last = id;
  }
}

std::uint64_t Node::batch_of(JobId id) {
  index_open_batch();
  const auto it = batch_of_.find(id);
  return it == batch_of_.end() ? 0 : it->second;
}

void Node::when_durable(std::uint64_t batch, std::function<void()> completion) {
  if (batch <= durable_) {
    ready_.push_back(std::move(completion));
    touched();
  } else {
    auto at = waiting_.end();
    while (at != waiting_.begin() && std::prev(at)->first > batch) --at;
    waiting_.emplace(at, batch, std::move(completion));
  }
}

// The completions run from a second vector, so those they make sendable wait for the next round;
// both keep their capacity.
void Node::run_ready() {
  running_.swap(ready_);
  for (auto& completion : running_) completion();
  running_.clear();
}

void Node::touched() {
  if (turn_posted_ || in_turn_) return;  // a turn under way commits and re-arms at its end
  turn_posted_ = true;
  boost::asio::post(io_, [this, alive = alive_] {
    if (*alive) turn();
  });
}

void Node::on_wakeup(engine::WaitId wait, WakeupHandler handler) {
  waiters_[wait] = std::move(handler);
}

void Node::forget(engine::WaitId wait) {
  waiters_.erase(wait);
}

// Once per turn of the event loop, after every session has had its say: the completions that
// became sendable (what they do next joins this turn's batch), time, wakeups (a reply that
// depends on this turn's batch waits for it), then the batch, then the timer. A completion may
// make calls whose completions are sendable at once (a beanstalkd connection's next pipelined
// reserve): they run in the same turn, for a bounded number of rounds, rather than one turn of
// the event loop each.
void Node::turn() {
  constexpr int kMaxRounds = 64;
  turn_posted_ = false;
  if (failed_) return;
  turn_unix_us_ = unix_us();
  in_turn_ = true;
  for (int round = 0; round < kMaxRounds; ++round) {
    run_ready();
    if (ticker_ != nullptr) ticker_->tick();
    engine_->advance();
    deliver_wakeups();
    if (ready_.empty()) break;
  }
  in_turn_ = false;
  commit();
  arm_timer();
  if (!ready_.empty()) touched();
}

void Node::deliver_wakeups() {
  for (const engine::Wakeup& wakeup : engine_->take_wakeups()) {
    const auto it = waiters_.find(wakeup.wait);
    if (it == waiters_.end()) continue;
    WakeupHandler handler = std::move(it->second);
    waiters_.erase(it);
    handler(wakeup.result);
  }
}

void Node::commit() {
  if (const Status& far = engine_->far_error(); !far.is_ok() && !failed_) {
    // A read of the far tier failed (the disk): stop, as a failed write does.
    if (on_fatal_) on_fatal_(far);
    failed_ = true;
  }
  index_open_batch();
  indexed_ops_ = 0;
  store::WriteSet set = engine_->take_mutations();
  set.append(std::move(staged_));
  if (set.empty()) return;
  const std::uint64_t seq = ++submitted_;
  Unsynced& unsynced = unsynced_[seq];
  unsynced.epoch = engine_->epoch();
  unsynced.jobs.reserve(set.ops().size());
  constexpr std::uint64_t kOpOverhead = 32;  // its key and the log's framing, about
  for (const store::WriteSet::Op& op : set.ops()) {
    if (op.id != 0 && (unsynced.jobs.empty() || unsynced.jobs.back() != op.id)) {
      unsynced.jobs.push_back(op.id);
    }
    written_since_check_ += op.value.size() + kOpOverhead;
  }
  if (durability_.mode != store::Durability::Mode::kAlways) {
    // A reply waits for the write alone (interval: the committer syncs it within the interval),
    // which is quicker here than a trip to the committer's thread and back.
    const store::WriteSet* sets[] = {&set};
    commit_batch_.observe(1);
    Status status = store_->write(sets, false);
    if (status.is_ok() && durability_.mode == store::Durability::Mode::kInterval) {
      status = committer_->written();
    }
    on_committed(seq, status);
    return;
  }
  auto shared = std::make_shared<const store::WriteSet>(std::move(set));
  for (const store::WriteSet::Op& op : shared->ops()) {
    if (op.kind == store::WriteSet::Kind::kBody) unsynced.bodies.emplace_back(op.id, &op.value);
    if (op.kind == store::WriteSet::Kind::kAttachment) {
      unsynced.attachments.emplace_back(op.id, &op.value);
    }
    if (op.kind == store::WriteSet::Kind::kSchedule) unsynced.schedules[op.tube] = op.value;
    if (op.kind == store::WriteSet::Kind::kEraseSchedule) unsynced.schedules[op.tube].reset();
  }
  const auto by_id = [](const auto& a, const auto& b) { return a.first < b.first; };
  std::stable_sort(unsynced.bodies.begin(), unsynced.bodies.end(), by_id);  // puts: in order
  std::stable_sort(unsynced.attachments.begin(), unsynced.attachments.end(), by_id);
  unsynced.set = shared;
  committer_->submit(std::move(shared), [this, seq, alive = alive_](const Status& status) {
    // On the committer's thread: hop back to the node's.
    boost::asio::post(io_, [this, seq, status, alive] {
      if (*alive) on_committed(seq, status);
    });
  });
}

void Node::on_committed(std::uint64_t seq, const Status& status) {
  if (!status.is_ok()) {
    if (!failed_ && on_fatal_) on_fatal_(status);
    failed_ = true;
    return;
  }
  if (seq <= durable_) return;
  durable_ = seq;
  const auto end = unsynced_.upper_bound(seq);
  if (end != unsynced_.begin()) engine_->settle(std::prev(end)->second.epoch);
  for (auto batch = unsynced_.begin(); batch != end; ++batch) {
    for (const JobId id : batch->second.jobs) {
      // A later batch may change the job again: then it stays, under that one.
      if (const auto it = batch_of_.find(id); it != batch_of_.end() && it->second <= seq) {
        batch_of_.erase(it);
      }
    }
  }
  // Their writes are freed on the committer's thread, not this one (which bounds the rate).
  std::vector<std::shared_ptr<const store::WriteSet>> written;
  for (auto batch = unsynced_.begin(); batch != end; ++batch) {
    if (batch->second.set) written.push_back(std::move(batch->second.set));
  }
  if (!written.empty()) committer_->retire(std::move(written));
  unsynced_.erase(unsynced_.begin(), end);
  // Completions may call the broker again (and add to waiting_): take them out first.
  std::vector<std::function<void()>> due = std::move(spare_due_);  // empty: see below
  while (!waiting_.empty() && waiting_.front().first <= seq) {
    due.push_back(std::move(waiting_.front().second));
    waiting_.pop_front();
  }
  for (auto& completion : due) completion();
  due.clear();
  if (due.capacity() <= 4096) spare_due_ = std::move(due);  // not what a rare burst grew
}

// Sleeps until the engine's next wakeup; nothing to do means no timer at all.
void Node::arm_timer() {
  auto next = engine_->next_wakeup_us();
  if (const auto other = ticker_ != nullptr ? ticker_->next_wake_us() : std::nullopt; other) {
    next = std::min(next.value_or(*other), *other);
  }
  if (!next) {
    timer_.cancel();
    armed_for_.reset();
    return;
  }
  if (armed_for_ == *next) return;  // already set for it: spare the timer queue a syscall
  armed_for_ = *next;
  // Wake at the due microsecond. The timer runs on the monotonic clock, and a step of the wall
  // clock tells it nothing: waking at least once a second bounds how late a due time that a
  // forward step passed is noticed.
  const std::int64_t wait_us =
      std::clamp<std::int64_t>(*next - unix_us(), 0, kLongestSleep.count());
  timer_.expires_after(std::chrono::microseconds(wait_us));
  timer_.async_wait([this, alive = alive_](const boost::system::error_code& error) {
    if (error || !*alive) return;
    armed_for_.reset();
    touched();
  });
}

Status Node::close() {
  if (!failed_) commit();
  return committer_->flush();
}

}  // namespace delayq::broker::local
