// client_order_reminder.cc — the C++ client (include/delayq/client.h) against a running delayqd:
// an order puts "remind the customer" due in two seconds, keyed by the order so that a retried
// put never makes a second reminder, and a worker takes it the moment it is due and ends.
//   delayqd &                       # or: make run
//   ./client_order_reminder [HOST [PORT]]
#include <delayq/client.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <chrono>
#include <cstdio>
#include <exception>
#include <string>

namespace asio = boost::asio;
using namespace std::chrono_literals;
using delayq::client::Client;
using delayq::client::Due;
using delayq::client::Job;
using delayq::client::Task;
using delayq::client::Worker;

int main(int argc, char** argv) {
  const std::string host = argc > 1 ? argv[1] : "127.0.0.1";
  const auto port = static_cast<std::uint16_t>(argc > 2 ? std::stoi(argv[2]) : 11300);
  asio::io_context io;
  int status = 1;
  Worker worker(io.get_executor(), {.host = host, .port = port, .tubes = {"reminders"}},
                [&](const Job& job) -> Task<void> {
                  std::printf("due now: %s (job %llu)\n", job.body.c_str(),
                              static_cast<unsigned long long>(job.id));
                  status = 0;
                  worker.stop();
                  co_return;
                });
  asio::co_spawn(
      io,
      [&]() -> Task<void> {
        Client client(io.get_executor());
        co_await client.connect(host, port);
        co_await client.use("reminders");
        for (int attempt = 0; attempt < 2; ++attempt) {  // a retry finds the first put
          const auto put = co_await client.put("remind the customer of order 1001",
                                               {.due = Due::after(2s), .key = "order:1001"});
          std::printf("put %s job %llu\n", put.inserted ? "new" : "existing",
                      static_cast<unsigned long long>(put.id));
        }
        co_await worker.run();
      },
      [](std::exception_ptr error) {
        if (!error) return;
        try {
          std::rethrow_exception(error);
        } catch (const std::exception& e) {
          std::fprintf(stderr, "client_order_reminder: %s\n", e.what());
        }
      });
  io.run();
  return status;
}
