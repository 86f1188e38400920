#include "broker/redis/replies.h"

#include <charconv>
#include <sstream>

#include "broker/redis/layout.h"
#include "store/record.h"

namespace delayq::broker::redis {
using delayq::redis::Reply;
using delayq::redis::ReplyType;

std::int64_t to_int(std::string_view text, std::int64_t fallback) {
  std::int64_t value = fallback;
  std::from_chars(text.data(), text.data() + text.size(), value);
  return value;
}

// The replicas that INFO replication shows online and acknowledging ("slaveK:...,state=online,
// offset=...,lag=N": seconds since its last acknowledgement, sent every second): a paused or
// unreachable replica stays online for Redis's repl-timeout (60 s), but its lag grows.
int replicas_acknowledging(const std::string& info) {
  int count = 0;
  std::istringstream lines(info);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("slave", 0) != 0 || line.find("state=online") == std::string::npos) continue;
    const auto lag = line.find("lag=");
    if (lag != std::string::npos && to_int(line.substr(lag + 4)) <= 2) ++count;
  }
  return count;
}

double to_ms(std::string_view text, double fallback) {
  double value = fallback;
  std::from_chars(text.data(), text.data() + text.size(), value);
  return value;
}

bool is_out_of_memory(const std::string& error) {
  return error.starts_with("OOM ");
}

Status error_status(const std::string& error) {
  if (is_out_of_memory(error)) return {Code::kNoSpace, "Redis is out of memory: " + error};
  return {Code::kIOError, "Redis: " + error};
}

Status outcome(const Result<Reply>& reply) {
  if (!reply.is_ok()) return reply.status();
  if (reply.value().is_error()) return error_status(reply.value().str);
  return Status::ok();
}

Answer split_answer(Reply wrapped) {
  Answer answer;
  if (wrapped.type == ReplyType::kArray && wrapped.elements.size() == 2) {
    answer.reply = std::move(wrapped.elements[0]);
    answer.readied = std::move(wrapped.elements[1]);
  } else {
    answer.reply = std::move(wrapped);
  }
  return answer;
}

Status status_of(const Reply& reply) {
  if (reply.type != ReplyType::kArray || reply.elements.empty()) {
    return {Code::kIOError, "Redis answered " + delayq::redis::describe(reply)};
  }
  const std::string& code = reply.elements[0].str;
  if (code == "ok" || code == "exists" || code == "debounced") return Status::ok();
  const std::string message = reply.elements.size() > 1 ? reply.elements[1].str : code;
  if (code == "notfound") return {Code::kNotFound, message};
  if (code == "conflict") return {Code::kConflict, message};
  return {Code::kIOError, code + ": " + message};
}

Result<broker::Job> job_of(const Reply& reply) {
  if (reply.elements.size() < 5) return Status(Code::kIOError, "short job reply");
  const auto id = static_cast<JobId>(to_int(reply.elements[1].str));
  auto record = decode_record(id, reply.elements[2].str);
  if (!record.is_ok()) return record.status();
  broker::Job job{std::move(record.value().view),
                  std::move(record.value().body),
                  to_int(reply.elements[4].str),
                  {}};
  if (reply.elements[3].type == ReplyType::kString) {
    auto delivery = store::decode_delivery(id, reply.elements[3].str);
    if (!delivery.is_ok()) return delivery.status();
    job.delivery = std::move(delivery).value();
  }
  return job;
}

}  // namespace delayq::broker::redis
