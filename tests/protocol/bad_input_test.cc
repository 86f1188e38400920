// Abuse over the wire, one fresh delayqd per test: random garbage, an endless line, bodies too big,
// too short and too long, thousands of idle connections, a client that trickles one byte every
// 50 ms, and one connection past --max-connections. After each abuse a second, well-behaved
// connection still gets correct answers (put, reserve, delete in a tube of its own): the server
// keeps serving the others and does not crash. Expected replies follow docs/protocol.md.
#include <gtest/gtest.h>
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <fstream>
#include <iostream>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "server_process.h"

namespace delayq::testing {
namespace {

using namespace std::string_literals;

constexpr std::uint32_t kGarbageSeed = 20240601;  // fixed: the garbage is the same every run
// A round trip beside a slow client (each with an fsync or two); the slow client takes about
// three times as long to send its command, so a server waiting for it would show.
constexpr Millis kFastRoundTrip{1000};

class BadInputTest : public ::testing::Test {
 protected:
  void TearDown() override {
    if (server_ && server_->running()) {
      EXPECT_EQ(server_->stop(), "exited 0");
    }
  }

  void start(std::vector<std::string> args = {}) {
    server_ = std::make_unique<ServerProcess>(dir_.path() / "data", std::move(args));
    ASSERT_EQ(server_->start(), "");
  }

  std::unique_ptr<Client> connect() {
    auto client = std::make_unique<Client>(server_->port());
    EXPECT_TRUE(client->connected()) << client->error();
    return client;
  }

  // A put / reserve / delete round trip in tube "check", on `c`. Returns "" if every reply was
  // right, else what went wrong.
  static std::string round_trip(Client& c) {
    if (const auto r = c.call("use check\r\n"); r != "USING check\r\n") return "use got " + r;
    // Idempotent, so that one connection can make many round trips.
    if (const auto r = c.call("watch check\r\n"); r.rfind("WATCHING ", 0) != 0) {
      return "watch got " + r;
    }
    if (const auto r = c.call("ignore default\r\n"); r != "WATCHING 1\r\n") {
      return "ignore got " + r;
    }
    const std::string put = c.call(put_command("ping"));
    const auto id = inserted_id(put);
    if (!id) return "put got " + put;
    const std::string id_text = std::to_string(*id);
    if (const auto r = c.call("reserve-with-timeout 0\r\n");
        r != job_reply("RESERVED", *id, "ping")) {
      return "reserve got " + r;
    }
    if (const auto r = c.call("delete " + id_text + "\r\n"); r != "DELETED\r\n") {
      return "delete got " + r;
    }
    return "";
  }

  // The same on a new connection: the server still serves others.
  std::string others_served() {
    Client c(server_->port());
    if (!c.connected()) return c.error();
    return round_trip(c);
  }

  TempDir dir_;
  std::unique_ptr<ServerProcess> server_;
};

// Lines of random bytes (some longer than 224 bytes, some with NULs or a stray \r), each ended
// by \r\n. With this seed none spells a command, so each gets BAD_FORMAT or UNKNOWN_COMMAND.
std::string garbage_lines(std::size_t min_bytes) {
  std::mt19937 rng(kGarbageSeed);
  std::uniform_int_distribution<int> byte(0, 255);
  std::uniform_int_distribution<std::size_t> short_length(0, 40);
  std::uniform_int_distribution<std::size_t> long_length(225, 900);
  std::string out;
  while (out.size() < min_bytes) {
    const std::size_t length = rng() % 4 == 0 ? long_length(rng) : short_length(rng);
    for (std::size_t i = 0; i < length; ++i) out.push_back(static_cast<char>(byte(rng)));
    out += "\r\n";
  }
  return out;
}

std::size_t count_lines(const std::string& bytes) {
  std::size_t n = 0;
  for (auto at = bytes.find("\r\n"); at != std::string::npos; at = bytes.find("\r\n", at + 2)) {
    ++n;
  }
  return n;
}

TEST_F(BadInputTest, RandomGarbageGetsOnlyErrorRepliesAndOthersAreServed) {
  start();
  // Pure noise first: a few KB with no structure at all, then lines of noise.
  std::mt19937 rng(kGarbageSeed + 1);
  std::string garbage;
  for (int i = 0; i < 4096; ++i) garbage.push_back(static_cast<char>(rng() & 0xff));
  garbage += "\r\n" + garbage_lines(8192);
  const std::size_t lines = count_lines(garbage);
  auto c = connect();
  ASSERT_TRUE(c->send(garbage));
  std::size_t replies = 0;
  bool closed = false;
  for (std::size_t i = 0; i < lines; ++i) {
    const auto line = c->read_line();
    if (!line) {
      closed = true;  // allowed: the server may hang up on garbage
      break;
    }
    ASSERT_TRUE(*line == "BAD_FORMAT\r\n" || *line == "UNKNOWN_COMMAND\r\n")
        << "reply " << i << ": " << *line;
    ++replies;
  }
  std::cout << garbage.size() << " bytes of garbage in " << lines << " lines, " << replies
            << " replies" << (closed ? ", then closed" : "") << std::endl;
  if (!closed) {
    EXPECT_EQ(replies, lines);
    EXPECT_TRUE(c->silent_for(Millis{100}));  // one reply per line, no more
    EXPECT_EQ(round_trip(*c), "");            // and the connection goes on
  }
  EXPECT_EQ(others_served(), "");
}

TEST_F(BadInputTest, EndlessLineIsOneBadFormatOnceItsEndComes) {
  start();
  auto c = connect();
  const std::string chunk(64 * 1024, 'x');
  ASSERT_TRUE(c->send("peek "));
  for (int i = 0; i < 16; ++i) {  // 1 MiB without \r\n
    ASSERT_TRUE(c->send(chunk)) << c->error();
    if (i == 8) {
      EXPECT_EQ(others_served(), "") << "while the line is half sent";
    }
  }
  EXPECT_TRUE(c->silent_for(Millis{200}));  // no reply before the end of the line
  EXPECT_EQ(c->call("\r\n"), "BAD_FORMAT\r\n");
  EXPECT_EQ(c->call("list-tube-used\r\n"), "USING default\r\n");
  EXPECT_EQ(round_trip(*c), "");
  EXPECT_EQ(others_served(), "");
}

TEST_F(BadInputTest, OversizedBodyIsJobTooBigAndTheConnectionGoesOn) {
  start();  // default -z: 65535 bytes
  auto c = connect();
  const std::string body(65536, 'b');
  EXPECT_EQ(c->call("put 0 0 10 65536\r\n" + body + "\r\n"), "JOB_TOO_BIG\r\n");
  EXPECT_EQ(c->call("list-tube-used\r\n"), "USING default\r\n");
  EXPECT_EQ(c->call("peek-ready\r\n"), "NOT_FOUND\r\n");  // nothing stored
  // The largest body allowed still goes in.
  const std::string largest(65535, 'l');
  const auto id = inserted_id(c->call(put_command(largest)));
  ASSERT_TRUE(id.has_value());
  EXPECT_EQ(c->call("peek " + std::to_string(*id) + "\r\n"), job_reply("FOUND", *id, largest));
  EXPECT_EQ(round_trip(*c), "");
  EXPECT_EQ(others_served(), "");
}

TEST_F(BadInputTest, ShortBodyWaitsForItsBytesThenExpectedCrlf) {
  start();
  auto c = connect();
  ASSERT_TRUE(c->send("put 0 0 10 10\r\nabc"));
  EXPECT_TRUE(c->silent_for(Millis{300}));  // the server waits for the other 7 bytes
  EXPECT_EQ(others_served(), "") << "while a body is incomplete";
  // The commands complete the body: "abc" + "list-tu", then "be" is not \r\n. "-used" is left.
  ASSERT_TRUE(c->send("list-tube-used\r\nlist-tube-used\r\n"));
  EXPECT_EQ(c->reply(), "EXPECTED_CRLF\r\n");
  EXPECT_EQ(c->reply(), "UNKNOWN_COMMAND\r\n");  // "-used"
  EXPECT_EQ(c->reply(), "USING default\r\n");
  EXPECT_EQ(c->call("peek-ready\r\n"), "NOT_FOUND\r\n");  // nothing stored
  EXPECT_EQ(round_trip(*c), "");
  EXPECT_EQ(others_served(), "");
}

TEST_F(BadInputTest, LongBodyIsExpectedCrlf) {
  start();
  auto c = connect();
  // 5 bytes announced: "hello" is the body, "EX" is not \r\n, "TRA" is left as a command.
  ASSERT_TRUE(c->send("put 0 0 10 5\r\nhelloEXTRA\r\n"));
  EXPECT_EQ(c->reply(), "EXPECTED_CRLF\r\n");
  EXPECT_EQ(c->reply(), "UNKNOWN_COMMAND\r\n");
  EXPECT_EQ(c->call("peek-ready\r\n"), "NOT_FOUND\r\n");
  EXPECT_EQ(round_trip(*c), "");
  EXPECT_EQ(others_served(), "");
}

// Raises the soft limit on open files to the hard one; returns the soft limit then in force.
rlim_t raise_file_limit() {
  rlimit limit{};
  if (::getrlimit(RLIMIT_NOFILE, &limit) != 0) return 0;
  if (limit.rlim_cur < limit.rlim_max) {
    rlimit raised = limit;
    raised.rlim_cur = limit.rlim_max;
    if (::setrlimit(RLIMIT_NOFILE, &raised) == 0) limit = raised;
  }
  return limit.rlim_cur;
}

// The resident memory of process `pid`, in KiB (0 if unreadable).
long rss_kib(pid_t pid) {
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  for (std::string line; std::getline(status, line);) {
    if (line.rfind("VmRSS:", 0) == 0) return std::stol(line.substr(6));
  }
  return 0;
}

// A client that pipelines peeks of a big job and reads nothing: its commands wait, not their
// replies (docs/protocol.md, Connections), so the server does not grow by a reply a command;
// once it reads, every reply comes, whole and in order.
TEST_F(BadInputTest, PeeksOfABigJobFromAClientThatDoesNotReadWaitAsCommands) {
  start();
  auto c = connect();
  const std::string body(65535, 'x');
  const auto id = inserted_id(c->call(put_command(body)));
  ASSERT_TRUE(id);
  constexpr int kPeeks = 1024;  // 64 MiB of replies, in 9 KiB of commands
  std::string peeks;
  for (int i = 0; i < kPeeks; ++i) peeks += "peek " + std::to_string(*id) + "\r\n";
  const long before = rss_kib(server_->pid());
  ASSERT_TRUE(c->send(peeks));
  std::this_thread::sleep_for(Millis{1000});
  const long grown = rss_kib(server_->pid()) - before;
  EXPECT_LT(grown, 16 * 1024) << "KiB grown while the replies were not read";
  EXPECT_EQ(others_served(), "");
  for (int i = 0; i < kPeeks; ++i) {
    ASSERT_EQ(c->reply(), job_reply("FOUND", *id, body)) << "reply " << i;
  }
}

// A connection watches at most 10,000 tubes: the next watch gets OUT_OF_MEMORY and makes no
// tube, one already watched still answers, and an ignore makes room.
TEST_F(BadInputTest, AWatchPastTheLimitOfTubesIsOutOfMemory) {
  start();
  auto c = connect();
  std::string watches;
  for (int i = 1; i < 10000; ++i) watches += "watch t" + std::to_string(i) + "\r\n";
  ASSERT_TRUE(c->send(watches));
  for (int i = 1; i < 10000; ++i) {
    ASSERT_EQ(c->reply(), "WATCHING " + std::to_string(i + 1) + "\r\n") << "watch " << i;
  }
  EXPECT_EQ(c->call("watch one-more\r\n"), "OUT_OF_MEMORY\r\n");
  EXPECT_EQ(c->call("stats-tube one-more\r\n"), "NOT_FOUND\r\n");
  EXPECT_EQ(c->call("watch t9999\r\n"), "WATCHING 10000\r\n");
  EXPECT_EQ(c->call("ignore t1\r\n"), "WATCHING 9999\r\n");
  EXPECT_EQ(c->call("watch one-more\r\n"), "WATCHING 10000\r\n");
  EXPECT_EQ(others_served(), "");
}

// Under an open-file limit below what the connection limits need, those limits are lowered so
// that the store keeps descriptors for its files: a flood of connections is refused as one past
// a limit is, and puts that make the store open new files (log, tables, blob files) go on.
TEST_F(BadInputTest, AConnectionFloodUnderAShortFileLimitLeavesTheStoreItsFiles) {
  server_ = std::make_unique<ServerProcess>(
      dir_.path() / "data",
      std::vector<std::string>{"--max-connections", "1000", "--http-max-connections", "1000"});
  server_->set_open_files(128);  // 64 for connections: 32 each
  ASSERT_EQ(server_->start(), "");
  auto producer = connect();
  std::vector<std::unique_ptr<Client>> flood;
  int refused = 0;
  for (int i = 0; i < 200; ++i) flood.push_back(std::make_unique<Client>(server_->port()));
  std::this_thread::sleep_for(Millis{300});  // each refusal is sent as its connection is taken
  for (auto& client : flood) {
    if (client->connected() && client->reply(Millis{50}) == "OUT_OF_MEMORY\r\n") ++refused;
  }
  EXPECT_GE(refused, 160) << "connections past the lowered limit are answered and closed";
  const std::string body(65535, 'f');
  for (int i = 0; i < 600; ++i) {  // 39 MB: past the memtables, so the store opens files
    const std::string reply = producer->call(put_command(body));
    ASSERT_TRUE(inserted_id(reply)) << "put " << i << ": " << reply;
  }
  flood.clear();
  EXPECT_EQ(others_served(), "");
  EXPECT_TRUE(server_->running());
}

TEST_F(BadInputTest, TwoThousandIdleConnectionsDoNotStopTheServer) {
  // Before start(): the server inherits the limit, and holds one descriptor per connection too.
  const rlim_t limit = raise_file_limit();
  ASSERT_GT(limit, 200U) << "too few file descriptors for this test";
  const auto idle_count = static_cast<std::size_t>(std::min<rlim_t>(2000, limit - 100));
  std::cout << "file limit " << limit << ", idle connections " << idle_count << std::endl;
  start();
  std::vector<std::unique_ptr<Client>> idle;
  idle.reserve(idle_count);
  for (std::size_t i = 0; i < idle_count; ++i) {
    idle.push_back(std::make_unique<Client>(server_->port()));
    ASSERT_TRUE(idle.back()->connected()) << "connection " << i << ": " << idle.back()->error();
  }
  auto worker = connect();
  const auto before = Clock::now();
  EXPECT_EQ(round_trip(*worker), "");
  std::cout << "round trip beside the idle connections: " << millis_between(before, Clock::now())
            << " ms" << std::endl;
  const Yaml stats = parse_yaml(worker->call("stats\r\n"));
  EXPECT_EQ(stats["current-connections"], std::to_string(idle_count + 1));
  // The idle ones were accepted, not just queued: the first and the last answer.
  EXPECT_EQ(idle.front()->call("list-tube-used\r\n"), "USING default\r\n");
  EXPECT_EQ(idle.back()->call("list-tube-used\r\n"), "USING default\r\n");
  idle.clear();
  EXPECT_EQ(others_served(), "");
}

TEST_F(BadInputTest, SlowClientDoesNotDelayOthers) {
  start();
  const std::string slow_body(40, 's');
  const std::string slow_put = put_command(slow_body, 0, 0, 10);  // 57 bytes: about 3 s
  std::string slow_reply;
  std::thread slow([port = server_->port(), &slow_put, &slow_reply] {
    Client c(port);
    for (const char byte : slow_put) {
      if (!c.send(std::string_view(&byte, 1))) return;
      std::this_thread::sleep_for(Millis{50});
    }
    slow_reply = c.reply();
  });
  auto worker = connect();
  std::int64_t slowest_ms = 0;
  int trips = 0;
  const auto end = Clock::now() + Millis{2500};
  for (int i = 0; i < 20000 && Clock::now() < end; ++i) {
    const auto before = Clock::now();
    EXPECT_EQ(round_trip(*worker), "");
    slowest_ms = std::max(slowest_ms, millis_between(before, Clock::now()));
    ++trips;
  }
  slow.join();
  std::cout << trips << " round trips beside the slow client, slowest " << slowest_ms << " ms"
            << std::endl;
  EXPECT_LT(slowest_ms, kFastRoundTrip.count());
  EXPECT_GT(trips, 1);
  const auto id = inserted_id(slow_reply);
  ASSERT_TRUE(id.has_value()) << "slow put got " << slow_reply;
  EXPECT_EQ(worker->call("peek " + std::to_string(*id) + "\r\n"),
            job_reply("FOUND", *id, slow_body));
}

TEST_F(BadInputTest, ConnectionPastTheLimitIsClosedAndTheOthersWork) {
  start({"--max-connections", "5"});
  std::vector<std::unique_ptr<Client>> clients;
  for (int i = 0; i < 5; ++i) {
    clients.push_back(connect());
    // A reply proves the server accepted it, so the order of accepts is ours.
    ASSERT_EQ(clients.back()->call("list-tube-used\r\n"), "USING default\r\n") << "client " << i;
  }
  Client sixth(server_->port());
  ASSERT_TRUE(sixth.connected()) << sixth.error();  // accepted, refused, closed
  EXPECT_EQ(sixth.reply(), "OUT_OF_MEMORY\r\n");
  EXPECT_TRUE(sixth.closed_by_server());
  // One that sends a command at once, and more after it, still reads the refusal, then the end.
  for (int i = 0; i < 20; ++i) {
    Client eager(server_->port());
    ASSERT_TRUE(eager.connected()) << eager.error();
    ASSERT_TRUE(eager.send("put 0 0 60 1\r\nx\r\n"));
    std::this_thread::sleep_for(Millis{5});
    (void)eager.send("list-tubes\r\n");
    EXPECT_EQ(eager.reply(), "OUT_OF_MEMORY\r\n") << "attempt " << i;
    EXPECT_TRUE(eager.closed_by_server()) << "attempt " << i;
  }
  for (auto& c : clients) EXPECT_EQ(round_trip(*c), "");
  // A freed place can be taken again (once the server has seen the close).
  clients.front()->close();
  std::string last;
  for (int attempt = 0; attempt < 50; ++attempt) {
    last = others_served();
    if (last.empty()) break;
    std::this_thread::sleep_for(Millis{20});
  }
  EXPECT_EQ(last, "");
}

// A client that trickles a command (a slowloris) is closed once it sends more after the command
// timeout; one that finishes its command in time, an idle one and one whose reserve waits longer
// than the timeout are served.
TEST_F(BadInputTest, ACommandTrickledPastTheTimeoutClosesItsConnectionAndNoOtherOne) {
  start({"--command-timeout", "1"});
  auto slowloris = connect();
  auto idle = connect();
  auto waiting = connect();
  auto prompt = connect();
  ASSERT_TRUE(slowloris->send("put 0 0 60 5\r\nab"));
  ASSERT_TRUE(waiting->send("reserve-with-timeout 2\r\n"));
  ASSERT_EQ(prompt->call("use elsewhere\r\n"), "USING elsewhere\r\n");  // not for `waiting`
  ASSERT_TRUE(prompt->send("put 0 0 60 5\r\nab"));
  std::this_thread::sleep_for(Millis{300});
  ASSERT_TRUE(slowloris->send("c"));
  ASSERT_TRUE(prompt->send("cde\r\n"));  // whole within the timeout
  EXPECT_TRUE(inserted_id(prompt->reply()));
  std::this_thread::sleep_for(Millis{1400});
  ASSERT_TRUE(slowloris->send("d"));  // 1.7 s after the command began: too late
  EXPECT_TRUE(slowloris->closed_by_server());
  EXPECT_EQ(waiting->reply(Millis{5000}), "TIMED_OUT\r\n");
  EXPECT_EQ(round_trip(*idle), "");
  EXPECT_EQ(round_trip(*prompt), "");
  EXPECT_EQ(others_served(), "");
}

// A client that stops halfway through a command and sends nothing more is closed within a second
// of the timeout, and its command does not run; a reserve waiting as long is not.
TEST_F(BadInputTest, ACommandThatStopsHalfwayClosesItsConnectionAfterTheTimeout) {
  start({"--command-timeout", "1"});
  auto stopped = connect();
  auto waiting = connect();
  ASSERT_TRUE(stopped->send("use halfway\r\nput 0 0 60 5\r\nhe"));
  EXPECT_EQ(stopped->reply(), "USING halfway\r\n");
  ASSERT_TRUE(waiting->send("reserve-with-timeout 3\r\n"));
  const auto begun = std::chrono::steady_clock::now();
  EXPECT_TRUE(stopped->closed_by_server(Millis{4000}));
  const auto took = std::chrono::steady_clock::now() - begun;
  EXPECT_GE(took, Millis{900});
  EXPECT_EQ(waiting->reply(Millis{5000}), "TIMED_OUT\r\n");
  auto other = connect();
  EXPECT_EQ(other->call("stats-tube halfway\r\n"), "NOT_FOUND\r\n");
  EXPECT_EQ(others_served(), "");
}

// A command begun longer ago than the timeout is not let through by the rest of it coming in one
// piece: the connection closes when the rest comes, and the command does not run.
TEST_F(BadInputTest, TheRestOfAStalledCommandInOnePieceClosesItsConnection) {
  start({"--command-timeout", "1"});
  auto stalled = connect();
  ASSERT_TRUE(stalled->send("use stalled\r\nput 0 0 60 5\r\nhe"));
  EXPECT_EQ(stalled->reply(), "USING stalled\r\n");
  std::this_thread::sleep_for(Millis{1500});
  ASSERT_TRUE(stalled->send("llo\r\n"));
  EXPECT_TRUE(stalled->closed_by_server());
  auto other = connect();
  EXPECT_EQ(other->call("stats-tube stalled\r\n"), "NOT_FOUND\r\n");
  EXPECT_EQ(others_served(), "");
}

}  // namespace
}  // namespace delayq::testing
