// codec.cc — the schedule record, format version 1, integers little-endian:
//
//   size  field
//   1     version (1)
//   2+n   name, tube, cron, zone (u16 length, bytes)
//   4+n   body (u32 length, bytes)
//   2+n   url, content_type, group
//   8     every_ms, start_unix_ms, end_unix_ms, jitter_ms, max_lateness_ms (signed)
//   8     limit (0: none)
//   4     priority, ttr_seconds
//   1     misfire (0 skip, 1 once, 2 all), overlap (0 allow, 1 skip, 2 buffer_one)
//   1     flags: 1 paused, 2 start set, 4 end set, 8 ahead set, 16 last run set, 32 buffered set
//   8     cursor, ahead, last_run, buffered (unix ms, signed; 0 when not set)
//   8     runs, misfires, overlaps
#include "schedule/codec.h"

#include "base/bytes.h"

namespace delayq::schedule {
namespace {

using bytes::put_le;

enum Flag : std::uint8_t {
  kPaused = 1,
  kStart = 2,
  kEnd = 4,
  kAhead = 8,
  kLastRun = 16,
  kBuffered = 32,
};
constexpr std::uint8_t kKnownFlags = 63;

std::uint8_t flag_if(bool on, Flag flag) {
  return on ? flag : 0;
}

}  // namespace

std::string encode(const Record& record) {
  const Definition& d = record.definition;
  const State& s = record.state;
  std::string out;
  out.reserve(128 + d.name.size() + d.tube.size() + d.cron.size() + d.body.size());
  put_le(out, kRecordVersion);
  for (const std::string* text : {&d.name, &d.tube, &d.cron, &d.zone}) {
    bytes::put_string(out, *text);
  }
  bytes::put_long_string(out, d.body);
  for (const std::string* text : {&d.url, &d.content_type, &d.group}) {
    bytes::put_string(out, *text);
  }
  put_le(out, std::int64_t{d.every.count()});
  put_le(out, d.start_unix_ms.value_or(0));
  put_le(out, d.end_unix_ms.value_or(0));
  put_le(out, std::int64_t{d.jitter.count()});
  put_le(out, std::int64_t{d.max_lateness.count()});
  put_le(out, d.limit.value_or(0));
  put_le(out, d.priority);
  put_le(out, static_cast<std::uint32_t>(d.ttr.count()));
  put_le(out, static_cast<std::uint8_t>(d.misfire));
  put_le(out, static_cast<std::uint8_t>(d.overlap));
  put_le(out, static_cast<std::uint8_t>(flag_if(d.paused, kPaused) |
                                        flag_if(d.start_unix_ms.has_value(), kStart) |
                                        flag_if(d.end_unix_ms.has_value(), kEnd) |
                                        flag_if(s.ahead_unix_ms.has_value(), kAhead) |
                                        flag_if(s.last_run_unix_ms.has_value(), kLastRun) |
                                        flag_if(s.buffered_unix_ms.has_value(), kBuffered)));
  put_le(out, s.cursor_unix_ms);
  put_le(out, s.ahead_unix_ms.value_or(0));
  put_le(out, s.last_run_unix_ms.value_or(0));
  put_le(out, s.buffered_unix_ms.value_or(0));
  put_le(out, s.runs);
  put_le(out, s.misfires);
  put_le(out, s.overlaps);
  return out;
}

Result<Record> decode(std::string_view name, std::string_view value) {
  const auto corrupt = [name](const char* what) {
    return Status(Code::kCorruption, "schedule '" + std::string(name) + "': " + what);
  };
  bytes::Reader in(value);
  std::uint8_t version = 0;
  if (!in.get(version)) return corrupt("empty record");
  if (version != kRecordVersion) {
    return Status(Code::kUnknownFormat, "schedule '" + std::string(name) + "': format version " +
                                            std::to_string(version));
  }
  Record record;
  Definition& d = record.definition;
  State& s = record.state;
  bool ok = in.get_string(d.name) && in.get_string(d.tube) && in.get_string(d.cron) &&
            in.get_string(d.zone) && in.get_long_string(d.body) && in.get_string(d.url) &&
            in.get_string(d.content_type) && in.get_string(d.group);
  std::int64_t every = 0, start = 0, end = 0, jitter = 0, lateness = 0, ahead = 0, last = 0;
  std::int64_t buffered = 0;
  std::uint64_t limit = 0;
  std::uint32_t ttr = 0;
  std::uint8_t misfire = 0, overlap = 0, flags = 0;
  ok = ok && in.get(every) && in.get(start) && in.get(end) && in.get(jitter) && in.get(lateness) &&
       in.get(limit) && in.get(d.priority) && in.get(ttr) && in.get(misfire) && in.get(overlap) &&
       in.get(flags) && in.get(s.cursor_unix_ms) && in.get(ahead) && in.get(last) &&
       in.get(buffered) && in.get(s.runs) && in.get(s.misfires) && in.get(s.overlaps);
  if (!ok) return corrupt("truncated record");
  if (!in.done()) return corrupt("trailing bytes");
  if (misfire > 2 || overlap > 2 || (flags & ~kKnownFlags) != 0) return corrupt("bad enum or flag");
  d.every = Millis{every};
  d.jitter = Millis{jitter};
  d.max_lateness = Millis{lateness};
  d.ttr = std::chrono::seconds{ttr};
  d.misfire = static_cast<Misfire>(misfire);
  d.overlap = static_cast<Overlap>(overlap);
  d.paused = (flags & kPaused) != 0;
  if (limit != 0) d.limit = limit;
  if ((flags & kStart) != 0) d.start_unix_ms = start;
  if ((flags & kEnd) != 0) d.end_unix_ms = end;
  if ((flags & kAhead) != 0) s.ahead_unix_ms = ahead;
  if ((flags & kLastRun) != 0) s.last_run_unix_ms = last;
  if ((flags & kBuffered) != 0) s.buffered_unix_ms = buffered;
  if (d.name != name) return corrupt("name does not match its key");
  return record;
}

}  // namespace delayq::schedule
