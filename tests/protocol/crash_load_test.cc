// Recovery under load over the wire: a producer connection puts jobs (delays 0, 1 or 2 s, some
// pipelined), a consumer connection reserves and deletes, and the test kills delayqd with SIGKILL
// at a random moment, again and again, restarting it on the same data directory each time.
// Every reply the test saw is a promise: after each restart every acknowledged put whose delete
// was not acknowledged is still there with its body, and every acknowledged delete is gone.
// Across the whole run no job is reserved before its due time: the reply comes no sooner than
// the put's send time plus its delay (1 ms slack, for the server's millisecond clock).
// The same kills during batch puts over HTTP (POST /v1/jobs): every job a batch's answer
// acknowledged survives. The seed is printed; set DELAYQ_SEED to replay one.
#include <gtest/gtest.h>

#include <atomic>
#include <boost/json.hpp>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <iostream>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "front/http/client.h"
#include "server_process.h"
#include "support/seed.h"

namespace delayq::testing {
namespace {

using std::chrono::duration_cast;
using std::chrono::microseconds;

constexpr int kRounds = 21;
constexpr int kMinLoadMs = 150;
constexpr int kMaxLoadMs = 600;
constexpr int kMaxOpsPerRound = 100000;  // bounds each worker loop; the kill ends it far sooner
constexpr std::size_t kPeekBatch = 200;
constexpr int kBatchRounds = 6;
constexpr int kBatchJobs = 50;  // jobs a batch put over HTTP

// A put as sent: when, and with what delay. Keyed by its body, which is unique.
struct SentPut {
  Clock::time_point sent;
  std::uint32_t delay_seconds = 0;
};

struct Reserved {
  std::uint64_t id = 0;
  std::string body;
  Clock::time_point received;
};

// What one round's workers saw. Each worker writes only its own log; read after join().
struct ProducerLog {
  std::map<std::string, SentPut> sent;         // every put sent, acknowledged or not
  std::map<std::uint64_t, std::string> acked;  // INSERTED id -> body
  std::string error;                           // an unexpected reply
};
struct ConsumerLog {
  std::vector<Reserved> reserved;
  std::vector<std::uint64_t> deleted;              // acknowledged DELETED
  std::optional<std::uint64_t> delete_unanswered;  // sent when the kill came: either outcome
  std::string error;
};

bool is_closed(const std::string& reply) {
  return reply.rfind("<", 0) == 0;  // "<closed ...>" or "<timed out ...>": the kill
}

void produce(std::uint16_t port, int round, std::uint32_t seed, ProducerLog& log) {
  std::mt19937 rng(seed);
  Client client(port);
  if (!client.connected()) return;  // the kill can come before the connect
  int seq = 0;
  for (int op = 0; op < kMaxOpsPerRound; ++op) {
    const int batch = std::uniform_int_distribution<int>(1, 4)(rng);
    std::string commands;
    std::vector<std::string> bodies;
    std::vector<std::uint32_t> delays;
    for (int i = 0; i < batch; ++i) {
      bodies.push_back("r" + std::to_string(round) + "-" + std::to_string(seq++));
      delays.push_back(std::uniform_int_distribution<std::uint32_t>(0, 2)(rng));
      // Delayed jobs go first once due, so that they are reserved close to their due time,
      // where an early reserve would show; the ready backlog waits behind them.
      commands += put_command(bodies.back(), delays.back() == 0 ? 10 : 0, delays.back());
    }
    // The server cannot have the put before we send it: a lower bound for its due time.
    const auto sent = Clock::now();
    for (std::size_t i = 0; i < bodies.size(); ++i) log.sent[bodies[i]] = {sent, delays[i]};
    if (!client.send(commands)) return;
    for (const std::string& body : bodies) {
      const std::string reply = client.reply();
      if (is_closed(reply)) return;
      const auto id = inserted_id(reply);
      if (!id) {
        log.error = "put " + body + " got " + reply;
        return;
      }
      log.acked[*id] = body;
    }
  }
}

// "RESERVED <id> <bytes>\r\n<body>\r\n" -> id and body.
std::optional<Reserved> parse_reserved(const std::string& reply) {
  constexpr std::string_view kWord = "RESERVED ";
  if (reply.rfind(kWord, 0) != 0) return std::nullopt;
  const auto line_end = reply.find("\r\n");
  const auto space = reply.find(' ', kWord.size());
  if (line_end == std::string::npos || space == std::string::npos || space > line_end) {
    return std::nullopt;
  }
  Reserved r;
  r.id = std::stoull(reply.substr(kWord.size(), space - kWord.size()));
  r.body = reply.substr(line_end + 2, reply.size() - line_end - 4);
  return r;
}

void consume(std::uint16_t port, std::uint32_t seed, ConsumerLog& log) {
  std::mt19937 rng(seed);
  Client client(port);
  if (!client.connected()) return;
  for (int op = 0; op < kMaxOpsPerRound; ++op) {
    const int timeout = std::uniform_int_distribution<int>(0, 1)(rng);
    const std::string reply =
        client.call("reserve-with-timeout " + std::to_string(timeout) + "\r\n",
                    Millis{timeout * 1000} + kReplyTimeout);
    const auto received = Clock::now();
    if (is_closed(reply)) return;
    if (reply == "TIMED_OUT\r\n") continue;
    auto reserved = parse_reserved(reply);
    if (!reserved) {
      log.error = "reserve got " + reply;
      return;
    }
    reserved->received = received;
    log.reserved.push_back(*reserved);
    log.delete_unanswered = reserved->id;
    const std::string deleted = client.call("delete " + std::to_string(reserved->id) + "\r\n");
    if (is_closed(deleted)) return;
    if (deleted != "DELETED\r\n") {
      log.error = "delete " + std::to_string(reserved->id) + " got " + deleted;
      return;
    }
    log.deleted.push_back(reserved->id);
    log.delete_unanswered.reset();
  }
}

class CrashLoadTest : public ::testing::Test {
 protected:
  // Every acknowledged job not acknowledged as deleted is there with its body; every
  // acknowledged delete is gone. Peeks are pipelined in batches.
  void check_survivors() {
    Client c(server_.port());
    ASSERT_TRUE(c.connected()) << c.error();
    std::vector<std::pair<std::uint64_t, std::string>> expected;  // id, expected reply
    for (const auto& [id, body] : acked_) {
      if (maybe_deleted_.count(id) != 0 && deleted_.count(id) == 0) continue;
      expected.emplace_back(
          id, deleted_.count(id) != 0 ? "NOT_FOUND\r\n" : job_reply("FOUND", id, body));
    }
    for (const std::uint64_t id : deleted_) {
      if (acked_.count(id) == 0) expected.emplace_back(id, "NOT_FOUND\r\n");
    }
    for (std::size_t start = 0; start < expected.size(); start += kPeekBatch) {
      const std::size_t end = std::min(expected.size(), start + kPeekBatch);
      std::string peeks;
      for (std::size_t i = start; i < end; ++i) {
        peeks += "peek " + std::to_string(expected[i].first) + "\r\n";
      }
      ASSERT_TRUE(c.send(peeks));
      for (std::size_t i = start; i < end; ++i) {
        EXPECT_EQ(c.reply(), expected[i].second) << "job " << expected[i].first;
      }
    }
  }

  // No job came before it was due.
  void check_never_early(const std::vector<Reserved>& reserved) {
    for (const Reserved& r : reserved) {
      const auto put = sent_.find(r.body);
      if (put == sent_.end()) {
        ADD_FAILURE() << "reserved job " << r.id << " with unknown body " << r.body;
        continue;
      }
      const auto due = put->second.sent + std::chrono::seconds(put->second.delay_seconds);
      EXPECT_GE(duration_cast<microseconds>(r.received - due).count(), -1000)
          << "job " << r.id << " (" << r.body << ", delay " << put->second.delay_seconds
          << " s) reserved early";
      ++checked_reserves_;
      if (put->second.delay_seconds > 0) ++checked_delayed_reserves_;
    }
  }

  TempDir dir_;
  ServerProcess server_{dir_.path() / "data"};
  std::map<std::string, SentPut> sent_;
  std::map<std::uint64_t, std::string> acked_;
  std::set<std::uint64_t> deleted_;
  std::set<std::uint64_t> maybe_deleted_;  // a delete sent, its reply cut off by a kill
  int checked_reserves_ = 0;
  int checked_delayed_reserves_ = 0;
};

TEST_F(CrashLoadTest, KillNineUnderLoadLosesNoAcknowledgedJobAndNeverReservesEarly) {
  const auto seed = static_cast<std::uint32_t>(test_seed());
  RecordProperty("seed", std::to_string(seed));
  std::mt19937 rng(seed);
  ASSERT_EQ(server_.start(), "");
  for (int round = 0; round < kRounds; ++round) {
    SCOPED_TRACE("round " + std::to_string(round) + ", seed " + std::to_string(seed));
    ProducerLog produced;
    ConsumerLog consumed;
    const std::uint32_t producer_seed = static_cast<std::uint32_t>(rng());
    const std::uint32_t consumer_seed = static_cast<std::uint32_t>(rng());
    const int load_ms = std::uniform_int_distribution<int>(kMinLoadMs, kMaxLoadMs)(rng);
    const std::uint16_t port = server_.port();
    std::thread producer(produce, port, round, producer_seed, std::ref(produced));
    std::thread consumer(consume, port, consumer_seed, std::ref(consumed));
    std::this_thread::sleep_for(Millis{load_ms});
    EXPECT_EQ(server_.kill9(), "killed by signal 9");
    producer.join();
    consumer.join();
    EXPECT_EQ(produced.error, "");
    EXPECT_EQ(consumed.error, "");
    sent_.merge(produced.sent);
    acked_.merge(produced.acked);
    deleted_.insert(consumed.deleted.begin(), consumed.deleted.end());
    if (consumed.delete_unanswered) maybe_deleted_.insert(*consumed.delete_unanswered);
    check_never_early(consumed.reserved);
    ASSERT_EQ(server_.start(), "");
    check_survivors();
    ASSERT_FALSE(HasFailure());
  }
  EXPECT_EQ(server_.stop(), "exited 0");
  std::cout << "rounds " << kRounds << ", puts acknowledged " << acked_.size()
            << ", deletes acknowledged " << deleted_.size() << ", reserves checked "
            << checked_reserves_ << " (" << checked_delayed_reserves_ << " of them delayed)"
            << std::endl;
  // The load must have been real, or the test proves nothing.
  EXPECT_GT(acked_.size(), static_cast<std::size_t>(kRounds));
  EXPECT_GT(deleted_.size(), 0U);
  EXPECT_GT(checked_delayed_reserves_, 0);
}

// A producer over HTTP sends batches (POST /v1/jobs) of delayed jobs, and the test kills
// delayqd at a random moment, again and again: every job a batch's answer acknowledged (its
// entry a 201) is there with its body after each restart.
void produce_batches(std::uint16_t http_port, int round, ProducerLog& log) {
  front::http::Client client("127.0.0.1", http_port);
  int seq = 0;
  for (int request = 0; request < kMaxOpsPerRound; ++request) {
    std::vector<std::string> bodies;
    std::string text = R"({"jobs":[)";
    for (int i = 0; i < kBatchJobs; ++i) {
      bodies.push_back("batch" + std::to_string(round) + "-" + std::to_string(seq++));
      text += std::string(i > 0 ? "," : "") + R"({"tube":"batch","delay":"1h","body":")" +
              bodies.back() + R"("})";
    }
    text += "]}";
    auto answer = client.request("POST", "/v1/jobs", text, std::chrono::seconds(5));
    if (!answer.is_ok()) return;  // the kill
    boost::system::error_code error;
    const boost::json::value parsed = boost::json::parse(answer.value().body, error);
    const boost::json::object* object = error ? nullptr : parsed.if_object();
    const boost::json::value* jobs = object == nullptr ? nullptr : object->if_contains("jobs");
    if (answer.value().status != 200 || jobs == nullptr || !jobs->is_array() ||
        jobs->as_array().size() != bodies.size()) {
      log.error = "batch answered " + std::to_string(answer.value().status) + " " +
                  answer.value().body.substr(0, 200);
      return;
    }
    for (std::size_t i = 0; i < bodies.size(); ++i) {
      const boost::json::object& entry = jobs->as_array()[i].as_object();
      if (entry.at("status").to_number<int>() != 201) {
        log.error = "a batch's job answered " + boost::json::serialize(entry);
        return;
      }
      log.acked[entry.at("job").at("id").to_number<std::uint64_t>()] = bodies[i];
    }
  }
}

TEST_F(CrashLoadTest, KillNineDuringBatchPutsLosesNoAcknowledgedJob) {
  const auto seed = static_cast<std::uint32_t>(test_seed());
  RecordProperty("seed", std::to_string(seed));
  std::mt19937 rng(seed);
  ASSERT_EQ(server_.start(), "");
  for (int round = 0; round < kBatchRounds; ++round) {
    SCOPED_TRACE("round " + std::to_string(round) + ", seed " + std::to_string(seed));
    ProducerLog produced;
    std::thread producer(produce_batches, server_.http_port(), round, std::ref(produced));
    std::this_thread::sleep_for(
        Millis{std::uniform_int_distribution<int>(kMinLoadMs / 3, kMaxLoadMs / 3)(rng)});
    EXPECT_EQ(server_.kill9(), "killed by signal 9");
    producer.join();
    EXPECT_EQ(produced.error, "");
    acked_.merge(produced.acked);
    ASSERT_EQ(server_.start(), "");
    check_survivors();
    ASSERT_FALSE(HasFailure());
  }
  EXPECT_EQ(server_.stop(), "exited 0");
  std::cout << "rounds " << kBatchRounds << ", batched puts acknowledged " << acked_.size()
            << std::endl;
  EXPECT_GT(acked_.size(), static_cast<std::size_t>(kBatchRounds * kBatchJobs));
}

}  // namespace
}  // namespace delayq::testing
