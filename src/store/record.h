// record.h — a job as it lies on disk, and the mutations one engine step asks the store to make.
// The engine fills a WriteSet; the store applies a whole WriteSet (or several, for group commit)
// atomically. Records are encoded here and nowhere else; the layout is drawn in
// docs/storage-format.md and in record.cc beside the encoder.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/job.h"
#include "base/status.h"
#include "base/webhook.h"

namespace delayq::store {

// Version written into every record, attachment and webhook value. A reader refuses any other
// version with Code::kUnknownFormat rather than guess.
inline constexpr std::uint8_t kFormatVersion = 1;
// An attachment with a trace context (Delivery::traceparent, tracestate) is written as version 2:
// version 1's fields, then those two. One without is still written as version 1.
inline constexpr std::uint8_t kTracedAttachmentVersion = 2;
// The store's format marker ("m:format"). 2 added attachments, webhooks and the record's flags
// byte; 3 the flag JobRecord::due_inside; 4 moved attachments from the default column family
// to the bodies one (RocksStore moves them when it opens an older store); 5 attachments of
// version 2 (kTracedAttachmentVersion); 6 moved schedules to the bodies family too (read while
// the server runs); 7 added the far families (the far tier's jobs, below). An older store means
// the same under the newer version, and is marked with it when opened (so that an older build
// refuses it instead of misreading it). Anything newer is refused.
inline constexpr std::uint64_t kStoreVersion = 7;

struct JobRecord {
  JobId id = 0;
  std::string tube;
  std::uint32_t priority = 0;
  JobState state = JobState::kReady;
  // Delayed: when the job becomes ready. Otherwise: when it last became (or was put) ready or
  // delayed; recovery only reads it for delayed jobs.
  std::int64_t due_unix_ms = 0;
  std::int64_t created_unix_ms = 0;
  std::int64_t delay_ms = 0;  // the delay the job was last put, released or rescheduled with
  std::uint32_t ttr_seconds = 0;
  JobCounters counters;
  std::string key;    // empty: none
  std::string group;  // empty: none
  // The job has an attachment (its Delivery, under kAttachmentPrefix): read with the body.
  bool attached = false;
  // Delayed: due inside the millisecond due_unix_ms, not at its start (a delay counted from a
  // moment inside a millisecond). Recovery makes such a job due at the millisecond's last
  // microsecond, never before its real time.
  bool due_inside = false;

  friend bool operator==(const JobRecord&, const JobRecord&) = default;
};

[[nodiscard]] std::string encode_record(const JobRecord& record);
// Kinds of failure: kCorruption (too short, bad lengths, bad state, trailing bytes),
// kUnknownFormat (another format version).
[[nodiscard]] Result<JobRecord> decode_record(JobId id, std::string_view bytes);

// A job's attachment (what push delivery keeps about it) and a tube's webhook, encoded the same
// way (drawn in record.cc). Errors as decode_record's.
[[nodiscard]] std::string encode_delivery(const Delivery& delivery);
[[nodiscard]] Result<Delivery> decode_delivery(JobId id, std::string_view bytes);
[[nodiscard]] std::string encode_webhook(const Webhook& webhook);
[[nodiscard]] Result<Webhook> decode_webhook(std::string_view tube, std::string_view bytes);
// A tube's flow control settings (drawn in record.cc). Errors as decode_record's.
[[nodiscard]] std::string encode_flow(const FlowSettings& flow);
[[nodiscard]] Result<FlowSettings> decode_flow(std::string_view tube, std::string_view bytes);

// Keys: one byte of kind, then the job id big-endian so that RocksDB orders jobs by id.
inline constexpr char kJobPrefix = 'j';
inline constexpr char kBodyPrefix = 'b';
inline constexpr char kAttachmentPrefix = 'a';
// A tube's webhook: this prefix, then the tube's name.
inline constexpr char kWebhookPrefix = 'w';
// A tube's max_attempts (pull workers): this prefix, then the tube's name; u32 LE.
inline constexpr char kMaxAttemptsPrefix = 't';
// A tube's flow control: this prefix, then the tube's name; encode_flow()'s bytes.
inline constexpr char kFlowPrefix = 'f';
// A recurring schedule: this prefix, then its name; the value is the schedule's own record
// (schedule/codec.h), which the store keeps without reading.
inline constexpr char kSchedulePrefix = 's';
[[nodiscard]] std::optional<std::uint32_t> decode_u32(std::string_view bytes);
// The far tier (docs/storage-format.md): delayed jobs due beyond the engine's window, kept on
// disk only, in column families of their own. Its keys, each behind one byte of kind:
//   'J' id                              the job's record (as under kJobPrefix)
//   'd' tube '\0' due(8, BE) id(8, BE)   empty: the tube's far jobs by due time
//   'k' tube '\0' key                    the id (8, BE) of the far job that holds the key
//   'g' tube '\0' group '\0' id(8, BE)    empty: the far jobs of a group
//   'h' tube '\0' minute(8, BE)          u64 LE: how many far jobs of the tube are due in the
//                                       minute (its start in Unix ms / 60,000); never 0
// Tube names, keys and groups are printable ASCII, so '\0' ends each and orders the keys.
inline constexpr char kFarJobPrefix = 'J';
inline constexpr char kFarDuePrefix = 'd';
inline constexpr char kFarKeyPrefix = 'k';
inline constexpr char kFarGroupPrefix = 'g';
inline constexpr char kFarCountPrefix = 'h';
[[nodiscard]] std::string far_due_key(std::string_view tube, std::int64_t due_unix_ms, JobId id);
[[nodiscard]] std::string far_key_key(std::string_view tube, std::string_view key);
[[nodiscard]] std::string far_group_key(std::string_view tube, std::string_view group, JobId id);
[[nodiscard]] std::string far_count_key(std::string_view tube, std::int64_t minute);
// The prefix every key of the kind names for the tube (and the group): what a scan seeks.
[[nodiscard]] std::string far_prefix(char kind, std::string_view tube);
[[nodiscard]] std::string far_group_prefix(std::string_view tube, std::string_view group);
[[nodiscard]] std::uint64_t read_be64(std::string_view bytes);  // bytes.size() >= 8
inline constexpr std::string_view kFormatKey = "m:format";
inline constexpr std::string_view kNextIdKey = "m:next_id";
[[nodiscard]] std::string job_key(char prefix, JobId id);
[[nodiscard]] std::optional<JobId> parse_job_key(char prefix, std::string_view key);

// The mutations of one engine step, in order. A job's body is written once, when it is put, and
// erased with the job; every other change rewrites the small record only.
class WriteSet {
 public:
  // kErase drops a job's record and body, kEraseAttachment its attachment; the kFar kinds are
  // the far tier's (far_put() and the others below; kFarCount's value is the minute, u64 BE,
  // then the count, u64 LE); kWebhook,
  // kEraseWebhook and kMaxAttempts concern the tube named in `tube` (id 0); kMaxAttempts's value
  // is the number, u32 little-endian, and 0 erases it; kFlow's is encode_flow()'s, and settings
  // with nothing on erase it. kSchedule and kEraseSchedule concern the schedule named in `tube`.
  enum class Kind : std::uint8_t {
    kRecord,
    kBody,
    kErase,
    kAttachment,
    kEraseAttachment,
    kWebhook,
    kEraseWebhook,
    kMaxAttempts,
    kFlow,
    kSchedule,
    kEraseSchedule,
    kFarPut,
    kFarPutFresh,
    kFarErase,
    kFarCount
  };
  struct Op {
    Kind kind;
    JobId id;
    std::string value;  // encoded record, body, attachment or webhook; empty for erasures
    std::string tube;   // the tube, or the schedule, of the ops that name one (id 0)
  };

  void put_record(const JobRecord& record) {
    ops_.push_back({Kind::kRecord, record.id, encode_record(record), {}});
  }
  void put_body(JobId id, std::string_view body) {
    ops_.push_back({Kind::kBody, id, std::string(body), {}});
  }
  void erase(JobId id) { ops_.push_back({Kind::kErase, id, {}, {}}); }
  void put_attachment(JobId id, const Delivery& delivery) {
    ops_.push_back({Kind::kAttachment, id, encode_delivery(delivery), {}});
  }
  void erase_attachment(JobId id) { ops_.push_back({Kind::kEraseAttachment, id, {}, {}}); }
  void put_webhook(std::string_view tube, const Webhook& webhook) {
    ops_.push_back({Kind::kWebhook, 0, encode_webhook(webhook), std::string(tube)});
  }
  void erase_webhook(std::string_view tube) {
    ops_.push_back({Kind::kEraseWebhook, 0, {}, std::string(tube)});
  }
  void put_max_attempts(std::string_view tube, std::uint32_t max_attempts) {
    std::string value(4, '\0');
    for (std::size_t i = 0; i < 4; ++i) value[i] = static_cast<char>(max_attempts >> (8 * i));
    ops_.push_back({Kind::kMaxAttempts, 0, std::move(value), std::string(tube)});
  }
  void put_flow(std::string_view tube, const FlowSettings& flow) {
    ops_.push_back(
        {Kind::kFlow, 0, flow.any() ? encode_flow(flow) : std::string(), std::string(tube)});
  }
  void put_schedule(std::string_view name, std::string value) {
    ops_.push_back({Kind::kSchedule, 0, std::move(value), std::string(name)});
  }
  void erase_schedule(std::string_view name) {
    ops_.push_back({Kind::kEraseSchedule, 0, {}, std::string(name)});
  }
  // The far tier. far_put keeps a delayed job on disk only: its far record and index entries
  // ('J', 'd', 'k', 'g'), and drops its record under kJobPrefix unless `fresh` (a job put in
  // this very set has none). far_erase drops what far_put wrote for the same record (the job
  // comes back to memory, or is gone: its own kRecord or kErase follows). far_count sets how
  // many far jobs of the tube are due in the minute (0: none).
  void far_put(const JobRecord& record, bool fresh) {
    ops_.push_back({fresh ? Kind::kFarPutFresh : Kind::kFarPut, record.id, encode_record(record),
                    record.tube});
  }
  void far_erase(const JobRecord& record) {
    ops_.push_back({Kind::kFarErase, record.id, encode_record(record), record.tube});
  }
  void far_count(std::string_view tube, std::int64_t minute, std::uint64_t count);
  // The id high-water mark: every id below it has been handed out.
  void set_next_id(JobId next_id) { next_id_ = next_id; }

  void append(WriteSet&& other);
  void reserve(std::size_t ops) { ops_.reserve(ops); }
  void clear() {
    ops_.clear();
    next_id_.reset();
  }
  [[nodiscard]] bool empty() const noexcept { return ops_.empty() && !next_id_; }
  [[nodiscard]] const std::vector<Op>& ops() const noexcept { return ops_; }
  [[nodiscard]] std::optional<JobId> next_id() const noexcept { return next_id_; }

 private:
  std::vector<Op> ops_;
  std::optional<JobId> next_id_;
};

}  // namespace delayq::store
