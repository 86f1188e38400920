#include "redis/connection.h"

#include <boost/asio/connect.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/write.hpp>
#include <utility>

namespace delayq::redis {
namespace asio = boost::asio;
using tcp = asio::ip::tcp;

namespace {
constexpr std::size_t kReadSize = 64 * 1024;
}

Connection::Connection(asio::any_io_executor executor, std::string host, std::uint16_t port,
                       ConnectionOptions options)
    : executor_(std::move(executor)),
      host_(std::move(host)),
      port_(port),
      address_(host_ + ":" + std::to_string(port)),
      options_(options),
      resolver_(executor_),
      socket_(executor_),
      connect_timer_(executor_),
      reply_timer_(executor_),
      buffer_(std::make_unique<char[]>(kReadSize)) {}

Connection::~Connection() = default;

void Connection::send(const Command& command, Done done) {
  if (state_ == State::kBroken) {
    asio::post(executor_, [done = std::move(done), why = broken_why_] { done({why, false, {}}); });
    return;
  }
  command.encode(outbox_);
  pending_.push_back({std::move(done), false, {}});
  ++unwritten_;
  if (state_ == State::kIdle) {
    open();
  } else if (state_ == State::kOpen) {
    write();
  }
}

void Connection::close(Status why) {
  fail(std::move(why));
}

void Connection::open() {
  state_ = State::kConnecting;
  connect_timer_.expires_after(options_.connect_timeout);
  connect_timer_.async_wait([self = shared_from_this()](const boost::system::error_code& error) {
    if (error || self->state_ != State::kConnecting) return;
    self->fail(Status(Code::kIOError, "connect to " + self->address_ + ": no answer within " +
                                          std::to_string(self->options_.connect_timeout.count()) +
                                          " ms"));
  });
  resolver_.async_resolve(
      host_, std::to_string(port_),
      [self = shared_from_this()](const boost::system::error_code& error,
                                  const tcp::resolver::results_type& results) {
        if (self->state_ != State::kConnecting) return;
        if (error) {
          self->fail(Status(Code::kIOError, "resolve " + self->host_ + ": " + error.message()));
          return;
        }
        asio::async_connect(self->socket_, results,
                            [self](const boost::system::error_code& connect_error,
                                   const tcp::endpoint&) { self->on_connected(connect_error); });
      });
}

void Connection::on_connected(const boost::system::error_code& error) {
  if (state_ != State::kConnecting) return;
  if (error) {
    fail(Status(Code::kIOError, "connect to " + address_ + ": " + error.message()));
    return;
  }
  connect_timer_.cancel();
  boost::system::error_code ignored;
  socket_.set_option(tcp::no_delay(true), ignored);
  state_ = State::kOpen;
  read();
  write();
}

void Connection::write() {
  if (!writing_.empty() || outbox_.empty()) return;
  std::swap(writing_, outbox_);
  const auto now = std::chrono::steady_clock::now();
  for (auto entry = pending_.end() - static_cast<std::ptrdiff_t>(unwritten_);
       entry != pending_.end(); ++entry) {
    entry->written = true;
    entry->written_at = now;
  }
  unwritten_ = 0;
  watch();
  asio::async_write(
      socket_, asio::buffer(writing_),
      [self = shared_from_this()](const boost::system::error_code& error, std::size_t) {
        if (self->state_ != State::kOpen) return;
        if (error) {
          self->fail(Status(Code::kIOError, "write to " + self->address_ + ": " + error.message()));
          return;
        }
        self->writing_.clear();
        self->write();
      });
}

void Connection::read() {
  socket_.async_read_some(
      asio::buffer(buffer_.get(), kReadSize),
      [self = shared_from_this()](const boost::system::error_code& error, std::size_t bytes) {
        if (self->state_ != State::kOpen) return;
        if (error) {
          self->fail(Status(Code::kIOError,
                            "connection to " + self->address_ + " lost: " + error.message()));
          return;
        }
        self->on_read(bytes);
      });
}

void Connection::on_read(std::size_t bytes) {
  reader_.feed(std::string_view(buffer_.get(), bytes));
  for (;;) {
    auto next = reader_.next();
    if (!next.is_ok()) {
      fail(Status(Code::kIOError, address_ + ": " + next.status().message()));
      return;
    }
    if (!next.value().has_value()) break;
    Reply& reply = *next.value();
    if (message_handler_ && reply.type == ReplyType::kArray && reply.elements.size() == 3 &&
        (reply.elements[0].str == "message" || reply.elements[0].str == "smessage")) {
      message_handler_(std::move(reply.elements[1].str), std::move(reply.elements[2].str));
      if (state_ != State::kOpen) return;
      continue;
    }
    if (unsubscribed_handler_ && reply.type == ReplyType::kArray && reply.elements.size() == 3 &&
        reply.elements[0].str == "sunsubscribe") {
      unsubscribed_handler_(std::move(reply.elements[1].str));
      if (state_ != State::kOpen) return;
      continue;
    }
    if (pending_.empty() || !pending_.front().written) {
      fail(Status(Code::kIOError, address_ + " sent a reply to no command"));
      return;
    }
    auto done = std::move(pending_.front().done);
    pending_.pop_front();
    done({Status::ok(), true, std::move(reply)});
    // The completion may have closed this connection.
    if (state_ != State::kOpen) return;
  }
  read();
}

// One timer for the reply timeout, armed for the oldest written command: a node that stops
// answering (a paused VM, a dropped link with no RST) is noticed within reply_timeout, where TCP
// alone could take many minutes.
void Connection::watch() {
  if (watching_ || pending_.empty() || !pending_.front().written) return;
  watching_ = true;
  reply_timer_.expires_at(pending_.front().written_at + options_.reply_timeout);
  reply_timer_.async_wait([self = shared_from_this()](const boost::system::error_code& error) {
    self->watching_ = false;
    if (error || self->state_ != State::kOpen) return;
    const auto& front = self->pending_;
    if (!front.empty() && front.front().written &&
        std::chrono::steady_clock::now() >=
            front.front().written_at + self->options_.reply_timeout) {
      self->fail(Status(Code::kIOError, "no reply from " + self->address_ + " within " +
                                            std::to_string(self->options_.reply_timeout.count()) +
                                            " ms"));
      return;
    }
    self->watch();
  });
}

void Connection::fail(Status why) {
  if (state_ == State::kBroken) return;
  state_ = State::kBroken;
  broken_why_ = why;
  boost::system::error_code ignored;
  resolver_.cancel();
  socket_.close(ignored);
  connect_timer_.cancel();
  reply_timer_.cancel();
  // Completions run after this call returns, in the order the commands were sent.
  asio::post(executor_, [failed = std::move(pending_), why = std::move(why),
                         broken = std::move(broken_handler_)]() mutable {
    for (auto& entry : failed) entry.done({why, entry.written, {}});
    if (broken) broken(why);
  });
  pending_.clear();
  unwritten_ = 0;
  message_handler_ = nullptr;
  unsubscribed_handler_ = nullptr;
}

}  // namespace delayq::redis
