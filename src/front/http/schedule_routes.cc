// schedule_routes.cc — the HTTP API's recurring schedules (/v1/schedules): a definition read from
// JSON, checked by schedule::compile (the same checks the broker makes), and a schedule written
// back with its next run and counts. Fields and limits: docs/http-api.md, docs/schedules.md.
#include <boost/json.hpp>
#include <charconv>
#include <chrono>
#include <limits>
#include <span>

#include "base/names.h"
#include "broker/schedules.h"
#include "front/http/api_call.h"
#include "front/http/json.h"
#include "front/http/text.h"
#include "schedule/planner.h"

namespace delayq::front::http {
namespace json = boost::json;

namespace {

constexpr std::size_t kDefaultListed = 100;
constexpr std::size_t kMaxListed = 1000;
constexpr std::size_t kDefaultNext = 10;
constexpr std::size_t kMaxNext = 1000;
// Names are checked by the broker, which knows its limit; here a name only needs to compile.
constexpr std::size_t kAnyNameBytes = std::numeric_limits<std::size_t>::max() / 2;

// The fields of PUT /v1/schedules/{name}; a preview takes count and after as well.
constexpr std::string_view kFields[] = {
    "tube",   "cron",    "every",        "tz",      "body",     "body_base64", "priority",
    "ttr",    "url",     "content_type", "group",   "start_at", "end_at",      "limit",
    "jitter", "misfire", "max_lateness", "overlap", "paused",   "count",       "after"};
constexpr std::span<const std::string_view> kScheduleFields(kFields, std::size(kFields) - 2);
constexpr std::span<const std::string_view> kPreviewFields(kFields);

std::int64_t wall_now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

Status field_error(std::string_view field, std::string_view what) {
  return {Code::kInvalidArgument, std::string(field) + ": " + std::string(what)};
}

// A PUT body (or a preview's) as a definition named `name`.
Result<schedule::Definition> read_definition(const Body& body, std::string name) {
  schedule::Definition d;
  d.name = std::move(name);
  auto job = read_job_fields(body);
  if (!job.is_ok()) return job.status();
  d.body = std::move(job.value().body);
  d.priority = job.value().priority;
  d.ttr = job.value().ttr;
  d.group = std::move(job.value().group);
  d.url = std::move(job.value().url);
  d.content_type = std::move(job.value().content_type);
  auto tube = body.string("tube");
  if (!tube.is_ok()) return tube.status();
  if (!tube.value()) return field_error("tube", "required: the tube each run is put into");
  d.tube = std::move(*tube.value());
  auto cron = body.string("cron");
  if (!cron.is_ok()) return cron.status();
  if (cron.value() && cron.value()->empty()) return field_error("cron", "an empty expression");
  d.cron = cron.value().value_or("");
  auto every = body.duration("every");
  if (!every.is_ok()) return every.status();
  // An interval of 0 is one given, and too short; not the interval left out.
  if (every.value() && every.value()->count() == 0) {
    return field_error("every", "the interval must be at least 1s");
  }
  d.every = every.value().value_or(Millis{0});
  auto zone = body.string("tz");
  if (!zone.is_ok()) return zone.status();
  d.zone = zone.value().value_or("UTC");
  auto start = body.instant("start_at");
  if (!start.is_ok()) return start.status();
  d.start_unix_ms = start.value();
  auto end = body.instant("end_at");
  if (!end.is_ok()) return end.status();
  d.end_unix_ms = end.value();
  auto limit = body.integer("limit", std::numeric_limits<std::uint32_t>::max(), 1);
  if (!limit.is_ok()) return limit.status();
  d.limit = limit.value();
  auto jitter = body.duration("jitter");
  if (!jitter.is_ok()) return jitter.status();
  d.jitter = jitter.value().value_or(Millis{0});
  auto lateness = body.duration("max_lateness");
  if (!lateness.is_ok()) return lateness.status();
  d.max_lateness = lateness.value().value_or(d.max_lateness);
  auto misfire = body.string("misfire");
  if (!misfire.is_ok()) return misfire.status();
  if (misfire.value()) {
    const auto parsed = schedule::parse_misfire(*misfire.value());
    if (!parsed) return field_error("misfire", "one of skip, once, all");
    d.misfire = *parsed;
  }
  auto overlap = body.string("overlap");
  if (!overlap.is_ok()) return overlap.status();
  if (overlap.value()) {
    const auto parsed = schedule::parse_overlap(*overlap.value());
    if (!parsed) return field_error("overlap", "one of allow, skip, buffer_one");
    d.overlap = *parsed;
  }
  auto paused = body.boolean("paused");
  if (!paused.is_ok()) return paused.status();
  d.paused = paused.value();
  return d;
}

json::value run_json(const schedule::Zone& zone, std::optional<std::int64_t> unix_ms) {
  if (!unix_ms) return nullptr;
  return json::object{{"at", zone.format(*unix_ms)}, {"unix_ms", *unix_ms}};
}

json::object schedule_json(const broker::ScheduleView& view) {
  const schedule::Definition& d = view.definition;
  // The zone compiled when the schedule was set; UTC if the tz database has lost it since.
  auto loaded = schedule::Zone::load(d.zone);
  const schedule::Zone zone =
      loaded.is_ok() ? std::move(loaded).value() : schedule::Zone::load("UTC").value();
  json::object o;
  o["name"] = d.name;
  o["tube"] = d.tube;
  if (!d.cron.empty()) o["cron"] = d.cron;
  if (d.every.count() != 0) o["every"] = format_duration(d.every);
  o["tz"] = d.zone;
  if (valid_utf8(d.body)) {
    o["body"] = d.body;
  } else {
    o["body_base64"] = base64_encode(d.body);
  }
  o["priority"] = d.priority;
  o["ttr"] = format_duration(std::chrono::duration_cast<Millis>(d.ttr));
  if (!d.group.empty()) o["group"] = d.group;
  if (!d.url.empty()) o["url"] = d.url;
  if (!d.content_type.empty()) o["content_type"] = d.content_type;
  o["start_at"] = run_json(zone, d.start_unix_ms);
  o["end_at"] = run_json(zone, d.end_unix_ms);
  o["limit"] = d.limit ? json::value(*d.limit) : json::value(nullptr);
  o["jitter"] = format_duration(d.jitter);
  o["misfire"] = schedule::misfire_name(d.misfire);
  o["max_lateness"] = format_duration(d.max_lateness);
  o["overlap"] = schedule::overlap_name(d.overlap);
  o["paused"] = d.paused;
  o["next"] = run_json(zone, view.next_unix_ms);
  o["last_run"] = run_json(zone, view.state.last_run_unix_ms);
  o["runs"] = view.state.runs;
  o["misfires"] = view.state.misfires;
  o["overlaps_skipped"] = view.state.overlaps;
  o["waiting_run"] = run_json(zone, view.state.buffered_unix_ms);
  return o;
}

Response schedule_response(unsigned status, const broker::ScheduleView& view) {
  return json_response(status, to_text(schedule_json(view)));
}

// count (1 to kMaxNext) and after (RFC 3339 or Unix ms; default now), from a query or a body.
struct NextQuery {
  std::size_t count = kDefaultNext;
  std::optional<std::int64_t> after;
};

Status read_count(std::string_view text, std::size_t& count) {
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), count);
  if (ec != std::errc{} || end != text.data() + text.size() || count < 1 || count > kMaxNext) {
    return field_error("count", "1 to " + std::to_string(kMaxNext));
  }
  return Status::ok();
}

Result<std::int64_t> read_after(std::string_view text) {
  std::int64_t unix_ms = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), unix_ms);
  if (ec == std::errc{} && end == text.data() + text.size()) {
    if (unix_ms < 0 || unix_ms > kLastDueUnixMs) {
      return field_error("after", "Unix milliseconds from 0 to " + std::to_string(kLastDueUnixMs));
    }
    return unix_ms;
  }
  auto instant = parse_instant(text);
  if (!instant.is_ok()) return field_error("after", instant.status().message());
  return instant.value();
}

Result<NextQuery> next_query(std::string_view target) {
  const auto params = query_params(target);
  if (!params.is_ok()) return params.status();
  NextQuery query;
  for (const auto& [name, value] : params.value()) {
    if (name == "count") {
      if (Status s = read_count(value, query.count); !s.is_ok()) return s;
    } else if (name == "after") {
      auto after = read_after(value);
      if (!after.is_ok()) return after.status();
      query.after = after.value();
    } else {
      return Status(Code::kInvalidArgument,
                    "unknown query parameter '" + name.substr(0, 64) + "' (count, after)");
    }
  }
  return query;
}

Response runs_response(const schedule::Compiled& schedule, std::int64_t after, std::size_t count) {
  // The definition compiled, so its zone loads.
  const schedule::Zone zone = schedule::Zone::load(schedule.definition.zone).value();
  json::array runs;
  for (const std::int64_t at : schedule::upcoming(schedule, after, count)) {
    runs.push_back(run_json(zone, at));
  }
  return json_response(200, to_text(json::object{{"runs", std::move(runs)}}));
}

}  // namespace

void Api::preview_schedule(Call& call) {
  if (Status s = call.body.parse(call.text, kPreviewFields); !s.is_ok()) return call.reply(s);
  auto definition = read_definition(call.body, "preview");
  if (!definition.is_ok()) return call.reply(definition.status());
  NextQuery query;
  auto count = call.body.integer("count", kMaxNext, 1);
  if (!count.is_ok()) return call.reply(count.status());
  if (count.value()) query.count = *count.value();
  auto after = call.body.instant("after");
  if (!after.is_ok()) return call.reply(after.status());
  const std::int64_t now = wall_now_ms();
  // Names within the servers' limit, as a PUT checks them (a message names the limit).
  auto compiled = schedule::compile(std::move(definition).value(), now, kDefaultMaxNameBytes);
  if (!compiled.is_ok()) return call.reply(compiled.status());
  call.reply(runs_response(compiled.value(), after.value().value_or(now), query.count));
}

void Api::put_schedule(Call& call) {
  if (Status s = call.body.parse(call.text, kScheduleFields); !s.is_ok()) return call.reply(s);
  auto definition = read_definition(call.body, call.params[0]);
  if (!definition.is_ok()) return call.reply(definition.status());
  if (definition.value().body.size() > options_.max_job_bytes) {
    return call.reply(too_large(definition.value().body.size()));
  }
  broker_.schedules().set(
      std::move(definition).value(),
      guarded(call.reply.then<broker::ScheduleView>([](const broker::ScheduleView& view) {
        Response response = schedule_response(view.created ? 201 : 200, view);
        response.location = "/v1/schedules/" + view.definition.name;
        return response;
      })));
}

void Api::list_schedules(Call& call) {
  const auto params = query_params(call.target);
  if (!params.is_ok()) return call.reply(params.status());
  std::string after;
  std::size_t limit = kDefaultListed;
  for (const auto& [name, value] : params.value()) {
    if (name == "after") {
      after = value;
    } else if (name == "limit") {
      const auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), limit);
      if (ec != std::errc{} || end != value.data() + value.size() || limit < 1 ||
          limit > kMaxListed) {
        return call.reply(field_error("limit", "1 to " + std::to_string(kMaxListed)));
      }
    } else {
      return call.reply(
          error(400, "bad_request",
                "unknown query parameter '" + name.substr(0, 64) + "' (after, limit)"));
    }
  }
  broker_.schedules().list(std::move(after), limit,
                           guarded(call.reply.then<std::vector<broker::ScheduleView>>(
                               [limit](const std::vector<broker::ScheduleView>& views) {
                                 json::array listed;
                                 for (const auto& view : views)
                                   listed.push_back(schedule_json(view));
                                 json::object o{{"schedules", std::move(listed)}};
                                 // A full page may have more after it: ask again with after=<the
                                 // last name>.
                                 o["more"] = views.size() == limit;
                                 return json_response(200, to_text(o));
                               })));
}

void Api::get_schedule(Call& call) {
  broker_.schedules().get(call.params[0],
                          guarded(call.reply.then<broker::ScheduleView>(
                              [](const auto& view) { return schedule_response(200, view); })));
}

void Api::delete_schedule(Call& call) {
  broker_.schedules().remove(call.params[0],
                             guarded(call.reply.then<broker::ScheduleView>(
                                 [](const auto& view) { return schedule_response(200, view); })));
}

void Api::pause_schedule(Call& call) {
  if (Status s = call.body.parse(call.text, {}); !s.is_ok()) return call.reply(s);
  broker_.schedules().pause(call.params[0], true,
                            guarded(call.reply.then<broker::ScheduleView>(
                                [](const auto& view) { return schedule_response(200, view); })));
}

void Api::resume_schedule(Call& call) {
  if (Status s = call.body.parse(call.text, {}); !s.is_ok()) return call.reply(s);
  broker_.schedules().pause(call.params[0], false,
                            guarded(call.reply.then<broker::ScheduleView>(
                                [](const auto& view) { return schedule_response(200, view); })));
}

void Api::trigger_schedule(Call& call) {
  if (Status s = call.body.parse(call.text, {}); !s.is_ok()) return call.reply(s);
  broker_.schedules().trigger(
      call.params[0], guarded(call.reply.then<broker::PutResult>([](const auto& result) {
        Response response = job_response(result.inserted ? 201 : 200, result.job, nullptr);
        response.location = "/v1/jobs/" + std::to_string(result.job.id);
        return response;
      })));
}

void Api::backfill_schedule(Call& call) {
  if (Status s = call.body.parse(call.text, {"from", "to"}); !s.is_ok()) return call.reply(s);
  auto from = call.body.instant("from");
  if (!from.is_ok()) return call.reply(from.status());
  auto to = call.body.instant("to");
  if (!to.is_ok()) return call.reply(to.status());
  if (!from.value() || !to.value()) return call.reply(field_error("from, to", "both required"));
  broker_.schedules().backfill(call.params[0], *from.value(), *to.value(),
                               guarded(call.reply.then<std::vector<broker::PutResult>>(
                                   [](const std::vector<broker::PutResult>& puts) {
                                     std::string body = "{\"jobs\":[";
                                     for (std::size_t i = 0; i < puts.size(); ++i) {
                                       if (i > 0) body += ',';
                                       append_job(body, puts[i].job, nullptr);
                                     }
                                     body += "]}";
                                     return json_response(200, std::move(body));
                                   })));
}

void Api::next_runs(Call& call) {
  auto query = next_query(call.target);
  if (!query.is_ok()) return call.reply(query.status());
  broker_.schedules().get(
      call.params[0],
      guarded(call.reply.then<broker::ScheduleView>([query = query.value()](const auto& view) {
        auto compiled = schedule::compile(view.definition, view.as_of_unix_ms, kAnyNameBytes);
        if (!compiled.is_ok()) return from_status(compiled.status());
        return runs_response(compiled.value(), query.after.value_or(view.as_of_unix_ms),
                             query.count);
      })));
}

}  // namespace delayq::front::http
