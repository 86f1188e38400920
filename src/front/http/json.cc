#include "front/http/json.h"

#include <fmt/format.h>

#include <cmath>

#include "front/http/text.h"
#include "schedule/definition.h"

namespace delayq::front::http {
namespace json = boost::json;

void append_job(std::string& out, const JobView& job, const std::string* body,
                const Delivery* delivery) {
  fmt::format_to(std::back_inserter(out), R"({{"id":{},"tube":)", job.id);
  append_string(out, job.tube);
  fmt::format_to(std::back_inserter(out),
                 R"(,"state":"{}","priority":{},"due":"{}","due_unix_ms":{},"delay_ms":{},)"
                 R"("ttr_ms":{},"created":"{}")",
                 state_name(job.state), job.priority, format_instant(job.due_unix_ms),
                 job.due_unix_ms, job.delay_ms, job.ttr.count() * 1000,
                 format_instant(job.created_unix_ms));
  if (job.state == JobState::kReserved) {
    fmt::format_to(std::back_inserter(out), R"(,"reserved_until":"{}","reserved_until_unix_ms":{})",
                   format_instant(job.deadline_unix_ms), job.deadline_unix_ms);
  }
  if (!job.key.empty()) {
    out += R"(,"key":)";
    append_string(out, job.key);
    // A schedule's run (docs/schedules.md): its schedule and instant, as its key says.
    if (const auto run = schedule::parse_run_key(job.key)) {
      out += R"(,"schedule":{"name":)";
      append_string(out, run->name);
      fmt::format_to(std::back_inserter(out), R"(,"instant":"{}","instant_unix_ms":{}}})",
                     format_instant(run->instant_unix_ms), run->instant_unix_ms);
    }
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
  if (delivery != nullptr) {
    // Each only when set.
    for (const auto& [name, value] : {std::pair{R"(,"url":)", &delivery->url},
                                      std::pair{R"(,"content_type":)", &delivery->content_type},
                                      std::pair{R"(,"traceparent":)", &delivery->traceparent},
                                      std::pair{R"(,"tracestate":)", &delivery->tracestate}}) {
      if (value->empty()) continue;
      out += name;
      append_string(out, *value);
    }
  }
  if (delivery != nullptr && delivery->last_attempt_unix_ms != 0) {
    fmt::format_to(std::back_inserter(out), R"(,"last_attempt":"{}","last_status":{},)",
                   format_instant(delivery->last_attempt_unix_ms), delivery->last_status);
    out += R"("last_error":)";
    append_string(out, delivery->last_error);
  }
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

// A whole number as an integer (2, not Boost.JSON's 2E0), anything else as a double.
json::value number(double value) {
  if (value == std::floor(value) && std::fabs(value) < 1e15) {
    return static_cast<std::int64_t>(value);
  }
  return value;
}

json::object webhook_json(const Webhook& webhook) {
  json::object o;
  o["url"] = webhook.url;
  json::object headers;
  for (const auto& [name, value] : webhook.headers) headers[name] = value;
  o["headers"] = std::move(headers);
  o["timeout"] = format_duration(webhook.timeout);
  o["max_attempts"] = webhook.max_attempts;
  o["backoff"] = json::object{{"min", format_duration(webhook.backoff.min)},
                              {"max", format_duration(webhook.backoff.max)},
                              {"factor", number(webhook.backoff.factor)}};
  o["rate"] = number(webhook.rate);
  o["concurrency"] = webhook.concurrency;
  // The secrets are not shown back: how many there are is enough to check a rotation.
  o["secrets"] = webhook.secrets.size();
  return o;
}

json::object tube_json(const TubeStats& t) {
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
  o["max_attempts"] = t.max_attempts;
  o["oldest_ready_age_ms"] = t.oldest_ready_age.count();
  put_flow_json(o, t.flow);
  o["groups_held"] = t.groups_held;
  o["groups_ready"] = t.groups_ready;
  return o;
}

void put_flow_json(json::object& out, const FlowSettings& flow) {
  out["group_concurrency"] = flow.group_concurrency;
  out["fair"] = flow.fair;
  if (flow.rate_jobs == 0) {
    out["group_rate"] = nullptr;
  } else {
    out["group_rate"] = format_rate({flow.rate_jobs, flow.rate_period});
  }
  out["group_burst"] = flow.rate_burst;
  json::object weights;
  for (const auto& [group, weight] : flow.group_weights) weights[group] = weight;
  out["group_weights"] = std::move(weights);
}

std::string error_json(std::string_view code, std::string_view message) {
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
  return json::serialize(outer);
}

}  // namespace delayq::front::http
