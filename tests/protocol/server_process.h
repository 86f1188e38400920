// server_process.h — the harness of the protocol and recovery tests: the real delayqd as a child
// process, and a blocking beanstalkd client over a loopback TCP socket.
// ServerProcess forks and execs DELAYQD_PATH with `-p 0 -b DIR --http 127.0.0.1:0`, reads the
// ports from its "delayqd listening on ADDR:PORT" and "delayqd http listening on ..." lines, and
// stops it by pid (SIGTERM, or SIGKILL for crash tests); it can start again on the same directory.
// Client reads whole replies (the line, and the body of RESERVED / FOUND / OK). Every wait is
// bounded by a timeout, so a test fails instead of hanging; a reply that did not come reads as a
// "<...>" text that names what was missing. Below them, small wire helpers: put_command(),
// job_reply(), inserted_id(), parse_yaml(). Not thread-safe; one test owns its servers and clients.
// Redis mode: when DELAYQ_TEST_REDIS_SEEDS_FILE names a file holding a Redis Cluster's seeds
// (scripts/redis-cluster.sh writes one), delayqd keeps its jobs there (--redis, with a key prefix
// made from the data directory's name, so tests share the cluster without seeing each other),
// and a second delayqd, its peer, serves the same jobs; port() and http_port() then alternate
// between the two, so that a test's clients talk to both nodes.
// Linux only (prctl, pipe2, SOCK_CLOEXEC).
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace delayq::testing {

using Millis = std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;
// A job's due time is kept on the wall clock (src/engine/clock.h): a delay of 1 s given at wall
// time W makes the job due when the wall clock says W + 1 s. Where the wall clock steps forward
// (an NTP step, a hypervisor's time sync under load), that moment comes sooner on the steady
// clock. So checks that a job came no earlier than its due time read this clock, as the server
// does; checks that it came not too late, and everything the server counts on the steady clock
// (TTRs, pauses, reserve timeouts), read Clock.
using WallClock = std::chrono::system_clock;

// How long a reply may take before a test calls it missing. Generous, for sanitizer builds.
inline constexpr Millis kReplyTimeout{5000};

// Whether the system's resolver knows `host` (a bare root may have no /etc/hosts, and then no
// "localhost"). A test whose point is a host name skips with this said when it does not.
[[nodiscard]] bool resolves(const std::string& host);

// Milliseconds from `from` to `to` (negative if `to` is earlier).
[[nodiscard]] std::int64_t millis_between(Clock::time_point from, Clock::time_point to);

// A fresh directory under the system's temp directory, removed with its contents on destruction.
class TempDir {
 public:
  TempDir();  // aborts the test binary if it cannot create one: no test could go on
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  [[nodiscard]] const std::filesystem::path& path() const noexcept { return path_; }

 private:
  std::filesystem::path path_;
};

// One delayqd process at a time over one data directory. The child's stderr is the test's (its
// log shows in ctest's output on failure); its stdout is a pipe the harness reads the port from.
// The child gets SIGKILL if the test process dies, so no server outlives its test.
class ServerProcess {
 public:
  ServerProcess(std::filesystem::path data_dir, std::vector<std::string> extra_args = {});
  ~ServerProcess();  // SIGKILL and reap, if still running
  ServerProcess(const ServerProcess&) = delete;
  ServerProcess& operator=(const ServerProcess&) = delete;

  // Starts delayqd and waits at most `timeout` for its port line. Returns "" on success, else
  // what went wrong (for ASSERT_EQ(server.start(), "")).
  [[nodiscard]] std::string start(Millis timeout = Millis{20000});
  // SIGTERM, then waits at most `timeout`, then SIGKILL. Returns how it ended: "exited 0",
  // "exited 3", "killed by signal 6", "did not stop within 10000 ms", "not running".
  std::string stop(Millis timeout = Millis{10000});
  // SIGKILL and reap: a crash. Returns how it ended, as stop() does.
  std::string kill9();
  // Sends a signal (e.g. SIGUSR1 for drain mode). False if not running.
  bool signal(int number);
  // The child's nice value from the next start() on (0 .. 19; default 0). A low-priority server
  // loses the CPU to the test as soon as the test has something to do, which widens races.
  void set_nice(int nice) noexcept { nice_ = nice; }
  // The child's limit on open files (soft and hard) from the next start() on; 0: the test's.
  void set_open_files(std::uint64_t files) noexcept { open_files_ = files; }
  // Starts delayqd without --http (its default, 127.0.0.1:8080) and reads only the first port
  // line: for a test that holds that port itself.
  void set_default_http() noexcept { default_http_ = true; }

  [[nodiscard]] bool running() const noexcept { return pid_ > 0; }
  [[nodiscard]] pid_t pid() const noexcept { return pid_; }
  // In Redis mode with a peer, each call answers the other node's port.
  [[nodiscard]] std::uint16_t port() const noexcept;
  // The HTTP API's port (the harness passes --http 127.0.0.1:0 unless the test gives --http).
  [[nodiscard]] std::uint16_t http_port() const noexcept;
  // Whether delayqd runs in Redis mode (see above).
  [[nodiscard]] static bool redis_mode();
  // What `delayqd --version` prints: its version and the RocksDB build linked in.
  [[nodiscard]] static std::string version();
  // The ADDR:PORT of its "delayqd listening on" and "delayqd http listening on" lines ("" for
  // one it did not print).
  [[nodiscard]] const std::string& address() const noexcept { return address_; }
  [[nodiscard]] const std::string& http_address() const noexcept { return http_address_; }
  [[nodiscard]] const std::filesystem::path& data_dir() const noexcept { return data_dir_; }

 private:
  std::string wait(Millis timeout);
  void close_stdout();

  std::filesystem::path data_dir_;
  std::vector<std::string> extra_args_;
  pid_t pid_ = -1;
  int stdout_fd_ = -1;  // kept open while the child runs, so its writes never fail
  std::uint16_t port_ = 0;
  std::uint16_t http_port_ = 0;
  std::string address_;
  std::string http_address_;
  int nice_ = 0;
  std::uint64_t open_files_ = 0;
  bool default_http_ = false;
  bool is_peer_ = false;
  std::unique_ptr<ServerProcess> peer_;  // Redis mode: the second node
  mutable unsigned turn_ = 0;
  mutable unsigned http_turn_ = 0;
};

// A blocking client on 127.0.0.1:port (or another IPv4 or IPv6 address) with its own read
// buffer. Every read waits at most the timeout given; send() writes everything or reports
// failure.
class Client {
 public:
  explicit Client(std::uint16_t port);
  Client(const std::string& ip, std::uint16_t port);
  ~Client();
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  [[nodiscard]] bool connected() const noexcept { return fd_ >= 0; }
  [[nodiscard]] const std::string& error() const noexcept { return error_; }

  // Writes all of `bytes` (with TCP_NODELAY, so small writes leave as they are written).
  bool send(std::string_view bytes);
  // The bytes through the next "\r\n", that included; nullopt on timeout or a closed connection.
  std::optional<std::string> read_line(Millis timeout = kReplyTimeout);
  // Exactly n bytes; nullopt on timeout or a closed connection.
  std::optional<std::string> read_exact(std::size_t n, Millis timeout = kReplyTimeout);
  // One whole reply with its "\r\n"s: the line, plus "<bytes>\r\n" of body for a line
  // "RESERVED <id> <bytes>", "FOUND <id> <bytes>" or "OK <bytes>". If it does not come in time
  // or the connection closes, a text "<timed out ...>" / "<closed ...>" holding what came.
  std::string reply(Millis timeout = kReplyTimeout);
  // send(command) then reply().
  std::string call(std::string_view command, Millis timeout = kReplyTimeout);
  // True if the server closes the connection within `timeout` and sends nothing before that.
  bool closed_by_server(Millis timeout = kReplyTimeout);
  // True if no byte arrives within `quiet` (the connection staying open).
  bool silent_for(Millis quiet);
  // Half-closes: the server reads end-of-file, the client can still read.
  void shutdown_write();
  void close();

 private:
  enum class Fill { kData, kTimeout, kClosed };
  Fill fill(Clock::time_point deadline);  // appends what one recv gives to in_

  int fd_ = -1;
  std::string in_;  // received, not yet returned
  std::string error_;
};

// --- beanstalkd wire helpers shared by the tests

// "put <pri> <delay> <ttr> <bytes>\r\n<body>\r\n".
[[nodiscard]] std::string put_command(std::string_view body, std::uint32_t priority = 0,
                                      std::uint32_t delay_seconds = 0,
                                      std::uint32_t ttr_seconds = 60);
// "<word> <id> <bytes>\r\n<body>\r\n": a RESERVED or FOUND reply.
[[nodiscard]] std::string job_reply(std::string_view word, std::uint64_t id, std::string_view body);
// The id of an "INSERTED <id>\r\n" reply; nullopt for any other reply.
[[nodiscard]] std::optional<std::uint64_t> inserted_id(std::string_view reply);

// An "OK <bytes>\r\n<yaml>\r\n" reply taken apart: a dictionary ("key: value" lines) or a list
// ("- item" lines) after "---\n". `error` says what is malformed (the size not matching the
// data included); empty if nothing is.
struct Yaml {
  std::vector<std::pair<std::string, std::string>> entries;  // in the order sent
  std::vector<std::string> items;
  std::string error;
  // The value of `key`, or "<no key KEY>" (so that EXPECT_EQ shows what is missing).
  [[nodiscard]] std::string operator[](std::string_view key) const;
  [[nodiscard]] bool has(std::string_view key) const;
};
[[nodiscard]] Yaml parse_yaml(std::string_view reply);

}  // namespace delayq::testing
