// delayq/client.h — a C++ client of a delayqd server over the beanstalkd protocol and delayq's
// extensions to it (docs/protocol.md), on Boost.Asio's C++20 coroutines. Bodies are bytes: the
// protocol is binary-safe. A Client is one TCP connection; its calls go one after another (a
// call made while another is under way waits its turn), so a producer that wants many puts in
// flight and a worker each use clients of their own. A waiting reserve holds its connection until
// it is answered.
//
//   boost::asio::co_spawn(io, [&]() -> boost::asio::awaitable<void> {
//     delayq::client::Client client(co_await boost::asio::this_coro::executor);
//     co_await client.connect("127.0.0.1", 11300);
//     co_await client.use("emails");
//     const auto put = co_await client.put("hello", {.due = Due::after(48h), .key = "order:1"});
//   }, boost::asio::detached);
//
// Errors: every call throws std::system_error. A reply that is not the answer asked for carries an
// Errc of delayq::client::category() (NOT_FOUND is Errc::not_found, ...); a failed connection
// Asio's own error code. Calls on a closed or unconnected client throw Errc::not_connected.
// Not thread-safe: a client belongs to its executor (use a strand for a multi-threaded one).
#pragma once

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

namespace delayq::client {

template <typename T>
using Task = boost::asio::awaitable<T>;
using Millis = std::chrono::milliseconds;
using Seconds = std::chrono::seconds;
using SystemTime = std::chrono::system_clock::time_point;
using JobId = std::uint64_t;

// The replies that end a call without its answer.
enum class Errc {
  not_found = 1,    // NOT_FOUND: no such job, key or tube; or not this connection's
  conflict,         // CONFLICT: the job's state forbids it (a reserved job, a url without webhook)
  buried,           // BURIED: the server buried the job it was given (out of memory, max-attempts)
  draining,         // DRAINING: the server takes no new jobs (it is about to stop)
  job_too_big,      // JOB_TOO_BIG
  bad_format,       // BAD_FORMAT: a malformed command or argument
  expected_crlf,    // EXPECTED_CRLF
  out_of_memory,    // OUT_OF_MEMORY: the server is out of room (disk, memory, connections)
  internal_error,   // INTERNAL_ERROR
  unknown_command,  // UNKNOWN_COMMAND: a server without delayq's extensions (beanstalkd)
  deadline_soon,    // DEADLINE_SOON: a job this connection holds is about to lapse
  not_ignored,      // NOT_IGNORED: ignoring the last watched tube
  protocol,         // a reply this client cannot read (not a delayq or beanstalkd server?)
  not_connected,    // the client is not connected, or was closed
};
[[nodiscard]] const std::error_category& category() noexcept;
[[nodiscard]] std::error_code make_error_code(Errc errc) noexcept;

// When a job is due: after a delay from now, or at a wall-clock time (a time not in the future is
// now). Sent in milliseconds.
class Due {
 public:
  [[nodiscard]] static Due after(Millis delay) noexcept { return Due(delay.count(), false); }
  [[nodiscard]] static Due at(SystemTime time) noexcept {
    return Due(std::chrono::duration_cast<Millis>(time.time_since_epoch()).count(), true);
  }
  // The protocol's <when>: "<ms>" or "@<unix_ms>".
  [[nodiscard]] std::string text() const;

 private:
  Due(std::int64_t ms, bool absolute) noexcept : ms_(ms), absolute_(absolute) {}
  std::int64_t ms_;
  bool absolute_;
};

// What a put may say beside its body. The texts are read during put() and not kept; empty ones
// are left out.
struct PutOptions {
  std::uint32_t priority = 1024;  // 0 is the most urgent
  Due due = Due::after(Millis{0});
  Seconds ttr{60};                  // how long a worker may hold the job
  std::string_view key{};           // unique in the tube while the job exists
  std::string_view group{};         // tags related jobs (list-group, cancel-group)
  bool replace = false;             // with a key: replace the job that holds it
  std::string_view url{};           // push delivery to this URL (the tube's webhook's)
  std::string_view content_type{};  // the Content-Type push delivery sends
  // A W3C Trace Context kept with the job: stats-job shows it, push delivery sends it.
  std::string_view traceparent{};
  std::string_view tracestate{};  // only with a traceparent
  // With a key, and `due` left at 0: coalesce puts of that key. A delayed or ready job holding it
  // takes this put's body and becomes due `debounce` from now, but never later than its first
  // put + `max_wait`; with none, a new job due in `debounce` (docs/flow-control.md).
  std::optional<Millis> debounce{};
  std::optional<Millis> max_wait{};
};

struct PutResult {
  JobId id = 0;
  // false: a job of the tube already held the key (and replace was not asked), or a debounce
  // moved it; id is that job's.
  bool inserted = true;
  bool debounced = false;  // debounce moved the pending job `id` that held the key
};

struct Job {
  JobId id = 0;
  std::string body;
};

// stats-job, as the server answers it: "tube", "state", "pri", "ttr", "reserves", ... as text.
using Stats = std::map<std::string, std::string, std::less<>>;

class Client {
 public:
  explicit Client(boost::asio::any_io_executor executor);
  ~Client();
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  // Connects to host:port (a name, or an IPv4 or IPv6 address), the first address that accepts.
  Task<void> connect(std::string host, std::uint16_t port);
  // Closes the connection: calls under way and waiting fail with Errc::not_connected (a reserve
  // waiting on the server is abandoned; its job, if one comes, is released by the server).
  void close();
  [[nodiscard]] bool connected() const noexcept;

  // --- producing
  // The tube later puts go into (default: "default").
  Task<void> use(std::string tube);
  // Puts `body` into the used tube (the extension's putx). Errc::job_too_big, draining,
  // conflict (replace of a reserved job, or a url for a tube without a webhook), bad_format.
  Task<PutResult> put(std::string_view body, PutOptions options = {});
  // A delayed or ready job's new due time. Errc::not_found, conflict (reserved or buried).
  Task<void> reschedule(JobId id, Due due);
  Task<void> reschedule_key(std::string tube, std::string key, Due due);
  // Deletes the job holding the key (not one reserved by another connection).
  Task<void> erase_key(std::string tube, std::string key);
  // Deletes every job of the group that is not reserved; how many.
  Task<std::uint64_t> cancel_group(std::string tube, std::string group);

  // --- working
  Task<void> watch(std::string tube);
  Task<void> ignore(std::string tube);
  // The best ready job of the watched tubes, waiting as long as it takes. Errc::deadline_soon.
  Task<Job> reserve();
  // The same, waiting at most `timeout` (whole seconds, as the protocol counts them, rounded up);
  // nullopt when none came.
  Task<std::optional<Job>> reserve(Seconds timeout);
  Task<void> erase(JobId id);
  // Gives a reserved job back, ready at once or after `delay` (whole seconds, rounded up).
  Task<void> release(JobId id, std::uint32_t priority, Seconds delay = Seconds{0});
  Task<void> bury(JobId id, std::uint32_t priority);
  // Restarts a reserved job's TTR.
  Task<void> touch(JobId id);
  Task<void> kick_job(JobId id);

  // --- reading
  Task<std::optional<Job>> peek(JobId id);
  Task<std::optional<Job>> peek_key(std::string tube, std::string key);
  Task<Stats> stats_job(JobId id);

 private:
  struct Reply;
  // Sends `command` (and the body after it) and reads one reply, after the calls before it.
  Task<Reply> call(std::string command, std::string_view body = {});
  Task<Reply> read_reply();
  Task<PutResult> put_line(std::string line, std::string body);
  Task<std::optional<Job>> peek_line(std::string command);
  static Job job_of(const Reply& reply, std::string_view word);
  Task<void> expect(std::string command, std::string_view word);

  boost::asio::any_io_executor executor_;
  boost::asio::ip::tcp::socket socket_;
  std::string buffer_;  // bytes read and not yet taken
  // The calls waiting their turn, woken in order (see call()).
  struct Turn;
  std::deque<Turn*> waiting_;
  bool busy_ = false;
  std::shared_ptr<bool> open_ = std::make_shared<bool>(false);
};

// Runs a handler on the jobs of some tubes, as the Python and TypeScript SDKs' workers do: each of
// `concurrency` connections reserves only when its handler is free; while a handler runs, its job
// is touched at half its TTR; a handler that returns deletes the job, one that throws releases it
// after a backoff that grows with the job's reservations (min * factor^(n-1), at most max, a
// random half to all of it), in whole seconds. A job that was lost meanwhile (its TTR lapsed, a
// touch found it gone) is left alone.
struct WorkerOptions {
  std::string host = "127.0.0.1";
  std::uint16_t port = 11300;
  std::vector<std::string> tubes = {"default"};
  std::size_t concurrency = 1;
  Seconds backoff_min{1};
  Seconds backoff_max{600};
  double backoff_factor = 2;
  // How long each reserve waits before it looks whether the worker was stopped.
  Seconds poll{1};
};

class Worker {
 public:
  using Handler = std::function<Task<void>(const Job& job)>;
  Worker(boost::asio::any_io_executor executor, WorkerOptions options, Handler handler);
  ~Worker();
  Worker(const Worker&) = delete;
  Worker& operator=(const Worker&) = delete;

  // Runs until stop(): handlers under way finish and their jobs are deleted or released first.
  // Throws what connecting throws, and std::invalid_argument for bad options.
  Task<void> run();
  void stop() noexcept;

  // Since run(): jobs whose handler returned, that threw, and touches sent.
  [[nodiscard]] std::uint64_t done() const noexcept { return done_; }
  [[nodiscard]] std::uint64_t failed() const noexcept { return failed_; }
  [[nodiscard]] std::uint64_t touched() const noexcept { return touched_; }
  // The release delay after a failure of a job's `attempt`-th reservation, before the random part.
  [[nodiscard]] Seconds backoff(std::uint64_t attempt) const noexcept;

 private:
  Task<void> loop();

  boost::asio::any_io_executor executor_;
  WorkerOptions options_;
  Handler handler_;
  bool stopping_ = false;
  std::uint64_t done_ = 0, failed_ = 0, touched_ = 0;
};

}  // namespace delayq::client

template <>
struct std::is_error_code_enum<delayq::client::Errc> : std::true_type {};
