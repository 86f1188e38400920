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
//
// The job id is not repeated: it is the record's key. The body is a value of its own.
#include "store/record.h"

#include <cstring>
#include <limits>

namespace delayq::store {
namespace {

constexpr std::size_t kFixedBytes = 54;

template <typename T>
void put_le(std::string& out, T value) {
  using U = std::make_unsigned_t<T>;
  auto u = static_cast<U>(value);
  for (std::size_t i = 0; i < sizeof(T); ++i) {
    out.push_back(static_cast<char>(u & 0xFFU));
    u = static_cast<U>(u >> 8U);
  }
}

void put_string(std::string& out, std::string_view text) {
  DELAYQ_CHECK(text.size() <= std::numeric_limits<std::uint16_t>::max());
  put_le(out, static_cast<std::uint16_t>(text.size()));
  out.append(text);
}

class Reader {
 public:
  explicit Reader(std::string_view bytes) : bytes_(bytes) {}
  template <typename T>
  bool get(T& value) {
    using U = std::make_unsigned_t<T>;
    if (bytes_.size() < sizeof(T)) return false;
    U u = 0;
    for (std::size_t i = 0; i < sizeof(T); ++i) {
      u = static_cast<U>(
          u | static_cast<U>(static_cast<U>(static_cast<unsigned char>(bytes_[i])) << (8 * i)));
    }
    value = static_cast<T>(u);
    bytes_.remove_prefix(sizeof(T));
    return true;
  }
  bool get_string(std::string& text) {
    std::uint16_t size = 0;
    if (!get(size) || bytes_.size() < size) return false;
    text.assign(bytes_.substr(0, size));
    bytes_.remove_prefix(size);
    return true;
  }
  [[nodiscard]] bool done() const noexcept { return bytes_.empty(); }

 private:
  std::string_view bytes_;
};

}  // namespace

std::string encode_record(const JobRecord& record) {
  std::string out;
  out.reserve(kFixedBytes + 6 + record.tube.size() + record.key.size() + record.group.size());
  put_le(out, kFormatVersion);
  put_le(out, static_cast<std::uint8_t>(record.state));
  put_le(out, record.priority);
  put_le(out, record.ttr_seconds);
  put_le(out, record.due_unix_ms);
  put_le(out, record.created_unix_ms);
  put_le(out, record.delay_ms);
  put_le(out, record.counters.reserves);
  put_le(out, record.counters.timeouts);
  put_le(out, record.counters.releases);
  put_le(out, record.counters.buries);
  put_le(out, record.counters.kicks);
  put_string(out, record.tube);
  put_string(out, record.key);
  put_string(out, record.group);
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
    return Status(Code::kUnsupported, "job record " + std::to_string(id) + " has format version " +
                                          std::to_string(version) + ", this build reads " +
                                          std::to_string(kFormatVersion));
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
  if (!in.done()) return corrupt("trailing bytes");
  if (state >= kJobStateCount) return corrupt("unknown state");
  if (record.tube.empty()) return corrupt("no tube");
  record.state = static_cast<JobState>(state);
  return record;
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
