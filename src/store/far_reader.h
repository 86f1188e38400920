// far_reader.h — what the engine reads of the far tier: delayed jobs due beyond its window, kept
// on disk only (record.h draws the keys, WriteSet's far_put() and far_erase() write them). Every
// Store is one. A read sees every write that has returned; reads run on the engine's thread, and
// may run beside write() on the committer's.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "base/status.h"
#include "store/record.h"

namespace delayq::store {

class FarReader {
 public:
  virtual ~FarReader() = default;

  // The far job's record; nullopt: no far job has that id.
  virtual Result<std::optional<JobRecord>> far_job(JobId id) = 0;
  // The far job of the tube that holds the key; nullopt: none.
  virtual Result<std::optional<JobId>> far_key(std::string_view tube, std::string_view key) = 0;
  // The tube's far jobs of the group, by id, until visit returns false.
  virtual Status far_group(std::string_view tube, std::string_view group,
                           const std::function<bool(JobId)>& visit) = 0;
  // The tube's far jobs due at or after `from` (Unix ms), by due time (rounded down as stored),
  // then id, until visit returns false. A scan that starts where the tube's earliest live job
  // is does not walk over the deletions its loads and moves left before it.
  virtual Status far_by_due(std::string_view tube, std::int64_t from,
                            const std::function<bool(std::int64_t, JobId)>& visit) = 0;
  // Every tube's far jobs counted by due minute (far_count()), by tube then minute.
  virtual Status far_counts(
      const std::function<Status(std::string, std::int64_t, std::uint64_t)>& visit) = 0;
};

// The far tier's reads over a key-value family keyed as record.h draws: a store gives a point
// read and an ordered scan of a prefix, and the keys are read here, once for every store.
class FarFamily : public FarReader {
 public:
  Result<std::optional<JobRecord>> far_job(JobId id) override;
  Result<std::optional<JobId>> far_key(std::string_view tube, std::string_view key) override;
  Status far_group(std::string_view tube, std::string_view group,
                   const std::function<bool(JobId)>& visit) override;
  Status far_by_due(std::string_view tube, std::int64_t from,
                    const std::function<bool(std::int64_t, JobId)>& visit) override;
  Status far_counts(
      const std::function<Status(std::string, std::int64_t, std::uint64_t)>& visit) override;

  // What a store gives: one entry of the far tier (nullopt: none), and its entries whose key
  // starts with `prefix`, from `start` on (a key that starts with prefix, or prefix itself for
  // all of them), in key order, until visit returns false.
  virtual Result<std::optional<std::string>> far_get(const std::string& key) = 0;
  virtual Status far_scan(const std::string& prefix, const std::string& start,
                          const std::function<bool(std::string_view, std::string_view)>& visit) = 0;
};

// What one far op (kFarPut, kFarPutFresh, kFarErase, kFarCount) does to the far tier's keys: puts
// (value set) and deletions (nullopt) by key, in order; and for kFarPut, that the job's record
// under kJobPrefix goes (drop_record). kCorruption for a record that does not decode.
Status far_writes(const WriteSet::Op& op,
                  const std::function<void(std::string, std::optional<std::string_view>)>& write,
                  const std::function<void(JobId)>& drop_record);

}  // namespace delayq::store
