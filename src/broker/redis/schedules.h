// schedules.h — recurring schedules in Redis mode (broker/schedules.h), with the planner's rules
// (schedule/planner.h) as the local broker runs them. A schedule's record lives in the shard its
// name hashes to; the node that owns that shard steps it on time (a schedule::Book of the
// schedules of its shards, loaded when it takes a lease). Any node may change a schedule (set,
// pause, remove, trigger, backfill): every write of a record names the version it read, and one
// that finds another fails and reads again, so two nodes never both move a schedule on. The
// owner keeps only each schedule's name and wake; a step reads the record first.
//
// A step is made in three writes: the record with its new state and the runs it puts (its
// intent); each run put into its own shard by putrun, which leaves a mark there; the record
// without the intent. A node that finds an intent (after a crash, or a lost answer) puts its runs
// again, and the marks keep any from being put twice (jobs.lua, schedules.lua). What the planner
// asks of the jobs (whether the previous run's job exists; the withdrawal of a late run put
// ahead) is asked of their shards first, and the planner run again with the answers.
// Everything runs on the broker's executor. The owner's turn is schedules.cc; the changes from
// any node, schedule_changes.cc. Design: docs/redis-mode.md, "Schedules".
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "broker/families.h"
#include "broker/redis/core.h"
#include "broker/redis/session.h"
#include "broker/schedules.h"
#include "schedule/book.h"
#include "schedule/codec.h"

namespace delayq::broker::redis {

// A schedule's record in Redis: the codec's bytes (schedule/codec.h), after a header with what
// Redis mode adds: the version every write names, the generation its runs' marks carry (new at
// each set), and the runs of a step not yet known to be put.
struct StoredSchedule {
  std::uint64_t version = 0;  // 0: not stored
  std::string generation;
  std::vector<schedule::Run> intent;
  schedule::Record record;
};
[[nodiscard]] std::string encode_stored(const StoredSchedule& stored);
[[nodiscard]] Result<StoredSchedule> decode_stored(std::string_view name, std::string_view bytes);
// The put of a schedule's run: a job keyed by its instant, due at the run's due time.
[[nodiscard]] broker::PutRequest run_request(const schedule::Definition& d,
                                             const schedule::Run& run);

class RedisSchedules final : public broker::Schedules,
                             public std::enable_shared_from_this<RedisSchedules> {
 public:
  // Hooks itself to the core (leases, the shards' 's' messages) and loads the schedules of the
  // shards the node owns already.
  static std::shared_ptr<RedisSchedules> open(std::shared_ptr<Core> core);
  ~RedisSchedules() override;
  RedisSchedules(const RedisSchedules&) = delete;
  RedisSchedules& operator=(const RedisSchedules&) = delete;
  // Stops stepping (the broker closes): the timer and the hooks.
  void stop();

  void set(schedule::Definition definition, broker::Callback<broker::ScheduleView> done) override;
  void get(std::string name, broker::Callback<broker::ScheduleView> done) override;
  void list(std::string after, std::size_t limit,
            broker::Callback<std::vector<broker::ScheduleView>> done) override;
  void remove(std::string name, broker::Callback<broker::ScheduleView> done) override;
  void pause(std::string name, bool paused, broker::Callback<broker::ScheduleView> done) override;
  void trigger(std::string name, broker::Callback<broker::PutResult> done) override;
  void backfill(std::string name, std::int64_t from_unix_ms, std::int64_t to_unix_ms,
                broker::Callback<std::vector<broker::PutResult>> done) override;

 private:
  explicit RedisSchedules(std::shared_ptr<Core> core);
  using Stored = std::optional<StoredSchedule>;  // nullopt: no such schedule
  using Weak = std::weak_ptr<RedisSchedules>;

  // What the planner asked of the jobs, answered by their shards; and its random draws, kept
  // so that running it again draws the same.
  struct Facts {
    std::map<std::string, bool, std::less<>> exists;
    std::map<std::string, bool, std::less<>> withdrawn;
    std::vector<std::int64_t> draws;
  };
  struct Plan {
    schedule::State state;
    schedule::Step step;
  };

  [[nodiscard]] std::uint32_t home(std::string_view name) const;
  [[nodiscard]] std::int64_t now() const { return core_->clock->now_unix_ms(); }

  // --- Redis
  void read(const std::string& name, std::function<void(Result<Stored>)> then);
  // Writes `next` over the version `expected` (0: none), announced to the shard's owner or not.
  void save(const std::string& name, std::uint64_t expected, const StoredSchedule* next,
            bool announce, std::function<void(Status)> then);
  // Puts the runs in order (putrun), each at most once.
  void put_runs(const StoredSchedule& stored, std::vector<schedule::Run> runs, std::size_t from,
                std::function<void(Status)> then);
  // The record with its intent, the runs, the record without it; completes with the version
  // written last. kConflict: another write came first (nothing was put).
  void commit(const std::string& name, std::uint64_t expected, StoredSchedule next, bool announce,
              std::function<void(Result<std::uint64_t>)> then);
  // The planner's step, its questions answered by the shards first.
  void plan(std::shared_ptr<const schedule::Compiled> schedule, std::string generation,
            std::uint64_t version, schedule::State state, std::int64_t at,
            std::shared_ptr<Facts> facts, std::function<void(Result<Plan>)> then);
  // Withdraws the run of `d` at `instant` put ahead (if its job is still delayed; or_ready: or
  // ready and never reserved), as planned from the record's `version` of `generation`:
  // deleted, taken, or gone (its job is not there).
  void unrun(const schedule::Definition& d, const std::string& generation, std::uint64_t version,
             std::int64_t instant, bool or_ready, std::function<void(Result<std::string>)> then);

  // --- the owner's turn
  // A warning, at most one every kWarnEvery (Redis out of reach fails every schedule's step,
  // each second), with a count of those left out.
  static constexpr std::chrono::seconds kWarnEvery{10};
  void warn(const std::string& what);
  void load_shard(std::uint32_t shard);
  void drop_shard(std::uint32_t shard);
  // Another node changed the schedule: it steps at once (its record read again).
  void reload(const std::string& name);
  void forget(const std::string& name);
  // A step: the record read, then its runs put again if a step's end was not seen (replay), or
  // the planner's step to now written (advance). `number` tells it from a later step of the
  // same schedule (its answers are then dropped).
  void step(const std::string& name);
  // A step whose end was not seen: its runs put again (none twice), then the record written
  // without them.
  void replay(const std::string& name, std::uint64_t number, StoredSchedule current);
  void advance(const std::string& name, std::uint64_t number, StoredSchedule current,
               std::shared_ptr<const schedule::Compiled> compiled);
  // A step's write answered (the version written, or why not): counted, and the next wake set
  // (at once after a conflict: another write came first).
  void written(const std::string& name, std::uint64_t number, const schedule::State& before,
               const schedule::State& after, std::optional<std::int64_t> wake,
               const Result<std::uint64_t>& version);
  [[nodiscard]] bool stepping(const std::string& name, std::uint64_t number) const;
  void stepped(const std::string& name, std::uint64_t number, std::optional<std::int64_t> wake);
  void arm();
  void tick();

  // --- changes from any node: read, change, write, again on a conflict (up to kTries)
  using Change =
      std::function<void(std::shared_ptr<StoredSchedule>, std::function<void(Result<Plan>)>)>;
  void change(const std::string& name, bool create, Change how, int tries,
              std::function<void(Result<StoredSchedule>, bool created)> then);
  // The run put ahead, withdrawn for a pause, a replacement or a removal.
  void withdraw(std::shared_ptr<StoredSchedule> stored, std::function<void(Status)> then);
  [[nodiscard]] broker::ScheduleView view(const StoredSchedule& stored) const;
  Status check_put(const schedule::Definition& d, bool at_set) const;
  void count(const schedule::State& before, const schedule::State& after);
  // Trigger and backfill: the runs put as a client puts them, then the counts written.
  void put_direct(std::shared_ptr<const schedule::Definition> d, std::vector<schedule::Run> runs,
                  std::shared_ptr<std::vector<broker::PutResult>> puts,
                  std::function<void(Status)> then);
  // Trigger's and backfill's runs counted in the stored state (read, change, write).
  void recount(const std::string& name, std::uint64_t runs, std::optional<std::int64_t> last_run,
               int tries);
  void list_from(std::string after, std::size_t limit,
                 std::shared_ptr<std::vector<broker::ScheduleView>> views,
                 broker::Callback<std::vector<broker::ScheduleView>> done);

  std::shared_ptr<Core> core_;
  std::unique_ptr<RedisSession> session_;  // trigger's and backfill's puts (made at the first)
  broker::ScheduleFamilies families_;
  schedule::Book book_;
  // The steps under way, by schedule: each step's number.
  std::map<std::string, std::uint64_t, std::less<>> steps_;
  std::uint64_t step_numbers_ = 0;
  std::unique_ptr<Timer> timer_;
  bool stopped_ = false;
  std::optional<SteadyTime> warned_;
  std::uint64_t unwarned_ = 0;
  std::mt19937_64 random_{std::random_device{}()};
};

}  // namespace delayq::broker::redis
