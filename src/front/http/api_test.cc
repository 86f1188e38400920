// The HTTP API without a socket: an Api over the scripted FakeBroker (tests/support/
// fake_broker.h). For every route of router.h: the broker call it makes and its arguments, then
// the status, headers and JSON of each answer it can give, errors included; the long-poll's
// cancel and the release of an undeliverable job; /metrics' two calls; health and readiness.
#include "front/http/api.h"

#include <gtest/gtest.h>

#include <boost/json.hpp>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

#include "base/names.h"
#include "broker/families.h"
#include "support/fake_broker.h"

namespace delayq::front::http {
namespace {

namespace json = boost::json;
using delayq::testing::Call;
using delayq::testing::FakeBroker;
using namespace std::string_literals;

constexpr std::size_t kMaxJobBytes = 16;

// One request and what the Api answered, at once or later.
struct Exchange {
  std::shared_ptr<std::vector<Response>> responses = std::make_shared<std::vector<Response>>();
  std::uint64_t ticket = 0;  // handle()'s return

  [[nodiscard]] bool answered() const { return !responses->empty(); }
  // The one answer; a failure if there is none, or more than one.
  [[nodiscard]] const Response& response() const {
    static const Response kNone = [] {
      Response none;
      none.status = 0;
      return none;
    }();
    if (responses->size() != 1) {
      ADD_FAILURE() << responses->size() << " answers, not one";
      return responses->empty() ? kNone : responses->back();
    }
    return responses->front();
  }
};

// --- reading the JSON of an answer

const json::value& field(const json::object& object, std::string_view key) {
  static const json::value kMissing;
  const json::value* value = object.if_contains(key);
  if (value == nullptr) {
    ADD_FAILURE() << "no field \"" << key << "\" in " << json::serialize(object);
    return kMissing;
  }
  return *value;
}

std::int64_t number(const json::object& object, std::string_view key) {
  const json::value& value = field(object, key);
  if (value.is_int64()) return value.as_int64();
  if (value.is_uint64()) return static_cast<std::int64_t>(value.as_uint64());
  ADD_FAILURE() << key << " is not an integer: " << json::serialize(value);
  return -1;
}

std::string text(const json::object& object, std::string_view key) {
  const json::value& value = field(object, key);
  if (value.is_string()) return std::string(value.as_string());
  ADD_FAILURE() << key << " is not a string: " << json::serialize(value);
  return {};
}

bool flag(const json::object& object, std::string_view key) {
  const json::value& value = field(object, key);
  if (value.is_bool()) return value.as_bool();
  ADD_FAILURE() << key << " is not a boolean: " << json::serialize(value);
  return false;
}

json::object object_at(const json::object& object, std::string_view key) {
  const json::value& value = field(object, key);
  if (value.is_object()) return value.as_object();
  ADD_FAILURE() << key << " is not an object: " << json::serialize(value);
  return {};
}

json::array array_at(const json::object& object, std::string_view key) {
  const json::value& value = field(object, key);
  if (value.is_array()) return value.as_array();
  ADD_FAILURE() << key << " is not an array: " << json::serialize(value);
  return {};
}

json::object as_object(const json::value& value) {
  if (value.is_object()) return value.as_object();
  ADD_FAILURE() << "not an object: " << json::serialize(value);
  return {};
}

// A JSON answer's body: one object on one line, then "\n".
json::object body_of(const Response& response) {
  EXPECT_EQ(response.content_type, "application/json");
  EXPECT_TRUE(response.body.ends_with('\n')) << response.body;
  EXPECT_EQ(response.body.find('\n'), response.body.size() - 1)
      << "not one line: " << response.body;
  boost::system::error_code error;
  const json::value value = json::parse(response.body, error);
  if (error || !value.is_object()) {
    ADD_FAILURE() << "not a JSON object: " << response.body;
    return {};
  }
  return value.as_object();
}

// {"error":{"code":...,"message":...}}: the code; the message must be there.
std::string error_code_of(const Response& response) {
  const json::object error = object_at(body_of(response), "error");
  EXPECT_EQ(error.size(), 2U) << json::serialize(error);
  EXPECT_FALSE(text(error, "message").empty());
  return text(error, "code");
}

std::string error_message_of(const Response& response) {
  return text(object_at(body_of(response), "error"), "message");
}

// --- jobs as the broker reports them

// 2026-11-24T08:00:00.000Z and 2026-11-22T05:56:13.065Z (docs/http-api.md's examples).
constexpr std::int64_t kDueMs = 1'795'507'200'000;
constexpr std::int64_t kCreatedMs = 1'795'326'973'065;

JobView sample_view() {
  JobView view;
  view.id = 7;
  view.tube = "emails";
  view.state = JobState::kDelayed;
  view.priority = 5;
  view.due_unix_ms = kDueMs;
  view.created_unix_ms = kCreatedMs;
  view.delay_ms = 180'226'935;
  view.ttr = std::chrono::seconds{300};
  view.counters = JobCounters{1, 2, 3, 4, 5};
  view.key = "welcome:42";
  view.group = "user:42";
  return view;
}

JobView reserved_view() {
  JobView view = sample_view();
  view.state = JobState::kReserved;
  view.deadline_unix_ms = kDueMs + 300'000;  // 2026-11-24T08:05:00.000Z
  view.key.clear();
  view.group.clear();
  return view;
}

broker::Job job_of(JobView view, std::string body) {
  return broker::Job{std::move(view), std::move(body), kCreatedMs, {}};
}

// Every field of sample_view() as the API writes it; no body, no reservation.
void expect_sample_job(const json::object& job) {
  EXPECT_EQ(number(job, "id"), 7);
  EXPECT_EQ(text(job, "tube"), "emails");
  EXPECT_EQ(text(job, "state"), "delayed");
  EXPECT_EQ(number(job, "priority"), 5);
  EXPECT_EQ(text(job, "due"), "2026-11-24T08:00:00.000Z");
  EXPECT_EQ(number(job, "due_unix_ms"), kDueMs);
  EXPECT_EQ(number(job, "delay_ms"), 180'226'935);
  EXPECT_EQ(number(job, "ttr_ms"), 300'000);
  EXPECT_EQ(text(job, "created"), "2026-11-22T05:56:13.065Z");
  EXPECT_EQ(text(job, "key"), "welcome:42");
  EXPECT_EQ(text(job, "group"), "user:42");
  const json::object counters = object_at(job, "counters");
  EXPECT_EQ(counters.size(), 5U);
  EXPECT_EQ(number(counters, "reserves"), 1);
  EXPECT_EQ(number(counters, "timeouts"), 2);
  EXPECT_EQ(number(counters, "releases"), 3);
  EXPECT_EQ(number(counters, "buries"), 4);
  EXPECT_EQ(number(counters, "kicks"), 5);
  EXPECT_FALSE(job.contains("reserved_until"));
  EXPECT_FALSE(job.contains("reserved_until_unix_ms"));
  EXPECT_FALSE(job.contains("body"));
  EXPECT_FALSE(job.contains("body_base64"));
  EXPECT_EQ(job.size(), 12U) << json::serialize(job);
}

void expect_sample_tube(const json::object& tube, std::string_view name) {
  EXPECT_EQ(text(tube, "name"), name);
  EXPECT_EQ(number(tube, "urgent"), 1);
  EXPECT_EQ(number(tube, "ready"), 2);
  EXPECT_EQ(number(tube, "reserved"), 3);
  EXPECT_EQ(number(tube, "delayed"), 4);
  EXPECT_EQ(number(tube, "buried"), 5);
  EXPECT_EQ(number(tube, "total_jobs"), 6);
  EXPECT_EQ(number(tube, "using"), 7);
  EXPECT_EQ(number(tube, "watching"), 8);
  EXPECT_EQ(number(tube, "waiting"), 9);
  EXPECT_EQ(number(tube, "deletes"), 10);
  EXPECT_EQ(number(tube, "pause_s"), 90);
  EXPECT_EQ(number(tube, "pause_left_ms"), 89'992);
  EXPECT_EQ(number(tube, "max_attempts"), 12);
  EXPECT_EQ(number(tube, "oldest_ready_age_ms"), 13'000);
  EXPECT_EQ(number(tube, "group_concurrency"), 14);
  EXPECT_EQ(tube.at("fair"), json::value(true));
  EXPECT_EQ(text(tube, "group_rate"), "15/1m");
  EXPECT_EQ(number(tube, "group_burst"), 16);
  EXPECT_EQ(number(tube, "groups_held"), 17);
  EXPECT_EQ(number(tube, "groups_ready"), 18);
  EXPECT_EQ(tube.at("group_weights"), json::value(json::object{{"vip", 19}}));
  EXPECT_EQ(tube.size(), 22U) << json::serialize(tube);
}

class ApiTest : public ::testing::Test {
 protected:
  static ApiOptions options() {
    ApiOptions options;
    options.max_job_bytes = kMaxJobBytes;
    options.version = "9.8.7";
    return options;
  }

  Exchange send(std::string_view method, std::string_view target, std::string_view body = "",
                const Api::Headers& headers = {}) {
    Exchange exchange;
    exchange.ticket = api_->handle(
        method, target, body,
        [responses = exchange.responses](Response response) {
          responses->push_back(std::move(response));
        },
        headers);
    return exchange;
  }
  // A request that must make exactly the broker call `call_text`, and wait for it.
  Exchange expect_call(std::string_view method, std::string_view target, std::string_view body,
                       std::string_view call_text) {
    const std::size_t before = fake_.call_count();
    Exchange exchange = send(method, target, body);
    EXPECT_EQ(fake_.call_count(), before + 1) << method << " " << target << " " << body;
    if (fake_.call_count() == before + 1) {
      EXPECT_EQ(fake_.last().text(), call_text) << method << " " << target << " " << body;
    }
    EXPECT_FALSE(exchange.answered()) << "answered before the broker completed";
    return exchange;
  }
  // A request that must be answered at once, with no broker call.
  Response expect_local(std::string_view method, std::string_view target,
                        std::string_view body = "") {
    const std::size_t before = fake_.call_count();
    const Exchange exchange = send(method, target, body);
    EXPECT_EQ(fake_.call_count(), before) << method << " " << target << " " << body;
    EXPECT_EQ(exchange.ticket, 0U);
    return exchange.response();
  }
  Call& last() { return fake_.last(); }
  std::uint64_t ops(std::string_view op, std::string_view result) {
    return static_cast<std::uint64_t>(counts_.ops(op, result));
  }

  metrics::Registry metrics_;
  ProtocolCounts counts_{metrics_, "http"};  // the Api's
  // The broker's histogram, as a broker registers it.
  metrics::Histogram& fire_lateness_ = broker::fire_lateness(metrics_);
  FakeBroker fake_;
  std::unique_ptr<Api> api_ = std::make_unique<Api>(fake_, metrics_, options());
};

// ---------------------------------------------------------------------------------------------
// The session, routing

TEST_F(ApiTest, OpensOneSessionThatWatchesNothing) {
  ASSERT_EQ(fake_.sessions_opened(), 1U);
  EXPECT_FALSE(fake_.options(0).watch_default);
  ASSERT_NE(fake_.session(0), nullptr);
  EXPECT_TRUE(fake_.session(0)->watched().empty());
  EXPECT_EQ(fake_.call_count(), 0U);
}

TEST_F(ApiTest, WithTokensEveryRouteButHealthWantsOneOfThem) {
  ApiOptions with_tokens = options();
  with_tokens.tokens = {"first-token", "second-token"};
  api_ = std::make_unique<Api>(fake_, metrics_, with_tokens);
  const auto send_with = [this](std::string_view target, std::string_view authorization) {
    Exchange exchange;
    exchange.ticket = api_->handle(
        "GET", target, "",
        [responses = exchange.responses](Response r) { responses->push_back(std::move(r)); },
        Api::Headers{.authorization = authorization});
    return exchange;
  };
  for (const char* wrong : {"", "Bearer", "Bearer ", "Bearer first-toke", "Bearer first-token ",
                            "Basic Zmlyc3QtdG9rZW4=", "first-token", "Bearer third-token"}) {
    SCOPED_TRACE(wrong);
    const std::size_t before = fake_.call_count();
    const Exchange refused = send_with("/v1/stats", wrong);
    ASSERT_TRUE(refused.answered());
    EXPECT_EQ(refused.response().status, 401U);
    EXPECT_EQ(refused.response().www_authenticate, "Bearer");
    EXPECT_EQ(error_code_of(refused.response()), "unauthorized");
    EXPECT_EQ(fake_.call_count(), before) << "a refused request reached the broker";
  }
  for (const char* right : {"Bearer first-token", "Bearer second-token", "bearer second-token"}) {
    SCOPED_TRACE(right);
    const std::size_t before = fake_.call_count();
    (void)send_with("/v1/stats", right);
    EXPECT_EQ(fake_.call_count(), before + 1);
  }
  EXPECT_EQ(send_with("/healthz", "").response().status, 200U);
  EXPECT_NE(send_with("/readyz", "").response().status, 401U);
  EXPECT_EQ(ops("stats", "401"), 8U);
}

// Without a token, nothing is told: not whether a path exists, nor which methods it takes.
TEST_F(ApiTest, WithTokensA401ComesBeforeAnythingElse) {
  ApiOptions with_tokens = options();
  with_tokens.tokens = {"the-token"};
  api_ = std::make_unique<Api>(fake_, metrics_, with_tokens);
  struct Case {
    const char* method;
    const char* target;
    unsigned with_token;
  };
  for (const Case& c : {Case{"GET", "/v1/nothing", 404}, Case{"DELETE", "/v1/tubes", 405},
                        Case{"PUT", "/healthz", 405}, Case{"GET", "/dashboard/missing.js", 404},
                        Case{"GET", "/v1/stats", 200}}) {
    SCOPED_TRACE(std::string(c.method) + " " + c.target);
    EXPECT_FALSE(api_->admits(c.method, c.target, ""));
    EXPECT_TRUE(api_->admits(c.method, c.target, "Bearer the-token"));
    const std::size_t before = fake_.call_count();
    Exchange refused;
    refused.ticket = api_->handle(
        c.method, c.target, "",
        [responses = refused.responses](Response r) { responses->push_back(std::move(r)); });
    ASSERT_TRUE(refused.answered());
    EXPECT_EQ(refused.response().status, 401U);
    EXPECT_EQ(fake_.call_count(), before);
    Exchange allowed;
    allowed.ticket = api_->handle(
        c.method, c.target, "",
        [responses = allowed.responses](Response r) { responses->push_back(std::move(r)); },
        Api::Headers{.authorization = "Bearer the-token"});
    if (c.with_token != 200) {
      EXPECT_EQ(allowed.response().status, c.with_token);
    }
  }
  for (const char* open : {"/healthz", "/readyz", "/", "/dashboard/app.js"}) {
    EXPECT_TRUE(api_->admits("GET", open, "")) << open;
  }
}

TEST_F(ApiTest, AnUnknownPathIs404NoRoute) {
  for (const char* target : {"/v1/nothing", "/v1/tubes/", "/v1/tubes/a%zz/jobs", "/v1/jobs/",
                             "/v1/jobs/1/2/3", "", "/v2/tubes"}) {
    SCOPED_TRACE(target);
    const Response response = expect_local("GET", target);
    EXPECT_EQ(response.status, 404U);
    EXPECT_EQ(error_code_of(response), "no_route");
    EXPECT_TRUE(response.allow.empty());
    EXPECT_TRUE(response.location.empty());
  }
  EXPECT_EQ(ops("unrouted", "404"), 7U);
}

TEST_F(ApiTest, ANoRouteMessageQuotingBytesThatAreNotUtf8StaysValidJson) {
  const Response response = expect_local("GET", "/v1/\xff\xfe");
  EXPECT_EQ(response.status, 404U);
  EXPECT_EQ(error_code_of(response), "no_route");
  EXPECT_EQ(error_message_of(response), "no such endpoint: /v1/??");
}

TEST_F(ApiTest, AKnownPathWithAnotherMethodIs405WithAllow) {
  struct Case {
    std::string_view method;
    std::string_view target;
    std::string_view allow;
  };
  for (const Case& c :
       {Case{"PUT", "/v1/jobs/7", "GET, HEAD, PATCH, DELETE"},
        Case{"PUT", "/v1/tubes/emails/jobs", "POST, GET, HEAD"},
        Case{"POST", "/v1/tubes/emails", "GET, HEAD, PATCH"}, Case{"GET", "/v1/reserve", "POST"},
        Case{"POST", "/v1/tubes/emails/keys/k", "GET, HEAD, PATCH, DELETE"},
        Case{"PATCH", "/v1/tubes/emails/groups/g", "GET, HEAD, DELETE"},
        Case{"POST", "/healthz", "GET, HEAD"}, Case{"DELETE", "/metrics", "GET, HEAD"},
        Case{"POST", "/", "GET, HEAD"}, Case{"PUT", "/dashboard/app.js", "GET, HEAD"},
        Case{"OPTIONS", "/v1/schedules/preview", "POST"},
        Case{"GET", "/v1/schedules/preview", "POST"}, Case{"PUT", "/v1/schedules/preview", "POST"},
        Case{"DELETE", "/v1/schedules/preview", "POST"}}) {
    SCOPED_TRACE(std::string(c.method) + " " + std::string(c.target));
    const Response response = expect_local(c.method, c.target);
    EXPECT_EQ(response.status, 405U);
    EXPECT_EQ(response.allow, c.allow);
    EXPECT_EQ(error_code_of(response), "method_not_allowed");
  }
  EXPECT_EQ(ops("unrouted", "405"), 14U);
}

TEST_F(ApiTest, ThePathsTubesKeysAndGroupsMustBeUtf8) {
  for (const auto& [method, target] :
       {std::pair{"POST", "/v1/tubes/%FF/jobs"}, std::pair{"GET", "/v1/tubes/emails/keys/%C3"},
        std::pair{"DELETE", "/v1/tubes/emails/groups/a%80b"}, std::pair{"GET", "/v1/tubes/%FE"}}) {
    SCOPED_TRACE(target);
    const Response response = expect_local(method, target, "{}");
    EXPECT_EQ(response.status, 400U);
    EXPECT_EQ(error_code_of(response), "bad_request");
  }
}

TEST_F(ApiTest, TheQueryStringIsIgnored) {
  expect_call("GET", "/v1/tubes?x=1", "", "list_tubes");
  expect_call("GET", "/v1/jobs/7?verbose", "", "peek id=7 with_body=true");
}

TEST_F(ApiTest, ErrorBuildsTheErrorObject) {
  const Response response = Api::error(413, "too_large", "the request body is too large");
  EXPECT_EQ(response.status, 413U);
  EXPECT_EQ(response.body,
            R"({"error":{"code":"too_large","message":"the request body is too large"}})"
            "\n");
  EXPECT_EQ(ops("unrouted", "413"), 0U);  // refused before routing: not counted
}

// ---------------------------------------------------------------------------------------------
// POST /v1/tubes/{tube}/jobs

TEST_F(ApiTest, PutPassesEveryFieldAndAnswers201WithLocation) {
  Exchange put = expect_call(
      "POST", "/v1/tubes/emails/jobs",
      R"({"body":"hi","delay":"2s","priority":5,"ttr":"90s","key":"k","group":"g","replace":true})",
      "put tube=emails pri=5 due=+2000ms ttr=90s body=hi key=k group=g replace");
  EXPECT_EQ(last().request<broker::PutRequest>().tube, "emails");
  EXPECT_EQ(put.ticket, 0U);
  last().complete(broker::PutResult{sample_view(), true, 0});
  const Response& response = put.response();
  EXPECT_EQ(response.status, 201U);
  EXPECT_EQ(response.location, "/v1/jobs/7");
  EXPECT_TRUE(response.reserved.empty());
  expect_sample_job(body_of(response));
  EXPECT_EQ(ops("put_job", "201"), 1U);
}

// POST /v1/jobs: a put per valid job, in their order; the answer, once the last completes
// (whatever the order the broker completes them in), has each job's entry in its place.
TEST_F(ApiTest, ABatchAnswersEachJobInItsPlaceWhateverOrderThePutsComplete) {
  const std::size_t before = fake_.call_count();
  const Exchange batch =
      send("POST", "/v1/jobs",
           R"({"jobs":[{"tube":"a","body":"1"},{"tube":"-bad"},{"tube":"b","delay":"2s"},)"
           R"({"tube":"c","key":"k"}]})");
  ASSERT_EQ(fake_.call_count(), before + 3) << "no put for the job with a bad tube name";
  EXPECT_EQ(fake_.call(before).text(), "put tube=a pri=1024 due=+0ms ttr=60s body=1");
  EXPECT_EQ(fake_.call(before + 1).text(), "put tube=b pri=1024 due=+2000ms ttr=60s body=");
  EXPECT_EQ(fake_.call(before + 2).text(), "put tube=c pri=1024 due=+0ms ttr=60s body= key=k");
  JobView held = sample_view();
  held.id = 9;
  fake_.call(before + 2).complete(broker::PutResult{held, false, 0});  // the key's holder
  fake_.call(before).fail(Status(Code::kConflict, "no"));
  EXPECT_FALSE(batch.answered()) << "answered before its last put completed";
  fake_.call(before + 1).complete(broker::PutResult{sample_view(), true, 0});
  const Response& response = batch.response();
  EXPECT_EQ(response.status, 200U);
  const json::array entries = field(body_of(response), "jobs").as_array();
  ASSERT_EQ(entries.size(), 4U);
  const std::vector<std::int64_t> statuses = {
      number(entries[0].as_object(), "status"), number(entries[1].as_object(), "status"),
      number(entries[2].as_object(), "status"), number(entries[3].as_object(), "status")};
  EXPECT_EQ(statuses, (std::vector<std::int64_t>{409, 400, 201, 200}));
  EXPECT_EQ(text(field(entries[0].as_object(), "error").as_object(), "code"), "conflict");
  EXPECT_EQ(number(field(entries[2].as_object(), "job").as_object(), "id"), 7);
  EXPECT_EQ(number(field(entries[3].as_object(), "job").as_object(), "id"), 9);
  EXPECT_EQ(ops("put_jobs", "200"), 1U);
  EXPECT_EQ(ops("put_job", "201"), 1U);
  EXPECT_EQ(ops("put_job", "200"), 1U);
  EXPECT_EQ(ops("put_job", "400"), 1U);
  EXPECT_EQ(ops("put_job", "409"), 1U);
}

// What would refuse every job refuses the batch, and nothing is put.
TEST_F(ApiTest, ABatchIsRefusedWholeWhileDrainingOrFullOrWithABadTraceContext) {
  const std::string body = R"({"jobs":[{"tube":"a"},{"tube":"b"}]})";
  fake_.set_draining(true);
  EXPECT_EQ(expect_local("POST", "/v1/jobs", body).status, 503U);
  fake_.set_draining(false);
  fake_.set_health(Status(Code::kNoSpace, "full"));
  EXPECT_EQ(expect_local("POST", "/v1/jobs", body).status, 507U);
  fake_.set_health(Status::ok());
  const std::size_t before = fake_.call_count();
  const Exchange bad = send("POST", "/v1/jobs", body, Api::Headers{.traceparent = "00-zz"});
  EXPECT_EQ(fake_.call_count(), before);
  EXPECT_EQ(bad.response().status, 400U);
  EXPECT_EQ(ops("put_jobs", "400"), 1U);
}

TEST_F(ApiTest, PutDefaultsToPriority1024ReadyAtOnceTtr60sAndAnEmptyBody) {
  expect_call("POST", "/v1/tubes/emails/jobs", "",
              "put tube=emails pri=1024 due=+0ms ttr=60s body=");
  expect_call("POST", "/v1/tubes/emails/jobs", "{}",
              "put tube=emails pri=1024 due=+0ms ttr=60s body=");
  expect_call("POST", "/v1/tubes/emails/jobs",
              R"({"body":null,"delay":null,"key":null,"replace":null})",
              "put tube=emails pri=1024 due=+0ms ttr=60s body=");
  expect_call("POST", "/v1/tubes/eu%2Forders/jobs", "{}",
              "put tube=eu/orders pri=1024 due=+0ms ttr=60s body=");
}

TEST_F(ApiTest, PutTakesAnAbsoluteTimeAsUnixMillisecondsOrRfc3339) {
  expect_call("POST", "/v1/tubes/emails/jobs", R"({"at":1795514400000})",
              "put tube=emails pri=1024 due=@1795514400000 ttr=60s body=");
  EXPECT_TRUE(last().request<broker::PutRequest>().due.absolute);
  expect_call("POST", "/v1/tubes/emails/jobs", R"({"at":"2026-11-24T10:00:00Z"})",
              "put tube=emails pri=1024 due=@1795514400000 ttr=60s body=");
  expect_call("POST", "/v1/tubes/emails/jobs", R"({"at":"2026-11-24T10:00:00.250+02:00"})",
              "put tube=emails pri=1024 due=@1795507200250 ttr=60s body=");
}

TEST_F(ApiTest, PutRoundsTheTtrUpToWholeSecondsAndAtLeastOne) {
  expect_call("POST", "/v1/tubes/t/jobs", R"({"ttr":"1500ms"})",
              "put tube=t pri=1024 due=+0ms ttr=2s body=");
  expect_call("POST", "/v1/tubes/t/jobs", R"({"ttr":1})",
              "put tube=t pri=1024 due=+0ms ttr=1s body=");
  expect_call("POST", "/v1/tubes/t/jobs", R"({"ttr":0})",
              "put tube=t pri=1024 due=+0ms ttr=1s body=");
  expect_call("POST", "/v1/tubes/t/jobs", R"({"ttr":"5m","delay":250,"priority":0})",
              "put tube=t pri=0 due=+250ms ttr=300s body=");
  expect_call("POST", "/v1/tubes/t/jobs", R"({"priority":4294967295})",
              "put tube=t pri=4294967295 due=+0ms ttr=60s body=");
}

TEST_F(ApiTest, PutDecodesBodyBase64) {
  expect_call("POST", "/v1/tubes/t/jobs", R"({"body_base64":"AP8BgA=="})",
              "put tube=t pri=1024 due=+0ms ttr=60s body=\\x00\\xff\\x01\\x80");
  EXPECT_EQ(last().request<broker::PutRequest>().body, "\0\xff\x01\x80"s);
}

TEST_F(ApiTest, PutWithATakenKeyAnswers200WithTheHolderAndItsLocation) {
  Exchange put = expect_call("POST", "/v1/tubes/emails/jobs", R"({"body":"again","key":"k"})",
                             "put tube=emails pri=1024 due=+0ms ttr=60s body=again key=k");
  last().complete(broker::PutResult{sample_view(), false, 0});
  EXPECT_EQ(put.response().status, 200U);
  EXPECT_EQ(put.response().location, "/v1/jobs/7");
  expect_sample_job(body_of(put.response()));
  EXPECT_EQ(ops("put_job", "200"), 1U);
}

TEST_F(ApiTest, PutWithAUrlAndAContentTypeAnswersWithThem) {
  Exchange put = expect_call(
      "POST", "/v1/tubes/calls/jobs",
      R"({"body":"{}","url":"https://example.com/own","content_type":"application/json"})",
      "put tube=calls pri=1024 due=+0ms ttr=60s body={} url=https://example.com/own "
      "type=application/json");
  last().complete(broker::PutResult{sample_view(), true, 0});
  const json::object job = body_of(put.response());
  EXPECT_EQ(text(job, "url"), "https://example.com/own");
  EXPECT_EQ(text(job, "content_type"), "application/json");

  Exchange held = expect_call(
      "POST", "/v1/tubes/calls/jobs", R"({"key":"k","url":"https://example.com/other"})",
      "put tube=calls pri=1024 due=+0ms ttr=60s body= key=k url=https://example.com/other");
  last().complete(broker::PutResult{sample_view(), false, 0});
  EXPECT_FALSE(body_of(held.response()).contains("url"))
      << "the key's holder answered with the URL of a put that did not happen";
}

TEST_F(ApiTest, APutsTraceContextHeadersGoWithTheJobAndComeBackWithIt) {
  constexpr std::string_view kParent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
  Exchange put = send("POST", "/v1/tubes/calls/jobs", R"({"body":"x"})",
                      {.traceparent = kParent, .tracestate = "vendor=a,other=b"});
  EXPECT_EQ(last().text(), "put tube=calls pri=1024 due=+0ms ttr=60s body=x traceparent=" +
                               std::string(kParent) + " tracestate=vendor=a,other=b");
  last().complete(broker::PutResult{sample_view(), true, 0});
  const json::object job = body_of(put.response());
  EXPECT_EQ(text(job, "traceparent"), kParent);
  EXPECT_EQ(text(job, "tracestate"), "vendor=a,other=b");

  Exchange get = expect_call("GET", "/v1/jobs/7", "", "peek id=7 with_body=true");
  broker::Job found{sample_view(), "x", 0, {}};
  found.delivery.traceparent = kParent;
  last().complete(found);
  EXPECT_EQ(text(body_of(get.response()), "traceparent"), kParent);
  EXPECT_FALSE(body_of(get.response()).contains("tracestate"));
}

TEST_F(ApiTest, PutRefusesABadBodyWith400BeforeAnyCall) {
  for (const char* body : {"{",
                           "[]",
                           "\"body\"",
                           "{\"body\":\"a\"} x",
                           R"({"dealy":1})",
                           R"({"delay":1,"at":2})",
                           R"({"body":"a","body_base64":"YQ=="})",
                           R"({"body_base64":"***"})",
                           R"({"body_base64":"YQ"})",
                           R"({"priority":4294967296})",
                           R"({"priority":-1})",
                           R"({"priority":1.0})",
                           R"({"delay":"soon"})",
                           R"({"delay":-5})",
                           R"({"ttr":1.5})",
                           R"({"replace":"yes"})",
                           R"({"key":5})",
                           R"({"body":7})",
                           R"({"at":"yesterday"})",
                           R"({"at":-1})"}) {
    SCOPED_TRACE(body);
    const Response response = expect_local("POST", "/v1/tubes/emails/jobs", body);
    EXPECT_EQ(response.status, 400U);
    EXPECT_EQ(error_code_of(response), "bad_request");
  }
  EXPECT_EQ(ops("put_job", "400"), 20U);
}

TEST_F(ApiTest, AnUnknownFieldIsNamedWithTheFieldsTheEndpointTakes) {
  const Response response = expect_local("POST", "/v1/tubes/emails/jobs", R"({"dealy":1})");
  EXPECT_EQ(error_message_of(response),
            "unknown field 'dealy' (this endpoint takes: body, body_base64, delay, at, priority, "
            "ttr, key, group, replace, debounce, max_wait, url, content_type)");
}

// The parser reads 1e999 as infinity: such a number is named as too large wherever it is, not
// taken for a field's value nor reported as a syntax error of a re-serialised part.
TEST_F(ApiTest, ANumberTooLargeForADoubleIsRefusedAsSuch) {
  for (const auto& [method, target, body] :
       {std::tuple{"POST", "/v1/tubes/emails/jobs", R"({"body":"a","delay":1e999})"},
        std::tuple{"PUT", "/v1/tubes/t/webhook",
                   R"({"url":"http://127.0.0.1:9/x","backoff":{"factor":1e999}})"},
        std::tuple{"PUT", "/v1/tubes/t/webhook", R"({"url":"http://127.0.0.1:9/x","rate":-1e999})"},
        std::tuple{"POST", "/v1/reserve", R"({"tubes":["t"],"x":[1e999]})"}}) {
    SCOPED_TRACE(body);
    const Response response = expect_local(method, target, body);
    EXPECT_EQ(response.status, 400U);
    EXPECT_EQ(error_message_of(response),
              "a number in the request is out of range (beyond 1.8e308)");
  }
}

// The parser reads a number too small for a double as 0: such a number is refused, not taken
// for a zero (a webhook's rate of 0 is "no limit"). A zero written as such is still a zero.
TEST_F(ApiTest, ANumberTooSmallForADoubleIsRefusedNotReadAsZero) {
  for (const std::string& body : std::vector<std::string>{
           R"({"url":"http://127.0.0.1:9/x","rate":1e-5000})",
           R"({"url":"http://127.0.0.1:9/x","rate":-2.5E-400})",
           R"({"url":"http://127.0.0.1:9/x","rate":0.)" + std::string(400, '0') + "1}"}) {
    SCOPED_TRACE(body);
    const Response response = expect_local("PUT", "/v1/tubes/t/webhook", body);
    EXPECT_EQ(response.status, 400U);
    EXPECT_EQ(
        error_message_of(response),
        "a number in the request is out of range (too small for a double: it would read as 0)");
  }
  for (const char* body :
       {R"({"url":"http://127.0.0.1:9/x","rate":0})",
        R"({"url":"http://127.0.0.1:9/x","rate":0.0e-5000,"headers":{"a":"1e-5000"}})"}) {
    SCOPED_TRACE(body);
    const std::size_t before = fake_.call_count();
    const Exchange exchange = send("PUT", "/v1/tubes/t/webhook", body);
    EXPECT_EQ(fake_.call_count(), before + 1) << "the webhook is set, with no limit";
    EXPECT_FALSE(exchange.answered()) << "refused at once";
  }
}

// A number that is not a duration or a time says what is wrong with it.
TEST_F(ApiTest, ANumberOutOfADurationsRangeSaysWhy) {
  for (const auto& [body, message] :
       {std::pair{R"({"delay":-5})", "delay: not negative"},
        std::pair{R"({"delay":1.5})", "delay: a whole number of milliseconds"},
        std::pair{R"({"ttr":1e30})", "ttr: at most 3153600000000 ms (100 years)"},
        std::pair{R"({"delay":3153600000001})", "delay: at most 3153600000000 ms (100 years)"},
        std::pair{R"({"delay":true})", "delay: a duration (\"48h\", \"1500ms\") or milliseconds"},
        std::pair{R"({"at":-1})", "at: not negative"},
        std::pair{R"({"at":253402300800000})",
                  "at: at most 253402300799999 (9999-12-31T23:59:59.999Z)"},
        std::pair{R"({"at":[]})", "at: an RFC 3339 time or Unix milliseconds"}}) {
    SCOPED_TRACE(body);
    EXPECT_EQ(error_message_of(expect_local("POST", "/v1/tubes/emails/jobs", body)), message);
  }
}

TEST_F(ApiTest, ABodyThatIsNotUtf8IsSaidToBeSo) {
  const Response response = expect_local("POST", "/v1/tubes/emails/jobs", "{\"body\":\"a\xff\"}");
  EXPECT_EQ(response.status, 400U);
  EXPECT_EQ(error_message_of(response), "the body is not JSON: it is not UTF-8");
  EXPECT_EQ(error_message_of(expect_local("POST", "/v1/tubes/emails/jobs", "{\"body\":")),
            "the body is not JSON: incomplete JSON");
  EXPECT_EQ(error_message_of(
                expect_local("POST", "/v1/tubes/emails/jobs", "\xEF\xBB\xBF{\"body\":\"a\"}")),
            "the body is not JSON: it starts with a byte order mark");
  for (const char* lone :
       {R"({"body":"\ud800"})", R"({"body":"a\udc00\ud800"})", R"({"body":"\uD800\u0041"})"}) {
    EXPECT_EQ(error_message_of(expect_local("POST", "/v1/tubes/emails/jobs", lone)),
              "the body is not JSON: a \\u escape of half a UTF-16 surrogate pair alone")
        << lone;
  }
  // A pair is no lone half: what else is wrong is said.
  EXPECT_EQ(error_message_of(
                expect_local("POST", "/v1/tubes/emails/jobs", R"({"body":"\ud83d\ude00\\")")),
            "the body is not JSON: incomplete JSON");
}

TEST_F(ApiTest, PutRefusesABodyOverTheLimitWith413) {
  const std::string limit(kMaxJobBytes, 'x');
  expect_call("POST", "/v1/tubes/t/jobs", R"({"body":")" + limit + R"("})",
              "put tube=t pri=1024 due=+0ms ttr=60s body=" + limit);
  Response response = expect_local("POST", "/v1/tubes/t/jobs", R"({"body":")" + limit + R"(x"})");
  EXPECT_EQ(response.status, 413U);
  EXPECT_EQ(error_code_of(response), "too_large");
  // The limit is on the decoded bytes: 17 bytes in base64.
  response =
      expect_local("POST", "/v1/tubes/t/jobs", R"({"body_base64":"eHh4eHh4eHh4eHh4eHh4eHg="})");
  EXPECT_EQ(response.status, 413U);
  EXPECT_EQ(error_code_of(response), "too_large");
  EXPECT_EQ(ops("put_job", "413"), 2U);
}

struct BrokerError {
  Code code;
  unsigned status;
  std::string_view error;
};

constexpr BrokerError kPutErrors[] = {
    {Code::kDraining, 503, "draining"},   {Code::kLimit, 503, "limit"},
    {Code::kConflict, 409, "conflict"},   {Code::kInvalidArgument, 400, "bad_request"},
    {Code::kNotFound, 404, "not_found"},  {Code::kIOError, 500, "internal"},
    {Code::kCorruption, 500, "internal"}, {Code::kNoSpace, 507, "no_space"},
};

TEST_F(ApiTest, PutAnswersEachBrokerErrorWithItsStatusCodeAndMessage) {
  for (const BrokerError& e : kPutErrors) {
    SCOPED_TRACE(code_name(e.code));
    Exchange put =
        expect_call("POST", "/v1/tubes/t/jobs", "{}", "put tube=t pri=1024 due=+0ms ttr=60s body=");
    last().fail(e.code, "what the broker said");
    EXPECT_EQ(put.response().status, e.status);
    EXPECT_EQ(error_code_of(put.response()), e.error);
    EXPECT_EQ(error_message_of(put.response()), "what the broker said");
    EXPECT_TRUE(put.response().location.empty());
  }
  EXPECT_EQ(ops("put_job", "503"), 2U);
  EXPECT_EQ(ops("put_job", "507"), 1U);
}

// ---------------------------------------------------------------------------------------------
// Jobs by id

TEST_F(ApiTest, GetJobAnswersTheJobWithItsBody) {
  Exchange get = expect_call("GET", "/v1/jobs/7", "", "peek id=7 with_body=true");
  last().complete(job_of(sample_view(), "send welcome mail"));
  EXPECT_EQ(get.response().status, 200U);
  json::object job = body_of(get.response());
  EXPECT_EQ(text(job, "body"), "send welcome mail");
  EXPECT_FALSE(job.contains("body_base64"));
  job.erase("body");
  expect_sample_job(job);
  EXPECT_EQ(ops("get_job", "200"), 1U);
}

TEST_F(ApiTest, GetJobWritesABodyThatIsNotUtf8AsBase64AndEscapesText) {
  Exchange binary = expect_call("GET", "/v1/jobs/007", "", "peek id=7 with_body=true");
  last().complete(job_of(sample_view(), "\0\xff\x01\x80"s));
  const json::object job = body_of(binary.response());
  EXPECT_EQ(text(job, "body_base64"), "AP8BgA==");
  EXPECT_FALSE(job.contains("body"));

  Exchange escaped = expect_call("GET", "/v1/jobs/8", "", "peek id=8 with_body=true");
  last().complete(job_of(sample_view(), "a\"b\\c\n\x01 é"));
  EXPECT_EQ(text(body_of(escaped.response()), "body"), "a\"b\\c\n\x01 é");
}

TEST_F(ApiTest, AJobAnswerIsExactlyTheseBytes) {
  Exchange get = expect_call("GET", "/v1/jobs/1", "", "peek id=1 with_body=true");
  JobView view;
  view.id = 1;
  view.tube = "default";
  view.priority = 1024;
  view.ttr = std::chrono::seconds{60};
  last().complete(job_of(view, "x"));
  EXPECT_EQ(get.response().body,
            R"({"id":1,"tube":"default","state":"ready","priority":1024,)"
            R"("due":"1970-01-01T00:00:00.000Z","due_unix_ms":0,"delay_ms":0,"ttr_ms":60000,)"
            R"("created":"1970-01-01T00:00:00.000Z",)"
            R"("counters":{"reserves":0,"timeouts":0,"releases":0,"buries":0,"kicks":0},)"
            R"("body":"x"})"
            "\n");
}

TEST_F(ApiTest, AReservedJobShowsReservedUntil) {
  Exchange get = expect_call("GET", "/v1/jobs/7", "", "peek id=7 with_body=true");
  last().complete(job_of(reserved_view(), ""));
  const json::object job = body_of(get.response());
  EXPECT_EQ(text(job, "state"), "reserved");
  EXPECT_EQ(text(job, "reserved_until"), "2026-11-24T08:05:00.000Z");
  EXPECT_EQ(number(job, "reserved_until_unix_ms"), kDueMs + 300'000);
  EXPECT_EQ(text(job, "body"), "");
  EXPECT_FALSE(job.contains("key"));
  EXPECT_FALSE(job.contains("group"));
}

TEST_F(ApiTest, ABadJobIdIs400WithoutACall) {
  for (const char* target :
       {"/v1/jobs/abc", "/v1/jobs/0", "/v1/jobs/-1", "/v1/jobs/+1", "/v1/jobs/18446744073709551616",
        "/v1/jobs/9223372036854775808", "/v1/jobs/1x", "/v1/jobs/%20"}) {
    SCOPED_TRACE(target);
    for (const char* method : {"GET", "DELETE"}) {
      const Response response = expect_local(method, target);
      EXPECT_EQ(response.status, 400U);
      EXPECT_EQ(error_code_of(response), "bad_request");
    }
    for (const char* action : {"/release", "/bury", "/touch", "/kick"}) {
      const Response response = expect_local("POST", std::string(target) + action);
      EXPECT_EQ(response.status, 400U);
      EXPECT_EQ(error_code_of(response), "bad_request");
    }
    const Response response = expect_local("PATCH", target, R"({"priority":1})");
    EXPECT_EQ(response.status, 400U);
  }
  expect_call("GET", "/v1/jobs/9223372036854775807", "",
              "peek id=9223372036854775807 with_body=true");
}

TEST_F(ApiTest, ABadTubeNameIs400WithoutACallOnEveryTubeRoute) {
  const std::string long_name(delayq::kDefaultMaxNameBytes + 1, 'a');
  for (const std::string& tube : {std::string("-x"), std::string("a%20b"), long_name}) {
    for (const auto& [method, rest] :
         std::initializer_list<std::pair<const char*, const char*>>{{"GET", ""},
                                                                    {"PATCH", ""},
                                                                    {"POST", "/jobs"},
                                                                    {"GET", "/jobs"},
                                                                    {"GET", "/due"},
                                                                    {"GET", "/keys/k"},
                                                                    {"DELETE", "/keys/k"},
                                                                    {"GET", "/groups/g"},
                                                                    {"DELETE", "/groups/g"},
                                                                    {"POST", "/kick"},
                                                                    {"POST", "/pause"},
                                                                    {"GET", "/webhook"},
                                                                    {"DELETE", "/webhook"}}) {
      const std::string target = "/v1/tubes/" + tube + rest;
      SCOPED_TRACE(std::string(method) + " " + target);
      const Response response = expect_local(method, target, "{}");
      EXPECT_EQ(response.status, 400U);
      EXPECT_EQ(error_code_of(response), "bad_request");
    }
  }
}

TEST_F(ApiTest, GetJobNotFoundIs404) {
  Exchange get = expect_call("GET", "/v1/jobs/99", "", "peek id=99 with_body=true");
  last().fail(Code::kNotFound, "no job 99");
  EXPECT_EQ(get.response().status, 404U);
  EXPECT_EQ(error_code_of(get.response()), "not_found");
  EXPECT_EQ(error_message_of(get.response()), "no job 99");
  EXPECT_EQ(ops("get_job", "404"), 1U);
}

TEST_F(ApiTest, GetJobWhoseBodyCannotBeReadIs500) {
  Exchange get = expect_call("GET", "/v1/jobs/7", "", "peek id=7 with_body=true");
  last().fail(Code::kIOError, "read failed");
  EXPECT_EQ(get.response().status, 500U);
  EXPECT_EQ(error_code_of(get.response()), "internal");
}

TEST_F(ApiTest, PatchJobReschedulesAndReprioritises) {
  Exchange patch = expect_call("PATCH", "/v1/jobs/7", R"({"delay":"1h","priority":100})",
                               "update id=7 due=+3600000ms pri=100");
  last().complete(sample_view());
  EXPECT_EQ(patch.response().status, 200U);
  expect_sample_job(body_of(patch.response()));

  expect_call("PATCH", "/v1/jobs/7", R"({"at":1795593600000})",
              "update id=7 due=@1795593600000 pri=keep");
  expect_call("PATCH", "/v1/jobs/7", R"({"at":"2026-11-25T08:00:00Z"})",
              "update id=7 due=@1795593600000 pri=keep");
  expect_call("PATCH", "/v1/jobs/7", R"({"priority":3})", "update id=7 due=keep pri=3");
  expect_call("PATCH", "/v1/jobs/7", R"({"delay":0})", "update id=7 due=+0ms pri=keep");
}

TEST_F(ApiTest, PatchJobRefusesNothingToChangeBothTimesAndUnknownFields) {
  for (const char* body : {"", "{}", R"({"delay":1,"at":1})", R"({"ttr":1})",
                           R"({"priority":"high"})", R"({"delay":null,"priority":null})"}) {
    SCOPED_TRACE(body);
    const Response response = expect_local("PATCH", "/v1/jobs/7", body);
    EXPECT_EQ(response.status, 400U);
    EXPECT_EQ(error_code_of(response), "bad_request");
  }
}

TEST_F(ApiTest, PatchJobAnswersConflictAndNotFound) {
  Exchange conflict =
      expect_call("PATCH", "/v1/jobs/7", R"({"delay":5})", "update id=7 due=+5ms pri=keep");
  last().fail(Code::kConflict, "job 7 is reserved");
  EXPECT_EQ(conflict.response().status, 409U);
  EXPECT_EQ(error_code_of(conflict.response()), "conflict");
  Exchange missing =
      expect_call("PATCH", "/v1/jobs/8", R"({"delay":5})", "update id=8 due=+5ms pri=keep");
  last().fail(Code::kNotFound);
  EXPECT_EQ(missing.response().status, 404U);
}

TEST_F(ApiTest, DeleteJobAnswersTheDeletedId) {
  Exchange erase = expect_call("DELETE", "/v1/jobs/3", "ignored body", "erase id=3");
  last().complete(JobId{3});
  EXPECT_EQ(erase.response().status, 200U);
  EXPECT_EQ(erase.response().body, "{\"deleted\":3}\n");
  EXPECT_EQ(erase.response().content_type, "application/json");

  Exchange conflict = expect_call("DELETE", "/v1/jobs/4", "", "erase id=4");
  last().fail(Code::kConflict);
  EXPECT_EQ(conflict.response().status, 409U);
  EXPECT_EQ(error_code_of(conflict.response()), "conflict");
  Exchange missing = expect_call("DELETE", "/v1/jobs/5", "", "erase id=5");
  last().fail(Code::kNotFound);
  EXPECT_EQ(missing.response().status, 404U);
  EXPECT_EQ(error_code_of(missing.response()), "not_found");
}

TEST_F(ApiTest, ReleaseJobPassesDelayAndPriority) {
  Exchange release = expect_call("POST", "/v1/jobs/3/release", R"({"delay":"10s","priority":5})",
                                 "release id=3 pri=5 delay=10000ms");
  EXPECT_FALSE(last().request<broker::ReleaseRequest>().reservation);
  last().complete(sample_view());
  EXPECT_EQ(release.response().status, 200U);
  expect_sample_job(body_of(release.response()));

  expect_call("POST", "/v1/jobs/3/release", "", "release id=3 pri=keep delay=0ms");
  Exchange conflict =
      expect_call("POST", "/v1/jobs/5/release", "{}", "release id=5 pri=keep delay=0ms");
  last().fail(Code::kConflict, "job 5 is not reserved over HTTP");
  EXPECT_EQ(conflict.response().status, 409U);
  EXPECT_EQ(error_message_of(conflict.response()), "job 5 is not reserved over HTTP");

  for (const char* body : {R"({"ttr":1})", R"({"delay":"x"})", R"({"priority":-2})", "nope"}) {
    SCOPED_TRACE(body);
    EXPECT_EQ(expect_local("POST", "/v1/jobs/3/release", body).status, 400U);
  }
}

TEST_F(ApiTest, BuryJobPassesItsPriority) {
  Exchange bury =
      expect_call("POST", "/v1/jobs/3/bury", R"({"priority":2000})", "bury id=3 pri=2000");
  last().complete(sample_view());
  EXPECT_EQ(bury.response().status, 200U);
  expect_sample_job(body_of(bury.response()));
  expect_call("POST", "/v1/jobs/3/bury", "", "bury id=3 pri=keep");
  EXPECT_EQ(expect_local("POST", "/v1/jobs/3/bury", R"({"delay":1})").status, 400U);
  Exchange conflict = expect_call("POST", "/v1/jobs/4/bury", "", "bury id=4 pri=keep");
  last().fail(Code::kConflict);
  EXPECT_EQ(conflict.response().status, 409U);
}

TEST_F(ApiTest, TouchJobTakesNoField) {
  Exchange touch = expect_call("POST", "/v1/jobs/3/touch", "", "touch id=3");
  last().complete(reserved_view());
  EXPECT_EQ(touch.response().status, 200U);
  EXPECT_EQ(text(body_of(touch.response()), "reserved_until"), "2026-11-24T08:05:00.000Z");
  expect_call("POST", "/v1/jobs/3/touch", "{}", "touch id=3");
  const Response refused = expect_local("POST", "/v1/jobs/3/touch", R"({"x":1})");
  EXPECT_EQ(refused.status, 400U);
  EXPECT_EQ(error_message_of(refused), "unknown field 'x' (this endpoint takes: nothing)");
  Exchange missing = expect_call("POST", "/v1/jobs/4/touch", "", "touch id=4");
  last().fail(Code::kNotFound);
  EXPECT_EQ(missing.response().status, 404U);
}

TEST_F(ApiTest, KickJobIgnoresAnyBody) {
  Exchange kick = expect_call("POST", "/v1/jobs/3/kick", "not JSON at all", "kick_job id=3");
  last().complete(sample_view());
  EXPECT_EQ(kick.response().status, 200U);
  expect_sample_job(body_of(kick.response()));
  Exchange conflict = expect_call("POST", "/v1/jobs/4/kick", "", "kick_job id=4");
  last().fail(Code::kConflict, "job 4 is ready");
  EXPECT_EQ(conflict.response().status, 409U);
  EXPECT_EQ(error_code_of(conflict.response()), "conflict");
}

// ---------------------------------------------------------------------------------------------
// Keys and groups

TEST_F(ApiTest, KeyRoutesNameTheJobByTubeAndPercentDecodedKey) {
  Exchange get = expect_call("GET", "/v1/tubes/emails/keys/welcome:42", "",
                             "peek tube=emails key=welcome:42 with_body=true");
  last().complete(job_of(sample_view(), "hello"));
  EXPECT_EQ(text(body_of(get.response()), "body"), "hello");
  EXPECT_EQ(ops("get_key", "200"), 1U);

  expect_call("GET", "/v1/tubes/eu%2Forders/keys/order%207", "",
              "peek tube=eu/orders key=order 7 with_body=true");
  Exchange patch = expect_call("PATCH", "/v1/tubes/emails/keys/k", R"({"delay":0})",
                               "update tube=emails key=k due=+0ms pri=keep");
  last().complete(sample_view());
  EXPECT_EQ(patch.response().status, 200U);
  EXPECT_EQ(expect_local("PATCH", "/v1/tubes/emails/keys/k", "{}").status, 400U);

  Exchange erase = expect_call("DELETE", "/v1/tubes/emails/keys/k", "", "erase tube=emails key=k");
  last().complete(JobId{7});
  EXPECT_EQ(erase.response().body, "{\"deleted\":7}\n");

  Exchange missing = expect_call("GET", "/v1/tubes/emails/keys/none", "",
                                 "peek tube=emails key=none with_body=true");
  last().fail(Code::kNotFound);
  EXPECT_EQ(missing.response().status, 404U);
  EXPECT_EQ(error_code_of(missing.response()), "not_found");
  Exchange conflict =
      expect_call("DELETE", "/v1/tubes/emails/keys/held", "", "erase tube=emails key=held");
  last().fail(Code::kConflict);
  EXPECT_EQ(conflict.response().status, 409U);
}

TEST_F(ApiTest, ListGroupAnswersItsJobsWithoutBodies) {
  Exchange list = expect_call("GET", "/v1/tubes/emails/groups/user:42", "",
                              "list_group tube=emails group=user:42");
  JobView second = sample_view();
  second.id = 9;
  last().complete(std::vector<JobView>{sample_view(), second});
  EXPECT_EQ(list.response().status, 200U);
  const json::object body = body_of(list.response());
  EXPECT_EQ(text(body, "tube"), "emails");
  EXPECT_EQ(text(body, "group"), "user:42");
  const json::array jobs = array_at(body, "jobs");
  ASSERT_EQ(jobs.size(), 2U);
  expect_sample_job(as_object(jobs[0]));
  EXPECT_EQ(number(as_object(jobs[1]), "id"), 9);
  EXPECT_EQ(body.size(), 3U);

  Exchange empty =
      expect_call("GET", "/v1/tubes/a/groups/g%22%5C", "", "list_group tube=a group=g\"\\");
  last().complete(std::vector<JobView>{});
  EXPECT_EQ(empty.response().body, R"({"tube":"a","group":"g\"\\","jobs":[]})"
                                   "\n");
  Exchange failed = expect_call("GET", "/v1/tubes/t/groups/g", "", "list_group tube=t group=g");
  last().fail(Code::kIOError);
  EXPECT_EQ(failed.response().status, 500U);
  EXPECT_EQ(error_code_of(failed.response()), "internal");
}

TEST_F(ApiTest, CancelGroupSaysHowManyWereCancelled) {
  Exchange cancel = expect_call("DELETE", "/v1/tubes/emails/groups/user:42", "",
                                "cancel_group tube=emails group=user:42");
  last().complete(std::size_t{2});
  EXPECT_EQ(cancel.response().status, 200U);
  const json::object body = body_of(cancel.response());
  EXPECT_EQ(text(body, "tube"), "emails");
  EXPECT_EQ(text(body, "group"), "user:42");
  EXPECT_EQ(number(body, "cancelled"), 2);
  EXPECT_EQ(body.size(), 3U);
  Exchange refused =
      expect_call("DELETE", "/v1/tubes/t/groups/g", "", "cancel_group tube=t group=g");
  last().fail(Code::kInvalidArgument, "bad tube");
  EXPECT_EQ(refused.response().status, 400U);
}

// ---------------------------------------------------------------------------------------------
// POST /v1/reserve

TEST_F(ApiTest, ReserveDefaultsToTubeDefaultAndNoWait) {
  Exchange reserve = expect_call("POST", "/v1/reserve", "", "reserve tubes=default timeout=0ms");
  const auto& request = last().request<broker::ReserveRequest>();
  EXPECT_EQ(request.tubes, std::vector<std::string>{"default"});
  ASSERT_TRUE(request.timeout.has_value());
  EXPECT_EQ(request.timeout->count(), 0);
  EXPECT_NE(reserve.ticket, 0U);
  EXPECT_EQ(reserve.ticket, last().ticket());
}

TEST_F(ApiTest, ReserveAnswersTheReservedJobWithItsBodyAndToken) {
  Exchange reserve =
      expect_call("POST", "/v1/reserve", R"({"tubes":["images","emails"],"timeout":"20s"})",
                  "reserve tubes=images,emails timeout=20000ms");
  JobView view = reserved_view();
  view.counters.reserves = 3;
  last().complete(job_of(view, "{\"image\":7}"));
  const Response& response = reserve.response();
  EXPECT_EQ(response.status, 200U);
  EXPECT_EQ(response.reserved, (std::vector<Reservation>{{7, 3}}));
  EXPECT_TRUE(response.location.empty());
  const json::object job = body_of(response);
  EXPECT_EQ(number(job, "id"), 7);
  EXPECT_EQ(text(job, "state"), "reserved");
  EXPECT_EQ(text(job, "reserved_until"), "2026-11-24T08:05:00.000Z");
  EXPECT_EQ(text(job, "body"), "{\"image\":7}");
  EXPECT_EQ(ops("reserve", "200"), 1U);
}

TEST_F(ApiTest, ReserveAnswers204WhenNothingCame) {
  Exchange reserve = expect_call("POST", "/v1/reserve", R"({"timeout":"1h"})",
                                 "reserve tubes=default timeout=3600000ms");
  last().fail(Code::kTimedOut);
  EXPECT_EQ(reserve.response().status, 204U);
  EXPECT_EQ(reserve.response().body, "");
  EXPECT_TRUE(reserve.response().reserved.empty());
  EXPECT_EQ(ops("reserve", "204"), 1U);
}

TEST_F(ApiTest, ReserveAnswersTheBrokersErrors) {
  Exchange bad_tube =
      expect_call("POST", "/v1/reserve", R"({"tubes":["-x"]})", "reserve tubes=-x timeout=0ms");
  last().fail(Code::kInvalidArgument, "bad tube name '-x'");
  EXPECT_EQ(bad_tube.response().status, 400U);
  EXPECT_EQ(error_code_of(bad_tube.response()), "bad_request");
  Exchange broken = expect_call("POST", "/v1/reserve", "", "reserve tubes=default timeout=0ms");
  last().fail(Code::kIOError, "body unreadable");
  EXPECT_EQ(broken.response().status, 500U);
  EXPECT_TRUE(broken.response().reserved.empty());
}

TEST_F(ApiTest, ReserveRefusesBadFieldsATimeoutOverAnHourAndACountOutside1To100) {
  for (const char* body : {R"({"timeout":3600001})", R"({"timeout":"2h"})", R"({"tubes":[]})",
                           R"({"tubes":"default"})", R"({"tubes":[1]})", R"({"wait":1})",
                           R"({"timeout":-1})", "{", R"({"count":0})", R"({"count":101})",
                           R"({"count":"2"})", R"({"count":2.5})", R"({"count":-1})"}) {
    SCOPED_TRACE(body);
    const Response response = expect_local("POST", "/v1/reserve", body);
    EXPECT_EQ(response.status, 400U);
    EXPECT_EQ(error_code_of(response), "bad_request");
  }
}

// With count: the first job as the reserve waits for it, then those ready at once (reserves
// that do not wait, of the same tubes), up to count; one answer with every job and reservation.
TEST_F(ApiTest, AReserveWithACountTakesTheJobsReadyOnceTheFirstCame) {
  Exchange reserve = expect_call("POST", "/v1/reserve",
                                 R"({"tubes":["images","emails"],"timeout":"20s","count":3})",
                                 "reserve tubes=images,emails timeout=20000ms");
  JobView first = reserved_view();
  first.counters.reserves = 3;
  last().complete(job_of(first, "a"));
  EXPECT_FALSE(reserve.answered());
  ASSERT_EQ(last().text(), "reserve tubes=images,emails timeout=0ms");
  JobView second = reserved_view();
  second.id = 8;
  second.counters.reserves = 1;
  last().complete(job_of(second, "b"));
  EXPECT_FALSE(reserve.answered());
  ASSERT_EQ(last().text(), "reserve tubes=images,emails timeout=0ms");
  last().fail(Code::kTimedOut);  // no third job ready
  const Response& response = reserve.response();
  EXPECT_EQ(response.status, 200U);
  EXPECT_EQ(response.reserved, (std::vector<Reservation>{{7, 3}, {8, 1}}));
  const json::array jobs = body_of(response).at("jobs").as_array();
  ASSERT_EQ(jobs.size(), 2U);
  EXPECT_EQ(number(jobs[0].as_object(), "id"), 7);
  EXPECT_EQ(text(jobs[0].as_object(), "body"), "a");
  EXPECT_EQ(number(jobs[1].as_object(), "id"), 8);
  EXPECT_EQ(text(jobs[1].as_object(), "state"), "reserved");
  EXPECT_EQ(ops("reserve", "200"), 1U);
}

TEST_F(ApiTest, AReserveWithACountStopsAtItsCountAndAnswers204WhenNothingCame) {
  Exchange two =
      expect_call("POST", "/v1/reserve", R"({"count":2})", "reserve tubes=default timeout=0ms");
  last().complete(job_of(reserved_view(), "a"));
  JobView second = reserved_view();
  second.id = 8;
  last().complete(job_of(second, "b"));
  const std::size_t calls = fake_.call_count();
  ASSERT_TRUE(two.answered());
  EXPECT_EQ(body_of(two.response()).at("jobs").as_array().size(), 2U);
  EXPECT_EQ(fake_.call_count(), calls) << "a third job was asked for";
  Exchange none = expect_call("POST", "/v1/reserve", R"({"count":5,"timeout":"1s"})",
                              "reserve tubes=default timeout=1000ms");
  last().fail(Code::kTimedOut);
  EXPECT_EQ(none.response().status, 204U);
  EXPECT_TRUE(none.response().reserved.empty());
}

// Its client went away (or the server stopped and answered it) while the list was being
// taken: nobody is answered, and every job taken goes back.
TEST_F(ApiTest, AReserveWithACountWhoseClientWentAwayGivesBackTheJobsTaken) {
  Exchange reserve = expect_call("POST", "/v1/reserve", R"({"count":3,"timeout":"30s"})",
                                 "reserve tubes=default timeout=30000ms");
  ASSERT_NE(reserve.ticket, 0U);
  last().complete(job_of(reserved_view(), "a"));  // reserves 1: reserved_view()'s counters
  ASSERT_EQ(last().text(), "reserve tubes=default timeout=0ms");
  api_->cancel(reserve.ticket);
  JobView second = reserved_view();
  second.id = 8;
  const std::size_t calls = fake_.call_count();
  last().complete(job_of(second, "b"));
  ASSERT_EQ(fake_.call_count(), calls + 2) << "each job taken is released";
  EXPECT_EQ(last().text(), "release id=8 pri=keep delay=0ms reservation=1");
  EXPECT_FALSE(reserve.answered());
  EXPECT_EQ(ops("reserve", "200"), 0U);
}

// The answer stops taking jobs once their bodies reach 1 MiB (the first is always in it).
TEST_F(ApiTest, AReserveWithACountStopsAtAMebibyteOfBodies) {
  Exchange reserve =
      expect_call("POST", "/v1/reserve", R"({"count":100})", "reserve tubes=default timeout=0ms");
  const std::size_t calls = fake_.call_count();
  last().complete(job_of(reserved_view(), std::string(std::size_t{1} << 20, 'x')));
  ASSERT_TRUE(reserve.answered());
  EXPECT_EQ(fake_.call_count(), calls);
  EXPECT_EQ(reserve.response().reserved.size(), 1U);
}

// An error after the first job ends the list: the jobs taken are reserved, and answered.
TEST_F(ApiTest, AReserveWithACountAnswersTheJobsTakenBeforeAnError) {
  Exchange reserve =
      expect_call("POST", "/v1/reserve", R"({"count":3})", "reserve tubes=default timeout=0ms");
  last().complete(job_of(reserved_view(), "a"));
  last().fail(Code::kIOError, "body unreadable");
  EXPECT_EQ(reserve.response().status, 200U);
  EXPECT_EQ(reserve.response().reserved.size(), 1U);
  EXPECT_EQ(body_of(reserve.response()).at("jobs").as_array().size(), 1U);
}

// Each tube a reserve names costs it: 1000 at most, a name given twice counted once (and asked
// of the broker once, where it came first).
TEST_F(ApiTest, AReserveNamesAtMostAThousandTubes) {
  const auto naming = [](std::size_t count) {
    json::array tubes;
    for (std::size_t i = 0; i < count; ++i) tubes.emplace_back("t" + std::to_string(i));
    return json::serialize(json::object{{"tubes", std::move(tubes)}});
  };
  const Response over = expect_local("POST", "/v1/reserve", naming(1001));
  EXPECT_EQ(over.status, 400U);
  EXPECT_NE(over.body.find("at most 1000"), std::string::npos) << over.body;
  const std::size_t before = fake_.call_count();
  (void)send("POST", "/v1/reserve", naming(1000));
  EXPECT_EQ(fake_.call_count(), before + 1);
  EXPECT_EQ(last().request<broker::ReserveRequest>().tubes.size(), 1000U);
  json::array repeated;
  for (std::size_t i = 0; i < 1001; ++i) repeated.emplace_back(i % 2 == 0 ? "even" : "odd");
  repeated.emplace_back("t1");
  (void)send("POST", "/v1/reserve", json::serialize(json::object{{"tubes", repeated}}));
  EXPECT_EQ(fake_.call_count(), before + 2);
  EXPECT_EQ(last().request<broker::ReserveRequest>().tubes,
            (std::vector<std::string>{"even", "odd", "t1"}));
}

// Its client went away: the wait ends in the broker and nobody is answered.
TEST_F(ApiTest, CancelEndsAWaitingReserveAndAnswersNobody) {
  Exchange reserve = expect_call("POST", "/v1/reserve", R"({"timeout":"30s"})",
                                 "reserve tubes=default timeout=30000ms");
  api_->cancel(reserve.ticket);
  EXPECT_EQ(fake_.cancelled(), std::vector<std::uint64_t>{reserve.ticket});
  EXPECT_TRUE(last().cancelled());
  EXPECT_EQ(fake_.poll(), 1U);  // the broker ends the wait with kTimedOut
  EXPECT_FALSE(reserve.answered());
  api_->cancel(reserve.ticket);  // a second cancel is a no-op
  EXPECT_EQ(fake_.cancelled().size(), 1U);
}

// docs/http-api.md, Metrics: "A long-poll counts when it answers; one whose client went away
// does not count." The server (server.cc Connection::close) calls Api::cancel(ticket) when the
// client goes away.
TEST_F(ApiTest, ALongPollWhoseClientWentAwayIsNotCounted) {
  Exchange reserve = expect_call("POST", "/v1/reserve", R"({"timeout":"30s"})",
                                 "reserve tubes=default timeout=30000ms");
  api_->cancel(reserve.ticket);
  fake_.poll();
  EXPECT_EQ(ops("reserve", "204"), 0U) << "a cancelled long-poll was counted";
}

TEST_F(ApiTest, UndeliverableReleasesThatReservationAtOnce) {
  api_->undeliverable({{7, 3}});
  ASSERT_EQ(fake_.call_count(), 1U);
  EXPECT_EQ(last().text(), "release id=7 pri=keep delay=0ms reservation=3");
  EXPECT_EQ(last().request<broker::ReleaseRequest>().reservation, std::optional<std::uint32_t>{3});
  last().fail(Code::kConflict, "in another reservation");  // nobody to tell
  api_->undeliverable({{8, 1}});
  last().complete(sample_view());
  const std::size_t before = fake_.call_count();
  api_->undeliverable({{9, 2}, {10, 1}});  // a list's answer: each job
  ASSERT_EQ(fake_.call_count(), before + 2);
  EXPECT_EQ(last().text(), "release id=10 pri=keep delay=0ms reservation=1");
  EXPECT_EQ(ops("release_job", "200"), 0U);
  EXPECT_EQ(ops("release_job", "409"), 0U);
}

// ---------------------------------------------------------------------------------------------
// Tubes

TEST_F(ApiTest, ListTubesAnswersEveryTube) {
  Webhook hook;
  hook.url = "https://example.test/hook";
  fake_.set_webhooks({{"emails", hook}});
  metrics::Counters& counted = metrics_.counters(kWebhookDeliveries, "Push deliveries.",
                                                 metrics::Kind::kCounter, {"tube", "outcome"});
  counted.add({"emails", "delivered"}, 2);
  counted.add({"emails", "buried"});
  counted.add({"other", "delivered"});
  Exchange list = expect_call("GET", "/v1/tubes", "", "list_tubes");
  last().complete(
      std::vector<TubeStats>{testing::sample_tube("default"), testing::sample_tube("emails")});
  EXPECT_EQ(list.response().status, 200U);
  const json::object body = body_of(list.response());
  EXPECT_EQ(body.size(), 1U);
  const json::array tubes = array_at(body, "tubes");
  ASSERT_EQ(tubes.size(), 2U);
  expect_sample_tube(as_object(tubes[0]), "default");
  json::object emails = as_object(tubes[1]);
  EXPECT_EQ(text(emails, "webhook_url"), "https://example.test/hook");
  const json::object deliveries = object_at(emails, "webhook_deliveries");
  EXPECT_EQ(number(deliveries, "delivered"), 2);
  EXPECT_EQ(number(deliveries, "buried"), 1);
  EXPECT_EQ(deliveries.size(), 2U);
  emails.erase("webhook_url");
  emails.erase("webhook_deliveries");
  expect_sample_tube(emails, "emails");
}

TEST_F(ApiTest, GetTubeAnswersTheTubeOr404) {
  Exchange get = expect_call("GET", "/v1/tubes/emails", "", "stats_tube tube=emails");
  last().complete(testing::sample_tube("emails"));
  EXPECT_EQ(get.response().status, 200U);
  expect_sample_tube(body_of(get.response()), "emails");
  Exchange missing = expect_call("GET", "/v1/tubes/none", "", "stats_tube tube=none");
  last().fail(Code::kNotFound, "no tube none");
  EXPECT_EQ(missing.response().status, 404U);
  EXPECT_EQ(error_code_of(missing.response()), "not_found");
}

TEST_F(ApiTest, KickTubeKicksUpToBoundDefaultOne) {
  Exchange kick =
      expect_call("POST", "/v1/tubes/images/kick", R"({"bound":10})", "kick tube=images bound=10");
  last().complete(std::size_t{3});
  EXPECT_EQ(kick.response().status, 200U);
  EXPECT_EQ(kick.response().body, "{\"tube\":\"images\",\"kicked\":3}\n");
  expect_call("POST", "/v1/tubes/images/kick", "", "kick tube=images bound=1");
  expect_call("POST", "/v1/tubes/images/kick", R"({"bound":0})", "kick tube=images bound=0");
  expect_call("POST", "/v1/tubes/images/kick", R"({"bound":4294967295})",
              "kick tube=images bound=4294967295");
  for (const char* body : {R"({"bound":4294967296})", R"({"bound":-1})", R"({"max":1})"}) {
    SCOPED_TRACE(body);
    EXPECT_EQ(expect_local("POST", "/v1/tubes/images/kick", body).status, 400U);
  }
}

TEST_F(ApiTest, PatchTubeSetsMaxAttempts) {
  Exchange patch = expect_call("PATCH", "/v1/tubes/emails", R"({"max_attempts":3})",
                               "set_max_attempts tube=emails n=3");
  last().complete(std::uint32_t{3});
  EXPECT_EQ(patch.response().status, 200U);
  EXPECT_EQ(patch.response().body, "{\"tube\":\"emails\",\"max_attempts\":3}\n");
  expect_call("PATCH", "/v1/tubes/emails", R"({"max_attempts":0})",
              "set_max_attempts tube=emails n=0");
  for (const char* body : {"", "{}", R"({"max_attempts":null})", R"({"max_attempts":-1})",
                           R"({"max_attempts":"3"})", R"({"attempts":3})"}) {
    SCOPED_TRACE(body);
    EXPECT_EQ(expect_local("PATCH", "/v1/tubes/emails", body).status, 400U);
  }
}

TEST_F(ApiTest, PatchTubeSetsFlowControlThenMaxAttempts) {
  Exchange patch = expect_call(
      "PATCH", "/v1/tubes/emails",
      R"({"group_concurrency":1,"fair":true,"group_rate":"10/s","group_burst":5,"max_attempts":2})",
      "set_flow tube=emails concurrency=1 fair=1 rate=10/1000ms burst=5");
  last().complete(FlowSettings{.group_concurrency = 1,
                               .fair = true,
                               .rate_jobs = 10,
                               .rate_period = std::chrono::milliseconds{1000},
                               .rate_burst = 5});
  EXPECT_EQ(last().text(), "set_max_attempts tube=emails n=2");
  last().complete(std::uint32_t{2});
  EXPECT_EQ(patch.response().status, 200U);
  EXPECT_EQ(patch.response().body,
            "{\"tube\":\"emails\",\"group_concurrency\":1,\"fair\":true,\"group_rate\":\"10/1s\","
            "\"group_burst\":5,\"group_weights\":{},\"max_attempts\":2}\n");
  expect_call("PATCH", "/v1/tubes/emails", R"({"group_weights":{"vip":4,"old":null}})",
              "set_flow tube=emails concurrency=0 fair=0 rate=0/1000ms burst=1 weight=old:1 "
              "weight=vip:4");
  // null turns a setting off; a rate of another period
  expect_call("PATCH", "/v1/tubes/emails", R"({"group_concurrency":null,"group_rate":"600/1m"})",
              "set_flow tube=emails concurrency=0 fair=0 rate=600/60000ms burst=1");
  // Elsewhere null counts as absent: it changes nothing, and alone it is no field.
  expect_call("PATCH", "/v1/tubes/emails", R"({"fair":null,"group_burst":null,"max_attempts":4})",
              "set_max_attempts tube=emails n=4");
  for (const char* body :
       {R"({"fair":null})", R"({"group_burst":null,"group_weights":null})",
        R"({"group_rate":"fast"})", R"({"group_rate":"0/s"})", R"({"group_rate":"10/0ms"})",
        R"({"group_burst":0})", R"({"fair":"yes"})", R"({"group_concurrency":-1})",
        R"({"group_weights":{"vip":0}})", R"({"group_weights":{"vip":1001}})",
        R"({"group_weights":["vip"]})"}) {
    SCOPED_TRACE(body);
    EXPECT_EQ(expect_local("PATCH", "/v1/tubes/emails", body).status, 400U);
  }
}

TEST_F(ApiTest, PauseTubeRoundsUpToWholeSeconds) {
  Exchange pause = expect_call("POST", "/v1/tubes/emails/pause", R"({"delay":"90s"})",
                               "pause_tube tube=emails pause=90s");
  last().complete(testing::sample_tube("emails"));
  EXPECT_EQ(pause.response().status, 200U);
  EXPECT_EQ(pause.response().body, "{\"tube\":\"emails\",\"pause_s\":90}\n");
  expect_call("POST", "/v1/tubes/emails/pause", R"({"delay":"1500ms"})",
              "pause_tube tube=emails pause=2s");
  expect_call("POST", "/v1/tubes/emails/pause", R"({"delay":0})",
              "pause_tube tube=emails pause=0s");
  for (const char* body : {"", "{}", R"({"delay":null})", R"({"delay":"1 h"})", R"({"for":1})"}) {
    SCOPED_TRACE(body);
    EXPECT_EQ(expect_local("POST", "/v1/tubes/emails/pause", body).status, 400U);
  }
  Exchange missing = expect_call("POST", "/v1/tubes/none/pause", R"({"delay":1000})",
                                 "pause_tube tube=none pause=1s");
  last().fail(Code::kNotFound);
  EXPECT_EQ(missing.response().status, 404U);
}

// ---------------------------------------------------------------------------------------------
// Administration

TEST_F(ApiTest, BackupPassesTheDirAndAnswersWhatWasCopied) {
  Exchange backup = expect_call("POST", "/v1/admin/backup", R"({"dir":"/var/backups/dq-1"})",
                                "backup dir=/var/backups/dq-1");
  last().complete(broker::BackupResult{"/var/backups/dq-1", 42, 123456, broker::Millis{1500}});
  EXPECT_EQ(backup.response().status, 200U);
  EXPECT_EQ(backup.response().body,
            R"({"dir":"/var/backups/dq-1","jobs":42,"bytes":123456,"took_ms":1500})"
            "\n");
  for (const char* body : {R"({"dir":7})", R"({"to":"/x"})"}) {
    SCOPED_TRACE(body);
    EXPECT_EQ(expect_local("POST", "/v1/admin/backup", body).status, 400U);
  }
  // No dir is the broker's to refuse (a Redis broker has no backup to offer: 501).
  for (const char* body : {"", "{}", R"({"dir":""})"}) {
    SCOPED_TRACE(body);
    Exchange empty = expect_call("POST", "/v1/admin/backup", body, "backup dir=");
    last().fail(Code::kNotSupported);
    EXPECT_EQ(empty.response().status, 501U);
  }
  // The broker's refusals: a bad directory, one backup at a time, a broker that cannot.
  const std::pair<Code, unsigned> refusals[] = {
      {Code::kInvalidArgument, 400U}, {Code::kConflict, 409U}, {Code::kNotSupported, 501U}};
  for (const auto& [code, status] : refusals) {
    Exchange refused = expect_call("POST", "/v1/admin/backup", R"({"dir":"/x"})", "backup dir=/x");
    last().fail(code);
    EXPECT_EQ(refused.response().status, status);
  }
}

// ---------------------------------------------------------------------------------------------
// The server

TEST_F(ApiTest, StatsAnswersTheServersCounts) {
  fake_.set_uptime(std::chrono::hours{1});
  Exchange stats = expect_call("GET", "/v1/stats", "", "stats");
  last().complete(testing::sample_server_stats());
  EXPECT_EQ(stats.response().status, 200U);
  const json::object body = body_of(stats.response());
  EXPECT_EQ(text(body, "version"), "9.8.7");
  EXPECT_EQ(text(body, "mode"), "local");
  EXPECT_EQ(number(body, "uptime_s"), 3600);
  EXPECT_FALSE(flag(body, "draining"));
  EXPECT_EQ(number(body, "urgent"), 1);
  EXPECT_EQ(number(body, "ready"), 2);
  EXPECT_EQ(number(body, "reserved"), 3);
  EXPECT_EQ(number(body, "delayed"), 4);
  EXPECT_EQ(number(body, "buried"), 5);
  EXPECT_EQ(number(body, "total_jobs"), 6);
  EXPECT_EQ(number(body, "job_timeouts"), 7);
  EXPECT_EQ(number(body, "tubes"), 8);
  EXPECT_EQ(number(body, "waiting"), 9);
  EXPECT_EQ(number(body, "next_id"), 10);
  EXPECT_EQ(number(body, "deletes"), 11);
  EXPECT_EQ(number(body, "buries"), 12);
  EXPECT_EQ(number(body, "fired"), 0);
  const json::object lateness = object_at(body, "fire_lateness");
  EXPECT_TRUE(field(lateness, "p99_ms").is_null()) << "nothing fired yet";
  EXPECT_EQ(array_at(lateness, "buckets").size(), fire_lateness_.bounds().size() + 1);
  EXPECT_EQ(number(object_at(body, "connections"), "http"), 0);
  EXPECT_EQ(text(object_at(body, "health"), "status"), "ok");
  EXPECT_EQ(body.size(), 20U) << json::serialize(body);

  fake_.set_draining(true);
  Exchange draining = expect_call("GET", "/v1/stats", "", "stats");
  last().complete(testing::sample_server_stats());
  EXPECT_TRUE(flag(body_of(draining.response()), "draining"));
}

TEST_F(ApiTest, StatsReportsFireLatenessPercentilesAndBuckets) {
  for (int i = 0; i < 98; ++i) fire_lateness_.observe(0.0007);  // 0.5 to 1 ms
  fire_lateness_.observe(0.003);                                // 2 to 5 ms
  fire_lateness_.observe(7);                                    // beyond the last bound, 5 s
  Exchange stats = expect_call("GET", "/v1/stats", "", "stats");
  last().complete(testing::sample_server_stats());
  const json::object body = body_of(stats.response());
  EXPECT_EQ(number(body, "fired"), 100);
  const json::object lateness = object_at(body, "fire_lateness");
  // The 50th of 98 in the 0.5-1 ms bucket: interpolated, as Prometheus does.
  EXPECT_NEAR(field(lateness, "p50_ms").to_number<double>(), 0.5 + 0.5 * 50 / 98, 1e-9);
  EXPECT_NEAR(field(lateness, "p99_ms").to_number<double>(), 5, 1e-9);  // in 2-5 ms, its top
  const json::array buckets = array_at(lateness, "buckets");
  EXPECT_EQ(number(as_object(buckets[1]), "jobs"), 98);
  EXPECT_NEAR(field(as_object(buckets[1]), "le_ms").to_number<double>(), 1, 1e-9);
  EXPECT_TRUE(field(as_object(buckets.back()), "le_ms").is_null());
  EXPECT_EQ(number(as_object(buckets.back()), "jobs"), 1);
  // Numbers as people write them, not Boost.JSON's 5E-1 and 1E0.
  const std::string& text = stats.response().body;
  EXPECT_NE(text.find(R"("buckets":[{"le_ms":0.5,"jobs":0},{"le_ms":1,"jobs":98})"),
            std::string::npos)
      << text;
  EXPECT_EQ(text.find("E-"), std::string::npos) << text;
}

TEST_F(ApiTest, DueCountsTakeEdgesFromNowOrInstantsAndAnswerEachBucket) {
  Exchange overview = expect_call("GET", "/v1/due", "",
                                  "due_counts tube= edges=+0,+60000,+3600000,+86400000,+604800000");
  broker::DueCounts counts;
  counts.as_of_unix_ms = 1'000'000;
  counts.edges_unix_ms = {960'000, 1'020'000};
  counts.jobs = {1, 2, 3};
  last().complete(counts);
  EXPECT_EQ(overview.response().status, 200U);
  const json::object body = body_of(overview.response());
  EXPECT_EQ(number(body, "as_of_unix_ms"), 1'000'000);
  EXPECT_EQ(number(body, "resolution_ms"), 60'000);
  EXPECT_EQ(number(body, "delayed"), 6);
  EXPECT_FALSE(body.contains("tube"));
  const json::array buckets = array_at(body, "buckets");
  ASSERT_EQ(buckets.size(), 3U);
  EXPECT_TRUE(field(as_object(buckets[0]), "from_unix_ms").is_null());
  EXPECT_EQ(number(as_object(buckets[0]), "to_unix_ms"), 960'000);
  EXPECT_EQ(number(as_object(buckets[1]), "from_unix_ms"), 960'000);
  EXPECT_EQ(number(as_object(buckets[1]), "jobs"), 2);
  EXPECT_TRUE(field(as_object(buckets[2]), "to_unix_ms").is_null());

  Exchange tube = expect_call("GET", "/v1/tubes/e%2Fmails/due?in=90s,1h30m", "",
                              "due_counts tube=e/mails edges=+90000,+5400000");
  last().complete(counts);
  EXPECT_EQ(text(body_of(tube.response()), "tube"), "e/mails");
  expect_call("GET", "/v1/due?at=1000,2026-11-24T10:00:00Z", "",
              "due_counts tube= edges=@1000,@1795514400000");
  Exchange missing =
      expect_call("GET", "/v1/tubes/none/due", "",
                  "due_counts tube=none edges=+0,+60000,+3600000,+86400000,+604800000");
  last().fail(Code::kNotFound, "no tube none");
  EXPECT_EQ(missing.response().status, 404U);
  Exchange redis = expect_call("GET", "/v1/due", "",
                               "due_counts tube= edges=+0,+60000,+3600000,+86400000,+604800000");
  last().fail(Code::kNotSupported, "not in Redis mode");
  EXPECT_EQ(redis.response().status, 501U);
}

TEST_F(ApiTest, DueCountsRefuseBadEdgesBeforeTheBroker) {
  std::string many = "/v1/due?at=";
  for (int i = 0; i <= 1000; ++i) many += std::to_string(i) + ",";
  many.pop_back();
  for (const std::string& target :
       {"/v1/due?in=1h&at=5"s, "/v1/due?in=soon"s, "/v1/due?at=yesterday"s, "/v1/due?every=1h"s,
        "/v1/due?at=-9223372036854775808"s, "/v1/due?at=253402300800000"s, "/v1/due?in=1h&in=2h"s,
        "/v1/due?in="s, "/v1/due?in=%zz"s, many}) {
    SCOPED_TRACE(target.substr(0, 60));
    const Response refused = expect_local("GET", target);
    EXPECT_EQ(refused.status, 400U);
    EXPECT_EQ(error_code_of(refused), "bad_request");
  }
}

TEST_F(ApiTest, ListJobsNamesAStateAndALimit) {
  Exchange list = expect_call("GET", "/v1/tubes/emails/jobs?state=delayed&limit=2", "",
                              "list_jobs tube=emails state=delayed limit=2");
  JobView second = sample_view();
  second.id = 9;
  last().complete(broker::JobList{{sample_view(), second}, false});
  EXPECT_EQ(list.response().status, 200U);
  const json::object body = body_of(list.response());
  const json::array jobs = array_at(body, "jobs");
  ASSERT_EQ(jobs.size(), 2U);
  expect_sample_job(as_object(jobs[0]));
  EXPECT_EQ(number(as_object(jobs[1]), "id"), 9);
  EXPECT_FALSE(flag(body, "complete"));
  expect_call("GET", "/v1/tubes/emails/jobs", "", "list_jobs tube=emails state=ready limit=20");
  last().complete(broker::JobList{});
  for (const char* target :
       {"/v1/tubes/e/jobs?state=gone", "/v1/tubes/e/jobs?limit=0", "/v1/tubes/e/jobs?limit=1001",
        "/v1/tubes/e/jobs?limit=x", "/v1/tubes/e/jobs?sort=id", "/v1/tubes/e/jobs?limit=%zz"}) {
    SCOPED_TRACE(target);
    EXPECT_EQ(expect_local("GET", target).status, 400U);
  }
  // A parameter given twice is refused by every endpoint that takes query parameters.
  for (const char* target : {"/v1/tubes/e/jobs?limit=2&limit=3", "/v1/schedules?limit=2&limit=3",
                             "/v1/schedules/s/next?count=2&count=3", "/v1/due?in=1h&in=2h"}) {
    SCOPED_TRACE(target);
    const Response response = expect_local("GET", target);
    EXPECT_EQ(response.status, 400U);
    EXPECT_TRUE(error_message_of(response).starts_with("query parameter '")) << response.body;
  }
}

TEST_F(ApiTest, TheDashboardIsServedWithoutATokenAndHoldsNoData) {
  ApiOptions with_tokens = options();
  with_tokens.tokens = {"first-token"};
  api_ = std::make_unique<Api>(fake_, metrics_, with_tokens);
  for (const auto& [target, type] :
       {std::pair{"/", "text/html; charset=utf-8"},
        std::pair{"/dashboard/app.js", "text/javascript; charset=utf-8"},
        std::pair{"/dashboard/style.css?v=1", "text/css; charset=utf-8"},
        std::pair{"/dashboard/chart.min.js", "text/javascript; charset=utf-8"}}) {
    SCOPED_TRACE(target);
    const Response page = expect_local("GET", target);
    EXPECT_EQ(page.status, 200U);
    EXPECT_EQ(page.content_type, type);
    EXPECT_FALSE(page.body.empty());
    EXPECT_NE(page.headers.find("Content-Security-Policy: default-src 'self'"), std::string::npos);
  }
  EXPECT_NE(expect_local("GET", "/").body.find("<title>delayq</title>"), std::string::npos);
  // Not a file of the dashboard: as any other request, 401 without the token.
  EXPECT_EQ(expect_local("GET", "/dashboard/missing.js").status, 401U);
  EXPECT_EQ(expect_local("GET", "/dashboard/").status, 401U);
  EXPECT_EQ(expect_local("POST", "/").status, 401U);
  EXPECT_EQ(ops("dashboard", "200"), 4U + 1U);
}

TEST_F(ApiTest, MetricsAsksForTheTubesThenTheStatsAndRendersThePage) {
  send("GET", "/healthz");  // counted, so it shows
  Exchange metrics = expect_call("GET", "/metrics", "", "list_tubes");
  TubeStats tube;
  tube.name = "emails";
  tube.ready = 3;
  tube.buried = 2;
  TubeStats flowing;
  flowing.name = "flowing";
  flowing.flow.group_concurrency = 1;
  flowing.groups_held = 4;
  flowing.groups_ready = 5;
  last().complete(std::vector<TubeStats>{tube, flowing});
  ASSERT_EQ(fake_.call_count(), 2U);
  EXPECT_EQ(last().text(), "stats");  // the second call, made by the first one's completion
  EXPECT_FALSE(metrics.answered());
  ServerStats server;
  server.next_id = 10;
  server.job_timeouts = 4;
  server.waiting = 1;
  last().complete(server);

  const Response& response = metrics.response();
  EXPECT_EQ(response.status, 200U);
  EXPECT_EQ(response.content_type, "text/plain; version=0.0.4; charset=utf-8");
  for (const char* line :
       {"# TYPE delayq_jobs gauge\n", "delayq_jobs{tube=\"emails\",state=\"ready\"} 3\n",
        "delayq_jobs{tube=\"emails\",state=\"buried\"} 2\n",
        "delayq_jobs{tube=\"emails\",state=\"delayed\"} 0\n", "delayq_jobs_created_total 9\n",
        "delayq_job_timeouts_total 4\n", "delayq_waiting_clients 1\n", "delayq_store_full 0\n",
        "delayq_tube_groups{tube=\"flowing\",state=\"held\"} 4\n",
        "delayq_tube_groups{tube=\"flowing\",state=\"ready\"} 5\n",
        "delayq_operations_total{protocol=\"http\",op=\"healthz\",result=\"200\"} "
        "1\n",
        "delayq_connections{protocol=\"http\"} 0\n"}) {
    EXPECT_NE(response.body.find(line), std::string::npos) << line << "in:\n" << response.body;
  }
  EXPECT_EQ(response.body.find("delayq_tube_groups{tube=\"emails\""), std::string::npos)
      << "a tube without flow control has no such series";
  EXPECT_EQ(ops("metrics", "200"), 1U);
}

TEST_F(ApiTest, MetricsAnswersAnErrorOfEitherCall) {
  Exchange first = expect_call("GET", "/metrics", "", "list_tubes");
  last().fail(Code::kIOError, "broken");
  EXPECT_EQ(first.response().status, 500U);
  EXPECT_EQ(error_code_of(first.response()), "internal");
  EXPECT_EQ(fake_.call_count(), 1U);  // no stats after a failed list

  Exchange second = expect_call("GET", "/metrics", "", "list_tubes");
  last().complete(std::vector<TubeStats>{});
  last().fail(Code::kIOError, "broken");
  EXPECT_EQ(second.response().status, 500U);
  EXPECT_EQ(error_code_of(second.response()), "internal");
}

TEST_F(ApiTest, HealthzIsOkAtOnce) {
  const Response response = expect_local("GET", "/healthz", "ignored");
  EXPECT_EQ(response.status, 200U);
  EXPECT_EQ(response.body, "{\"status\":\"ok\"}\n");
  EXPECT_EQ(response.content_type, "application/json");
  EXPECT_EQ(ops("healthz", "200"), 1U);
}

TEST_F(ApiTest, ReadyzSaysReadyDrainingShortOfSpaceOrUnavailable) {
  Response response = expect_local("GET", "/readyz");
  EXPECT_EQ(response.status, 200U);
  EXPECT_EQ(response.body, "{\"status\":\"ready\"}\n");

  fake_.set_draining(true);
  response = expect_local("GET", "/readyz");
  EXPECT_EQ(response.status, 503U);
  EXPECT_EQ(error_code_of(response), "draining");
  EXPECT_EQ(error_message_of(response), "the server is draining");

  fake_.set_draining(false);
  fake_.set_health(Status(Code::kIOError, "the store failed"));
  response = expect_local("GET", "/readyz");
  EXPECT_EQ(response.status, 503U);
  EXPECT_EQ(error_code_of(response), "unavailable");
  EXPECT_EQ(error_message_of(response), "the store failed");

  fake_.set_health(Status(Code::kNoSpace, "the disk is short of space"));
  response = expect_local("GET", "/readyz");
  EXPECT_EQ(response.status, 503U);
  EXPECT_EQ(error_code_of(response), "no_space");
  EXPECT_EQ(error_message_of(response), "the disk is short of space");
  EXPECT_EQ(ops("readyz", "503"), 3U);
  EXPECT_EQ(ops("readyz", "200"), 1U);
}

// ---------------------------------------------------------------------------------------------
// The Api's end, and answers in any order

TEST_F(ApiTest, AnswersComeInTheOrderTheBrokerCompletes) {
  Exchange first = expect_call("GET", "/v1/jobs/1", "", "peek id=1 with_body=true");
  Exchange second = expect_call("DELETE", "/v1/jobs/2", "", "erase id=2");
  fake_.call(1).complete(JobId{2});
  EXPECT_TRUE(second.answered());
  EXPECT_FALSE(first.answered());
  fake_.call(0).fail(Code::kNotFound);
  EXPECT_EQ(first.response().status, 404U);
}

TEST_F(ApiTest, DestroyingTheApiClosesItsSessionAndNoAnswerComesAfter) {
  Exchange reserve = expect_call("POST", "/v1/reserve", R"({"timeout":"1m"})",
                                 "reserve tubes=default timeout=60000ms");
  Exchange put =
      expect_call("POST", "/v1/tubes/t/jobs", "{}", "put tube=t pri=1024 due=+0ms ttr=60s body=");
  api_.reset();
  EXPECT_EQ(fake_.sessions_closed(), 1U);
  EXPECT_EQ(fake_.call(0).state(), Call::State::kDropped);
  EXPECT_EQ(fake_.call(1).state(), Call::State::kDropped);
  EXPECT_EQ(fake_.poll(), 0U);
  EXPECT_FALSE(reserve.answered());
  EXPECT_FALSE(put.answered());
}

}  // namespace
}  // namespace delayq::front::http
