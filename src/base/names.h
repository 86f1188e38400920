// names.h — the rules for the names a client gives: tubes, keys and groups. Every broker checks
// them the same way, so a name that one accepts the other does too. And the order in which
// beanstalkd lists tubes, which every broker follows.
#pragma once

#include <algorithm>
#include <cstddef>
#include <string>
#include <string_view>

#include "base/job.h"
#include "base/status.h"

namespace delayq {

// A key, a group or a tube name is at most this many bytes (beanstalkd's tube name limit).
inline constexpr std::size_t kDefaultMaxNameBytes = 200;

// `what` ("key", "group", "tube name") is at most max_bytes long.
[[nodiscard]] inline Status check_name(std::string_view what, std::string_view name,
                                       std::size_t max_bytes) {
  if (name.size() > max_bytes) {
    return {Code::kInvalidArgument,
            std::string(what) + " longer than " + std::to_string(max_bytes) + " bytes"};
  }
  return Status::ok();
}

// A name a client sent, quoted for an error message and cut short: an error repeats no
// megabyte a client sent.
[[nodiscard]] inline std::string quoted_name(std::string_view name) {
  constexpr std::size_t kShown = 64;
  return "'" + std::string(name.substr(0, kShown)) + (name.size() > kShown ? "...'" : "'");
}

// beanstalkd's tube names: letters, digits and "-+/;.$_()", not empty, not starting with '-'.
[[nodiscard]] inline bool valid_tube_char(char c) noexcept {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
         std::string_view("-+/;.$_()").find(c) != std::string_view::npos;
}

[[nodiscard]] inline Status check_tube_name(std::string_view name, std::size_t max_bytes) {
  if (Status s = check_name("tube name", name, max_bytes); !s.is_ok()) return s;
  if (name.empty() || name.front() == '-' ||
      !std::all_of(name.begin(), name.end(), valid_tube_char)) {
    // The name is shown where it is plain text (a message may reach a terminal or JSON).
    const bool plain =
        std::all_of(name.begin(), name.end(), [](char c) { return c >= ' ' && c <= '~'; });
    const std::string shown = plain ? " " + quoted_name(name) : "";
    return {Code::kInvalidArgument, "bad tube name" + shown + ": 1 to " +
                                        std::to_string(max_bytes) +
                                        " bytes of letters, digits and -+/;.$_(), not starting "
                                        "with '-'"};
  }
  return Status::ok();
}

// A session watches at most this many tubes: a watch list costs memory and every reserve looks
// at each of its tubes, so one client may not grow it without bound.
inline constexpr std::size_t kMaxWatchedTubes = 10000;

// The refusal of a watch past kMaxWatchedTubes (a tube already watched is not past it).
[[nodiscard]] inline Status watch_limit() {
  return {Code::kLimit, "a connection watches at most " + std::to_string(kMaxWatchedTubes) +
                            " tubes; ignore one first"};
}

// A tube's flow control settings (docs/flow-control.md), as every broker takes them.
[[nodiscard]] inline Status check_flow(const FlowSettings& flow, std::size_t max_name_bytes) {
  if (flow.rate_period.count() <= 0 || flow.rate_burst == 0) {
    return {Code::kInvalidArgument, "a rate needs a period above 0 and a burst of at least 1"};
  }
  if (flow.group_weights.size() > FlowSettings::kMaxGroupWeights) {
    return {Code::kInvalidArgument, "group_weights: at most " +
                                        std::to_string(FlowSettings::kMaxGroupWeights) +
                                        " groups are weighted in a tube"};
  }
  for (const auto& [group, weight] : flow.group_weights) {
    if (!check_name("group", group, max_name_bytes).is_ok() || group.empty()) {
      return {Code::kInvalidArgument,
              "group_weights: a group name of 1 to " + std::to_string(max_name_bytes) + " bytes"};
    }
    if (weight < 1 || weight > FlowSettings::kMaxGroupWeight) {
      return {Code::kInvalidArgument,
              "group_weights: a weight of 1 to " + std::to_string(FlowSettings::kMaxGroupWeight)};
    }
  }
  return Status::ok();
}

// Takes *it out of a list of tubes as beanstalkd does (its tube list, a connection's watch
// list): the last one takes its place. list-tubes and list-tubes-watched show that order.
template <typename List>
void remove_as_beanstalkd(List& list, typename List::iterator it) {
  *it = std::move(list.back());
  list.pop_back();
}

}  // namespace delayq
