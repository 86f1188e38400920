// replies.h — reading what Redis and jobs.lua answer: a script's status and job replies, the
// readied tubes a call's answer carries, numbers and times as jobs.lua writes them, and INFO
// replication. Pure functions, shared by the broker's files.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "base/status.h"
#include "broker/broker.h"
#include "redis/reply.h"

namespace delayq::broker::redis {

[[nodiscard]] std::int64_t to_int(std::string_view text, std::int64_t fallback = 0);
// A time from jobs.lua: milliseconds, with their microseconds as a fraction.
[[nodiscard]] double to_ms(std::string_view text, double fallback);
// The replicas that INFO replication shows online and acknowledging.
[[nodiscard]] int replicas_acknowledging(const std::string& info);
// Redis over its maxmemory refuses writes (under noeviction) with an error reply starting "OOM".
[[nodiscard]] bool is_out_of_memory(const std::string& error);
// An error reply: out of memory is kNoSpace, as a full disk is for the local broker; anything
// else an error of the store.
[[nodiscard]] Status error_status(const std::string& error);
// What became of a plain command: its failure, or the error Redis answered (error_status()).
[[nodiscard]] Status outcome(const Result<delayq::redis::Reply>& reply);

// jobs.lua answers {<the op's reply>, <readied>}; an error of the call itself is not wrapped.
struct Answer {
  delayq::redis::Reply reply;
  delayq::redis::Reply
      readied;  // {tube, head} for each tube whose best ready job the call made better
};
[[nodiscard]] Answer split_answer(delayq::redis::Reply wrapped);
// A script's reply: {'ok', ...} or {'<error>', message}.
[[nodiscard]] Status status_of(const delayq::redis::Reply& reply);
// {'ok', id, record, attachment, now} -> a job.
[[nodiscard]] Result<broker::Job> job_of(const delayq::redis::Reply& reply);

}  // namespace delayq::broker::redis
