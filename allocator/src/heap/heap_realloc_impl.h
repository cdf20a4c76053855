// The heap's reallocation: in place (runs and huge extents) before moving, and moving by
// remapping before copying. Part of the heap's definitions (heap_impl.h).
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
        if (resize_large(*old.arena, p, PageCount::covering(old.usable),
                         PageCount::covering(want.usable))) {
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
            if (HeapProfiler::enabled()) [[unlikely]]
              HeapProfiler::moved(p, q);
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
bool Allocator<Config>::Heap::resize_large(Arena& arena, void* p, PageCount have, PageCount want) {
  if (arena.resize_large(p, have, want)) return true;
  ThreadCache* cache = ThreadCache::current();
  if (want <= have || cache == nullptr || cache->arena() != &arena || !cache->holds_medium())
    return false;
  cache->flush_medium();
  return arena.resize_large(p, have, want);
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
    // A medium length is its class's (pm_nallocx agrees with the result).
    const PageCount hi = std::min(PageCount::covering(MediumClasses::rounded(most)), kMaxRunPages);
    const PageCount lo = PageCount::covering(MediumClasses::rounded(least));
    if (lo > kMaxRunPages) return old.usable;  // only a move could make it huge
    if (hi != have && resize_large(*old.arena, p, have, hi)) result = hi.bytes();
    else if (hi > have && lo > have && resize_large(*old.arena, p, have, lo)) result = lo.bytes();
  } else if (PageCount::covering(MediumClasses::rounded(most)).bytes() != old.usable) {
    if (old.huge->resize_in_place(p, MediumClasses::rounded(most)) ||
        (least > old.usable && old.huge->resize_in_place(p, MediumClasses::rounded(least))))
      result = old.huge->usable_size(p);
  }
  if (result > old.usable) {
    grown_in_place_.fetch_add(1, std::memory_order_relaxed);
    if (zero) clear_block(static_cast<std::byte*>(p) + old.usable, result - old.usable);
  }
  return result;
}

}  // namespace pagemalloc
