// whole_number.h — a CLI11 check shared by delayqd's and delayq's flags: a whole number within
// bounds, written in digits. CLI11 reads "-1" into an unsigned value as its largest one, and a
// size's unit suffix ("256MiB") has become digits by the time a check runs.
#pragma once

#include <CLI/CLI.hpp>
#include <charconv>
#include <cstdint>
#include <string>
#include <string_view>

namespace delayq::apps {

// `what` follows the bounds in the error ("not a whole number from 0 to 9<what>").
inline CLI::Validator whole_number(std::uint64_t low, std::uint64_t high,
                                   std::string_view what = "") {
  return CLI::Validator(
      [low, high, what = std::string(what)](std::string& text) -> std::string {
        std::uint64_t value = 0;
        const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
        if (text.empty() || error != std::errc{} || end != text.data() + text.size() ||
            value < low || value > high) {
          return "not a whole number from " + std::to_string(low) + " to " + std::to_string(high) +
                 what;
        }
        return {};
      },
      "UINT in [" + std::to_string(low) + " - " + std::to_string(high) + "]");
}

}  // namespace delayq::apps
