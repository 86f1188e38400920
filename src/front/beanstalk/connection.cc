#include "front/beanstalk/connection.h"

#include <boost/asio/defer.hpp>
#include <boost/asio/write.hpp>

#include "front/beanstalk/server.h"

namespace delayq::front::beanstalk {
namespace {

// Replies queued for a client beyond this, or this many commands waiting for their replies (or
// this many bytes of commands held behind the answers of those before them), stop the reading
// of its commands until it catches up.
constexpr std::size_t kMaxQueuedReplyBytes = std::size_t{256} << 10;
constexpr std::size_t kMaxPendingReplies = 65536;

}  // namespace

Connection::Connection(Server& server, Socket socket)
    : server_(server), socket_(std::move(socket)) {}

void Connection::start() {
  boost::system::error_code ignored;
  socket_.non_blocking(true, ignored);  // read_some after a wait must not block
  server_.context().counts.opened();
  // The conversation is this connection's: it never outlives it.
  conversation_.emplace(server_.context(), static_cast<Conversation::Peer&>(*this));
  read();
}

void Connection::read() {
  if (reading_ || closed_ || yielded_) return;  // after a yield: once the commands have run
  if (queued_bytes() > kMaxQueuedReplyBytes || conversation_->pending() > kMaxPendingReplies ||
      (conversation_->held() && conversation_->buffered() > kMaxQueuedReplyBytes) ||
      (conversation_->waiting() && conversation_->buffered() >= behind_a_wait())) {
    read_paused_ = true;
    return;
  }
  read_paused_ = false;
  reading_ = true;
  // Wait for bytes, then read them into the server's one buffer: an idle connection holds no
  // read buffer of its own (the conversation keeps only what it has not run yet).
  socket_.async_wait(
      Socket::wait_read, [self = shared_from_this()](const boost::system::error_code& error) {
        self->reading_ = false;
        if (error) return self->on_read(error, {});
        std::span<char> buffer = self->server_.read_buffer();
        if (self->conversation_->waiting()) {
          const std::size_t buffered = self->conversation_->buffered();
          const std::size_t room = self->behind_a_wait();
          if (buffered >= room) return self->read();  // paused there
          buffer = buffer.first(std::min(buffer.size(), room - buffered));
        }
        boost::system::error_code read_error;
        const std::size_t bytes =
            self->socket_.read_some(boost::asio::buffer(buffer.data(), buffer.size()), read_error);
        if (read_error == boost::asio::error::would_block) return self->read();
        self->on_read(read_error, std::string_view(buffer.data(), bytes));
      });
}

// What may be read behind a waiting reserve: one command's worth (its end may be a half-close,
// which ends the wait); the rest waits in the socket, as beanstalkd reads nothing then.
std::size_t Connection::behind_a_wait() const {
  const ParserLimits& limits = server_.context().limits;
  return std::max(limits.max_line_bytes, limits.max_extension_line_bytes) + limits.max_job_bytes +
         2;
}

void Connection::on_read(const boost::system::error_code& error, std::string_view bytes) {
  if (closed_) return;
  if (error == boost::asio::error::eof) {
    // The client is done sending: answer what it sent, then close.
    conversation_->receive(bytes);
    if (!closed_) conversation_->end_input();
    return maybe_close();
  }
  if (error) return close();
  // A command begun longer ago than the timeout is not let through by its last bytes coming in
  // one piece: the connection closes when they come, before they run.
  if (partial_since_ &&
      std::chrono::steady_clock::now() - *partial_since_ > server_.options().command_timeout) {
    return close();
  }
  conversation_->receive(bytes);
  after_commands();
}

// After a turn of commands: close, or read on unless the conversation yielded (its resume comes
// back here).
void Connection::after_commands() {
  if (closed_ || yielded_) return;
  // A command that has been arriving for longer than the timeout: a slowloris, or a client too
  // slow to serve. Its clock starts when the input stops at a new incomplete command (the
  // conversation has run more since the last look); a reserve that waits is the client's to
  // end, not this check's.
  if (conversation_->partial() && !conversation_->waiting()) {
    const auto now = std::chrono::steady_clock::now();
    if (partial_since_ && partial_mark_ == conversation_->ran()) {
      if (now - *partial_since_ > server_.options().command_timeout) return close();
    } else {
      partial_since_ = now;
      partial_mark_ = conversation_->ran();
      server_.watch_partial();
    }
  } else {
    partial_since_.reset();
  }
  maybe_close();
  read();
}

// Posted, not run here: the handlers already queued (other clients' commands, the broker's
// turn) go first.
void Connection::yield() {
  if (yielded_) return;
  yielded_ = true;
  boost::asio::post(socket_.get_executor(), [self = shared_from_this()] {
    self->yielded_ = false;
    if (self->closed_) return;
    self->conversation_->resume();
    self->after_commands();
  });
}

bool Connection::backlogged() const {
  return queued_bytes() > kMaxQueuedReplyBytes;
}

// Replies emitted while the event loop runs one handler (a burst of commands, a batch made
// durable) leave in one write: the write is deferred until that handler is done.
void Connection::write(std::string_view bytes) {
  if (!buffers_) buffers_ = std::make_unique<Buffers>();
  buffers_->queued.append(bytes);
  if (write_deferred_ || writing_) return;
  write_deferred_ = true;
  boost::asio::defer(socket_.get_executor(), [self = shared_from_this()] {
    self->write_deferred_ = false;
    self->flush();
  });
}

// Hands everything queued to the socket in one write.
void Connection::flush() {
  if (writing_ || closed_ || queued_bytes() == 0) return;
  writing_ = true;
  buffers_->writing.clear();
  buffers_->writing.swap(buffers_->queued);
  boost::asio::async_write(
      socket_, boost::asio::buffer(buffers_->writing),
      [self = shared_from_this()](const boost::system::error_code& error, std::size_t) {
        self->writing_ = false;
        if (self->closed_) return;
        if (error) return self->close();
        self->flush();
        // Commands left while the client was not reading run now that it has.
        if (self->conversation_->backlogged() && !self->backlogged() && !self->yielded_) {
          self->conversation_->resume();
          return self->after_commands();
        }
        self->maybe_close();
        if (self->read_paused_) self->read();
      });
}

// Only while it reads: a command held up by the server (replies not read, a yield) is not the
// client's delay.
bool Connection::stalled(std::chrono::steady_clock::time_point now) const {
  return !closed_ && reading_ && !read_paused_ && partial_since_ &&
         partial_mark_ == conversation_->ran() &&
         now - *partial_since_ > server_.options().command_timeout;
}

void Connection::maybe_close() {
  if (!closed_ && conversation_->done() && !writing_ && queued_bytes() == 0) close();
}

void Connection::close() {
  if (closed_) return;
  closed_ = true;
  boost::system::error_code ignored;
  socket_.shutdown(Socket::shutdown_both, ignored);
  socket_.close(ignored);
  server_.context().counts.closed();
  conversation_.reset();  // its session goes: its reserved jobs are ready again
  server_.closed(shared_from_this());
}

}  // namespace delayq::front::beanstalk
