// notify_systemd against a real datagram socket standing in for systemd's: the state arrives
// as sent, to a path and to an abstract name; without $NOTIFY_SOCKET nothing is sent.
#include "notify.h"

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>

namespace delayq::apps {
namespace {

// A bound datagram socket; name starting with '@' is abstract.
class Receiver {
 public:
  explicit Receiver(const std::string& name) {
    fd_ = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    sockaddr_un address{};
    address.sun_family = AF_UNIX;
    std::memcpy(address.sun_path, name.data(), name.size());
    if (name.front() == '@') address.sun_path[0] = '\0';
    const auto length = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + name.size());
    bound_ = ::bind(fd_, reinterpret_cast<const sockaddr*>(&address), length) == 0;
  }
  ~Receiver() { ::close(fd_); }
  Receiver(const Receiver&) = delete;
  Receiver& operator=(const Receiver&) = delete;

  [[nodiscard]] bool bound() const { return bound_; }
  // The next datagram, or "" if none is waiting.
  std::string take() {
    char buffer[512];
    const ssize_t n = ::recv(fd_, buffer, sizeof(buffer), MSG_DONTWAIT);
    return n > 0 ? std::string(buffer, static_cast<std::size_t>(n)) : std::string();
  }

 private:
  int fd_ = -1;
  bool bound_ = false;
};

class NotifyTest : public ::testing::Test {
 protected:
  void TearDown() override { ::unsetenv("NOTIFY_SOCKET"); }
};

TEST_F(NotifyTest, TheStateReachesASocketAtAPath) {
  const std::string path =
      (std::filesystem::temp_directory_path() / ("delayq-notify-" + std::to_string(::getpid())))
          .string();
  std::filesystem::remove(path);
  Receiver systemd(path);
  ASSERT_TRUE(systemd.bound());
  ::setenv("NOTIFY_SOCKET", path.c_str(), 1);
  EXPECT_TRUE(notify_systemd("READY=1\nSTATUS=serving"));
  EXPECT_EQ(systemd.take(), "READY=1\nSTATUS=serving");
  std::filesystem::remove(path);
}

TEST_F(NotifyTest, TheStateReachesAnAbstractSocket) {
  const std::string name = "@delayq-notify-" + std::to_string(::getpid());
  Receiver systemd(name);
  ASSERT_TRUE(systemd.bound());
  ::setenv("NOTIFY_SOCKET", name.c_str(), 1);
  EXPECT_TRUE(notify_systemd("STOPPING=1"));
  EXPECT_EQ(systemd.take(), "STOPPING=1");
}

TEST_F(NotifyTest, NothingIsSentWithoutTheVariableOrWithABadOne) {
  ::unsetenv("NOTIFY_SOCKET");
  EXPECT_FALSE(notify_systemd("READY=1"));
  ::setenv("NOTIFY_SOCKET", "relative/path", 1);
  EXPECT_FALSE(notify_systemd("READY=1"));
  ::setenv("NOTIFY_SOCKET", "/nonexistent/delayq/notify", 1);
  EXPECT_FALSE(notify_systemd("READY=1"));
}

}  // namespace
}  // namespace delayq::apps
