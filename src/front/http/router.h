// router.h — the HTTP API's routes: one table of (method, pattern, route), and a pure match of a
// request's method and target against it. Patterns are literal segments and {name} captures; a
// capture matches one non-empty segment, percent-decoded. The table is the API's single list:
// the handlers, docs/http-api.md and docs/openapi.yaml follow it, and a test checks that every
// route is in the OpenAPI document and nothing else is. The query string is ignored.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/status.h"

namespace delayq::front::http {

enum class Route : std::uint8_t {
  kPutJob,
  kPutJobs,
  kGetJob,
  kPatchJob,
  kDeleteJob,
  kReleaseJob,
  kBuryJob,
  kTouchJob,
  kKickJob,
  kGetKey,
  kPatchKey,
  kDeleteKey,
  kListGroup,
  kCancelGroup,
  kReserve,
  kListTubes,
  kGetTube,
  kPatchTube,
  kKickTube,
  kPauseTube,
  kPutWebhook,
  kGetWebhook,
  kDeleteWebhook,
  kStats,
  kMetrics,
  kHealth,
  kReady,
  kBackup,
  kTubeDue,
  kDue,
  kListJobs,
  kPreviewSchedule,
  kPutSchedule,
  kListSchedules,
  kGetSchedule,
  kDeleteSchedule,
  kPauseSchedule,
  kResumeSchedule,
  kTriggerSchedule,
  kBackfillSchedule,
  kNextRuns,
  kCount  // not a route: how many there are
};

struct RouteEntry {
  std::string_view method;   // "GET", "POST", "PUT", "PATCH", "DELETE"
  std::string_view pattern;  // e.g. "/v1/tubes/{tube}/jobs"
  Route route;
  std::string_view name;  // for metrics and logs, e.g. "put_job"
};

[[nodiscard]] std::span<const RouteEntry> routes();
[[nodiscard]] std::string_view route_name(Route route);

struct Match {
  enum class Kind : std::uint8_t { kFound, kNoPath, kNoMethod };
  Kind kind = Kind::kNoPath;
  Route route = Route::kCount;
  // The captures, in the pattern's order, percent-decoded.
  std::vector<std::string> params;
  // kNoMethod: the methods the path does allow, for the Allow header ("GET, HEAD, DELETE").
  std::string allow;
};

[[nodiscard]] Match match(std::string_view method, std::string_view target);

// The query string of a target ("a=1&b=x%2Cy" after the '?'), as name and value pairs in order,
// each percent-decoded. No query: no pairs. kInvalidArgument for a malformed escape, or a name
// given twice (no parameter of the API takes a list that way).
[[nodiscard]] Result<std::vector<std::pair<std::string, std::string>>> query_params(
    std::string_view target);

// Percent-decoding of one path segment; nullopt if an escape is malformed.
[[nodiscard]] std::optional<std::string> percent_decode(std::string_view text);

// A request's target in origin form ("/v1/stats?x=1") and the host it is for. A target in
// absolute form ("http://127.0.0.1:8080/v1/stats", as a client sends through a proxy, and which
// a server must accept) names its host, which then stands for the Host header (RFC 9112, 3.2.2);
// kInvalidArgument if it names none (":8080" alone included). Any other target, and the host
// header, come back as they are.
struct Target {
  std::string path;
  std::string host;
};
[[nodiscard]] Result<Target> origin_form(std::string_view target, std::string_view host_header);

// Whether a request comes from a web page, which a server without tokens must not serve: a
// page may send requests to 127.0.0.1 (cross-site requests), and a name of its site may come to
// resolve to 127.0.0.1 (DNS rebinding). What tells: an Origin that is not the request's own
// Host, or, on a loopback listener, a Host that is a domain name (with a dot), not an address
// and not under "localhost". host, origin: the headers, empty when absent. The reason, or
// nullopt.
[[nodiscard]] std::optional<std::string> foreign_request(std::string_view host,
                                                         std::string_view origin,
                                                         bool loopback_listener);

}  // namespace delayq::front::http
