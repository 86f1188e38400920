// fake_broker.h — a scripted broker::Broker for the front-ends' unit tests: no engine, no store,
// no executor, no thread. A test builds a front-end (a beanstalkd Conversation, the HTTP Api) over
// a FakeBroker, feeds it bytes or requests, and then plays the broker by hand:
//  - A session's own tubes (use, used, watch, ignore, watched) are kept for real, by beanstalkd's
//    rules; names are not checked (the parser did that), unless fail_next() scripts an error.
//  - Every asynchronous operation is recorded as a Call: its op ("put"), its arguments as text
//    ("tube=default pri=5 due=+2000ms ttr=60s body=hello"), and its callback. Nothing completes
//    by itself: the test completes any pending call, in any order, with a value or an error, and
//    never inside the call that made it (broker.h's rule holds by construction).
//  - cancel_reserve() records the ticket and, as broker.h says, ends the wait with kTimedOut; like
//    a real broker it does so later, on the executor: here when the test calls poll().
//    stop_waiting() records the ticket and leaves the reserve pending: the test answers it, with
//    a job or kTimedOut, as a broker that looks once more would.
//  - The broker's schedules() records its calls the same way, as session kBrokerCalls
//    ("schedule_set name=daily tube=reports"), and every Admin's as session kAdminCalls
//    ("stats_tube tube=default"); destroying an Admin drops its pending calls.
//  - Destroying a session drops its pending calls (their callbacks never run) and counts as a
//    session closed.
//  - The jobs a session's completed reserves gave it are held by it until a delete, release or
//    bury of them completes without an error; destroying the session returns the ones it still
//    holds, which a broker makes ready again (broker.h): held() and returned() list them.
// Test-only: linked into unit tests (tests/CMakeLists.txt), never into a server.
#pragma once

#include <any>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "broker/broker.h"
#include "broker/schedules.h"

namespace delayq::testing {

// One asynchronous operation a session was asked for, and its callback until it is completed.
class Call {
 public:
  enum class State : std::uint8_t {
    kPending,    // waiting for the test
    kCompleted,  // the test (or poll()) ran its callback
    kDropped,    // its session was destroyed first: its callback will never run
  };

  Call(std::size_t session, std::string op, std::string args, std::uint64_t ticket)
      : session_(session), op_(std::move(op)), args_(std::move(args)), ticket_(ticket) {}
  Call(const Call&) = delete;
  Call& operator=(const Call&) = delete;

  // The Session method's name: put reserve reserve_job erase release bury touch peek peek_next
  // kick kick_job update list_group cancel_group note_attempt; the Admin's: pause_tube stats_tube
  // list_tubes stats due_counts list_jobs set_max_attempts set_flow set_webhook get_webhook
  // remove_webhook backup; the Schedules' (schedule_set ...).
  [[nodiscard]] const std::string& op() const noexcept { return op_; }
  // The arguments, in fake_broker.cc's format, e.g. "id=7 pri=keep delay=0ms reservation=3".
  [[nodiscard]] const std::string& args() const noexcept { return args_; }
  // op and args: "erase id=7", or "stats" when there are no arguments.
  [[nodiscard]] std::string text() const { return args_.empty() ? op_ : op_ + " " + args_; }
  // The session that made it, numbered from 0 in the order sessions were opened.
  [[nodiscard]] std::size_t session() const noexcept { return session_; }
  // reserve: the ticket it returned (never 0); else 0.
  [[nodiscard]] std::uint64_t ticket() const noexcept { return ticket_; }
  [[nodiscard]] State state() const noexcept { return state_; }
  [[nodiscard]] bool pending() const noexcept { return state_ == State::kPending; }
  // reserve: cancel_reserve() was called while it was pending.
  [[nodiscard]] bool cancelled() const noexcept { return cancelled_; }

  // The request as the front-end built it, for put (broker::PutRequest), reserve
  // (broker::ReserveRequest), release (broker::ReleaseRequest) and set_webhook (Webhook); aborts
  // for any other type.
  template <typename Request>
  [[nodiscard]] const Request& request() const {
    const auto* request = std::any_cast<Request>(&request_);
    if (request == nullptr) misuse("has no request of the type asked for");
    return *request;
  }

  // Runs the callback with `value` (T is the operation's: broker::PutResult, broker::Job, JobId,
  // JobView, std::size_t, TubeStats, ServerStats, std::vector<TubeStats>, ...). Aborts with a
  // message if the call is not pending or T is not its type: a mistake in the test.
  template <typename T>
  void complete(T value) {
    finish<T>(Result<T>(std::move(value)));
  }
  template <typename T>
  void finish(Result<T> result) {
    if (!pending()) misuse("is not pending (completed already, or dropped with its session)");
    auto* done = std::any_cast<broker::Callback<T>>(&callback_);
    if (done == nullptr) misuse("was completed with a value of another type than its own");
    // Out of the Call before it runs: the callback may make calls, complete others, or destroy
    // the session this one belongs to.
    broker::Callback<T> callback = std::move(*done);
    callback_.reset();
    state_ = State::kCompleted;
    callback(std::move(result));
  }
  // Runs the callback with an error, whatever the operation's type.
  void fail(Status status);
  void fail(Code code, std::string message = "scripted by the test") {
    fail(Status(code, std::move(message)));
  }

 private:
  friend class FakeSession;
  friend class FakeAdmin;
  friend class FakeBroker;
  friend class FakeSchedules;

  template <typename T>
  void arm(broker::Callback<T> done, std::any request) {
    callback_ = std::move(done);
    request_ = std::move(request);
    fail_ = [](std::any& callback, Status status) {
      auto run = std::any_cast<broker::Callback<T>>(std::move(callback));
      run(Result<T>(std::move(status)));
    };
  }
  void drop() noexcept;
  [[noreturn]] void misuse(std::string_view what) const;

  std::size_t session_;
  std::string op_;
  std::string args_;
  std::uint64_t ticket_;
  State state_ = State::kPending;
  bool cancelled_ = false;
  std::any callback_;  // broker::Callback<T> while pending
  std::any request_;
  void (*fail_)(std::any& callback, Status status) = nullptr;
};

class FakeBroker;

// The session number of calls made through FakeBroker::schedules().
inline constexpr std::size_t kBrokerCalls = ~std::size_t{0};

// The broker's schedules, recorded as Calls (request<schedule::Definition>() for set).
class FakeSchedules final : public broker::Schedules {
 public:
  explicit FakeSchedules(FakeBroker& broker) : broker_(broker) {}
  void set(schedule::Definition definition, broker::Callback<broker::ScheduleView> done) override;
  void get(std::string name, broker::Callback<broker::ScheduleView> done) override;
  void list(std::string after, std::size_t limit,
            broker::Callback<std::vector<broker::ScheduleView>> done) override;
  void remove(std::string name, broker::Callback<broker::ScheduleView> done) override;
  void pause(std::string name, bool paused, broker::Callback<broker::ScheduleView> done) override;
  void trigger(std::string name, broker::Callback<broker::PutResult> done) override;
  void backfill(std::string name, std::int64_t from_unix_ms, std::int64_t to_unix_ms,
                broker::Callback<std::vector<broker::PutResult>> done) override;

 private:
  template <typename T>
  void record(std::string op, std::string args, broker::Callback<T> done, std::any request = {});
  FakeBroker& broker_;
};

// A session of the fake broker: its tubes kept for real, its operations recorded as Calls.
class FakeSession : public broker::Session {
 public:
  FakeSession(FakeBroker& broker, std::size_t index, broker::SessionOptions options);
  ~FakeSession() override;
  FakeSession(const FakeSession&) = delete;
  FakeSession& operator=(const FakeSession&) = delete;

  // The next use, watch or ignore returns `status` instead of doing anything.
  void fail_next(Status status) { next_error_ = std::move(status); }
  [[nodiscard]] std::size_t index() const noexcept { return index_; }

  Status use(std::string_view tube) override;
  [[nodiscard]] std::string used() const override { return used_; }
  Result<std::size_t> watch(std::string_view tube) override;
  Result<std::size_t> ignore(std::string_view tube) override;
  [[nodiscard]] std::vector<std::string> watched() const override { return watched_; }

  void put(broker::PutRequest request, broker::Callback<broker::PutResult> done) override;
  std::uint64_t reserve(broker::ReserveRequest request,
                        broker::Callback<broker::Job> done) override;
  bool cancel_reserve(std::uint64_t ticket) override;
  bool stop_waiting(std::uint64_t ticket) override;
  void reserve_job(JobId id, broker::Callback<broker::Job> done) override;
  void erase(broker::JobRef job, broker::Callback<JobId> done) override;
  void release(broker::ReleaseRequest request, broker::Callback<JobView> done) override;
  void bury(JobId id, std::optional<std::uint32_t> priority,
            broker::Callback<JobView> done) override;
  void touch(JobId id, broker::Callback<JobView> done) override;
  void peek(broker::JobRef job, bool with_body, broker::Callback<broker::Job> done) override;
  void peek_next(std::string tube, JobState state, broker::Callback<broker::Job> done) override;
  void kick(std::string tube, std::size_t bound, broker::Callback<std::size_t> done) override;
  void kick_job(JobId id, broker::Callback<JobView> done) override;
  void update(broker::JobRef job, broker::Update update, broker::Callback<JobView> done) override;
  void list_group(std::string tube, std::string group,
                  broker::Callback<std::vector<JobView>> done) override;
  void cancel_group(std::string tube, std::string group,
                    broker::Callback<std::size_t> done) override;
  void note_attempt(JobId id, int status, std::string error,
                    broker::Callback<JobView> done) override;

 private:
  template <typename T>
  Call& record(std::string op, std::string args, broker::Callback<T> done, std::any request = {},
               std::uint64_t ticket = 0);
  std::optional<Status> take_error() { return std::exchange(next_error_, std::nullopt); }

  FakeBroker& broker_;
  std::size_t index_;
  std::string used_ = "default";
  std::vector<std::string> watched_;
  std::optional<Status> next_error_;
};

// The session number of calls made through an Admin (any of them).
inline constexpr std::size_t kAdminCalls = kBrokerCalls - 1;

// An admin handle of the fake broker: its operations recorded as Calls of session kAdminCalls,
// dropped when it is destroyed.
class FakeAdmin final : public broker::Admin {
 public:
  explicit FakeAdmin(FakeBroker& broker);
  ~FakeAdmin() override;
  FakeAdmin(const FakeAdmin&) = delete;
  FakeAdmin& operator=(const FakeAdmin&) = delete;

  void pause_tube(std::string tube, broker::Seconds pause,
                  broker::Callback<TubeStats> done) override;
  void stats_tube(std::string tube, broker::Callback<TubeStats> done) override;
  void list_tubes(broker::Callback<std::vector<TubeStats>> done) override;
  void stats(broker::Callback<ServerStats> done) override;
  void due_counts(std::string tube, std::vector<Due> edges,
                  broker::Callback<broker::DueCounts> done) override;
  void list_jobs(std::string tube, JobState state, std::size_t limit,
                 broker::Callback<broker::JobList> done) override;
  void set_max_attempts(std::string tube, std::uint32_t max_attempts,
                        broker::Callback<std::uint32_t> done) override;
  void set_flow(std::string tube, broker::FlowChange change,
                broker::Callback<FlowSettings> done) override;
  void set_webhook(std::string tube, Webhook webhook, broker::Callback<Webhook> done) override;
  void get_webhook(std::string tube, broker::Callback<Webhook> done) override;
  void remove_webhook(std::string tube, broker::Callback<Webhook> done) override;
  void backup(std::string dir, broker::Callback<broker::BackupResult> done) override;

 private:
  template <typename T>
  void record(std::string op, std::string args, broker::Callback<T> done, std::any request = {});
  FakeBroker& broker_;
  std::vector<Call*> calls_;  // in the broker's deque, which never moves them
};

class FakeBroker : public broker::Broker {
 public:
  FakeBroker() = default;
  ~FakeBroker() override;
  FakeBroker(const FakeBroker&) = delete;
  FakeBroker& operator=(const FakeBroker&) = delete;

  // --- broker::Broker
  [[nodiscard]] std::unique_ptr<broker::Session> open_session(
      broker::SessionOptions options) override;
  [[nodiscard]] std::unique_ptr<broker::Admin> open_admin() override;
  // As a broker over Redis, or as a single node (the default).
  void set_in_order(bool in_order) { in_order_ = in_order; }
  [[nodiscard]] bool applies_calls_in_order() const override { return in_order_; }
  void set_draining(bool draining) override { draining_ = draining; }
  [[nodiscard]] bool draining() const override { return draining_; }
  // What set_health() set, if not ok; else kDraining while draining, else ok.
  [[nodiscard]] Status health() const override;
  [[nodiscard]] broker::Seconds uptime() const override { return uptime_; }
  [[nodiscard]] broker::Schedules& schedules() override { return schedules_; }
  Status close() override {
    closed_ = true;
    return Status::ok();
  }
  // The webhooks set_webhooks() gave; on_webhooks_changed's handler runs on webhooks_changed().
  [[nodiscard]] std::vector<std::pair<std::string, Webhook>> webhooks() const override {
    return webhooks_;
  }
  void on_webhooks_changed(std::function<void()> handler) override {
    on_webhooks_changed_ = std::move(handler);
  }
  void set_webhooks(std::vector<std::pair<std::string, Webhook>> webhooks) {
    webhooks_ = std::move(webhooks);
    if (on_webhooks_changed_) on_webhooks_changed_();
  }

  // --- scripting
  void set_health(Status health) { health_ = std::move(health); }
  void set_uptime(broker::Seconds uptime) { uptime_ = uptime; }
  // Reserves from now on are answered without waiting (ticket 0), as a real broker's that found
  // a job: their completion may still come later, but cancel_reserve() cannot end them.
  void set_reserves_found(bool found) { reserves_found_ = found; }
  [[nodiscard]] bool closed() const noexcept { return closed_; }

  // Every call so far, in the order made; a Call stays where it is (a deque never moves them).
  [[nodiscard]] std::size_t call_count() const noexcept { return calls_.size(); }
  [[nodiscard]] Call& call(std::size_t index);
  [[nodiscard]] Call& last();
  [[nodiscard]] std::vector<std::string> texts() const;          // every call's text()
  [[nodiscard]] std::vector<std::string> pending_texts() const;  // the pending ones'
  [[nodiscard]] std::size_t pending_count() const;

  // Tickets given to cancel_reserve() for a waiting reserve, in order; and to stop_waiting().
  [[nodiscard]] const std::vector<std::uint64_t>& cancelled() const noexcept { return cancelled_; }
  [[nodiscard]] const std::vector<std::uint64_t>& stopped() const noexcept { return stopped_; }
  // Runs what the fake has queued itself, as an executor would after the calls that queued it:
  // the kTimedOut of every cancelled reserve still pending. Returns how many callbacks ran.
  std::size_t poll();

  // Sessions by index (opening order). session() is nullptr once the session is destroyed.
  [[nodiscard]] std::size_t sessions_opened() const noexcept { return sessions_.size(); }
  [[nodiscard]] std::size_t sessions_closed() const noexcept { return sessions_closed_; }
  [[nodiscard]] FakeSession* session(std::size_t index) const;
  [[nodiscard]] const broker::SessionOptions& options(std::size_t index) const;
  // Admin handles opened, and those destroyed since.
  [[nodiscard]] std::size_t admins_opened() const noexcept { return admins_opened_; }
  [[nodiscard]] std::size_t admins_closed() const noexcept { return admins_closed_; }

  // The jobs session `index` holds now, in the order it reserved them; and those that sessions
  // still held when they were destroyed (ready again, in a broker), in that order.
  [[nodiscard]] const std::vector<JobId>& held(std::size_t index) const;
  [[nodiscard]] const std::vector<JobId>& returned() const noexcept { return returned_; }

 private:
  friend class FakeSession;
  friend class FakeAdmin;
  friend class FakeSchedules;

  struct SessionRecord {
    broker::SessionOptions options;
    FakeSession* live = nullptr;
    std::vector<JobId> held;
  };
  void session_closed(std::size_t index);
  // A completion that gives session `index` a job, or takes one from it, as held() counts.
  broker::Callback<broker::Job> holding(std::size_t index, broker::Callback<broker::Job> done);
  template <typename T>
  broker::Callback<T> letting_go(std::size_t index, JobId id, broker::Callback<T> done);

  std::deque<Call> calls_;
  std::vector<SessionRecord> sessions_;
  std::size_t sessions_closed_ = 0;
  std::size_t admins_opened_ = 0;
  std::size_t admins_closed_ = 0;
  std::vector<std::uint64_t> cancelled_;
  std::vector<std::uint64_t> stopped_;
  std::vector<std::size_t> posted_;  // indexes of cancelled reserves, for poll()
  std::vector<JobId> returned_;
  std::uint64_t next_ticket_ = 1;
  bool reserves_found_ = false;
  bool draining_ = false;
  bool in_order_ = true;
  Status health_;
  broker::Seconds uptime_{0};
  bool closed_ = false;
  std::vector<std::pair<std::string, Webhook>> webhooks_;
  std::function<void()> on_webhooks_changed_;
  FakeSchedules schedules_{*this};
};

template <typename T>
Call& FakeSession::record(std::string op, std::string args, broker::Callback<T> done,
                          std::any request, std::uint64_t ticket) {
  Call& call = broker_.calls_.emplace_back(index_, std::move(op), std::move(args), ticket);
  call.arm<T>(std::move(done), std::move(request));
  return call;
}

template <typename T>
void FakeAdmin::record(std::string op, std::string args, broker::Callback<T> done,
                       std::any request) {
  Call& call = broker_.calls_.emplace_back(kAdminCalls, std::move(op), std::move(args), 0);
  call.arm<T>(std::move(done), std::move(request));
  calls_.push_back(&call);
}

template <typename T>
void FakeSchedules::record(std::string op, std::string args, broker::Callback<T> done,
                           std::any request) {
  Call& call = broker_.calls_.emplace_back(kBrokerCalls, std::move(op), std::move(args), 0);
  call.arm<T>(std::move(done), std::move(request));
}

// A tube whose counts are all different (1 to 11, in TubeStats' order, then max_attempts 12),
// paused for 90 s with 89.992 s left: what the front-ends' tests expect to see each of in their
// answers.
inline TubeStats sample_tube(std::string name) {
  TubeStats tube;
  tube.name = std::move(name);
  tube.urgent = 1;
  tube.ready = 2;
  tube.reserved = 3;
  tube.delayed = 4;
  tube.buried = 5;
  tube.total_jobs = 6;
  tube.using_clients = 7;
  tube.watching_clients = 8;
  tube.waiting_clients = 9;
  tube.deletes = 10;
  tube.pauses = 11;
  tube.pause = std::chrono::seconds{90};
  tube.pause_left = std::chrono::milliseconds{89'992};
  tube.max_attempts = 12;
  tube.oldest_ready_age = std::chrono::milliseconds{13'000};
  tube.flow = {.group_concurrency = 14,
               .fair = true,
               .rate_jobs = 15,
               .rate_period = std::chrono::milliseconds{60'000},
               .rate_burst = 16,
               .group_weights = {{"vip", 19}}};
  tube.groups_held = 17;
  tube.groups_ready = 18;
  return tube;
}

// Server counts that are all different (1 to 10, in ServerStats' order).
inline ServerStats sample_server_stats() {
  ServerStats server;
  server.urgent = 1;
  server.ready = 2;
  server.reserved = 3;
  server.delayed = 4;
  server.buried = 5;
  server.total_jobs = 6;
  server.job_timeouts = 7;
  server.tubes = 8;
  server.waiting = 9;
  server.next_id = 10;
  server.deletes = 11;
  server.buries = 12;
  return server;
}

}  // namespace delayq::testing
