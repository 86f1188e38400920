// conversation.h — one beanstalkd client's side of the protocol, without its socket: bytes in,
// each command through one handler per verb (commands.cc) to its broker::Session, replies out
// in command order. A reply is queued in a slot when its command runs and filled when the
// broker completes it; slots leave from the front as they fill, so completions that arrive out
// of order still answer in order. A reserve stops the running of further commands until it has
// its answer, as in beanstalkd (the bytes keep being read, to see the client go). Over a broker
// that does not apply a session's calls in order (Redis), a command that could see or change
// what one before it does waits for that one's answer (may_run()), so that a pipeline runs as
// if sent one command at a time.
// The Connection (connection.h) feeds it bytes and writes what it emits; unit tests feed it
// directly over a fake broker. Runs on the broker's executor. Wire format: docs/protocol.md
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "broker/broker.h"
#include "front/beanstalk/parser.h"
#include "front/families.h"

namespace delayq::front::beanstalk {

// What beanstalkd counts of its connections and commands, for `stats`: the front-end's own
// facts, shared by every conversation of a server.
struct Tally {
  std::array<std::uint64_t, kVerbCount> commands{};  // by Verb: cmd-put, cmd-use, ...
  std::uint64_t connections = 0, total_connections = 0;
  std::uint64_t producers = 0, workers = 0;  // connections that have put / reserved
};

// What the conversations of one server share.
struct Context {
  broker::Broker& broker;
  ParserLimits limits;
  Tally tally;
  ProtocolCounts counts;  // "beanstalk" on the metrics page
};

class Conversation {
 public:
  // At most this many commands run in one go (one receive() or resume(), or the end of a
  // reserve): then the conversation yields if more input is left, so that one client's
  // pipelined flood of commands shares the thread with everyone else's. Another client's
  // command waits for about two turns of the flood (the one under way and the node's commit of
  // it), so this bounds their latency. Under a flood of pipelined puts a probe's p99 was 4.7-6x
  // its idle figure with 64, 1.7-4.3x with 16, which cost the flooder about 5% of its puts/s
  // (docs/BENCHMARKS.md, Overload).
  static constexpr std::size_t kCommandsPerTurn = 16;

  // What the conversation asks of its connection.
  class Peer {
   public:
    // The replies' bytes, in order, as they become sendable.
    virtual void write(std::string_view bytes) = 0;
    // Commands received are left to run: call resume() soon, once others have had their turn.
    virtual void yield() = 0;
    // Replies are queued past what a client may leave unread: no more commands run (those left
    // wait in the buffer) until resume(), once the client has read.
    [[nodiscard]] virtual bool backlogged() const = 0;

   protected:
    ~Peer() = default;
  };
  Conversation(Context& context, Peer& peer);
  ~Conversation();
  Conversation(const Conversation&) = delete;
  Conversation& operator=(const Conversation&) = delete;

  // Bytes from the client: runs the commands they complete, up to kCommandsPerTurn (none while a
  // reserve waits or a command is held); yields if more are left.
  void receive(std::string_view bytes);
  // Runs the next kCommandsPerTurn commands received, after a yield.
  void resume();
  // The client will send nothing more (half-close): a waiting reserve ends with TIMED_OUT, as
  // protocol.txt says; without one the commands already sent are run (a turn at a time, as
  // receive() runs them) and answered. Then done() comes.
  void end_input();
  // Quit was sent or input ended, and every reply has been emitted: close the connection.
  [[nodiscard]] bool done() const noexcept;
  // Bytes received and not yet run (a client sending while its reserve waits is bounded by it).
  [[nodiscard]] std::size_t buffered() const noexcept { return in_.size() - begin_; }
  // Part of a command has come and the rest has not (its line, its body, or a body too big
  // still being dropped).
  [[nodiscard]] bool partial() const noexcept {
    return (buffered() > 0 && !held_) || discard_ > 0 || discard_line_;
  }
  // A command has come whole and waits for the answers of those before it (may_run()).
  [[nodiscard]] bool held() const noexcept { return held_; }
  // Commands are left to run because the peer was backlogged: resume() once it is not.
  [[nodiscard]] bool backlogged() const noexcept { return backlogged_; }
  // Commands (and malformed lines) run since the start.
  [[nodiscard]] std::uint64_t ran() const noexcept { return ran_; }
  [[nodiscard]] bool waiting() const noexcept { return waiting_; }
  // Replies not yet emitted (their commands wait for the broker, or for one before them).
  [[nodiscard]] std::size_t pending() const noexcept { return slots_.size() - head_; }

 private:
  // What a command asks of the broker, for the order of a pipeline (may_run()).
  enum class Kind : std::uint8_t {
    kLocal,   // nothing (use, watch, ignore, their lists, quit): waits only for kOther
    kPut,     // put, putx: puts after puts are gathered in order
    kDelete,  // delete: deletes after deletes are gathered in order
    kOther,
  };
  static constexpr std::size_t kKinds = 4;
  struct Slot {
    std::string_view op;  // the verb, for metrics (static storage)
    std::string bytes;
    bool filled = false;
    Kind kind = Kind::kLocal;
  };
  struct Handlers;  // the table of handlers by verb (conversation.cc)
  friend struct Handlers;

  void process();
  bool step();  // one command or error from the buffer; false when it needs more input
  // Whether a command may run now: always where the broker applies a session's calls in order;
  // otherwise once every command before it is answered, except that a command of kLocal waits
  // only for those of kOther (stats count a tube's users and watchers), a put may follow puts
  // and a delete deletes (the broker keeps their order), and a reserve may follow deletes (its
  // call goes after theirs, or with them; and it cannot take a job they delete). An error
  // (BAD_FORMAT, ...) is answered at once and holds nothing.
  [[nodiscard]] bool may_run(Verb verb) const;
  static Kind kind_of(Verb verb);
  void count(Verb verb);
  void mark_producer();
  void mark_worker();

  // A slot for the reply of the command being run; fill() completes it, at once or later.
  std::uint64_t open_slot();
  void fill(std::uint64_t slot, std::string bytes);
  void reply(std::string bytes) { fill(open_slot(), std::move(bytes)); }
  void emit();
  // Completion helpers: a callback that fills a slot with what `format` makes of the value, or
  // the status's reply word. conflict_word: what kConflict reads (NOT_FOUND for beanstalkd's own
  // verbs, which have no CONFLICT).
  template <typename T, typename Format>
  broker::Callback<T> answer(Format format, std::string_view conflict_word = "NOT_FOUND");
  broker::Callback<broker::Job> answer_job(std::string_view word);

  // handlers (commands.cc)
  void put(const Command& command);
  void use(const Command& command);
  void reserve(const Command& command);
  void reserve_with_timeout(const Command& command);
  void reserve_job(const Command& command);
  void erase(const Command& command);
  void release(const Command& command);
  void bury(const Command& command);
  void touch(const Command& command);
  void watch(const Command& command);
  void ignore(const Command& command);
  void peek(const Command& command);
  void peek_ready(const Command& command);
  void peek_delayed(const Command& command);
  void peek_buried(const Command& command);
  void kick(const Command& command);
  void kick_job(const Command& command);
  void stats_job(const Command& command);
  void stats_tube(const Command& command);
  void stats(const Command& command);
  void list_tubes(const Command& command);
  void list_tube_used(const Command& command);
  void list_tubes_watched(const Command& command);
  void pause_tube(const Command& command);
  void quit(const Command& command);
  void putx(const Command& command);
  void reschedule(const Command& command);
  void reschedule_key(const Command& command);
  void delete_key(const Command& command);
  void peek_key(const Command& command);
  void list_group(const Command& command);
  void cancel_group(const Command& command);
  void max_attempts(const Command& command);
  void flow_tube(const Command& command);
  void start_reserve(std::optional<broker::Millis> timeout);
  void put_job(broker::PutRequest request, bool extension);

  Context& context_;
  Peer& peer_;
  std::unique_ptr<broker::Session> session_;
  // The server-wide calls (stats, tubes, pauses), opened at the first: most connections make none.
  broker::Admin& admin() {
    if (!admin_) admin_ = context_.broker.open_admin();
    return *admin_;
  }
  std::unique_ptr<broker::Admin> admin_;
  std::string_view op_ = "none";  // the verb being run, for metrics (static storage)
  Kind kind_ = Kind::kLocal;      // what the command being run asks of the broker
  std::array<std::size_t, kKinds> unanswered_{};  // slots not yet filled, by kind
  bool held_ = false;        // the next command waits for the answers of those before it
  bool backlogged_ = false;  // process() stopped for the peer's queued replies
  std::string in_;           // bytes received; those from begin_ on are not yet run
  std::size_t begin_ = 0;
  std::uint64_t ran_ = 0;
  std::size_t discard_ = 0;  // bytes still to drop (the body of a job too big)
  bool discard_line_ = false;
  bool put_counted_ = false;  // the put at the head of in_, still short of its body, has counted
  bool producer_ = false, worker_ = false;
  bool waiting_ = false;  // a reserve has no answer yet: no further command runs
  std::uint64_t reserve_ticket_ = 0;
  bool closing_ = false;      // quit, or input ended and run: no further command runs
  bool input_ended_ = false;  // end_input() came
  // Replies in command order: slots_[head_] is the first not yet emitted, numbered first_slot_.
  // A vector, not a deque: an idle connection holds no allocation for it.
  std::vector<Slot> slots_;
  std::size_t head_ = 0;
  std::uint64_t first_slot_ = 0;
};

// The reply for a failed operation: one table for the whole front-end. conflict_word is what
// kConflict reads (beanstalkd's own verbs have no CONFLICT: NOT_FOUND).
[[nodiscard]] std::string status_reply(const Status& status, std::string_view conflict_word);

template <typename T, typename Format>
broker::Callback<T> Conversation::answer(Format format, std::string_view conflict_word) {
  const std::uint64_t slot = open_slot();
  return [this, slot, format = std::move(format), conflict_word](Result<T> result) {
    if (!result.is_ok()) return fill(slot, status_reply(result.status(), conflict_word));
    fill(slot, format(result.value()));
  };
}

}  // namespace delayq::front::beanstalk
