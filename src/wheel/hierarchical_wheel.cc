// hierarchical_wheel.cc — placement, cascading, the block pool and the stale-entry sweep.
#include "wheel/hierarchical_wheel.h"

#include <algorithm>
#include <bit>

namespace delayq::wheel {
namespace {

// Beyond this many pooled free blocks (and more than are in use), freed blocks go back to the heap.
constexpr std::size_t kMinPooledBlocks = 256;

// First tick of the slot `index` at `level`, in the level-(level+1) range that holds `now`.
std::uint64_t slot_start(std::uint64_t now, unsigned level, unsigned index) {
  const unsigned shift = level * HierarchicalWheel::kLevelBits;
  const unsigned parent_shift = shift + HierarchicalWheel::kLevelBits;
  const std::uint64_t base = parent_shift >= 64 ? 0 : (now >> parent_shift) << parent_shift;
  return base | (std::uint64_t{index} << shift);
}

}  // namespace

HierarchicalWheel::HierarchicalWheel(TimerTable& timers, HierarchicalWheelOptions options)
    : timers_(&timers),
      tick_(options.tick),
      now_tick_(0),
      min_sweep_entries_(options.min_sweep_entries) {
  DELAYQ_CHECK(options.tick.count() > 0);
  now_tick_ = now_tick(options.start, tick_);
}

HierarchicalWheel::~HierarchicalWheel() {
  for (auto& level : slots_) {
    for (auto& slot : level) {
      for (Block* block = slot.head; block != nullptr;) {
        Block* next = block->next;
        delete block;
        block = next;
      }
    }
  }
  while (free_blocks_ != nullptr) {
    Block* next = free_blocks_->next;
    delete free_blocks_;
    free_blocks_ = next;
  }
}

void HierarchicalWheel::schedule(TimerId id, Time deadline) {
  DELAYQ_CHECK(id < timers_->size());
  DELAYQ_CHECK(!scheduled(id));
  if (const std::size_t word = id / 64; word >= scheduled_.size()) {
    scheduled_.resize(std::max(word + 1, 2 * scheduled_.size()));
  }
  // Cancel and firing leave the generation as it was, so every schedule moves it on: a stale
  // entry, left by a cancel, never passes for the new one.
  const std::uint32_t generation = (*timers_)[id].generation + 1;
  place({std::max(deadline_tick(deadline, tick_), now_tick_), id, generation});
  (*timers_)[id].generation = generation;
  set_scheduled(id, true);
  ++live_;
  if (starts_epoch(generation)) {
    epoch_sweep_due_ = true;
    maybe_sweep();
  }
}

bool HierarchicalWheel::cancel(TimerId id) {
  DELAYQ_CHECK(id < timers_->size());
  if (!scheduled(id)) return false;
  set_scheduled(id, false);
  --live_;
  ++stale_;
  maybe_sweep();
  return true;
}

bool HierarchicalWheel::reschedule(TimerId id, Time deadline) {
  const bool was_scheduled = cancel(id);
  schedule(id, deadline);
  return was_scheduled;
}

HierarchicalWheel::Block* HierarchicalWheel::prepare_tail(unsigned level, unsigned index) {
  Slot& slot = slots_[level][index];
  if (slot.tail == nullptr || slot.tail->size == Block::kCapacity) {
    Block* block = new_block();  // may throw; nothing is changed yet
    if (slot.tail == nullptr) {
      slot.head = block;
    } else {
      slot.tail->next = block;
    }
    slot.tail = block;
  }
  occupied_[level].set(index);
  occupied_levels_ |= 1U << level;
  return slot.tail;
}

// Takes a slot's chain out of the wheel, leaving the slot empty; the caller frees the chain.
HierarchicalWheel::Block* HierarchicalWheel::detach_slot(unsigned level, unsigned index) noexcept {
  occupied_[level].clear(index);
  if (occupied_[level].empty()) occupied_levels_ &= ~(1U << level);
  Slot& slot = slots_[level][index];
  Block* const head = slot.head;
  slot.head = slot.tail = nullptr;
  return head;
}

// Empties a slot: all its blocks go back to the pool, but for a level-0 slot's first one.
void HierarchicalWheel::clear_slot(unsigned level, unsigned index) noexcept {
  occupied_[level].clear(index);
  if (occupied_[level].empty()) occupied_levels_ &= ~(1U << level);
  clear_chain(level, index);
}

void HierarchicalWheel::clear_chain(unsigned level, unsigned index) noexcept {
  Slot& slot = slots_[level][index];
  if (slot.head == nullptr) return;
  if (level == 0) {
    if (slot.head->next != nullptr) free_chain(slot.head->next);
    slot.head->next = nullptr;
    slot.head->size = 0;
    slot.tail = slot.head;
  } else {
    free_chain(slot.head);
    slot.head = slot.tail = nullptr;
  }
}

// Redistributes a slot that now_tick_ has just entered over the levels below it. Its entries
// share now's digits down to `level`, so each lands strictly lower, never in the chain being
// read. Order within each target slot is kept, which keeps equal ticks in schedule order. A
// level-1 slot becomes the run. Where entries move unchecked, each block goes back to the pool as
// soon as it is read, while it is in the cache, and is likely the next one the lower slots take.
void HierarchicalWheel::cascade(unsigned level, unsigned index) {
  if (level == 1) trim_run();
  Block* const head = detach_slot(level, index);
  if (level == 1 && head->next != nullptr) {
    build_run(head);
  } else if (level == 1 && stale_ != 0) {
    for_each_checked(head, [&](const Entry& entry, bool live) {
      if (live) {
        place(entry);
      } else {
        --stale_;
      }
    });
    free_chain(head);
  } else {
    walk_chain(head, [&](Block* block) {
      const std::uint32_t size = block->size;
      for (std::uint32_t i = 0; i < size; ++i) place(block->entries[i]);
      recycle(block);
    });
    trim_pool();
  }
}

// A dense window must not pin its memory: once the run is spent, capacity far beyond what the
// next window needs goes back to the heap.
void HierarchicalWheel::trim_run() {
  const std::size_t next_size = 4 * std::size_t{Block::kCapacity} * 64;  // generous for one window
  if (run_.capacity() > next_size) std::vector<Entry>().swap(run_);
}

// The level-1 slot now_tick_ has just entered holds exactly the level-0 window that starts at
// now_tick_; the previous window's run is spent (every slot of it fired on the way here). A
// stable counting sort by the last digit lays the window out as one array in firing order, so
// it fires walking memory front to back; stale entries are dropped on the way. The sort costs
// O(256) besides, so a slot of one block or less is placed in level-0 chains instead.
void HierarchicalWheel::build_run(Block* head) {
  DELAYQ_CHECK(run_fired_ >= run_begin_[kSlotsPerLevel]);
  // Pass 1 counts each tick's timers. A stale entry is marked with tick 0 in place (no timer in
  // a level-1 slot has it: the slot starts at tick 256 or later), so pass 2 need not read its
  // Timer again.
  std::array<std::uint32_t, kSlotsPerLevel> counts{};
  if (stale_ != 0) {
    for_each_checked(head, [&](Entry& entry, bool live) {
      if (live) {
        ++counts[entry.tick & (kSlotsPerLevel - 1)];
      } else {
        entry.tick = 0;
        --stale_;
      }
    });
  } else {
    walk_chain(head, [&](const Block* block) {
      for (std::uint32_t i = 0; i < block->size; ++i) {
        ++counts[block->entries[i].tick & (kSlotsPerLevel - 1)];
      }
    });
  }
  std::array<std::uint32_t, kSlotsPerLevel> next{};
  std::uint32_t total = 0;
  for (unsigned slot = 0; slot < kSlotsPerLevel; ++slot) {
    run_begin_[slot] = next[slot] = total;
    total += counts[slot];
    if (counts[slot] != 0) occupied_[0].set(slot);
  }
  run_begin_[kSlotsPerLevel] = total;
  run_fired_ = 0;
  if (total != 0) occupied_levels_ |= 1U;
  run_.resize(total);
  // Pass 2 reads the chain again, from the cache now, puts each timer in its place and frees
  // the blocks.
  for (Block* block = head; block != nullptr;) {
    for (std::uint32_t i = 0; i < block->size; ++i) {
      const Entry& entry = block->entries[i];
      if (entry.tick != 0) run_[next[entry.tick & (kSlotsPerLevel - 1)]++] = entry;
    }
    Block* const after = block->next;
    recycle(block);
    block = after;
  }
  trim_pool();
}

// Start tick of the earliest occupied slot. Every timer at level L is later than every timer
// below L, and occupied slots lie after now's own digit, so the lowest set bit of the lowest
// occupied level is the answer: O(1).
std::uint64_t HierarchicalWheel::next_event_tick() const noexcept {
  const auto level = static_cast<unsigned>(std::countr_zero(occupied_levels_));
  return slot_start(now_tick_, level, occupied_[level].first());
}

std::optional<Time> HierarchicalWheel::next_deadline() const noexcept {
  if (live_ == 0) return std::nullopt;
  const std::uint64_t tick = std::max(next_event_tick(), now_tick_);
  if (tick > last_tick(tick_)) return std::nullopt;
  return tick_time(tick, tick_);
}

std::size_t HierarchicalWheel::memory_bytes() const noexcept {
  return block_count_ * sizeof(Block) + run_.capacity() * sizeof(Entry) +
         scheduled_.capacity() * sizeof(std::uint64_t);
}

void HierarchicalWheel::prefetch_block(const Block* block) noexcept {
  if (block == nullptr) return;
  for (std::size_t line = 0; line < sizeof(Block); line += 64) {
    __builtin_prefetch(reinterpret_cast<const char*>(block) + line);
  }
}

HierarchicalWheel::Block* HierarchicalWheel::new_block() {
  Block* block = free_blocks_;
  if (block != nullptr) {
    free_blocks_ = block->next;
    --free_block_count_;
  } else {
    block = new Block;
    ++block_count_;
  }
  block->next = nullptr;
  block->size = 0;
  return block;
}

// Freed blocks go to the pool; the pool is trimmed back to max(kMinPooledBlocks, blocks in use),
// so memory follows the pending timers down as well as up.
void HierarchicalWheel::free_chain(Block* head) noexcept {
  while (head != nullptr) {
    Block* const next = head->next;
    recycle(head);
    head = next;
  }
  trim_pool();
}

void HierarchicalWheel::trim_pool() noexcept {
  while (free_block_count_ > kMinPooledBlocks &&
         free_block_count_ > block_count_ - free_block_count_) {
    Block* block = free_blocks_;
    free_blocks_ = block->next;
    delete block;
    --free_block_count_;
    --block_count_;
  }
}

void HierarchicalWheel::maybe_sweep() {
  if (advancing_ || stale_ == 0) return;
  if (epoch_sweep_due_ || (stale_ > live_ && stale_ >= min_sweep_entries_)) sweep();
}

// Drops every stale entry, keeping the order of the rest: O(entries), paid for by the cancels
// that made at least half of them stale. With no live timer left, nothing needs reading.
void HierarchicalWheel::sweep() {
  sweep_run();
  for (unsigned level = 0; level < kLevels; ++level) {
    for (unsigned index = 0; index < kSlotsPerLevel; ++index) {
      if (!occupied_[level].test(index)) continue;
      if (live_ == 0) {
        clear_slot(level, index);
      } else {
        sweep_slot(level, index);
      }
    }
  }
  stale_ = 0;
  epoch_sweep_due_ = false;
}

// Drops the run's fired and stale entries, keeping the rest in order, each in its slot's range.
void HierarchicalWheel::sweep_run() {
  if (live_ == 0) {  // all stale: nothing needs reading
    run_.clear();
    run_begin_.fill(0);
    run_fired_ = 0;
    return;
  }
  std::uint32_t out = 0;
  std::uint32_t begin = run_fired_;
  for (unsigned slot = 0; slot < kSlotsPerLevel; ++slot) {
    const std::uint32_t end = std::max(run_begin_[slot + 1], begin);
    run_begin_[slot] = out;
    for (std::uint32_t i = begin; i < end; ++i) {
      if (is_live(run_[i])) run_[out++] = run_[i];
    }
    begin = end;
  }
  run_begin_[kSlotsPerLevel] = out;
  run_fired_ = 0;
  run_.resize(out);
}

// Compacts one slot in place: a write cursor trails the read cursor through the chain, and
// the blocks left empty behind it go back to the pool.
void HierarchicalWheel::sweep_slot(unsigned level, unsigned index) {
  Slot& slot = slots_[level][index];
  Block* out = slot.head;
  std::uint32_t out_size = 0;
  for_each_checked(slot.head, [&](const Entry& entry, bool live) {
    if (!live) return;
    if (out_size == Block::kCapacity) {
      out->size = out_size;
      out = out->next;
      out_size = 0;
    }
    out->entries[out_size++] = entry;
  });
  if (out_size == 0 && out == slot.head) {
    if (level == 0 && run_holds(index)) {
      clear_chain(level, index);  // its part of the run keeps the slot occupied
    } else {
      clear_slot(level, index);
    }
    return;
  }
  out->size = out_size;
  free_chain(out->next);
  out->next = nullptr;
  slot.tail = out;
}

}  // namespace delayq::wheel
