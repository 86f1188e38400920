// sender.h — the HTTP(S) client push delivery POSTs with: one request at a time per connection,
// keep-alive connections kept per origin and reused, TLS through OpenSSL with the system's CA
// store (plus an optional CA file) and host-name verification, a deadline per request from the
// first byte of connect to the last of the answer, and answers read up to a bound. Runs on the
// deliverer's executor (Boost.Asio coroutines); not thread-safe. The deliverer (deliverer.h)
// calls it only through Poster, the one call it needs, so that its tests answer from a script.
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/ssl/context.hpp>
#include <chrono>
#include <cstddef>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "base/status.h"
#include "webhook/rules.h"

namespace delayq::webhook {

struct SenderOptions {
  // A PEM file of CAs trusted beside the system's (a private CA). Default: none.
  std::string ca_file;
  // The most of an answer's body read (its headers may take 16 KiB more): a longer body is not
  // read to its end, its status still counts, and its connection is closed. Default: 64 KiB.
  std::size_t max_response_bytes = 64 * 1024;
  // Idle keep-alive connections kept per origin; more are closed. Default: 64.
  std::size_t max_idle_per_origin = 64;
};

struct Request {
  Url url;
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;
  std::chrono::milliseconds timeout{10'000};
};

// What came back: a status (0 if there was no answer) and, for a failure, why.
struct Response {
  int status = 0;
  std::string retry_after;  // the header's value, if any
  std::string error;        // empty when an answer came
};

// What push delivery POSTs through: the Sender below in delayqd, a scripted one in tests.
class Poster {
 public:
  Poster() = default;
  virtual ~Poster() = default;
  Poster(const Poster&) = delete;
  Poster& operator=(const Poster&) = delete;

  // Sends `request`; `done` runs on the executor with the response, never inside this call.
  // Destroying the poster abandons requests under way (their `done` never runs).
  virtual void post(Request request, std::function<void(Response)> done) = 0;
};

class Sender final : public Poster {
 public:
  // kInvalidArgument if the CA file cannot be read.
  static Result<std::unique_ptr<Sender>> make(boost::asio::io_context& io, SenderOptions options);
  ~Sender() override;

  void post(Request request, std::function<void(Response)> done) override;

 private:
  struct Connection;
  Sender(boost::asio::io_context& io, SenderOptions options);

  boost::asio::io_context& io_;
  SenderOptions options_;
  // The TLS context, with the system's CAs loaded at its first use: they cost delayqd about
  // 1.4 MiB of RSS and 8 ms of start-up (144 certificates on Debian 12), for a server that may
  // never post over TLS.
  boost::asio::ssl::context& tls();

  boost::asio::ssl::context tls_;
  bool system_cas_loaded_ = false;
  std::map<std::string, std::vector<std::unique_ptr<Connection>>> idle_;  // by origin
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace delayq::webhook
