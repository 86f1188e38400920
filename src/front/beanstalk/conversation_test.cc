// The beanstalkd front-end without a socket: a Conversation over the scripted FakeBroker
// (tests/support/fake_broker.h). Each verb is checked for the broker call it makes, with which
// arguments, and every reply it can give, errors included, byte for byte; then the YAML of the
// stats commands, pipelining with completions out of order, reserve's hold on later commands,
// half-close, quit, and what `stats` counts of connections.
#include "front/beanstalk/conversation.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cctype>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "support/beanstalk_stats.h"
#include "support/fake_broker.h"

namespace delayq::front::beanstalk {
namespace {

using delayq::testing::Call;
using delayq::testing::FakeBroker;
using namespace std::string_literals;

constexpr std::int64_t kNowMs = 1'795'326'973'065;  // 2026-11-22T05:56:13.065Z

JobView view_of(JobId id, std::string tube = "default") {
  JobView view;
  view.id = id;
  view.tube = std::move(tube);
  return view;
}

broker::Job job_of(JobId id, std::string body) {
  broker::Job job;
  job.view = view_of(id);
  job.body = std::move(body);
  job.as_of_unix_ms = kNowMs;
  return job;
}

broker::PutResult inserted(JobId id) {
  return broker::PutResult{view_of(id), true, 0};
}

std::uint64_t command_count(const Tally& tally, Verb verb) {
  return tally.commands[static_cast<std::size_t>(verb)];
}

// "OK <bytes>\r\n<document>\r\n", as every YAML reply is framed.
std::string ok_reply(std::string_view yaml) {
  return "OK " + std::to_string(yaml.size()) + "\r\n" + std::string(yaml) + "\r\n";
}

// The document of an "OK <bytes>\r\n<document>\r\n" reply, its framing checked.
std::string document_of(const std::string& reply) {
  const std::size_t line_end = reply.find("\r\n");
  if (!reply.starts_with("OK ") || line_end == std::string::npos) {
    ADD_FAILURE() << "not an OK reply: " << reply;
    return {};
  }
  const std::size_t bytes = std::stoul(reply.substr(3, line_end - 3));
  EXPECT_EQ(reply.size(), line_end + 2 + bytes + 2) << reply;
  EXPECT_TRUE(reply.ends_with("\r\n"));
  return reply.substr(line_end + 2, bytes);
}

// A flat YAML mapping as its (key, value) lines in order; the document must start with "---\n".
std::vector<std::pair<std::string, std::string>> mapping_of(const std::string& yaml) {
  std::vector<std::pair<std::string, std::string>> lines;
  EXPECT_TRUE(yaml.starts_with("---\n")) << yaml;
  std::size_t at = yaml.find('\n') + 1;
  while (at < yaml.size()) {
    const std::size_t end = yaml.find('\n', at);
    if (end == std::string::npos) {
      ADD_FAILURE() << "the last line has no \\n: " << yaml.substr(at);
      break;
    }
    const std::string line = yaml.substr(at, end - at);
    const std::size_t colon = line.find(": ");
    if (colon == std::string::npos) {
      ADD_FAILURE() << "not a key: value line: " << line;
    } else {
      lines.emplace_back(line.substr(0, colon), line.substr(colon + 2));
    }
    at = end + 1;
  }
  return lines;
}

bool all_digits(std::string_view text) {
  if (text.empty()) return false;
  for (const char c : text) {
    if (std::isdigit(static_cast<unsigned char>(c)) == 0) return false;
  }
  return true;
}

// One client of the server: the bytes it got back, in the pieces the conversation emitted. As a
// connection does, it resumes a conversation that yielded, unless told not to.
class Client final : public Conversation::Peer {
 public:
  explicit Client(Context& context) : conversation_(context, *this) {}
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  void send(std::string_view bytes) {
    conversation_.receive(bytes);
    pump();
  }
  // Resumes the conversation while it yields (what a connection's posted resume does).
  void pump() {
    while (yielded_ && resume_on_yield_) {
      yielded_ = false;
      conversation_.resume();
    }
  }
  void write(std::string_view bytes) override { pieces_.emplace_back(bytes); }
  void yield() override {
    yielded_ = true;
    ++yields_;
  }
  [[nodiscard]] bool backlogged() const override { return backlogged_; }
  void set_backlogged(bool backlogged) { backlogged_ = backlogged; }
  void set_resume_on_yield(bool resume) { resume_on_yield_ = resume; }
  [[nodiscard]] bool yielded() const { return yielded_; }
  [[nodiscard]] int yields() const { return yields_; }
  // Everything emitted since the last take(), as one string.
  std::string take() {
    std::string all;
    for (const std::string& piece : pieces_) all += piece;
    pieces_.clear();
    return all;
  }
  [[nodiscard]] const std::vector<std::string>& pieces() const { return pieces_; }
  Conversation& conversation() { return conversation_; }

 private:
  std::vector<std::string> pieces_;
  bool yielded_ = false;
  bool resume_on_yield_ = true;
  bool backlogged_ = false;
  int yields_ = 0;
  Conversation conversation_;
};

class ConversationTest : public ::testing::Test {
 protected:
  // Sends bytes that must make exactly one broker call; returns that call's text.
  std::string send_call(std::string_view bytes) {
    const std::size_t before = fake_.call_count();
    client_->send(bytes);
    EXPECT_EQ(fake_.call_count(), before + 1) << "calls: " << fake_.call_count() - before;
    return fake_.call_count() > before ? fake_.last().text() : std::string();
  }
  // Sends bytes that must make no broker call; returns the reply emitted.
  std::string send_local(std::string_view bytes) {
    const std::size_t before = fake_.call_count();
    client_->send(bytes);
    EXPECT_EQ(fake_.call_count(), before);
    return take();
  }
  std::string take() { return client_->take(); }
  Call& last() { return fake_.last(); }
  Conversation& conversation() { return client_->conversation(); }
  std::uint64_t ops(std::string_view op, std::string_view result) {
    return static_cast<std::uint64_t>(context_.counts.ops(op, result));
  }

  FakeBroker fake_;
  metrics::Registry metrics_;
  Context context_{fake_, ParserLimits{}, Tally{}, ProtocolCounts(metrics_, "beanstalk")};
  std::unique_ptr<Client> client_ = std::make_unique<Client>(context_);
};

// ---------------------------------------------------------------------------------------------
// The session

TEST_F(ConversationTest, OpensOneSessionThatUsesAndWatchesDefault) {
  ASSERT_EQ(fake_.sessions_opened(), 1U);
  EXPECT_TRUE(fake_.options(0).watch_default);
  ASSERT_NE(fake_.session(0), nullptr);
  EXPECT_EQ(fake_.session(0)->used(), "default");
  EXPECT_EQ(fake_.session(0)->watched(), std::vector<std::string>{"default"});
  EXPECT_EQ(context_.tally.connections, 1U);
  EXPECT_EQ(context_.tally.total_connections, 1U);
  EXPECT_EQ(fake_.call_count(), 0U);
  EXPECT_EQ(take(), "");
}

// Over a broker that does not apply a session's calls in order (Redis), a pipeline runs as if
// sent a command at a time: a command waits for the answers of those before it, except local
// ones, puts after puts, deletes after deletes and a reserve after deletes.
TEST_F(ConversationTest, OverABrokerOutOfOrderACommandWaitsForTheAnswersOfThoseBefore) {
  fake_.set_in_order(false);
  client_->send("put 0 0 10 1\r\nx\r\nput 0 0 10 1\r\ny\r\nuse other\r\npeek-ready\r\n");
  ASSERT_EQ(fake_.call_count(), 2U) << "the two puts, not the peek";
  EXPECT_EQ(fake_.session(0)->used(), "other") << "use runs at once";
  EXPECT_TRUE(conversation().held());
  EXPECT_FALSE(conversation().partial()) << "a whole command waiting is not a slow client";
  fake_.call(0).complete(inserted(1));
  EXPECT_EQ(fake_.call_count(), 2U) << "the peek waits for the second put too";
  fake_.call(1).complete(inserted(2));
  ASSERT_EQ(fake_.call_count(), 3U);
  EXPECT_EQ(last().text(), "peek_next tube=other state=ready");
  EXPECT_EQ(take(), "INSERTED 1\r\nINSERTED 2\r\nUSING other\r\n");
  last().fail(Code::kNotFound);
  EXPECT_EQ(take(), "NOT_FOUND\r\n");
  EXPECT_FALSE(conversation().held());

  // Deletes go together, a reserve after them too; a put after a delete waits.
  client_->send("delete 1\r\ndelete 2\r\nreserve-with-timeout 0\r\n");
  ASSERT_EQ(fake_.call_count(), 6U);
  EXPECT_EQ(last().text(), "reserve tubes=(watched) timeout=0ms");
  fake_.call(3).complete(JobId{1});
  fake_.call(4).complete(JobId{2});
  last().fail(Code::kTimedOut);
  EXPECT_EQ(take(), "DELETED\r\nDELETED\r\nTIMED_OUT\r\n");
  client_->send("delete 3\r\nput 0 0 10 1\r\nz\r\nstats-job 3\r\n");
  ASSERT_EQ(fake_.call_count(), 7U);
  last().complete(JobId{3});
  ASSERT_EQ(fake_.call_count(), 8U);
  EXPECT_EQ(last().text(), "put tube=other pri=0 due=+0ms ttr=10s body=z");
  last().complete(inserted(4));
  ASSERT_EQ(fake_.call_count(), 9U);
  EXPECT_EQ(take(), "DELETED\r\nINSERTED 4\r\n");
  last().fail(Code::kNotFound);
  EXPECT_EQ(take(), "NOT_FOUND\r\n");

  // A watch after a stats-tube waits for it: the stats count the tube's watchers.
  client_->send("stats-tube other\r\nwatch other\r\n");
  ASSERT_EQ(fake_.call_count(), 10U);
  EXPECT_EQ(fake_.session(0)->watched(), std::vector<std::string>{"default"});
  last().fail(Code::kNotFound);
  EXPECT_EQ(fake_.session(0)->watched(), (std::vector<std::string>{"default", "other"}));
  EXPECT_EQ(take(), "NOT_FOUND\r\nWATCHING 2\r\n");
}

// A held command counts once, when it runs, also a put whose line came before its body; errors
// between unanswered commands are answered in their place; a half-closed client's held
// commands still run, and then the conversation is done.
TEST_F(ConversationTest, OverABrokerOutOfOrderHeldCommandsCountOnceAndRunAfterTheInputEnds) {
  fake_.set_in_order(false);
  client_->send("peek-ready\r\nbogus\r\nput 0 0 10 1\r\n");
  ASSERT_EQ(fake_.call_count(), 1U);
  EXPECT_EQ(command_count(context_.tally, Verb::kPut), 1U)
      << "its line came: counted, as beanstalkd";
  client_->send("x\r\nkick 1\r\n");
  EXPECT_EQ(fake_.call_count(), 1U);
  conversation().end_input();
  EXPECT_FALSE(conversation().done());
  last().fail(Code::kNotFound);
  ASSERT_EQ(fake_.call_count(), 2U);
  EXPECT_EQ(last().text(), "put tube=default pri=0 due=+0ms ttr=10s body=x");
  EXPECT_EQ(command_count(context_.tally, Verb::kPut), 1U);
  last().complete(inserted(5));
  ASSERT_EQ(fake_.call_count(), 3U);
  EXPECT_EQ(command_count(context_.tally, Verb::kPut), 1U);
  EXPECT_EQ(command_count(context_.tally, Verb::kKick), 1U);
  last().complete(std::size_t{0});
  EXPECT_EQ(take(), "NOT_FOUND\r\nUNKNOWN_COMMAND\r\nINSERTED 5\r\nKICKED 0\r\n");
  EXPECT_TRUE(conversation().done());
}

// One answer may release more commands than a turn runs: the rest run after a yield.
TEST_F(ConversationTest, OverABrokerOutOfOrderAnAnswerReleasesCommandsATurnAtATime) {
  fake_.set_in_order(false);
  std::string pipeline = "stats-tube default\r\n";
  for (int i = 0; i < 40; ++i) pipeline += "use t" + std::to_string(i) + "\r\n";
  pipeline += "peek-ready\r\n";
  client_->set_resume_on_yield(false);
  client_->send(pipeline);
  ASSERT_EQ(fake_.call_count(), 1U);
  last().fail(Code::kNotFound);
  EXPECT_TRUE(client_->yielded()) << "16 commands, then a turn for the others";
  client_->set_resume_on_yield(true);
  client_->pump();
  ASSERT_EQ(fake_.call_count(), 2U);
  EXPECT_EQ(last().text(), "peek_next tube=t39 state=ready");
}

// Over a single node, every command runs as it comes: its calls take effect in order.
TEST_F(ConversationTest, OverABrokerInOrderAPipelineRunsWithoutWaiting) {
  client_->send("put 0 0 10 1\r\nx\r\npeek-ready\r\nkick 1\r\n");
  EXPECT_EQ(fake_.call_count(), 3U);
  EXPECT_FALSE(conversation().held());
}

// ---------------------------------------------------------------------------------------------
// Producers

TEST_F(ConversationTest, PutTurnsItsDelayInSecondsIntoADueTimeAfterAndRepliesInserted) {
  EXPECT_EQ(send_call("put 5 2 60 5\r\nhello\r\n"),
            "put tube=default pri=5 due=+2000ms ttr=60s body=hello");
  const auto& request = last().request<broker::PutRequest>();
  EXPECT_TRUE(request.tube.empty());  // the session's used tube
  EXPECT_FALSE(request.due.absolute);
  EXPECT_TRUE(request.key.empty());
  EXPECT_TRUE(request.group.empty());
  EXPECT_FALSE(request.replace);
  EXPECT_EQ(take(), "");  // nothing before the broker completes it
  EXPECT_EQ(conversation().pending(), 1U);

  last().complete(inserted(7));
  EXPECT_EQ(take(), "INSERTED 7\r\n");
  EXPECT_EQ(conversation().pending(), 0U);
  EXPECT_EQ(ops("put", "INSERTED"), 1U);
  EXPECT_EQ(command_count(context_.tally, Verb::kPut), 1U);
  EXPECT_EQ(context_.tally.producers, 1U);
}

TEST_F(ConversationTest, PutPassesExtremeNumbersAndAnyBodyBytes) {
  EXPECT_EQ(send_call("put 4294967295 4294967295 0 0\r\n\r\n"),
            "put tube=default pri=4294967295 due=+4294967295000ms ttr=0s body=");
  last().complete(inserted(1));
  EXPECT_EQ(take(), "INSERTED 1\r\n");

  EXPECT_EQ(send_call("put 0 0 1 6\r\na\r\n\0b\xff\r\n"s),
            "put tube=default pri=0 due=+0ms ttr=1s body=a\\r\\n\\x00b\\xff");
  EXPECT_EQ(last().request<broker::PutRequest>().body, "a\r\n\0b\xff"s);
  last().complete(inserted(2));
  EXPECT_EQ(take(), "INSERTED 2\r\n");
}

TEST_F(ConversationTest, PutGoesToTheUsedTube) {
  EXPECT_EQ(send_local("use emails\r\n"), "USING emails\r\n");
  EXPECT_EQ(fake_.session(0)->used(), "emails");
  EXPECT_EQ(send_call("put 1 0 1 1\r\nx\r\n"), "put tube=emails pri=1 due=+0ms ttr=1s body=x");
  last().complete(inserted(3));
  EXPECT_EQ(take(), "INSERTED 3\r\n");
}

TEST_F(ConversationTest, UseRefusedByTheSessionRepliesItsError) {
  fake_.session(0)->fail_next(Status(Code::kInvalidArgument, "bad name"));
  EXPECT_EQ(send_local("use emails\r\n"), "BAD_FORMAT\r\n");
  EXPECT_EQ(fake_.session(0)->used(), "default");
  fake_.session(0)->fail_next(Status(Code::kLimit, "too many tubes"));
  EXPECT_EQ(send_local("use emails\r\n"), "OUT_OF_MEMORY\r\n");
  EXPECT_EQ(send_local("list-tube-used\r\n"), "USING default\r\n");
}

TEST_F(ConversationTest, PutxPassesMillisecondsKeyGroupAndReplace) {
  EXPECT_EQ(send_call("putx 5 1500 60 5 key=order:1 group=user:42 replace\r\nhello\r\n"),
            "put tube=default pri=5 due=+1500ms ttr=60s body=hello key=order:1 group=user:42 "
            "replace");
  last().complete(inserted(9));
  EXPECT_EQ(take(), "INSERTED 9\r\n");

  EXPECT_EQ(send_call("putx 0 @1795507200000 0 2\r\nhi\r\n"),
            "put tube=default pri=0 due=@1795507200000 ttr=0s body=hi");
  EXPECT_TRUE(last().request<broker::PutRequest>().due.absolute);
  last().complete(inserted(10));
  EXPECT_EQ(take(), "INSERTED 10\r\n");
}

TEST_F(ConversationTest, PutxDebouncesAndAnswersDebouncedWhenAPendingJobMoved) {
  EXPECT_EQ(send_call("putx 5 0 60 2 key=doc:1 debounce=30000 max-wait=120000\r\nv2\r\n"),
            "put tube=default pri=5 due=+0ms ttr=60s body=v2 key=doc:1 debounce=30000ms "
            "max_wait=120000ms");
  broker::PutResult moved = inserted(9);
  moved.debounced = true;
  last().complete(moved);
  EXPECT_EQ(take(), "DEBOUNCED 9\r\n");
  EXPECT_EQ(send_call("putx 5 0 60 2 key=doc:2 debounce=0\r\nv1\r\n"),
            "put tube=default pri=5 due=+0ms ttr=60s body=v1 key=doc:2 debounce=0ms");
  last().complete(inserted(10));
  EXPECT_EQ(take(), "INSERTED 10\r\n");
  // A debounce needs a key, is the due time, and is not a replace; max-wait needs a debounce.
  // What a debounce needs (a key, no due time or replace) the broker's put rules check
  // (BeanstalkTest.PutxDebounceMovesThePendingJobKeepingItsId); the line's own form, here.
  for (const char* line :
       {"putx 5 0 60 1 key=k debounce=1x\r\n", "putx 5 0 60 1 key=k debounce=1 debounce=2\r\n",
        "putx 5 0 60 1 key=k max-wait=\r\n"}) {
    SCOPED_TRACE(line);
    EXPECT_EQ(send_local(line), "BAD_FORMAT\r\n");
    (void)send_local("x\r\n");  // the body line, read as a command
  }
}

TEST_F(ConversationTest, FlowTubeSetsWhatItNamesAndAnswersTheSettings) {
  EXPECT_EQ(send_call("flow-tube emails concurrency=1 fair=1 rate=10/1000 burst=5\r\n"),
            "set_flow tube=emails concurrency=1 fair=1 rate=10/1000ms burst=5");
  last().complete(FlowSettings{.group_concurrency = 1,
                               .fair = true,
                               .rate_jobs = 10,
                               .rate_period = std::chrono::milliseconds{1000},
                               .rate_burst = 5});
  EXPECT_EQ(take(), "FLOW 1 1 10/1000 5\r\n");
  EXPECT_EQ(send_call("flow-tube emails weight=vip:5 weight=old:1\r\n"),
            "set_flow tube=emails concurrency=0 fair=0 rate=0/1000ms burst=1 weight=old:1 "
            "weight=vip:5");
  last().complete(FlowSettings{.group_weights = {{"vip", 5}}});
  EXPECT_EQ(take(), "FLOW 0 0 0/1000 1\r\n");
  EXPECT_EQ(send_call("flow-tube emails fair=0\r\n"),
            "set_flow tube=emails concurrency=0 fair=0 rate=0/1000ms burst=1");
  last().complete(FlowSettings{});
  EXPECT_EQ(take(), "FLOW 0 0 0/1000 1\r\n");
  for (const char* line :
       {"flow-tube emails fair=2\r\n", "flow-tube emails rate=10\r\n",
        "flow-tube emails rate=10/0\r\n", "flow-tube emails burst=0\r\n",
        "flow-tube emails concurrency=1 concurrency=2\r\n", "flow-tube emails colour=red\r\n",
        "flow-tube emails weight=vip\r\n", "flow-tube emails weight=vip:1001\r\n",
        "flow-tube emails weight=:2\r\n"}) {
    SCOPED_TRACE(line);
    EXPECT_EQ(send_local(line), "BAD_FORMAT\r\n");
  }
}

TEST_F(ConversationTest, PutxPassesATraceContextAndStatsJobShowsIt) {
  EXPECT_EQ(send_call("putx 1 0 1 1 traceparent=00-4bf92f3577b34da6a3ce929d0e0e4736-"
                      "00f067aa0ba902b7-01 tracestate=v=1,w=2\r\nx\r\n"),
            "put tube=default pri=1 due=+0ms ttr=1s body=x "
            "traceparent=00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01 "
            "tracestate=v=1,w=2");
  last().complete(inserted(9));
  EXPECT_EQ(take(), "INSERTED 9\r\n");
  // Given twice, or empty, an option makes the line BAD_FORMAT.
  EXPECT_EQ(send_local("putx 1 0 1 1 traceparent=a traceparent=b\r\nx\r\n"),
            "BAD_FORMAT\r\nUNKNOWN_COMMAND\r\n");  // the body, read as a line
  EXPECT_EQ(send_local("putx 1 0 1 1 tracestate=\r\nx\r\n"), "BAD_FORMAT\r\nUNKNOWN_COMMAND\r\n");

  EXPECT_EQ(send_call("stats-job 9\r\n"), "peek id=9 with_body=false");
  broker::Job job;
  job.view.id = 9;
  job.delivery.traceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
  job.delivery.tracestate = "v=1,w=2";
  last().complete(job);
  const std::string yaml = take();
  EXPECT_NE(
      yaml.find("\ntraceparent: \"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01\"\n"),
      std::string::npos)
      << yaml;
  EXPECT_NE(yaml.find("\ntracestate: \"v=1,w=2\"\n"), std::string::npos) << yaml;
}

TEST_F(ConversationTest, PutxWithATakenKeyRepliesExistsWithTheHoldersId) {
  EXPECT_EQ(send_call("putx 1 0 1 1 key=k\r\nx\r\n"),
            "put tube=default pri=1 due=+0ms ttr=1s body=x key=k");
  last().complete(broker::PutResult{view_of(3), false, 0});
  EXPECT_EQ(take(), "EXISTS 3\r\n");
  EXPECT_EQ(ops("putx", "EXISTS"), 1U);
}

TEST_F(ConversationTest, PutxCountsNoCmdPutButMakesAProducerWhenItRuns) {
  client_->send("putx 1 0 1 1\r\nx\r\n");
  EXPECT_EQ(command_count(context_.tally, Verb::kPut), 0U);
  EXPECT_EQ(command_count(context_.tally, Verb::kPutX), 0U);
  EXPECT_EQ(context_.tally.producers, 1U);
}

// ---------------------------------------------------------------------------------------------
// Workers

TEST_F(ConversationTest, ReserveWaitsOnTheWatchListWithoutTimeoutAndRepliesReservedWithTheBody) {
  EXPECT_EQ(send_call("reserve\r\n"), "reserve tubes=(watched) timeout=none");
  EXPECT_TRUE(last().request<broker::ReserveRequest>().tubes.empty());
  EXPECT_NE(last().ticket(), 0U);
  EXPECT_TRUE(conversation().waiting());
  EXPECT_EQ(take(), "");

  last().complete(job_of(7, "hello"));
  EXPECT_EQ(take(), "RESERVED 7 5\r\nhello\r\n");
  EXPECT_FALSE(conversation().waiting());
  EXPECT_EQ(ops("reserve", "RESERVED"), 1U);
  EXPECT_EQ(context_.tally.workers, 1U);
}

TEST_F(ConversationTest, ReservedCarriesAnyBodyBytesAndTheirCount) {
  send_call("reserve\r\n");
  last().complete(job_of(7, "a\r\n\0"s));
  EXPECT_EQ(take(), "RESERVED 7 4\r\na\r\n\0\r\n"s);
  send_call("reserve\r\n");
  last().complete(job_of(8, ""));
  EXPECT_EQ(take(), "RESERVED 8 0\r\n\r\n");
}

TEST_F(ConversationTest, ReserveWithTimeoutWaitsThatManySeconds) {
  EXPECT_EQ(send_call("reserve-with-timeout 5\r\n"), "reserve tubes=(watched) timeout=5000ms");
  last().fail(Code::kTimedOut);
  EXPECT_EQ(take(), "TIMED_OUT\r\n");
  EXPECT_EQ(ops("reserve-with-timeout", "TIMED_OUT"), 1U);

  EXPECT_EQ(send_call("reserve-with-timeout 0\r\n"), "reserve tubes=(watched) timeout=0ms");
  last().complete(job_of(3, "x"));
  EXPECT_EQ(take(), "RESERVED 3 1\r\nx\r\n");

  EXPECT_EQ(send_call("reserve-with-timeout 2147483647\r\n"),
            "reserve tubes=(watched) timeout=2147483647000ms");
  last().fail(Code::kDeadlineSoon);
  EXPECT_EQ(take(), "DEADLINE_SOON\r\n");
}

TEST_F(ConversationTest, ReserveJobReservesById) {
  EXPECT_EQ(send_call("reserve-job 7\r\n"), "reserve_job id=7");
  EXPECT_FALSE(conversation().waiting());  // it never waits
  last().complete(job_of(7, "hello"));
  EXPECT_EQ(take(), "RESERVED 7 5\r\nhello\r\n");
  EXPECT_EQ(context_.tally.workers, 1U);
}

TEST_F(ConversationTest, DeleteErasesById) {
  EXPECT_EQ(send_call("delete 7\r\n"), "erase id=7");
  last().complete(JobId{7});
  EXPECT_EQ(take(), "DELETED\r\n");
  EXPECT_EQ(send_call("delete 18446744073709551615\r\n"), "erase id=18446744073709551615");
  last().complete(JobId{1});
  EXPECT_EQ(take(), "DELETED\r\n");
}

TEST_F(ConversationTest, ReleaseGivesPriorityAndDelayInSeconds) {
  EXPECT_EQ(send_call("release 7 5 3\r\n"), "release id=7 pri=5 delay=3000ms");
  EXPECT_FALSE(last().request<broker::ReleaseRequest>().reservation);
  last().complete(view_of(7));
  EXPECT_EQ(take(), "RELEASED\r\n");
  EXPECT_EQ(send_call("release 8 0 0\r\n"), "release id=8 pri=0 delay=0ms");
  last().complete(view_of(8));
  EXPECT_EQ(take(), "RELEASED\r\n");
}

TEST_F(ConversationTest, AReleaseThatUsedUpTheAttemptsAnswersBuried) {
  EXPECT_EQ(send_call("release 7 5 0\r\n"), "release id=7 pri=5 delay=0ms");
  JobView buried = view_of(7);
  buried.state = JobState::kBuried;
  last().complete(buried);
  EXPECT_EQ(take(), "BURIED\r\n");
}

TEST_F(ConversationTest, MaxAttemptsSetsTheTubesLimit) {
  EXPECT_EQ(send_call("max-attempts emails 3\r\n"), "set_max_attempts tube=emails n=3");
  last().complete(std::uint32_t{3});
  EXPECT_EQ(take(), "MAX_ATTEMPTS 3\r\n");
  EXPECT_EQ(send_call("max-attempts emails 0\r\n"), "set_max_attempts tube=emails n=0");
  last().complete(std::uint32_t{0});
  EXPECT_EQ(take(), "MAX_ATTEMPTS 0\r\n");
  EXPECT_EQ(send_local("max-attempts emails\r\n"), "BAD_FORMAT\r\n");
  EXPECT_EQ(send_local("max-attempts -bad 1\r\n"), "BAD_FORMAT\r\n");
  EXPECT_EQ(send_local("max-attempts emails 1 2\r\n"), "BAD_FORMAT\r\n");
}

TEST_F(ConversationTest, BuryGivesItsPriority) {
  EXPECT_EQ(send_call("bury 7 9\r\n"), "bury id=7 pri=9");
  last().complete(view_of(7));
  EXPECT_EQ(take(), "BURIED\r\n");
}

TEST_F(ConversationTest, TouchTouchesById) {
  EXPECT_EQ(send_call("touch 7\r\n"), "touch id=7");
  last().complete(view_of(7));
  EXPECT_EQ(take(), "TOUCHED\r\n");
}

TEST_F(ConversationTest, WatchAndIgnoreKeepTheWatchListAsBeanstalkdDoes) {
  EXPECT_EQ(send_local("watch emails\r\n"), "WATCHING 2\r\n");
  EXPECT_EQ(send_local("watch emails\r\n"), "WATCHING 2\r\n");
  EXPECT_EQ(send_local("ignore default\r\n"), "WATCHING 1\r\n");
  EXPECT_EQ(send_local("ignore emails\r\n"), "NOT_IGNORED\r\n");
  EXPECT_EQ(send_local("ignore nothing\r\n"), "WATCHING 1\r\n");
  EXPECT_EQ(fake_.session(0)->watched(), std::vector<std::string>{"emails"});
  EXPECT_EQ(send_local("list-tubes-watched\r\n"), ok_reply("---\n- emails\n"));
  EXPECT_EQ(ops("ignore", "NOT_IGNORED"), 1U);
}

TEST_F(ConversationTest, WatchAndIgnoreRefusedByTheSessionReplyTheError) {
  fake_.session(0)->fail_next(Status(Code::kInvalidArgument, "bad name"));
  EXPECT_EQ(send_local("watch emails\r\n"), "BAD_FORMAT\r\n");
  fake_.session(0)->fail_next(Status(Code::kIOError, "broken"));
  EXPECT_EQ(send_local("ignore default\r\n"), "INTERNAL_ERROR\r\n");
  EXPECT_EQ(fake_.session(0)->watched(), std::vector<std::string>{"default"});
}

// ---------------------------------------------------------------------------------------------
// Peeks, kicks, pause

TEST_F(ConversationTest, PeekFindsAJobByIdWithItsBody) {
  EXPECT_EQ(send_call("peek 7\r\n"), "peek id=7 with_body=true");
  last().complete(job_of(7, "hello"));
  EXPECT_EQ(take(), "FOUND 7 5\r\nhello\r\n");
}

TEST_F(ConversationTest, PeekReadyDelayedAndBuriedLookInTheUsedTube) {
  EXPECT_EQ(send_call("peek-ready\r\n"), "peek_next tube=default state=ready");
  last().complete(job_of(1, "r"));
  EXPECT_EQ(take(), "FOUND 1 1\r\nr\r\n");
  EXPECT_EQ(send_call("peek-delayed\r\n"), "peek_next tube=default state=delayed");
  last().complete(job_of(2, "dd"));
  EXPECT_EQ(take(), "FOUND 2 2\r\ndd\r\n");
  EXPECT_EQ(send_call("peek-buried\r\n"), "peek_next tube=default state=buried");
  last().complete(job_of(3, "bbb"));
  EXPECT_EQ(take(), "FOUND 3 3\r\nbbb\r\n");

  EXPECT_EQ(send_local("use emails\r\n"), "USING emails\r\n");
  EXPECT_EQ(send_call("peek-ready\r\n"), "peek_next tube=emails state=ready");
  last().fail(Code::kNotFound);
  EXPECT_EQ(send_call("peek-delayed\r\n"), "peek_next tube=emails state=delayed");
  last().fail(Code::kNotFound);
  EXPECT_EQ(send_call("peek-buried\r\n"), "peek_next tube=emails state=buried");
  last().fail(Code::kNotFound);
  EXPECT_EQ(take(), "NOT_FOUND\r\nNOT_FOUND\r\nNOT_FOUND\r\n");
}

TEST_F(ConversationTest, KickKicksTheUsedTubeAndSaysHowMany) {
  EXPECT_EQ(send_call("kick 10\r\n"), "kick tube=default bound=10");
  last().complete(std::size_t{3});
  EXPECT_EQ(take(), "KICKED 3\r\n");
  EXPECT_EQ(send_local("use emails\r\n"), "USING emails\r\n");
  EXPECT_EQ(send_call("kick 4294967295\r\n"), "kick tube=emails bound=4294967295");
  last().complete(std::size_t{0});
  EXPECT_EQ(take(), "KICKED 0\r\n");
}

TEST_F(ConversationTest, KickJobKicksById) {
  EXPECT_EQ(send_call("kick-job 7\r\n"), "kick_job id=7");
  last().complete(view_of(7));
  EXPECT_EQ(take(), "KICKED\r\n");
}

TEST_F(ConversationTest, PauseTubePassesItsSecondsZeroIncluded) {
  EXPECT_EQ(send_call("pause-tube emails 30\r\n"), "pause_tube tube=emails pause=30s");
  last().complete(TubeStats{});
  EXPECT_EQ(take(), "PAUSED\r\n");
  EXPECT_EQ(send_call("pause-tube emails 0\r\n"), "pause_tube tube=emails pause=0s");
  last().complete(TubeStats{});
  EXPECT_EQ(take(), "PAUSED\r\n");
}

TEST_F(ConversationTest, ListTubeUsedSaysTheUsedTube) {
  EXPECT_EQ(send_local("list-tube-used\r\n"), "USING default\r\n");
  EXPECT_EQ(send_local("use a+b/c;d.e$f_g(h)\r\n"), "USING a+b/c;d.e$f_g(h)\r\n");
  EXPECT_EQ(send_local("list-tube-used\r\n"), "USING a+b/c;d.e$f_g(h)\r\n");
}

// A client whose replies are queued past what it may leave unread: its commands wait in the
// buffer, none runs, until it has read (resume()); an end of its input closes only after them.
TEST_F(ConversationTest, ABackloggedClientsCommandsWaitUntilItHasRead) {
  client_->set_backlogged(true);
  EXPECT_EQ(send_local("list-tube-used\r\nuse b\r\n"), "");
  EXPECT_TRUE(conversation().backlogged());
  conversation().end_input();
  EXPECT_FALSE(conversation().done()) << "closed with commands not run";
  client_->set_backlogged(false);
  conversation().resume();
  EXPECT_EQ(take(), "USING default\r\nUSING b\r\n");
  EXPECT_FALSE(conversation().backlogged());
  EXPECT_TRUE(conversation().done());
}

// ---------------------------------------------------------------------------------------------
// delayq's extensions

TEST_F(ConversationTest, RescheduleUpdatesTheDueTimeOnly) {
  EXPECT_EQ(send_call("reschedule 7 @1795507200000\r\n"),
            "update id=7 due=@1795507200000 pri=keep");
  last().complete(view_of(7));
  EXPECT_EQ(take(), "RESCHEDULED\r\n");
  EXPECT_EQ(send_call("reschedule 7 250\r\n"), "update id=7 due=+250ms pri=keep");
  last().complete(view_of(7));
  EXPECT_EQ(take(), "RESCHEDULED\r\n");
}

TEST_F(ConversationTest, RescheduleKeyUpdatesTheJobHoldingTheKey) {
  EXPECT_EQ(send_call("reschedule-key emails order:1 500\r\n"),
            "update tube=emails key=order:1 due=+500ms pri=keep");
  last().complete(view_of(7));
  EXPECT_EQ(take(), "RESCHEDULED\r\n");
}

TEST_F(ConversationTest, DeleteKeyErasesByKey) {
  EXPECT_EQ(send_call("delete-key emails order:1\r\n"), "erase tube=emails key=order:1");
  last().complete(JobId{7});
  EXPECT_EQ(take(), "DELETED\r\n");
}

TEST_F(ConversationTest, PeekKeyFindsTheJobHoldingTheKey) {
  EXPECT_EQ(send_call("peek-key emails order:1\r\n"),
            "peek tube=emails key=order:1 with_body=true");
  last().complete(job_of(7, "hello"));
  EXPECT_EQ(take(), "FOUND 7 5\r\nhello\r\n");
}

TEST_F(ConversationTest, ListGroupListsItsJobsAsYaml) {
  EXPECT_EQ(send_call("list-group emails user:42\r\n"), "list_group tube=emails group=user:42");
  JobView first = view_of(12, "emails");
  first.state = JobState::kDelayed;
  first.due_unix_ms = 1767225600000;
  first.key = "order:123";
  JobView second = view_of(15, "emails");
  second.due_unix_ms = 1767139200000;
  JobView third = view_of(16, "emails");
  third.state = JobState::kBuried;
  third.due_unix_ms = 1;
  third.key = R"(a"b\c)";
  last().complete(std::vector<JobView>{first, second, third});
  EXPECT_EQ(take(), ok_reply("---\n"
                             "- id: 12\n"
                             "  state: delayed\n"
                             "  due-unix-ms: 1767225600000\n"
                             "  key: \"order:123\"\n"
                             "- id: 15\n"
                             "  state: ready\n"
                             "  due-unix-ms: 1767139200000\n"
                             "- id: 16\n"
                             "  state: buried\n"
                             "  due-unix-ms: 1\n"
                             "  key: \"a\\\"b\\\\c\"\n"));

  send_call("list-group emails none\r\n");
  last().complete(std::vector<JobView>{});
  EXPECT_EQ(take(), ok_reply("---\n"));
}

TEST_F(ConversationTest, CancelGroupSaysHowManyWereCancelled) {
  EXPECT_EQ(send_call("cancel-group emails user:42\r\n"), "cancel_group tube=emails group=user:42");
  last().complete(std::size_t{2});
  EXPECT_EQ(take(), "CANCELLED 2\r\n");
}

// ---------------------------------------------------------------------------------------------
// Every broker error, as each verb reads it

struct ErrorCase {
  std::string_view line;
  Code code;
  std::string_view reply;
};

TEST_F(ConversationTest, EveryBrokerErrorReadsAsItsReplyWord) {
  static constexpr ErrorCase kCases[] = {
      {"put 1 0 1 2\r\nhi\r\n", Code::kDraining, "DRAINING"},
      {"put 1 0 1 2\r\nhi\r\n", Code::kLimit, "OUT_OF_MEMORY"},
      {"put 1 0 1 2\r\nhi\r\n", Code::kNoSpace, "OUT_OF_MEMORY"},
      {"put 1 0 1 2\r\nhi\r\n", Code::kIOError, "INTERNAL_ERROR"},
      {"put 1 0 1 2\r\nhi\r\n", Code::kCorruption, "INTERNAL_ERROR"},
      {"put 1 0 1 2\r\nhi\r\n", Code::kNotSupported, "INTERNAL_ERROR"},
      {"put 1 0 1 2\r\nhi\r\n", Code::kUnknownFormat, "INTERNAL_ERROR"},
      {"put 1 0 1 2\r\nhi\r\n", Code::kInvalidArgument, "BAD_FORMAT"},
      {"put 1 0 1 2\r\nhi\r\n", Code::kConflict, "NOT_FOUND"},  // beanstalkd has no CONFLICT
      {"putx 1 0 1 2 key=k replace\r\nhi\r\n", Code::kConflict, "CONFLICT"},
      {"putx 1 0 1 2\r\nhi\r\n", Code::kDraining, "DRAINING"},
      {"putx 1 0 1 2\r\nhi\r\n", Code::kLimit, "OUT_OF_MEMORY"},
      {"putx 1 0 1 2\r\nhi\r\n", Code::kIOError, "INTERNAL_ERROR"},
      {"putx 1 0 1 2 key=k\r\nhi\r\n", Code::kInvalidArgument, "BAD_FORMAT"},
      {"reserve\r\n", Code::kDeadlineSoon, "DEADLINE_SOON"},
      {"reserve\r\n", Code::kTimedOut, "TIMED_OUT"},
      {"reserve\r\n", Code::kIOError, "INTERNAL_ERROR"},
      {"reserve-with-timeout 1\r\n", Code::kTimedOut, "TIMED_OUT"},
      {"reserve-with-timeout 1\r\n", Code::kDeadlineSoon, "DEADLINE_SOON"},
      {"reserve-job 7\r\n", Code::kNotFound, "NOT_FOUND"},
      {"reserve-job 7\r\n", Code::kConflict, "NOT_FOUND"},
      {"reserve-job 7\r\n", Code::kIOError, "INTERNAL_ERROR"},
      {"delete 7\r\n", Code::kNotFound, "NOT_FOUND"},
      {"delete 7\r\n", Code::kConflict, "NOT_FOUND"},
      {"delete 7\r\n", Code::kIOError, "INTERNAL_ERROR"},
      {"release 7 1 1\r\n", Code::kNotFound, "NOT_FOUND"},
      {"release 7 1 1\r\n", Code::kConflict, "NOT_FOUND"},
      {"bury 7 1\r\n", Code::kNotFound, "NOT_FOUND"},
      {"bury 7 1\r\n", Code::kConflict, "NOT_FOUND"},
      {"touch 7\r\n", Code::kNotFound, "NOT_FOUND"},
      {"touch 7\r\n", Code::kConflict, "NOT_FOUND"},
      {"peek 7\r\n", Code::kNotFound, "NOT_FOUND"},
      {"peek 7\r\n", Code::kIOError, "INTERNAL_ERROR"},
      {"peek-ready\r\n", Code::kNotFound, "NOT_FOUND"},
      {"peek-delayed\r\n", Code::kNotFound, "NOT_FOUND"},
      {"peek-buried\r\n", Code::kNotFound, "NOT_FOUND"},
      {"kick 5\r\n", Code::kIOError, "INTERNAL_ERROR"},
      {"kick-job 7\r\n", Code::kNotFound, "NOT_FOUND"},
      {"kick-job 7\r\n", Code::kConflict, "NOT_FOUND"},
      {"stats-job 7\r\n", Code::kNotFound, "NOT_FOUND"},
      {"stats-tube emails\r\n", Code::kNotFound, "NOT_FOUND"},
      {"stats\r\n", Code::kIOError, "INTERNAL_ERROR"},
      {"list-tubes\r\n", Code::kIOError, "INTERNAL_ERROR"},
      {"pause-tube emails 1\r\n", Code::kNotFound, "NOT_FOUND"},
      {"pause-tube emails 1\r\n", Code::kInvalidArgument, "BAD_FORMAT"},
      {"reschedule 7 5\r\n", Code::kNotFound, "NOT_FOUND"},
      {"reschedule 7 5\r\n", Code::kConflict, "CONFLICT"},
      {"reschedule 7 5\r\n", Code::kInvalidArgument, "BAD_FORMAT"},
      {"reschedule-key t k 5\r\n", Code::kNotFound, "NOT_FOUND"},
      {"reschedule-key t k 5\r\n", Code::kConflict, "CONFLICT"},
      {"delete-key t k\r\n", Code::kNotFound, "NOT_FOUND"},
      {"delete-key t k\r\n", Code::kConflict, "NOT_FOUND"},
      {"peek-key t k\r\n", Code::kNotFound, "NOT_FOUND"},
      {"list-group t g\r\n", Code::kInvalidArgument, "BAD_FORMAT"},
      {"list-group t g\r\n", Code::kIOError, "INTERNAL_ERROR"},
      {"cancel-group t g\r\n", Code::kIOError, "INTERNAL_ERROR"},
      {"cancel-group t g\r\n", Code::kInvalidArgument, "BAD_FORMAT"},
  };
  for (const ErrorCase& c : kCases) {
    SCOPED_TRACE(std::string(c.line) + " / " + std::string(code_name(c.code)));
    const std::size_t before = fake_.call_count();
    client_->send(c.line);
    ASSERT_EQ(fake_.call_count(), before + 1);
    EXPECT_EQ(take(), "");
    last().fail(c.code);
    EXPECT_EQ(take(), std::string(c.reply) + "\r\n");
    EXPECT_FALSE(conversation().waiting());
  }
  EXPECT_EQ(ops("delete", "NOT_FOUND"), 2U);
  EXPECT_EQ(ops("putx", "CONFLICT"), 1U);
}

// ---------------------------------------------------------------------------------------------
// Lines the parser refuses: no broker call

TEST_F(ConversationTest, ParseErrorsReplyTheirWordAndCallNothing) {
  struct Case {
    std::string bytes;
    std::string reply;
  };
  const Case cases[] = {
      {"delete x\r\n", "BAD_FORMAT\r\n"},
      {"stats 1\r\n", "BAD_FORMAT\r\n"},
      {"put 0 0 0\r\n", "BAD_FORMAT\r\n"},
      {"use -bad\r\n", "BAD_FORMAT\r\n"},
      {"reserve-with-timeout 2147483648\r\n", "BAD_FORMAT\r\n"},
      {"putx 0 0 0 1 replace\r\nx\r\n", "BAD_FORMAT\r\nUNKNOWN_COMMAND\r\n"},  // body as a line
      {"frobnicate\r\n", "UNKNOWN_COMMAND\r\n"},
      {"delete\r\n", "UNKNOWN_COMMAND\r\n"},
      {"put 0 0 0 5\r\nhelloXY", "EXPECTED_CRLF\r\n"},
      {"put 0 0 0 65536\r\n" + std::string(65536, 'x') + "\r\n", "JOB_TOO_BIG\r\n"},
      {std::string(300, 'x') + "\r\n", "BAD_FORMAT\r\n"},
      {"stats\0\r\n"s, "BAD_FORMAT\r\n"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.bytes.substr(0, 40));
    EXPECT_EQ(send_local(c.bytes), c.reply);
    EXPECT_EQ(conversation().pending(), 0U);
  }
  EXPECT_EQ(ops("error", "BAD_FORMAT"), 8U);
  EXPECT_EQ(ops("error", "UNKNOWN_COMMAND"), 3U);
  EXPECT_EQ(ops("error", "EXPECTED_CRLF"), 1U);
  EXPECT_EQ(ops("error", "JOB_TOO_BIG"), 1U);
  EXPECT_EQ(send_local("list-tube-used\r\n"), "USING default\r\n");  // the conversation goes on
}

TEST_F(ConversationTest, JobTooBigComesOnceTheAnnouncedBodyIsDropped) {
  EXPECT_EQ(send_local("put 0 0 0 65536\r\n"), "");
  EXPECT_EQ(send_local(std::string(65536, 'x')), "");
  EXPECT_EQ(send_local("\r"), "");
  EXPECT_EQ(send_local("\nlist-tube-used\r\n"), "JOB_TOO_BIG\r\nUSING default\r\n");
  EXPECT_EQ(command_count(context_.tally, Verb::kPut), 1U);  // its numbers parsed
  EXPECT_EQ(context_.tally.producers, 0U);
}

TEST_F(ConversationTest, ExpectedCrlfConsumesTheBodyAndItsTwoBytesAndCountsThePut) {
  EXPECT_EQ(send_local("put 0 0 0 5\r\nhelloXYlist-tube-used\r\n"),
            "EXPECTED_CRLF\r\nUSING default\r\n");
  EXPECT_EQ(command_count(context_.tally, Verb::kPut), 1U);
  EXPECT_EQ(context_.tally.producers, 1U);
}

TEST_F(ConversationTest, AnOverlongLineIsDroppedThroughItsLineEndEvenSplit) {
  EXPECT_EQ(send_local(std::string(300, 'x')), "");
  EXPECT_EQ(send_local(std::string(300, 'y') + "\r"), "");
  EXPECT_EQ(send_local("\nlist-tube-used\r\n"), "BAD_FORMAT\r\nUSING default\r\n");
}

TEST_F(ConversationTest, APutLineWithTrailingGarbageCountsInCmdPut) {
  EXPECT_EQ(send_local("put 0 0 0 1 x\r\n"), "BAD_FORMAT\r\n");
  EXPECT_EQ(command_count(context_.tally, Verb::kPut), 1U);
  EXPECT_EQ(send_local("pause-tube -bad 1\r\n"), "BAD_FORMAT\r\n");
  EXPECT_EQ(command_count(context_.tally, Verb::kPauseTube), 1U);
  EXPECT_EQ(send_local("delete x\r\n"), "BAD_FORMAT\r\n");
  EXPECT_EQ(command_count(context_.tally, Verb::kDelete), 0U);
}

// ---------------------------------------------------------------------------------------------
// YAML of the stats commands

TEST_F(ConversationTest, StatsJobComputesAgeDelayAndTimeLeftFromAsOf) {
  EXPECT_EQ(send_call("stats-job 7\r\n"), "peek id=7 with_body=false");
  broker::Job job;
  job.as_of_unix_ms = kNowMs;
  job.view.id = 7;
  job.view.tube = "emails";
  job.view.state = JobState::kReserved;
  job.view.priority = 5;
  job.view.created_unix_ms = kNowMs - 65'500;
  job.view.delay_ms = 30'999;
  job.view.ttr = std::chrono::seconds{10};
  job.view.due_unix_ms = kNowMs - 1'000;
  job.view.deadline_unix_ms = kNowMs + 10'000;  // just reserved: 9, as beanstalkd shows it
  job.view.counters = JobCounters{1, 2, 3, 4, 5};
  last().complete(job);
  EXPECT_EQ(take(), ok_reply("---\n"
                             "id: 7\n"
                             "tube: emails\n"
                             "state: reserved\n"
                             "pri: 5\n"
                             "age: 65\n"
                             "delay: 30\n"
                             "ttr: 10\n"
                             "time-left: 9\n"
                             "file: 0\n"
                             "reserves: 1\n"
                             "timeouts: 2\n"
                             "releases: 3\n"
                             "buries: 4\n"
                             "kicks: 5\n"));

  // Delayed: time-left counts to the due time. Ready and buried: 0.
  struct Case {
    JobState state;
    std::int64_t due_unix_ms;
    std::string_view time_left;
  };
  for (const Case& c :
       {Case{JobState::kDelayed, kNowMs + 12'500, "12"}, Case{JobState::kDelayed, kNowMs - 5, "0"},
        Case{JobState::kReady, kNowMs + 50'000, "0"},
        Case{JobState::kBuried, kNowMs + 50'000, "0"}}) {
    SCOPED_TRACE(state_name(c.state));
    send_call("stats-job 7\r\n");
    job.view.state = c.state;
    job.view.due_unix_ms = c.due_unix_ms;
    last().complete(job);
    const auto lines = mapping_of(document_of(take()));
    ASSERT_EQ(lines.size(), 14U);
    EXPECT_EQ(lines[2], std::make_pair("state"s, std::string(state_name(c.state))));
    EXPECT_EQ(lines[7], std::make_pair("time-left"s, std::string(c.time_left)));
  }
}

TEST_F(ConversationTest, StatsTubeYamlIsInBeanstalkdsOrder) {
  EXPECT_EQ(send_call("stats-tube emails\r\n"), "stats_tube tube=emails");
  const TubeStats tube = testing::sample_tube("emails");
  last().complete(tube);
  EXPECT_EQ(take(), ok_reply("---\n"
                             "name: emails\n"
                             "current-jobs-urgent: 1\n"
                             "current-jobs-ready: 2\n"
                             "current-jobs-reserved: 3\n"
                             "current-jobs-delayed: 4\n"
                             "current-jobs-buried: 5\n"
                             "total-jobs: 6\n"
                             "current-using: 7\n"
                             "current-watching: 8\n"
                             "current-waiting: 9\n"
                             "cmd-delete: 10\n"
                             "cmd-pause-tube: 11\n"
                             "pause: 90\n"
                             "pause-time-left: 89\n"
                             "max-attempts: 12\n"
                             "group-concurrency: 14\n"
                             "fair: 1\n"
                             "group-rate-jobs: 15\n"
                             "group-rate-period-ms: 60000\n"
                             "group-burst: 16\n"
                             "group-weights: 1\n"
                             "groups-held: 17\n"
                             "groups-ready: 18\n"));
}

TEST_F(ConversationTest, ListTubesListsTheNamesTheBrokerGives) {
  EXPECT_EQ(send_call("list-tubes\r\n"), "list_tubes");
  TubeStats first;
  first.name = "default";
  TubeStats second;
  second.name = "emails";
  last().complete(std::vector<TubeStats>{first, second});
  EXPECT_EQ(take(), ok_reply("---\n- default\n- emails\n"));
}

TEST_F(ConversationTest, ListTubesWatchedListsTheWatchListInOrder) {
  EXPECT_EQ(send_local("list-tubes-watched\r\n"), ok_reply("---\n- default\n"));
  send_local("watch zeta\r\nwatch alpha\r\n");
  EXPECT_EQ(send_local("list-tubes-watched\r\n"), ok_reply("---\n- default\n- zeta\n- alpha\n"));
}

TEST_F(ConversationTest, StatsHasEveryKeyInBeanstalkdsOrderWithTheFrontEndsCounts) {
  fake_.set_uptime(std::chrono::hours{1});
  auto other = std::make_unique<Client>(context_);
  { Client gone(context_); }  // connected, then closed

  // Commands of every counted kind, some answered with errors (they count all the same).
  send_local("use emails\r\nwatch emails\r\nignore default\r\n");
  send_local("list-tube-used\r\nlist-tubes-watched\r\n");
  send_call("put 0 0 1 1\r\nx\r\n");
  last().complete(inserted(1));
  send_call("peek 1\r\n");
  last().fail(Code::kNotFound);
  send_call("reserve-with-timeout 0\r\n");
  last().fail(Code::kTimedOut);
  send_call("reserve-job 1\r\n");  // no cmd-* line
  last().complete(job_of(1, "x"));
  send_call("kick-job 1\r\n");  // no cmd-* line
  last().fail(Code::kNotFound);
  send_call("putx 0 0 1 1\r\nx\r\n");  // no cmd-* line
  last().complete(inserted(2));
  send_local("pause-tube -bad 1\r\n");  // counted before its name is refused, as beanstalkd does
  send_local("delete x\r\n");           // not counted
  take();

  other->send("stats\r\n");
  ASSERT_EQ(last().text(), "stats");
  EXPECT_EQ(last().session(), testing::kAdminCalls) << "a server-wide call, through an Admin";
  last().complete(testing::sample_server_stats());
  const auto lines = mapping_of(document_of(other->take()));

  const std::vector<std::string>& keys = testing::beanstalkd_stats_keys();
  std::vector<std::string> got_keys;
  std::map<std::string, std::string> values;
  for (const auto& [key, value] : lines) {
    got_keys.push_back(key);
    values[key] = value;
  }
  EXPECT_EQ(got_keys, keys);

  const std::map<std::string, std::string> exact = {
      {"current-jobs-urgent", "1"},
      {"current-jobs-ready", "2"},
      {"current-jobs-reserved", "3"},
      {"current-jobs-delayed", "4"},
      {"current-jobs-buried", "5"},
      {"cmd-put", "1"},
      {"cmd-peek", "1"},
      {"cmd-peek-ready", "0"},
      {"cmd-peek-delayed", "0"},
      {"cmd-peek-buried", "0"},
      {"cmd-reserve", "0"},
      {"cmd-reserve-with-timeout", "1"},
      {"cmd-delete", "0"},
      {"cmd-release", "0"},
      {"cmd-use", "1"},
      {"cmd-watch", "1"},
      {"cmd-ignore", "1"},
      {"cmd-bury", "0"},
      {"cmd-kick", "0"},
      {"cmd-touch", "0"},
      {"cmd-stats", "1"},
      {"cmd-stats-job", "0"},
      {"cmd-stats-tube", "0"},
      {"cmd-list-tubes", "0"},
      {"cmd-list-tube-used", "1"},
      {"cmd-list-tubes-watched", "1"},
      {"cmd-pause-tube", "1"},
      {"job-timeouts", "7"},
      {"total-jobs", "6"},
      {"max-job-size", "65535"},
      {"current-tubes", "8"},
      {"current-connections", "2"},
      {"current-producers", "1"},
      {"current-workers", "1"},
      {"current-waiting", "9"},
      {"total-connections", "3"},
      {"pid", std::to_string(::getpid())},
      {"binlog-oldest-index", "0"},
      {"binlog-current-index", "0"},
      {"binlog-records-migrated", "0"},
      {"binlog-records-written", "0"},
      {"binlog-max-size", "0"},
      {"draining", "false"},
  };
  for (const auto& [key, value] : exact) EXPECT_EQ(values[key], value) << key;

  // Values of the process and the host: present, in their shape.
  EXPECT_TRUE(values["version"].starts_with("\"1.12 (delayq ")) << values["version"];
  EXPECT_TRUE(values["version"].ends_with(")\"")) << values["version"];
  for (const char* key : {"rusage-utime", "rusage-stime"}) {
    const std::string& value = values[key];
    const std::size_t dot = value.find('.');
    ASSERT_NE(dot, std::string::npos) << key << ": " << value;
    EXPECT_TRUE(all_digits(value.substr(0, dot))) << key << ": " << value;
    EXPECT_EQ(value.size() - dot - 1, 6U) << key << ": " << value;
    EXPECT_TRUE(all_digits(value.substr(dot + 1))) << key << ": " << value;
  }
  ASSERT_TRUE(all_digits(values["uptime"])) << values["uptime"];
  EXPECT_EQ(values["uptime"], "3600");
  EXPECT_EQ(values["id"].size(), 16U);
  EXPECT_EQ(values["id"].find_first_not_of("0123456789abcdef"), std::string::npos);
  EXPECT_FALSE(values["hostname"].empty());
  EXPECT_GE(values["os"].size(), 2U);
  EXPECT_TRUE(values["os"].starts_with('"') && values["os"].ends_with('"')) << values["os"];
  EXPECT_FALSE(values["platform"].empty());

  // Drain mode shows, and the stats command counts itself.
  fake_.set_draining(true);
  other->send("stats\r\n");
  last().complete(testing::sample_server_stats());
  const auto again = mapping_of(document_of(other->take()));
  std::map<std::string, std::string> now(again.begin(), again.end());
  EXPECT_EQ(now["draining"], "true");
  EXPECT_EQ(now["cmd-stats"], "2");
  EXPECT_EQ(now["id"], values["id"]);  // drawn once per process
}

// ---------------------------------------------------------------------------------------------
// Pipelining: replies leave in command order

TEST_F(ConversationTest, PipelinedRepliesLeaveInCommandOrderWhenCompletionsComeInReverse) {
  client_->send("put 1 0 60 1\r\na\r\npeek 3\r\ndelete 4\r\nlist-tube-used\r\nkick 2\r\n");
  EXPECT_EQ(fake_.texts(),
            (std::vector<std::string>{"put tube=default pri=1 due=+0ms ttr=60s body=a",
                                      "peek id=3 with_body=true", "erase id=4",
                                      "kick tube=default bound=2"}));
  EXPECT_EQ(conversation().pending(), 5U);  // list-tube-used's answer waits behind the others

  fake_.call(3).complete(std::size_t{2});
  fake_.call(2).complete(JobId{4});
  fake_.call(1).complete(job_of(3, "x"));
  EXPECT_TRUE(client_->pieces().empty());  // nothing until the first is complete
  EXPECT_EQ(conversation().pending(), 5U);

  fake_.call(0).complete(inserted(1));
  ASSERT_EQ(client_->pieces().size(), 1U);  // all at once
  EXPECT_EQ(take(), "INSERTED 1\r\nFOUND 3 1\r\nx\r\nDELETED\r\nUSING default\r\nKICKED 2\r\n");
  EXPECT_EQ(conversation().pending(), 0U);
}

// The front-end's counts in a stats reply are those the command found, not those of the
// commands pipelined after it, read before the broker answered it.
TEST_F(ConversationTest, StatsCountsNoCommandPipelinedAfterIt) {
  client_->send("stats\r\nput 0 0 10 1\r\nx\r\nuse y\r\nreserve-with-timeout 0\r\n");
  ASSERT_EQ(fake_.call(0).text(), "stats");
  ASSERT_EQ(command_count(context_.tally, Verb::kPut), 1U);  // read and run already
  fake_.call(0).complete(testing::sample_server_stats());
  fake_.call(1).complete(inserted(1));
  fake_.call(2).fail(Code::kTimedOut);
  const std::string replies = take();
  const auto lines = mapping_of(document_of(replies.substr(0, replies.find("INSERTED"))));
  std::map<std::string, std::string> values(lines.begin(), lines.end());
  EXPECT_EQ(values["cmd-stats"], "1");
  for (const char* key :
       {"cmd-put", "cmd-use", "cmd-reserve-with-timeout", "current-producers", "current-workers"}) {
    EXPECT_EQ(values[key], "0") << key;
  }
}

TEST_F(ConversationTest, EachReplyLeavesAsSoonAsEveryReplyBeforeItHasLeft) {
  client_->send("touch 1\r\ntouch 2\r\ntouch 3\r\ntouch 4\r\n");
  ASSERT_EQ(fake_.call_count(), 4U);
  fake_.call(1).complete(view_of(2));
  EXPECT_EQ(take(), "");
  fake_.call(0).fail(Code::kNotFound);
  EXPECT_EQ(take(), "NOT_FOUND\r\nTOUCHED\r\n");
  fake_.call(3).complete(view_of(4));
  EXPECT_EQ(take(), "");
  fake_.call(2).complete(view_of(3));
  EXPECT_EQ(take(), "TOUCHED\r\nTOUCHED\r\n");
}

TEST_F(ConversationTest, ACommandSplitAtEveryByteRunsOnceAndCountsOnce) {
  const std::string bytes = "put 3 4 5 10\r\n0123456789\r\n";
  for (const char c : bytes) client_->send(std::string_view(&c, 1));
  ASSERT_EQ(fake_.call_count(), 1U);
  EXPECT_EQ(last().text(), "put tube=default pri=3 due=+4000ms ttr=5s body=0123456789");
  EXPECT_EQ(command_count(context_.tally, Verb::kPut), 1U);
  EXPECT_EQ(context_.tally.producers, 1U);
  last().complete(inserted(1));
  EXPECT_EQ(take(), "INSERTED 1\r\n");
}

// ---------------------------------------------------------------------------------------------
// A reserve holds back the commands after it

TEST_F(ConversationTest, AReserveHoldsBackLaterCommandsUntilItsAnswerThenTheyRun) {
  client_->send("reserve\r\nuse emails\r\nput 0 0 1 1\r\nx\r\n");
  ASSERT_EQ(fake_.texts(), std::vector<std::string>{"reserve tubes=(watched) timeout=none"});
  EXPECT_TRUE(conversation().waiting());
  EXPECT_EQ(conversation().buffered(), "use emails\r\nput 0 0 1 1\r\nx\r\n"s.size());
  EXPECT_EQ(fake_.session(0)->used(), "default");  // use has not run
  client_->send("list-tube-used\r\n");             // read, not run
  EXPECT_EQ(fake_.call_count(), 1U);
  EXPECT_EQ(take(), "");

  last().complete(job_of(7, "y"));
  EXPECT_FALSE(conversation().waiting());
  EXPECT_EQ(conversation().buffered(), 0U);
  EXPECT_EQ(fake_.session(0)->used(), "emails");
  ASSERT_EQ(fake_.call_count(), 2U);
  EXPECT_EQ(last().text(), "put tube=emails pri=0 due=+0ms ttr=1s body=x");
  EXPECT_EQ(take(), "RESERVED 7 1\r\ny\r\nUSING emails\r\n");  // the put's answer not yet
  last().complete(inserted(8));
  EXPECT_EQ(take(), "INSERTED 8\r\nUSING emails\r\n");
}

TEST_F(ConversationTest, AReserveAnsweredBeforeAnEarlierPutWaitsForItsReply) {
  client_->send("put 0 0 1 1\r\nx\r\nreserve\r\nlist-tube-used\r\n");
  ASSERT_EQ(fake_.call_count(), 2U);  // the put does not hold back the reserve
  fake_.call(1).complete(job_of(2, "z"));
  EXPECT_EQ(take(), "");
  fake_.call(0).complete(inserted(1));
  EXPECT_EQ(take(), "INSERTED 1\r\nRESERVED 2 1\r\nz\r\nUSING default\r\n");
}

TEST_F(ConversationTest, AfterDeadlineSoonTheHeldCommandsRun) {
  client_->send("reserve-with-timeout 10\r\nlist-tube-used\r\n");
  last().fail(Code::kDeadlineSoon);
  EXPECT_EQ(take(), "DEADLINE_SOON\r\nUSING default\r\n");
}

// ---------------------------------------------------------------------------------------------
// Half-close, quit, and the end of a conversation

TEST_F(ConversationTest, EndOfInputDuringAReserveStopsItsWaitAnswersTimedOutAndIsDone) {
  client_->send("reserve\r\nlist-tube-used\r\n");
  const std::uint64_t ticket = last().ticket();
  conversation().end_input();
  EXPECT_EQ(fake_.stopped(), std::vector<std::uint64_t>{ticket});
  EXPECT_TRUE(fake_.cancelled().empty());
  EXPECT_FALSE(conversation().done());  // the answer is still to come
  EXPECT_EQ(take(), "");

  last().fail(Code::kTimedOut);
  EXPECT_EQ(take(), "TIMED_OUT\r\nUSING default\r\n");  // then what was sent after it runs
  EXPECT_TRUE(conversation().done());
  EXPECT_EQ(ops("reserve", "TIMED_OUT"), 1U);
}

// A broker that looks once more when the wait stops (Redis mode: a job put through another node)
// may answer a job: the client gets it, then what it sent after the reserve.
TEST_F(ConversationTest, AReserveWhoseWaitStopsMayStillAnswerAJob) {
  client_->send("reserve\r\nlist-tube-used\r\n");
  conversation().end_input();
  ASSERT_EQ(fake_.stopped().size(), 1U);
  last().complete(job_of(7, "late"));
  EXPECT_EQ(take(), "RESERVED 7 4\r\nlate\r\nUSING default\r\n");
  EXPECT_TRUE(conversation().done());
}

// After the end of input, a reserve that finds no job cannot wait for one: it asks for none
// (timeout 0), and the commands after it run.
TEST_F(ConversationTest, AReserveRunAfterTheEndOfInputDoesNotWait) {
  client_->send("reserve-with-timeout 1\r\nreserve\r\nlist-tube-used\r\n");
  const std::uint64_t ticket = last().ticket();
  conversation().end_input();
  EXPECT_EQ(fake_.stopped(), std::vector<std::uint64_t>{ticket});
  last().fail(Code::kTimedOut);
  ASSERT_EQ(fake_.call_count(), 2U);
  EXPECT_EQ(last().text(), "reserve tubes=(watched) timeout=0ms");
  EXPECT_FALSE(conversation().done());
  last().fail(Code::kTimedOut);
  EXPECT_EQ(take(), "TIMED_OUT\r\nTIMED_OUT\r\nUSING default\r\n");
  EXPECT_TRUE(conversation().done());
}

// A reserve that has its job but waits for the durability of the put before it is not a wait
// the end of input cancels: its answer comes, then the commands after it run.
TEST_F(ConversationTest, EndOfInputBehindAnAnsweredReserveRunsWhatFollowsIt) {
  fake_.set_reserves_found(true);
  client_->send("put 0 0 1 1\r\nx\r\nreserve\r\nlist-tube-used\r\n");
  ASSERT_EQ(fake_.call_count(), 2U);
  conversation().end_input();
  EXPECT_TRUE(fake_.stopped().empty());
  EXPECT_FALSE(conversation().done());
  EXPECT_EQ(conversation().buffered(), "list-tube-used\r\n"s.size());
  fake_.call(0).complete(inserted(1));
  fake_.call(1).complete(job_of(1, "x"));
  EXPECT_EQ(take(), "INSERTED 1\r\nRESERVED 1 1\r\nx\r\nUSING default\r\n");
  EXPECT_TRUE(conversation().done());
}

TEST_F(ConversationTest, EndOfInputAnswersWhatWasSentThenIsDone) {
  client_->send("put 0 0 1 1\r\nx\r\nput 0 0 1 5\r\nab");  // the second put never whole
  conversation().end_input();
  EXPECT_TRUE(fake_.cancelled().empty());
  EXPECT_FALSE(conversation().done());
  last().complete(inserted(1));
  EXPECT_EQ(take(), "INSERTED 1\r\n");
  EXPECT_TRUE(conversation().done());
  EXPECT_EQ(fake_.call_count(), 1U);
}

// A pipelined flood runs a turn at a time: kCommandsPerTurn commands, then a yield, so that a
// connection gives the thread back to the others between turns; resume() runs the next turn.
TEST_F(ConversationTest, APipelinedFloodRunsATurnAtATimeAndYieldsBetween) {
  constexpr std::size_t kTurn = Conversation::kCommandsPerTurn;
  client_->set_resume_on_yield(false);
  std::string flood;
  for (std::size_t i = 0; i < 2 * kTurn + 10; ++i) flood += "list-tube-used\r\n";
  client_->send(flood);
  const auto replies = [&] {
    const std::string out = take();
    return static_cast<std::size_t>(std::count(out.begin(), out.end(), '\n'));
  };
  EXPECT_EQ(replies(), kTurn);
  EXPECT_TRUE(client_->yielded());
  EXPECT_EQ(conversation().buffered(), (kTurn + 10) * 16);
  conversation().resume();
  EXPECT_EQ(replies(), kTurn);
  EXPECT_EQ(client_->yields(), 2);
  conversation().resume();
  EXPECT_EQ(replies(), 10U);
  EXPECT_EQ(client_->yields(), 2) << "nothing left: no yield";
  EXPECT_EQ(conversation().buffered(), 0U);
}

// A turn that ends with the input: nothing is left to share the thread for, so no yield, and
// the connection reads on.
TEST_F(ConversationTest, AFullTurnThatEmptiesTheInputDoesNotYield) {
  constexpr std::size_t kTurn = Conversation::kCommandsPerTurn;
  client_->set_resume_on_yield(false);
  std::string turn;
  for (std::size_t i = 0; i < kTurn; ++i) turn += "list-tube-used\r\n";
  client_->send(turn);
  const std::string out = take();
  EXPECT_EQ(static_cast<std::size_t>(std::count(out.begin(), out.end(), '\n')), kTurn);
  EXPECT_FALSE(client_->yielded());
  EXPECT_EQ(client_->yields(), 0);
  client_->send(turn + "list-tube-used\r\n");  // one more than a turn: then it yields
  EXPECT_TRUE(client_->yielded());
}

// The end of input with a flood not yet run: it runs, a turn at a time, and then the
// conversation is done.
TEST_F(ConversationTest, EndOfInputRunsWhatIsLeftATurnAtATimeThenIsDone) {
  constexpr std::size_t kTurn = Conversation::kCommandsPerTurn;
  client_->set_resume_on_yield(false);
  std::string flood;
  for (std::size_t i = 0; i < 3 * kTurn; ++i) flood += "list-tube-used\r\n";
  client_->send(flood);
  conversation().end_input();
  EXPECT_FALSE(conversation().done());
  client_->set_resume_on_yield(true);
  client_->pump();
  const std::string out = take();
  EXPECT_EQ(static_cast<std::size_t>(std::count(out.begin(), out.end(), '\n')), 3 * kTurn);
  EXPECT_TRUE(conversation().done());
}

TEST_F(ConversationTest, EndOfInputWithNothingPendingIsDoneAtOnce) {
  EXPECT_FALSE(conversation().done());
  conversation().end_input();
  EXPECT_TRUE(conversation().done());
  EXPECT_EQ(take(), "");
}

TEST_F(ConversationTest, QuitIsDoneOnceEarlierRepliesHaveLeftAndRunsNothingAfterIt) {
  client_->send("put 0 0 1 1\r\nx\r\nquit\r\nlist-tube-used\r\n");
  EXPECT_EQ(fake_.call_count(), 1U);
  EXPECT_FALSE(conversation().done());
  last().complete(inserted(1));
  EXPECT_EQ(take(), "INSERTED 1\r\n");  // no reply to quit, nothing for what followed it
  EXPECT_TRUE(conversation().done());
  client_->send("list-tube-used\r\n");
  EXPECT_EQ(take(), "");
}

TEST_F(ConversationTest, QuitAloneIsDoneAtOnceWithoutAReply) {
  client_->send("quit\r\n");
  EXPECT_TRUE(conversation().done());
  EXPECT_EQ(take(), "");
}

// A web page may POST to the beanstalkd port; its body's lines would read as commands. An HTTP
// request line ends the conversation: nothing after it runs, and nothing is answered.
TEST_F(ConversationTest, AnHttpRequestLineEndsTheConversation) {
  client_->send(
      "POST / HTTP/1.1\r\nHost: 127.0.0.1:11300\r\nContent-Type: text/plain\r\n\r\n"
      "put 0 0 60 5\r\nhello\r\n");
  EXPECT_TRUE(conversation().done());
  EXPECT_EQ(take(), "");
  EXPECT_EQ(fake_.call_count(), 0U);
  EXPECT_TRUE(http_request_line("GET /v1/stats HTTP/1.0\r\n"));
  EXPECT_TRUE(http_request_line("OPTIONS * HTTP/1.1"));
  EXPECT_FALSE(http_request_line("GET x"));  // not a request line: UNKNOWN_COMMAND as ever
  EXPECT_FALSE(http_request_line("get / HTTP/1.1"));
  EXPECT_FALSE(http_request_line("frobnicate a HTTP/1.1"));
}

// ---------------------------------------------------------------------------------------------
// What `stats` counts of connections

TEST_F(ConversationTest, APutLineWaitingForItsBodyCountsInCmdPutAndMakesAProducer) {
  client_->send("put 0 0 0 10\r\n012");
  EXPECT_EQ(fake_.call_count(), 0U);
  EXPECT_EQ(command_count(context_.tally, Verb::kPut), 1U);
  EXPECT_EQ(context_.tally.producers, 1U);

  Client other(context_);
  other.send("stats\r\n");
  last().complete(ServerStats{});
  std::map<std::string, std::string> values;
  for (auto& [key, value] : mapping_of(document_of(other.take()))) values[key] = value;
  EXPECT_EQ(values["cmd-put"], "1");
  EXPECT_EQ(values["current-producers"], "1");

  client_->send("3456789\r\n");
  EXPECT_EQ(last().text(), "put tube=default pri=0 due=+0ms ttr=0s body=0123456789");
  EXPECT_EQ(command_count(context_.tally, Verb::kPut), 1U);  // not again
  EXPECT_EQ(context_.tally.producers, 1U);
}

TEST_F(ConversationTest, ProducersAndWorkersCountOncePerConnection) {
  send_call("put 0 0 1 1\r\nx\r\n");
  send_call("put 0 0 1 1\r\ny\r\n");
  send_call("reserve-with-timeout 0\r\n");
  last().fail(Code::kTimedOut);
  send_call("reserve\r\n");
  last().complete(job_of(1, "x"));
  send_call("reserve-job 2\r\n");
  EXPECT_EQ(context_.tally.producers, 1U);
  EXPECT_EQ(context_.tally.workers, 1U);

  auto other = std::make_unique<Client>(context_);
  other->send("putx 0 0 1 1\r\nx\r\nreserve\r\n");
  EXPECT_EQ(context_.tally.producers, 2U);
  EXPECT_EQ(context_.tally.workers, 2U);
  EXPECT_EQ(context_.tally.connections, 2U);
  EXPECT_EQ(context_.tally.total_connections, 2U);

  other.reset();
  EXPECT_EQ(context_.tally.producers, 1U);
  EXPECT_EQ(context_.tally.workers, 1U);
  EXPECT_EQ(context_.tally.connections, 1U);
  EXPECT_EQ(context_.tally.total_connections, 2U);
}

TEST_F(ConversationTest, AConnectionThatOnlyReadsIsNeitherProducerNorWorker) {
  send_call("peek 1\r\n");
  send_local("list-tube-used\r\n");
  EXPECT_EQ(context_.tally.producers, 0U);
  EXPECT_EQ(context_.tally.workers, 0U);
}

// docs/protocol.md, stats: current-workers counts "open connections that have sent `reserve` or
// `reserve-with-timeout`, or reserved a job with `reserve-job`", as beanstalkd 1.12 does (prot.c
// OP_RESERVE_JOB calls connsetworker only once the job is found and reserved). A reserve-job
// answered NOT_FOUND reserved nothing.
TEST_F(ConversationTest, ReserveJobThatReservesNothingMakesNoWorker) {
  EXPECT_EQ(send_call("reserve-job 7\r\n"), "reserve_job id=7");
  last().fail(Code::kNotFound);
  EXPECT_EQ(take(), "NOT_FOUND\r\n");
  EXPECT_EQ(context_.tally.workers, 0U) << "a reserve-job answered NOT_FOUND made a worker";
}

TEST_F(ConversationTest, DestroyingTheConversationClosesItsSessionAndDropsItsCompletions) {
  client_->send("put 0 0 1 1\r\nx\r\nreserve\r\n");
  ASSERT_EQ(fake_.call_count(), 2U);
  client_.reset();
  EXPECT_EQ(fake_.sessions_closed(), 1U);
  EXPECT_EQ(fake_.session(0), nullptr);
  EXPECT_EQ(fake_.call(0).state(), Call::State::kDropped);
  EXPECT_EQ(fake_.call(1).state(), Call::State::kDropped);
  EXPECT_EQ(fake_.pending_count(), 0U);
  EXPECT_TRUE(fake_.cancelled().empty());  // the session's end ends its wait
  EXPECT_EQ(context_.tally.connections, 0U);
  EXPECT_EQ(context_.tally.total_connections, 1U);
  EXPECT_EQ(context_.tally.producers, 0U);
  EXPECT_EQ(context_.tally.workers, 0U);
  EXPECT_EQ(fake_.admins_opened(), 0U) << "a connection that made no server-wide call opened one";
}

TEST_F(ConversationTest, DestroyingTheConversationDropsItsServerWideCallsToo) {
  client_->send("stats-tube default\r\nlist-tubes\r\n");
  ASSERT_EQ(fake_.call_count(), 2U);
  EXPECT_EQ(fake_.call(0).text(), "stats_tube tube=default");
  EXPECT_EQ(fake_.call(1).text(), "list_tubes");
  EXPECT_EQ(fake_.admins_opened(), 1U) << "one Admin per connection, opened at its first call";
  client_.reset();
  EXPECT_EQ(fake_.admins_closed(), 1U);
  EXPECT_EQ(fake_.call(0).state(), Call::State::kDropped);
  EXPECT_EQ(fake_.call(1).state(), Call::State::kDropped);
  EXPECT_EQ(fake_.pending_count(), 0U);
}

}  // namespace
}  // namespace delayq::front::beanstalk
