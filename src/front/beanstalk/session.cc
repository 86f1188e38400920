#include "front/beanstalk/session.h"

#include <sys/resource.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <boost/asio/write.hpp>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <optional>
#include <random>
#include <string>

#include "front/beanstalk/server.h"

namespace delayq::front::beanstalk {
namespace {

using Counter = engine::Command;  // the engine's names for the cmd-* counters
using Kind = engine::ReserveResult::Kind;

// The one place a Status becomes a beanstalkd reply.
// The first word of a reply, as a view of static storage (metrics keep it); "other" if unknown.
std::string_view static_reply_word(std::string_view reply) {
  static constexpr std::string_view kWords[] = {"INSERTED",
                                                "RESERVED",
                                                "DELETED",
                                                "RELEASED",
                                                "BURIED",
                                                "TOUCHED",
                                                "USING",
                                                "WATCHING",
                                                "FOUND",
                                                "KICKED",
                                                "OK",
                                                "PAUSED",
                                                "NOT_FOUND",
                                                "TIMED_OUT",
                                                "DEADLINE_SOON",
                                                "NOT_IGNORED",
                                                "EXPECTED_CRLF",
                                                "JOB_TOO_BIG",
                                                "DRAINING",
                                                "BAD_FORMAT",
                                                "UNKNOWN_COMMAND",
                                                "OUT_OF_MEMORY",
                                                "INTERNAL_ERROR",
                                                "EXISTS",
                                                "CONFLICT",
                                                "RESCHEDULED",
                                                "CANCELLED"};
  const std::string_view word = reply.substr(0, reply.find_first_of(" \r"));
  for (const std::string_view known : kWords) {
    if (known == word) return known;
  }
  return "other";
}

std::string_view reply_word(Code code) {
  switch (code) {
    case Code::kOk:
      return "OK";
    case Code::kNotFound:
      return "NOT_FOUND";
    case Code::kConflict:
      return "CONFLICT";  // extensions only: beanstalkd's never conflict
    case Code::kNotIgnored:
      return "NOT_IGNORED";
    case Code::kInvalidArgument:
      return "BAD_FORMAT";
    case Code::kDeadlineSoon:
      return "DEADLINE_SOON";
    case Code::kTimedOut:
      return "TIMED_OUT";
    case Code::kLimit:
      return "OUT_OF_MEMORY";
    case Code::kCorruption:
    case Code::kUnsupported:
    case Code::kIOError:
      return "INTERNAL_ERROR";
  }
  return "INTERNAL_ERROR";
}

// The cmd-* counter of each verb, in Verb order; quit has none.
constexpr std::optional<Counter> kCounters[] = {
    Counter::kPut, Counter::kUse, Counter::kReserve, Counter::kReserveWithTimeout,
    Counter::kReserveJob, Counter::kDelete, Counter::kRelease, Counter::kBury, Counter::kTouch,
    Counter::kWatch, Counter::kIgnore, Counter::kPeek, Counter::kPeekReady, Counter::kPeekDelayed,
    Counter::kPeekBuried, Counter::kKick, Counter::kKickJob, Counter::kStatsJob,
    Counter::kStatsTube, Counter::kStats, Counter::kListTubes, Counter::kListTubeUsed,
    Counter::kListTubesWatched, Counter::kPauseTube, std::nullopt,
    // delayq's extensions have no beanstalkd counter
    std::nullopt, std::nullopt, std::nullopt, std::nullopt, std::nullopt, std::nullopt,
    std::nullopt};

// Replies queued for a client beyond this stop the reading of its commands until it catches up.
constexpr std::size_t kMaxQueuedReplyBytes = std::size_t{1} << 20;

// Whole seconds left until `unix_ms`, as beanstalkd shows them. It reads a nanosecond clock, so
// some time has always passed since a deadline was set and a fresh 10 s TTR shows 9. Here the
// deadline was rounded up to a whole millisecond and `now_ms` down, so the same moment can read
// up to 10.001 s: count 2 ms less.
std::int64_t seconds_until(std::int64_t unix_ms, std::int64_t now_ms) {
  return std::max<std::int64_t>(0, unix_ms - now_ms - 2) / 1000;
}

// This process's id in `stats`: 16 random hex digits drawn at the first call, as beanstalkd's.
const std::string& server_id() {
  static const std::string id = [] {
    std::random_device random;
    const std::uint64_t value = std::uint64_t{random()} << 32 | random();
    char hex[17];
    std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(value));
    return std::string(hex);
  }();
  return id;
}

// A YAML double-quoted scalar.
std::string quoted(std::string_view text) {
  std::string out = "\"";
  for (const char c : text) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

std::string yaml_list(const std::vector<std::string>& names) {
  std::string yaml = "---\n";
  for (const std::string& name : names) yaml += "- " + name + "\n";
  return yaml;
}

}  // namespace

const Session::Handler Session::kHandlers[] = {&Session::put,
                                               &Session::use,
                                               &Session::reserve,
                                               &Session::reserve_with_timeout,
                                               &Session::reserve_job,
                                               &Session::erase,
                                               &Session::release,
                                               &Session::bury,
                                               &Session::touch,
                                               &Session::watch,
                                               &Session::ignore,
                                               &Session::peek,
                                               &Session::peek_ready,
                                               &Session::peek_delayed,
                                               &Session::peek_buried,
                                               &Session::kick,
                                               &Session::kick_job,
                                               &Session::stats_job,
                                               &Session::stats_tube,
                                               &Session::stats,
                                               &Session::list_tubes,
                                               &Session::list_tube_used,
                                               &Session::list_tubes_watched,
                                               &Session::pause_tube,
                                               &Session::quit,
                                               &Session::putx,
                                               &Session::reschedule,
                                               &Session::reschedule_key,
                                               &Session::delete_key,
                                               &Session::peek_key,
                                               &Session::list_group,
                                               &Session::cancel_group};
static_assert(std::size(kCounters) == kVerbCount);

Session::Session(Server& server, boost::asio::ip::tcp::socket socket)
    : server_(server), socket_(std::move(socket)) {}

engine::Engine& Session::engine() {
  return server_.node().engine();
}

void Session::start() {
  server_.node().metrics().connection_opened(local::Protocol::kBeanstalk);
  client_ = engine().connect();
  read();
}

void Session::read() {
  socket_.async_read_some(
      boost::asio::buffer(read_buffer_),
      [self = shared_from_this()](const boost::system::error_code& error, std::size_t bytes) {
        if (self->closed_) return;
        if (error == boost::asio::error::eof) {
          // The client is done sending: answer what it sent (once durable), then close. A wait
          // in reserve ends at once with TIMED_OUT, as protocol.txt says for a half-closed
          // connection.
          self->in_.append(self->read_buffer_, bytes);
          if (self->waiting_ && self->engine().cancel_wait(self->client_)) {
            self->server_.node().forget(self->client_);
            self->waiting_ = false;
            self->reply("TIMED_OUT\r\n");
          } else {
            self->process();
          }
          self->closing_ = true;
          self->flush();
          return;
        }
        if (error) {
          self->close();
          return;
        }
        self->in_.append(self->read_buffer_, bytes);
        // A client that keeps sending while its reserve waits gets no more room than one
        // command's worth.
        const auto& limits = self->server_.limits();
        const std::size_t room = std::max(limits.max_line_bytes, limits.max_extension_line_bytes) +
                                 limits.max_job_bytes + 2;
        if (self->waiting_ && self->in_.size() > room) {
          self->close();
          return;
        }
        self->process();
        if (self->closed_) return;
        if (self->out_bytes_ > kMaxQueuedReplyBytes) {
          self->read_paused_ = true;
          return;
        }
        self->read();
      });
}

void Session::process() {
  while (!waiting_ && !closing_ && !closed_ && step()) {
  }
  server_.node().touched();
  flush();
}

bool Session::step() {
  if (discard_ > 0) {
    const std::size_t n = std::min(discard_, in_.size());
    in_.erase(0, n);
    discard_ -= n;
    if (discard_ > 0) return false;
    reply("JOB_TOO_BIG\r\n");
    return true;
  }
  if (discard_line_) {
    const Skipped skipped = skip_line(in_);
    in_.erase(0, skipped.consumed);
    if (!skipped.line_ended) return false;
    discard_line_ = false;
    reply("BAD_FORMAT\r\n");
    return true;
  }
  const Parsed parsed = parse(in_, server_.limits());
  // A put counts (and makes a producer) once its line is accepted, as in beanstalkd, even if its
  // body never comes whole: counted when first seen waiting for it, not again when it is whole.
  const bool counted_already = put_counted_;
  put_counted_ = parsed.kind == Parsed::Kind::kNeedMore && parsed.counted;
  const auto verb = static_cast<std::size_t>(parsed.command.verb);
  // A command counts when it runs; a line beanstalkd counts earlier (a put waiting for its body,
  // or refused after its numbers parsed) counts when first seen.
  if ((parsed.kind == Parsed::Kind::kCommand || parsed.counted) && !counted_already &&
      kCounters[verb]) {
    engine().count_command(*kCounters[verb]);
  }
  switch (parsed.kind) {
    case Parsed::Kind::kNeedMore:
      // A put whose size and line were right makes a producer, as in beanstalkd.
      if (put_counted_ && !counted_already) engine().mark_producer(client_);
      return false;
    case Parsed::Kind::kError:
      op_ = "error";
      in_.erase(0, parsed.consumed);
      if (parsed.error == Error::kExpectedCrlf) engine().mark_producer(client_);  // as above
      if (parsed.error == Error::kJobTooBig) {
        discard_ = parsed.discard;  // JOB_TOO_BIG once the body is dropped, as beanstalkd
      } else if (parsed.discard_line) {
        discard_line_ = true;
      } else {
        reply(std::string(error_name(parsed.error)) + "\r\n");
      }
      return true;
    case Parsed::Kind::kCommand: {
      op_ = verb_name(parsed.command.verb);
      (this->*kHandlers[verb])(parsed.command);  // its views point into in_: erase after
      in_.erase(0, parsed.consumed);
      return true;
    }
  }
  return false;
}

void Session::reply(std::string bytes) {
  server_.node().metrics().count_op(local::Protocol::kBeanstalk, op_, static_reply_word(bytes));
  out_bytes_ += bytes.size();
  out_.push_back(Reply{server_.node().barrier(), std::move(bytes)});
}

void Session::reply_status(const Status& status, std::string_view ok_word) {
  const std::string_view word = status.is_ok() ? ok_word : reply_word(status.code());
  reply(std::string(word) + "\r\n");
}

void Session::reply_job(std::string_view word, const engine::JobView& job) {
  auto body = server_.node().body(job.id);
  if (!body.is_ok()) {
    reply("INTERNAL_ERROR\r\n");
    return;
  }
  std::string bytes;
  bytes.reserve(word.size() + body.value().size() + 48);
  bytes.append(word).append(" ").append(std::to_string(job.id)).append(" ");
  bytes.append(std::to_string(body.value().size())).append("\r\n");
  bytes.append(body.value()).append("\r\n");
  reply(std::move(bytes));
}

void Session::reply_yaml(const std::string& yaml) {
  reply("OK " + std::to_string(yaml.size()) + "\r\n" + yaml + "\r\n");
}

// Writes the replies at the front of the queue whose batch is durable, in order, in one write.
void Session::flush() {
  if (writing_ || closed_) return;
  const std::uint64_t durable = server_.node().durable();
  writing_bytes_.clear();
  while (!out_.empty() && out_.front().barrier <= durable) {
    writing_bytes_.append(out_.front().bytes);
    out_bytes_ -= out_.front().bytes.size();
    out_.pop_front();
  }
  if (read_paused_ && out_bytes_ <= kMaxQueuedReplyBytes / 2) {
    read_paused_ = false;
    read();
  }
  if (writing_bytes_.empty()) {
    if (closing_ && out_.empty()) close();
    return;
  }
  writing_ = true;
  boost::asio::async_write(
      socket_, boost::asio::buffer(writing_bytes_),
      [self = shared_from_this()](const boost::system::error_code& error, std::size_t) {
        self->writing_ = false;
        if (error) {
          self->close();
          return;
        }
        self->flush();
      });
}

void Session::close() {
  if (closed_) return;
  closed_ = true;
  boost::system::error_code ignored;
  socket_.shutdown(boost::asio::ip::tcp::socket::shutdown_both, ignored);
  socket_.close(ignored);
  server_.node().metrics().connection_closed(local::Protocol::kBeanstalk);
  server_.node().forget(client_);
  engine().disconnect(client_);  // its reserved jobs are ready again
  server_.node().touched();
  server_.closed(shared_from_this());
}

// --- reserve and its wait

void Session::finish_reserve(const engine::ReserveResult& result) {
  switch (result.kind) {
    case Kind::kReserved:
      reply_job("RESERVED", result.job);
      return;
    case Kind::kDeadlineSoon:
      reply("DEADLINE_SOON\r\n");
      return;
    case Kind::kTimedOut:
      reply("TIMED_OUT\r\n");
      return;
    case Kind::kWaiting:
      waiting_ = true;
      server_.node().on_wakeup(client_, [weak = weak_from_this()](const auto& woken) {
        if (auto self = weak.lock()) self->on_wakeup(woken);
      });
      return;
  }
}

void Session::on_wakeup(const engine::ReserveResult& result) {
  if (closed_) return;
  waiting_ = false;
  finish_reserve(result);
  process();  // commands that arrived during the wait
}

void Session::reserve(const Command&) {
  finish_reserve(engine().reserve(client_, std::nullopt));
}

void Session::reserve_with_timeout(const Command& command) {
  finish_reserve(
      engine().reserve(client_, engine::Millis{std::int64_t{command.timeout_seconds} * 1000}));
}

void Session::reserve_job(const Command& command) {
  auto job = engine().reserve_job(client_, command.id);
  if (!job.is_ok()) return reply_status(job.status());
  reply_job("RESERVED", job.value());
}

// --- producers and workers

// In drain mode a put is answered DRAINING; as in beanstalkd, which refuses the job only once
// it has read it, its connection still becomes a producer.
bool Session::refused_for_draining() {
  if (!server_.draining()) return false;
  engine().mark_producer(client_);
  reply("DRAINING\r\n");
  return true;
}

void Session::put(const Command& command) {
  if (refused_for_draining()) return;
  engine::PutRequest request;
  request.priority = command.priority;
  request.delay = engine::Millis{std::int64_t{command.delay_seconds} * 1000};
  request.ttr = engine::Seconds{command.ttr_seconds};
  request.body = command.body;
  auto put = engine().put(client_, request);
  if (!put.is_ok()) return reply_status(put.status());
  reply("INSERTED " + std::to_string(put.value().id) + "\r\n");
}

void Session::use(const Command& command) {
  if (Status s = engine().use(client_, command.tube); !s.is_ok()) return reply_status(s);
  reply("USING " + engine().used_tube(client_) + "\r\n");
}

void Session::erase(const Command& command) {
  reply_status(engine().erase(client_, command.id), "DELETED");
}

void Session::release(const Command& command) {
  reply_status(engine().release(client_, command.id, command.priority,
                                engine::Millis{std::int64_t{command.delay_seconds} * 1000}),
               "RELEASED");
}

void Session::bury(const Command& command) {
  reply_status(engine().bury(client_, command.id, command.priority), "BURIED");
}

void Session::touch(const Command& command) {
  reply_status(engine().touch(client_, command.id), "TOUCHED");
}

void Session::watch(const Command& command) {
  auto count = engine().watch(client_, command.tube);
  if (!count.is_ok()) return reply_status(count.status());
  reply("WATCHING " + std::to_string(count.value()) + "\r\n");
}

void Session::ignore(const Command& command) {
  auto count = engine().ignore(client_, command.tube);
  if (!count.is_ok()) return reply_status(count.status());
  reply("WATCHING " + std::to_string(count.value()) + "\r\n");
}

void Session::peeked(const Result<engine::JobView>& job) {
  if (!job.is_ok()) return reply_status(job.status());
  reply_job("FOUND", job.value());
}

void Session::peek(const Command& command) {
  peeked(engine().peek(command.id));
}
void Session::peek_ready(const Command&) {
  peeked(engine().peek_ready(engine().used_tube(client_)));
}
void Session::peek_delayed(const Command&) {
  peeked(engine().peek_delayed(engine().used_tube(client_)));
}
void Session::peek_buried(const Command&) {
  peeked(engine().peek_buried(engine().used_tube(client_)));
}

void Session::kick(const Command& command) {
  const std::size_t kicked = engine().kick(engine().used_tube(client_), command.bound);
  reply("KICKED " + std::to_string(kicked) + "\r\n");
}

void Session::kick_job(const Command& command) {
  reply_status(engine().kick_job(command.id), "KICKED");
}

void Session::pause_tube(const Command& command) {
  // "pause-tube t 0" ends a pause: beanstalkd turns 0 into 1 ns (prot.c OP_PAUSE_TUBE).
  reply_status(engine().pause_tube(command.tube, engine::Seconds{command.pause_seconds}), "PAUSED");
}

void Session::quit(const Command&) {
  closing_ = true;
}

// --- stats, in beanstalkd's YAML

void Session::stats_job(const Command& command) {
  auto found = engine().stats_job(command.id);
  if (!found.is_ok()) return reply_status(found.status());
  const engine::JobView& job = found.value();
  const std::int64_t now = engine().now();
  std::int64_t time_left = 0;
  if (job.state == JobState::kReserved) time_left = seconds_until(job.deadline_unix_ms, now);
  if (job.state == JobState::kDelayed) time_left = seconds_until(job.due_unix_ms, now);
  std::string yaml = "---\n";
  yaml += "id: " + std::to_string(job.id) + "\n";
  yaml += "tube: " + job.tube + "\n";
  yaml += "state: " + std::string(state_name(job.state)) + "\n";
  yaml += "pri: " + std::to_string(job.priority) + "\n";
  yaml +=
      "age: " + std::to_string(std::max<std::int64_t>(0, now - job.created_unix_ms) / 1000) + "\n";
  yaml += "delay: " + std::to_string(job.delay_ms / 1000) + "\n";
  yaml += "ttr: " + std::to_string(job.ttr.count()) + "\n";
  yaml += "time-left: " + std::to_string(time_left) + "\n";
  yaml += "file: 0\n";
  yaml += "reserves: " + std::to_string(job.counters.reserves) + "\n";
  yaml += "timeouts: " + std::to_string(job.counters.timeouts) + "\n";
  yaml += "releases: " + std::to_string(job.counters.releases) + "\n";
  yaml += "buries: " + std::to_string(job.counters.buries) + "\n";
  yaml += "kicks: " + std::to_string(job.counters.kicks) + "\n";
  reply_yaml(yaml);
}

void Session::stats_tube(const Command& command) {
  auto found = engine().stats_tube(command.tube);
  if (!found.is_ok()) return reply_status(found.status());
  const engine::TubeStats& t = found.value();
  std::string yaml = "---\n";
  yaml += "name: " + t.name + "\n";
  yaml += "current-jobs-urgent: " + std::to_string(t.urgent) + "\n";
  yaml += "current-jobs-ready: " + std::to_string(t.ready) + "\n";
  yaml += "current-jobs-reserved: " + std::to_string(t.reserved) + "\n";
  yaml += "current-jobs-delayed: " + std::to_string(t.delayed) + "\n";
  yaml += "current-jobs-buried: " + std::to_string(t.buried) + "\n";
  yaml += "total-jobs: " + std::to_string(t.total_jobs) + "\n";
  yaml += "current-using: " + std::to_string(t.using_clients) + "\n";
  yaml += "current-watching: " + std::to_string(t.watching_clients) + "\n";
  yaml += "current-waiting: " + std::to_string(t.waiting_clients) + "\n";
  yaml += "cmd-delete: " + std::to_string(t.deletes) + "\n";
  yaml += "cmd-pause-tube: " + std::to_string(t.pauses) + "\n";
  yaml += "pause: " + std::to_string(t.pause.count()) + "\n";
  yaml += "pause-time-left: " + std::to_string(seconds_until(t.pause_left.count(), 0)) + "\n";
  reply_yaml(yaml);
}

void Session::stats(const Command&) {
  const engine::ServerStats s = engine().stats();
  const auto cmd = [&s](Counter c) {
    return std::to_string(s.commands[static_cast<std::size_t>(c)]);
  };
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  utsname host{};
  uname(&host);
  const auto seconds = [](const timeval& t) {
    char text[32];
    std::snprintf(text, sizeof text, "%ld.%06ld", static_cast<long>(t.tv_sec),
                  static_cast<long>(t.tv_usec));
    return std::string(text);
  };
  std::string yaml = "---\n";
  yaml += "current-jobs-urgent: " + std::to_string(s.urgent) + "\n";
  yaml += "current-jobs-ready: " + std::to_string(s.ready) + "\n";
  yaml += "current-jobs-reserved: " + std::to_string(s.reserved) + "\n";
  yaml += "current-jobs-delayed: " + std::to_string(s.delayed) + "\n";
  yaml += "current-jobs-buried: " + std::to_string(s.buried) + "\n";
  yaml += "cmd-put: " + cmd(Counter::kPut) + "\n";
  yaml += "cmd-peek: " + cmd(Counter::kPeek) + "\n";
  yaml += "cmd-peek-ready: " + cmd(Counter::kPeekReady) + "\n";
  yaml += "cmd-peek-delayed: " + cmd(Counter::kPeekDelayed) + "\n";
  yaml += "cmd-peek-buried: " + cmd(Counter::kPeekBuried) + "\n";
  yaml += "cmd-reserve: " + cmd(Counter::kReserve) + "\n";
  yaml += "cmd-reserve-with-timeout: " + cmd(Counter::kReserveWithTimeout) + "\n";
  yaml += "cmd-delete: " + cmd(Counter::kDelete) + "\n";
  yaml += "cmd-release: " + cmd(Counter::kRelease) + "\n";
  yaml += "cmd-use: " + cmd(Counter::kUse) + "\n";
  yaml += "cmd-watch: " + cmd(Counter::kWatch) + "\n";
  yaml += "cmd-ignore: " + cmd(Counter::kIgnore) + "\n";
  yaml += "cmd-bury: " + cmd(Counter::kBury) + "\n";
  yaml += "cmd-kick: " + cmd(Counter::kKick) + "\n";
  yaml += "cmd-touch: " + cmd(Counter::kTouch) + "\n";
  yaml += "cmd-stats: " + cmd(Counter::kStats) + "\n";
  yaml += "cmd-stats-job: " + cmd(Counter::kStatsJob) + "\n";
  yaml += "cmd-stats-tube: " + cmd(Counter::kStatsTube) + "\n";
  yaml += "cmd-list-tubes: " + cmd(Counter::kListTubes) + "\n";
  yaml += "cmd-list-tube-used: " + cmd(Counter::kListTubeUsed) + "\n";
  yaml += "cmd-list-tubes-watched: " + cmd(Counter::kListTubesWatched) + "\n";
  yaml += "cmd-pause-tube: " + cmd(Counter::kPauseTube) + "\n";
  yaml += "job-timeouts: " + std::to_string(s.job_timeouts) + "\n";
  yaml += "total-jobs: " + std::to_string(s.total_jobs) + "\n";
  yaml += "max-job-size: " + std::to_string(server_.options().max_job_bytes) + "\n";
  yaml += "current-tubes: " + std::to_string(s.tubes) + "\n";
  yaml += "current-connections: " + std::to_string(s.connections) + "\n";
  yaml += "current-producers: " + std::to_string(s.producers) + "\n";
  yaml += "current-workers: " + std::to_string(s.workers) + "\n";
  yaml += "current-waiting: " + std::to_string(s.waiting) + "\n";
  yaml += "total-connections: " + std::to_string(s.total_connections) + "\n";
  yaml += "pid: " + std::to_string(::getpid()) + "\n";
  yaml += "version: \"1.12 (delayq 0.1.0)\"\n";
  yaml += "rusage-utime: " + seconds(usage.ru_utime) + "\n";
  yaml += "rusage-stime: " + seconds(usage.ru_stime) + "\n";
  yaml += "uptime: " + std::to_string(server_.uptime_seconds()) + "\n";
  yaml += "binlog-oldest-index: 0\n";
  yaml += "binlog-current-index: 0\n";
  yaml += "binlog-records-migrated: 0\n";
  yaml += "binlog-records-written: 0\n";
  yaml += "binlog-max-size: 0\n";
  yaml += std::string("draining: ") + (server_.draining() ? "true" : "false") + "\n";
  // As beanstalkd 1.12 prints them: strings bare, except the version and `os`, whose
  // "#1 SMP ..." a YAML reader would take for a comment unquoted (beanstalkd 1.13 quotes it).
  yaml += "id: " + server_id() + "\n";
  yaml += std::string("hostname: ") + host.nodename + "\n";
  yaml += std::string("os: \"") + host.version + "\"\n";
  yaml += std::string("platform: ") + host.machine + "\n";
  reply_yaml(yaml);
}

void Session::list_tubes(const Command&) {
  reply_yaml(yaml_list(engine().tubes()));
}
void Session::list_tube_used(const Command&) {
  reply("USING " + engine().used_tube(client_) + "\r\n");
}
void Session::list_tubes_watched(const Command&) {
  reply_yaml(yaml_list(engine().watched_tubes(client_)));
}

// --- delayq's extensions (docs/protocol.md)

std::int64_t Session::due_of(const When& when) {
  const auto ms = static_cast<std::int64_t>(when.ms);  // the parser keeps it below 2^63
  return when.absolute ? ms : engine().due_after(engine::Millis{ms});
}

void Session::putx(const Command& command) {
  if (refused_for_draining()) return;
  engine::PutRequest request;
  request.priority = command.priority;
  request.due_unix_ms = due_of(command.when);
  request.ttr = engine::Seconds{command.ttr_seconds};
  request.body = command.body;
  request.key = command.key;
  request.group = command.group;
  request.replace = command.replace;
  auto put = engine().put(client_, request);
  if (!put.is_ok()) return reply_status(put.status());
  const char* word = put.value().inserted ? "INSERTED " : "EXISTS ";
  reply(word + std::to_string(put.value().id) + "\r\n");
}

void Session::reschedule(const Command& command) {
  reply_status(engine().reschedule(command.id, due_of(command.when)), "RESCHEDULED");
}

void Session::reschedule_key(const Command& command) {
  auto id = engine().find_key(command.tube, command.key);
  if (!id.is_ok()) return reply_status(id.status());
  reply_status(engine().reschedule(id.value(), due_of(command.when)), "RESCHEDULED");
}

void Session::delete_key(const Command& command) {
  auto id = engine().find_key(command.tube, command.key);
  if (!id.is_ok()) return reply_status(id.status());
  reply_status(engine().erase(client_, id.value()), "DELETED");
}

void Session::peek_key(const Command& command) {
  peeked(engine().peek_key(command.tube, command.key));
}

void Session::list_group(const Command& command) {
  std::string yaml = "---\n";
  for (const engine::JobView& job : engine().list_group(command.tube, command.group)) {
    yaml += "- id: " + std::to_string(job.id) + "\n";
    yaml += "  state: " + std::string(state_name(job.state)) + "\n";
    yaml += "  due-unix-ms: " + std::to_string(job.due_unix_ms) + "\n";
    if (!job.key.empty()) yaml += "  key: " + quoted(job.key) + "\n";
  }
  reply_yaml(yaml);
}

void Session::cancel_group(const Command& command) {
  const std::size_t cancelled = engine().cancel_group(command.tube, command.group);
  reply("CANCELLED " + std::to_string(cancelled) + "\r\n");
}

}  // namespace delayq::front::beanstalk
