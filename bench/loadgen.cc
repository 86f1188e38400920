// loadgen — drives any beanstalkd-protocol server (delayqd, beanstalkd) over loopback and
// reports throughput and latency percentiles. Each of --connections threads owns one
// connection and runs for --seconds:
//   --mode put    pipelined puts, --depth at a time (a producer's load);
//   --mode work   put, reserve, delete, one after the other (a worker's round trip);
//   --mode delay  puts due --delay-ms ahead, read back by a worker connection per thread; reports
//                 how late each job is handed out after its due time (never early, or it fails).
// Usage: loadgen --port P [--host 127.0.0.1] [--mode put|work|delay] [--connections 4]
//                [--seconds 5] [--depth 16] [--bytes 100] [--delay-ms 1000]
// Prints one line: mode, operations/s and latency percentiles in microseconds.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

struct Options {
  std::string host = "127.0.0.1";
  int port = 0;
  std::string mode = "put";
  int connections = 4;
  double seconds = 5;
  int depth = 16;
  int bytes = 100;
  int delay_ms = 1000;
};

[[noreturn]] void die(const std::string& what) {
  std::fprintf(stderr, "loadgen: %s\n", what.c_str());
  std::exit(1);
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    const std::string value = argv[i + 1];
    if (flag == "--host")
      o.host = value;
    else if (flag == "--port")
      o.port = std::stoi(value);
    else if (flag == "--mode")
      o.mode = value;
    else if (flag == "--connections")
      o.connections = std::stoi(value);
    else if (flag == "--seconds")
      o.seconds = std::stod(value);
    else if (flag == "--depth")
      o.depth = std::stoi(value);
    else if (flag == "--bytes")
      o.bytes = std::stoi(value);
    else if (flag == "--delay-ms")
      o.delay_ms = std::stoi(value);
    else
      die("unknown flag " + flag);
  }
  if (o.port <= 0 || o.connections < 1 || o.depth < 1 || o.seconds <= 0) die("bad options");
  return o;
}

// A blocking connection that reads replies line by line.
class Connection {
 public:
  Connection(const std::string& host, int port) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_port = htons(static_cast<std::uint16_t>(port));
    ::inet_pton(AF_INET, host.c_str(), &address.sin_addr);
    if (::connect(fd_, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0) {
      die("cannot connect to " + host + ":" + std::to_string(port));
    }
    int one = 1;
    ::setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  }
  ~Connection() { ::close(fd_); }
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  void send(const std::string& bytes) {
    std::size_t sent = 0;
    while (sent < bytes.size()) {
      const ssize_t n = ::send(fd_, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL);
      if (n <= 0) die("send failed");
      sent += static_cast<std::size_t>(n);
    }
  }
  std::string line() {
    for (;;) {
      const std::size_t end = buffer_.find("\r\n");
      if (end != std::string::npos) {
        std::string text = buffer_.substr(0, end);
        buffer_.erase(0, end + 2);
        return text;
      }
      fill();
    }
  }
  void skip(std::size_t bytes) {
    while (buffer_.size() < bytes) fill();
    buffer_.erase(0, bytes);
  }

 private:
  void fill() {
    char chunk[65536];
    const ssize_t n = ::recv(fd_, chunk, sizeof chunk, 0);
    if (n <= 0) die("connection closed");
    buffer_.append(chunk, static_cast<std::size_t>(n));
  }
  int fd_ = -1;
  std::string buffer_;
};

std::string put_command(int delay_seconds, const std::string& body) {
  return "put 100 " + std::to_string(delay_seconds) + " 60 " + std::to_string(body.size()) +
         "\r\n" + body + "\r\n";
}

std::uint64_t expect_id(Connection& c, const char* word) {
  const std::string reply = c.line();
  if (reply.rfind(word, 0) != 0) die("expected " + std::string(word) + ", got '" + reply + "'");
  return std::strtoull(reply.c_str() + std::strlen(word), nullptr, 10);
}

struct Results {
  std::mutex mutex;
  std::vector<double> latencies_us;
  std::uint64_t operations = 0;
  void add(std::uint64_t ops, std::vector<double>& samples) {
    std::lock_guard lock(mutex);
    operations += ops;
    latencies_us.insert(latencies_us.end(), samples.begin(), samples.end());
  }
};

double micros(Clock::duration d) {
  return std::chrono::duration<double, std::micro>(d).count();
}

void run_put(const Options& o, Clock::time_point end, Results& results) {
  Connection c(o.host, o.port);
  const std::string body(static_cast<std::size_t>(o.bytes), 'x');
  std::string batch;
  for (int i = 0; i < o.depth; ++i) batch += put_command(0, body);
  std::vector<double> samples;
  std::uint64_t ops = 0;
  while (Clock::now() < end) {
    const auto start = Clock::now();
    c.send(batch);
    for (int i = 0; i < o.depth; ++i) expect_id(c, "INSERTED ");
    samples.push_back(micros(Clock::now() - start));  // one pipelined batch
    ops += static_cast<std::uint64_t>(o.depth);
  }
  results.add(ops, samples);
}

void run_work(const Options& o, Clock::time_point end, Results& results) {
  Connection c(o.host, o.port);
  const std::string body(static_cast<std::size_t>(o.bytes), 'x');
  const std::string put = put_command(0, body);
  std::vector<double> samples;
  std::uint64_t ops = 0;
  while (Clock::now() < end) {
    const auto start = Clock::now();
    c.send(put);
    expect_id(c, "INSERTED ");
    c.send("reserve\r\n");
    const std::string reserved = c.line();
    if (reserved.rfind("RESERVED ", 0) != 0) die("expected RESERVED, got '" + reserved + "'");
    const std::uint64_t id = std::strtoull(reserved.c_str() + 9, nullptr, 10);
    c.skip(body.size() + 2);
    c.send("delete " + std::to_string(id) + "\r\n");
    if (c.line() != "DELETED") die("expected DELETED");
    samples.push_back(micros(Clock::now() - start));
    ++ops;
  }
  results.add(ops, samples);
}

// Puts jobs due delay_ms ahead (the protocol's delays are whole seconds, so delay_ms rounds up
// to seconds) on one connection and reserves them on another; lateness is measured from the
// moment the put was acknowledged plus the delay. A job handed out early fails the run.
void run_delay(const Options& o, Clock::time_point end, Results& results, int thread) {
  Connection producer(o.host, o.port);
  Connection worker(o.host, o.port);
  const std::string tube = "loadgen-delay-" + std::to_string(thread);
  producer.send("use " + tube + "\r\n");
  producer.line();
  worker.send("watch " + tube + "\r\n");
  worker.line();
  worker.send("ignore default\r\n");
  worker.line();
  const int delay_seconds = std::max(1, (o.delay_ms + 999) / 1000);
  std::vector<double> samples;
  std::uint64_t ops = 0;
  while (Clock::now() < end) {
    const auto sent = Clock::now();
    producer.send(put_command(delay_seconds, "job"));
    expect_id(producer, "INSERTED ");
    worker.send("reserve\r\n");
    const std::string reserved = worker.line();
    const auto got = Clock::now();
    if (reserved.rfind("RESERVED ", 0) != 0) die("expected RESERVED, got '" + reserved + "'");
    const std::uint64_t id = std::strtoull(reserved.c_str() + 9, nullptr, 10);
    worker.skip(5);
    // The server may have taken the job's time as late as the INSERTED reply: a job handed out
    // before `sent + delay` is certainly early.
    const double late_us = micros(got - sent) - delay_seconds * 1e6;
    if (late_us < 0) die("job " + std::to_string(id) + " handed out early");
    samples.push_back(late_us);
    worker.send("delete " + std::to_string(id) + "\r\n");
    worker.line();
    ++ops;
  }
  results.add(ops, samples);
}

double percentile(std::vector<double>& sorted, double p) {
  if (sorted.empty()) return 0;
  const auto index = static_cast<std::size_t>(p * static_cast<double>(sorted.size() - 1));
  return sorted[index];
}

}  // namespace

int main(int argc, char** argv) {
  const Options o = parse(argc, argv);
  Results results;
  const auto start = Clock::now();
  const auto end =
      start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(o.seconds));
  std::vector<std::thread> threads;
  for (int i = 0; i < o.connections; ++i) {
    threads.emplace_back([&, i] {
      if (o.mode == "put")
        run_put(o, end, results);
      else if (o.mode == "work")
        run_work(o, end, results);
      else if (o.mode == "delay")
        run_delay(o, end, results, i);
      else
        die("unknown mode " + o.mode);
    });
  }
  for (auto& thread : threads) thread.join();
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  std::sort(results.latencies_us.begin(), results.latencies_us.end());
  const char* unit = o.mode == "delay" ? "lateness" : o.mode == "put" ? "batch latency" : "latency";
  std::printf("mode=%s connections=%d ops=%llu ops/s=%.0f %s us: p50=%.0f p99=%.0f max=%.0f\n",
              o.mode.c_str(), o.connections, static_cast<unsigned long long>(results.operations),
              static_cast<double>(results.operations) / seconds, unit,
              percentile(results.latencies_us, 0.5), percentile(results.latencies_us, 0.99),
              results.latencies_us.empty() ? 0.0 : results.latencies_us.back());
  return 0;
}
