// sync_error_test.cc — the real delayqd with fsync failing under it (EIO, from a library
// preloaded into it: tests/support/failsync.cc), as a failing disk makes it fail. A failed fsync
// is never retried and acknowledged ("fsyncgate": the page cache may have dropped what it was to
// write): the put whose batch it was gets no reply, the server stops with a non-zero status, and
// a restart on a healthy disk has every job acknowledged before (docs/failures.md).
// Device-mapper's dm-flakey cannot run here (the kernel has no device-mapper).
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <string>

#include "server_process.h"

namespace delayq::testing {
namespace {

// The environment the server starts with: the library preloaded, armed by `file`.
class FailingSync {
 public:
  explicit FailingSync(const std::filesystem::path& file) : file_(file) {
    ::setenv("LD_PRELOAD", DELAYQ_FAILSYNC_PATH, 1);
    ::setenv("DELAYQ_FAIL_SYNC", file_.c_str(), 1);
    // Under AddressSanitizer the library comes before its runtime: let it.
    const char* asan = std::getenv("ASAN_OPTIONS");
    ::setenv("ASAN_OPTIONS",
             (std::string(asan != nullptr ? asan : "") + ":verify_asan_link_order=0").c_str(), 1);
  }
  ~FailingSync() {
    ::unsetenv("LD_PRELOAD");
    ::unsetenv("DELAYQ_FAIL_SYNC");
  }
  FailingSync(const FailingSync&) = delete;
  FailingSync& operator=(const FailingSync&) = delete;

  void arm() { std::ofstream(file_) << "fail\n"; }
  void disarm() { std::filesystem::remove(file_); }

 private:
  std::filesystem::path file_;
};

TEST(SyncErrorTest, AFailedFsyncIsNeverAcknowledgedAndStopsTheServer) {
  if (ServerProcess::redis_mode()) GTEST_SKIP() << "no data directory in Redis mode";
  TempDir dir;
  FailingSync failing(dir.path() / "arm");
  ServerProcess server(dir.path() / "db");
  ASSERT_EQ(server.start(), "");
  Client client(server.port());
  ASSERT_TRUE(client.connected()) << client.error();
  constexpr int kAcknowledged = 50;
  for (int i = 0; i < kAcknowledged; ++i) {
    ASSERT_TRUE(inserted_id(client.call(put_command("before " + std::to_string(i), 0, 3600))));
  }

  failing.arm();
  const std::string reply = client.call(put_command("during", 0, 3600));
  EXPECT_FALSE(inserted_id(reply)) << "a put was acknowledged after its fsync failed";
  EXPECT_TRUE(reply.empty() || reply.front() == '<') << "reply: " << reply;
  const std::string ended = server.stop();
  // Status 1 from delayqd; Debian's RocksDB is built with assertions, and one may abort first.
  EXPECT_TRUE(ended == "exited 1" || ended == "killed by signal 6") << ended;

  failing.disarm();
  ASSERT_EQ(server.start(), "");
  Client after(server.port());
  const int delayed = std::stoi(parse_yaml(after.call("stats\r\n"))["current-jobs-delayed"]);
  // Every acknowledged job; the one whose fsync failed may or may not have reached the disk.
  EXPECT_GE(delayed, kAcknowledged);
  EXPECT_LE(delayed, kAcknowledged + 1);
  EXPECT_EQ(server.stop(), "exited 0");
}

}  // namespace
}  // namespace delayq::testing
