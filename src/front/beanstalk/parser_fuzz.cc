// libFuzzer target for the beanstalkd parser. Build with clang and -DDELAYQ_FUZZ=ON; run
// `beanstalk_parser_fuzz -max_total_time=60`. The first input byte picks the limits (default or
// tiny ones, so that the line, body and name limits are crossed often); the rest is parsed as a
// session would, command after command, and every result is checked (__builtin_trap on failure):
// bounds, progress, the line / body framing, views inside the input, determinism on exactly the
// consumed bytes, kNeedMore on a proper prefix, and the same results when the input is cut in two.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "front/beanstalk/parser.h"

namespace {

using delayq::front::beanstalk::Command;
using delayq::front::beanstalk::Error;
using delayq::front::beanstalk::parse;
using delayq::front::beanstalk::Parsed;
using delayq::front::beanstalk::ParserLimits;
using delayq::front::beanstalk::skip_line;
using delayq::front::beanstalk::Skipped;
using delayq::front::beanstalk::Verb;
using Kind = Parsed::Kind;

#define FUZZ_CHECK(condition)           \
  do {                                  \
    if (!(condition)) __builtin_trap(); \
  } while (false)

constexpr std::string_view kCrlf = "\r\n";

bool within(std::string_view part, std::string_view whole) {
  return part.empty() ||
         (part.data() >= whole.data() && part.data() + part.size() <= whole.data() + whole.size());
}

bool is_name(std::string_view name, const ParserLimits& limits) {
  constexpr std::string_view kPunctuation = "-+/;.$_()";
  const auto name_byte = [&](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           kPunctuation.find(c) != std::string_view::npos;
  };
  return !name.empty() && name.size() <= limits.max_tube_name_bytes && name.front() != '-' &&
         std::all_of(name.begin(), name.end(), name_byte);
}

// The line limit parse() applies: beanstalkd's, or the extension verbs' when the line starts
// with one of them and a space within beanstalkd's limit.
std::size_t line_limit(std::string_view rest, const ParserLimits& limits) {
  constexpr std::string_view kExtensions[] = {"putx",         "reschedule",   "reschedule-key",
                                              "delete-key",   "peek-key",     "list-group",
                                              "cancel-group", "max-attempts", "flow-tube"};
  const std::size_t space = rest.substr(0, limits.max_line_bytes).find(' ');
  if (space == std::string_view::npos) return limits.max_line_bytes;
  const std::string_view verb = rest.substr(0, space);
  for (const std::string_view extension : kExtensions) {
    if (verb == extension) return std::max(limits.max_line_bytes, limits.max_extension_line_bytes);
  }
  return limits.max_line_bytes;
}

bool is_put(const Command& c) {
  return c.verb == Verb::kPut || c.verb == Verb::kPutX;
}

bool same(const Parsed& a, const Parsed& b) {
  return a.kind == b.kind && a.command == b.command && a.error == b.error &&
         a.consumed == b.consumed && a.discard == b.discard && a.discard_line == b.discard_line &&
         a.close == b.close;
}

// Every invariant of one parse() of `rest`.
void check(std::string_view rest, const Parsed& p, const ParserLimits& limits) {
  FUZZ_CHECK(p.consumed <= rest.size());
  FUZZ_CHECK((p.kind == Kind::kNeedMore) == (p.consumed == 0));
  FUZZ_CHECK(p.close == (p.kind == Kind::kCommand && p.command.verb == Verb::kQuit));
  FUZZ_CHECK(p.discard == 0 || (p.kind == Kind::kError && p.error == Error::kJobTooBig));
  FUZZ_CHECK(!p.discard_line || (p.kind == Kind::kError && p.error == Error::kBadFormat));
  const std::size_t limit = line_limit(rest, limits);
  const std::size_t line_end = rest.substr(0, limit).find(kCrlf);
  if (line_end == std::string_view::npos) {
    // No line within the limit: wait for more, or the line is too long.
    if (rest.size() < limit) {
      FUZZ_CHECK(p.kind == Kind::kNeedMore);
      return;
    }
    FUZZ_CHECK(p.kind == Kind::kError && p.error == Error::kBadFormat);
    const std::size_t end = rest.find(kCrlf);
    FUZZ_CHECK(p.discard_line == (end == std::string_view::npos));
    if (!p.discard_line) FUZZ_CHECK(p.consumed == end + 2 && p.consumed > limit);
    if (p.discard_line) FUZZ_CHECK(p.consumed + 1 >= rest.size() && p.consumed > 0);
    return;
  }
  const std::size_t line_bytes = line_end + 2;
  FUZZ_CHECK(!p.discard_line);
  if (p.kind == Kind::kNeedMore) {
    FUZZ_CHECK(rest.starts_with("put ") || rest.starts_with("putx "));  // only a put waits
    return;
  }
  const bool put_body =
      p.kind == Kind::kCommand ? is_put(p.command) : p.error == Error::kExpectedCrlf;
  if (!put_body) {
    FUZZ_CHECK(p.consumed == line_bytes);
  } else {
    FUZZ_CHECK((rest.starts_with("put ") || rest.starts_with("putx ")) &&
               p.consumed >= line_bytes + 2);
    FUZZ_CHECK(p.consumed - line_bytes - 2 <= limits.max_job_bytes);
    const bool crlf = rest.substr(p.consumed - 2, 2) == kCrlf;
    FUZZ_CHECK(crlf == (p.kind == Kind::kCommand));
  }
  if (p.kind == Kind::kError && p.error == Error::kJobTooBig) {
    FUZZ_CHECK(p.discard >= 2 && p.discard - 2 > limits.max_job_bytes);
  }
  if (p.kind != Kind::kCommand) return;
  const Command& c = p.command;
  FUZZ_CHECK(within(c.tube, rest) && within(c.body, rest));
  FUZZ_CHECK(within(c.key, rest) && within(c.group, rest));
  FUZZ_CHECK(c.key.size() <= limits.max_key_bytes && c.group.size() <= limits.max_key_bytes);
  FUZZ_CHECK(c.body.empty() || c.body.data() == rest.data() + line_bytes);
  if (is_put(c)) FUZZ_CHECK(c.body.size() + line_bytes + 2 == p.consumed);
  if (!c.tube.empty()) FUZZ_CHECK(is_name(c.tube, limits));
  const bool named =
      c.verb == Verb::kUse || c.verb == Verb::kWatch || c.verb == Verb::kIgnore ||
      c.verb == Verb::kStatsTube || c.verb == Verb::kPauseTube || c.verb == Verb::kRescheduleKey ||
      c.verb == Verb::kDeleteKey || c.verb == Verb::kPeekKey || c.verb == Verb::kListGroup ||
      c.verb == Verb::kCancelGroup || c.verb == Verb::kMaxAttempts || c.verb == Verb::kFlowTube;
  FUZZ_CHECK(named != c.tube.empty());
  FUZZ_CHECK(c.timeout_seconds <= 2147483647U);
  FUZZ_CHECK(rest.find('\0') >= line_end);  // a NUL in the line is never a command
}

// Parses `input` as a session would: returns the results (views into `input`).
std::vector<Parsed> run(std::string_view input, const ParserLimits& limits, std::size_t cut) {
  std::vector<Parsed> results;
  std::size_t position = 0;
  std::size_t discard = 0;
  bool skipping = false;
  std::size_t delivered = std::min(cut, input.size());
  for (;;) {
    const std::string_view rest = input.substr(position, delivered - position);
    if (discard > 0 || skipping) {
      std::size_t n = std::min(discard, rest.size());
      if (skipping) {
        const Skipped skipped = skip_line(rest);
        FUZZ_CHECK(skipped.consumed <= rest.size());
        n = skipped.consumed;
        skipping = !skipped.line_ended;
      } else {
        discard -= n;
      }
      position += n;
      if (discard > 0 || skipping) {
        if (delivered == input.size()) break;
        delivered = input.size();
      }
      continue;
    }
    const Parsed p = parse(rest, limits);
    check(rest, p, limits);
    if (p.kind == Kind::kNeedMore) {
      if (delivered == input.size()) break;
      delivered = input.size();
      continue;
    }
    if (!p.discard_line) {
      // Exactly the consumed bytes give the same result, one byte less is not enough.
      FUZZ_CHECK(same(parse(rest.substr(0, p.consumed), limits), p));
      const Parsed shorter = parse(rest.substr(0, p.consumed - 1), limits);
      FUZZ_CHECK(shorter.kind == Kind::kNeedMore || shorter.discard_line);
    }
    results.push_back(p);
    position += p.consumed;
    discard = p.discard;
    skipping = p.discard_line;
    if (p.close) break;
  }
  return results;
}

// Results that a cut can change: consumed and discard_line of over-long lines.
bool same_events(const std::vector<Parsed>& a, const std::vector<Parsed>& b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (a[i].kind != b[i].kind || !(a[i].command == b[i].command) || a[i].error != b[i].error ||
        a[i].discard != b[i].discard || a[i].close != b[i].close) {
      return false;
    }
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  ParserLimits limits;
  const std::uint8_t knob = data[0];
  if ((knob & 1) != 0) {
    limits.max_line_bytes = 2 + (knob >> 1) % 32;
    limits.max_job_bytes = (knob >> 2) % 24;
    limits.max_tube_name_bytes = 1 + (knob >> 4) % 8;
    limits.max_extension_line_bytes = limits.max_line_bytes + (knob >> 3) % 16;
    limits.max_key_bytes = 1 + (knob >> 5) % 6;
  }
  const std::string_view input(reinterpret_cast<const char*>(data + 1), size - 1);
  const std::vector<Parsed> whole = run(input, limits, input.size());
  const std::vector<Parsed> split = run(input, limits, (knob * 7919U) % (input.size() + 1));
  FUZZ_CHECK(same_events(whole, split));
  return 0;
}
