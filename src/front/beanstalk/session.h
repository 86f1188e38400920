// session.h — one beanstalkd connection: bytes in, commands through one handler per verb
// (a table in session.cc), replies out in order once durable. Owned by the Server; lives on the
// node's io_context thread. Reply words and YAML follow beanstalkd 1.12 (docs/protocol.md).
#pragma once

#include <boost/asio/ip/tcp.hpp>
#include <cstdint>
#include <deque>
#include <memory>
#include <string>

#include "engine/engine.h"
#include "front/beanstalk/parser.h"

namespace delayq::front::beanstalk {

class Server;

class Session : public std::enable_shared_from_this<Session> {
 public:
  Session(Server& server, boost::asio::ip::tcp::socket socket);
  void start();
  // Sends what has become durable; the server calls it whenever the node's durable() moves.
  void flush();
  void close();

 private:
  struct Reply {
    std::uint64_t barrier;  // may leave once the node's durable() reaches it
    std::string bytes;
  };
  using Handler = void (Session::*)(const Command&);
  static const Handler kHandlers[kVerbCount];  // by Verb

  void read();
  void process();
  bool step();  // one command or error from the buffer; false when it needs more input
  void reply(std::string bytes);
  void reply_job(std::string_view word, const engine::JobView& job);
  void reply_yaml(const std::string& yaml);
  // The reply for a failed command, or ok_word when the status is ok.
  void reply_status(const Status& status, std::string_view ok_word = "OK");
  void on_wakeup(const engine::ReserveResult& result);
  void finish_reserve(const engine::ReserveResult& result);
  [[nodiscard]] engine::Engine& engine();

  void put(const Command& command);
  bool refused_for_draining();
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
  // delayq's extensions
  void putx(const Command& command);
  void reschedule(const Command& command);
  void reschedule_key(const Command& command);
  void delete_key(const Command& command);
  void peek_key(const Command& command);
  void list_group(const Command& command);
  void cancel_group(const Command& command);
  [[nodiscard]] std::int64_t due_of(const When& when);
  void peeked(const Result<engine::JobView>& job);

  Server& server_;
  boost::asio::ip::tcp::socket socket_;
  engine::ClientId client_ = 0;
  std::string_view op_ = "none";  // the verb being answered, for metrics (static storage)
  std::string in_;                // bytes read and not yet parsed
  std::size_t discard_ = 0;       // bytes still to drop (the body of a job too big)
  bool discard_line_ = false;
  bool put_counted_ = false;  // the put at the head of in_, still short of its body, has counted
  bool waiting_ = false;      // in reserve: no further command runs until it ends
  bool closing_ = false;      // quit: close once the replies are out
  bool closed_ = false;
  bool writing_ = false;
  std::deque<Reply> out_;
  std::size_t out_bytes_ = 0;  // in out_
  bool read_paused_ = false;   // a client that does not read its replies is not read either
  std::string writing_bytes_;
  char read_buffer_[16384];
};

}  // namespace delayq::front::beanstalk
