// status.h — the error values every layer returns instead of throwing.
// A Status is a code plus a message for people; Result<T> is a value or a non-ok Status. Both are
// [[nodiscard]]: an ignored error is a bug. Front-ends map codes to replies in one table each, so
// a code means the same thing everywhere: kNotFound is beanstalkd's NOT_FOUND and HTTP's 404.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "base/check.h"

namespace delayq {

enum class Code {
  kOk,
  kNotFound,         // no such job, key, tube or group (or not visible to this client)
  kInvalidArgument,  // the request itself is malformed or out of range
  kConflict,         // the job exists but its state forbids the operation
  kNotIgnored,       // ignoring the last watched tube
  kDeadlineSoon,     // reserve: a job reserved by this client is about to lapse
  kTimedOut,         // reserve: nothing became ready within the timeout
  kLimit,            // a configured limit would be exceeded
  kDraining,         // the server refuses new jobs (drain mode, before a shutdown)
  kNoSpace,          // the server refuses new jobs until its disk (or Redis) has room again
  kCorruption,       // data on disk fails its checks
  kNotSupported,     // this broker (or store) cannot do this at all, by design
  kUnknownFormat,    // stored data written by an unknown (newer) format version
  kIOError,          // the disk or the operating system failed
};

[[nodiscard]] constexpr std::string_view code_name(Code code) noexcept {
  switch (code) {
    case Code::kOk:
      return "ok";
    case Code::kNotFound:
      return "not found";
    case Code::kInvalidArgument:
      return "invalid argument";
    case Code::kConflict:
      return "conflict";
    case Code::kNotIgnored:
      return "not ignored";
    case Code::kDeadlineSoon:
      return "deadline soon";
    case Code::kTimedOut:
      return "timed out";
    case Code::kLimit:
      return "limit exceeded";
    case Code::kDraining:
      return "draining";
    case Code::kNoSpace:
      return "no space";
    case Code::kCorruption:
      return "corruption";
    case Code::kNotSupported:
      return "not supported";
    case Code::kUnknownFormat:
      return "unknown format";
    case Code::kIOError:
      return "I/O error";
  }
  return "unknown";
}

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(Code code, std::string message) : code_(code), message_(std::move(message)) {}
  static Status ok() { return {}; }

  [[nodiscard]] bool is_ok() const noexcept { return code_ == Code::kOk; }
  [[nodiscard]] Code code() const noexcept { return code_; }
  [[nodiscard]] const std::string& message() const noexcept { return message_; }
  // "corruption: job record 12 is truncated"
  [[nodiscard]] std::string to_string() const {
    if (is_ok()) return "ok";
    std::string text(code_name(code_));
    if (!message_.empty()) text.append(": ").append(message_);
    return text;
  }

 private:
  Code code_ = Code::kOk;
  std::string message_;
};

template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : value_(std::move(value)) {}         // NOLINT: implicit, as a return value
  Result(Status status) : status_(std::move(status)) {  // NOLINT
    DELAYQ_CHECK(!status_.is_ok());
  }
  Result(Code code, std::string message) : Result(Status(code, std::move(message))) {}

  [[nodiscard]] bool is_ok() const noexcept { return value_.has_value(); }
  [[nodiscard]] const Status& status() const noexcept { return status_; }
  [[nodiscard]] Code code() const noexcept { return status_.code(); }
  T& value() & {
    DELAYQ_CHECK(value_.has_value());
    return *value_;
  }
  const T& value() const& {
    DELAYQ_CHECK(value_.has_value());
    return *value_;
  }
  T&& value() && {
    DELAYQ_CHECK(value_.has_value());
    return std::move(*value_);
  }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

 private:
  std::optional<T> value_;
  Status status_;
};

}  // namespace delayq
