#include "front/http/api.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>

#include <algorithm>
#include <boost/beast/core/string.hpp>
#include <boost/json.hpp>
#include <cctype>
#include <charconv>
#include <limits>
#include <map>
#include <set>
#include <unordered_set>

#include "base/names.h"
#include "broker/families.h"
#include "broker/put_rules.h"
#include "front/http/api_call.h"
#include "front/http/dashboard.h"
#include "front/http/json.h"
#include "front/http/request.h"
#include "front/http/text.h"
#include "webhook/rules.h"

namespace delayq::front::http {
namespace json = boost::json;
namespace beast = boost::beast;

namespace {
constexpr std::uint64_t kMaxPriority = std::numeric_limits<std::uint32_t>::max();
}  // namespace

std::string_view status_text(unsigned status) {
  static constexpr std::pair<unsigned, std::string_view> kKnown[] = {
      {200, "200"}, {201, "201"}, {204, "204"}, {400, "400"}, {401, "401"},
      {403, "403"}, {404, "404"}, {405, "405"}, {409, "409"}, {413, "413"},
      {431, "431"}, {500, "500"}, {501, "501"}, {503, "503"}, {507, "507"}};
  for (const auto& [code, text] : kKnown) {
    if (code == status) return text;
  }
  return "other";
}

Response json_response(unsigned status, std::string body) {
  Response response;
  response.status = status;
  response.body = std::move(body);
  response.body += '\n';
  return response;
}

namespace {

// A header name a webhook may set: an HTTP token, not one delayq writes itself.
Status check_header_name(std::string_view name) {
  const bool token =
      !name.empty() && name.size() <= 64 && std::all_of(name.begin(), name.end(), [](char c) {
        return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '-' || c == '_' || c == '.';
      });
  if (!token) return {Code::kInvalidArgument, "headers: a name of 1 to 64 letters, digits, - _ ."};
  if (beast::iequals(name, "content-type")) {
    return {Code::kInvalidArgument,
            "headers: " + std::string(name) +
                " is set by delayq (a job's Content-Type comes with the job: content_type)"};
  }
  for (const std::string_view own :
       {"host", "content-length", "transfer-encoding", "connection", "te", "upgrade"}) {
    if (beast::iequals(name, own)) {
      return {Code::kInvalidArgument, "headers: " + std::string(name) + " is set by delayq"};
    }
  }
  // A job's trace context goes there: a webhook's own would be replaced for some jobs, or
  // paired with a job's traceparent of another trace.
  for (const std::string_view trace : {"traceparent", "tracestate"}) {
    if (beast::iequals(name, trace)) {
      return {Code::kInvalidArgument,
              "headers: " + std::string(name) +
                  " is a job's own (the trace context of its put), not a webhook's"};
    }
  }
  if (beast::iequals(name.substr(0, 7), "delayq-")) {
    return {Code::kInvalidArgument, "headers: Delayq-* headers are delayq's own"};
  }
  return Status::ok();
}

// A field that is there and not null (null counts as absent, as everywhere in the API).
const json::value* present(const Body& body, std::string_view name) {
  const json::value* value = body.find(name);
  return value == nullptr || value->is_null() ? nullptr : value;
}

// A duration field within [low, high], or its default.
Result<Millis> bounded_duration(const Body& body, std::string_view name, Millis fallback,
                                Millis low, Millis high) {
  auto value = body.duration(name);
  if (!value.is_ok()) return value.status();
  const Millis got = value.value().value_or(fallback);
  if (got < low || got > high) {
    return Status(Code::kInvalidArgument, std::string(name) + ": from " + format_duration(low) +
                                              " to " + format_duration(high));
  }
  return got;
}

// PUT /v1/tubes/{tube}/webhook's body (limits in docs/webhooks.md).
Result<Webhook> read_webhook(Body& body, std::string_view text) {
  using std::chrono::hours;
  if (Status s = body.parse(text, {"url", "headers", "timeout", "max_attempts", "backoff", "rate",
                                   "concurrency", "secrets"});
      !s.is_ok()) {
    return s;
  }
  Webhook hook;
  auto url = body.string("url");
  if (!url.is_ok()) return url.status();
  if (!url.value()) {
    return Status(Code::kInvalidArgument, "url: required: where to POST the tube's jobs");
  }
  if (auto parsed = webhook::parse_url(*url.value()); !parsed.is_ok()) {
    return Status(Code::kInvalidArgument, "url: " + parsed.status().message());
  }
  hook.url = std::move(*url.value());
  if (const json::value* headers = present(body, "headers")) {
    if (!headers->is_object() || headers->as_object().size() > 32) {
      return Status(Code::kInvalidArgument, "headers: an object of at most 32 name: value");
    }
    // Header names ignore case: X-A and x-a are one.
    std::set<std::string_view, beast::iless> names;
    for (const auto& [name, value] : headers->as_object()) {
      if (Status s = check_header_name(name); !s.is_ok()) return s;
      if (!names.insert(name).second) {
        return Status(Code::kInvalidArgument,
                      "headers: " + std::string(name) + " is named twice (names ignore case)");
      }
      if (!value.is_string()) return Status(Code::kInvalidArgument, "headers: values are text");
      if (Status s = webhook::check_header_value("headers", value.as_string()); !s.is_ok())
        return s;
      hook.headers.emplace_back(name, value.as_string());
    }
  }
  auto timeout =
      bounded_duration(body, "timeout", hook.timeout, Millis{100}, std::chrono::minutes(30));
  if (!timeout.is_ok()) return timeout.status();
  hook.timeout = timeout.value();
  auto attempts = body.integer("max_attempts", 1000, 1);
  if (!attempts.is_ok()) return attempts.status();
  hook.max_attempts = static_cast<std::uint32_t>(attempts.value().value_or(hook.max_attempts));
  auto concurrency = body.integer("concurrency", 1000, 1);
  if (!concurrency.is_ok()) return concurrency.status();
  hook.concurrency = static_cast<std::uint32_t>(concurrency.value().value_or(hook.concurrency));
  if (const json::value* rate = present(body, "rate")) {
    const double per_second = rate->is_number() ? rate->to_number<double>() : -1;
    if (!(per_second == 0 || (per_second >= 0.01 && per_second <= 100'000))) {
      return Status(Code::kInvalidArgument,
                    "rate: requests started per second, 0.01 to 100000, or 0 for no limit");
    }
    hook.rate = rate->to_number<double>();
  }
  if (const json::value* backoff = present(body, "backoff")) {
    Body inner;
    if (!backoff->is_object()) {
      return Status(Code::kInvalidArgument, "backoff: {\"min\", \"max\", \"factor\"}");
    }
    if (Status s = inner.parse(json::serialize(*backoff), {"min", "max", "factor"}); !s.is_ok()) {
      return Status(Code::kInvalidArgument, "backoff: " + s.message());
    }
    auto min = bounded_duration(inner, "min", hook.backoff.min, Millis{1}, hours(24));
    if (!min.is_ok()) return Status(Code::kInvalidArgument, "backoff." + min.status().message());
    auto max = bounded_duration(inner, "max", std::max(hook.backoff.max, min.value()), min.value(),
                                hours(24 * 7));
    if (!max.is_ok()) return Status(Code::kInvalidArgument, "backoff." + max.status().message());
    hook.backoff.min = min.value();
    hook.backoff.max = max.value();
    if (const json::value* factor = present(inner, "factor")) {
      if (!factor->is_number() || factor->to_number<double>() < 1 ||
          factor->to_number<double>() > 10) {
        return Status(Code::kInvalidArgument, "backoff.factor: 1 to 10");
      }
      hook.backoff.factor = factor->to_number<double>();
    }
  }
  auto secrets = body.strings("secrets");
  if (!secrets.is_ok()) return secrets.status();
  if (secrets.value()) {
    hook.secrets = std::move(*secrets.value());
    const bool sized = std::all_of(hook.secrets.begin(), hook.secrets.end(),
                                   [](const auto& k) { return !k.empty() && k.size() <= 256; });
    if (hook.secrets.size() > 2 || !sized) {
      return Status(Code::kInvalidArgument,
                    "secrets: one or two (while rotating), each 1 to 256 bytes");
    }
  }
  return hook;
}

// The broker's health in one word, as /readyz and /v1/stats name it.
const char* health_word(const Status& health) {
  switch (health.code()) {
    case Code::kOk:
      return "ok";
    case Code::kDraining:
      return "draining";
    case Code::kNoSpace:
      return "no_space";
    default:
      return "unavailable";
  }
}

}  // namespace

Response from_status(const Status& status) {
  switch (status.code()) {
    case Code::kNotFound:
      return Api::error(404, "not_found", status.message());
    case Code::kInvalidArgument:
      return Api::error(400, "bad_request", status.message());
    case Code::kConflict:
      return Api::error(409, "conflict", status.message());
    case Code::kLimit:
      return Api::error(503, "limit", status.message());
    case Code::kDraining:
      return Api::error(503, "draining", status.message());
    case Code::kNoSpace:
      return Api::error(507, "no_space", status.message());
    case Code::kNotSupported:
      return Api::error(501, "unsupported", status.message());
    default:
      return Api::error(500, "internal", status.message());
  }
}

Response job_response(unsigned status, const JobView& job, const std::string* body,
                      const Delivery* delivery) {
  Response response;
  response.status = status;
  response.body.reserve(512);
  append_job(response.body, job, body, delivery);
  response.body += '\n';
  return response;
}

Result<JobId> parse_id(const std::string& text) {
  JobId id = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), id);
  // At most 2^63 - 1, the int64 that openapi.yaml gives ids (no job has one above 2^53).
  if (error != std::errc() || end != text.data() + text.size() || id == 0 ||
      id > static_cast<JobId>(std::numeric_limits<std::int64_t>::max())) {
    return Status(Code::kInvalidArgument, "bad job id '" + text + "': a positive integer");
  }
  return id;
}

namespace {

// The API lists tubes by name, whatever order the broker gives them in.
std::vector<TubeStats> by_name(std::vector<TubeStats> tubes) {
  std::sort(tubes.begin(), tubes.end(),
            [](const TubeStats& a, const TubeStats& b) { return a.name < b.name; });
  return tubes;
}

}  // namespace

// Shorthand: answer the error if a Result failed.
// One entry per route, in Route order (checked below), each naming its route.
struct Api::Handlers {
  struct Entry {
    Route route;
    void (Api::*run)(Call&);
  };
  static constexpr Entry kTable[] = {
      {Route::kPutJob, &Api::put_job},
      {Route::kPutJobs, &Api::put_jobs},
      {Route::kGetJob, &Api::get_job},
      {Route::kPatchJob, &Api::patch_job},
      {Route::kDeleteJob, &Api::delete_job},
      {Route::kReleaseJob, &Api::release_job},
      {Route::kBuryJob, &Api::bury_job},
      {Route::kTouchJob, &Api::touch_job},
      {Route::kKickJob, &Api::kick_job},
      {Route::kGetKey, &Api::get_job},
      {Route::kPatchKey, &Api::patch_job},
      {Route::kDeleteKey, &Api::delete_job},
      {Route::kListGroup, &Api::list_group},
      {Route::kCancelGroup, &Api::cancel_group},
      {Route::kReserve, &Api::reserve},
      {Route::kListTubes, &Api::list_tubes},
      {Route::kGetTube, &Api::get_tube},
      {Route::kPatchTube, &Api::patch_tube},
      {Route::kKickTube, &Api::kick_tube},
      {Route::kPauseTube, &Api::pause_tube},
      {Route::kPutWebhook, &Api::put_webhook},
      {Route::kGetWebhook, &Api::get_webhook},
      {Route::kDeleteWebhook, &Api::delete_webhook},
      {Route::kStats, &Api::stats},
      {Route::kMetrics, &Api::metrics},
      {Route::kHealth, &Api::health},
      {Route::kReady, &Api::ready},
      {Route::kBackup, &Api::backup},
      {Route::kTubeDue, &Api::tube_due},
      {Route::kDue, &Api::due},
      {Route::kListJobs, &Api::list_jobs},
      {Route::kPreviewSchedule, &Api::preview_schedule},
      {Route::kPutSchedule, &Api::put_schedule},
      {Route::kListSchedules, &Api::list_schedules},
      {Route::kGetSchedule, &Api::get_schedule},
      {Route::kDeleteSchedule, &Api::delete_schedule},
      {Route::kPauseSchedule, &Api::pause_schedule},
      {Route::kResumeSchedule, &Api::resume_schedule},
      {Route::kTriggerSchedule, &Api::trigger_schedule},
      {Route::kBackfillSchedule, &Api::backfill_schedule},
      {Route::kNextRuns, &Api::next_runs},
  };
  static_assert(std::size(kTable) == static_cast<std::size_t>(Route::kCount));
  static constexpr bool in_route_order() {
    for (std::size_t i = 0; i < std::size(kTable); ++i) {
      if (static_cast<std::size_t>(kTable[i].route) != i) return false;
    }
    return true;
  }
  static const Entry& of(Route route) {
    static_assert(in_route_order());  // here the struct is complete
    return kTable[static_cast<std::size_t>(route)];
  }
};

namespace {

std::array<unsigned char, 32> sha256(std::string_view text) {
  std::array<unsigned char, 32> digest{};
  unsigned int size = 0;
  EVP_Digest(text.data(), text.size(), digest.data(), &size, EVP_sha256(), nullptr);
  return digest;
}

}  // namespace

Api::Api(broker::Broker& broker, metrics::Registry& metrics, ApiOptions options)
    : broker_(broker),
      metrics_(metrics),
      counts_(metrics, kProtocol),
      options_(std::move(options)),
      session_(
          broker.open_session(broker::SessionOptions{.watch_default = false, .holder = "http"})),
      admin_(broker.open_admin()) {
  for (const std::string& token : options_.tokens) token_digests_.push_back(sha256(token));
}

// Digests compared with CRYPTO_memcmp, against every token: the time taken says nothing about
// how much of a token was right, or which.
bool Api::authorized(std::string_view authorization) const {
  constexpr std::string_view kScheme = "bearer ";
  if (authorization.size() <= kScheme.size()) return false;
  for (std::size_t i = 0; i < kScheme.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(authorization[i])) != kScheme[i]) return false;
  }
  const auto digest = sha256(authorization.substr(kScheme.size()));
  bool found = false;
  for (const auto& token : token_digests_) {
    found |= CRYPTO_memcmp(digest.data(), token.data(), digest.size()) == 0;
  }
  return found;
}

// The session goes first: jobs reserved over HTTP are ready again, as a closed connection's are.
Api::~Api() = default;

bool Api::admits(std::string_view method, std::string_view target,
                 std::string_view authorization) const {
  return admits(match(method, target), method, target, authorization);
}

bool Api::admits(const Match& found, std::string_view method, std::string_view target,
                 std::string_view authorization) const {
  if (token_digests_.empty() || authorized(authorization)) return true;
  if (found.kind == Match::Kind::kFound) {
    return found.route == Route::kHealth || found.route == Route::kReady;
  }
  return found.kind == Match::Kind::kNoPath && method == "GET" &&
         dashboard::find(target).has_value();
}

namespace {

// The name a refused request counts under: the endpoint it names, a dashboard file, or none.
std::string_view refused_op(const Match& found, std::string_view method, std::string_view target) {
  if (found.kind == Match::Kind::kFound) return route_name(found.route);
  if (found.kind == Match::Kind::kNoPath && method == "GET" && dashboard::find(target)) {
    return "dashboard";
  }
  return "unrouted";
}

}  // namespace

void Api::refuse(std::string_view method, std::string_view target, Response response,
                 Respond respond) {
  Reply(*this, refused_op(match(method, target), method, target),
        std::move(respond))(std::move(response));
}

std::uint64_t Api::handle(std::string_view method, std::string_view target, std::string_view body,
                          Respond respond, const Headers& headers) {
  Match found = match(method, target);
  // Without a token nothing is told, not even whether a path exists.
  if (!admits(found, method, target, headers.authorization)) {
    Response response = error(
        401, "unauthorized", "this server wants Authorization: Bearer <token> (--http-token-file)");
    response.www_authenticate = "Bearer";
    Reply(*this, refused_op(found, method, target), std::move(respond))(std::move(response));
    return 0;
  }
  if (found.kind == Match::Kind::kNoPath && method == "GET") {
    if (const auto asset = dashboard::find(target)) {
      // No data in these files: they are served without a token, and the page asks the API
      // for everything it shows, with the token.
      Response response;
      response.body = asset->bytes;
      response.content_type = asset->content_type;
      response.headers =
          "Cache-Control: no-cache\r\n"
          "Content-Security-Policy: default-src 'self'; img-src 'self' data:; "
          "frame-ancestors 'none'\r\n"
          "X-Content-Type-Options: nosniff\r\n";
      Reply(*this, "dashboard", std::move(respond))(std::move(response));
      return 0;
    }
  }
  // The dashboard's files are there for GET (and HEAD) alone.
  if (found.kind == Match::Kind::kNoPath && dashboard::find(target)) {
    found.kind = Match::Kind::kNoMethod;
    found.allow = "GET, HEAD";
  }
  if (found.kind == Match::Kind::kNoPath) {
    Reply(*this, "unrouted", std::move(respond))(
        error(404, "no_route", "no such endpoint: " + std::string(target.substr(0, 200))));
    return 0;
  }
  if (found.kind == Match::Kind::kNoMethod) {
    Response response =
        error(405, "method_not_allowed",
              std::string(method) + " is not allowed on " +
                  std::string(target.substr(0, std::min(target.find('?'), std::size_t{200}))) +
                  " (allowed: " + found.allow + ")");
    response.allow = found.allow;
    Reply(*this, "unrouted", std::move(respond))(std::move(response));
    return 0;
  }
  Call call{std::move(found.params),
            body,
            Body{},
            Reply(*this, route_name(found.route), std::move(respond)),
            target,
            headers};
  for (const std::string& param : call.params) {
    if (!valid_utf8(param)) {
      call.reply(error(400, "bad_request",
                       "a name in the path (tube, key, group, schedule) is not UTF-8"));
      return 0;
    }
  }
  // A route under /v1/tubes/{tube} names a tube no tube can have: a bad request, as for a put,
  // not "no such tube" (nor a kick or a group's cancel of nothing).
  if (routes()[static_cast<std::size_t>(found.route)].pattern.starts_with("/v1/tubes/{tube}")) {
    if (Status s = check_tube_name(call.params[0], kDefaultMaxNameBytes); !s.is_ok()) {
      call.reply(s);
      return 0;
    }
  }
  (this->*Handlers::of(found.route).run)(call);
  return call.ticket;
}

Response Api::error(unsigned status, std::string_view code, std::string_view message) {
  return json_response(status, error_json(code, message));
}

Response Api::too_large(std::size_t body_bytes) const {
  return error(413, "too_large",
               "the job body is " + std::to_string(body_bytes) + " bytes; at most " +
                   std::to_string(options_.max_job_bytes));
}

// --- jobs ------------------------------------------------------------------------------------

namespace {

// The fields of a put; a job of a batch names its tube too.
constexpr std::string_view kPutFields[] = {
    "body",  "body_base64", "delay",    "at",       "priority", "ttr",         "key",
    "group", "replace",     "debounce", "max_wait", "url",      "content_type"};
constexpr auto kBatchJobFields = [] {
  std::array<std::string_view, std::size(kPutFields) + 1> fields{"tube"};
  std::copy(std::begin(kPutFields), std::end(kPutFields), fields.begin() + 1);
  return fields;
}();
constexpr std::size_t kMaxBatchJobs = 1000;

// A put's answer: 201 and the job put, 200 and the job that holds the key (or the one a
// debounce moved).
Response put_response(const broker::PutResult& result, const Delivery& delivery) {
  // A job put with a URL or a content type answers with them, as GET /v1/jobs/{id} would (the
  // job holding a key, when nothing was put, answers without: look it up for its own).
  const Delivery* shown = result.inserted && !delivery.empty() ? &delivery : nullptr;
  const bool created = result.inserted && !result.debounced;
  Response response = job_response(created ? 201 : 200, result.job, nullptr, shown);
  if (result.debounced) {
    // The job object's last field, before "}\n": a pending job moved; its "created" is its
    // first put.
    response.body.insert(response.body.size() - 2, R"(,"debounced":true)");
  }
  response.location = "/v1/jobs/" + std::to_string(result.job.id);
  return response;
}

// A job's entry in a batch's answer: {"status": <its status>, "job": <the job>} or
// {"status": <its status>, "error": {...}}.
std::string batch_entry(const Response& response) {
  std::string_view text = response.body;
  if (text.ends_with('\n')) text.remove_suffix(1);
  std::string entry = R"({"status":)" + std::to_string(response.status);
  if (text.starts_with(R"({"error":)")) {
    entry += ',';
    entry.append(text.substr(1));  // {"error":{...}} as its fields
  } else {
    entry += R"(,"job":)";
    entry.append(text);
    entry += '}';
  }
  return entry;
}

// A batch's job: its fields read into `item`, and the tube it names; or why it cannot be put.
Result<std::string> batch_job_tube(const boost::json::value& job, Body& item) {
  if (!job.is_object()) return Status(Code::kInvalidArgument, "a job is a JSON object");
  if (Status s = item.view(job.as_object(), kBatchJobFields); !s.is_ok()) return s;
  auto tube = item.string("tube");
  if (!tube.is_ok()) return tube.status();
  if (!tube.value()) return Status(Code::kInvalidArgument, "tube: required");
  if (Status s = check_tube_name(*tube.value(), kDefaultMaxNameBytes); !s.is_ok()) return s;
  return std::move(*tube.value());
}

}  // namespace

// A put as its fields say, and what its answer shows beyond the job.
struct Api::Put {
  broker::PutRequest request;
  Delivery delivery;
};

std::variant<Api::Put, Response> Api::read_put(const Body& body, std::string tube,
                                               const Headers& headers) const {
  auto job = read_job_fields(body);
  if (!job.is_ok()) return from_status(job.status());
  if (job.value().body.size() > options_.max_job_bytes) {
    return too_large(job.value().body.size());
  }
  auto delay = body.duration("delay");
  if (!delay.is_ok()) return from_status(delay.status());
  auto at = body.instant("at");
  if (!at.is_ok()) return from_status(at.status());
  if (delay.value() && at.value()) return error(400, "bad_request", "give delay or at, not both");
  auto key = body.string("key");
  if (!key.is_ok()) return from_status(key.status());
  auto replace = body.boolean("replace");
  if (!replace.is_ok()) return from_status(replace.status());
  auto debounce = body.duration("debounce");
  if (!debounce.is_ok()) return from_status(debounce.status());
  auto max_wait = body.duration("max_wait");
  if (!max_wait.is_ok()) return from_status(max_wait.status());
  if (debounce.value() && (delay.value() || at.value())) {
    return error(400, "bad_request", "give debounce, or delay or at, not both");
  }
  Put put;
  broker::PutRequest& request = put.request;
  request.tube = std::move(tube);
  request.priority = job.value().priority;
  request.due = at.value() ? Due::at(*at.value()) : Due::after(delay.value().value_or(Millis{0}));
  request.ttr = job.value().ttr;
  request.body = std::move(job.value().body);
  request.key = key.value().value_or("");
  request.group = std::move(job.value().group);
  request.replace = replace.value();
  request.debounce = debounce.value();
  request.max_wait = max_wait.value();
  put.delivery.url = job.value().url;
  put.delivery.content_type = job.value().content_type;
  request.url = std::move(job.value().url);
  request.content_type = std::move(job.value().content_type);
  request.traceparent = headers.traceparent;
  request.tracestate = headers.tracestate;
  put.delivery.traceparent = request.traceparent;
  put.delivery.tracestate = request.tracestate;
  return put;
}

void Api::put_job(Call& call) {
  if (Status s = call.body.parse(call.text, kPutFields); !s.is_ok()) return call.reply(s);
  auto read = read_put(call.body, call.params[0], call.headers);
  if (auto* refused = std::get_if<Response>(&read)) return call.reply(std::move(*refused));
  Put& put = std::get<Put>(read);
  session_->put(std::move(put.request),
                call.reply.then<broker::PutResult>(
                    [delivery = std::move(put.delivery)](const broker::PutResult& result) {
                      return put_response(result, delivery);
                    }));
}

// Up to 1000 puts in one request, each as POST /v1/tubes/{tube}/jobs would make it (into the
// tube its "tube" names), in their order; each answered on its own, with its status (and
// counted as a put_job of that status), once every one of them is (the puts share their writes
// to the disk). What would refuse every job (drain mode, a full store, a bad trace context)
// refuses the request.
void Api::put_jobs(Call& call) {
  if (Status s = call.body.parse(call.text, {"jobs"}); !s.is_ok()) return call.reply(s);
  const boost::json::value* jobs = call.body.find("jobs");
  if (jobs == nullptr || !jobs->is_array() || jobs->as_array().empty() ||
      jobs->as_array().size() > kMaxBatchJobs) {
    return call.reply(error(400, "bad_request",
                            "jobs: an array of 1 to " + std::to_string(kMaxBatchJobs) + " jobs"));
  }
  if (broker_.draining()) {
    return call.reply(Status(Code::kDraining, "the server is draining: no new jobs"));
  }
  if (Status health = broker_.health(); health.code() == Code::kNoSpace) return call.reply(health);
  if (Status s = broker::check_trace(call.headers.traceparent, call.headers.tracestate);
      !s.is_ok()) {
    return call.reply(s);
  }
  struct Batch {
    std::vector<std::string> entries;  // batch_entry() of each job's answer, in their order
    std::size_t left = 0;
    Reply reply;
  };
  const auto& list = jobs->as_array();
  auto batch = std::make_shared<Batch>(Batch{std::vector<std::string>(list.size()), 0, call.reply});
  const auto answer = [this, batch](std::size_t i, const Response& response) {
    counts_.op("put_job", status_text(response.status));
    batch->entries[i] = batch_entry(response);
  };
  std::vector<std::pair<std::size_t, Put>> puts;
  puts.reserve(list.size());
  for (std::size_t i = 0; i < list.size(); ++i) {
    Body item;
    auto tube = batch_job_tube(list[i], item);
    if (!tube.is_ok()) {
      answer(i, from_status(tube.status()));
      continue;
    }
    auto read = read_put(item, std::move(tube).value(), call.headers);
    if (auto* refused = std::get_if<Response>(&read)) {
      answer(i, *refused);
      continue;
    }
    puts.emplace_back(i, std::move(std::get<Put>(read)));
  }
  const auto finish = [](const Batch& done) {
    std::string body = R"({"jobs":[)";
    for (std::size_t i = 0; i < done.entries.size(); ++i) {
      if (i > 0) body += ',';
      body += done.entries[i];
    }
    body += "]}";
    done.reply(json_response(200, std::move(body)));
  };
  batch->left = puts.size();
  if (batch->left == 0) return finish(*batch);
  for (auto& [i, put] : puts) {
    session_->put(std::move(put.request), [batch, i = i, delivery = std::move(put.delivery), answer,
                                           finish](Result<broker::PutResult> result) {
      answer(i, result.is_ok() ? put_response(result.value(), delivery)
                               : from_status(result.status()));
      if (--batch->left == 0) finish(*batch);
    });
  }
}

void Api::get_job(Call& call) {
  auto job = call.job();
  if (!job.is_ok()) return call.reply(job.status());
  session_->peek(job.value(), true, call.reply.then<broker::Job>([](const broker::Job& found) {
    return job_response(200, found.view, &found.body, &found.delivery);
  }));
}

void Api::patch_job(Call& call) {
  if (Status s = call.body.parse(call.text, {"delay", "at", "priority"}); !s.is_ok()) {
    return call.reply(s);
  }
  auto delay = call.body.duration("delay");
  if (!delay.is_ok()) return call.reply(delay.status());
  auto at = call.body.instant("at");
  if (!at.is_ok()) return call.reply(at.status());
  auto priority = call.body.integer("priority", kMaxPriority);
  if (!priority.is_ok()) return call.reply(priority.status());
  if (delay.value() && at.value()) {
    return call.reply(error(400, "bad_request", "give delay or at, not both"));
  }
  if (!delay.value() && !at.value() && !priority.value()) {
    return call.reply(
        error(400, "bad_request", "nothing to change: give delay or at, and/or priority"));
  }
  auto job = call.job();
  if (!job.is_ok()) return call.reply(job.status());
  broker::Update update;
  // A delay of 0 means now: the job is ready at once.
  if (at.value()) update.due = Due::at(*at.value());
  if (delay.value()) update.due = Due::after(*delay.value());
  if (priority.value()) update.priority = static_cast<std::uint32_t>(*priority.value());
  session_->update(job.value(), update, call.reply.then<JobView>([](const JobView& view) {
    return job_response(200, view, nullptr);
  }));
}

void Api::delete_job(Call& call) {
  auto job = call.job();
  if (!job.is_ok()) return call.reply(job.status());
  session_->erase(job.value(), call.reply.then<JobId>([](JobId id) {
    json::object o;
    o["deleted"] = id;
    return json_response(200, to_text(o));
  }));
}

namespace {
// What release, bury, touch and kick answer: the job as it is now, without its body.
auto job_view(const JobView& view) {
  return job_response(200, view, nullptr);
}
}  // namespace

void Api::release_job(Call& call) {
  if (Status s = call.body.parse(call.text, {"delay", "priority"}); !s.is_ok()) {
    return call.reply(s);
  }
  auto delay = call.body.duration("delay");
  if (!delay.is_ok()) return call.reply(delay.status());
  auto priority = call.body.integer("priority", kMaxPriority);
  if (!priority.is_ok()) return call.reply(priority.status());
  auto id = parse_id(call.params[0]);
  if (!id.is_ok()) return call.reply(id.status());
  broker::ReleaseRequest request;
  request.id = id.value();
  if (priority.value()) request.priority = static_cast<std::uint32_t>(*priority.value());
  request.delay = delay.value().value_or(Millis{0});
  session_->release(request, call.reply.then<JobView>(job_view));
}

void Api::bury_job(Call& call) {
  if (Status s = call.body.parse(call.text, {"priority"}); !s.is_ok()) return call.reply(s);
  auto priority = call.body.integer("priority", kMaxPriority);
  if (!priority.is_ok()) return call.reply(priority.status());
  auto id = parse_id(call.params[0]);
  if (!id.is_ok()) return call.reply(id.status());
  std::optional<std::uint32_t> asked;
  if (priority.value()) asked = static_cast<std::uint32_t>(*priority.value());
  session_->bury(id.value(), asked, call.reply.then<JobView>(job_view));
}

void Api::touch_job(Call& call) {
  if (Status s = call.body.parse(call.text, {}); !s.is_ok()) return call.reply(s);
  auto id = parse_id(call.params[0]);
  if (!id.is_ok()) return call.reply(id.status());
  session_->touch(id.value(), call.reply.then<JobView>(job_view));
}

void Api::kick_job(Call& call) {
  auto id = parse_id(call.params[0]);
  if (!id.is_ok()) return call.reply(id.status());
  session_->kick_job(id.value(), call.reply.then<JobView>(job_view));
}

// --- groups ----------------------------------------------------------------------------------

void Api::list_group(Call& call) {
  session_->list_group(
      call.params[0], call.params[1],
      call.reply.then<std::vector<JobView>>(
          [tube = call.params[0], group = call.params[1]](const std::vector<JobView>& jobs) {
            Response response;
            response.body = R"({"tube":)";
            append_string(response.body, tube);
            response.body += R"(,"group":)";
            append_string(response.body, group);
            response.body += R"(,"jobs":[)";
            for (std::size_t i = 0; i < jobs.size(); ++i) {
              if (i > 0) response.body += ',';
              append_job(response.body, jobs[i], nullptr);
            }
            response.body += "]}\n";
            return response;
          }));
}

void Api::cancel_group(Call& call) {
  session_->cancel_group(
      call.params[0], call.params[1],
      call.reply.then<std::size_t>(
          [tube = call.params[0], group = call.params[1]](std::size_t cancelled) {
            json::object o;
            o["tube"] = tube;
            o["group"] = group;
            o["cancelled"] = cancelled;
            return json_response(200, to_text(o));
          }));
}

// --- reserve ---------------------------------------------------------------------------------

namespace {

// A reserve's `count`: at most this many jobs in one answer, which stops taking more once its
// bodies reach kMaxTakenBytes (the first job is always in it).
constexpr std::uint64_t kMaxReserveCount = 100;
constexpr std::size_t kMaxTakenBytes = std::size_t{1} << 20;

}  // namespace

// A reserve with `count`: its answer's body so far ({"jobs":[ and the jobs taken), and what it
// asks for the rest.
struct Api::Taking {
  std::vector<std::string> tubes;
  std::size_t count = 0;
  std::size_t body_bytes = 0;
  bool more = true;  // false once a reserve found no job (or failed)
  Response response;
  Reply reply;
  // The reserve's wait, kept in waits_ until the list is answered: a client that goes away (or
  // a server that stops and answers it) meanwhile ends the list, and the jobs taken go back.
  std::shared_ptr<Wait> waiting;

  void add(const broker::Job& job) {
    if (!response.reserved.empty()) response.body += ',';
    append_job(response.body, job.view, &job.body, &job.delivery);
    response.reserved.push_back({job.view.id, job.view.counters.reserves});
    body_bytes += job.body.size();
  }
  [[nodiscard]] bool full() const {
    return !more || response.reserved.size() >= count || body_bytes >= kMaxTakenBytes;
  }
};

void Api::reserve(Call& call) {
  if (Status s = call.body.parse(call.text, {"tubes", "timeout", "count"}); !s.is_ok()) {
    return call.reply(s);
  }
  auto timeout = call.body.duration("timeout");
  if (!timeout.is_ok()) return call.reply(timeout.status());
  auto tubes = call.body.strings("tubes");
  if (!tubes.is_ok()) return call.reply(tubes.status());
  auto count = call.body.integer("count", kMaxReserveCount, 1);
  if (!count.is_ok()) return call.reply(count.status());
  const Millis wait = timeout.value().value_or(Millis{0});
  if (wait > options_.max_reserve_timeout) {
    return call.reply(
        error(400, "bad_request",
              "timeout: at most " + std::to_string(options_.max_reserve_timeout.count()) + " ms"));
  }
  broker::ReserveRequest request;
  request.tubes = tubes.value().value_or(std::vector<std::string>{"default"});
  // A name given twice counts once (the first stays in its place).
  std::unordered_set<std::string> named;
  std::erase_if(request.tubes,
                [&named](const std::string& tube) { return !named.insert(tube).second; });
  // Each tube a reserve names costs it (and, over Redis, a probe of every shard): bounded.
  constexpr std::size_t kMaxTubes = 1000;
  if (request.tubes.size() > kMaxTubes) {
    return call.reply(error(400, "bad_request",
                            "tubes: at most " + std::to_string(kMaxTubes) + " in one reserve"));
  }
  request.timeout = wait;
  // The wait's fate, shared with its completion: the ticket it got, and whether its client left.
  auto waiting = std::make_shared<Wait>();
  // With `count`, the answer is a list: the jobs after the first are those ready when it comes.
  std::shared_ptr<Taking> taking;
  if (count.value()) {
    taking = std::make_shared<Taking>(Taking{
        request.tubes, static_cast<std::size_t>(*count.value()), 0, true, {}, call.reply, waiting});
    taking->response.body = R"({"jobs":[)";
  }
  call.ticket = session_->reserve(std::move(request), [this, waiting, taking, reply = call.reply](
                                                          Result<broker::Job> job) mutable {
    if (waiting->ticket != 0 && !taking) waits_.erase(waiting->ticket);
    if (waiting->gone) {  // cancel(): the client went away; the answer counts nothing
      if (job.is_ok()) undeliverable({{job.value().view.id, job.value().view.counters.reserves}});
      if (taking) end_taking(*taking);
      return;
    }
    if (!job.is_ok() && taking) end_taking(*taking);
    if (!job.is_ok() && job.code() == Code::kTimedOut) {
      Response response;
      response.status = 204;
      return reply(std::move(response));
    }
    if (!job.is_ok()) return reply(job.status());
    const broker::Job& taken = job.value();
    if (!taking) {
      Response response = job_response(200, taken.view, &taken.body, &taken.delivery);
      response.reserved.push_back({taken.view.id, taken.view.counters.reserves});
      return reply(std::move(response));
    }
    taking->add(taken);
    take_more(std::move(taking));
  });
  if (call.ticket != 0) {
    waiting->ticket = call.ticket;
    waits_.emplace(call.ticket, std::move(waiting));
  }
}

// The jobs of a reserve with `count` after its first: each taken as a reserve that does not wait
// would take it, until the count, the answer's size, or no job ready ends the list. An error
// ends it too: the jobs taken are reserved, and are answered.
void Api::take_more(std::shared_ptr<Taking> taking) {
  if (taking->waiting->gone) {  // nobody to answer: the jobs taken go back
    undeliverable(taking->response.reserved);
    return end_taking(*taking);
  }
  if (taking->full()) {
    end_taking(*taking);
    taking->response.body += "]}\n";
    return taking->reply(std::move(taking->response));
  }
  broker::ReserveRequest request;
  request.tubes = taking->tubes;
  request.timeout = Millis{0};
  (void)session_->reserve(std::move(request), [this, taking](Result<broker::Job> job) mutable {
    if (job.is_ok()) {
      taking->add(job.value());
    } else {
      taking->more = false;
    }
    take_more(std::move(taking));
  });
}

void Api::end_taking(const Taking& taking) {
  if (taking.waiting->ticket != 0) waits_.erase(taking.waiting->ticket);
}

void Api::cancel(std::uint64_t ticket) {
  const auto it = waits_.find(ticket);
  if (it == waits_.end()) return;
  it->second->gone = true;
  (void)session_->cancel_reserve(ticket);
}

void Api::undeliverable(const std::vector<Reservation>& reserved) {
  for (const Reservation& job : reserved) {
    broker::ReleaseRequest request;
    request.id = job.id;
    request.reservation = job.token;  // a later reservation of it (its TTR lapsed) keeps it
    session_->release(request, [](const Result<JobView>&) {});
  }
}

// --- tubes and the server --------------------------------------------------------------------

void Api::list_tubes(Call& call) {
  admin_->list_tubes(call.reply.then<std::vector<TubeStats>>([this](const auto& listed) {
    const std::vector<TubeStats> tubes = by_name(listed);
    std::map<std::string, std::string, std::less<>> urls;
    for (auto& [name, webhook] : broker_.webhooks()) urls.emplace(name, std::move(webhook.url));
    json::array list;
    for (const TubeStats& tube : tubes) {
      json::object o = tube_json(tube);
      if (const auto url = urls.find(tube.name); url != urls.end()) {
        o["webhook_url"] = url->second;
        json::object deliveries;
        if (const auto* counted = metrics_.find_counters(kWebhookDeliveries)) {
          counted->for_each([&](std::span<const std::string_view> labels, std::int64_t count) {
            if (labels[0] == tube.name) deliveries[labels[1]] = count;  // tube, outcome
          });
        }
        o["webhook_deliveries"] = std::move(deliveries);
      }
      list.push_back(std::move(o));
    }
    json::object o;
    o["tubes"] = std::move(list);
    return json_response(200, to_text(o));
  }));
}

void Api::get_tube(Call& call) {
  admin_->stats_tube(call.params[0], call.reply.then<TubeStats>([](const TubeStats& tube) {
    return json_response(200, to_text(tube_json(tube)));
  }));
}

void Api::kick_tube(Call& call) {
  if (Status s = call.body.parse(call.text, {"bound"}); !s.is_ok()) return call.reply(s);
  auto bound = call.body.integer("bound", kMaxPriority);
  if (!bound.is_ok()) return call.reply(bound.status());
  session_->kick(call.params[0], static_cast<std::size_t>(bound.value().value_or(1)),
                 call.reply.then<std::size_t>([tube = call.params[0]](std::size_t kicked) {
                   json::object o;
                   o["tube"] = tube;
                   o["kicked"] = kicked;
                   return json_response(200, to_text(o));
                 }));
}

namespace {

// The flow control fields of PATCH /v1/tubes/{tube}; nullopt when none is given.
Result<std::optional<broker::FlowChange>> read_flow_change(const Body& body) {
  broker::FlowChange change;
  bool any = false;
  if (const json::value* v = body.find("group_concurrency"); v != nullptr) {
    any = true;
    if (v->is_null()) {
      change.group_concurrency = 0;
    } else {
      auto n = body.integer("group_concurrency", 1'000'000);
      if (!n.is_ok()) return n.status();
      change.group_concurrency = static_cast<std::uint32_t>(n.value().value_or(0));
    }
  }
  // null counts as absent, but for group_concurrency and group_rate, where it means none.
  const auto given = [&body](std::string_view name) {
    const json::value* v = body.find(name);
    return v != nullptr && !v->is_null();
  };
  if (given("fair")) {
    any = true;
    auto fair = body.boolean("fair");
    if (!fair.is_ok()) return fair.status();
    change.fair = fair.value();
  }
  if (const json::value* v = body.find("group_rate"); v != nullptr) {
    any = true;
    if (v->is_null() || (v->is_string() && v->as_string().empty())) {
      change.rate_jobs = 0;
    } else {
      auto text = body.string("group_rate");
      if (!text.is_ok()) return text.status();
      auto rate = parse_rate(*text.value());
      if (!rate.is_ok())
        return Status(Code::kInvalidArgument, "group_rate: " + rate.status().message());
      change.rate_jobs = rate.value().jobs;
      change.rate_period = rate.value().period;
    }
  }
  if (given("group_burst")) {
    any = true;
    auto burst = body.integer("group_burst", 1'000'000, 1);
    if (!burst.is_ok()) return burst.status();
    change.rate_burst = static_cast<std::uint32_t>(*burst.value());
  }
  if (const json::value* v = body.find("group_weights"); v != nullptr && !v->is_null()) {
    any = true;
    const Status bad(Code::kInvalidArgument,
                     "group_weights: an object of group -> weight (1 to 1000, or null for 1)");
    if (!v->is_object()) return bad;
    for (const auto& [group, weight] : v->as_object()) {
      std::uint32_t n = 1;
      if (weight.is_int64() && weight.as_int64() >= 1 && weight.as_int64() <= 1000) {
        n = static_cast<std::uint32_t>(weight.as_int64());
      } else if (weight.is_uint64() && weight.as_uint64() >= 1 && weight.as_uint64() <= 1000) {
        n = static_cast<std::uint32_t>(weight.as_uint64());
      } else if (!weight.is_null()) {
        return bad;
      }
      change.group_weights[std::string(group)] = n;
    }
  }
  if (!any) return std::optional<broker::FlowChange>();
  return std::optional<broker::FlowChange>(change);
}

}  // namespace

void Api::patch_tube(Call& call) {
  if (Status s = call.body.parse(call.text, {"max_attempts", "group_concurrency", "fair",
                                             "group_rate", "group_burst", "group_weights"});
      !s.is_ok()) {
    return call.reply(s);
  }
  auto max_attempts = call.body.integer("max_attempts", 1'000'000);
  if (!max_attempts.is_ok()) return call.reply(max_attempts.status());
  auto flow = read_flow_change(call.body);
  if (!flow.is_ok()) return call.reply(flow.status());
  if (!max_attempts.value() && !flow.value()) {
    return call.reply(error(400, "bad_request",
                            "give max_attempts, group_concurrency, fair, group_rate, "
                            "group_burst or group_weights (docs/http-api.md)"));
  }
  const std::string tube = call.params[0];
  // Flow control first, then max_attempts: each is one call, and the answer has both.
  const auto set_attempts = [this, tube, max_attempts = max_attempts.value(),
                             reply = call.reply](const json::object& o) {
    if (!max_attempts) return reply(json_response(200, to_text(o)));
    admin_->set_max_attempts(tube, static_cast<std::uint32_t>(*max_attempts),
                             reply.then<std::uint32_t>([o](std::uint32_t set) {
                               json::object out = o;
                               out["max_attempts"] = set;
                               return json_response(200, to_text(out));
                             }));
  };
  json::object o;
  o["tube"] = tube;
  if (!flow.value()) return set_attempts(o);
  admin_->set_flow(
      tube, *flow.value(),
      [set_attempts, o = std::move(o), reply = call.reply](Result<FlowSettings> settings) mutable {
        if (!settings.is_ok()) return reply(settings.status());
        put_flow_json(o, settings.value());
        set_attempts(o);
      });
}

void Api::pause_tube(Call& call) {
  if (Status s = call.body.parse(call.text, {"delay"}); !s.is_ok()) return call.reply(s);
  auto delay = call.body.duration("delay");
  if (!delay.is_ok()) return call.reply(delay.status());
  if (!delay.value()) {
    return call.reply(error(400, "bad_request", "delay: how long to pause, e.g. \"30s\""));
  }
  const broker::Seconds seconds{(delay.value()->count() + 999) / 1000};
  admin_->pause_tube(call.params[0], seconds,
                     call.reply.then<TubeStats>([seconds](const TubeStats& tube) {
                       json::object o;
                       o["tube"] = tube.name;
                       o["pause_s"] = seconds.count();
                       return json_response(200, to_text(o));
                     }));
}

// --- push delivery ---------------------------------------------------------------------------

void Api::put_webhook(Call& call) {
  auto hook = read_webhook(call.body, call.text);
  if (!hook.is_ok()) return call.reply(hook.status());
  admin_->set_webhook(call.params[0], std::move(hook).value(),
                      call.reply.then<Webhook>([](const Webhook& set) {
                        return json_response(200, to_text(webhook_json(set)));
                      }));
}

void Api::get_webhook(Call& call) {
  admin_->get_webhook(call.params[0], call.reply.then<Webhook>([](const Webhook& found) {
    return json_response(200, to_text(webhook_json(found)));
  }));
}

void Api::delete_webhook(Call& call) {
  admin_->remove_webhook(call.params[0], call.reply.then<Webhook>([](const Webhook& removed) {
    return json_response(200, to_text(webhook_json(removed)));
  }));
}

void Api::stats(Call& call) {
  admin_->stats(call.reply.then<ServerStats>([this](const ServerStats& s) {
    json::object o;
    o["version"] = options_.version;
    o["mode"] = options_.mode;
    o["uptime_s"] = broker_.uptime().count();
    o["draining"] = broker_.draining();
    o["ready"] = s.ready;
    o["delayed"] = s.delayed;
    o["reserved"] = s.reserved;
    o["buried"] = s.buried;
    o["urgent"] = s.urgent;
    o["total_jobs"] = s.total_jobs;
    o["job_timeouts"] = s.job_timeouts;
    o["tubes"] = s.tubes;
    o["next_id"] = s.next_id;
    o["waiting"] = s.waiting;
    o["deletes"] = s.deletes;
    o["buries"] = s.buries;
    // The broker's histogram (broker/families.h); an empty one if it keeps none.
    static const metrics::Histogram kNone({});
    const metrics::Histogram* fire_lateness = metrics_.find_histogram(broker::kFireLateness);
    const metrics::Histogram& fired = fire_lateness != nullptr ? *fire_lateness : kNone;
    o["fired"] = fired.count();
    json::object lateness;
    for (const auto& [name, q] : {std::pair{"p50_ms", 0.5}, {"p90_ms", 0.9}, {"p99_ms", 0.99}}) {
      const auto seconds = fired.quantile(q);
      lateness[name] = seconds ? json::value(*seconds * 1000) : json::value(nullptr);
    }
    json::array buckets;
    const auto& bounds = fired.bounds();
    const auto counts = fired.buckets();
    for (std::size_t i = 0; i < counts.size(); ++i) {
      json::object bucket;
      bucket["le_ms"] = i < bounds.size() ? json::value(bounds[i] * 1000) : json::value(nullptr);
      bucket["jobs"] = counts[i];
      buckets.push_back(std::move(bucket));
    }
    lateness["buckets"] = std::move(buckets);
    o["fire_lateness"] = std::move(lateness);
    json::object connections;
    for (const auto& [protocol, open] : ProtocolCounts::open_connections(metrics_)) {
      connections[protocol] = open;
    }
    o["connections"] = std::move(connections);
    const Status health = broker_.health();
    json::object store;
    store["status"] = health_word(health);
    if (!health.is_ok()) store["message"] = health.message();
    o["health"] = std::move(store);
    return json_response(200, to_text(o));
  }));
}

namespace {

// The broker's stats as the page's first families: jobs by tube and state, and its counts.
void job_families(metrics::Page& page, std::span<const TubeStats> tubes,
                  const ServerStats& server) {
  page.family("delayq_jobs", "Jobs by tube and state.", "gauge");
  for (const TubeStats& stats : tubes) {
    const std::pair<std::string_view, std::uint64_t> counts[] = {{"ready", stats.ready},
                                                                 {"delayed", stats.delayed},
                                                                 {"reserved", stats.reserved},
                                                                 {"buried", stats.buried}};
    for (const auto& [state, value] : counts) {
      page.sample("delayq_jobs", {{"tube", stats.name}, {"state", state}},
                  static_cast<std::int64_t>(value));
    }
  }
  page.family("delayq_tube_groups",
              "Groups of a tube with flow control: held back, or with a job that may be taken.",
              "gauge");
  for (const TubeStats& stats : tubes) {
    if (!stats.flow.any()) continue;
    page.sample("delayq_tube_groups", {{"tube", stats.name}, {"state", "held"}},
                static_cast<std::int64_t>(stats.groups_held));
    page.sample("delayq_tube_groups", {{"tube", stats.name}, {"state", "ready"}},
                static_cast<std::int64_t>(stats.groups_ready));
  }
  const std::tuple<std::string_view, std::string_view, std::string_view, std::uint64_t> totals[] = {
      {"delayq_jobs_created_total", "Jobs put since the data directory was created.", "counter",
       server.next_id - 1},
      {"delayq_job_timeouts_total",
       "Reservations whose TTR lapsed since the start (Redis mode: the cluster's, since each "
       "tube's counts began).",
       "counter", server.job_timeouts},
      {"delayq_jobs_deleted_total",
       "Jobs deleted since the start (Redis mode: the cluster's, since each tube's counts began).",
       "counter", server.deletes},
      {"delayq_jobs_buried_total", "Jobs buried since the start.", "counter", server.buries},
      {"delayq_waiting_clients", "Clients waiting in reserve.", "gauge", server.waiting}};
  for (const auto& [name, help, type, value] : totals) {
    page.family(name, help, type);
    page.sample(name, static_cast<std::int64_t>(value));
  }
}

}  // namespace

// The page needs the tubes and the server's counts: two calls, one after the other.
void Api::metrics(Call& call) {
  admin_->list_tubes([this, reply = call.reply](Result<std::vector<TubeStats>> tubes) {
    if (!tubes.is_ok()) return reply(tubes.status());
    admin_->stats(reply.then<ServerStats>(
        [this, tubes = by_name(std::move(tubes).value())](const ServerStats& server) {
          Response response;
          metrics::Page page(response.body);
          job_families(page, tubes, server);
          page.family("delayq_store_full",
                      "1 while the store refuses new jobs for want of room (the data "
                      "directory's disk below --min-free-disk, or Redis out of memory), else 0.",
                      "gauge");
          page.sample("delayq_store_full",
                      std::int64_t{broker_.health().code() == Code::kNoSpace ? 1 : 0});
          metrics_.render(page);
          response.content_type = "text/plain; version=0.0.4; charset=utf-8";
          return response;
        }));
  });
}

void Api::health(Call& call) {
  call.reply(json_response(200, R"({"status":"ok"})"));
}

void Api::ready(Call& call) {
  const Status health = broker_.health();
  if (!health.is_ok()) return call.reply(error(503, health_word(health), health.message()));
  call.reply(json_response(200, R"({"status":"ready"})"));
}

// --- due times --------------------------------------------------------------------------------

void Api::tube_due(Call& call) {
  due_counts(call, call.params[0]);
}

void Api::due(Call& call) {
  due_counts(call, {});
}

namespace {

constexpr std::size_t kMaxDueEdges = 1000;
constexpr std::size_t kMaxListedJobs = 1000;

// The edges of a due histogram from the query: in=<durations from now> or at=<instants>, each a
// comma-separated list; neither: the overview's 0s,1m,1h,1d,7d.
Result<std::vector<Due>> due_edges(std::string_view target) {
  const auto params = query_params(target);
  if (!params.is_ok()) return params.status();
  std::optional<std::string> in, at;
  for (const auto& [name, value] : params.value()) {
    if (name == "in") {
      in = value;
    } else if (name == "at") {
      at = value;
    } else {
      return Status(Code::kInvalidArgument,
                    "unknown query parameter '" + name.substr(0, 64) + "' (in or at)");
    }
  }
  if (in && at) return Status(Code::kInvalidArgument, "give in or at, not both");
  const bool relative = !at;
  std::string_view list = "0s,1m,1h,1d,7d";
  if (at) list = *at;
  if (in) list = *in;
  std::vector<Due> edges;
  while (!list.empty()) {
    const std::string_view item = list.substr(0, list.find(','));
    list.remove_prefix(std::min(list.size(), item.size() + 1));
    if (edges.size() == kMaxDueEdges) {
      return Status(Code::kInvalidArgument,
                    "at most " + std::to_string(kMaxDueEdges) + " edges in one request");
    }
    if (relative) {
      auto delay = parse_duration(item);
      if (!delay.is_ok()) return Status(Code::kInvalidArgument, "in: " + delay.status().message());
      edges.push_back(Due::after(delay.value()));
      continue;
    }
    std::int64_t unix_ms = 0;
    const auto [end, ec] = std::from_chars(item.data(), item.data() + item.size(), unix_ms);
    if (ec == std::errc{} && end == item.data() + item.size()) {
      if (unix_ms < 0 || unix_ms > kLastDueUnixMs) {
        return Status(Code::kInvalidArgument,
                      "at: Unix milliseconds from 0 to " + std::to_string(kLastDueUnixMs));
      }
      edges.push_back(Due::at(unix_ms));
      continue;
    }
    auto instant = parse_instant(item);
    if (!instant.is_ok()) {
      return Status(Code::kInvalidArgument, "at: " + instant.status().message());
    }
    edges.push_back(Due::at(instant.value()));
  }
  if (edges.empty()) return Status(Code::kInvalidArgument, "give at least one edge");
  return edges;
}

}  // namespace

void Api::due_counts(Call& call, std::string tube) {
  auto edges = due_edges(call.target);
  if (!edges.is_ok()) return call.reply(edges.status());
  admin_->due_counts(tube, std::move(edges).value(),
                     call.reply.then<broker::DueCounts>([tube](const broker::DueCounts& counts) {
                       json::object o;
                       if (!tube.empty()) o["tube"] = tube;
                       o["as_of_unix_ms"] = counts.as_of_unix_ms;
                       o["resolution_ms"] = counts.resolution.count();
                       std::uint64_t delayed = 0;
                       json::array buckets;
                       for (std::size_t i = 0; i < counts.jobs.size(); ++i) {
                         json::object bucket;
                         bucket["from_unix_ms"] = i == 0 ? json::value(nullptr)
                                                         : json::value(counts.edges_unix_ms[i - 1]);
                         bucket["to_unix_ms"] = i < counts.edges_unix_ms.size()
                                                    ? json::value(counts.edges_unix_ms[i])
                                                    : json::value(nullptr);
                         bucket["jobs"] = counts.jobs[i];
                         delayed += counts.jobs[i];
                         buckets.push_back(std::move(bucket));
                       }
                       o["delayed"] = delayed;
                       o["buckets"] = std::move(buckets);
                       return json_response(200, to_text(o));
                     }));
}

void Api::list_jobs(Call& call) {
  const auto params = query_params(call.target);
  if (!params.is_ok()) return call.reply(params.status());
  JobState state = JobState::kReady;
  std::size_t limit = 20;
  for (const auto& [name, value] : params.value()) {
    if (name == "state") {
      bool known = false;
      for (std::uint8_t s = 0; s < kJobStateCount; ++s) {
        if (value == state_name(static_cast<JobState>(s))) {
          state = static_cast<JobState>(s);
          known = true;
        }
      }
      if (!known) {
        return call.reply(
            error(400, "bad_request", "state: one of ready, delayed, reserved, buried"));
      }
    } else if (name == "limit") {
      const auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), limit);
      if (ec != std::errc{} || end != value.data() + value.size() || limit < 1 ||
          limit > kMaxListedJobs) {
        return call.reply(
            error(400, "bad_request", "limit: 1 to " + std::to_string(kMaxListedJobs) + " jobs"));
      }
    } else {
      return call.reply(
          error(400, "bad_request",
                "unknown query parameter '" + name.substr(0, 64) + "' (state, limit)"));
    }
  }
  admin_->list_jobs(call.params[0], state, limit,
                    call.reply.then<broker::JobList>([](const broker::JobList& list) {
                      Response response;
                      response.body = R"({"jobs":[)";
                      for (std::size_t i = 0; i < list.jobs.size(); ++i) {
                        if (i > 0) response.body += ',';
                        append_job(response.body, list.jobs[i], nullptr);
                      }
                      response.body +=
                          list.complete ? "],\"complete\":true}\n" : "],\"complete\":false}\n";
                      return response;
                    }));
}

// --- administration --------------------------------------------------------------------------

void Api::backup(Call& call) {
  if (Status s = call.body.parse(call.text, {"dir"}); !s.is_ok()) return call.reply(s);
  auto dir = call.body.string("dir");
  if (!dir.is_ok()) return call.reply(dir.status());
  // A missing dir is the broker's to refuse: in Redis mode there is no backup at all (501).
  admin_->backup(dir.value().value_or(""),
                 call.reply.then<broker::BackupResult>([](const broker::BackupResult& done) {
                   json::object o;
                   o["dir"] = done.dir;
                   o["jobs"] = done.jobs;
                   o["bytes"] = done.bytes;
                   o["took_ms"] = done.took.count();
                   return json_response(200, to_text(o));
                 }));
}

}  // namespace delayq::front::http
