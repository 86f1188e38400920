// deliverer.h — push delivery: every tube with a webhook gets a lane that reserves the tube's
// due jobs through the broker (a session of its own, so it works over any broker) and POSTs
// each to its URL. A 2xx deletes the job; 429 and 503 release it for their Retry-After; any
// other answer, a timeout or a failed connection releases it with backoff, and the last allowed
// attempt buries it, its outcome kept with the job. A lane reserves only when it may send at
// once (its concurrency and rate allow), so a job waits in its tube, ready and visible, not in
// the deliverer. Made by delayqd; runs on the broker's executor. Rules: docs/webhooks.md
// It reaches the receivers only through a Poster and time only through a Clock (sender.h,
// timing/clock.h), so its unit tests run it over a scripted poster and a clock they move by hand.
#pragma once

#include <boost/asio/io_context.hpp>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "broker/broker.h"
#include "metrics/registry.h"
#include "timing/clock.h"
#include "webhook/sender.h"

namespace delayq::front::webhook {

// Push delivery's library (src/webhook/: requests, the sender, URLs, backoff): the deliverer's
// vocabulary.
using namespace delayq::webhook;

struct DelivererOptions {
  SenderOptions sender;  // TLS CA file, response bound, idle connections: see sender.h
};

class Deliverer {
 public:
  // POSTs with a Sender made from `options`, on the system's clocks, and counts in `metrics`
  // (which must outlive the deliverer). kInvalidArgument if the sender cannot be made (an
  // unreadable CA file).
  static Result<std::unique_ptr<Deliverer>> make(boost::asio::io_context& io,
                                                 broker::Broker& broker, metrics::Registry& metrics,
                                                 DelivererOptions options);
  // POSTs with `poster` and keeps time on `clock`, both the caller's (a test's script and its
  // hand-moved clock); they must outlive the deliverer, as `metrics` must.
  Deliverer(boost::asio::io_context& io, broker::Broker& broker, metrics::Registry& metrics,
            Poster& poster, timing::Clock& clock);
  ~Deliverer();
  Deliverer(const Deliverer&) = delete;
  Deliverer& operator=(const Deliverer&) = delete;

  // Starts a lane for every tube with a webhook, and follows the broker's changes of them.
  void start();
  // Ends every lane: their reserved jobs are ready again (requests under way are abandoned; a
  // job whose answer is lost is delivered again, at least once).
  void stop();

 private:
  class Lane;
  class Keeper;
  Deliverer(boost::asio::io_context& io, broker::Broker& broker, metrics::Registry& metrics,
            std::unique_ptr<Poster> poster, std::unique_ptr<timing::Clock> clock);
  void refresh();
  void retired(Lane* lane);

  // What push delivery counts on the metrics page.
  struct Families {
    explicit Families(metrics::Registry& registry);
    metrics::Counters& deliveries;  // what became of each: by tube and outcome
    metrics::Counters& attempts;    // each attempt's result (2xx ... 5xx, error): by tube
    metrics::Counters& in_flight;   // requests under way
    metrics::Histogram& latency;    // from a request's start to its answer or failure
    metrics::Histogram& lateness;   // from a job's due time to its first attempt's start
  };

  boost::asio::io_context& io_;
  broker::Broker& broker_;
  Families metrics_;
  std::unique_ptr<Poster> own_poster_;  // make()'s; empty when the caller's
  std::unique_ptr<timing::Clock> own_clock_;
  Poster& poster_;
  timing::Clock& clock_;
  std::map<std::string, std::unique_ptr<Lane>> lanes_;  // by tube
  // Lanes of tubes no longer delivered here, until their requests under way are answered.
  std::vector<std::unique_ptr<Lane>> retiring_;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
  std::mt19937_64 random_{std::random_device{}()};
  bool running_ = false;
};

}  // namespace delayq::front::webhook
