// lossy_proxy.h — a TCP proxy for tests of lost answers: it listens on 127.0.0.1 and passes
// each connection's bytes both ways to a server on 127.0.0.1. Armed with markers, it breaks the
// next connection whose requests carry them once the server has answered after them, that answer
// not passed on: the request ran, and its client never hears (as when a connection breaks while
// the answer is on its way). Or it breaks the connection of the next answer that carries a
// marker. One thread; it stops at destruction.
#pragma once

#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace delayq::testing {

class LossyProxy {
 public:
  explicit LossyProxy(std::uint16_t target) : target_(target) {
    listener_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in address = loopback(0);
    if (listener_ < 0 || ::bind(listener_, as_sockaddr(&address), sizeof address) != 0 ||
        ::listen(listener_, 64) != 0) {
      throw std::runtime_error("lossy proxy: cannot listen");
    }
    socklen_t length = sizeof address;
    ::getsockname(listener_, as_sockaddr(&address), &length);
    port_ = ntohs(address.sin_port);
    if (::pipe(wake_) != 0) throw std::runtime_error("lossy proxy: no pipe");
    thread_ = std::thread([this] { loop(); });
  }
  ~LossyProxy() {
    stop_ = true;
    const char byte = 0;
    (void)!::write(wake_[1], &byte, 1);
    thread_.join();
    for (const auto& link : links_) {
      ::close(link.client);
      ::close(link.server);
    }
    ::close(listener_);
    ::close(wake_[0]);
    ::close(wake_[1]);
  }
  LossyProxy(const LossyProxy&) = delete;
  LossyProxy& operator=(const LossyProxy&) = delete;

  [[nodiscard]] std::uint16_t port() const { return port_; }
  [[nodiscard]] std::string address() const { return "127.0.0.1:" + std::to_string(port_); }
  // The next connection whose request bytes from now on carry every one of `markers` is doomed
  // (once).
  void lose_answer_to(std::vector<std::string> markers) {
    const std::lock_guard lock(mutex_);
    markers_ = std::move(markers);
    ++arming_;
  }
  // The next answer that carries `marker` is not passed on, and its connection is broken (once).
  void lose_answer_with(std::string marker) {
    const std::lock_guard lock(mutex_);
    answer_marker_ = std::move(marker);
  }
  // Connections broken so, since the proxy was made.
  [[nodiscard]] int answers_lost() const { return lost_; }

 private:
  struct Link {
    int client = -1;
    int server = -1;
    std::string sent;  // the bytes sent to the server since the proxy was armed
    std::uint64_t armed = 0;
    bool doomed = false;  // carried the markers: broken when the server next answers
  };

  static sockaddr_in loopback(std::uint16_t port) {
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    address.sin_port = htons(port);
    return address;
  }
  static sockaddr* as_sockaddr(sockaddr_in* address) {
    return reinterpret_cast<sockaddr*>(address);  // NOLINT: the sockets API
  }
  static bool send_all(int fd, const char* data, std::size_t size) {
    while (size > 0) {
      const ssize_t sent = ::send(fd, data, size, MSG_NOSIGNAL);
      if (sent <= 0) return false;
      data += sent;
      size -= static_cast<std::size_t>(sent);
    }
    return true;
  }

  void loop() {
    std::vector<char> buffer(1 << 16);
    while (!stop_) {
      std::vector<pollfd> fds = {{wake_[0], POLLIN, 0}, {listener_, POLLIN, 0}};
      for (const auto& link : links_) {
        fds.push_back({link.client, POLLIN, 0});
        fds.push_back({link.server, POLLIN, 0});
      }
      if (::poll(fds.data(), fds.size(), 1000) <= 0) continue;
      const std::size_t polled = links_.size();
      if ((fds[1].revents & POLLIN) != 0) accept_one();
      std::vector<bool> broken(links_.size(), false);
      for (std::size_t i = 0; i < polled; ++i) {
        Link& link = links_[i];
        for (const bool from_client : {true, false}) {
          const short events = fds[2 + 2 * i + (from_client ? 0 : 1)].revents;
          if (broken[i] || (events & (POLLIN | POLLHUP | POLLERR)) == 0) continue;
          const ssize_t got =
              ::recv(from_client ? link.client : link.server, buffer.data(), buffer.size(), 0);
          if (got <= 0) {
            broken[i] = true;
            continue;
          }
          const auto size = static_cast<std::size_t>(got);
          const std::string_view bytes(buffer.data(), size);
          if (!from_client && (link.doomed || carries_marker(bytes))) {
            ++lost_;
            broken[i] = true;
            continue;
          }
          if (from_client) note(link, bytes);
          if (!send_all(from_client ? link.server : link.client, buffer.data(), size)) {
            broken[i] = true;
          }
        }
      }
      for (std::size_t i = links_.size(); i-- > 0;) {
        if (!broken[i]) continue;
        ::close(links_[i].client);
        ::close(links_[i].server);
        links_.erase(links_.begin() + static_cast<std::ptrdiff_t>(i));
      }
    }
  }

  void accept_one() {
    const int client = ::accept(listener_, nullptr, nullptr);
    if (client < 0) return;
    const int server = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in address = loopback(target_);
    if (server < 0 || ::connect(server, as_sockaddr(&address), sizeof address) != 0) {
      ::close(client);
      if (server >= 0) ::close(server);
      return;
    }
    links_.push_back({client, server, "", 0, false});
  }

  bool carries_marker(std::string_view answer) {
    const std::lock_guard lock(mutex_);
    if (answer_marker_.empty() || answer.find(answer_marker_) == std::string_view::npos) {
      return false;
    }
    answer_marker_.clear();
    return true;
  }

  void note(Link& link, std::string_view sent) {
    const std::lock_guard lock(mutex_);
    if (markers_.empty()) return;
    if (link.armed != arming_) link.sent.clear();
    link.armed = arming_;
    link.sent.append(sent);
    if (std::all_of(markers_.begin(), markers_.end(), [&](const std::string& marker) {
          return link.sent.find(marker) != std::string::npos;
        })) {
      link.doomed = true;
      markers_.clear();
    }
  }

  std::uint16_t target_;
  std::uint16_t port_ = 0;
  int listener_ = -1;
  int wake_[2] = {-1, -1};
  std::atomic<bool> stop_{false};
  std::atomic<int> lost_{0};
  std::mutex mutex_;
  std::vector<std::string> markers_;
  std::string answer_marker_;
  std::uint64_t arming_ = 0;
  std::vector<Link> links_;  // the thread's own
  std::thread thread_;
};

}  // namespace delayq::testing
