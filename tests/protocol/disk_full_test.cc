// disk_full_test.cc — the real delayqd with its data directory on a small tmpfs that the test
// mounts (root only; skipped elsewhere) and fills with puts of 60 KB.
// With its reserve of free space (--min-free-disk), the server refuses puts before the disk is
// full (OUT_OF_MEMORY, HTTP 507), says it is not ready, goes on serving workers, and accepts puts
// again once the file system has grown; nothing acknowledged is lost across a kill -9.
// Without a reserve, a write fails for want of space: nothing more is acknowledged and the server
// stops, for a supervisor to restart it; with room again, a restart recovers every acknowledged
// job. It stops with status 1 when the failure reaches delayqd, always with RocksDB's production
// build; Debian's is built with assertions, and one of them can abort inside the failing write
// itself (signal 6) before delayqd hears of it: accepted with that build, since it loses no
// acknowledged job either (docs/failures.md).
#include <gtest/gtest.h>
#include <sys/mount.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <string>
#include <thread>

#include "front/http/client.h"
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
  ServerProcess server(dir.path() / "disk" / "db", {"--min-free-disk", "0"});
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
  // Debian's RocksDB, built with assertions, can abort inside the failing write; the production
  // build has no assertion to trip (docs/operations.md).
  if (ServerProcess::version().find("production build") != std::string::npos) {
    EXPECT_EQ(ended, "exited 1");
  } else {
    EXPECT_TRUE(ended == "exited 1" || ended == "killed by signal 6") << ended;
  }

  ASSERT_TRUE(disk.grow("128m"));
  ASSERT_EQ(server.start(), "");
  Client after(server.port());
  const Yaml stats = parse_yaml(after.call("stats\r\n"));
  EXPECT_EQ(stats["current-jobs-delayed"], std::to_string(acknowledged));
  EXPECT_EQ(server.stop(), "exited 0");
}

TEST(DiskFullTest, ADiskShortOfItsReserveRefusesPutsUntilThereIsRoomAndLosesNothing) {
  if (ServerProcess::redis_mode()) GTEST_SKIP() << "no data directory in Redis mode";
  TempDir dir;
  SmallDisk disk(dir.path() / "disk", "64m");
  if (!disk.mounted()) GTEST_SKIP() << "cannot mount a tmpfs here: " << disk.error();
  ServerProcess server(dir.path() / "disk" / "db", {"--min-free-disk", "24MiB"});
  ASSERT_EQ(server.start(), "");
  Client client(server.port());
  ASSERT_TRUE(client.connected()) << client.error();
  front::http::Client http("127.0.0.1", server.http_port());
  const auto get = [&http](std::string_view method, std::string_view target,
                           std::string_view body = {}) {
    auto response = http.request(method, target, body, std::chrono::seconds(10));
    EXPECT_TRUE(response.is_ok()) << target << ": " << response.status().to_string();
    return response.is_ok() ? response.value() : front::http::ClientResponse{};
  };
  ASSERT_EQ(get("GET", "/readyz").status, 200U);

  ASSERT_TRUE(inserted_id(client.call(put_command("ready", 0, 0))));  // for a worker, later
  const std::string body(60'000, 'x');
  std::uint64_t delayed = 0;
  std::string refused;
  for (int i = 0; i < 2000; ++i) {  // 120 MB: more than the disk holds
    const std::string reply = client.call(put_command(body, 0, 3600));
    if (!inserted_id(reply)) {
      refused = reply;
      break;
    }
    ++delayed;
  }
  ASSERT_EQ(refused, "OUT_OF_MEMORY\r\n") << "after " << delayed << " puts";
  ASSERT_GT(delayed, 10U);

  // Every later put is refused, over both protocols, and readiness says why.
  EXPECT_EQ(client.call(put_command("small", 0, 0)), "OUT_OF_MEMORY\r\n");
  const auto posted = get("POST", "/v1/tubes/default/jobs", R"({"body":"small"})");
  EXPECT_EQ(posted.status, 507U) << posted.body;
  EXPECT_NE(posted.body.find("\"no_space\""), std::string::npos) << posted.body;
  const auto ready = get("GET", "/readyz");
  EXPECT_EQ(ready.status, 503U);
  EXPECT_NE(ready.body.find("\"no_space\""), std::string::npos) << ready.body;
  EXPECT_NE(get("GET", "/metrics").body.find("\ndelayq_store_full 1\n"), std::string::npos);
  // Workers go on: reserve, delete; reads too.
  const std::string reserved = client.call("reserve-with-timeout 0\r\n");
  ASSERT_EQ(reserved.rfind("RESERVED ", 0), 0U) << reserved;
  const std::string id = reserved.substr(9, reserved.find(' ', 9) - 9);
  EXPECT_EQ(client.call("delete " + id + "\r\n"), "DELETED\r\n");
  EXPECT_EQ(parse_yaml(client.call("stats\r\n"))["current-jobs-delayed"], std::to_string(delayed));

  // Room again: within a few seconds, puts are accepted and the server is ready.
  ASSERT_TRUE(disk.grow("256m"));
  bool back = false;
  for (int i = 0; i < 100 && !back; ++i) {
    back = get("GET", "/readyz").status == 200;
    if (!back) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ASSERT_TRUE(back) << "still not ready 10 s after the disk grew";
  EXPECT_NE(get("GET", "/metrics").body.find("\ndelayq_store_full 0\n"), std::string::npos);
  ASSERT_TRUE(inserted_id(client.call(put_command(body, 0, 3600))));
  ++delayed;

  EXPECT_EQ(server.kill9(), "killed by signal 9");
  ASSERT_EQ(server.start(), "");
  Client after(server.port());
  const Yaml stats = parse_yaml(after.call("stats\r\n"));
  EXPECT_EQ(stats["current-jobs-delayed"], std::to_string(delayed));
  EXPECT_EQ(stats["current-jobs-ready"], "0");
  EXPECT_EQ(server.stop(), "exited 0");
}

}  // namespace
}  // namespace delayq::testing
