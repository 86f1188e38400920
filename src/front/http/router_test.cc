// router_test.cc — the route table: matching, captures, 404 against 405, and the OpenAPI
// document (docs/openapi.yaml) listing exactly the routes the router serves.
#include "front/http/router.h"

#include <gtest/gtest.h>

#include <fstream>
#include <set>
#include <sstream>

namespace delayq::front::http {
namespace {

TEST(Router, MatchesRoutesAndCaptures) {
  Match m = match("POST", "/v1/tubes/orders/jobs");
  ASSERT_EQ(m.kind, Match::Kind::kFound);
  EXPECT_EQ(m.route, Route::kPutJob);
  EXPECT_EQ(m.params, std::vector<std::string>{"orders"});

  m = match("GET", "/v1/tubes/orders/keys/order%2F123?x=1");
  ASSERT_EQ(m.kind, Match::Kind::kFound);
  EXPECT_EQ(m.route, Route::kGetKey);
  EXPECT_EQ(m.params, (std::vector<std::string>{"orders", "order/123"}));

  EXPECT_EQ(match("GET", "/v1/jobs/17").route, Route::kGetJob);
  EXPECT_EQ(match("DELETE", "/v1/jobs/17").route, Route::kDeleteJob);
  EXPECT_EQ(match("POST", "/v1/jobs/17/release").route, Route::kReleaseJob);
  EXPECT_EQ(match("GET", "/v1/tubes").route, Route::kListTubes);
  EXPECT_EQ(match("GET", "/v1/tubes/a").route, Route::kGetTube);
  EXPECT_EQ(match("GET", "/metrics").route, Route::kMetrics);
}

TEST(Router, NoPathAndNoMethod) {
  EXPECT_EQ(match("GET", "/v1/nothing").kind, Match::Kind::kNoPath);
  EXPECT_EQ(match("GET", "/v1/jobs/").kind, Match::Kind::kNoPath);  // empty capture
  EXPECT_EQ(match("GET", "/v1/jobs/1/2/3").kind, Match::Kind::kNoPath);
  EXPECT_EQ(match("GET", "/v1/tubes/a%zz").kind, Match::Kind::kNoPath);  // bad escape
  EXPECT_EQ(match("GET", "").kind, Match::Kind::kNoPath);
  const Match m = match("PUT", "/v1/jobs/5");
  EXPECT_EQ(m.kind, Match::Kind::kNoMethod);
  EXPECT_EQ(m.allow, "GET, HEAD, PATCH, DELETE");
}

TEST(Router, PercentDecoding) {
  EXPECT_EQ(percent_decode("a%20b%2f").value(), "a b/");
  EXPECT_FALSE(percent_decode("%").has_value());
  EXPECT_FALSE(percent_decode("%4").has_value());
  EXPECT_FALSE(percent_decode("%g0").has_value());
}

// Every (path, method) of docs/openapi.yaml: a path is a line "  /..." under "paths:", its
// methods the lines "    get:" etc. below it.
std::set<std::pair<std::string, std::string>> openapi_operations() {
  std::ifstream file(std::string(DELAYQ_SOURCE_DIR) + "/docs/openapi.yaml");
  EXPECT_TRUE(file.good()) << "docs/openapi.yaml is missing";
  std::set<std::pair<std::string, std::string>> operations;
  std::string line, path;
  bool in_paths = false;
  while (std::getline(file, line)) {
    if (line == "paths:") {
      in_paths = true;
      continue;
    }
    if (!in_paths) continue;
    if (!line.empty() && line[0] != ' ' && line[0] != '#') break;  // the next top-level key
    if (line.rfind("  /", 0) == 0 && line.back() == ':') {
      path = line.substr(2, line.size() - 3);
      continue;
    }
    for (const char* method : {"get", "post", "patch", "delete", "put", "head"}) {
      if (line == std::string("    ") + method + ":") {
        std::string upper(method);
        for (char& c : upper) c = static_cast<char>(c - 'a' + 'A');
        operations.emplace(path, upper);
      }
    }
  }
  return operations;
}

TEST(ForeignRequest, AnotherSitesOriginOrANonLoopbackHostIsRefused) {
  // Same origin: the dashboard's own requests.
  EXPECT_EQ(foreign_request("127.0.0.1:8080", "http://127.0.0.1:8080", true), std::nullopt);
  EXPECT_EQ(foreign_request("LOCALHOST:8080", "http://localhost:8080", true), std::nullopt);
  EXPECT_EQ(foreign_request("[::1]:8080", "http://[::1]:8080", true), std::nullopt);
  EXPECT_EQ(foreign_request("127.0.0.1", "http://127.0.0.1:80", true), std::nullopt);
  EXPECT_EQ(foreign_request("q.example:443", "https://q.example", false), std::nullopt);
  // No Origin (curl, clients): only the Host counts, and only on a loopback listener.
  EXPECT_EQ(foreign_request("127.0.0.1:8080", "", true), std::nullopt);
  EXPECT_EQ(foreign_request("10.0.0.7:8080", "", true), std::nullopt);
  EXPECT_EQ(foreign_request("app.localhost:8080", "", true), std::nullopt);
  EXPECT_EQ(foreign_request("x", "", true), std::nullopt);  // a single label is no site's
  EXPECT_EQ(foreign_request("localhost.localdomain:8080", "", true), std::nullopt);
  EXPECT_EQ(foreign_request("", "", true), std::nullopt);
  EXPECT_EQ(foreign_request("delayq.internal:8080", "", false), std::nullopt);
  // DNS rebinding: a page's own name, resolved to 127.0.0.1.
  EXPECT_NE(foreign_request("rebind.evil.example:8080", "", true), std::nullopt);
  EXPECT_NE(foreign_request("localhost.evil.example", "", true), std::nullopt);
  // Cross-site requests.
  EXPECT_NE(foreign_request("127.0.0.1:8080", "http://evil.example", true), std::nullopt);
  EXPECT_NE(foreign_request("127.0.0.1:8080", "http://127.0.0.1:9999", true), std::nullopt);
  EXPECT_NE(foreign_request("127.0.0.1:8080", "null", true), std::nullopt);
  EXPECT_NE(foreign_request("q.example:8080", "https://evil.example", false), std::nullopt);
}

TEST(OriginForm, AnAbsoluteTargetGivesItsPathAndItsHost) {
  const auto check = [](std::string_view target, std::string_view path, std::string_view host) {
    const auto got = origin_form(target, "header.example");
    ASSERT_TRUE(got.is_ok()) << target;
    EXPECT_EQ(got.value().path, path) << target;
    EXPECT_EQ(got.value().host, host) << target;
  };
  check("/v1/stats?x=1", "/v1/stats?x=1", "header.example");
  check("*", "*", "header.example");
  check("http://127.0.0.1:8080/v1/stats?x=1", "/v1/stats?x=1", "127.0.0.1:8080");
  check("HTTPS://[::1]:8443/healthz", "/healthz", "[::1]:8443");
  check("http://q.example", "/", "q.example");
  check("http://q.example?x=1", "/?x=1", "q.example");
  check("http://user@q.example/a", "/a", "q.example");
  // Not an http URI: the router answers 404 for it, as for any unknown path.
  check("ftp://q.example/a", "ftp://q.example/a", "header.example");
  // An http URI names a host.
  EXPECT_FALSE(origin_form("http:///v1/stats", "header.example").is_ok());
  EXPECT_FALSE(origin_form("http://:8080/v1/stats", "header.example").is_ok());  // a port alone
  // Neither a path nor a URI: a bad request, not a path unknown.
  EXPECT_FALSE(origin_form("v1/stats", "header.example").is_ok());
  EXPECT_FALSE(origin_form("127.0.0.1:8080", "header.example").is_ok());  // CONNECT's
}

// RFC 9112 section 3.2: a Host field that is not a host and an optional port is a bad request.
TEST(OriginForm, AHostFieldIsAHostAndAnOptionalPort) {
  for (const char* good : {"", "q.example", "q.example:8080", "127.0.0.1:80", "[::1]:8443",
                           "[fe80::1%25eth0]", "my_host", "q.example:", "q.example:65535"}) {
    EXPECT_TRUE(origin_form("/v1/stats", good).is_ok()) << good;
  }
  for (const char* bad : {"127.0.0.1:33039@evil.com", "[::1", "[::1]x", "127.0.0.1:abc", "a b",
                          "evil\xe3\x80\x82"
                          "com",
                          "a:b:c", "[]", ":80", ":", "q.example:65536", "q.example:000080"}) {
    EXPECT_FALSE(origin_form("/v1/stats", bad).is_ok()) << bad;
  }
}

TEST(Router, OpenApiDocumentListsExactlyTheRoutes) {
  const auto documented = openapi_operations();
  std::set<std::pair<std::string, std::string>> served;
  for (const RouteEntry& entry : routes()) {
    served.emplace(std::string(entry.pattern), std::string(entry.method));
  }
  for (const auto& [path, method] : served) {
    EXPECT_TRUE(documented.count({path, method}))
        << method << " " << path << " is served but not in docs/openapi.yaml";
  }
  for (const auto& [path, method] : documented) {
    EXPECT_TRUE(served.count({path, method}))
        << method << " " << path << " is in docs/openapi.yaml but not served";
  }
}

}  // namespace
}  // namespace delayq::front::http
