// connection.h — one beanstalkd client's socket: reads bytes into its Conversation and writes
// what the conversation emits, one write at a time. A client that does not read its replies is
// not read either (past 256 KiB of replies queued), and one that keeps sending while its reserve
// waits gets no more room than one command's worth. Owned by the Server; runs on the broker's
// executor.
#pragma once

#include <boost/asio/ip/tcp.hpp>
#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "front/beanstalk/conversation.h"
#include "front/listener.h"

namespace delayq::front::beanstalk {

class Server;

class Connection final : public std::enable_shared_from_this<Connection>,
                         private Conversation::Peer {
 public:
  Connection(Server& server, Socket socket);
  void start();
  void close();
  // Waiting for the rest of a command (partial), for longer than the command timeout (stalled).
  [[nodiscard]] bool partial() const noexcept { return partial_since_.has_value(); }
  [[nodiscard]] bool stalled(std::chrono::steady_clock::time_point now) const;

 private:
  void read();
  void on_read(const boost::system::error_code& error, std::string_view bytes);
  void after_commands();
  [[nodiscard]] std::size_t behind_a_wait() const;
  void write(std::string_view bytes) override;     // queues replies
  void yield() override;                           // resumes the conversation in a later turn
  [[nodiscard]] bool backlogged() const override;  // replies queued past kMaxQueuedReplyBytes
  void flush();
  void maybe_close();

  Server& server_;
  Socket socket_;
  std::optional<Conversation> conversation_;  // in place: one allocation per connection fewer
  bool closed_ = false;
  bool writing_ = false;
  bool write_deferred_ = false;  // a write is queued on the executor
  bool read_paused_ = false;
  bool reading_ = false;
  bool yielded_ = false;  // the conversation has commands left: a resume is posted
  // When the command now partly received began to arrive (unset while none is), and how many
  // commands the conversation had run then.
  std::optional<std::chrono::steady_clock::time_point> partial_since_;
  std::uint64_t partial_mark_ = 0;
  // Replies not yet handed to the socket, and those being written; made at the first reply, so
  // that a connection that never spoke holds no buffers.
  struct Buffers {
    std::string queued;
    std::string writing;
  };
  std::unique_ptr<Buffers> buffers_;
  [[nodiscard]] std::size_t queued_bytes() const { return buffers_ ? buffers_->queued.size() : 0; }
};

}  // namespace delayq::front::beanstalk
