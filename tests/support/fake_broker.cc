#include "support/fake_broker.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>

namespace delayq::testing {
namespace {

// The arguments' text: one `name=value` per argument, separated by single spaces. Times carry
// their unit (ttr=60s, delay=2000ms); a due time reads +<ms>ms (a delay) or @<unix_ms>.

std::string due_text(const Due& due) {
  return due.absolute ? "@" + std::to_string(due.ms) : "+" + std::to_string(due.ms) + "ms";
}

std::string ref_text(const broker::JobRef& job) {
  if (job.id != 0) return "id=" + std::to_string(job.id);
  return "tube=" + job.tube + " key=" + job.key;
}

std::string priority_text(const std::optional<std::uint32_t>& priority) {
  return priority ? std::to_string(*priority) : "keep";
}

// A body as readable text: printable ASCII as it is, anything else escaped (\r, \n, \xNN); past
// 64 bytes only its size, "<70000 bytes>".
std::string body_text(std::string_view body) {
  if (body.size() > 64) return "<" + std::to_string(body.size()) + " bytes>";
  std::string text;
  for (const char c : body) {
    const auto u = static_cast<unsigned char>(c);
    if (c == '\r') {
      text += "\\r";
    } else if (c == '\n') {
      text += "\\n";
    } else if (c == '\\') {
      text += "\\\\";
    } else if (u < 0x20 || u > 0x7e) {
      char hex[8];
      std::snprintf(hex, sizeof hex, "\\x%02x", u);
      text += hex;
    } else {
      text += c;
    }
  }
  return text;
}

}  // namespace

// --- Call

void Call::fail(Status status) {
  if (status.is_ok()) misuse("was failed with an ok status");
  if (!pending()) misuse("is not pending (completed already, or dropped with its session)");
  std::any callback = std::move(callback_);
  callback_.reset();
  state_ = State::kCompleted;
  fail_(callback, std::move(status));
}

void Call::drop() noexcept {
  if (!pending()) return;
  callback_.reset();
  state_ = State::kDropped;
}

void Call::misuse(std::string_view what) const {
  std::fprintf(stderr, "FakeBroker: call \"%s\" of session %zu %.*s\n", text().c_str(), session_,
               static_cast<int>(what.size()), what.data());
  std::fflush(stderr);
  std::abort();
}

// --- FakeBroker: what sessions hold (before FakeSession, which wraps its callbacks with them)

broker::Callback<broker::Job> FakeBroker::holding(std::size_t index,
                                                  broker::Callback<broker::Job> done) {
  return [this, index, done = std::move(done)](Result<broker::Job> job) {
    if (job.is_ok()) sessions_[index].held.push_back(job.value().view.id);
    done(std::move(job));
  };
}

template <typename T>
broker::Callback<T> FakeBroker::letting_go(std::size_t index, JobId id, broker::Callback<T> done) {
  return [this, index, id, done = std::move(done)](Result<T> result) {
    if (result.is_ok()) std::erase(sessions_[index].held, id);
    done(std::move(result));
  };
}

// --- FakeSession

FakeSession::FakeSession(FakeBroker& broker, std::size_t index, broker::SessionOptions options)
    : broker_(broker), index_(index) {
  if (options.watch_default) watched_.emplace_back("default");
}

FakeSession::~FakeSession() {
  broker_.session_closed(index_);
}

Status FakeSession::use(std::string_view tube) {
  if (auto error = take_error()) return *error;
  used_ = std::string(tube);
  return Status::ok();
}

Result<std::size_t> FakeSession::watch(std::string_view tube) {
  if (auto error = take_error()) return *error;
  if (std::find(watched_.begin(), watched_.end(), tube) == watched_.end()) {
    watched_.emplace_back(tube);
  }
  return watched_.size();
}

// beanstalkd's rules: a tube not watched leaves the list as it is; the last one stays.
Result<std::size_t> FakeSession::ignore(std::string_view tube) {
  if (auto error = take_error()) return *error;
  const auto it = std::find(watched_.begin(), watched_.end(), tube);
  if (it == watched_.end()) return watched_.size();
  if (watched_.size() == 1) return Status(Code::kNotIgnored, "the last watched tube");
  watched_.erase(it);
  return watched_.size();
}

void FakeSession::put(broker::PutRequest request, broker::Callback<broker::PutResult> done) {
  std::string args = "tube=" + (request.tube.empty() ? used_ : request.tube);
  args += " pri=" + std::to_string(request.priority);
  args += " due=" + due_text(request.due);
  args += " ttr=" + std::to_string(request.ttr.count()) + "s";
  args += " body=" + body_text(request.body);
  if (!request.key.empty()) args += " key=" + request.key;
  if (!request.group.empty()) args += " group=" + request.group;
  if (request.replace) args += " replace";
  if (request.debounce) args += " debounce=" + std::to_string(request.debounce->count()) + "ms";
  if (request.max_wait) args += " max_wait=" + std::to_string(request.max_wait->count()) + "ms";
  if (!request.url.empty()) args += " url=" + request.url;
  if (!request.content_type.empty()) args += " type=" + request.content_type;
  if (!request.traceparent.empty()) args += " traceparent=" + request.traceparent;
  if (!request.tracestate.empty()) args += " tracestate=" + request.tracestate;
  record<broker::PutResult>("put", std::move(args), std::move(done), std::move(request));
}

std::uint64_t FakeSession::reserve(broker::ReserveRequest request,
                                   broker::Callback<broker::Job> done) {
  std::string tubes;
  for (const std::string& tube : request.tubes) tubes += (tubes.empty() ? "" : ",") + tube;
  std::string args = "tubes=" + (tubes.empty() ? std::string("(watched)") : tubes);
  args += " timeout=" +
          (request.timeout ? std::to_string(request.timeout->count()) + "ms" : std::string("none"));
  const std::uint64_t ticket = broker_.reserves_found_ ? 0 : broker_.next_ticket_++;
  record<broker::Job>("reserve", std::move(args), broker_.holding(index_, std::move(done)),
                      std::move(request), ticket);
  return ticket;
}

bool FakeSession::cancel_reserve(std::uint64_t ticket) {
  for (std::size_t i = 0; i < broker_.calls_.size(); ++i) {
    Call& call = broker_.calls_[i];
    if (call.ticket() != ticket || call.session() != index_) continue;
    if (!call.pending() || call.cancelled()) return false;
    call.cancelled_ = true;
    broker_.cancelled_.push_back(ticket);
    broker_.posted_.push_back(i);
    return true;
  }
  return false;
}

bool FakeSession::stop_waiting(std::uint64_t ticket) {
  for (const Call& call : broker_.calls_) {
    if (call.ticket() != ticket || call.session() != index_) continue;
    if (!call.pending() || call.cancelled()) return false;
    broker_.stopped_.push_back(ticket);
    return true;
  }
  return false;
}

void FakeSession::reserve_job(JobId id, broker::Callback<broker::Job> done) {
  record<broker::Job>("reserve_job", "id=" + std::to_string(id),
                      broker_.holding(index_, std::move(done)));
}

void FakeSession::erase(broker::JobRef job, broker::Callback<JobId> done) {
  const JobId id = job.id;
  record<JobId>("erase", ref_text(job), broker_.letting_go(index_, id, std::move(done)));
}

void FakeSession::release(broker::ReleaseRequest request, broker::Callback<JobView> done) {
  std::string args = "id=" + std::to_string(request.id);
  args += " pri=" + priority_text(request.priority);
  args += " delay=" + std::to_string(request.delay.count()) + "ms";
  if (request.reservation) args += " reservation=" + std::to_string(*request.reservation);
  record<JobView>("release", std::move(args),
                  broker_.letting_go(index_, request.id, std::move(done)), request);
}

void FakeSession::bury(JobId id, std::optional<std::uint32_t> priority,
                       broker::Callback<JobView> done) {
  record<JobView>("bury", "id=" + std::to_string(id) + " pri=" + priority_text(priority),
                  broker_.letting_go(index_, id, std::move(done)));
}

void FakeSession::touch(JobId id, broker::Callback<JobView> done) {
  record<JobView>("touch", "id=" + std::to_string(id), std::move(done));
}

void FakeSession::peek(broker::JobRef job, bool with_body, broker::Callback<broker::Job> done) {
  record<broker::Job>("peek", ref_text(job) + (with_body ? " with_body=true" : " with_body=false"),
                      std::move(done));
}

void FakeSession::peek_next(std::string tube, JobState state, broker::Callback<broker::Job> done) {
  record<broker::Job>("peek_next", "tube=" + tube + " state=" + std::string(state_name(state)),
                      std::move(done));
}

void FakeSession::kick(std::string tube, std::size_t bound, broker::Callback<std::size_t> done) {
  record<std::size_t>("kick", "tube=" + tube + " bound=" + std::to_string(bound), std::move(done));
}

void FakeSession::kick_job(JobId id, broker::Callback<JobView> done) {
  record<JobView>("kick_job", "id=" + std::to_string(id), std::move(done));
}

void FakeSession::update(broker::JobRef job, broker::Update update,
                         broker::Callback<JobView> done) {
  std::string args = ref_text(job);
  args += " due=" + (update.due ? due_text(*update.due) : std::string("keep"));
  args += " pri=" + priority_text(update.priority);
  record<JobView>("update", std::move(args), std::move(done));
}

void FakeSession::list_group(std::string tube, std::string group,
                             broker::Callback<std::vector<JobView>> done) {
  record<std::vector<JobView>>("list_group", "tube=" + tube + " group=" + group, std::move(done));
}

void FakeSession::cancel_group(std::string tube, std::string group,
                               broker::Callback<std::size_t> done) {
  record<std::size_t>("cancel_group", "tube=" + tube + " group=" + group, std::move(done));
}

void FakeSession::note_attempt(JobId id, int status, std::string error,
                               broker::Callback<JobView> done) {
  std::string args = "id=" + std::to_string(id) + " status=" + std::to_string(status);
  args += " error=" + error;
  record<JobView>("note_attempt", std::move(args), std::move(done));
}

// --- FakeAdmin

FakeAdmin::FakeAdmin(FakeBroker& broker) : broker_(broker) {
  ++broker_.admins_opened_;
}

FakeAdmin::~FakeAdmin() {
  ++broker_.admins_closed_;
  for (Call* call : calls_) call->drop();
}

void FakeAdmin::pause_tube(std::string tube, broker::Seconds pause,
                           broker::Callback<TubeStats> done) {
  record<TubeStats>("pause_tube", "tube=" + tube + " pause=" + std::to_string(pause.count()) + "s",
                    std::move(done));
}

void FakeAdmin::stats_tube(std::string tube, broker::Callback<TubeStats> done) {
  record<TubeStats>("stats_tube", "tube=" + tube, std::move(done));
}

void FakeAdmin::list_tubes(broker::Callback<std::vector<TubeStats>> done) {
  record<std::vector<TubeStats>>("list_tubes", "", std::move(done));
}

void FakeAdmin::stats(broker::Callback<ServerStats> done) {
  record<ServerStats>("stats", "", std::move(done));
}

// Edges as "+<delay ms>" or "@<unix ms>", comma-separated.
void FakeAdmin::due_counts(std::string tube, std::vector<Due> edges,
                           broker::Callback<broker::DueCounts> done) {
  std::string args = "tube=" + tube + " edges=";
  for (std::size_t i = 0; i < edges.size(); ++i) {
    if (i > 0) args += ',';
    args += (edges[i].absolute ? "@" : "+") + std::to_string(edges[i].ms);
  }
  record<broker::DueCounts>("due_counts", std::move(args), std::move(done));
}

void FakeAdmin::list_jobs(std::string tube, JobState state, std::size_t limit,
                          broker::Callback<broker::JobList> done) {
  record<broker::JobList>("list_jobs",
                          "tube=" + tube + " state=" + std::string(state_name(state)) +
                              " limit=" + std::to_string(limit),
                          std::move(done));
}

void FakeAdmin::set_max_attempts(std::string tube, std::uint32_t max_attempts,
                                 broker::Callback<std::uint32_t> done) {
  record<std::uint32_t>("set_max_attempts", "tube=" + tube + " n=" + std::to_string(max_attempts),
                        std::move(done));
}

void FakeAdmin::set_flow(std::string tube, broker::FlowChange change,
                         broker::Callback<FlowSettings> done) {
  const FlowSettings flow = change.merged_into({});  // as asked: checks are a broker's
  std::string args =
      "tube=" + tube + " concurrency=" + std::to_string(flow.group_concurrency) +
      " fair=" + (flow.fair ? "1" : "0") + " rate=" + std::to_string(flow.rate_jobs) + "/" +
      std::to_string(flow.rate_period.count()) + "ms" + " burst=" + std::to_string(flow.rate_burst);
  for (const auto& [group, weight] : change.group_weights) {
    args += " weight=" + group + ":" + std::to_string(weight);
  }
  record<FlowSettings>("set_flow", std::move(args), std::move(done), flow);
}

void FakeAdmin::set_webhook(std::string tube, Webhook webhook, broker::Callback<Webhook> done) {
  std::string args = "tube=" + tube + " url=" + webhook.url;
  record<Webhook>("set_webhook", std::move(args), std::move(done), std::move(webhook));
}

void FakeAdmin::get_webhook(std::string tube, broker::Callback<Webhook> done) {
  record<Webhook>("get_webhook", "tube=" + tube, std::move(done));
}

void FakeAdmin::remove_webhook(std::string tube, broker::Callback<Webhook> done) {
  record<Webhook>("remove_webhook", "tube=" + tube, std::move(done));
}

void FakeAdmin::backup(std::string dir, broker::Callback<broker::BackupResult> done) {
  record<broker::BackupResult>("backup", "dir=" + dir, std::move(done));
}

// --- FakeBroker

FakeBroker::~FakeBroker() {
  // A session or admin outliving its broker would call into freed memory: a mistake in the test.
  if (admins_closed_ != admins_opened_) {
    std::fprintf(stderr, "FakeBroker: destroyed before %zu of its admins\n",
                 admins_opened_ - admins_closed_);
    std::abort();
  }
  for (const SessionRecord& record : sessions_) {
    if (record.live != nullptr) {
      std::fprintf(stderr, "FakeBroker: destroyed before its session %zu\n",
                   static_cast<std::size_t>(&record - sessions_.data()));
      std::abort();
    }
  }
}

std::unique_ptr<broker::Session> FakeBroker::open_session(broker::SessionOptions options) {
  const std::size_t index = sessions_.size();
  auto session = std::make_unique<FakeSession>(*this, index, options);
  sessions_.push_back(SessionRecord{options, session.get(), {}});
  return session;
}

std::unique_ptr<broker::Admin> FakeBroker::open_admin() {
  return std::make_unique<FakeAdmin>(*this);
}

Status FakeBroker::health() const {
  if (!health_.is_ok()) return health_;
  if (draining_) return {Code::kDraining, "the server is draining"};
  return Status::ok();
}

Call& FakeBroker::call(std::size_t index) {
  if (index >= calls_.size()) {
    std::fprintf(stderr, "FakeBroker: no call %zu (%zu calls made)\n", index, calls_.size());
    std::abort();
  }
  return calls_[index];
}

Call& FakeBroker::last() {
  if (calls_.empty()) {
    std::fprintf(stderr, "FakeBroker: last() with no call made\n");
    std::abort();
  }
  return calls_.back();
}

std::vector<std::string> FakeBroker::texts() const {
  std::vector<std::string> texts;
  for (const Call& call : calls_) texts.push_back(call.text());
  return texts;
}

std::vector<std::string> FakeBroker::pending_texts() const {
  std::vector<std::string> texts;
  for (const Call& call : calls_) {
    if (call.pending()) texts.push_back(call.text());
  }
  return texts;
}

std::size_t FakeBroker::pending_count() const {
  return static_cast<std::size_t>(
      std::count_if(calls_.begin(), calls_.end(), [](const Call& call) { return call.pending(); }));
}

std::size_t FakeBroker::poll() {
  std::size_t ran = 0;
  // A completion may cancel another reserve: take the list as it is now, as an executor would.
  const std::vector<std::size_t> posted = std::exchange(posted_, {});
  for (const std::size_t index : posted) {
    Call& call = calls_[index];
    if (!call.pending()) continue;  // completed by the test first, or dropped
    call.fail(Code::kTimedOut, "the reserve was cancelled");
    ++ran;
  }
  return ran;
}

FakeSession* FakeBroker::session(std::size_t index) const {
  return index < sessions_.size() ? sessions_[index].live : nullptr;
}

const broker::SessionOptions& FakeBroker::options(std::size_t index) const {
  if (index >= sessions_.size()) {
    std::fprintf(stderr, "FakeBroker: no session %zu (%zu opened)\n", index, sessions_.size());
    std::abort();
  }
  return sessions_[index].options;
}

const std::vector<JobId>& FakeBroker::held(std::size_t index) const {
  static_cast<void>(options(index));  // aborts for a session never opened
  return sessions_[index].held;
}

void FakeBroker::session_closed(std::size_t index) {
  sessions_[index].live = nullptr;
  ++sessions_closed_;
  std::vector<JobId>& held = sessions_[index].held;
  returned_.insert(returned_.end(), held.begin(), held.end());
  held.clear();
  for (Call& call : calls_) {
    if (call.session() == index) call.drop();
  }
}

// --- schedules

void FakeSchedules::set(schedule::Definition definition,
                        broker::Callback<broker::ScheduleView> done) {
  std::string args = "name=" + definition.name + " tube=" + definition.tube;
  record<broker::ScheduleView>("schedule_set", std::move(args), std::move(done),
                               std::move(definition));
}

void FakeSchedules::get(std::string name, broker::Callback<broker::ScheduleView> done) {
  record<broker::ScheduleView>("schedule_get", "name=" + name, std::move(done));
}

void FakeSchedules::list(std::string after, std::size_t limit,
                         broker::Callback<std::vector<broker::ScheduleView>> done) {
  record<std::vector<broker::ScheduleView>>(
      "schedule_list", "after=" + after + " limit=" + std::to_string(limit), std::move(done));
}

void FakeSchedules::remove(std::string name, broker::Callback<broker::ScheduleView> done) {
  record<broker::ScheduleView>("schedule_remove", "name=" + name, std::move(done));
}

void FakeSchedules::pause(std::string name, bool paused,
                          broker::Callback<broker::ScheduleView> done) {
  record<broker::ScheduleView>(
      "schedule_pause", "name=" + name + " paused=" + (paused ? "true" : "false"), std::move(done));
}

void FakeSchedules::trigger(std::string name, broker::Callback<broker::PutResult> done) {
  record<broker::PutResult>("schedule_trigger", "name=" + name, std::move(done));
}

void FakeSchedules::backfill(std::string name, std::int64_t from_unix_ms, std::int64_t to_unix_ms,
                             broker::Callback<std::vector<broker::PutResult>> done) {
  record<std::vector<broker::PutResult>>("schedule_backfill",
                                         "name=" + name + " from=" + std::to_string(from_unix_ms) +
                                             " to=" + std::to_string(to_unix_ms),
                                         std::move(done));
}

}  // namespace delayq::testing
