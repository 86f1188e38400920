#include "front/beanstalk/parser.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <limits>
#include <optional>

#include "base/check.h"
#include "base/job.h"

namespace delayq::front::beanstalk {
namespace {

constexpr std::string_view kCrlf = "\r\n";

// beanstalkd's NAME_CHARS (prot.c): the bytes a tube name may hold.
constexpr std::array<bool, 256> kNameChars = [] {
  std::array<bool, 256> table{};
  for (const char c : std::string_view("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
                                       "0123456789-+/;.$_()")) {
    table[static_cast<unsigned char>(c)] = true;
  }
  return table;
}();

bool is_name_char(char c) noexcept {
  return kNameChars[static_cast<unsigned char>(c)];
}
bool is_digit(char c) noexcept {
  return c >= '0' && c <= '9';
}

// is_valid_tube (prot.c): 1..max name bytes, not starting with '-'.
bool is_valid_tube(std::string_view name, std::size_t max_bytes) noexcept {
  return !name.empty() && name.size() <= max_bytes && name.front() != '-' &&
         std::all_of(name.begin(), name.end(), is_name_char);
}

// A cursor over the arguments of one command line: the bytes after the verb's space.
class Args {
 public:
  explicit Args(std::string_view rest) noexcept : rest_(rest) {}

  // read_u64 / read_u32 (prot.c): skip spaces, then at least one decimal digit; any value above
  // `max` (overflow included) fails. Leading zeros never overflow: the value stays 0 over them.
  std::optional<std::uint64_t> number(std::uint64_t max) noexcept {
    skip_spaces();
    if (rest_.empty() || !is_digit(rest_.front())) return std::nullopt;
    std::uint64_t value = 0;
    std::size_t i = 0;
    for (; i < rest_.size() && is_digit(rest_[i]); ++i) {
      const auto digit = static_cast<std::uint64_t>(rest_[i] - '0');
      if (value > (max - digit) / 10) return std::nullopt;
      value = value * 10 + digit;
    }
    rest_.remove_prefix(i);
    return value;
  }
  std::optional<std::uint32_t> u32(std::uint32_t max = std::numeric_limits<std::uint32_t>::max()) {
    const auto value = number(max);
    if (!value) return std::nullopt;
    return static_cast<std::uint32_t>(*value);
  }
  std::optional<std::uint64_t> u64() { return number(std::numeric_limits<std::uint64_t>::max()); }

  // A decimal fraction after a number read ("0.5": the ".5"), passed over; false if the next
  // byte is a '.' without a digit after it.
  bool skip_fraction() noexcept {
    if (rest_.empty() || rest_.front() != '.') return true;
    const auto digits = static_cast<std::size_t>(
        std::find_if_not(rest_.begin() + 1, rest_.end(), is_digit) - rest_.begin() - 1);
    if (digits == 0) return false;
    rest_.remove_prefix(1 + digits);
    return true;
  }

  // read_tube_name (prot.c): skip spaces, then the longest run of name bytes, at least one.
  std::optional<std::string_view> name_run() noexcept {
    skip_spaces();
    const auto length = static_cast<std::size_t>(
        std::find_if_not(rest_.begin(), rest_.end(), is_name_char) - rest_.begin());
    if (length == 0) return std::nullopt;
    const std::string_view name = rest_.substr(0, length);
    rest_.remove_prefix(length);
    return name;
  }

  // A key or a group: skip spaces, then the longest run of bytes 0x21..0x7E, at least one.
  std::optional<std::string_view> token() noexcept {
    skip_spaces();
    const auto length = static_cast<std::size_t>(
        std::find_if_not(rest_.begin(), rest_.end(), [](char c) { return c > ' ' && c < 127; }) -
        rest_.begin());
    if (length == 0) return std::nullopt;
    const std::string_view text = rest_.substr(0, length);
    rest_.remove_prefix(length);
    return text;
  }

  // <ms> (a delay, at most 100 years) or @<unix_ms> (a time, at most 9999-12-31T23:59:59.999Z).
  std::optional<Due> due() noexcept {
    skip_spaces();
    Due due;
    if (!rest_.empty() && rest_.front() == '@') {
      due.absolute = true;
      rest_.remove_prefix(1);
      if (rest_.empty() || !is_digit(rest_.front())) return std::nullopt;  // no space after '@'
    }
    const auto ms = number(static_cast<std::uint64_t>(due.absolute ? kLastDueUnixMs : kMaxDelayMs));
    if (!ms) return std::nullopt;
    due.ms = static_cast<std::int64_t>(*ms);  // within the limit just checked
    return due;
  }

  [[nodiscard]] std::string_view rest() const noexcept { return rest_; }
  [[nodiscard]] bool at_end() const noexcept { return rest_.empty(); }

 private:
  void skip_spaces() noexcept {
    rest_.remove_prefix(std::min(rest_.find_first_not_of(' '), rest_.size()));
  }

  std::string_view rest_;
};

enum class Outcome : std::uint8_t { kOk, kBadFormat, kJobTooBig };

// What one command's handler reads from and fills in.
struct Line {
  Args args;
  const ParserLimits& limits;
  Command command{};
  std::size_t body_bytes = 0;  // put: the <bytes> announced
  bool counted = false;        // beanstalkd counts the line from here on (Parsed::counted)
};

Outcome ok_if_at_end(const Line& line) {
  return line.args.at_end() ? Outcome::kOk : Outcome::kBadFormat;
}

// The verbs without arguments: the dispatcher has already refused anything after the verb.
Outcome parse_no_args(Line& /*line*/) {
  return Outcome::kOk;
}

// put <pri> <delay> <ttr> <bytes>: JOB_TOO_BIG is decided before trailing garbage (OP_PUT).
Outcome parse_put(Line& line) {
  const auto priority = line.args.u32();
  const auto delay = line.args.u32();
  const auto ttr = line.args.u32();
  const auto bytes = line.args.u32();
  if (!priority || !delay || !ttr || !bytes) return Outcome::kBadFormat;
  line.counted = true;
  line.command.priority = *priority;
  line.command.delay_seconds = *delay;
  line.command.ttr_seconds = *ttr;
  line.body_bytes = *bytes;
  if (line.body_bytes > line.limits.max_job_bytes) return Outcome::kJobTooBig;
  return ok_if_at_end(line);
}

// peek, reserve-job, delete, touch, kick-job, stats-job: <id>
Outcome parse_id(Line& line) {
  const auto id = line.args.u64();
  if (!id) return Outcome::kBadFormat;
  line.command.id = *id;
  return ok_if_at_end(line);
}

// release <id> <pri> <delay>
Outcome parse_release(Line& line) {
  const auto id = line.args.u64();
  const auto priority = line.args.u32();
  const auto delay = line.args.u32();
  if (!id || !priority || !delay) return Outcome::kBadFormat;
  line.command.id = *id;
  line.command.priority = *priority;
  line.command.delay_seconds = *delay;
  return ok_if_at_end(line);
}

// bury <id> <pri>
Outcome parse_bury(Line& line) {
  const auto id = line.args.u64();
  const auto priority = line.args.u32();
  if (!id || !priority) return Outcome::kBadFormat;
  line.command.id = *id;
  line.command.priority = *priority;
  return ok_if_at_end(line);
}

// reserve-with-timeout <seconds>: beanstalkd 1.13 caps it at INT_MAX (its timeout is an int).
Outcome parse_reserve_with_timeout(Line& line) {
  const auto timeout = line.args.u32(std::numeric_limits<std::int32_t>::max());
  // Clients pass seconds as they have them ("0.5" from beaneater, jackd, node-beanstalk):
  // beanstalkd reads the whole seconds and ignores the fraction, and so does delayq.
  if (!timeout || !line.args.skip_fraction()) return Outcome::kBadFormat;
  line.command.timeout_seconds = *timeout;
  return ok_if_at_end(line);
}

// kick <bound>
Outcome parse_kick(Line& line) {
  const auto bound = line.args.u32();
  if (!bound) return Outcome::kBadFormat;
  line.command.bound = *bound;
  return ok_if_at_end(line);
}

// use, watch, ignore, stats-tube <tube>: the whole rest of the line is the name.
Outcome parse_tube(Line& line) {
  const std::string_view name = line.args.rest();
  if (!is_valid_tube(name, line.limits.max_tube_name_bytes)) return Outcome::kBadFormat;
  line.command.tube = name;
  return Outcome::kOk;
}

// pause-tube <tube> <delay>
Outcome parse_pause_tube(Line& line) {
  const auto name = line.args.name_run();
  if (!name) return Outcome::kBadFormat;
  const auto pause = line.args.u32();
  if (!pause || !line.args.at_end()) return Outcome::kBadFormat;
  line.counted = true;
  if (!is_valid_tube(*name, line.limits.max_tube_name_bytes)) return Outcome::kBadFormat;
  line.command.tube = *name;
  line.command.pause_seconds = *pause;
  return Outcome::kOk;
}

// --- delayq's extensions

// max-attempts <tube> <n>
Outcome parse_max_attempts(Line& line) {
  const auto name = line.args.name_run();
  if (!name) return Outcome::kBadFormat;
  const auto n = line.args.u32();
  if (!n || !line.args.at_end() || !is_valid_tube(*name, line.limits.max_tube_name_bytes)) {
    return Outcome::kBadFormat;
  }
  line.command.tube = *name;
  line.command.max_attempts = *n;
  return Outcome::kOk;
}

bool is_valid_key(std::string_view key, std::size_t max_bytes) noexcept {
  return !key.empty() && key.size() <= max_bytes;
}

// <tube> <key-or-group>: both required.
Outcome parse_tube_and_token(Line& line, std::string_view& token) {
  const auto tube = line.args.name_run();
  if (!line.args.rest().starts_with(' ')) return Outcome::kBadFormat;  // "t:k" is no tube and key
  const auto text = line.args.token();
  if (!tube || !text || !is_valid_tube(*tube, line.limits.max_tube_name_bytes) ||
      !is_valid_key(*text, line.limits.max_key_bytes)) {
    return Outcome::kBadFormat;
  }
  line.command.tube = *tube;
  token = *text;
  return Outcome::kOk;
}

// Digits alone, at most `max`: the value of an option such as debounce=<ms>.
std::optional<std::uint64_t> option_number(std::string_view text, std::uint64_t max) {
  Args args(text);
  const auto value = args.number(max);
  if (!value || !args.at_end() || text.empty() || !is_digit(text.front())) return std::nullopt;
  return value;
}

// putx <pri> <when> <ttr> <bytes> [key=<key>] [group=<group>] [replace] [url=<url>]
//      [type=<content-type>] [traceparent=<traceparent>] [tracestate=<tracestate>]
//      [debounce=<ms>] [max-wait=<ms>]
Outcome parse_putx(Line& line) {
  const auto priority = line.args.u32();
  const auto due = line.args.due();
  const auto ttr = line.args.u32();
  const auto bytes = line.args.u32();
  if (!priority || !due || !ttr || !bytes) return Outcome::kBadFormat;
  line.command.priority = *priority;
  line.command.due = *due;
  line.command.ttr_seconds = *ttr;
  line.body_bytes = *bytes;
  if (line.body_bytes > line.limits.max_job_bytes) return Outcome::kJobTooBig;
  while (!line.args.at_end()) {
    const auto option = line.args.token();
    if (!option) return Outcome::kBadFormat;
    if (option->starts_with("key=") && line.command.key.empty()) {
      line.command.key = option->substr(4);
      if (!is_valid_key(line.command.key, line.limits.max_key_bytes)) return Outcome::kBadFormat;
    } else if (option->starts_with("group=") && line.command.group.empty()) {
      line.command.group = option->substr(6);
      if (!is_valid_key(line.command.group, line.limits.max_key_bytes)) return Outcome::kBadFormat;
    } else if (*option == "replace" && !line.command.replace) {
      line.command.replace = true;
    } else if (option->starts_with("url=") && option->size() > 4 && line.command.url.empty()) {
      line.command.url = option->substr(4);
    } else if (option->starts_with("type=") && option->size() > 5 &&
               line.command.content_type.empty()) {
      line.command.content_type = option->substr(5);
    } else if (option->starts_with("traceparent=") && option->size() > 12 &&
               line.command.traceparent.empty()) {
      line.command.traceparent = option->substr(12);
    } else if (option->starts_with("tracestate=") && option->size() > 11 &&
               line.command.tracestate.empty()) {
      line.command.tracestate = option->substr(11);
    } else if (option->starts_with("debounce=") && !line.command.debounce_ms) {
      line.command.debounce_ms =
          option_number(option->substr(9), static_cast<std::uint64_t>(kMaxDelayMs));
      if (!line.command.debounce_ms) return Outcome::kBadFormat;
    } else if (option->starts_with("max-wait=") && !line.command.max_wait_ms) {
      line.command.max_wait_ms =
          option_number(option->substr(9), static_cast<std::uint64_t>(kMaxDelayMs));
      if (!line.command.max_wait_ms) return Outcome::kBadFormat;
    } else {
      return Outcome::kBadFormat;
    }
  }
  if (line.command.replace && line.command.key.empty()) return Outcome::kBadFormat;
  // What a debounce needs (a key, <when> 0, no replace) is the put rules' to check, once the
  // body has been read, as for every broker.
  return Outcome::kOk;
}

// flow-tube <tube> [concurrency=<n>] [fair=<0|1>] [rate=<jobs>/<ms>] [burst=<n>]
//           [weight=<group>:<n>]...
Outcome parse_flow_tube(Line& line) {
  const auto name = line.args.name_run();
  if (!name || !is_valid_tube(*name, line.limits.max_tube_name_bytes)) return Outcome::kBadFormat;
  line.command.tube = *name;
  FlowOptions& flow = line.command.flow;
  constexpr std::uint64_t kMost = 1'000'000;
  while (!line.args.at_end()) {
    const auto option = line.args.token();
    if (!option) return Outcome::kBadFormat;
    if (option->starts_with("concurrency=") && !flow.concurrency) {
      const auto n = option_number(option->substr(12), kMost);
      if (!n) return Outcome::kBadFormat;
      flow.concurrency = static_cast<std::uint32_t>(*n);
    } else if ((*option == "fair=0" || *option == "fair=1") && !flow.fair) {
      flow.fair = *option == "fair=1";
    } else if (option->starts_with("rate=") && !flow.rate_jobs) {
      const std::string_view rate = option->substr(5);
      const std::size_t slash = rate.find('/');
      if (slash == std::string_view::npos) return Outcome::kBadFormat;
      const auto jobs = option_number(rate.substr(0, slash), kMost);
      const auto period = option_number(rate.substr(slash + 1), 86'400'000);
      if (!jobs || !period || *period == 0) return Outcome::kBadFormat;
      flow.rate_jobs = static_cast<std::uint32_t>(*jobs);
      flow.rate_period_ms = static_cast<std::uint32_t>(*period);
    } else if (option->starts_with("weight=") && flow.weights.size() < 1000) {
      const std::string_view text = option->substr(7);
      const std::size_t colon = text.rfind(':');
      if (colon == std::string_view::npos || colon == 0 ||
          !is_valid_key(text.substr(0, colon), line.limits.max_key_bytes)) {
        return Outcome::kBadFormat;
      }
      const auto n = option_number(text.substr(colon + 1), 1000);
      if (!n || *n == 0) return Outcome::kBadFormat;
      flow.weights.emplace_back(text.substr(0, colon), static_cast<std::uint32_t>(*n));
    } else if (option->starts_with("burst=") && !flow.burst) {
      const auto n = option_number(option->substr(6), kMost);
      if (!n || *n == 0) return Outcome::kBadFormat;
      flow.burst = static_cast<std::uint32_t>(*n);
    } else {
      return Outcome::kBadFormat;
    }
  }
  return Outcome::kOk;
}

// reschedule <id> <when>
Outcome parse_reschedule(Line& line) {
  const auto id = line.args.u64();
  const auto due = line.args.due();
  if (!id || !due) return Outcome::kBadFormat;
  line.command.id = *id;
  line.command.due = *due;
  return ok_if_at_end(line);
}

// reschedule-key <tube> <key> <when>
Outcome parse_reschedule_key(Line& line) {
  if (parse_tube_and_token(line, line.command.key) != Outcome::kOk) return Outcome::kBadFormat;
  const auto due = line.args.due();
  if (!due) return Outcome::kBadFormat;
  line.command.due = *due;
  return ok_if_at_end(line);
}

// delete-key, peek-key <tube> <key>
Outcome parse_tube_key(Line& line) {
  if (parse_tube_and_token(line, line.command.key) != Outcome::kOk) return Outcome::kBadFormat;
  return ok_if_at_end(line);
}

// list-group, cancel-group <tube> <group>
Outcome parse_tube_group(Line& line) {
  if (parse_tube_and_token(line, line.command.group) != Outcome::kOk) return Outcome::kBadFormat;
  return ok_if_at_end(line);
}

struct VerbEntry {
  std::string_view name;
  Verb verb;
  bool takes_args;  // the verb must be followed by a space and arguments
  Outcome (*parse)(Line& line);
  bool extension = false;  // delayq's: its line may be max_extension_line_bytes long
};

// Sorted by name, for binary search; verb_name() reads it too.
constexpr std::array kVerbs = {
    VerbEntry{"bury", Verb::kBury, true, parse_bury},
    VerbEntry{"cancel-group", Verb::kCancelGroup, true, parse_tube_group, true},
    VerbEntry{"delete", Verb::kDelete, true, parse_id},
    VerbEntry{"delete-key", Verb::kDeleteKey, true, parse_tube_key, true},
    VerbEntry{"flow-tube", Verb::kFlowTube, true, parse_flow_tube, true},
    VerbEntry{"ignore", Verb::kIgnore, true, parse_tube},
    VerbEntry{"kick", Verb::kKick, true, parse_kick},
    VerbEntry{"kick-job", Verb::kKickJob, true, parse_id},
    VerbEntry{"list-group", Verb::kListGroup, true, parse_tube_group, true},
    VerbEntry{"list-tube-used", Verb::kListTubeUsed, false, parse_no_args},
    VerbEntry{"list-tubes", Verb::kListTubes, false, parse_no_args},
    VerbEntry{"list-tubes-watched", Verb::kListTubesWatched, false, parse_no_args},
    VerbEntry{"max-attempts", Verb::kMaxAttempts, true, parse_max_attempts, true},
    VerbEntry{"pause-tube", Verb::kPauseTube, true, parse_pause_tube},
    VerbEntry{"peek", Verb::kPeek, true, parse_id},
    VerbEntry{"peek-buried", Verb::kPeekBuried, false, parse_no_args},
    VerbEntry{"peek-delayed", Verb::kPeekDelayed, false, parse_no_args},
    VerbEntry{"peek-key", Verb::kPeekKey, true, parse_tube_key, true},
    VerbEntry{"peek-ready", Verb::kPeekReady, false, parse_no_args},
    VerbEntry{"put", Verb::kPut, true, parse_put},
    VerbEntry{"putx", Verb::kPutX, true, parse_putx, true},
    VerbEntry{"quit", Verb::kQuit, false, parse_no_args},
    VerbEntry{"release", Verb::kRelease, true, parse_release},
    VerbEntry{"reschedule", Verb::kReschedule, true, parse_reschedule, true},
    VerbEntry{"reschedule-key", Verb::kRescheduleKey, true, parse_reschedule_key, true},
    VerbEntry{"reserve", Verb::kReserve, false, parse_no_args},
    VerbEntry{"reserve-job", Verb::kReserveJob, true, parse_id},
    VerbEntry{"reserve-with-timeout", Verb::kReserveWithTimeout, true, parse_reserve_with_timeout},
    VerbEntry{"stats", Verb::kStats, false, parse_no_args},
    VerbEntry{"stats-job", Verb::kStatsJob, true, parse_id},
    VerbEntry{"stats-tube", Verb::kStatsTube, true, parse_tube},
    VerbEntry{"touch", Verb::kTouch, true, parse_id},
    VerbEntry{"use", Verb::kUse, true, parse_tube},
    VerbEntry{"watch", Verb::kWatch, true, parse_tube},
};
static_assert(std::is_sorted(kVerbs.begin(), kVerbs.end(),
                             [](const VerbEntry& a, const VerbEntry& b) {
                               return a.name < b.name;
                             }));
static_assert(kVerbs.size() == kVerbCount, "one entry per verb");

// The verbs by the length of their names, each length's in kVerbs' order: a lookup compares
// the names of the verb's length (at most seven: a first byte, then the rest), where a binary
// search of all of them compared five or six. Every command looks up its verb.
constexpr std::size_t kLongestVerb =
    std::max_element(kVerbs.begin(), kVerbs.end(), [](const VerbEntry& a, const VerbEntry& b) {
      return a.name.size() < b.name.size();
    })->name.size();
constexpr std::size_t kMostOfOneLength = 8;
constexpr auto kVerbsByLength = [] {
  std::array<std::array<std::uint8_t, kMostOfOneLength>, kLongestVerb + 1> table{};
  std::array<std::size_t, kLongestVerb + 1> used{};
  for (auto& slots : table) slots.fill(kVerbs.size());
  for (std::size_t i = 0; i < kVerbs.size(); ++i) {
    const std::size_t length = kVerbs[i].name.size();
    if (used[length] == kMostOfOneLength) throw "raise kMostOfOneLength";  // not constant: an error
    table[length][used[length]++] = static_cast<std::uint8_t>(i);
  }
  return table;
}();

const VerbEntry* find_verb(std::string_view name) noexcept {
  if (name.size() > kLongestVerb) return nullptr;
  for (const std::uint8_t i : kVerbsByLength[name.size()]) {
    if (i == kVerbs.size()) break;
    const std::string_view candidate = kVerbs[i].name;
    if (candidate[0] == name[0] && std::memcmp(candidate.data(), name.data(), name.size()) == 0) {
      return &kVerbs[i];
    }
  }
  return nullptr;
}

// beanstalkd's which_cmd tries prefixes; those without a trailing space match lines that are no
// verb of ours ("reservex", "stats-job" with no argument), and the length check that follows turns
// them into BAD_FORMAT. (It also takes "quit..." and "pause-tube..." this way; see parser.h.)
Error unknown_verb_error(std::string_view line) noexcept {
  constexpr std::array<std::string_view, 9> kBareVerbPrefixes = {
      "peek-ready", "peek-delayed",   "peek-buried", "reserve",    "stats",
      "list-tubes", "list-tube-used", "quit",        "pause-tube",
  };
  const bool bare_prefix = std::any_of(kBareVerbPrefixes.begin(), kBareVerbPrefixes.end(),
                                       [&](std::string_view p) { return line.starts_with(p); });
  return bare_prefix ? Error::kBadFormat : Error::kUnknownCommand;
}

Parsed error(Error error, std::size_t consumed) noexcept {
  Parsed parsed;
  parsed.kind = Parsed::Kind::kError;
  parsed.error = error;
  parsed.consumed = consumed;
  return parsed;
}

// A line with no "\r\n" within max_line_bytes: BAD_FORMAT for all of it, through its "\r\n".
Parsed line_too_long(std::string_view input) noexcept {
  const std::size_t end = input.find(kCrlf);
  if (end != std::string_view::npos) return error(Error::kBadFormat, end + kCrlf.size());
  const Skipped skipped = skip_line(input);
  Parsed parsed = error(Error::kBadFormat, skipped.consumed);
  parsed.discard_line = true;
  return parsed;
}

// The body of a put whose line (line_bytes, with its \r\n) has been read.
Parsed frame_body(std::string_view input, std::size_t line_bytes, Line& line) noexcept {
  const std::size_t total = line_bytes + line.body_bytes + kCrlf.size();
  if (input.size() < total) return Parsed{};
  if (input.substr(line_bytes + line.body_bytes, kCrlf.size()) != kCrlf) {
    return error(Error::kExpectedCrlf, total);
  }
  Parsed parsed;
  parsed.kind = Parsed::Kind::kCommand;
  parsed.command = line.command;
  parsed.command.body = input.substr(line_bytes, line.body_bytes);
  parsed.consumed = total;
  return parsed;
}

// An error, or a put waiting for its body, on a line beanstalkd has counted by then: it says so,
// and names the verb.
Parsed counted_error(Parsed parsed, const Line& line) noexcept {
  if (line.counted) {
    parsed.counted = true;
    parsed.command.verb = line.command.verb;
  }
  return parsed;
}

// One complete line (without its \r\n) at the start of `input`.
Parsed parse_line(std::string_view input, std::string_view text, const ParserLimits& limits) {
  const std::size_t line_bytes = text.size() + kCrlf.size();
  if (text.find('\0') != std::string_view::npos) return error(Error::kBadFormat, line_bytes);
  const std::size_t space = text.find(' ');
  const bool has_args = space != std::string_view::npos;
  const VerbEntry* entry = find_verb(text.substr(0, space));
  if (entry == nullptr || (entry->takes_args && !has_args)) {
    return error(unknown_verb_error(text), line_bytes);
  }
  if (!entry->takes_args && has_args) return error(Error::kBadFormat, line_bytes);

  Line line{Args(has_args ? text.substr(space + 1) : std::string_view()), limits};
  line.command.verb = entry->verb;
  switch (entry->parse(line)) {
    case Outcome::kBadFormat:
      return counted_error(error(Error::kBadFormat, line_bytes), line);
    case Outcome::kJobTooBig: {
      Parsed parsed = error(Error::kJobTooBig, line_bytes);
      parsed.discard = line.body_bytes + kCrlf.size();
      return counted_error(parsed, line);
    }
    case Outcome::kOk:
      break;
  }
  if (entry->verb == Verb::kPut || entry->verb == Verb::kPutX) {
    Parsed parsed = frame_body(input, line_bytes, line);  // a body still to come counts already
    return parsed.kind == Parsed::Kind::kCommand ? parsed : counted_error(parsed, line);
  }
  Parsed parsed;
  parsed.kind = Parsed::Kind::kCommand;
  parsed.command = line.command;
  parsed.consumed = line_bytes;
  parsed.close = entry->verb == Verb::kQuit;
  return parsed;
}

}  // namespace

std::string_view verb_name(Verb verb) noexcept {
  // By Verb, built once from the sorted table: sessions name every command they count.
  static const auto kNames = [] {
    std::array<std::string_view, kVerbCount> names{};
    for (const VerbEntry& entry : kVerbs) names[static_cast<std::size_t>(entry.verb)] = entry.name;
    return names;
  }();
  const auto index = static_cast<std::size_t>(verb);
  return index < kNames.size() && !kNames[index].empty() ? kNames[index] : "?";
}

std::string_view error_name(Error error) noexcept {
  switch (error) {
    case Error::kBadFormat:
      return "BAD_FORMAT";
    case Error::kUnknownCommand:
      return "UNKNOWN_COMMAND";
    case Error::kExpectedCrlf:
      return "EXPECTED_CRLF";
    case Error::kJobTooBig:
      return "JOB_TOO_BIG";
  }
  return "?";
}

namespace {

// The longest line `input` may start with: beanstalkd's limit, unless the line starts with one of
// delayq's extension verbs and a space, which may run to max_extension_line_bytes.
std::size_t line_limit(std::string_view input, const ParserLimits& limits) noexcept {
  const std::size_t space = input.substr(0, limits.max_line_bytes).find(' ');
  if (space == std::string_view::npos) return limits.max_line_bytes;
  const VerbEntry* entry = find_verb(input.substr(0, space));
  if (entry == nullptr || !entry->extension) return limits.max_line_bytes;
  return std::max(limits.max_line_bytes, limits.max_extension_line_bytes);
}

}  // namespace

Parsed parse(std::string_view input, const ParserLimits& limits) noexcept {
  DELAYQ_CHECK(limits.max_line_bytes >= kCrlf.size());
  const std::size_t limit = line_limit(input, limits);
  const std::string_view window = input.substr(0, limit);
  const std::size_t end = window.find(kCrlf);
  if (end == std::string_view::npos) {
    if (input.size() < limit) return Parsed{};
    return line_too_long(input);
  }
  return parse_line(input, input.substr(0, end), limits);
}

Skipped skip_line(std::string_view input) noexcept {
  const std::size_t end = input.find(kCrlf);
  if (end != std::string_view::npos) return {end + kCrlf.size(), true};
  const bool split_crlf = !input.empty() && input.back() == '\r';
  return {input.size() - (split_crlf ? 1 : 0), false};
}

bool http_request_line(std::string_view line) noexcept {
  if (line.ends_with("\r\n")) line.remove_suffix(2);
  const auto first = line.find(' ');
  const auto last = line.rfind(' ');
  if (first == std::string_view::npos || first == last) return false;
  const std::string_view method = line.substr(0, first);
  const std::string_view version = line.substr(last + 1);
  constexpr std::string_view kMethods[] = {"GET",  "POST",    "PUT",   "DELETE", "PATCH",
                                           "HEAD", "OPTIONS", "TRACE", "CONNECT"};
  return std::find(std::begin(kMethods), std::end(kMethods), method) != std::end(kMethods) &&
         version.starts_with("HTTP/");
}

}  // namespace delayq::front::beanstalk
