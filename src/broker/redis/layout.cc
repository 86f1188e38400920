#include "broker/redis/layout.h"

#include <algorithm>
#include <bit>
#include <charconv>
#include <cstring>
#include <tuple>

#include "redis/slot.h"

namespace delayq::redis_broker {

std::string shard_base(std::string_view prefix, std::uint32_t shard) {
  return std::string(prefix) + ":{" + std::to_string(shard) + "}";
}

std::string shard_channel(std::string_view prefix, std::uint32_t shard) {
  return shard_base(prefix, shard) + ":events";
}

std::vector<std::string> shard_keys(std::string_view prefix, std::uint32_t shard) {
  const std::string base = shard_base(prefix, shard);
  std::vector<std::string> keys;
  for (const char* suffix : {":seq", ":j", ":a", ":t", ":r", ":b", ":k", ":g", ":c", ":m", ":p",
                             ":tubes", ":owner", ":epoch"}) {
    keys.push_back(base + suffix);
  }
  return keys;
}

Status check_prefix(std::string_view prefix) {
  const bool valid = !prefix.empty() && prefix.size() <= 64 &&
                     std::all_of(prefix.begin(), prefix.end(), [](char c) {
                       return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                              (c >= '0' && c <= '9') || c == '_' || c == '-';
                     });
  if (valid) return Status::ok();
  return {Code::kInvalidArgument,
          "a Redis key prefix is 1 to 64 letters, digits, '_' or '-', not '" + std::string(prefix) +
              "'"};
}

std::uint32_t shard_of_name(std::string_view tube, std::string_view name, std::uint32_t shards) {
  std::string joined;
  joined.reserve(tube.size() + 1 + name.size());
  joined.append(tube).push_back('\0');
  joined.append(name);
  // CRC16 spreads names evenly enough over up to a few thousand shards; a second mix makes
  // names that differ only at the end land apart.
  std::uint32_t hash = redis::crc16(joined);
  hash = hash * 2654435761U;
  return (hash >> 8) % shards;
}

namespace {

// Reads jobs.lua's big-endian fields one after another.
class Reader {
 public:
  explicit Reader(std::string_view bytes) : bytes_(bytes) {}
  bool u8(std::uint8_t& out) {
    return take(1, [&](const char* p) { out = static_cast<std::uint8_t>(*p); });
  }
  bool u32(std::uint32_t& out) {
    return take(4, [&](const char* p) {
      out = 0;
      for (int i = 0; i < 4; ++i) out = (out << 8) | static_cast<std::uint8_t>(p[i]);
    });
  }
  // A double holding whole milliseconds (Lua's numbers).
  bool ms(std::int64_t& out) {
    return take(8, [&](const char* p) {
      std::uint64_t bits = 0;
      for (int i = 0; i < 8; ++i) bits = (bits << 8) | static_cast<std::uint8_t>(p[i]);
      out = static_cast<std::int64_t>(std::bit_cast<double>(bits));
    });
  }
  bool text(std::string& out) {
    std::uint32_t size = 0;
    if (!u32(size)) return false;
    return take(size, [&](const char* p) { out.assign(p, size); });
  }
  [[nodiscard]] std::string_view rest() const { return bytes_.substr(at_); }

 private:
  template <typename F>
  bool take(std::size_t size, F&& read) {
    if (bytes_.size() - at_ < size) return false;
    read(bytes_.data() + at_);
    at_ += size;
    return true;
  }
  std::string_view bytes_;
  std::size_t at_ = 0;
};

}  // namespace

Result<Record> decode_record(JobId id, std::string_view bytes) {
  Record record;
  JobView& view = record.view;
  view.id = id;
  Reader in(bytes);
  std::uint8_t flags = 0;
  std::uint8_t state = 0;
  std::uint32_t ttr = 0;
  JobCounters& c = view.counters;
  if (!in.u8(flags) || !in.u8(state) || !in.u32(view.priority) || !in.ms(view.due_unix_ms) ||
      !in.ms(view.deadline_unix_ms) || !in.ms(view.created_unix_ms) || !in.ms(view.delay_ms) ||
      !in.u32(ttr) || !in.u32(c.reserves) || !in.u32(c.timeouts) || !in.u32(c.releases) ||
      !in.u32(c.buries) || !in.u32(c.kicks) || !in.text(view.tube) || !in.text(view.key) ||
      !in.text(view.group) || !in.text(record.holder) || state >= kJobStateCount) {
    return Status(Code::kCorruption, "job " + std::to_string(id) + ": a record cannot be read");
  }
  view.state = static_cast<JobState>(state);
  view.ttr = std::chrono::seconds(ttr);
  view.attached = (flags & 1) != 0;
  record.body = std::string(in.rest());
  return record;
}

namespace {

void put_u32(std::string& out, std::uint32_t value) {
  for (int shift = 24; shift >= 0; shift -= 8) {
    out.push_back(static_cast<char>((value >> shift) & 0xff));
  }
}

void put_text(std::string& out, std::string_view text) {
  put_u32(out, static_cast<std::uint32_t>(text.size()));
  out.append(text);
}

}  // namespace

std::string new_record_tail(std::uint32_t ttr_seconds, std::string_view tube, std::string_view key,
                            std::string_view group, std::string_view body) {
  std::string out;
  out.reserve(6 * 4 + 4 * 4 + tube.size() + key.size() + group.size() + body.size());
  put_u32(out, ttr_seconds);
  for (int counter = 0; counter < 5; ++counter) put_u32(out, 0);
  put_text(out, tube);
  put_text(out, key);
  put_text(out, group);
  put_text(out, "");  // the holder
  out.append(body);
  return out;
}

Head Head::parse(std::string_view text) {
  Head head;
  if (text.empty()) {
    head.kind = Kind::kNone;
    return head;
  }
  // Three unsigned decimals, each ended by ':' but the last.
  const char* at = text.data();
  const char* const end = text.data() + text.size();
  auto field = [&](auto& out, bool last) {
    if (at == end || *at < '0' || *at > '9') return false;
    const auto [next, error] = std::from_chars(at, end, out);
    if (error != std::errc()) return false;
    if (last) return next == end;
    if (next == end || *next != ':') return false;
    at = next + 1;
    return true;
  };
  if (!field(head.priority, false) || !field(head.created_unix_ms, false) ||
      !field(head.id, true)) {
    return {};
  }
  head.kind = Kind::kKnown;
  return head;
}

std::string Head::text() const {
  if (kind == Kind::kNone) return "";
  if (kind == Kind::kUnknown) return "?";
  return std::to_string(priority) + ":" + std::to_string(created_unix_ms) + ":" +
         std::to_string(id);
}

bool Head::before(const Head& other) const {
  return known() && other.known() &&
         std::tie(priority, created_unix_ms, id) <
             std::tie(other.priority, other.created_unix_ms, other.id);
}

Head after_message(const Head& known, const Head& told) {
  return known.before(told) ? known : told;
}

Head after_answer(const Head& known, const Head& told, bool told_since) {
  if (!told_since) return told;
  if (known.kind == Head::Kind::kUnknown) return known;
  if (told.known() && (!known.known() || told.before(known))) return told;
  return known;
}

}  // namespace delayq::redis_broker
