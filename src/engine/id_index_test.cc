#include "engine/id_index.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <unordered_map>
#include <vector>

namespace delayq::engine {
namespace {

// Random inserts, finds and erases against std::unordered_map, through several growths and with
// ids both consecutive (as the engine hands them out) and scattered.
TEST(IdIndexTest, MatchesAMapThroughGrowthAndBackwardShiftDeletes) {
  std::vector<JobId> ids_of_slots;
  IdIndex index(
      [](const void* ids, IdIndex::Slot slot) {
        return (*static_cast<const std::vector<JobId>*>(ids))[slot];
      },
      &ids_of_slots);
  std::unordered_map<JobId, IdIndex::Slot> model;
  std::vector<IdIndex::Slot> free_slots;
  std::mt19937_64 rng(7);
  JobId next_id = 1;
  for (int step = 0; step < 300000; ++step) {
    const auto dice = rng() % 10;
    if (dice < 6) {
      const JobId id = rng() % 4 == 0 ? (rng() | 1) : next_id++;
      if (model.contains(id)) continue;
      IdIndex::Slot slot = 0;
      if (!free_slots.empty()) {
        slot = free_slots.back();
        free_slots.pop_back();
        ids_of_slots[slot] = id;
      } else {
        slot = static_cast<IdIndex::Slot>(ids_of_slots.size());
        ids_of_slots.push_back(id);
      }
      index.insert(id, slot);
      model[id] = slot;
    } else if (dice < 9 && !model.empty()) {
      auto it = model.begin();
      std::advance(it, static_cast<long>(rng() % std::min<std::size_t>(model.size(), 16)));
      ASSERT_TRUE(index.erase(it->first));
      free_slots.push_back(it->second);
      model.erase(it);
    } else {
      const JobId probe = rng() % (next_id + 10);
      const auto found = index.find(probe);
      const auto expected = model.find(probe);
      ASSERT_EQ(found.has_value(), expected != model.end()) << "id " << probe;
      if (found) {
        ASSERT_EQ(*found, expected->second);
      }
      ASSERT_FALSE(index.erase(probe + (JobId{1} << 60)));
    }
    ASSERT_EQ(index.size(), model.size());
  }
  for (const auto& [id, slot] : model) {
    const auto found = index.find(id);
    ASSERT_TRUE(found.has_value()) << "id " << id;
    EXPECT_EQ(*found, slot);
  }
}

// Growing moves the old table over a few buckets per call, so no insert pays for a whole
// rehash: counted in reads of a job's id (a rehash reads every id once), not in time.
TEST(IdIndexTest, NoInsertRehashesTheWholeTable) {
  struct Jobs {
    std::vector<JobId> ids;
    mutable std::size_t reads = 0;
  } jobs;
  IdIndex index(
      [](const void* table, IdIndex::Slot slot) {
        const auto& j = *static_cast<const Jobs*>(table);
        ++j.reads;
        return j.ids[slot];
      },
      &jobs);
  std::size_t most = 0;
  bool grew = false;
  constexpr JobId kIds = 1'000'000;
  for (JobId id = 1; id <= kIds; ++id) {
    jobs.ids.push_back(id);
    jobs.reads = 0;
    index.insert(id, static_cast<IdIndex::Slot>(jobs.ids.size() - 1));
    most = std::max(most, jobs.reads);
    grew = grew || index.growing();
    if (id % 3 == 0) {
      ASSERT_TRUE(index.find(id - 1).has_value()) << id - 1;
    }
  }
  EXPECT_TRUE(grew);
  EXPECT_LT(most, std::size_t{200}) << "an insert read this many ids";
  for (JobId id = 1; id <= kIds; id += 997) {
    ASSERT_EQ(index.find(id), static_cast<IdIndex::Slot>(id - 1));
  }
}

TEST(IdIndexTest, CostsAtMostTwoBucketsOfFourBytesPerId) {
  std::vector<JobId> ids;
  IdIndex index(
      [](const void* table, IdIndex::Slot slot) {
        return (*static_cast<const std::vector<JobId>*>(table))[slot];
      },
      &ids);
  for (JobId id = 1; id <= 100000; ++id) {
    ids.push_back(id);
    index.insert(id, static_cast<IdIndex::Slot>(ids.size() - 1));
  }
  EXPECT_LE(index.memory_bytes(), 100000 * 2 * 4);
}

}  // namespace
}  // namespace delayq::engine
