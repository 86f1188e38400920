// committer_test.cc — Durability parsing and the group committer over MemoryStore, RocksStore
// and stores that count, fail or stall: every callback runs once, in submission order, with the
// batch's status; a failure is sticky; each policy syncs as it promises.
// Interval pacing and sync times are checked exactly on a ManualClock: a test moves it and
// pokes the committer, and nothing sleeps. CommitterSlowTest (label slow) runs interval:5 on
// steady_clock, to check that the committer wakes by itself there.
#include "store/committer.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include "store/memory_store.h"
#include "store/rocks_store.h"

namespace delayq::store {
namespace {

namespace fs = std::filesystem;
using std::chrono::milliseconds;

// A clock that moves only when told; the committer reads it through clock().
class ManualClock {
 public:
  [[nodiscard]] std::chrono::steady_clock::time_point now() const {
    return std::chrono::steady_clock::time_point(std::chrono::nanoseconds(ns_.load()));
  }
  void advance(std::chrono::nanoseconds by) { ns_.fetch_add(by.count()); }
  [[nodiscard]] Committer::Clock clock() {
    return [this] { return now(); };
  }

 private:
  std::atomic<std::int64_t> ns_{std::chrono::nanoseconds(std::chrono::hours(1)).count()};
};

TEST(DurabilityTest, ParsesEveryPolicy) {
  struct Case {
    const char* text;
    Durability::Mode mode;
    milliseconds interval;
  };
  for (const Case& c : {Case{"always", Durability::Mode::kAlways, milliseconds{0}},
                        Case{"none", Durability::Mode::kNone, milliseconds{0}},
                        Case{"interval:1", Durability::Mode::kInterval, milliseconds{1}},
                        Case{"interval:250", Durability::Mode::kInterval, milliseconds{250}},
                        Case{"interval:60000", Durability::Mode::kInterval, milliseconds{60000}}}) {
    auto parsed = Durability::parse(c.text);
    ASSERT_TRUE(parsed.is_ok()) << c.text << ": " << parsed.status().to_string();
    EXPECT_EQ(parsed->mode, c.mode) << c.text;
    EXPECT_EQ(parsed->interval, c.interval) << c.text;
    EXPECT_EQ(parsed->to_string(), c.text);
    auto again = Durability::parse(parsed->to_string());
    ASSERT_TRUE(again.is_ok()) << c.text;
    EXPECT_EQ(again->mode, parsed->mode);
    EXPECT_EQ(again->interval, parsed->interval);
  }
  EXPECT_EQ(Durability{}.to_string(), "always") << "the default";
}

TEST(DurabilityTest, RejectsEverythingElse) {
  for (const char* text : {"", "sometimes", "interval:", "interval:0", "interval:60001",
                           "interval:5x", "interval:-5", "interval:+5", "interval: 5", "Always",
                           "always ", "none\n", "interval", "interval:99999999999999999999"}) {
    auto parsed = Durability::parse(text);
    ASSERT_FALSE(parsed.is_ok()) << "'" << text << "' was accepted";
    EXPECT_EQ(parsed.code(), Code::kInvalidArgument) << text;
    EXPECT_NE(parsed.status().message().find("'" + std::string(text) + "'"), std::string::npos)
        << "the message should quote the input: " << parsed.status().to_string();
  }
}

// A Store in front of a MemoryStore that records how it is called, and can be told to fail or
// to run a hook inside each write and sync (say, to move a ManualClock).
class ProbeStore final : public Store {
 public:
  Status write(std::span<const WriteSet* const> sets, bool sync) override {
    std::lock_guard lock(mutex_);
    if (during_write_) during_write_();
    ++writes_;
    if (sync) ++synced_writes_;
    if (!write_error_.is_ok()) return write_error_;
    if (!sync) dirty_ = true;
    return inner_.write(sets, sync);
  }
  Status sync() override {
    std::lock_guard lock(mutex_);
    if (during_sync_) during_sync_();
    ++syncs_;
    if (!sync_error_.is_ok()) return sync_error_;
    dirty_ = false;
    return inner_.sync();
  }
  Status scan(const std::function<Status(JobRecord&&)>& visit) override {
    std::lock_guard lock(mutex_);
    return inner_.scan(visit);
  }
  Result<std::optional<std::string>> far_get(const std::string& key) override {
    return inner_.far_get(key);
  }
  Status far_scan(const std::string& prefix, const std::string& start,
                  const std::function<bool(std::string_view, std::string_view)>& visit) override {
    return inner_.far_scan(prefix, start, visit);
  }
  Result<Delivery> read_attachment(JobId id) override { return inner_.read_attachment(id); }
  Status scan_webhooks(const std::function<Status(std::string, Webhook)>& visit) override {
    return inner_.scan_webhooks(visit);
  }
  Status scan_max_attempts(
      const std::function<Status(std::string, std::uint32_t)>& visit) override {
    return inner_.scan_max_attempts(visit);
  }
  Status scan_flows(const std::function<Status(std::string, FlowSettings)>& visit) override {
    return inner_.scan_flows(visit);
  }
  Status scan_schedules(const std::function<Status(std::string, std::string)>& visit) override {
    return inner_.scan_schedules(visit);
  }
  Result<std::optional<std::string>> read_schedule(std::string_view name) override {
    return inner_.read_schedule(name);
  }
  Result<std::string> read_body(JobId id) override {
    std::lock_guard lock(mutex_);
    return inner_.read_body(id);
  }
  [[nodiscard]] JobId next_id() const override {
    std::lock_guard lock(mutex_);
    return inner_.next_id();
  }
  [[nodiscard]] std::uint64_t estimated_jobs() const override {
    std::lock_guard lock(mutex_);
    return inner_.estimated_jobs();
  }

  void fail_writes(Status error) {
    std::lock_guard lock(mutex_);
    write_error_ = std::move(error);
  }
  void fail_syncs(Status error) {
    std::lock_guard lock(mutex_);
    sync_error_ = std::move(error);
  }
  void during_write(std::function<void()> hook) {
    std::lock_guard lock(mutex_);
    during_write_ = std::move(hook);
  }
  void during_sync(std::function<void()> hook) {
    std::lock_guard lock(mutex_);
    during_sync_ = std::move(hook);
  }
  [[nodiscard]] int writes() const {
    std::lock_guard lock(mutex_);
    return writes_;
  }
  [[nodiscard]] int synced_writes() const {
    std::lock_guard lock(mutex_);
    return synced_writes_;
  }
  // A write without sync has not been followed by a sync yet.
  [[nodiscard]] bool dirty() const {
    std::lock_guard lock(mutex_);
    return dirty_;
  }
  [[nodiscard]] int syncs() const {
    std::lock_guard lock(mutex_);
    return syncs_;
  }
  [[nodiscard]] std::size_t records() const {
    std::lock_guard lock(mutex_);
    return inner_.records();
  }

 private:
  mutable std::mutex mutex_;
  MemoryStore inner_;
  Status write_error_;
  Status sync_error_;
  std::function<void()> during_write_;
  std::function<void()> during_sync_;
  int writes_ = 0;
  int synced_writes_ = 0;
  int syncs_ = 0;
  bool dirty_ = false;
};

// One engine step: job `id` put, the high-water mark moved past it.
WriteSet step(JobId id) {
  JobRecord record;
  record.id = id;
  record.tube = "default";
  record.priority = static_cast<std::uint32_t>(id);
  WriteSet set;
  set.put_record(record);
  set.put_body(id, "body-" + std::to_string(id));
  set.set_next_id(id + 1);
  return set;
}

// What the callbacks saw. Written on the committer thread, read after flush() or the
// committer's destructor, both of which order the writes before the reads.
struct Calls {
  std::vector<JobId> order;
  std::vector<Status> statuses;

  Committer::Done done(JobId id) {
    return [this, id](const Status& s) {
      order.push_back(id);
      statuses.push_back(s);
    };
  }
};

std::vector<JobId> one_to(JobId n) {
  std::vector<JobId> ids;
  for (JobId id = 1; id <= n; ++id) ids.push_back(id);
  return ids;
}

void submit_and_check(Store& store, Durability durability, JobId steps,
                      Committer::Clock clock = {}) {
  Calls calls;
  Committer committer(store, durability, {}, std::move(clock));
  for (JobId id = 1; id <= steps; ++id) committer.submit(step(id), calls.done(id));
  const Status flushed = committer.flush();
  EXPECT_TRUE(flushed.is_ok()) << flushed.to_string();
  EXPECT_EQ(calls.order, one_to(steps)) << "each callback once, in submission order";
  for (const Status& s : calls.statuses) ASSERT_TRUE(s.is_ok()) << s.to_string();
  const CommitterStats stats = committer.stats();
  EXPECT_EQ(stats.steps, steps);
  EXPECT_GE(stats.batches, 1U);
  EXPECT_LE(stats.batches, stats.steps);
  EXPECT_EQ(store.next_id(), steps + 1);
  std::cout << "[ observed ] " << durability.to_string() << ": " << stats.steps << " steps in "
            << stats.batches << " batches, " << stats.syncs << " syncs\n";
}

TEST(CommitterTest, MemoryStoreAlways) {
  ProbeStore store;
  submit_and_check(store, {}, 1000);
  EXPECT_EQ(store.records(), 1000U);
  EXPECT_EQ(store.synced_writes(), store.writes()) << "always: every batch is written with sync";
  EXPECT_EQ(store.syncs(), 0);
}

TEST(CommitterTest, MemoryStoreNone) {
  ProbeStore store;
  submit_and_check(store, {Durability::Mode::kNone, {}}, 1000);
  EXPECT_EQ(store.records(), 1000U);
  EXPECT_EQ(store.synced_writes(), 0) << "none: never synced";
  EXPECT_EQ(store.syncs(), 0);
}

TEST(CommitterTest, FlushWithNothingSubmittedReturnsAtOnce) {
  MemoryStore store;
  Committer committer(store, {});
  EXPECT_TRUE(committer.flush().is_ok());
  EXPECT_EQ(committer.stats().steps, 0U);
  EXPECT_EQ(committer.stats().batches, 0U);
}

// A step the caller retires is held until the committer's next round, then freed on the
// committer's thread, not the caller's.
TEST(CommitterTest, RetiredStepsAreFreedOnTheCommittersThreadAtItsNextRound) {
  MemoryStore store;
  std::mutex mutex;
  std::optional<std::thread::id> freed_on;
  Committer committer(store, {});  // last: it may free the retired step as it goes
  std::shared_ptr<const WriteSet> retired(new WriteSet(step(1)), [&](const WriteSet* set) {
    const std::lock_guard lock(mutex);
    freed_on = std::this_thread::get_id();
    delete set;
  });
  committer.retire({std::move(retired)});
  EXPECT_TRUE(committer.flush().is_ok());  // nothing submitted: no round
  {
    const std::lock_guard lock(mutex);
    EXPECT_FALSE(freed_on.has_value()) << "freed before a round";
  }
  committer.submit(step(2), {});
  EXPECT_TRUE(committer.flush().is_ok());
  const std::lock_guard lock(mutex);
  ASSERT_TRUE(freed_on.has_value()) << "held after a round";
  EXPECT_NE(*freed_on, std::this_thread::get_id()) << "freed on the caller's thread";
}

// Retired steps that hold a mebibyte wake an idle committer to free them: an idle server
// does not keep them.
TEST(CommitterTest, AMebibyteOfRetiredStepsIsFreedWithoutARound) {
  MemoryStore store;
  std::atomic<bool> freed{false};
  Committer committer(store, {});
  WriteSet big;
  big.put_body(1, std::string(std::size_t{1} << 20, 'x'));
  std::shared_ptr<const WriteSet> retired(new WriteSet(std::move(big)), [&](const WriteSet* set) {
    delete set;
    freed = true;
  });
  committer.retire({std::move(retired)});
  for (int i = 0; i < 1000 && !freed; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_TRUE(freed) << "still held after 10 s with nothing submitted";
}

TEST(CommitterTest, SubmitsFromSeveralThreadsKeepEachThreadsOrder) {
  constexpr int kThreads = 4;
  constexpr JobId kPerThread = 250;
  MemoryStore store;
  std::vector<std::vector<JobId>> seen(kThreads);  // appended to on the committer thread only
  std::atomic<int> calls{0};
  {
    Committer committer(store, {});
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&, t] {
        for (JobId i = 0; i < kPerThread; ++i) {
          const JobId id = static_cast<JobId>(t) * kPerThread + i + 1;
          WriteSet set;
          set.erase(id);
          committer.submit(std::move(set), [&, t, id](const Status& s) {
            EXPECT_TRUE(s.is_ok());
            seen[static_cast<std::size_t>(t)].push_back(id);
            calls.fetch_add(1);
          });
        }
      });
    }
    for (std::thread& thread : threads) thread.join();
    EXPECT_TRUE(committer.flush().is_ok());
    EXPECT_EQ(committer.stats().steps, kThreads * kPerThread);
  }
  EXPECT_EQ(calls.load(), kThreads * static_cast<int>(kPerThread));
  for (int t = 0; t < kThreads; ++t) {
    std::vector<JobId> expected;
    for (JobId i = 0; i < kPerThread; ++i) {
      expected.push_back(static_cast<JobId>(t) * kPerThread + i + 1);
    }
    EXPECT_EQ(seen[static_cast<std::size_t>(t)], expected) << "thread " << t;
  }
}

// Under interval a caller may write to the store itself and say so (written()): the committer
// syncs those writes as its own, 5 ms after the last sync, and only once for each.
TEST(CommitterTest, WritesMadeElsewhereAreSyncedWithinTheInterval) {
  ProbeStore store;
  ManualClock clock;
  Committer committer(store, {Durability::Mode::kInterval, milliseconds{5}}, {}, clock.clock());
  const auto write_elsewhere = [&](JobId id) {
    const WriteSet set = step(id);
    const WriteSet* sets[] = {&set};
    ASSERT_TRUE(store.write(sets, false).is_ok());
    ASSERT_TRUE(committer.written().is_ok());
  };
  write_elsewhere(1);
  write_elsewhere(2);
  clock.advance(milliseconds{4});
  ASSERT_TRUE(committer.poke().is_ok());
  EXPECT_EQ(store.syncs(), 0) << "synced 4 ms after the last sync, under interval:5";
  EXPECT_TRUE(store.dirty());
  clock.advance(milliseconds{1});
  ASSERT_TRUE(committer.poke().is_ok());
  EXPECT_EQ(store.syncs(), 1);
  EXPECT_FALSE(store.dirty()) << "a write made elsewhere was not synced within the interval";

  clock.advance(milliseconds{20});  // nothing new: no sync
  ASSERT_TRUE(committer.poke().is_ok());
  EXPECT_EQ(store.syncs(), 1);

  write_elsewhere(3);  // 25 ms after the last sync: due at once
  ASSERT_TRUE(committer.poke().is_ok());
  EXPECT_EQ(store.syncs(), 2);
  EXPECT_FALSE(store.dirty());
  write_elsewhere(4);  // written just after a sync: waits for the next interval, then synced
  ASSERT_TRUE(committer.poke().is_ok());
  EXPECT_EQ(store.syncs(), 2);
  clock.advance(milliseconds{5});
  ASSERT_TRUE(committer.poke().is_ok());
  EXPECT_EQ(store.syncs(), 3);
  EXPECT_FALSE(store.dirty());
}

// Under interval:5 batches are written without sync and synced once 5 ms have passed since the
// last sync, whether or not anything else is written; once everything is synced the committer
// sleeps instead of syncing again and again.
TEST(CommitterTest, MemoryStoreInterval) {
  ProbeStore store;
  ManualClock clock;
  Committer committer(store, {Durability::Mode::kInterval, milliseconds{5}}, {}, clock.clock());
  Calls calls;
  for (JobId id = 1; id <= 1000; ++id) committer.submit(step(id), calls.done(id));
  ASSERT_TRUE(committer.flush().is_ok());
  EXPECT_EQ(calls.order, one_to(1000));
  for (const Status& s : calls.statuses) ASSERT_TRUE(s.is_ok()) << s.to_string();
  EXPECT_EQ(committer.stats().steps, 1000U);
  EXPECT_LE(committer.stats().batches, 1000U);
  EXPECT_EQ(store.synced_writes(), 0) << "interval: batches are written without sync";
  EXPECT_EQ(store.syncs(), 0) << "no time has passed: nothing is due for a sync";
  EXPECT_TRUE(store.dirty());

  clock.advance(milliseconds{4});
  ASSERT_TRUE(committer.poke().is_ok());
  EXPECT_EQ(store.syncs(), 0) << "synced 4 ms after the last sync, under interval:5";
  EXPECT_TRUE(store.dirty());

  clock.advance(milliseconds{1});
  ASSERT_TRUE(committer.poke().is_ok());
  ASSERT_FALSE(store.dirty()) << "the last batch was not synced 5 ms after the last sync";
  const CommitterStats synced = committer.stats();
  ASSERT_EQ(synced.syncs, 1U);
  EXPECT_EQ(static_cast<std::uint64_t>(store.syncs()), synced.syncs);
  std::cout << "[ observed ] interval:5: " << synced.steps << " steps in " << synced.batches
            << " batches, " << synced.syncs << " syncs\n";

  // Nothing new was written, so nothing more is synced, however much time passes.
  clock.advance(milliseconds{20});
  ASSERT_TRUE(committer.poke().is_ok());
  EXPECT_EQ(committer.stats().syncs, synced.syncs);
  EXPECT_EQ(store.syncs(), static_cast<int>(synced.syncs));

  // A write more than 5 ms after the last sync is synced at once, with its batch.
  committer.submit(step(1001), calls.done(1001));
  ASSERT_TRUE(committer.flush().is_ok());
  EXPECT_EQ(committer.stats().syncs, synced.syncs + 1);
  EXPECT_EQ(store.synced_writes(), 0);
  EXPECT_FALSE(store.dirty());
}

// BatchReport::sync_time is the time the write and its sync took together, on the committer's
// clock; a batch that was not synced reports none.
TEST(CommitterTest, ReportsSyncTimeOnItsClock) {
  for (const Durability durability :
       {Durability{}, Durability{Durability::Mode::kInterval, milliseconds{5}},
        Durability{Durability::Mode::kNone, {}}}) {
    SCOPED_TRACE(durability.to_string());
    ProbeStore store;
    ManualClock clock;
    store.during_write([&] { clock.advance(milliseconds{2}); });
    store.during_sync([&] { clock.advance(milliseconds{1}); });
    std::vector<BatchReport> reports;  // appended to on the committer thread, read after flush()
    Committer committer(
        store, durability, [&](const BatchReport& report) { reports.push_back(report); },
        clock.clock());
    // Under interval, the first batch is due for a sync with its write; the second, 3 ms after
    // that sync, is not.
    clock.advance(milliseconds{10});
    committer.submit(step(1), {});
    ASSERT_TRUE(committer.flush().is_ok());
    committer.submit(step(2), {});
    ASSERT_TRUE(committer.flush().is_ok());
    ASSERT_EQ(reports.size(), 2U);
    for (const BatchReport& report : reports) EXPECT_EQ(report.steps, 1U);
    switch (durability.mode) {
      case Durability::Mode::kAlways:  // each write syncs itself: 2 ms
        EXPECT_TRUE(reports[0].synced && reports[1].synced);
        EXPECT_EQ(reports[0].sync_time, milliseconds{2});
        EXPECT_EQ(reports[1].sync_time, milliseconds{2});
        break;
      case Durability::Mode::kInterval:  // a write (2 ms), then a sync (1 ms)
        EXPECT_TRUE(reports[0].synced);
        EXPECT_EQ(reports[0].sync_time, milliseconds{3});
        EXPECT_FALSE(reports[1].synced);
        EXPECT_EQ(reports[1].sync_time, milliseconds{0});
        break;
      case Durability::Mode::kNone:
        EXPECT_FALSE(reports[0].synced || reports[1].synced);
        EXPECT_EQ(reports[0].sync_time, milliseconds{0});
        EXPECT_EQ(reports[1].sync_time, milliseconds{0});
        break;
    }
  }
}

TEST(CommitterTest, FailedWriteIsSticky) {
  ProbeStore store;
  store.fail_writes(Status(Code::kIOError, "disk on fire"));
  Calls calls;
  Committer committer(store, {});
  for (JobId id = 1; id <= 3; ++id) committer.submit(step(id), calls.done(id));
  Status flushed = committer.flush();
  EXPECT_EQ(flushed.code(), Code::kIOError) << flushed.to_string();
  EXPECT_EQ(flushed.message(), "disk on fire");
  EXPECT_EQ(calls.order, one_to(3));
  for (const Status& s : calls.statuses) EXPECT_EQ(s.code(), Code::kIOError) << s.to_string();
  const int writes_after_failure = store.writes();

  // The disk recovers; the committer must not: the engine moved on from what the disk lacks.
  store.fail_writes(Status::ok());
  for (JobId id = 4; id <= 6; ++id) committer.submit(step(id), calls.done(id));
  flushed = committer.flush();
  EXPECT_EQ(flushed.code(), Code::kIOError) << flushed.to_string();
  EXPECT_EQ(calls.order, one_to(6));
  for (const Status& s : calls.statuses) EXPECT_EQ(s.code(), Code::kIOError) << s.to_string();
  EXPECT_EQ(store.writes(), writes_after_failure) << "nothing is written after a failure";
  EXPECT_EQ(store.records(), 0U);
}

// CommitterStats::steps counts "WriteSets committed"; a step whose write failed was not.
TEST(CommitterTest, StatsCountOnlyCommittedSteps) {
  ProbeStore store;
  Committer committer(store, {});
  Calls calls;
  committer.submit(step(1), calls.done(1));
  ASSERT_TRUE(committer.flush().is_ok());
  store.fail_writes(Status(Code::kIOError, "disk on fire"));
  for (JobId id = 2; id <= 4; ++id) committer.submit(step(id), calls.done(id));
  EXPECT_EQ(committer.flush().code(), Code::kIOError);
  EXPECT_EQ(store.records(), 1U);
  EXPECT_EQ(committer.stats().steps, 1U) << "steps whose write failed count as committed";
}

TEST(CommitterTest, FailedIntervalSyncIsSticky) {
  ProbeStore store;
  store.fail_syncs(Status(Code::kIOError, "fsync failed"));
  ManualClock clock;
  Committer committer(store, {Durability::Mode::kInterval, milliseconds{1}}, {}, clock.clock());
  Calls calls;
  committer.submit(step(1), calls.done(1));
  // No time has passed, so step 1's batch is written and not synced: it sees no failure.
  ASSERT_TRUE(committer.flush().is_ok());
  ASSERT_EQ(store.syncs(), 0);
  // 1 ms on, the sync is tried and fails.
  clock.advance(milliseconds{1});
  const Status poked = committer.poke();
  EXPECT_EQ(poked.code(), Code::kIOError) << poked.to_string();
  ASSERT_EQ(store.syncs(), 1);
  committer.submit(step(2), calls.done(2));
  const Status flushed = committer.flush();
  EXPECT_EQ(flushed.code(), Code::kIOError) << flushed.to_string();
  ASSERT_EQ(calls.order, one_to(2));
  EXPECT_TRUE(calls.statuses[0].is_ok()) << calls.statuses[0].to_string();
  EXPECT_EQ(calls.statuses[1].code(), Code::kIOError) << "a step after the failed sync";
}

// A MemoryStore whose first write waits for a gate, so that steps pile up in the queue.
class GateStore final : public Store {
 public:
  explicit GateStore(std::shared_future<void> gate) : gate_(std::move(gate)) {}
  Status write(std::span<const WriteSet* const> sets, bool sync) override {
    entered_.store(true);
    gate_.wait();
    return inner_.write(sets, sync);
  }
  Status sync() override { return inner_.sync(); }
  Status scan(const std::function<Status(JobRecord&&)>& visit) override {
    return inner_.scan(visit);
  }
  Result<std::optional<std::string>> far_get(const std::string& key) override {
    return inner_.far_get(key);
  }
  Status far_scan(const std::string& prefix, const std::string& start,
                  const std::function<bool(std::string_view, std::string_view)>& visit) override {
    return inner_.far_scan(prefix, start, visit);
  }
  Result<Delivery> read_attachment(JobId id) override { return inner_.read_attachment(id); }
  Status scan_webhooks(const std::function<Status(std::string, Webhook)>& visit) override {
    return inner_.scan_webhooks(visit);
  }
  Status scan_max_attempts(
      const std::function<Status(std::string, std::uint32_t)>& visit) override {
    return inner_.scan_max_attempts(visit);
  }
  Status scan_flows(const std::function<Status(std::string, FlowSettings)>& visit) override {
    return inner_.scan_flows(visit);
  }
  Status scan_schedules(const std::function<Status(std::string, std::string)>& visit) override {
    return inner_.scan_schedules(visit);
  }
  Result<std::optional<std::string>> read_schedule(std::string_view name) override {
    return inner_.read_schedule(name);
  }
  Result<std::string> read_body(JobId id) override { return inner_.read_body(id); }
  [[nodiscard]] JobId next_id() const override { return inner_.next_id(); }
  [[nodiscard]] std::uint64_t estimated_jobs() const override { return inner_.estimated_jobs(); }
  [[nodiscard]] bool entered() const { return entered_.load(); }
  [[nodiscard]] std::size_t records() const { return inner_.records(); }

 private:
  std::shared_future<void> gate_;
  std::atomic<bool> entered_{false};
  MemoryStore inner_;
};

TEST(CommitterTest, DestructorCommitsWhatIsQueued) {
  std::promise<void> open;
  GateStore store(open.get_future().share());
  Calls calls;
  std::thread opener;
  {
    Committer committer(store, {});
    committer.submit(step(1), calls.done(1));
    while (!store.entered()) std::this_thread::yield();
    // Step 1 is being written; 2..100 wait in the queue when the destructor starts. The gate
    // opens as the destructor is about to run: the committer thread then needs a wake-up to get
    // past it, the destructor a few instructions to ask it to stop, so it is (almost always)
    // asked to stop with 2..100 still queued. Either way they must all be committed.
    for (JobId id = 2; id <= 100; ++id) committer.submit(step(id), calls.done(id));
    std::atomic<bool> destroying{false};
    opener = std::thread([&open, &destroying] {
      while (!destroying.load()) std::this_thread::yield();
      open.set_value();
    });
    destroying.store(true);
  }
  opener.join();
  EXPECT_EQ(calls.order, one_to(100));
  for (const Status& s : calls.statuses) EXPECT_TRUE(s.is_ok()) << s.to_string();
  EXPECT_EQ(store.records(), 100U);
  EXPECT_EQ(store.next_id(), 101U);
}

// interval:MS promises that an acknowledged change is fsynced within MS ms. When the committer
// stops, nothing will sync the last batches later, so stopping must sync them.
TEST(CommitterTest, DestructorSyncsUnderInterval) {
  ProbeStore store;
  Calls calls;
  {
    // The clock does not move: no timed sync can happen during the test.
    ManualClock clock;
    Committer committer(store, {Durability::Mode::kInterval, milliseconds{60000}}, {},
                        clock.clock());
    for (JobId id = 1; id <= 10; ++id) committer.submit(step(id), calls.done(id));
    ASSERT_TRUE(committer.flush().is_ok());
    EXPECT_TRUE(store.dirty()) << "the batches should be written, not yet synced";
  }
  EXPECT_EQ(calls.order, one_to(10));
  EXPECT_EQ(store.records(), 10U);
  EXPECT_FALSE(store.dirty()) << "the committer stopped with written but never synced batches";
}

// RocksStore: the committed steps are on disk after the store is closed and reopened.
class TempDir {
 public:
  TempDir()
      : path_(fs::temp_directory_path() / ("delayq-store-test-" + std::to_string(::getpid()) +
                                           "-committer-" + std::to_string(counter_++))) {
    fs::remove_all(path_);
  }
  ~TempDir() {
    std::error_code ignored;
    fs::remove_all(path_, ignored);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  [[nodiscard]] std::string str() const { return path_.string(); }

 private:
  static inline std::atomic<int> counter_{0};
  fs::path path_;
};

void rocks_round_trip(Durability durability) {
  constexpr JobId kSteps = 1000;
  TempDir dir;
  {
    auto opened = RocksStore::open(dir.str());
    ASSERT_TRUE(opened.is_ok()) << opened.status().to_string();
    // Under interval the clock does not move: every sync is the one the committer makes as it
    // stops.
    ManualClock clock;
    submit_and_check(*opened.value(), durability, kSteps, clock.clock());
  }
  auto reopened = RocksStore::open(dir.str(), {.create_if_missing = false});
  ASSERT_TRUE(reopened.is_ok()) << reopened.status().to_string();
  Store& store = *reopened.value();
  EXPECT_EQ(store.next_id(), kSteps + 1);
  JobId expected = 1;
  const Status scanned = store.scan([&](JobRecord&& record) {
    EXPECT_EQ(record.id, expected);
    EXPECT_EQ(record.priority, record.id);
    ++expected;
    return Status::ok();
  });
  ASSERT_TRUE(scanned.is_ok()) << scanned.to_string();
  EXPECT_EQ(expected, kSteps + 1);
  auto body = store.read_body(kSteps);
  ASSERT_TRUE(body.is_ok()) << body.status().to_string();
  EXPECT_EQ(body.value(), "body-" + std::to_string(kSteps));
}

TEST(CommitterTest, RocksStoreAlways) {
  rocks_round_trip({});
}

TEST(CommitterTest, RocksStoreInterval) {
  rocks_round_trip({Durability::Mode::kInterval, milliseconds{5}});
}

// interval:5 on steady_clock: the committer thread wakes by itself to sync the last batch, and
// then sleeps. Real time passes here (~25 ms), so the test is labelled slow.
TEST(CommitterSlowTest, IntervalSyncsOnTheRealClock) {
  ProbeStore store;
  Committer committer(store, {Durability::Mode::kInterval, milliseconds{5}});
  Calls calls;
  for (JobId id = 1; id <= 1000; ++id) committer.submit(step(id), calls.done(id));
  ASSERT_TRUE(committer.flush().is_ok());
  EXPECT_EQ(calls.order, one_to(1000));
  EXPECT_EQ(store.synced_writes(), 0) << "interval: batches are written without sync";

  // Allow 1 s for a 5 ms promise on a busy machine. (The stats count a sync just after it.)
  const auto deadline = std::chrono::steady_clock::now() + milliseconds{1000};
  while ((store.dirty() || committer.stats().syncs == 0) &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(milliseconds{1});
  }
  ASSERT_FALSE(store.dirty()) << "the last batch was not synced 1 s after it was written";
  const CommitterStats synced = committer.stats();
  ASSERT_GT(synced.syncs, 0U);
  // Nothing new was written, so nothing more is synced.
  std::this_thread::sleep_for(milliseconds{20});
  EXPECT_EQ(committer.stats().syncs, synced.syncs);
  EXPECT_EQ(store.syncs(), static_cast<int>(synced.syncs));
}

// A write made elsewhere under interval:5 wakes the committer by itself (no poke, no submit):
// it is synced on the real clock within the interval (1 s allowed, as above).
TEST(CommitterSlowTest, WriteMadeElsewhereIsSyncedOnTheRealClock) {
  ProbeStore store;
  Committer committer(store, {Durability::Mode::kInterval, milliseconds{5}});
  std::this_thread::sleep_for(milliseconds{20});  // the committer thread is asleep, idle
  const WriteSet set = step(1);
  const WriteSet* sets[] = {&set};
  ASSERT_TRUE(store.write(sets, false).is_ok());
  ASSERT_TRUE(committer.written().is_ok());
  const auto deadline = std::chrono::steady_clock::now() + milliseconds{1000};
  while (store.dirty() && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(milliseconds{1});
  }
  EXPECT_FALSE(store.dirty()) << "a write made elsewhere was not synced 1 s after written()";
}

}  // namespace
}  // namespace delayq::store
