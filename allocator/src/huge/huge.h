// Huge blocks: requests above the largest run, served straight from the OS as extents of
// whole chunks (chunk-sized granules), chunk-aligned so that free() recognises them by alignment.
//
// A freed extent is not unmapped at once: it stays, resident, on a list until the decay
// passes, coalesced with free extents next to it. A later request is carved from the best
// fitting one, and a block grows in place into the free extent after it. This is what makes a
// doubling buffer fast on its second build ([Korn 2018]: the pages "assigned to the process that
// were unused but not reclaimed"). When nothing follows, mremap extends the mapping in place,
// or moves its pages to a new address without copying them.
//
// Free pages are not kept on one side while the other side maps more. An arena beside the
// manager that needs a chunk takes the first granule of the oldest free extent as it is,
// mapped and resident (take_chunk), before it maps a fresh one: its pages are not faulted in
// again. After the manager maps more (a new extent, a mapping grown or moved), the
// arenas beside it purge as many bytes of their oldest free pages (Neighbours). A program whose
// memory moves between huge blocks and smaller ones reuses the pages it freed instead of adding
// new ones to them (jq, lua and python drop 8 to 20 MB of peak RSS). A huge block that no free
// extent fits does not unmap the cached ones: a workload of many huge blocks of random sizes
// (the large-blocks benchmark) would then unmap and map on most calls instead of finding a fit.
//
// Extents are found through the address map: their first and last granules point to their
// record, as boundary tags do in the page map. A record names the manager it belongs to (the
// shared one of the automatic arenas, or an explicit arena's own), so that a free finds it.
// Live extents are on a list too, so that an explicit arena's reset can free them all.
#pragma once

#include <cstddef>
#include <cstdint>

#include "chunks/meta_pool.h"
#include "design/allocator.h"
#include "pagemap/intrusive_list.h"
#include "support/lock.h"

namespace pagemalloc {

template <class Config>
struct Allocator<Config>::HugeExtent {
  HugeManager* owner = nullptr;  // set when the record is taken from its manager's pool
  std::byte* base = nullptr;
  std::size_t reserved = 0;  // bytes of address space, a multiple of kChunkSize
  std::size_t usable = 0;    // bytes the block may use, a multiple of the page size (in use)
  bool in_use = false;
  std::uint64_t freed_at_ms = 0;
  HugeExtent* prev = nullptr;  // the list of free extents, oldest first, or of live ones
  HugeExtent* next = nullptr;
};

struct HugeStats {
  std::size_t allocated = 0;  // usable bytes of live huge blocks
  std::size_t blocks = 0;     // live huge blocks
  std::size_t mapped = 0;     // bytes of all extents, live or free
  std::size_t cached = 0;     // bytes of free extents (resident until the decay)
  std::size_t purged = 0;     // bytes unmapped by the decay, since start
  std::size_t moved = 0;      // blocks moved by remapping (no copy)
  std::size_t metadata = 0;

  HugeStats& operator+=(const HugeStats& o) {
    allocated += o.allocated;
    blocks += o.blocks;
    mapped += o.mapped;
    cached += o.cached;
    purged += o.purged;
    moved += o.moved;
    metadata += o.metadata;
    return *this;
  }
};

// The arenas beside a huge blocks' manager: purge(context, bytes) has them purge at least
// `bytes` of their oldest free pages if they hold as many. Called without the manager's lock.
struct HugeNeighbours {
  void (*purge)(void* context, std::size_t bytes) = nullptr;
  void* context = nullptr;
};

template <class Config>
class Allocator<Config>::HugeManager {
 public:
  using Neighbours = HugeNeighbours;

  // arena: the explicit arena this manager serves, or kNoArena (the automatic arenas').
  constexpr explicit HugeManager(unsigned arena, Neighbours neighbours = {})
      : arena_(arena), neighbours_(neighbours) {}
  HugeManager(const HugeManager&) = delete;
  HugeManager& operator=(const HugeManager&) = delete;

  [[nodiscard]] unsigned arena() const { return arena_; }

  // The manager whose record the address map holds for p (a chunk-aligned address), or
  // nullptr. Whether p is a live block is for that manager's calls to tell.
  [[gnu::hot]] static HugeManager* owner_of(const void* p);

  // nullptr when the OS refuses memory. `zeroed`: the memory is known to read zero.
  [[gnu::hot]] void* alloc(std::size_t bytes, std::size_t align, bool& zeroed);
  // Frees the block at p; aborts with a message if p is not a live huge block.
  [[gnu::hot]] void free(void* p, const char* call);
  // The usable size of the live huge block at p, or 0 if p is not one.
  [[gnu::hot]] std::size_t usable_size(const void* p);
  // Resizes in place to hold `bytes`; false (and unchanged) if the space after is taken.
  [[gnu::hot]] bool resize_in_place(void* p, std::size_t bytes);
  // Moves the block's pages to a new chunk-aligned address that holds `bytes`, without
  // copying; nullptr if the kernel cannot.
  [[gnu::hot]] void* remap(void* p, std::size_t bytes);

  // Frees every live block (an explicit arena's reset); the extents stay until the decay.
  void free_all();
  std::size_t purge_all();  // every free extent unmapped; the bytes that went
  // As Arena::advance_decay: unmaps what has been free for decay_ms.
  [[gnu::hot]] void advance_decay(bool wait);
  // Takes the first granule (kChunkSize bytes) of the oldest free extent off the manager, its
  // pages as they are, for an arena beside it to use as a chunk (arena_chunks.h); nullptr if no
  // extent is free.
  [[gnu::hot]] void* take_chunk();
  HugeStats stats();
  // The live and free lists against the address map and the counts (heap_invariants_impl.h):
  // nullptr, or what is broken.
  const char* check_invariants();

  // fork(): as Arena's (fork_impl.h).
  void lock_for_fork() { lock_.lock(); }
  void unlock_after_fork() { lock_.unlock(); }

 private:
  // The bytes one call maps anew. Declared before the call's LockGuard, it is destroyed after
  // the lock is released, and has the neighbours purge as many then.
  class Growth {
   public:
    explicit Growth(const Neighbours& n) : neighbours_(n) {}
    Growth(const Growth&) = delete;
    Growth& operator=(const Growth&) = delete;
    ~Growth() {
      if (bytes_ != 0 && neighbours_.purge != nullptr)
        neighbours_.purge(neighbours_.context, bytes_);
    }
    void add(std::size_t bytes) { bytes_ += bytes; }

   private:
    const Neighbours& neighbours_;
    std::size_t bytes_ = 0;
  };

  HugeExtent* new_record();
  HugeExtent* live_extent(const void* p);
  void publish(HugeExtent* e);
  void unpublish(HugeExtent* e);
  [[gnu::hot]] void add_free(HugeExtent* e);
  HugeExtent* free_neighbour_after(const HugeExtent* e);
  HugeExtent* free_neighbour_before(const HugeExtent* e);
  void split_off_free_tail(HugeExtent* e, std::size_t keep);
  [[gnu::hot]] void tick();
  void purge(std::uint64_t min_age_ms);
  void unmap_free(HugeExtent* e);

  using ExtentList = IntrusiveList<HugeExtent, &HugeExtent::prev, &HugeExtent::next>;

  const unsigned arena_;
  const Neighbours neighbours_;
  Lock lock_;
  OsPal os_;
  MetaPool<HugeExtent> records_;
  ExtentList free_;
  ExtentList live_;
  std::size_t allocated_ = 0;
  std::size_t blocks_ = 0;
  std::size_t mapped_ = 0;
  std::size_t cached_ = 0;
  std::size_t purged_ = 0;
  std::size_t moved_ = 0;
  std::uint64_t now_ms_ = 0;
  std::uint64_t last_purge_ms_ = 0;
};

// The build's.
using HugeExtent = Allocator<BuildConfig>::HugeExtent;
using HugeManager = Allocator<BuildConfig>::HugeManager;

}  // namespace pagemalloc
