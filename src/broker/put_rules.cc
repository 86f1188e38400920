#include "broker/put_rules.h"

#include <algorithm>
#include <string>

namespace delayq::broker {
namespace {

// The longest delay a broker takes: the extensions' 100 years (kMaxDelayMs), or beanstalkd's own
// put, whose delay is any number of seconds below 2^32 (136 years), whichever is longer.
constexpr std::int64_t kLongestDelayMs =
    std::max<std::int64_t>(kMaxDelayMs, std::int64_t{0xFFFF'FFFF} * 1000);

}  // namespace

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

Status check_put(const PutRequest& request, std::string_view tube, const PutContext& context) {
  if (Status s = check_tube_name(tube, context.max_name_bytes); !s.is_ok()) return s;
  if (Status s = check_name("key", request.key, context.max_name_bytes); !s.is_ok()) return s;
  if (Status s = check_name("group", request.group, context.max_name_bytes); !s.is_ok()) return s;
  if (Status s = check_due(request.due); !s.is_ok()) return s;
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
