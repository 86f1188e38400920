#include "broker/redis/layout.h"

#include <msgpuck.h>

#include <algorithm>
#include <array>
#include <charconv>
#include <cstring>
#include <limits>
#include <tuple>

#include "redis/slot.h"

namespace delayq::broker::redis {

std::string shard_base(std::string_view prefix, std::uint32_t shard) {
  return std::string(prefix) + ":{" + std::to_string(shard) + "}";
}

std::string shard_channel(std::string_view prefix, std::uint32_t shard) {
  return shard_base(prefix, shard) + ":events";
}

namespace {

// After a shard's base ("dq:{s}"), in the order jobs.lua's run.lua enters them.
constexpr std::array<std::string_view, kShardKeyCount> kShardKeySuffixes = {
    ":seq",   ":j",     ":a",  ":t",  ":r", ":b",  ":k",  ":g", ":c",  ":m",  ":p", ":tubes",
    ":owner", ":epoch", ":ti", ":tp", ":s", ":sm", ":st", ":f", ":fg", ":fw", ":fz"};

}  // namespace

std::vector<std::string> shard_keys(std::string_view prefix, std::uint32_t shard) {
  const std::string base = shard_base(prefix, shard);
  std::vector<std::string> keys;
  keys.reserve(kShardKeySuffixes.size());
  for (const std::string_view suffix : kShardKeySuffixes)
    keys.push_back(base + std::string(suffix));
  return keys;
}

namespace {

// Shard s's number in decimal, written into `out`: what its keys' hash tag holds.
std::string_view digits_of(std::uint32_t shard, std::array<char, 10>& out) {
  const auto [end, error] = std::to_chars(out.data(), out.data() + out.size(), shard);
  DELAYQ_CHECK(error == std::errc{});
  return {out.data(), static_cast<std::size_t>(end - out.data())};
}

}  // namespace

std::uint16_t shard_slot(std::uint32_t shard) {
  std::array<char, 10> number;
  return delayq::redis::key_slot(digits_of(shard, number));
}

ShardKeys::ShardKeys(std::string_view prefix, std::string_view node)
    : prefix_(prefix), node_(node) {}

const ShardKeys::Template& ShardKeys::of_width(std::size_t digits) {
  if (templates_.size() < digits) templates_.resize(digits);
  Template& made = templates_[digits - 1];
  if (!made.encoded.empty()) return made;
  const std::string base = prefix_ + ":{" + std::string(digits, '0') + "}";
  // A RESP bulk string each ("$<length>\r\n<key>\r\n"), as Command::arg() writes one.
  const auto add = [&](std::string_view suffix) {
    made.encoded.append("$").append(std::to_string(base.size() + suffix.size())).append("\r\n");
    made.number_at.push_back(made.encoded.size() + prefix_.size() + 2);  // after "<prefix>:{"
    made.encoded.append(base).append(suffix).append("\r\n");
  };
  for (const std::string_view suffix : kShardKeySuffixes) add(suffix);
  made.keys_end = made.encoded.size();
  add(":ans:" + node_);
  return made;
}

std::size_t ShardKeys::size(std::uint32_t shard, bool answers) {
  std::array<char, 10> number;
  const Template& keys = of_width(digits_of(shard, number).size());
  return answers ? keys.encoded.size() : keys.keys_end;
}

void ShardKeys::add(std::uint32_t shard, bool answers, delayq::redis::Command& command) {
  std::array<char, 10> buffer;
  const std::string_view number = digits_of(shard, buffer);
  const Template& keys = of_width(number.size());
  const std::string_view encoded =
      std::string_view(keys.encoded).substr(0, answers ? keys.encoded.size() : keys.keys_end);
  const std::size_t count = kShardKeyCount + (answers ? 1 : 0);
  char* written = command.add_encoded(encoded, count);
  for (std::size_t i = 0; i < count; ++i) {
    std::memcpy(written + keys.number_at[i], number.data(), number.size());
  }
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
  std::uint32_t hash = delayq::redis::crc16(joined);
  hash = hash * 2654435761U;
  return (hash >> 8) % shards;
}

namespace {

// Reads the MessagePack objects of a record one after another (what jobs.lua's cmsgpack.pack
// writes: unsigned integers, floats for times with microseconds, strings), each checked to lie
// whole inside the bytes before it is read.
class Reader {
 public:
  explicit Reader(std::string_view bytes) : at_(bytes.data()), end_(bytes.data() + bytes.size()) {}
  bool number(double& out) {
    if (!whole()) return false;
    switch (mp_typeof(*at_)) {
      case MP_UINT:
        out = static_cast<double>(mp_decode_uint(&at_));
        return true;
      case MP_DOUBLE:
        out = mp_decode_double(&at_);
        return true;
      case MP_FLOAT:
        out = mp_decode_float(&at_);
        return true;
      default:
        return false;
    }
  }
  bool u8(std::uint8_t& out) { return whole_number(out); }
  bool u32(std::uint32_t& out) { return whole_number(out); }
  // A time or a delay: milliseconds, their microseconds dropped.
  bool ms(std::int64_t& out) {
    double value = 0;
    if (!number(value) || value < 0 || value > 9.0e15) return false;
    out = static_cast<std::int64_t>(value);
    return true;
  }
  bool text(std::string& out) {
    if (!whole() || mp_typeof(*at_) != MP_STR) return false;
    std::uint32_t size = 0;
    const char* text = mp_decode_str(&at_, &size);
    out.assign(text, size);
    return true;
  }
  [[nodiscard]] std::string_view rest() const {
    return {at_, static_cast<std::size_t>(end_ - at_)};
  }

 private:
  // Whether the next object ends inside the bytes (mp_check reads no further than end).
  [[nodiscard]] bool whole() const {
    const char* probe = at_;
    return at_ < end_ && mp_check(&probe, end_) == 0;
  }
  template <typename T>
  bool whole_number(T& out) {
    if (!whole() || mp_typeof(*at_) != MP_UINT) return false;
    const std::uint64_t value = mp_decode_uint(&at_);
    if (value > std::numeric_limits<T>::max()) return false;
    out = static_cast<T>(value);
    return true;
  }
  const char* at_;
  const char* end_;
};

}  // namespace

Result<Record> decode_record(JobId id, std::string_view bytes) {
  Record record;
  JobView& view = record.view;
  view.id = id;
  Reader in(bytes);
  std::uint8_t layout = 0;
  std::uint8_t flags = 0;
  std::uint8_t state = 0;
  std::uint32_t ttr = 0;
  JobCounters& c = view.counters;
  if (!in.u8(layout) || layout != kLayout || !in.u8(flags) || !in.u8(state) ||
      !in.u32(view.priority) || !in.ms(view.due_unix_ms) || !in.ms(view.deadline_unix_ms) ||
      !in.ms(view.created_unix_ms) || !in.ms(view.delay_ms) || !in.u32(ttr) ||
      !in.u32(c.reserves) || !in.u32(c.timeouts) || !in.u32(c.releases) || !in.u32(c.buries) ||
      !in.u32(c.kicks) || !in.text(view.tube) || !in.text(view.key) || !in.text(view.group) ||
      !in.text(record.holder) || state >= kJobStateCount) {
    return Status(Code::kCorruption, "job " + std::to_string(id) + ": a record cannot be read");
  }
  view.state = static_cast<JobState>(state);
  view.ttr = std::chrono::seconds(ttr);
  view.attached = (flags & 1) != 0;
  record.body = std::string(in.rest());
  return record;
}

namespace {

void put_uint(std::string& out, std::uint64_t value) {
  char buffer[9];
  out.append(buffer, static_cast<std::size_t>(mp_encode_uint(buffer, value) - buffer));
}

void put_text(std::string& out, std::string_view text) {
  char buffer[5];
  const auto size = static_cast<std::uint32_t>(text.size());
  out.append(buffer, static_cast<std::size_t>(mp_encode_strl(buffer, size) - buffer));
  out.append(text);
}

}  // namespace

std::string new_record_tail(std::uint32_t ttr_seconds, std::string_view tube, std::string_view key,
                            std::string_view group, std::string_view body) {
  std::string out;
  out.reserve(5 + 5 + 4 * 5 + tube.size() + key.size() + group.size() + body.size());
  put_uint(out, ttr_seconds);
  for (int counter = 0; counter < 5; ++counter) put_uint(out, 0);
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

namespace {
// FNV-1a, 64 bits, of the job and a name: the same on every node and build.
std::uint64_t turn_hash(std::string_view head, std::uint32_t shard, std::string_view name) {
  std::uint64_t hash = 14695981039346656037ULL;
  const auto mix = [&hash](std::string_view text) {
    for (const char c : text) {
      hash ^= static_cast<unsigned char>(c);
      hash *= 1099511628211ULL;
    }
    hash ^= 0xff;  // a byte no name or head holds: "ab"+"c" is not "a"+"bc"
    hash *= 1099511628211ULL;
  };
  mix(head);
  mix(std::to_string(shard));
  mix(name);
  return hash;
}
}  // namespace

std::optional<std::string> next_turn(const std::set<std::string>& nodes, std::uint32_t shard,
                                     std::string_view from, std::string_view head,
                                     const std::string* after) {
  using Rank = std::pair<std::uint64_t, std::string_view>;
  const auto rank = [&](std::string_view name) { return Rank{turn_hash(head, shard, name), name}; };
  std::optional<Rank> bound;
  if (after != nullptr) bound = rank(*after);
  std::optional<Rank> best;
  for (const auto& name : nodes) {
    if (name == from) continue;
    const Rank r = rank(name);
    if (bound && !(r < *bound)) continue;
    if (!best || *best < r) best = r;
  }
  if (!best) return std::nullopt;
  return std::string(best->second);
}

}  // namespace delayq::broker::redis
