// cli_test.cc — the `delayq` command-line tool end to end: the real binary against the real
// delayqd, its output (text and --json) and its exit status for each command and failure.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <boost/json.hpp>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <thread>

#include "server_process.h"

namespace delayq::testing {
namespace {

namespace json = boost::json;

struct Outcome {
  int status = -1;
  std::string out;
};

class CliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    server_ = std::make_unique<ServerProcess>(dir_.path() / "db");
    ASSERT_EQ(server_->start(), "");
  }
  // Runs `delayq --server ... <args>` with stderr into stdout.
  Outcome delayq(const std::string& args, const std::string& input = "") {
    return delayq_at("http://127.0.0.1:" + std::to_string(server_->http_port()), args, input);
  }
  // The same with an environment assignment ("DELAYQ_TOKEN=x") in front of delayq.
  Outcome delayq_env(const std::string& env, const std::string& args) {
    return delayq_at("http://127.0.0.1:" + std::to_string(server_->http_port()), args, "", env);
  }
  Outcome delayq_at(const std::string& server, const std::string& args,
                    const std::string& input = "", const std::string& env = "") {
    return shell("printf '%s' '" + input + "' | " + env + " " + std::string(DELAYQ_CLI_PATH) +
                 " --server " + server + " " + args + " 2>&1");
  }
  static Outcome shell(const std::string& command) {
    Outcome run;
    FILE* pipe = ::popen(command.c_str(), "r");
    if (pipe == nullptr) return run;
    char buffer[4096];
    std::size_t n = 0;
    while ((n = std::fread(buffer, 1, sizeof buffer, pipe)) > 0) run.out.append(buffer, n);
    const int status = ::pclose(pipe);
    run.status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    return run;
  }
  json::object json_of(const Outcome& run) {
    boost::system::error_code error;
    json::value v = json::parse(run.out, error);
    EXPECT_FALSE(error) << run.out;
    return !error && v.is_object() ? v.as_object() : json::object{};
  }

  TempDir dir_;
  std::unique_ptr<ServerProcess> server_;
};

TEST_F(CliTest, PutGetRescheduleReserveRm) {
  Outcome put = delayq("--json put --tube orders --in 48h --key order-7 --group shop 'cancel 7'");
  ASSERT_EQ(put.status, 0) << put.out;
  const auto id = json_of(put).at("id").to_number<std::uint64_t>();
  EXPECT_EQ(json_of(put).at("state").as_string(), "delayed");

  Outcome get = delayq("get --tube orders --key order-7");
  EXPECT_EQ(get.status, 0) << get.out;
  EXPECT_NE(get.out.find("job " + std::to_string(id) + "  delayed in tube orders"),
            std::string::npos)
      << get.out;
  EXPECT_NE(get.out.find("body      cancel 7"), std::string::npos) << get.out;

  Outcome ls = delayq("ls");
  EXPECT_EQ(ls.status, 0);
  EXPECT_NE(ls.out.find("orders"), std::string::npos) << ls.out;

  Outcome group = delayq("group ls shop --tube orders");
  EXPECT_NE(group.out.find("1 job in group shop of tube orders"), std::string::npos) << group.out;

  Outcome moved = delayq("--json reschedule " + std::to_string(id) + " --in 0");
  EXPECT_EQ(moved.status, 0) << moved.out;
  EXPECT_EQ(json_of(moved).at("state").as_string(), "ready");

  Outcome reserved = delayq("--json reserve --tube orders --timeout 5s");
  EXPECT_EQ(reserved.status, 0) << reserved.out;
  EXPECT_EQ(json_of(reserved).at("body").as_string(), "cancel 7");

  Outcome rm = delayq("rm " + std::to_string(id));
  EXPECT_EQ(rm.status, 0) << rm.out;
  EXPECT_EQ(rm.out, "deleted: " + std::to_string(id) + "\n");

  Outcome stats = delayq("--json stats");
  EXPECT_EQ(stats.status, 0);
  EXPECT_EQ(json_of(stats).at("total_jobs").to_number<std::uint64_t>(), 1u);
}

// reserve --count: the jobs ready, up to the count, each printed (or the server's list).
TEST_F(CliTest, ReserveWithACountTakesTheJobsReady) {
  for (const char* body : {"one", "two", "three"}) {
    ASSERT_EQ(delayq(std::string("put --tube many ") + body).status, 0);
  }
  Outcome two = delayq("--json reserve --tube many --count 2");
  EXPECT_EQ(two.status, 0) << two.out;
  EXPECT_EQ(json_of(two).at("jobs").as_array().size(), 2U) << two.out;
  Outcome rest = delayq("reserve --tube many --count 5");
  EXPECT_EQ(rest.status, 0) << rest.out;
  EXPECT_NE(rest.out.find("three"), std::string::npos) << rest.out;
  EXPECT_EQ(delayq("reserve --tube many --count 5").status, 4);
  EXPECT_NE(delayq("reserve --tube many --count 101").status, 0);
}

// A tube name longer than ls's column widens it: the counts still line up under their heads.
TEST_F(CliTest, LsWidensItsNameColumnForALongName) {
  const std::string long_name(40, 'x');
  ASSERT_EQ(delayq("put --tube " + long_name + " y").status, 0);
  const Outcome ls = delayq("ls");
  const auto column_of = [&ls](const std::string& start, const std::string& word) {
    const auto line = ls.out.find(start);
    return ls.out.find(word, line) - line;
  };
  EXPECT_EQ(column_of("TUBE", "READY") + 4, column_of(long_name, " 1 ") + 1) << ls.out;
}

TEST_F(CliTest, DueCountsDelayedJobsByDueTime) {
  ASSERT_EQ(delayq("put --tube orders --in 2h later").status, 0);
  ASSERT_EQ(delayq("put --tube orders --in 10m sooner").status, 0);
  ASSERT_EQ(delayq("put --tube mail --in 3d much-later").status, 0);
  Outcome all = delayq("due");
  ASSERT_EQ(all.status, 0) << all.out;
  // Header, then one line per bucket: overdue, the next minute, hour, day, week, later.
  EXPECT_NE(all.out.find("before now"), std::string::npos) << all.out;
  const auto count_of = [](const std::string& out, const std::string& when) {
    const auto line = out.find("\n" + when + " ");
    if (line == std::string::npos) return std::string("missing");
    const auto end = out.find('\n', line + 1);
    const std::string text = out.substr(line + 1, end - line - 1);
    return text.substr(text.find_last_of(' ') + 1);
  };
  EXPECT_EQ(count_of(all.out, "1m to 1h"), "1") << all.out;
  EXPECT_EQ(count_of(all.out, "1h to 1d"), "1") << all.out;
  EXPECT_EQ(count_of(all.out, "1d to 7d"), "1") << all.out;
  EXPECT_EQ(count_of(all.out, "7d and later"), "0") << all.out;
  Outcome tube = delayq("due orders --in 0s,1h");
  ASSERT_EQ(tube.status, 0) << tube.out;
  EXPECT_EQ(count_of(tube.out, "now to 1h"), "1") << tube.out;
  EXPECT_EQ(count_of(tube.out, "1h and later"), "1") << tube.out;
  // Any zero is now ("0ms" too).
  EXPECT_EQ(count_of(delayq("due orders --in 0ms,1h").out, "now to 1h"), "1");
  Outcome json_out = delayq("--json due mail");
  ASSERT_EQ(json_out.status, 0) << json_out.out;
  EXPECT_EQ(json_of(json_out).at("delayed").to_number<std::uint64_t>(), 1u);
  Outcome bad = delayq("due --in 1h,0s");
  EXPECT_EQ(bad.status, 1);
  EXPECT_NE(bad.out.find("bad_request"), std::string::npos) << bad.out;
}

TEST_F(CliTest, WebhookSetGetRm) {
  Outcome set = delayq(
      "--json webhook set calls http://127.0.0.1:9/in --header 'Authorization: Bearer t' "
      "--timeout 2s --max-attempts 5 --backoff-min 100ms --rate 50 --secret k1 --secret k2");
  ASSERT_EQ(set.status, 0) << set.out;
  const json::object hook = json_of(set);
  EXPECT_EQ(hook.at("url").as_string(), "http://127.0.0.1:9/in");
  EXPECT_EQ(hook.at("headers").as_object().at("Authorization").as_string(), "Bearer t");
  EXPECT_EQ(hook.at("timeout").as_string(), "2s");
  EXPECT_EQ(hook.at("max_attempts").as_int64(), 5);
  EXPECT_EQ(hook.at("backoff").as_object().at("min").as_string(), "100ms");
  EXPECT_EQ(hook.at("rate").to_number<double>(), 50.0);
  EXPECT_EQ(hook.at("secrets").as_int64(), 2);
  Outcome got = delayq("webhook get calls");
  EXPECT_EQ(got.status, 0) << got.out;
  EXPECT_NE(got.out.find("url: http://127.0.0.1:9/in"), std::string::npos) << got.out;
  Outcome put = delayq(
      "--json put --tube calls --in 1h --url http://127.0.0.1:9/own --content-type text/csv x");
  ASSERT_EQ(put.status, 0) << put.out;
  // Shown with the job, as its tube and key are.
  Outcome shown = delayq("get " + std::to_string(json_of(put).at("id").to_number<std::uint64_t>()));
  EXPECT_NE(shown.out.find("  url       http://127.0.0.1:9/own\n"), std::string::npos) << shown.out;
  EXPECT_NE(shown.out.find("  type      text/csv\n"), std::string::npos) << shown.out;
  Outcome rm = delayq("webhook rm calls");
  EXPECT_EQ(rm.status, 0) << rm.out;
  EXPECT_EQ(rm.out.rfind("webhook removed:\n", 0), 0U) << rm.out;
  Outcome gone = delayq("webhook get calls");
  EXPECT_EQ(gone.status, 1);
  EXPECT_NE(gone.out.find("not_found"), std::string::npos) << gone.out;
  Outcome bad = delayq("webhook set calls ftp://nowhere");
  EXPECT_EQ(bad.status, 1);
  EXPECT_NE(bad.out.find("bad_request"), std::string::npos) << bad.out;
}

// `tube set` sends a tube's flow control (docs/flow-control.md) and prints what is in force;
// `tube show` and a reserve see it at work: a group at its concurrency is held back.
TEST_F(CliTest, TubeSetAndShowFlowControl) {
  Outcome set = delayq(
      "tube set emails --group-concurrency 1 --fair on --group-rate 10/s --group-burst 5 "
      "--weight gold=3 --weight silver=2 --max-attempts 4");
  ASSERT_EQ(set.status, 0) << set.out;
  EXPECT_EQ(set.out,
            "tube emails\n"
            "  group concurrency  1\n"
            "  fair               on\n"
            "  group rate         10/1s, burst 5\n"
            "  group weights      gold=3, silver=2\n"
            "  max attempts       4\n");
  ASSERT_EQ(delayq("put --tube emails --group customer:42 first").status, 0);
  ASSERT_EQ(delayq("put --tube emails --group customer:42 second").status, 0);
  Outcome taken = delayq("--json reserve --tube emails");
  ASSERT_EQ(taken.status, 0) << taken.out;
  EXPECT_EQ(json_of(taken).at("body").as_string(), "first");
  EXPECT_EQ(delayq("reserve --tube emails").status, 4);  // its group is at its concurrency

  // Through GET /v1/tubes/{tube}: the settings as set, and the group held back.
  const json::object tube = json_of(delayq("--json tube show emails"));
  EXPECT_EQ(tube.at("group_concurrency").as_int64(), 1);
  EXPECT_EQ(tube.at("fair").as_bool(), true);
  EXPECT_EQ(tube.at("group_rate").as_string(), "10/1s");
  EXPECT_EQ(tube.at("group_burst").as_int64(), 5);
  EXPECT_EQ(tube.at("group_weights").as_object().at("gold").as_int64(), 3);
  EXPECT_EQ(tube.at("max_attempts").as_int64(), 4);
  EXPECT_EQ(tube.at("groups_held").as_int64(), 1);
  EXPECT_EQ(tube.at("groups_ready").as_int64(), 0);
  Outcome shown = delayq("tube show emails");
  ASSERT_EQ(shown.status, 0) << shown.out;
  EXPECT_TRUE(
      shown.out.starts_with("tube emails\n  jobs               1 ready (0 urgent), 0 "
                            "delayed, 1 reserved, 0 buried\n"))
      << shown.out;
  EXPECT_NE(shown.out.find("  group rate         10/1s, burst 5\n"), std::string::npos)
      << shown.out;
  EXPECT_NE(shown.out.find("  groups             1 held, 0 ready\n"), std::string::npos)
      << shown.out;

  // Off again: the held job is served.
  Outcome off =
      delayq("--json tube set emails --group-concurrency off --fair off --group-rate off");
  ASSERT_EQ(off.status, 0) << off.out;
  EXPECT_EQ(json_of(off).at("group_concurrency").as_int64(), 0);
  EXPECT_TRUE(json_of(off).at("group_rate").is_null());
  EXPECT_FALSE(json_of(off).contains("max_attempts"));
  Outcome next = delayq("--json reserve --tube emails");
  ASSERT_EQ(next.status, 0) << next.out;
  EXPECT_EQ(json_of(next).at("body").as_string(), "second");

  EXPECT_EQ(delayq("tube set emails").status, 2);                // nothing to set
  EXPECT_EQ(delayq("tube set emails --weight gold").status, 2);  // no =N
  EXPECT_EQ(delayq("tube set emails --group-concurrency many").status, 2);
  EXPECT_EQ(delayq("tube set emails --fair maybe").status, 2);
  Outcome refused = delayq("tube set emails --group-rate fast");
  EXPECT_EQ(refused.status, 1);
  EXPECT_NE(refused.out.find("delayq: bad_request: group_rate:"), std::string::npos) << refused.out;
  EXPECT_EQ(delayq("tube show nothing-here").status, 1);
}

// A put with --debounce moves the pending job holding its key, never past its first put +
// --max-wait, and says so.
TEST_F(CliTest, PutDebounceMovesTheKeysPendingJob) {
  Outcome first = delayq("--json put --tube index --key doc:42 --debounce 10s --max-wait 1m v1");
  ASSERT_EQ(first.status, 0) << first.out;
  const json::object job = json_of(first);
  EXPECT_EQ(job.at("state").as_string(), "delayed");
  EXPECT_FALSE(job.contains("debounced"));
  const std::string id = std::to_string(job.at("id").to_number<std::uint64_t>());
  const std::string created(job.at("created").as_string());

  Outcome second = delayq("put --tube index --key doc:42 --debounce 10s --max-wait 1m v2");
  ASSERT_EQ(second.status, 0) << second.out;
  EXPECT_TRUE(second.out.starts_with("job " + id + " debounced (first put " + created + ")\n"))
      << second.out;
  EXPECT_EQ(json_of(delayq("--json get " + id)).at("body").as_string(), "v2");

  // A debounce of an hour stops at the first put + 1 minute: 50 s after the first due time.
  Outcome capped = delayq("--json put --tube index --key doc:42 --debounce 1h --max-wait 1m v3");
  ASSERT_EQ(capped.status, 0) << capped.out;
  const json::object moved = json_of(capped);
  EXPECT_EQ(moved.at("debounced").as_bool(), true);
  EXPECT_EQ(moved.at("created").as_string(), created);
  const std::int64_t later = moved.at("due_unix_ms").to_number<std::int64_t>() -
                             job.at("due_unix_ms").to_number<std::int64_t>();
  EXPECT_LE(later, 50'000);
  EXPECT_GE(later, 49'000);
  // Moved, not put again.
  const json::object tube = json_of(delayq("--json tube show index"));
  EXPECT_EQ(tube.at("total_jobs").as_int64(), 1);
  EXPECT_EQ(tube.at("delayed").as_int64(), 1);

  EXPECT_EQ(delayq("put --tube index --debounce 10s x").status, 2);  // no key
  EXPECT_EQ(delayq("put --tube index -k k --debounce 10s --in 1s x").status, 2);
  EXPECT_EQ(delayq("put --tube index -k k --max-wait 1m x").status, 2);  // no debounce
}

TEST_F(CliTest, ATokenFileLocksTheApiAndDelayqTokenOpensIt) {
  const auto tokens = dir_.path() / "tokens";
  {
    std::ofstream file(tokens);
    file << "# operators\n  s3cret-one  \n\nanother\n";
  }
  (void)server_->stop();
  server_ = std::make_unique<ServerProcess>(
      dir_.path() / "db", std::vector<std::string>{"--http-token-file", tokens.string()});
  ASSERT_EQ(server_->start(), "");
  Outcome refused = delayq("stats");
  EXPECT_EQ(refused.status, 1) << refused.out;
  EXPECT_NE(refused.out.find("unauthorized"), std::string::npos) << refused.out;
  EXPECT_NE(refused.out.find("set $DELAYQ_TOKEN to one of the server's tokens"), std::string::npos)
      << refused.out;
  Outcome wrong = delayq_env("DELAYQ_TOKEN=nope", "stats");
  EXPECT_EQ(wrong.status, 1) << wrong.out;
  EXPECT_NE(wrong.out.find("$DELAYQ_TOKEN is not one of the server's tokens"), std::string::npos)
      << wrong.out;
  // Sent in a header, a token with a line break would end it: refused before anything is sent.
  Outcome broken = delayq_env("DELAYQ_TOKEN=\"$(printf 's3cret-one\\nX: y')\"", "stats");
  EXPECT_EQ(broken.status, 2) << broken.out;
  EXPECT_NE(broken.out.find("control character"), std::string::npos) << broken.out;
  Outcome right = delayq_env("DELAYQ_TOKEN=s3cret-one", "--json stats");
  EXPECT_EQ(right.status, 0) << right.out;
  EXPECT_TRUE(json_of(right).contains("version"));
  Outcome second = delayq_env("DELAYQ_TOKEN=another", "ls");
  EXPECT_EQ(second.status, 0) << second.out;
}

// A put whose key is held already changes nothing, and says so: the job shown is the holder.
TEST_F(CliTest, APutOfAKeyHeldAlreadySaysNothingChanged) {
  ASSERT_EQ(delayq("put --tube k --key a --in 1h one").status, 0);
  const Outcome again = delayq("put --tube k --key a --in 2h two");
  EXPECT_EQ(again.status, 0) << again.out;
  EXPECT_EQ(again.out.rfind("job 1 holds key a already: nothing changed (--replace or --debounce "
                            "to change it)\n",
                            0),
            0u)
      << again.out;
  EXPECT_EQ(json_of(delayq("--json get 1")).at("body").as_string(), "one");
  const Outcome replaced = delayq("put --tube k --key a --in 2h --replace three");
  EXPECT_EQ(replaced.out.find("holds key"), std::string::npos) << replaced.out;
}

// A job whose push delivery fails shows the failure and its counters, as the API has them.
TEST_F(CliTest, GetShowsAPushDeliverysLastFailure) {
  ASSERT_EQ(delayq("webhook set hooked http://127.0.0.1:1/hook").status, 0);
  ASSERT_EQ(delayq("put --tube hooked x").status, 0);
  Outcome get;
  for (int i = 0; i < 100 && get.out.find("last try") == std::string::npos; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    get = delayq("get 1");
  }
  EXPECT_NE(get.out.find("  counters  reserves 1, releases 1\n"), std::string::npos) << get.out;
  EXPECT_NE(get.out.find("  last try  connect: Connection refused (status 0) at "),
            std::string::npos)
      << get.out;
}

// put-many: a job a line, in batches; each line's outcome in order; a refused one makes the exit
// status 1; a line that is not a JSON object sends nothing.
TEST_F(CliTest, PutManyPutsAJobALineAndSaysWhatBecameOfEach) {
  const std::string lines =
      "{\"body\":\"a\",\"delay\":\"1h\",\"key\":\"k\"}\n\n{\"tube\":\"x\",\"body\":\"b\"}\n"
      "{\"body\":\"c\",\"key\":\"k\"}\n{\"tube\":\"-bad\"}\n";
  const Outcome many = delayq("put-many --tube orders", lines);
  EXPECT_EQ(many.status, 1) << many.out;
  EXPECT_EQ(many.out,
            "line 1: job 1 delayed in tube orders\n"
            "line 3: job 2 ready in tube x\n"
            "line 4: job 1 delayed in tube orders (its key was held: nothing new)\n"
            "line 5: refused, 400 bad_request: bad tube name '-bad': 1 to 200 bytes of letters, "
            "digits and -+/;.$_(), not starting with '-'\n"
            "2 put, 1 held by their key already, 1 refused\n");
  EXPECT_EQ(json_of(delayq("--json get 2")).at("body").as_string(), "b");
  const Outcome bad = delayq("put-many", "{\"body\":\"d\"}\nnope\n");
  EXPECT_EQ(bad.status, 2);
  EXPECT_EQ(bad.out.rfind("delayq: line 2 is not a JSON object", 0), 0U) << bad.out;
  const Outcome none = delayq("get 3");
  EXPECT_NE(none.out.find("no job 3"), std::string::npos) << "nothing was put: " << none.out;
  // More than a batch holds: 1,500 lines go in two requests.
  std::string many_lines;
  for (int i = 0; i < 1500; ++i) many_lines += "{\"tube\":\"bulk\",\"delay\":\"1h\"}\n";
  const Outcome bulk = delayq("put-many", many_lines);
  EXPECT_EQ(bulk.status, 0);
  EXPECT_NE(bulk.out.find("1500 put, 0 held by their key already, 0 refused\n"), std::string::npos);
  EXPECT_EQ(json_of(delayq("--json tube show bulk")).at("delayed").to_number<int>(), 1500);
}

TEST_F(CliTest, BodyFromStdinAndGroupRm) {
  Outcome put = delayq("--json put --in 1h --group g -", "from stdin");
  ASSERT_EQ(put.status, 0) << put.out;
  const auto id = json_of(put).at("id").to_number<std::uint64_t>();
  EXPECT_EQ(json_of(delayq("--json get " + std::to_string(id))).at("body").as_string(),
            "from stdin");
  Outcome rm = delayq("group rm g");
  EXPECT_EQ(rm.status, 0);
  EXPECT_NE(rm.out.find("cancelled: 1"), std::string::npos) << rm.out;
}

// Text output writes control characters as \xNN: a NUL no longer cuts a reserved job's body
// short, and a body cannot drive the terminal. A failed read of stdin, a --replace without a key
// and output that cannot be written are refused, where they made an empty job or said 0.
TEST_F(CliTest, ControlCharactersAreEscapedAndFailedInputOrOutputIsNotASuccess) {
  const std::string cli = std::string(DELAYQ_CLI_PATH) +
                          " --server http://127.0.0.1:" + std::to_string(server_->http_port());
  Outcome put = shell("printf 'x\\000y\\033]0;t\\007\\nz' | " + cli + " put -t ctl - 2>&1");
  ASSERT_EQ(put.status, 0) << put.out;
  Outcome reserved = shell(cli + " reserve -t ctl 2>&1");
  EXPECT_EQ(reserved.status, 0) << reserved.out;
  EXPECT_NE(reserved.out.find("  body      x\\x00y\\x1B]0;t\\x07\nz\n"), std::string::npos)
      << reserved.out;
  EXPECT_EQ(reserved.out.find('\x1b'), std::string::npos) << reserved.out;
  Outcome directory = shell(cli + " put -t ctl - < / 2>&1");
  EXPECT_EQ(directory.status, 2) << directory.out;
  EXPECT_NE(directory.out.find("cannot read the body from stdin"), std::string::npos)
      << directory.out;
  Outcome unkeyed = delayq("put -t ctl --replace x");
  EXPECT_EQ(unkeyed.status, 2) << unkeyed.out;
  Outcome full = shell(cli + " ls 2>&1 >/dev/full");
  EXPECT_EQ(full.status, 2) << full.out;
  EXPECT_NE(full.out.find("cannot write the output"), std::string::npos) << full.out;
  Outcome help = shell(cli + " --help 2>&1 >/dev/full");
  EXPECT_EQ(help.status, 2) << help.out;
  EXPECT_NE(help.out.find("cannot write the output"), std::string::npos) << help.out;
  EXPECT_EQ(json_of(delayq("--json stats")).at("total_jobs").to_number<std::uint64_t>(), 1U);
}

TEST_F(CliTest, BytesThatAreNotTextTravelAsBase64) {
  Outcome put = delayq("--json put -", "\xff\xfe\x01");
  ASSERT_EQ(put.status, 0) << put.out;
  const auto id = json_of(put).at("id").to_number<std::uint64_t>();
  EXPECT_EQ(json_of(delayq("--json get " + std::to_string(id))).at("body_base64").as_string(),
            "//4B");
}

TEST_F(CliTest, FailuresHaveClearMessagesAndExitCodes) {
  Outcome missing = delayq("get 12345");
  EXPECT_EQ(missing.status, 1);
  EXPECT_EQ(missing.out, "delayq: not_found: no job 12345\n");
  Outcome bad = delayq("put --in soon x");
  EXPECT_EQ(bad.status, 1);
  EXPECT_NE(bad.out.find("delayq: bad_request: delay: bad duration 'soon'"), std::string::npos)
      << bad.out;
  // A bare number would be milliseconds to the API: the CLI asks for its unit (0 needs none).
  const Outcome unitless = delayq("put --in 30 x");
  EXPECT_EQ(unitless.status, 2) << unitless.out;
  EXPECT_NE(unitless.out.find("a duration needs its unit: 30s, 30m or 30ms"), std::string::npos)
      << unitless.out;
  EXPECT_EQ(delayq("due --in 0,60").status, 2);
  EXPECT_EQ(delayq("put -k k --debounce 10 x").status, 2);
  EXPECT_EQ(delayq("schedule set nightly -t t --every 1m --max-lateness 60").status, 2);
  EXPECT_EQ(delayq("reserve --timeout 5").status, 2);
  EXPECT_EQ(delayq("reserve --timeout 0").status, 4);
  EXPECT_EQ(delayq("put").status, 2);            // no body
  EXPECT_EQ(delayq("get").status, 2);            // no id, no key
  const Outcome unknown = delayq("frobnicate");  // no such command: named as such
  EXPECT_EQ(unknown.status, 2);
  EXPECT_NE(unknown.out.find("not expected: frobnicate"), std::string::npos) << unknown.out;
  const Outcome no_sub = delayq("group bogus");  // a group's command it does not have
  EXPECT_EQ(no_sub.status, 2);
  EXPECT_EQ(no_sub.out, "delayq group: no command bogus; its commands: ls, rm\n");
  EXPECT_EQ(delayq("schedule").out.find("delayq schedule: a command is needed; its commands: set,"),
            0);
  EXPECT_EQ(delayq("").status, 2);                    // no command at all
  const Outcome unnamed = delayq("put --tube '' x");  // a tube of no name
  EXPECT_EQ(unnamed.status, 2) << unnamed.out;
  EXPECT_NE(unnamed.out.find("an empty name"), std::string::npos) << unnamed.out;
  EXPECT_EQ(delayq("reserve --tube empty").status, 4);    // nothing to take
  const Outcome soon = delayq("reserve --timeout soon");  // the server's to refuse, no wait said
  EXPECT_EQ(soon.status, 1) << soon.out;
  EXPECT_EQ(soon.out.find("waiting up to"), std::string::npos) << soon.out;
  EXPECT_EQ(delayq("--help").status, 0);
  // An empty value (an unset shell variable) is refused, not taken for the option left out: the
  // put would be due at once, or go without its key.
  for (const char* args :
       {"put --in '' x", "put --key '' --in 1h x", "put --at '' x", "put --ttr '' x",
        "reserve --timeout ''", "due --in 1h,", "schedule set '' --every 1m", "schedule next ''",
        "schedule next n --after 20300101", "put --at 20261124 x", "--ca-file /nonexistent ls"}) {
    const Outcome run = delayq(args);
    EXPECT_EQ(run.status, 2) << args << ": " << run.out;
  }
  EXPECT_EQ(json_of(delayq("--json stats")).at("total_jobs").to_number<std::uint64_t>(), 0u)
      << "nothing was put";
  const Outcome down = delayq_at("http://127.0.0.1:1", "ls");  // nobody listens on port 1
  EXPECT_EQ(down.status, 3) << down.out;
  EXPECT_NE(down.out.find("cannot reach"), std::string::npos) << down.out;
  // An address that cannot be one is bad usage, not a name to resolve.
  for (const char* server : {"http://[::1", "http://[::1]", "http://::1:8080", "http://[]:80"}) {
    const Outcome refused = delayq_at(std::string("'") + server + "'", "ls");
    EXPECT_EQ(refused.status, 2) << server << ": " << refused.out;
    EXPECT_NE(refused.out.find("bad server address"), std::string::npos)
        << server << ": " << refused.out;
  }
}

// A server on loopback that answers every request with the same bytes, then closes.
class CannedServer {
 public:
  explicit CannedServer(std::string answer) : answer_(std::move(answer)) {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    ::inet_pton(AF_INET, "127.0.0.1", &address.sin_addr);
    socklen_t length = sizeof address;
    if (::bind(fd_, reinterpret_cast<const sockaddr*>(&address), sizeof address) != 0 ||
        ::listen(fd_, 16) != 0 ||
        ::getsockname(fd_, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
      ADD_FAILURE() << "the canned server could not listen";
      return;
    }
    port_ = ntohs(address.sin_port);
    thread_ = std::thread([this] {
      for (;;) {
        const int client = ::accept(fd_, nullptr, nullptr);
        if (client < 0 || stop_) break;
        std::string request;
        char buffer[4096];
        while (request.find("\r\n\r\n") == std::string::npos) {
          const ssize_t n = ::recv(client, buffer, sizeof buffer, 0);
          if (n <= 0) break;
          request.append(buffer, static_cast<std::size_t>(n));
        }
        (void)::send(client, answer_.data(), answer_.size(), MSG_NOSIGNAL);
        ::close(client);
      }
    });
  }
  ~CannedServer() {
    stop_ = true;
    ::shutdown(fd_, SHUT_RDWR);
    ::close(fd_);
    if (thread_.joinable()) thread_.join();
  }
  [[nodiscard]] std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }

 private:
  std::string answer_;
  int fd_ = -1;
  std::uint16_t port_ = 0;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

std::string http_answer(std::string_view status, std::string_view body) {
  return "HTTP/1.1 " + std::string(status) + "\r\nContent-Length: " + std::to_string(body.size()) +
         "\r\nConnection: close\r\n\r\n" + std::string(body);
}

// An answer that is not delayqd's (a captive portal's page, JSON of another shape, an error
// without its object) is said to be so, with exit status 3: before, the tool aborted on an
// uncaught exception (SIGABRT), or printed the page with --json and exit 0.
TEST_F(CliTest, AnAnswerThatIsNotDelayqdsIsSaidSoAndNothingCrashes) {
  {
    CannedServer portal(http_answer("200 OK", "<html>captive portal</html>"));
    for (const char* args : {"ls", "--json ls", "get 1", "rm 1"}) {
      const Outcome run = delayq_at(portal.url(), args);
      EXPECT_EQ(run.status, 3) << args << ": " << run.out;
      EXPECT_NE(run.out.find("is it delayqd?"), std::string::npos) << args << ": " << run.out;
    }
  }
  {
    CannedServer other(http_answer("200 OK", R"({"tubes":"none"})"));
    const Outcome run = delayq_at(other.url(), "ls");
    EXPECT_EQ(run.status, 3) << run.out;
    EXPECT_NE(run.out.find("not what this delayq expects"), std::string::npos) << run.out;
    // Nothing of a job is printed from an answer that is not one.
    CannedServer partial(http_answer("200 OK", R"({"id":1})"));
    const Outcome job = delayq_at(partial.url(), "get 1");
    EXPECT_EQ(job.status, 3) << job.out;
    EXPECT_EQ(job.out.find("job 1"), std::string::npos) << job.out;
  }
  {
    // An error without delayqd's error object: a proxy's, another server's.
    for (const char* answer : {R"({"error":"a string"})", "<html>Not Found</html>"}) {
      CannedServer refusing(http_answer("404 Not Found", answer));
      const Outcome run = delayq_at(refusing.url(), "ls");
      EXPECT_EQ(run.status, 3) << run.out;
      EXPECT_EQ(run.out, "delayq: " + refusing.url() +
                             " answered HTTP 404 without delayqd's error object: is it delayqd?\n");
    }
  }
}

// What JSON cannot carry is bad usage, said before anything is sent; --json also after the
// command.
TEST_F(CliTest, ValuesJsonCannotCarryAreBadUsageAndJsonMayComeLast) {
  const Outcome key = delayq("put -k \"$(printf '\\377')\" x");
  EXPECT_EQ(key.status, 2) << key.out;
  EXPECT_NE(key.out.find("not UTF-8"), std::string::npos) << key.out;
  EXPECT_EQ(delayq("webhook set t http://127.0.0.1:9/hook --rate 1e400").status, 2);
  const Outcome listed = delayq("ls --json");
  EXPECT_EQ(listed.status, 0) << listed.out;
  EXPECT_TRUE(json_of(listed).contains("tubes")) << listed.out;
  // --at takes Unix milliseconds as well as RFC 3339, as the server's message offers.
  const Outcome at = delayq("--json put --at 4102444800000 later");
  EXPECT_EQ(at.status, 0) << at.out;
  EXPECT_EQ(json_of(at).at("due_unix_ms").to_number<std::int64_t>(), 4102444800000) << at.out;
}

// Over TLS (delayqd --tls-cert): https:// with the server's certificate trusted (--ca-file, or
// $DELAYQ_CA_FILE) works, by address or by a name the certificate holds; untrusted, or under a
// name it does not hold, the CLI cannot reach the server and says why.
TEST_F(CliTest, HttpsWithTheServersCertificateTrusted) {
  const std::string cert = (dir_.path() / "cert.pem").string();
  const std::string key = (dir_.path() / "key.pem").string();
  const Outcome made = shell("openssl req -x509 -newkey rsa:2048 -nodes -keyout " + key + " -out " +
                             cert + " -days 1 -subj /CN=localhost " +
                             "-addext subjectAltName=DNS:localhost,IP:127.0.0.1 2>&1");
  if (made.status != 0) GTEST_SKIP() << "openssl cannot make a certificate: " << made.out;
  (void)server_->stop();
  server_ = std::make_unique<ServerProcess>(
      dir_.path() / "db", std::vector<std::string>{"--tls-cert", cert, "--tls-key", key});
  ASSERT_EQ(server_->start(), "");
  const std::string port = std::to_string(server_->http_port());
  const Outcome trusted =
      delayq_at("https://127.0.0.1:" + port, "--ca-file " + cert + " --json stats");
  EXPECT_EQ(trusted.status, 0) << trusted.out;
  EXPECT_TRUE(json_of(trusted).contains("version")) << trusted.out;
  if (resolves("localhost")) {
    const Outcome by_name =
        delayq_at("https://localhost:" + port, "put hello", "", "DELAYQ_CA_FILE=" + cert);
    EXPECT_EQ(by_name.status, 0) << by_name.out;
  } else {
    std::cout << "this machine's resolver does not know localhost: the check by host name is "
                 "left out\n";
  }
  const Outcome untrusted = delayq_at("https://127.0.0.1:" + port, "stats");
  EXPECT_EQ(untrusted.status, 3) << untrusted.out;
  EXPECT_NE(untrusted.out.find("certificate"), std::string::npos) << untrusted.out;
  const Outcome plain = delayq_at("http://127.0.0.1:" + port, "stats");
  EXPECT_NE(plain.status, 0) << plain.out;
}

// Both programs say their version, and it is the same one.
TEST_F(CliTest, VersionsArePrinted) {
  const Outcome cli = delayq("--version");
  EXPECT_EQ(cli.status, 0);
  ASSERT_TRUE(cli.out.starts_with("delayq ")) << cli.out;
  const std::string version = cli.out.substr(std::string("delayq ").size());
  EXPECT_FALSE(version.empty() || version == "\n");
  for (const char* flag : {"--version", "-v"}) {
    FILE* pipe = ::popen((std::string(DELAYQD_PATH) + " " + flag + " 2>&1").c_str(), "r");
    ASSERT_NE(pipe, nullptr);
    std::string out;
    char buffer[256];
    std::size_t n = 0;
    while ((n = std::fread(buffer, 1, sizeof buffer, pipe)) > 0) out.append(buffer, n);
    const int status = ::pclose(pipe);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << flag;
    // The same version, then the RocksDB build linked in.
    ASSERT_TRUE(version.ends_with("\n"));
    const std::string prefix = "delayqd " + version.substr(0, version.size() - 1) + " (RocksDB ";
    EXPECT_TRUE(out.starts_with(prefix)) << flag << ": " << out;
    EXPECT_TRUE(out.ends_with(", production build)\n") || out.ends_with(", Debian's build)\n"))
        << flag << ": " << out;
  }
}

}  // namespace
}  // namespace delayq::testing
