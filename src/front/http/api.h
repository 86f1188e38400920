// api.h — the HTTP/JSON API over a local::Node: one handler per route of router.h, JSON in and
// out (Boost.JSON), errors as {"error": {"code", "message"}} with a stable code. No sockets here:
// the HTTP server (server.h) feeds it requests and sends what it answers, once the node's
// durable() reaches the answer's barrier. Runs on the node's io_context thread.
//
// Reservations: HTTP callers are not connections, so every job reserved over HTTP is held by one
// engine client of the API's own; any HTTP caller may then delete, release, bury or touch it by
// id, and its TTR brings it back if nobody does. A long-poll reserve waits in a client of its own
// and hands the job over when it gets one. Endpoints, fields and limits: docs/http-api.md.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>

#include "broker/local/node.h"
#include "front/http/router.h"

namespace delayq::front::http {

struct ApiOptions {
  // Largest job body in bytes (after base64 decoding). Default: 65535, as beanstalkd.
  std::size_t max_job_bytes = 65535;
  // Longest long-poll of POST /v1/reserve. Default: 1 hour.
  std::chrono::milliseconds max_reserve_timeout{3'600'000};
  std::string version = "0";  // reported by GET /v1/stats
};

struct Response {
  unsigned status = 200;
  std::string body;
  std::string_view content_type = "application/json";
  std::string location;  // the Location header, if any
  std::string allow;     // the Allow header (405), if any
  // The response may be sent once the node's durable() has reached this.
  std::uint64_t barrier = 0;
  JobId reserved = 0;  // a job reserved for this answer: released if it cannot be delivered
  std::uint64_t reserved_token = 0;  // which reservation of it (its reserves count)
};

class Api {
 public:
  Api(local::Node& node, ApiOptions options);
  ~Api();
  Api(const Api&) = delete;
  Api& operator=(const Api&) = delete;

  using Respond = std::function<void(Response)>;
  // Handles one request and calls respond exactly once, at once or (a waiting reserve) later.
  // Returns 0, or a ticket for the pending answer, which cancel() withdraws.
  std::uint64_t handle(std::string_view method, std::string_view target, std::string_view body,
                       Respond respond);
  // The caller of a pending request went away: its wait ends, respond is never called.
  void cancel(std::uint64_t ticket);
  // A reserved job's response could not be delivered: the job is ready again at once, if it is
  // still the same reservation (`token`: Response::reserved_token), not a later one.
  void undeliverable(JobId id, std::uint64_t token);
  // An answer for a request the server refused before routing it (413, 431, 400 ...).
  [[nodiscard]] Response error(unsigned status, std::string_view code, std::string_view message);

 private:
  struct Request;
  Response dispatch(Request& request);
  void answer(std::string_view op, Response response, const Respond& respond);
  Response put_job(Request& request);
  Response get_job(JobId id);
  Response patch_job(Request& request, JobId id);
  Response delete_job(JobId id);
  Response release_job(Request& request, JobId id);
  Response bury_job(Request& request, JobId id);
  Response touch_job(Request& request, JobId id);
  Response kick_job(JobId id);
  Response list_group(const std::string& tube, const std::string& group);
  Response cancel_group(const std::string& tube, const std::string& group);
  Response reserve(Request& request);
  Response list_tubes();
  Response get_tube(const std::string& tube);
  Response kick_tube(Request& request, const std::string& tube);
  Response pause_tube(Request& request, const std::string& tube);
  Response stats();
  Response metrics();
  Response ready();

  // The answer to a finished reserve, from the waiting client `waiter`.
  Response reserved(engine::ClientId waiter, const engine::ReserveResult& result);
  // A job id from a key, or the error response.
  Result<JobId> job_by_key(const std::string& tube, const std::string& key);
  // The error for a job operation that failed with `status` (404 or 409 by what the job is).
  Response job_error(const Status& status, JobId id, std::string_view not_yours);
  Response from_status(const Status& status);
  // The priority a release or bury asked for, else the job's own.
  std::uint32_t priority_or_own(JobId id, std::optional<std::uint64_t> asked);
  Response json(unsigned status, const std::string& body);
  Response job_response(unsigned status, JobId id, bool with_body);
  [[nodiscard]] engine::Engine& engine() { return node_.engine(); }

  local::Node& node_;
  ApiOptions options_;
  engine::ClientId client_ = 0;  // holds every HTTP reservation
  std::unordered_map<engine::ClientId, Respond> waiting_;
};

}  // namespace delayq::front::http
