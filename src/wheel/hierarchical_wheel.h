// hierarchical_wheel.h — the engine's deadline index: 8 levels of 256 slots over 64-bit ticks.
// A timer sits at the level of the highest 8-bit digit in which its deadline tick differs from
// now, so every 64-bit deadline has a place (no overflow list) and all timers of a slot share one
// tick range. schedule() and cancel() are O(1); advance_to() costs O(1) per occupied slot it
// reaches plus O(1) per timer moved (at most once a level) or fired, and jumps over empty time via
// per-level occupancy bitmaps, so the caller can sleep until next_deadline(). Equal deadline
// ticks fire in schedule order. Slots are chains of 512-byte blocks of 16-byte entries from a
// recycling pool: moving timers reads and writes memory sequentially. Which timers are scheduled
// is one bit each in the wheel's own bitmap, so cancel clears the bit and touches neither the slot
// nor the caller's Timer (a cache miss apiece in a large table), and firing clears it and writes
// nothing into the caller's table (it reads the Timer only while cancelled entries exist);
// cancelled entries are dropped when reached, or swept when they outnumber the live ones. Owned by
// one thread. Algorithm, worked example, costs: docs/design/timing-wheel.md
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "base/check.h"
#include "wheel/timer.h"

namespace delayq::wheel {

struct HierarchicalWheelOptions {
  // Length of one tick. Deadlines round up to a tick; a timer fires at most one tick late.
  // Default: 1 ms.
  Millis tick{1};
  // Time the wheel starts at (its first now()). Default: 0.
  Time start{};
  // Cancelled entries are swept once they outnumber the live ones and number at least this
  // many. Lower sweeps sooner (less memory, more sweeps); tests lower it to sweep often.
  // Default: 4096.
  std::size_t min_sweep_entries = 4096;
};

class HierarchicalWheel {
 public:
  static constexpr unsigned kLevelBits = 8;
  static constexpr unsigned kSlotsPerLevel = 1U << kLevelBits;             // 256
  static constexpr unsigned kLevels = (64 + kLevelBits - 1) / kLevelBits;  // 8 cover 64 bits

  // `timers` is the caller's per-timer storage; it must outlive the wheel, may grow at any time
  // (the wheel indexes it afresh on every call) but never shrink, and its Timers are written
  // only by the wheel.
  explicit HierarchicalWheel(TimerTable& timers, HierarchicalWheelOptions options = {});
  ~HierarchicalWheel();
  HierarchicalWheel(const HierarchicalWheel&) = delete;
  HierarchicalWheel& operator=(const HierarchicalWheel&) = delete;

  void schedule(TimerId id, Time deadline);
  bool cancel(TimerId id);
  bool reschedule(TimerId id, Time deadline);
  template <typename Fire>
  std::size_t advance_to(Time now, Fire&& fire) noexcept;

  // Visits the scheduled timers slot by slot in order of time, calling visit(id) for each (in no
  // particular order within a slot: a level-L slot spans 256^L ticks), and stops after the first
  // slot in which visit returned true. Costs O(slots and entries passed), so it is for rare
  // questions ("the earliest timer of this kind"), never for a hot path.
  template <typename Visit>
  void visit_in_order(Visit&& visit) const;

  [[nodiscard]] std::optional<Time> next_deadline() const noexcept;
  // Whether timer `id` is scheduled. (The caller's Timer::scheduled() means nothing for this
  // wheel: cancel and firing leave the Timer as it was.)
  [[nodiscard]] bool scheduled(TimerId id) const noexcept {
    const std::size_t word = id / 64;
    return word < scheduled_.size() && ((scheduled_[word] >> (id % 64)) & 1U) != 0;
  }
  [[nodiscard]] Time now() const noexcept { return tick_time(now_tick_, tick_); }
  [[nodiscard]] std::size_t size() const noexcept { return live_; }
  // Bytes the wheel holds beyond sizeof(*this): its blocks, in use or pooled, the level-0 run and
  // the bitmap of scheduled timers.
  [[nodiscard]] std::size_t memory_bytes() const noexcept;
  // Entries in slots whose timer was cancelled and not yet dropped.
  [[nodiscard]] std::size_t stale_entries() const noexcept { return stale_; }

 private:
  struct Entry {
    std::uint64_t tick;
    TimerId id;
    std::uint32_t generation;
  };
  static constexpr std::size_t kBlockBytes = 512;
  struct Block {
    Block* next;
    std::uint32_t size;
    static constexpr std::uint32_t kCapacity =
        (kBlockBytes - sizeof(Block*) - sizeof(std::uint32_t)) / sizeof(Entry);
    Entry entries[kCapacity];
  };
  // A slot is a chain of blocks; it is empty exactly when it has no tail or an empty one.
  // Level-0 slots keep their first block when drained: they refill every 256 ticks, and a block
  // of their own that is still in the cache beats a cold one from the pool.
  struct Slot {
    Block* head = nullptr;
    Block* tail = nullptr;
  };
  static constexpr std::uint32_t kPrefetchEntries = 8;

  // Which slots of a level hold entries: one bit a slot, found in O(words).
  class Bitmap {
   public:
    void set(unsigned i) noexcept { words_[i / 64] |= std::uint64_t{1} << (i % 64); }
    void clear(unsigned i) noexcept { words_[i / 64] &= ~(std::uint64_t{1} << (i % 64)); }
    [[nodiscard]] bool test(unsigned i) const noexcept {
      return (words_[i / 64] >> (i % 64) & 1U) != 0;
    }
    [[nodiscard]] bool empty() const noexcept {
      return (words_[0] | words_[1] | words_[2] | words_[3]) == 0;
    }
    // Lowest set bit; the bitmap must not be empty.
    [[nodiscard]] unsigned first() const noexcept {
      unsigned w = 0;
      while (words_[w] == 0) ++w;
      return w * 64 + static_cast<unsigned>(__builtin_ctzll(words_[w]));
    }

   private:
    std::array<std::uint64_t, kSlotsPerLevel / 64> words_{};
  };

  // The level is that of the highest digit in which tick and now differ; a tick equal to now
  // (schedule() clamps earlier ones to now) goes to now's own level-0 slot, which advance_to()
  // drains first.
  void place(const Entry& entry) {
    const std::uint64_t differ = entry.tick ^ now_tick_;
    if (differ == 0) {
      append(0, now_tick_ & (kSlotsPerLevel - 1), entry);
      return;
    }
    const unsigned level = static_cast<unsigned>(63 - __builtin_clzll(differ)) / kLevelBits;
    append(level, (entry.tick >> (level * kLevelBits)) & (kSlotsPerLevel - 1), entry);
  }
  // The common case is one store and an increment; an empty or full tail takes the slow path,
  // which also marks the slot occupied (a slot is empty exactly when its tail is absent or empty).
  void append(unsigned level, unsigned index, const Entry& entry) {
    Block* tail = slots_[level][index].tail;
    if (tail == nullptr || tail->size - 1 >= Block::kCapacity - 1) [[unlikely]] {
      tail = prepare_tail(level, index);
    }
    tail->entries[tail->size++] = entry;
  }
  Block* prepare_tail(unsigned level, unsigned index);
  void cascade(unsigned level, unsigned index);
  Block* detach_slot(unsigned level, unsigned index) noexcept;
  void clear_slot(unsigned level, unsigned index) noexcept;
  void clear_chain(unsigned level, unsigned index) noexcept;
  [[nodiscard]] std::uint64_t next_event_tick() const noexcept;
  // An entry is live while its timer is scheduled and was scheduled by it: cancel and firing
  // leave the Timer's generation as it was, and a later schedule moves it on.
  [[nodiscard]] bool is_live(const Entry& entry) const noexcept {
    return scheduled(entry.id) && (*timers_)[entry.id].generation == entry.generation;
  }
  void set_scheduled(TimerId id, bool on) noexcept {
    const std::uint64_t bit = std::uint64_t{1} << (id % 64);
    scheduled_[id / 64] = on ? scheduled_[id / 64] | bit : scheduled_[id / 64] & ~bit;
  }
  static void prefetch_block(const Block* block) noexcept;
  // Calls visit(block) for each block of a chain, in order; visit may recycle the block it is
  // given. Chained blocks sit anywhere in memory, so the hardware cannot guess the next one: each
  // is requested two blocks ahead (its link is in the block after this one, requested a round
  // earlier), one block's work being too short to hide a miss.
  template <typename Visit>
  static void walk_chain(Block* head, Visit&& visit) {
    if (head == nullptr) return;
    prefetch_block(head->next);
    for (Block* block = head; block != nullptr;) {
      Block* const next = block->next;
      if (next != nullptr) prefetch_block(next->next);
      visit(block);
      block = next;
    }
  }
  void prefetch_timers(const Block* block) const noexcept {
    for (std::uint32_t i = 0; i < block->size; ++i) {
      __builtin_prefetch(&(*timers_)[block->entries[i].id]);
      __builtin_prefetch(&scheduled_[block->entries[i].id / 64]);
    }
  }
  // Calls visit(entry, live) for every entry of a chain, in order. Reading the caller's Timers is
  // a cache miss apiece, so they are requested a block ahead (walk_chain requests the blocks
  // themselves further ahead still). visit gets each entry by reference and may write it, or
  // entries it has already been given.
  template <typename Visit>
  void for_each_checked(Block* head, Visit&& visit) {
    if (head != nullptr) prefetch_timers(head);
    walk_chain(head, [&](Block* block) {
      if (block->next != nullptr) prefetch_timers(block->next);
      for (std::uint32_t i = 0; i < block->size; ++i) {
        Entry& entry = block->entries[i];
        visit(entry, is_live(entry));
      }
    });
  }
  Block* new_block();
  void recycle(Block* block) noexcept {
    block->next = free_blocks_;
    free_blocks_ = block;
    ++free_block_count_;
  }
  void trim_pool() noexcept;
  void free_chain(Block* head) noexcept;
  void maybe_sweep();
  void sweep();
  void sweep_slot(unsigned level, unsigned index);
  void sweep_run();
  void build_run(Block* head);
  void trim_run();
  [[nodiscard]] bool run_holds(unsigned index) const noexcept {
    return std::max(run_begin_[index], run_fired_) < run_begin_[index + 1];
  }
  template <typename Fire>
  std::size_t fire_entry(const Entry& entry, Fire& fire);
  template <typename Fire>
  std::size_t fire_due(Fire& fire);

  TimerTable* timers_;
  Millis tick_;
  std::uint64_t now_tick_;
  std::size_t min_sweep_entries_;
  std::size_t live_ = 0;
  std::size_t stale_ = 0;
  // Bit id % 64 of word id / 64 is set while timer id is scheduled: 1.25 MB for 10^7 ids, small
  // enough to stay in the cache where the caller's Timers (80 MB) cannot.
  std::vector<std::uint64_t> scheduled_;
  bool advancing_ = false;
  bool epoch_sweep_due_ = false;       // a generation started a new epoch: see starts_epoch()
  std::uint32_t occupied_levels_ = 0;  // bit L set when occupied_[L] != 0
  std::array<Bitmap, kLevels> occupied_{};
  std::array<std::array<Slot, kSlotsPerLevel>, kLevels> slots_{};
  Block* free_blocks_ = nullptr;
  std::size_t free_block_count_ = 0;
  std::size_t block_count_ = 0;
  // The level-0 window's timers that came down from its level-1 slot, sorted by tick (a stable
  // counting sort at the cascade): level-0 slot i owns run_[run_begin_[i], run_begin_[i + 1]),
  // less what lies before run_fired_ (slots fire in index order, so one cursor marks what has
  // fired). Timers placed in level 0 any other way come later and go to the slot's chain.
  std::vector<Entry> run_;
  std::array<std::uint32_t, kSlotsPerLevel + 1> run_begin_{};
  std::uint32_t run_fired_ = 0;
};

template <typename Fire>
std::size_t HierarchicalWheel::fire_entry(const Entry& entry, Fire& fire) {
  // With no stale entry anywhere the entry is live and the Timer need not be read. A cancelled
  // timer's entry is told by its bit alone.
  if (stale_ != 0 && !is_live(entry)) {
    --stale_;
    return 0;
  }
  // Idle before fire(), which may reschedule it. Clearing the bit is all it takes: the Timer
  // keeps this entry's generation, which no other entry of the timer carries, and the next
  // schedule moves it on. So a fired timer costs no write into the caller's table.
  set_scheduled(entry.id, false);
  --live_;
  fire(entry.id);
  return 1;
}

// Drains the level-0 slot of now_tick_ (timers due now): its part of the run first, then its
// chain, which fire() may append to while it runs, so sizes and links are read afresh.
template <typename Fire>
std::size_t HierarchicalWheel::fire_due(Fire& fire) {
  const unsigned index = now_tick_ & (kSlotsPerLevel - 1);
  if (!occupied_[0].test(index)) return 0;
  std::size_t fired = 0;
  const std::uint32_t run_end = run_begin_[index + 1];
  const auto run_size = static_cast<std::uint32_t>(run_.size());
  for (std::uint32_t i = std::max(run_begin_[index], run_fired_); i < run_end; ++i) {
    if (i + kPrefetchEntries < run_size) {  // fired a bit later: its bit, and its Timer if
      const TimerId ahead = run_[i + kPrefetchEntries].id;  // stale entries make it read
      __builtin_prefetch(&scheduled_[ahead / 64], 1);
      if (stale_ != 0) __builtin_prefetch(&(*timers_)[ahead]);
    }
    fired += fire_entry(run_[i], fire);
  }
  run_fired_ = std::max(run_fired_, run_end);
  for (Block* block = slots_[0][index].head; block != nullptr; block = block->next) {
    for (std::uint32_t i = 0; i < block->size; ++i) fired += fire_entry(block->entries[i], fire);
  }
  clear_slot(0, index);
  return fired;
}

template <typename Fire>
std::size_t HierarchicalWheel::advance_to(Time now, Fire&& fire) noexcept {
  DELAYQ_CHECK(!advancing_);  // fire() must not advance the wheel it is called from
  const std::uint64_t target = now_tick(now, tick_);
  if (target < now_tick_) return 0;
  advancing_ = true;
  std::size_t fired = 0;
  for (;;) {
    fired += fire_due(fire);
    if (occupied_levels_ == 0) {
      now_tick_ = target;
      break;
    }
    const std::uint64_t event = next_event_tick();
    if (event > target) {
      now_tick_ = target;
      break;
    }
    now_tick_ = event;
    const auto level = static_cast<unsigned>(__builtin_ctz(occupied_levels_));
    if (level > 0) cascade(level, (event >> (level * kLevelBits)) & (kSlotsPerLevel - 1));
  }
  advancing_ = false;
  maybe_sweep();
  return fired;
}

template <typename Visit>
void HierarchicalWheel::visit_in_order(Visit&& visit) const {
  // Level 0 holds now's window from now on; a level-L slot holds ticks whose digit L is greater
  // than now's, so walking level 0 from now and each higher level from the slot after now's is
  // a walk in time order.
  for (unsigned level = 0; level < kLevels; ++level) {
    if ((occupied_levels_ >> level & 1U) == 0) continue;
    const auto digit =
        static_cast<unsigned>(now_tick_ >> (level * kLevelBits)) & (kSlotsPerLevel - 1);
    for (unsigned index = level == 0 ? digit : digit + 1; index < kSlotsPerLevel; ++index) {
      if (!occupied_[level].test(index)) continue;
      bool found = false;
      const auto offer = [&](const Entry& entry) {
        if (is_live(entry) && visit(entry.id)) found = true;
      };
      if (level == 0 && run_holds(index)) {
        for (std::uint32_t i = std::max(run_begin_[index], run_fired_); i < run_begin_[index + 1];
             ++i) {
          offer(run_[i]);
        }
      }
      for (const Block* block = slots_[level][index].head; block != nullptr; block = block->next) {
        for (std::uint32_t i = 0; i < block->size; ++i) offer(block->entries[i]);
      }
      if (found) return;
    }
  }
}

}  // namespace delayq::wheel
