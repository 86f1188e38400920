// webhook_test.cc — push delivery against the real delayqd (tests/protocol/server_process.h):
// a tube's webhook set, read and removed over the HTTP API, and its due jobs POSTed to a
// receiver that runs inside the test (a small HTTP/1.1 server on 127.0.0.1, one thread per
// connection, answering from a script the test gives; over TLS too, with a self-signed
// certificate the `openssl` command makes). Checked: the request's headers and body, never
// before the due time; 2xx deletes; backoff, Retry-After and timeouts between attempts; dead
// letters after max_attempts; signatures; the rate and concurrency limits; one slow receiver not
// holding up another tube; a per-job URL; the webhook across a restart; no job lost across
// kill -9 during deliveries; and HTTPS: delivered when --webhook-ca-file trusts the certificate,
// never sent when it is not trusted or names another host, SNI for names only. Timings are asserted
// only as far as the rules make them exact ("not before", "at least half the backoff"); upper
// bounds are generous, for loaded machines. The rules are stated in docs/webhooks.md.
#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/ssl.h>
#include <poll.h>
#include <pthread.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <boost/json.hpp>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <condition_variable>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <iterator>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "front/http/client.h"
#include "server_process.h"
#include "support/webhook_receiver.h"

namespace delayq::testing {
namespace {

namespace json = boost::json;
using front::http::ClientResponse;

// How long a test waits for deliveries that should come well within it.
constexpr Millis kDeliveryWait{10000};
// Due times are whole milliseconds, so a release for N ms may fall due up to 1 ms short of N ms
// after the answer that caused it. Lower bounds on gaps between attempts allow for that.
constexpr std::int64_t kRoundingMs = 1;

std::int64_t unix_us(WallClock::time_point t) {
  return std::chrono::duration_cast<std::chrono::microseconds>(t.time_since_epoch()).count();
}
// Milliseconds between two requests' arrivals on the wall clock, the clock a retry's due time
// is kept on (server_process.h, WallClock).
std::int64_t wall_gap_ms(const Received& from, const Received& to) {
  return (unix_us(to.arrived_wall) - unix_us(from.arrived_wall)) / 1000;
}
std::int64_t now_unix_ms() {
  return std::chrono::duration_cast<Millis>(WallClock::now().time_since_epoch()).count();
}

// A port on 127.0.0.1 that nothing listens on (bound for a moment, then released).
std::uint16_t closed_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = 0;
  ::inet_pton(AF_INET, "127.0.0.1", &address.sin_addr);
  socklen_t length = sizeof address;
  if (fd < 0 || ::bind(fd, reinterpret_cast<const sockaddr*>(&address), sizeof address) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
    std::perror("closed_port");
    std::abort();
  }
  ::close(fd);
  return ntohs(address.sin_port);
}

// --- what the requests carry

// "2026-11-25T14:00:00.123Z" as Unix milliseconds; nullopt if it is not exactly that shape.
std::optional<std::int64_t> parse_rfc3339_ms(std::string_view text) {
  if (text.size() != 24 || text[4] != '-' || text[7] != '-' || text[10] != 'T' || text[13] != ':' ||
      text[16] != ':' || text[19] != '.' || text[23] != 'Z') {
    return std::nullopt;
  }
  bool ok = true;
  const auto number = [&](std::size_t at, std::size_t size) {
    int value = 0;
    const auto [end, error] = std::from_chars(text.data() + at, text.data() + at + size, value);
    ok = ok && error == std::errc{} && end == text.data() + at + size;
    return value;
  };
  const std::chrono::year_month_day date{std::chrono::year{number(0, 4)},
                                         std::chrono::month{static_cast<unsigned>(number(5, 2))},
                                         std::chrono::day{static_cast<unsigned>(number(8, 2))}};
  const int h = number(11, 2);
  const int m = number(14, 2);
  const int s = number(17, 2);
  const int ms = number(20, 3);
  if (!ok || !date.ok() || h > 23 || m > 59 || s > 59) return std::nullopt;
  const auto at = std::chrono::sys_days{date} + std::chrono::hours{h} + std::chrono::minutes{m} +
                  std::chrono::seconds{s} + Millis{ms};
  return std::chrono::duration_cast<Millis>(at.time_since_epoch()).count();
}

// A duration as the API writes it ("10s", "250ms", "1h30m", or digits of milliseconds) in
// milliseconds; nullopt if it is none of these. Compared by value, so "1h" and "3600s" agree.
std::optional<std::int64_t> duration_ms(const json::value& value) {
  if (value.is_int64()) return value.as_int64();
  if (value.is_uint64()) return static_cast<std::int64_t>(value.as_uint64());
  if (!value.is_string()) return std::nullopt;
  const std::string_view text = value.as_string();
  if (text.empty()) return std::nullopt;
  double total = 0;
  std::size_t at = 0;
  while (at < text.size()) {
    std::size_t end = at;
    while (end < text.size() &&
           (std::isdigit(static_cast<unsigned char>(text[end])) != 0 || text[end] == '.')) {
      ++end;
    }
    if (end == at) return std::nullopt;
    const double number = std::strtod(std::string(text.substr(at, end - at)).c_str(), nullptr);
    std::size_t unit_end = end;
    while (unit_end < text.size() &&
           std::isalpha(static_cast<unsigned char>(text[unit_end])) != 0) {
      ++unit_end;
    }
    const std::string_view unit = text.substr(end, unit_end - end);
    static const std::map<std::string_view, double> kUnitMs = {
        {"d", 86400000.0}, {"h", 3600000.0}, {"m", 60000.0}, {"s", 1000.0}, {"ms", 1.0}, {"", 1.0}};
    const auto it = kUnitMs.find(unit);
    if (it == kUnitMs.end()) return std::nullopt;
    total += number * it->second;
    at = unit_end;
  }
  return static_cast<std::int64_t>(total + 0.5);
}

std::string hmac_sha256_hex(std::string_view key, std::string_view message) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int size = 0;
  HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()),
       reinterpret_cast<const unsigned char*>(message.data()), message.size(), digest, &size);
  std::string hex;
  char pair[3];
  for (unsigned int i = 0; i < size; ++i) {
    std::snprintf(pair, sizeof pair, "%02x", digest[i]);
    hex += pair;
  }
  return hex;
}

struct Signature {
  std::string t;
  std::vector<std::string> v1;
  std::vector<std::string> other;  // parts that are neither t= nor v1=
};
Signature parse_signature(std::string_view header) {
  Signature signature;
  while (!header.empty()) {
    const std::size_t comma = header.find(',');
    const std::string_view part = header.substr(0, comma);
    if (part.substr(0, 2) == "t=") {
      signature.t = std::string(part.substr(2));
    } else if (part.substr(0, 3) == "v1=") {
      signature.v1.emplace_back(part.substr(3));
    } else {
      signature.other.emplace_back(part);
    }
    if (comma == std::string_view::npos) break;
    header.remove_prefix(comma + 1);
  }
  return signature;
}

// One line per request, for failure messages and the timing notes.
std::string describe(const std::vector<Received>& requests) {
  std::ostringstream out;
  out << requests.size() << " requests\n";
  for (std::size_t i = 0; i < requests.size(); ++i) {
    const Received& r = requests[i];
    out << "  #" << i << " +" << millis_between(requests.front().arrived, r.arrived) << " ms "
        << r.method << " " << r.target << " job " << r.header("delayq-job-id") << " attempt "
        << r.header("delayq-attempt") << " conn " << r.connection << "\n";
  }
  return out.str();
}

// A note for the log (ctest -V shows it): what the timings of a run were.
void note(const std::string& text) {
  std::cout << "[ timings  ] " << text << std::endl;
}

std::string text(const json::object& o, std::string_view field) {
  const json::value* v = o.if_contains(field);
  return v != nullptr && v->is_string() ? std::string(v->as_string()) : "<missing>";
}
// An integer field, or nullopt if it is missing or not an integer.
std::optional<std::int64_t> integer(const json::object& o, std::string_view field) {
  const json::value* v = o.if_contains(field);
  if (v == nullptr || !v->is_number()) return std::nullopt;
  boost::system::error_code error;
  const auto n = v->to_number<std::int64_t>(error);
  if (error) return std::nullopt;
  return n;
}
std::optional<double> real(const json::object& o, std::string_view field) {
  const json::value* v = o.if_contains(field);
  if (v == nullptr || !v->is_number()) return std::nullopt;
  return v->to_number<double>();
}
std::optional<std::int64_t> duration_field(const json::object& o, std::string_view field) {
  const json::value* v = o.if_contains(field);
  return v == nullptr ? std::nullopt : duration_ms(*v);
}

std::string webhook_path(std::string_view tube) {
  return "/v1/tubes/" + std::string(tube) + "/webhook";
}
std::string job_path(std::uint64_t id) {
  return "/v1/jobs/" + std::to_string(id);
}

// --- TLS: certificates made with the `openssl` command

// True if a directory on PATH holds an executable file `name`.
bool on_path(std::string_view name) {
  const char* path = std::getenv("PATH");
  std::string_view dirs = path != nullptr ? path : "";
  while (!dirs.empty()) {
    const std::size_t colon = dirs.find(':');
    const std::string_view dir = dirs.substr(0, colon);
    if (!dir.empty()) {
      const std::string file = std::string(dir) + "/" + std::string(name);
      struct stat info {};
      if (::stat(file.c_str(), &info) == 0 && S_ISREG(info.st_mode) &&
          ::access(file.c_str(), X_OK) == 0) {
        return true;
      }
    }
    if (colon == std::string_view::npos) break;
    dirs.remove_prefix(colon + 1);
  }
  return false;
}

// Runs `argv` (its program found on PATH) with stdout and stderr to the file `log`, waiting at
// most `timeout` before killing it. "" if it exited 0; else how it ended and what it wrote.
std::string run(const std::vector<std::string>& argv, const std::filesystem::path& log,
                Millis timeout) {
  std::vector<char*> args;
  for (const std::string& arg : argv) args.push_back(const_cast<char*>(arg.c_str()));
  args.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, log.c_str(),
                                   O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&actions, STDOUT_FILENO, STDERR_FILENO);
  pid_t pid = -1;
  const int error = posix_spawnp(&pid, args[0], &actions, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (error != 0) return argv[0] + ": " + std::strerror(error);
  const Clock::time_point deadline = Clock::now() + timeout;
  int status = 0;
  std::string ended;
  for (;;) {
    const pid_t done = ::waitpid(pid, &status, WNOHANG);
    if (done == pid) break;
    if (done < 0 && errno != EINTR) return argv[0] + ": waitpid: " + std::strerror(errno);
    if (Clock::now() >= deadline) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      ended = "did not end within " + std::to_string(timeout.count()) + " ms";
      break;
    }
    std::this_thread::sleep_for(Millis{10});
  }
  if (ended.empty()) {
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return "";
    ended = WIFEXITED(status) ? "exited " + std::to_string(WEXITSTATUS(status))
                              : "killed by signal " + std::to_string(WTERMSIG(status));
  }
  std::ifstream in(log);
  return argv[0] + " " + ended + ":\n" +
         std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// A self-signed certificate (RSA 2048, valid a day) for `common_name` and `alt_names` (an
// openssl subjectAltName value: "IP:127.0.0.1", "DNS:localhost"), and its key, written to a new
// directory `dir`. "" on success (for ASSERT_EQ), else what went wrong.
std::string make_identity(const std::filesystem::path& dir, std::string_view common_name,
                          std::string_view alt_names, TlsIdentity& identity) {
  std::error_code error;
  std::filesystem::create_directories(dir, error);
  if (error) return "cannot create " + dir.string() + ": " + error.message();
  identity = {dir / "cert.pem", dir / "key.pem"};
  return run(
      {"openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", identity.key.string(),
       "-out", identity.certificate.string(), "-days", "1", "-subj",
       "/CN=" + std::string(common_name), "-addext", "subjectAltName=" + std::string(alt_names)},
      dir / "openssl.log", Millis{30000});
}

std::string join(const std::vector<std::string>& parts) {
  std::string out;
  for (const std::string& part : parts) out += (out.empty() ? "\"" : ", \"") + part + "\"";
  return out.empty() ? "none" : out;
}

// --- the fixture: one delayqd, one HTTP client

struct PutJob {
  std::uint64_t id = 0;
  std::int64_t due_unix_ms = 0;
  std::string due;
};

class WebhookTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_EQ(start_server(), ""); }
  // Starts delayqd on the data directory with `extra_args` beside the harness's, and a client
  // for its HTTP port. "" on success (for ASSERT_EQ), else what went wrong.
  std::string start_server(std::vector<std::string> extra_args = {}) {
    server_ = std::make_unique<ServerProcess>(dir_.path() / "db", std::move(extra_args));
    if (std::string error = server_->start(); !error.empty()) return error;
    if (server_->http_port() == 0) return "delayqd printed no HTTP port";
    reconnect();
    return "";
  }
  // A new client for the server's HTTP port (which changes with every start).
  void reconnect() {
    http_ = std::make_unique<front::http::Client>("127.0.0.1", server_->http_port());
  }

  ClientResponse call(std::string_view method, std::string_view target,
                      std::string_view body = {}) {
    auto response = http_->request(method, target, body, kReplyTimeout);
    EXPECT_TRUE(response.is_ok()) << method << " " << target << ": "
                                  << response.status().to_string();
    return response.is_ok() ? response.value() : ClientResponse{};
  }
  // The JSON object of a response that must have `status`.
  json::object expect(unsigned status, std::string_view method, std::string_view target,
                      std::string_view body = {}) {
    const ClientResponse response = call(method, target, body);
    EXPECT_EQ(response.status, status)
        << method << " " << target << " " << body << " -> " << response.body;
    return parse_object(response.body);
  }
  static json::object parse_object(std::string_view body) {
    if (body.empty()) return {};
    boost::system::error_code error;
    json::value value = json::parse(body, error);
    EXPECT_FALSE(error) << "not JSON: " << body;
    if (error || !value.is_object()) return {};
    return value.as_object();
  }
  // A refused request: `status` and an error object.
  void expect_error(unsigned status, std::string_view method, std::string_view target,
                    std::string_view body) {
    const json::object o = expect(status, method, target, body);
    EXPECT_TRUE(o.contains("error")) << method << " " << target << " " << body;
  }

  json::object set_webhook(std::string_view tube, const json::object& hook) {
    return expect(200, "PUT", webhook_path(tube), json::serialize(hook));
  }
  PutJob put(std::string_view tube, const json::object& fields) {
    const json::object o =
        expect(201, "POST", "/v1/tubes/" + std::string(tube) + "/jobs", json::serialize(fields));
    PutJob job;
    job.id = static_cast<std::uint64_t>(integer(o, "id").value_or(0));
    job.due_unix_ms = integer(o, "due_unix_ms").value_or(0);
    job.due = text(o, "due");
    EXPECT_NE(job.id, 0u) << json::serialize(o);
    return job;
  }
  // The job as GET /v1/jobs/{id} shows it; nullopt once it is gone (404).
  std::optional<json::object> job(std::uint64_t id) {
    const ClientResponse response = call("GET", job_path(id));
    if (response.status == 404) return std::nullopt;
    EXPECT_EQ(response.status, 200u) << "GET " << job_path(id) << " -> " << response.body;
    return parse_object(response.body);
  }
  // True once GET /v1/jobs/{id} answers 404, false if it still does not after `timeout`.
  bool wait_until_gone(std::uint64_t id, Millis timeout = kDeliveryWait) {
    const Clock::time_point deadline = Clock::now() + timeout;
    for (;;) {
      if (!job(id).has_value()) return true;
      if (Clock::now() >= deadline) return false;
      std::this_thread::sleep_for(Millis{20});
    }
  }
  // The job once it is in `state`; what GET showed last (or {} if it was gone) after `timeout`.
  json::object wait_for_state(std::uint64_t id, std::string_view state,
                              Millis timeout = kDeliveryWait) {
    const Clock::time_point deadline = Clock::now() + timeout;
    json::object last;
    for (;;) {
      const auto o = job(id);
      last = o.value_or(json::object{});
      if (text(last, "state") == state || Clock::now() >= deadline) return last;
      std::this_thread::sleep_for(Millis{20});
    }
  }

  TempDir dir_;
  std::unique_ptr<ServerProcess> server_;
  std::unique_ptr<front::http::Client> http_;
};

// --- the webhook resource

TEST_F(WebhookTest, SetGetDeleteAndBadValues) {
  EXPECT_TRUE(expect(404, "GET", webhook_path("none")).contains("error"));
  EXPECT_TRUE(expect(404, "DELETE", webhook_path("none")).contains("error"));

  // Every field given: the answer, and a GET after it, show them.
  const json::object full = {{"url", "http://127.0.0.1:9/hook?x=1"},
                             {"headers", {{"X-A", "b"}}},
                             {"timeout", "250ms"},
                             {"max_attempts", 5},
                             {"backoff", {{"min", "200ms"}, {"max", "30s"}, {"factor", 3}}},
                             {"rate", 5},
                             {"concurrency", 2},
                             {"secrets", json::array{"s1", "s2"}}};
  const json::object set = set_webhook("full", full);
  EXPECT_EQ(text(set, "url"), "http://127.0.0.1:9/hook?x=1") << json::serialize(set);
  const json::value* headers = set.if_contains("headers");
  ASSERT_TRUE(headers != nullptr && headers->is_object()) << json::serialize(set);
  EXPECT_EQ(text(headers->as_object(), "X-A"), "b");
  EXPECT_EQ(duration_field(set, "timeout"), 250);
  EXPECT_EQ(integer(set, "max_attempts"), 5);
  const json::value* backoff = set.if_contains("backoff");
  ASSERT_TRUE(backoff != nullptr && backoff->is_object()) << json::serialize(set);
  EXPECT_EQ(duration_field(backoff->as_object(), "min"), 200);
  EXPECT_EQ(duration_field(backoff->as_object(), "max"), 30000);
  EXPECT_EQ(real(backoff->as_object(), "factor"), 3.0);
  EXPECT_EQ(real(set, "rate"), 5.0);
  EXPECT_EQ(integer(set, "concurrency"), 2);
  EXPECT_EQ(json::value(expect(200, "GET", webhook_path("full"))), json::value(set));

  // A URL alone: the defaults (docs: timeout 10 s, 20 attempts, backoff 1 s x2 up to 1 h, no
  // rate limit, 8 in flight).
  const json::object minimal = set_webhook("full", {{"url", "http://127.0.0.1:9/other"}});
  EXPECT_EQ(text(minimal, "url"), "http://127.0.0.1:9/other");
  EXPECT_EQ(duration_field(minimal, "timeout"), 10000) << json::serialize(minimal);
  EXPECT_EQ(integer(minimal, "max_attempts"), 20);
  const json::value* defaults = minimal.if_contains("backoff");
  ASSERT_TRUE(defaults != nullptr && defaults->is_object()) << json::serialize(minimal);
  EXPECT_EQ(duration_field(defaults->as_object(), "min"), 1000);
  EXPECT_EQ(duration_field(defaults->as_object(), "max"), 3600000);
  EXPECT_EQ(real(defaults->as_object(), "factor"), 2.0);
  EXPECT_EQ(real(minimal, "rate"), 0.0);
  EXPECT_EQ(integer(minimal, "concurrency"), 8);
  EXPECT_EQ(json::value(expect(200, "GET", webhook_path("full"))), json::value(minimal));

  // Bad values: 400 with an error, and the webhook in force stays as it was.
  const std::vector<std::string> bad = {
      R"({})",
      R"({"url":"ftp://127.0.0.1/x"})",
      R"({"url":"not a url"})",
      R"({"url":42})",
      R"({"url":"http://127.0.0.1:9/x","timeout":"soon"})",
      R"({"url":"http://127.0.0.1:9/x","timeout":-5})",
      R"({"url":"http://127.0.0.1:9/x","rate":-1})",
      R"({"url":"http://127.0.0.1:9/x","headers":"X-A: b"})",
      R"({"url":"http://127.0.0.1:9/x","headers":{"X-A":"1","x-a":"2"}})",
      R"({"url":"http://127.0.0.1:9/x","headers":{"TraceParent":"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}})",
      R"({"url":"http://127.0.0.1:9/x","headers":{"tracestate":"a=1"}})",
      R"({"url":"http://127.0.0.1:9/x","headers":{"Host":"example.com"}})",
      R"({"url":"http://127.0.0.1:9/x","secrets":"s1"})",
      R"({"url":"http://127.0.0.1:9/x","secrets":[1]})",
      R"({"url":"http://127.0.0.1:9/x","backoff":{"min":"later"}})",
      R"({"url":"http://127.0.0.1:9/x","uri":"http://127.0.0.1:9/y"})",
      R"({not json)",
  };
  for (const std::string& body : bad) {
    SCOPED_TRACE(body);
    expect_error(400, "PUT", webhook_path("full"), body);
  }
  EXPECT_EQ(json::value(expect(200, "GET", webhook_path("full"))), json::value(minimal));

  expect(200, "DELETE", webhook_path("full"));
  EXPECT_TRUE(expect(404, "GET", webhook_path("full")).contains("error"));
  EXPECT_TRUE(expect(404, "DELETE", webhook_path("full")).contains("error"));

  // A job's own URL needs a webhook on its tube: 409 without one, and nothing is put.
  expect_error(409, "POST", "/v1/tubes/plain/jobs",
               R"({"body":"x","delay":"1h","url":"http://127.0.0.1:9/x"})");
  const ClientResponse tube = call("GET", "/v1/tubes/plain");
  if (tube.status != 404) {
    EXPECT_EQ(tube.status, 200u) << tube.body;
    EXPECT_EQ(integer(parse_object(tube.body), "total_jobs"), 0) << tube.body;
  }
}

// --- delivery

// The tube list shows a tube's webhook wherever it is asked: in Redis mode, on the node that
// delivers the tube's jobs and on the other (the webhook reaches it within about 50 ms).
TEST_F(WebhookTest, TheTubeListShowsTheWebhookOnEveryNode) {
  set_webhook("listed", {{"url", "http://127.0.0.1:9/listed"}});
  put("listed", {{"body", "later"}, {"delay", "1h"}});
  front::http::Client other("127.0.0.1", server_->http_port());  // the peer, in Redis mode
  for (front::http::Client* client : {http_.get(), &other}) {
    std::string url = "<no tube>";
    const Clock::time_point deadline = Clock::now() + Millis{5000};
    while (url.starts_with("<") && Clock::now() < deadline) {
      auto response = client->request("GET", "/v1/tubes", {}, kReplyTimeout);
      ASSERT_TRUE(response.is_ok()) << response.status().to_string();
      const json::object listed = parse_object(response.value().body);
      for (const json::value& tube : listed.at("tubes").as_array()) {
        if (text(tube.as_object(), "name") == "listed") url = text(tube.as_object(), "webhook_url");
      }
      if (url.starts_with("<")) std::this_thread::sleep_for(Millis{20});
    }
    EXPECT_EQ(url, "http://127.0.0.1:9/listed");
  }
}

TEST_F(WebhookTest, TwoHundredDeletesTheJob) {
  Receiver receiver;
  set_webhook("orders", {{"url", receiver.url("/hook")}});
  const std::int64_t before_put_ms = now_unix_ms();
  constexpr std::string_view kTrace = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
  http_->set_header("traceparent", std::string(kTrace));
  const PutJob put_job = put("orders", {{"body", "cancel order 123"},
                                        {"delay", "200ms"},
                                        {"key", "order-123"},
                                        {"content_type", "text/plain"}});
  http_->set_header("traceparent", "");
  EXPECT_GE(put_job.due_unix_ms, before_put_ms + 200);

  ASSERT_TRUE(receiver.wait_for_count(1, kDeliveryWait)) << "no request came";
  EXPECT_TRUE(wait_until_gone(put_job.id)) << "the job is still there after a 200";
  std::this_thread::sleep_for(Millis{500});  // room for a second request that must not come
  const std::vector<Received> requests = receiver.requests();
  ASSERT_EQ(requests.size(), 1u) << describe(requests);

  const Received& r = requests[0];
  EXPECT_GE(unix_us(r.arrived_wall), (before_put_ms + 200) * 1000) << "before the due time";
  EXPECT_GE(unix_us(r.arrived_wall), put_job.due_unix_ms * 1000) << "before the due time";
  note("2xx: arrived " + std::to_string(unix_us(r.arrived_wall) / 1000 - put_job.due_unix_ms) +
       " ms after due");
  EXPECT_EQ(r.method, "POST");
  EXPECT_EQ(r.target, "/hook");
  EXPECT_EQ(r.body, "cancel order 123");
  EXPECT_EQ(r.header("content-type"), "text/plain");
  EXPECT_EQ(r.header("delayq-job-id"), std::to_string(put_job.id));
  EXPECT_EQ(r.header("delayq-attempt"), "1");
  EXPECT_EQ(r.header("delayq-tube"), "orders");
  EXPECT_EQ(r.header("delayq-key"), "order-123");
  const auto due = parse_rfc3339_ms(r.header("delayq-due"));
  ASSERT_TRUE(due.has_value()) << "Delayq-Due: " << r.header("delayq-due");
  EXPECT_EQ(*due, put_job.due_unix_ms) << r.header("delayq-due") << " vs " << put_job.due;
  EXPECT_FALSE(r.has("delayq-signature")) << "no secrets, yet signed";
  EXPECT_EQ(r.header("traceparent"), kTrace) << "the put's trace context";
  EXPECT_FALSE(r.has("tracestate"));
}

// A receiver's answer is bounded in the server's memory, its chunked framing too: a 200 whose
// chunk-size line never ends (4 MiB of it here) is a 200 once the bound is passed, not a
// buffer grown until the attempt's timeout (before: held 4 MiB, then failed and sent again).
TEST_F(WebhookTest, AnAnswerWhoseChunkLineNeverEndsIsBoundedAndItsStatusCounts) {
  std::string endless = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1;";
  endless.append(std::size_t{4} << 20, 'x');
  Receiver receiver([&endless](std::size_t, const Received&) {
    Answer answer;
    answer.raw = endless;
    return answer;
  });
  set_webhook("endless", {{"url", receiver.url("/hook")}, {"timeout", "60s"}});
  const PutJob put_job = put("endless", {{"body", "b"}, {"delay", 0}});
  ASSERT_TRUE(receiver.wait_for_count(1, kDeliveryWait)) << "no request came";
  EXPECT_TRUE(wait_until_gone(put_job.id)) << "the 200 did not count";
  EXPECT_EQ(receiver.count(), 1u) << describe(receiver.requests());
}

// A status line without its reason phrase ("HTTP/1.1 200", as some receivers answer) is read
// for its status: before, it was "bad status", and the job went out again until buried.
TEST_F(WebhookTest, AStatusLineWithoutAReasonPhraseCounts) {
  Receiver receiver([](std::size_t, const Received&) {
    Answer answer;
    answer.raw = "HTTP/1.1 200\r\nContent-Length: 0\r\n\r\n";
    return answer;
  });
  set_webhook("bare", {{"url", receiver.url("/hook")}});
  const PutJob put_job = put("bare", {{"body", "b"}, {"delay", 0}});
  ASSERT_TRUE(receiver.wait_for_count(1, kDeliveryWait)) << "no request came";
  EXPECT_TRUE(wait_until_gone(put_job.id)) << "the 200 did not count";
  EXPECT_EQ(receiver.count(), 1u) << describe(receiver.requests());
}

// Receivers close kept-alive connections they found idle (nginx, Node, gunicorn after a few
// seconds): a request is not sent on one the receiver closed, nor sent again on another it
// closed, so a healthy receiver gets every job at its first attempt. Before: an attempt took
// two closed connections from the pool, failed ("the connection closed twice") and, with one
// attempt allowed, buried a job the receiver never saw.
TEST_F(WebhookTest, ConnectionsTheReceiverClosedAreNotUsed) {
  Receiver receiver([](std::size_t index, const Received&) {
    Answer answer;
    answer.delay = index < 4 ? Millis{300} : Millis{0};  // four connections at once
    answer.close = true;  // after answering: as a receiver's idle timeout would
    return answer;
  });
  set_webhook("idle", {{"url", receiver.url("/hook")}, {"concurrency", 4}, {"max_attempts", 1}});
  for (int i = 0; i < 4; ++i) put("idle", {{"body", "first " + std::to_string(i)}, {"delay", 0}});
  ASSERT_TRUE(receiver.wait_for_count(4, kDeliveryWait)) << describe(receiver.requests());
  std::this_thread::sleep_for(Millis{300});  // the four answered, their connections closed
  for (int i = 0; i < 3; ++i) {
    const PutJob later = put("idle", {{"body", "later " + std::to_string(i)}, {"delay", 0}});
    EXPECT_TRUE(wait_until_gone(later.id))
        << "not delivered: " << json::serialize(*job(later.id)) << "\n"
        << describe(receiver.requests());
  }
  EXPECT_EQ(receiver.count(), 7u) << describe(receiver.requests());
}

// A request is sent once more, on a new connection, only when a kept-alive connection failed
// before any answer came: one whose answer broke off halfway is a failed attempt, not a
// request to send twice (the receiver may have acted on it).
TEST_F(WebhookTest, AnAnswerThatBreaksOffIsNotSentAgainInTheSameAttempt) {
  Receiver receiver([](std::size_t index, const Received&) {
    Answer answer;
    if (index > 0) {
      answer.raw = "HTTP/1.1 200 OK\r\nContent-Length: 50\r\n\r\nok";
      answer.close = true;
    }
    return answer;
  });
  set_webhook("broken", {{"url", receiver.url("/hook")}, {"max_attempts", 1}});
  const PutJob first = put("broken", {{"body", "first"}, {"delay", 0}});
  EXPECT_TRUE(wait_until_gone(first.id)) << describe(receiver.requests());  // a kept connection
  const PutJob cut = put("broken", {{"body", "cut"}, {"delay", 0}});
  const json::object buried = wait_for_state(cut.id, "buried");
  EXPECT_EQ(text(buried, "state"), "buried") << json::serialize(buried);
  std::this_thread::sleep_for(Millis{300});
  EXPECT_EQ(receiver.count(), 2u) << describe(receiver.requests());
}

TEST_F(WebhookTest, FailuresBackOffExponentially) {
  Receiver receiver(statuses({500, 500, 200}));
  set_webhook("retry", {{"url", receiver.url("/hook")},
                        {"max_attempts", 5},
                        {"backoff", {{"min", "200ms"}, {"max", "1h"}, {"factor", 2}}}});
  const PutJob put_job = put("retry", {{"body", "again"}, {"delay", 0}});

  ASSERT_TRUE(receiver.wait_for_count(3, kDeliveryWait)) << describe(receiver.requests());
  EXPECT_TRUE(wait_until_gone(put_job.id)) << "the job is still there after the 200";
  std::this_thread::sleep_for(Millis{500});
  const std::vector<Received> requests = receiver.requests();
  ASSERT_EQ(requests.size(), 3u) << describe(requests);
  for (std::size_t i = 0; i < requests.size(); ++i) {
    EXPECT_EQ(requests[i].header("delayq-attempt"), std::to_string(i + 1)) << describe(requests);
    EXPECT_EQ(requests[i].header("delayq-job-id"), std::to_string(put_job.id));
    EXPECT_EQ(requests[i].body, "again");
    // No content_type at the put: the default.
    EXPECT_EQ(requests[i].header("content-type"), "application/octet-stream");
  }
  // The wait after attempt k is drawn in [half, all] of 200ms * 2^(k-1); the answer came after
  // the request arrived, so the gap between arrivals is at least the wait.
  const std::int64_t gap1 = wall_gap_ms(requests[0], requests[1]);
  const std::int64_t gap2 = wall_gap_ms(requests[1], requests[2]);
  note("backoff 200ms x2: gaps " + std::to_string(gap1) + " ms, " + std::to_string(gap2) + " ms");
  EXPECT_GE(gap1, 100 - kRoundingMs) << describe(requests);
  EXPECT_GE(gap2, 200 - kRoundingMs) << describe(requests);
  EXPECT_LT(gap1, 200 + 3000) << describe(requests);
  EXPECT_LT(gap2, 400 + 3000) << describe(requests);
}

TEST_F(WebhookTest, RetryAfterIsHonoured) {
  const Script script = [](std::size_t index, const Received&) {
    if (index == 0) return Answer{503, {{"Retry-After", "1"}}, Millis{0}};
    if (index == 1) return Answer{429, {{"Retry-After", "1"}}, Millis{0}};
    return Answer{200, {}, Millis{0}};
  };
  Receiver receiver(script);
  // A backoff far shorter than the Retry-After, so only the Retry-After explains a long gap.
  set_webhook("later", {{"url", receiver.url("/hook")},
                        {"backoff", {{"min", "10ms"}, {"max", "50ms"}, {"factor", 2}}}});
  const PutJob put_job = put("later", {{"body", "b"}, {"delay", 0}});

  ASSERT_TRUE(receiver.wait_for_count(3, kDeliveryWait)) << describe(receiver.requests());
  EXPECT_TRUE(wait_until_gone(put_job.id));
  const std::vector<Received> requests = receiver.requests();
  ASSERT_EQ(requests.size(), 3u) << describe(requests);
  const std::int64_t gap1 = wall_gap_ms(requests[0], requests[1]);
  const std::int64_t gap2 = wall_gap_ms(requests[1], requests[2]);
  note("Retry-After 1 (503, then 429): gaps " + std::to_string(gap1) + " ms, " +
       std::to_string(gap2) + " ms");
  EXPECT_GE(gap1, 1000 - kRoundingMs) << "503 Retry-After: 1\n" << describe(requests);
  EXPECT_GE(gap2, 1000 - kRoundingMs) << "429 Retry-After: 1\n" << describe(requests);
  EXPECT_LT(gap1, 1000 + 3000) << describe(requests);
  EXPECT_LT(gap2, 1000 + 3000) << describe(requests);
  EXPECT_EQ(requests[1].header("delayq-attempt"), "2");
  EXPECT_EQ(requests[2].header("delayq-attempt"), "3");
}

TEST_F(WebhookTest, ATimeoutIsAFailedAttempt) {
  const Script script = [](std::size_t index, const Received&) {
    return Answer{200, {}, index == 0 ? Millis{2000} : Millis{0}};
  };
  Receiver receiver(script);
  set_webhook("slow", {{"url", receiver.url("/hook")},
                       {"timeout", "300ms"},
                       {"backoff", {{"min", "100ms"}, {"max", "1s"}, {"factor", 2}}}});
  const PutJob put_job = put("slow", {{"body", "b"}, {"delay", 0}});

  ASSERT_TRUE(receiver.wait_for_count(2, kDeliveryWait)) << describe(receiver.requests());
  EXPECT_TRUE(wait_until_gone(put_job.id)) << "the job is still there after the second 200";
  // Past the moment the first request's late 200 goes out: nothing more may come.
  const std::vector<Received> early = receiver.requests();
  const Clock::time_point quiet_until = early[0].arrived + Millis{2500};
  std::this_thread::sleep_for(
      std::max(Millis{300}, std::chrono::duration_cast<Millis>(quiet_until - Clock::now())));
  const std::vector<Received> requests = receiver.requests();
  ASSERT_EQ(requests.size(), 2u) << describe(requests);
  const std::int64_t gap = millis_between(requests[0].arrived, requests[1].arrived);
  note("timeout 300ms: second attempt " + std::to_string(gap) + " ms after the first");
  EXPECT_EQ(requests[1].header("delayq-attempt"), "2");
  // The second attempt came while the first was still unanswered: the deliverer gave up on it.
  EXPECT_LT(gap, 2000) << describe(requests);
  // Not before the timeout (300 ms from the attempt's start, a little before its arrival) plus
  // half the backoff (50 ms); 100 ms is left for connecting and sending on a loaded machine.
  EXPECT_GE(gap, 250) << describe(requests);
}

TEST_F(WebhookTest, RefusedConnectionsEndBuried) {
  const std::string url = "http://127.0.0.1:" + std::to_string(closed_port()) + "/nobody";
  set_webhook("void", {{"url", url},
                       {"max_attempts", 2},
                       {"backoff", {{"min", "100ms"}, {"max", "1s"}, {"factor", 2}}}});
  const PutJob put_job = put("void", {{"body", "b"}, {"delay", 0}});
  const json::object buried = wait_for_state(put_job.id, "buried");
  ASSERT_EQ(text(buried, "state"), "buried") << json::serialize(buried);
  EXPECT_EQ(integer(buried, "last_status"), 0) << json::serialize(buried);
  EXPECT_NE(text(buried, "last_error"), "<missing>") << json::serialize(buried);
  EXPECT_NE(text(buried, "last_error"), "") << json::serialize(buried);
  note("refused: last_error \"" + text(buried, "last_error") + "\"");
}

TEST_F(WebhookTest, RequestsAreSignedWithEverySecret) {
  Receiver receiver;
  set_webhook("signed", {{"url", receiver.url("/hook")},
                         {"headers", {{"X-A", "b"}, {"X-Tenant", "acme"}}},
                         {"secrets", json::array{"first secret", "second secret"}}});
  const std::string body = R"({"order":123,"note":"a.b,c=d"})";
  const PutJob put_job = put("signed", {{"body", body}, {"delay", 0}});
  ASSERT_TRUE(receiver.wait_for_count(1, kDeliveryWait));
  EXPECT_TRUE(wait_until_gone(put_job.id));

  const Received r = receiver.requests().front();
  EXPECT_EQ(r.body, body);
  EXPECT_EQ(r.header("x-a"), "b");
  EXPECT_EQ(r.header("x-tenant"), "acme");
  ASSERT_TRUE(r.has("delayq-signature"));
  const Signature signature = parse_signature(r.header("delayq-signature"));
  EXPECT_TRUE(signature.other.empty()) << r.header("delayq-signature");
  ASSERT_EQ(signature.v1.size(), 2u) << r.header("delayq-signature");
  std::int64_t t = 0;
  const auto [end, error] =
      std::from_chars(signature.t.data(), signature.t.data() + signature.t.size(), t);
  ASSERT_TRUE(error == std::errc{} && end == signature.t.data() + signature.t.size())
      << "t=" << signature.t;
  // Signed at the attempt: within a few seconds of the arrival (the same clock).
  EXPECT_LT(std::abs(unix_us(r.arrived_wall) / 1000 - t), 5000) << "t=" << signature.t;
  const std::string message = signature.t + "." + body;
  EXPECT_EQ(signature.v1[0], hmac_sha256_hex("first secret", message));
  EXPECT_EQ(signature.v1[1], hmac_sha256_hex("second secret", message));
  EXPECT_NE(signature.v1[0], hmac_sha256_hex("another secret", message));  // the check can fail
}

TEST_F(WebhookTest, DeadLetterAfterMaxAttempts) {
  Receiver receiver(always(500));
  set_webhook("dead", {{"url", receiver.url("/hook")},
                       {"max_attempts", 3},
                       {"backoff", {{"min", "50ms"}, {"max", "1s"}, {"factor", 2}}}});
  const PutJob put_job = put("dead", {{"body", "b"}, {"delay", 0}});
  const json::object buried = wait_for_state(put_job.id, "buried");
  ASSERT_EQ(text(buried, "state"), "buried") << json::serialize(buried) << "\n"
                                             << describe(receiver.requests());
  std::this_thread::sleep_for(Millis{700});  // a fourth attempt would come within this
  const std::vector<Received> requests = receiver.requests();
  ASSERT_EQ(requests.size(), 3u) << describe(requests);
  for (std::size_t i = 0; i < requests.size(); ++i) {
    EXPECT_EQ(requests[i].header("delayq-attempt"), std::to_string(i + 1)) << describe(requests);
  }
  EXPECT_EQ(integer(buried, "last_status"), 500) << json::serialize(buried);
  EXPECT_TRUE(buried.contains("last_error")) << json::serialize(buried);
  const auto still = job(put_job.id);
  ASSERT_TRUE(still.has_value());
  EXPECT_EQ(text(*still, "state"), "buried");
}

// Interim answers (1xx) come before the final one and are skipped. Taken for the answer, they
// left the real one on the kept-alive connection, read as the answer to the next job sent on
// it: a job its receiver refused was deleted.
TEST_F(WebhookTest, InterimAnswersAreSkipped) {
  Receiver receiver([](std::size_t, const Received& request) {
    return request.body == "first" ? Answer{200, {}, Millis{0}, {100, 103}}
                                   : Answer{500, {}, Millis{0}};
  });
  set_webhook("early", {{"url", receiver.url("/hook")}, {"concurrency", 1}, {"max_attempts", 1}});
  const std::int64_t at_ms = now_unix_ms() + 1000;
  const PutJob taken = put("early", {{"body", "first"}, {"at", at_ms}});
  const PutJob refused = put("early", {{"body", "second"}, {"at", at_ms}});
  const json::object buried = wait_for_state(refused.id, "buried");
  EXPECT_EQ(text(buried, "state"), "buried") << describe(receiver.requests());
  EXPECT_EQ(integer(buried, "last_status"), 500) << json::serialize(buried);
  EXPECT_TRUE(wait_until_gone(taken.id)) << "the job answered 200 is still there";
  EXPECT_EQ(receiver.count(), 2u) << describe(receiver.requests());
}

// Removing a webhook lets its requests under way finish: the 2xx that comes after the removal
// still deletes the job (cut off, the request left the job ready, to be sent again).
TEST_F(WebhookTest, RemovingAWebhookLetsItsRequestsUnderWayFinish) {
  Receiver receiver(always(200, Millis{800}));
  set_webhook("going", {{"url", receiver.url("/hook")}, {"concurrency", 1}});
  const PutJob put_job = put("going", {{"body", "b"}, {"delay", 0}});
  ASSERT_TRUE(receiver.wait_for_count(1, kDeliveryWait));
  expect(200, "DELETE", webhook_path("going"));
  EXPECT_TRUE(wait_until_gone(put_job.id)) << "the answer of the request under way was dropped";
  EXPECT_EQ(receiver.count(), 1u) << describe(receiver.requests());
}

// An attempt under way when the webhook changes ends under the settings it started with.
TEST_F(WebhookTest, AnAttemptUnderWayKeepsTheSettingsItStartedWith) {
  Receiver receiver(always(500, Millis{600}));
  set_webhook("kept", {{"url", receiver.url("/hook")},
                       {"max_attempts", 20},
                       {"backoff", {{"min", "100ms"}, {"max", "100ms"}}}});
  const PutJob put_job = put("kept", {{"body", "b"}, {"delay", 0}});
  ASSERT_TRUE(receiver.wait_for_count(1, kDeliveryWait));
  // While the first attempt waits for its answer: one attempt only, from now on.
  set_webhook("kept", {{"url", receiver.url("/hook")}, {"max_attempts", 1}});
  // The first attempt, started under max_attempts 20, is released and tried again; the second,
  // started under 1, buries the job.
  const json::object buried = wait_for_state(put_job.id, "buried");
  EXPECT_EQ(text(buried, "state"), "buried");
  EXPECT_EQ(receiver.count(), 2u) << describe(receiver.requests());
}

// A new rate applies at once: a lane waiting out the old rate's interval starts the next request
// under the new one.
TEST_F(WebhookTest, ANewRateAppliesAtOnce) {
  Receiver receiver;
  set_webhook("slow", {{"url", receiver.url("/hook")}, {"rate", 0.1}});
  const std::int64_t at_ms = now_unix_ms() + 1000;
  for (int i = 0; i < 3; ++i) put("slow", {{"body", "job " + std::to_string(i)}, {"at", at_ms}});
  ASSERT_TRUE(receiver.wait_for_count(1, kDeliveryWait));
  // The next start under 0.1 per second would be 10 s after the first.
  set_webhook("slow", {{"url", receiver.url("/hook")}, {"rate", 0}});
  EXPECT_TRUE(receiver.wait_for_count(3, Millis{5000})) << describe(receiver.requests());
}

// A tube with a webhook exists as long as the webhook does: its pause and counts stay while
// the lane is busy or waits out its rate, with no job in the tube and nobody watching it.
TEST_F(WebhookTest, ATubeWithAWebhookKeepsItsPauseWhileEmpty) {
  Receiver receiver;
  set_webhook("held", {{"url", receiver.url("/hook")}, {"rate", 0.5}});
  EXPECT_EQ(integer(expect(200, "GET", "/v1/tubes/held"), "ready"), 0);
  const PutJob first = put("held", {{"body", "first"}, {"delay", 0}});
  ASSERT_TRUE(wait_until_gone(first.id));
  // The lane now waits out the rate's 2 s; nothing else keeps the tube.
  expect(200, "POST", "/v1/tubes/held/pause", R"({"delay":"30s"})");
  std::this_thread::sleep_for(Millis{2500});
  const json::object tube = expect(200, "GET", "/v1/tubes/held");
  EXPECT_GT(integer(tube, "pause_left_ms"), 0) << json::serialize(tube);
  EXPECT_EQ(integer(tube, "total_jobs"), 1) << json::serialize(tube);
  const PutJob second = put("held", {{"body", "second"}, {"delay", 0}});
  std::this_thread::sleep_for(Millis{1000});
  EXPECT_EQ(receiver.count(), 1u) << "delivered from a paused tube: "
                                  << describe(receiver.requests());
  expect(200, "DELETE", webhook_path("held"));
  EXPECT_TRUE(job(second.id).has_value());
}

TEST_F(WebhookTest, RateLimitSpacesRequests) {
  Receiver receiver;
  set_webhook("paced", {{"url", receiver.url("/hook")}, {"rate", 20}});
  // Forty jobs due at the same instant, far enough ahead for every put to be in first.
  const std::int64_t at_ms = now_unix_ms() + 2000;
  std::set<std::string> ids;
  for (int i = 0; i < 40; ++i) {
    const PutJob put_job = put("paced", {{"body", "job " + std::to_string(i)}, {"at", at_ms}});
    ids.insert(std::to_string(put_job.id));
  }
  ASSERT_TRUE(receiver.wait_for_count(40, Millis{20000})) << describe(receiver.requests());
  const std::vector<Received> requests = receiver.requests();
  std::set<std::string> received;
  for (const Received& r : requests) {
    received.insert(r.header("delayq-job-id"));
    EXPECT_GE(unix_us(r.arrived_wall), at_ms * 1000) << "before the due time";
  }
  EXPECT_EQ(received, ids);
  // 20 started per second: 40 requests need about 2 s; at least 1.5 s whatever the burst the
  // limiter allows at the start (up to 10).
  const std::int64_t span = millis_between(requests.front().arrived, requests.back().arrived);
  std::int64_t tightest = 1'000'000;  // the shortest time any 21 consecutive requests took
  for (std::size_t i = 0; i + 20 < requests.size(); ++i) {
    tightest = std::min(tightest, millis_between(requests[i].arrived, requests[i + 20].arrived));
  }
  note("rate 20/s, 40 jobs: first to last " + std::to_string(span) +
       " ms; the tightest 21 in a row took " + std::to_string(tightest) + " ms; first " +
       std::to_string(unix_us(requests.front().arrived_wall) / 1000 - at_ms) + " ms after due");
  EXPECT_GE(span, 1500) << describe(requests);

  const json::object hook = expect(200, "GET", webhook_path("paced"));
  EXPECT_EQ(text(hook, "url"), receiver.url("/hook"));
  EXPECT_EQ(real(hook, "rate"), 20.0);
  expect(200, "DELETE", webhook_path("paced"));
  EXPECT_TRUE(expect(404, "GET", webhook_path("paced")).contains("error"));
}

TEST_F(WebhookTest, SlowReceiverDoesNotDelayOtherTubes) {
  Receiver slow(always(200, Millis{1500}));
  Receiver fast;
  set_webhook("a", {{"url", slow.url("/a")}, {"concurrency", 1}});
  set_webhook("b", {{"url", fast.url("/b")}});
  const std::int64_t at_ms = now_unix_ms() + 1500;
  std::vector<PutJob> b_jobs;
  for (int i = 0; i < 5; ++i) {
    put("a", {{"body", "a" + std::to_string(i)}, {"at", at_ms}});
    b_jobs.push_back(put("b", {{"body", "b" + std::to_string(i)}, {"at", at_ms}}));
  }
  ASSERT_TRUE(fast.wait_for_count(5, kDeliveryWait)) << describe(fast.requests());
  const std::size_t slow_count_then = slow.count();
  const std::vector<Received> b = fast.requests();
  std::int64_t latest_ms = 0;
  for (const Received& r : b) {
    latest_ms = std::max(latest_ms, unix_us(r.arrived_wall) / 1000 - at_ms);
    EXPECT_GE(unix_us(r.arrived_wall), at_ms * 1000) << "before the due time";
  }
  note("slow tube a beside b: b's last came " + std::to_string(latest_ms) +
       " ms after due, while a had had " + std::to_string(slow_count_then) + " requests");
  EXPECT_LE(latest_ms, 1000) << describe(b);
  EXPECT_LT(slow_count_then, 5u) << "a was not still being served";

  // a, one at a time: its second request starts only after its first was answered (1.5 s).
  ASSERT_TRUE(slow.wait_for_count(2, kDeliveryWait)) << describe(slow.requests());
  const std::vector<Received> a = slow.requests();
  EXPECT_GE(millis_between(a[0].arrived, a[1].arrived), 1500) << describe(a);
  EXPECT_EQ(slow.max_in_flight(), 1) << describe(a);
}

// Flow control holds push delivery as it holds workers: with group_concurrency 1, a group's
// next job goes out only once its request before was answered, while other groups go on.
TEST_F(WebhookTest, GroupConcurrencyHoldsAGroupsDeliveriesToOneAtATime) {
  Receiver receiver(always(200, Millis{300}));
  set_webhook("tenants", {{"url", receiver.url("/hook")}, {"concurrency", 4}});
  expect(200, "PATCH", "/v1/tubes/tenants", R"({"group_concurrency":1})");
  for (int i = 0; i < 3; ++i) {
    for (const char* group : {"a", "b"}) {
      put("tenants", {{"body", std::string(group) + std::to_string(i)}, {"group", group}});
    }
  }
  ASSERT_TRUE(receiver.wait_for_count(6, kDeliveryWait)) << describe(receiver.requests());
  const std::vector<Received> got = receiver.requests();
  EXPECT_EQ(receiver.max_in_flight(), 2) << "one request per group, for all 4 the webhook allows";
  for (const char group : {'a', 'b'}) {
    std::vector<Received> of_group;
    for (const Received& r : got) {
      if (!r.body.empty() && r.body[0] == group) of_group.push_back(r);
    }
    ASSERT_EQ(of_group.size(), 3u) << describe(got);
    for (std::size_t i = 1; i < of_group.size(); ++i) {
      EXPECT_GE(millis_between(of_group[i - 1].arrived, of_group[i].arrived), 300)
          << group << ": a request before the one before it was answered: " << describe(got);
    }
  }
}

TEST_F(WebhookTest, WebhookSurvivesARestart) {
  Receiver receiver;
  const json::object set =
      set_webhook("kept", {{"url", receiver.url("/kept")},
                           {"headers", {{"X-A", "b"}}},
                           {"timeout", "2s"},
                           {"max_attempts", 7},
                           {"backoff", {{"min", "250ms"}, {"max", "10s"}, {"factor", 3}}},
                           {"rate", 50},
                           {"concurrency", 3},
                           {"secrets", json::array{"s1"}}});
  const PutJob before = put("kept", {{"body", "put before the restart"}, {"delay", "1s"}});
  EXPECT_EQ(server_->stop(), "exited 0");
  ASSERT_EQ(server_->start(), "");
  reconnect();
  EXPECT_EQ(json::value(expect(200, "GET", webhook_path("kept"))), json::value(set));

  // And the deliverer uses it: the job put before the stop, and one put after the start.
  const PutJob after = put("kept", {{"body", "put after the restart"}, {"delay", 0}});
  ASSERT_TRUE(receiver.wait_for_count(2, kDeliveryWait)) << describe(receiver.requests());
  EXPECT_TRUE(wait_until_gone(before.id));
  EXPECT_TRUE(wait_until_gone(after.id));
  std::set<std::string> bodies;
  for (const Received& r : receiver.requests()) {
    bodies.insert(r.body);
    EXPECT_EQ(r.target, "/kept");
    EXPECT_EQ(r.header("x-a"), "b");
    EXPECT_TRUE(r.has("delayq-signature"));
    if (r.body == "put before the restart") {
      EXPECT_GE(unix_us(r.arrived_wall), before.due_unix_ms * 1000) << "before the due time";
    }
  }
  EXPECT_EQ(bodies, (std::set<std::string>{"put before the restart", "put after the restart"}));
}

TEST_F(WebhookTest, AJobsUrlOverridesTheTubes) {
  Receiver tube_receiver;
  Receiver job_receiver;
  set_webhook("mixed", {{"url", tube_receiver.url("/tube")}});
  const PutJob own =
      put("mixed",
          {{"body", "to my own url"}, {"delay", "100ms"}, {"url", job_receiver.url("/mine?x=1")}});
  const PutJob plain = put("mixed", {{"body", "to the tube's url"}, {"delay", "100ms"}});
  ASSERT_TRUE(job_receiver.wait_for_count(1, kDeliveryWait));
  ASSERT_TRUE(tube_receiver.wait_for_count(1, kDeliveryWait));
  EXPECT_TRUE(wait_until_gone(own.id));
  EXPECT_TRUE(wait_until_gone(plain.id));
  std::this_thread::sleep_for(Millis{300});
  const std::vector<Received> mine = job_receiver.requests();
  const std::vector<Received> tube = tube_receiver.requests();
  ASSERT_EQ(mine.size(), 1u) << describe(mine);
  ASSERT_EQ(tube.size(), 1u) << describe(tube);
  EXPECT_EQ(mine[0].target, "/mine?x=1");
  EXPECT_EQ(mine[0].body, "to my own url");
  EXPECT_EQ(mine[0].header("delayq-job-id"), std::to_string(own.id));
  EXPECT_EQ(tube[0].target, "/tube");
  EXPECT_EQ(tube[0].body, "to the tube's url");
  EXPECT_EQ(tube[0].header("delayq-job-id"), std::to_string(plain.id));
}

// A 2xx whose delete was durable cannot be redelivered; one in flight at the kill may be. What
// can be seen from outside: every job is received at least once, none before it was due, and
// the tube ends empty.
TEST_F(WebhookTest, Kill9DuringDeliveriesLosesNoJob) {
  Receiver receiver(always(200, Millis{300}));
  set_webhook("crash", {{"url", receiver.url("/hook")}, {"concurrency", 2}});
  const std::int64_t at_ms = now_unix_ms() + 1500;
  std::map<std::string, PutJob> jobs;  // by id, as Delayq-Job-Id writes it
  for (int i = 0; i < 20; ++i) {
    const PutJob put_job = put("crash", {{"body", "job " + std::to_string(i)}, {"at", at_ms}});
    jobs[std::to_string(put_job.id)] = put_job;
  }
  ASSERT_TRUE(receiver.wait_for_count(5, kDeliveryWait)) << describe(receiver.requests());
  EXPECT_EQ(server_->kill9(), "killed by signal 9");
  const std::size_t before_kill = receiver.count();
  ASSERT_EQ(server_->start(), "");
  reconnect();

  // Every job received at least once.
  const Clock::time_point deadline = Clock::now() + Millis{30000};
  std::set<std::string> received;
  while (Clock::now() < deadline) {
    received.clear();
    for (const Received& r : receiver.requests()) received.insert(r.header("delayq-job-id"));
    if (received.size() >= jobs.size()) break;
    std::this_thread::sleep_for(Millis{50});
  }
  for (const auto& [id, put_job] : jobs) {
    EXPECT_EQ(received.count(id), 1u) << "job " << id << " never received";
  }
  for (const auto& [id, put_job] : jobs) {
    EXPECT_TRUE(wait_until_gone(put_job.id)) << "job " << id << " is still there";
  }
  const std::vector<Received> requests = receiver.requests();
  std::map<std::string, int> times;
  for (const Received& r : requests) {
    const std::string id = r.header("delayq-job-id");
    ++times[id];
    const auto it = jobs.find(id);
    ASSERT_NE(it, jobs.end()) << "a request for no job put here: " << id;
    EXPECT_GE(unix_us(r.arrived_wall), it->second.due_unix_ms * 1000)
        << "job " << id << " before its due time";
    EXPECT_EQ(r.body.substr(0, 4), "job ");
  }
  int again = 0;
  for (const auto& [id, n] : times) again += n - 1;
  note("kill -9: " + std::to_string(before_kill) + " requests before the kill, " +
       std::to_string(requests.size()) + " in all for " + std::to_string(jobs.size()) + " jobs, " +
       std::to_string(again) + " redelivered");
  // The tube ends empty (it may have vanished, having no jobs left).
  const ClientResponse tube = call("GET", "/v1/tubes/crash");
  if (tube.status != 404) {
    ASSERT_EQ(tube.status, 200u) << tube.body;
    const json::object counts = parse_object(tube.body);
    for (const char* state : {"ready", "delayed", "reserved", "buried"}) {
      EXPECT_EQ(integer(counts, state), 0) << state << ": " << tube.body;
    }
  }
}

// --- HTTPS

// A receiver with a self-signed certificate for 127.0.0.1, which delayqd trusts only when
// --webhook-ca-file names it; so each test starts its own delayqd, with or without the flag.
class WebhookTlsTest : public WebhookTest {
 protected:
  void SetUp() override {
    if (!on_path("openssl")) {
      GTEST_SKIP() << "no `openssl` command on PATH: the HTTPS tests need it to make a "
                      "self-signed certificate";
    }
    ASSERT_EQ(make_identity(dir_.path() / "tls", "127.0.0.1", "IP:127.0.0.1", identity_), "");
  }
  std::vector<std::string> trust(const TlsIdentity& identity) const {
    return {"--webhook-ca-file", identity.certificate.string()};
  }
  // The job as GET shows it, for failure messages.
  std::string shown(std::uint64_t id) {
    const auto o = job(id);
    return o.has_value() ? json::serialize(*o) : "<gone>";
  }
  // An attempt that must fail at the handshake, twice: the job ends buried with no status and
  // a TLS error, and the receiver got two connections, no handshake done and no request.
  void expect_refused_at_handshake(std::string_view tube, const std::string& url,
                                   const Receiver& receiver) {
    set_webhook(tube, {{"url", url},
                       {"max_attempts", 2},
                       {"backoff", {{"min", "100ms"}, {"max", "1s"}, {"factor", 2}}}});
    const PutJob put_job = put(tube, {{"body", "not for strangers"}, {"delay", 0}});
    const json::object buried = wait_for_state(put_job.id, "buried");
    ASSERT_EQ(text(buried, "state"), "buried")
        << json::serialize(buried) << "\nreceiver: " << describe(receiver.requests())
        << "failed handshakes: " << join(receiver.failed_handshakes());
    EXPECT_EQ(integer(buried, "last_status"), 0) << json::serialize(buried);
    const std::string error = text(buried, "last_error");
    EXPECT_NE(lower(error).find("tls"), std::string::npos) << json::serialize(buried);
    const json::value* counters = buried.if_contains("counters");
    ASSERT_TRUE(counters != nullptr && counters->is_object()) << json::serialize(buried);
    EXPECT_EQ(integer(counters->as_object(), "reserves"), 2) << json::serialize(buried);
    // The server's side of each refused handshake ends when the client's alert comes, which
    // may be a moment after delayqd has buried the job.
    EXPECT_TRUE(receiver.wait_for_failed_handshakes(2, kDeliveryWait))
        << "failed handshakes: " << join(receiver.failed_handshakes());
    std::this_thread::sleep_for(Millis{500});  // a third attempt would come within this
    EXPECT_EQ(receiver.connections(), 2u) << "one connection per attempt";
    EXPECT_EQ(receiver.handshakes(), 0u) << "a handshake completed";
    EXPECT_EQ(receiver.count(), 0u) << describe(receiver.requests());
    note("refused " + url + ": last_error \"" + error +
         "\"; the receiver's handshakes failed with " + join(receiver.failed_handshakes()));
  }

  TlsIdentity identity_;
};

TEST_F(WebhookTlsTest, HttpsDeliversWhenTheCaFileTrustsTheReceiver) {
  Receiver receiver(always(200), identity_);
  ASSERT_EQ(start_server(trust(identity_)), "");
  set_webhook("secure", {{"url", receiver.url("/")}});
  const std::string body = R"({"order":123,"action":"cancel"})";
  const PutJob put_job = put("secure", {{"body", body},
                                        {"delay", "100ms"},
                                        {"key", "order-123"},
                                        {"content_type", "application/json"}});

  ASSERT_TRUE(receiver.wait_for_count(1, kDeliveryWait))
      << "no request came; the job: " << shown(put_job.id)
      << "\nfailed handshakes: " << join(receiver.failed_handshakes());
  EXPECT_TRUE(wait_until_gone(put_job.id)) << "the job is still there after a 200";
  std::this_thread::sleep_for(Millis{500});  // room for a second request that must not come
  const std::vector<Received> requests = receiver.requests();
  ASSERT_EQ(requests.size(), 1u) << describe(requests);
  EXPECT_EQ(receiver.handshakes(), 1u);
  EXPECT_EQ(join(receiver.failed_handshakes()), "none");

  const Received& r = requests[0];
  EXPECT_TRUE(r.tls_version == "TLSv1.3" || r.tls_version == "TLSv1.2") << r.tls_version;
  // RFC 6066, section 3: no SNI for an IP address.
  EXPECT_EQ(r.sni, "") << "SNI sent for an IP address";
  note("https: " + r.tls_version + ", arrived " +
       std::to_string(unix_us(r.arrived_wall) / 1000 - put_job.due_unix_ms) + " ms after due");
  EXPECT_GE(unix_us(r.arrived_wall), put_job.due_unix_ms * 1000) << "before the due time";
  EXPECT_EQ(r.method, "POST");
  EXPECT_EQ(r.target, "/");
  EXPECT_EQ(r.header("host"), "127.0.0.1:" + std::to_string(receiver.port()));
  EXPECT_EQ(r.body, body);
  EXPECT_EQ(r.header("content-type"), "application/json");
  EXPECT_EQ(r.header("delayq-job-id"), std::to_string(put_job.id));
  EXPECT_EQ(r.header("delayq-attempt"), "1");
  EXPECT_EQ(r.header("delayq-tube"), "secure");
  EXPECT_EQ(r.header("delayq-key"), "order-123");
  EXPECT_EQ(parse_rfc3339_ms(r.header("delayq-due")), put_job.due_unix_ms)
      << r.header("delayq-due") << " vs " << put_job.due;
  EXPECT_FALSE(r.has("delayq-signature")) << "no secrets, yet signed";
  EXPECT_FALSE(job(put_job.id).has_value()) << "GET " << job_path(put_job.id) << " is not 404";
}

TEST_F(WebhookTlsTest, HttpsToAnUntrustedCertificateEndsBuried) {
  Receiver receiver(always(200), identity_);
  ASSERT_EQ(start_server(), "");  // no --webhook-ca-file: only the system's CAs
  expect_refused_at_handshake("untrusted", receiver.url("/"), receiver);
}

// Trusted, but issued to 127.0.0.1 alone: a URL naming "localhost", the same address, must not
// be accepted with it.
TEST_F(WebhookTlsTest, HttpsChecksTheHostName) {
  if (!resolves("localhost")) GTEST_SKIP() << "this machine's resolver does not know localhost";
  Receiver receiver(always(200), identity_);
  ASSERT_EQ(start_server(trust(identity_)), "");
  expect_refused_at_handshake("misnamed", receiver.url("/", "localhost"), receiver);
}

TEST_F(WebhookTlsTest, HttpsToAHostNameSendsSni) {
  if (!resolves("localhost")) GTEST_SKIP() << "this machine's resolver does not know localhost";
  TlsIdentity named;
  ASSERT_EQ(make_identity(dir_.path() / "named", "localhost", "DNS:localhost", named), "");
  Receiver receiver(always(200), named);
  ASSERT_EQ(start_server(trust(named)), "");
  set_webhook("named", {{"url", receiver.url("/hook", "localhost")}});
  const PutJob put_job = put("named", {{"body", "by name"}, {"delay", 0}});
  ASSERT_TRUE(receiver.wait_for_count(1, kDeliveryWait))
      << "no request came; the job: " << shown(put_job.id)
      << "\nfailed handshakes: " << join(receiver.failed_handshakes());
  EXPECT_TRUE(wait_until_gone(put_job.id)) << "the job is still there after a 200";
  const Received r = receiver.requests().front();
  EXPECT_EQ(r.sni, "localhost");
  EXPECT_EQ(r.header("host"), "localhost:" + std::to_string(receiver.port()));
  EXPECT_EQ(r.body, "by name");
}

}  // namespace
}  // namespace delayq::testing
