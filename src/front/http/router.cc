#include "front/http/router.h"

#include <algorithm>
#include <array>
#include <boost/asio/ip/address.hpp>
#include <boost/beast/core/string.hpp>

namespace delayq::front::http {

namespace beast = boost::beast;

namespace {

constexpr std::array kRoutes = {
    RouteEntry{"POST", "/v1/tubes/{tube}/jobs", Route::kPutJob, "put_job"},
    RouteEntry{"POST", "/v1/jobs", Route::kPutJobs, "put_jobs"},
    RouteEntry{"GET", "/v1/jobs/{id}", Route::kGetJob, "get_job"},
    RouteEntry{"PATCH", "/v1/jobs/{id}", Route::kPatchJob, "patch_job"},
    RouteEntry{"DELETE", "/v1/jobs/{id}", Route::kDeleteJob, "delete_job"},
    RouteEntry{"POST", "/v1/jobs/{id}/release", Route::kReleaseJob, "release_job"},
    RouteEntry{"POST", "/v1/jobs/{id}/bury", Route::kBuryJob, "bury_job"},
    RouteEntry{"POST", "/v1/jobs/{id}/touch", Route::kTouchJob, "touch_job"},
    RouteEntry{"POST", "/v1/jobs/{id}/kick", Route::kKickJob, "kick_job"},
    RouteEntry{"GET", "/v1/tubes/{tube}/keys/{key}", Route::kGetKey, "get_key"},
    RouteEntry{"PATCH", "/v1/tubes/{tube}/keys/{key}", Route::kPatchKey, "patch_key"},
    RouteEntry{"DELETE", "/v1/tubes/{tube}/keys/{key}", Route::kDeleteKey, "delete_key"},
    RouteEntry{"GET", "/v1/tubes/{tube}/groups/{group}", Route::kListGroup, "list_group"},
    RouteEntry{"DELETE", "/v1/tubes/{tube}/groups/{group}", Route::kCancelGroup, "cancel_group"},
    RouteEntry{"POST", "/v1/reserve", Route::kReserve, "reserve"},
    RouteEntry{"GET", "/v1/tubes", Route::kListTubes, "list_tubes"},
    RouteEntry{"GET", "/v1/tubes/{tube}", Route::kGetTube, "get_tube"},
    RouteEntry{"PATCH", "/v1/tubes/{tube}", Route::kPatchTube, "patch_tube"},
    RouteEntry{"POST", "/v1/tubes/{tube}/kick", Route::kKickTube, "kick_tube"},
    RouteEntry{"POST", "/v1/tubes/{tube}/pause", Route::kPauseTube, "pause_tube"},
    RouteEntry{"PUT", "/v1/tubes/{tube}/webhook", Route::kPutWebhook, "put_webhook"},
    RouteEntry{"GET", "/v1/tubes/{tube}/webhook", Route::kGetWebhook, "get_webhook"},
    RouteEntry{"DELETE", "/v1/tubes/{tube}/webhook", Route::kDeleteWebhook, "delete_webhook"},
    RouteEntry{"GET", "/v1/stats", Route::kStats, "stats"},
    RouteEntry{"GET", "/metrics", Route::kMetrics, "metrics"},
    RouteEntry{"GET", "/healthz", Route::kHealth, "healthz"},
    RouteEntry{"GET", "/readyz", Route::kReady, "readyz"},
    RouteEntry{"POST", "/v1/admin/backup", Route::kBackup, "backup"},
    RouteEntry{"GET", "/v1/tubes/{tube}/due", Route::kTubeDue, "tube_due"},
    RouteEntry{"GET", "/v1/due", Route::kDue, "due"},
    RouteEntry{"GET", "/v1/tubes/{tube}/jobs", Route::kListJobs, "list_jobs"},
    // Before /v1/schedules/{name}: a POST here is a preview, not a schedule named "preview".
    RouteEntry{"POST", "/v1/schedules/preview", Route::kPreviewSchedule, "preview_schedule"},
    RouteEntry{"PUT", "/v1/schedules/{name}", Route::kPutSchedule, "put_schedule"},
    RouteEntry{"GET", "/v1/schedules", Route::kListSchedules, "list_schedules"},
    RouteEntry{"GET", "/v1/schedules/{name}", Route::kGetSchedule, "get_schedule"},
    RouteEntry{"DELETE", "/v1/schedules/{name}", Route::kDeleteSchedule, "delete_schedule"},
    RouteEntry{"POST", "/v1/schedules/{name}/pause", Route::kPauseSchedule, "pause_schedule"},
    RouteEntry{"POST", "/v1/schedules/{name}/resume", Route::kResumeSchedule, "resume_schedule"},
    RouteEntry{"POST", "/v1/schedules/{name}/trigger", Route::kTriggerSchedule, "trigger_schedule"},
    RouteEntry{"POST", "/v1/schedules/{name}/backfill", Route::kBackfillSchedule,
               "backfill_schedule"},
    RouteEntry{"GET", "/v1/schedules/{name}/next", Route::kNextRuns, "next_runs"},
};
static_assert(kRoutes.size() == static_cast<std::size_t>(Route::kCount));

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// Matches `path` against `pattern` segment by segment; appends the captures to params.
bool match_pattern(std::string_view pattern, std::string_view path,
                   std::vector<std::string>* params) {
  while (!pattern.empty() || !path.empty()) {
    if (pattern.empty() || path.empty() || pattern[0] != '/' || path[0] != '/') return false;
    pattern.remove_prefix(1);
    path.remove_prefix(1);
    const std::string_view want = pattern.substr(0, pattern.find('/'));
    const std::string_view have = path.substr(0, path.find('/'));
    if (want.size() > 1 && want.front() == '{' && want.back() == '}') {
      if (have.empty()) return false;
      auto decoded = percent_decode(have);
      if (!decoded) return false;
      params->push_back(std::move(*decoded));
    } else if (want != have) {
      return false;
    }
    pattern.remove_prefix(want.size());
    path.remove_prefix(have.size());
  }
  return true;
}

}  // namespace

std::span<const RouteEntry> routes() {
  return kRoutes;
}

std::string_view route_name(Route route) {
  const auto index = static_cast<std::size_t>(route);
  return index < kRoutes.size() ? kRoutes[index].name : "unknown";
}

std::optional<std::string> percent_decode(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text[i] != '%') {
      out += text[i];
      continue;
    }
    if (i + 2 >= text.size()) return std::nullopt;
    const int high = hex_value(text[i + 1]);
    const int low = hex_value(text[i + 2]);
    if (high < 0 || low < 0) return std::nullopt;
    out += static_cast<char>(high * 16 + low);
    i += 2;
  }
  return out;
}

Result<std::vector<std::pair<std::string, std::string>>> query_params(std::string_view target) {
  std::vector<std::pair<std::string, std::string>> params;
  const auto mark = target.find('?');
  if (mark == std::string_view::npos) return params;
  std::string_view query = target.substr(mark + 1);
  while (!query.empty()) {
    const std::string_view pair = query.substr(0, query.find('&'));
    query.remove_prefix(std::min(query.size(), pair.size() + 1));
    if (pair.empty()) continue;
    const auto equals = pair.find('=');
    auto name = percent_decode(pair.substr(0, equals));
    auto value = percent_decode(equals == std::string_view::npos ? std::string_view{}
                                                                 : pair.substr(equals + 1));
    if (!name || !value) return Status(Code::kInvalidArgument, "malformed escape in the query");
    for (const auto& [seen, _] : params) {
      if (seen == *name) {
        return Status(Code::kInvalidArgument,
                      "query parameter '" + seen.substr(0, 64) + "' given twice");
      }
    }
    params.emplace_back(std::move(*name), std::move(*value));
  }
  return params;
}

Match match(std::string_view method, std::string_view target) {
  const std::string_view path = target.substr(0, target.find('?'));
  Match result;
  // A path that a pattern without names matches (/v1/schedules/preview) is that pattern's
  // alone, as OpenAPI has it: not also one of the patterns with names that match it
  // (/v1/schedules/{name}), whose methods would find nothing there.
  const bool exact = std::any_of(std::begin(kRoutes), std::end(kRoutes), [&](const RouteEntry& e) {
    std::vector<std::string> none;
    return e.pattern.find('{') == std::string_view::npos && match_pattern(e.pattern, path, &none);
  });
  for (const RouteEntry& entry : kRoutes) {
    std::vector<std::string> params;
    if (!match_pattern(entry.pattern, path, &params)) continue;
    if (exact && !params.empty()) continue;
    if (entry.method == method) {
      result.kind = Match::Kind::kFound;
      result.route = entry.route;
      result.params = std::move(params);
      return result;
    }
    result.kind = Match::Kind::kNoMethod;
    if (!result.allow.empty()) result.allow += ", ";
    result.allow += entry.method;
    if (entry.method == "GET") result.allow += ", HEAD";  // the server answers HEAD as GET
  }
  return result;
}

namespace {

// "host[:port]" or "[v6][:port]" without the port; and the port, empty if none.
std::pair<std::string_view, std::string_view> split_authority(std::string_view authority) {
  if (authority.starts_with('[')) {
    const auto end = authority.find(']');
    if (end == std::string_view::npos) return {authority, {}};
    const std::string_view rest = authority.substr(end + 1);
    return {authority.substr(1, end - 1), rest.starts_with(':') ? rest.substr(1) : rest};
  }
  const auto colon = authority.rfind(':');
  if (colon == std::string_view::npos) return {authority, {}};
  return {authority.substr(0, colon), authority.substr(colon + 1)};
}

// A Host field's value (RFC 9112 section 3.2, RFC 3986 section 3.2.2): uri-host [":" port],
// empty when the target names no host. A reg-name's characters, or an IP literal in brackets.
bool valid_host_field(std::string_view host) {
  const auto any_of = [](std::string_view set) {
    return [set](char c) {
      return std::isalnum(static_cast<unsigned char>(c)) || set.find(c) != std::string_view::npos;
    };
  };
  std::string_view name = host;
  std::string_view port;
  bool literal = false;
  if (host.starts_with('[')) {
    const auto end = host.find(']');
    if (end == std::string_view::npos) return false;
    const std::string_view rest = host.substr(end + 1);
    if (!rest.empty() && !rest.starts_with(':')) return false;
    name = host.substr(1, end - 1);
    port = rest.empty() ? rest : rest.substr(1);
    literal = true;
  } else if (const auto colon = host.rfind(':'); colon != std::string_view::npos) {
    name = host.substr(0, colon);
    port = host.substr(colon + 1);
  }
  const bool name_ok =
      literal ? !name.empty() && std::all_of(name.begin(), name.end(), any_of(":.%-_~"))
              : std::all_of(name.begin(), name.end(), any_of("-._~%!$&'()*+,;="));
  // An empty Host names no host (RFC 9112 allows it); a port, or its ':', needs a host, and is
  // at most 65535.
  const bool port_ok =
      port.size() <= 5 &&
      std::all_of(port.begin(), port.end(), [](char c) { return c >= '0' && c <= '9'; }) &&
      (port.empty() || std::stoul(std::string(port)) <= 65535);
  return name_ok && port_ok && (!name.empty() || host.empty());
}

}  // namespace

Result<Target> origin_form(std::string_view target, std::string_view host_header) {
  if (!valid_host_field(host_header)) {
    return Status(Code::kInvalidArgument,
                  "Host: not a host and an optional port (host, host:port, [v6]:port)");
  }
  const auto scheme_end = target.find("://");
  const std::string_view scheme = target.substr(0, scheme_end);
  if (scheme_end == std::string_view::npos ||
      !(beast::iequals(scheme, "http") || beast::iequals(scheme, "https"))) {
    // Neither a path, nor OPTIONS's "*", nor "<scheme>://..." (one not http's is a path
    // unknown: 404): "v1/stats", or CONNECT's "host:port".
    if (scheme_end == std::string_view::npos && !target.starts_with('/') && target != "*") {
      return Status(Code::kInvalidArgument,
                    "the request target is a path (/v1/...) or an absolute URL (http://host/...)");
    }
    return Target{std::string(target), std::string(host_header)};
  }
  const std::string_view rest = target.substr(scheme_end + 3);
  const auto path_at = std::min(rest.find_first_of("/?#"), rest.size());
  std::string_view authority = rest.substr(0, path_at);
  if (const auto at = authority.rfind('@'); at != std::string_view::npos) {
    authority = authority.substr(at + 1);  // user information names no host
  }
  if (split_authority(authority).first.empty()) {
    return Status(Code::kInvalidArgument,
                  "a target in absolute form (http://host/path) must name a host");
  }
  const std::string_view path = rest.substr(path_at);
  return Target{path.starts_with('/') ? std::string(path) : "/" + std::string(path),
                std::string(authority)};
}

std::optional<std::string> foreign_request(std::string_view host, std::string_view origin,
                                           bool loopback_listener) {
  const auto [host_name, host_port] = split_authority(host);
  if (loopback_listener && !host.empty()) {
    boost::system::error_code error;
    (void)boost::asio::ip::make_address(std::string(host_name), error);
    // Rebinding takes a name the page's site can have resolve to 127.0.0.1: a domain name, with
    // a dot. A single label ("localhost", a machine's own name) is no site's.
    const bool domain = host_name.find('.') != std::string_view::npos;
    const bool named_loopback =
        beast::iequals(host_name, "localhost.localdomain") ||  // /etc/hosts' name on some systems
        (host_name.size() > 10 &&
         beast::iequals(host_name.substr(host_name.size() - 10), ".localhost"));
    if (error && domain && !named_loopback) {
      return "Host " + std::string(host.substr(0, 200)) +
             " is not this server's: a loopback listener without tokens answers requests to an "
             "address or localhost, not to a domain name (a web page's, made to resolve to it)";
    }
  }
  if (origin.empty()) return std::nullopt;
  // The origin's scheme://host[:port], its port defaulted by its scheme.
  const auto scheme_end = origin.find("://");
  const std::string_view scheme = origin.substr(0, scheme_end);
  const auto [origin_name, origin_port] = split_authority(
      scheme_end == std::string_view::npos ? std::string_view{} : origin.substr(scheme_end + 3));
  const std::string_view default_port = beast::iequals(scheme, "https") ? "443" : "80";
  const bool same = !origin_name.empty() && beast::iequals(origin_name, host_name) &&
                    (origin_port.empty() ? default_port : origin_port) ==
                        (host_port.empty() ? default_port : host_port);
  if (same) return std::nullopt;
  return "Origin " + std::string(origin.substr(0, 200)) +
         " is another site: a server without tokens answers no web page but its own "
         "(--http-token-file)";
}

}  // namespace delayq::front::http
