// delayqd — the delayq server: the beanstalkd protocol and the HTTP API over a broker, the local
// one (engine + RocksDB); the only place that knows which broker runs.
// Flags follow beanstalkd's where they overlap (-l -p -b -z -V); `delayqd --help` lists them all,
// with defaults. Prints "delayqd listening on ADDR:PORT" on stdout once it accepts connections
// (so a test can start it on port 0 and read the port). SIGTERM / SIGINT: stop accepting, commit
// and sync what is pending, let the replies out for 200 ms, close, exit 0. SIGUSR1: drain mode
// (puts get DRAINING), as beanstalkd.
#include <fmt/format.h>
#include <malloc.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>
#include <sys/resource.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>
#include <charconv>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "broker/local/local_broker.h"
#include "broker/redis/redis_broker.h"
#include "front/beanstalk/server.h"
#include "front/http/server.h"
#include "front/listener.h"
#include "front/webhook/deliverer.h"
#include "metrics/registry.h"
#include "notify.h"
#include "store/rocks_store.h"
#include "whole_number.h"

namespace {

using namespace delayq;

struct Flags {
  front::beanstalk::ServerOptions server;
  front::http::ServerOptions http;
  std::string http_listen = "127.0.0.1:8080";
  std::string http_token_file;
  bool http_explicit = false;
  broker::local::NodeOptions node;
  // --redis: the jobs live in Redis, shared with other delayqd nodes (docs/redis-mode.md).
  std::string redis;
  broker::redis::RedisBrokerOptions redis_options;
  std::string redis_wait = "on";
  std::int64_t redis_prefetch_ms = 0;
  front::webhook::DelivererOptions deliverer;
  std::string fsync = "always";
  std::int64_t window_seconds = 3600;
  int verbose = 0;
};

// "HOST:PORT" split at the last ':', HOST not empty and PORT 0 to 65535; an IPv6 HOST must be in
// brackets ("[::1]:8080"), or the last ':' of "::1" would pass for the port's.
std::optional<std::pair<std::string, std::uint16_t>> split_host_port(const std::string& text) {
  const auto colon = text.rfind(':');
  if (colon == std::string::npos || colon == 0) return std::nullopt;
  std::string host = text.substr(0, colon);
  if (host.find(':') != std::string::npos && (host.front() != '[' || host.back() != ']')) {
    return std::nullopt;
  }
  const std::string_view digits = std::string_view(text).substr(colon + 1);
  std::uint16_t port = 0;
  const auto [end, error] = std::from_chars(digits.data(), digits.data() + digits.size(), port);
  if (digits.empty() || error != std::errc{} || end != digits.data() + digits.size()) {
    return std::nullopt;
  }
  return std::pair{std::move(host), port};
}

// The bearer tokens of --http-token-file: one a line, surrounding spaces ignored, empty lines and
// lines starting with # skipped. A file that cannot be read, or holds no token, is an error.
Result<std::vector<std::string>> read_tokens(const std::string& path) {
  std::ifstream file(path);
  if (!file) return Status(Code::kInvalidArgument, "cannot read --http-token-file " + path);
  std::vector<std::string> tokens;
  std::string line;
  while (std::getline(file, line)) {
    const auto first = line.find_first_not_of(" \t\r");
    if (first == std::string::npos || line[first] == '#') continue;
    const auto last = line.find_last_not_of(" \t\r");
    tokens.push_back(line.substr(first, last - first + 1));
  }
  if (tokens.empty()) return Status(Code::kInvalidArgument, path + " holds no token");
  return tokens;
}

// Whether a listen host is a loopback address (or "localhost"): who else can reach it.
bool loopback(const std::string& host) {
  std::string bare = host;
  if (bare.size() > 2 && bare.front() == '[' && bare.back() == ']')
    bare = bare.substr(1, bare.size() - 2);
  if (bare == "localhost") return true;
  boost::system::error_code error;
  const auto address = boost::asio::ip::make_address(bare, error);
  return !error && address.is_loopback();
}

// run()'s exit code when the store failed (its status is 1).
constexpr int kStoreFailed = 101;

// Recovery's progress, reported while the store's jobs load: a log line every 5 s (and one at the
// end if it took longer), systemd's status line, and the HTTP listener's 503 answer, which it
// gives in between, as it handles a signal to stop (the io_context is polled here, on the one
// thread).
class RecoveryReporter {
 public:
  RecoveryReporter(boost::asio::io_context& io, front::http::Server* http) : io_(io), http_(http) {}

  void operator()(const broker::local::RecoveryProgress& p) {
    const std::string line =
        p.done ? fmt::format("{} jobs loaded in {:.1f} s ({:.0f} jobs/s)", p.jobs, seconds(p.took),
                             p.rate())
               : fmt::format(
                     "recovering: {} of about {} jobs loaded ({:.0f}%), "
                     "{:.0f} jobs/s, about {:.0f} s left",
                     p.jobs, p.estimated, p.percent(), p.rate(), p.seconds_left());
    if (p.took - logged_ >= std::chrono::seconds(5) || (p.done && logged_.count() > 0)) {
      spdlog::info("{}", line);
      logged_ = p.took;
    }
    apps::notify_systemd("STATUS=" + line +
                         // Recovery may outlast the unit's start timeout: ask for more.
                         (p.done ? "" : "\nEXTEND_TIMEOUT_USEC=30000000"));
    if (http_ != nullptr) {
      http_->starting(
          p.done ? "the server is starting" : line,
          fmt::format(R"({{"phase":"recovery","jobs_loaded":{},"jobs_estimated":{},)"
                      R"("percent":{:.1f},"jobs_per_second":{:.0f},"seconds_left":{:.0f},)"
                      R"("seconds":{:.1f}}})",
                      p.jobs, p.estimated, p.percent(), p.rate(), p.seconds_left(),
                      seconds(p.took)));
    }
    io_.poll();  // the HTTP API's answers, and a signal to stop
    if (io_.stopped()) io_.restart();
  }

 private:
  static double seconds(std::chrono::milliseconds ms) {
    return std::chrono::duration<double>(ms).count();
  }
  boost::asio::io_context& io_;
  front::http::Server* http_;
  std::chrono::milliseconds logged_{0};
};

// The broker: Redis when --redis names servers, else the local store. `http`, listening already,
// answers with recovery's progress while the local store loads.
Result<std::unique_ptr<broker::Broker>> open_broker(boost::asio::io_context& io, const Flags& flags,
                                                    metrics::Registry& metrics,
                                                    front::http::Server* http, int& exit_code) {
  if (!flags.redis.empty()) {
    broker::redis::RedisBrokerOptions redis = flags.redis_options;
    redis.metrics = &metrics;
    auto opened = broker::redis::RedisBroker::open(io, redis);
    if (!opened.is_ok()) return opened.status();
    return std::unique_ptr<broker::Broker>(std::move(opened).value());
  }
  broker::local::NodeOptions node = flags.node;
  node.on_recovery = RecoveryReporter(io, http);
  node.metrics = &metrics;
  auto opened = broker::local::LocalBroker::open(io, node);
  if (!opened.is_ok()) return opened.status();
  auto broker = std::move(opened).value();
  const std::uint64_t far = broker->recovered_far_jobs();
  spdlog::info("data in {}: {} jobs recovered{}, durability {}", flags.node.data_dir,
               broker->recovered_jobs(),
               far == 0 ? std::string()
                        : fmt::format(" ({} of them due beyond the window, on disk only)", far),
               flags.node.durability.to_string());
  // A failed write or fsync is never retried: after a failed fsync the page cache may have
  // dropped the data, so nothing more is acknowledged (the node answers nothing that waits for
  // the store from now on) and the process exits 1, for a supervisor to restart it into
  // recovery, which reads back everything acknowledged.
  broker->on_fatal([&io, &exit_code](const Status& status) {
    spdlog::critical("store failed, stopping: {}", status.to_string());
    apps::notify_systemd("STATUS=store failed: " + status.to_string());
    exit_code = kStoreFailed;
    io.stop();
  });
  return std::unique_ptr<broker::Broker>(std::move(broker));
}

// Raises the soft limit on open files to the hard one: each connection holds a descriptor, and
// the usual soft limit (1024) is far below the default connection limits. Says what it has. Where
// the limit is below what the connection limits and the store's own files (1000) need, lowers
// the connection limits, in proportion, to what leaves the store its files (half the limit when
// that is below 2000): a flood of connections is then refused as one past the limit is, rather
// than leaving the store unable to open its next log file, which stops the server.
void fit_connections_to_files(Flags& flags) {
  rlimit limit{};
  if (::getrlimit(RLIMIT_NOFILE, &limit) != 0) return;
  const rlim_t before = limit.rlim_cur;
  if (limit.rlim_cur < limit.rlim_max) {
    limit.rlim_cur = limit.rlim_max;
    if (::setrlimit(RLIMIT_NOFILE, &limit) != 0) limit.rlim_cur = before;
  }
  const bool http_on = flags.http_listen != "off";
  const std::size_t beanstalk = flags.server.max_connections;
  const std::size_t http = http_on ? flags.http.max_connections : 0;
  constexpr std::size_t kStoreFiles = 1000;
  const auto wanted = static_cast<rlim_t>(beanstalk + http + kStoreFiles);
  if (limit.rlim_cur == RLIM_INFINITY || limit.rlim_cur >= wanted) {
    if (limit.rlim_cur != before) {
      spdlog::info("open files: up to {} (raised from {})", limit.rlim_cur, before);
    }
    return;
  }
  const auto files = static_cast<std::size_t>(limit.rlim_cur);
  const std::size_t room = files - std::min(kStoreFiles, files / 2);
  const auto share = [&](std::size_t asked) {
    return std::max<std::size_t>(1, room * asked / (beanstalk + http));
  };
  flags.server.max_connections = share(beanstalk);
  if (http_on) flags.http.max_connections = share(http);
  spdlog::warn(
      "open files: up to {}, the hard limit, below the {} that --max-connections, "
      "--http-max-connections and the store's files may need: connections limited to {} "
      "(beanstalkd) and {} (HTTP); raise the limit (ulimit -Hn, or LimitNOFILE= in the unit)",
      files, wanted, flags.server.max_connections, http_on ? flags.http.max_connections : 0);
}

int run(Flags flags) {
  fit_connections_to_files(flags);
  // One thread runs it (this one): what it posts to itself queues without the scheduler's lock
  // (other threads, such as the committer's, still post through the lock).
  boost::asio::io_context io{1};
  metrics::Registry metrics;  // every layer's families, for GET /metrics
  int exit_code = 0;
  std::unique_ptr<broker::Broker> broker;  // outlives the front-ends, whose sessions it holds
  // HTTP on by default; if its default port is taken, the server runs without it (and says so),
  // but an address asked for explicitly must be had. It listens first, so that /healthz and
  // /readyz answer while the broker starts (a recovery of 10^8 jobs takes minutes); the
  // beanstalkd port opens only when the broker serves, as beanstalkd's after its binlog.
  if (!loopback(flags.server.address)) {
    spdlog::warn(
        "the beanstalkd protocol on {} takes no credentials, as beanstalkd's: anyone who reaches "
        "it can change every job (keep it on a private network, or tunnel it)",
        flags.server.address);
  }
  std::optional<front::http::Server> http;
  if (flags.http_listen != "off") {
    if (flags.http.api.tokens.empty() && !loopback(flags.http.address)) {
      spdlog::warn(
          "the HTTP API on {} takes no token: anyone who reaches it can read, change "
          "and delete every job (--http-token-file)",
          flags.http.address);
    }
    front::http::ServerOptions options = flags.http;
    options.metrics = &metrics;
    http.emplace(io, std::move(options));
    if (Status s = http->start(); !s.is_ok()) {
      if (flags.http_explicit || !flags.http.tls_cert_file.empty() ||
          !flags.http.tls_key_file.empty()) {
        spdlog::critical("{}", s.to_string());
        return 1;
      }
      spdlog::warn("{}; the HTTP API is off (choose another with --http ADDR:PORT)", s.to_string());
      http.reset();
    }
  }
  // SIGTERM and SIGINT are taken from here on. While the broker opens (a recovery can take
  // minutes, and polls the io_context as it goes) one stops the process at once: nothing is
  // pending, and the next start recovers again. Once serving, `stopping` stops it gracefully.
  boost::asio::signal_set stop(io, SIGTERM, SIGINT);
  std::function<void(int)> stopping;
  stop.async_wait([&](const boost::system::error_code& error, int signal) {
    if (error) return;
    if (!stopping) {
      spdlog::info("signal {} while starting: stopping (nothing to commit)", signal);
      spdlog::shutdown();
      std::_Exit(0);
    }
    stopping(signal);
  });
  // SIGUSR1 too: one that comes while the broker opens is kept for when it serves (its default
  // action would end the process, and a restart would recover again, drain forgotten).
  boost::asio::signal_set drain(io, SIGUSR1);
  bool drain_asked = false;
  std::function<void()> wait_drain = [&] {
    drain.async_wait([&](const boost::system::error_code& error, int) {
      if (error) return;
      if (broker) {
        spdlog::info("SIGUSR1: drain mode, puts are refused from now on");
        broker->set_draining(true);
      } else {
        drain_asked = true;
      }
      wait_drain();
    });
  };
  wait_drain();
  auto opened = open_broker(io, flags, metrics, http ? &*http : nullptr, exit_code);
  if (!opened.is_ok()) {
    spdlog::critical("cannot start: {}", opened.status().to_string());
    return 1;
  }
  broker = std::move(opened).value();
  if (io.stopped()) io.restart();
  if (http) http->serve(*broker);
  front::beanstalk::ServerOptions beanstalk = flags.server;
  beanstalk.metrics = &metrics;
  front::beanstalk::Server server(io, *broker, std::move(beanstalk));
  if (Status s = server.start(); !s.is_ok()) {
    spdlog::critical("{}", s.to_string());
    return 1;
  }

  // Push delivery: the tubes with a webhook (docs/webhooks.md).
  auto deliverer = front::webhook::Deliverer::make(io, *broker, metrics, flags.deliverer);
  if (!deliverer.is_ok()) {
    spdlog::critical("{}", deliverer.status().to_string());
    return 1;
  }
  deliverer.value()->start();

  // Stop: no new connections; commit what is pending and wait for it; give the replies that
  // became sendable a moment to leave; then close everything, and wait (2 s at most) until the
  // jobs the connections held are ready again where other nodes see them (Redis mode).
  boost::asio::steady_timer grace(io);
  boost::asio::steady_timer settled(io);
  stopping = [&](int signal) {
    spdlog::info("signal {}: stopping", signal);
    apps::notify_systemd("STOPPING=1");
    deliverer.value()->stop();
    server.stop_accepting();
    if (http) http->stop_accepting();
    if (Status s = broker->close(); !s.is_ok()) {
      spdlog::critical("final commit failed: {}", s.to_string());
      exit_code = kStoreFailed;
    }
    grace.expires_after(std::chrono::milliseconds(200));
    grace.async_wait([&](const boost::system::error_code&) {
      server.stop();
      if (http) http->stop();
      settled.expires_after(std::chrono::seconds(2));
      settled.async_wait([&](const boost::system::error_code& error) {
        if (!error) spdlog::warn("stopping with calls to Redis unanswered after 2 s");
        io.stop();
      });
      broker->settle([&] { settled.cancel(); });
    });
  };
  if (drain_asked) {
    spdlog::info("drain mode (SIGUSR1 while starting): puts are refused from now on");
    broker->set_draining(true);
  }

  // Only now that the signals are handled: a test may signal as soon as it reads this line.
  std::printf("delayqd listening on %s\n", server.local_address().c_str());
  if (http) std::printf("delayqd http listening on %s\n", http->local_address().c_str());
  std::fflush(stdout);
  apps::notify_systemd("READY=1\nSTATUS=serving");
  io.run();
  if (exit_code == kStoreFailed) {
    // Not closed: a store in its error state takes no more writes, and RocksDB may abort on
    // closing files whose write failed. Acknowledged changes are on disk already.
    spdlog::critical("exiting with status 1 without closing the store; a restart recovers it");
    spdlog::shutdown();
    std::_Exit(1);
  }
  if (Status s = broker->close(); !s.is_ok()) {
    // As above: a store whose write failed is not closed.
    spdlog::critical("final commit failed, exiting with status 1: {}", s.to_string());
    spdlog::shutdown();
    std::_Exit(1);
  }
  spdlog::info("stopped");
  return exit_code;
}

}  // namespace

int main(int argc, char** argv) {
  // Blocks of 512 KiB and more (RocksDB's memtable arenas, among others) are mapped and unmapped
  // on their own, so a flushed memtable's memory goes back to the system. glibc would otherwise
  // raise this threshold after the first such free and keep the freed arenas in the heap: ~45
  // bytes of RSS per pending job that no job uses (docs/BENCHMARKS.md).
  mallopt(M_MMAP_THRESHOLD, 512 * 1024);
  Flags flags;
  CLI::App app{"delayqd: a durable delayed-job server speaking the beanstalkd protocol"};
  app.set_config("--config", "", "read flags from this TOML/INI file (flag = value)");
  app.allow_config_extras(false);  // a key that names no flag is an error, not a silent default
  app.set_version_flag("-v,--version",
                       "delayqd " DELAYQ_VERSION " (" + store::RocksStore::library() + ")");
  app.add_option("-l,--listen", flags.server.address,
                 "address or host name to listen on (IPv6 too)")
      ->capture_default_str();
  app.add_option("-p,--port", flags.server.port, "TCP port (0: any free port)")
      ->capture_default_str();
  app.add_option("-b,--data-dir", flags.node.data_dir, "data directory (created if missing)")
      ->capture_default_str();
  app.add_option("-z,--max-job-size", flags.server.max_job_bytes, "largest job body, in bytes")
      ->capture_default_str()
      ->check(CLI::Range(std::size_t{1}, std::size_t{1} << 30));
  app.add_option("--min-free-disk", flags.node.min_free_disk_bytes,
                 "free space kept on the data directory's disk (256MiB, 1GB...): below it, new "
                 "jobs are refused and the server is not ready until there is room; 0: none")
      ->transform(CLI::AsSizeValue(false))
      ->check(apps::whole_number(0, std::uint64_t{1} << 50, " bytes (1 PiB)"))
      ->default_str("256MiB");
  app.add_option("--window", flags.window_seconds,
                 "delayed jobs due more than this many seconds ahead are kept on disk only and "
                 "loaded back ahead of their time (the far tier); 0: every job in memory")
      ->capture_default_str()
      ->check(apps::whole_number(0, 365LL * 86400, " seconds (a year)"));
  app.add_option("--fsync", flags.fsync,
                 "durability: always (fsync before every reply), interval:MS, or none")
      ->capture_default_str();
  app.add_option("--max-connections", flags.server.max_connections, "open connections at most")
      ->capture_default_str()
      ->check(apps::whole_number(1, 1'000'000));
  app.add_option("--command-timeout", flags.server.command_timeout,
                 "seconds a command (line and body) may take to arrive whole; a connection "
                 "still sending one, or stopped halfway, is closed")
      ->default_str("60")  // a number of seconds, as it is given
      ->check(CLI::Range(1, 86400));
  app.add_option("--http", flags.http_listen,
                 "HTTP/JSON API address, ADDR:PORT, [IPV6]:PORT or NAME:PORT (port 0: any "
                 "free port), or off")
      ->capture_default_str();
  app.add_option("--tls-cert", flags.http.tls_cert_file,
                 "PEM certificate chain: the HTTP API speaks HTTPS (with --tls-key)");
  app.add_option("--tls-key", flags.http.tls_key_file, "PEM private key of --tls-cert");
  app.add_option("--http-token-file", flags.http_token_file,
                 "bearer tokens for the HTTP API, one a line (without one, anyone who reaches "
                 "the HTTP port may change any job)");
  app.add_option("--webhook-ca-file", flags.deliverer.sender.ca_file,
                 "PEM file of CAs trusted for https webhooks, beside the system's");
  app.add_option("--http-max-connections", flags.http.max_connections,
                 "open HTTP connections at most")
      ->capture_default_str()
      ->check(apps::whole_number(1, 1'000'000));
  app.add_option("--redis", flags.redis,
                 "keep the jobs in Redis instead of the data directory: HOST:PORT[,HOST:PORT...] "
                 "of a Redis Cluster's nodes, or of one Redis; other delayqd nodes may share it");
  app.add_option("--redis-prefix", flags.redis_options.prefix,
                 "what delayq's Redis keys start with (deployments with different prefixes share "
                 "a Redis)")
      ->capture_default_str();
  app.add_option("--redis-shards", flags.redis_options.shards,
                 "logical shards of a Redis layout made by this node (fixed at its first start)")
      ->capture_default_str()
      ->check(CLI::Range(1, 16384));
  app.add_option("--redis-wait", flags.redis_wait,
                 "on: a reply waits until a replica has the change (WAIT 1), where there are "
                 "replicas; off: not")
      ->capture_default_str()
      ->check(CLI::IsMember({"on", "off"}));
  app.add_option("--redis-prefetch", flags.redis_prefetch_ms,
                 "milliseconds a worker's next job, reserved by its delete, waits for its next "
                 "reserve (one call a job instead of two; other clients see the job reserved "
                 "meanwhile); 0: off")
      ->capture_default_str()
      ->check(apps::whole_number(0, 10'000));
  app.add_flag("--accept-torn-tail", flags.node.store.accept_torn_tail,
               "start even if the write-ahead log has a bad record before its end (drops it and "
               "all after it; a torn last record, what a crash leaves, is always dropped)");
  app.add_flag("-V,--verbose", flags.verbose, "log more (repeat for even more)");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ConfigError& error) {
    // CLI11 says "INI was not able to parse KEY" of a key that names no flag, TOML or not.
    std::string why = error.what();
    constexpr std::string_view kExtra = "INI was not able to parse ";
    if (why.starts_with(kExtra)) {
      why = "unknown key '" + why.substr(kExtra.size()) + "': it names no flag (see --help)";
    }
    std::fprintf(stderr, "delayqd: config file %s: %s\n",
                 app["--config"]->as<std::string>().c_str(), why.c_str());
    return 2;
  } catch (const CLI::ParseError& error) {
    // --help and --version exit 0; every usage error, a config file's included, exits 2.
    return app.exit(error) == 0 ? 0 : 2;
  }

  if (Status s = front::check_listen_address("", flags.server.address); !s.is_ok()) {
    std::fprintf(stderr, "delayqd: %s\n", s.message().c_str());
    return 2;
  }
  auto durability = store::Durability::parse(flags.fsync);
  if (!durability.is_ok()) {
    std::fprintf(stderr, "delayqd: %s\n", durability.status().message().c_str());
    return 2;
  }
  flags.node.durability = durability.value();
  if (flags.window_seconds > 0)
    flags.node.engine.window = std::chrono::seconds(flags.window_seconds);
  for (std::size_t from = 0; !flags.redis.empty() && from <= flags.redis.size();) {
    const auto comma = flags.redis.find(',', from);
    const std::string seed = flags.redis.substr(from, comma - from);
    if (!split_host_port(seed)) {
      std::fprintf(stderr, "delayqd: --redis wants HOST:PORT[,HOST:PORT...], not '%s'\n",
                   seed.c_str());
      return 2;
    }
    flags.redis_options.client.seeds.push_back(seed);
    if (comma == std::string::npos) break;
    from = comma + 1;
  }
  flags.redis_options.wait_for_replica = flags.redis_wait == "on";
  flags.redis_options.prefetch = broker::redis::Millis{flags.redis_prefetch_ms};
  flags.http_explicit = app.count("--http") > 0;
  if (!flags.http_token_file.empty()) {
    auto tokens = read_tokens(flags.http_token_file);
    if (!tokens.is_ok()) {
      std::fprintf(stderr, "delayqd: %s\n", tokens.status().message().c_str());
      return 2;
    }
    flags.http.api.tokens = std::move(tokens).value();
  }
  if (flags.http_listen != "off") {
    const std::optional<std::pair<std::string, std::uint16_t>> split =
        split_host_port(flags.http_listen);
    if (!split) {
      std::fprintf(stderr,
                   "delayqd: --http wants ADDR:PORT, [IPV6]:PORT, NAME:PORT or off, not '%s'\n",
                   flags.http_listen.c_str());
      return 2;
    }
    flags.http.address = split->first;
    flags.http.port = split->second;
    if (Status s = front::check_listen_address("HTTP ", flags.http.address); !s.is_ok()) {
      std::fprintf(stderr, "delayqd: %s\n", s.message().c_str());
      return 2;
    }
  }
  flags.http.api.max_job_bytes = flags.server.max_job_bytes;
  // A body in JSON may take up to 6 bytes per byte (\u0000 escapes): room for the largest job.
  flags.http.max_body_bytes =
      std::max<std::uint64_t>(flags.http.max_body_bytes, flags.server.max_job_bytes * 6 + 65536);
  flags.http.api.version = DELAYQ_VERSION;
  flags.http.api.mode = flags.redis.empty() ? "local" : "redis";
  spdlog::set_default_logger(spdlog::stderr_color_mt("delayqd"));  // stdout is for the port line
  spdlog::set_level(flags.verbose >= 2   ? spdlog::level::trace
                    : flags.verbose == 1 ? spdlog::level::debug
                                         : spdlog::level::info);
  std::signal(SIGPIPE, SIG_IGN);
  return run(flags);
}
