// put_rules.h — what every broker checks of a put, and of a due time, before it changes anything:
// one source, so that the local and the Redis broker refuse the same requests with the same code
// and message. The checks run in this order: the names (tube, key, group), the due time, the
// trace context, drain mode, free space, a job's own URL. What a broker checks beyond these is its
// own state (a key's holder, ids left), inside its one atomic step. Pure functions; no allocation
// unless refusing.
#pragma once

#include <cstddef>
#include <string_view>

#include "base/names.h"
#include "base/status.h"
#include "broker/broker.h"

namespace delayq::broker {

// What the broker knows at the moment of the put.
struct PutContext {
  std::size_t max_name_bytes = kDefaultMaxNameBytes;  // longest tube name, key or group
  bool draining = false;                              // drain mode: kDraining
  Status space;                                       // not ok (kNoSpace): refused with it
  bool tube_has_webhook = false;                      // else a job's own url is kConflict
};

// A due time within range: a delay from 0 to the longer of kMaxDelayMs and beanstalkd's
// 2^32 - 1 seconds, an absolute time from 0 to kLastDueUnixMs (base/job.h). kInvalidArgument
// otherwise.
[[nodiscard]] Status check_due(const Due& due);

// A W3C Trace Context (www.w3.org/TR/trace-context): both empty, or a traceparent
// "VV-<32 hex trace id>-<16 hex parent id>-<2 hex flags>" in lower case (version VV not "ff"; a
// trace id and a parent id not all zeros; version 00 exactly so, a later version possibly
// followed by "-" and more), with a tracestate of at most kMaxTracestateBytes printable ASCII
// bytes (or none). kInvalidArgument naming the field otherwise.
inline constexpr std::size_t kMaxTracestateBytes = 512;
[[nodiscard]] Status check_trace(std::string_view traceparent, std::string_view tracestate);

// A debounce (PutRequest::debounce): with a key, without replace or a due time of its own, each
// duration from 0 to the longest delay. kInvalidArgument naming the field otherwise.
[[nodiscard]] Status check_debounce(const PutRequest& request);

// `tube` is the tube the put goes to (the request's, or the session's used tube). Errors:
// kInvalidArgument, kDraining, kNoSpace, kConflict (see PutContext).
[[nodiscard]] Status check_put(const PutRequest& request, std::string_view tube,
                               const PutContext& context);

}  // namespace delayq::broker
