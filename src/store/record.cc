// record.cc — the job record codec. Format version 1, all integers little-endian:
//
//   offset size field
//   0      1    version (1)
//   1      1    state (0 delayed, 1 ready, 2 reserved, 3 buried)
//   2      4    priority
//   6      4    ttr_seconds
//   10     8    due_unix_ms        (signed)
//   18     8    created_unix_ms    (signed)
//   26     8    delay_ms           (signed)
//   34     20   reserves, timeouts, releases, buries, kicks (u32 each)
//   54     2+n  tube   (u16 length, bytes; never empty)
//   ...    2+n  key    (u16 length, bytes; length 0 = no key)
//   ...    2+n  group  (u16 length, bytes; length 0 = no group)
//   ...    1    flags  (written only when not 0; bit 0: the job has an attachment; bit 1:
//                       delayed, due inside the millisecond due_unix_ms rather than at its
//                       start: recovery makes it due at that millisecond's end)
//
// The job id is not repeated: it is the record's key. The body is a value of its own, and so
// is the attachment (kAttachmentPrefix + id), what push delivery keeps about the job:
//
//   0      1    version (1)
//   1      2+n  url           (u16 length, bytes; 0 = the tube's webhook)
//   ...    2+n  content_type  (u16 length, bytes; 0 = application/octet-stream)
//   ...    4    last_status   (signed; 0 = no answer)
//   ...    8    last_attempt_unix_ms (signed)
//   ...    2+n  last_error    (u16 length, bytes)
//
// A tube's webhook (kWebhookPrefix + tube name):
//
//   0      1    version (1)
//   1      2+n  url
//   ...    8    timeout_ms (signed)
//          4    max_attempts
//          4    concurrency
//          8    rate (IEEE 754 double, bit pattern as u64)
//          8    backoff min ms, 8 backoff max ms (signed), 8 backoff factor (double bits)
//          2    header count, then per header 2+n name, 2+n value
//          2    secret count, then per secret 2+n bytes
//
// A tube's flow control (kFlowPrefix + tube name):
//
//   0      1    version (1)
//   1      4    group_concurrency (0 = none)
//   5      1    fair (0 or 1)
//   6      4    rate_jobs (0 = none)
//   10     4    rate_period_ms
//   14     4    rate_burst
//   18     2    group weights, n; then n times: 2+len group name, 4 weight (2 to 1000)
#include "store/record.h"

#include <algorithm>
#include <cstring>
#include <limits>

#include "base/bytes.h"
#include "store/far_reader.h"

namespace delayq::store {
namespace {

using bytes::put_le;
using bytes::put_string;
using bytes::Reader;

constexpr std::size_t kFixedBytes = 54;
// The record's flags.
constexpr std::uint8_t kAttachedFlag = 1;
constexpr std::uint8_t kDueInsideFlag = 2;
constexpr std::uint8_t kKnownFlags = kAttachedFlag | kDueInsideFlag;

}  // namespace

std::string encode_record(const JobRecord& record) {
  const auto flags = static_cast<std::uint8_t>((record.attached ? kAttachedFlag : 0) |
                                               (record.due_inside ? kDueInsideFlag : 0));
  // Sized once, then filled: a record is encoded at every change of every job.
  std::string out(kFixedBytes + 6 + record.tube.size() + record.key.size() + record.group.size() +
                      (flags != 0 ? 1 : 0),
                  '\0');
  bytes::Writer w(out);
  w.le(kFormatVersion);
  w.le(static_cast<std::uint8_t>(record.state));
  w.le(record.priority);
  w.le(record.ttr_seconds);
  w.le(record.due_unix_ms);
  w.le(record.created_unix_ms);
  w.le(record.delay_ms);
  w.le(record.counters.reserves);
  w.le(record.counters.timeouts);
  w.le(record.counters.releases);
  w.le(record.counters.buries);
  w.le(record.counters.kicks);
  w.string(record.tube);
  w.string(record.key);
  w.string(record.group);
  if (flags != 0) w.le(flags);
  DELAYQ_CHECK(w.at() == out.data() + out.size());
  return out;
}

Result<JobRecord> decode_record(JobId id, std::string_view bytes) {
  const auto corrupt = [id](const char* what) {
    return Status(Code::kCorruption, "job record " + std::to_string(id) + ": " + what);
  };
  Reader in(bytes);
  std::uint8_t version = 0;
  if (!in.get(version)) return corrupt("empty");
  if (version != kFormatVersion) {
    return Status(Code::kUnknownFormat, "job record " + std::to_string(id) +
                                            " has format version " + std::to_string(version) +
                                            ", this build reads " + std::to_string(kFormatVersion));
  }
  JobRecord record;
  record.id = id;
  std::uint8_t state = 0;
  bool whole = in.get(state) && in.get(record.priority) && in.get(record.ttr_seconds) &&
               in.get(record.due_unix_ms) && in.get(record.created_unix_ms) &&
               in.get(record.delay_ms) && in.get(record.counters.reserves) &&
               in.get(record.counters.timeouts) && in.get(record.counters.releases) &&
               in.get(record.counters.buries) && in.get(record.counters.kicks) &&
               in.get_string(record.tube) && in.get_string(record.key) &&
               in.get_string(record.group);
  if (!whole) return corrupt("truncated");
  std::uint8_t flags = 0;
  // Written only when a flag is set, so a flags byte of 0 is as foreign as any other, and so is
  // an unknown flag.
  if (!in.done() && (!in.get(flags) || flags == 0 || (flags & ~kKnownFlags) != 0)) {
    return corrupt("trailing bytes");
  }
  record.attached = (flags & kAttachedFlag) != 0;
  record.due_inside = (flags & kDueInsideFlag) != 0;
  if (!in.done()) return corrupt("trailing bytes");
  if (state >= kJobStateCount) return corrupt("unknown state");
  if (record.tube.empty()) return corrupt("no tube");
  record.state = static_cast<JobState>(state);
  return record;
}

namespace {

std::uint64_t double_bits(double value) {
  std::uint64_t bits = 0;
  std::memcpy(&bits, &value, sizeof bits);
  return bits;
}

double bits_double(std::uint64_t bits) {
  double value = 0;
  std::memcpy(&value, &bits, sizeof value);
  return value;
}

Status unsupported(const std::string& what, std::uint8_t version) {
  return {Code::kUnknownFormat, what + " has format version " + std::to_string(version) +
                                    ", this build reads " + std::to_string(kFormatVersion)};
}

}  // namespace

std::string encode_delivery(const Delivery& delivery) {
  const bool traced = !delivery.traceparent.empty() || !delivery.tracestate.empty();
  std::string out;
  put_le(out, traced ? kTracedAttachmentVersion : kFormatVersion);
  put_string(out, delivery.url);
  put_string(out, delivery.content_type);
  put_le(out, static_cast<std::int32_t>(delivery.last_status));
  put_le(out, delivery.last_attempt_unix_ms);
  put_string(out, delivery.last_error);
  if (traced) {
    put_string(out, delivery.traceparent);
    put_string(out, delivery.tracestate);
  }
  return out;
}

Result<Delivery> decode_delivery(JobId id, std::string_view bytes) {
  const std::string what = "attachment of job " + std::to_string(id);
  Reader in(bytes);
  std::uint8_t version = 0;
  if (!in.get(version)) return Status(Code::kCorruption, what + ": empty");
  if (version != kFormatVersion && version != kTracedAttachmentVersion) {
    return unsupported(what, version);
  }
  Delivery delivery;
  std::int32_t status = 0;
  const bool whole =
      in.get_string(delivery.url) && in.get_string(delivery.content_type) && in.get(status) &&
      in.get(delivery.last_attempt_unix_ms) && in.get_string(delivery.last_error) &&
      (version == kFormatVersion ||
       (in.get_string(delivery.traceparent) && in.get_string(delivery.tracestate))) &&
      in.done();
  if (!whole) return Status(Code::kCorruption, what + ": truncated or trailing bytes");
  delivery.last_status = status;
  return delivery;
}

std::string encode_webhook(const Webhook& webhook) {
  std::string out;
  put_le(out, kFormatVersion);
  put_string(out, webhook.url);
  put_le(out, static_cast<std::int64_t>(webhook.timeout.count()));
  put_le(out, webhook.max_attempts);
  put_le(out, webhook.concurrency);
  put_le(out, double_bits(webhook.rate));
  put_le(out, static_cast<std::int64_t>(webhook.backoff.min.count()));
  put_le(out, static_cast<std::int64_t>(webhook.backoff.max.count()));
  put_le(out, double_bits(webhook.backoff.factor));
  put_le(out, static_cast<std::uint16_t>(webhook.headers.size()));
  for (const auto& [name, value] : webhook.headers) {
    put_string(out, name);
    put_string(out, value);
  }
  put_le(out, static_cast<std::uint16_t>(webhook.secrets.size()));
  for (const std::string& secret : webhook.secrets) put_string(out, secret);
  return out;
}

Result<Webhook> decode_webhook(std::string_view tube, std::string_view bytes) {
  const std::string what = "webhook of tube " + std::string(tube);
  Reader in(bytes);
  std::uint8_t version = 0;
  if (!in.get(version)) return Status(Code::kCorruption, what + ": empty");
  if (version != kFormatVersion) return unsupported(what, version);
  Webhook webhook;
  std::int64_t timeout = 0, min = 0, max = 0;
  std::uint64_t rate = 0, factor = 0;
  std::uint16_t headers = 0, secrets = 0;
  bool whole = in.get_string(webhook.url) && in.get(timeout) && in.get(webhook.max_attempts) &&
               in.get(webhook.concurrency) && in.get(rate) && in.get(min) && in.get(max) &&
               in.get(factor) && in.get(headers);
  for (std::uint16_t i = 0; whole && i < headers; ++i) {
    std::string name, value;
    whole = in.get_string(name) && in.get_string(value);
    webhook.headers.emplace_back(std::move(name), std::move(value));
  }
  whole = whole && in.get(secrets);
  for (std::uint16_t i = 0; whole && i < secrets; ++i) {
    whole = in.get_string(webhook.secrets.emplace_back());
  }
  if (!whole || !in.done())
    return Status(Code::kCorruption, what + ": truncated or trailing bytes");
  webhook.timeout = std::chrono::milliseconds(timeout);
  webhook.rate = bits_double(rate);
  webhook.backoff = {std::chrono::milliseconds(min), std::chrono::milliseconds(max),
                     bits_double(factor)};
  return webhook;
}

std::string encode_flow(const FlowSettings& flow) {
  std::string out;
  put_le(out, kFormatVersion);
  put_le(out, flow.group_concurrency);
  put_le(out, static_cast<std::uint8_t>(flow.fair ? 1 : 0));
  put_le(out, flow.rate_jobs);
  put_le(out, static_cast<std::uint32_t>(flow.rate_period.count()));
  put_le(out, flow.rate_burst);
  put_le(out, static_cast<std::uint16_t>(flow.group_weights.size()));
  for (const auto& [group, weight] : flow.group_weights) {
    put_string(out, group);
    put_le(out, weight);
  }
  return out;
}

Result<FlowSettings> decode_flow(std::string_view tube, std::string_view bytes) {
  const std::string what = "flow control of tube " + std::string(tube);
  Reader in(bytes);
  std::uint8_t version = 0;
  if (!in.get(version)) return Status(Code::kCorruption, what + ": empty");
  if (version != kFormatVersion) return unsupported(what, version);
  FlowSettings flow;
  std::uint8_t fair = 0;
  std::uint32_t period = 0;
  std::uint16_t weights = 0;
  bool whole = in.get(flow.group_concurrency) && in.get(fair) && in.get(flow.rate_jobs) &&
               in.get(period) && in.get(flow.rate_burst) && in.get(weights);
  for (std::uint16_t i = 0; whole && i < weights; ++i) {
    std::string group;
    std::uint32_t weight = 0;
    whole = in.get_string(group) && in.get(weight) && weight >= 2 &&
            weight <= FlowSettings::kMaxGroupWeight;
    flow.group_weights.emplace(std::move(group), weight);
  }
  if (!whole || !in.done() || fair > 1 || period == 0 || flow.rate_burst == 0) {
    return Status(Code::kCorruption, what + ": truncated, trailing or out-of-range bytes");
  }
  flow.fair = fair == 1;
  flow.rate_period = std::chrono::milliseconds(period);
  return flow;
}

std::optional<std::uint32_t> decode_u32(std::string_view bytes) {
  Reader in(bytes);
  std::uint32_t value = 0;
  if (!in.get(value) || !in.done()) return std::nullopt;
  return value;
}

std::string job_key(char prefix, JobId id) {
  std::string key(9, '\0');
  key[0] = prefix;
  for (int i = 0; i < 8; ++i) {
    key[static_cast<std::size_t>(8 - i)] = static_cast<char>((id >> (8 * i)) & 0xFFU);
  }
  return key;
}

std::optional<JobId> parse_job_key(char prefix, std::string_view key) {
  if (key.size() != 9 || key[0] != prefix) return std::nullopt;
  JobId id = 0;
  for (std::size_t i = 1; i < 9; ++i) id = id << 8U | static_cast<unsigned char>(key[i]);
  return id;
}

namespace {

void append_be64(std::string& out, std::uint64_t value) {
  for (int i = 7; i >= 0; --i) out.push_back(static_cast<char>((value >> (8 * i)) & 0xFFU));
}

}  // namespace

std::uint64_t read_be64(std::string_view bytes) {
  std::uint64_t value = 0;
  for (std::size_t i = 0; i < 8; ++i) value = value << 8U | static_cast<unsigned char>(bytes[i]);
  return value;
}

std::string far_prefix(char kind, std::string_view tube) {
  std::string key;
  key.reserve(tube.size() + 2);
  key.push_back(kind);
  key.append(tube);
  key.push_back('\0');
  return key;
}

std::string far_due_key(std::string_view tube, std::int64_t due_unix_ms, JobId id) {
  std::string key = far_prefix(kFarDuePrefix, tube);
  append_be64(key, static_cast<std::uint64_t>(std::max<std::int64_t>(0, due_unix_ms)));
  append_be64(key, id);
  return key;
}

std::string far_key_key(std::string_view tube, std::string_view key) {
  return far_prefix(kFarKeyPrefix, tube).append(key);
}

std::string far_group_prefix(std::string_view tube, std::string_view group) {
  std::string key = far_prefix(kFarGroupPrefix, tube).append(group);
  key.push_back('\0');
  return key;
}

std::string far_group_key(std::string_view tube, std::string_view group, JobId id) {
  std::string key = far_group_prefix(tube, group);
  append_be64(key, id);
  return key;
}

std::string far_count_key(std::string_view tube, std::int64_t minute) {
  std::string key = far_prefix(kFarCountPrefix, tube);
  append_be64(key, static_cast<std::uint64_t>(std::max<std::int64_t>(0, minute)));
  return key;
}

void WriteSet::far_count(std::string_view tube, std::int64_t minute, std::uint64_t count) {
  std::string value;
  value.reserve(16);
  append_be64(value, static_cast<std::uint64_t>(std::max<std::int64_t>(0, minute)));
  put_le(value, count);
  ops_.push_back({Kind::kFarCount, 0, std::move(value), std::string(tube)});
}

Status far_writes(const WriteSet::Op& op,
                  const std::function<void(std::string, std::optional<std::string_view>)>& write,
                  const std::function<void(JobId)>& drop_record) {
  if (op.kind == WriteSet::Kind::kFarCount) {
    if (op.value.size() != 16) return {Code::kCorruption, "a far count of the wrong size"};
    const auto minute = static_cast<std::int64_t>(read_be64(op.value));
    const std::string_view count = std::string_view(op.value).substr(8);
    const bool zero = count.find_first_not_of('\0') == std::string_view::npos;
    write(far_count_key(op.tube, minute), zero ? std::nullopt : std::optional(count));
    return Status::ok();
  }
  auto decoded = decode_record(op.id, op.value);
  if (!decoded.is_ok()) return decoded.status();
  const JobRecord& r = decoded.value();
  const bool put = op.kind != WriteSet::Kind::kFarErase;
  const auto value = [put](std::string_view bytes) {
    return put ? std::optional(bytes) : std::nullopt;
  };
  write(job_key(kFarJobPrefix, r.id), value(op.value));
  write(far_due_key(r.tube, r.due_unix_ms, r.id), value({}));
  std::string id_bytes;
  append_be64(id_bytes, r.id);
  if (!r.key.empty()) write(far_key_key(r.tube, r.key), value(id_bytes));
  if (!r.group.empty()) write(far_group_key(r.tube, r.group, r.id), value({}));
  if (op.kind == WriteSet::Kind::kFarPut) drop_record(r.id);
  return Status::ok();
}

void WriteSet::append(WriteSet&& other) {
  if (ops_.empty()) {
    ops_ = std::move(other.ops_);
  } else {
    ops_.insert(ops_.end(), std::make_move_iterator(other.ops_.begin()),
                std::make_move_iterator(other.ops_.end()));
  }
  if (other.next_id_) next_id_ = other.next_id_;
  other.clear();
}

}  // namespace delayq::store
