// connection.h — one beanstalkd client's socket: reads bytes into its Conversation and writes
// what the conversation emits, one write at a time. A client that does not read its replies is
// not read either (past 1 MiB of replies queued), and one that keeps sending while its reserve
// waits gets no more room than one command's worth. Owned by the Server; runs on the broker's
// executor.
#pragma once

#include <boost/asio/ip/tcp.hpp>
#include <memory>
#include <string>
#include <string_view>

#include "front/beanstalk/conversation.h"

namespace delayq::front::beanstalk {

class Server;

class Connection : public std::enable_shared_from_this<Connection> {
 public:
  Connection(Server& server, boost::asio::ip::tcp::socket socket);
  void start();
  void close();

 private:
  void read();
  void on_read(const boost::system::error_code& error, std::string_view bytes);
  void queue(std::string_view bytes);
  void write();
  void maybe_close();

  Server& server_;
  boost::asio::ip::tcp::socket socket_;
  std::unique_ptr<Conversation> conversation_;
  bool closed_ = false;
  bool writing_ = false;
  bool write_deferred_ = false;  // a write is queued on the executor
  bool read_paused_ = false;
  bool reading_ = false;
  std::string queued_;  // replies not yet handed to the socket
  std::string writing_bytes_;
};

}  // namespace delayq::front::beanstalk
