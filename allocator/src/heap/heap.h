// The heap: the whole allocator behind the pm_ API — the automatic arenas (slabs and large
// runs) with their huge-block manager, the explicit arenas — and the operations every entry
// point is made of.
//
// Every pointer is classified through the page map: chunk-aligned pointers are huge blocks
// (looked up in the address map, whose record names the block's manager); any other is inside
// an arena chunk, whose address-map entry names its arena, and its page's entry says small
// (slab) or large (run). A pointer in no chunk of ours is reported, not followed.
//
// A block is freed to the arena that holds it, whichever thread frees it: a small block of an
// automatic arena through the freeing thread's cache (thread_cache.h), any other under its
// arena's lock. No lock is global.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstring>

#include "arena/arena.h"
#include "chunks/address_map.h"
#include "design/allocator.h"
#include "design/placement.h"
#include "explicit/explicit_arenas.h"
#include "huge/huge.h"
#include "profile/heap_profiler.h"
#include "support/deferred.h"
#include "support/flags.h"
#include "support/options.h"
#include "threads/automatic_arenas.h"
#include "threads/thread_cache.h"

struct pm_stats;
struct pm_arena_stats;

namespace pagemalloc {

template <class Config>
class Allocator<Config>::Heap {
 public:
  constexpr Heap() = default;

  // nullptr with errno = ENOMEM on failure. Requires: align is a power of two.
  void* allocate(std::size_t size, std::size_t align, bool zero);
  // calloc's common case inline: a small block from the thread cache, its region cleared
  // (all of it, as the slow path clears a block's usable size). Else allocate(size, 1, true).
  void* allocate_zeroed(std::size_t size);
  // From the arena of this index, bypassing the thread cache; nullptr with errno = EINVAL
  // when no arena has the index, ENOMEM when out of memory.
  void* allocate_in(unsigned arena, std::size_t size, std::size_t align, bool zero);
  void deallocate(void* p, const char* call);
  // The size (and alignment) the block was asked for is checked against it only with checks
  // on; otherwise this is deallocate.
  void deallocate_sized(void* p, std::size_t size, std::size_t align, const char* call) {
    // With checks on no chunk is remembered (ThreadCache::owns_chunk), so the test of the
    // option waits for the slow path. A design that validates frees validates first.
    if constexpr (!Config::kValidateFree) {
      if (freed_into_cache(p)) [[likely]]
        return;
    }
    deallocate_sized_slow(p, size, align, call);
  }
  // Resizes in place when it can, else moves the block to the arena `arena` (kNoArena: the
  // block's own if it is explicit, else the thread's). nullptr with errno = ENOMEM (EINVAL:
  // no arena has the index) on failure, and p is untouched.
  [[gnu::hot]] void* reallocate(void* p, std::size_t size, std::size_t align, bool zero,
                                unsigned arena, const char* call);
  // realloc's common case inline: a small block of the thread's own arena resized to a small
  // size stays when the size keeps its class, else moves through the thread cache (a region
  // popped, a copy, the old region pushed). Anything else is reallocate(p, size, 1, false,
  // kNoArena, call). Requires: p != nullptr, size != 0.
  void* reallocate_small(void* p, std::size_t size, const char* call);
  // jemalloc's xallocx: resizes in place only; returns the usable size afterwards.
  std::size_t resize_in_place(void* p, std::size_t size, std::size_t extra, bool zero,
                              const char* call);
  std::size_t usable_size(const void* p, const char* call);

  // Every free page of every arena and huge manager to the OS (the calling thread's cache
  // flushed first); the bytes that went.
  std::size_t purge();
  // Every arena's and huge manager's decay advanced (decay.h): the automatic ones whose lock
  // is free when !wait; all of them, explicit ones too, when wait.
  [[gnu::hot]] void advance_decay(bool wait);
  void stats(pm_stats& out);
  // The run managers' counters summed over every arena (counters.h: zero unless counting).
  RunCounterValues run_counters();
  // Every automatic and explicit arena and huge manager, each under its lock
  // (heap_invariants_impl.h): nullptr, or what is broken.
  const char* check_invariants();

  // How many automatic arenas threads are spread over (automatic_arenas.h).
  unsigned automatic_arena_count() {
    ensure_initialized();
    return automatic_.count();
  }

  // Explicit arenas (explicit_arenas.h), with the results of the pm_arena_* calls.
  // flags: PM_ARENA_* (checked by the caller).
  unsigned create_arena(unsigned flags = 0);
  // pm_arena_bump: a block from a BumpArena's cursor (bump_space.h), or from the arena's
  // ordinary path when too large; nullptr with errno = EINVAL (no bump arena) or ENOMEM.
  void* bump_from_cursor(pm_bump_cursor& cursor, std::size_t size, std::size_t align, bool zero);
  // pm_arena_bump's path with no call: a block of 16-byte alignment from the cursor's span of
  // its arena's current epoch, or nullptr (then bump_from_cursor).
  void* bump_from_current_span(pm_bump_cursor& cursor, std::size_t size) {
    ExplicitArena* e = explicit_.find(cursor.arena);
    return e != nullptr ? e->bump.bump_current(cursor, size) : nullptr;
  }
  // pm_arena_bump_free's test: the cursor's span is of its arena's current epoch.
  bool cursor_is_current(const pm_bump_cursor& cursor) {
    ExplicitArena* e = explicit_.find(cursor.arena);
    return e != nullptr && e->bump.lent_this_epoch(cursor);
  }
  void flush_cursor(pm_bump_cursor& cursor);
  // What pm_mallocx gives for this request in the arena if it is a bump arena and the block
  // is bumped; else 0.
  std::size_t bumped_usable_size(unsigned arena, std::size_t size, std::size_t align);
  int reset_arena(unsigned index) { return explicit_.reset(index); }
  int destroy_arena(unsigned index) { return explicit_.destroy(index); }
  int arena_stats(unsigned index, pm_arena_stats& out) { return explicit_.stats(index, out); }

  // Reads PAGEMALLOC_CONF, fixes the number of automatic arenas and installs the fork
  // handlers, once. Every slow path calls it first; the fast paths need a thread cache,
  // which only a slow path creates.
  void ensure_initialized() {
    if (init_state_.load(std::memory_order_acquire) != kInitialized) [[unlikely]]
      initialize();
  }

  // fork(): every lock of the heap, taken in one fixed order before the fork and released
  // after it (fork_impl.h).
  [[gnu::hot]] void lock_for_fork();
  [[gnu::hot]] void unlock_after_fork_in_parent();
  [[gnu::hot]] void reset_after_fork_in_child();
  // fork(), in every child: a fork after the heap's fork handlers were installed, and before
  // initialize() marked the heap initialized, leaves only that mark to make.
  void finish_initialization_in_child() {
    init_state_.store(kInitialized, std::memory_order_release);
  }

 private:
  // init_state_: kUninitialized, kInitialized, or the process ID of the process one of whose
  // threads is initializing the heap. A process that finds another's ID there was forked
  // while its parent initialized, and has no thread that will finish.
  static constexpr int kUninitialized = 0, kInitialized = -1;
  [[gnu::hot]] void initialize();

  struct Block {
    BlockKind kind;
    std::size_t usable;
    unsigned size_class = 0;      // Small
    Arena* arena = nullptr;       // Small, Large: the arena that holds it
    HugeManager* huge = nullptr;  // Huge: the manager that holds it
  };
  // Where blocks of one arena come from: its slabs and runs, and its huge extents.
  struct Source {
    Arena* blocks;
    HugeManager* huge;
    bool through_cache;  // small blocks come through the thread cache
  };
  int find_source(unsigned index, Source& out);
  [[gnu::hot]] Block locate(const void* p, const char* call);
  [[gnu::hot]] void* allocate_slow(std::size_t size, std::size_t align, bool zero);
  // `will_write`: bytes from the start the caller writes at once (a move's copy); those of a
  // large or huge block that read zero are populated first (populate.h).
  [[gnu::hot]] void* allocate_from(const Source& source, std::size_t size, std::size_t align,
                                   bool zero, std::size_t will_write = 0);
  // The heap profiler's part (profile/heap_profiler.h), with prof:true: a small block from the
  // thread's cache, its class's countdown taken (ThreadCache::pop_sampling); whether a larger
  // block is sampled (the thread's countdown of bytes); the
  // sampled block, a small one served as a run of pages (from the arena or huge manager
  // directly: no thread's bins).
  // (kNotProfiled: allocate_from goes on as without the profiler.)
  [[gnu::noinline]] void* allocate_profiled(const Source& source, const Placement& where,
                                            std::size_t size, std::size_t align, bool zero);
  static inline void* const kNotProfiled = reinterpret_cast<void*>(std::uintptr_t{1});
  [[gnu::noinline]] static bool take_profiled(std::size_t usable);
  [[gnu::noinline]] void* allocate_sampled(const Source& source, const Placement& where,
                                           std::size_t size, std::size_t align, bool zero);
  // pm_mallocx's bump in a bump arena made with prof:true: the block (nullptr when the bump
  // does not serve it), recorded if sampled (it stays where the bump put it; its free or its
  // arena's reset forgets it).
  [[gnu::noinline]] static void* bump_sampled(BumpSpace& space, std::size_t size, std::size_t align,
                                              bool zero);
  // deallocate_slow's large block with prof:true: its sample forgotten, then freed (into the
  // medium bins only while the thread is not profiled).
  [[gnu::noinline]] void free_large_profiled(Arena& owner, PageEntry e, void* p, const char* call);
  [[gnu::hot]] void* allocate_small(unsigned size_class);
  [[gnu::hot]] void* move(void* p, const Block& old, std::size_t size, std::size_t align, bool zero,
                          unsigned arena, const char* call);
  // The same operations on a block of a bump arena.
  void* reallocate_bumped(BumpSpace& space, void* p, std::size_t size, std::size_t align, bool zero,
                          unsigned arena, const char* call);
  std::size_t resize_bumped_in_place(BumpSpace& space, void* p, std::size_t size, std::size_t extra,
                                     bool zero, const char* call);
  // Every free that free's fast test (deallocate) does not finish or hand to
  // deallocate_remembered.
  [[gnu::hot]] void deallocate_slow(void* p, const char* call) noexcept;
  // free's path for a block whose entry e, in a chunk the thread remembers, is no slab's: a
  // medium block into the thread's medium bins, anything else through deallocate_slow; and its
  // part for a medium block whose bin is full.
  // (Static, given p's page, chunk and the thread's cache, in the registers free has them in.)
  [[gnu::hot, gnu::noinline]] static void deallocate_remembered(PageEntry e, void* p,
                                                                PageIndex page, std::byte* chunk,
                                                                ThreadCache& cache,
                                                                const char* call) noexcept;
  [[gnu::hot, gnu::noinline]] void free_medium_into_full_bin(unsigned medium_class, void* p,
                                                             const char* call) noexcept;
  // Before a free, in a design that validates frees (Config::kValidateFree): the search of
  // p's arena's chunk tree (Arena::validate_freed). Huge blocks, bump arenas' blocks and
  // foreign pointers are left to the free, which searches or reports them.
  void validate_free(const void* p);
  static ThreadCache* own_small_block(const void* p, PageEntry& e);
  void deallocate_sized_checked(void* p, std::size_t size, std::size_t align, const char* call);
  // deallocate_sized after its fast path: checked if checks are on, else deallocate.
  [[gnu::hot]] void deallocate_sized_slow(void* p, std::size_t size, std::size_t align,
                                          const char* call) noexcept;
  // The fast path of every free: p, a small block in the chunk the thread remembers as its
  // arena's, pushed on the thread's cache. False if it is not (p untouched).
  bool freed_into_cache(void* p);
  static void push_remembered_region(void* p, PageEntry e);
  // The fast paths' medium blocks (kMaxSmallSize < size <= kMaxMediumSize, align <= 8, not
  // zeroed): popped from the calling thread's medium bins, or allocate_slow's; freed into them,
  // or false.
  [[gnu::hot, gnu::noinline]] static void* allocate_medium(std::size_t size, std::size_t align);
  static bool push_medium_to(ThreadCache& cache, PageEntry e, void* p);
  void deallocate_small(Arena& owner, PageEntry e, void* p, const char* call);
  [[gnu::hot]] void deallocate_foreign(ThreadCache& cache, Arena& owner, PageEntry e, void* p,
                                       const char* call);
  // deallocate_slow's work for every block but large ones and those deallocate_foreign takes.
  [[gnu::hot]] void deallocate_unusual(void* p, const char* call);
  // The thread's medium bins (thread_cache.h): a block of `usable` bytes of its class from
  // them, or nullptr; a freed medium block into them, or false.
  [[gnu::hot]] void* pop_medium(Arena& mine, std::size_t usable);
  [[gnu::hot]] bool push_medium(Arena& owner, PageEntry e, void* p);
  // resize_large on the block's arena; if a growth fails while the calling thread's medium
  // bins hold blocks of that arena (which may lie in its way), again after they go back.
  [[gnu::hot, gnu::noinline]] bool resize_large(Arena& arena, void* p, PageCount have,
                                                PageCount want);
  [[gnu::hot]] std::size_t usable_size_slow(const void* p, const char* call);
  // HugeManager::Neighbours of huge(): context is the heap.
  [[gnu::hot]] static void purge_automatic_arenas(void* heap, std::size_t bytes) {
    static_cast<Heap*>(heap)->automatic_.purge_oldest(bytes);
  }

  // The automatic arenas' huge blocks; constructed by initialize().
  HugeManager& huge() { return huge_.value; }

  // Every member is zero until initialize() constructs the first arena and the huge manager
  // in place: the heap then lies in .bss (anonymous pages, resident only where touched), not
  // in .data, whose pages the kernel maps from the library's file in large folios (some
  // 120 KiB of the resident size of a program that allocates nothing).
  std::atomic<int> init_state_{kUninitialized};
  AutomaticArenas automatic_;   // indices 0 .. automatic_.count()-1
  Deferred<HugeManager> huge_;  // their huge blocks
  ExplicitArenas explicit_;     // indices automatic_.count() ..
  std::atomic<std::size_t> copied_{0};
  std::atomic<std::size_t> grown_in_place_{0};
  std::atomic<std::size_t> moved_by_copy_{0};
};

// Whether p, in a slab page whose page-map entry is e, is the start of one of its regions.
// The page's distance from the slab's start gives p's offset in the slab: the slab's
// descriptor is not read.
inline bool starts_region(const void* p, PageEntry e, const SizeClass& sc) {
  const std::size_t offset = (reinterpret_cast<std::uintptr_t>(p) & (kPageSize - 1)) +
                             std::size_t{e.page_in_slab()} * kPageSize;
  return std::size_t{region_index(sc, offset)} * sc.size == offset;
}

template <class T>
union NoDestroy {
  constexpr NoDestroy() : value() {}
  ~NoDestroy() {}
  T value;
};
// Each Config's heap (never destroyed: other code may free memory during exit), zero until
// its first slow path: in .bss.
template <class Config>
inline constinit NoDestroy<typename Allocator<Config>::Heap> g_heap;

// PAGEMALLOC_CONF is read by the first slow path; the fast paths need a thread cache, which
// only a slow path creates, so they never run before it.
template <class Config>
inline typename Allocator<Config>::Heap& Allocator<Config>::heap() {
  return g_heap<Config>.value;
}

// The fast paths: a small request served from the thread cache, and a small block freed into
// it (about 20 and 33 instructions, as callgrind counts them: papers/cross-thread/
// instructions.md, and the README on why not fewer). Everything else goes to the out-of-line
// slow paths.
template <class Config>
inline void* Allocator<Config>::Heap::allocate(std::size_t size, std::size_t align, bool zero) {
  if (align <= alignof(std::uint64_t) && !zero) [[likely]] {
    // The fine table's sizes first, in a straight line: the coarse one's are rarer.
    if (size <= BuildSizeClasses::kMaxFineSize) [[likely]] {
      if (void* p = ThreadCache::pop_cached_here(BuildSizeClasses::fine_class_of(size))) [[likely]]
        return p;
    } else if (size <= kMaxSmallSize) {
      if (void* p = ThreadCache::pop_cached_here(BuildSizeClasses::coarse_class_of(size)))
          [[likely]]
        return p;
    } else if (size <= MediumClasses::kMaxMediumSize) {
      return allocate_medium(size, align);  // (a jump: malloc keeps no frame)
    }
  } else if (align <= kPageSize && size <= kMaxSmallSize && !zero) {
    // An aligned small request: the smallest class that is a multiple of the alignment
    // (aligned_alloc(64, 100) takes a region of 128 bytes). malloc's constant alignment
    // leaves this out of its code.
    const unsigned size_class = BuildSizeClasses::class_aligned(size, align);
    if (size_class < kNumClasses) {
      if (void* p = ThreadCache::pop_cached_here(size_class)) [[likely]]
        return p;
    }
  }
  return allocate_slow(size, align, zero);  // refills an empty bin, among the rest
}

template <class Config>
inline void* Allocator<Config>::Heap::allocate_zeroed(std::size_t size) {
  if (size <= kMaxSmallSize) [[likely]] {
    if (ThreadCache* cache = ThreadCache::current()) [[likely]] {
      const unsigned size_class = size_class_of(size);
      if (void* p = ThreadCache::pop_cached_here(size_class)) [[likely]] {
        std::memset(p, 0, kSizeClasses[size_class].size);
        return p;
      }
    }
  }
  return allocate_slow(size, 1, true);  // refills an empty bin, among the rest
}

// The fast paths' test of a block to free or resize: p lies in a slab page of the calling
// thread's arena, checks are off, and p's first word is not the freed key. Returns the
// thread's cache and p's page-map entry in e; else nullptr. A pointer into the middle of a
// region is not looked for here (a multiply and a compare on every free): the slow paths
// report it. Nor is a chunk-aligned one (nullptr, a huge block): its chunk is no arena chunk,
// or its page is the chunk's header, whose entry is no slab's.
template <class Config>
inline typename Allocator<Config>::ThreadCache* Allocator<Config>::Heap::own_small_block(
    const void* p, PageEntry& e) {
  std::byte* chunk = chunk_base_of(p);
  ThreadCache* cache = ThreadCache::current();
  if (cache == nullptr || !cache->owns_chunk(chunk)) [[unlikely]]
    return nullptr;
  e = page_entry(chunk, page_index_of(p));
  if (e.kind() != PageKind::Slab ||
      *static_cast<const std::uintptr_t*>(p) == ThreadCache::freed_key() || !cache->owns(p))
      [[unlikely]]
    return nullptr;
  return cache;
}

// In a straight line, the common case: p in the chunk the thread remembers as its arena's
// (own_small_block's test, in the order that needs no test of the cache pointer).
template <class Config>
inline bool Allocator<Config>::Heap::freed_into_cache(void* p) {
  std::byte* chunk = chunk_base_of(p);
  if (!ThreadCache::remembers(chunk)) [[unlikely]]
    return false;
  const PageEntry e = page_entry(chunk, page_index_of(p));
  if (!e.is_slab() || *static_cast<const std::uintptr_t*>(p) == ThreadCache::freed_key())
      [[unlikely]]
    return false;  // (a medium block: deallocate's, through deallocate_sized_slow)
  push_remembered_region(p, e);
  return true;
}

// The fast free's push: p, a region (entry e) of a chunk the thread remembers, its first word
// not the freed key, marked and pushed on the thread's cache.
template <class Config>
[[gnu::always_inline]] inline void Allocator<Config>::Heap::push_remembered_region(void* p,
                                                                                   PageEntry e) {
  *static_cast<std::uintptr_t*>(p) = ThreadCache::freed_key();
  ThreadCache* cache = ThreadCache::remembering();
  // A block of the arena in a granule the thread does not own goes home (thread_cache.h).
  if (ThreadCache::checks_owner() && !cache->owns(p)) [[unlikely]]
    cache->push_foreign(e.size_class(), p, false);
  else cache->push_slab_region(e, p);
}

// malloc's fast path for a medium size: out of line, so that the entry points that inline the
// fast paths carry a jump, not the path (and no frame for it).
template <class Config>
void* Allocator<Config>::Heap::allocate_medium(std::size_t size, std::size_t align) {
  if (ThreadCache* cache = ThreadCache::current()) [[likely]]
    if (void* p = cache->pop_medium(MediumClasses::class_of_size(size))) [[likely]]
      return p;
  return heap().allocate_slow(size, align, false);
}

// The block p, whose first entry is e, into cache's medium bins if it is a medium block of
// exactly its class's length at the start of its page (false otherwise, or if the bin keeps
// none). Requires: p lies in a chunk of cache's arena, and checks are off.
template <class Config>
inline bool Allocator<Config>::Heap::push_medium_to(ThreadCache& cache, PageEntry e, void* p) {
  if constexpr (!MediumClasses::kEnabled || Config::kAllocatedRunsTree) return false;
  if (e.kind() != PageKind::Large || (reinterpret_cast<std::uintptr_t>(p) & (kPageSize - 1)) != 0)
    return false;
  const unsigned medium_class = MediumClasses::class_of_length(e.pages().value());
  if (medium_class == MediumClasses::kNone) return false;
  return cache.push_medium(medium_class, p);
}

// freed_into_cache's test, with one more branch where it fails: a block that is no slab's in a
// chunk the thread remembers (a medium block, most often) goes to deallocate_remembered with
// its entry, so that its free does not read the thread's chunks and the page map again.
template <class Config>
inline void Allocator<Config>::Heap::deallocate(void* p, const char* call) {
  if constexpr (Config::kValidateFree) validate_free(p);
  std::byte* chunk = chunk_base_of(p);
  if (ThreadCache::remembers(chunk)) [[likely]] {
    const PageIndex page = page_index_of(p);
    const PageEntry e = page_entry(chunk, page);
    if (!e.is_slab()) [[unlikely]]  // (the page and chunk, not the entry's address: that would
                                    // cost free's small path an instruction)
      return deallocate_remembered(e, p, page, chunk, *ThreadCache::remembering(), call);
    if (*static_cast<const std::uintptr_t*>(p) != ThreadCache::freed_key()) [[likely]]
      return push_remembered_region(p, e);
  }
  deallocate_slow(p, call);
}

template <class Config>
inline void* Allocator<Config>::Heap::reallocate_small(void* p, std::size_t size,
                                                       const char* call) {
  PageEntry e;
  ThreadCache* cache = size <= kMaxSmallSize ? own_small_block(p, e) : nullptr;
  if (cache != nullptr) [[likely]] {
    const unsigned old_class = e.size_class();
    const SizeClass& old = kSizeClasses[old_class];
    // A pointer into a region goes to reallocate(), which reports it.
    if (starts_region(p, e, old)) [[likely]] {
      const unsigned new_class = size_class_of(size);
      if (new_class == old_class) return p;
      // (From the fast path's bins, which a profiled thread finds empty: an empty bin is
      // refilled by reallocate's allocation.)
      if (void* q = ThreadCache::pop_cached_here(new_class)) [[likely]] {
        const std::size_t keep = size < old.size ? size : old.size;
        std::memcpy(q, p, keep);
        *static_cast<std::uintptr_t*>(p) = ThreadCache::freed_key();
        cache->push(old_class, p);
        cache->count_move(keep);
        return q;
      }
    }
  }
  return reallocate(p, size, 1, false, kNoArena, call);
}

// A small block's usable size from its page-map entry alone, with no look at its slab's
// descriptor (redis asks after every allocation and free). Anything else, and a pointer into
// the middle of a region, goes to locate(), which classifies it or reports the misuse.
template <class Config>
inline std::size_t Allocator<Config>::Heap::usable_size(const void* p, const char* call) {
  if (!is_chunk_aligned(p)) [[likely]] {
    std::byte* chunk = chunk_base_of(p);
    if (AddressMap::tag_of(address_map().get(chunk)) == AddressMap::kArenaChunk) [[likely]] {
      const PageEntry e = page_entry(chunk, page_index_of(p));
      if (e.kind() == PageKind::Slab) [[likely]] {
        const SizeClass& sc = kSizeClasses[e.size_class()];
        if (starts_region(p, e, sc)) [[likely]]
          return sc.size;
      }
    }
  }
  return usable_size_slow(p, call);
}

// The build's.
using Heap = Allocator<BuildConfig>::Heap;
inline Heap& heap() { return Allocator<BuildConfig>::heap(); }

}  // namespace pagemalloc
