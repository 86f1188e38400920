#include "server_process.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <thread>

namespace delayq::testing {
namespace {

namespace fs = std::filesystem;

// Milliseconds left until `deadline`, for poll(): 0 once it has passed.
int poll_millis(Clock::time_point deadline) {
  const auto left = std::chrono::duration_cast<Millis>(deadline - Clock::now()).count();
  return static_cast<int>(std::clamp<std::int64_t>(left, 0, 1'000'000));
}

std::string describe_status(int status) {
  if (WIFEXITED(status)) return "exited " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) return "killed by signal " + std::to_string(WTERMSIG(status));
  return "ended with wait status " + std::to_string(status);
}

// The number after the last ':' of "delayqd listening on ADDR:PORT".
std::optional<std::uint16_t> parse_port(std::string_view line) {
  constexpr std::string_view kPrefix = "delayqd listening on ";
  if (line.substr(0, kPrefix.size()) != kPrefix) return std::nullopt;
  const std::size_t colon = line.rfind(':');
  if (colon == std::string_view::npos) return std::nullopt;
  const std::string_view digits = line.substr(colon + 1);
  std::uint16_t port = 0;
  const auto [end, error] = std::from_chars(digits.data(), digits.data() + digits.size(), port);
  if (error != std::errc{} || end != digits.data() + digits.size() || port == 0) {
    return std::nullopt;
  }
  return port;
}

// The body size announced by a reply line ("RESERVED <id> <bytes>\r\n", "FOUND <id> <bytes>\r\n",
// "OK <bytes>\r\n"), or nullopt for a line that announces none.
std::optional<std::size_t> announced_body(std::string_view line) {
  line.remove_suffix(2);  // "\r\n"
  std::vector<std::string_view> words;
  while (!line.empty()) {
    const std::size_t space = line.find(' ');
    words.push_back(line.substr(0, space));
    if (space == std::string_view::npos) break;
    line.remove_prefix(space + 1);
  }
  std::string_view size;
  if (words.size() == 3 && (words[0] == "RESERVED" || words[0] == "FOUND")) size = words[2];
  if (words.size() == 2 && words[0] == "OK") size = words[1];
  if (size.empty()) return std::nullopt;
  std::size_t bytes = 0;
  const auto [end, error] = std::from_chars(size.data(), size.data() + size.size(), bytes);
  // A size no test sends is a garbled reply: hand back the line as it is.
  if (error != std::errc{} || end != size.data() + size.size() || bytes > (std::size_t{1} << 26)) {
    return std::nullopt;
  }
  return bytes;
}

}  // namespace

bool resolves(const std::string& host) {
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (::getaddrinfo(host.c_str(), nullptr, &hints, &found) != 0) return false;
  ::freeaddrinfo(found);
  return true;
}

std::int64_t millis_between(Clock::time_point from, Clock::time_point to) {
  return std::chrono::duration_cast<Millis>(to - from).count();
}

// --- TempDir

TempDir::TempDir() {
  std::string pattern = (fs::temp_directory_path() / "delayq-protocol-XXXXXX").string();
  if (::mkdtemp(pattern.data()) == nullptr) {
    std::perror("mkdtemp");
    std::abort();
  }
  path_ = pattern;
}

TempDir::~TempDir() {
  std::error_code ignored;
  fs::remove_all(path_, ignored);
}

// --- ServerProcess

ServerProcess::ServerProcess(fs::path data_dir, std::vector<std::string> extra_args)
    : data_dir_(std::move(data_dir)), extra_args_(std::move(extra_args)) {}

ServerProcess::~ServerProcess() {
  if (running()) kill9();
  close_stdout();
}

bool ServerProcess::redis_mode() {
  return std::getenv("DELAYQ_TEST_REDIS_SEEDS_FILE") != nullptr;
}

std::string ServerProcess::version() {
  std::string out;
  if (FILE* pipe = ::popen(DELAYQD_PATH " --version", "r")) {
    char buffer[256];
    while (std::fgets(buffer, sizeof buffer, pipe) != nullptr) out += buffer;
    ::pclose(pipe);
  }
  return out;
}

namespace {

// The seeds scripts/redis-cluster.sh wrote, or "" outside Redis mode.
std::string redis_seeds() {
  const char* file = std::getenv("DELAYQ_TEST_REDIS_SEEDS_FILE");
  if (file == nullptr) return {};
  std::ifstream in(file);
  std::string seeds;
  std::getline(in, seeds);
  return seeds;
}

// A key prefix of the data directory's name: letters, digits and '-', at most 64.
std::string redis_prefix(const fs::path& dir) {
  std::string prefix;
  for (const char c : dir.string()) {
    prefix.push_back(std::isalnum(static_cast<unsigned char>(c)) != 0 ? c : '-');
  }
  return prefix.size() > 64 ? prefix.substr(prefix.size() - 64) : prefix;
}

}  // namespace

std::uint16_t ServerProcess::port() const noexcept {
  if (peer_ && peer_->running() && (turn_++ % 2) == 1) return peer_->port_;
  return port_;
}

std::uint16_t ServerProcess::http_port() const noexcept {
  if (peer_ && peer_->running() && peer_->http_port_ != 0 && (http_turn_++ % 2) == 1) {
    return peer_->http_port_;
  }
  return http_port_;
}

std::string ServerProcess::start(Millis timeout) {
  if (running()) return "already running";
  std::vector<std::string> args = {DELAYQD_PATH, "-p", "0"};
  const std::string seeds = redis_seeds();
  if (seeds.empty()) {
    args.insert(args.end(), {"-b", data_dir_.string()});
  } else {
    args.insert(args.end(), {"--redis", seeds, "--redis-prefix", redis_prefix(data_dir_)});
  }
  // HTTP on a free port too, unless the test chose (--http ...) or wants delayqd's default.
  const auto given = [this](std::string_view arg) {
    return std::find(extra_args_.begin(), extra_args_.end(), arg) != extra_args_.end();
  };
  if (!given("--http") && !default_http_) args.insert(args.end(), {"--http", "127.0.0.1:0"});
  const bool http_off = default_http_ || (given("--http") && given("off"));
  args.insert(args.end(), extra_args_.begin(), extra_args_.end());
  std::vector<char*> argv;
  for (std::string& arg : args) argv.push_back(arg.data());
  argv.push_back(nullptr);

  int fds[2] = {-1, -1};
  if (::pipe2(fds, O_CLOEXEC) != 0) return std::string("pipe2: ") + std::strerror(errno);
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0) {
    ::close(fds[0]);
    ::close(fds[1]);
    return std::string("fork: ") + std::strerror(errno);
  }
  if (pid == 0) {
    // The child: async-signal-safe calls only until exec.
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(126);  // the test died before prctl took effect
    if (nice_ > 0) ::setpriority(PRIO_PROCESS, 0, nice_);
    if (open_files_ > 0) {
      const rlimit files{static_cast<rlim_t>(open_files_), static_cast<rlim_t>(open_files_)};
      ::setrlimit(RLIMIT_NOFILE, &files);
    }
    ::dup2(fds[1], STDOUT_FILENO);  // the copy is not close-on-exec
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  ::close(fds[1]);
  pid_ = pid;
  stdout_fd_ = fds[0];

  // Read the port line, and the HTTP port line after it unless HTTP is off.
  std::string text;
  const Clock::time_point deadline = Clock::now() + timeout;
  auto lines_read = [&text] { return std::count(text.begin(), text.end(), '\n'); };
  while (lines_read() < (http_off ? 1 : 2)) {
    pollfd p{stdout_fd_, POLLIN, 0};
    const int ready = ::poll(&p, 1, poll_millis(deadline));
    if (ready < 0 && errno == EINTR) continue;
    if (ready <= 0) {
      const std::string ended = kill9();
      return "no port line within " + std::to_string(timeout.count()) + " ms (got \"" + text +
             "\"; " + ended + ")";
    }
    char buffer[256];
    const ssize_t n = ::read(stdout_fd_, buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const std::string ended = wait(Millis{5000});
      return "delayqd closed stdout before its port line (got \"" + text + "\"; " + ended + ")";
    }
    text.append(buffer, static_cast<std::size_t>(n));
  }
  const std::string first = text.substr(0, text.find('\n'));
  const auto port = parse_port(first);
  if (!port) {
    const std::string ended = kill9();
    return "unexpected first line \"" + text + "\" (" + ended + ")";
  }
  port_ = *port;
  address_ = first.substr(first.rfind(' ') + 1);
  http_port_ = 0;
  http_address_.clear();
  if (!http_off) {
    const std::string second = text.substr(text.find('\n') + 1);
    const std::string prefix = "delayqd http listening on ";
    const std::string http_address =
        second.rfind(prefix, 0) == 0
            ? second.substr(prefix.size(), second.find('\n') - prefix.size())
            : std::string();
    const auto http = parse_port("delayqd listening on " + http_address);
    if (!http) {
      const std::string ended = kill9();
      return "unexpected second line \"" + second + "\" (" + ended + ")";
    }
    http_port_ = *http;
    http_address_ = http_address;
  }
  // Redis mode: a second node over the same jobs, unless the test fixed an address or a port.
  const bool fixed = given("--http") || given("-l") || given("--listen") || default_http_;
  if (!seeds.empty() && !is_peer_ && !fixed) {
    peer_ = std::make_unique<ServerProcess>(data_dir_, extra_args_);
    peer_->is_peer_ = true;
    peer_->nice_ = nice_;
    if (std::string error = peer_->start(timeout); !error.empty()) {
      kill9();
      return "the peer did not start: " + error;
    }
  }
  return "";
}

std::string ServerProcess::stop(Millis timeout) {
  // Both at once: a peer's stop must not delay the signal to this one.
  const bool peer_running = peer_ && peer_->running();
  if (peer_running) ::kill(peer_->pid_, SIGTERM);
  std::string ended = "not running";
  if (running()) {
    ::kill(pid_, SIGTERM);
    ended = wait(timeout);
  }
  if (peer_running) peer_->wait(timeout);
  return ended;
}

std::string ServerProcess::kill9() {
  if (peer_) peer_->kill9();
  if (!running()) return "not running";
  ::kill(pid_, SIGKILL);
  return wait(Millis{10000});
}

bool ServerProcess::signal(int number) {
  if (peer_ && peer_->running()) ::kill(peer_->pid_, number);
  return running() && ::kill(pid_, number) == 0;
}

std::string ServerProcess::wait(Millis timeout) {
  const Clock::time_point deadline = Clock::now() + timeout;
  std::string ended;
  for (;;) {
    int status = 0;
    const pid_t done = ::waitpid(pid_, &status, WNOHANG);
    if (done == pid_) {
      ended = describe_status(status);
      break;
    }
    if (done < 0 && errno != EINTR) {
      ended = std::string("waitpid: ") + std::strerror(errno);
      break;
    }
    if (Clock::now() >= deadline) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, &status, 0);
      ended = "did not stop within " + std::to_string(timeout.count()) + " ms";
      break;
    }
    std::this_thread::sleep_for(Millis{5});
  }
  pid_ = -1;
  port_ = 0;
  close_stdout();
  return ended;
}

void ServerProcess::close_stdout() {
  if (stdout_fd_ >= 0) ::close(stdout_fd_);
  stdout_fd_ = -1;
}

// --- Client

Client::Client(std::uint16_t port) : Client("127.0.0.1", port) {}

Client::Client(const std::string& ip, std::uint16_t port) {
  sockaddr_storage address{};
  socklen_t length = 0;
  if (auto* v4 = reinterpret_cast<sockaddr_in*>(&address);
      ::inet_pton(AF_INET, ip.c_str(), &v4->sin_addr) == 1) {
    v4->sin_family = AF_INET;
    v4->sin_port = htons(port);
    length = sizeof *v4;
  } else if (auto* v6 = reinterpret_cast<sockaddr_in6*>(&address);
             ::inet_pton(AF_INET6, ip.c_str(), &v6->sin6_addr) == 1) {
    v6->sin6_family = AF_INET6;
    v6->sin6_port = htons(port);
    length = sizeof *v6;
  } else {
    error_ = "not an IP address: '" + ip + "'";
    return;
  }
  fd_ = ::socket(address.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd_ < 0) {
    error_ = std::string("socket: ") + std::strerror(errno);
    return;
  }
  if (::connect(fd_, reinterpret_cast<const sockaddr*>(&address), length) != 0) {
    error_ = "connect to " + ip + " port " + std::to_string(port) + ": " + std::strerror(errno);
    close();
    return;
  }
  const int on = 1;
  ::setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &on, sizeof on);
}

Client::~Client() {
  close();
}

bool Client::send(std::string_view bytes) {
  if (fd_ < 0) return false;
  while (!bytes.empty()) {
    const ssize_t n = ::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      error_ = std::string("send: ") + std::strerror(errno);
      return false;
    }
    bytes.remove_prefix(static_cast<std::size_t>(n));
  }
  return true;
}

Client::Fill Client::fill(Clock::time_point deadline) {
  if (fd_ < 0) return Fill::kClosed;
  for (;;) {
    pollfd p{fd_, POLLIN, 0};
    const int ready = ::poll(&p, 1, poll_millis(deadline));
    if (ready < 0 && errno == EINTR) continue;
    if (ready == 0) return Fill::kTimeout;
    if (ready < 0) return Fill::kClosed;
    char buffer[65536];
    const ssize_t n = ::recv(fd_, buffer, sizeof buffer, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return Fill::kClosed;
    in_.append(buffer, static_cast<std::size_t>(n));
    return Fill::kData;
  }
}

std::optional<std::string> Client::read_line(Millis timeout) {
  const Clock::time_point deadline = Clock::now() + timeout;
  for (;;) {
    const std::size_t end = in_.find("\r\n");
    if (end != std::string::npos) {
      std::string line = in_.substr(0, end + 2);
      in_.erase(0, end + 2);
      return line;
    }
    if (fill(deadline) != Fill::kData) return std::nullopt;
  }
}

std::optional<std::string> Client::read_exact(std::size_t n, Millis timeout) {
  const Clock::time_point deadline = Clock::now() + timeout;
  while (in_.size() < n) {
    if (fill(deadline) != Fill::kData) return std::nullopt;
  }
  std::string bytes = in_.substr(0, n);
  in_.erase(0, n);
  return bytes;
}

std::string Client::reply(Millis timeout) {
  const Clock::time_point deadline = Clock::now() + timeout;
  auto line = read_line(timeout);
  if (!line) {
    return "<no reply line within " + std::to_string(timeout.count()) +
           " ms or connection closed; got \"" + in_ + "\">";
  }
  const auto body = announced_body(*line);
  if (!body) return *line;
  const auto left =
      std::max(Millis{0}, std::chrono::duration_cast<Millis>(deadline - Clock::now()));
  auto bytes = read_exact(*body + 2, left);
  if (!bytes) {
    return "<" + *line + " announced " + std::to_string(*body) + " bytes + CRLF; got \"" + in_ +
           "\">";
  }
  return *line + *bytes;
}

std::string Client::call(std::string_view command, Millis timeout) {
  if (!send(command)) return "<send failed: " + error_ + ">";
  return reply(timeout);
}

bool Client::closed_by_server(Millis timeout) {
  // Any byte before the end, or no end in time, is a failure.
  return in_.empty() && fill(Clock::now() + timeout) == Fill::kClosed;
}

bool Client::silent_for(Millis quiet) {
  if (!in_.empty()) return false;
  return fill(Clock::now() + quiet) == Fill::kTimeout;
}

void Client::shutdown_write() {
  if (fd_ >= 0) ::shutdown(fd_, SHUT_WR);
}

void Client::close() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

// --- wire helpers

std::string put_command(std::string_view body, std::uint32_t priority, std::uint32_t delay_seconds,
                        std::uint32_t ttr_seconds) {
  std::string command = "put " + std::to_string(priority) + " " + std::to_string(delay_seconds) +
                        " " + std::to_string(ttr_seconds) + " " + std::to_string(body.size()) +
                        "\r\n";
  command.append(body).append("\r\n");
  return command;
}

std::string job_reply(std::string_view word, std::uint64_t id, std::string_view body) {
  std::string reply(word);
  reply += " " + std::to_string(id) + " " + std::to_string(body.size()) + "\r\n";
  reply.append(body).append("\r\n");
  return reply;
}

std::optional<std::uint64_t> inserted_id(std::string_view reply) {
  constexpr std::string_view kWord = "INSERTED ";
  if (reply.substr(0, kWord.size()) != kWord || reply.size() < kWord.size() + 3 ||
      reply.substr(reply.size() - 2) != "\r\n") {
    return std::nullopt;
  }
  const std::string_view digits = reply.substr(kWord.size(), reply.size() - kWord.size() - 2);
  std::uint64_t id = 0;
  const auto [end, error] = std::from_chars(digits.data(), digits.data() + digits.size(), id);
  if (error != std::errc{} || end != digits.data() + digits.size()) return std::nullopt;
  return id;
}

std::string Yaml::operator[](std::string_view key) const {
  for (const auto& [name, value] : entries) {
    if (name == key) return value;
  }
  return "<no key " + std::string(key) + ">";
}

bool Yaml::has(std::string_view key) const {
  return std::any_of(entries.begin(), entries.end(),
                     [key](const auto& entry) { return entry.first == key; });
}

Yaml parse_yaml(std::string_view reply) {
  Yaml yaml;
  const std::size_t line_end = reply.find("\r\n");
  if (reply.substr(0, 3) != "OK " || line_end == std::string_view::npos) {
    yaml.error = "not an OK reply: " + std::string(reply);
    return yaml;
  }
  const auto size = announced_body(reply.substr(0, line_end + 2));
  std::string_view data = reply.substr(line_end + 2);
  if (!size || data.size() != *size + 2 || data.substr(data.size() - 2) != "\r\n") {
    yaml.error = "the OK line's size does not match the data: " + std::string(reply);
    return yaml;
  }
  data.remove_suffix(2);
  if (data.substr(0, 4) != "---\n") {
    yaml.error = "no \"---\" line: " + std::string(data);
    return yaml;
  }
  data.remove_prefix(4);
  while (!data.empty()) {
    const std::size_t end = data.find('\n');
    if (end == std::string_view::npos) {
      yaml.error = "last line without a newline: " + std::string(data);
      return yaml;
    }
    const std::string_view line = data.substr(0, end);
    data.remove_prefix(end + 1);
    const std::size_t colon = line.find(": ");
    if (line.substr(0, 2) == "- ") {
      yaml.items.emplace_back(line.substr(2));
    } else if (colon != std::string_view::npos && colon > 0) {
      yaml.entries.emplace_back(line.substr(0, colon), line.substr(colon + 2));
    } else {
      yaml.error = "neither \"key: value\" nor \"- item\": " + std::string(line);
      return yaml;
    }
  }
  if (!yaml.entries.empty() && !yaml.items.empty()) yaml.error = "both a dictionary and a list";
  return yaml;
}

}  // namespace delayq::testing
