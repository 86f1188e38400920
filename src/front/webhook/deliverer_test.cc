// The deliverer without a process, a socket or a sleep: a Deliverer over the scripted FakeBroker
// (tests/support/fake_broker.h), a scripted poster that answers each request when and how the
// test says, and a clock the test moves by hand, whose timers run on the io_context as Asio's
// would. Checked: what a 2xx, a failure, a 429 or 503 with Retry-After and a last attempt send to
// the broker (the delay of each release); a lane's concurrency and rate, and that it reserves only
// when it may send; touches that keep a slow request's job reserved; stop(); a webhook removed.
// Over the fake rather than the local broker: each broker call is seen with its arguments and
// completed in the order the test picks, with no committer thread to wait for; a test beside a
// front-end may not include a broker implementation (scripts/check-layers.sh); and what a
// broker does with the calls is the contract test's (tests/broker/). The fake's held() and
// returned() stand for its reserved jobs: those of a session destroyed are ready again.
#include "front/webhook/deliverer.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "front/families.h"
#include "support/fake_broker.h"
#include "support/seed.h"
#include "timing/manual_clock.h"
#include "webhook/rules.h"
#include "webhook/signature.h"

namespace delayq::front::webhook {
namespace {

namespace asio = boost::asio;
using delayq::testing::Call;
using delayq::testing::FakeBroker;
using namespace std::chrono_literals;

constexpr std::int64_t kStartUnixMs = 1'795'326'973'000;  // Sun, 22 Nov 2026 05:56:13 GMT
// Not the steady clock's epoch: a lane's rate schedule starts there, as it does on a real
// steady clock, which reads far past it.
using timing::SteadyClock;
using timing::SteadyTime;
constexpr SteadyTime kSteadyStart = timing::ManualClock::kSteadyStart;

// A receiver played by the test: every request is kept with its callback until the test answers.
class ScriptedPoster final : public Poster {
 public:
  void post(Request request, std::function<void(Response)> done) override {
    posts_.push_back({std::move(request), std::move(done)});
  }

  [[nodiscard]] std::size_t count() const { return posts_.size(); }
  [[nodiscard]] const Request& request(std::size_t index) const { return posts_.at(index).request; }
  // The requests not answered yet, by index.
  [[nodiscard]] std::vector<std::size_t> under_way() const {
    std::vector<std::size_t> indexes;
    for (std::size_t i = 0; i < posts_.size(); ++i) {
      if (posts_[i].done) indexes.push_back(i);
    }
    return indexes;
  }
  // Answers request `index` (once), as the sender would on the loop.
  void answer(std::size_t index, Response response) {
    Post& post = posts_.at(index);
    ASSERT_TRUE(post.done) << "request " << index << " was answered already";
    auto done = std::exchange(post.done, nullptr);
    done(std::move(response));
  }

 private:
  struct Post {
    Request request;
    std::function<void(Response)> done;  // null once answered
  };
  std::deque<Post> posts_;
};

Response status(int code, std::string retry_after = {}) {
  return Response{code, std::move(retry_after), {}};
}
Response no_answer(std::string error) {
  return Response{0, {}, std::move(error)};
}

Webhook hook() {
  Webhook webhook;
  webhook.url = "http://receiver.test:9000/hook";
  return webhook;
}

// Job `id` of tube "t" as a reserve gives it: its `attempt`-th reservation, due 2.5 s ago.
broker::Job job_of(JobId id, std::uint32_t attempt = 1, std::chrono::seconds ttr = 60s) {
  broker::Job job;
  job.view.id = id;
  job.view.tube = "t";
  job.view.state = JobState::kReserved;
  job.view.due_unix_ms = kStartUnixMs - 2500;
  job.view.ttr = ttr;
  job.view.counters.reserves = attempt;
  job.body = "body of " + std::to_string(id);
  job.as_of_unix_ms = kStartUnixMs;
  return job;
}

JobView view_in(JobId id, JobState state) {
  JobView view = job_of(id).view;
  view.state = state;
  return view;
}

std::optional<std::string> header(const Request& request, std::string_view name) {
  for (const auto& [key, value] : request.headers) {
    if (key == name) return value;
  }
  return std::nullopt;
}

// Observations in the bucket of `histogram` whose upper bound is `bound`.
std::uint64_t in_bucket(const metrics::Histogram& histogram, double bound) {
  const auto& bounds = histogram.bounds();
  const auto at = std::find(bounds.begin(), bounds.end(), bound);
  if (at == bounds.end()) {
    ADD_FAILURE() << "no bucket " << bound;
    return 0;
  }
  return histogram.buckets()[static_cast<std::size_t>(at - bounds.begin())];
}

class DelivererTest : public ::testing::Test {
 protected:
  // Starts the deliverer with these webhooks (each tube's lane opens its session in this order).
  void start(std::vector<std::pair<std::string, Webhook>> webhooks) {
    broker_.set_webhooks(std::move(webhooks));
    deliverer_ = std::make_unique<Deliverer>(io_, broker_, metrics_, poster_, clock_);
    deliverer_->start();
    settle();
  }

  // Runs what is queued (posted handlers, timers that fired, cancelled reserves' kTimedOut)
  // until nothing is.
  void settle() {
    for (;;) {
      io_.restart();
      std::size_t ran = io_.poll();
      ran += broker_.poll();
      if (ran == 0) return;
    }
  }
  // Time passes by `by`: each timer fires at its own expiry, in order, and what it does runs
  // before the clock moves on.
  void advance(SteadyClock::duration by) {
    const SteadyTime to = clock_.steady_now() + by;
    settle();
    for (auto next = clock_.next_expiry(); next && *next <= to; next = clock_.next_expiry()) {
      clock_.set(*next);
      settle();
    }
    clock_.set(to);
    settle();
  }

  [[nodiscard]] std::size_t pending(std::string_view op) const {
    std::size_t count = 0;
    for (const std::string& text : broker_.pending_texts()) {
      if (text.starts_with(std::string(op) + " ") || text == op) ++count;
    }
    return count;
  }
  // The reserve pending in session `session` (a lane's, in the order they opened); aborts if
  // there is none.
  Call& reserve_call(std::size_t session = 0) {
    for (std::size_t i = broker_.call_count(); i-- > 0;) {
      Call& call = broker_.call(i);
      if (call.op() == "reserve" && call.pending() && call.session() == session) return call;
    }
    ADD_FAILURE() << "no reserve pending in session " << session << ": "
                  << ::testing::PrintToString(broker_.pending_texts());
    std::abort();
  }
  // The lane of session `session` reserves `job`.
  void give(broker::Job job, std::size_t session = 0) {
    reserve_call(session).complete(std::move(job));
    settle();
  }
  // The last call is `text`, pending: complete it with `value`.
  template <typename T>
  void expect_and_complete(const std::string& text, T value) {
    Call& call = broker_.last();
    ASSERT_EQ(call.text(), text);
    ASSERT_TRUE(call.pending());
    call.complete(std::move(value));
    settle();
  }
  // Every call made since `mark` (a call_count()).
  [[nodiscard]] std::vector<std::string> texts_since(std::size_t mark) const {
    const std::vector<std::string> all = broker_.texts();
    return {all.begin() + static_cast<std::ptrdiff_t>(mark), all.end()};
  }
  // Tube t's deliveries by outcome, as the metrics page counts them.
  [[nodiscard]] std::map<std::string, std::int64_t> outcomes() const {
    std::map<std::string, std::int64_t> out;
    metrics_.find_counters(kWebhookDeliveries)
        ->for_each([&out](std::span<const std::string_view> labels, std::int64_t count) {
          if (labels[0] == "t") out.emplace(labels[1], count);
        });
    return out;
  }
  [[nodiscard]] std::int64_t in_flight() const {
    return metrics_.find_counters("delayq_webhook_in_flight")->value({});
  }
  [[nodiscard]] const metrics::Histogram& histogram(std::string_view name) const {
    return *metrics_.find_histogram(name);
  }

  // Request `index`, for job `id`, fails with `response`: its outcome is noted (as `note`), then
  // the job is released; returns the release's request (the note and the release completed).
  broker::ReleaseRequest fail_and_release(std::size_t index, Response response,
                                          const std::string& note, JobId id = 7) {
    poster_.answer(index, std::move(response));
    settle();
    if (broker_.last().text() != note) {
      ADD_FAILURE() << "expected " << note << ", got " << broker_.last().text();
      return {};
    }
    broker_.last().complete(view_in(id, JobState::kReserved));
    settle();
    Call& release = broker_.last();
    if (release.op() != "release") {
      ADD_FAILURE() << "expected a release, got " << release.text();
      return {};
    }
    broker::ReleaseRequest request = release.request<broker::ReleaseRequest>();
    release.complete(view_in(id, JobState::kDelayed));
    settle();
    return request;
  }

  asio::io_context io_;
  timing::ManualClock clock_{io_, kStartUnixMs};
  ScriptedPoster poster_;
  metrics::Registry metrics_;
  FakeBroker broker_;
  std::unique_ptr<Deliverer> deliverer_;
};

// --- what each answer leads to

TEST_F(DelivererTest, ATwoHundredDeletesTheJob) {
  start({{"t", hook()}});
  ASSERT_EQ(broker_.texts(), std::vector<std::string>{"reserve tubes=t timeout=none"});
  EXPECT_FALSE(broker_.options(0).watch_default);
  give(job_of(7));
  ASSERT_EQ(poster_.count(), 1U);
  EXPECT_EQ(in_flight(), 1);

  advance(300ms);
  poster_.answer(0, status(204));
  settle();
  expect_and_complete<JobId>("erase id=7", 7);
  EXPECT_EQ(outcomes(), (std::map<std::string, std::int64_t>{{"delivered", 1}}));
  EXPECT_EQ(in_flight(), 0);
  EXPECT_TRUE(broker_.held(0).empty());
  EXPECT_EQ(in_bucket(histogram("delayq_webhook_latency_seconds"), 0.5), 1U)
      << "0.3 s on the clock";
}

TEST_F(DelivererTest, TheRequestCarriesTheJobAndIsSignedAtTheClocksTime) {
  Webhook webhook = hook();
  webhook.headers = {{"Authorization", "Bearer x"}};
  webhook.secrets = {"s1", "s2"};
  webhook.timeout = 2500ms;
  start({{"t", webhook}});
  broker::Job job = job_of(7);
  job.view.key = "a b";
  give(job);
  ASSERT_EQ(poster_.count(), 1U);
  const Request& request = poster_.request(0);
  EXPECT_EQ(request.url.origin(), "http://receiver.test:9000");
  EXPECT_EQ(request.url.target, "/hook");
  EXPECT_EQ(request.timeout, 2500ms);
  EXPECT_EQ(request.body, "body of 7");
  EXPECT_EQ(header(request, "Authorization"), "Bearer x");
  EXPECT_EQ(header(request, "Content-Type"), "application/octet-stream");
  EXPECT_EQ(header(request, "Delayq-Job-Id"), "7");
  EXPECT_EQ(header(request, "Delayq-Attempt"), "1");
  EXPECT_EQ(header(request, "Delayq-Tube"), "t");
  EXPECT_EQ(header(request, "Delayq-Key"), "a%20b");
  EXPECT_EQ(header(request, "Delayq-Due"), rfc3339_ms(kStartUnixMs - 2500));
  const auto signed_as = header(request, "Delayq-Signature");
  EXPECT_TRUE(signed_as && signed_as->starts_with("t=1795326973000,v1="))
      << signed_as.value_or("none");
  EXPECT_EQ(signed_as, signature({"s1", "s2"}, kStartUnixMs, "body of 7"));
  // Due 2.5 s before the clock's present: the first attempt's lateness.
  EXPECT_EQ(in_bucket(histogram("delayq_webhook_lateness_seconds"), 5), 1U);

  // A job's own URL and content type win over the tube's.
  poster_.answer(0, status(200));
  settle();
  expect_and_complete<JobId>("erase id=7", 7);
  broker::Job own = job_of(8);
  own.delivery.url = "https://elsewhere.test/x?y=1";
  own.delivery.content_type = "application/json";
  give(own);
  ASSERT_EQ(poster_.count(), 2U);
  EXPECT_EQ(poster_.request(1).url.origin(), "https://elsewhere.test:443");
  EXPECT_EQ(poster_.request(1).url.target, "/x?y=1");
  EXPECT_EQ(header(poster_.request(1), "Content-Type"), "application/json");
  EXPECT_FALSE(header(poster_.request(1), "traceparent").has_value());
}

TEST_F(DelivererTest, TheRequestCarriesThePutsTraceContext) {
  start({{"t", hook()}});
  broker::Job job = job_of(7);
  job.delivery.traceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
  job.delivery.tracestate = "vendor=a";
  give(job);
  ASSERT_EQ(poster_.count(), 1U);
  EXPECT_EQ(header(poster_.request(0), "traceparent"),
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01");
  EXPECT_EQ(header(poster_.request(0), "tracestate"), "vendor=a");
}

// Each failure is noted with the job, then the job released for its attempt's backoff: drawn
// between half and all of min * factor^(attempt-1) (here 1 s * 3^(n-1)), whichever way it failed.
TEST_F(DelivererTest, AFailureReleasesTheJobWithBackoff) {
  Webhook webhook = hook();
  webhook.backoff = Backoff{1000ms, 3'600'000ms, 3};
  start({{"t", webhook}});

  give(job_of(7, 1));
  auto release = fail_and_release(0, status(500), "note_attempt id=7 status=500 error=HTTP 500");
  EXPECT_EQ(release.id, 7U);
  EXPECT_EQ(release.reservation, 1U);
  EXPECT_EQ(release.priority, std::nullopt);
  EXPECT_GE(release.delay, 500ms);
  EXPECT_LE(release.delay, 1000ms);

  give(job_of(7, 2));
  release =
      fail_and_release(1, no_answer("timed out"), "note_attempt id=7 status=0 error=timed out");
  EXPECT_EQ(release.reservation, 2U);
  EXPECT_GE(release.delay, 1500ms);
  EXPECT_LE(release.delay, 3000ms);

  give(job_of(7, 3));
  release = fail_and_release(2, no_answer("connect: Connection refused"),
                             "note_attempt id=7 status=0 error=connect: Connection refused");
  EXPECT_EQ(release.reservation, 3U);
  EXPECT_GE(release.delay, 4500ms);
  EXPECT_LE(release.delay, 9000ms);

  EXPECT_EQ(outcomes(), (std::map<std::string, std::int64_t>{{"released", 3}}));
  EXPECT_EQ(in_flight(), 0);
  EXPECT_TRUE(broker_.held(0).empty());
}

// The release waits for the note: whoever sees the job delayed again also sees why.
TEST_F(DelivererTest, TheOutcomeIsNotedBeforeTheRelease) {
  start({{"t", hook()}});
  give(job_of(7));
  poster_.answer(0, status(404));
  settle();
  EXPECT_EQ(broker_.pending_texts(),
            (std::vector<std::string>{"reserve tubes=t timeout=none",
                                      "note_attempt id=7 status=404 error=HTTP 404"}));
}

// 429 and 503 wait as long as their Retry-After asks, in seconds or as an HTTP date (on the
// clock's wall time), up to a day; another status's Retry-After, or one that reads as neither,
// leaves the backoff.
TEST_F(DelivererTest, RetryAfterOf429And503ReplacesTheBackoff) {
  Webhook webhook = hook();
  webhook.backoff = Backoff{1000ms, 3'600'000ms, 2};
  start({{"t", webhook}});
  const std::string note429 = "note_attempt id=7 status=429 error=HTTP 429";
  const std::string note503 = "note_attempt id=7 status=503 error=HTTP 503";

  give(job_of(7, 1));
  EXPECT_EQ(fail_and_release(0, status(429, "7"), note429).delay, 7000ms);
  give(job_of(7, 1));
  EXPECT_EQ(fail_and_release(1, status(503, "120"), note503).delay, 120'000ms);
  ASSERT_EQ(clock_.now_unix_ms(), kStartUnixMs);
  give(job_of(7, 1));
  EXPECT_EQ(fail_and_release(2, status(503, "Sun, 22 Nov 2026 05:57:43 GMT"), note503).delay,
            90'000ms);
  give(job_of(7, 1));
  EXPECT_EQ(fail_and_release(3, status(429, "Sun, 22 Nov 2026 05:56:03 GMT"), note429).delay, 0ms)
      << "a date in the past";
  give(job_of(7, 1));
  EXPECT_EQ(fail_and_release(4, status(429, "172800"), note429).delay, 86'400'000ms)
      << "two days asked, one honoured";

  // The wall clock moved: the same date is nearer.
  advance(30s);
  give(job_of(7, 1));
  EXPECT_EQ(fail_and_release(5, status(503, "Sun, 22 Nov 2026 05:57:43 GMT"), note503).delay,
            60'000ms);

  give(job_of(7, 1));
  auto release =
      fail_and_release(6, status(500, "7"), "note_attempt id=7 status=500 error=HTTP 500");
  EXPECT_GE(release.delay, 500ms);
  EXPECT_LE(release.delay, 1000ms);
  give(job_of(7, 1));
  release = fail_and_release(7, status(503, "soon"), note503);
  EXPECT_GE(release.delay, 500ms);
  EXPECT_LE(release.delay, 1000ms);
}

// The last allowed attempt buries the job (no release): its outcome noted first, kept beside it.
TEST_F(DelivererTest, TheLastAllowedAttemptBuriesTheJobWithItsOutcome) {
  Webhook webhook = hook();
  webhook.max_attempts = 3;
  start({{"t", webhook}});

  give(job_of(7, 2));
  const auto release =
      fail_and_release(0, status(500), "note_attempt id=7 status=500 error=HTTP 500");
  EXPECT_EQ(release.reservation, 2U);

  give(job_of(7, 3));
  const std::size_t mark = broker_.call_count();
  poster_.answer(1, status(502));
  settle();
  expect_and_complete("note_attempt id=7 status=502 error=HTTP 502",
                      view_in(7, JobState::kReserved));
  expect_and_complete("bury id=7 pri=keep", view_in(7, JobState::kBuried));
  EXPECT_EQ(texts_since(mark), (std::vector<std::string>{
                                   "note_attempt id=7 status=502 error=HTTP 502",
                                   "bury id=7 pri=keep",
                               }));
  EXPECT_EQ(outcomes(), (std::map<std::string, std::int64_t>{{"buried", 1}, {"released", 1}}));
  EXPECT_EQ(in_flight(), 0);
  EXPECT_TRUE(broker_.held(0).empty());
}

// The tube's own max_attempts turns the lane's release into a bury: counted as buried.
TEST_F(DelivererTest, AReleaseTheTubeBuriesCountsAsBuried) {
  start({{"t", hook()}});
  give(job_of(7, 4));
  poster_.answer(0, status(500));
  settle();
  expect_and_complete("note_attempt id=7 status=500 error=HTTP 500",
                      view_in(7, JobState::kReserved));
  ASSERT_EQ(broker_.last().op(), "release");
  broker_.last().complete(view_in(7, JobState::kBuried));
  settle();
  EXPECT_EQ(outcomes(), (std::map<std::string, std::int64_t>{{"buried", 1}}));
}

// --- limits

// With concurrency 2, a third reserve waits until a request's delete is done, not just its
// answer: the jobs the limit holds back stay ready in their tube.
TEST_F(DelivererTest, ALaneReservesOnlyWhileUnderItsConcurrency) {
  Webhook webhook = hook();
  webhook.concurrency = 2;
  start({{"t", webhook}});
  give(job_of(1));
  EXPECT_EQ(pending("reserve"), 1U);
  give(job_of(2));
  EXPECT_EQ(poster_.under_way().size(), 2U);
  EXPECT_EQ(pending("reserve"), 0U) << "a reserve at the limit";
  EXPECT_EQ(in_flight(), 2);

  advance(1h);
  EXPECT_EQ(pending("reserve"), 0U);
  poster_.answer(1, status(200));
  settle();
  EXPECT_EQ(pending("reserve"), 0U) << "a reserve before the delete was done";
  expect_and_complete<JobId>("erase id=2", 2);
  EXPECT_EQ(pending("reserve"), 1U);
  EXPECT_EQ(in_flight(), 1);
}

// Many jobs given, answered and deleted in a random order: the lane never holds more jobs than
// its concurrency, and never waits in a reserve while it holds that many.
TEST_F(DelivererTest, ALaneNeverHasMoreThanItsConcurrencyInFlight) {
  Webhook webhook = hook();
  webhook.concurrency = 3;
  start({{"t", webhook}});
  std::mt19937_64 random(delayq::testing::test_seed());
  JobId next = 1;
  std::size_t delivered = 0;
  while (delivered < 100) {
    const std::size_t held = broker_.held(0).size();
    ASSERT_LE(held, 3U);
    ASSERT_LE(pending("reserve"), 1U);
    ASSERT_TRUE(held < 3 || pending("reserve") == 0) << "a reserve with " << held << " held";
    ASSERT_EQ(in_flight(), static_cast<std::int64_t>(held));
    // One move, drawn: the reserve gives a job, a request is answered, or a delete completes.
    const bool reserving = pending("reserve") == 1;
    const std::vector<std::size_t> requests = poster_.under_way();
    std::vector<Call*> erases;
    for (std::size_t i = 0; i < broker_.call_count(); ++i) {
      if (broker_.call(i).op() == "erase" && broker_.call(i).pending()) {
        erases.push_back(&broker_.call(i));
      }
    }
    const std::size_t moves = (reserving ? 1 : 0) + requests.size() + erases.size();
    ASSERT_GT(moves, 0U) << "nothing under way and no reserve";
    std::size_t move = std::uniform_int_distribution<std::size_t>(0, moves - 1)(random);
    if (reserving && move-- == 0) {
      give(job_of(next++));
    } else if (move < requests.size()) {
      poster_.answer(requests[move], status(200));
      settle();
    } else {
      Call& erase = *erases[move - requests.size()];
      erase.complete<JobId>(std::stoull(erase.args().substr(3)));  // "id=N"
      settle();
      ++delivered;
    }
  }
}

// rate 4/s: a start every 250 ms, each due one interval after the one before, not after the
// moment it happened; after an idle spell the schedule starts again from the present.
TEST_F(DelivererTest, ARateSpacesTheStartsOnItsSchedule) {
  Webhook webhook = hook();
  webhook.rate = 4;
  start({{"t", webhook}});
  give(job_of(1));  // at 0: the first start
  EXPECT_EQ(pending("reserve"), 0U) << "a reserve before the next start is due";
  advance(249ms);
  EXPECT_EQ(pending("reserve"), 0U);
  advance(1ms);  // 250 ms
  EXPECT_EQ(pending("reserve"), 1U);

  advance(100ms);  // the reserve answers 100 ms late: the start was due at 250 ms
  give(job_of(2));
  advance(149ms);  // 499 ms
  EXPECT_EQ(pending("reserve"), 0U);
  advance(1ms);  // 500 ms, not 600 ms
  EXPECT_EQ(pending("reserve"), 1U);

  advance(2s);  // idle: more than an interval behind the schedule
  give(job_of(3));
  advance(249ms);
  EXPECT_EQ(pending("reserve"), 0U) << "a burst after an idle spell";
  advance(1ms);
  EXPECT_EQ(pending("reserve"), 1U);
}

// A new rate applies at once: the wait for the old one's next start ends, and that wait's end,
// even if its expiry had already come, does not start another reserve.
TEST_F(DelivererTest, ANewRateAppliesAtOnce) {
  Webhook webhook = hook();
  webhook.rate = 0.1;  // a start every 10 s
  start({{"t", webhook}});
  give(job_of(1));
  advance(5s);
  EXPECT_EQ(pending("reserve"), 0U);
  webhook.rate = 1000;
  broker_.set_webhooks({{"t", webhook}});
  settle();
  ASSERT_EQ(pending("reserve"), 1U) << "still waiting for the old rate";
  EXPECT_EQ(broker_.sessions_opened(), 1U) << "a new lane for a changed webhook";

  // The old wait's expiry comes while a change is being made: its end is queued, then the
  // change cancels it.
  give(job_of(2));
  webhook.rate = 0.1;
  broker_.set_webhooks({{"t", webhook}});
  settle();
  EXPECT_EQ(pending("reserve"), 0U);
  clock_.set(clock_.steady_now() + 10s);  // the wait's end is queued, not run
  webhook.rate = 2000;
  broker_.set_webhooks({{"t", webhook}});
  settle();
  EXPECT_EQ(pending("reserve"), 1U) << "one reserve from the change, none from the old wait";
}

// --- time during a request, failures of the broker

// A job whose TTR is at most the timeout + 1 s is touched every half TTR while its request is
// under way, and no more once it is answered; a longer TTR is left to run.
TEST_F(DelivererTest, ASlowRequestTouchesItsJobEveryHalfTtr) {
  Webhook webhook = hook();
  webhook.timeout = 10s;
  start({{"t", webhook}});
  give(job_of(7, 1, 2s));
  const std::size_t mark = broker_.call_count();
  advance(999ms);
  EXPECT_EQ(texts_since(mark), std::vector<std::string>{});
  advance(1ms);
  ASSERT_EQ(texts_since(mark), std::vector<std::string>{"touch id=7"});
  broker_.last().complete(view_in(7, JobState::kReserved));
  advance(1s);
  advance(1s);
  EXPECT_EQ(texts_since(mark),
            (std::vector<std::string>{"touch id=7", "touch id=7", "touch id=7"}));

  poster_.answer(0, status(200));
  settle();
  expect_and_complete<JobId>("erase id=7", 7);
  const std::size_t answered = broker_.call_count();
  advance(1min);
  EXPECT_EQ(texts_since(answered), std::vector<std::string>{}) << "touched after its answer";

  give(job_of(8, 1, 11s));  // timeout + 1 s: still touched
  const std::size_t eight = broker_.call_count();
  advance(5500ms);
  EXPECT_EQ(texts_since(eight), std::vector<std::string>{"touch id=8"});
  poster_.answer(1, status(200));
  settle();
  expect_and_complete<JobId>("erase id=8", 8);

  give(job_of(9, 1, 12s));  // more than timeout + 1 s: left to run
  const std::size_t nine = broker_.call_count();
  advance(1min);
  EXPECT_EQ(texts_since(nine), std::vector<std::string>{});
}

// A reserve the broker refuses is tried again a second later.
TEST_F(DelivererTest, AFailedReserveIsTriedAgainASecondLater) {
  start({{"t", hook()}});
  reserve_call().fail(Code::kIOError, "disk");
  settle();
  EXPECT_EQ(pending("reserve"), 0U);
  advance(999ms);
  EXPECT_EQ(pending("reserve"), 0U);
  advance(1ms);
  EXPECT_EQ(pending("reserve"), 1U);
}

// --- stopping, and webhooks that go

// stop() ends every lane's session: the jobs its requests under way hold are ready again, its
// waiting reserve ends, and answers that come later change nothing.
TEST_F(DelivererTest, StopMakesReservedJobsReadyAgain) {
  Webhook webhook = hook();
  webhook.concurrency = 3;
  start({{"t", webhook}, {"u", webhook}});
  give(job_of(1));
  give(job_of(2));
  poster_.answer(1, status(500));  // its note under way
  settle();
  ASSERT_EQ(broker_.held(0), (std::vector<JobId>{1, 2}));
  Call& waiting = reserve_call(0);

  deliverer_->stop();
  settle();
  EXPECT_EQ(broker_.sessions_closed(), 2U);
  EXPECT_EQ(broker_.returned(), (std::vector<JobId>{1, 2}));
  EXPECT_EQ(waiting.state(), Call::State::kDropped);
  EXPECT_EQ(broker_.pending_count(), 0U);
  EXPECT_EQ(in_flight(), 0);

  const std::size_t mark = broker_.call_count();
  poster_.answer(0, status(200));
  advance(1h);
  broker_.set_webhooks({{"t", webhook}});
  settle();
  EXPECT_EQ(texts_since(mark), std::vector<std::string>{});
  EXPECT_EQ(broker_.sessions_opened(), 2U);
}

// A lane with nothing under way ends with its webhook: its session closes, its reserve ends.
TEST_F(DelivererTest, RemovingAWebhookEndsAnIdleLane) {
  start({{"t", hook()}, {"u", hook()}});
  ASSERT_EQ(broker_.sessions_opened(), 2U);
  Call& waiting = reserve_call(0);  // t's lane's
  broker_.set_webhooks({{"u", hook()}});
  settle();
  EXPECT_EQ(broker_.sessions_closed(), 1U);
  EXPECT_EQ(broker_.session(0), nullptr) << "t's lane";
  EXPECT_EQ(waiting.state(), Call::State::kDropped);
  EXPECT_EQ(pending("reserve"), 1U) << "u's lane";
  EXPECT_TRUE(broker_.returned().empty());
}

// A lane with requests under way retires: its reserve is cancelled and no request starts, but
// the answers are awaited and acted on as ever (cutting them off would send the job again); then
// its session closes.
TEST_F(DelivererTest, RemovingAWebhookRetiresABusyLaneOnceItsRequestsAreDone) {
  start({{"t", hook()}});
  give(job_of(1));
  const std::uint64_t ticket = reserve_call().ticket();

  broker_.set_webhooks({});
  settle();
  EXPECT_EQ(broker_.cancelled(), std::vector<std::uint64_t>{ticket});
  EXPECT_EQ(pending("reserve"), 0U);
  EXPECT_EQ(broker_.sessions_closed(), 0U) << "a request under way was cut off";

  advance(1h);
  poster_.answer(0, status(200));
  settle();
  expect_and_complete<JobId>("erase id=1", 1);
  EXPECT_EQ(pending("reserve"), 0U);
  EXPECT_EQ(broker_.sessions_closed(), 1U);
  EXPECT_TRUE(broker_.returned().empty());
  EXPECT_EQ(outcomes(), (std::map<std::string, std::int64_t>{{"delivered", 1}}));
}

// A reserve cancelled too late, that had already taken a job, still delivers it before the lane
// retires.
TEST_F(DelivererTest, ARetiringLaneSendsAJobItsCancelledReserveTook) {
  start({{"t", hook()}});
  give(job_of(1));
  Call& late = reserve_call();
  broker_.set_webhooks({});
  late.complete(job_of(2));  // before the cancel's kTimedOut
  settle();
  ASSERT_EQ(poster_.count(), 2U);
  EXPECT_EQ(header(poster_.request(1), "Delayq-Job-Id"), "2");
  poster_.answer(0, status(200));
  settle();
  expect_and_complete<JobId>("erase id=1", 1);
  EXPECT_EQ(broker_.sessions_closed(), 0U);
  poster_.answer(1, status(200));
  settle();
  expect_and_complete<JobId>("erase id=2", 2);
  EXPECT_EQ(broker_.sessions_closed(), 1U);
  EXPECT_EQ(pending("reserve"), 0U);
}

}  // namespace
}  // namespace delayq::front::webhook
