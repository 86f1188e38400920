// contract_brokers.h — the brokers broker_contract_test runs its cases against, each opened the
// way delayqd opens it: the local broker over an in-memory store and over RocksDB in a fresh
// directory, and the Redis broker over one real redis-server (also with prefetch on) and over a
// real cluster of three primaries with a replica each. Each test gets a state of its own (a store,
// a directory, a key prefix), and may open a broker over it again after closing the first: a
// restart, or in Redis mode another node. What a broker documents it cannot do is said here once,
// as `can`.
#pragma once

#include <boost/asio/io_context.hpp>
#include <memory>
#include <ostream>
#include <string>

#include "base/status.h"
#include "broker/broker.h"

namespace delayq::testing {

enum class BrokerKind { kLocalMemory, kLocalRocks, kRedis, kRedisCluster, kRedisPrefetch };

[[nodiscard]] std::string kind_name(BrokerKind kind);
inline void PrintTo(BrokerKind kind, std::ostream* out) {
  *out << kind_name(kind);
}

// What a broker answers kNotSupported for (docs/design/broker-contract.md).
struct Capabilities {
  bool due_counts = true;
  bool list_jobs = true;
  bool backup = true;
  bool sequential_ids = true;  // ids 1, 2, 3, ... in the order of puts
  bool flow_control = true;    // Admin::set_flow
};

// One test's state, and brokers opened over it.
class ContractState {
 public:
  virtual ~ContractState() = default;
  // A broker over this state: the first one, or, after the previous one was closed and
  // destroyed, the same state again (a restart; in Redis mode, another node).
  [[nodiscard]] virtual Result<std::unique_ptr<broker::Broker>> open(
      boost::asio::io_context& io) = 0;
  [[nodiscard]] virtual Capabilities can() const = 0;
};

// A fresh state of `kind`; "" in *why, or why it could not be made (no redis-server, say).
[[nodiscard]] std::unique_ptr<ContractState> make_state(BrokerKind kind, const std::string& test,
                                                        std::string* why);

}  // namespace delayq::testing
