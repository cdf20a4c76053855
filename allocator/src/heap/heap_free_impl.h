// The heap's frees and classification of pointers: a freed block back to the thread's cache
// or the arena that holds it, checked frees, and the usable size. Part of the heap's
// definitions (heap_impl.h).
#pragma once

#include "heap/heap.h"

#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "chunks/address_map.h"
#include "heap/heap_detail.h"
#include "os/clear_block.h"
#include "os/populate.h"
#include "pagemalloc/pagemalloc.h"
#include "process/decay.h"
#include "process/fork.h"
#include "profile/heap_profiler.h"
#include "support/diagnostics.h"
#include "support/options.h"
#include "threads/thread_cache.h"

namespace pagemalloc {

// A freed region of `owner` into the thread's cache: its first word marked, pushed as the
// cache's own (of its arena, in a granule the thread owns) or as a foreign region, which goes
// home (thread_cache.h).
template <class ThreadCache, class Arena>
[[gnu::always_inline]] inline void cache_freed_region(ThreadCache& cache, Arena& owner,
                                                      unsigned size_class, void* p) {
  *static_cast<std::uintptr_t*>(p) = ThreadCache::freed_key();
  const bool other_arena = cache.arena() != &owner;
  if (!other_arena && cache.owns(p)) cache.push(size_class, p);
  else cache.push_foreign(size_class, p, other_arena);
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
// fast path declined: one in a granule the thread does not own): into the thread's cache,
// foreign unless it is the thread's own. Anything else, a block
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
    case PageKind::Cached:
    case PageKind::ThreadCached: report_misuse(call, p, "not a live block (already freed?)");
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

// free's path for a medium block, from the fast path's test (deallocate). It calls nothing but in
// tail position, so that the compiler saves few registers for it (deallocate_slow saves six): a
// medium free costs about 58 instructions with free's test before it (docs/measurements.md).
template <class Config>
void Allocator<Config>::Heap::deallocate_remembered(PageEntry e, void* p, PageIndex page,
                                                    std::byte* chunk, ThreadCache& cache,
                                                    const char* call) noexcept {
  if (HeapProfiler::enabled()) [[unlikely]]
    return heap().deallocate_slow(p, call);  // (which asks the profiler)
  if constexpr (MediumClasses::kEnabled && !Config::kAllocatedRunsTree) {
    if (e.kind() == PageKind::Large && heap_detail::is_aligned(p, kPageSize)) {
      const unsigned medium_class = MediumClasses::class_of_entry_length(e.pages().value());
      if (medium_class != MediumClasses::kNone) {
        switch (cache.try_push_medium(medium_class, p, page_entry(chunk, page))) {
          case ThreadCache::MediumPush::kDone: return;
          case ThreadCache::MediumPush::kTick: return cache.medium_tick();
          case ThreadCache::MediumPush::kFull:
            return heap().free_medium_into_full_bin(medium_class, p, call);
        }
      }
    }
  }
  heap().deallocate_slow(p, call);
}

// A medium block whose bin is at its limit: the bin grows or gives back its older half
// (ThreadCache::push_medium_full), or, if it may hold none, the block goes the rest of the way.
template <class Config>
void Allocator<Config>::Heap::free_medium_into_full_bin(unsigned medium_class, void* p,
                                                        const char* call) noexcept {
  if (!ThreadCache::remembering()->push_medium_full(medium_class, p)) deallocate_slow(p, call);
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
      if (e.kind() == PageKind::Large && heap_detail::is_aligned(p, kPageSize)) {
        if (HeapProfiler::enabled()) [[unlikely]]
          return free_large_profiled(owner, e, p, call);
        if (push_medium(owner, e, p)) return;
        return owner.free_large(p, e.pages(), call);
      }
      if (ThreadCache* cache = ThreadCache::current(); cache != nullptr) [[likely]]
        return deallocate_foreign(*cache, owner, e, p, call);
    }
  }
  deallocate_unusual(p, call);
}

template <class Config>
void Allocator<Config>::Heap::free_large_profiled(Arena& owner, PageEntry e, void* p,
                                                  const char* call) {
  HeapProfiler::forget(p);
  const ThreadCache* cache = ThreadCache::current();
  if (cache != nullptr && !cache->profiled() && push_medium(owner, e, p)) return;
  owner.free_large(p, e.pages(), call);
}

// A large block of `owner` whose first entry is e into the calling thread's medium bins: only
// one of exactly a medium class's length, of the thread's cache's own arena, with checks off
// (checks look every freed block up in its arena). False if it stays the caller's to free.
template <class Config>
bool Allocator<Config>::Heap::push_medium(Arena& owner, PageEntry e, void* p) {
  if constexpr (!MediumClasses::kEnabled) return false;
  ThreadCache* cache = ThreadCache::current();
  if (cache == nullptr || cache->arena() != &owner ||
      options().checks.load(std::memory_order_relaxed))
    return false;
  return push_medium_to(*cache, e, p);
}

template <class Config>
void Allocator<Config>::Heap::deallocate_unusual(void* p, const char* call) {
  ensure_initialized();
  if (p == nullptr) return;
  if (is_chunk_aligned(p)) {
    HugeManager* owner = HugeManager::owner_of(p);
    if (owner == nullptr) report_misuse(call, p, "not allocated by pagemalloc");
    if (HeapProfiler::enabled()) [[unlikely]]
      HeapProfiler::forget(p);
    return owner->free(p, call);
  }
  std::byte* chunk = chunk_base_of(p);
  const std::uintptr_t entry = address_map().get(chunk);
  const AddressMap::Tag tag = AddressMap::tag_of(entry);
  if (tag == AddressMap::kBumpChunk) {
    if (HeapProfiler::enabled()) [[unlikely]]
      HeapProfiler::forget(p);
    return AddressMap::owner_of<BumpSpace>(entry)->free(p, call);
  }
  if (tag != AddressMap::kArenaChunk) [[unlikely]]
    report_misuse(
        call, p,
        tag == AddressMap::kHuge ? "not the start of a block" : "not allocated by pagemalloc");
  Arena& owner = *AddressMap::owner_of<Arena>(entry);
  PageEntry e = page_entry(chunk, page_index_of(p));
  if (e.kind() == PageKind::Slab) [[likely]]
    return deallocate_small(owner, e, p, call);
  // A large block's start never reaches here: deallocate_slow sends it to its arena.
  const bool freed = e.kind() == PageKind::Free || e.kind() == PageKind::Cached ||
                     e.kind() == PageKind::ThreadCached;
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
  // (A sampled small block is a run of pages: heap_profiler.h.)
  if (place(size, align).usable != b.usable &&
      !(HeapProfiler::enabled() && HeapProfiler::is_sampled(p)))
    report_size_mismatch(call, p, size, b.usable);
  deallocate(p, call);
}

template <class Config>
std::size_t Allocator<Config>::Heap::usable_size_slow(const void* p, const char* call) {
  if (p == nullptr) return 0;
  if (BumpSpace* space = is_chunk_aligned(p) ? nullptr : BumpSpace::owner_of(p))
    return space->usable_size(p, call);
  return locate(p, call).usable;
}

}  // namespace pagemalloc
