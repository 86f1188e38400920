#include "front/beanstalk/conversation.h"

#include <algorithm>

namespace delayq::front::beanstalk {
namespace {

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

}  // namespace

std::string status_reply(const Status& status, std::string_view conflict_word) {
  std::string_view word = "INTERNAL_ERROR";
  switch (status.code()) {
    case Code::kOk:
      word = "OK";
      break;
    case Code::kNotFound:
      word = "NOT_FOUND";
      break;
    case Code::kConflict:
      word = conflict_word;
      break;
    case Code::kNotIgnored:
      word = "NOT_IGNORED";
      break;
    case Code::kInvalidArgument:
      word = "BAD_FORMAT";
      break;
    case Code::kDeadlineSoon:
      word = "DEADLINE_SOON";
      break;
    case Code::kTimedOut:
      word = "TIMED_OUT";
      break;
    case Code::kLimit:
    case Code::kNoSpace:
      word = "OUT_OF_MEMORY";
      break;
    case Code::kDraining:
      word = "DRAINING";
      break;
    case Code::kCorruption:
    case Code::kNotSupported:
    case Code::kUnknownFormat:
    case Code::kIOError:
      word = "INTERNAL_ERROR";
      break;
  }
  std::string reply(word);
  reply += "\r\n";
  return reply;
}

// One entry per verb, in Verb order (checked below), each naming its verb.
struct Conversation::Handlers {
  struct Entry {
    Verb verb;
    void (Conversation::*run)(const Command&);
    bool counted;  // beanstalkd counts it in a cmd-* stat
  };
  static constexpr Entry kTable[] = {
      {Verb::kPut, &Conversation::put, true},
      {Verb::kUse, &Conversation::use, true},
      {Verb::kReserve, &Conversation::reserve, true},
      {Verb::kReserveWithTimeout, &Conversation::reserve_with_timeout, true},
      {Verb::kReserveJob, &Conversation::reserve_job, true},
      {Verb::kDelete, &Conversation::erase, true},
      {Verb::kRelease, &Conversation::release, true},
      {Verb::kBury, &Conversation::bury, true},
      {Verb::kTouch, &Conversation::touch, true},
      {Verb::kWatch, &Conversation::watch, true},
      {Verb::kIgnore, &Conversation::ignore, true},
      {Verb::kPeek, &Conversation::peek, true},
      {Verb::kPeekReady, &Conversation::peek_ready, true},
      {Verb::kPeekDelayed, &Conversation::peek_delayed, true},
      {Verb::kPeekBuried, &Conversation::peek_buried, true},
      {Verb::kKick, &Conversation::kick, true},
      {Verb::kKickJob, &Conversation::kick_job, true},
      {Verb::kStatsJob, &Conversation::stats_job, true},
      {Verb::kStatsTube, &Conversation::stats_tube, true},
      {Verb::kStats, &Conversation::stats, true},
      {Verb::kListTubes, &Conversation::list_tubes, true},
      {Verb::kListTubeUsed, &Conversation::list_tube_used, true},
      {Verb::kListTubesWatched, &Conversation::list_tubes_watched, true},
      {Verb::kPauseTube, &Conversation::pause_tube, true},
      {Verb::kQuit, &Conversation::quit, false},
      // delayq's extensions have no beanstalkd counter
      {Verb::kPutX, &Conversation::putx, false},
      {Verb::kReschedule, &Conversation::reschedule, false},
      {Verb::kRescheduleKey, &Conversation::reschedule_key, false},
      {Verb::kDeleteKey, &Conversation::delete_key, false},
      {Verb::kPeekKey, &Conversation::peek_key, false},
      {Verb::kListGroup, &Conversation::list_group, false},
      {Verb::kCancelGroup, &Conversation::cancel_group, false},
      {Verb::kMaxAttempts, &Conversation::max_attempts, false},
      {Verb::kFlowTube, &Conversation::flow_tube, false},
  };
  static_assert(std::size(kTable) == kVerbCount);
  static constexpr bool in_verb_order() {
    for (std::size_t i = 0; i < kVerbCount; ++i) {
      if (static_cast<std::size_t>(kTable[i].verb) != i) return false;
    }
    return true;
  }
  static const Entry& of(Verb verb) {
    static_assert(in_verb_order());  // here the struct is complete
    return kTable[static_cast<std::size_t>(verb)];
  }
};

Conversation::Conversation(Context& context, Peer& peer)
    : context_(context),
      peer_(peer),
      session_(context.broker.open_session(broker::SessionOptions{})) {
  ++context_.tally.connections;
  ++context_.tally.total_connections;
}

Conversation::~Conversation() {
  session_.reset();  // its reserved jobs are ready again; no completion of it runs any more
  admin_.reset();
  --context_.tally.connections;
  if (producer_) --context_.tally.producers;
  if (worker_) --context_.tally.workers;
}

void Conversation::receive(std::string_view bytes) {
  in_.append(bytes);
  process();
}

void Conversation::resume() {
  process();
}

void Conversation::end_input() {
  if (closing_ || input_ended_) return;
  input_ended_ = true;
  // A wait in reserve waits no longer: it answers a job ready now, or TIMED_OUT, as beanstalkd's
  // does; its completion runs the commands sent after it (a reserve among them that finds no job
  // answers TIMED_OUT at once: start_reserve), and the last turn closes.
  if (waiting_ && reserve_ticket_ != 0) {
    (void)session_->stop_waiting(std::exchange(reserve_ticket_, 0));
    return;
  }
  process();  // what is left runs, a turn at a time; the last turn closes
}

bool Conversation::done() const noexcept {
  return closing_ && !waiting_ && pending() == 0;
}

void Conversation::process() {
  bool yielded = false;
  backlogged_ = false;
  for (std::size_t run = 0; !waiting_ && !closing_; ++run) {
    // A full turn with input left: yield. With none left, there is nothing to share the thread
    // for: the connection reads on.
    if (run == kCommandsPerTurn && buffered() > 0) {
      yielded = true;
      peer_.yield();
      break;
    }
    // A client that does not read its replies: the commands it sent wait, not their replies
    // (pipelined peeks of big jobs would otherwise queue a reply each, without bound).
    if (buffered() > 0 && peer_.backlogged()) {
      backlogged_ = true;
      break;
    }
    if (!step()) break;
    ++ran_;
  }
  // What ran leaves the buffer in one move, not one per command, once it is half the buffer
  // (commands held and run one at a time must not move the rest each time); a buffer a burst
  // grew goes.
  if (begin_ >= in_.size() / 2) {
    in_.erase(0, begin_);
    begin_ = 0;
  }
  if (in_.empty() && in_.capacity() > 4096) in_ = std::string();
  // Nothing more will come and what came has run: close. A reserve still to answer (waiting for
  // the durability of what it depends on), or a command held for the answers before it, runs
  // this again when it has them.
  if (input_ended_ && !yielded && !backlogged_ && !closing_ && !waiting_ && !held_) {
    closing_ = true;
    emit();
  }
}

void Conversation::count(Verb verb) {
  if (Handlers::of(verb).counted) {
    ++context_.tally.commands[static_cast<std::size_t>(verb)];
  }
}

// beanstalkd's current-producers and current-workers: connections that have put, and that have
// asked for a job.
void Conversation::mark_producer() {
  if (!producer_) {
    producer_ = true;
    ++context_.tally.producers;
  }
}

void Conversation::mark_worker() {
  if (!worker_) {
    worker_ = true;
    ++context_.tally.workers;
  }
}

bool Conversation::step() {
  const std::string_view input = std::string_view(in_).substr(begin_);
  if (discard_ > 0) {
    const std::size_t n = std::min(discard_, input.size());
    begin_ += n;
    discard_ -= n;
    if (discard_ > 0) return false;
    reply("JOB_TOO_BIG\r\n");
    return true;
  }
  if (discard_line_) {
    const Skipped skipped = skip_line(input);
    begin_ += skipped.consumed;
    if (!skipped.line_ended) return false;
    discard_line_ = false;
    reply("BAD_FORMAT\r\n");
    return true;
  }
  const Parsed parsed = parse(input, context_.limits);
  // Left in the buffer, not counted yet: parsed again once those before it are answered.
  if (parsed.kind == Parsed::Kind::kCommand && !may_run(parsed.command.verb)) {
    held_ = true;
    return false;
  }
  // A put counts (and makes a producer) once its line is accepted, as in beanstalkd, even if its
  // body never comes whole: counted when first seen waiting for it, not again when it is whole.
  // A line beanstalkd counts before refusing it (Parsed::counted) counts when first seen too.
  const bool counted_already = put_counted_;
  put_counted_ = parsed.kind == Parsed::Kind::kNeedMore && parsed.counted;
  if ((parsed.kind == Parsed::Kind::kCommand || parsed.counted) && !counted_already) {
    count(parsed.command.verb);
  }
  switch (parsed.kind) {
    case Parsed::Kind::kNeedMore:
      if (put_counted_ && !counted_already) mark_producer();
      return false;
    case Parsed::Kind::kError:
      op_ = "error";
      if (parsed.error == Error::kUnknownCommand &&
          http_request_line(input.substr(0, parsed.consumed))) {
        // A web page may send an HTTP request to any port, its body's lines then read as
        // commands (a form's "put ..."): nothing of it runs, and the connection closes.
        closing_ = true;
        return true;
      }
      begin_ += parsed.consumed;
      if (parsed.error == Error::kExpectedCrlf) mark_producer();  // as above
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
      kind_ = kind_of(parsed.command.verb);
      (this->*Handlers::of(parsed.command.verb).run)(
          parsed.command);  // its views point into in_, which no handler changes
      kind_ = Kind::kLocal;
      begin_ += parsed.consumed;
      return true;
    }
  }
  return false;
}

// --- replies, in command order

std::uint64_t Conversation::open_slot() {
  slots_.push_back(Slot{op_, {}, false, kind_});
  ++unanswered_[static_cast<std::size_t>(kind_)];
  return first_slot_ + pending() - 1;
}

Conversation::Kind Conversation::kind_of(Verb verb) {
  switch (verb) {
    case Verb::kUse:
    case Verb::kWatch:
    case Verb::kIgnore:
    case Verb::kListTubeUsed:
    case Verb::kListTubesWatched:
    case Verb::kQuit:
      return Kind::kLocal;
    case Verb::kPut:
    case Verb::kPutX:
      return Kind::kPut;
    case Verb::kDelete:
      return Kind::kDelete;
    default:
      return Kind::kOther;
  }
}

bool Conversation::may_run(Verb verb) const {
  if (context_.broker.applies_calls_in_order()) return true;
  const auto unanswered = [this](Kind k) { return unanswered_[static_cast<std::size_t>(k)]; };
  const std::size_t puts = unanswered(Kind::kPut);
  const std::size_t deletes = unanswered(Kind::kDelete);
  const std::size_t others = unanswered(Kind::kOther);
  switch (kind_of(verb)) {
    case Kind::kLocal:  // a stats-tube counts the tube's users and watchers
      return others == 0;
    case Kind::kPut:
      return others + deletes == 0;
    case Kind::kDelete:
      return others + puts == 0;
    case Kind::kOther:
      break;
  }
  const bool reserve = verb == Verb::kReserve || verb == Verb::kReserveWithTimeout;
  return others + puts + (reserve ? 0 : deletes) == 0;
}

void Conversation::fill(std::uint64_t slot, std::string bytes) {
  DELAYQ_CHECK(slot >= first_slot_ && slot - first_slot_ < pending());
  Slot& s = slots_[head_ + (slot - first_slot_)];
  DELAYQ_CHECK(!s.filled);  // a call completed twice would leave a command held for good
  context_.counts.op(s.op, static_reply_word(bytes));
  s.bytes = std::move(bytes);
  s.filled = true;
  --unanswered_[static_cast<std::size_t>(s.kind)];
  emit();
  // The command held for this answer, and those after it, run now.
  if (held_) {
    held_ = false;
    process();
  }
}

// Hands every filled slot at the front to the output, as one piece. The piece is built here, not
// kept between calls: an idle conversation holds no buffer for it.
void Conversation::emit() {
  std::string piece;
  while (head_ < slots_.size() && slots_[head_].filled) {
    if (piece.empty()) {
      piece = std::move(slots_[head_].bytes);  // the usual single reply: no copy
    } else {
      piece.append(slots_[head_].bytes);
    }
    slots_[head_].bytes = std::string();
    ++head_;
    ++first_slot_;
  }
  if (head_ == slots_.size()) {
    slots_.clear();  // nothing pending: an idle connection keeps little
    head_ = 0;
    if (slots_.capacity() > 64) slots_.shrink_to_fit();
  } else if (head_ >= 64 && head_ * 2 >= slots_.size()) {
    slots_.erase(slots_.begin(), slots_.begin() + static_cast<std::ptrdiff_t>(head_));
    head_ = 0;
  }
  if (!piece.empty()) peer_.write(piece);
}

}  // namespace delayq::front::beanstalk
