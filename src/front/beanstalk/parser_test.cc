#include "front/beanstalk/parser.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <ostream>
#include <random>
#include <set>
#include <string>
#include <vector>

namespace delayq::front::beanstalk {
namespace {

using namespace std::string_literals;
using namespace std::string_view_literals;
using Kind = Parsed::Kind;

constexpr std::uint32_t kU32Max = 4294967295U;
constexpr std::uint64_t kU64Max = 18446744073709551615ULL;

// ---------------------------------------------------------------------------------------------
// What a session sees of one parse() result, with the views copied out so that it outlives the
// buffer. `consumed` and `discard_line` depend on how the input was cut into reads; the rest not.

struct Snapshot {
  Kind kind = Kind::kNeedMore;
  Error error = Error::kBadFormat;
  std::size_t consumed = 0;
  std::size_t discard = 0;
  bool discard_line = false;
  bool close = false;
  bool counted = false;
  Command command;  // tube, body, key and group cleared: they are below
  std::string tube;
  std::string body;
  std::string key;
  std::string group;
  friend bool operator==(const Snapshot&, const Snapshot&) = default;
};

struct Event {
  Kind kind = Kind::kCommand;
  Error error = Error::kBadFormat;
  std::size_t discard = 0;
  bool close = false;
  bool counted = false;
  Command command;
  std::string tube;
  std::string body;
  std::string key;
  std::string group;
  friend bool operator==(const Event&, const Event&) = default;
};

std::string escaped(std::string_view bytes) {
  std::string out;
  for (const char c : bytes.substr(0, 48)) {
    if (c == '\r') {
      out += "\\r";
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\0') {
      out += "\\0";
    } else {
      out += c;
    }
  }
  if (bytes.size() > 48) out += "...(" + std::to_string(bytes.size()) + " bytes)";
  return out;
}

void PrintTo(const Event& event, std::ostream* os) {
  if (event.kind != Kind::kCommand) {
    *os << error_name(event.error) << " discard=" << event.discard;
    return;
  }
  const Command& c = event.command;
  *os << verb_name(c.verb) << " id=" << c.id << " pri=" << c.priority
      << " delay=" << c.delay_seconds << " ttr=" << c.ttr_seconds
      << " timeout=" << c.timeout_seconds << " bound=" << c.bound << " pause=" << c.pause_seconds
      << " tube='" << escaped(event.tube) << "' body='" << escaped(event.body) << "'"
      << " when=" << (c.due.absolute ? "@" : "") << c.due.ms << " key='" << escaped(event.key)
      << "' group='" << escaped(event.group) << "'" << (c.replace ? " replace" : "")
      << (event.close ? " close" : "");
}

Event event_of(const Snapshot& s);

void PrintTo(const Snapshot& s, std::ostream* os) {
  *os << "kind=" << static_cast<int>(s.kind) << " consumed=" << s.consumed
      << " discard_line=" << s.discard_line << " ";
  PrintTo(event_of(s), os);
}

Event event_of(const Snapshot& s) {
  return {s.kind,    s.error, s.discard, s.close, s.counted,
          s.command, s.tube,  s.body,    s.key,   s.group};
}

bool within(std::string_view part, std::string_view whole) {
  return part.empty() ||
         (part.data() >= whole.data() && part.data() + part.size() <= whole.data() + whole.size());
}

// parse() on a heap copy of exactly input.size() bytes (up to 4 KiB), so that the ASan build
// catches a read past the end; longer inputs (put bodies) are parsed in place.
Snapshot parse_exact(std::string_view input, const ParserLimits& limits) {
  std::unique_ptr<char[]> copy;
  std::string_view view = input;
  if (input.size() <= 4096) {
    copy = std::make_unique_for_overwrite<char[]>(input.size());
    if (!input.empty()) std::memcpy(copy.get(), input.data(), input.size());
    view = std::string_view(copy.get(), input.size());
  }
  const Parsed parsed = parse(view, limits);
  EXPECT_TRUE(within(parsed.command.tube, view));
  EXPECT_TRUE(within(parsed.command.body, view));
  EXPECT_TRUE(within(parsed.command.key, view));
  EXPECT_TRUE(within(parsed.command.group, view));
  Snapshot s{parsed.kind,
             parsed.error,
             parsed.consumed,
             parsed.discard,
             parsed.discard_line,
             parsed.close,
             parsed.counted,
             parsed.command,
             std::string(parsed.command.tube),
             std::string(parsed.command.body),
             std::string(parsed.command.key),
             std::string(parsed.command.group)};
  s.command.tube = {};
  s.command.body = {};
  s.command.key = {};
  s.command.group = {};
  return s;
}

// ---------------------------------------------------------------------------------------------
// Replay: a session's read loop over one input that arrives in pieces. It parses as far as the
// bytes delivered so far allow, drops what the errors say to drop, and stops at quit.

struct ReplayState {
  std::size_t position = 0;  // bytes consumed or dropped
  std::size_t discard = 0;   // JOB_TOO_BIG bytes still to drop
  bool skipping_line = false;
  bool closed = false;
  friend bool operator==(const ReplayState&, const ReplayState&) = default;
};

class Replay {
 public:
  Replay(std::string_view input, const ParserLimits& limits) : input_(input), limits_(limits) {}

  void deliver_until(std::size_t end) {
    ASSERT_GE(end, delivered_);
    delivered_ = std::min(end, input_.size());
    while (!state_.closed) {
      const std::string_view rest = input_.substr(state_.position, delivered_ - state_.position);
      if (state_.discard > 0) {
        const std::size_t n = std::min(state_.discard, rest.size());
        state_.position += n;
        state_.discard -= n;
        if (state_.discard > 0) return;
        continue;
      }
      if (state_.skipping_line) {
        const Skipped skipped = skip_line(rest);
        ASSERT_LE(skipped.consumed, rest.size());
        state_.position += skipped.consumed;
        if (!skipped.line_ended) return;
        state_.skipping_line = false;
        continue;
      }
      const Snapshot s = parse_exact(rest, limits_);
      if (s.kind == Kind::kNeedMore) {
        ASSERT_EQ(s.consumed, 0U);
        return;
      }
      ASSERT_GT(s.consumed, 0U);
      ASSERT_LE(s.consumed, rest.size());
      state_.position += s.consumed;
      state_.discard = s.discard;
      state_.skipping_line = s.discard_line;
      state_.closed = s.close;
      events_.push_back(event_of(s));
    }
  }

  [[nodiscard]] const std::vector<Event>& events() const { return events_; }
  [[nodiscard]] const ReplayState& state() const { return state_; }

 private:
  std::string_view input_;
  ParserLimits limits_;
  std::size_t delivered_ = 0;
  ReplayState state_;
  std::vector<Event> events_;
};

Replay replay(std::string_view input, const ParserLimits& limits,
              const std::vector<std::size_t>& cuts) {
  Replay r(input, limits);
  for (const std::size_t cut : cuts) r.deliver_until(cut);
  r.deliver_until(input.size());
  return r;
}

// Every command in `input`: each proper prefix of it is kNeedMore (only an over-long line is
// reported early, once max_line_bytes have arrived), and exactly its bytes give the same result.
void check_prefixes(std::string_view input, const ParserLimits& limits) {
  std::size_t position = 0;
  while (position < input.size()) {
    const std::string_view rest = input.substr(position);
    const Snapshot whole = parse_exact(rest, limits);
    if (whole.kind == Kind::kNeedMore) return;
    for (std::size_t k = 0; k < whole.consumed; ++k) {
      const Snapshot part = parse_exact(rest.substr(0, k), limits);
      if (part.kind == Kind::kNeedMore) continue;
      ASSERT_TRUE(k >= limits.max_line_bytes && part.kind == Kind::kError &&
                  part.error == Error::kBadFormat && part.discard_line &&
                  whole.kind == Kind::kError && whole.error == Error::kBadFormat)
          << "at " << position << ", prefix of " << k << " bytes";
    }
    if (whole.discard_line) return;  // the input ends inside an over-long line
    ASSERT_EQ(parse_exact(rest.substr(0, whole.consumed), limits), whole) << "at " << position;
    if (whole.close) return;
    position += whole.consumed + whole.discard;
  }
}

// ---------------------------------------------------------------------------------------------
// Transcripts: input bytes and the exact sequence of commands and errors they must give.

struct Transcript {
  std::string name;
  std::string input;
  std::vector<Event> expected = {};
  std::string unparsed = {};  // bytes left at the end: an incomplete command, or all after quit
  ParserLimits limits = {};
};

Event ok(const Command& command) {
  Event e;
  e.kind = Kind::kCommand;
  e.command = command;
  e.tube = std::string(command.tube);
  e.body = std::string(command.body);
  e.key = std::string(command.key);
  e.group = std::string(command.group);
  e.command.tube = {};
  e.command.body = {};
  e.command.key = {};
  e.command.group = {};
  e.close = command.verb == Verb::kQuit;
  return e;
}

Event err(Error error, std::size_t discard = 0) {
  Event e;
  e.kind = Kind::kError;
  e.error = error;
  e.discard = discard;
  return e;
}

// An error on a line that beanstalkd counts in its cmd-* counter all the same (Parsed::counted).
Event counted(Event e, Verb verb) {
  e.counted = true;
  e.command.verb = verb;
  return e;
}

const Event kBad = err(Error::kBadFormat);
const Event kUnknown = err(Error::kUnknownCommand);
const Event kExpectedCrlf = counted(err(Error::kExpectedCrlf), Verb::kPut);
// A put whose four numbers parse, then trailing garbage.
const Event kPutGarbage = counted(kBad, Verb::kPut);
// A pause-tube whose name and delay parse, but the name is no tube name.
const Event kBadPauseName = counted(kBad, Verb::kPauseTube);

Command bare(Verb verb) {
  Command c;
  c.verb = verb;
  return c;
}
Command put(std::uint32_t pri, std::uint32_t delay, std::uint32_t ttr, std::string_view body) {
  Command c = bare(Verb::kPut);
  c.priority = pri;
  c.delay_seconds = delay;
  c.ttr_seconds = ttr;
  c.body = body;
  return c;
}
Command with_id(Verb verb, std::uint64_t id) {
  Command c = bare(verb);
  c.id = id;
  return c;
}
Command with_tube(Verb verb, std::string_view tube) {
  Command c = bare(verb);
  c.tube = tube;
  return c;
}
Command release(std::uint64_t id, std::uint32_t pri, std::uint32_t delay) {
  Command c = with_id(Verb::kRelease, id);
  c.priority = pri;
  c.delay_seconds = delay;
  return c;
}
Command bury(std::uint64_t id, std::uint32_t pri) {
  Command c = with_id(Verb::kBury, id);
  c.priority = pri;
  return c;
}
Command reserve_with_timeout(std::uint32_t seconds) {
  Command c = bare(Verb::kReserveWithTimeout);
  c.timeout_seconds = seconds;
  return c;
}
Command kick(std::uint32_t bound) {
  Command c = bare(Verb::kKick);
  c.bound = bound;
  return c;
}
Command pause_tube(std::string_view tube, std::uint32_t seconds) {
  Command c = with_tube(Verb::kPauseTube, tube);
  c.pause_seconds = seconds;
  return c;
}

// `pattern` repeated to `size` bytes: bodies that look like commands.
std::string filled(std::size_t size, std::string_view pattern) {
  std::string out;
  while (out.size() < size) out.append(pattern);
  out.resize(size);
  return out;
}

void add_put_transcripts(std::vector<Transcript>& t) {
  t.push_back({"put", "put 1 2 3 5\r\nhello\r\n", {ok(put(1, 2, 3, "hello"))}});
  t.push_back({"put empty body", "put 0 0 0 0\r\n\r\n", {ok(put(0, 0, 0, ""))}});
  t.push_back({"put max values",
               "put 4294967295 4294967295 4294967295 1\r\nx\r\n",
               {ok(put(kU32Max, kU32Max, kU32Max, "x"))}});
  t.push_back({"put binary body with CRLF and NUL",
               "put 0 0 1 8\r\n\r\n\0\r\n\0\r\0\r\n"s,
               {ok(put(0, 0, 1, "\r\n\0\r\n\0\r\0"s))}});
  t.push_back({"put body that looks like commands",
               "put 0 0 0 13\r\nstats\r\nquit\r\n\r\nquit\r\n",
               {ok(put(0, 0, 0, "stats\r\nquit\r\n")), ok(bare(Verb::kQuit))}});
  static const std::string max_body = filled(65535, "put 0 0 0 1\r\n");
  t.push_back({"put body of max_job_bytes",
               "put 9 8 7 65535\r\n" + max_body + "\r\nstats\r\n",
               {ok(put(9, 8, 7, max_body)), ok(bare(Verb::kStats))}});
  t.push_back({"put body one over max_job_bytes",
               "put 0 0 0 65536\r\n" + filled(65536, "reserve\r\n") + "\r\nstats\r\n",
               {counted(err(Error::kJobTooBig, 65538), Verb::kPut), ok(bare(Verb::kStats))}});
  ParserLimits ten;
  ten.max_job_bytes = 10;
  // beanstalkd's cttest_too_big: the 13 dropped bytes happen to be a whole command line.
  t.push_back({"put too big drops bytes+2",
               "put 0 0 0 11\r\ndelete 9999\r\nput 0 0 0 1\r\nx\r\n",
               {counted(err(Error::kJobTooBig, 13), Verb::kPut), ok(put(0, 0, 0, "x"))},
               "",
               ten});
  t.push_back({"put too big drops bytes unchecked",
               "put 0 0 0 11\r\n0123456789aXYstats\r\n",
               {counted(err(Error::kJobTooBig, 13), Verb::kPut), ok(bare(Verb::kStats))},
               "",
               ten});
  t.push_back({"put too big wins over trailing garbage",
               "put 0 0 0 11 garbage\r\n0123456789a\r\nstats\r\n",
               {counted(err(Error::kJobTooBig, 13), Verb::kPut), ok(bare(Verb::kStats))},
               "",
               ten});
  t.push_back({"put too big body not there yet",
               "put 0 0 0 4294967295\r\nabc",
               {counted(err(Error::kJobTooBig, 4294967297ULL), Verb::kPut)}});
  t.push_back({"put body at max_job_bytes 10",
               "put 0 0 0 10\r\n0123456789\r\n",
               {ok(put(0, 0, 0, "0123456789"))},
               "",
               ten});
  t.push_back({"put missing CRLF after body",
               "put 0 0 0 3\r\nabcXYstats\r\n",
               {kExpectedCrlf, ok(bare(Verb::kStats))}});
  t.push_back({"put body longer than announced",
               "put 0 0 0 3\r\nabcd\r\nstats\r\n",
               {kExpectedCrlf, kUnknown}});  // "d\r" is no CRLF; "\nstats" is no verb
  t.push_back(
      {"put only CR after body", "put 0 0 0 1\r\na\r\r\nstats\r\n", {kExpectedCrlf, kUnknown}});
  t.push_back({"put body incomplete", "put 0 0 0 5\r\nab", {}, "put 0 0 0 5\r\nab"});
  t.push_back({"put body without its CRLF yet", "put 0 0 0 2\r\nab\r", {}, "put 0 0 0 2\r\nab\r"});
  t.push_back({"put double spaces", "put  1  2   3  1\r\nx\r\n", {ok(put(1, 2, 3, "x"))}});
  t.push_back({"put leading zeros", "put 007 0008 09 0001\r\nx\r\n", {ok(put(7, 8, 9, "x"))}});
  t.push_back({"put many leading zeros",
               "put 00000000000000000000000000004294967295 0 0 0\r\n\r\n",
               {ok(put(kU32Max, 0, 0, ""))}});
  t.push_back({"put trailing space", "put 1 2 3 1 \r\nx\r\n", {kPutGarbage, kUnknown}});
  t.push_back({"put extra argument", "put 1 2 3 1 5\r\nx\r\n", {kPutGarbage, kUnknown}});
  t.push_back({"put missing argument", "put 1 2 3\r\n", {kBad}});
  t.push_back({"put no arguments", "put \r\n", {kBad}});
  t.push_back({"put no space", "put\r\n", {kUnknown}});
  t.push_back({"put tab separator", "put 1\t2 3 1\r\nx\r\n", {kBad, kUnknown}});
  t.push_back({"put negative priority", "put -1 0 100 1\r\na\r\n", {kBad, kUnknown}});
  t.push_back({"put negative delay", "put 512 -1 100 0\r\n", {kBad}});
  t.push_back({"put plus sign", "put +1 0 100 1\r\na\r\n", {kBad, kUnknown}});
  t.push_back({"put garbage priority", "put -1kkdj9djjkd9 0 100 1\r\na\r\n", {kBad, kUnknown}});
  t.push_back({"put digits then garbage", "put 1x 2 3 1\r\n", {kBad}});
  t.push_back({"put priority 2^32", "put 4294967296 0 100 1\r\na\r\n", {kBad, kUnknown}});
  t.push_back({"put delay 2^32", "put 0 4294967296 100 1\r\n", {kBad}});
  t.push_back({"put ttr 2^32", "put 0 0 4294967296 1\r\n", {kBad}});
  t.push_back({"put bytes 2^32", "put 0 0 0 4294967296\r\n", {kBad}});
  t.push_back({"put bytes 10b", "put 0 0 0 10b\r\n", {kPutGarbage}});
  t.push_back({"put huge number", "put 99999999999999999999999 0 0 0\r\n", {kBad}});
  t.push_back({"put upper case", "PUT 0 0 0 0\r\n\r\n", {kUnknown, kUnknown}});
  t.push_back({"put bad line then body as a command",
               "put 0 0 0 x\r\nstats\r\n",
               {kBad, ok(bare(Verb::kStats))}});
}

void add_job_transcripts(std::vector<Transcript>& t) {
  t.push_back({"reserve", "reserve\r\n", {ok(bare(Verb::kReserve))}});
  t.push_back({"reserve trailing space", "reserve \r\n", {kBad}});
  t.push_back({"reserve with argument", "reserve 5\r\n", {kBad}});
  t.push_back({"reserve suffix", "reservex\r\n", {kBad}});
  t.push_back({"reserve capitalised", "Reserve\r\n", {kUnknown}});
  t.push_back(
      {"reserve-with-timeout 0", "reserve-with-timeout 0\r\n", {ok(reserve_with_timeout(0))}});
  t.push_back({"reserve-with-timeout int max",
               "reserve-with-timeout 2147483647\r\n",
               {ok(reserve_with_timeout(2147483647))}});
  t.push_back({"reserve-with-timeout double space",
               "reserve-with-timeout  5\r\n",
               {ok(reserve_with_timeout(5))}});
  t.push_back({"reserve-with-timeout over int max", "reserve-with-timeout 2147483648\r\n", {kBad}});
  t.push_back({"reserve-with-timeout negative", "reserve-with-timeout -1\r\n", {kBad}});
  t.push_back({"reserve-with-timeout 0.5 (a client's float)",
               "reserve-with-timeout 0.5\r\n",
               {ok(reserve_with_timeout(0))}});
  t.push_back({"reserve-with-timeout 2.75",
               "reserve-with-timeout 2.75\r\n",
               {ok(reserve_with_timeout(2))}});
  t.push_back({"reserve-with-timeout dot alone", "reserve-with-timeout 1.\r\n", {kBad}});
  t.push_back({"reserve-with-timeout two dots", "reserve-with-timeout 1.5.5\r\n", {kBad}});
  t.push_back({"reserve-with-timeout empty", "reserve-with-timeout \r\n", {kBad}});
  t.push_back({"reserve-with-timeout no space", "reserve-with-timeout\r\n", {kBad}});
  t.push_back({"reserve-with-timeout garbage", "reserve-with-timeout 5x\r\n", {kBad}});
  t.push_back({"reserve-with-timeout trailing space", "reserve-with-timeout 5 \r\n", {kBad}});
  t.push_back({"reserve-job",
               "reserve-job 18446744073709551615\r\n",
               {ok(with_id(Verb::kReserveJob, kU64Max))}});
  t.push_back({"reserve-job 2^64", "reserve-job 18446744073709551616\r\n", {kBad}});
  t.push_back({"reserve-job no space", "reserve-job\r\n", {kBad}});
  t.push_back({"delete", "delete 1\r\n", {ok(with_id(Verb::kDelete, 1))}});
  t.push_back({"delete 0", "delete 0\r\n", {ok(with_id(Verb::kDelete, 0))}});
  t.push_back({"delete double space", "delete  7\r\n", {ok(with_id(Verb::kDelete, 7))}});
  t.push_back({"delete trailing space", "delete 7 \r\n", {kBad}});
  t.push_back({"delete letters first", "delete foo111\r\n", {kBad}});
  t.push_back({"delete letters after", "delete 111foo\r\n", {kBad}});
  t.push_back({"delete 2^64", "delete 18446744073709551616\r\n", {kBad}});
  t.push_back({"delete way over 2^64",
               "delete 184467440737095516160000000000000000000000000000\r\n",
               {kBad}});
  t.push_back({"delete negative", "delete -1\r\n", {kBad}});
  t.push_back({"delete plus", "delete +1\r\n", {kBad}});
  t.push_back({"delete no space", "delete\r\n", {kUnknown}});
  t.push_back({"delete two ids", "delete 1 2\r\n", {kBad}});
  t.push_back({"release", "release 5 10 20\r\n", {ok(release(5, 10, 20))}});
  t.push_back({"release max values",
               "release 18446744073709551615 4294967295 4294967295\r\n",
               {ok(release(kU64Max, kU32Max, kU32Max))}});
  t.push_back({"release missing delay", "release 1 2\r\n", {kBad}});
  t.push_back({"release extra argument", "release 1 2 3 4\r\n", {kBad}});
  t.push_back({"release bad priority", "release 18446744073709551615 abc 1\r\n", {kBad}});
  t.push_back({"release bad delay", "release 18446744073709551615 1 abc\r\n", {kBad}});
  t.push_back({"release priority 2^32", "release 1 4294967296 0\r\n", {kBad}});
  t.push_back({"release delay 2^32", "release 1 1 4294967296\r\n", {kBad}});
  t.push_back({"release id 2^64", "release 18446744073709551616 1 1\r\n", {kBad}});
  t.push_back({"bury", "bury 5 10\r\n", {ok(bury(5, 10))}});
  t.push_back({"bury missing priority", "bury 111\r\n", {kBad}});
  t.push_back({"bury bad id", "bury 111abc 2\r\n", {kBad}});
  t.push_back({"bury bad priority", "bury 111 222abc\r\n", {kBad}});
  t.push_back({"touch", "touch 5\r\n", {ok(with_id(Verb::kTouch, 5))}});
  t.push_back({"touch letters first", "touch a111\r\n", {kBad}});
  t.push_back({"touch letters after", "touch 111a\r\n", {kBad}});
  t.push_back({"touch punctuation", "touch !@#!@#\r\n", {kBad}});
  t.push_back({"peek", "peek 5\r\n", {ok(with_id(Verb::kPeek, 5))}});
  t.push_back({"peek no space", "peek\r\n", {kUnknown}});
  t.push_back({"peek-ready", "peek-ready\r\n", {ok(bare(Verb::kPeekReady))}});
  t.push_back({"peek-ready trailing space", "peek-ready \r\n", {kBad}});
  t.push_back({"peek-ready suffix", "peek-readyx\r\n", {kBad}});
  t.push_back({"peek-delayed", "peek-delayed\r\n", {ok(bare(Verb::kPeekDelayed))}});
  t.push_back({"peek-delayed argument", "peek-delayed 1\r\n", {kBad}});
  t.push_back({"peek-buried", "peek-buried\r\n", {ok(bare(Verb::kPeekBuried))}});
  t.push_back({"kick", "kick 10\r\n", {ok(kick(10))}});
  t.push_back({"kick 0", "kick 0\r\n", {ok(kick(0))}});
  t.push_back({"kick max", "kick 4294967295\r\n", {ok(kick(kU32Max))}});
  t.push_back({"kick double space", "kick  5\r\n", {ok(kick(5))}});
  t.push_back({"kick 2^32", "kick 4294967296\r\n", {kBad}});
  t.push_back({"kick negative", "kick -1\r\n", {kBad}});
  t.push_back({"kick garbage", "kick 5x\r\n", {kBad}});
  t.push_back({"kick two numbers", "kick 5 6\r\n", {kBad}});
  t.push_back({"kick no space", "kick\r\n", {kUnknown}});
  t.push_back({"kick-job", "kick-job 5\r\n", {ok(with_id(Verb::kKickJob, 5))}});
  t.push_back({"kick-job bad", "kick-job a111\r\n", {kBad}});
  t.push_back({"kick-job no space", "kick-job\r\n", {kUnknown}});
  t.push_back({"stats-job", "stats-job 5\r\n", {ok(with_id(Verb::kStatsJob, 5))}});
  t.push_back({"stats-job no space", "stats-job\r\n", {kBad}});
}

void add_tube_transcripts(std::vector<Transcript>& t) {
  static const std::string name200 = "n" + std::string(199, 'x');
  static const std::string name201 = name200 + "Z";
  t.push_back({"use", "use foo\r\n", {ok(with_tube(Verb::kUse, "foo"))}});
  t.push_back({"use every name byte",
               "use AZaz09-+/;.$_()\r\n",
               {ok(with_tube(Verb::kUse, "AZaz09-+/;.$_()"))}});
  t.push_back({"use underscore", "use x_y\r\n", {ok(with_tube(Verb::kUse, "x_y"))}});
  t.push_back({"use one byte", "use ;\r\n", {ok(with_tube(Verb::kUse, ";"))}});
  t.push_back({"use 200 bytes", "use " + name200 + "\r\n", {ok(with_tube(Verb::kUse, name200))}});
  t.push_back({"use 201 bytes", "use " + name201 + "\r\n", {kBad}});
  t.push_back({"use leading hyphen", "use -foo\r\n", {kBad}});
  t.push_back({"use inner hyphen", "use f-oo\r\n", {ok(with_tube(Verb::kUse, "f-oo"))}});
  t.push_back({"use double space", "use  foo\r\n", {kBad}});
  t.push_back({"use trailing space", "use foo \r\n", {kBad}});
  t.push_back({"use two names", "use foo bar\r\n", {kBad}});
  t.push_back({"use empty name", "use \r\n", {kBad}});
  t.push_back({"use no space", "use\r\n", {kUnknown}});
  t.push_back({"use bad byte", "use fo*o\r\n", {kBad}});
  t.push_back({"use high byte", "use fo\xc3\xa9\r\n", {kBad}});
  t.push_back({"watch", "watch foo\r\n", {ok(with_tube(Verb::kWatch, "foo"))}});
  t.push_back({"watch bad name", "watch -x\r\n", {kBad}});
  t.push_back({"ignore", "ignore default\r\n", {ok(with_tube(Verb::kIgnore, "default"))}});
  t.push_back({"ignore no space", "ignore\r\n", {kUnknown}});
  t.push_back({"stats-tube", "stats-tube foo\r\n", {ok(with_tube(Verb::kStatsTube, "foo"))}});
  t.push_back({"stats-tube no space", "stats-tube\r\n", {kBad}});
  t.push_back({"stats-tube bad name", "stats-tube -x\r\n", {kBad}});
  t.push_back({"pause-tube", "pause-tube foo 10\r\n", {ok(pause_tube("foo", 10))}});
  t.push_back({"pause-tube zero", "pause-tube foo 0\r\n", {ok(pause_tube("foo", 0))}});
  t.push_back({"pause-tube spaces", "pause-tube  foo   10\r\n", {ok(pause_tube("foo", 10))}});
  t.push_back({"pause-tube trailing space", "pause-tube foo 10 \r\n", {kBad}});
  t.push_back({"pause-tube no delay", "pause-tube foo\r\n", {kBad}});
  t.push_back({"pause-tube no arguments", "pause-tube \r\n", {kBad}});
  t.push_back({"pause-tube no space", "pause-tube\r\n", {kBad}});
  t.push_back({"pause-tube glued to name", "pause-tubefoo 5\r\n", {kBad}});
  t.push_back({"pause-tube leading hyphen", "pause-tube -foo 1\r\n", {kBadPauseName}});
  t.push_back({"pause-tube delay 2^32", "pause-tube foo 4294967296\r\n", {kBad}});
  t.push_back({"pause-tube tab", "pause-tube foo\t5\r\n", {kBad}});
  t.push_back({"pause-tube bad name byte", "pause-tube fo*o 5\r\n", {kBad}});
  // beanstalkd's cttest_longest_command: exactly 224 bytes.
  t.push_back({"pause-tube longest line",
               "pause-tube " + name200 + " 4294967295\r\n",
               {ok(pause_tube(name200, kU32Max))}});
  t.push_back({"pause-tube 201-byte name", "pause-tube " + name201 + " 1\r\n", {kBadPauseName}});
  t.push_back(
      {"pause-tube one byte too long", "pause-tube " + name200 + "  4294967295\r\n", {kBad}});
  ParserLimits short_names;
  short_names.max_tube_name_bytes = 3;
  t.push_back({"tube name limit",
               "use abc\r\nuse abcd\r\npause-tube abc 1\r\npause-tube abcd 1\r\n",
               {ok(with_tube(Verb::kUse, "abc")), kBad, ok(pause_tube("abc", 1)), kBadPauseName},
               "",
               short_names});
}

void add_other_transcripts(std::vector<Transcript>& t) {
  t.push_back({"stats", "stats\r\n", {ok(bare(Verb::kStats))}});
  t.push_back({"stats trailing space", "stats \r\n", {kBad}});
  t.push_back({"stats suffix", "statsx\r\n", {kBad}});
  t.push_back({"stats tab", "stats\t\r\n", {kBad}});
  t.push_back({"list-tubes", "list-tubes\r\n", {ok(bare(Verb::kListTubes))}});
  t.push_back({"list-tubes argument", "list-tubes x\r\n", {kBad}});
  t.push_back({"list-tubes suffix", "list-tubesx\r\n", {kBad}});
  t.push_back({"list-tube-used", "list-tube-used\r\n", {ok(bare(Verb::kListTubeUsed))}});
  t.push_back({"list-tube-used suffix", "list-tube-usedx\r\n", {kBad}});
  t.push_back(
      {"list-tubes-watched", "list-tubes-watched\r\n", {ok(bare(Verb::kListTubesWatched))}});
  t.push_back({"list-tube is no prefix", "list-tube\r\n", {kUnknown}});
  t.push_back({"quit", "quit\r\n", {ok(bare(Verb::kQuit))}});
  t.push_back(
      {"quit ignores what follows", "quit\r\nstats\r\n", {ok(bare(Verb::kQuit))}, "stats\r\n"});
  t.push_back({"quit with argument", "quit now\r\n", {kBad}});
  t.push_back({"quit suffix", "quitx\r\n", {kBad}});
  t.push_back({"unknown command", "nont10knowncommand\r\n", {kUnknown}});
  t.push_back({"empty line", "\r\n", {kUnknown}});
  t.push_back({"leading space", " stats\r\n", {kUnknown}});
  t.push_back({"NUL in a known command", "stats\0\r\n"s, {kBad}});
  t.push_back({"NUL alone", "\0\r\n"s, {kBad}});
  t.push_back({"NUL beats unknown verb", "nonexistent\0x\r\n"s, {kBad}});
  t.push_back({"stray CR", "a\rb\r\n", {kUnknown}});
  t.push_back({"stray CR after verb", "stats\r\rstats\r\n", {kBad}});
  t.push_back({"lone LF is no line end", "stats\nstats\r\n", {kBad}});
  t.push_back({"incomplete line", "stats\r", {}, "stats\r"});
  t.push_back({"two commands in one packet",
               "use a\r\nuse b\r\n",
               {ok(with_tube(Verb::kUse, "a")), ok(with_tube(Verb::kUse, "b"))}});
  t.push_back({"every verb pipelined",
               "use u\r\nput 1 2 3 4\r\nbody\r\nreserve\r\nreserve-with-timeout 9\r\n"
               "reserve-job 10\r\ndelete 11\r\nrelease 12 13 14\r\nbury 15 16\r\ntouch 17\r\n"
               "watch w\r\nignore i\r\npeek 18\r\npeek-ready\r\npeek-delayed\r\npeek-buried\r\n"
               "kick 19\r\nkick-job 20\r\nstats-job 21\r\nstats-tube s\r\nstats\r\n"
               "list-tubes\r\nlist-tube-used\r\nlist-tubes-watched\r\npause-tube p 22\r\n"
               "quit\r\n",
               {ok(with_tube(Verb::kUse, "u")),
                ok(put(1, 2, 3, "body")),
                ok(bare(Verb::kReserve)),
                ok(reserve_with_timeout(9)),
                ok(with_id(Verb::kReserveJob, 10)),
                ok(with_id(Verb::kDelete, 11)),
                ok(release(12, 13, 14)),
                ok(bury(15, 16)),
                ok(with_id(Verb::kTouch, 17)),
                ok(with_tube(Verb::kWatch, "w")),
                ok(with_tube(Verb::kIgnore, "i")),
                ok(with_id(Verb::kPeek, 18)),
                ok(bare(Verb::kPeekReady)),
                ok(bare(Verb::kPeekDelayed)),
                ok(bare(Verb::kPeekBuried)),
                ok(kick(19)),
                ok(with_id(Verb::kKickJob, 20)),
                ok(with_id(Verb::kStatsJob, 21)),
                ok(with_tube(Verb::kStatsTube, "s")),
                ok(bare(Verb::kStats)),
                ok(bare(Verb::kListTubes)),
                ok(bare(Verb::kListTubeUsed)),
                ok(bare(Verb::kListTubesWatched)),
                ok(pause_tube("p", 22)),
                ok(bare(Verb::kQuit))}});
  t.push_back({"errors between commands",
               "bogus\r\nput 0 0 0 2\r\nhiXXdelete 3\r\nput 0 0 0 1\r\n\0\r\nstats \r\nstats\r\n"s,
               {kUnknown, kExpectedCrlf, ok(with_id(Verb::kDelete, 3)), ok(put(0, 0, 0, "\0"s)),
                kBad, ok(bare(Verb::kStats))}});
}

void add_line_length_transcripts(std::vector<Transcript>& t) {
  // "put " + k zeros + " 0 0 0\r\n" is 12 + k bytes long.
  const std::string line224 = "put " + std::string(212, '0') + " 0 0 0\r\n";
  const std::string line225 = "put " + std::string(213, '0') + " 0 0 0\r\n";
  t.push_back({"line of 224 bytes", line224 + "\r\n", {ok(put(0, 0, 0, ""))}});
  t.push_back({"line of 225 bytes", line225 + "\r\n", {kBad, kUnknown}});
  // beanstalkd's cttest_too_long_commandline: one BAD_FORMAT, then the connection goes on.
  t.push_back({"long line then put",
               std::string(500, 'a') + "\r\nput 0 0 1 1\r\nA\r\n",
               {kBad, ok(put(0, 0, 1, "A"))}});
  t.push_back({"long line with CR at the limit",
               std::string(223, 'a') + "\r\r\r\nstats\r\n",
               {kBad, ok(bare(Verb::kStats))}});
  t.push_back({"long line without end", std::string(300, 'a'), {kBad}});
  t.push_back(
      {"long line of CRs", std::string(400, '\r') + "\nstats\r\n", {kBad, ok(bare(Verb::kStats))}});
  t.push_back(
      {"long line of LFs", std::string(400, '\n') + "\r\nquit\r\n", {kBad, ok(bare(Verb::kQuit))}});
  t.push_back({"two long lines",
               std::string(230, 'x') + "\r\n" + std::string(999, 'y') + "\r\n",
               {kBad, kBad}});
  ParserLimits tiny;
  tiny.max_line_bytes = 7;  // "stats\r\n"
  t.push_back({"small line limit",
               "stats\r\nreserve\r\nstats\r\n",
               {ok(bare(Verb::kStats)), kBad, ok(bare(Verb::kStats))},
               "",
               tiny});
  ParserLimits smallest;
  smallest.max_line_bytes = 2;
  t.push_back({"line limit 2", "\r\na\r\n\r\n", {kUnknown, kBad, kUnknown}, "", smallest});
}

Command putx(std::uint32_t pri, Due due, std::uint32_t ttr, std::string_view body,
             std::string_view key = {}, std::string_view group = {}, bool replace = false) {
  Command c = bare(Verb::kPutX);
  c.priority = pri;
  c.due = due;
  c.ttr_seconds = ttr;
  c.body = body;
  c.key = key;
  c.group = group;
  c.replace = replace;
  return c;
}
Command tube_key(Verb verb, std::string_view tube, std::string_view key, Due due = {}) {
  Command c = with_tube(verb, tube);
  c.key = key;
  c.due = due;
  return c;
}
Command tube_group(Verb verb, std::string_view tube, std::string_view group) {
  Command c = with_tube(verb, tube);
  c.group = group;
  return c;
}

// delayq's extensions: millisecond and absolute times, keys, groups.
void add_extension_transcripts(std::vector<Transcript>& t) {
  const Due in_1500ms = Due::after(std::chrono::milliseconds{1500});
  const Due at = Due::at(1795000000123);
  t.push_back({"putx with a delay in ms",
               "putx 5 1500 30 3\r\nabc\r\n",
               {ok(putx(5, in_1500ms, 30, "abc"))}});
  t.push_back({"putx at an absolute time",
               "putx 0 @1795000000123 30 0\r\n\r\n",
               {ok(putx(0, at, 30, ""))}});
  t.push_back({"putx with key, group and replace",
               "putx 1 0 60 2 key=order:42 group=user:7 replace\r\nhi\r\n",
               {ok(putx(1, {}, 60, "hi", "order:42", "user:7", true))}});
  t.push_back({"putx options in any order",
               "putx 1 0 60 2 group=g key=k\r\nhi\r\n",
               {ok(putx(1, {}, 60, "hi", "k", "g"))}});
  t.push_back({"putx replace needs a key", "putx 1 0 60 2 replace\r\nhi\r\n", {kBad, kUnknown}});
  t.push_back({"putx unknown option", "putx 1 0 60 0 colour=red\r\n\r\n", {kBad, kUnknown}});
  t.push_back({"putx key twice", "putx 1 0 60 0 key=a key=b\r\n\r\n", {kBad, kUnknown}});
  t.push_back({"putx empty key", "putx 1 0 60 0 key=\r\n\r\n", {kBad, kUnknown}});
  t.push_back({"putx too big", "putx 1 0 60 70000\r\n", {err(Error::kJobTooBig, 70002)}});
  t.push_back(
      {"putx delay beyond 2^63-1", "putx 1 9223372036854775808 60 0\r\n\r\n", {kBad, kUnknown}});
  t.push_back({"putx delay of 100 years",
               "putx 1 3153600000000 60 0\r\n\r\n",
               {ok(putx(1, {false, 3153600000000}, 60, ""))}});
  t.push_back(
      {"putx delay beyond 100 years", "putx 1 3153600000001 60 0\r\n\r\n", {kBad, kUnknown}});
  t.push_back({"putx time at the end of 9999",
               "putx 1 @253402300799999 60 0\r\n\r\n",
               {ok(putx(1, {true, 253402300799999}, 60, ""))}});
  t.push_back({"putx time beyond 9999", "putx 1 @253402300800000 60 0\r\n\r\n", {kBad, kUnknown}});
  t.push_back({"putx '@' alone", "putx 1 @ 60 0\r\n\r\n", {kBad, kUnknown}});
  t.push_back({"reschedule by id", "reschedule 7 250\r\n", {ok([] {
                 Command c = with_id(Verb::kReschedule, 7);
                 c.due = Due::after(std::chrono::milliseconds{250});
                 return c;
               }())}});
  t.push_back({"reschedule by key",
               "reschedule-key orders order:42 @1795000000123\r\n",
               {ok(tube_key(Verb::kRescheduleKey, "orders", "order:42", at))}});
  t.push_back({"reschedule-key without a time", "reschedule-key orders k\r\n", {kBad}});
  t.push_back({"delete-key",
               "delete-key orders order:42\r\n",
               {ok(tube_key(Verb::kDeleteKey, "orders", "order:42"))}});
  t.push_back(
      {"peek-key", "peek-key default k\r\n", {ok(tube_key(Verb::kPeekKey, "default", "k"))}});
  t.push_back({"peek-key with a bad tube", "peek-key -bad k\r\n", {kBad}});
  t.push_back({"peek-key needs a space after the tube", "peek-key foo:bar\r\n", {kBad}});
  t.push_back({"list-group",
               "list-group default user:7\r\n",
               {ok(tube_group(Verb::kListGroup, "default", "user:7"))}});
  t.push_back({"cancel-group",
               "cancel-group default user:7\r\n",
               {ok(tube_group(Verb::kCancelGroup, "default", "user:7"))}});
  t.push_back({"cancel-group extra argument", "cancel-group default user:7 x\r\n", {kBad}});
  const std::string tube(200, 't');
  const std::string key(200, 'k');
  t.push_back({"an extension line past 224 bytes",
               "reschedule-key " + tube + " " + key + " 5\r\n",
               {ok(tube_key(Verb::kRescheduleKey, tube, key, {false, 5}))}});
  t.push_back({"a key of 201 bytes", "peek-key t " + std::string(201, 'k') + "\r\n", {kBad}});
}

const std::vector<Transcript>& transcripts() {
  static const std::vector<Transcript> all = [] {
    std::vector<Transcript> t;
    add_put_transcripts(t);
    add_job_transcripts(t);
    add_tube_transcripts(t);
    add_other_transcripts(t);
    add_line_length_transcripts(t);
    add_extension_transcripts(t);
    return t;
  }();
  return all;
}

std::uint64_t test_seed() {
  if (const char* text = std::getenv("DELAYQ_TEST_SEED")) return std::strtoull(text, nullptr, 10);
  return 20250318;
}

// ---------------------------------------------------------------------------------------------

TEST(BeanstalkParserTest, TranscriptNamesAreUnique) {
  std::set<std::string> names;
  for (const Transcript& t : transcripts()) EXPECT_TRUE(names.insert(t.name).second) << t.name;
  EXPECT_GE(transcripts().size(), 180U);
}

TEST(BeanstalkParserTest, TranscriptsGiveTheirEvents) {
  for (const Transcript& t : transcripts()) {
    SCOPED_TRACE(t.name);
    const Replay r = replay(t.input, t.limits, {});
    EXPECT_EQ(r.events(), t.expected);
    EXPECT_EQ(std::string_view(t.input).substr(r.state().position), t.unparsed);
  }
}

TEST(BeanstalkParserTest, TranscriptsSplitInTwoAtEveryByte) {
  for (const Transcript& t : transcripts()) {
    SCOPED_TRACE(t.name);
    const Replay whole = replay(t.input, t.limits, {});
    for (std::size_t cut = 0; cut <= t.input.size(); ++cut) {
      const Replay split = replay(t.input, t.limits, {cut});
      ASSERT_EQ(split.events(), whole.events()) << "cut at " << cut;
      ASSERT_EQ(split.state(), whole.state()) << "cut at " << cut;
    }
  }
}

TEST(BeanstalkParserTest, TranscriptsFedOneByteAtATime) {
  for (const Transcript& t : transcripts()) {
    SCOPED_TRACE(t.name);
    const Replay whole = replay(t.input, t.limits, {});
    Replay bytewise(t.input, t.limits);
    for (std::size_t end = 0; end <= t.input.size(); ++end) bytewise.deliver_until(end);
    EXPECT_EQ(bytewise.events(), whole.events());
    EXPECT_EQ(bytewise.state(), whole.state());
  }
}

TEST(BeanstalkParserTest, TranscriptsSplitInThreeAtRandom) {
  const std::uint64_t seed = test_seed();
  SCOPED_TRACE("seed " + std::to_string(seed) + " (set DELAYQ_TEST_SEED to replay)");
  std::mt19937_64 rng(seed);
  for (const Transcript& t : transcripts()) {
    SCOPED_TRACE(t.name);
    const Replay whole = replay(t.input, t.limits, {});
    std::uniform_int_distribution<std::size_t> position(0, t.input.size());
    for (int round = 0; round < 200; ++round) {
      std::size_t a = position(rng);
      std::size_t b = position(rng);
      if (a > b) std::swap(a, b);
      const Replay split = replay(t.input, t.limits, {a, b});
      ASSERT_EQ(split.events(), whole.events()) << "cuts at " << a << ", " << b;
      ASSERT_EQ(split.state(), whole.state()) << "cuts at " << a << ", " << b;
    }
  }
}

TEST(BeanstalkParserTest, EveryProperPrefixOfACommandNeedsMore) {
  for (const Transcript& t : transcripts()) {
    SCOPED_TRACE(t.name);
    check_prefixes(t.input, t.limits);
  }
}

// ---------------------------------------------------------------------------------------------
// Exact Parsed fields, where the transcripts abstract them away.

TEST(BeanstalkParserTest, CommandReportsItsBytesAndViewsIntoTheInput) {
  const std::string input = "put 1 2 3 5\r\nhello\r\nuse tube\r\n";
  const Parsed first = parse(input, ParserLimits{});
  ASSERT_EQ(first.kind, Kind::kCommand);
  EXPECT_EQ(first.consumed, 20U);
  EXPECT_EQ(first.discard, 0U);
  EXPECT_FALSE(first.discard_line);
  EXPECT_FALSE(first.close);
  EXPECT_EQ(first.command.body.data(), input.data() + 13);
  EXPECT_EQ(first.command.body, "hello");
  const Parsed second = parse(std::string_view(input).substr(first.consumed), ParserLimits{});
  ASSERT_EQ(second.kind, Kind::kCommand);
  EXPECT_EQ(second.consumed, 10U);
  EXPECT_EQ(second.command.verb, Verb::kUse);
  EXPECT_EQ(second.command.tube.data(), input.data() + 24);
  EXPECT_EQ(second.command.tube, "tube");
}

TEST(BeanstalkParserTest, NeedMoreConsumesNothing) {
  for (const std::string_view input :
       {""sv, "st"sv, "stats\r"sv, "put 0 0 0 3\r\nab"sv, "put 0 0 0 3\r\nabc\r"sv}) {
    const Parsed parsed = parse(input, ParserLimits{});
    EXPECT_EQ(parsed.kind, Kind::kNeedMore) << escaped(input);
    EXPECT_EQ(parsed.consumed, 0U) << escaped(input);
    EXPECT_EQ(parsed.discard, 0U) << escaped(input);
    EXPECT_FALSE(parsed.discard_line) << escaped(input);
  }
}

// A put line accepted, its body still to come: beanstalkd has counted it (and made its connection
// a producer) by then, so the wait says so. A line not yet whole has not counted, nor has putx,
// which beanstalkd does not know.
TEST(BeanstalkParserTest, PutWaitingForItsBodyHasCounted) {
  for (const std::string_view input :
       {"put 0 0 0 3\r\n"sv, "put 0 0 0 3\r\nab"sv, "put 0 0 0 3\r\nabc\r"sv}) {
    const Parsed parsed = parse(input, ParserLimits{});
    EXPECT_EQ(parsed.kind, Kind::kNeedMore) << escaped(input);
    EXPECT_TRUE(parsed.counted) << escaped(input);
    EXPECT_EQ(parsed.command.verb, Verb::kPut);
  }
  for (const std::string_view input :
       {"put 0 0 0 3"sv, "put 0 0 0 3\r"sv, "stats\r"sv, "putx 0 1500 0 3 key=k\r\nab"sv}) {
    const Parsed parsed = parse(input, ParserLimits{});
    EXPECT_EQ(parsed.kind, Kind::kNeedMore) << escaped(input);
    EXPECT_FALSE(parsed.counted) << escaped(input);
  }
}

TEST(BeanstalkParserTest, JobTooBigConsumesTheLineAndDiscardsBodyAndCrlf) {
  const Parsed parsed = parse("put 0 0 0 65536\r\nabc", ParserLimits{});
  ASSERT_EQ(parsed.kind, Kind::kError);
  EXPECT_EQ(parsed.error, Error::kJobTooBig);
  EXPECT_EQ(parsed.consumed, 17U);
  EXPECT_EQ(parsed.discard, 65538U);
  EXPECT_FALSE(parsed.discard_line);
  EXPECT_FALSE(parsed.close);
  const Parsed largest = parse("put 0 0 0 4294967295\r\n", ParserLimits{});
  EXPECT_EQ(largest.error, Error::kJobTooBig);
  EXPECT_EQ(largest.discard, 4294967297ULL);
}

TEST(BeanstalkParserTest, ExpectedCrlfConsumesBodyAndTwoBytes) {
  const Parsed parsed = parse("put 0 0 0 3\r\nabcdefgh", ParserLimits{});
  ASSERT_EQ(parsed.kind, Kind::kError);
  EXPECT_EQ(parsed.error, Error::kExpectedCrlf);
  EXPECT_EQ(parsed.consumed, 18U);
  EXPECT_EQ(parsed.discard, 0U);
}

TEST(BeanstalkParserTest, OverlongLineWithoutCrlfIsDroppedThroughSkipLine) {
  ParserLimits limits;
  limits.max_line_bytes = 8;
  EXPECT_EQ(parse("abcdefg", limits).kind, Kind::kNeedMore);
  // The \r\n would make the line 9 bytes: too long even though it may be about to arrive.
  const Parsed eight = parse("abcdefg\r", limits);
  ASSERT_EQ(eight.kind, Kind::kError);
  EXPECT_EQ(eight.error, Error::kBadFormat);
  EXPECT_TRUE(eight.discard_line);
  EXPECT_EQ(eight.consumed, 7U);  // the '\r' stays: it may start the \r\n
  const Parsed more = parse("abcdefghij", limits);
  EXPECT_TRUE(more.discard_line);
  EXPECT_EQ(more.consumed, 10U);
  // With the \r\n in the input the whole line goes at once.
  const Parsed whole = parse("abcdefghij\r\nstats\r\n", limits);
  ASSERT_EQ(whole.kind, Kind::kError);
  EXPECT_EQ(whole.error, Error::kBadFormat);
  EXPECT_FALSE(whole.discard_line);
  EXPECT_EQ(whole.consumed, 12U);
  EXPECT_FALSE(whole.close);
}

TEST(BeanstalkParserTest, SkipLineStopsAfterTheCrlfAndKeepsASplitOne) {
  EXPECT_EQ(skip_line("").consumed, 0U);
  EXPECT_FALSE(skip_line("").line_ended);
  EXPECT_EQ(skip_line("abc").consumed, 3U);
  EXPECT_FALSE(skip_line("abc").line_ended);
  EXPECT_EQ(skip_line("abc\r").consumed, 3U);
  EXPECT_FALSE(skip_line("abc\r").line_ended);
  EXPECT_EQ(skip_line("\r").consumed, 0U);
  EXPECT_EQ(skip_line("\n").consumed, 1U);
  EXPECT_EQ(skip_line("ab\r\nstats\r\n").consumed, 4U);
  EXPECT_TRUE(skip_line("ab\r\nstats\r\n").line_ended);
  EXPECT_EQ(skip_line("\r\r\n").consumed, 3U);
  EXPECT_TRUE(skip_line("\r\r\n").line_ended);
}

TEST(BeanstalkParserTest, QuitClosesAndNothingElseDoes) {
  const Parsed quit = parse("quit\r\nstats\r\n", ParserLimits{});
  ASSERT_EQ(quit.kind, Kind::kCommand);
  EXPECT_EQ(quit.command.verb, Verb::kQuit);
  EXPECT_TRUE(quit.close);
  EXPECT_EQ(quit.consumed, 6U);
  EXPECT_FALSE(parse("stats\r\n", ParserLimits{}).close);
  EXPECT_FALSE(parse("quitx\r\n", ParserLimits{}).close);
}

TEST(BeanstalkParserTest, NamesOfVerbsAndErrors) {
  std::set<std::string_view> names;
  for (int v = 0; v <= static_cast<int>(Verb::kQuit); ++v) {
    const std::string_view name = verb_name(static_cast<Verb>(v));
    EXPECT_NE(name, "?");
    EXPECT_TRUE(names.insert(name).second) << name;
  }
  EXPECT_EQ(names.size(), 25U);
  EXPECT_EQ(verb_name(Verb::kReserveWithTimeout), "reserve-with-timeout");
  EXPECT_EQ(verb_name(Verb::kListTubesWatched), "list-tubes-watched");
  EXPECT_EQ(error_name(Error::kBadFormat), "BAD_FORMAT");
  EXPECT_EQ(error_name(Error::kUnknownCommand), "UNKNOWN_COMMAND");
  EXPECT_EQ(error_name(Error::kExpectedCrlf), "EXPECTED_CRLF");
  EXPECT_EQ(error_name(Error::kJobTooBig), "JOB_TOO_BIG");
}

// Random soups of protocol fragments: whatever they parse to, it must not depend on how the bytes
// are cut into reads, and every command must need all of its bytes.
TEST(BeanstalkParserTest, RandomInputsAreIndependentOfHowTheyAreCut) {
  const std::uint64_t seed = test_seed();
  SCOPED_TRACE("seed " + std::to_string(seed) + " (set DELAYQ_TEST_SEED to replay)");
  std::mt19937_64 rng(seed);
  const std::vector<std::string> fragments = {"put ",
                                              "use ",
                                              "reserve",
                                              "reserve-with-timeout ",
                                              "delete ",
                                              "release ",
                                              "bury ",
                                              "kick ",
                                              "kick-job ",
                                              "peek",
                                              "-ready",
                                              "stats",
                                              "-tube ",
                                              "list-tubes",
                                              "pause-tube ",
                                              "quit",
                                              " ",
                                              "  ",
                                              "0",
                                              "1",
                                              "7",
                                              "12",
                                              "4294967295",
                                              "4294967296",
                                              "18446744073709551616",
                                              "-",
                                              "+",
                                              "abc",
                                              "x_y",
                                              "\r\n",
                                              "\r\n",
                                              "\r\n",
                                              "\r",
                                              "\n",
                                              "\0"s,
                                              "\t",
                                              "\xff"};
  ParserLimits limits;
  limits.max_line_bytes = 24;
  limits.max_job_bytes = 12;
  limits.max_tube_name_bytes = 4;
  std::uniform_int_distribution<std::size_t> pick(0, fragments.size() - 1);
  for (int round = 0; round < 3000; ++round) {
    std::string input;
    const std::size_t count = 1 + rng() % 40;
    for (std::size_t i = 0; i < count; ++i) input += fragments[pick(rng)];
    SCOPED_TRACE(escaped(input));
    const Replay whole = replay(input, limits, {});
    std::uniform_int_distribution<std::size_t> position(0, input.size());
    for (int cut = 0; cut < 8; ++cut) {
      std::size_t a = position(rng);
      std::size_t b = position(rng);
      if (a > b) std::swap(a, b);
      const Replay split = replay(input, limits, {a, b});
      ASSERT_EQ(split.events(), whole.events()) << "cuts at " << a << ", " << b;
      ASSERT_EQ(split.state(), whole.state()) << "cuts at " << a << ", " << b;
    }
    check_prefixes(input, limits);
  }
}

}  // namespace
}  // namespace delayq::front::beanstalk
