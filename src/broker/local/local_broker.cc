#include "broker/local/local_broker.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <unordered_map>

#include "broker/local/completions.h"
#include "broker/put_rules.h"

namespace delayq::broker::local {
namespace {

using broker::Callback;
using engine::ClientId;
using Kind = engine::ReserveResult::Kind;

class LocalSession final : public broker::Session {
 public:
  LocalSession(Node& node, broker::SessionOptions options);
  ~LocalSession() override;
  LocalSession(const LocalSession&) = delete;
  LocalSession& operator=(const LocalSession&) = delete;

  Status use(std::string_view tube) override;
  [[nodiscard]] std::string used() const override { return engine().used_tube(client_); }
  Result<std::size_t> watch(std::string_view tube) override;
  Result<std::size_t> ignore(std::string_view tube) override;
  [[nodiscard]] std::vector<std::string> watched() const override {
    return engine().watched_tubes(client_);
  }

  void put(broker::PutRequest request, Callback<broker::PutResult> done) override;
  std::uint64_t reserve(broker::ReserveRequest request, Callback<broker::Job> done) override;
  bool cancel_reserve(std::uint64_t ticket) override;
  // The engine hands a waiting reserve each job as it becomes ready: it has seen them all.
  bool stop_waiting(std::uint64_t ticket) override { return cancel_reserve(ticket); }
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
  void note_attempt(JobId id, int status, std::string error, Callback<JobView> done) override;

 private:
  [[nodiscard]] engine::Engine& engine() const { return node_.engine(); }

  // The job with its body (unless `body` is false) and its attachment, or the error reading them.
  Result<broker::Job> read_job(const JobView& view, bool body);
  // The same for a job this session has just reserved: one whose body or attachment cannot be
  // read (a damaged blob file) is buried, with an error logged, not left reserved by a client
  // that was never told its id, to come back at its TTR and fail again.
  Result<broker::Job> read_reserved(const JobView& view);
  void finish_with_body(Callback<broker::Job> done, Result<JobView> view, bool body);
  // kNotFound from an operation on a job that exists: someone else holds it, or its state
  // forbids the operation.
  Status refine(Status status, JobId id, std::string_view why) const;
  Result<JobId> resolve(const broker::JobRef& job) const;

  void woken(std::uint64_t ticket, const engine::ReserveResult& result);
  void reserved(Callback<broker::Job> done, const engine::ReserveResult& result);

  Node& node_;
  ClientId client_ = 0;
  // Reserves waiting, by ticket: the engine's WaitId. Made at the first wait.
  using Waits = std::unordered_map<std::uint64_t, Callback<broker::Job>>;
  std::unique_ptr<Waits> waits_;
  // The waiting reserve of `ticket`'s completion, taken out; empty if it is not waiting.
  Callback<broker::Job> take_wait(std::uint64_t ticket) {
    if (!waits_) return {};
    const auto it = waits_->find(ticket);
    if (it == waits_->end()) return {};
    Callback<broker::Job> done = std::move(it->second);
    waits_->erase(it);
    return done;
  }
  Completions completions_{node_};
};

// The server-wide calls: the engine's tubes and counts, the node's webhooks and backups.
class LocalAdmin final : public broker::Admin {
 public:
  explicit LocalAdmin(Node& node) : node_(node) {}

  void pause_tube(std::string tube, broker::Seconds pause, Callback<TubeStats> done) override;
  void stats_tube(std::string tube, Callback<TubeStats> done) override;
  void set_max_attempts(std::string tube, std::uint32_t max_attempts,
                        Callback<std::uint32_t> done) override;
  void set_flow(std::string tube, broker::FlowChange change, Callback<FlowSettings> done) override;
  void list_tubes(Callback<std::vector<TubeStats>> done) override;
  void stats(Callback<ServerStats> done) override;
  void due_counts(std::string tube, std::vector<Due> edges,
                  Callback<broker::DueCounts> done) override;
  void list_jobs(std::string tube, JobState state, std::size_t limit,
                 Callback<broker::JobList> done) override;
  void set_webhook(std::string tube, Webhook webhook, Callback<Webhook> done) override;
  void get_webhook(std::string tube, Callback<Webhook> done) override;
  void remove_webhook(std::string tube, Callback<Webhook> done) override;
  void backup(std::string dir, Callback<broker::BackupResult> done) override;

 private:
  [[nodiscard]] engine::Engine& engine() const { return node_.engine(); }

  Node& node_;
  Completions completions_{node_};
};

LocalSession::LocalSession(Node& node, broker::SessionOptions options)
    : node_(node), client_(node.engine().connect(options.watch_default)) {}

LocalSession::~LocalSession() {
  completions_.forget();
  if (waits_) {
    for (const auto& [ticket, done] : *waits_) node_.forget(ticket);
  }
  engine().disconnect(client_);  // its waits end, its reserved jobs are ready again
  node_.touched();
}

// --- tubes of the session

Status LocalSession::use(std::string_view tube) {
  return engine().use(client_, tube);
}

Result<std::size_t> LocalSession::watch(std::string_view tube) {
  return engine().watch(client_, tube);
}

Result<std::size_t> LocalSession::ignore(std::string_view tube) {
  return engine().ignore(client_, tube);
}

// --- helpers

Result<broker::Job> LocalSession::read_job(const JobView& view, bool body) {
  broker::Job job{view, {}, engine().now(), {}};
  if (body) {
    auto bytes = node_.body(view.id);
    if (!bytes.is_ok()) return bytes.status();
    job.body = std::move(bytes).value();
  }
  if (view.attached) {
    auto delivery = node_.attachment(view.id);
    if (!delivery.is_ok()) return delivery.status();
    job.delivery = std::move(delivery).value();
  }
  return job;
}

Result<broker::Job> LocalSession::read_reserved(const JobView& view) {
  auto job = read_job(view, true);
  if (job.is_ok()) return job;
  spdlog::error("job {} cannot be read, and is buried: {}", view.id, job.status().to_string());
  (void)engine().bury(client_, view.id, view.priority);
  return Status(job.status().code(),
                "job " + std::to_string(view.id) +
                    " cannot be read, and is buried: " + job.status().message());
}

void LocalSession::finish_with_body(Callback<broker::Job> done, Result<JobView> view, bool body) {
  if (!view.is_ok()) return completions_.finish_all<broker::Job>(std::move(done), view.status());
  completions_.finish(node_.batch_of(view.value().id), std::move(done),
                      read_job(view.value(), body));
}

// kNotFound from the engine: no such job (said so), or a job this session cannot act on (the
// conflict `why` names).
Status LocalSession::refine(Status status, JobId id, std::string_view why) const {
  if (status.code() != Code::kNotFound) return status;
  if (!engine().peek(id).is_ok()) return {Code::kNotFound, "no job " + std::to_string(id)};
  return {Code::kConflict, "job " + std::to_string(id) + " " + std::string(why)};
}

Result<JobId> LocalSession::resolve(const broker::JobRef& job) const {
  if (job.id != 0) return job.id;
  return engine().find_key(job.tube, job.key);
}

// --- jobs

void LocalSession::put(broker::PutRequest request, Callback<broker::PutResult> done) {
  // The used tube is copied, and the webhooks looked up, only where the put needs them.
  std::string used_tube;
  const std::string_view tube = request.tube.empty() ? (used_tube = used()) : request.tube;
  broker::PutContext context;
  context.max_name_bytes = engine().options().max_name_bytes;
  context.draining = node_.draining();
  context.space = node_.space();
  context.tube_has_webhook = !request.url.empty() && node_.webhooks().contains(std::string(tube));
  if (Status bad = broker::check_put(request, tube, context); !bad.is_ok()) {
    return completions_.finish_all<broker::PutResult>(std::move(done), std::move(bad));
  }
  engine::PutRequest put;
  put.tube = request.tube;
  put.priority = request.priority;
  // A delay goes to the engine as it is, so that it counts from the job's creation and reads
  // back unchanged however long the call took to get there.
  put.due = request.due;
  put.ttr = request.ttr;
  put.body = request.body;
  put.key = request.key;
  put.group = request.group;
  put.replace = request.replace;
  put.debounce = request.debounce;
  put.max_wait = request.max_wait;
  Delivery delivery;
  delivery.url = std::move(request.url);
  delivery.content_type = std::move(request.content_type);
  delivery.traceparent = std::move(request.traceparent);
  delivery.tracestate = std::move(request.tracestate);
  if (!delivery.empty()) put.attachment = &delivery;
  auto result = engine().put(client_, put);
  if (!result.is_ok())
    return completions_.finish_all<broker::PutResult>(std::move(done), result.status());
  const engine::PutResult& r = result.value();
  auto view = engine().peek(r.id);
  if (!view.is_ok())
    return completions_.finish_all<broker::PutResult>(std::move(done), view.status());
  std::uint64_t batch = node_.batch_of(r.id);
  if (r.replaced != 0) batch = std::max(batch, node_.batch_of(r.replaced));
  completions_.finish(batch, std::move(done),
                      Result<broker::PutResult>(
                          broker::PutResult{view.value(), r.inserted, r.replaced, r.debounced}));
}

std::uint64_t LocalSession::reserve(broker::ReserveRequest request, Callback<broker::Job> done) {
  engine::ReserveResult result;
  if (request.tubes.empty()) {
    result = engine().reserve(client_, request.timeout);
  } else {
    auto named = engine().reserve_from(client_, request.tubes, request.timeout);
    if (!named.is_ok()) {
      completions_.finish_all<broker::Job>(std::move(done), named.status());
      return 0;
    }
    result = std::move(named).value();
  }
  if (result.kind != Kind::kWaiting) {
    reserved(std::move(done), result);
    return 0;
  }
  const engine::WaitId ticket = result.wait;
  if (!waits_) waits_ = std::make_unique<Waits>();
  waits_->emplace(ticket, std::move(done));
  node_.on_wakeup(ticket, completions_.guarded([this, ticket](const engine::ReserveResult& later) {
    woken(ticket, later);
  }));
  node_.touched();  // the node arms its timer for the wait's end
  return ticket;
}

void LocalSession::woken(std::uint64_t ticket, const engine::ReserveResult& result) {
  if (Callback<broker::Job> done = take_wait(ticket)) reserved(std::move(done), result);
}

// A reserve has its answer.
void LocalSession::reserved(Callback<broker::Job> done, const engine::ReserveResult& result) {
  switch (result.kind) {
    case Kind::kReserved: {
      auto job = read_reserved(result.job);  // before batch_of: it may bury the job
      return completions_.finish(node_.batch_of(result.job.id), std::move(done), std::move(job));
    }
    case Kind::kDeadlineSoon:
      return completions_.finish_all<broker::Job>(
          std::move(done), Status(Code::kDeadlineSoon, "a reserved job's TTR is ending"));
    case Kind::kTimedOut:
    case Kind::kWaiting:
      break;
  }
  completions_.finish_all<broker::Job>(std::move(done),
                                       Status(Code::kTimedOut, "no job became ready in time"));
}

bool LocalSession::cancel_reserve(std::uint64_t ticket) {
  Callback<broker::Job> done = take_wait(ticket);
  if (!done) return false;
  node_.forget(ticket);
  (void)engine().cancel_wait(ticket);
  reserved(std::move(done), engine::ReserveResult{Kind::kTimedOut, {}});
  return true;
}

void LocalSession::reserve_job(JobId id, Callback<broker::Job> done) {
  auto view = engine().reserve_job(client_, id);
  if (!view.is_ok()) return completions_.finish_all<broker::Job>(std::move(done), view.status());
  auto job = read_reserved(view.value());  // before batch_of: it may bury the job
  completions_.finish(node_.batch_of(id), std::move(done), std::move(job));
}

void LocalSession::erase(broker::JobRef job, Callback<JobId> done) {
  auto id = resolve(job);
  if (!id.is_ok()) return completions_.finish_all<JobId>(std::move(done), id.status());
  if (Status s = engine().erase(client_, id.value()); !s.is_ok()) {
    return completions_.finish_all<JobId>(std::move(done),
                                          refine(s, id.value(), "is reserved by another client"));
  }
  completions_.finish(node_.batch_of(id.value()), std::move(done), Result<JobId>(id.value()));
}

void LocalSession::release(broker::ReleaseRequest request, Callback<JobView> done) {
  const JobId id = request.id;
  const auto view = engine().peek(id);
  if (request.reservation &&
      (!view.is_ok() || view.value().counters.reserves != *request.reservation)) {
    return completions_.finish_all<JobView>(
        std::move(done),
        Status(Code::kConflict, "job " + std::to_string(id) + " is in another reservation"));
  }
  const std::uint32_t priority =
      request.priority.value_or(view.is_ok() ? view.value().priority : 0);
  if (Status s = engine().release(client_, id, priority, request.delay); !s.is_ok()) {
    return completions_.finish_all<JobView>(std::move(done),
                                            refine(s, id, "is not reserved by this client"));
  }
  completions_.finish_job(std::move(done), id, engine().peek(id));
}

void LocalSession::bury(JobId id, std::optional<std::uint32_t> priority, Callback<JobView> done) {
  const auto view = engine().peek(id);
  const std::uint32_t own = view.is_ok() ? view.value().priority : 0;
  if (Status s = engine().bury(client_, id, priority.value_or(own)); !s.is_ok()) {
    return completions_.finish_all<JobView>(std::move(done),
                                            refine(s, id, "is not reserved by this client"));
  }
  completions_.finish_job(std::move(done), id, engine().peek(id));
}

void LocalSession::touch(JobId id, Callback<JobView> done) {
  if (Status s = engine().touch(client_, id); !s.is_ok()) {
    return completions_.finish_all<JobView>(std::move(done),
                                            refine(s, id, "is not reserved by this client"));
  }
  completions_.finish_job(std::move(done), id, engine().peek(id));
}

void LocalSession::peek(broker::JobRef job, bool with_body, Callback<broker::Job> done) {
  auto id = resolve(job);
  if (!id.is_ok()) return completions_.finish_all<broker::Job>(std::move(done), id.status());
  finish_with_body(std::move(done), engine().peek(id.value()), with_body);
}

void LocalSession::peek_next(std::string tube, JobState state, Callback<broker::Job> done) {
  switch (state) {
    case JobState::kReady:
      return finish_with_body(std::move(done), engine().peek_ready(tube), true);
    case JobState::kDelayed:
      return finish_with_body(std::move(done), engine().peek_delayed(tube), true);
    case JobState::kBuried:
      return finish_with_body(std::move(done), engine().peek_buried(tube), true);
    case JobState::kReserved:
      break;
  }
  completions_.finish_all<broker::Job>(
      std::move(done), Status(Code::kInvalidArgument, "peek: ready, delayed or buried only"));
}

void LocalSession::kick(std::string tube, std::size_t bound, Callback<std::size_t> done) {
  completions_.finish_all(std::move(done), Result<std::size_t>(engine().kick(tube, bound)));
}

void LocalSession::kick_job(JobId id, Callback<JobView> done) {
  if (Status s = engine().kick_job(id); !s.is_ok()) {
    return completions_.finish_all<JobView>(std::move(done),
                                            refine(s, id, "is neither buried nor delayed"));
  }
  completions_.finish_job(std::move(done), id, engine().peek(id));
}

void LocalSession::update(broker::JobRef job, broker::Update update, Callback<JobView> done) {
  if (!update.due && !update.priority) {
    return completions_.finish_all<JobView>(std::move(done),
                                            Status(Code::kInvalidArgument, "nothing to change"));
  }
  auto id = resolve(job);
  if (!id.is_ok()) return completions_.finish_all<JobView>(std::move(done), id.status());
  if (update.due) {
    if (Status s = engine().reschedule(id.value(), *update.due); !s.is_ok())
      return completions_.finish_all<JobView>(std::move(done), s);
  }
  if (update.priority) {
    if (Status s = engine().set_priority(id.value(), *update.priority); !s.is_ok()) {
      return completions_.finish_all<JobView>(std::move(done), s);
    }
  }
  completions_.finish_job(std::move(done), id.value(), engine().peek(id.value()));
}

void LocalSession::list_group(std::string tube, std::string group,
                              Callback<std::vector<JobView>> done) {
  completions_.finish_all(std::move(done),
                          Result<std::vector<JobView>>(engine().list_group(tube, group)));
}

void LocalSession::cancel_group(std::string tube, std::string group, Callback<std::size_t> done) {
  completions_.finish_all(std::move(done), Result<std::size_t>(engine().cancel_group(tube, group)));
}

void LocalSession::note_attempt(JobId id, int status, std::string error, Callback<JobView> done) {
  auto view = engine().peek(id);
  if (!view.is_ok()) return completions_.finish_all<JobView>(std::move(done), view.status());
  Delivery delivery;
  if (view.value().attached) {
    auto kept = node_.attachment(id);
    if (!kept.is_ok()) return completions_.finish_all<JobView>(std::move(done), kept.status());
    delivery = std::move(kept).value();
  }
  delivery.last_status = status;
  delivery.last_error = std::move(error);
  delivery.last_attempt_unix_ms = engine().now();
  if (Status s = engine().attach(id, delivery); !s.is_ok()) {
    return completions_.finish_all<JobView>(std::move(done), s);
  }
  completions_.finish_job(std::move(done), id, engine().peek(id));
}

// --- tubes and the server

void LocalAdmin::pause_tube(std::string tube, broker::Seconds pause, Callback<TubeStats> done) {
  if (Status s = engine().pause_tube(tube, pause); !s.is_ok()) {
    return completions_.finish_all<TubeStats>(std::move(done), s);
  }
  completions_.finish_all(std::move(done), engine().stats_tube(tube));
}

void LocalAdmin::stats_tube(std::string tube, Callback<TubeStats> done) {
  completions_.finish_all(std::move(done), engine().stats_tube(tube));
}

void LocalAdmin::set_max_attempts(std::string tube, std::uint32_t max_attempts,
                                  Callback<std::uint32_t> done) {
  if (Status s = engine().set_max_attempts(tube, max_attempts); !s.is_ok()) {
    return completions_.finish_all<std::uint32_t>(std::move(done), s);
  }
  completions_.finish_all(std::move(done), Result<std::uint32_t>(max_attempts));
}

void LocalAdmin::set_flow(std::string tube, broker::FlowChange change,
                          Callback<FlowSettings> done) {
  Result<FlowSettings> flow = change.applied_to(engine().flow(tube));
  if (flow.is_ok()) {
    if (Status s = engine().set_flow(tube, flow.value()); !s.is_ok()) flow = s;
  }
  completions_.finish_all(std::move(done), std::move(flow));
}

void LocalAdmin::list_tubes(Callback<std::vector<TubeStats>> done) {
  std::vector<TubeStats> tubes;
  for (const std::string& name : engine().tubes()) {
    if (auto stats = engine().stats_tube(name); stats.is_ok()) {
      tubes.push_back(std::move(stats).value());
    }
  }
  completions_.finish_all(std::move(done), Result<std::vector<TubeStats>>(std::move(tubes)));
}

void LocalAdmin::due_counts(std::string tube, std::vector<Due> edges,
                            Callback<broker::DueCounts> done) {
  broker::DueCounts counts;
  counts.as_of_unix_ms = engine().now();
  counts.resolution = broker::Millis{engine::Engine::kDueBucketMs};
  for (const Due& edge : edges) {
    const std::int64_t at = edge.absolute ? edge.ms : counts.as_of_unix_ms + edge.ms;
    counts.edges_unix_ms.push_back(
        engine::TimeCounts::round_down(at, engine::Engine::kDueBucketMs));
  }
  auto jobs = engine().due_counts(tube, counts.edges_unix_ms);
  if (!jobs.is_ok())
    return completions_.finish_all<broker::DueCounts>(std::move(done), jobs.status());
  counts.jobs = std::move(jobs).value();
  completions_.finish_all(std::move(done), Result<broker::DueCounts>(std::move(counts)));
}

void LocalAdmin::list_jobs(std::string tube, JobState state, std::size_t limit,
                           Callback<broker::JobList> done) {
  auto list = engine().list_jobs(tube, state, limit);
  if (!list.is_ok())
    return completions_.finish_all<broker::JobList>(std::move(done), list.status());
  completions_.finish_all(
      std::move(done), Result<broker::JobList>(
                           broker::JobList{std::move(list.value().jobs), list.value().complete}));
}

void LocalAdmin::stats(Callback<ServerStats> done) {
  completions_.finish_all(std::move(done), Result<ServerStats>(engine().stats()));
}

// --- push delivery

void LocalAdmin::set_webhook(std::string tube, Webhook webhook, Callback<Webhook> done) {
  if (Status s = engine().check_tube_name(tube); !s.is_ok()) {
    return completions_.finish_all<Webhook>(std::move(done), s);
  }
  node_.set_webhook(tube, webhook);
  completions_.finish_all(std::move(done), Result<Webhook>(std::move(webhook)));
}

void LocalAdmin::get_webhook(std::string tube, Callback<Webhook> done) {
  const auto it = node_.webhooks().find(tube);
  if (it == node_.webhooks().end()) {
    return completions_.finish_all<Webhook>(
        std::move(done), Status(Code::kNotFound, "tube " + tube + " has no webhook"));
  }
  completions_.finish_all(std::move(done), Result<Webhook>(it->second));
}

void LocalAdmin::remove_webhook(std::string tube, Callback<Webhook> done) {
  const auto it = node_.webhooks().find(tube);
  if (it == node_.webhooks().end()) {
    return completions_.finish_all<Webhook>(
        std::move(done), Status(Code::kNotFound, "tube " + tube + " has no webhook"));
  }
  Webhook removed = it->second;
  node_.remove_webhook(tube);
  completions_.finish_all(std::move(done), Result<Webhook>(std::move(removed)));
}

void LocalAdmin::backup(std::string dir, Callback<broker::BackupResult> done) {
  node_.backup(std::move(dir), completions_.guarded(std::move(done)));
}

}  // namespace

Result<std::unique_ptr<LocalBroker>> LocalBroker::open(boost::asio::io_context& io,
                                                       const NodeOptions& options) {
  auto node = Node::open(io, options);
  if (!node.is_ok()) return node.status();
  return over(std::move(node).value());
}

Result<std::unique_ptr<LocalBroker>> LocalBroker::open(boost::asio::io_context& io,
                                                       const NodeOptions& options,
                                                       std::unique_ptr<store::Store> store) {
  auto node = Node::open(io, options, std::move(store));
  if (!node.is_ok()) return node.status();
  return over(std::move(node).value());
}

Result<std::unique_ptr<LocalBroker>> LocalBroker::over(std::unique_ptr<Node> node) {
  std::unique_ptr<LocalBroker> broker(new LocalBroker(std::move(node)));
  auto schedules = LocalSchedules::open(*broker->node_);
  if (!schedules.is_ok()) return schedules.status();
  broker->schedules_ = std::move(schedules).value();
  return broker;
}

std::unique_ptr<broker::Session> LocalBroker::open_session(broker::SessionOptions options) {
  return std::make_unique<LocalSession>(*node_, options);
}

std::unique_ptr<broker::Admin> LocalBroker::open_admin() {
  return std::make_unique<LocalAdmin>(*node_);
}

Status LocalBroker::health() const {
  if (!node_->healthy()) return {Code::kIOError, "the store has failed"};
  if (Status space = node_->space(); !space.is_ok()) return space;
  if (node_->draining()) return {Code::kDraining, "the server is draining"};
  return Status::ok();
}

}  // namespace delayq::broker::local
