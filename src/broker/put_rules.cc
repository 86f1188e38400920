#include "broker/put_rules.h"

#include <algorithm>
#include <string>

namespace delayq::broker {
namespace {

// The longest delay a broker takes: the extensions' 100 years (kMaxDelayMs), or beanstalkd's own
// put, whose delay is any number of seconds below 2^32 (136 years), whichever is longer.
constexpr std::int64_t kLongestDelayMs =
    std::max<std::int64_t>(kMaxDelayMs, std::int64_t{0xFFFF'FFFF} * 1000);

bool lower_hex(std::string_view s) {
  return std::all_of(s.begin(), s.end(),
                     [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

bool all_zeros(std::string_view s) {
  return std::all_of(s.begin(), s.end(), [](char c) { return c == '0'; });
}

}  // namespace

Status check_trace(std::string_view traceparent, std::string_view tracestate) {
  if (traceparent.empty()) {
    if (tracestate.empty()) return Status::ok();
    return {Code::kInvalidArgument, "tracestate: given without a traceparent"};
  }
  // VV-TTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTT-PPPPPPPPPPPPPPPP-FF: 55 characters.
  const auto invalid = [](std::string_view why) {
    return Status(Code::kInvalidArgument, "traceparent: " + std::string(why) +
                                              " (W3C Trace Context: 00-<32 hex trace id>-<16 "
                                              "hex parent id>-<2 hex flags>, in lower case)");
  };
  if (traceparent.size() < 55 || traceparent[2] != '-' || traceparent[35] != '-' ||
      traceparent[52] != '-') {
    return invalid("not in the form VV-TRACEID-PARENTID-FLAGS");
  }
  const std::string_view version = traceparent.substr(0, 2);
  const std::string_view trace_id = traceparent.substr(3, 32);
  const std::string_view parent_id = traceparent.substr(36, 16);
  const std::string_view flags = traceparent.substr(53, 2);
  if (!lower_hex(version) || !lower_hex(trace_id) || !lower_hex(parent_id) || !lower_hex(flags)) {
    return invalid("not lower-case hexadecimal");
  }
  if (version == "ff") return invalid("version ff is not valid");
  if (traceparent.size() > 55 && (version == "00" || traceparent[55] != '-')) {
    return invalid("characters after the flags");
  }
  if (all_zeros(trace_id)) return invalid("the trace id is all zeros");
  if (all_zeros(parent_id)) return invalid("the parent id is all zeros");
  if (traceparent.size() > kMaxTracestateBytes) return invalid("longer than 512 bytes");
  if (tracestate.size() > kMaxTracestateBytes) {
    return {Code::kInvalidArgument,
            "tracestate: longer than " + std::to_string(kMaxTracestateBytes) + " bytes"};
  }
  if (!std::all_of(tracestate.begin(), tracestate.end(),
                   [](char c) { return c >= 0x20 && c <= 0x7E; })) {
    return {Code::kInvalidArgument, "tracestate: printable ASCII only"};
  }
  return Status::ok();
}

Status check_due(const Due& due) {
  if (due.absolute) {
    if (due.ms < 0 || due.ms > kLastDueUnixMs) {
      return {Code::kInvalidArgument,
              "due time: Unix milliseconds from 0 to " + std::to_string(kLastDueUnixMs)};
    }
  } else if (due.ms < 0 || due.ms > kLongestDelayMs) {
    return {Code::kInvalidArgument,
            "delay: milliseconds from 0 to " + std::to_string(kLongestDelayMs)};
  }
  return Status::ok();
}

Status check_debounce(const PutRequest& request) {
  if (!request.debounce) {
    if (request.max_wait) return {Code::kInvalidArgument, "max_wait: only with a debounce"};
    return Status::ok();
  }
  if (request.key.empty()) return {Code::kInvalidArgument, "debounce: only with a key"};
  if (request.replace) return {Code::kInvalidArgument, "debounce and replace: one or the other"};
  if (request.due.absolute || request.due.ms != 0) {
    return {Code::kInvalidArgument, "debounce: the due time is the debounce, give no other"};
  }
  if (!check_due(Due::after(*request.debounce)).is_ok()) {
    return {Code::kInvalidArgument,
            "debounce: milliseconds from 0 to " + std::to_string(kLongestDelayMs)};
  }
  if (request.max_wait && !check_due(Due::after(*request.max_wait)).is_ok()) {
    return {Code::kInvalidArgument,
            "max_wait: milliseconds from 0 to " + std::to_string(kLongestDelayMs)};
  }
  return Status::ok();
}

Status check_put(const PutRequest& request, std::string_view tube, const PutContext& context) {
  if (Status s = check_tube_name(tube, context.max_name_bytes); !s.is_ok()) return s;
  if (Status s = check_name("key", request.key, context.max_name_bytes); !s.is_ok()) return s;
  if (Status s = check_name("group", request.group, context.max_name_bytes); !s.is_ok()) return s;
  if (Status s = check_due(request.due); !s.is_ok()) return s;
  if (Status s = check_debounce(request); !s.is_ok()) return s;
  if (Status s = check_trace(request.traceparent, request.tracestate); !s.is_ok()) return s;
  if (context.draining) return {Code::kDraining, "the server is draining: no new jobs"};
  if (!context.space.is_ok()) return context.space;
  if (!request.url.empty() && !context.tube_has_webhook) {
    return {Code::kConflict, "tube " + std::string(tube) +
                                 " has no webhook: a job's url overrides its tube's webhook, so "
                                 "set one first"};
  }
  return Status::ok();
}

}  // namespace delayq::broker
