#include "front/http/api.h"

#include <fmt/format.h>

#include <boost/json.hpp>
#include <charconv>
#include <cmath>
#include <initializer_list>
#include <limits>

#include "front/http/text.h"

namespace delayq::front::http {
namespace json = boost::json;

namespace {

std::string_view status_text(unsigned status) {
  switch (status) {
    case 200:
      return "200";
    case 201:
      return "201";
    case 204:
      return "204";
    case 400:
      return "400";
    case 404:
      return "404";
    case 405:
      return "405";
    case 409:
      return "409";
    case 413:
      return "413";
    case 431:
      return "431";
    case 500:
      return "500";
    case 503:
      return "503";
    default:
      return "other";
  }
}

std::string_view state_text(JobState state) {
  switch (state) {
    case JobState::kReady:
      return "ready";
    case JobState::kDelayed:
      return "delayed";
    case JobState::kReserved:
      return "reserved";
    case JobState::kBuried:
      return "buried";
  }
  return "unknown";
}

Result<JobId> parse_id(const std::string& text) {
  JobId id = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), id);
  if (error != std::errc() || end != text.data() + text.size() || id == 0) {
    return Status(Code::kInvalidArgument, "bad job id '" + text + "': a positive integer");
  }
  return id;
}

}  // namespace

// One request: its route's captures and its JSON body, read field by field. A body that is
// empty reads as {}; every field must be known to the route (a typo is an error, not a no-op).
struct Api::Request {
  Route route = Route::kCount;
  std::vector<std::string> params;
  std::string_view body;
  // The parsed body lives in a buffer on the stack (heap only if it outgrows it).
  unsigned char buffer[4096];
  json::monotonic_resource resource{buffer, sizeof buffer};
  json::value document = json::value(json::storage_ptr(&resource));
  const json::object* fields = nullptr;
  std::uint64_t ticket = 0;
  Respond respond;

  Status parse(std::initializer_list<std::string_view> allowed) {
    if (body.find_first_not_of(" \t\r\n") == std::string_view::npos) return Status::ok();
    boost::system::error_code error;
    document = json::parse(body, error, json::storage_ptr(&resource));
    if (error) {
      return {Code::kInvalidArgument, "the body is not JSON: " + error.message()};
    }
    if (!document.is_object()) return {Code::kInvalidArgument, "the body must be a JSON object"};
    fields = &document.as_object();
    for (const auto& field : *fields) {
      bool known = false;
      for (const std::string_view name : allowed) known = known || name == field.key();
      if (!known) {
        std::string names;
        for (const std::string_view name : allowed)
          names += (names.empty() ? "" : ", ") + std::string(name);
        return {Code::kInvalidArgument,
                "unknown field '" + std::string(field.key()) +
                    "' (this endpoint takes: " + (names.empty() ? "nothing" : names) + ")"};
      }
    }
    return Status::ok();
  }
  [[nodiscard]] const json::value* find(std::string_view name) const {
    return fields == nullptr ? nullptr : fields->if_contains(name);
  }

  Result<std::optional<std::string>> string(std::string_view name) const {
    const json::value* v = find(name);
    if (v == nullptr || v->is_null()) return std::optional<std::string>();
    if (!v->is_string()) return Status(Code::kInvalidArgument, std::string(name) + ": a string");
    return std::optional<std::string>(std::string(v->as_string()));
  }
  Result<std::optional<std::uint64_t>> integer(std::string_view name, std::uint64_t max) const {
    const json::value* v = find(name);
    if (v == nullptr || v->is_null()) return std::optional<std::uint64_t>();
    std::uint64_t n = 0;
    if (v->is_uint64()) {
      n = v->as_uint64();
    } else if (v->is_int64() && v->as_int64() >= 0) {
      n = static_cast<std::uint64_t>(v->as_int64());
    } else {
      return Status(Code::kInvalidArgument,
                    std::string(name) + ": an integer from 0 to " + std::to_string(max));
    }
    if (n > max) {
      return Status(Code::kInvalidArgument,
                    std::string(name) + ": an integer from 0 to " + std::to_string(max));
    }
    return std::optional<std::uint64_t>(n);
  }
  // A duration: "48h", "1500ms", or a number of milliseconds.
  Result<std::optional<Millis>> duration(std::string_view name) const {
    const json::value* v = find(name);
    if (v == nullptr || v->is_null()) return std::optional<Millis>();
    if (v->is_string()) {
      auto parsed = parse_duration(v->as_string());
      if (!parsed.is_ok()) {
        return Status(Code::kInvalidArgument, std::string(name) + ": " + parsed.status().message());
      }
      return std::optional<Millis>(parsed.value());
    }
    auto n = integer(name, std::uint64_t{100} * 365 * 24 * 3600 * 1000);
    if (!n.is_ok()) {
      return Status(Code::kInvalidArgument,
                    std::string(name) + ": a duration (\"48h\", \"1500ms\") or milliseconds");
    }
    return std::optional<Millis>(Millis{static_cast<std::int64_t>(*n.value())});
  }
  // An instant: RFC 3339 text or Unix milliseconds.
  Result<std::optional<std::int64_t>> instant(std::string_view name) const {
    const json::value* v = find(name);
    if (v == nullptr || v->is_null()) return std::optional<std::int64_t>();
    if (v->is_string()) {
      auto parsed = parse_instant(v->as_string());
      if (!parsed.is_ok()) {
        return Status(Code::kInvalidArgument, std::string(name) + ": " + parsed.status().message());
      }
      return std::optional<std::int64_t>(parsed.value());
    }
    auto n = integer(name, std::uint64_t{253402300799999});  // 9999-12-31T23:59:59.999Z
    if (!n.is_ok()) {
      return Status(Code::kInvalidArgument,
                    std::string(name) + ": an RFC 3339 time or Unix milliseconds");
    }
    return std::optional<std::int64_t>(static_cast<std::int64_t>(*n.value()));
  }
  Result<bool> boolean(std::string_view name) const {
    const json::value* v = find(name);
    if (v == nullptr || v->is_null()) return false;
    if (!v->is_bool()) return Status(Code::kInvalidArgument, std::string(name) + ": true or false");
    return v->as_bool();
  }
};

// Shorthand: return the error response if a Result failed.
#define DELAYQ_FIELD(var, expr) \
  auto var = (expr);            \
  if (!var.is_ok()) return from_status(var.status())

Api::Api(local::Node& node, ApiOptions options) : node_(node), options_(std::move(options)) {
  client_ = engine().connect_internal();
}

Api::~Api() {
  for (const auto& [waiter, respond] : waiting_) {
    node_.forget(waiter);
    engine().disconnect(waiter);
  }
  // Jobs reserved over HTTP are ready again, as a closed connection's are.
  engine().disconnect(client_);
  node_.touched();
}

std::uint64_t Api::handle(std::string_view method, std::string_view target, std::string_view body,
                          Respond respond) {
  Match found = match(method, target);
  Response response;
  std::string_view op = "unrouted";
  if (found.kind == Match::Kind::kNoPath) {
    response = error(404, "no_route", "no such endpoint: " + std::string(target.substr(0, 200)));
  } else if (found.kind == Match::Kind::kNoMethod) {
    response = error(405, "method_not_allowed",
                     std::string(method) + " is not allowed here (allowed: " + found.allow + ")");
    response.allow = found.allow;
  } else {
    op = route_name(found.route);
    Request request;
    request.route = found.route;
    request.params = std::move(found.params);
    request.body = body;
    request.respond = std::move(respond);
    response = dispatch(request);
    if (request.ticket != 0) {  // reserve: the answer comes later
      node_.touched();          // (the node arms its timer for the wait's end)
      return request.ticket;
    }
    respond = std::move(request.respond);
  }
  answer(op, std::move(response), respond);
  return 0;
}

// Counts the operation, then hands over the answer tagged with the batch that must be durable
// before it leaves (everything done so far, this request included).
void Api::answer(std::string_view op, Response response, const Respond& respond) {
  node_.metrics().count_op(local::Protocol::kHttp, op, status_text(response.status));
  node_.touched();
  response.barrier = node_.barrier();
  respond(std::move(response));
}

Response Api::dispatch(Request& request) {
  const auto& p = request.params;
  for (const std::string& param : p) {
    if (!valid_utf8(param)) {
      return error(400, "bad_request", "a tube, key or group in the path is not UTF-8");
    }
  }
  auto with_id = [&](auto&& handler) -> Response {
    auto id = parse_id(p[0]);
    if (!id.is_ok()) return from_status(id.status());
    return handler(id.value());
  };
  auto with_key = [&](auto&& handler) -> Response {
    auto id = job_by_key(p[0], p[1]);
    if (!id.is_ok()) return from_status(id.status());
    return handler(id.value());
  };
  switch (request.route) {
    case Route::kPutJob:
      return put_job(request);
    case Route::kGetJob:
      return with_id([&](JobId id) { return get_job(id); });
    case Route::kPatchJob:
      return with_id([&](JobId id) { return patch_job(request, id); });
    case Route::kDeleteJob:
      return with_id([&](JobId id) { return delete_job(id); });
    case Route::kReleaseJob:
      return with_id([&](JobId id) { return release_job(request, id); });
    case Route::kBuryJob:
      return with_id([&](JobId id) { return bury_job(request, id); });
    case Route::kTouchJob:
      return with_id([&](JobId id) { return touch_job(request, id); });
    case Route::kKickJob:
      return with_id([&](JobId id) { return kick_job(id); });
    case Route::kGetKey:
      return with_key([&](JobId id) { return get_job(id); });
    case Route::kPatchKey:
      return with_key([&](JobId id) { return patch_job(request, id); });
    case Route::kDeleteKey:
      return with_key([&](JobId id) { return delete_job(id); });
    case Route::kListGroup:
      return list_group(p[0], p[1]);
    case Route::kCancelGroup:
      return cancel_group(p[0], p[1]);
    case Route::kReserve:
      return reserve(request);
    case Route::kListTubes:
      return list_tubes();
    case Route::kGetTube:
      return get_tube(p[0]);
    case Route::kKickTube:
      return kick_tube(request, p[0]);
    case Route::kPauseTube:
      return pause_tube(request, p[0]);
    case Route::kStats:
      return stats();
    case Route::kMetrics:
      return metrics();
    case Route::kHealth:
      return json(200, R"({"status":"ok"})");
    case Route::kReady:
      return ready();
    case Route::kCount:
      break;
  }
  return error(500, "internal", "unrouted request");
}

// --- responses -------------------------------------------------------------------------------

Response Api::json(unsigned status, const std::string& body) {
  Response response;
  response.status = status;
  response.body = body;
  response.body += '\n';
  return response;
}

Response Api::error(unsigned status, std::string_view code, std::string_view message) {
  json::object inner;
  inner["code"] = code;
  if (valid_utf8(message)) {
    inner["message"] = message;
  } else {  // it quotes the request's bytes: keep the JSON valid
    std::string safe(message);
    for (char& c : safe) {
      if (static_cast<unsigned char>(c) >= 0x80) c = '?';
    }
    inner["message"] = safe;
  }
  json::object outer;
  outer["error"] = std::move(inner);
  return json(status, json::serialize(outer));
}

Response Api::from_status(const Status& status) {
  switch (status.code()) {
    case Code::kNotFound:
      return error(404, "not_found", status.message());
    case Code::kInvalidArgument:
      return error(400, "bad_request", status.message());
    case Code::kConflict:
      return error(409, "conflict", status.message());
    case Code::kLimit:
      return error(503, "limit", status.message());
    default:
      return error(500, "internal", status.message());
  }
}

Response Api::job_error(const Status& status, JobId id, std::string_view not_yours) {
  if (status.code() == Code::kNotFound && engine().peek(id).is_ok()) {
    return error(409, "conflict", "job " + std::to_string(id) + " " + std::string(not_yours));
  }
  return from_status(status);
}

namespace {

// A JSON string literal for `text`, appended to out: quotes, backslashes and control
// characters escaped; other bytes as they are (the caller passes UTF-8).
void append_string(std::string& out, std::string_view text) {
  static constexpr char kHex[] = "0123456789abcdef";
  out += '"';
  for (const char c : text) {
    const auto u = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (u < 0x20) {
      out += "\\u00";
      out += kHex[u >> 4];
      out += kHex[u & 15];
    } else {
      out += c;
    }
  }
  out += '"';
}

// A job as JSON, written straight into `out` (the hot path of put, get and reserve: no JSON tree).
// body: the job's body, or null to leave it out.
void append_job(std::string& out, const engine::JobView& job, const std::string* body) {
  fmt::format_to(std::back_inserter(out), R"({{"id":{},"tube":)", job.id);
  append_string(out, job.tube);
  fmt::format_to(std::back_inserter(out),
                 R"(,"state":"{}","priority":{},"due":"{}","due_unix_ms":{},"delay_ms":{},)"
                 R"("ttr_ms":{},"created":"{}")",
                 state_text(job.state), job.priority, format_instant(job.due_unix_ms),
                 job.due_unix_ms, job.delay_ms, job.ttr.count() * 1000,
                 format_instant(job.created_unix_ms));
  if (job.state == JobState::kReserved) {
    fmt::format_to(std::back_inserter(out), R"(,"reserved_until":"{}","reserved_until_unix_ms":{})",
                   format_instant(job.deadline_unix_ms), job.deadline_unix_ms);
  }
  if (!job.key.empty()) {
    out += R"(,"key":)";
    append_string(out, job.key);
  }
  if (!job.group.empty()) {
    out += R"(,"group":)";
    append_string(out, job.group);
  }
  fmt::format_to(
      std::back_inserter(out),
      R"(,"counters":{{"reserves":{},"timeouts":{},"releases":{},"buries":{},"kicks":{}}})",
      job.counters.reserves, job.counters.timeouts, job.counters.releases, job.counters.buries,
      job.counters.kicks);
  if (body != nullptr) {
    if (valid_utf8(*body)) {
      out += R"(,"body":)";
      append_string(out, *body);
    } else {
      out += R"(,"body_base64":")";
      out += base64_encode(*body);
      out += '"';
    }
  }
  out += '}';
}

}  // namespace

Response Api::job_response(unsigned status, JobId id, bool with_body) {
  auto view = engine().peek(id);
  if (!view.is_ok()) return from_status(view.status());
  Response response;
  response.status = status;
  response.body.reserve(512);
  if (with_body) {
    auto body = node_.body(id);
    if (!body.is_ok()) return from_status(body.status());
    append_job(response.body, view.value(), &body.value());
  } else {
    append_job(response.body, view.value(), nullptr);
  }
  response.body += '\n';
  return response;
}

// --- jobs ------------------------------------------------------------------------------------

Response Api::put_job(Request& request) {
  if (Status s = request.parse(
          {"body", "body_base64", "delay", "at", "priority", "ttr", "key", "group", "replace"});
      !s.is_ok()) {
    return from_status(s);
  }
  if (node_.draining()) return error(503, "draining", "the server is draining: no new jobs");
  DELAYQ_FIELD(text, request.string("body"));
  DELAYQ_FIELD(encoded, request.string("body_base64"));
  if (text.value() && encoded.value()) {
    return error(400, "bad_request", "give body or body_base64, not both");
  }
  std::string body;
  if (encoded.value()) {
    auto decoded = base64_decode(*encoded.value());
    if (!decoded.is_ok()) {
      return error(400, "bad_request", "body_base64: " + decoded.status().message());
    }
    body = std::move(decoded).value();
  } else if (text.value()) {
    body = std::move(*text.value());
  }
  if (body.size() > options_.max_job_bytes) {
    return error(413, "too_large",
                 "the job body is " + std::to_string(body.size()) + " bytes; at most " +
                     std::to_string(options_.max_job_bytes));
  }
  DELAYQ_FIELD(delay, request.duration("delay"));
  DELAYQ_FIELD(at, request.instant("at"));
  if (delay.value() && at.value()) return error(400, "bad_request", "give delay or at, not both");
  DELAYQ_FIELD(priority, request.integer("priority", std::numeric_limits<std::uint32_t>::max()));
  DELAYQ_FIELD(ttr, request.duration("ttr"));
  DELAYQ_FIELD(key, request.string("key"));
  DELAYQ_FIELD(group, request.string("group"));
  DELAYQ_FIELD(replace, request.boolean("replace"));

  engine::PutRequest put;
  put.tube = request.params[0];
  put.priority = static_cast<std::uint32_t>(priority.value().value_or(1024));
  put.delay = delay.value().value_or(Millis{0});
  put.due_unix_ms = at.value();
  if (ttr.value()) {
    const std::int64_t seconds = (ttr.value()->count() + 999) / 1000;
    if (seconds > std::numeric_limits<std::uint32_t>::max()) {
      return error(400, "bad_request", "ttr: at most 4294967295 s");
    }
    put.ttr = engine::Seconds{std::max<std::int64_t>(1, seconds)};
  }
  put.body = body;
  const std::string key_text = key.value().value_or("");
  const std::string group_text = group.value().value_or("");
  put.key = key_text;
  put.group = group_text;
  put.replace = replace.value();
  auto result = engine().put(client_, put);
  if (!result.is_ok()) return from_status(result.status());
  const JobId id = result.value().id;
  Response response = job_response(result.value().inserted ? 201 : 200, id, false);
  response.location = "/v1/jobs/" + std::to_string(id);
  return response;
}

Response Api::get_job(JobId id) {
  return job_response(200, id, true);
}

Result<JobId> Api::job_by_key(const std::string& tube, const std::string& key) {
  return engine().find_key(tube, key);
}

Response Api::patch_job(Request& request, JobId id) {
  if (Status s = request.parse({"delay", "at", "priority"}); !s.is_ok()) return from_status(s);
  DELAYQ_FIELD(delay, request.duration("delay"));
  DELAYQ_FIELD(at, request.instant("at"));
  DELAYQ_FIELD(priority, request.integer("priority", std::numeric_limits<std::uint32_t>::max()));
  if (delay.value() && at.value()) return error(400, "bad_request", "give delay or at, not both");
  if (!delay.value() && !at.value() && !priority.value()) {
    return error(400, "bad_request", "nothing to change: give delay or at, and/or priority");
  }
  if (!engine().peek(id).is_ok()) return from_status(engine().peek(id).status());
  if (at.value()) {
    if (Status s = engine().reschedule(id, *at.value()); !s.is_ok()) return from_status(s);
  } else if (delay.value()) {
    // A delay of 0 means now: the job is ready at once.
    const Millis wait = *delay.value();
    const std::int64_t due = wait.count() == 0 ? engine().now() : engine().due_after(wait);
    if (Status s = engine().reschedule(id, due, wait); !s.is_ok()) return from_status(s);
  }
  if (priority.value()) {
    if (Status s = engine().set_priority(id, static_cast<std::uint32_t>(*priority.value()));
        !s.is_ok()) {
      return from_status(s);
    }
  }
  return job_response(200, id, false);
}

Response Api::delete_job(JobId id) {
  if (Status s = engine().erase(client_, id); !s.is_ok()) {
    return job_error(s, id, "is reserved by a beanstalkd connection");
  }
  json::object o;
  o["deleted"] = id;
  return json(200, json::serialize(o));
}

std::uint32_t Api::priority_or_own(JobId id, std::optional<std::uint64_t> asked) {
  if (asked) return static_cast<std::uint32_t>(*asked);  // checked to fit by the caller
  const auto view = engine().peek(id);
  return view.is_ok() ? view.value().priority : 0;
}

Response Api::release_job(Request& request, JobId id) {
  if (Status s = request.parse({"delay", "priority"}); !s.is_ok()) return from_status(s);
  DELAYQ_FIELD(delay, request.duration("delay"));
  DELAYQ_FIELD(priority, request.integer("priority", std::numeric_limits<std::uint32_t>::max()));
  if (Status s = engine().release(client_, id, priority_or_own(id, priority.value()),
                                  delay.value().value_or(Millis{0}));
      !s.is_ok()) {
    return job_error(s, id, "is not reserved over HTTP");
  }
  return job_response(200, id, false);
}

Response Api::bury_job(Request& request, JobId id) {
  if (Status s = request.parse({"priority"}); !s.is_ok()) return from_status(s);
  DELAYQ_FIELD(priority, request.integer("priority", std::numeric_limits<std::uint32_t>::max()));
  if (Status s = engine().bury(client_, id, priority_or_own(id, priority.value())); !s.is_ok()) {
    return job_error(s, id, "is not reserved over HTTP");
  }
  return job_response(200, id, false);
}

Response Api::touch_job(Request& request, JobId id) {
  if (Status s = request.parse({}); !s.is_ok()) return from_status(s);
  if (Status s = engine().touch(client_, id); !s.is_ok()) {
    return job_error(s, id, "is not reserved over HTTP");
  }
  return job_response(200, id, false);
}

Response Api::kick_job(JobId id) {
  if (Status s = engine().kick_job(id); !s.is_ok()) {
    return job_error(s, id, "is neither buried nor delayed");
  }
  return job_response(200, id, false);
}

// --- groups ----------------------------------------------------------------------------------

Response Api::list_group(const std::string& tube, const std::string& group) {
  Response response;
  response.body = R"({"tube":)";
  append_string(response.body, tube);
  response.body += R"(,"group":)";
  append_string(response.body, group);
  response.body += R"(,"jobs":[)";
  bool first = true;
  for (const engine::JobView& job : engine().list_group(tube, group)) {
    if (!first) response.body += ',';
    first = false;
    append_job(response.body, job, nullptr);
  }
  response.body += "]}\n";
  return response;
}

Response Api::cancel_group(const std::string& tube, const std::string& group) {
  json::object o;
  o["tube"] = tube;
  o["group"] = group;
  o["cancelled"] = engine().cancel_group(tube, group);
  return json(200, json::serialize(o));
}

// --- reserve ---------------------------------------------------------------------------------

Response Api::reserve(Request& request) {
  if (Status s = request.parse({"tubes", "timeout"}); !s.is_ok()) return from_status(s);
  DELAYQ_FIELD(timeout, request.duration("timeout"));
  const Millis wait = timeout.value().value_or(Millis{0});
  if (wait > options_.max_reserve_timeout) {
    return error(
        400, "bad_request",
        "timeout: at most " + std::to_string(options_.max_reserve_timeout.count()) + " ms");
  }
  std::vector<std::string> tubes;
  if (const json::value* v = request.find("tubes"); v != nullptr && !v->is_null()) {
    if (!v->is_array() || v->as_array().empty()) {
      return error(400, "bad_request", "tubes: a non-empty array of tube names");
    }
    for (const json::value& tube : v->as_array()) {
      if (!tube.is_string()) return error(400, "bad_request", "tubes: tube names are strings");
      tubes.emplace_back(tube.as_string());
    }
  } else {
    tubes.emplace_back("default");
  }
  const engine::ClientId waiter = engine().connect_internal();
  for (const std::string& tube : tubes) {
    if (auto watched = engine().watch(waiter, tube); !watched.is_ok()) {
      engine().disconnect(waiter);
      return from_status(watched.status());
    }
  }
  const engine::ReserveResult result = engine().reserve(waiter, wait);
  if (result.kind != engine::ReserveResult::Kind::kWaiting) return reserved(waiter, result);

  // Wait: the node calls back when a job is handed to the waiter or the timeout passes.
  request.ticket = waiter;
  waiting_.emplace(waiter, std::move(request.respond));
  node_.on_wakeup(waiter, [this, waiter](const engine::ReserveResult& later) {
    const auto it = waiting_.find(waiter);
    if (it == waiting_.end()) return;
    Respond respond = std::move(it->second);
    waiting_.erase(it);
    answer(route_name(Route::kReserve), reserved(waiter, later), respond);
  });
  return {};
}

Response Api::reserved(engine::ClientId waiter, const engine::ReserveResult& result) {
  if (result.kind != engine::ReserveResult::Kind::kReserved) {
    engine().disconnect(waiter);
    node_.touched();
    Response response;
    response.status = 204;
    return response;
  }
  const JobId id = result.job.id;
  const Status handed = engine().hand_over(id, waiter, client_);
  engine().disconnect(waiter);
  node_.touched();
  if (!handed.is_ok()) return from_status(handed);
  Response response = job_response(200, id, true);
  response.reserved = id;
  response.reserved_token = result.job.counters.reserves;
  return response;
}

void Api::cancel(std::uint64_t ticket) {
  if (waiting_.erase(ticket) == 0) return;
  node_.forget(ticket);
  engine().disconnect(ticket);
  node_.touched();
}

void Api::undeliverable(JobId id, std::uint64_t token) {
  const auto view = engine().peek(id);
  // Its TTR may have lapsed since, and another HTTP caller reserved it: that one keeps it.
  if (!view.is_ok() || view.value().counters.reserves != token) return;
  (void)engine().release(client_, id, view.value().priority, Millis{0});
  node_.touched();
}

// --- tubes and the server --------------------------------------------------------------------

namespace {

json::object tube_json(const engine::TubeStats& t) {
  json::object o;
  o["name"] = t.name;
  o["ready"] = t.ready;
  o["delayed"] = t.delayed;
  o["reserved"] = t.reserved;
  o["buried"] = t.buried;
  o["urgent"] = t.urgent;
  o["total_jobs"] = t.total_jobs;
  o["deletes"] = t.deletes;
  o["waiting"] = t.waiting_clients;
  o["watching"] = t.watching_clients;
  o["using"] = t.using_clients;
  o["pause_s"] = t.pause.count();
  o["pause_left_ms"] = t.pause_left.count();
  return o;
}

}  // namespace

Response Api::list_tubes() {
  json::array tubes;
  for (const std::string& name : engine().tubes()) {
    if (auto stats = engine().stats_tube(name); stats.is_ok()) {
      tubes.push_back(tube_json(stats.value()));
    }
  }
  json::object o;
  o["tubes"] = std::move(tubes);
  return json(200, json::serialize(o));
}

Response Api::get_tube(const std::string& tube) {
  auto stats = engine().stats_tube(tube);
  if (!stats.is_ok()) return from_status(stats.status());
  return json(200, json::serialize(tube_json(stats.value())));
}

Response Api::kick_tube(Request& request, const std::string& tube) {
  if (Status s = request.parse({"bound"}); !s.is_ok()) return from_status(s);
  DELAYQ_FIELD(bound, request.integer("bound", std::numeric_limits<std::uint32_t>::max()));
  json::object o;
  o["tube"] = tube;
  o["kicked"] = engine().kick(tube, static_cast<std::size_t>(bound.value().value_or(1)));
  return json(200, json::serialize(o));
}

Response Api::pause_tube(Request& request, const std::string& tube) {
  if (Status s = request.parse({"delay"}); !s.is_ok()) return from_status(s);
  DELAYQ_FIELD(delay, request.duration("delay"));
  if (!delay.value()) return error(400, "bad_request", "delay: how long to pause, e.g. \"30s\"");
  const engine::Seconds seconds{(delay.value()->count() + 999) / 1000};
  if (Status s = engine().pause_tube(tube, seconds); !s.is_ok()) return from_status(s);
  json::object o;
  o["tube"] = tube;
  o["pause_s"] = seconds.count();
  return json(200, json::serialize(o));
}

Response Api::stats() {
  const engine::ServerStats s = engine().stats();
  json::object o;
  o["version"] = options_.version;
  o["uptime_s"] = (engine().now() - node_.started_unix_ms()) / 1000;
  o["draining"] = node_.draining();
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
  return json(200, json::serialize(o));
}

Response Api::metrics() {
  Response response;
  response.body = node_.metrics().render(engine());
  response.content_type = "text/plain; version=0.0.4; charset=utf-8";
  return response;
}

Response Api::ready() {
  if (!node_.healthy()) return error(503, "unavailable", "the store has failed");
  if (node_.draining()) return error(503, "draining", "the server is draining");
  return json(200, R"({"status":"ready"})");
}

}  // namespace delayq::front::http
