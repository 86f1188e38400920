// reply_driver — a process for reply_test to kill: the local broker over the RocksDB store in
// DIR, with its writes held at a gate (tests/support/gated_store.h) once a first job is durable.
// Then, with the gate closed, a worker reserves that durable job, another waits for a job of a
// second tube, and a producer puts one there (so the put and the reserve it wakes share a
// batch). Each completion that runs appends a line to LOG at once:
//   durable <id> | reserved <id> | inserted <id>
// and when nothing more can run without the held write, "held". Then it waits to be killed.
// Usage: reply_driver DIR LOG
#include <fcntl.h>
#include <unistd.h>

#include <boost/asio/io_context.hpp>
#include <chrono>
#include <cstdio>
#include <string>
#include <thread>

#include "broker/local/local_broker.h"
#include "store/rocks_store.h"
#include "support/gated_store.h"

using namespace delayq;

namespace {

int log_fd = -1;

void note(const std::string& line) {
  const std::string text = line + "\n";
  if (::write(log_fd, text.data(), text.size()) != static_cast<ssize_t>(text.size())) std::abort();
}

void poll(boost::asio::io_context& io) {
  io.restart();
  while (io.poll() > 0) {
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: reply_driver DIR LOG\n");
    return 2;
  }
  log_fd = ::open(argv[2], O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (log_fd < 0) return 1;
  auto rocks = store::RocksStore::open(argv[1]);
  if (!rocks.is_ok()) {
    std::fprintf(stderr, "reply_driver: %s\n", rocks.status().to_string().c_str());
    return 1;
  }
  auto gated = std::make_unique<testing::GatedStore>(std::move(rocks).value());
  testing::GatedStore& gate = *gated;
  boost::asio::io_context io;
  auto opened =
      broker::local::LocalBroker::open(io, broker::local::NodeOptions{}, std::move(gated));
  if (!opened.is_ok()) return 1;
  auto broker = std::move(opened).value();
  auto producer = broker->open_session({});
  auto worker = broker->open_session({});
  auto waiter = broker->open_session({});

  const auto put = [&](std::string tube, std::string word) {
    broker::PutRequest request;
    request.tube = std::move(tube);
    request.body = "job";
    producer->put(request, [word](Result<broker::PutResult> result) {
      if (!result.is_ok()) std::abort();
      note(word + " " + std::to_string(result.value().job.id));
    });
  };
  const auto reserved = [](Result<broker::Job> job) {
    if (job.is_ok()) note("reserved " + std::to_string(job.value().view.id));
  };

  put("old", "durable");
  while (gate.writes() == 0) poll(io);
  for (int i = 0; i < 100; ++i) poll(io);  // the put's completion
  gate.close_gate();
  waiter->reserve(broker::ReserveRequest{{"new"}, std::nullopt}, reserved);
  put("new", "inserted");
  worker->reserve(broker::ReserveRequest{{"old"}, broker::Millis{0}}, reserved);
  poll(io);
  if (!gate.wait_held(std::chrono::seconds(30))) return 1;
  poll(io);
  note("held");
  for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));
}
