// hierarchical_wheel.h — the engine's deadline index: 11 levels of 64 slots over 64-bit ticks.
// A timer sits at the level of the highest 6-bit digit in which its deadline tick differs from
// now, so every 64-bit deadline has a place (no overflow list) and all timers of a slot share one
// tick range. schedule() and cancel() are O(1); advance_to() costs O(levels) per occupied slot it
// reaches plus O(1) per timer moved or fired, and jumps over empty time via per-level occupancy
// bitmaps, so the caller can sleep until next_deadline(). Equal deadline ticks fire in schedule
// order. Slots are chains of 1 KiB blocks of 16-byte entries from a recycling pool: moving and
// firing timers reads memory sequentially. Cancel is lazy (the caller's Timer generation changes);
// stale entries are dropped when reached, or swept when they outnumber the live ones.
// Owned by one thread. Algorithm, worked example and costs: docs/design/timing-wheel.md
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
  Millis start{0};
};

class HierarchicalWheel {
 public:
  static constexpr unsigned kLevelBits = 6;
  static constexpr unsigned kSlotsPerLevel = 1U << kLevelBits;  // 64: one bitmap word a level
  static constexpr unsigned kLevels = (64 + kLevelBits - 1) / kLevelBits;  // 11 cover 64 bits

  // `timers` is the caller's per-timer storage; it must outlive the wheel and may grow at any
  // time (the wheel indexes it afresh on every call).
  explicit HierarchicalWheel(std::vector<Timer>& timers, HierarchicalWheelOptions options = {});
  ~HierarchicalWheel();
  HierarchicalWheel(const HierarchicalWheel&) = delete;
  HierarchicalWheel& operator=(const HierarchicalWheel&) = delete;

  void schedule(TimerId id, Millis deadline);
  bool cancel(TimerId id);
  bool reschedule(TimerId id, Millis deadline);
  template <typename Fire>
  std::size_t advance_to(Millis now, Fire&& fire);

  [[nodiscard]] std::optional<Millis> next_deadline() const noexcept;
  [[nodiscard]] Millis now() const noexcept { return tick_time(now_tick_, tick_); }
  [[nodiscard]] std::size_t size() const noexcept { return live_; }
  // Bytes the wheel holds beyond sizeof(*this): its blocks, in use or pooled.
  [[nodiscard]] std::size_t memory_bytes() const noexcept;
  // Entries in slots whose timer was cancelled and not yet dropped.
  [[nodiscard]] std::size_t stale_entries() const noexcept { return stale_; }

 private:
  struct Entry {
    std::uint64_t tick;
    TimerId id;
    std::uint32_t generation;
  };
  static constexpr std::size_t kBlockBytes = 1024;
  struct Block {
    Block* next;
    std::uint32_t size;
    static constexpr std::uint32_t kCapacity =
        (kBlockBytes - sizeof(Block*) - sizeof(std::uint32_t)) / sizeof(Entry);
    Entry entries[kCapacity];
  };
  struct Slot {
    Block* head = nullptr;
    Block* tail = nullptr;
    std::uint64_t min_tick = ~std::uint64_t{0};  // lower bound of the ticks in the slot
  };

  void place(const Entry& entry);
  void append(unsigned level, unsigned index, const Entry& entry);
  void cascade(unsigned level, unsigned index);
  [[nodiscard]] std::uint64_t next_event_tick() const noexcept;
  [[nodiscard]] bool is_live(const Entry& entry) const noexcept {
    return (*timers_)[entry.id].generation == entry.generation;
  }
  Block* take_slot(unsigned level, unsigned index) noexcept;
  Block* new_block();
  void free_chain(Block* head) noexcept;
  void maybe_sweep();
  void sweep();
  template <typename Fire>
  std::size_t fire_due(Fire& fire);

  std::vector<Timer>* timers_;
  Millis tick_;
  std::uint64_t now_tick_;
  std::size_t live_ = 0;
  std::size_t stale_ = 0;
  bool advancing_ = false;
  std::uint32_t occupied_levels_ = 0;  // bit L set when occupied_[L] != 0
  std::array<std::uint64_t, kLevels> occupied_{};
  std::array<std::array<Slot, kSlotsPerLevel>, kLevels> slots_{};
  Block* free_blocks_ = nullptr;
  std::size_t free_block_count_ = 0;
  std::size_t block_count_ = 0;
};

// Drains the slot of now_tick_ (timers due now). fire() may append to it while it runs, so sizes
// and links are read afresh after every call.
template <typename Fire>
std::size_t HierarchicalWheel::fire_due(Fire& fire) {
  const unsigned index = now_tick_ & (kSlotsPerLevel - 1);
  std::size_t fired = 0;
  for (;;) {
    Block* const head = take_slot(0, index);
    if (head == nullptr) return fired;
    for (Block* block = head; block != nullptr; block = block->next) {
      for (std::uint32_t i = 0; i < block->size; ++i) {
        const Entry entry = block->entries[i];
        Timer& timer = (*timers_)[entry.id];
        if (timer.generation != entry.generation) {
          --stale_;
          continue;
        }
        ++timer.generation;  // idle before fire() runs, so fire() may schedule it again
        --live_;
        ++fired;
        fire(entry.id);
      }
    }
    free_chain(head);
  }
}

template <typename Fire>
std::size_t HierarchicalWheel::advance_to(Millis now, Fire&& fire) {
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

}  // namespace delayq::wheel
