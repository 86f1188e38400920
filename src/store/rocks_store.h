// rocks_store.h — the default Store: RocksDB in a data directory.
// One RocksDB database, keys by kind (record.h): "m:" meta, 'j'+id job records, 'w'+tube
// webhooks and 't'+tube max_attempts in the default column family, 'b'+id bodies, 'a'+id
// attachments and 's'+name schedules in the "bodies" family, whose values live in blob files. Every
// write is one WriteBatch through RocksDB's write-ahead log; sync writes fsync it, and RocksDB
// merges concurrent writers into one fsync. open() refuses a directory that is not a delayq store,
// has another format version, or whose log or tables fail their checksums, with a Status that names
// the problem (docs/storage-format.md).
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "store/store.h"

namespace rocksdb {
class ColumnFamilyHandle;
class DB;
}  // namespace rocksdb

namespace delayq::store {

// The column family that holds job bodies; meta keys and job records are in the default one.
inline constexpr std::string_view kBodiesFamily = "bodies";
// The column families of the far tier (record.h draws its keys), read while the server runs: its
// records, and its indexes and counts.
inline constexpr std::string_view kFarJobsFamily = "far_jobs";
inline constexpr std::string_view kFarFamily = "far";

struct RocksStoreOptions {
  // Create the directory and an empty store if there is none. Default: true.
  bool create_if_missing = true;
  // An incomplete or garbled last record of the write-ahead log, with no sound record after it
  // (log_damage.h), is what a crash in the middle of a write leaves (kill -9 between two
  // write() calls of one record, a power cut): it was never synced, so never acknowledged under
  // `always`, and it is always dropped on open (dropped() says so). A bad record with sound
  // records after it is real damage: refused with kCorruption naming the log and the offset,
  // unless this is set, which drops that record and everything after it (synced writes before
  // it are kept), for an operator to decide. Default: false.
  bool accept_torn_tail = false;
  // Memory RocksDB may use: its write buffers (memtables, split between records and bodies, two
  // of each at most), and the block cache that holds table blocks, their indexes and filters.
  // Defaults: 32 MiB and 16 MiB. The far records have a cache of their own, a quarter of that
  // size, which keeps their index and filters whatever its size (about 2 bytes a far job).
  std::size_t write_buffer_bytes = std::size_t{32} << 20;
  std::size_t block_cache_bytes = std::size_t{16} << 20;
};

class RocksStore final : public Store {
 public:
  static Result<std::unique_ptr<RocksStore>> open(const std::string& dir,
                                                  const RocksStoreOptions& options = {});
  ~RocksStore() override;
  RocksStore(const RocksStore&) = delete;
  RocksStore& operator=(const RocksStore&) = delete;

  Status write(std::span<const WriteSet* const> sets, bool sync) override;
  Status sync() override;
  Status scan(const std::function<Status(JobRecord&&)>& visit) override;
  Result<std::string> read_body(JobId id) override;
  Result<Delivery> read_attachment(JobId id) override;
  Status scan_webhooks(const std::function<Status(std::string, Webhook)>& visit) override;
  Status scan_max_attempts(const std::function<Status(std::string, std::uint32_t)>& visit) override;
  Status scan_flows(const std::function<Status(std::string, FlowSettings)>& visit) override;
  Status scan_schedules(const std::function<Status(std::string, std::string)>& visit) override;
  Result<std::optional<std::string>> read_schedule(std::string_view name) override;
  [[nodiscard]] JobId next_id() const override { return next_id_; }
  // The RocksDB linked in, for --version: "RocksDB 7.8.3, production build"
  // (Debian's source built with NDEBUG, cmake/rocksdb.cmake) or "RocksDB 7.8.3, Debian's build".
  static std::string library();
  // What the open dropped of a damaged write-ahead log, for the log; "" if nothing.
  [[nodiscard]] const std::string& dropped() const { return dropped_; }
  // RocksDB's estimate of the keys in the records family.
  [[nodiscard]] std::uint64_t estimated_jobs() const override;
  // RocksDB's checkpoint: table and blob files hard-linked where `dir` is on the same file
  // system (copied otherwise), the rest copied, after a flush of the memtables.
  Status checkpoint(const std::string& dir) override;

  Result<std::optional<std::string>> far_get(const std::string& key) override;
  Status far_scan(const std::string& prefix, const std::string& start,
                  const std::function<bool(std::string_view, std::string_view)>& visit) override;

 private:
  RocksStore(std::unique_ptr<rocksdb::DB> db, std::vector<rocksdb::ColumnFamilyHandle*> families);
  Status load_meta();
  // The family a far tier key lives in: records ('J') in far_jobs_, the rest in far_.
  [[nodiscard]] rocksdb::ColumnFamilyHandle* far_family(std::string_view key) const;
  // Moves the default family's keys of `prefix` to the bodies family (an older store's layout).
  Status move_to_bodies(char prefix, const std::string& what);

  std::unique_ptr<rocksdb::DB> db_;
  // The default family: meta keys, job records, webhooks and max_attempts, all read only when
  // the store opens (its memtable is a vector, sorted when read).
  rocksdb::ColumnFamilyHandle* records_;
  rocksdb::ColumnFamilyHandle* bodies_;    // bodies and attachments, in blob files
  rocksdb::ColumnFamilyHandle* far_jobs_;  // the far tier's records
  rocksdb::ColumnFamilyHandle* far_;       // the far tier's indexes and counts
  JobId next_id_ = 1;
  std::string dropped_;
};

}  // namespace delayq::store
