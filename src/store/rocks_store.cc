#include "store/rocks_store.h"

#include <rocksdb/cache.h>
#include <rocksdb/db.h>
#include <rocksdb/filter_policy.h>
#include <rocksdb/memtablerep.h>
#include <rocksdb/options.h>
#include <rocksdb/slice_transform.h>
#include <rocksdb/table.h>
#include <rocksdb/utilities/checkpoint.h>
#include <rocksdb/version.h>
#include <rocksdb/write_batch.h>

#include <filesystem>
#include <system_error>

#include "store/log_damage.h"

namespace delayq::store {
namespace {

Status from_rocks(const rocksdb::Status& s, std::string_view what) {
  if (s.ok()) return Status::ok();
  const Code code = s.IsCorruption() ? Code::kCorruption : Code::kIOError;
  return {code, std::string(what) + ": " + s.ToString()};
}

std::string encode_u64(std::uint64_t value) {
  std::string out(8, '\0');
  for (std::size_t i = 0; i < 8; ++i) out[i] = static_cast<char>((value >> (8 * i)) & 0xFFU);
  return out;
}

std::optional<std::uint64_t> decode_u64(std::string_view bytes) {
  if (bytes.size() != 8) return std::nullopt;
  std::uint64_t value = 0;
  for (std::size_t i = 0; i < 8; ++i) {
    value |= std::uint64_t{static_cast<unsigned char>(bytes[i])} << (8 * i);
  }
  return value;
}

}  // namespace

RocksStore::RocksStore(std::unique_ptr<rocksdb::DB> db,
                       std::vector<rocksdb::ColumnFamilyHandle*> families)
    : db_(std::move(db)),
      records_(families.at(0)),
      bodies_(families.at(1)),
      far_jobs_(families.at(2)),
      far_(families.at(3)) {}

RocksStore::~RocksStore() {
  if (!db_) return;
  (void)db_->DestroyColumnFamilyHandle(far_);
  (void)db_->DestroyColumnFamilyHandle(far_jobs_);
  (void)db_->DestroyColumnFamilyHandle(bodies_);
  (void)db_->DestroyColumnFamilyHandle(records_);
  (void)db_->Close();
}

namespace {

// The store versions that keep attachments, then schedules, in the bodies family
// (move_to_bodies()).
constexpr std::uint64_t kAttachmentsBesideBodies = 4;
constexpr std::uint64_t kSchedulesBesideBodies = 6;

// Options both column families share. Each gets half the write buffer budget.
rocksdb::ColumnFamilyOptions family_options(const RocksStoreOptions& options,
                                            const std::shared_ptr<rocksdb::Cache>& cache) {
  rocksdb::ColumnFamilyOptions family;
  family.write_buffer_size = options.write_buffer_bytes / 2;
  family.max_write_buffer_number = 2;
  family.compression = rocksdb::kLZ4Compression;
  rocksdb::BlockBasedTableOptions table;
  table.block_cache = cache;
  // Indexes and filters count against the cache instead of growing with the data.
  table.cache_index_and_filter_blocks = true;
  table.pin_l0_filter_and_index_blocks_in_cache = true;
  family.table_factory.reset(rocksdb::NewBlockBasedTableFactory(table));
  return family;
}

// A family read by key at random while the server runs (bodies, far records, the far tier's
// indexes). A read of a key put long ago asks a bloom filter of 2 % of the memtable's size
// instead of searching its skip list first, and the tables' bloom filters, so that a key that is
// not there seldom reads a block. Index and filters in 4 KiB partitions, read through the cache
// like data: a table of 64 MiB has about 1 MiB of them, and whole ones thrashed the small
// cache, every read of a far job reading and checksumming them again (2,541 reschedules a
// second at 10^6 far jobs; partitioned, 50,001).
void read_by_key(rocksdb::ColumnFamilyOptions& family, const std::shared_ptr<rocksdb::Cache>& cache,
                 bool pin_partitions = false) {
  family.memtable_prefix_bloom_size_ratio = 0.02;
  family.memtable_whole_key_filtering = true;
  rocksdb::BlockBasedTableOptions table;
  table.block_cache = cache;
  table.cache_index_and_filter_blocks = true;
  table.pin_l0_filter_and_index_blocks_in_cache = true;
  table.filter_policy.reset(rocksdb::NewBloomFilterPolicy(10));
  table.index_type = rocksdb::BlockBasedTableOptions::IndexType::kTwoLevelIndexSearch;
  table.partition_filters = true;
  table.metadata_block_size = 4096;
  table.pin_top_level_index_and_filter = true;
  table.cache_index_and_filter_blocks_with_high_priority = true;
  if (pin_partitions) {
    table.metadata_cache_options.top_level_index_pinning = rocksdb::PinningTier::kAll;
    table.metadata_cache_options.partition_pinning = rocksdb::PinningTier::kAll;
  }
  family.table_factory.reset(rocksdb::NewBlockBasedTableFactory(table));
}

// The far families take random rewrites: a reschedule rewrites a record among 10^8 others and
// puts a due entry at a random place. Levelled compaction merges each such write into a larger
// level again and again (at 10^8 far jobs, 0.44 GB of compaction output for 8 MB flushed), and
// took more CPU than the reschedules themselves; tiered ("universal") compaction merges runs of
// like size, so a write is rewritten a few times, and moves runs whose keys do not overlap (records
// put with growing ids) without rewriting them. The cost is space: the runs above the last may
// hold as much again as the last before a compaction merges them all (docs/BENCHMARKS.md, the
// far tier). A store written with levelled compaction opens as is: each level is a run.
void tiered(rocksdb::ColumnFamilyOptions& family) {
  family.compaction_style = rocksdb::kCompactionStyleUniversal;
  family.compaction_options_universal.allow_trivial_move = true;
  family.compaction_options_universal.max_size_amplification_percent = 100;
}

}  // namespace

std::string RocksStore::library() {
  return std::string{"RocksDB "} + std::to_string(ROCKSDB_MAJOR) + "." +
         std::to_string(ROCKSDB_MINOR) + "." + std::to_string(ROCKSDB_PATCH) + ", " +
         (std::string_view{DELAYQ_ROCKSDB_BUILD} == "production" ? "production build"
                                                                 : "Debian's build");
}

Result<std::unique_ptr<RocksStore>> RocksStore::open(const std::string& dir,
                                                     const RocksStoreOptions& options) {
  // Create a store only where there is nothing: RocksDB would also "create" one in a directory
  // that lost its CURRENT file, and then delete the old tables as obsolete.
  std::error_code error;
  const std::filesystem::path path(dir);
  const bool exists = std::filesystem::exists(path, error);
  const bool empty = !exists || std::filesystem::is_empty(path, error);
  if (!exists && !options.create_if_missing) {
    return Status(Code::kNotFound, "no store in " + dir + " (the directory does not exist)");
  }
  if (exists && !empty && !std::filesystem::exists(path / "CURRENT", error)) {
    return Status(Code::kCorruption, "cannot open store in " + dir +
                                         ": the directory is not empty but has no CURRENT file "
                                         "(not a store, or a damaged one)");
  }
  const bool create = options.create_if_missing && empty;
  rocksdb::DBOptions db_options;
  db_options.create_if_missing = create;
  // A store older than the far families gets them, empty (the upgrade to version 7).
  db_options.create_missing_column_families = true;
  db_options.paranoid_checks = true;
  // A log cut short is read up to the cut; a bad record is looked at below.
  db_options.wal_recovery_mode = rocksdb::WALRecoveryMode::kTolerateCorruptedTailRecords;
  db_options.max_background_jobs = 2;
  db_options.info_log_level = rocksdb::InfoLogLevel::WARN_LEVEL;
  db_options.keep_log_file_num = 4;
  // A write-ahead log file goes once every family has flushed what it holds, so a family that
  // takes a write now and then (the far tier's, a few far jobs) keeps every log since: without
  // a bound, up to four times the families' memtables (640 MiB), all read again at a restart.
  // Past this, RocksDB flushes the families that hold the oldest log.
  db_options.max_total_wal_size = 4 * options.write_buffer_bytes;
  // Tables and blob files written by flushes and compactions are handed to the disk a MiB at a
  // time (sync_file_range) rather than in one fdatasync at the end, whose burst held up the
  // event loop's own log writes (docs/BENCHMARKS.md, Overload).
  db_options.bytes_per_sync = std::uint64_t{1} << 20;
  // One thread writes (the committer, or the event loop): nothing to gain from concurrent
  // memtable inserts, and the records' vector memtable does not support them.
  db_options.allow_concurrent_memtable_write = false;

  const auto cache = rocksdb::NewLRUCache(options.block_cache_bytes);
  rocksdb::ColumnFamilyOptions records = family_options(options, cache);
  // Records are written all the time and read only when the store opens: a vector memtable
  // appends each write and sorts once, at the flush (or the first read). A skip list compares
  // on every insert, and Debian's RocksDB, built with its assertions on, checks the whole
  // insertion path each time: about half of a put's and a delete's CPU in the committer
  // (docs/BENCHMARKS.md, "What a job costs RocksDB").
  records.memtable_factory = std::make_shared<rocksdb::VectorRepFactory>();
  rocksdb::ColumnFamilyOptions bodies = family_options(options, cache);
  // Bodies, attachments and schedules are read back while the server runs: a skip list, whose
  // inserts of growing ids a per-prefix hint places at the end of their range.
  bodies.memtable_insert_with_hint_prefix_extractor.reset(rocksdb::NewFixedPrefixTransform(1));
  read_by_key(bodies, cache);
  // Bodies are written once and deleted once: in blob files, compaction moves 20-byte
  // references instead of the bodies, and garbage collection reclaims deleted ones. Blobs are
  // compressed one at a time, each with a fresh LZ4 state of 16 KiB to clear: for bodies of a
  // few hundred bytes that cost more CPU than the rest of a job's flush (docs/BENCHMARKS.md).
  // Files written with compression stay readable.
  bodies.enable_blob_files = true;
  bodies.min_blob_size = 0;
  bodies.blob_compression_type = rocksdb::kNoCompression;
  bodies.enable_blob_garbage_collection = true;
  // The far tier: records by growing ids (hinted as bodies are), and indexes read by key (a
  // key's holder) and scanned by prefix (a tube's jobs by due time, a group).
  rocksdb::ColumnFamilyOptions far_jobs = family_options(options, cache);
  far_jobs.memtable_insert_with_hint_prefix_extractor.reset(rocksdb::NewFixedPrefixTransform(1));
  // A far record is read by the id of a job that is there (a reschedule, a delete, the loader):
  // the last level, which holds nearly all of them, keeps no bloom filter, so that such a read
  // does not fetch and probe a filter partition there (a miss, an unknown id, reads a data
  // block instead). Far-to-far reschedules at 2 x 10^7 far jobs: 1.2x to 1.35x. The index and
  // the filters stay in memory, pinned: read at random, their partitions went in and out of the
  // cache at every read, which took more of a reschedule at 10^8 far jobs than reading its
  // record did. Filters too: a table that compaction moves down without rewriting it keeps
  // the filter it was flushed with. About 2 bytes a far job (213 MiB after a restart with
  // 10^8, docs/BENCHMARKS.md, the far tier), in a cache of their own, so that pinned blocks
  // past its size do not leave the other families' blocks no room in theirs.
  const auto far_cache = rocksdb::NewLRUCache(options.block_cache_bytes / 4);
  read_by_key(far_jobs, far_cache, /*pin_partitions=*/true);
  far_jobs.optimize_filters_for_hits = true;
  rocksdb::ColumnFamilyOptions far = family_options(options, cache);
  read_by_key(far, cache);
  tiered(far_jobs);
  tiered(far);
  const std::vector<rocksdb::ColumnFamilyDescriptor> families = {
      {rocksdb::kDefaultColumnFamilyName, records},
      {std::string(kBodiesFamily), bodies},
      {std::string(kFarJobsFamily), far_jobs},
      {std::string(kFarFamily), far}};

  rocksdb::DB* raw = nullptr;
  std::vector<rocksdb::ColumnFamilyHandle*> handles;
  rocksdb::Status opened = rocksdb::DB::Open(db_options, dir, families, &handles, &raw);
  // A bad record in the write-ahead log: with nothing sound after it, it is a crash's torn or
  // garbled last write, never synced, so never acknowledged, and dropped. With synced writes
  // after it, it is damage: refused unless accept_torn_tail, which drops it and all after it.
  std::string dropped;
  if (opened.IsCorruption()) {
    auto damage = find_log_damage(path);
    if (!damage.is_ok()) return damage.status();
    if (const auto& bad = damage.value()) {
      const std::string where = bad->file.filename().string() + " at byte " +
                                std::to_string(bad->offset) + " of " + std::to_string(bad->size);
      if (bad->followed && !options.accept_torn_tail) {
        return Status(Code::kCorruption,
                      "cannot open store in " + dir + ": the write-ahead log " + where +
                          " has a bad record (" + opened.ToString() +
                          ") with sound records after it; --accept-torn-tail starts anyway, "
                          "dropping that record and everything after it");
      }
      db_options.wal_recovery_mode = rocksdb::WALRecoveryMode::kPointInTimeRecovery;
      opened = rocksdb::DB::Open(db_options, dir, families, &handles, &raw);
      dropped = bad->followed ? "dropped the write-ahead log from its bad record in " + where +
                                    " on, sound records after it included (--accept-torn-tail)"
                              : "dropped the torn last write of the write-ahead log (" + where +
                                    ", never acknowledged)";
    }
  }
  if (opened.IsIOError() && opened.ToString().find("lock") != std::string::npos) {
    // RocksDB's LOCK file, held by whoever has the store open: another delayqd, most likely.
    return Status(Code::kConflict, "cannot open store in " + dir +
                                       ": another process (another delayqd?) has it open (" +
                                       opened.ToString() + ")");
  }
  if (!opened.ok()) return from_rocks(opened, "cannot open store in " + dir);
  std::unique_ptr<RocksStore> store(
      new RocksStore(std::unique_ptr<rocksdb::DB>(raw), std::move(handles)));
  store->dropped_ = std::move(dropped);
  if (Status s = store->load_meta(); !s.is_ok()) {
    return Status(s.code(), dir + ": " + s.message());
  }
  return store;
}

Status RocksStore::load_meta() {
  std::string value;
  rocksdb::Status s = db_->Get(rocksdb::ReadOptions(), std::string(kFormatKey), &value);
  if (s.IsNotFound()) {
    std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(rocksdb::ReadOptions()));
    it->SeekToFirst();
    if (it->Valid()) return {Code::kCorruption, "not a delayq store (no format marker)"};
    if (!it->status().ok()) return from_rocks(it->status(), "reading the store");
    rocksdb::WriteOptions sync;
    sync.sync = true;
    return from_rocks(db_->Put(sync, std::string(kFormatKey), encode_u64(kStoreVersion)),
                      "writing the format marker");
  }
  if (!s.ok()) return from_rocks(s, "reading the format marker");
  const auto version = decode_u64(value);
  if (!version) return {Code::kCorruption, "unreadable format marker"};
  if (*version == 0 || *version > kStoreVersion) {
    return {Code::kUnknownFormat, "store has format version " + std::to_string(*version) +
                                      ", this build reads versions 1 to " +
                                      std::to_string(kStoreVersion)};
  }
  if (*version < kAttachmentsBesideBodies) {
    if (Status moved = move_to_bodies(kAttachmentPrefix, "attachments"); !moved.is_ok()) {
      return moved;
    }
  }
  if (*version < kSchedulesBesideBodies) {
    if (Status moved = move_to_bodies(kSchedulePrefix, "schedules"); !moved.is_ok()) return moved;
  }
  if (*version < kStoreVersion) {  // the upgrade: every older store reads as this version
    rocksdb::WriteOptions sync;
    sync.sync = true;
    s = db_->Put(sync, std::string(kFormatKey), encode_u64(kStoreVersion));
    if (!s.ok()) return from_rocks(s, "upgrading the format marker");
  }
  s = db_->Get(rocksdb::ReadOptions(), std::string(kNextIdKey), &value);
  if (s.IsNotFound()) return Status::ok();
  if (!s.ok()) return from_rocks(s, "reading the id high-water mark");
  const auto next = decode_u64(value);
  if (!next || *next == 0) return {Code::kCorruption, "unreadable id high-water mark"};
  next_id_ = *next;
  return Status::ok();
}

// Up to version 3, attachments were kept in the default family, and up to 5 schedules. Moved in
// synced batches of 1,000, each atomic: after a crash the marker still says the old version, and
// the next open moves the rest.
Status RocksStore::move_to_bodies(char prefix, const std::string& what) {
  constexpr std::size_t kPerBatch = 1000;
  const std::string moving = "moving " + what;
  rocksdb::WriteOptions sync;
  sync.sync = true;
  rocksdb::WriteBatch batch;
  std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(rocksdb::ReadOptions(), records_));
  for (it->Seek(std::string(1, prefix)); it->Valid(); it->Next()) {
    const rocksdb::Slice key = it->key();
    if (key.size() == 0 || key[0] != prefix) break;
    if (Status s = from_rocks(batch.Put(bodies_, key, it->value()), moving); !s.is_ok()) return s;
    if (Status s = from_rocks(batch.Delete(records_, key), moving); !s.is_ok()) return s;
    if (batch.Count() >= 2 * kPerBatch) {
      if (Status s = from_rocks(db_->Write(sync, &batch), moving); !s.is_ok()) return s;
      batch.Clear();
    }
  }
  if (Status s = from_rocks(it->status(), "reading " + what + " to move"); !s.is_ok()) return s;
  if (batch.Count() == 0) return Status::ok();
  return from_rocks(db_->Write(sync, &batch), moving);
}

Status RocksStore::write(std::span<const WriteSet* const> sets, bool sync) {
  rocksdb::WriteBatch batch;
  std::optional<JobId> next_id;
  for (const WriteSet* set : sets) {
    for (const WriteSet::Op& op : set->ops()) {
      switch (op.kind) {
        case WriteSet::Kind::kRecord:
          batch.Put(job_key(kJobPrefix, op.id), op.value);
          break;
        case WriteSet::Kind::kBody:
          batch.Put(bodies_, job_key(kBodyPrefix, op.id), op.value);
          break;
        case WriteSet::Kind::kErase:
          batch.Delete(job_key(kJobPrefix, op.id));
          batch.Delete(bodies_, job_key(kBodyPrefix, op.id));
          break;
        case WriteSet::Kind::kAttachment:
          batch.Put(bodies_, job_key(kAttachmentPrefix, op.id), op.value);
          break;
        case WriteSet::Kind::kEraseAttachment:
          batch.Delete(bodies_, job_key(kAttachmentPrefix, op.id));
          break;
        case WriteSet::Kind::kWebhook:
          batch.Put(kWebhookPrefix + op.tube, op.value);
          break;
        case WriteSet::Kind::kEraseWebhook:
          batch.Delete(kWebhookPrefix + op.tube);
          break;
        case WriteSet::Kind::kMaxAttempts:
          if (decode_u32(op.value).value_or(0) == 0) {
            batch.Delete(kMaxAttemptsPrefix + op.tube);
          } else {
            batch.Put(kMaxAttemptsPrefix + op.tube, op.value);
          }
          break;
        case WriteSet::Kind::kFlow:
          if (op.value.empty()) {
            batch.Delete(kFlowPrefix + op.tube);
          } else {
            batch.Put(kFlowPrefix + op.tube, op.value);
          }
          break;
        case WriteSet::Kind::kSchedule:
          batch.Put(bodies_, kSchedulePrefix + op.tube, op.value);
          break;
        case WriteSet::Kind::kEraseSchedule:
          batch.Delete(bodies_, kSchedulePrefix + op.tube);
          break;
        case WriteSet::Kind::kFarPut:
        case WriteSet::Kind::kFarPutFresh:
        case WriteSet::Kind::kFarErase:
        case WriteSet::Kind::kFarCount: {
          const Status s = far_writes(
              op,
              [this, &batch](const std::string& key, std::optional<std::string_view> value) {
                rocksdb::ColumnFamilyHandle* family = far_family(key);
                if (value) {
                  batch.Put(family, key, rocksdb::Slice(value->data(), value->size()));
                } else {
                  batch.Delete(family, key);
                }
              },
              [&batch](JobId id) { batch.Delete(job_key(kJobPrefix, id)); });
          if (!s.is_ok()) return s;
          break;
        }
      }
    }
    if (set->next_id()) next_id = set->next_id();
  }
  if (next_id) batch.Put(std::string(kNextIdKey), encode_u64(*next_id));
  rocksdb::WriteOptions options;
  options.sync = sync;
  if (Status s = from_rocks(db_->Write(options, &batch), "write"); !s.is_ok()) return s;
  if (next_id) next_id_ = *next_id;
  return Status::ok();
}

Result<std::optional<std::string>> RocksStore::far_get(const std::string& key) {
  std::string value;
  const rocksdb::Status s = db_->Get(rocksdb::ReadOptions(), far_family(key), key, &value);
  if (s.IsNotFound()) return std::optional<std::string>();
  if (!s.ok()) return from_rocks(s, "reading the far tier");
  return std::optional<std::string>(std::move(value));
}

// Far records in a family of their own, keyed by growing ids, so that flushed tables seldom
// overlap and compaction mostly moves them; the indexes' keys come in due and key order, and a
// table of those overlaps every other: with the records among them each compaction rewrote them
// all (one family stalled puts from about 1.3 x 10^7 far jobs on).
rocksdb::ColumnFamilyHandle* RocksStore::far_family(std::string_view key) const {
  return !key.empty() && key[0] == kFarJobPrefix ? far_jobs_ : far_;
}

Status RocksStore::far_scan(const std::string& prefix, const std::string& start,
                            const std::function<bool(std::string_view, std::string_view)>& visit) {
  // The least key past every key that starts with prefix, so that the scan's end does not walk
  // over the deletions that follow the prefix's last live key. None for a prefix of all 0xFF.
  std::string end = prefix;
  while (!end.empty() && static_cast<unsigned char>(end.back()) == 0xFF) end.pop_back();
  rocksdb::Slice bound;
  rocksdb::ReadOptions read;
  if (!end.empty()) {
    end.back() = static_cast<char>(static_cast<unsigned char>(end.back()) + 1);
    bound = end;
    read.iterate_upper_bound = &bound;
  }
  std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(read, far_family(prefix)));
  for (it->Seek(start); it->Valid(); it->Next()) {
    const rocksdb::Slice key = it->key();
    if (!key.starts_with(prefix)) break;
    const rocksdb::Slice value = it->value();
    if (!visit({key.data(), key.size()}, {value.data(), value.size()})) break;
  }
  return from_rocks(it->status(), "scanning the far tier");
}

std::uint64_t RocksStore::estimated_jobs() const {
  std::uint64_t keys = 0;
  if (!db_->GetIntProperty(records_, "rocksdb.estimate-num-keys", &keys)) return 0;
  return keys;
}

Status RocksStore::checkpoint(const std::string& dir) {
  rocksdb::Checkpoint* raw = nullptr;
  if (Status s = from_rocks(rocksdb::Checkpoint::Create(db_.get(), &raw), "checkpoint");
      !s.is_ok()) {
    return s;
  }
  const std::unique_ptr<rocksdb::Checkpoint> checkpoint(raw);
  return from_rocks(checkpoint->CreateCheckpoint(dir), "checkpoint into " + dir);
}

Status RocksStore::sync() {
  return from_rocks(db_->SyncWAL(), "sync");
}

Status RocksStore::scan(const std::function<Status(JobRecord&&)>& visit) {
  rocksdb::ReadOptions options;
  options.verify_checksums = true;
  options.fill_cache = false;
  options.readahead_size = std::size_t{2} << 20;
  std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(options));
  const std::string first(1, kJobPrefix);
  for (it->Seek(first); it->Valid(); it->Next()) {
    const rocksdb::Slice key = it->key();
    if (key.size() == 0 || key[0] != kJobPrefix) break;
    const auto id = parse_job_key(kJobPrefix, std::string_view(key.data(), key.size()));
    if (!id) return {Code::kCorruption, "malformed job key"};
    auto record = decode_record(*id, std::string_view(it->value().data(), it->value().size()));
    if (!record.is_ok()) return record.status();
    if (Status s = visit(std::move(record).value()); !s.is_ok()) return s;
  }
  return from_rocks(it->status(), "reading job records");
}

Result<std::string> RocksStore::read_body(JobId id) {
  std::string body;
  const rocksdb::Status s =
      db_->Get(rocksdb::ReadOptions(), bodies_, job_key(kBodyPrefix, id), &body);
  if (s.IsNotFound()) return Status(Code::kNotFound, "no body for job " + std::to_string(id));
  if (!s.ok()) return from_rocks(s, "reading the body of job " + std::to_string(id));
  return body;
}

Result<Delivery> RocksStore::read_attachment(JobId id) {
  std::string bytes;
  const rocksdb::Status s =
      db_->Get(rocksdb::ReadOptions(), bodies_, job_key(kAttachmentPrefix, id), &bytes);
  if (s.IsNotFound()) {
    return Status(Code::kNotFound, "no attachment for job " + std::to_string(id));
  }
  if (!s.ok()) return from_rocks(s, "reading the attachment of job " + std::to_string(id));
  return decode_delivery(id, bytes);
}

Status RocksStore::scan_webhooks(const std::function<Status(std::string, Webhook)>& visit) {
  rocksdb::ReadOptions options;
  options.verify_checksums = true;
  std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(options));
  for (it->Seek(std::string(1, kWebhookPrefix)); it->Valid(); it->Next()) {
    const std::string_view key(it->key().data(), it->key().size());
    if (key.empty() || key[0] != kWebhookPrefix) break;
    std::string tube(key.substr(1));
    auto webhook = decode_webhook(tube, std::string_view(it->value().data(), it->value().size()));
    if (!webhook.is_ok()) return webhook.status();
    if (Status s = visit(std::move(tube), std::move(webhook).value()); !s.is_ok()) return s;
  }
  return from_rocks(it->status(), "reading webhooks");
}

Status RocksStore::scan_max_attempts(
    const std::function<Status(std::string, std::uint32_t)>& visit) {
  std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(rocksdb::ReadOptions()));
  for (it->Seek(std::string(1, kMaxAttemptsPrefix)); it->Valid(); it->Next()) {
    const std::string_view key(it->key().data(), it->key().size());
    if (key.empty() || key[0] != kMaxAttemptsPrefix) break;
    const auto n = decode_u32(std::string_view(it->value().data(), it->value().size()));
    if (!n) {
      return {Code::kCorruption,
              "max_attempts of tube " + std::string(key.substr(1)) + ": not 4 bytes"};
    }
    if (Status s = visit(std::string(key.substr(1)), *n); !s.is_ok()) return s;
  }
  return from_rocks(it->status(), "reading max_attempts");
}

Status RocksStore::scan_flows(const std::function<Status(std::string, FlowSettings)>& visit) {
  std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(rocksdb::ReadOptions()));
  for (it->Seek(std::string(1, kFlowPrefix)); it->Valid(); it->Next()) {
    const std::string_view key(it->key().data(), it->key().size());
    if (key.empty() || key[0] != kFlowPrefix) break;
    std::string tube(key.substr(1));
    auto flow = decode_flow(tube, std::string_view(it->value().data(), it->value().size()));
    if (!flow.is_ok()) return flow.status();
    if (Status s = visit(std::move(tube), flow.value()); !s.is_ok()) return s;
  }
  return from_rocks(it->status(), "reading flow control");
}

Status RocksStore::scan_schedules(const std::function<Status(std::string, std::string)>& visit) {
  rocksdb::ReadOptions options;
  options.verify_checksums = true;
  std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(options, bodies_));
  for (it->Seek(std::string(1, kSchedulePrefix)); it->Valid(); it->Next()) {
    const std::string_view key(it->key().data(), it->key().size());
    if (key.empty() || key[0] != kSchedulePrefix) break;
    Status s = visit(std::string(key.substr(1)), it->value().ToString());
    if (!s.is_ok()) return s;
  }
  return from_rocks(it->status(), "reading schedules");
}

Result<std::optional<std::string>> RocksStore::read_schedule(std::string_view name) {
  std::string value;
  const rocksdb::Status s =
      db_->Get(rocksdb::ReadOptions(), bodies_, kSchedulePrefix + std::string(name), &value);
  if (s.IsNotFound()) return std::optional<std::string>();
  if (!s.ok()) return from_rocks(s, "reading schedule '" + std::string(name) + "'");
  return std::optional<std::string>(std::move(value));
}

}  // namespace delayq::store
