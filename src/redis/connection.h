// connection.h — one pipelined TCP connection to one Redis node.
// send() queues a command and returns at once; commands leave in the order sent, coalesced into
// as few writes as there are bursts, and each completes, in that order, with its reply. The
// connection opens on the first send (resolve, connect within connect_timeout) and is never
// reopened: once broken (refused, reset, a protocol error, no reply within reply_timeout) it
// fails every queued command and stays broken, and its owner makes a new one. A failed command
// says whether it may have reached Redis (`written`): one that was never written can be sent
// again safely, the others' outcome is unknown. Owned through shared_ptr (its handlers hold
// one); every call on the executor it was made with. Used by redis::Client.
#pragma once

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string>

#include "base/status.h"
#include "redis/reply.h"

namespace delayq::redis {

using Millis = std::chrono::milliseconds;

struct ConnectionOptions {
  // How long resolving and connecting may take. Default: 2 s.
  Millis connect_timeout{2000};
  // How long the oldest written command may wait for its reply before the node is taken for
  // dead and the connection dropped. Must exceed the longest command sent (a script, a WAIT's
  // own timeout). Default: 5 s.
  Millis reply_timeout{5000};
};

// What became of one command.
struct Outcome {
  Status status;         // ok: `reply` is Redis's answer, which may be an error reply
  bool written = false;  // not ok: whether the command may have reached Redis
  Reply reply;
};

class Connection : public std::enable_shared_from_this<Connection> {
 public:
  using Done = std::function<void(Outcome)>;

  Connection(boost::asio::any_io_executor executor, std::string host, std::uint16_t port,
             ConnectionOptions options);
  ~Connection();
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  // Queues `command`; `done` runs once, on the executor, never inside this call.
  void send(const Command& command, Done done);
  // Breaks the connection: every queued command fails with `why`.
  void close(Status why);
  // Makes this a subscriber's connection: a published message (["message", channel, payload]
  // after SUBSCRIBE, ["smessage", ...] after SSUBSCRIBE) goes to `handler` instead of completing
  // a command.
  void on_message(std::function<void(std::string channel, std::string payload)> handler) {
    message_handler_ = std::move(handler);
  }
  // Where a node's own word that a shard channel's subscription ended goes (["sunsubscribe",
  // channel, count], sent unasked when the channel's slot leaves the node), instead of
  // completing a command. (So a SUNSUBSCRIBE must not be sent on such a connection: its answer
  // would come here.)
  void on_unsubscribed(std::function<void(std::string channel)> handler) {
    unsubscribed_handler_ = std::move(handler);
  }
  // Who to tell, once, when the connection breaks (after the failed commands' completions).
  void on_broken(std::function<void(const Status&)> handler) {
    broken_handler_ = std::move(handler);
  }

  [[nodiscard]] bool broken() const noexcept { return state_ == State::kBroken; }
  // "host:port", as given.
  [[nodiscard]] const std::string& address() const noexcept { return address_; }

 private:
  enum class State { kIdle, kConnecting, kOpen, kBroken };
  struct Pending {
    Done done;
    bool written = false;
    std::chrono::steady_clock::time_point written_at;
  };

  void open();
  void on_connected(const boost::system::error_code& error);
  void write();
  void read();
  void on_read(std::size_t bytes);
  void watch();
  void fail(Status why);

  boost::asio::any_io_executor executor_;
  std::string host_;
  std::uint16_t port_;
  std::string address_;
  ConnectionOptions options_;
  boost::asio::ip::tcp::resolver resolver_;
  boost::asio::ip::tcp::socket socket_;
  boost::asio::steady_timer connect_timer_;
  boost::asio::steady_timer reply_timer_;
  State state_ = State::kIdle;
  Status broken_why_;    // why, once broken
  std::string outbox_;   // encoded commands not yet handed to a write
  std::string writing_;  // the bytes of the write under way
  bool watching_ = false;
  std::size_t unwritten_ = 0;  // how many of the last entries of pending_ sit in outbox_
  std::deque<Pending> pending_;
  std::function<void(std::string, std::string)> message_handler_;
  std::function<void(std::string)> unsubscribed_handler_;
  std::function<void(const Status&)> broken_handler_;
  ReplyReader reader_;
  std::unique_ptr<char[]> buffer_;
};

}  // namespace delayq::redis
