// record_pool.cc — where TaskRecords live: TaskRecord's operator new and delete (declared in
// include/delayq/scheduler.h). Records of up to 64 or 128 bytes take fixed-size slots from slabs
// of 64 KiB, never returned to the system (the pool keeps its peak). Each thread keeps up to
// 2 * kBatch free slots and trades whole batches of kBatch with a process-wide list under a
// mutex, so making and freeing a record is a vector push or pop on the calling thread almost
// always, even though a record is usually made on one thread and freed on another (the case
// general-purpose allocators handle worst). Larger or over-aligned records use ::operator new.
// Built without the pool under AddressSanitizer, so ASan sees every record's lifetime.
#include <cstddef>
#include <mutex>
#include <new>
#include <utility>
#include <vector>

#include "delayq/scheduler.h"

namespace delayq::detail {
namespace {

#if defined(__SANITIZE_ADDRESS__)
constexpr bool kPooled = false;
#else
constexpr bool kPooled = true;
#endif
constexpr std::size_t kSlabBytes = 64 * 1024;
constexpr std::size_t kBatch = 256;

template <std::size_t kSlotBytes>
class GlobalPool {
 public:
  // Never destroyed: threads hand their slots back when they exit, even after main() returns.
  static GlobalPool& instance() {
    static GlobalPool* const pool = new GlobalPool;
    return *pool;
  }
  // Refills an empty thread cache with one batch.
  void take(std::vector<void*>& cache) {
    std::lock_guard lock(mutex_);
    if (batches_.empty()) {
      auto* slab =
          static_cast<std::byte*>(::operator new (kSlabBytes, std::align_val_t{kSlotBytes}));
      for (std::size_t first = 0; first < kSlabBytes / kSlotBytes; first += kBatch) {
        std::vector<void*>& slots = batches_.emplace_back();
        slots.reserve(kBatch);
        for (std::size_t i = first; i < first + kBatch; ++i) slots.push_back(slab + i * kSlotBytes);
      }
    }
    cache.insert(cache.end(), batches_.back().begin(), batches_.back().end());
    batches_.pop_back();
  }
  // One slot freed by a thread whose cache is gone.
  void give_one(void* slot) {
    std::vector<void*> slots{slot};
    std::lock_guard lock(mutex_);
    batches_.push_back(std::move(slots));
  }
  // Moves the last `n` slots of a thread cache to the shared list.
  void give(std::vector<void*>& cache, std::size_t n) {
    std::vector<void*> slots(cache.end() - static_cast<std::ptrdiff_t>(n), cache.end());
    cache.resize(cache.size() - n);
    std::lock_guard lock(mutex_);
    batches_.push_back(std::move(slots));
  }

 private:
  std::mutex mutex_;
  std::vector<std::vector<void*>> batches_;
};

// Set once a thread's caches are destroyed (a trivial thread_local, readable until the thread
// ends): a record freed after that, by a handle in a static or thread_local object destroyed
// later, goes straight back to the shared pool rather than into a destroyed cache.
thread_local bool caches_gone = false;

template <std::size_t kSlotBytes>
class ThreadCache {
 public:
  ThreadCache() { slots_.reserve(2 * kBatch); }
  ~ThreadCache() {
    caches_gone = true;
    if (!slots_.empty()) GlobalPool<kSlotBytes>::instance().give(slots_, slots_.size());
  }
  ThreadCache(const ThreadCache&) = delete;
  ThreadCache& operator=(const ThreadCache&) = delete;

  void* allocate() {
    if (slots_.empty()) GlobalPool<kSlotBytes>::instance().take(slots_);
    void* slot = slots_.back();
    slots_.pop_back();
    return slot;
  }
  void free(void* slot) noexcept {
    if (slots_.size() == 2 * kBatch) GlobalPool<kSlotBytes>::instance().give(slots_, kBatch);
    slots_.push_back(slot);  // within the capacity reserved: never allocates
  }

 private:
  std::vector<void*> slots_;
};

thread_local ThreadCache<64> small_records;
thread_local ThreadCache<128> large_records;

}  // namespace

void* TaskRecord::operator new(std::size_t size) {
  if (kPooled && size <= 64) return small_records.allocate();
  if (kPooled && size <= 128) return large_records.allocate();
  return ::operator new(size);
}

void TaskRecord::operator delete(void* record, std::size_t size) noexcept {
  if (!kPooled || size > 128) {
    ::operator delete(record, size);
  } else if (caches_gone) {  // the shared pool takes it: this thread's caches are destroyed
    if (size <= 64) {
      GlobalPool<64>::instance().give_one(record);
    } else {
      GlobalPool<128>::instance().give_one(record);
    }
  } else if (size <= 64) {
    small_records.free(record);
  } else {
    large_records.free(record);
  }
}

void* TaskRecord::operator new(std::size_t size, std::align_val_t align) {
  return ::operator new(size, align);
}

void TaskRecord::operator delete(void* record, std::size_t size, std::align_val_t align) noexcept {
  ::operator delete(record, size, align);
}

}  // namespace delayq::detail
