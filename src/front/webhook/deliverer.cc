#include "front/webhook/deliverer.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <boost/asio/post.hpp>
#include <boost/beast/core/string.hpp>

#include "front/families.h"
#include "webhook/signature.h"

namespace delayq::front::webhook {

namespace asio = boost::asio;

namespace {

std::string_view status_class(int status) {
  if (status >= 200 && status < 300) return "2xx";
  if (status >= 300 && status < 400) return "3xx";
  if (status >= 400 && status < 500) return "4xx";
  if (status >= 500 && status < 600) return "5xx";
  return "error";
}

// A Retry-After is honoured up to a day: a receiver cannot park a job for longer by accident.
constexpr Millis kMaxRetryAfter{24 * 3600 * 1000};

}  // namespace

// One tube's deliveries: at most one reserve waits at a time, and only while another request
// may start (concurrency and rate allow), so due jobs stay in the tube until they can be sent.
class Deliverer::Lane {
 public:
  Lane(Deliverer& owner, std::string tube, Webhook webhook)
      : owner_(owner),
        tube_(std::move(tube)),
        webhook_(std::move(webhook)),
        session_(owner.broker_.open_session({.watch_default = false, .holder = {}})),
        timer_(owner.clock_.timer()) {}
  ~Lane() {
    *alive_ = false;
    owner_.metrics_.in_flight.add({}, -static_cast<std::int64_t>(in_flight_));
    // Destroying the session ends its reserve and makes the jobs it holds ready again.
  }
  Lane(const Lane&) = delete;
  Lane& operator=(const Lane&) = delete;

  // Requests under way keep the settings they started with; the next ones use these. A new
  // rate applies at once: a wait for the old one's next start ends.
  void configure(Webhook webhook) {
    const bool new_rate = webhook.rate != webhook_.rate;
    webhook_ = std::move(webhook);
    if (new_rate) cancel_timer();
    pump();
  }
  void pump();
  // The tube is no longer delivered here (its webhook removed, or, over Redis, its delivery
  // moved to another node): no new request starts; those under way finish, their answers
  // awaited as ever, and then the owner lets the lane go (retired()).
  void retire();
  [[nodiscard]] bool busy() const noexcept { return in_flight_ > 0; }

 private:
  // What an attempt needs once its answer is in, as the webhook was when it started.
  struct Attempt {
    std::uint32_t max_attempts;
    Backoff backoff;
  };
  [[nodiscard]] timing::SteadyClock::duration interval() const {
    return std::chrono::duration_cast<timing::SteadyClock::duration>(
        std::chrono::duration<double>(1.0 / webhook_.rate));
  }
  // The rate's: no request starts before it (rate > 0).
  [[nodiscard]] timing::SteadyTime next_start() const { return last_start_ + interval(); }
  void pump_at(timing::SteadyTime when);
  // Ends a pump_at() wait, if one is under way.
  void cancel_timer() {
    if (!timed_) return;
    ++timer_generation_;  // a wait already ended but not yet run must not pump as well
    timer_->cancel();
    timed_ = false;
    waiting_ = false;
  }
  // Retiring, with nothing under way: the owner lets it go.
  void maybe_let_go() {
    if (retiring_ && in_flight_ == 0 && !waiting_ && !let_go_) {
      let_go_ = true;
      owner_.retired(this);
    }
  }
  void reserved(Result<broker::Job> job);
  void send(broker::Job job);
  void answered(const broker::Job& job, const Attempt& attempt, const Response& response,
                timing::SteadyTime started);
  void failed(const broker::Job& job, const Attempt& attempt, int status, std::string error,
              std::optional<Millis> wait);
  void finished(std::string_view outcome);
  std::shared_ptr<Keeper> keep_reserved(JobId id, std::chrono::seconds ttr);
  template <typename T>
  broker::Callback<T> guarded(std::function<void(Result<T>)> then) {
    return [alive = alive_, then = std::move(then)](Result<T> result) {
      if (*alive) then(std::move(result));
    };
  }

  Deliverer& owner_;
  std::string tube_;
  Webhook webhook_;
  std::unique_ptr<broker::Session> session_;
  std::unique_ptr<timing::Timer> timer_;
  bool waiting_ = false;  // a reserve or the timer is under way
  bool timed_ = false;    // the timer is: pump_at()
  bool retiring_ = false;
  bool let_go_ = false;               // retired() was called
  std::uint64_t reserve_ticket_ = 0;  // of the reserve under way, for retire() to cancel
  std::uint64_t timer_generation_ = 0;
  std::uint32_t in_flight_ = 0;
  timing::SteadyTime last_start_{};  // the rate's schedule: when the latest request was due
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

void Deliverer::Lane::pump() {
  if (retiring_ || waiting_ || in_flight_ >= std::max<std::uint32_t>(1, webhook_.concurrency)) {
    return;
  }
  if (webhook_.rate > 0 && owner_.clock_.steady_now() < next_start()) {
    return pump_at(next_start());
  }
  waiting_ = true;
  reserve_ticket_ = session_->reserve(
      {{tube_}, std::nullopt},
      guarded<broker::Job>([this](Result<broker::Job> job) { reserved(std::move(job)); }));
}

void Deliverer::Lane::retire() {
  retiring_ = true;
  cancel_timer();
  // Its completion comes with kTimedOut; a job it already took is sent all the same.
  if (reserve_ticket_ != 0) session_->cancel_reserve(std::exchange(reserve_ticket_, 0));
  maybe_let_go();
}

// Waits until `when`, then pumps.
void Deliverer::Lane::pump_at(timing::SteadyTime when) {
  waiting_ = true;
  timed_ = true;
  timer_->expires_at(when);
  timer_->async_wait([this, alive = alive_, generation = timer_generation_](bool expired) {
    if (!expired || !*alive || generation != timer_generation_) return;
    timed_ = false;
    waiting_ = false;
    pump();
  });
}

void Deliverer::Lane::reserved(Result<broker::Job> job) {
  waiting_ = false;
  reserve_ticket_ = 0;
  if (!job.is_ok() && retiring_) return maybe_let_go();
  if (!job.is_ok()) {
    // Not a timeout (the reserve has none): the broker refused; try again in a second.
    spdlog::warn("webhook {}: reserve failed: {}", tube_, job.status().message());
    return pump_at(owner_.clock_.steady_now() + std::chrono::seconds(1));
  }
  if (webhook_.rate > 0) {
    // Each start is due one interval after the one before, not after the moment it happened:
    // the timer's and the reserve's own delays would otherwise add up and lower the rate. After
    // an idle spell the schedule restarts from now, so no burst builds up.
    const auto now = owner_.clock_.steady_now();
    const auto due = next_start();
    last_start_ = now - due > interval() ? now : due;
  }
  ++in_flight_;
  owner_.metrics_.in_flight.add({});
  send(std::move(job).value());
  pump();
}

void Deliverer::Lane::send(broker::Job job) {
  const Attempt attempt{webhook_.max_attempts, webhook_.backoff};
  const std::string& target = job.delivery.url.empty() ? webhook_.url : job.delivery.url;
  auto url = parse_url(target);
  if (!url.is_ok()) return failed(job, attempt, 0, url.status().message(), std::nullopt);
  const JobView& view = job.view;
  const std::int64_t now_ms = owner_.clock_.now_unix_ms();
  if (view.counters.reserves == 1) {
    owner_.metrics_.lateness.observe(
        static_cast<double>(std::max<std::int64_t>(0, now_ms - view.due_unix_ms)) / 1000.0);
  }
  Request request;
  request.url = std::move(url).value();
  request.timeout = webhook_.timeout;
  request.headers = webhook_.headers;
  if (!job.delivery.traceparent.empty()) {
    // The job's trace context, whole: none of a webhook's own (one set before they were refused).
    std::erase_if(request.headers, [](const auto& header) {
      return boost::beast::iequals(header.first, "traceparent") ||
             boost::beast::iequals(header.first, "tracestate");
    });
  }
  request.headers.emplace_back("Content-Type", job.delivery.content_type.empty()
                                                   ? "application/octet-stream"
                                                   : job.delivery.content_type);
  request.headers.emplace_back("Delayq-Job-Id", std::to_string(view.id));
  request.headers.emplace_back("Delayq-Attempt", std::to_string(view.counters.reserves));
  request.headers.emplace_back("Delayq-Tube", view.tube);
  if (!view.key.empty()) request.headers.emplace_back("Delayq-Key", header_key(view.key));
  request.headers.emplace_back("Delayq-Due", rfc3339_ms(view.due_unix_ms));
  // The put's trace context, so that the receiver's span continues the producer's trace.
  if (!job.delivery.traceparent.empty()) {
    request.headers.emplace_back("traceparent", job.delivery.traceparent);
    if (!job.delivery.tracestate.empty()) {
      request.headers.emplace_back("tracestate", job.delivery.tracestate);
    }
  }
  if (!webhook_.secrets.empty()) {
    request.headers.emplace_back("Delayq-Signature", signature(webhook_.secrets, now_ms, job.body));
  }
  request.body = job.body;
  const auto started = owner_.clock_.steady_now();
  auto keeper = keep_reserved(view.id, view.ttr);
  owner_.poster_.post(std::move(request),
                      [this, alive = alive_, job = std::move(job), attempt, started,
                       keeper = std::move(keeper)](const Response& response) {
                        (void)keeper;  // held until the answer
                        if (*alive) answered(job, attempt, response, started);
                      });
}

// A request may outlast the job's TTR (a TTR of 1 s, a webhook timeout of 10 s): then the job is
// touched every half TTR while its request is under way, or it would be ready again and sent a
// second time meanwhile. The loop ends when the Keeper goes, with the request's answer.
class Deliverer::Keeper : public std::enable_shared_from_this<Keeper> {
 public:
  Keeper(std::unique_ptr<timing::Timer> timer, broker::Session& session, JobId id,
         std::chrono::microseconds every, std::shared_ptr<bool> alive)
      : timer_(std::move(timer)),
        session_(session),
        id_(id),
        every_(every),
        alive_(std::move(alive)) {}
  void arm() {
    timer_->expires_after(every_);
    timer_->async_wait([weak = weak_from_this()](bool expired) {
      const auto self = weak.lock();
      if (!expired || !self || !*self->alive_) return;  // answered, or the lane is gone
      self->session_.touch(self->id_, [](const Result<JobView>&) {});
      self->arm();
    });
  }

 private:
  std::unique_ptr<timing::Timer> timer_;
  broker::Session& session_;
  JobId id_;
  std::chrono::microseconds every_;
  std::shared_ptr<bool> alive_;
};

std::shared_ptr<Deliverer::Keeper> Deliverer::Lane::keep_reserved(JobId id,
                                                                  std::chrono::seconds ttr) {
  if (ttr > webhook_.timeout + std::chrono::seconds(1)) return nullptr;
  const auto every = std::max<std::chrono::microseconds>(ttr / 2, std::chrono::milliseconds(250));
  auto keeper = std::make_shared<Keeper>(owner_.clock_.timer(), *session_, id, every, alive_);
  keeper->arm();
  return keeper;
}

void Deliverer::Lane::answered(const broker::Job& job, const Attempt& attempt,
                               const Response& response, timing::SteadyTime started) {
  const double took = std::chrono::duration<double>(owner_.clock_.steady_now() - started).count();
  owner_.metrics_.latency.observe(took);
  spdlog::debug("webhook {}: job {} attempt {}: {} in {:.1f} ms", tube_, job.view.id,
                job.view.counters.reserves,
                response.status != 0 ? "HTTP " + std::to_string(response.status) : response.error,
                took * 1000);
  owner_.metrics_.attempts.add({tube_, status_class(response.status)});
  if (response.status >= 200 && response.status < 300) {
    session_->erase(broker::JobRef::by_id(job.view.id),
                    guarded<JobId>([this, id = job.view.id](Result<JobId> erased) {
                      if (!erased.is_ok()) {
                        // Deleted or taken meanwhile (its TTR lapsed): delivered all the same.
                        spdlog::warn("webhook {}: job {} delivered, delete failed: {}", tube_, id,
                                     erased.status().message());
                      }
                      finished("delivered");
                    }));
    return;
  }
  std::optional<Millis> wait;
  if (response.status == 429 || response.status == 503) {
    wait = retry_after(response.retry_after, owner_.clock_.now_unix_ms());
    if (wait) wait = std::min(*wait, kMaxRetryAfter);
  }
  std::string error = response.error;
  if (error.empty()) error = "HTTP " + std::to_string(response.status);
  failed(job, attempt, response.status, std::move(error), wait);
}

// The attempt failed: keep why with the job, then release it for its next attempt, or bury it
// once its attempts are used up (the dead letter). The outcome is kept first, so that whoever
// sees the job buried or delayed again also sees why (in Redis mode the two are separate calls).
void Deliverer::Lane::failed(const broker::Job& job, const Attempt& attempt, int status,
                             std::string error, std::optional<Millis> wait) {
  const JobId id = job.view.id;
  const std::uint32_t number = job.view.counters.reserves;
  broker::ReleaseRequest release;
  release.id = id;
  release.reservation = number;
  const bool last = number >= attempt.max_attempts;
  if (!last) release.delay = wait.value_or(backoff_delay(attempt.backoff, number, owner_.random_));
  session_->note_attempt(
      id, status, std::move(error), guarded<JobView>([this, release, last](Result<JobView>) {
        if (last) {
          session_->bury(release.id, std::nullopt,
                         guarded<JobView>([this](Result<JobView>) { finished("buried"); }));
          return;
        }
        // The tube's own max_attempts (pull workers') may bury it on this release: count what
        // it did.
        session_->release(release, guarded<JobView>([this](Result<JobView> after) {
                            const bool buried =
                                after.is_ok() && after.value().state == JobState::kBuried;
                            finished(buried ? "buried" : "released");
                          }));
      }));
}

void Deliverer::Lane::finished(std::string_view outcome) {
  owner_.metrics_.deliveries.add({tube_, outcome});
  --in_flight_;
  owner_.metrics_.in_flight.add({}, -1);
  if (retiring_) return maybe_let_go();
  pump();
}

// --- Deliverer

Deliverer::Families::Families(metrics::Registry& registry)
    : deliveries(registry.counters(kWebhookDeliveries, "Push deliveries by tube and outcome.",
                                   metrics::Kind::kCounter, {"tube", "outcome"})),
      attempts(registry.counters("delayq_webhook_attempts_total",
                                 "Push delivery attempts by tube and result.",
                                 metrics::Kind::kCounter, {"tube", "result"})),
      in_flight(registry.counters("delayq_webhook_in_flight", "Push delivery requests under way.",
                                  metrics::Kind::kGauge)),
      latency(registry.histogram(
          "delayq_webhook_latency_seconds",
          "From a push delivery request's start to its answer or failure.",
          {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30})),
      lateness(registry.histogram(
          "delayq_webhook_lateness_seconds",
          "From a job's due time to the start of its first delivery attempt.",
          {0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 5, 30, 60})) {}

Deliverer::Deliverer(asio::io_context& io, broker::Broker& broker, metrics::Registry& metrics,
                     Poster& poster, timing::Clock& clock)
    : io_(io), broker_(broker), metrics_(metrics), poster_(poster), clock_(clock) {}

Deliverer::Deliverer(asio::io_context& io, broker::Broker& broker, metrics::Registry& metrics,
                     std::unique_ptr<Poster> poster, std::unique_ptr<timing::Clock> clock)
    : io_(io),
      broker_(broker),
      metrics_(metrics),
      own_poster_(std::move(poster)),
      own_clock_(std::move(clock)),
      poster_(*own_poster_),
      clock_(*own_clock_) {}

Deliverer::~Deliverer() {
  *alive_ = false;
  stop();
}

Result<std::unique_ptr<Deliverer>> Deliverer::make(asio::io_context& io, broker::Broker& broker,
                                                   metrics::Registry& metrics,
                                                   DelivererOptions options) {
  auto sender = Sender::make(io, std::move(options.sender));
  if (!sender.is_ok()) return sender.status();
  return std::unique_ptr<Deliverer>(
      new Deliverer(io, broker, metrics, std::move(sender).value(), timing::system_clock(io)));
}

void Deliverer::start() {
  running_ = true;
  broker_.on_webhooks_changed([this] { refresh(); });
  refresh();
}

void Deliverer::stop() {
  if (!running_) return;
  running_ = false;
  broker_.on_webhooks_changed(nullptr);
  lanes_.clear();
  retiring_.clear();
}

void Deliverer::refresh() {
  if (!running_) return;
  std::map<std::string, std::unique_ptr<Lane>> lanes;
  for (auto& [tube, webhook] : broker_.webhooks()) {
    if (!broker_.delivers(tube)) continue;
    auto node = lanes_.extract(tube);
    if (node.empty()) {
      auto lane = std::make_unique<Lane>(*this, tube, webhook);
      lane->pump();
      lanes.emplace(tube, std::move(lane));
    } else {
      node.mapped()->configure(webhook);
      lanes.insert(std::move(node));
    }
  }
  lanes_.swap(lanes);
  // Lanes of tubes no longer delivered here end with `lanes`, but those with requests under
  // way first see them answered: a request cut off would be sent again, a second delivery.
  for (auto& [tube, lane] : lanes) {
    if (!lane->busy()) continue;
    Lane* retiring = lane.get();
    retiring_.push_back(std::move(lane));
    retiring->retire();
  }
}

// Posted: the lane is still running the call that said it is done.
void Deliverer::retired(Lane* lane) {
  asio::post(io_, [this, alive = alive_, lane] {
    if (!*alive) return;
    std::erase_if(retiring_, [lane](const std::unique_ptr<Lane>& l) { return l.get() == lane; });
  });
}

}  // namespace delayq::front::webhook
