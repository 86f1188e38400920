// disk_full_test.cc — the real delayqd with its data directory on a tmpfs of 8 MiB that the test
// mounts (root only; skipped elsewhere) and fills with puts of 60 KB. When a write fails for want
// of space, nothing more is acknowledged and the server stops, for a supervisor to restart it;
// with room again, a restart recovers every acknowledged job. It stops with status 1 when the
// failure reaches delayqd; Debian's RocksDB is built with assertions, and one of them can abort
// inside the failing write itself (signal 6) before delayqd hears of it: both are accepted here,
// since neither loses an acknowledged job (docs/failures.md).
#include <gtest/gtest.h>
#include <sys/mount.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <string>

#include "server_process.h"

namespace delayq::testing {
namespace {

// A tmpfs of `size` mounted on `dir` for the test's life.
class SmallDisk {
 public:
  SmallDisk(const std::filesystem::path& dir, const std::string& size) : dir_(dir) {
    std::filesystem::create_directories(dir_);
    mounted_ = ::mount("tmpfs", dir_.c_str(), "tmpfs", 0, ("size=" + size).c_str()) == 0;
    if (!mounted_) error_ = std::strerror(errno);
  }
  ~SmallDisk() {
    if (mounted_) ::umount2(dir_.c_str(), MNT_DETACH);
  }
  SmallDisk(const SmallDisk&) = delete;
  SmallDisk& operator=(const SmallDisk&) = delete;

  [[nodiscard]] bool mounted() const { return mounted_; }
  [[nodiscard]] const std::string& error() const { return error_; }
  bool grow(const std::string& size) {
    return ::mount("tmpfs", dir_.c_str(), "tmpfs", MS_REMOUNT, ("size=" + size).c_str()) == 0;
  }

 private:
  std::filesystem::path dir_;
  bool mounted_ = false;
  std::string error_;
};

TEST(DiskFullTest, AFullDiskStopsTheServerAndLosesNothingAcknowledged) {
  if (ServerProcess::redis_mode()) GTEST_SKIP() << "no data directory in Redis mode";
  TempDir dir;
  SmallDisk disk(dir.path() / "disk", "8m");
  if (!disk.mounted()) GTEST_SKIP() << "cannot mount a tmpfs here: " << disk.error();
  ServerProcess server(dir.path() / "disk" / "db");
  ASSERT_EQ(server.start(), "");
  Client client(server.port());
  ASSERT_TRUE(client.connected()) << client.error();

  const std::string body(60'000, 'x');
  std::uint64_t acknowledged = 0;
  for (int i = 0; i < 1000; ++i) {  // 60 MB: far more than the disk holds
    const std::string reply = client.call(put_command(body, 0, 3600));
    if (!inserted_id(reply)) {
      // The connection ends without an answer to the put whose write failed.
      EXPECT_TRUE(reply.empty() || reply.front() == '<') << "reply: " << reply;
      break;
    }
    ++acknowledged;
  }
  ASSERT_GT(acknowledged, 10U);
  ASSERT_LT(acknowledged, 1000U) << "the disk never filled";
  const std::string ended = server.stop();
  EXPECT_TRUE(ended == "exited 1" || ended == "killed by signal 6") << ended;

  ASSERT_TRUE(disk.grow("128m"));
  ASSERT_EQ(server.start(), "");
  Client after(server.port());
  const Yaml stats = parse_yaml(after.call("stats\r\n"));
  EXPECT_EQ(stats["current-jobs-delayed"], std::to_string(acknowledged));
  EXPECT_EQ(server.stop(), "exited 0");
}

}  // namespace
}  // namespace delayq::testing
