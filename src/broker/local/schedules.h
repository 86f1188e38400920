// schedules.h — recurring schedules on this machine: broker/schedules.h over the node. The
// schedules live in RocksDB (store::kSchedulePrefix), read when one steps or is shown (the node's
// writes not yet durable first); in memory, a schedule::Book holds each one's name and wake, and
// the node's turn ticks them. A schedule's step puts its runs through the engine, as an internal
// client, and stages its new record in the same batch: a run is on disk exactly when the state
// that counts it is, so a kill -9 at any moment neither loses nor doubles a run. Runs the
// planner (schedule/planner.h) and nothing of its own about which instants run.
// Everything runs on the node's thread.
#pragma once

#include <cstdint>
#include <optional>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "broker/families.h"
#include "broker/local/node.h"
#include "broker/schedules.h"
#include "schedule/book.h"

namespace delayq::broker::local {

class LocalSchedules final : public broker::Schedules, public Node::Ticker {
 public:
  // Reads the node's stored schedules (Node::scan_schedules()) and ticks with its turns.
  // Errors: a record of an unknown format version (kUnknownFormat) or damaged (kCorruption).
  static Result<std::unique_ptr<LocalSchedules>> open(Node& node);
  ~LocalSchedules() override;
  LocalSchedules(const LocalSchedules&) = delete;
  LocalSchedules& operator=(const LocalSchedules&) = delete;

  void set(schedule::Definition definition, broker::Callback<broker::ScheduleView> done) override;
  void get(std::string name, broker::Callback<broker::ScheduleView> done) override;
  void list(std::string after, std::size_t limit,
            broker::Callback<std::vector<broker::ScheduleView>> done) override;
  void remove(std::string name, broker::Callback<broker::ScheduleView> done) override;
  void pause(std::string name, bool paused, broker::Callback<broker::ScheduleView> done) override;
  void trigger(std::string name, broker::Callback<broker::PutResult> done) override;
  void backfill(std::string name, std::int64_t from_unix_ms, std::int64_t to_unix_ms,
                broker::Callback<std::vector<broker::PutResult>> done) override;

  void tick() override;
  [[nodiscard]] std::optional<std::int64_t> next_wake_us() const override;

  [[nodiscard]] std::size_t size() const noexcept { return book_.size(); }

 private:
  explicit LocalSchedules(Node& node);
  // A schedule as stored, compiled.
  struct Entry {
    schedule::Compiled schedule;
    schedule::State state;
  };

  [[nodiscard]] engine::Engine& engine() const { return node_.engine(); }
  [[nodiscard]] std::int64_t now() const { return engine().now(); }
  [[nodiscard]] broker::ScheduleView view(const Entry& entry) const;
  // The schedule's record, read (kNotFound: no schedule of that name).
  Result<Entry> find(const std::string& name);
  // A stored record, decoded (kUnknownFormat, kCorruption) and compiled (kInvalidArgument: it
  // cannot run here, as when the tz database no longer knows its zone).
  [[nodiscard]] Result<Entry> entry_of(const std::string& name, std::string_view bytes) const;
  // The due schedule's step, if it can be read.
  void step(const std::string& name);
  // Moves the schedule on to now: its runs put, its record staged, its next wake set.
  void step(Entry& entry);
  // A run put ahead whose instant has not come is deleted, if its job is still delayed.
  void withdraw(Entry& entry);
  // Deletes the job with this key if no worker has had it: it is delayed, or (or_ready) ready
  // and never reserved. True if it is gone (or was not there).
  bool delete_untaken(const std::string& tube, std::string_view key, bool or_ready);
  // What a put of the schedule's runs is refused for (broker/put_rules.h); at_set: the url's
  // webhook only (drain mode and free space are checked when runs are put).
  Status check_put(const schedule::Definition& d, bool at_set);
  Result<broker::PutResult> put_run(const schedule::Compiled& schedule, const schedule::Run& run);
  void persist(const Entry& entry);
  // The metrics of a change of state (and the count of schedules).
  void count(const schedule::State& before, const schedule::State& after);
  // Completes once everything done so far is durable.
  template <typename T>
  void finish(broker::Callback<T> done, Result<T> result);

  Node& node_;
  broker::ScheduleFamilies families_;
  engine::ClientId client_ = 0;  // the engine client that puts and deletes runs
  schedule::Book book_;
  std::mt19937_64 random_{std::random_device{}()};
};

}  // namespace delayq::broker::local
