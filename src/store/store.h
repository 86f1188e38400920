// store.h — where jobs live between restarts. One interface, two implementations: RocksStore
// (rocks_store.h, the default: RocksDB in a data directory) and MemoryStore (memory_store.h, for
// tests only, in a target of its own that no program links).
// write() applies one or more WriteSets as one atomic batch; with sync it returns only once the
// batch is on stable storage. scan() hands back every job record in id order for recovery.
// A Store is used by one thread at a time (the committer's); it does no locking of its own, but
// for checkpoint().
#pragma once

#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "base/status.h"
#include "store/far_reader.h"
#include "store/record.h"

namespace delayq::store {

class Store : public FarFamily {
 public:
  // Applies `sets` in order as one atomic batch; sync: durable on return.
  virtual Status write(std::span<const WriteSet* const> sets, bool sync) = 0;
  // Makes every earlier write durable.
  virtual Status sync() = 0;
  // Calls visit(record) for every job record, in id order; stops at the first non-ok status,
  // visit's or its own (a record that fails to decode is kCorruption, naming the job).
  virtual Status scan(const std::function<Status(JobRecord&&)>& visit) = 0;
  virtual Result<std::string> read_body(JobId id) = 0;
  // A job's attachment (kNotFound if it has none).
  virtual Result<Delivery> read_attachment(JobId id) = 0;
  // Calls visit(tube, webhook) for every tube's webhook, by tube name.
  virtual Status scan_webhooks(const std::function<Status(std::string, Webhook)>& visit) = 0;
  // Calls visit(tube, max_attempts) for every tube that has one (never 0), by tube name.
  virtual Status scan_max_attempts(
      const std::function<Status(std::string, std::uint32_t)>& visit) = 0;
  // Calls visit(tube, flow) for every tube with flow control on, by tube name.
  virtual Status scan_flows(const std::function<Status(std::string, FlowSettings)>& visit) = 0;
  // Calls visit(name, value) for every schedule, by name; the value is read by schedule/codec.h.
  virtual Status scan_schedules(const std::function<Status(std::string, std::string)>& visit) = 0;
  // One schedule's value (nullopt: none). Safe beside write() on another thread.
  virtual Result<std::optional<std::string>> read_schedule(std::string_view name) = 0;
  // The id high-water mark as of the last write (1 for a new store).
  [[nodiscard]] virtual JobId next_id() const = 0;
  // About how many jobs the store holds, for sizing indexes before a scan; may be off either way.
  [[nodiscard]] virtual std::uint64_t estimated_jobs() const = 0;
  // Writes a consistent copy of everything written so far into `dir`, which must not exist;
  // opening the copy gives that state. Safe beside write() on another thread. Default:
  // kNotSupported (a store kept in memory has nothing to copy to disk).
  virtual Status checkpoint(const std::string& dir) {
    return {Code::kNotSupported, "this store cannot copy itself to " + dir};
  }
};

}  // namespace delayq::store
