// listen_test.cc — where delayqd listens, and its config file: -l and --http take an IPv4 address,
// an IPv6 address (bare or in brackets) or a host name, the lines on stdout name the address bound,
// and an address that is none of these stops the server at start. The real delayqd over loopback.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdio>
#include <string>
#include <vector>

#include "server_process.h"

namespace delayq::testing {
namespace {

// The IP of an "ADDR:PORT" or "[ADDR]:PORT" that delayqd printed.
std::string ip_of(const std::string& address) {
  const std::string host = address.substr(0, address.rfind(':'));
  if (host.size() >= 2 && host.front() == '[') return host.substr(1, host.size() - 2);
  return host;
}

// Whether this machine can listen on ::1 at all (IPv6 may be off in a container).
bool ipv6_loopback_available() {
  const int fd = ::socket(AF_INET6, SOCK_STREAM, 0);
  if (fd < 0) return false;
  sockaddr_in6 address{};
  address.sin6_family = AF_INET6;
  address.sin6_addr = in6addr_loopback;
  const bool bound = ::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0;
  ::close(fd);
  return bound;
}

// Both front-ends answer on the address they printed.
void expect_served(const ServerProcess& server) {
  Client beanstalk(ip_of(server.address()), server.port());
  ASSERT_TRUE(beanstalk.connected()) << beanstalk.error();
  const auto id = inserted_id(beanstalk.call(put_command("hello")));
  ASSERT_TRUE(id.has_value());
  EXPECT_EQ(beanstalk.call("reserve-with-timeout 0\r\n"), job_reply("RESERVED", *id, "hello"));

  Client http(ip_of(server.http_address()), server.http_port());
  ASSERT_TRUE(http.connected()) << http.error();
  ASSERT_TRUE(http.send("GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"));
  EXPECT_EQ(http.read_line().value_or("<none>"), "HTTP/1.1 200 OK\r\n");
}

TEST(ListenTest, HostNameIsResolvedAndTheAddressBoundIsPrinted) {
  if (!resolves("localhost")) GTEST_SKIP() << "this machine's resolver does not know localhost";
  TempDir dir;
  ServerProcess server(dir.path() / "db", {"-l", "localhost", "--http", "localhost:0"});
  ASSERT_EQ(server.start(), "");
  // localhost is 127.0.0.1 or ::1, whichever the resolver gives first; never the name itself.
  for (const std::string& address : {server.address(), server.http_address()}) {
    EXPECT_TRUE(address.starts_with("127.0.0.1:") || address.starts_with("[::1]:")) << address;
  }
  expect_served(server);
  EXPECT_EQ(server.stop(), "exited 0");
}

TEST(ListenTest, Ipv6AddressBareOrInBrackets) {
  if (!ipv6_loopback_available()) GTEST_SKIP() << "no IPv6 loopback on this machine";
  TempDir dir;
  ServerProcess server(dir.path() / "db", {"-l", "::1", "--http", "[::1]:0"});
  ASSERT_EQ(server.start(), "");
  EXPECT_EQ(server.address(), "[::1]:" + std::to_string(server.port()));
  EXPECT_EQ(server.http_address(), "[::1]:" + std::to_string(server.http_port()));
  expect_served(server);
  EXPECT_EQ(server.stop(), "exited 0");
}

// An address that is none stops the server at start (exit 1, no lookup tried); a --http value
// that is not HOST:PORT is malformed (exit 2), a bare IPv6 address among them.
TEST(ListenTest, AnAddressThatIsNoneStopsTheServerAtStart) {
  TempDir dir;
  const struct {
    std::vector<std::string> args;
    const char* ended;
  } cases[] = {
      // Refused as usage errors, before the data directory is opened or made.
      {{"-l", ""}, "exited 2"},
      {{"-l", "[127.0.0.1"}, "exited 2"},
      {{"-l", "bad!name"}, "exited 2"},
      {{"-l", "0"}, "exited 2"},  // not taken for 0.0.0.0, as the resolver would
      {{"-l", "127.1"}, "exited 2"},
      {{"--http", "bad!name:80"}, "exited 2"},
      {{"--http", ":0"}, "exited 2"},
      {{"--http", "::1"}, "exited 2"},  // not [::]:1
      {{"--http", "2001:db8::1:80"}, "exited 2"},
      {{"--http", "localhost:65536"}, "exited 2"},
      // Counts and sizes out of range, a negative one among them (read as 2^64 - 1 once).
      {{"--max-connections", "-1"}, "exited 2"},
      {{"--max-connections", "0"}, "exited 2"},
      {{"--http-max-connections", "-1"}, "exited 2"},
      {{"--min-free-disk", "-1"}, "exited 2"},
      {{"--min-free-disk", "99999999999999999999"}, "exited 2"},
  };
  for (const auto& c : cases) {
    ServerProcess server(dir.path() / "db", c.args);
    const std::string started = server.start();
    EXPECT_NE(started.find(c.ended), std::string::npos)
        << c.args[0] << " '" << c.args[1] << "': " << started;
  }
  EXPECT_FALSE(std::filesystem::exists(dir.path() / "db"));
}

// --config reads flags from a TOML file (the package's /etc/delayq/delayqd.conf): its values
// hold unless the command line gives them too; a key that names no flag stops the server at
// start (exit 2) with the key in the message, rather than leaving a misspelt setting unseen.
TEST(ConfigFileTest, AConfigFileSetsFlagsAndAnUnknownKeyIsRefused) {
  TempDir dir;
  const auto write = [&dir](const std::string& name, const std::string& text) {
    const std::string path = (dir.path() / name).string();
    std::FILE* file = std::fopen(path.c_str(), "w");
    EXPECT_NE(file, nullptr);
    if (file != nullptr) {
      std::fputs(text.c_str(), file);
      std::fclose(file);
    }
    return path;
  };
  const std::string good = write("good.conf", "# settings\nmax-job-size = 5\nport = 1\n");
  ServerProcess server(dir.path() / "db", {"--config", good});  // the harness's -p 0 wins
  ASSERT_EQ(server.start(), "");
  Client client(server.port());
  ASSERT_TRUE(client.connected()) << client.error();
  EXPECT_EQ(client.call("put 0 0 60 6\r\nsix by\r\n"), "JOB_TOO_BIG\r\n");
  EXPECT_TRUE(inserted_id(client.call("put 0 0 60 5\r\nfive!\r\n")).has_value());
  EXPECT_EQ(server.stop(), "exited 0");

  const std::string typo = write("typo.conf", "max-jobsize = 5\n");
  ServerProcess refused(dir.path() / "db", {"--config", typo});
  EXPECT_NE(refused.start().find("exited 2"), std::string::npos);
}

}  // namespace
}  // namespace delayq::testing
