// api.h — the HTTP/JSON API over a broker::Broker: one handler per route of router.h (a table
// keyed by route, in api.cc), JSON in (request.h) and out (json.h), errors as {"error": {"code",
// "message"}} with a stable code. No sockets here: the HTTP server (server.h) feeds it requests
// and sends what it answers; an answer comes when the broker completes the request's operation,
// which is when what it reports is durable. Runs on the broker's executor.
//
// Reservations: HTTP callers are not connections, so every job reserved over HTTP is held by one
// broker session of the API's own; any HTTP caller may then delete, release, bury or touch it by
// id, and its TTR brings it back if nobody does. A long-poll reserve names its tubes, so many
// wait side by side. Endpoints, fields and limits: docs/http-api.md.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <variant>
#include <vector>

#include "broker/broker.h"
#include "front/families.h"
#include "front/http/router.h"

namespace delayq::front::http {

class Body;  // request.h

struct ApiOptions {
  // Largest job body in bytes (after base64 decoding). Default: 65535, as beanstalkd.
  std::size_t max_job_bytes = 65535;
  // Longest long-poll of POST /v1/reserve. Default: 1 hour.
  std::chrono::milliseconds max_reserve_timeout{3'600'000};
  std::string version = "0";   // reported by GET /v1/stats
  std::string mode = "local";  // the same: "local" (the embedded store) or "redis"
  // Bearer tokens: when there are any, every request but GET /healthz and GET /readyz must carry
  // `Authorization: Bearer <one of them>`, or it is answered 401. Compared in constant time (their
  // SHA-256 digests). Default: none, no authentication (fit for a loopback address only).
  std::vector<std::string> tokens;
};

// A job reserved for an answer, in one reservation of it (its reserves count then).
struct Reservation {
  JobId id = 0;
  std::uint32_t token = 0;
  bool operator==(const Reservation&) const = default;
};

struct Response {
  unsigned status = 200;
  std::string body;
  std::string_view content_type = "application/json";
  std::string location;               // the Location header, if any
  std::string allow;                  // the Allow header (405), if any
  std::string_view www_authenticate;  // the WWW-Authenticate header (401), if any
  unsigned retry_after_seconds = 0;   // the Retry-After header (503), if not 0
  std::string_view headers;           // more header lines, each ending in "\r\n" (the dashboard's)
  // The jobs reserved for this answer: each is released if the answer cannot be delivered.
  std::vector<Reservation> reserved;
};

// The request's headers the API reads, each empty if absent. authorization: without a token
// the API was given, every request but those Api::admits() lets in is answered 401, before
// anything else. traceparent and tracestate: a put's W3C Trace Context, kept with the job.
struct RequestHeaders {
  std::string_view authorization{};
  std::string_view traceparent{};
  std::string_view tracestate{};
};

class Api {
 public:
  // Counts its operations in `metrics`, and reads the broker's and push delivery's families
  // there (/v1/stats, /v1/tubes, /metrics); it must outlive the Api.
  Api(broker::Broker& broker, metrics::Registry& metrics, ApiOptions options);
  ~Api();
  Api(const Api&) = delete;
  Api& operator=(const Api&) = delete;

  using Respond = std::function<void(Response)>;
  // Handles one request and calls respond exactly once, inside this call (a request refused
  // before it reaches the broker) or later, unless the Api is destroyed first. Returns 0, or
  // the ticket of a reserve waiting for a job, which cancel() ends: its client went away, so
  // respond is never called and the request counts nothing.
  // The request's headers the API reads (RequestHeaders, above).
  using Headers = RequestHeaders;
  std::uint64_t handle(std::string_view method, std::string_view target, std::string_view body,
                       Respond respond, const Headers& headers = {});
  // Whether a request may be run: the API has no tokens, the request carries one of them, or
  // it needs none (GET /healthz, GET /readyz, the dashboard's files). The server asks before it
  // reads a body: a request that will be refused is answered without it.
  [[nodiscard]] bool admits(std::string_view method, std::string_view target,
                            std::string_view authorization) const;
  void cancel(std::uint64_t ticket);
  // A response's reserved jobs could not be delivered: each is ready again at once, if it is
  // still in the same reservation (Reservation::token), not a later one.
  void undeliverable(const std::vector<Reservation>& reserved);
  // Answers (with respond, at once) a request the server refuses before the API would run it
  // (403 to a web page), counted as the API's own refusals are: under the endpoint it names.
  void refuse(std::string_view method, std::string_view target, Response response, Respond respond);
  // An answer for a request the server refused before routing it (413, 431, 400 ...).
  [[nodiscard]] static Response error(unsigned status, std::string_view code,
                                      std::string_view message);

 private:
  class Reply;
  struct Call;
  struct Handlers;  // the table of handlers by route (api.cc)
  friend struct Handlers;

  // 413: a job body longer than max_job_bytes.
  [[nodiscard]] Response too_large(std::size_t body_bytes) const;
  // The put a request's fields ask for, into `tube`, or the answer that refuses it (api.cc).
  struct Put;
  [[nodiscard]] std::variant<Put, Response> read_put(const Body& body, std::string tube,
                                                     const Headers& headers) const;

  void put_job(Call& call);
  void put_jobs(Call& call);
  void get_job(Call& call);
  void patch_job(Call& call);
  void delete_job(Call& call);
  void release_job(Call& call);
  void bury_job(Call& call);
  void touch_job(Call& call);
  void kick_job(Call& call);
  void list_group(Call& call);
  void cancel_group(Call& call);
  void reserve(Call& call);
  struct Taking;  // a reserve with `count`: the jobs taken so far (api.cc)
  void take_more(std::shared_ptr<Taking> taking);
  void end_taking(const Taking& taking);  // its wait leaves waits_
  void list_tubes(Call& call);
  void get_tube(Call& call);
  void patch_tube(Call& call);
  void kick_tube(Call& call);
  void pause_tube(Call& call);
  void put_webhook(Call& call);
  void get_webhook(Call& call);
  void delete_webhook(Call& call);
  void stats(Call& call);
  void metrics(Call& call);
  void health(Call& call);
  void ready(Call& call);
  void backup(Call& call);
  void tube_due(Call& call);
  void due(Call& call);
  void due_counts(Call& call, std::string tube);
  void list_jobs(Call& call);
  // schedule_routes.cc
  void preview_schedule(Call& call);
  void put_schedule(Call& call);
  void list_schedules(Call& call);
  void get_schedule(Call& call);
  void delete_schedule(Call& call);
  void pause_schedule(Call& call);
  void resume_schedule(Call& call);
  void trigger_schedule(Call& call);
  void backfill_schedule(Call& call);
  void next_runs(Call& call);

  broker::Broker& broker_;
  metrics::Registry& metrics_;
  ProtocolCounts counts_;  // "http"
  ApiOptions options_;
  // Long-polls waiting, by ticket. One whose client went away (cancel) answers nobody and
  // counts nothing.
  [[nodiscard]] bool authorized(std::string_view authorization) const;
  [[nodiscard]] bool admits(const Match& found, std::string_view method, std::string_view target,
                            std::string_view authorization) const;
  std::vector<std::array<unsigned char, 32>> token_digests_;  // SHA-256 of each token

  struct Wait {
    std::uint64_t ticket = 0;
    bool gone = false;
  };
  std::unordered_map<std::uint64_t, std::shared_ptr<Wait>> waits_;
  std::unique_ptr<broker::Session> session_;                    // holds every HTTP reservation
  std::unique_ptr<broker::Admin> admin_;                        // tubes, stats, webhooks, backup
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);  // for guarded()
  template <typename T>
  [[nodiscard]] broker::Callback<T> guarded(broker::Callback<T> done) const;
};

}  // namespace delayq::front::http
