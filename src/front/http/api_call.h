// api_call.h — inside the HTTP API (api.cc and the files of its routes, such as
// schedule_routes.cc): how a handler answers (Reply), one routed request (Call), and the
// helpers every handler answers with. Not for the server or anyone outside the Api.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "broker/broker.h"
#include "front/http/api.h"
#include "front/http/request.h"

namespace delayq::front::http {

inline constexpr std::string_view kProtocol = "http";

// The status as a label of static storage, for metrics.
[[nodiscard]] std::string_view status_text(unsigned status);
[[nodiscard]] Response json_response(unsigned status, std::string body);
// The one place a Status becomes an HTTP answer.
[[nodiscard]] Response from_status(const Status& status);
[[nodiscard]] Response job_response(unsigned status, const JobView& job, const std::string* body,
                                    const Delivery* delivery = nullptr);
// A job id in a path: a positive integer.
[[nodiscard]] Result<JobId> parse_id(const std::string& text);

// How a handler answers, once: counts the operation, then responds.
class Api::Reply {
 public:
  Reply(Api& api, std::string_view op, Respond respond)
      : api_(&api), op_(op), respond_(std::move(respond)) {}
  void operator()(Response response) const {
    api_->counts_.op(op_, status_text(response.status));
    respond_(std::move(response));
  }
  void operator()(const Status& status) const { (*this)(from_status(status)); }
  // A completion that answers with `make(value)`, or the error.
  template <typename T, typename Make>
  broker::Callback<T> then(Make make) const {
    return [reply = *this, make = std::move(make)](Result<T> result) {
      if (!result.is_ok()) return reply(result.status());
      reply(make(result.value()));
    };
  }

 private:
  Api* api_;  // completions never outlive the Api: they die with its session
  std::string_view op_;
  Respond respond_;
};

// One routed request: its captures and its body, and how to answer it.
struct Api::Call {
  std::vector<std::string> params;
  std::string_view text;
  Body body;
  Reply reply;
  std::string_view target;  // with its query string
  Headers headers;
  std::uint64_t ticket = 0;  // a reserve that waits

  // The job the path names: /jobs/{id} or /tubes/{tube}/keys/{key}.
  [[nodiscard]] Result<broker::JobRef> job() const {
    if (params.size() == 2) return broker::JobRef::by_key(params[0], params[1]);
    auto id = parse_id(params[0]);
    if (!id.is_ok()) return id.status();
    return broker::JobRef::by_id(id.value());
  }
};

// A completion that runs only while the Api lives: for calls whose completions the broker may
// run after the Api is gone (its schedules(), which outlive the Api's session).
template <typename T>
broker::Callback<T> Api::guarded(broker::Callback<T> done) const {
  return [alive = std::weak_ptr<bool>(alive_), done = std::move(done)](Result<T> result) {
    if (alive.lock()) done(std::move(result));
  };
}

}  // namespace delayq::front::http
