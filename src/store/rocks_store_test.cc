// rocks_store_test.cc — RocksStore on real directories: what is written comes back after a
// reopen, in id order, and a damaged directory (flipped or cut tables, a lost CURRENT, a cut
// MANIFEST, a torn write-ahead log) is refused with a Status, never read back wrong.
// Each test works in a fresh directory under the system's temporary directory.
#include "store/rocks_store.h"

#include <gtest/gtest.h>
#include <rocksdb/db.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <limits>
#include <numeric>
#include <optional>
#include <random>
#include <string>
#include <system_error>
#include <tuple>
#include <utility>
#include <vector>

#include "store/log_damage.h"
#include "store/memory_store.h"
#include "support/seed.h"

namespace delayq::store {
namespace {

namespace fs = std::filesystem;

// A directory of its own for one test, removed with everything in it at the end.
class TempDir {
 public:
  TempDir()
      : path_(fs::temp_directory_path() / ("delayq-store-test-" + std::to_string(::getpid()) + "-" +
                                           std::to_string(counter_++))) {
    fs::remove_all(path_);
    fs::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ignored;
    fs::remove_all(path_, ignored);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  [[nodiscard]] const fs::path& path() const noexcept { return path_; }
  // A path inside the directory, as RocksStore::open takes it.
  [[nodiscard]] std::string sub(const std::string& name) const { return (path_ / name).string(); }

 private:
  static inline std::atomic<int> counter_{0};
  fs::path path_;
};

// Deterministic content for job `id`, so a reader can tell a right record from a wrong one.
JobRecord make_record(JobId id) {
  JobRecord record;
  record.id = id;
  record.tube = "tube-" + std::to_string(id % 7);
  record.priority = static_cast<std::uint32_t>(id * 13);
  record.state = static_cast<JobState>(id % kJobStateCount);
  record.due_unix_ms = 1'700'000'000'000 + static_cast<std::int64_t>(id);
  record.created_unix_ms = -static_cast<std::int64_t>(id);
  record.delay_ms = static_cast<std::int64_t>(id) * 1000;
  record.ttr_seconds = 60;
  record.counters.reserves = static_cast<std::uint32_t>(id);
  record.key = id % 2 == 0 ? "key-" + std::to_string(id) : "";
  record.group = id % 3 == 0 ? std::string("g\0\xFF", 3) : "";
  return record;
}

// Pseudo-random bytes, so that compression cannot shrink a table to nothing.
std::string make_body(JobId id, std::size_t size) {
  std::mt19937_64 rng(id);
  std::string body(size, '\0');
  for (char& c : body) c = static_cast<char>(rng() & 0xFFU);
  return body;
}

WriteSet put_jobs(JobId first, JobId last, std::size_t body_bytes) {
  WriteSet set;
  for (JobId id = first; id <= last; ++id) {
    set.put_record(make_record(id));
    set.put_body(id, make_body(id, body_bytes));
  }
  set.set_next_id(last + 1);
  return set;
}

Status write(Store& store, std::vector<const WriteSet*> sets, bool sync) {
  return store.write(sets, sync);
}

std::unique_ptr<RocksStore> must_open(const std::string& dir,
                                      const RocksStoreOptions& options = {}) {
  auto opened = RocksStore::open(dir, options);
  if (!opened.is_ok()) {
    ADD_FAILURE() << "open " << dir << ": " << opened.status().to_string();
    return nullptr;
  }
  return std::move(opened).value();
}

Result<std::vector<JobRecord>> scan_all(Store& store) {
  std::vector<JobRecord> records;
  Status s = store.scan([&](JobRecord&& record) {
    records.push_back(std::move(record));
    return Status::ok();
  });
  if (!s.is_ok()) return s;
  return records;
}

std::vector<JobId> ids_of(const std::vector<JobRecord>& records) {
  std::vector<JobId> ids;
  for (const JobRecord& record : records) ids.push_back(record.id);
  return ids;
}

std::vector<fs::path> files_ending(const fs::path& dir, const std::string& suffix) {
  std::vector<fs::path> files;
  for (const auto& entry : fs::directory_iterator(dir)) {
    const std::string name = entry.path().filename().string();
    if (name.ends_with(suffix)) files.push_back(entry.path());
  }
  std::sort(files.begin(), files.end());
  return files;
}

std::vector<fs::path> files_starting(const fs::path& dir, const std::string& prefix) {
  std::vector<fs::path> files;
  for (const auto& entry : fs::directory_iterator(dir)) {
    if (entry.path().filename().string().starts_with(prefix)) files.push_back(entry.path());
  }
  std::sort(files.begin(), files.end());
  return files;
}

void copy_dir(const fs::path& from, const fs::path& to) {
  fs::copy(from, to, fs::copy_options::recursive);
}

void flip_bytes(const fs::path& file, std::uintmax_t offset, std::size_t count) {
  std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
  ASSERT_TRUE(f) << file;
  std::string bytes(count, '\0');
  f.seekg(static_cast<std::streamoff>(offset));
  f.read(bytes.data(), static_cast<std::streamsize>(count));
  ASSERT_TRUE(f) << file;
  for (char& c : bytes) c = static_cast<char>(~static_cast<unsigned char>(c));
  f.seekp(static_cast<std::streamoff>(offset));
  f.write(bytes.data(), static_cast<std::streamsize>(count));
  ASSERT_TRUE(f) << file;
}

void append_bytes(const fs::path& file, const std::string& bytes) {
  std::ofstream f(file, std::ios::out | std::ios::binary | std::ios::app);
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  ASSERT_TRUE(f) << file;
}

TEST(RocksStoreTest, NewStoreIsEmpty) {
  TempDir tmp;
  auto store = must_open(tmp.sub("db"));
  ASSERT_NE(store, nullptr);
  EXPECT_EQ(store->next_id(), 1U);
  auto records = scan_all(*store);
  ASSERT_TRUE(records.is_ok()) << records.status().to_string();
  EXPECT_TRUE(records->empty());
  EXPECT_EQ(store->read_body(1).code(), Code::kNotFound);
  EXPECT_TRUE(store->sync().is_ok());

  // Reopened, still empty, still 1.
  store.reset();
  store = must_open(tmp.sub("db"));
  ASSERT_NE(store, nullptr);
  EXPECT_EQ(store->next_id(), 1U);
  records = scan_all(*store);
  ASSERT_TRUE(records.is_ok()) << records.status().to_string();
  EXPECT_TRUE(records->empty());
}

// A store open elsewhere (another delayqd on the same data directory) is refused, and the
// error says so rather than only "lock".
TEST(RocksStoreTest, AStoreOpenElsewhereIsRefusedSayingSo) {
  TempDir tmp;
  auto first = must_open(tmp.sub("db"));
  ASSERT_NE(first, nullptr);
  auto second = RocksStore::open(tmp.sub("db"), {});
  ASSERT_FALSE(second.is_ok());
  EXPECT_EQ(second.code(), Code::kConflict);
  EXPECT_NE(second.status().message().find("another process"), std::string::npos)
      << second.status().to_string();
}

TEST(RocksStoreTest, WritesSurviveReopen) {
  TempDir tmp;
  const std::string dir = tmp.sub("db");
  {
    auto store = must_open(dir);
    ASSERT_NE(store, nullptr);
    const WriteSet first = put_jobs(1, 3, 100);
    ASSERT_TRUE(write(*store, {&first}, /*sync=*/true).is_ok());
    EXPECT_EQ(store->next_id(), 4U);

    WriteSet second = put_jobs(4, 4, 0);  // an empty body is a body
    second.erase(2);
    JobRecord changed = make_record(3);
    changed.state = JobState::kReserved;
    changed.counters.reserves = 99;
    second.put_record(changed);  // rewrites the record, keeps the body
    ASSERT_TRUE(write(*store, {&second}, /*sync=*/false).is_ok());
    EXPECT_EQ(store->next_id(), 5U);

    // Visible before the reopen too.
    auto body = store->read_body(1);
    ASSERT_TRUE(body.is_ok()) << body.status().to_string();
    EXPECT_EQ(body.value(), make_body(1, 100));
    EXPECT_EQ(store->read_body(2).code(), Code::kNotFound);
  }
  auto store = must_open(dir);
  ASSERT_NE(store, nullptr);
  EXPECT_EQ(store->next_id(), 5U);
  auto records = scan_all(*store);
  ASSERT_TRUE(records.is_ok()) << records.status().to_string();
  ASSERT_EQ(ids_of(records.value()), (std::vector<JobId>{1, 3, 4}));
  EXPECT_EQ(records.value()[0], make_record(1));
  EXPECT_EQ(records.value()[1].state, JobState::kReserved);
  EXPECT_EQ(records.value()[1].counters.reserves, 99U);
  EXPECT_EQ(records.value()[2], make_record(4));

  for (const JobId id : {JobId{1}, JobId{3}}) {
    auto body = store->read_body(id);
    ASSERT_TRUE(body.is_ok()) << body.status().to_string();
    EXPECT_EQ(body.value(), make_body(id, 100));
  }
  auto empty_body = store->read_body(4);
  ASSERT_TRUE(empty_body.is_ok()) << empty_body.status().to_string();
  EXPECT_EQ(empty_body.value(), "");
  const auto gone = store->read_body(2);
  EXPECT_EQ(gone.code(), Code::kNotFound);
  EXPECT_NE(gone.status().message().find('2'), std::string::npos) << gone.status().to_string();
}

TEST(RocksStoreTest, AttachmentsAndWebhooksSurviveReopenAndGoWhenErased) {
  TempDir tmp;
  const std::string dir = tmp.sub("db");
  const Delivery delivery{.url = "http://h/x",
                          .content_type = "text/plain",
                          .last_status = 500,
                          .last_error = "HTTP 500",
                          .last_attempt_unix_ms = 1'700'000'000'000};
  Webhook hook;
  hook.url = "https://h/in";
  hook.secrets = {"k"};
  {
    auto store = must_open(dir);
    ASSERT_NE(store, nullptr);
    WriteSet set = put_jobs(1, 2, 10);
    set.put_attachment(1, delivery);
    set.put_attachment(2, delivery);
    set.put_webhook("orders", hook);
    set.put_webhook("gone", hook);
    ASSERT_TRUE(write(*store, {&set}, /*sync=*/true).is_ok());
    WriteSet later;
    later.erase(2);
    later.erase_attachment(2);
    later.erase_webhook("gone");
    ASSERT_TRUE(write(*store, {&later}, /*sync=*/true).is_ok());
  }
  auto store = must_open(dir);
  ASSERT_NE(store, nullptr);
  auto kept = store->read_attachment(1);
  ASSERT_TRUE(kept.is_ok()) << kept.status().to_string();
  EXPECT_EQ(kept.value(), delivery);
  EXPECT_EQ(store->read_attachment(2).code(), Code::kNotFound);
  std::vector<std::pair<std::string, Webhook>> hooks;
  ASSERT_TRUE(store
                  ->scan_webhooks([&hooks](std::string tube, Webhook found) {
                    hooks.emplace_back(std::move(tube), std::move(found));
                    return Status::ok();
                  })
                  .is_ok());
  ASSERT_EQ(hooks.size(), 1U);
  EXPECT_EQ(hooks[0].first, "orders");
  EXPECT_EQ(hooks[0].second, hook);
  // Webhook keys sort after job keys ('w' > 'j'): the job scan does not see them.
  auto records = scan_all(*store);
  ASSERT_TRUE(records.is_ok()) << records.status().to_string();
  EXPECT_EQ(ids_of(records.value()), (std::vector<JobId>{1}));
}

// Rewrites the store's format marker behind its back, as another build would have left it.
// Opens the directory's RocksDB as it is (handles: [0] the default family, [1] the bodies one),
// for a test to write an older build's layout or look under the store; closes it after `use`.
using Families = std::vector<rocksdb::ColumnFamilyHandle*>;
void with_raw(const std::string& dir,
              const std::function<void(rocksdb::DB&, const Families&)>& use) {
  // Every family the store has (the far one since version 7), in the order RocksDB lists them.
  std::vector<std::string> names;
  ASSERT_TRUE(rocksdb::DB::ListColumnFamilies({}, dir, &names).ok());
  std::vector<rocksdb::ColumnFamilyDescriptor> families;
  for (const std::string& name : names) families.emplace_back(name, rocksdb::ColumnFamilyOptions());
  Families handles;
  rocksdb::DB* raw = nullptr;
  ASSERT_TRUE(rocksdb::DB::Open({}, dir, families, &handles, &raw).ok());
  use(*raw, handles);
  for (auto* handle : handles) (void)raw->DestroyColumnFamilyHandle(handle);
  delete raw;
}

void set_marker(const std::string& dir, std::uint64_t version) {
  with_raw(dir, [&](rocksdb::DB& raw, const Families&) {
    std::string bytes(8, '\0');
    for (std::size_t i = 0; i < 8; ++i) bytes[i] = static_cast<char>((version >> (8 * i)) & 0xFFU);
    EXPECT_TRUE(raw.Put({}, std::string(kFormatKey), bytes).ok());
  });
}

TEST(RocksStoreTest, AVersionOneStoreIsUpgradedAndANewerOneRefused) {
  TempDir tmp;
  const std::string dir = tmp.sub("db");
  {
    auto store = must_open(dir);
    ASSERT_NE(store, nullptr);
    const WriteSet jobs = put_jobs(1, 2, 10);
    ASSERT_TRUE(write(*store, {&jobs}, /*sync=*/true).is_ok());
  }
  // 1: what every build before attachments and webhooks wrote; 2: before a due time could lie
  // inside its millisecond.
  for (const std::uint64_t older : {std::uint64_t{1}, std::uint64_t{2}}) {
    set_marker(dir, older);
    auto store = must_open(dir);
    ASSERT_NE(store, nullptr);
    auto records = scan_all(*store);
    ASSERT_TRUE(records.is_ok()) << records.status().to_string();
    EXPECT_EQ(ids_of(records.value()), (std::vector<JobId>{1, 2})) << "version " << older;
  }
  set_marker(dir, kStoreVersion + 1);
  auto newer = RocksStore::open(dir, {});
  EXPECT_EQ(newer.status().code(), Code::kUnknownFormat) << newer.status().to_string();
  set_marker(dir, kStoreVersion);
  EXPECT_TRUE(RocksStore::open(dir, {}).is_ok());
}

// A version 3 store kept attachments in the default family; opening it moves them beside the
// bodies, in batches, and a move cut short by a crash is finished by the next open.
TEST(RocksStoreTest, AVersionThreeStoresAttachmentsAreMovedWhenOpened) {
  TempDir tmp;
  const std::string dir = tmp.sub("db");
  constexpr JobId kJobs = 2'500;  // more than one batch of the move
  const auto delivery_of = [](JobId id) {
    return Delivery{.url = "http://h/" + std::to_string(id), .content_type = "text/plain"};
  };
  {
    auto store = must_open(dir);
    ASSERT_NE(store, nullptr);
    const WriteSet jobs = put_jobs(1, kJobs, 10);
    ASSERT_TRUE(write(*store, {&jobs}, /*sync=*/true).is_ok());
  }
  // What a version 3 build left, attachments in the default family, after a move cut short by a
  // crash: job 1's already beside its body.
  with_raw(dir, [&](rocksdb::DB& raw, const Families& handles) {
    rocksdb::WriteBatch batch;
    ASSERT_TRUE(
        batch.Put(handles[1], job_key(kAttachmentPrefix, 1), encode_delivery(delivery_of(1))).ok());
    for (JobId id = 2; id <= kJobs; ++id) {
      ASSERT_TRUE(
          batch.Put(handles[0], job_key(kAttachmentPrefix, id), encode_delivery(delivery_of(id)))
              .ok());
    }
    ASSERT_TRUE(raw.Write({}, &batch).ok());
  });
  set_marker(dir, 3);
  {
    auto store = must_open(dir);
    ASSERT_NE(store, nullptr);
    for (JobId id = 1; id <= kJobs; ++id) {
      auto read = store->read_attachment(id);
      ASSERT_TRUE(read.is_ok()) << id << ": " << read.status().to_string();
      EXPECT_EQ(read.value(), delivery_of(id));
    }
    auto records = scan_all(*store);
    ASSERT_TRUE(records.is_ok()) << records.status().to_string();
    EXPECT_EQ(records.value().size(), kJobs);
  }
  // Nothing is left in the default family, and the marker says this build's version.
  with_raw(dir, [&](rocksdb::DB& raw, const Families& handles) {
    std::unique_ptr<rocksdb::Iterator> it(raw.NewIterator({}, handles[0]));
    it->Seek(std::string(1, kAttachmentPrefix));
    EXPECT_TRUE(!it->Valid() || it->key()[0] != kAttachmentPrefix);
    std::string marker;
    ASSERT_TRUE(raw.Get({}, handles[0], std::string(kFormatKey), &marker).ok());
    // u64 little-endian: 4 moved the attachments, later ones change nothing of theirs.
    EXPECT_EQ(marker, std::string(1, static_cast<char>(kStoreVersion)) + std::string(7, '\0'));
  });
}

// Up to version 5, schedules were kept in the default family, whose vector memtable RocksDB sorts
// at every read. Opening such a store moves them beside the bodies, where a read of one is cheap.
TEST(RocksStoreTest, AVersionFiveStoresSchedulesAreMovedWhenOpened) {
  TempDir tmp;
  const std::string dir = tmp.sub("db");
  constexpr int kSchedules = 2'100;  // more than one batch of the move
  const auto name_of = [](int i) { return "s-" + std::to_string(i); };
  {
    auto store = must_open(dir);
    ASSERT_NE(store, nullptr);
  }
  // What a version 5 build left: every schedule in the default family.
  with_raw(dir, [&](rocksdb::DB& raw, const Families& handles) {
    rocksdb::WriteBatch batch;
    for (int i = 0; i < kSchedules; ++i) {
      ASSERT_TRUE(batch.Put(handles[0], kSchedulePrefix + name_of(i), "record " + name_of(i)).ok());
    }
    ASSERT_TRUE(raw.Write({}, &batch).ok());
  });
  set_marker(dir, 5);
  auto store = must_open(dir);
  ASSERT_NE(store, nullptr);
  int scanned = 0;
  ASSERT_TRUE(store
                  ->scan_schedules([&](std::string name, std::string value) {
                    EXPECT_EQ(value, "record " + name);
                    ++scanned;
                    return Status::ok();
                  })
                  .is_ok());
  EXPECT_EQ(scanned, kSchedules);
  auto one = store->read_schedule(name_of(1234));
  ASSERT_TRUE(one.is_ok()) << one.status().to_string();
  EXPECT_EQ(one.value(), std::optional<std::string>("record " + name_of(1234)));
  auto none = store->read_schedule("nobody");
  ASSERT_TRUE(none.is_ok());
  EXPECT_EQ(none.value(), std::nullopt);
  // A write after the move lands where the reads look.
  WriteSet set;
  set.put_schedule(name_of(1), "changed");
  set.erase_schedule(name_of(2));
  ASSERT_TRUE(write(*store, {&set}, /*sync=*/true).is_ok());
  EXPECT_EQ(store->read_schedule(name_of(1)).value(), std::optional<std::string>("changed"));
  EXPECT_EQ(store->read_schedule(name_of(2)).value(), std::nullopt);
  store.reset();
  with_raw(dir, [&](rocksdb::DB& raw, const Families& handles) {
    std::unique_ptr<rocksdb::Iterator> it(raw.NewIterator({}, handles[0]));
    it->Seek(std::string(1, kSchedulePrefix));
    EXPECT_TRUE(!it->Valid() || it->key()[0] != kSchedulePrefix) << "left in the default family";
  });
}

// The far tier's family: a far job's record and its due, key and group entries, read by id, key,
// group and due time; counts by minute; an erase takes every entry; all of it survives a reopen.
TEST(RocksStoreTest, FarJobsAreReadByIdKeyGroupAndDueTimeAndSurviveReopen) {
  TempDir tmp;
  const std::string dir = tmp.sub("db");
  const auto far_record = [](JobId id, std::int64_t due) {
    JobRecord r;
    r.id = id;
    r.tube = "mail";
    r.state = JobState::kDelayed;
    r.due_unix_ms = due;
    r.created_unix_ms = 1'700'000'000'000;
    r.ttr_seconds = 60;
    r.key = "order-" + std::to_string(id);
    r.group = id % 2 == 0 ? "even" : "";
    return r;
  };
  {
    auto store = must_open(dir);
    ASSERT_NE(store, nullptr);
    WriteSet set = put_jobs(1, 3, 10);                               // near: records under 'j'
    set.far_put(far_record(2, 1'800'000'300'000), /*fresh=*/false);  // was near: its 'j' goes
    set.far_put(far_record(4, 1'800'000'100'000), /*fresh=*/true);
    set.put_body(4, "four");
    set.far_put(far_record(6, 1'800'000'200'000), /*fresh=*/true);
    set.put_body(6, "six");
    set.far_count("mail", 30'000'001, 1);
    set.far_count("mail", 30'000'003, 2);
    ASSERT_TRUE(write(*store, {&set}, /*sync=*/true).is_ok());
  }
  auto store = must_open(dir);
  ASSERT_NE(store, nullptr);
  auto near = scan_all(*store);
  ASSERT_TRUE(near.is_ok());
  EXPECT_EQ(ids_of(near.value()), (std::vector<JobId>{1, 3})) << "far jobs are not scanned";
  const auto six = store->far_job(6);
  ASSERT_TRUE(six.is_ok() && six.value().has_value());
  EXPECT_EQ(*six.value(), far_record(6, 1'800'000'200'000));
  EXPECT_EQ(store->far_job(1).value(), std::nullopt);
  EXPECT_EQ(store->far_key("mail", "order-4").value(), std::optional<JobId>(4));
  EXPECT_EQ(store->far_key("mail", "order-1").value(), std::nullopt);
  const auto group = [&store](std::string_view name) {
    std::vector<JobId> ids;
    EXPECT_TRUE(store
                    ->far_group("mail", name,
                                [&ids](JobId id) {
                                  ids.push_back(id);
                                  return true;
                                })
                    .is_ok());
    return ids;
  };
  using Counts = std::vector<std::tuple<std::string, std::int64_t, std::uint64_t>>;
  const auto counts = [&store] {
    Counts all;
    EXPECT_TRUE(store
                    ->far_counts([&all](std::string tube, std::int64_t minute, std::uint64_t n) {
                      all.emplace_back(tube, minute, n);
                      return Status::ok();
                    })
                    .is_ok());
    return all;
  };
  EXPECT_EQ(group("even"), (std::vector<JobId>{2, 4, 6}));
  const auto by_due = [&store](std::int64_t from) {
    std::vector<std::pair<std::int64_t, JobId>> all;
    EXPECT_TRUE(store
                    ->far_by_due("mail", from,
                                 [&](std::int64_t due, JobId id) {
                                   all.emplace_back(due, id);
                                   return true;
                                 })
                    .is_ok());
    return all;
  };
  using DueIds = std::vector<std::pair<std::int64_t, JobId>>;
  EXPECT_EQ(by_due(0),
            (DueIds{{1'800'000'100'000, 4}, {1'800'000'200'000, 6}, {1'800'000'300'000, 2}}));
  EXPECT_EQ(by_due(1'800'000'200'000), (DueIds{{1'800'000'200'000, 6}, {1'800'000'300'000, 2}}))
      << "a scan from a due time starts at the first job due then";
  EXPECT_EQ(by_due(1'800'000'200'001), (DueIds{{1'800'000'300'000, 2}}));
  EXPECT_EQ(by_due(1'800'000'300'001), DueIds{});
  EXPECT_EQ(counts(), (Counts{{"mail", 30'000'001, 1}, {"mail", 30'000'003, 2}}));
  EXPECT_EQ(store->read_body(6).value(), "six") << "bodies stay where they were";
  WriteSet erase;
  erase.far_erase(far_record(6, 1'800'000'200'000));
  erase.far_count("mail", 30'000'003, 0);
  ASSERT_TRUE(write(*store, {&erase}, /*sync=*/true).is_ok());
  EXPECT_EQ(store->far_job(6).value(), std::nullopt);
  EXPECT_EQ(store->far_key("mail", "order-6").value(), std::nullopt);
  EXPECT_EQ(group("even"), (std::vector<JobId>{2, 4}));
  EXPECT_EQ(counts(), (Counts{{"mail", 30'000'001, 1}})) << "a count of 0 is no entry";
}

// One far job written once, then many near ones: the far family's memtable would hold every
// write-ahead log file since (up to four times all the memtables); the logs stay within a bound
// of four write buffers (RocksDB flushes the family holding the oldest log past it).
TEST(RocksStoreTest, AFamilyWrittenOnceDoesNotKeepEveryLogSince) {
  TempDir tmp;
  const std::string dir = tmp.sub("db");
  constexpr std::size_t kBuffer = 256 << 10;
  auto store = must_open(dir, {.write_buffer_bytes = kBuffer});
  ASSERT_NE(store, nullptr);
  WriteSet far;
  JobRecord r;
  r.id = 1;
  r.tube = "t";
  r.state = JobState::kDelayed;
  r.due_unix_ms = 1'800'000'000'000;
  r.ttr_seconds = 60;
  far.far_put(r, /*fresh=*/true);
  ASSERT_TRUE(write(*store, {&far}, false).is_ok());
  for (JobId first = 2; first < 2 + 5'000; first += 50) {  // about 20 MiB of bodies
    const WriteSet set = put_jobs(first, first + 49, 4096);
    ASSERT_TRUE(write(*store, {&set}, false).is_ok());
  }
  std::uintmax_t logs = 0;
  for (const auto& file : files_ending(dir, ".log")) {
    if (file.filename().string() != "LOG") logs += fs::file_size(file);
  }
  EXPECT_LE(logs, 8 * kBuffer) << "write-ahead logs kept";
}

TEST(RocksStoreTest, FarFamiliesCompactedByLevelsOpenAndStayReadable) {
  // The far families are compacted tiered; a store an earlier build compacted by levels holds
  // their tables in levels 1 and below, which must open as runs and read as before.
  TempDir tmp;
  const std::string dir = tmp.sub("db");
  const auto far_record = [](JobId id) {
    JobRecord r = make_record(id);
    r.tube = "mail";
    r.state = JobState::kDelayed;
    r.due_unix_ms = 1'800'000'000'000 + static_cast<std::int64_t>(id) * 1000;
    return r;
  };
  {
    auto store = must_open(dir);
    ASSERT_NE(store, nullptr);
    WriteSet set;
    for (JobId id = 1; id <= 100; ++id) set.far_put(far_record(id), /*fresh=*/true);
    ASSERT_TRUE(write(*store, {&set}, /*sync=*/true).is_ok());
  }
  with_raw(dir, [](rocksdb::DB& raw, const Families& families) {
    rocksdb::CompactRangeOptions options;
    options.change_level = true;
    options.target_level = 3;
    for (auto* family : families) {
      ASSERT_TRUE(raw.CompactRange(options, family, nullptr, nullptr).ok());
    }
    std::string files;
    ASSERT_TRUE(raw.GetProperty(families.back(), "rocksdb.num-files-at-level3", &files));
    EXPECT_NE(files, "0") << "the far tables sit in level 3, as levelled compaction leaves them";
  });
  const auto by_due = [](RocksStore& store) {
    std::vector<JobId> ids;
    EXPECT_TRUE(store
                    .far_by_due("mail", 0,
                                [&ids](std::int64_t, JobId id) {
                                  ids.push_back(id);
                                  return true;
                                })
                    .is_ok());
    return ids;
  };
  std::vector<JobId> all(100);
  std::iota(all.begin(), all.end(), JobId{1});
  {
    auto store = must_open(dir);
    ASSERT_NE(store, nullptr);
    EXPECT_EQ(store->far_job(42).value(), std::optional<JobRecord>(far_record(42)));
    EXPECT_EQ(by_due(*store), all);
    WriteSet set;
    set.far_erase(far_record(42));
    set.far_put(far_record(101), /*fresh=*/true);
    ASSERT_TRUE(write(*store, {&set}, /*sync=*/true).is_ok());
  }
  auto store = must_open(dir);
  ASSERT_NE(store, nullptr);
  all.erase(std::find(all.begin(), all.end(), JobId{42}));
  all.push_back(101);
  EXPECT_EQ(by_due(*store), all);
  EXPECT_EQ(store->far_job(42).value(), std::nullopt);
  EXPECT_EQ(store->far_job(101).value(), std::optional<JobRecord>(far_record(101)));
}

// A version 6 store has no far family: opening it adds one, empty, and marks the store 7.
TEST(RocksStoreTest, AVersionSixStoreGetsTheFarFamilyWhenOpened) {
  TempDir tmp;
  const std::string dir = tmp.sub("db");
  {
    // What a version 6 build made: the default and bodies families, jobs, the marker at 6.
    rocksdb::DBOptions options;
    options.create_if_missing = true;
    options.create_missing_column_families = true;
    const std::vector<rocksdb::ColumnFamilyDescriptor> families = {
        {rocksdb::kDefaultColumnFamilyName, {}}, {std::string(kBodiesFamily), {}}};
    Families handles;
    rocksdb::DB* raw = nullptr;
    ASSERT_TRUE(rocksdb::DB::Open(options, dir, families, &handles, &raw).ok());
    std::string marker(8, '\0');
    marker[0] = 6;
    ASSERT_TRUE(raw->Put({}, std::string(kFormatKey), marker).ok());
    ASSERT_TRUE(raw->Put({}, job_key(kJobPrefix, 1), encode_record(make_record(1))).ok());
    for (auto* handle : handles) (void)raw->DestroyColumnFamilyHandle(handle);
    delete raw;
  }
  {
    auto store = must_open(dir);
    ASSERT_NE(store, nullptr);
    EXPECT_EQ(ids_of(scan_all(*store).value()), (std::vector<JobId>{1}));
    EXPECT_EQ(store->far_job(1).value(), std::nullopt);
    JobRecord far = make_record(2);
    far.state = JobState::kDelayed;
    WriteSet set;
    set.far_put(far, /*fresh=*/true);
    ASSERT_TRUE(write(*store, {&set}, /*sync=*/true).is_ok());
  }
  std::vector<std::string> names;
  ASSERT_TRUE(rocksdb::DB::ListColumnFamilies({}, dir, &names).ok());
  EXPECT_NE(std::find(names.begin(), names.end(), std::string(kFarFamily)), names.end());
  with_raw(dir, [](rocksdb::DB& raw, const Families&) {
    std::string marker;
    ASSERT_TRUE(raw.Get({}, std::string(kFormatKey), &marker).ok());
    EXPECT_EQ(static_cast<unsigned char>(marker[0]), kStoreVersion);
  });
  auto store = must_open(dir);
  EXPECT_TRUE(store->far_job(2).value().has_value());
}

TEST(RocksStoreTest, ScanIsInNumericIdOrder) {
  TempDir tmp;
  const std::string dir = tmp.sub("db");
  std::vector<JobId> ids = {256, 1, 255, 65536, 2, 1ULL << 40, 257, 65535};
  ids.insert(ids.end(), {std::numeric_limits<JobId>::max(), 1ULL << 32, 128, 127});
  {
    auto store = must_open(dir);
    ASSERT_NE(store, nullptr);
    for (const JobId id : ids) {
      WriteSet set;
      set.put_record(make_record(id));
      ASSERT_TRUE(write(*store, {&set}, false).is_ok());
    }
  }
  auto store = must_open(dir);
  ASSERT_NE(store, nullptr);
  auto records = scan_all(*store);
  ASSERT_TRUE(records.is_ok()) << records.status().to_string();
  std::sort(ids.begin(), ids.end());
  EXPECT_EQ(ids_of(records.value()), ids);
  for (const JobRecord& record : records.value()) EXPECT_EQ(record, make_record(record.id));
}

TEST(RocksStoreTest, SetsOfOneWriteApplyInOrder) {
  TempDir tmp;
  const std::string dir = tmp.sub("db");
  {
    auto store = must_open(dir);
    ASSERT_NE(store, nullptr);
    const WriteSet old_jobs = put_jobs(1, 2, 10);
    ASSERT_TRUE(write(*store, {&old_jobs}, true).is_ok());

    // a puts 10 and 11; b erases 10 and 1, rewrites 11; c only puts 12 and sets no next_id.
    WriteSet a = put_jobs(10, 11, 10);
    a.set_next_id(12);
    WriteSet b;
    b.erase(10);
    b.erase(1);
    JobRecord eleven = make_record(11);
    eleven.priority = 7;
    b.put_record(eleven);
    b.set_next_id(13);
    WriteSet c;
    c.put_record(make_record(12));
    ASSERT_TRUE(write(*store, {&a, &b, &c}, true).is_ok());
    EXPECT_EQ(store->next_id(), 13U);
  }
  auto store = must_open(dir);
  ASSERT_NE(store, nullptr);
  EXPECT_EQ(store->next_id(), 13U) << "the last next_id of the batch wins";
  auto records = scan_all(*store);
  ASSERT_TRUE(records.is_ok()) << records.status().to_string();
  ASSERT_EQ(ids_of(records.value()), (std::vector<JobId>{2, 11, 12}));
  EXPECT_EQ(records.value()[1].priority, 7U);
  EXPECT_EQ(store->read_body(10).code(), Code::kNotFound);
  EXPECT_EQ(store->read_body(1).code(), Code::kNotFound);
  EXPECT_TRUE(store->read_body(11).is_ok());
}

TEST(RocksStoreTest, NextIdAloneIsPersisted) {
  TempDir tmp;
  const std::string dir = tmp.sub("db");
  {
    auto store = must_open(dir);
    ASSERT_NE(store, nullptr);
    WriteSet set;
    set.set_next_id(1'000'000);
    ASSERT_TRUE(write(*store, {&set}, true).is_ok());
    // A write without a next_id leaves it alone.
    WriteSet other;
    other.put_record(make_record(5));
    ASSERT_TRUE(write(*store, {&other}, true).is_ok());
    EXPECT_EQ(store->next_id(), 1'000'000U);
  }
  auto store = must_open(dir);
  ASSERT_NE(store, nullptr);
  EXPECT_EQ(store->next_id(), 1'000'000U);
}

TEST(RocksStoreTest, ReopensManyTimes) {
  TempDir tmp;
  const std::string dir = tmp.sub("db");
  constexpr JobId kRounds = 12;
  for (JobId round = 1; round <= kRounds; ++round) {
    auto store = must_open(dir);
    ASSERT_NE(store, nullptr) << "round " << round;
    ASSERT_EQ(store->next_id(), round);
    auto records = scan_all(*store);
    ASSERT_TRUE(records.is_ok()) << records.status().to_string();
    ASSERT_EQ(records->size(), round - 1);
    const WriteSet set = put_jobs(round, round, 50);
    ASSERT_TRUE(write(*store, {&set}, round % 2 == 0).is_ok());
  }
  auto store = must_open(dir, {.create_if_missing = false});
  ASSERT_NE(store, nullptr);
  EXPECT_EQ(store->next_id(), kRounds + 1);
  auto records = scan_all(*store);
  ASSERT_TRUE(records.is_ok()) << records.status().to_string();
  EXPECT_EQ(records->size(), kRounds);
}

TEST(RocksStoreTest, MissingDirWithoutCreateIsRefused) {
  TempDir tmp;
  const std::string dir = tmp.sub("missing");
  auto opened = RocksStore::open(dir, {.create_if_missing = false});
  ASSERT_FALSE(opened.is_ok());
  EXPECT_NE(opened.status().message().find(dir), std::string::npos) << opened.status().to_string();
  std::cout << "[ observed ] missing dir: " << opened.status().to_string() << "\n";
}

// create_if_missing=false promises not to create the store; a refused open should leave no
// directory behind (a mistyped data directory would otherwise litter the disk).
TEST(RocksStoreTest, MissingDirWithoutCreateIsNotCreated) {
  TempDir tmp;
  const std::string dir = tmp.sub("missing");
  auto opened = RocksStore::open(dir, {.create_if_missing = false});
  ASSERT_FALSE(opened.is_ok());
  EXPECT_FALSE(fs::exists(dir)) << "a refused open created " << dir;
}

TEST(RocksStoreTest, SecondOpenOfTheSameDirIsRefused) {
  TempDir tmp;
  const std::string dir = tmp.sub("db");
  auto first = must_open(dir);
  ASSERT_NE(first, nullptr);
  auto second = RocksStore::open(dir);
  ASSERT_FALSE(second.is_ok()) << "two stores on one directory";
  EXPECT_NE(second.status().message().find(dir), std::string::npos) << second.status().to_string();
}

TEST(RocksStoreTest, RegularFileIsRefused) {
  TempDir tmp;
  const fs::path file = tmp.path() / "file";
  std::ofstream(file) << "not a store\n";
  auto opened = RocksStore::open(file.string());
  ASSERT_FALSE(opened.is_ok());
  EXPECT_NE(opened.status().message().find(file.string()), std::string::npos)
      << opened.status().to_string();
}

TEST(RocksStoreTest, ScanStopsAtTheVisitorsError) {
  TempDir tmp;
  auto store = must_open(tmp.sub("db"));
  ASSERT_NE(store, nullptr);
  const WriteSet set = put_jobs(1, 5, 1);
  ASSERT_TRUE(write(*store, {&set}, false).is_ok());
  std::vector<JobId> seen;
  Status s = store->scan([&](JobRecord&& record) {
    seen.push_back(record.id);
    return record.id == 2 ? Status(Code::kLimit, "enough") : Status::ok();
  });
  EXPECT_EQ(s.code(), Code::kLimit);
  EXPECT_EQ(s.message(), "enough");
  EXPECT_EQ(seen, (std::vector<JobId>{1, 2}));
}

// A record that does not decode (here: written with no tube, which decode refuses) stops the
// scan with kCorruption naming the job, after the records before it.
void expect_bad_record_stops_scan(Store& store) {
  WriteSet set = put_jobs(1, 2, 1);
  JobRecord bad = make_record(3);
  bad.tube.clear();
  set.put_record(bad);
  set.put_record(make_record(4));
  ASSERT_TRUE(store.write(std::vector<const WriteSet*>{&set}, false).is_ok());
  std::vector<JobId> seen;
  Status s = store.scan([&](JobRecord&& record) {
    seen.push_back(record.id);
    return Status::ok();
  });
  EXPECT_EQ(s.code(), Code::kCorruption) << s.to_string();
  EXPECT_NE(s.message().find("job record 3"), std::string::npos) << s.to_string();
  EXPECT_EQ(seen, (std::vector<JobId>{1, 2}));
}

TEST(RocksStoreTest, UndecodableRecordStopsScan) {
  TempDir tmp;
  auto store = must_open(tmp.sub("db"));
  ASSERT_NE(store, nullptr);
  expect_bad_record_stops_scan(*store);
}

TEST(MemoryStoreTest, UndecodableRecordStopsScan) {
  MemoryStore store;
  expect_bad_record_stops_scan(store);
}

TEST(MemoryStoreTest, AppliesSetsInOrder) {
  MemoryStore store;
  EXPECT_EQ(store.next_id(), 1U);
  WriteSet a = put_jobs(1, 3, 4);
  WriteSet b;
  b.erase(2);
  WriteSet c;
  c.put_record(make_record(9));
  ASSERT_TRUE(store.write(std::vector<const WriteSet*>{&a, &b, &c}, true).is_ok());
  EXPECT_EQ(store.next_id(), 4U);
  EXPECT_EQ(store.records(), 3U);
  EXPECT_EQ(store.bodies(), 2U);
  auto records = scan_all(store);
  ASSERT_TRUE(records.is_ok()) << records.status().to_string();
  EXPECT_EQ(ids_of(records.value()), (std::vector<JobId>{1, 3, 9}));
  EXPECT_EQ(store.read_body(2).code(), Code::kNotFound);
  auto body = store.read_body(3);
  ASSERT_TRUE(body.is_ok());
  EXPECT_EQ(body.value(), make_body(3, 4));
}

// ---------------------------------------------------------------------------------------------
// Damaged tables, CURRENT and MANIFEST. One pristine store with data in several table files is
// built once; each test damages a copy of it.

constexpr JobId kJobs = 2000;
constexpr std::size_t kBodyBytes = 512;

class DamagedStoreTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    pristine_ = new TempDir();
    const std::string dir = pristine_->sub("db");
    {
      // A 64 KiB memtable makes RocksDB flush (and compact) tables while we write.
      auto store = must_open(dir, {.write_buffer_bytes = 64 << 10});
      ASSERT_NE(store, nullptr);
      for (JobId first = 1; first <= kJobs; first += 50) {
        const WriteSet set = put_jobs(first, first + 49, kBodyBytes);
        ASSERT_TRUE(write(*store, {&set}, false).is_ok());
      }
      ASSERT_TRUE(store->sync().is_ok());
    }
    // Reopening replays what was left in the log into a table, so that every job now lies in a
    // table file, none only in the log.
    auto store = must_open(dir);
    ASSERT_NE(store, nullptr);
    ASSERT_EQ(store->next_id(), kJobs + 1);
  }
  static void TearDownTestSuite() {
    delete pristine_;
    pristine_ = nullptr;
  }

  void SetUp() override {
    ASSERT_NE(pristine_, nullptr);
    dir_ = tmp_.sub("db");
    copy_dir(pristine_->path() / "db", dir_);
    ASSERT_FALSE(files_ending(dir_, ".sst").empty()) << "the pristine store has no table files";
  }

  fs::path largest_table() const {
    fs::path largest;
    for (const fs::path& file : files_ending(dir_, ".sst")) {
      if (largest.empty() || fs::file_size(file) > fs::file_size(largest)) largest = file;
    }
    return largest;
  }

  // Opens the damaged copy and reads every record and body back. Returns the first error;
  // anything read that differs from what was written, or that is missing without an error, is
  // a test failure: damage may be refused, never read back wrong or silently dropped.
  Status read_back(const RocksStoreOptions& options = {}) const {
    auto opened = RocksStore::open(dir_, options);
    if (!opened.is_ok()) return opened.status();
    RocksStore& store = *opened.value();
    JobId expected = 1;
    Status scanned = store.scan([&](JobRecord&& record) {
      EXPECT_EQ(record.id, expected) << "scan skipped or repeated a job";
      EXPECT_EQ(record, make_record(record.id));
      expected = record.id + 1;
      return Status::ok();
    });
    if (!scanned.is_ok()) return scanned;
    EXPECT_EQ(expected, kJobs + 1) << "scan returned ok without every job";
    EXPECT_EQ(store.next_id(), kJobs + 1);
    for (JobId id = 1; id <= kJobs; ++id) {
      auto body = store.read_body(id);
      if (body.code() == Code::kNotFound) {
        ADD_FAILURE() << "body " << id << " vanished without an error";
        return body.status();
      }
      if (!body.is_ok()) return body.status();
      EXPECT_EQ(body.value(), make_body(id, kBodyBytes)) << "body " << id;
    }
    return Status::ok();
  }

  static void expect_refused(const Status& s, const std::string& what) {
    std::cout << "[ observed ] " << what << ": " << s.to_string() << "\n";
    ASSERT_FALSE(s.is_ok()) << what << " was read back as if intact";
    EXPECT_TRUE(s.code() == Code::kCorruption || s.code() == Code::kIOError) << s.to_string();
  }

  static inline TempDir* pristine_ = nullptr;
  TempDir tmp_;
  std::string dir_;
};

TEST_F(DamagedStoreTest, PristineCopyReadsBack) {
  const Status s = read_back();
  EXPECT_TRUE(s.is_ok()) << s.to_string();
}

TEST_F(DamagedStoreTest, FlippedTableBytesAreRefused) {
  const fs::path table = largest_table();
  const std::uintmax_t size = fs::file_size(table);
  flip_bytes(table, size / 2, 16);
  expect_refused(read_back(), "16 bytes flipped in the middle of " + table.filename().string() +
                                  " (" + std::to_string(size) + " bytes)");
}

TEST_F(DamagedStoreTest, HalfATableIsRefused) {
  const fs::path table = largest_table();
  fs::resize_file(table, fs::file_size(table) / 2);
  expect_refused(read_back(), "table " + table.filename().string() + " cut to half");
}

TEST_F(DamagedStoreTest, MissingTableIsRefused) {
  const fs::path table = largest_table();
  fs::remove(table);
  expect_refused(read_back(), "table " + table.filename().string() + " deleted");
}

TEST_F(DamagedStoreTest, CutManifestIsRefused) {
  const auto manifests = files_starting(dir_, "MANIFEST-");
  ASSERT_EQ(manifests.size(), 1U);
  fs::resize_file(manifests[0], 10);
  expect_refused(read_back(), "MANIFEST cut to 10 bytes");
}

TEST_F(DamagedStoreTest, MissingCurrentIsRefusedWithoutCreate) {
  fs::remove(fs::path(dir_) / "CURRENT");
  expect_refused(read_back({.create_if_missing = false}),
                 "CURRENT deleted, create_if_missing=false");
}

// The default options create a missing store. A directory that holds a store's tables and
// MANIFEST but lost its CURRENT file is not a missing store: opening it as a new, empty one
// loses every job without a word.
TEST_F(DamagedStoreTest, MissingCurrentIsRefusedWithCreate) {
  fs::remove(fs::path(dir_) / "CURRENT");
  expect_refused(read_back(), "CURRENT deleted, create_if_missing=true");
}

// The same, when the log files are gone too (an operator cleaning up "*.log"): nothing in the
// directory says "store" to RocksDB any more but the MANIFEST and the tables.
TEST_F(DamagedStoreTest, MissingCurrentAndLogsAreRefusedWithCreate) {
  fs::remove(fs::path(dir_) / "CURRENT");
  for (const fs::path& log : files_ending(dir_, ".log")) fs::remove(log);
  const std::size_t tables = files_ending(dir_, ".sst").size();
  expect_refused(read_back(), "CURRENT and *.log deleted, create_if_missing=true");
  EXPECT_EQ(files_ending(dir_, ".sst").size(), tables) << "open deleted the store's tables";
}

// ---------------------------------------------------------------------------------------------
// A torn write-ahead log. The store keeps running while its directory is copied, which is what
// a power cut leaves on disk (synced data, no flush to tables, no clean close); the copies'
// logs are then cut or extended.

class TornLogTest : public ::testing::Test {
 protected:
  static constexpr JobId kSynced = 5;  // jobs 1..5, each in a synced write of its own
  // Jobs 6 and 7: two WriteSets in one synced write, the last record of the log.

  void SetUp() override {
    // The default 32 MiB memtable: nothing is flushed to a table in this test.
    live_ = must_open(tmp_.sub("live"));
    ASSERT_NE(live_, nullptr);
    for (JobId id = 1; id <= kSynced; ++id) {
      const WriteSet set = put_jobs(id, id, 100);
      ASSERT_TRUE(write(*live_, {&set}, true).is_ok());
    }
    copy_dir(tmp_.sub("live"), tmp_.sub("before"));
    const WriteSet six = put_jobs(6, 6, 100);
    const WriteSet seven = put_jobs(7, 7, 100);
    ASSERT_TRUE(write(*live_, {&six, &seven}, true).is_ok());
    copy_dir(tmp_.sub("live"), tmp_.sub("after"));

    ASSERT_TRUE(files_ending(tmp_.sub("after"), ".sst").empty())
        << "the jobs must lie in the log only";
    const auto logs_before = files_ending(tmp_.sub("before"), ".log");
    const auto logs_after = files_ending(tmp_.sub("after"), ".log");
    ASSERT_EQ(logs_before.size(), 1U);
    ASSERT_EQ(logs_after.size(), 1U);
    ASSERT_EQ(logs_before[0].filename(), logs_after[0].filename());
    log_name_ = logs_after[0].filename();
    end_of_five_ = fs::file_size(logs_before[0]);
    end_of_seven_ = fs::file_size(logs_after[0]);
    ASSERT_GT(end_of_seven_, end_of_five_ + 200) << "the last write is one log record of ~500 B";
  }

  // A copy of "after" whose log is `size` bytes long (cut, or extended by `garbage`).
  std::string damaged_copy(std::uintmax_t size, const std::string& garbage = {}) {
    const std::string dir = tmp_.sub("copy-" + std::to_string(copies_++));
    copy_dir(tmp_.sub("after"), dir);
    const fs::path log = fs::path(dir) / log_name_;
    fs::resize_file(log, size);
    if (!garbage.empty()) append_bytes(log, garbage);
    return dir;
  }

  // Opens `dir` (which must open) and checks that it holds exactly jobs 1..last.
  static void expect_jobs(const std::string& dir, JobId last, const RocksStoreOptions& options) {
    auto store = must_open(dir, options);
    ASSERT_NE(store, nullptr);
    EXPECT_EQ(store->next_id(), last + 1);
    auto records = scan_all(*store);
    ASSERT_TRUE(records.is_ok()) << records.status().to_string();
    std::vector<JobId> expected;
    for (JobId id = 1; id <= last; ++id) expected.push_back(id);
    EXPECT_EQ(ids_of(records.value()), expected);
    for (const JobRecord& record : records.value()) EXPECT_EQ(record, make_record(record.id));
    for (JobId id = 1; id <= 7; ++id) {
      auto body = store->read_body(id);
      if (id <= last) {
        ASSERT_TRUE(body.is_ok()) << "job " << id << ": " << body.status().to_string();
        EXPECT_EQ(body.value(), make_body(id, 100));
      } else {
        EXPECT_EQ(body.code(), Code::kNotFound) << "job " << id;
      }
    }
  }

  TempDir tmp_;
  std::unique_ptr<RocksStore> live_;
  fs::path log_name_;
  std::uintmax_t end_of_five_ = 0;
  std::uintmax_t end_of_seven_ = 0;
  int copies_ = 0;
};

TEST_F(TornLogTest, WholeLogOpensStrictly) {
  expect_jobs(tmp_.sub("after"), 7, {.create_if_missing = false});
}

TEST_F(TornLogTest, LogCutAtARecordBoundaryOpensStrictly) {
  // Nothing is torn: the log simply ends after job 5, as if 6 and 7 were never written.
  expect_jobs(damaged_copy(end_of_five_), kSynced, {.create_if_missing = false});
}

TEST_F(TornLogTest, TornLastRecordIsDroppedOnOpen) {
  const std::uintmax_t record = end_of_seven_ - end_of_five_;
  // Inside the 7-byte record header, just after it, in the middle, and one byte short: what a
  // kill -9 between two write() calls of one record, or a power cut, leaves.
  for (const std::uintmax_t kept : {std::uintmax_t{1}, std::uintmax_t{3}, std::uintmax_t{7},
                                    std::uintmax_t{8}, record / 2, record - 1}) {
    SCOPED_TRACE("kept " + std::to_string(kept) + " of the last record's " +
                 std::to_string(record) + " bytes");
    const std::string dir = damaged_copy(end_of_five_ + kept);
    // Every synced write before the torn one is there; 6 and 7 (one write, never synced) are
    // both gone, never one without the other. The store opens again the same way.
    expect_jobs(dir, kSynced, {.create_if_missing = false});
    expect_jobs(dir, kSynced, {.create_if_missing = false});
    expect_jobs(dir, kSynced, {.create_if_missing = false, .accept_torn_tail = true});
  }
}

// The reader of log_damage.h against logs RocksDB wrote: every record of them reads back,
// records split over blocks included; one byte changed anywhere is a bad record at or before it.
TEST_F(TornLogTest, EveryRecordOfAWholeLogReadsBack) {
  const auto read = [](const fs::path& file) {
    std::ifstream in(file, std::ios::binary);
    return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  };
  const std::string small = read(fs::path(tmp_.sub("after")) / log_name_);
  EXPECT_EQ(first_bad_record(small), std::nullopt);
  // Writes of up to 100 KB, so that records span blocks (first, middle and last fragments).
  auto store = must_open(tmp_.sub("big"));
  ASSERT_NE(store, nullptr);
  for (JobId id = 1; id <= 40; ++id) {
    const WriteSet set = put_jobs(id, id, 2500 * static_cast<std::size_t>(id));
    ASSERT_TRUE(write(*store, {&set}, true).is_ok());
  }
  const auto logs = files_ending(tmp_.sub("big"), ".log");
  ASSERT_EQ(logs.size(), 1U);
  const std::string big = read(logs[0]);
  ASSERT_GT(big.size(), 20U * 32768) << "the records must span many blocks";
  EXPECT_EQ(first_bad_record(big), std::nullopt);
  std::mt19937_64 rng(delayq::testing::test_seed());
  for (int i = 0; i < 20; ++i) {
    std::string damaged = big;
    const std::size_t at = rng() % damaged.size();
    damaged[at] = static_cast<char>(damaged[at] ^ 0x20);
    const auto bad = first_bad_record(damaged);
    if (!bad) {  // only a block's zero padding (its last 6 bytes at most) is read by nobody
      EXPECT_LT(32768 - at % 32768, 7U) << "byte " << at << " changed, nothing found";
      continue;
    }
    EXPECT_LE(*bad, at);
    EXPECT_GT(*bad + 32768 + 11, at) << "the bad record starts a block or more before the byte";
    // More than a block of sound log follows, except where the byte lies in the last blocks.
    if (at + 2 * 32768 < damaged.size()) {
      EXPECT_TRUE(sound_record_after(damaged, *bad));
    }
  }
}

// A last record whose bytes were garbled (a power cut that left its pages half written, or a
// torn write followed by junk) has nothing sound after it: dropped like a torn one, and the
// store says what it dropped.
TEST_F(TornLogTest, AGarbledLastRecordIsDroppedOnOpen) {
  const std::uintmax_t record = end_of_seven_ - end_of_five_;
  std::mt19937 rng(23);
  std::string junk(record, '\0');
  for (char& c : junk) c = static_cast<char>(1 + rng() % 255);
  const std::string torn_then_junk = damaged_copy(end_of_five_ + record / 2, junk);
  const std::string flipped = damaged_copy(end_of_seven_);
  flip_bytes(fs::path(flipped) / log_name_, end_of_seven_ - 40, 1);
  for (const std::string& dir : {torn_then_junk, flipped}) {
    SCOPED_TRACE(dir);
    {
      auto store = must_open(dir, {.create_if_missing = false});
      ASSERT_NE(store, nullptr);
      EXPECT_NE(store->dropped().find("torn last write"), std::string::npos) << store->dropped();
      EXPECT_NE(store->dropped().find(log_name_.string()), std::string::npos) << store->dropped();
    }
    expect_jobs(dir, kSynced, {.create_if_missing = false});
  }
}

TEST_F(TornLogTest, GarbageAfterTheLastRecordIsDropped) {
  std::mt19937 rng(17);
  std::string garbage(64, '\0');
  for (char& c : garbage) c = static_cast<char>(1 + rng() % 255);  // never zero padding
  const std::string dir = damaged_copy(end_of_seven_, garbage);
  expect_jobs(dir, 7, {.create_if_missing = false});
}

// accept_torn_tail drops everything after the first bad record, even synced records behind it,
// as rocks_store.h says. Damage in the middle of job 3's record loses 3, 4, 5, 6 and 7.
TEST_F(TornLogTest, AcceptedCorruptionInTheMiddleDropsAllThatFollows) {
  const std::string dir = damaged_copy(end_of_seven_);
  const fs::path log = fs::path(dir) / log_name_;
  // Find job 3's body in the log by its bytes and flip one byte of it.
  std::ifstream in(log, std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const std::size_t at = bytes.find(make_body(3, 100));
  ASSERT_NE(at, std::string::npos);
  ASSERT_EQ(bytes.find(make_body(3, 100), at + 1), std::string::npos);
  flip_bytes(log, at + 50, 1);

  auto strict = RocksStore::open(dir, {.create_if_missing = false});
  ASSERT_FALSE(strict.is_ok()) << "damage with log after it opened without accept_torn_tail";
  EXPECT_EQ(strict.code(), Code::kCorruption) << strict.status().to_string();
  EXPECT_NE(strict.status().message().find(dir), std::string::npos) << strict.status().to_string();
  EXPECT_NE(strict.status().message().find(log_name_.string()), std::string::npos)
      << strict.status().to_string();
  EXPECT_NE(strict.status().message().find("--accept-torn-tail"), std::string::npos)
      << strict.status().to_string();
  std::cout << "[ observed ] damaged middle record: " << strict.status().to_string() << "\n";
  expect_jobs(dir, 2, {.create_if_missing = false, .accept_torn_tail = true});
  auto accepted = must_open(dir, {.create_if_missing = false, .accept_torn_tail = true});
  ASSERT_NE(accepted, nullptr);
  // Dropped at the first open; this one finds a sound log and drops nothing.
  EXPECT_EQ(accepted->dropped(), "");
}

}  // namespace
}  // namespace delayq::store
