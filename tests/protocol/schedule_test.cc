// schedule_test — recurring schedules through the real delayqd: every /v1/schedules route and its
// errors over HTTP, then kill -9 during the runs of a one-second schedule, again and again, with a
// worker taking every run (run_counter.h): none lost, none doubled.
#include <gtest/gtest.h>

#include <boost/json.hpp>
#include <cstdlib>
#include <map>
#include <random>
#include <set>
#include <string>
#include <thread>

#include "front/http/client.h"
#include "run_counter.h"
#include "server_process.h"

namespace delayq::testing {
namespace {

namespace json = boost::json;
using front::http::ClientResponse;

std::int64_t unix_ms_now() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

class ScheduleTest : public ::testing::Test {
 protected:
  void SetUp() override {
    server_ = std::make_unique<ServerProcess>(dir_.path() / "db");
    ASSERT_EQ(server_->start(), "");
    connect();
  }
  void connect() {
    http_ = std::make_unique<front::http::Client>("127.0.0.1", server_->http_port());
  }
  // The JSON answer of a call that must answer `status`.
  json::object expect(unsigned status, std::string_view method, const std::string& target,
                      std::string_view body = {}) {
    auto response = http_->request(method, target, body, kReplyTimeout);
    EXPECT_TRUE(response.is_ok()) << method << " " << target << ": "
                                  << response.status().to_string();
    if (!response.is_ok()) return {};
    EXPECT_EQ(response.value().status, status)
        << method << " " << target << " " << body << " -> " << response.value().body;
    boost::system::error_code error;
    json::value value = json::parse(response.value().body, error);
    if (error || !value.is_object()) return {};
    return value.as_object();
  }
  std::string error_message(unsigned status, std::string_view method, const std::string& target,
                            std::string_view body) {
    const json::object o = expect(status, method, target, body);
    const json::value* e = o.if_contains("error");
    return e != nullptr && e->is_object() ? std::string(e->as_object().at("message").as_string())
                                          : "<no error>";
  }

  TempDir dir_;
  std::unique_ptr<ServerProcess> server_;
  std::unique_ptr<front::http::Client> http_;
};

std::int64_t number(const json::object& o, std::string_view field) {
  const json::value* v = o.if_contains(field);
  return v != nullptr && v->is_number() ? v->to_number<std::int64_t>() : -1;
}

TEST_F(ScheduleTest, EveryRouteAndItsErrors) {
  // Created: 201 with its next run in its zone; replaced: 200.
  const std::string daily =
      R"({"tube":"reports","cron":"30 2 * * *","tz":"America/New_York","body":"report",)"
      R"("start_at":"2026-03-07T00:00:00Z"})";
  json::object made = expect(201, "PUT", "/v1/schedules/daily", daily);
  EXPECT_EQ(made["tz"], "America/New_York");
  EXPECT_EQ(made["misfire"], "once");
  EXPECT_EQ(made["overlap"], "allow");
  ASSERT_TRUE(made["next"].is_object());
  expect(200, "PUT", "/v1/schedules/daily", daily);
  // The next runs after a moment: 02:30 does not exist on 8 March 2026 in New York, so that
  // day's run is at 03:00 EDT.
  json::object next =
      expect(200, "GET", "/v1/schedules/daily/next?count=3&after=2026-03-07T00:00:00Z");
  const json::array& runs = next["runs"].as_array();
  ASSERT_EQ(runs.size(), 3U);
  EXPECT_EQ(runs[0].as_object().at("at"), "2026-03-07T02:30:00.000-05:00");
  EXPECT_EQ(runs[1].as_object().at("at"), "2026-03-08T03:00:00.000-04:00");
  EXPECT_EQ(runs[2].as_object().at("at"), "2026-03-09T02:30:00.000-04:00");
  // A preview of a definition never stored.
  json::object preview =
      expect(200, "POST", "/v1/schedules/preview",
             R"({"tube":"t","every":"90s","start_at":1800000000000,"count":2,"after":0})");
  ASSERT_EQ(preview["runs"].as_array().size(), 2U);
  EXPECT_EQ(number(preview["runs"].as_array()[1].as_object(), "unix_ms"), 1800000090000);
  // Errors name the field.
  EXPECT_TRUE(error_message(400, "PUT", "/v1/schedules/bad", R"({"tube":"t","cron":"0 9 32 * *"})")
                  .starts_with("cron"));
  EXPECT_TRUE(error_message(400, "PUT", "/v1/schedules/bad",
                            R"({"tube":"t","cron":"0 9 * * *","tz":"Nowhere/Land"})")
                  .starts_with("tz"));
  EXPECT_TRUE(error_message(400, "PUT", "/v1/schedules/bad", R"({"cron":"0 9 * * *"})")
                  .starts_with("tube"));
  EXPECT_TRUE(error_message(400, "PUT", "/v1/schedules/bad",
                            R"({"tube":"t","cron":"0 9 * * *","every":"1m"})")
                  .starts_with("cron, every"));
  EXPECT_TRUE(error_message(400, "PUT", "/v1/schedules/bad",
                            R"({"tube":"t","every":"1m","overlap":"sometimes"})")
                  .starts_with("overlap"));
  EXPECT_EQ(
      error_message(400, "PUT", "/v1/schedules/bad", R"({"tube":"t","every":"1m","limit":0})"),
      "limit: an integer from 1 to 4294967295");
  for (const char* zero : {R"("0s")", "0"}) {
    EXPECT_EQ(error_message(400, "PUT", "/v1/schedules/bad",
                            std::string(R"({"tube":"t","every":)") + zero + "}"),
              "every: the interval must be at least 1s")
        << "an interval of 0 given";
  }
  EXPECT_EQ(
      error_message(400, "PUT", "/v1/schedules/bad", R"({"tube":"t","cron":"","every":"1h"})"),
      "cron: an empty expression");
  // Over its limit (one of 64 KiB stopped the server as it stored it), or with a line break.
  std::string long_list = "0";
  for (int i = 0; i < 32768; ++i) long_list += ",0";
  for (const std::string& cron : {long_list + " * * * *", std::string(R"(* * * * *\n)")}) {
    EXPECT_EQ(
        error_message(400, "PUT", "/v1/schedules/bad", R"({"tube":"t","cron":")" + cron + R"("})"),
        "cron: at most 1024 bytes of printable ASCII (fields apart by spaces or tabs)");
  }
  // The preview's path: no schedule can have it as its name.
  EXPECT_EQ(error_message(405, "PUT", "/v1/schedules/preview", R"({"tube":"t","every":"1h"})"),
            "PUT is not allowed on /v1/schedules/preview (allowed: POST)");
  error_message(404, "GET", "/v1/schedules/bad", "");
  // Listed by name; paused and resumed; one run now; past runs backfilled; deleted.
  expect(201, "PUT", "/v1/schedules/minutely",
         R"({"tube":"m","every":"1m","start_at":"2026-01-01T00:00:00Z"})");
  json::object listed = expect(200, "GET", "/v1/schedules?limit=1");
  ASSERT_EQ(listed["schedules"].as_array().size(), 1U);
  EXPECT_EQ(listed["schedules"].as_array()[0].as_object().at("name"), "daily");
  EXPECT_EQ(listed["more"], true);
  // They take no fields: one given is a typo, refused before anything changes.
  for (const char* action : {"pause", "resume", "trigger"}) {
    EXPECT_TRUE(error_message(400, "POST", std::string("/v1/schedules/minutely/") + action,
                              R"({"paused":true})")
                    .starts_with("unknown field 'paused'"))
        << action;
  }
  EXPECT_EQ(expect(200, "GET", "/v1/schedules/minutely")["paused"], false);
  json::object paused = expect(200, "POST", "/v1/schedules/minutely/pause");
  EXPECT_EQ(paused["paused"], true);
  EXPECT_TRUE(paused["next"].is_null());
  json::object resumed = expect(200, "POST", "/v1/schedules/minutely/resume");
  EXPECT_TRUE(resumed["next"].is_object());
  json::object run = expect(201, "POST", "/v1/schedules/minutely/trigger");
  EXPECT_EQ(run["state"], "ready");
  EXPECT_TRUE(std::string(run["key"].as_string()).starts_with("minutely@"));
  json::object filled = expect(200, "POST", "/v1/schedules/minutely/backfill",
                               R"({"from":"2026-01-01T00:00:00Z","to":"2026-01-01T00:02:00Z"})");
  ASSERT_EQ(filled["jobs"].as_array().size(), 3U);
  const json::object& third = filled["jobs"].as_array()[2].as_object();
  EXPECT_EQ(third.at("key"), "minutely@1767225720000");
  EXPECT_EQ(third.at("schedule").as_object().at("name"), "minutely");
  EXPECT_EQ(third.at("schedule").as_object().at("instant"), "2026-01-01T00:02:00.000Z");
  // A future instant is not backfilled: put now, it would run again when it comes.
  EXPECT_TRUE(error_message(400, "POST", "/v1/schedules/minutely/backfill",
                            R"({"from":"2026-01-01T00:00:00Z","to":"2100-01-01T00:00:00Z"})")
                  .starts_with("to: in the future"));
  expect(200, "DELETE", "/v1/schedules/minutely");
  error_message(404, "DELETE", "/v1/schedules/minutely", "");
  // An interval without start_at first runs one interval after it is set: that run is shown as
  // its start_at, and nothing earlier is listed. An end before that run is refused, as an end
  // before a start_at given is (accepted, the schedule vanished at the next restart).
  const auto set_at = unix_ms_now();
  json::object hourly = expect(201, "PUT", "/v1/schedules/hourly", R"({"tube":"h","every":"1h"})");
  const auto first = hourly["start_at"].as_object().at("unix_ms").to_number<std::int64_t>();
  EXPECT_EQ(hourly["next"].as_object().at("unix_ms").to_number<std::int64_t>(), first)
      << json::serialize(hourly);
  EXPECT_GE(first, set_at + 3600000);
  EXPECT_LE(first, unix_ms_now() + 3600000);
  json::object ahead = expect(200, "GET", "/v1/schedules/hourly/next?after=0&count=1", "");
  EXPECT_EQ(ahead["runs"].as_array().at(0).as_object().at("unix_ms").to_number<std::int64_t>(),
            first)
      << json::serialize(ahead);
  EXPECT_EQ(error_message(400, "PUT", "/v1/schedules/ended",
                          R"({"tube":"t","every":"1h","end_at":"2020-01-01T00:00:00Z"})"),
            "end_at: before the first run (one interval from now, as start_at is not given)");
}

TEST_F(ScheduleTest, Kill9DuringRunsLosesNoRunAndDoublesNone) {
  // A TTR of 2 s: in Redis mode a run reserved when its node died comes back when its TTR
  // lapses (not at the restart), within the drain below.
  expect(201, "PUT", "/v1/schedules/tick",
         R"({"tube":"ticks","every":"1s","ttr":2,"misfire":"all","max_lateness":"1h"})");
  const std::uint64_t seed = std::random_device{}();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 random(seed);
  RunCounter worker{.tube = "ticks"};
  constexpr int kKills = 3;
  for (int round = 0; round <= kKills; ++round) {
    // Work for 1.5 to 3 s, then kill -9 (not after the last round) and start again.
    const auto until = Clock::now() + Millis{1500 + static_cast<std::int64_t>(random() % 1500)};
    while (Clock::now() < until) {
      if (!worker.take(*http_)) break;
    }
    if (round == kKills) break;
    ASSERT_EQ(server_->kill9(), "killed by signal 9");
    ASSERT_EQ(server_->start(), "");
    connect();
  }
  worker.drain(*http_);
  worker.check(6);
  const json::object tick = expect(200, "GET", "/v1/schedules/tick");
  EXPECT_EQ(number(tick, "misfires"), 0);
}

}  // namespace
}  // namespace delayq::testing
