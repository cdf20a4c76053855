// An arena: one run manager and the slabs and large blocks cut from its runs, behind one lock.
//
//   small (<= 16 KiB)   a region of a slab; each size class has a bin: the slab being
//                       allocated from, a list of the others that have free regions, and a
//                       stash of free regions that thread caches flushed (as tcmalloc's
//                       transfer cache): a flush or a refill moves a batch of pointers with
//                       one copy, and slab bitmaps are touched only when the stash overflows
//   large (<= ~2 MiB)   a run of whole pages, its length in the page map's first entry
//
// Slow paths (a new slab, a run freed) tick the decay clock; free runs that stayed dirty for
// decay_ms are returned to the OS.
//
// Every arena has an index (the one PM_ARENA(i) names). Its chunks are tagged with the arena
// in the address map, so that any block finds its arena from its address. reset() frees every
// block at once, by walking the page maps of its chunks: the pages stay, for the next blocks.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

#include "chunk_pal.h"
#include "lock.h"
#include "meta_pool.h"
#include "pagemap/intrusive_list.h"
#include "pagemap/page_map.h"
#include "remote_frees.h"
#include "runs.h"
#include "size_classes.h"
#include "slab.h"

namespace pagemalloc {

// Regions a bin's stash holds at most: 64 KiB worth, and no more than 1024.
constexpr unsigned stash_capacity(unsigned size_class) {
  const unsigned by_bytes = unsigned(64 * 1024 / kSizeClasses[size_class].size);
  return by_bytes < 1024 ? by_bytes : 1024;
}
// The stashes of all classes, packed one after another: class c's starts at
// kStashOffsets[c] and holds stash_capacity(c) slots (some 10,000 slots in all).
inline constexpr auto kStashOffsets = [] {
  std::array<unsigned, kNumClasses + 1> offsets{};
  for (unsigned c = 0; c < kNumClasses; ++c) offsets[c + 1] = offsets[c] + stash_capacity(c);
  return offsets;
}();
inline constexpr unsigned kStashTotalSlots = kStashOffsets[kNumClasses];

struct ArenaStats {
  std::size_t allocated = 0;     // usable bytes of small and large blocks outside the arena
                                 // (live, or in thread caches)
  std::size_t blocks = 0;        // how many blocks those are
  std::size_t active_pages = 0;  // pages in slabs and large runs
  std::size_t chunks = 0;
  std::size_t dirty_pages = 0;
  std::size_t free_pages = 0;    // dirty + retained
  std::size_t purged_pages = 0;  // since start
  std::size_t metadata = 0;      // bytes of slab descriptors' and run records' pools

  ArenaStats& operator+=(const ArenaStats& o) {
    allocated += o.allocated;
    blocks += o.blocks;
    active_pages += o.active_pages;
    chunks += o.chunks;
    dirty_pages += o.dirty_pages;
    free_pages += o.free_pages;
    purged_pages += o.purged_pages;
    metadata += o.metadata;
    return *this;
  }
};

class Arena {
 public:
  using Runs = SelectedRuns<ChunkPal>;
  static_assert(RunManager<Runs>);

  // huge: the huge blocks' manager that gives back its cache before a chunk is mapped
  // (chunk_pal.h), or nullptr.
  constexpr explicit Arena(unsigned index, HugeManager* huge = nullptr)
      : index_(index), pal_(this, huge), runs_(pal_), stash_slots_{} {}
  // For an arena placed in memory of its own: the stashes (most of the arena's size) are left
  // unwritten, so that an arena whose stashes are never used (an explicit one) never makes
  // their pages resident. A stash slot is only read after it was written.
  struct LeaveStashesUnwritten {};
  Arena(unsigned index, HugeManager* huge, LeaveStashesUnwritten)
      : index_(index), pal_(this, huge), runs_(pal_) {}
  Arena(const Arena&) = delete;
  Arena& operator=(const Arena&) = delete;

  [[nodiscard]] unsigned index() const { return index_; }

  // nullptr when the OS refuses memory.
  void* alloc_small(unsigned size_class);
  // Requires: slab's entry was read for p. Aborts on misuse.
  void free_small(Slab* slab, void* p, const char* call);
  // Up to n regions of one class into out (a thread cache's refill); returns how many.
  unsigned alloc_batch(unsigned size_class, void** out, unsigned n);
  // Frees n small regions (a thread cache's flush) under one lock.
  void free_batch(void* const* regions, unsigned n, const char* call);
  // Frees n small regions of one class from a thread whose cache belongs to another arena,
  // without waiting for the arena's lock: to its stash if the lock is free, else to the
  // class's inbox (remote_frees.h), taken by the next refill of that class, which hands them
  // out first. When an inbox holds kRemoteCollectBytes or more, the pusher collects it if the
  // lock is free, so that it stays bounded when the arena's own threads stop allocating that
  // class. Regions of the 8-byte class, too small for the inbox's link, wait for the lock
  // (free_batch).
  void free_remote(void* const* regions, unsigned n);
  static constexpr std::size_t kRemoteCollectBytes = 256 * 1024;
  // Whether the small region p is free in its slab's bitmap (a double-free check).
  bool region_is_free(Slab* slab, const void* p);

  // A run of at least `bytes` (> kMaxSmallSize) aligned to `align`; nullptr when the OS
  // refuses memory. `zeroed` tells whether its pages are known to read zero.
  void* alloc_large(std::size_t bytes, std::size_t align, bool& zeroed);
  // Frees the large block p (pages long, its page-map entry read for this free). When another
  // thread holds the lock, the block is deferred instead of waited for: pushed to an inbox of
  // large blocks (without the lock) that the holder, or the next thread to take the lock,
  // frees. So a thread freeing another thread's large blocks never queues behind it.
  void free_large(void* p, PageCount pages, const char* call = "free");
  // Grows or shrinks the large block at p (pages long) to `want` pages without moving it.
  bool resize_large(void* p, PageCount pages, PageCount want);

  // Frees every block of the arena (and every region stashed). The pages stay, free and
  // dirty, until the decay returns them to the OS. Requires: no thread cache holds regions
  // of this arena (an explicit arena's blocks never enter a cache).
  void reset();

  // Returns the stashed regions to their slabs, then freed pages to the OS.
  void purge_all();
  // Purges the oldest free dirty pages, at least `bytes` of them if it holds as many (a huge
  // block beside the arena has just taken as many from the OS: huge.h). Returns the bytes.
  std::size_t purge_oldest(std::size_t bytes);
  ArenaStats stats();
  // The run manager's invariants: nullptr, or what is broken.
  const char* check_invariants();
  // The page maps of the arena's chunks against its slabs, bins, stashes and counts
  // (heap_invariants.cpp): nullptr, or what is broken.
  const char* check_blocks();

  // fork(): the lock is taken before and released after, in the parent and in the child, so
  // that the child never inherits it half-held (fork.cpp).
  void lock_for_fork() { lock_.lock(); }
  void unlock_after_fork() { lock_.unlock(); }
  const RunCounterValues& run_counters() const { return runs_.counters(); }

 private:
  struct Bin {
    Slab* current = nullptr;  // allocated from first; never on `partial`
    IntrusiveList<Slab, &Slab::prev, &Slab::next> partial;  // other slabs with free regions
    unsigned stashed = 0;                                   // regions in the stash
  };
  // Slots 0 .. bins_[c].stashed-1 of class c's stash hold free regions.
  void** stash_of(unsigned size_class) { return stash_slots_ + kStashOffsets[size_class]; }

  Slab* next_slab(Bin& bin, unsigned size_class);
  void give_back(Slab* slab, void* p, const char* call);
  void unstash_all();
  void free_large_locked(void* p, PageCount pages, const char* call);
  void free_batch_locked(void* const* regions, unsigned n, const char* call);
  // Releases the lock, after freeing the large blocks deferred meanwhile.
  void unlock() {
    if (deferred_large_.maybe_nonempty()) free_deferred_large();
    lock_.unlock();
  }
  static constexpr std::uintptr_t kDeferredKey = 0x7061'6765'6465'6665;  // "pagedefe"
  // Requires: lock_ held. Frees every deferred large block.
  void free_deferred_large();
  // Takes the lock; on release, frees the large blocks deferred meanwhile.
  class Locked {
   public:
    explicit Locked(Arena& arena) : arena_(arena) { arena_.lock_.lock(); }
    ~Locked() { arena_.unlock(); }
    Locked(const Locked&) = delete;
    Locked& operator=(const Locked&) = delete;

   private:
    Arena& arena_;
  };
  // Requires: lock_ held. Up to n regions of the class's inbox into out (returns how many);
  // the rest of the chain stays for the next refill. Regions waiting there still count as
  // handed out (allocated_, blocks_) until they are taken.
  unsigned take_remote(unsigned size_class, void** out, unsigned n);
  // Requires: lock_ held. Every region waiting for the class, to its stash or slab.
  void collect_remote(unsigned size_class);
  void collect_all_remote();
  void release_slab(Slab* slab);
  void tick();
  void tag_interior(std::byte* chunk, PageIndex from, PageIndex to);
  void free_every_block(std::byte* chunk);
  void mark_slab_pages_free(const Slab* slab);

  const unsigned index_;
  Lock lock_;
  ChunkPal pal_;
  Runs runs_;
  Bin bins_[kNumClasses];
  MetaPool<Slab> slab_pool_;
  std::size_t allocated_ = 0;
  std::size_t blocks_ = 0;
  std::size_t active_pages_ = 0;
  std::size_t purged_pages_ = 0;
  std::uint64_t last_purge_ms_ = 0;
  RemoteFrees remote_[kNumClasses];       // per class: regions freed by other arenas' threads
  void* remote_taken_[kNumClasses] = {};  // per class: the rest of a chain taken from remote_
  RemoteFrees deferred_large_;            // large blocks freed while another thread held the lock
  void* stash_slots_[kStashTotalSlots];   // last: apart from everything a slow path touches
};

}  // namespace pagemalloc
