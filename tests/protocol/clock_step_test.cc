// clock_step_test.cc — the real delayqd under libfaketime (Debian's `faketime` package), its wall
// clock stepped while it runs through a timestamp file, its monotonic clock left alone
// (FAKETIME_DONT_FAKE_MONOTONIC). A step back of a minute delays no TTR; a step forward of an
// hour fires the due times it passes and only those, and lapses no reservation. Skipped where
// libfaketime is not installed.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

#include "server_process.h"

namespace delayq::testing {
namespace {

constexpr const char* kLibFaketime = "/usr/lib/x86_64-linux-gnu/faketime/libfaketimeMT.so.1";
// libfaketime reads the timestamp file again at most this often.
constexpr auto kCache = std::chrono::seconds(1);

// The environment the server starts with: libfaketime preloaded, its offset from the file.
class FakeWallClock {
 public:
  explicit FakeWallClock(const std::filesystem::path& file) : file_(file) {
    set("+0");
    ::setenv("LD_PRELOAD", kLibFaketime, 1);
    ::setenv("FAKETIME_TIMESTAMP_FILE", file_.c_str(), 1);
    ::setenv("FAKETIME_CACHE_DURATION", "1", 1);
    ::setenv("FAKETIME_DONT_FAKE_MONOTONIC", "1", 1);
    // Under AddressSanitizer libfaketime comes before its runtime: let it.
    const char* asan = std::getenv("ASAN_OPTIONS");
    ::setenv("ASAN_OPTIONS",
             (std::string(asan != nullptr ? asan : "") + ":verify_asan_link_order=0").c_str(), 1);
  }
  ~FakeWallClock() {
    for (const char* name : {"LD_PRELOAD", "FAKETIME_TIMESTAMP_FILE", "FAKETIME_CACHE_DURATION",
                             "FAKETIME_DONT_FAKE_MONOTONIC"}) {
      ::unsetenv(name);
    }
  }
  FakeWallClock(const FakeWallClock&) = delete;
  FakeWallClock& operator=(const FakeWallClock&) = delete;

  // The wall clock's offset from the real one, in libfaketime's form ("-60", "+3600").
  void set(const std::string& offset) {
    std::ofstream(file_) << offset << "\n";
    std::this_thread::sleep_for(kCache + std::chrono::milliseconds(300));  // until it is read
  }

 private:
  std::filesystem::path file_;
};

std::string state_of(Client& client, std::uint64_t id) {
  return parse_yaml(client.call("stats-job " + std::to_string(id) + "\r\n"))["state"];
}

// The job's state once it is `want`, or its state after `within`.
std::string state_within(Client& client, std::uint64_t id, const std::string& want,
                         std::chrono::milliseconds within) {
  const auto deadline = std::chrono::steady_clock::now() + within;
  std::string state = state_of(client, id);
  while (state != want && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    state = state_of(client, id);
  }
  return state;
}

TEST(ClockStepTest, AWallClockStepMovesDueTimesOnlyAndNoRelativeTimer) {
  if (!std::filesystem::exists(kLibFaketime)) GTEST_SKIP() << "libfaketime is not installed";
  if (ServerProcess::redis_mode()) GTEST_SKIP() << "Redis mode runs on Redis's clock";
  TempDir dir;
  FakeWallClock wall(dir.path() / "offset");
  ServerProcess server(dir.path() / "db");
  ASSERT_EQ(server.start(), "");
  Client worker(server.port());
  Client observer(server.port());
  ASSERT_TRUE(worker.connected() && observer.connected());

  // Back a minute, right after a reserve with a TTR of 3 s: the job is ready 3 s after the
  // reserve by the monotonic clock, not 63 s.
  const auto short_ttr = inserted_id(worker.call(put_command("ttr 3", 0, 0, 3)));
  ASSERT_TRUE(short_ttr.has_value());
  ASSERT_EQ(worker.call("reserve-with-timeout 0\r\n"), job_reply("RESERVED", *short_ttr, "ttr 3"));
  const auto reserved_at = std::chrono::steady_clock::now();
  wall.set("-60");
  std::this_thread::sleep_until(reserved_at + std::chrono::milliseconds(2700));
  EXPECT_EQ(state_of(observer, *short_ttr), "reserved") << "the TTR lapsed early";
  std::this_thread::sleep_until(reserved_at + std::chrono::milliseconds(4500));
  EXPECT_EQ(state_of(observer, *short_ttr), "ready") << "the step back held the TTR";
  ASSERT_EQ(worker.call("delete " + std::to_string(*short_ttr) + "\r\n"), "DELETED\r\n");

  // Forward an hour (from a minute back): a job due in 30 min fires, one due in 2 h does not,
  // and a reservation with a TTR of 30 s holds.
  const auto held = inserted_id(worker.call(put_command("ttr 30", 0, 0, 30)));
  ASSERT_TRUE(held.has_value());
  ASSERT_EQ(worker.call("reserve-with-timeout 0\r\n"), job_reply("RESERVED", *held, "ttr 30"));
  const auto in_half_hour = inserted_id(observer.call(put_command("30 min", 0, 1800)));
  const auto in_two_hours = inserted_id(observer.call(put_command("2 h", 0, 7200)));
  ASSERT_TRUE(in_half_hour.has_value() && in_two_hours.has_value());
  wall.set("+3600");
  // The server looks at the wall clock at least once a second.
  EXPECT_EQ(state_within(observer, *in_half_hour, "ready", std::chrono::milliseconds(2500)),
            "ready");
  EXPECT_EQ(state_of(observer, *in_two_hours), "delayed");
  EXPECT_EQ(state_of(observer, *held), "reserved") << "the step forward lapsed a TTR";
  EXPECT_EQ(server.stop(), "exited 0");
}

}  // namespace
}  // namespace delayq::testing
