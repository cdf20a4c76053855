// Thread caches: a small stack of free regions per size class and thread, so that most small
// allocations and frees touch no lock (jemalloc's tcache, glibc's tcache).
//
// A cache is filled from its arena and flushed back to it in batches of half its capacity,
// under one lock acquisition each. The cache record comes from a pool (not from TLS, whose
// static size is limited); each thread holds a pointer to it. A pthread key's destructor
// returns the regions and the record when the thread exits; a thread that is exiting, or
// that is setting up its cache, bypasses the cache.
//
// A freed region's first word is set to a key: a free that finds the key there checks the
// cache and the slab's bitmap, and reports a double free instead of caching the region twice.
//
// A cache belongs to one automatic arena. The fast path caches only that arena's regions; a
// region of another automatic arena (freed by a thread other than the one that allocated
// it) goes in through push_foreign, from the slow path, without a lock, and marks its bin
// mixed: a mixed bin's flush returns each region to the arena that holds it, found through
// the address map (as jemalloc's tcache flush sorts by arena).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "size_classes.h"

namespace pagemalloc {

class Arena;

class ThreadCache {
 public:
  static constexpr unsigned kSlots = 64;   // per size class
  static constexpr unsigned kBatch = kSlots / 2;

  // The calling thread's cache, created on first use; nullptr while it must be bypassed.
  static ThreadCache* get(Arena& arena) {
    if (current_ != nullptr) [[likely]] return current_;
    return create(arena);
  }
  // The calling thread's cache if it has one.
  static ThreadCache* current() { return current_; }

  // The arena it takes regions from and returns them to; only regions of this arena enter it.
  [[nodiscard]] Arena* arena() const { return arena_; }

  // nullptr when the arena has no memory left. The region's first word is cleared (it held
  // the freed key).
  void* pop(unsigned size_class) {
    Bin& bin = bins_[size_class];
    std::uint32_t count = bin.count.load(std::memory_order_relaxed);
    if (count == 0) [[unlikely]] return refill(size_class);
    void* p = bin.slots[--count];
    bin.count.store(count, std::memory_order_relaxed);
    *static_cast<std::uintptr_t*>(p) = 0;
    return p;
  }

  // Requires: p is a live region of size_class not yet in any cache.
  void push(unsigned size_class, void* p) {
    Bin& bin = bins_[size_class];
    std::uint32_t count = bin.count.load(std::memory_order_relaxed);
    if (count == kSlots) [[unlikely]] count = flush(size_class, kBatch);
    bin.slots[count] = p;
    bin.count.store(count + 1, std::memory_order_relaxed);
  }

  // Requires: as push; p belongs to another automatic arena than this cache's.
  void push_foreign(unsigned size_class, void* p) {
    bins_[size_class].mixed = true;
    push(size_class, p);
  }

  [[nodiscard]] bool holds(unsigned size_class, const void* p) const;

  // Returns every cached region to the arena (thread exit, or pm_purge on this thread).
  void flush_all();

  static std::uintptr_t freed_key() { return kFreedKey; }

  // Bytes of free regions held by all threads' caches (for the statistics).
  static std::size_t bytes_cached_by_all();

  // fork(): the registry's lock is held across it. In the child only the forking thread
  // exists: the other threads' caches are dropped, and the regions they held are lost (their
  // owners may have been halfway through a push or a pop, so they cannot be trusted).
  static void lock_for_fork();
  static void unlock_after_fork_in_parent();
  static void reset_after_fork_in_child();

 private:
  struct Bin {
    std::atomic<std::uint32_t> count{0};  // written by the owner only; read by statistics
    bool mixed = false;                   // may hold regions of other arenas
    void* slots[kSlots];
  };

  static ThreadCache* create(Arena& arena);
  static void on_thread_exit(void* cache);
  void* refill(unsigned size_class);
  // Returns the n oldest regions to their arenas; returns the new count.
  std::uint32_t flush(unsigned size_class, unsigned n);
  static void return_to_owners(void* const* regions, unsigned n);

  static constexpr std::uintptr_t kFreedKey = 0x7061'6765'6672'6565;  // "pagefree"
  static inline constinit thread_local ThreadCache* current_ = nullptr;

  Arena* arena_ = nullptr;
  ThreadCache* prev_ = nullptr;  // the list of live caches
  ThreadCache* next_ = nullptr;
  Bin bins_[kNumClasses];
};

}  // namespace pagemalloc
