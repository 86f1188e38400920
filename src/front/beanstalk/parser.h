// parser.h — the beanstalkd 1.12 command parser: bytes in, one command or one error out.
// parse() reads the first command of a connection's input buffer and says how many bytes it used;
// the session calls it again on the rest (pipelining) and maps errors to replies. It is pure: no
// I/O, no state, no allocation; a Command's tube and body are views into the caller's buffer, valid
// while those bytes are. The caller buffers at most max_extension_line_bytes + max_job_bytes + 2
// bytes.
// Costs O(max_line_bytes) per call, so re-parsing after every read is cheap: a put body is never
// scanned, only the two bytes after it compared. An over-long line costs O(input) once.
// Two error paths leave bytes to drop (JOB_TOO_BIG: `discard`; an over-long line: `discard_line`
// and skip_line()). Every beanstalkd behaviour matched, with its source in prot.c, and every
// deliberate difference is listed at parse() below. Wire format: beanstalkd's doc/protocol.txt.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>
#include <utility>
#include <vector>

#include "base/job.h"

namespace delayq::front::beanstalk {

enum class Verb : std::uint8_t {
  kPut,
  kUse,
  kReserve,
  kReserveWithTimeout,
  kReserveJob,
  kDelete,
  kRelease,
  kBury,
  kTouch,
  kWatch,
  kIgnore,
  kPeek,
  kPeekReady,
  kPeekDelayed,
  kPeekBuried,
  kKick,
  kKickJob,
  kStatsJob,
  kStatsTube,
  kStats,
  kListTubes,
  kListTubeUsed,
  kListTubesWatched,
  kPauseTube,
  kQuit,
  // delayq's extensions (docs/protocol.md): keys, groups, reschedule, millisecond times.
  kPutX,
  kReschedule,
  kRescheduleKey,
  kDeleteKey,
  kPeekKey,
  kListGroup,
  kCancelGroup,
  kMaxAttempts,
  kFlowTube,
};
inline constexpr std::size_t kVerbCount = static_cast<std::size_t>(Verb::kFlowTube) + 1;

// The command name on the wire: "put", "reserve-with-timeout", ...
[[nodiscard]] std::string_view verb_name(Verb verb) noexcept;

// One command line (and, for put, its body). Fields a verb does not use stay zero / empty.
// Numbers are as sent: the broker applies beanstalkd's adjustments (ttr 0 -> 1 for put; a pause
// of 0 ends a pause, as beanstalkd's 0 -> 1 ns does; prot.c dispatch_cmd, OP_PUT and
// OP_PAUSE_TUBE).
// flow-tube's options, each as given (nullopt: not given).
struct FlowOptions {
  std::optional<std::uint32_t> concurrency;  // concurrency=<n>, 0 off
  std::optional<bool> fair;                  // fair=<0|1>
  std::optional<std::uint32_t> rate_jobs;    // rate=<jobs>/<ms>, 0/<anything> off
  std::optional<std::uint32_t> rate_period_ms;
  std::optional<std::uint32_t> burst;  // burst=<n>, n >= 1
  // weight=<group>:<n>, n 1 to 1000 (1: the default, which removes the group's)
  std::vector<std::pair<std::string_view, std::uint32_t>> weights;

  friend bool operator==(const FlowOptions&, const FlowOptions&) = default;
};

struct Command {
  Verb verb = Verb::kPut;
  std::uint64_t id = 0;             // delete release bury touch peek reserve-job kick-job stats-job
  std::uint32_t priority = 0;       // put release bury
  std::uint32_t delay_seconds = 0;  // put release
  std::uint32_t ttr_seconds = 0;    // put
  std::uint32_t timeout_seconds = 0;  // reserve-with-timeout, at most 2^31-1
  std::uint32_t bound = 0;            // kick
  std::uint32_t pause_seconds = 0;    // pause-tube
  std::uint32_t max_attempts = 0;     // max-attempts
  // use watch ignore stats-tube pause-tube max-attempts flow-tube, *-key, *-group
  std::string_view tube;
  std::string_view body;  // put, putx: exactly <bytes> bytes, without the \r\n
  // Extensions only.
  Due due;  // putx reschedule reschedule-key: `<ms>` a delay, `@<unix_ms>` a time (base/job.h)
  std::string_view key;           // putx (key=), reschedule-key delete-key peek-key
  std::string_view group;         // putx (group=), list-group cancel-group
  bool replace = false;           // putx (replace)
  std::string_view url;           // putx (url=): push delivery's URL of the job's own
  std::string_view content_type;  // putx (type=): the body's Content-Type when delivered
  std::string_view traceparent;   // putx (traceparent=, tracestate=): W3C Trace Context
  std::string_view tracestate;
  std::optional<std::uint64_t> debounce_ms;  // putx (debounce=, max-wait=): a debounce
  std::optional<std::uint64_t> max_wait_ms;
  FlowOptions flow;  // flow-tube

  friend bool operator==(const Command&, const Command&) = default;
};

enum class Error : std::uint8_t {
  kBadFormat,       // BAD_FORMAT: malformed line, bad number or name, line too long
  kUnknownCommand,  // UNKNOWN_COMMAND
  kExpectedCrlf,    // EXPECTED_CRLF: a put body not followed by \r\n
  kJobTooBig,       // JOB_TOO_BIG: a put announcing more than max_job_bytes
};

// The reply word without "\r\n": "BAD_FORMAT", "UNKNOWN_COMMAND", ...
[[nodiscard]] std::string_view error_name(Error error) noexcept;

struct ParserLimits {
  // Longest command line, counting its "\r\n"; a longer one is BAD_FORMAT. Raising it only admits
  // odd lines (leading zeros): the longest well-formed line, "pause-tube <200-byte name>
  // 4294967295\r\n", is 224 bytes. Must be at least 2. Default 224, beanstalkd's LINE_BUF_SIZE.
  std::size_t max_line_bytes = 224;
  // Largest job body; a put announcing more is JOB_TOO_BIG (announcing exactly this is fine).
  // Bounds the caller's buffer. Default 65535, beanstalkd's JOB_DATA_SIZE_LIMIT_DEFAULT (its -z).
  std::size_t max_job_bytes = 65535;
  // Longest tube name; a longer one is BAD_FORMAT. Default 200, beanstalkd's MAX_TUBE_NAME_LEN-1.
  std::size_t max_tube_name_bytes = 200;
  // Longest line of an extension command (a tube, a key and a group fit). Default 1024.
  std::size_t max_extension_line_bytes = 1024;
  // Longest key or group: 1.. of the bytes 0x21..0x7E. Default 200.
  std::size_t max_key_bytes = 200;
};

// Whether a line (with or without its \r\n) is an HTTP request line ("POST / HTTP/1.1"): what
// a browser sends, never a beanstalkd command.
[[nodiscard]] bool http_request_line(std::string_view line) noexcept;

struct Parsed {
  enum class Kind : std::uint8_t {
    kNeedMore,  // the input is a proper prefix of a command (line or put body); read more, retry
    kCommand,   // `command` is complete
    kError,     // reply `error`, drop `consumed` bytes, then honour `discard` / `discard_line`
  };
  Kind kind = Kind::kNeedMore;
  Command command;                  // kCommand
  Error error = Error::kBadFormat;  // kError
  // Bytes of input used: the line with its \r\n, plus the body and its \r\n for a put. 0 only for
  // kNeedMore.
  std::size_t consumed = 0;
  // kJobTooBig only: <bytes> + 2 bytes (body and \r\n) that follow the line, whether or not they
  // have arrived yet. The caller drops them before parsing again; beanstalkd replies JOB_TOO_BIG
  // once they are dropped (prot.c _skip, STATE_BITBUCKET), and never checks them for a \r\n.
  std::size_t discard = 0;
  // kBadFormat for a line longer than max_line_bytes whose \r\n is not in the input yet: the
  // caller drops input through the next \r\n with skip_line() before parsing again. beanstalkd
  // replies BAD_FORMAT once that \r\n arrives (prot.c conn_process_io, STATE_WANT_ENDLINE).
  bool discard_line = false;
  // The connection is to be closed now, with no reply: set for quit only. No parse error closes
  // a beanstalkd 1.12 connection, an over-long line included.
  bool close = false;
  // kError: a line refused after the point where beanstalkd counts it in its cmd-* counter, as
  // command.verb (prot.c dispatch_cmd): a put whose four numbers parsed (then JOB_TOO_BIG,
  // trailing garbage or EXPECTED_CRLF), a pause-tube whose name is not a valid tube name.
  // kNeedMore: a put line accepted whose body has not all arrived: beanstalkd has counted it, and
  // made its connection a producer, before reading the body.
  bool counted = false;
};

// Parses the first command in `input`. Rules, each as beanstalkd 1.12 prot.c does it:
//  - A line ends at the first "\r\n" and may be max_line_bytes long with it (scan_line_end,
//    conn_process_io). Past that with no \r\n: BAD_FORMAT once, the line is dropped through its
//    \r\n and the connection goes on (STATE_WANT_ENDLINE, since commit d18aa23; before, the
//    rest of the line was read as a new command, answered UNKNOWN_COMMAND).
//  - A NUL byte in the line: BAD_FORMAT, whatever the verb (dispatch_cmd, "maliciousness").
//  - Verbs are case-sensitive and end at the first space. A verb without arguments followed by
//    anything is BAD_FORMAT ("stats 1", "reserve "). A verb with arguments but no space after it,
//    or an unknown verb, is UNKNOWN_COMMAND ("delete\r\n", "PUT 1 2 3 4") unless the line starts
//    with the name of a verb without arguments: then BAD_FORMAT ("reservex", "reserve-job\r\n",
//    "stats-job\r\n", "list-tubesfoo"). This is which_cmd's prefix matching ("delete " with its
//    space, "reserve" without) followed by the no-argument verbs' length check.
//  - Numbers (read_u32, read_u64): one or more spaces before each; then decimal digits only (no
//    sign, no '+'); leading zeros are fine ("007" is 7, at any length); then a space or the end.
//    pri, delay, ttr, bytes, kick bound and pause delay must be < 2^32, ids < 2^64, the
//    reserve-with-timeout timeout <= 2^31-1; else BAD_FORMAT. Anything after the last argument,
//    a single trailing space included, is BAD_FORMAT. Only ' ' separates; a tab is garbage.
//  - put (OP_PUT): <bytes> > max_job_bytes is JOB_TOO_BIG, checked before trailing garbage
//    ("put 0 0 0 99999 x" is JOB_TOO_BIG too) and <bytes> + 2 bytes are dropped. The body is
//    exactly <bytes> bytes (any bytes: \r\n and NUL included); the next two must be "\r\n", else
//    EXPECTED_CRLF after consuming all <bytes> + 2 (enqueue_incoming_job). A put line that fails
//    consumes only its line: what follows is parsed as commands, as beanstalkd does.
//  - use, watch, ignore, stats-tube (is_valid_tube): everything after the one space is the name:
//    1..max_tube_name_bytes of A-Z a-z 0-9 - + / ; . $ _ ( ), not starting with '-'. So a second
//    space, before or after the name, is BAD_FORMAT.
//  - pause-tube (read_tube_name, OP_PAUSE_TUBE): spaces, the name (same rules), spaces, delay.
//  - quit: close, no reply (OP_QUIT).
// Deliberate differences, each where beanstalkd accepts a line whose meaning is unclear; every
// line of a beanstalkd verb that parse() accepts, beanstalkd 1.12 accepts with the same meaning
// (delayq's extension verbs are UNKNOWN_COMMAND to beanstalkd):
//  - kick reads its bound with strtoul: beanstalkd takes "kick -1" (2^64-1, then truncated),
//    "kick +5", "kick 5x", "kick 5 6", and truncates 2^32 to 0. Here the number rules above.
//  - reserve-with-timeout reads with strtol in 1.12: "reserve-with-timeout " and "... abc" wait 0
//    seconds, "-1" waits forever, trailing garbage passes. Here the number rules above, with
//    1.13's limit of 2^31-1 (prot.c after commit e53c270).
//  - beanstalkd takes "quit<anything>" as quit and "pause-tube<name> <delay>" with no space after
//    the verb (prefix matching); here BAD_FORMAT.
//  - beanstalkd looks only at the first '\r' of its buffer for a line end: "a\rb\r\n" is no line
//    to it, it waits for 224 bytes and drops them. Here the line ends at the first "\r\n" and the
//    stray '\r' is garbage (BAD_FORMAT or UNKNOWN_COMMAND). Likewise it drops an over-long line
//    in 224-byte pieces and misses a "\r\n" split across two; here the first "\r\n" ends it.
[[nodiscard]] Parsed parse(std::string_view input, const ParserLimits& limits) noexcept;

struct Skipped {
  std::size_t consumed = 0;  // drop these bytes
  bool line_ended = false;   // true: they end with the "\r\n"; parse() may resume after them
};

// After Parsed::discard_line: how much of `input` belongs to the rest of the over-long line.
// Without a "\r\n" it keeps a final '\r' back, so a \r\n split across two reads is still seen.
[[nodiscard]] Skipped skip_line(std::string_view input) noexcept;

}  // namespace delayq::front::beanstalk
