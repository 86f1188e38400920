// json.h — what the HTTP API writes: jobs, tubes and errors as JSON text. A job is written
// straight into the output string (the hot path of put, get and reserve: no JSON tree); the
// rest goes through Boost.JSON. Strings are escaped as JSON requires; a body that is not UTF-8
// is written as body_base64. Pure functions. Field names: docs/http-api.md.
#pragma once

#include <boost/json.hpp>
#include <string>
#include <string_view>

#include "base/job.h"
#include "base/webhook.h"
#include "front/http/text.h"

namespace delayq::front::http {

// A job as a JSON object, appended to out; body: the job's body, or null to leave it out;
// delivery: what push delivery keeps about it, or null.
void append_job(std::string& out, const JobView& job, const std::string* body,
                const Delivery* delivery = nullptr);
// A tube's webhook as PUT /v1/tubes/{tube}/webhook takes it (durations as text, e.g. "10s").
[[nodiscard]] boost::json::object webhook_json(const Webhook& webhook);
[[nodiscard]] boost::json::object tube_json(const TubeStats& tube);
// A tube's flow control as PATCH /v1/tubes/{tube} takes it (group_rate null when off).
void put_flow_json(boost::json::object& out, const FlowSettings& flow);
// {"error":{"code":...,"message":...}}; a message that is not UTF-8 has its high bytes as '?'.
[[nodiscard]] std::string error_json(std::string_view code, std::string_view message);

}  // namespace delayq::front::http
