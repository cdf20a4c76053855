// The bump side of an explicit arena created with PM_ARENA_BUMP: chunks carved into regions,
// each region lent to one owner (a thread's lease, or a pagemalloc::BumpArena's cursor) who
// bumps blocks from it with an add, a compare and two stores, taking no lock.
//
//   chunk     2 MiB (or 1 MiB: kLgChunkSize), chunk-aligned, tagged kBumpChunk in the
//             address map with this space; kept across resets, returned by release_all
//             (destroy). Its first cache line holds the address of its size map; blocks
//             start after it, so that blocks of a multiple of 64 bytes lie on lines of their
//             own (a 256-byte block 16 bytes off a line spans five lines, and its memset took
//             1.7 times as long: docs/measurements.md)
//   region    128 KiB of a chunk; an owner whose span is full takes the next span under the
//             lock: one region, then twice as many as its last span (up to 4: 512 KiB, so
//             that a block's length in granules fits in 15 bits)
//   block     16-aligned (or aligned as asked, up to a page), its size rounded up to 16 bytes
//             (a block of 0 bytes takes 16): blocks lie next to each other, with no header
//   size map  one 16-bit entry per 16 bytes of the chunk (an eighth of it, mapped beside): at a
//             block's first granule, its length in granules, the top bit set once freed;
//             0 elsewhere (with checks on, a reset zeroes the maps, so that a block of an
//             earlier round is seen as no block)
//   epoch     advanced by every reset and destroy: a lease or cursor of an older epoch is
//             stale (its owner takes a new region)
//   lease     a thread's region of one bump arena for pm_mallocx(PM_ARENA(i)): a few slots
//             per thread, indexed by arena; a thread that moves to another arena on the same
//             slot gives the rest of its region back to the first
//
// Reset takes time in nothing: the epoch moves and the next region is the first chunk's
// first again. Blocks up to kBumpMaxBlock bytes aligned up to kBumpMaxAlign come from here;
// the arena serves the rest from its slabs, runs and huge extents (explicit_arenas.h).
#pragma once

#include <pthread.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "chunks/address_map.h"
#include "chunks/chunk_list.h"
#include "design/allocator.h"
#include "pagemalloc/pagemalloc.h"
#include "pagemap/pages.h"
#include "support/lock.h"

namespace pagemalloc {

inline constexpr std::size_t kBumpRegionSize = std::size_t{128} << 10;
inline constexpr std::size_t kBumpRegionsPerChunk = kChunkSize / kBumpRegionSize;
inline constexpr std::size_t kBumpMaxSpan = 4;  // regions
inline constexpr std::size_t kBumpMaxBlock = std::size_t{16} << 10;
inline constexpr std::size_t kBumpMaxAlign = kPageSize;
inline constexpr std::size_t kBumpGranule = 16;
inline constexpr std::size_t kBumpChunkHeader = 64;
inline constexpr std::size_t kBumpSizeMapBytes = kChunkSize / kBumpGranule * sizeof(std::uint16_t);

// Bytes a block of this size takes (and what pm_malloc_usable_size says of it).
constexpr std::size_t bump_stride(std::size_t size) {
  return size == 0 ? kBumpGranule : (size + kBumpGranule - 1) & ~(kBumpGranule - 1);
}
constexpr std::size_t bump_usable(std::size_t size) { return bump_stride(size); }

// The size map's entries.
struct BumpSizeMap {
  static constexpr std::uint16_t kFreed = 0x8000;
  static constexpr std::size_t kMaxGranules = 0x7FFF;

  // The entry of the block at p, in the chunk whose map is at `map`.
  static std::uint16_t* entry(const void* p) {
    const std::byte* chunk = chunk_base_of(p);
    std::uint16_t* map;
    std::memcpy(&map, chunk, sizeof map);
    return map + (static_cast<const std::byte*>(p) - chunk) / kBumpGranule;
  }
  // pm_bump_cursor.size_map for a span of this chunk: the entry of block b is at
  // (b >> 3) + bias (b is 16-aligned, the chunk chunk-aligned).
  static unsigned long long bias(const std::byte* chunk, const std::uint16_t* map) {
    return reinterpret_cast<std::uintptr_t>(map) - (reinterpret_cast<std::uintptr_t>(chunk) >> 3);
  }
  static std::uint16_t* entry(const pm_bump_cursor& c, std::uintptr_t block) {
    return reinterpret_cast<std::uint16_t*>((block >> 3) + c.size_map);
  }
};

// Bumps a block from the cursor's span; nullptr when it does not fit.
// Requires: size <= kBumpMaxBlock, align a power of two <= kBumpMaxAlign.
inline void* bump(pm_bump_cursor& c, std::size_t size, std::size_t align) {
  auto b = reinterpret_cast<std::uintptr_t>(c.next);
  if (align > kBumpGranule) b = (b + align - 1) & ~(align - 1);
  const std::size_t stride = bump_stride(size);
  const std::uintptr_t next = b + stride;
  if (next > reinterpret_cast<std::uintptr_t>(c.end)) return nullptr;
  // Relaxed stores (plain moves): the statistics read a thread's lease from another thread
  // (BumpSpace::stats).
  if (const std::size_t gap = b - reinterpret_cast<std::uintptr_t>(c.next); gap != 0)
    std::atomic_ref<std::size_t>(c.skipped).store(c.skipped + gap, std::memory_order_relaxed);
  std::atomic_ref<char*>(c.next).store(reinterpret_cast<char*>(next), std::memory_order_relaxed);
  *BumpSizeMap::entry(c, b) = std::uint16_t(stride / kBumpGranule);
  std::atomic_ref<std::size_t>(c.blocks).store(c.blocks + 1, std::memory_order_relaxed);
  return reinterpret_cast<void*>(b);
}

// The bytes of blocks the cursor bumped since its counts were last taken.
inline std::size_t bumped_bytes(const pm_bump_cursor& c) {
  return std::size_t(c.next - c.begin) - c.skipped;
}

// A thread's lease of a span of one bump arena (pm_mallocx(PM_ARENA(i))), linked into its
// arena's list of leases (so that the statistics count what the lease bumped).
template <class Config>
struct Allocator<Config>::BumpLease {
  pm_bump_cursor cursor;
  BumpSpace* space;
  BumpLease* next;
  // Blocks of the arena this thread freed (of any owner), counted here without an atomic
  // addition; the statistics add them up.
  std::size_t freed_blocks;
  std::size_t freed_bytes;
};
inline constexpr unsigned kBumpLeaseSlots = 8;

struct BumpStats {
  std::size_t blocks = 0;   // bumped minus freed
  std::size_t bytes = 0;    // their strides
  std::size_t regions = 0;  // handed out since the last reset
  std::size_t chunks = 0;
};

template <class Config>
class Allocator<Config>::BumpSpace {
 public:
  explicit BumpSpace(unsigned index) : index_(index) {}

  // The arena's kind, set by create while no thread can use the index; `sampled`: made with
  // prof:true, its pm_mallocx blocks go through the heap profiler (Heap::bump_sampled).
  void set_kind(bool bump, bool freeable, bool sampled) {
    bump_ = bump;
    unsampled_bump_ = bump && !sampled;
    freeable_ = freeable;
  }
  [[nodiscard]] bool enabled() const { return bump_; }
  // A bump arena whose blocks the profiler does not sample: one test of one flag.
  [[nodiscard]] bool bumps_unsampled() const { return unsampled_bump_; }
  [[nodiscard]] bool freeable() const { return freeable_; }
  [[nodiscard]] unsigned index() const { return index_; }

  // A block from the calling thread's lease; nullptr when the size or alignment is not for
  // the bump path, or out of memory (the arena's ordinary path serves those).
  void* allocate(std::size_t size, std::size_t align) {
    if (size > kBumpMaxBlock || align > kBumpMaxAlign) return nullptr;
    BumpLease& lease = t_leases_[index_ % kBumpLeaseSlots];
    if (lease.space == this && lease.cursor.epoch == epoch_.load(std::memory_order_acquire))
        [[likely]] {
      if (void* p = bump(lease.cursor, size, align)) [[likely]]
        return p;
    }
    return allocate_with_new_lease(lease, size, align);
  }
  // pm_arena_bump's first try: a block of 16-byte alignment from the cursor's span while the
  // span is of the current epoch and has room; nullptr otherwise. No lock.
  void* bump_current(pm_bump_cursor& cursor, std::size_t size) {
    if (size > kBumpMaxBlock || cursor.epoch != epoch_.load(std::memory_order_acquire))
      return nullptr;
    return bump(cursor, size, kBumpGranule);
  }
  // Whether the cursor's span is of this bump arena's current epoch (no reset or destroy
  // since it was lent): pm_arena_bump_free's test before it frees a block of the span inline.
  [[nodiscard]] bool lent_this_epoch(const pm_bump_cursor& cursor) const {
    return bump_ && cursor.epoch == epoch_.load(std::memory_order_acquire);
  }
  // pm_arena_bump: a block from the cursor, refilled with a new region when full.
  void* allocate_from_cursor(pm_bump_cursor& cursor, std::size_t size, std::size_t align);
  // pm_arena_bump_flush: the cursor's counts to the arena.
  void flush(pm_bump_cursor& cursor);
  // At a thread's exit: every lease it holds given back, with its counts.
  static void give_back_leases();

  // The space whose chunk holds p, or nullptr.
  static BumpSpace* owner_of(const void* p) {
    const std::uintptr_t entry = address_map().get(chunk_base_of(p));
    if (AddressMap::tag_of(entry) != AddressMap::kBumpChunk) return nullptr;
    return AddressMap::owner_of<BumpSpace>(entry);
  }

  // Operations on a block of this space; misuse (a block freed, of an older epoch, or not a
  // block) is reported naming `call`.
  std::size_t usable_size(const void* p, const char* call) const;
  void free(void* p, const char* call);
  // Sets the block's size to `size` when it fits where it is: within its usable size, or,
  // for the block the calling thread bumped last, within its lease's span (up to
  // kBumpMaxBlock).
  bool resize_in_place(void* p, std::size_t size, const char* call);

  // Every block freed at once; the chunks stay for the next round.
  void reset();
  // reset(), then every chunk back to the OS.
  void release_all();
  // Counts every thread's lease.
  BumpStats stats();

  void lock_for_fork() { lock_.lock(); }
  void unlock_after_fork() { lock_.unlock(); }

 private:
  static constexpr unsigned kMaxPartial = 16;
  struct Partial {
    char* next;
    char* end;
  };
  enum class Check { Live, Freed, NoBlock, NotABlock };

  void* allocate_with_new_lease(BumpLease& lease, std::size_t size, std::size_t align);
  // Requires: lock_ held. Gives the cursor a span of regions of the current epoch with room
  // for the block (twice its last span, in one chunk); false when out of memory.
  bool lend_region(pm_bump_cursor& cursor, std::size_t size, std::size_t align);
  // Requires: lock_ held. The cursor's count to the arena and, with keep_rest (the cursor's
  // owner moves to another arena), the rest of its region to the partial list.
  void take_back(pm_bump_cursor& cursor, bool keep_rest);
  // Requires: lock_ held. The lease's counts of frees to the arena's.
  void take_back_frees(BumpLease& lease);
  // A lease of the calling thread that counts its frees of this space's blocks, or nullptr
  // when the thread's slot holds another arena's.
  BumpLease* counting_lease();
  // Requires: lock_ held.
  void link(BumpLease& lease);
  void unlink(BumpLease& lease);
  // Requires: lock_ held. A new chunk and its size map.
  std::byte* map_chunk();
  // Requires: lock_ held. With checks on: every size map entry of this epoch's chunks to 0.
  void clear_size_maps();
  Check check(const void* p, std::uint16_t*& entry) const;
  [[noreturn]] static void report(Check what, const char* call, const void* p, bool freeing);
  void advance_epoch();
  // Has the calling thread give back its leases when it exits (a pthread key's destructor).
  static void give_back_at_exit();

  // The calling thread's leases, one slot per arena index modulo kBumpLeaseSlots.
  static inline constinit thread_local BumpLease t_leases_[kBumpLeaseSlots] = {};
  static inline pthread_key_t lease_key_{};
  static inline pthread_once_t lease_key_once_ = PTHREAD_ONCE_INIT;

  const unsigned index_;
  bool bump_ = false;
  bool unsampled_bump_ = false;  // bump_, and not made with prof:true
  bool freeable_ = true;
  std::atomic<std::uint32_t> epoch_{1};
  std::atomic<std::size_t> bumped_{0};  // blocks counted from cursors since the last reset
  std::atomic<std::size_t> freed_{0};
  std::atomic<std::size_t> bumped_bytes_{0};
  std::atomic<std::size_t> freed_bytes_{0};
  Lock lock_;  // everything below
  ChunkList chunks_;
  std::size_t next_chunk_ = 0;  // where the next region comes from
  std::size_t next_region_ = 0;
  std::size_t regions_lent_ = 0;
  Partial partial_[kMaxPartial] = {};
  unsigned partial_count_ = 0;
  BumpLease* leases_ = nullptr;  // every thread's lease of this space
  OsPal os_;
};

// The build's.
using BumpLease = Allocator<BuildConfig>::BumpLease;
using BumpSpace = Allocator<BuildConfig>::BumpSpace;

}  // namespace pagemalloc
