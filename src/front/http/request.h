// request.h — one HTTP API request's JSON body, read field by field. A body that is empty reads
// as {}; every field must be known to the route (a typo is an error, not a no-op). Each reader
// says what was wrong in its error (kInvalidArgument), naming the field. The parsed body lives
// in a buffer inside the object (the heap only if it outgrows it). Pure: no I/O.
#pragma once

#include <boost/json.hpp>
#include <chrono>
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "front/http/text.h"

namespace delayq::front::http {

class Body {
 public:
  // Parses `text` and checks that every field is one of `allowed`.
  Status parse(std::string_view text, std::span<const std::string_view> allowed);
  Status parse(std::string_view text, std::initializer_list<std::string_view> allowed) {
    return parse(text, std::span<const std::string_view>(allowed.begin(), allowed.size()));
  }

  // Reads `fields`, an object of another Body's document (which outlives this one), as this
  // one's fields: a job of a batch. Every field one of `allowed`.
  Status view(const boost::json::object& fields, std::span<const std::string_view> allowed);

  [[nodiscard]] const boost::json::value* find(std::string_view name) const;
  Result<std::optional<std::string>> string(std::string_view name) const;
  Result<std::optional<std::uint64_t>> integer(std::string_view name, std::uint64_t max,
                                               std::uint64_t min = 0) const;
  // A duration: "48h", "1500ms", or a number of milliseconds.
  Result<std::optional<Millis>> duration(std::string_view name) const;
  // An instant: RFC 3339 text or Unix milliseconds.
  Result<std::optional<std::int64_t>> instant(std::string_view name) const;
  Result<bool> boolean(std::string_view name) const;
  // A non-empty array of strings.
  Result<std::optional<std::vector<std::string>>> strings(std::string_view name) const;

 private:
  unsigned char buffer_[4096];
  boost::json::monotonic_resource resource_{buffer_, sizeof buffer_};
  boost::json::value document_ = boost::json::value(boost::json::storage_ptr(&resource_));
  const boost::json::object* fields_ = nullptr;
};

// What a job is put with, as PUT /v1/tubes/{tube}/jobs and PUT /v1/schedules/{name} read it:
// body or body_base64 (not both), priority (default 1024), ttr (rounded up to whole seconds, at
// least 1 s; default 60 s), group, and for push delivery url and content_type. The body's size is
// the caller's to check (it answers 413).
struct JobFields {
  std::string body;
  std::uint32_t priority = 1024;
  std::chrono::seconds ttr{60};
  std::string group;
  std::string url;
  std::string content_type;
};
Result<JobFields> read_job_fields(const Body& body);

}  // namespace delayq::front::http
