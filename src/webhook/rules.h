// rules.h — the pure parts of push delivery: where a URL points, what a header may hold, how
// long to wait before the next attempt, what a Retry-After asks for and how a due time is
// written. No sockets, no clock of their own, no OpenSSL: the front-ends check puts and webhooks
// with them, and the deliverer (front/webhook/deliverer.h) passes time in. Unit tests check every
// rule against fixed inputs; the rules are stated in docs/webhooks.md. Signatures: signature.h.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "base/webhook.h"

namespace delayq::webhook {

using Millis = std::chrono::milliseconds;

// An http:// or https:// URL taken apart: host (brackets kept off an IPv6 address), port
// (80 or 443 unless given) and the request target (path and query, "/" if none).
struct Url {
  bool tls = false;
  std::string host;
  std::string port;
  std::string target;
  // "http://host:port": the connections of one origin are shared.
  [[nodiscard]] std::string origin() const;
};
// kInvalidArgument for anything but http(s)://host[:port][/path], or a URL longer than 2048
// bytes, or one with user info, a fragment or characters outside printable ASCII.
[[nodiscard]] Result<Url> parse_url(std::string_view url);

// A header value delayq sends as given (a job's Content-Type, a webhook's headers): 1 to 1024
// bytes of printable ASCII (spaces and tabs inside). kInvalidArgument naming `field` otherwise.
[[nodiscard]] Status check_header_value(std::string_view field, std::string_view value);

// A key as the Delayq-Key header carries it: bytes outside printable ASCII, and '%', as %XX
// (a key may hold any UTF-8, a header value may not).
[[nodiscard]] std::string header_key(std::string_view key);

// The wait before attempt `attempt` + 1 after attempt `attempt` (>= 1) failed: drawn in
// [half, all] of min * factor^(attempt-1), capped at max.
[[nodiscard]] Millis backoff_delay(const Backoff& backoff, std::uint32_t attempt,
                                   std::mt19937_64& random);

// A Retry-After value: delay-seconds, or an HTTP date (then relative to now_unix_ms; a date in
// the past is 0). nullopt if it is neither.
[[nodiscard]] std::optional<Millis> retry_after(std::string_view value, std::int64_t now_unix_ms);

// RFC 3339 in UTC with milliseconds: 2026-11-25T18:00:00.000Z.
[[nodiscard]] std::string rfc3339_ms(std::int64_t unix_ms);

}  // namespace delayq::webhook
