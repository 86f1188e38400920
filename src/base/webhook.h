// webhook.h — the words of push delivery that the broker, the store and the front-ends share:
// a tube's webhook (where and how its due jobs are POSTed) and what a job keeps about its own
// delivery (its URL and content type from the put, the outcome of its last attempt). Validated
// by the front-end that reads them (front/http), stored by the broker, used by front/webhook.
// The delivery rules are in docs/webhooks.md.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace delayq {

struct Backoff {
  // The wait before the second attempt, the growth per attempt, and the cap; each wait is drawn
  // at random between half and all of min * factor^(attempt-1), so receivers that failed
  // together are not retried together. Defaults: 1 s, x2, 1 h.
  std::chrono::milliseconds min{1000};
  std::chrono::milliseconds max{3'600'000};
  double factor = 2;

  friend bool operator==(const Backoff&, const Backoff&) = default;
};

struct Webhook {
  std::string url;  // http:// or https://; a job's own URL overrides it
  std::vector<std::pair<std::string, std::string>> headers;  // sent with every request
  std::chrono::milliseconds timeout{10'000};  // per attempt, connect to last byte. Default: 10 s
  std::uint32_t max_attempts = 20;  // then the job is buried (the dead letter). Default: 20
  Backoff backoff;
  double rate = 0;                // requests started per second; 0: no limit. Default: 0
  std::uint32_t concurrency = 8;  // requests in flight at most. Default: 8
  // HMAC-SHA256 keys: each signs every request (Delayq-Signature); two while rotating.
  std::vector<std::string> secrets;

  friend bool operator==(const Webhook&, const Webhook&) = default;
};

// What a job keeps beside its body (its attachment): push delivery's settings from its put and
// the last failed attempt's outcome, and the trace context it was put with.
struct Delivery {
  std::string url{};           // empty: the tube's webhook
  std::string content_type{};  // empty: application/octet-stream
  int last_status = 0;         // the HTTP status of the last failed attempt; 0: no answer
  std::string last_error{};    // why the last attempt failed; empty: none failed
  std::int64_t last_attempt_unix_ms = 0;
  // W3C Trace Context of the put (checked by broker/put_rules.h): handed back with every
  // reservation and sent with every push delivery attempt. Empty: none.
  std::string traceparent{};
  std::string tracestate{};

  friend bool operator==(const Delivery&, const Delivery&) = default;
  [[nodiscard]] bool empty() const noexcept { return *this == Delivery{}; }
};

}  // namespace delayq
