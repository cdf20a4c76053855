// The heap's operations: allocation by placement, classification of pointers, reallocation
// in place (runs and huge extents) before moving, and moving by remapping before copying.
// Every operation on an existing block goes to the arena (or huge manager) that holds it.
#pragma once

#include "heap.h"

#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "address_map.h"
#include "clear_block.h"
#include "config.h"
#include "decay.h"
#include "diagnostics.h"
#include "fork.h"
#include "pagemalloc/pagemalloc.h"
#include "populate.h"
#include "thread_cache.h"

namespace pagemalloc {
namespace heap_detail {

inline void* out_of_memory() {
  errno = ENOMEM;
  return nullptr;
}

inline bool is_aligned(const void* p, std::size_t align) {
  return (reinterpret_cast<std::uintptr_t>(p) & (align - 1)) == 0;
}

}  // namespace heap_detail

template <class Config>
void Allocator<Config>::Heap::initialize() {
  // A call made by the initialization itself (pthread_atfork may allocate) goes ahead on
  // the defaults; any other thread of this process waits for the first one to finish.
  static constinit thread_local bool t_initializing = false;
  if (t_initializing) return;
  const int process = ::getpid();
  int state = init_state_.load(std::memory_order_acquire);
  for (;;) {
    if (state == kInitialized) return;
    if (state == process) {  // another thread of this process initializes
      sched_yield();
      state = init_state_.load(std::memory_order_acquire);
      continue;
    }
    // Uninitialized, or another process's initialization that a fork cut short: this child
    // has no thread to finish it, so it starts over. That is safe because the fork came
    // before the heap's fork handlers were installed (after, the child's handler marks the
    // heap initialized, unless glibc skipped it for this fork: docs/architecture.md), and
    // nothing before them takes a lock or hands out a block: the parts constructed so far
    // are constructed again, and PAGEMALLOC_CONF read again.
    if (init_state_.compare_exchange_weak(state, process, std::memory_order_acq_rel)) break;
  }
  if (state != kUninitialized) g_conf_loaded.store(false, std::memory_order_relaxed);
  t_initializing = true;
  huge_.construct(kNoArena, typename HugeManager::Neighbours{&purge_automatic_arenas, this});
  automatic_.start(&huge());  // one arena until configure(): allocations made meanwhile use it
  load_conf_from_environment();
  const long wanted = options().deterministic.load() ? 1 : options().narenas.load();
  automatic_.configure(wanted > 0 ? unsigned(wanted) : AutomaticArenas::default_count());
  Fork::install_handlers();
  t_initializing = false;
  init_state_.store(kInitialized, std::memory_order_release);
  Decay::start_background_thread_if_asked();
}

// 0, EINVAL (no arena has the index) or ENOMEM (no memory for an automatic arena's record).
template <class Config>
int Allocator<Config>::Heap::find_source(unsigned index, Source& out) {
  if (index < automatic_.count()) {
    Arena* a = automatic_.at(index);
    if (a == nullptr) return ENOMEM;
    out = Source{a, &huge(), false};
    return 0;
  }
  ExplicitArena* a = explicit_.find(index);
  if (a == nullptr) return EINVAL;
  out = Source{&a->blocks, &a->huge, false};
  return 0;
}

template <class Config>
void* Allocator<Config>::Heap::allocate_slow(std::size_t size, std::size_t align, bool zero) {
  ensure_initialized();
  return allocate_from(Source{&automatic_.for_thread(), &huge(), true}, size, align, zero);
}

template <class Config>
void* Allocator<Config>::Heap::allocate_in(unsigned arena, std::size_t size, std::size_t align,
                                           bool zero) {
  if (ExplicitArena* e = explicit_.find(arena); e != nullptr && e->bump.enabled()) {
    if (void* p = e->bump.allocate(size, align)) [[likely]] {
      if (zero) std::memset(p, 0, bump_usable(size));
      return p;
    }
    if (!e->ordinary_used.load(std::memory_order_relaxed))
      e->ordinary_used.store(true, std::memory_order_relaxed);
  }
  ensure_initialized();
  Source source{};
  if (const int error = find_source(arena, source)) {
    errno = error;
    return nullptr;
  }
  return allocate_from(source, size, align, zero);
}

template <class Config>
void* Allocator<Config>::Heap::allocate_from(const Source& source, std::size_t size,
                                             std::size_t align, bool zero, std::size_t will_write) {
  if (size == 0) size = 1;  // the smallest block of its kind, as place() counts it
  const Placement where = place(size, align);
  void* p = nullptr;
  bool zeroed = false;
  switch (where.kind) {
    case BlockKind::Small:
      p = source.through_cache ? allocate_small(where.size_class)
                               : source.blocks->alloc_small(where.size_class);
      break;
    case BlockKind::Large:
      // A block from the thread's own arena may come from a neighbour's freed pages; one from
      // an arena the caller named must come from that arena.
      p = source.blocks->alloc_large(size, align, zeroed, source.through_cache);
      break;
    case BlockKind::Huge: p = source.huge->alloc(size, align, zeroed); break;
    case BlockKind::Invalid: break;
  }
  if (p == nullptr) return heap_detail::out_of_memory();
  if (zero && !zeroed) clear_block(p, where.usable);
  if (zeroed && will_write >= kPopulateCopyBytes) populate_pages(p, will_write & ~(kPageSize - 1));
  return p;
}

template <class Config>
void* Allocator<Config>::Heap::allocate_small(unsigned size_class) {
  Arena& mine = automatic_.for_thread();
  if (ThreadCache* cache = ThreadCache::get(mine)) [[likely]]
    return cache->pop(size_class);
  return mine.alloc_small(size_class);
}

// A freed region of `owner` into the thread's cache: its first word marked, pushed as the
// cache's own or as a foreign region.
template <class ThreadCache, class Arena>
[[gnu::always_inline]] inline void cache_freed_region(ThreadCache& cache, Arena& owner,
                                                      unsigned size_class, void* p) {
  *static_cast<std::uintptr_t*>(p) = ThreadCache::freed_key();
  if (cache.arena() == &owner) cache.push(size_class, p);
  else cache.push_foreign(size_class, p);
}

// The slab's descriptor is not read unless the free goes to the arena or may be a double
// free: the page's entry gives the class and the offset. A thread freeing another thread's
// regions would otherwise read a line the owner writes on every refill. Inlined into its one
// caller, deallocate_unusual (a small block of an explicit arena, one freed with checks on or
// by a thread without a cache, or one whose first word holds the freed mark).
template <class Config>
[[gnu::always_inline]] inline void Allocator<Config>::Heap::deallocate_small(Arena& owner,
                                                                             PageEntry e, void* p,
                                                                             const char* call) {
  const unsigned size_class = e.size_class();
  if (!starts_region(p, e, kSizeClasses[size_class])) [[unlikely]]
    report_misuse(call, p, "not the start of a block");
  auto* slab = static_cast<Slab*>(e.slab_descriptor());
  // An explicit arena's regions never enter a cache: its reset must find them all.
  ThreadCache* cache = ThreadCache::current();
  if (cache == nullptr) [[unlikely]]
    cache = ThreadCache::get(automatic_.for_thread());
  if (cache == nullptr || owner.index() >= automatic_.count() ||
      options().checks.load(std::memory_order_relaxed)) [[unlikely]]
    return owner.free_small(slab, p, call);
  auto* first_word = static_cast<std::uintptr_t*>(p);
  if (*first_word == ThreadCache::freed_key()) [[unlikely]] {
    if (cache->holds(size_class, p) || owner.region_is_free(slab, p))
      report_misuse(call, p, "double free");
  }
  cache_freed_region(*cache, owner, size_class, p);
}

// free's path for a small block of another automatic arena (or of the thread's own that the
// fast path declined): into the thread's cache as a foreign region. Anything else, a block
// whose first word holds the freed key among them (which may be a double free), goes through
// deallocate_unusual.
template <class Config>
void Allocator<Config>::Heap::deallocate_foreign(ThreadCache& cache, Arena& owner, PageEntry e,
                                                 void* p, const char* call) {
  auto* first_word = static_cast<std::uintptr_t*>(p);
  if (e.kind() != PageKind::Slab || owner.index() >= automatic_.count() ||
      options().checks.load(std::memory_order_relaxed) || *first_word == ThreadCache::freed_key())
      [[unlikely]]
    return deallocate_unusual(p, call);
  const unsigned size_class = e.size_class();
  if (!starts_region(p, e, kSizeClasses[size_class])) [[unlikely]]
    report_misuse(call, p, "not the start of a block");
  cache_freed_region(cache, owner, size_class, p);
}

template <class Config>
typename Allocator<Config>::Heap::Block Allocator<Config>::Heap::locate(const void* p,
                                                                        const char* call) {
  ensure_initialized();
  if (is_chunk_aligned(p)) {
    HugeManager* owner = HugeManager::owner_of(p);
    const std::size_t usable = owner == nullptr ? 0 : owner->usable_size(p);
    if (usable == 0)
      report_misuse(
          call, p,
          owner != nullptr ? "not a live block (already freed?)" : "not allocated by pagemalloc");
    return {BlockKind::Huge, usable, 0, nullptr, owner};
  }
  std::byte* chunk = chunk_base_of(p);
  const std::uintptr_t entry = address_map().get(chunk);
  const AddressMap::Tag tag = AddressMap::tag_of(entry);
  if (tag != AddressMap::kArenaChunk)
    report_misuse(
        call, p,
        tag == AddressMap::kHuge ? "not the start of a block" : "not allocated by pagemalloc");
  auto* arena = AddressMap::owner_of<Arena>(entry);
  PageEntry e = page_entry(chunk, page_index_of(p));
  switch (e.kind()) {
    case PageKind::Slab: {
      const SizeClass& sc = kSizeClasses[e.size_class()];
      if (!starts_region(p, e, sc)) report_misuse(call, p, "not the start of a block");
      return {BlockKind::Small, sc.size, e.size_class(), arena, nullptr};
    }
    case PageKind::Large: {
      if (!heap_detail::is_aligned(p, kPageSize))
        report_misuse(call, p, "not the start of a block");
      const PageCount pages = arena->large_pages(p, e);
      if (pages.value() == 0) report_misuse(call, p, "not a live block (already freed?)");
      return {BlockKind::Large, pages.bytes(), 0, arena, nullptr};
    }
    case PageKind::Free:
    case PageKind::Cached: report_misuse(call, p, "not a live block (already freed?)");
    default: report_misuse(call, p, "not the start of a block");
  }
}

template <class Config>
void Allocator<Config>::Heap::validate_free(const void* p) {
  if (p == nullptr || is_chunk_aligned(p)) return;
  std::byte* chunk = chunk_base_of(p);
  const std::uintptr_t entry = address_map().get(chunk);
  if (AddressMap::tag_of(entry) != AddressMap::kArenaChunk) return;
  AddressMap::owner_of<Arena>(entry)->validate_freed(p, page_entry(chunk, page_index_of(p)));
}

template <class Config>
void Allocator<Config>::Heap::deallocate_slow(void* p, const char* call) noexcept {
  // A small block of the thread's arena in a chunk it does not remember (yet).
  PageEntry e;
  if (ThreadCache* cache = own_small_block(p, e)) [[likely]] {
    *static_cast<std::uintptr_t*>(p) = ThreadCache::freed_key();
    return cache->push(e.size_class(), p);
  }
  // Then a large block, straight to its arena, and the blocks that threads hand each other: a
  // small block of another arena's chunk, freed by a thread with a cache. (An arena chunk in
  // the address map means the heap is initialised.)
  if (!is_chunk_aligned(p)) {
    std::byte* chunk = chunk_base_of(p);
    const std::uintptr_t entry = address_map().get(chunk);
    if (AddressMap::tag_of(entry) == AddressMap::kArenaChunk) [[likely]] {
      Arena& owner = *AddressMap::owner_of<Arena>(entry);
      const PageEntry e = page_entry(chunk, page_index_of(p));
      if (e.kind() == PageKind::Large && heap_detail::is_aligned(p, kPageSize))
        return owner.free_large(p, e.pages(), call);
      if (ThreadCache* cache = ThreadCache::current(); cache != nullptr) [[likely]]
        return deallocate_foreign(*cache, owner, e, p, call);
    }
  }
  deallocate_unusual(p, call);
}

template <class Config>
void Allocator<Config>::Heap::deallocate_unusual(void* p, const char* call) {
  ensure_initialized();
  if (p == nullptr) return;
  if (is_chunk_aligned(p)) {
    HugeManager* owner = HugeManager::owner_of(p);
    if (owner == nullptr) report_misuse(call, p, "not allocated by pagemalloc");
    return owner->free(p, call);
  }
  std::byte* chunk = chunk_base_of(p);
  const std::uintptr_t entry = address_map().get(chunk);
  const AddressMap::Tag tag = AddressMap::tag_of(entry);
  if (tag == AddressMap::kBumpChunk) return AddressMap::owner_of<BumpSpace>(entry)->free(p, call);
  if (tag != AddressMap::kArenaChunk) [[unlikely]]
    report_misuse(
        call, p,
        tag == AddressMap::kHuge ? "not the start of a block" : "not allocated by pagemalloc");
  Arena& owner = *AddressMap::owner_of<Arena>(entry);
  PageEntry e = page_entry(chunk, page_index_of(p));
  if (e.kind() == PageKind::Slab) [[likely]]
    return deallocate_small(owner, e, p, call);
  // A large block's start never reaches here: deallocate_slow sends it to its arena.
  const bool freed = e.kind() == PageKind::Free || e.kind() == PageKind::Cached;
  report_misuse(call, p, freed ? "double free" : "not the start of a block");
}

template <class Config>
void Allocator<Config>::Heap::deallocate_sized_slow(void* p, std::size_t size, std::size_t align,
                                                    const char* call) noexcept {
  if (options().checks.load(std::memory_order_relaxed))
    return deallocate_sized_checked(p, size, align, call);
  deallocate(p, call);
}

template <class Config>
void Allocator<Config>::Heap::deallocate_sized_checked(void* p, std::size_t size, std::size_t align,
                                                       const char* call) {
  ensure_initialized();
  if (p == nullptr) return;
  if (BumpSpace* space = is_chunk_aligned(p) ? nullptr : BumpSpace::owner_of(p)) {
    const std::size_t usable = space->usable_size(p, call);
    if (align > kBumpMaxAlign || bump_usable(size) != usable)
      report_size_mismatch(call, p, size, usable);
    return space->free(p, call);
  }
  Block b = locate(p, call);
  if (place(size, align).usable != b.usable) report_size_mismatch(call, p, size, b.usable);
  deallocate(p, call);
}

template <class Config>
std::size_t Allocator<Config>::Heap::usable_size_slow(const void* p, const char* call) {
  if (p == nullptr) return 0;
  if (BumpSpace* space = is_chunk_aligned(p) ? nullptr : BumpSpace::owner_of(p))
    return space->usable_size(p, call);
  return locate(p, call).usable;
}

template <class Config>
void* Allocator<Config>::Heap::reallocate(void* p, std::size_t size, std::size_t align, bool zero,
                                          unsigned arena, const char* call) {
  if (BumpSpace* space = is_chunk_aligned(p) ? nullptr : BumpSpace::owner_of(p))
    return reallocate_bumped(*space, p, size, align, zero, arena, call);
  const Block old = locate(p, call);
  if (size == 0) size = 1;  // as allocate_from
  const Placement want = place(size, align);
  if (want.kind == BlockKind::Invalid) return heap_detail::out_of_memory();
  auto* bytes = static_cast<std::byte*>(p);
  auto zero_grown = [&](std::size_t new_usable) {
    if (zero && new_usable > old.usable) clear_block(bytes + old.usable, new_usable - old.usable);
  };
  if (heap_detail::is_aligned(p, align) && want.kind == old.kind) {
    switch (old.kind) {
      case BlockKind::Small:
        if (want.size_class == old.size_class) return p;
        break;
      case BlockKind::Large:
        // A bump arena's blocks of the sizes its bump path serves are bumped (pm_nallocx says
        // so): an ordinary block of one does not shrink into them in place, it moves. (Only
        // where slabs end below kBumpMaxBlock is there such a large size: presets.h.)
        if (kMaxSmallSize < kBumpMaxBlock &&
            bumped_usable_size(old.arena->index(), size, align) != 0)
          break;
        if (want.usable == old.usable) return p;
        if (old.arena->resize_large(p, PageCount::covering(old.usable),
                                    PageCount::covering(size))) {
          zero_grown(want.usable);
          if (want.usable > old.usable) grown_in_place_.fetch_add(1, std::memory_order_relaxed);
          return p;
        }
        break;
      case BlockKind::Huge: {
        if (old.huge->resize_in_place(p, size)) {
          zero_grown(want.usable);
          if (want.usable > old.usable) grown_in_place_.fetch_add(1, std::memory_order_relaxed);
          return p;
        }
        Source named{};
        const bool stays =
            arena == kNoArena || (find_source(arena, named) == 0 && named.huge == old.huge);
        if (align <= kChunkSize && stays) {
          if (void* q = old.huge->remap(p, size)) {
            bytes = static_cast<std::byte*>(q);
            zero_grown(want.usable);
            return q;
          }
        }
        break;
      }
      case BlockKind::Invalid: break;
    }
  }
  return move(p, old, size, align, zero, arena, call);
}

// Moves the block by copying it into a new one: in `arena` if named, else in the block's own
// explicit arena, else in the thread's.
template <class Config>
void* Allocator<Config>::Heap::move(void* p, const Block& old, std::size_t size, std::size_t align,
                                    bool zero, unsigned arena, const char* call) {
  if (arena == kNoArena) {
    const unsigned home = old.kind == BlockKind::Huge ? old.huge->arena() : old.arena->index();
    if (home != kNoArena && home >= automatic_.count()) arena = home;
  }
  const std::size_t keep = old.usable < size ? old.usable : size;
  void* q = nullptr;
  if (arena != kNoArena) q = allocate_in(arena, size, align, zero);
  else if (size <= kMaxSmallSize) q = allocate(size, align, zero);
  else q = allocate_from(Source{&automatic_.for_thread(), &huge(), true}, size, align, zero, keep);
  if (q == nullptr) return nullptr;
  std::memcpy(q, p, keep);
  deallocate(p, call);
  copied_.fetch_add(keep, std::memory_order_relaxed);
  moved_by_copy_.fetch_add(1, std::memory_order_relaxed);
  return q;
}

template <class Config>
std::size_t Allocator<Config>::Heap::resize_in_place(void* p, std::size_t size, std::size_t extra,
                                                     bool zero, const char* call) {
  if (BumpSpace* space = is_chunk_aligned(p) ? nullptr : BumpSpace::owner_of(p))
    return resize_bumped_in_place(*space, p, size, extra, zero, call);
  const Block old = locate(p, call);
  if (old.kind == BlockKind::Small || size > kMaxRequest) return old.usable;
  // Aim for size + extra; failing that (growth only), for size.
  std::size_t most = size + extra < size || size + extra > kMaxRequest ? kMaxRequest : size + extra;
  const std::size_t least = size == 0 ? 1 : size;
  most = std::max(most, least);  // size + extra = 0 asks for the smallest block, not none
  std::size_t result = old.usable;
  if (old.kind == BlockKind::Large) {
    const PageCount have = PageCount::covering(old.usable);
    const PageCount hi = std::min(PageCount::covering(most), kMaxRunPages);
    const PageCount lo = PageCount::covering(least);
    if (lo > kMaxRunPages) return old.usable;  // only a move could make it huge
    if (hi != have && old.arena->resize_large(p, have, hi)) result = hi.bytes();
    else if (hi > have && lo > have && old.arena->resize_large(p, have, lo)) result = lo.bytes();
  } else if (PageCount::covering(most).bytes() != old.usable) {
    if (old.huge->resize_in_place(p, most) ||
        (least > old.usable && old.huge->resize_in_place(p, least)))
      result = old.huge->usable_size(p);
  }
  if (result > old.usable) {
    grown_in_place_.fetch_add(1, std::memory_order_relaxed);
    if (zero) clear_block(static_cast<std::byte*>(p) + old.usable, result - old.usable);
  }
  return result;
}

template <class Config>
unsigned Allocator<Config>::Heap::create_arena(unsigned flags) {
  ensure_initialized();
  return explicit_.create(automatic_.count(), flags);
}

template <class Config>
std::size_t Allocator<Config>::Heap::purge() {
  ensure_initialized();
  if (ThreadCache* cache = ThreadCache::current()) cache->flush_all();
  std::size_t purged = 0;
  automatic_.for_each([&](Arena& a) { purged += a.purge_all(); });
  purged += huge().purge_all();
  explicit_.for_each(
      [&](ExplicitArena& a) { purged += a.blocks.purge_all() + a.huge.purge_all(); });
  return purged;
}

template <class Config>
void Allocator<Config>::Heap::advance_decay(bool wait) {
  ensure_initialized();
  automatic_.for_each([&](Arena& a) { a.advance_decay(wait); });
  huge().advance_decay(wait);
  if (!wait) return;
  explicit_.for_each([](ExplicitArena& a) {
    a.blocks.advance_decay(true);
    a.huge.advance_decay(true);
  });
}

template <class Config>
void Allocator<Config>::Heap::stats(pm_stats& out) {
  ensure_initialized();
  ArenaStats a{};
  HugeStats h{};
  auto add_arena = [&](Arena& arena) { a += arena.stats(); };
  auto add_huge = [&](HugeManager& huge) { h += huge.stats(); };
  automatic_.for_each(add_arena);
  add_huge(huge());
  const std::size_t cached = ThreadCache::bytes_cached_by_all();
  a.allocated = a.allocated > cached ? a.allocated - cached : 0;
  std::size_t records = automatic_.record_bytes();
  BumpStats bumped{};
  explicit_.for_each([&](ExplicitArena& e) {
    add_arena(e.blocks);
    add_huge(e.huge);
    records += ExplicitArenas::record_bytes();
    const BumpStats b = e.bump.stats();
    bumped.bytes += b.bytes;
    bumped.regions += b.regions;
    bumped.chunks += b.chunks;
  });
  out.allocated = a.allocated + h.allocated + bumped.bytes;
  out.active = a.active_pages * kPageSize + h.allocated + bumped.regions * kBumpRegionSize;
  out.mapped = a.chunks * kChunkSize + h.mapped + a.metadata + h.metadata + records +
               bumped.chunks * (kChunkSize + kBumpSizeMapBytes);
  out.dirty = a.dirty_pages * kPageSize + h.cached;
  out.retained = (a.free_pages - a.dirty_pages) * kPageSize;
  const typename ThreadCache::Moves fast = ThreadCache::moves_by_all();
  out.copied = copied_.load(std::memory_order_relaxed) + fast.copied;
  out.grown_in_place = grown_in_place_.load(std::memory_order_relaxed);
  out.moved = moved_by_copy_.load(std::memory_order_relaxed) + h.moved + fast.moved;
  out.purged = a.purged_pages * kPageSize + h.purged;
  out.populated = g_populated_bytes.load(std::memory_order_relaxed);
}

template <class Config>
RunCounterValues Allocator<Config>::Heap::run_counters() {
  ensure_initialized();
  RunCounterValues sum{};
  automatic_.for_each([&](Arena& a) { sum += a.run_counters(); });
  explicit_.for_each([&](ExplicitArena& e) { sum += e.blocks.run_counters(); });
  return sum;
}

}  // namespace pagemalloc
