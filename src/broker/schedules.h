// schedules.h — recurring schedules, the part of the broker contract (broker.h) that keeps them:
// each schedule is durable broker state beside the jobs, and each of its runs is a job put into
// its tube with key "<name>@<instant in Unix ms>" (schedule/definition.h), so that no run is put
// twice whatever restarts or nodes do. The rules (which instants run, misfires, overlaps) are
// schedule/planner.h's, the same in every broker. Threads, durability and completions are as
// broker.h says: every completion comes on the broker's executor once what it reports is durable.
// Users' guide: docs/schedules.md
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "broker/broker.h"
#include "schedule/definition.h"
#include "schedule/planner.h"

namespace delayq::broker {

// A schedule as stored, with what users look at: its next run (nullopt: paused, ended, or none
// comes), as of the broker's present.
struct ScheduleView {
  schedule::Definition definition;
  schedule::State state;
  std::optional<std::int64_t> next_unix_ms;
  std::int64_t as_of_unix_ms = 0;
  bool created = false;  // set(): there was no schedule of that name
};

// Errors as broker.h says (kInvalidArgument with a message naming the field, kIOError), and
// kNotFound for a name that has no schedule.
class Schedules {
 public:
  virtual ~Schedules() = default;

  // Creates the schedule, or replaces the one of that name: the run it had put ahead, if still
  // delayed, is withdrawn; its counts and last run carry over. Errors: kInvalidArgument
  // (schedule::compile's checks), kConflict (a url, and the tube has no webhook).
  virtual void set(schedule::Definition definition, Callback<ScheduleView> done) = 0;
  virtual void get(std::string name, Callback<ScheduleView> done) = 0;
  // Up to `limit` schedules whose names sort after `after` (empty: from the first), by name.
  virtual void list(std::string after, std::size_t limit,
                    Callback<std::vector<ScheduleView>> done) = 0;
  // Deletes the schedule and the run it had put ahead, if still delayed; runs already due stay.
  virtual void remove(std::string name, Callback<ScheduleView> done) = 0;
  // Pauses (no run is put; the run put ahead is withdrawn) or resumes (instants missed while
  // paused are settled by the misfire rule).
  virtual void pause(std::string name, bool paused, Callback<ScheduleView> done) = 0;
  // One run now, keyed by the present instant. trigger and backfill put jobs: kDraining and
  // kNoSpace as a put's, and kConflict for a url in a tube without a webhook.
  virtual void trigger(std::string name, Callback<PutResult> done) = 0;
  // The schedule's instants in [from, to] (at most schedule::kMaxCatchUpRuns), each a run due
  // now; a run whose job still exists is not put again. Completes with the jobs.
  virtual void backfill(std::string name, std::int64_t from_unix_ms, std::int64_t to_unix_ms,
                        Callback<std::vector<PutResult>> done) = 0;
};

}  // namespace delayq::broker
