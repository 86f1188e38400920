#include "broker/contract_brokers.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <mutex>

#include "broker/local/local_broker.h"
#include "broker/redis/redis_broker.h"
#include "redis/redis_servers.h"
#include "store/memory_store.h"

namespace delayq::testing {
namespace fs = std::filesystem;

std::string kind_name(BrokerKind kind) {
  switch (kind) {
    case BrokerKind::kLocalMemory:
      return "local_memory";
    case BrokerKind::kLocalRocks:
      return "local_rocksdb";
    case BrokerKind::kRedis:
      return "redis";
    case BrokerKind::kRedisCluster:
      return "redis_cluster";
    case BrokerKind::kRedisPrefetch:
      return "redis_prefetch";
  }
  return "unknown";
}

namespace {

// A store that forwards to a MemoryStore it shares, so that a broker opened after another
// finds what the first one wrote, as a restart over RocksDB does.
class SharedMemoryStore final : public store::Store {
 public:
  explicit SharedMemoryStore(std::shared_ptr<store::MemoryStore> inner)
      : inner_(std::move(inner)) {}
  Status write(std::span<const store::WriteSet* const> sets, bool sync) override {
    return inner_->write(sets, sync);
  }
  Status sync() override { return inner_->sync(); }
  Status scan(const std::function<Status(store::JobRecord&&)>& visit) override {
    return inner_->scan(visit);
  }
  Result<std::string> read_body(JobId id) override { return inner_->read_body(id); }
  Result<std::optional<std::string>> far_get(const std::string& key) override {
    return inner_->far_get(key);
  }
  Status far_scan(const std::string& prefix, const std::string& start,
                  const std::function<bool(std::string_view, std::string_view)>& visit) override {
    return inner_->far_scan(prefix, start, visit);
  }
  Result<Delivery> read_attachment(JobId id) override { return inner_->read_attachment(id); }
  Status scan_webhooks(const std::function<Status(std::string, Webhook)>& visit) override {
    return inner_->scan_webhooks(visit);
  }
  Status scan_max_attempts(
      const std::function<Status(std::string, std::uint32_t)>& visit) override {
    return inner_->scan_max_attempts(visit);
  }
  Status scan_flows(const std::function<Status(std::string, FlowSettings)>& visit) override {
    return inner_->scan_flows(visit);
  }
  Status scan_schedules(const std::function<Status(std::string, std::string)>& visit) override {
    return inner_->scan_schedules(visit);
  }
  Result<std::optional<std::string>> read_schedule(std::string_view name) override {
    return inner_->read_schedule(name);
  }
  [[nodiscard]] JobId next_id() const override { return inner_->next_id(); }
  [[nodiscard]] std::uint64_t estimated_jobs() const override { return inner_->estimated_jobs(); }

 private:
  std::shared_ptr<store::MemoryStore> inner_;
};

class LocalMemoryState final : public ContractState {
 public:
  Result<std::unique_ptr<broker::Broker>> open(boost::asio::io_context& io) override {
    broker::local::NodeOptions options;
    options.min_free_disk_bytes = 0;
    auto opened =
        broker::local::LocalBroker::open(io, options, std::make_unique<SharedMemoryStore>(store_));
    if (!opened.is_ok()) return opened.status();
    return std::unique_ptr<broker::Broker>(std::move(opened).value());
  }
  [[nodiscard]] Capabilities can() const override {
    Capabilities can;
    can.backup = false;  // nothing on disk to copy
    return can;
  }

 private:
  std::shared_ptr<store::MemoryStore> store_ = std::make_shared<store::MemoryStore>();
};

class LocalRocksState final : public ContractState {
 public:
  explicit LocalRocksState(fs::path dir) : dir_(std::move(dir)) {
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  ~LocalRocksState() override { fs::remove_all(dir_); }
  Result<std::unique_ptr<broker::Broker>> open(boost::asio::io_context& io) override {
    broker::local::NodeOptions options;
    options.data_dir = (dir_ / "data").string();
    options.min_free_disk_bytes = 0;
    auto opened = broker::local::LocalBroker::open(io, options);
    if (!opened.is_ok()) return opened.status();
    return std::unique_ptr<broker::Broker>(std::move(opened).value());
  }
  [[nodiscard]] Capabilities can() const override { return {}; }

 private:
  fs::path dir_;
};

class RedisState final : public ContractState {
 public:
  RedisState(std::string seeds, std::string prefix, broker::redis::Millis prefetch = {})
      : seeds_(std::move(seeds)), prefix_(std::move(prefix)), prefetch_(prefetch) {}
  Result<std::unique_ptr<broker::Broker>> open(boost::asio::io_context& io) override {
    broker::redis::RedisBrokerOptions options;
    for (std::size_t start = 0; start < seeds_.size();) {
      std::size_t comma = seeds_.find(',', start);
      if (comma == std::string::npos) comma = seeds_.size();
      options.client.seeds.push_back(seeds_.substr(start, comma - start));
      start = comma + 1;
    }
    options.prefix = prefix_;
    options.shards = 16;  // several shards, so that jobs of one tube spread over them
    options.prefetch = prefetch_;
    auto opened = broker::redis::RedisBroker::open(io, options);
    if (!opened.is_ok()) return opened.status();
    return std::unique_ptr<broker::Broker>(std::move(opened).value());
  }
  [[nodiscard]] Capabilities can() const override {
    return {.due_counts = false, .list_jobs = false, .backup = false, .sequential_ids = false};
  }

 private:
  std::string seeds_;
  std::string prefix_;
  broker::redis::Millis prefetch_;
};

fs::path scratch(const std::string& what) {
  return fs::temp_directory_path() / ("delayq-contract-" + std::to_string(::getpid()) + "-" + what);
}

// A server (or cluster) of the whole process: stopped by PID at exit, and its directory (its
// log, and a cluster's node files) removed after it, so that runs leave nothing in /tmp.
template <class Server>
struct ProcessWide {
  ~ProcessWide() {
    if (server == nullptr) return;
    server.reset();
    std::error_code ignored;
    fs::remove_all(dir, ignored);
  }
  fs::path dir;
  std::unique_ptr<Server> server;
};

// One redis-server for the whole process.
std::string single_redis(std::string* why) {
  static std::once_flag once;
  static ProcessWide<RedisServer> wide;
  static std::string failure;
  std::call_once(once, [] {
    wide.dir = scratch("redis");
    wide.server = std::make_unique<RedisServer>(wide.dir);
    failure = wide.server->start();
  });
  *why = failure;
  return failure.empty() ? wide.server->address() : "";
}

// The run's cluster (scripts/redis-cluster.sh, named by DELAYQ_TEST_REDIS_SEEDS_FILE), or else
// one this process starts: three primaries with a replica each.
std::string cluster_redis(std::string* why) {
  if (const char* file = std::getenv("DELAYQ_TEST_REDIS_SEEDS_FILE"); file != nullptr) {
    std::ifstream in(file);
    std::string seeds;
    std::getline(in, seeds);
    *why = seeds.empty() ? std::string("no seeds in ") + file : "";
    return seeds;
  }
  static std::once_flag once;
  static ProcessWide<RedisCluster> wide;
  static std::string failure;
  std::call_once(once, [] {
    wide.dir = scratch("cluster");
    wide.server = std::make_unique<RedisCluster>(wide.dir, 3, 1);
    failure = wide.server->start();
  });
  *why = failure;
  return failure.empty() ? wide.server->seeds() : "";
}

// Letters, digits and '-': a key prefix of the test's own.
std::string prefix_of(const std::string& test) {
  std::string prefix = "contract-" + std::to_string(::getpid()) + "-";
  for (const char c : test) prefix.push_back(std::isalnum(static_cast<unsigned char>(c)) ? c : '-');
  return prefix.substr(0, 60);
}

}  // namespace

std::unique_ptr<ContractState> make_state(BrokerKind kind, const std::string& test,
                                          std::string* why) {
  why->clear();
  switch (kind) {
    case BrokerKind::kLocalMemory:
      return std::make_unique<LocalMemoryState>();
    case BrokerKind::kLocalRocks:
      return std::make_unique<LocalRocksState>(scratch(prefix_of(test)));
    case BrokerKind::kRedis: {
      std::string seeds = single_redis(why);
      if (!why->empty()) return nullptr;
      return std::make_unique<RedisState>(seeds, prefix_of(test));
    }
    case BrokerKind::kRedisCluster: {
      std::string seeds = cluster_redis(why);
      if (!why->empty()) return nullptr;
      return std::make_unique<RedisState>(seeds, prefix_of(test));
    }
    case BrokerKind::kRedisPrefetch: {
      std::string seeds = single_redis(why);
      if (!why->empty()) return nullptr;
      return std::make_unique<RedisState>(seeds, prefix_of(test), broker::redis::Millis{20});
    }
  }
  *why = "unknown broker kind";
  return nullptr;
}

}  // namespace delayq::testing
