// http_test.cc — the HTTP/JSON API against the real delayqd (tests/protocol/server_process.h),
// over real sockets: every endpoint, every error status, the long-poll reserve (it answers as
// soon as a job is due, not at its timeout), visibility across the two protocols, the metrics
// page as valid Prometheus exposition, drain mode, and a put that survives kill -9.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <boost/json.hpp>
#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <thread>

#include "front/http/client.h"
#include "server_process.h"

namespace delayq::testing {
namespace {

namespace json = boost::json;
using front::http::ClientResponse;

class HttpTest : public ::testing::Test {
 protected:
  void SetUp() override {
    server_ = std::make_unique<ServerProcess>(dir_.path() / "db");
    ASSERT_EQ(server_->start(), "");
    ASSERT_NE(server_->http_port(), 0);
    http_ = std::make_unique<front::http::Client>("127.0.0.1", server_->http_port());
  }

  ClientResponse call(std::string_view method, std::string_view target, std::string_view body = {},
                      Millis timeout = kReplyTimeout) {
    auto response = http_->request(method, target, body, timeout);
    EXPECT_TRUE(response.is_ok()) << method << " " << target << ": "
                                  << response.status().to_string();
    return response.is_ok() ? response.value() : ClientResponse{};
  }
  // The JSON of a response that must have `status`.
  json::object expect(unsigned status, std::string_view method, std::string_view target,
                      std::string_view body = {}) {
    const ClientResponse response = call(method, target, body);
    EXPECT_EQ(response.status, status)
        << method << " " << target << " " << body << " -> " << response.body;
    if (response.body.empty()) return {};
    boost::system::error_code error;
    json::value value = json::parse(response.body, error);
    EXPECT_FALSE(error) << "not JSON: " << response.body;
    if (error || !value.is_object()) return {};
    return value.as_object();
  }
  // The error code of a failed call that must have `status`.
  std::string error_code(unsigned status, std::string_view method, std::string_view target,
                         std::string_view body = {}) {
    const json::object o = expect(status, method, target, body);
    const json::value* error = o.if_contains("error");
    if (error == nullptr || !error->is_object()) {
      ADD_FAILURE() << "no error object for " << method << " " << target;
      return "";
    }
    EXPECT_TRUE(error->as_object().contains("message"));
    return std::string(error->as_object().at("code").as_string());
  }
  std::uint64_t put(std::string_view tube, std::string_view body_json) {
    const json::object o =
        expect(201, "POST", "/v1/tubes/" + std::string(tube) + "/jobs", body_json);
    return o.contains("id") ? o.at("id").to_number<std::uint64_t>() : 0;
  }

  TempDir dir_;
  std::unique_ptr<ServerProcess> server_;
  std::unique_ptr<front::http::Client> http_;
};

// The header lines of the answer being read on `raw`, after its status line, up to the blank
// line that ends them.
std::string read_header_lines(Client& raw) {
  std::string headers;
  for (std::string line = raw.read_line().value_or(""); line != "\r\n" && !line.empty();
       line = raw.read_line().value_or("")) {
    headers += line;
  }
  return headers;
}

// The body of the answer being read on `raw`, after its status line (its Content-Length's bytes).
std::string read_body(Client& raw) {
  const std::string headers = read_header_lines(raw);
  const auto at = headers.find("Content-Length: ");
  if (at == std::string::npos) return "<no Content-Length>";
  return raw.read_exact(std::stoul(headers.substr(at + 16))).value_or("<none>");
}

std::string id_path(std::uint64_t id, std::string_view suffix = "") {
  return "/v1/jobs/" + std::to_string(id) + std::string(suffix);
}

std::string text(const json::object& o, std::string_view field) {
  const json::value* v = o.if_contains(field);
  return v != nullptr && v->is_string() ? std::string(v->as_string()) : "<missing>";
}

// A put's W3C trace context (its traceparent and tracestate headers) is kept with the job and
// comes back with it, read or reserved, over either protocol; a malformed one is a 400.
TEST_F(HttpTest, APutsTraceContextComesBackWithTheJob) {
  const std::string parent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
  http_->set_header("traceparent", parent);
  http_->set_header("tracestate", "rojo=00f067aa0ba902b7");
  const json::object put = expect(201, "POST", "/v1/tubes/traced/jobs", R"({"body":"x"})");
  http_->set_header("tracestate", "");
  EXPECT_EQ(std::string(put.at("traceparent").as_string()), parent);
  const std::int64_t id = put.at("id").as_int64();
  const json::object got = expect(200, "GET", "/v1/jobs/" + std::to_string(id));
  EXPECT_EQ(std::string(got.at("traceparent").as_string()), parent);
  EXPECT_EQ(std::string(got.at("tracestate").as_string()), "rojo=00f067aa0ba902b7");

  testing::Client beanstalk(server_->port());
  const std::string stats = beanstalk.call("stats-job " + std::to_string(id) + "\r\n");
  EXPECT_NE(stats.find("\ntraceparent: \"" + parent + "\"\n"), std::string::npos) << stats;

  const json::object reserved =
      expect(200, "POST", "/v1/reserve", R"({"tubes":["traced"],"timeout":"0s"})");
  EXPECT_EQ(std::string(reserved.at("traceparent").as_string()), parent);

  http_->set_header("traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7");
  const json::object refused = expect(400, "POST", "/v1/tubes/traced/jobs", R"({"body":"x"})");
  http_->set_header("traceparent", "");
  EXPECT_NE(json::serialize(refused).find("traceparent"), std::string::npos)
      << json::serialize(refused);
}

TEST_F(HttpTest, PutGetDelete) {
  const ClientResponse created =
      call("POST", "/v1/tubes/orders/jobs", R"({"body":"cancel order 123","delay":"1h"})");
  ASSERT_EQ(created.status, 201u) << created.body;
  const json::object job = json::parse(created.body).as_object();
  const std::uint64_t id = job.at("id").to_number<std::uint64_t>();
  EXPECT_EQ(created.headers.at("location"), id_path(id));
  EXPECT_EQ(text(job, "state"), "delayed");
  EXPECT_EQ(text(job, "tube"), "orders");
  EXPECT_EQ(job.at("priority").to_number<std::int64_t>(), 1024);
  EXPECT_EQ(job.at("delay_ms").to_number<std::int64_t>(), 3600000);
  const std::int64_t now_ms =
      std::chrono::duration_cast<Millis>(std::chrono::system_clock::now().time_since_epoch())
          .count();
  EXPECT_GT(job.at("due_unix_ms").to_number<std::int64_t>(), now_ms + 3500000);

  const json::object got = expect(200, "GET", id_path(id));
  EXPECT_EQ(text(got, "body"), "cancel order 123");
  EXPECT_EQ(text(got, "due"), text(job, "due"));

  EXPECT_EQ(expect(200, "DELETE", id_path(id)).at("deleted").to_number<std::uint64_t>(), id);
  EXPECT_EQ(error_code(404, "GET", id_path(id)), "not_found");
  EXPECT_EQ(error_code(404, "DELETE", id_path(id)), "not_found");
}

TEST_F(HttpTest, ABatchPutsEachJobAsAPutWouldAndAnswersEachInItsOrder) {
  const json::object answered =
      expect(200, "POST", "/v1/jobs",
             R"({"jobs":[{"tube":"batch-a","body":"one","key":"k"},)"
             R"({"tube":"batch-a","body":"two","key":"k"},)"
             R"({"tube":"batch-b","body":"later","delay":"1h","priority":7},)"
             R"({"tube":"batch-b","priority":-1},{"body":"no tube"},5,)"
             R"({"tube":"batch-b","body":"x","bogus":true}]})");
  const json::array& jobs = answered.at("jobs").as_array();
  ASSERT_EQ(jobs.size(), 7U);
  std::vector<std::int64_t> statuses;
  for (const auto& job : jobs)
    statuses.push_back(job.as_object().at("status").to_number<std::int64_t>());
  EXPECT_EQ(statuses, (std::vector<std::int64_t>{201, 200, 201, 400, 400, 400, 400}));
  const json::object& first = jobs[0].as_object().at("job").as_object();
  const json::object& again = jobs[1].as_object().at("job").as_object();
  EXPECT_EQ(again.at("id"), first.at("id")) << "the second put of the key finds the first's job";
  const json::object& later = jobs[2].as_object().at("job").as_object();
  EXPECT_EQ(text(later, "state"), "delayed");
  EXPECT_EQ(later.at("priority").to_number<std::int64_t>(), 7);
  for (std::size_t i = 3; i < jobs.size(); ++i) {
    EXPECT_EQ(jobs[i].as_object().at("error").as_object().at("code"), "bad_request") << i;
  }
  // Each job put is there to reserve and to read.
  const json::object reserved = expect(200, "POST", "/v1/reserve", R"({"tubes":["batch-a"]})");
  EXPECT_EQ(text(reserved, "body"), "one");
  EXPECT_EQ(text(expect(200, "GET", id_path(later.at("id").to_number<std::uint64_t>())), "body"),
            "later");

  // The request itself: an object with 1 to 1000 jobs.
  std::string many = R"({"jobs":[)";
  for (int i = 0; i < 1001; ++i) many += std::string(i > 0 ? "," : "") + R"({"tube":"t"})";
  many += "]}";
  for (const std::string& bad : {std::string(R"({"jobs":[]})"), std::string(R"({"jobs":{}})"),
                                 std::string("{}"), std::string(R"({"jobs":[],"x":1})"), many}) {
    EXPECT_EQ(error_code(400, "POST", "/v1/jobs", bad), "bad_request") << bad.substr(0, 40);
  }
  EXPECT_EQ(error_code(404, "GET", "/v1/tubes/t"), "not_found") << "none of them was put";
}

TEST_F(HttpTest, PutFieldsAndBinaryBodies) {
  const std::uint64_t id = put(
      "t", R"({"body_base64":"AP8BgA==","priority":7,"ttr":"90s","at":"2099-01-01T00:00:00Z"})");
  const json::object got = expect(200, "GET", id_path(id));
  EXPECT_EQ(text(got, "body_base64"), "AP8BgA==");  // not UTF-8: comes back as base64
  EXPECT_FALSE(got.contains("body"));
  EXPECT_EQ(got.at("priority").to_number<std::int64_t>(), 7);
  EXPECT_EQ(got.at("ttr_ms").to_number<std::int64_t>(), 90000);
  EXPECT_EQ(text(got, "due"), "2099-01-01T00:00:00.000Z");
  // A delay in plain milliseconds, and an empty body.
  const std::uint64_t ready = put("t", R"({"delay":0})");
  EXPECT_EQ(text(expect(200, "GET", id_path(ready)), "state"), "ready");
  EXPECT_EQ(text(expect(200, "GET", id_path(ready)), "body"), "");
}

TEST_F(HttpTest, BadInputGetsClearErrors) {
  const std::string jobs = "/v1/tubes/t/jobs";
  EXPECT_EQ(error_code(400, "POST", jobs, "{not json"), "bad_request");
  EXPECT_EQ(error_code(400, "POST", jobs, "[1,2]"), "bad_request");
  EXPECT_EQ(error_code(400, "POST", jobs, R"({"body":"x","dealy":"1h"})"), "bad_request");
  EXPECT_EQ(error_code(400, "POST", jobs, R"({"body":"x","delay":"soon"})"), "bad_request");
  EXPECT_EQ(error_code(400, "POST", jobs, R"({"body":"x","delay":-5})"), "bad_request");
  EXPECT_EQ(error_code(400, "POST", jobs, R"({"body":"x","delay":"1h","at":0})"), "bad_request");
  EXPECT_EQ(error_code(400, "POST", jobs, R"({"body":"x","at":"tomorrow"})"), "bad_request");
  EXPECT_EQ(error_code(400, "POST", jobs, R"({"body":1})"), "bad_request");
  EXPECT_EQ(error_code(400, "POST", jobs, R"({"body":"x","body_base64":"eA=="})"), "bad_request");
  EXPECT_EQ(error_code(400, "POST", jobs, R"({"body_base64":"!!"})"), "bad_request");
  EXPECT_EQ(error_code(400, "POST", jobs, R"({"priority":4294967296})"), "bad_request");
  EXPECT_EQ(error_code(400, "POST", jobs, R"({"replace":"yes"})"), "bad_request");
  EXPECT_EQ(error_code(400, "POST", "/v1/tubes/bad%20name!/jobs", "{}"), "bad_request");
  EXPECT_EQ(expect(400, "POST", "/v1/tubes/-x/jobs", R"({"body":"x"})").at("error").at("message"),
            "bad tube name '-x': 1 to 200 bytes of letters, digits and -+/;.$_(), not starting "
            "with '-'");
  EXPECT_EQ(error_code(400, "GET", "/v1/jobs/abc"), "bad_request");
  EXPECT_EQ(error_code(400, "GET", "/v1/tubes/t/groups/%FF"), "bad_request");  // not UTF-8
  EXPECT_EQ(error_code(400, "GET", "/v1/jobs/0"), "bad_request");
  EXPECT_EQ(error_code(404, "GET", "/v1/nothing"), "no_route");
  const ClientResponse not_allowed = call("PUT", "/v1/jobs/1");
  EXPECT_EQ(not_allowed.status, 405u);
  EXPECT_EQ(not_allowed.headers.at("allow"), "GET, HEAD, PATCH, DELETE");

  // A job body over the limit (65535 bytes by default): 413, and nothing was put.
  const std::string big = R"({"body":")" + std::string(65536, 'x') + R"("})";
  EXPECT_EQ(error_code(413, "POST", jobs, big), "too_large");
  const std::string fits = R"({"body":")" + std::string(65535, 'x') + R"("})";
  put("t", fits);
  EXPECT_EQ(expect(200, "GET", "/v1/tubes/t").at("ready").to_number<std::uint64_t>(), 1u);
}

TEST_F(HttpTest, OversizedRequestsAndGarbage) {
  // A request body beyond the server's limit (1 MiB): 413 and the connection closes.
  {
    Client raw(server_->http_port());
    const std::string body(2 << 20, 'x');
    raw.send("POST /v1/tubes/t/jobs HTTP/1.1\r\nHost: x\r\nContent-Length: " +
             std::to_string(body.size()) + "\r\n\r\n");
    raw.send(body.substr(0, 1000));
    EXPECT_EQ(raw.read_line().value_or("<none>"), "HTTP/1.1 413 Payload Too Large\r\n");
  }
  // Headers beyond 8 KiB: 431. The bound is of the request line and headers in all, the final
  // CRLF included: 8192 bytes pass, 8193 do not.
  {
    Client raw(server_->http_port());
    raw.send("GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: " + std::string(9000, 'a') + "\r\n\r\n");
    EXPECT_EQ(raw.read_line().value_or("<none>"),
              "HTTP/1.1 431 Request Header Fields Too Large\r\n");
  }
  for (const std::size_t head : {std::size_t{8192}, std::size_t{8193}}) {
    const std::string start = "GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: ";
    Client raw(server_->http_port());
    raw.send(start + std::string(head - start.size() - 4, 'a') + "\r\n\r\n");
    EXPECT_EQ(
        raw.read_line().value_or("<none>"),
        head == 8192 ? "HTTP/1.1 200 OK\r\n" : "HTTP/1.1 431 Request Header Fields Too Large\r\n")
        << head << " bytes";
  }
  // Not HTTP at all: 400, and the server keeps serving.
  {
    Client raw(server_->http_port());
    raw.send("\x01\x02 garbage\r\n\r\n");
    EXPECT_EQ(raw.read_line().value_or("<none>"), "HTTP/1.1 400 Bad Request\r\n");
  }
  // Lines ended by a bare LF: the refusal says what a line ends with.
  {
    Client raw(server_->http_port());
    raw.send("GET /healthz HTTP/1.1\nHost: x\n\n");
    EXPECT_EQ(raw.read_line().value_or("<none>"), "HTTP/1.1 400 Bad Request\r\n");
    const std::string body = read_body(raw);
    EXPECT_NE(body.find("each line ending with CRLF)"), std::string::npos) << body;
  }
  // HTTP/2's preface: the refusal names the versions served.
  {
    Client raw(server_->http_port());
    raw.send("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n");
    EXPECT_EQ(raw.read_line().value_or("<none>"), "HTTP/1.1 400 Bad Request\r\n");
    const std::string body = read_body(raw);
    EXPECT_NE(body.find("(HTTP/1.0 or HTTP/1.1, "), std::string::npos) << body;
  }
  EXPECT_EQ(expect(200, "GET", "/healthz").at("status").as_string(), "ok");
}

// Most clients send a whole body before they read. The server refuses one over its limit
// without reading it, and must not close on the unread bytes: the kernel would reset the
// connection, and the reset can destroy the 413 before the client reads it.
TEST_F(HttpTest, AClientThatSendsAWholeRefusedBodyReadsTheRefusal) {
  const std::string body(8 << 20, 'x');
  for (int round = 0; round < 3; ++round) {
    Client raw(server_->http_port());
    ASSERT_TRUE(raw.send("POST /v1/tubes/t/jobs HTTP/1.1\r\nHost: x\r\nContent-Length: " +
                         std::to_string(body.size()) + "\r\n\r\n"));
    EXPECT_TRUE(raw.send(body)) << raw.error();
    EXPECT_EQ(raw.read_line().value_or("<none>"), "HTTP/1.1 413 Payload Too Large\r\n");
  }
  EXPECT_EQ(expect(200, "GET", "/healthz").at("status").as_string(), "ok");
}

// Requests with bodies sent in one write are each answered: what follows a whole head (its body,
// the requests after it) never counts against the head's bound of 8192 bytes.
TEST_F(HttpTest, PipelinedRequestsWithBodiesAreEachAnswered) {
  const auto post = [](std::size_t body_bytes) {
    const std::string body = R"({"body":")" + std::string(body_bytes, 'p') + R"("})";
    return "POST /v1/tubes/piped/jobs HTTP/1.1\r\nHost: x\r\nContent-Length: " +
           std::to_string(body.size()) + "\r\n\r\n" + body;
  };
  Client raw(server_->http_port());
  ASSERT_TRUE(raw.send(post(5000) + post(10000) + post(20000) + post(100)));
  // A response's JSON body ends with "\n" alone: a status line may follow it on one "line".
  std::string got;
  const auto count = [&got](std::string_view status) {
    std::size_t n = 0;
    for (auto at = got.find(status); at != std::string::npos; at = got.find(status, at + 1)) ++n;
    return n;
  };
  while (count("HTTP/1.1 ") < 4) {
    const auto line = raw.read_line(Millis{3000});
    if (!line) break;
    got += *line;
  }
  EXPECT_EQ(count("HTTP/1.1 201 Created\r\n"), 4u) << got;
  EXPECT_EQ(expect(200, "GET", "/v1/tubes/piped").at("ready").to_number<std::uint64_t>(), 4u);
}

// Empty lines before a request line are skipped, as RFC 9112 asks: a client that ends a body
// with a CRLF it does not count gets its next request answered (a 400 closed the connection).
TEST_F(HttpTest, EmptyLinesBeforeARequestAreSkipped) {
  Client raw(server_->http_port());
  raw.send(
      "\r\n\r\nPOST /v1/tubes/lines/jobs HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}\r\n");
  EXPECT_EQ(raw.read_line().value_or("<none>"), "HTTP/1.1 201 Created\r\n");
  std::size_t length = 0;
  while (const auto line = raw.read_line()) {
    if (*line == "\r\n") break;
    if (line->rfind("Content-Length: ", 0) == 0) length = std::stoul(line->substr(16));
  }
  ASSERT_GT(length, 0u);
  ASSERT_TRUE(raw.read_exact(length).has_value());
  raw.send("\r");  // half an empty line, then the rest and a request
  std::this_thread::sleep_for(Millis{50});
  raw.send("\nGET /healthz HTTP/1.1\r\nHost: x\r\n\r\n");
  EXPECT_EQ(raw.read_line().value_or("<none>"), "HTTP/1.1 200 OK\r\n");
}

// The bound on the request line and headers holds for the whole head, however it arrives: a
// line at a time, each parsed before the next came, once passed any size.
TEST_F(HttpTest, HeadersSentALineAtATimeAreBoundedToo) {
  Client raw(server_->http_port());
  // Each piece ends one byte into the next line, so that the parser takes every line whole
  // before the next piece comes.
  raw.send("GET /healthz HTTP/1.1\r\nHost: x\r\nX");
  bool refused = false;
  for (int i = 0; i < 400 && !refused; ++i) {  // 400 lines of 40 bytes: 16 KB
    refused =
        !raw.send("-Line-" + std::to_string(1000 + i) + ": " + std::string(28, 'a') + "\r\nX");
    std::this_thread::sleep_for(std::chrono::microseconds(500));
  }
  (void)raw.send("-End: 1\r\n\r\n");
  EXPECT_EQ(raw.read_line().value_or("<none>"), "HTTP/1.1 431 Request Header Fields Too Large\r\n");
  EXPECT_EQ(expect(200, "GET", "/healthz").at("status").as_string(), "ok");
}

// Only chunked is a transfer coding the server reads. Another one (gzip) left the body's length
// unknown: the request was taken as bodiless and its body as the next request.
TEST_F(HttpTest, ATransferCodingOtherThanChunkedIsRefused) {
  const std::uint64_t id = put("kept", R"({"body":"stays","delay":"1h"})");
  const std::string smuggled = "DELETE " + id_path(id) + " HTTP/1.1\r\nHost: x\r\n\r\n";
  // Each refusal says what is wrong with the codings given.
  for (const auto& [coding, answer] : std::vector<std::pair<std::string, std::string>>{
           {"gzip", "501 only chunked is supported"},
           {"identity", "501 only chunked is supported"},
           {"gzip, chunked", "501 only chunked is supported"},
           {"chunked, gzip", "400 chunked must come last"},
           {"chunked, chunked", "400 chunked given more than once"},
           {"", "400 empty"}}) {
    SCOPED_TRACE(coding);
    Client raw(server_->http_port());
    raw.send("POST /v1/tubes/t/jobs HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: " + coding +
             "\r\n\r\n" + smuggled);
    const std::string status = raw.read_line().value_or("<none>");
    EXPECT_EQ(status.substr(0, 12), "HTTP/1.1 " + answer.substr(0, 3)) << status;
    const std::string body = read_body(raw);
    EXPECT_NE(body.find("Transfer-Encoding: " + answer.substr(4)), std::string::npos) << body;
  }
  EXPECT_EQ(expect(200, "GET", id_path(id)).at("state").as_string(), "delayed");
}

// The status line the server answers `request` with, sent on a connection of its own.
std::string status_line(std::uint16_t port, const std::string& request) {
  Client raw(port);
  raw.send(request);
  return raw.read_line().value_or("<none>");
}

// A chunked body is read as it comes; what of it waits for more bytes is its framing (a chunk's
// size line, the trailers), bounded as the head is and ended by CRLF. Before, a size line that
// never ended grew the server's memory until the idle timeout (256 MiB measured), and a line
// ended by a bare LF held the request unanswered for the 60 s of that timeout.
TEST_F(HttpTest, AChunkedBodysFramingIsBoundedAndEndsItsLinesWithCrlf) {
  const std::string head =
      "POST /v1/tubes/chunks/jobs HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n";
  {
    Client raw(server_->http_port());
    raw.send(head + "7;note=x\r\n{\"body\"\r\n8\r\n:\"kept\"}\r\n0\r\nX-Trailer: y\r\n\r\n");
    EXPECT_EQ(raw.read_line().value_or("<none>"), "HTTP/1.1 201 Created\r\n");
  }
  const auto refused = [&](const std::string& start, char filler) {
    Client raw(server_->http_port());
    raw.send(head + start);
    // 64 KiB more of a line that never ends, unless the server has closed first.
    for (int i = 0; i < 16 && raw.send(std::string(4096, filler)); ++i) {
    }
    return raw.read_line(Millis{5000}).value_or("<none>");
  };
  EXPECT_EQ(refused("2;", 'a'), "HTTP/1.1 400 Bad Request\r\n") << "a size line's extension";
  EXPECT_EQ(refused("2\r\n{}\r\n0\r\nX-Trailer: ", 'b'), "HTTP/1.1 400 Bad Request\r\n")
      << "a trailer";
  {
    Client raw(server_->http_port());
    raw.send(head + "2\n{}\n0\n\n");
    EXPECT_EQ(raw.read_line(Millis{5000}).value_or("<none>"), "HTTP/1.1 400 Bad Request\r\n")
        << "a bare LF";
  }
  // The bound is exact, however the line arrives: a size line of 8192 bytes with its CRLF is
  // read, one of 8193 is not, each sent in one piece.
  const auto sized_line = [&](std::size_t bytes) {
    const std::string line = "2;" + std::string(bytes - 4, 'n') + "\r\n";
    return status_line(server_->http_port(), head + line + "{}\r\n0\r\n\r\n");
  };
  EXPECT_EQ(sized_line(8192), "HTTP/1.1 201 Created\r\n");
  EXPECT_EQ(sized_line(8193), "HTTP/1.1 400 Bad Request\r\n");
  EXPECT_EQ(expect(200, "GET", "/v1/tubes/chunks").at("ready").to_number<std::uint64_t>(), 2u);
  EXPECT_EQ(expect(200, "GET", "/healthz").at("status").as_string(), "ok");
}

// Without tokens, a web page must not reach the API: a request from another site's page (its
// Origin) or to a name made to resolve to 127.0.0.1 (its Host) is refused, and nothing runs.
TEST_F(HttpTest, AWebPageOfAnotherSiteIsRefused) {
  // One node's port (in Redis mode the fixture's two nodes take turns): its metrics count them.
  const std::uint16_t port = server_->http_port();
  const auto send = [port](const std::string& headers) {
    return status_line(
        port, "POST /v1/tubes/t/jobs HTTP/1.1\r\n" + headers +
                  "Content-Type: text/plain\r\nContent-Length: 15\r\n\r\n{\"body\":\"evil\"}");
  };
  const std::string here = "127.0.0.1:" + std::to_string(port);
  EXPECT_EQ(send("Host: " + here + "\r\nOrigin: http://evil.example\r\n"),
            "HTTP/1.1 403 Forbidden\r\n");
  EXPECT_EQ(send("Host: rebind.evil.example:" + std::to_string(port) + "\r\n"),
            "HTTP/1.1 403 Forbidden\r\n");
  EXPECT_EQ(
      send("Host: " + here + "\r\nOrigin: http://" + here + "\r\nOrigin: http://evil.example\r\n"),
      "HTTP/1.1 403 Forbidden\r\n")
      << "a foreign Origin behind a good one";
  EXPECT_EQ(call("GET", "/v1/tubes/t").status, 404u) << "a refused request put a job";
  EXPECT_EQ(send("Host: " + here + "\r\nOrigin: http://" + here + "\r\n"),
            "HTTP/1.1 201 Created\r\n");
  // Counted under the endpoint it names, as a 401 is.
  Client raw(port);
  raw.send("GET /metrics HTTP/1.1\r\nHost: " + here + "\r\n\r\n");
  EXPECT_EQ(raw.read_line().value_or("<none>"), "HTTP/1.1 200 OK\r\n");
  const std::string metrics = read_body(raw);
  EXPECT_NE(
      metrics.find("delayq_operations_total{protocol=\"http\",op=\"put_job\",result=\"403\"} 3\n"),
      std::string::npos)
      << metrics;
}

// HEAD is GET without the body: what a load balancer's health check sends.
TEST_F(HttpTest, HeadIsAGetWithoutItsBody) {
  Client raw(server_->http_port());
  raw.send("HEAD /healthz HTTP/1.1\r\nHost: x\r\n\r\nGET /healthz HTTP/1.1\r\nHost: x\r\n\r\n");
  EXPECT_EQ(raw.read_line().value_or("<none>"), "HTTP/1.1 200 OK\r\n");
  const std::string headers = read_header_lines(raw);
  EXPECT_EQ(headers.find("Content-Length: 0\r\n"), std::string::npos) << headers;
  // No body: the next line is the GET's answer.
  EXPECT_EQ(raw.read_line().value_or("<none>"), "HTTP/1.1 200 OK\r\n");
}

// A long-poll of 30 s on a tube nobody fills.
std::string long_poll_request() {
  const std::string body = R"({"tubes":["nothing-here"],"timeout":"30s"})";
  return "POST /v1/reserve HTTP/1.1\r\nHost: x\r\nContent-Length: " + std::to_string(body.size()) +
         "\r\n\r\n" + body;
}

// The answer on `raw` is a 503 that says when to retry.
void expect_stopping_answer(Client& raw) {
  EXPECT_EQ(raw.read_line(Millis{5000}).value_or("<none>"), "HTTP/1.1 503 Service Unavailable\r\n");
  const std::string headers = read_header_lines(raw);
  EXPECT_NE(headers.find("Retry-After: 1"), std::string::npos) << headers;
}

// A long-poll waiting when the server is told to stop gets a 503 at once, not a cut connection:
// its client retries elsewhere (another node, in Redis mode) or later.
TEST_F(HttpTest, ALongPollIsAnsweredWhenTheServerStops) {
  const std::uint16_t port = server_->http_port();  // one node: over Redis, waiters are per node
  Client raw(port);
  raw.send(long_poll_request());
  front::http::Client looker("127.0.0.1", port);
  bool waiting = false;
  for (int i = 0; i < 500 && !waiting; ++i) {
    auto tube = looker.request("GET", "/v1/tubes/nothing-here", "");
    waiting = tube.is_ok() && tube.value().body.find(R"("waiting":1)") != std::string::npos;
    if (!waiting) std::this_thread::sleep_for(Millis{10});
  }
  ASSERT_TRUE(waiting) << "the long-poll never waited";
  ASSERT_TRUE(server_->signal(SIGTERM));
  expect_stopping_answer(raw);
}

// So is one that comes in the stopping server's last moments, on a connection open before.
TEST_F(HttpTest, ALongPollSentAsTheServerStopsIsAnswered) {
  Client raw(server_->http_port());
  // A first answer on it: the server has accepted the connection (HEAD: no body to read).
  raw.send("HEAD /healthz HTTP/1.1\r\nHost: x\r\n\r\n");
  EXPECT_EQ(raw.read_line(Millis{5000}).value_or("<none>"), "HTTP/1.1 200 OK\r\n");
  (void)read_header_lines(raw);
  ASSERT_TRUE(server_->signal(SIGTERM));
  std::this_thread::sleep_for(Millis{30});  // within the 200 ms the stopping server gives
  raw.send(long_poll_request());
  expect_stopping_answer(raw);
}

// RFC 9112: an HTTP/1.1 request names its host exactly once (HTTP/1.0 needs none); a method
// HTTP does not define is not implemented, whatever the path.
TEST_F(HttpTest, AHostIsRequiredAndAnUndefinedMethodIsNotImplemented) {
  const auto status_of = [this](const std::string& request) {
    return status_line(server_->http_port(), request);
  };
  EXPECT_EQ(status_of("GET /healthz HTTP/1.1\r\n\r\n"), "HTTP/1.1 400 Bad Request\r\n");
  EXPECT_EQ(status_of("GET /healthz HTTP/1.1\r\nHost: x\r\nHost: y\r\n\r\n"),
            "HTTP/1.1 400 Bad Request\r\n");
  EXPECT_EQ(status_of("GET /healthz HTTP/1.0\r\n\r\n"), "HTTP/1.0 200 OK\r\n");
  EXPECT_EQ(status_of("FOO /v1/stats HTTP/1.1\r\nHost: x\r\n\r\n"),
            "HTTP/1.1 501 Not Implemented\r\n");
  EXPECT_EQ(status_of("PROPFIND /v1/stats HTTP/1.1\r\nHost: x\r\n\r\n"),
            "HTTP/1.1 405 Method Not Allowed\r\n");
}

// A body is read as sent: one in a content coding (gzip) is refused, not read as JSON.
TEST_F(HttpTest, AContentCodingIsRefusedWith415) {
  const auto put_with = [this](const std::string& codings) {
    return status_line(server_->http_port(), "POST /v1/tubes/gz/jobs HTTP/1.1\r\nHost: x\r\n" +
                                                 codings +
                                                 "Content-Length: 13\r\n\r\n{\"body\":\"hi\"}");
  };
  const std::string refused = "HTTP/1.1 415 Unsupported Media Type\r\n";
  EXPECT_EQ(put_with("Content-Encoding: gzip\r\n"), refused);
  // A coding in a second header counts as well.
  EXPECT_EQ(put_with("Content-Encoding: identity\r\nContent-Encoding: br\r\n"), refused);
  EXPECT_EQ(call("GET", "/v1/tubes/gz").status, 404u) << "a refused put put a job";
  EXPECT_EQ(put_with("Content-Encoding: identity\r\n"), "HTTP/1.1 201 Created\r\n");
}

// RFC 9112, 3.2.2: a server accepts a target in absolute form (what a client sends through a
// proxy), whose host stands for the Host header's; an http URI without a host is invalid.
TEST_F(HttpTest, ATargetInAbsoluteFormIsServed) {
  const auto status_of = [this](const std::string& request) {
    return status_line(server_->http_port(), request);
  };
  const std::string here = "127.0.0.1:" + std::to_string(server_->http_port());
  EXPECT_EQ(status_of("GET http://" + here + "/v1/stats HTTP/1.1\r\nHost: x\r\n\r\n"),
            "HTTP/1.1 200 OK\r\n");
  EXPECT_EQ(status_of("GET HTTP://" + here + "/v1/nothing HTTP/1.1\r\nHost: x\r\n\r\n"),
            "HTTP/1.1 404 Not Found\r\n");
  EXPECT_EQ(status_of("GET http:///v1/stats HTTP/1.1\r\nHost: x\r\n\r\n"),
            "HTTP/1.1 400 Bad Request\r\n");
  // The target's host is the one checked against a web page's tricks.
  EXPECT_EQ(
      status_of("GET http://rebind.evil.example/v1/stats HTTP/1.1\r\nHost: " + here + "\r\n\r\n"),
      "HTTP/1.1 403 Forbidden\r\n");
  Client raw(server_->http_port());
  raw.send("POST http://" + here + "/v1/tubes/abs/jobs HTTP/1.1\r\nHost: " + here +
           "\r\nContent-Length: 13\r\n\r\n{\"body\":\"hi\"}");
  EXPECT_EQ(raw.read_line().value_or("<none>"), "HTTP/1.1 201 Created\r\n");
  EXPECT_EQ(call("GET", "/v1/tubes/abs").status, 200u);
}

// With tokens, a request without one is answered 401 at once: no 100 Continue, no body read.
TEST(HttpTokenTest, A401ComesBeforeA100Continue) {
  TempDir dir;
  const auto tokens = dir.path() / "tokens";
  {
    std::ofstream file(tokens);
    file << "the-token\n";
  }
  ServerProcess server(dir.path() / "db",
                       std::vector<std::string>{"--http-token-file", tokens.string()});
  ASSERT_EQ(server.start(), "");
  const std::string waiting = "Expect: 100-continue\r\nContent-Length: 20\r\n\r\n";
  EXPECT_EQ(
      status_line(server.http_port(), "POST /v1/tubes/t/jobs HTTP/1.1\r\nHost: x\r\n" + waiting),
      "HTTP/1.1 401 Unauthorized\r\n");
  EXPECT_EQ(status_line(server.http_port(),
                        "POST /v1/tubes/t/jobs HTTP/1.1\r\nHost: x\r\n"
                        "Authorization: Bearer the-token\r\n" +
                            waiting),
            "HTTP/1.1 100 Continue\r\n");
  // A target in absolute form is checked as its path: the dashboard's page needs no token.
  EXPECT_EQ(status_line(server.http_port(),
                        "POST http://127.0.0.1/v1/tubes/t/jobs HTTP/1.1\r\nHost: x\r\n" + waiting),
            "HTTP/1.1 401 Unauthorized\r\n");
  EXPECT_EQ(status_line(server.http_port(), "GET http://127.0.0.1/ HTTP/1.1\r\nHost: x\r\n\r\n"),
            "HTTP/1.1 200 OK\r\n");
}

TEST_F(HttpTest, ExpectContinueGetsA100BeforeTheBody) {
  Client raw(server_->http_port());
  const std::string body = R"({"body":"after the 100"})";
  raw.send("POST /v1/tubes/t/jobs HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: " +
           std::to_string(body.size()) + "\r\n\r\n");
  EXPECT_EQ(raw.read_line().value_or("<none>"), "HTTP/1.1 100 Continue\r\n");
  EXPECT_EQ(raw.read_line().value_or("<none>"), "\r\n");
  raw.send(body);
  EXPECT_EQ(raw.read_line().value_or("<none>"), "HTTP/1.1 201 Created\r\n");
  // Too big for the server: 413 at once, no 100 and no body needed.
  Client big(server_->http_port());
  big.send(
      "POST /v1/tubes/t/jobs HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\n"
      "Content-Length: 5000000\r\n\r\n");
  EXPECT_EQ(big.read_line().value_or("<none>"), "HTTP/1.1 413 Payload Too Large\r\n");
}

// With its default HTTP port taken, delayqd runs without HTTP, and keeps serving beanstalkd
// clients through many commits (the HTTP server it gave up must leave nothing behind).
TEST(HttpDefaultPortTest, TakenDefaultPortLeavesBeanstalkServing) {
  const int holder = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(8080);
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  // If the bind fails, something else holds 8080: the case under test all the same.
  (void)::bind(holder, reinterpret_cast<sockaddr*>(&address), sizeof address);
  ::listen(holder, 1);
  TempDir dir;
  ServerProcess server(dir.path() / "db");
  server.set_default_http();
  ASSERT_EQ(server.start(), "");
  Client beanstalk(server.port());
  for (int i = 0; i < 50; ++i) {
    const auto id = inserted_id(beanstalk.call(put_command("x")));
    ASSERT_TRUE(id.has_value());
    EXPECT_EQ(beanstalk.call("delete " + std::to_string(*id) + "\r\n"), "DELETED\r\n");
  }
  EXPECT_EQ(server.stop(), "exited 0");
  ::close(holder);
}

// The blocking client gives up after its timeout on a server that never answers.
TEST(HttpClientTest, TimesOutOnASilentServer) {
  const int silent = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(silent, reinterpret_cast<sockaddr*>(&address), sizeof address), 0);
  ASSERT_EQ(::listen(silent, 4), 0);  // connections are queued, never accepted nor answered
  socklen_t length = sizeof address;
  ::getsockname(silent, reinterpret_cast<sockaddr*>(&address), &length);
  front::http::Client client("127.0.0.1", ntohs(address.sin_port));
  const auto started = Clock::now();
  const auto response = client.request("GET", "/healthz", {}, Millis{300});
  ASSERT_FALSE(response.is_ok());
  EXPECT_EQ(response.status().code(), Code::kTimedOut);
  EXPECT_GE(millis_between(started, Clock::now()), 300);
  EXPECT_LT(millis_between(started, Clock::now()), 5000);
  ::close(silent);
}

TEST_F(HttpTest, KeysAreIdempotentAndReplaceable) {
  const std::string jobs = "/v1/tubes/orders/jobs";
  const std::uint64_t first = put("orders", R"({"body":"a","delay":"1h","key":"order-9"})");
  // The same key again: 200 with the job that holds it, nothing new.
  const json::object again = expect(200, "POST", jobs, R"({"body":"b","key":"order-9"})");
  EXPECT_EQ(again.at("id").to_number<std::uint64_t>(), first);
  EXPECT_EQ(text(expect(200, "GET", "/v1/tubes/orders/keys/order-9"), "body"), "a");
  // replace: a new job takes the key, the old one is gone.
  const std::uint64_t second =
      put("orders", R"({"body":"c","delay":"1h","key":"order-9","replace":true})");
  EXPECT_NE(second, first);
  EXPECT_EQ(error_code(404, "GET", id_path(first)), "not_found");
  // Reschedule and reprioritise by key, then delete by key.
  const json::object moved =
      expect(200, "PATCH", "/v1/tubes/orders/keys/order-9", R"({"delay":0,"priority":5})");
  EXPECT_EQ(text(moved, "state"), "ready");
  EXPECT_EQ(moved.at("priority").to_number<std::int64_t>(), 5);
  EXPECT_EQ(expect(200, "DELETE", "/v1/tubes/orders/keys/order-9")
                .at("deleted")
                .to_number<std::uint64_t>(),
            second);
  EXPECT_EQ(error_code(404, "GET", "/v1/tubes/orders/keys/order-9"), "not_found");
  EXPECT_EQ(error_code(404, "PATCH", "/v1/tubes/orders/keys/order-9", R"({"delay":0})"),
            "not_found");
  EXPECT_EQ(error_code(404, "DELETE", "/v1/tubes/orders/keys/order-9"), "not_found");
}

TEST_F(HttpTest, PatchReschedulesAndReprioritises) {
  const std::uint64_t id = put("t", R"({"body":"x","delay":"1h"})");
  const json::object later = expect(200, "PATCH", id_path(id), R"({"delay":"2h"})");
  EXPECT_EQ(text(later, "state"), "delayed");
  EXPECT_EQ(later.at("delay_ms").to_number<std::int64_t>(), 7200000);
  const json::object at = expect(200, "PATCH", id_path(id), R"({"at":"2098-05-01T12:00:00Z"})");
  EXPECT_EQ(text(at, "due"), "2098-05-01T12:00:00.000Z");
  EXPECT_EQ(expect(200, "PATCH", id_path(id), R"({"priority":3})")
                .at("priority")
                .to_number<std::int64_t>(),
            3);
  EXPECT_EQ(error_code(400, "PATCH", id_path(id), "{}"), "bad_request");
  EXPECT_EQ(error_code(400, "PATCH", id_path(id), R"({"ttr":"5s"})"), "bad_request");
  EXPECT_EQ(error_code(404, "PATCH", id_path(id + 100), R"({"delay":0})"), "not_found");
  // A reserved job cannot be moved: 409.
  expect(200, "PATCH", id_path(id), R"({"delay":0})");
  expect(200, "POST", "/v1/reserve", R"({"tubes":["t"]})");
  EXPECT_EQ(error_code(409, "PATCH", id_path(id), R"({"delay":"1h"})"), "conflict");
}

// Any HTTP caller may finish a job reserved over HTTP, through any connection (in Redis mode the
// second connection is to the other node).
TEST_F(HttpTest, AJobReservedOverHttpIsFinishedThroughAnyConnection) {
  const auto id = put("shared", R"({"body":"x","ttr":"60s"})");
  expect(200, "POST", "/v1/reserve", R"({"tubes":["shared"]})");
  front::http::Client other("127.0.0.1", server_->http_port());
  const std::string path = "/v1/jobs/" + std::to_string(id);
  auto touched = other.request("POST", path + "/touch", "");
  ASSERT_TRUE(touched.is_ok());
  EXPECT_EQ(touched.value().status, 200u) << touched.value().body;
  auto deleted = other.request("DELETE", path, "");
  ASSERT_TRUE(deleted.is_ok());
  EXPECT_EQ(deleted.value().status, 200u) << deleted.value().body;
  EXPECT_EQ(error_code(404, "GET", path), "not_found");
}

// A tube named by a waiting long-poll exists while the poll waits: found, listed, with its
// waiter; then it is gone. (Both requests go to one node: over Redis, waiters count per node.)
TEST_F(HttpTest, ATubeExistsWhileALongPollWaitsForIt) {
  const std::string& address = server_->http_address();
  const auto port = static_cast<std::uint16_t>(std::stoi(address.substr(address.rfind(':') + 1)));
  front::http::Client poller("127.0.0.1", port);
  front::http::Client looker("127.0.0.1", port);
  std::thread poll([&poller] {
    (void)poller.request("POST", "/v1/reserve", R"({"tubes":["waited-for"],"timeout":"2s"})",
                         Millis{10000});
  });
  bool found = false;
  for (int i = 0; i < 150 && !found; ++i) {  // at most 1.5 s: the poll waits 2 s
    auto response = looker.request("GET", "/v1/tubes/waited-for", "");
    found = response.is_ok() && response.value().status == 200 &&
            response.value().body.find(R"("waiting":1)") != std::string::npos;
    if (!found) std::this_thread::sleep_for(Millis{10});
  }
  auto listed = looker.request("GET", "/v1/tubes", "");
  poll.join();
  EXPECT_TRUE(found) << "the tube of a waiting long-poll was not found with its waiter";
  ASSERT_TRUE(listed.is_ok());
  EXPECT_NE(listed.value().body.find(R"("name":"waited-for")"), std::string::npos)
      << listed.value().body;
  auto after = looker.request("GET", "/v1/tubes/waited-for", "");
  ASSERT_TRUE(after.is_ok());
  EXPECT_EQ(after.value().status, 404u) << after.value().body;
}

TEST_F(HttpTest, GroupsListAndCancel) {
  for (int i = 0; i < 3; ++i) put("shop", R"({"body":"x","delay":"1h","group":"order-5"})");
  put("shop", R"({"body":"other","delay":"1h","group":"order-6"})");
  const json::object listed = expect(200, "GET", "/v1/tubes/shop/groups/order-5");
  EXPECT_EQ(listed.at("jobs").as_array().size(), 3u);
  EXPECT_EQ(text(listed.at("jobs").as_array()[0].as_object(), "group"), "order-5");
  EXPECT_EQ(expect(200, "DELETE", "/v1/tubes/shop/groups/order-5")
                .at("cancelled")
                .to_number<std::uint64_t>(),
            3u);
  EXPECT_TRUE(expect(200, "GET", "/v1/tubes/shop/groups/order-5").at("jobs").as_array().empty());
  EXPECT_EQ(expect(200, "GET", "/v1/tubes/shop/groups/order-6").at("jobs").as_array().size(), 1u);
}

TEST_F(HttpTest, LongPollAnswersWhenTheJobIsDueNotAtTheTimeout) {
  const std::uint64_t id = put("poll", R"({"body":"due soon","delay":"1s"})");
  const json::object job = expect(200, "GET", id_path(id));
  const std::int64_t due = job.at("due_unix_ms").to_number<std::int64_t>();
  const auto started = Clock::now();
  const ClientResponse got =
      call("POST", "/v1/reserve", R"({"tubes":["poll"],"timeout":"20s"})", Millis{30000});
  const std::int64_t answered_unix_ms =
      std::chrono::duration_cast<Millis>(std::chrono::system_clock::now().time_since_epoch())
          .count();
  ASSERT_EQ(got.status, 200u) << got.body;
  const json::object reserved = json::parse(got.body).as_object();
  EXPECT_EQ(reserved.at("id").to_number<std::uint64_t>(), id);
  EXPECT_EQ(text(reserved, "state"), "reserved");
  EXPECT_EQ(text(reserved, "body"), "due soon");
  EXPECT_GE(answered_unix_ms, due) << "reserved before it was due";
  // Well before the 20 s timeout (generous for a loaded machine).
  EXPECT_LT(millis_between(started, Clock::now()), 10000);
}

TEST_F(HttpTest, ReserveTimesOutWith204) {
  const auto started = Clock::now();
  const ClientResponse none =
      call("POST", "/v1/reserve", R"({"tubes":["empty"],"timeout":"300ms"})");
  EXPECT_EQ(none.status, 204u);
  EXPECT_TRUE(none.body.empty());
  EXPECT_GE(millis_between(started, Clock::now()), 300);
  EXPECT_EQ(call("POST", "/v1/reserve", R"({"tubes":["empty"]})").status, 204u);  // no wait
  EXPECT_EQ(error_code(400, "POST", "/v1/reserve", R"({"tubes":[]})"), "bad_request");
  EXPECT_EQ(error_code(400, "POST", "/v1/reserve", R"({"tubes":"a"})"), "bad_request");
  EXPECT_EQ(error_code(400, "POST", "/v1/reserve", R"({"timeout":"2h"})"), "bad_request");
}

// A reserve with a count: the jobs ready at once, best first, each reserved as a reserve of its
// own would reserve it; a long-poll still answers with the first job that comes.
TEST_F(HttpTest, AReserveWithACountTakesUpToThatManyJobs) {
  std::vector<std::uint64_t> ids;
  for (int priority : {5, 1, 3, 9, 7}) {
    ids.push_back(put("many", R"({"body":"p)" + std::to_string(priority) + R"(","priority":)" +
                                  std::to_string(priority) + "}"));
  }
  const json::object three = expect(200, "POST", "/v1/reserve", R"({"tubes":["many"],"count":3})");
  const json::array& first = three.at("jobs").as_array();
  ASSERT_EQ(first.size(), 3U);
  EXPECT_EQ(text(first[0].as_object(), "body"), "p1");
  EXPECT_EQ(text(first[1].as_object(), "body"), "p3");
  EXPECT_EQ(text(first[2].as_object(), "body"), "p5");
  for (const auto& job : first) {
    EXPECT_EQ(text(job.as_object(), "state"), "reserved");
    EXPECT_TRUE(job.as_object().contains("reserved_until"));
  }
  const json::object rest =
      expect(200, "POST", "/v1/reserve", R"({"tubes":["many"],"count":10,"timeout":"5s"})");
  ASSERT_EQ(rest.at("jobs").as_array().size(), 2U) << "the two left, at once";
  const json::object tube = expect(200, "GET", "/v1/tubes/many");
  EXPECT_EQ(tube.at("reserved").to_number<std::int64_t>(), 5);
  for (const auto& job : first) {
    expect(200, "DELETE", id_path(job.as_object().at("id").to_number<std::uint64_t>()));
  }
  EXPECT_EQ(call("POST", "/v1/reserve", R"({"tubes":["many"],"count":5,"timeout":"200ms"})").status,
            204U);
  // A long-poll with a count answers when the first job is due, with it alone.
  const std::uint64_t later = put("many-later", R"({"body":"soon","delay":"500ms"})");
  const ClientResponse polled =
      call("POST", "/v1/reserve", R"({"tubes":["many-later"],"count":4,"timeout":"20s"})",
           Millis{30000});
  ASSERT_EQ(polled.status, 200U) << polled.body;
  const json::value answer = json::parse(polled.body);
  const json::array& came = answer.as_object().at("jobs").as_array();
  ASSERT_EQ(came.size(), 1U);
  EXPECT_EQ(came[0].as_object().at("id").to_number<std::uint64_t>(), later);
  for (const char* bad : {R"({"count":0})", R"({"count":101})", R"({"count":"3"})"}) {
    EXPECT_EQ(error_code(400, "POST", "/v1/reserve", bad), "bad_request") << bad;
  }
}

TEST_F(HttpTest, ReservedJobLifecycle) {
  const std::uint64_t id = put("work", R"({"body":"job","ttr":"30s"})");
  const json::object reserved = expect(200, "POST", "/v1/reserve", R"({"tubes":["work"]})");
  ASSERT_EQ(reserved.at("id").to_number<std::uint64_t>(), id);
  EXPECT_TRUE(reserved.contains("reserved_until"));
  EXPECT_EQ(text(expect(200, "POST", id_path(id, "/touch")), "state"), "reserved");
  const json::object released =
      expect(200, "POST", id_path(id, "/release"), R"({"delay":"1h","priority":9})");
  EXPECT_EQ(text(released, "state"), "delayed");
  EXPECT_EQ(released.at("priority").to_number<std::int64_t>(), 9);
  // Not reserved any more: release, bury and touch are conflicts; an unknown job is not found.
  EXPECT_EQ(error_code(409, "POST", id_path(id, "/release")), "conflict");
  EXPECT_EQ(error_code(409, "POST", id_path(id, "/bury")), "conflict");
  EXPECT_EQ(error_code(409, "POST", id_path(id, "/touch")), "conflict");
  EXPECT_EQ(error_code(404, "POST", id_path(id + 50, "/touch")), "not_found");
  // Kick the delayed job, reserve it again, bury it, kick it back, finish it with DELETE.
  EXPECT_EQ(text(expect(200, "POST", id_path(id, "/kick")), "state"), "ready");
  EXPECT_EQ(error_code(409, "POST", id_path(id, "/kick")), "conflict");
  expect(200, "POST", "/v1/reserve", R"({"tubes":["work"]})");
  EXPECT_EQ(text(expect(200, "POST", id_path(id, "/bury")), "state"), "buried");
  EXPECT_EQ(expect(200, "POST", "/v1/tubes/work/kick", R"({"bound":10})")
                .at("kicked")
                .to_number<std::uint64_t>(),
            1u);
  const json::object again = expect(200, "POST", "/v1/reserve", R"({"tubes":["work"]})");
  EXPECT_EQ(again.at("counters").as_object().at("reserves").to_number<std::uint64_t>(), 3u);
  expect(200, "DELETE", id_path(id));
  EXPECT_EQ(error_code(404, "GET", id_path(id)), "not_found");
  EXPECT_EQ(error_code(404, "GET", "/v1/tubes/work"),
            "not_found");  // empty tubes go, as beanstalkd
}

TEST_F(HttpTest, BothProtocolsSeeTheSameJobs) {
  Client beanstalk(server_->port());
  // beanstalkd put, HTTP get.
  ASSERT_EQ(beanstalk.call("use cross\r\n"), "USING cross\r\n");
  const auto id = inserted_id(beanstalk.call(put_command("from beanstalk", 5, 3600)));
  ASSERT_TRUE(id.has_value());
  const json::object seen = expect(200, "GET", id_path(*id));
  EXPECT_EQ(text(seen, "body"), "from beanstalk");
  EXPECT_EQ(text(seen, "tube"), "cross");
  // HTTP put, beanstalkd reserve.
  const std::uint64_t http_id = put("cross", R"({"body":"from http","priority":1})");
  ASSERT_EQ(beanstalk.call("watch cross\r\n"), "WATCHING 2\r\n");
  EXPECT_EQ(beanstalk.call("reserve-with-timeout 0\r\n"),
            job_reply("RESERVED", http_id, "from http"));
  // A job a beanstalkd connection holds cannot be finished over HTTP.
  EXPECT_EQ(error_code(409, "DELETE", id_path(http_id)), "conflict");
  EXPECT_EQ(error_code(409, "POST", id_path(http_id, "/release")), "conflict");
  EXPECT_EQ(beanstalk.call("delete " + std::to_string(http_id) + "\r\n"), "DELETED\r\n");
  // HTTP's reservations are not the beanstalkd connection's.
  const std::uint64_t third = put("cross", R"({"body":"third"})");
  expect(200, "POST", "/v1/reserve", R"({"tubes":["cross"]})");
  EXPECT_EQ(beanstalk.call("delete " + std::to_string(third) + "\r\n"), "NOT_FOUND\r\n");
  // The HTTP API's own clients do not show up as connections in beanstalkd's stats.
  const std::string stats = beanstalk.call("stats\r\n");
  EXPECT_NE(stats.find("current-connections: 1\n"), std::string::npos) << stats;
  const std::string tube = beanstalk.call("stats-tube default\r\n");
  EXPECT_NE(tube.find("current-using: 0\n"), std::string::npos) << tube;
}

TEST_F(HttpTest, AbandonedLongPollDoesNotSwallowAJob) {
  {
    Client raw(server_->http_port());
    const std::string body = R"({"tubes":["gone"],"timeout":"30s"})";
    raw.send("POST /v1/reserve HTTP/1.1\r\nHost: x\r\nContent-Length: " +
             std::to_string(body.size()) + "\r\n\r\n" + body);
    EXPECT_TRUE(raw.silent_for(Millis{200}));  // it waits
  }                                            // and goes away
  // Once the server has seen it go, the next job goes to someone who is still there.
  std::this_thread::sleep_for(Millis{200});
  const std::uint64_t id = put("gone", R"({"body":"for the living"})");
  const json::object got = expect(200, "POST", "/v1/reserve", R"({"tubes":["gone"]})");
  EXPECT_EQ(got.at("id").to_number<std::uint64_t>(), id);
}

TEST_F(HttpTest, TubesStatsHealth) {
  put("a", R"({"body":"x","delay":"1h"})");
  put("a", R"({"body":"y"})");
  const json::object tubes = expect(200, "GET", "/v1/tubes");
  std::map<std::string, json::object> by_name;
  for (const auto& t : tubes.at("tubes").as_array()) {
    by_name[std::string(t.as_object().at("name").as_string())] = t.as_object();
  }
  ASSERT_TRUE(by_name.count("a"));
  ASSERT_TRUE(by_name.count("default"));
  EXPECT_EQ(by_name["a"].at("delayed").to_number<std::uint64_t>(), 1u);
  EXPECT_EQ(by_name["a"].at("ready").to_number<std::uint64_t>(), 1u);
  EXPECT_EQ(error_code(404, "GET", "/v1/tubes/nope"), "not_found");

  // Pause: a reserve from the tube finds nothing until the pause ends.
  EXPECT_EQ(expect(200, "POST", "/v1/tubes/a/pause", R"({"delay":"1h"})")
                .at("pause_s")
                .to_number<std::int64_t>(),
            3600);
  EXPECT_EQ(call("POST", "/v1/reserve", R"({"tubes":["a"]})").status, 204u);
  EXPECT_EQ(error_code(400, "POST", "/v1/tubes/a/pause", "{}"), "bad_request");

  const json::object stats = expect(200, "GET", "/v1/stats");
  EXPECT_EQ(stats.at("ready").to_number<std::uint64_t>(), 1u);
  EXPECT_EQ(stats.at("delayed").to_number<std::uint64_t>(), 1u);
  EXPECT_EQ(stats.at("total_jobs").to_number<std::uint64_t>(), 2u);
  EXPECT_EQ(text(expect(200, "GET", "/healthz"), "status"), "ok");
  EXPECT_EQ(text(expect(200, "GET", "/readyz"), "status"), "ready");

  // Drain mode: not ready, and puts are refused; what is there is still served.
  ASSERT_TRUE(server_->signal(SIGUSR1));
  for (int i = 0; i < 100 && call("GET", "/readyz").status != 503; ++i) {
    std::this_thread::sleep_for(Millis{20});
  }
  EXPECT_EQ(error_code(503, "GET", "/readyz"), "draining");
  EXPECT_EQ(error_code(503, "POST", "/v1/tubes/a/jobs", R"({"body":"z"})"), "draining");
  EXPECT_TRUE(expect(200, "GET", "/v1/stats").at("draining").as_bool());
}

bool metric_name(std::string_view name) {
  if (name.empty() || std::isdigit(static_cast<unsigned char>(name[0]))) return false;
  for (const char c : name) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && c != ':') return false;
  }
  return true;
}

// A sample line: name, optional {label="value",...} (values with \\ \" \n escapes), a space,
// a number. Sets *name.
bool parse_sample(std::string_view line, std::string* name) {
  std::size_t i = 0;
  while (i < line.size() && line[i] != '{' && line[i] != ' ') ++i;
  *name = std::string(line.substr(0, i));
  if (!metric_name(*name)) return false;
  if (i < line.size() && line[i] == '{') {
    ++i;
    while (i < line.size() && line[i] != '}') {
      const std::size_t start = i;
      while (i < line.size() && line[i] != '=') ++i;
      if (!metric_name(line.substr(start, i - start)) || line.substr(i, 2) != "=\"") return false;
      for (i += 2; i < line.size() && line[i] != '"'; ++i) {
        if (line[i] == '\\') ++i;  // an escape: skip what it escapes
      }
      if (i >= line.size()) return false;
      ++i;  // the closing quote
      if (i < line.size() && line[i] == ',') ++i;
    }
    if (i >= line.size()) return false;
    ++i;  // '}'
  }
  if (i >= line.size() || line[i] != ' ') return false;
  const std::string value(line.substr(i + 1));
  if (value == "+Inf" || value == "-Inf" || value == "NaN") return true;
  char* end = nullptr;
  std::strtod(value.c_str(), &end);
  return !value.empty() && end == value.c_str() + value.size();
}

// The exposition format (0.0.4): comments, then samples "name{labels} value"; a TYPE line
// before a metric's samples; histogram buckets cumulative with +Inf equal to _count.
TEST_F(HttpTest, MetricsAreValidPrometheusText) {
  put("m", R"({"body":"x","delay":"100ms"})");
  expect(200, "POST", "/v1/reserve", R"({"tubes":["m"],"timeout":"5s"})");
  call("GET", "/v1/jobs/999999");
  const ClientResponse page = call("GET", "/metrics");
  ASSERT_EQ(page.status, 200u);
  EXPECT_EQ(page.headers.at("content-type").rfind("text/plain; version=0.0.4", 0), 0u);

  std::map<std::string, std::string> types;
  std::map<std::string, double> values;  // full sample text before the value -> value
  std::vector<std::pair<std::string, double>> in_order;
  std::istringstream lines(page.body);
  std::string line;
  while (std::getline(lines, line)) {
    if (line.rfind("# HELP ", 0) == 0) continue;
    if (line.rfind("# TYPE ", 0) == 0) {
      std::istringstream words(line.substr(7));
      std::string name, kind, rest;
      words >> name >> kind;
      EXPECT_TRUE(metric_name(name) &&
                  (kind == "counter" || kind == "gauge" || kind == "histogram") && !(words >> rest))
          << "bad TYPE line: " << line;
      EXPECT_FALSE(types.count(name)) << "TYPE twice: " << line;
      types[name] = kind;
      continue;
    }
    std::string family;
    ASSERT_TRUE(parse_sample(line, &family)) << "not a sample: " << line;
    for (const char* suffix : {"_bucket", "_sum", "_count"}) {
      const std::string s(suffix);
      if (family.size() > s.size() && family.compare(family.size() - s.size(), s.size(), s) == 0 &&
          types.count(family.substr(0, family.size() - s.size()))) {
        family = family.substr(0, family.size() - s.size());
      }
    }
    EXPECT_TRUE(types.count(family)) << "sample before its TYPE: " << line;
    const double value = std::stod(line.substr(line.rfind(' ') + 1));
    values[line.substr(0, line.rfind(' '))] = value;
    in_order.emplace_back(line.substr(0, line.rfind(' ')), value);
  }
  for (const char* histogram :
       {"delayq_fire_lateness_seconds", "delayq_commit_batch_steps", "delayq_fsync_seconds"}) {
    EXPECT_EQ(types[histogram], "histogram");
    double previous = 0;
    int buckets = 0;
    for (const auto& [key, value] : in_order) {
      if (key.rfind(std::string(histogram) + "_bucket{", 0) != 0) continue;
      EXPECT_GE(value, previous) << key << " is below the bucket before it";
      previous = value;
      ++buckets;
    }
    EXPECT_GE(buckets, 2) << histogram;
    const double inf = values[std::string(histogram) + "_bucket{le=\"+Inf\"}"];
    EXPECT_EQ(inf, previous) << histogram << ": +Inf must be the last bucket";
    EXPECT_EQ(inf, values[std::string(histogram) + "_count"]) << histogram;
  }
  // What happened above shows: one job fired late by some amount, puts and reserves counted.
  EXPECT_GE(values["delayq_fire_lateness_seconds_count"], 1);
  EXPECT_GE(values["delayq_fsync_seconds_count"], 1);
  EXPECT_EQ(values[R"(delayq_operations_total{protocol="http",op="put_job",result="201"})"], 1);
  EXPECT_EQ(values[R"(delayq_operations_total{protocol="http",op="get_job",result="404"})"], 1);
  EXPECT_EQ(values[R"(delayq_jobs{tube="m",state="reserved"})"], 1);
  EXPECT_EQ(values[R"(delayq_connections{protocol="http"})"], 1);
}

TEST_F(HttpTest, AnAcknowledgedPutSurvivesKill9) {
  std::vector<std::uint64_t> ids;
  for (int i = 0; i < 20; ++i) {
    ids.push_back(
        put("durable", R"({"body":"keep me )" + std::to_string(i) + R"(","delay":"1h"})"));
  }
  EXPECT_EQ(server_->kill9(), "killed by signal 9");
  ASSERT_EQ(server_->start(), "");
  http_ = std::make_unique<front::http::Client>("127.0.0.1", server_->http_port());
  for (int i = 0; i < 20; ++i) {
    EXPECT_EQ(text(expect(200, "GET", id_path(ids[static_cast<std::size_t>(i)])), "body"),
              "keep me " + std::to_string(i));
  }
}

// A connection over --http-max-connections gets a 503 with code "limit" and is closed; the
// others are served.
TEST(HttpLimitTest, AConnectionOverTheLimitGets503AndTheOthersAreServed) {
  TempDir dir;
  ServerProcess server(dir.path() / "db", {"--http-max-connections", "2"});
  ASSERT_EQ(server.start(), "");
  const std::uint16_t port = server.http_port();  // one node's, in Redis mode too
  std::vector<std::unique_ptr<front::http::Client>> held;
  for (int i = 0; i < 2; ++i) {
    held.push_back(std::make_unique<front::http::Client>("127.0.0.1", port));
    auto alive = held.back()->request("GET", "/healthz", "", kReplyTimeout);  // accepted
    ASSERT_TRUE(alive.is_ok() && alive.value().status == 200u);
  }
  Client third("127.0.0.1", port);
  ASSERT_TRUE(third.connected()) << third.error();
  EXPECT_EQ(third.read_line().value_or("<none>"), "HTTP/1.1 503 Service Unavailable\r\n");
  std::string headers;
  std::size_t length = 0;
  while (auto line = third.read_line()) {
    if (*line == "\r\n") break;
    headers += *line;
    if (line->starts_with("Content-Length: ")) length = std::stoul(line->substr(16));
  }
  EXPECT_NE(headers.find("Retry-After: 1\r\n"), std::string::npos) << headers;
  const std::string body = third.read_exact(length).value_or("<none>");
  EXPECT_NE(body.find(R"("code":"limit")"), std::string::npos) << body;
  EXPECT_TRUE(third.closed_by_server());
  for (auto& client : held) {
    auto served = client->request("GET", "/healthz", "", kReplyTimeout);
    EXPECT_TRUE(served.is_ok() && served.value().status == 200u);
  }
  EXPECT_EQ(server.stop(), "exited 0");
}

// A backup of a running server is a data directory: a server started on it has every job the
// first one had when the backup was taken (bodies, keys, states), and nothing done after it.
TEST_F(HttpTest, ABackupIsADataDirectoryAsOfItsMoment) {
  const std::string copy = (dir_.path() / "copy").string();
  if (ServerProcess::redis_mode()) {
    EXPECT_EQ(error_code(501, "POST", "/v1/admin/backup", R"({"dir":")" + copy + R"("})"),
              "unsupported");
    EXPECT_EQ(error_code(501, "POST", "/v1/admin/backup", "{}"), "unsupported")
        << "whatever the body, Redis mode has no backup";
    return;
  }
  const std::uint64_t kept = put("orders", R"({"body":"cancel order 7","delay":"1h","key":"o7"})");
  const std::uint64_t ready = put("orders", R"({"body":"ready now"})");
  const std::uint64_t deleted_later = put("orders", R"({"body":"gone after","delay":"2h"})");

  const json::object done = expect(200, "POST", "/v1/admin/backup", R"({"dir":")" + copy + R"("})");
  EXPECT_EQ(text(done, "dir"), copy);
  EXPECT_EQ(done.at("jobs").to_number<std::uint64_t>(), 3u);
  EXPECT_GT(done.at("bytes").to_number<std::uint64_t>(), 0u);
  EXPECT_TRUE(std::filesystem::is_directory(copy));

  // After the backup: one job deleted, one put. Neither is in the copy.
  expect(200, "DELETE", id_path(deleted_later));
  const std::uint64_t put_later = put("orders", R"({"body":"after the backup"})");

  // Bad requests: no dir, a relative one, one that exists, one whose parent does not.
  EXPECT_EQ(error_code(400, "POST", "/v1/admin/backup", "{}"), "bad_request");
  EXPECT_EQ(error_code(400, "POST", "/v1/admin/backup", R"({"dir":"relative/dir"})"),
            "bad_request");
  EXPECT_EQ(error_code(400, "POST", "/v1/admin/backup", R"({"dir":")" + copy + R"("})"),
            "bad_request");
  EXPECT_EQ(error_code(400, "POST", "/v1/admin/backup",
                       R"({"dir":")" + (dir_.path() / "no" / "such").string() + R"("})"),
            "bad_request");
  EXPECT_EQ(error_code(400, "POST", "/v1/admin/backup",
                       R"({"dir":")" + (dir_.path() / "nul").string() + R"(\u0000x"})"),
            "bad_request");
  // Not where the copy is written first (<dir>.tmp, emptied by RocksDB), nor inside the data
  // directory: refused, and nothing there is touched.
  std::filesystem::create_directories(dir_.path() / "staged.tmp");
  { std::ofstream(dir_.path() / "staged.tmp" / "precious") << "kept"; }
  EXPECT_EQ(error_code(400, "POST", "/v1/admin/backup",
                       R"({"dir":")" + (dir_.path() / "staged").string() + R"("})"),
            "bad_request");
  EXPECT_TRUE(std::filesystem::exists(dir_.path() / "staged.tmp" / "precious"));
  EXPECT_EQ(error_code(400, "POST", "/v1/admin/backup",
                       R"({"dir":")" + (dir_.path() / "db" / "inside").string() + R"("})"),
            "bad_request");
  EXPECT_FALSE(std::filesystem::exists(dir_.path() / "db" / "inside"));

  // A trailing slash names the directory without it.
  const std::string second = (dir_.path() / "second").string();
  EXPECT_EQ(
      text(expect(200, "POST", "/v1/admin/backup", R"({"dir":")" + second + R"(//"})"), "dir"),
      second);

  // Restore: a server on the copy (the first one goes on running on its own directory).
  ServerProcess restored(copy);
  ASSERT_EQ(restored.start(), "");
  front::http::Client client("127.0.0.1", restored.http_port());
  auto get = [&client](const std::string& target) {
    auto response = client.request("GET", target, "", kReplyTimeout);
    EXPECT_TRUE(response.is_ok()) << target;
    return response.is_ok() ? response.value() : ClientResponse{};
  };
  const ClientResponse by_key = get("/v1/tubes/orders/keys/o7");
  ASSERT_EQ(by_key.status, 200u) << by_key.body;
  const json::object job = json::parse(by_key.body).as_object();
  EXPECT_EQ(job.at("id").to_number<std::uint64_t>(), kept);
  EXPECT_EQ(text(job, "body"), "cancel order 7");
  EXPECT_EQ(text(job, "state"), "delayed");
  const ClientResponse ready_job = get(id_path(ready));
  ASSERT_EQ(ready_job.status, 200u);
  EXPECT_EQ(text(json::parse(ready_job.body).as_object(), "state"), "ready");
  EXPECT_EQ(get(id_path(deleted_later)).status, 200u) << "deleted after the backup: still in it";
  EXPECT_EQ(get(id_path(put_later)).status, 404u) << "put after the backup: not in it";
  // The copy's ids go on from its own high-water mark, never reusing one it has seen.
  auto created =
      client.request("POST", "/v1/tubes/orders/jobs", R"({"body":"new"})", kReplyTimeout);
  ASSERT_TRUE(created.is_ok());
  EXPECT_GT(json::parse(created.value().body).at("id").to_number<std::uint64_t>(), deleted_later);
  EXPECT_EQ(restored.stop(), "exited 0");
}

}  // namespace
}  // namespace delayq::testing

namespace delayq::testing {
namespace {

// Runs a shell command; its stdout (stderr too with `2>&1` in the command) and exit status.
std::pair<int, std::string> shell(const std::string& command) {
  std::string out;
  FILE* pipe = ::popen(command.c_str(), "r");
  if (pipe == nullptr) return {-1, out};
  char buffer[4096];
  std::size_t n = 0;
  while ((n = std::fread(buffer, 1, sizeof buffer, pipe)) > 0) out.append(buffer, n);
  const int status = ::pclose(pipe);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
}

// The HTTP API over TLS (--tls-cert, --tls-key), spoken to by `openssl s_client`, which checks
// the certificate against the one the test made; plain HTTP on that port gets no answer.
TEST(HttpTlsTest, TheApiSpeaksHttpsWithTheGivenCertificate) {
  if (shell("command -v openssl").first != 0) GTEST_SKIP() << "openssl is not installed";
  TempDir dir;
  const std::string cert = (dir.path() / "cert.pem").string();
  const std::string key = (dir.path() / "key.pem").string();
  const auto made =
      shell("openssl req -x509 -newkey rsa:2048 -nodes -keyout " + key + " -out " + cert +
            " -days 1 -subj /CN=127.0.0.1 -addext subjectAltName=IP:127.0.0.1" + " 2>&1");
  ASSERT_EQ(made.first, 0) << made.second;
  ServerProcess server(dir.path() / "db", {"--tls-cert", cert, "--tls-key", key});
  ASSERT_EQ(server.start(), "");
  const std::string port = std::to_string(server.http_port());
  const auto answer = shell(
      "printf 'GET /v1/stats HTTP/1.1\\r\\nHost: x\\r\\nConnection: close\\r\\n\\r\\n' | "
      "timeout 10 openssl s_client -quiet -verify_return_error -CAfile " +
      cert + " -connect 127.0.0.1:" + port + " 2>/dev/null");
  EXPECT_EQ(answer.first, 0) << answer.second;
  EXPECT_TRUE(answer.second.starts_with("HTTP/1.1 200 OK\r\n")) << answer.second;
  EXPECT_NE(answer.second.find("\"version\""), std::string::npos) << answer.second;

  front::http::Client plain("127.0.0.1", server.http_port());
  auto refused = plain.request("GET", "/v1/stats", "", Millis{2000});
  EXPECT_TRUE(!refused.is_ok() || refused.value().status == 0) << "plain HTTP was answered";

  // A key that does not exist is refused at start, not served in the clear.
  ServerProcess broken(dir.path() / "db2", {"--tls-cert", cert, "--tls-key", cert + ".missing"});
  EXPECT_NE(broken.start(), "");
}

}  // namespace
}  // namespace delayq::testing
