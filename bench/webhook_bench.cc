// webhook_bench — push delivery end to end: a keep-alive HTTP receiver in this process, a running
// delayqd told (over its HTTP API) to POST one tube's jobs to it, and jobs put over the beanstalkd
// protocol with absolute due times (putx @ms). Each body carries its due time, so the receiver
// knows how late each request arrived. Modes:
//   late        --rate jobs/s due --delay ms after their put, for --seconds: lateness p50/p99/max
//               from the due millisecond to the request's arrival; fails if one is early;
//   throughput  --count jobs due at once (the same millisecond, a moment after they are all
//               put): deliveries per second from the first request to the last;
//   rate        as throughput, with the webhook's rate set to --limit: how long the burst takes.
// --pid P adds delayqd's CPU time (user + system, /proc) per delivery: with its put in late
// mode, alone in the others.
// Usage: webhook_bench --port BEANSTALK_PORT --http HTTP_PORT [--mode late|throughput|rate]
//          [--rate 1000] [--delay 1000] [--seconds 5] [--count 20000] [--limit 1000]
//          [--concurrency 64] [--bytes 100] [--pid P]
// Prints one line of results.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;
using Clock = std::chrono::steady_clock;

struct Options {
  int port = 11300;
  int http_port = 8080;
  std::string mode = "late";
  double rate = 1000;
  long delay_ms = 1000;
  double seconds = 5;
  long count = 20000;
  double limit = 1000;
  long concurrency = 64;
  std::size_t bytes = 100;
  long pid = 0;
};

std::int64_t unix_us() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// The receiver: every request's lateness (arrival minus the due ms in its body), in us.
class Receiver {
 public:
  Receiver() : acceptor_(io_, {asio::ip::make_address("127.0.0.1"), 0}) {
    accept();
    thread_ = std::thread([this] { io_.run(); });
  }
  ~Receiver() {
    io_.stop();
    thread_.join();
  }
  [[nodiscard]] int port() const { return acceptor_.local_endpoint().port(); }
  [[nodiscard]] std::vector<std::int64_t> lateness() {
    std::lock_guard lock(mutex_);
    return lateness_;
  }
  [[nodiscard]] std::size_t received() const { return received_.load(); }
  [[nodiscard]] std::pair<std::int64_t, std::int64_t> span() {
    std::lock_guard lock(mutex_);
    return {first_us_, last_us_};
  }

 private:
  struct Connection : std::enable_shared_from_this<Connection> {
    explicit Connection(tcp::socket socket, Receiver& receiver)
        : stream(std::move(socket)), owner(receiver) {}
    void read() {
      request = {};
      http::async_read(stream, buffer, request,
                       [self = shared_from_this()](beast::error_code error, std::size_t) {
                         if (!error) self->answer();
                       });
    }
    void answer() {
      owner.record(request.body());
      response = {http::status::ok, 11};
      response.keep_alive(request.keep_alive());
      response.prepare_payload();
      http::async_write(stream, response,
                        [self = shared_from_this()](beast::error_code error, std::size_t) {
                          if (!error) self->read();
                        });
    }
    beast::tcp_stream stream;
    Receiver& owner;
    beast::flat_buffer buffer;
    http::request<http::string_body> request;
    http::response<http::empty_body> response;
  };

  void accept() {
    acceptor_.async_accept([this](beast::error_code error, tcp::socket socket) {
      if (error) return;
      socket.set_option(tcp::no_delay(true));
      std::make_shared<Connection>(std::move(socket), *this)->read();
      accept();
    });
  }
  void record(const std::string& body) {
    const std::int64_t now = unix_us();
    const std::int64_t due_ms = std::atoll(body.c_str());
    std::lock_guard lock(mutex_);
    lateness_.push_back(now - due_ms * 1000);
    if (first_us_ == 0) first_us_ = now;
    last_us_ = now;
    ++received_;
  }

  asio::io_context io_;
  tcp::acceptor acceptor_;
  std::thread thread_;
  std::mutex mutex_;
  std::vector<std::int64_t> lateness_;
  std::int64_t first_us_ = 0, last_us_ = 0;
  std::atomic<std::size_t> received_{0};
};

// One blocking request to delayqd's HTTP API; returns the status.
unsigned http_call(int port, http::verb verb, const std::string& target, const std::string& body) {
  asio::io_context io;
  beast::tcp_stream stream(io);
  stream.connect(
      tcp::endpoint(asio::ip::make_address("127.0.0.1"), static_cast<unsigned short>(port)));
  http::request<http::string_body> request{verb, target, 11};
  request.set(http::field::host, "127.0.0.1");
  request.body() = body;
  request.prepare_payload();
  http::write(stream, request);
  beast::flat_buffer buffer;
  http::response<http::string_body> response;
  http::read(stream, buffer, response);
  return response.result_int();
}

// A blocking beanstalkd connection that pipelines putx commands and reads their replies.
class Producer {
 public:
  explicit Producer(int port) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_port = htons(static_cast<std::uint16_t>(port));
    ::inet_pton(AF_INET, "127.0.0.1", &address.sin_addr);
    if (::connect(fd_, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0) {
      std::perror("connect");
      std::exit(1);
    }
    int one = 1;
    ::setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  }
  ~Producer() { ::close(fd_); }
  void send(const std::string& bytes) {
    std::size_t sent = 0;
    while (sent < bytes.size()) {
      const ssize_t n = ::write(fd_, bytes.data() + sent, bytes.size() - sent);
      if (n <= 0) std::exit(1);
      sent += static_cast<std::size_t>(n);
    }
  }
  // Reads `lines` reply lines; exits if one is not INSERTED or USING.
  void expect(std::size_t lines) {
    while (lines > 0) {
      char chunk[65536];
      const ssize_t n = ::read(fd_, chunk, sizeof chunk);
      if (n <= 0) std::exit(1);
      pending_.append(chunk, static_cast<std::size_t>(n));
      std::size_t at = 0;
      while (lines > 0) {
        const std::size_t end = pending_.find("\r\n", at);
        if (end == std::string::npos) break;
        const std::string line = pending_.substr(at, end - at);
        if (!line.starts_with("INSERTED") && !line.starts_with("USING")) {
          std::fprintf(stderr, "unexpected reply: %s\n", line.c_str());
          std::exit(1);
        }
        at = end + 2;
        --lines;
      }
      pending_.erase(0, at);
    }
  }
  static std::string putx(std::int64_t due_ms, std::size_t bytes) {
    std::string body = std::to_string(due_ms);
    body.resize(std::max(bytes, body.size()), ' ');
    return "putx 0 @" + std::to_string(due_ms) + " 60 " + std::to_string(body.size()) + "\r\n" +
           body + "\r\n";
  }

 private:
  int fd_ = -1;
  std::string pending_;
};

double cpu_seconds(long pid) {
  if (pid == 0) return 0;
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string text((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
  std::istringstream fields(text.substr(text.rfind(')') + 2));
  std::string skip;
  for (int i = 0; i < 11; ++i) fields >> skip;  // state .. cmajflt
  double user = 0, system = 0;
  fields >> user >> system;
  return (user + system) / static_cast<double>(sysconf(_SC_CLK_TCK));
}

std::int64_t percentile(std::vector<std::int64_t> sorted, double p) {
  if (sorted.empty()) return 0;
  std::sort(sorted.begin(), sorted.end());
  const auto index = static_cast<std::size_t>(p * static_cast<double>(sorted.size() - 1));
  return sorted[index];
}

bool wait_for(Receiver& receiver, std::size_t count, std::chrono::seconds limit) {
  const auto deadline = Clock::now() + limit;
  while (receiver.received() < count && Clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return receiver.received() >= count;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    const char* value = argv[i + 1];
    if (flag == "--port")
      o.port = std::atoi(value);
    else if (flag == "--http")
      o.http_port = std::atoi(value);
    else if (flag == "--mode")
      o.mode = value;
    else if (flag == "--rate")
      o.rate = std::atof(value);
    else if (flag == "--delay")
      o.delay_ms = std::atol(value);
    else if (flag == "--seconds")
      o.seconds = std::atof(value);
    else if (flag == "--count")
      o.count = std::atol(value);
    else if (flag == "--limit")
      o.limit = std::atof(value);
    else if (flag == "--concurrency")
      o.concurrency = std::atol(value);
    else if (flag == "--bytes")
      o.bytes = static_cast<std::size_t>(std::atol(value));
    else if (flag == "--pid")
      o.pid = std::atol(value);
    else {
      std::fprintf(stderr, "unknown flag %s\n", flag.c_str());
      return 2;
    }
  }
  Receiver receiver;
  const std::string tube = "bench-" + o.mode + "-" + std::to_string(unix_us());
  std::string hook = "{\"url\":\"http://127.0.0.1:" + std::to_string(receiver.port()) +
                     "/hook\",\"concurrency\":" + std::to_string(o.concurrency);
  if (o.mode == "rate") hook += ",\"rate\":" + std::to_string(o.limit);
  hook += "}";
  if (http_call(o.http_port, http::verb::put, "/v1/tubes/" + tube + "/webhook", hook) != 200) {
    std::fprintf(stderr, "cannot set the webhook\n");
    return 1;
  }
  Producer producer(o.port);
  producer.send("use " + tube + "\r\n");
  producer.expect(1);
  // late: the server's CPU for each job's put and its delivery; throughput and rate: for the
  // delivery alone (measured from the last put on).
  double cpu_before = cpu_seconds(o.pid);
  std::size_t total = 0;
  if (o.mode == "late") {
    const auto period = std::chrono::duration<double>(1.0 / o.rate);
    total = static_cast<std::size_t>(o.rate * o.seconds);
    const auto start = Clock::now();
    for (std::size_t i = 0; i < total; ++i) {
      std::this_thread::sleep_until(
          start + std::chrono::duration_cast<Clock::duration>(period * static_cast<double>(i)));
      producer.send(Producer::putx(unix_us() / 1000 + o.delay_ms, o.bytes));
      producer.expect(1);
    }
  } else {
    // Every job due at the same millisecond, far enough ahead for all of them to be put first.
    total = static_cast<std::size_t>(o.count);
    const std::int64_t due_ms = unix_us() / 1000 + 2000 + o.count / 50;
    constexpr std::size_t kBatch = 256;
    for (std::size_t sent = 0; sent < total; sent += kBatch) {
      const std::size_t n = std::min(kBatch, total - sent);
      std::string batch;
      for (std::size_t i = 0; i < n; ++i) batch += Producer::putx(due_ms, o.bytes);
      producer.send(batch);
      producer.expect(n);
    }
    if (unix_us() / 1000 >= due_ms) std::fprintf(stderr, "warning: puts ran past the due time\n");
    cpu_before = cpu_seconds(o.pid);
  }
  const auto limit =
      std::chrono::seconds(static_cast<long>(o.seconds) + o.delay_ms / 1000 + o.count / 100 + 30);
  const bool all = wait_for(receiver, total, limit);
  const double cpu = cpu_seconds(o.pid) - cpu_before;
  const auto late = receiver.lateness();
  const auto [first, last] = receiver.span();
  const std::int64_t early =
      std::count_if(late.begin(), late.end(), [](auto us) { return us < 0; });
  const double span_s = static_cast<double>(last - first) / 1e6;
  std::printf(
      "mode=%s jobs=%zu received=%zu early=%lld lateness_us p50=%lld p99=%lld max=%lld "
      "span_s=%.3f deliveries_per_s=%.0f server_cpu_us_per_delivery=%.1f\n",
      o.mode.c_str(), total, late.size(), static_cast<long long>(early),
      static_cast<long long>(percentile(late, 0.5)), static_cast<long long>(percentile(late, 0.99)),
      static_cast<long long>(percentile(late, 1.0)), span_s,
      span_s > 0 ? static_cast<double>(late.size()) / span_s : 0.0,
      o.pid != 0 && !late.empty() ? cpu * 1e6 / static_cast<double>(late.size()) : 0.0);
  (void)http_call(o.http_port, http::verb::delete_, "/v1/tubes/" + tube + "/webhook", "");
  return all && early == 0 ? 0 : 1;
}
