// loadgen — drives any beanstalkd-protocol server (delayqd, beanstalkd) over loopback and
// reports throughput and latency percentiles. Modes:
//   put    --connections threads, each putting --depth jobs per write (pipelined) with a delay of
//          --delay seconds, for --seconds or until --count jobs in all;
//   drain  puts --count ready jobs first (untimed; --fill off: the jobs are there already), then
//          --connections workers reserve and delete them, --depth at a time per write, until none
//          is left: the reserve+delete rate (--depth 1: a worker's, one job at a time);
//   work   put, reserve, delete, one after the other on each connection (a round trip);
//   reschedule  --connections threads, each sending --depth `reschedule`s per write (pipelined)
//          of random ids from 1 to --max-id, each to a random time --delay to 2 x --delay
//          seconds ahead, for --seconds or until --count in all; every one must be RESCHEDULED;
//   late   one producer puts jobs delayed --delay seconds at --rate jobs/s for --seconds, and
//          --connections workers reserve and delete them; reports how late each job is handed
//          out after its due time, and fails if one comes out early; also counted from when a
//          worker was free to take it (the later of its due time and the reserve that got it:
//          leaves out the time all workers were busy with earlier jobs), and what a worker's
//          delete took. --jitter on spaces the puts
//          by a random 0.5 to 1.5 periods instead of exactly one, so that they fall at every
//          moment of the server's millisecond rather than at one phase of it for a whole run.
//          --worker-port puts the workers on another server (another node over the same Redis);
//          a list P1,P2,... spreads them over several, worker i on the (i mod n)-th.
// Usage: loadgen --port P [--host 127.0.0.1] [--mode put|drain|work|late|reschedule]
//                [--connections 4] [--seconds 5] [--depth 16] [--bytes 100] [--delay 0]
//                [--count 0] [--rate 1000] [--jitter on] [--worker-port P[,P...]] [--max-id N]
//                [--fill off]
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
#include <random>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

struct Options {
  std::string host = "127.0.0.1";
  int port = 0;
  std::vector<int> worker_ports;  // late: the workers' servers (none: --port)
  std::string mode = "put";
  int connections = 4;
  double seconds = 5;
  int depth = 16;
  int bytes = 100;
  int delay = 0;             // seconds
  std::uint64_t count = 0;   // 0: no limit
  int rate = 1000;           // late: jobs per second
  bool jitter = false;       // late: random gaps between puts (mean: one period)
  bool fill = true;          // drain: put the jobs first
  std::uint64_t max_id = 0;  // reschedule: ids from 1 to this
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
    else if (flag == "--worker-port")
      for (std::size_t at = 0; at <= value.size();) {
        const std::size_t comma = std::min(value.find(',', at), value.size());
        o.worker_ports.push_back(std::stoi(value.substr(at, comma - at)));
        at = comma + 1;
      }
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
    else if (flag == "--delay")
      o.delay = std::stoi(value);
    else if (flag == "--count")
      o.count = std::stoull(value);
    else if (flag == "--rate")
      o.rate = std::stoi(value);
    else if (flag == "--jitter" && value == "on")
      o.jitter = true;
    else if (flag == "--fill" && value == "off")
      o.fill = false;
    else if (flag == "--max-id")
      o.max_id = std::stoull(value);
    else
      die("unknown flag " + flag);
  }
  if (o.port <= 0 || o.connections < 1 || o.depth < 1 || o.seconds <= 0) die("bad options");
  if (o.worker_ports.empty()) o.worker_ports.push_back(o.port);
  if (o.mode == "reschedule" && (o.max_id == 0 || o.delay < 1)) {
    die("reschedule needs --max-id and a --delay of 1 s or more");
  }
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
  std::uint64_t missed = 0;  // late: reserves that timed out while jobs were due all along
  // late: each job's lateness counted from when a worker was free to take it (the later of its
  // due time and the reserve that got it), which leaves out the time every worker was busy
  // deleting earlier jobs; and each worker's delete, sent to DELETED.
  std::vector<double> handed_us;
  std::vector<double> deletes_us;
  void add(std::uint64_t ops, std::vector<double>& samples, std::uint64_t timed_out = 0,
           const std::vector<double>& handed = {}, const std::vector<double>& deletes = {}) {
    std::lock_guard lock(mutex);
    operations += ops;
    missed += timed_out;
    latencies_us.insert(latencies_us.end(), samples.begin(), samples.end());
    handed_us.insert(handed_us.end(), handed.begin(), handed.end());
    deletes_us.insert(deletes_us.end(), deletes.begin(), deletes.end());
  }
};

double micros(Clock::duration d) {
  return std::chrono::duration<double, std::micro>(d).count();
}

std::atomic<std::uint64_t> g_budget{0};  // puts left to do when --count is set

// Takes up to `want` operations from the shared budget (all of them when there is no limit).
int take_budget(const Options& o, int want) {
  if (o.count == 0) return want;
  std::uint64_t left = g_budget.load();
  for (;;) {
    if (left == 0) return 0;
    const std::uint64_t take = std::min<std::uint64_t>(left, static_cast<std::uint64_t>(want));
    if (g_budget.compare_exchange_weak(left, left - take)) return static_cast<int>(take);
  }
}

// Sends `command()` --depth times per write (pipelined), for --seconds or until --count in all,
// and `check`s each answer; one latency sample per write.
template <typename Command, typename Check>
void run_pipelined(const Options& o, Clock::time_point end, Results& results, Command command,
                   Check check) {
  Connection c(o.host, o.port);
  std::vector<double> samples;
  std::uint64_t ops = 0;
  while (Clock::now() < end) {
    const int depth = take_budget(o, o.depth);
    if (depth == 0) break;
    std::string batch;
    for (int i = 0; i < depth; ++i) batch += command();
    const auto start = Clock::now();
    c.send(batch);
    for (int i = 0; i < depth; ++i) check(c);
    samples.push_back(micros(Clock::now() - start));
    ops += static_cast<std::uint64_t>(depth);
  }
  results.add(ops, samples);
}

void run_put(const Options& o, Clock::time_point end, Results& results) {
  const std::string one = put_command(o.delay, std::string(static_cast<std::size_t>(o.bytes), 'x'));
  run_pipelined(
      o, end, results, [&one]() -> const std::string& { return one; },
      [](Connection& c) { expect_id(c, "INSERTED "); });
}

void run_reschedule(const Options& o, Clock::time_point end, Results& results) {
  std::mt19937_64 random(std::random_device{}());
  std::uniform_int_distribution<std::uint64_t> ids(1, o.max_id);
  const std::int64_t delay_ms = std::int64_t{o.delay} * 1000;
  std::uniform_int_distribution<std::int64_t> when(delay_ms, 2 * delay_ms);
  run_pipelined(
      o, end, results,
      [&] {
        return "reschedule " + std::to_string(ids(random)) + " " + std::to_string(when(random)) +
               "\r\n";
      },
      [](Connection& c) {
        const std::string reply = c.line();
        if (reply != "RESCHEDULED") die("expected RESCHEDULED, got '" + reply + "'");
      });
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

// Reserves and deletes until the server has nothing ready (TIMED_OUT on a zero timeout),
// --depth reserves per write, then their deletes in one write.
void run_drain(const Options& o, Results& results, std::atomic<bool>& empty) {
  Connection c(o.host, o.port);
  std::vector<double> samples;
  std::uint64_t ops = 0;
  std::string reserves;
  for (int i = 0; i < o.depth; ++i) reserves += "reserve-with-timeout 0\r\n";
  while (!empty.load()) {
    const auto start = Clock::now();
    c.send(reserves);
    std::string deletes;
    int reserved = 0;
    for (int i = 0; i < o.depth; ++i) {
      const std::string reply = c.line();
      if (reply == "TIMED_OUT") {
        empty = true;
        continue;
      }
      if (reply.rfind("RESERVED ", 0) != 0) die("expected RESERVED, got '" + reply + "'");
      c.skip(static_cast<std::size_t>(o.bytes) + 2);
      deletes += "delete " + reply.substr(9, reply.find(' ', 9) - 9) + "\r\n";
      ++reserved;
    }
    if (reserved == 0) break;
    c.send(deletes);
    for (int i = 0; i < reserved; ++i) {
      if (c.line() != "DELETED") die("expected DELETED");
    }
    samples.push_back(micros(Clock::now() - start));  // one batch
    ops += static_cast<std::uint64_t>(reserved);
  }
  results.add(ops, samples);
}

// The producer of `late`: puts at a steady rate, remembering when each put was sent.
// By id: a job's id says nothing of when it was put (in Redis mode ids go by shard).
struct Sent {
  std::mutex mutex;
  std::unordered_map<std::uint64_t, Clock::time_point> at;
};

void run_late_producer(const Options& o, Clock::time_point end, Sent& sent, std::uint64_t& puts) {
  Connection c(o.host, o.port);
  c.send("use loadgen-late\r\n");
  c.line();
  const std::string put = put_command(o.delay, std::string(static_cast<std::size_t>(o.bytes), 'x'));
  const auto period = std::chrono::duration_cast<Clock::duration>(
      std::chrono::duration<double>(1.0 / std::max(1, o.rate)));
  std::mt19937_64 random(std::random_device{}());
  std::uniform_real_distribution<double> gap(0.5, 1.5);
  auto next = Clock::now();
  while (next < end) {
    std::this_thread::sleep_until(next);
    const auto before = Clock::now();
    c.send(put);
    const std::uint64_t id = expect_id(c, "INSERTED ");
    {
      std::lock_guard lock(sent.mutex);
      sent.at[id] = before;
    }
    ++puts;
    next += o.jitter ? std::chrono::duration_cast<Clock::duration>(period * gap(random)) : period;
  }
}

// A worker of `late`: lateness = reserve time - (put sent + delay); early is a failure.
void run_late_worker(const Options& o, int worker, Clock::time_point end, Sent& sent,
                     Results& results) {
  Connection c(o.host, o.worker_ports[static_cast<std::size_t>(worker) % o.worker_ports.size()]);
  c.send("watch loadgen-late\r\n");
  c.line();
  c.send("ignore default\r\n");
  c.line();
  std::vector<double> samples;
  std::vector<double> handed;
  std::vector<double> deletes;
  std::uint64_t ops = 0;
  std::uint64_t missed = 0;
  const auto stop = end + std::chrono::seconds(o.delay + 2);
  // Between these a job falls due every period: a reserve of a second that times out there
  // was not woken for jobs that were ready (a lost wake-up), which its lateness shows too.
  const auto span = [](double seconds) {
    return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
  };
  const auto due_from = end - span(o.seconds) + span(o.delay + 1.0);
  const auto due_to = end + span(o.delay);
  while (Clock::now() < stop) {
    const auto asked = Clock::now();
    c.send("reserve-with-timeout 1\r\n");
    const std::string reply = c.line();
    if (reply == "TIMED_OUT") {
      if (asked >= due_from && Clock::now() <= due_to) ++missed;
      continue;
    }
    const auto got = Clock::now();
    if (reply.rfind("RESERVED ", 0) != 0) die("expected RESERVED, got '" + reply + "'");
    const std::uint64_t id = std::strtoull(reply.c_str() + 9, nullptr, 10);
    c.skip(static_cast<std::size_t>(o.bytes) + 2);
    Clock::time_point put_at{};
    // With no delay the job can reach a worker before its INSERTED reaches the producer, which
    // notes the put's time only then: wait a little for it.
    for (const auto wait_until = got + std::chrono::milliseconds(100);;) {
      {
        std::lock_guard lock(sent.mutex);
        if (const auto it = sent.at.find(id); it != sent.at.end()) {
          put_at = it->second;
          sent.at.erase(it);
          break;
        }
      }
      if (Clock::now() >= wait_until) break;
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
    if (put_at != Clock::time_point{}) {
      // The put left at put_at, so its due time is no earlier than put_at + delay.
      const double late_us = micros(got - put_at) - o.delay * 1e6;
      if (late_us < 0) die("job " + std::to_string(id) + " handed out early");
      samples.push_back(late_us);
      const auto due = put_at + span(o.delay);
      handed.push_back(micros(got - std::max(due, asked)));
    }
    const auto deleting = Clock::now();
    c.send("delete " + std::to_string(id) + "\r\n");
    c.line();
    deletes.push_back(micros(Clock::now() - deleting));
    ++ops;
  }
  results.add(ops, samples, missed, handed, deletes);
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
  g_budget = o.count;
  if (o.mode == "drain" && o.fill) {
    if (o.count == 0) die("drain needs --count");
    Options fill = o;
    fill.delay = 0;
    Results ignored;
    run_put(fill, Clock::time_point::max(), ignored);  // untimed
  }
  const auto work_start = Clock::now();
  const auto work_end = work_start + (end - start);
  std::atomic<bool> empty{false};
  Sent sent;
  std::uint64_t puts = 0;
  if (o.mode == "late") {
    threads.emplace_back([&] { run_late_producer(o, work_end, sent, puts); });
  }
  for (int i = 0; i < o.connections; ++i) {
    threads.emplace_back([&, i] {
      if (o.mode == "put")
        run_put(o, work_end, results);
      else if (o.mode == "work")
        run_work(o, work_end, results);
      else if (o.mode == "drain")
        run_drain(o, results, empty);
      else if (o.mode == "late")
        run_late_worker(o, i, work_end, sent, results);
      else if (o.mode == "reschedule")
        run_reschedule(o, work_end, results);
      else
        die("unknown mode " + o.mode);
    });
  }
  for (auto& thread : threads) thread.join();
  if (o.mode == "late" && results.operations != puts) {
    die("put " + std::to_string(puts) + " jobs, received " + std::to_string(results.operations));
  }
  const double seconds = std::chrono::duration<double>(Clock::now() - work_start).count();
  std::sort(results.latencies_us.begin(), results.latencies_us.end());
  const char* unit = o.mode == "late"                            ? "lateness"
                     : o.mode == "put" || o.mode == "reschedule" ? "batch latency"
                                                                 : "latency";
  std::printf("mode=%s connections=%d ops=%llu ops/s=%.0f %s us: p50=%.0f p99=%.0f max=%.0f",
              o.mode.c_str(), o.connections, static_cast<unsigned long long>(results.operations),
              static_cast<double>(results.operations) / seconds, unit,
              percentile(results.latencies_us, 0.5), percentile(results.latencies_us, 0.99),
              results.latencies_us.empty() ? 0.0 : results.latencies_us.back());
  if (o.mode == "late") {
    // On the same line (the scripts read fields from it).
    std::sort(results.handed_us.begin(), results.handed_us.end());
    std::sort(results.deletes_us.begin(), results.deletes_us.end());
    std::printf(
        " from a free worker us: handed_p50=%.0f handed_p99=%.0f delete us: "
        "delete_p50=%.0f delete_p99=%.0f",
        percentile(results.handed_us, 0.5), percentile(results.handed_us, 0.99),
        percentile(results.deletes_us, 0.5), percentile(results.deletes_us, 0.99));
  }
  std::printf("\n");
  if (o.mode == "late" && results.missed > 0) {
    std::printf("reserves timed out while jobs were due: %llu\n",
                static_cast<unsigned long long>(results.missed));
  }
  return 0;
}
