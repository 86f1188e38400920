// client.cc — delayq/client.h over one socket: commands written whole, replies read line by line
// (and the body of RESERVED, FOUND and OK), one call at a time. Calls made while one is under way
// wait in a queue of turns, each on a timer of its own that the call before it cancels when it is
// done; close() cancels them all.
#include "delayq/client.h"

#include <algorithm>
#include <array>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/connect.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/read_until.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <charconv>
#include <cmath>
#include <exception>
#include <random>
#include <stdexcept>
#include <utility>

namespace delayq::client {
namespace asio = boost::asio;
using asio::use_awaitable;

namespace {

class Category final : public std::error_category {
 public:
  [[nodiscard]] const char* name() const noexcept override { return "delayq"; }
  [[nodiscard]] std::string message(int value) const override {
    switch (static_cast<Errc>(value)) {
      case Errc::not_found:
        return "not found";
      case Errc::conflict:
        return "conflict: the job's state forbids it";
      case Errc::buried:
        return "the job was buried";
      case Errc::draining:
        return "the server is draining: it takes no new jobs";
      case Errc::job_too_big:
        return "job too big";
      case Errc::bad_format:
        return "bad format";
      case Errc::expected_crlf:
        return "expected CRLF after the job's body";
      case Errc::out_of_memory:
        return "the server is out of room";
      case Errc::internal_error:
        return "internal error in the server";
      case Errc::unknown_command:
        return "unknown command: the server lacks delayq's extensions";
      case Errc::deadline_soon:
        return "a reserved job's TTR is about to end";
      case Errc::not_ignored:
        return "cannot ignore the last watched tube";
      case Errc::protocol:
        return "a reply this client cannot read";
      case Errc::not_connected:
        return "not connected";
    }
    return "unknown delayq error";
  }
};

// The reply words that are errors, and their codes.
constexpr std::pair<std::string_view, Errc> kErrors[] = {
    {"NOT_FOUND", Errc::not_found},
    {"CONFLICT", Errc::conflict},
    {"BURIED", Errc::buried},
    {"DRAINING", Errc::draining},
    {"JOB_TOO_BIG", Errc::job_too_big},
    {"BAD_FORMAT", Errc::bad_format},
    {"EXPECTED_CRLF", Errc::expected_crlf},
    {"OUT_OF_MEMORY", Errc::out_of_memory},
    {"INTERNAL_ERROR", Errc::internal_error},
    {"UNKNOWN_COMMAND", Errc::unknown_command},
    {"DEADLINE_SOON", Errc::deadline_soon},
    {"NOT_IGNORED", Errc::not_ignored},
};

[[noreturn]] void fail(Errc errc, const std::string& what) {
  throw std::system_error(make_error_code(errc), what);
}

// A tube, key, group, URL or content type goes on the command line as one token: printable ASCII
// without spaces. Anything else would break the line, so it is refused before it is sent.
std::string token(std::string_view value, std::string_view what) {
  const bool printable = std::all_of(value.begin(), value.end(), [](char c) {
    return static_cast<unsigned char>(c) > 0x20 && static_cast<unsigned char>(c) < 0x7F;
  });
  if (value.empty() || !printable) {
    fail(Errc::bad_format, std::string(what) + " '" + std::string(value) +
                               "' must be 1 or more printable ASCII characters without spaces");
  }
  return std::string(value);
}

std::uint64_t number(std::string_view text) {
  std::uint64_t value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size()) {
    fail(Errc::protocol, "not a number: '" + std::string(text) + "'");
  }
  return value;
}

// A call that fails before it is sent fails where it is awaited, as every other failure does.
template <typename T>
Task<T> rethrow(std::exception_ptr error) {
  std::rethrow_exception(error);
  co_return T{};
}

// The protocol's whole seconds (release delays, reserve timeouts), never negative.
std::int64_t whole_seconds(Seconds s) {
  return std::max<std::int64_t>(0, s.count());
}

}  // namespace

const std::error_category& category() noexcept {
  static const Category kCategory;
  return kCategory;
}

std::error_code make_error_code(Errc errc) noexcept {
  return {static_cast<int>(errc), category()};
}

std::string Due::text() const {
  return absolute_ ? "@" + std::to_string(std::max<std::int64_t>(ms_, 0))
                   : std::to_string(std::max<std::int64_t>(ms_, 0));
}

// --- the connection -------------------------------------------------------------------------

struct Client::Reply {
  std::string word;               // the first word: INSERTED, RESERVED, ...
  std::vector<std::string> args;  // the words after it
  std::string body;               // RESERVED, FOUND and OK carry one
};

struct Client::Turn {
  asio::steady_timer timer;
};

Client::Client(asio::any_io_executor executor)
    : executor_(std::move(executor)), socket_(executor_) {}

Client::~Client() {
  close();
}

bool Client::connected() const noexcept {
  return *open_;
}

Task<void> Client::connect(std::string host, std::uint16_t port) {
  close();
  try {
    asio::ip::tcp::resolver resolver(executor_);
    const auto endpoints =
        co_await resolver.async_resolve(host, std::to_string(port), use_awaitable);
    co_await asio::async_connect(socket_, endpoints, use_awaitable);
    socket_.set_option(asio::ip::tcp::no_delay(true));
  } catch (const boost::system::system_error& e) {
    throw std::system_error(static_cast<std::error_code>(e.code()),
                            "connecting to " + host + ":" + std::to_string(port));
  }
  buffer_.clear();
  *open_ = true;
}

void Client::close() {
  *open_ = false;
  open_ = std::make_shared<bool>(false);  // calls under way hold the old flag: they end
  boost::system::error_code ignored;
  socket_.shutdown(asio::ip::tcp::socket::shutdown_both, ignored);
  socket_.close(ignored);
  busy_ = false;
  for (Turn* turn : std::exchange(waiting_, {})) turn->timer.cancel();
}

// The job of a "<word> <id> <bytes>" reply and its body.
Job Client::job_of(const Reply& reply, std::string_view word) {
  if (reply.word != word || reply.args.size() != 2) {
    fail(Errc::protocol, "expected " + std::string(word) + ", got " + reply.word);
  }
  return Job{number(reply.args[0]), reply.body};
}

Task<Client::Reply> Client::call(std::string command, std::string_view body) {
  std::shared_ptr<bool> open = open_;
  if (!*open) fail(Errc::not_connected, "not connected");
  if (busy_) {
    Turn turn{asio::steady_timer(executor_, asio::steady_timer::time_point::max())};
    waiting_.push_back(&turn);
    // Leaves the queue if this call ends while waiting (its coroutine destroyed).
    struct Leave {
      std::deque<Turn*>& waiting;
      Turn* turn;
      ~Leave() { std::erase(waiting, turn); }
    } leave{waiting_, &turn};
    boost::system::error_code woken;
    co_await turn.timer.async_wait(asio::redirect_error(use_awaitable, woken));
    if (!*open) fail(Errc::not_connected, "the client was closed");
  }
  busy_ = true;
  // Hands the connection to the next call, however this one ends (unless the client was closed,
  // which ended every call).
  struct Pass {
    Client& client;
    std::shared_ptr<bool> open;
    ~Pass() {
      if (!*open) return;
      if (client.waiting_.empty()) {
        client.busy_ = false;
      } else {
        Turn* next = client.waiting_.front();
        client.waiting_.pop_front();
        next->timer.cancel();
      }
    }
  } pass{*this, open};
  try {
    if (body.data() != nullptr) {
      const std::array<asio::const_buffer, 3> parts = {asio::buffer(command), asio::buffer(body),
                                                       asio::buffer("\r\n", 2)};
      co_await asio::async_write(socket_, parts, use_awaitable);
    } else {
      co_await asio::async_write(socket_, asio::buffer(command), use_awaitable);
    }
    co_return co_await read_reply();
  } catch (const boost::system::system_error& e) {
    if (!*open) fail(Errc::not_connected, "the client was closed");
    close();  // a connection that failed mid-reply cannot be read in order again
    throw std::system_error(static_cast<std::error_code>(e.code()), e.what());
  }
}

Task<Client::Reply> Client::read_reply() {
  const std::size_t end = co_await asio::async_read_until(
      socket_, asio::dynamic_buffer(buffer_, 1 << 20), "\r\n", use_awaitable);
  const std::string line = buffer_.substr(0, end - 2);
  buffer_.erase(0, end);
  Reply reply;
  std::size_t at = 0;
  while (at < line.size()) {
    const std::size_t space = std::min(line.find(' ', at), line.size());
    if (reply.word.empty()) {
      reply.word = line.substr(at, space - at);
    } else {
      reply.args.push_back(line.substr(at, space - at));
    }
    at = space + 1;
  }
  for (const auto& [word, errc] : kErrors) {
    if (reply.word == word) fail(errc, line);
  }
  if (reply.word == "RESERVED" || reply.word == "FOUND" || reply.word == "OK") {
    if (reply.args.empty()) fail(Errc::protocol, line);
    const std::uint64_t bytes = number(reply.args.back());
    if (bytes > (std::uint64_t{1} << 31)) fail(Errc::protocol, line);
    if (buffer_.size() < bytes + 2) {
      co_await asio::async_read(socket_, asio::dynamic_buffer(buffer_),
                                asio::transfer_at_least(bytes + 2 - buffer_.size()), use_awaitable);
    }
    if (buffer_.compare(bytes, 2, "\r\n") != 0)
      fail(Errc::protocol, line + ": no CRLF after the body");
    reply.body = buffer_.substr(0, bytes);
    buffer_.erase(0, bytes + 2);
  }
  co_return reply;
}

Task<void> Client::expect(std::string command, std::string_view word) {
  const Reply reply = co_await call(std::move(command));
  if (reply.word != word)
    fail(Errc::protocol, "expected " + std::string(word) + ", got " + reply.word);
}

// --- producing ------------------------------------------------------------------------------

Task<void> Client::use(std::string tube) {
  co_await expect("use " + token(tube, "tube") + "\r\n", "USING");
}

// Not a coroutine: the options become the command line here, and the body is copied, so that
// neither needs to outlive the call. (PutOptions holds views and nothing to destroy: GCC 12 may
// destroy a braced temporary in a co_await expression twice.)
Task<PutResult> Client::put(std::string_view body, PutOptions options) {
  std::string line;
  try {
    line = "putx " + std::to_string(options.priority) + " " + options.due.text() + " " +
           std::to_string(whole_seconds(options.ttr)) + " " + std::to_string(body.size());
    const auto option = [&line](std::string_view name, std::string_view value,
                                std::string_view what) {
      if (value.empty()) return;
      line += name;
      line += token(value, what);
    };
    option(" key=", options.key, "key");
    option(" group=", options.group, "group");
    if (options.replace) line += " replace";
    option(" url=", options.url, "url");
    option(" type=", options.content_type, "content type");
    option(" traceparent=", options.traceparent, "traceparent");
    option(" tracestate=", options.tracestate, "tracestate");
    if (options.debounce) line += " debounce=" + std::to_string(options.debounce->count());
    if (options.max_wait) line += " max-wait=" + std::to_string(options.max_wait->count());
    line += "\r\n";
  } catch (const std::system_error&) {
    return rethrow<PutResult>(std::current_exception());
  }
  return put_line(std::move(line), std::string(body));
}

Task<PutResult> Client::put_line(std::string line, std::string body) {
  const Reply reply = co_await call(std::move(line), body);
  if ((reply.word != "INSERTED" && reply.word != "EXISTS" && reply.word != "DEBOUNCED") ||
      reply.args.size() != 1) {
    fail(Errc::protocol, "a put answered " + reply.word);
  }
  co_return PutResult{number(reply.args[0]), reply.word == "INSERTED", reply.word == "DEBOUNCED"};
}

Task<void> Client::reschedule(JobId id, Due due) {
  co_await expect("reschedule " + std::to_string(id) + " " + due.text() + "\r\n", "RESCHEDULED");
}

Task<void> Client::reschedule_key(std::string tube, std::string key, Due due) {
  co_await expect(
      "reschedule-key " + token(tube, "tube") + " " + token(key, "key") + " " + due.text() + "\r\n",
      "RESCHEDULED");
}

Task<void> Client::erase_key(std::string tube, std::string key) {
  co_await expect("delete-key " + token(tube, "tube") + " " + token(key, "key") + "\r\n",
                  "DELETED");
}

Task<std::uint64_t> Client::cancel_group(std::string tube, std::string group) {
  const Reply reply =
      co_await call("cancel-group " + token(tube, "tube") + " " + token(group, "group") + "\r\n");
  if (reply.word != "CANCELLED" || reply.args.size() != 1) fail(Errc::protocol, reply.word);
  co_return number(reply.args[0]);
}

// --- working --------------------------------------------------------------------------------

Task<void> Client::watch(std::string tube) {
  co_await expect("watch " + token(tube, "tube") + "\r\n", "WATCHING");
}

Task<void> Client::ignore(std::string tube) {
  co_await expect("ignore " + token(tube, "tube") + "\r\n", "WATCHING");
}

Task<Job> Client::reserve() {
  co_return job_of(co_await call("reserve\r\n"), "RESERVED");
}

Task<std::optional<Job>> Client::reserve(Seconds timeout) {
  const Reply reply =
      co_await call("reserve-with-timeout " + std::to_string(whole_seconds(timeout)) + "\r\n");
  if (reply.word == "TIMED_OUT") co_return std::nullopt;
  co_return job_of(reply, "RESERVED");
}

Task<void> Client::erase(JobId id) {
  co_await expect("delete " + std::to_string(id) + "\r\n", "DELETED");
}

Task<void> Client::release(JobId id, std::uint32_t priority, Seconds delay) {
  co_await expect("release " + std::to_string(id) + " " + std::to_string(priority) + " " +
                      std::to_string(whole_seconds(delay)) + "\r\n",
                  "RELEASED");
}

Task<void> Client::bury(JobId id, std::uint32_t priority) {
  const Reply reply =
      co_await call("bury " + std::to_string(id) + " " + std::to_string(priority) + "\r\n");
  if (reply.word != "BURIED") fail(Errc::protocol, reply.word);
}

Task<void> Client::touch(JobId id) {
  co_await expect("touch " + std::to_string(id) + "\r\n", "TOUCHED");
}

Task<void> Client::kick_job(JobId id) {
  co_await expect("kick-job " + std::to_string(id) + "\r\n", "KICKED");
}

// --- reading --------------------------------------------------------------------------------

Task<std::optional<Job>> Client::peek(JobId id) {
  co_return co_await peek_line("peek " + std::to_string(id) + "\r\n");
}

Task<std::optional<Job>> Client::peek_key(std::string tube, std::string key) {
  co_return co_await peek_line("peek-key " + token(tube, "tube") + " " + token(key, "key") +
                               "\r\n");
}

Task<std::optional<Job>> Client::peek_line(std::string command) {
  try {
    co_return job_of(co_await call(std::move(command)), "FOUND");
  } catch (const std::system_error& e) {
    if (e.code() != Errc::not_found) throw;
  }
  co_return std::nullopt;
}

Task<Stats> Client::stats_job(JobId id) {
  const Reply reply = co_await call("stats-job " + std::to_string(id) + "\r\n");
  if (reply.word != "OK") fail(Errc::protocol, reply.word);
  // A YAML map of "name: value" lines after "---"; quoted values lose their quotes.
  Stats stats;
  std::size_t at = 0;
  while (at < reply.body.size()) {
    const std::size_t end = std::min(reply.body.find('\n', at), reply.body.size());
    const std::string_view line(reply.body.data() + at, end - at);
    at = end + 1;
    const std::size_t colon = line.find(": ");
    if (colon == std::string_view::npos) continue;
    std::string_view value = line.substr(colon + 2);
    if (value.size() >= 2 && value.front() == '"' && value.back() == '"') {
      value = value.substr(1, value.size() - 2);
    }
    stats.emplace(std::string(line.substr(0, colon)), std::string(value));
  }
  co_return stats;
}

// --- the worker -----------------------------------------------------------------------------

Worker::Worker(asio::any_io_executor executor, WorkerOptions options, Handler handler)
    : executor_(std::move(executor)), options_(std::move(options)), handler_(std::move(handler)) {}

Worker::~Worker() = default;

void Worker::stop() noexcept {
  stopping_ = true;
}

Seconds Worker::backoff(std::uint64_t attempt) const noexcept {
  double nominal = static_cast<double>(options_.backoff_min.count());
  const auto high = static_cast<double>(options_.backoff_max.count());
  for (std::uint64_t i = 1; i < attempt && nominal < high; ++i) nominal *= options_.backoff_factor;
  return Seconds{static_cast<std::int64_t>(std::ceil(std::min(nominal, high)))};
}

Task<void> Worker::run() {
  if (options_.concurrency < 1) throw std::invalid_argument("concurrency must be at least 1");
  if (options_.tubes.empty()) throw std::invalid_argument("a worker needs a tube");
  if (options_.backoff_min.count() < 0 || options_.backoff_max < options_.backoff_min ||
      options_.backoff_factor < 1) {
    throw std::invalid_argument("backoff: 0 <= backoff_min <= backoff_max, backoff_factor >= 1");
  }
  if (!handler_) throw std::invalid_argument("a worker needs a handler");
  stopping_ = false;
  std::size_t running = options_.concurrency;
  std::exception_ptr first;
  asio::steady_timer all_ended(executor_, asio::steady_timer::time_point::max());
  for (std::size_t i = 0; i < options_.concurrency; ++i) {
    asio::co_spawn(executor_, loop(), [&](std::exception_ptr error) {
      if (error && !first) {
        first = error;
        stop();  // one loop's failure (its connection) ends the others too
      }
      if (--running == 0) all_ended.cancel();
    });
  }
  boost::system::error_code ended;
  co_await all_ended.async_wait(asio::redirect_error(use_awaitable, ended));
  if (first) std::rethrow_exception(first);
}

// While its handler runs, a job is touched at half its TTR (at least every 0.5 s); `lost` once a
// touch finds it gone. The loop waits for `ended` before it uses the connection again.
struct Lease {
  asio::steady_timer wake;
  asio::steady_timer ended;
  bool working = true;
  bool over = false;
  bool lost = false;
};

Task<void> Worker::loop() {
  Client client(executor_);
  co_await client.connect(options_.host, options_.port);
  for (const std::string& tube : options_.tubes) co_await client.watch(tube);
  if (std::find(options_.tubes.begin(), options_.tubes.end(), "default") == options_.tubes.end()) {
    co_await client.ignore("default");
  }
  std::mt19937_64 random{std::random_device{}()};
  while (!stopping_) {
    std::optional<Job> job = co_await client.reserve(options_.poll);
    if (!job) continue;
    Stats stats;
    try {
      stats = co_await client.stats_job(job->id);
    } catch (const std::system_error& e) {
      if (e.code() != Errc::not_found) throw;
      continue;  // lost already
    }
    const auto field = [&stats](std::string_view name, std::uint64_t otherwise) {
      const auto it = stats.find(name);
      std::uint64_t value = otherwise;
      if (it != stats.end())
        std::from_chars(it->second.data(), it->second.data() + it->second.size(), value);
      return value;
    };
    const Seconds ttr{static_cast<std::int64_t>(field("ttr", 1))};
    const std::uint64_t attempt = field("reserves", 1);
    const auto priority = static_cast<std::uint32_t>(field("pri", 1024));

    Lease lease{asio::steady_timer(executor_),
                asio::steady_timer(executor_, asio::steady_timer::time_point::max())};
    asio::co_spawn(
        executor_,
        [&]() -> Task<void> {
          const auto half =
              std::max<Millis>(Millis{500}, std::chrono::duration_cast<Millis>(ttr) / 2);
          while (lease.working) {
            lease.wake.expires_after(half);
            boost::system::error_code woken;
            co_await lease.wake.async_wait(asio::redirect_error(use_awaitable, woken));
            if (!lease.working) break;
            try {
              co_await client.touch(job->id);
              ++touched_;
            } catch (const std::system_error&) {
              lease.lost = true;  // gone (its TTR lapsed and another took it), or the connection
              break;
            }
          }
          lease.over = true;
          lease.ended.cancel();
        },
        asio::detached);
    bool handled = true;
    try {
      co_await handler_(*job);
    } catch (...) {
      handled = false;
    }
    lease.working = false;
    lease.wake.cancel();
    if (!lease.over) {
      boost::system::error_code ended;
      co_await lease.ended.async_wait(asio::redirect_error(use_awaitable, ended));
    }
    if (!client.connected()) fail(Errc::not_connected, "the worker's connection was lost");
    if (lease.lost) continue;
    try {
      if (handled) {
        co_await client.erase(job->id);
        ++done_;
      } else {
        ++failed_;
        const auto nominal = backoff(attempt).count();
        const std::int64_t delay =
            std::uniform_int_distribution<std::int64_t>((nominal + 1) / 2, nominal)(random);
        co_await client.release(job->id, priority, Seconds{delay});
      }
    } catch (const std::system_error& e) {
      // NOT_FOUND: lost meanwhile; BURIED: the tube's max-attempts buried it.
      if (e.code() != Errc::not_found && e.code() != Errc::buried) throw;
    }
  }
}

}  // namespace delayq::client
