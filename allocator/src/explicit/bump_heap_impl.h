// The heap's operations on bump arenas' blocks (bump_space.h): reallocation in place or by
// moving, resizing in place, and the calls behind pm_arena_bump, pm_arena_bump_flush and
// pm_nallocx with PM_ARENA(i) of a bump arena.
#pragma once

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>

#include "explicit/bump_space.h"
#include "heap/heap.h"

namespace pagemalloc {

// A bumped block stays where it is when its arena is kept and it fits (bump_space.h);
// otherwise it moves, as any block, to the arena named or its own.
template <class Config>
void* Allocator<Config>::Heap::reallocate_bumped(BumpSpace& space, void* p, std::size_t size,
                                                 std::size_t align, bool zero, unsigned arena,
                                                 const char* call) {
  const std::size_t old_usable = space.usable_size(p, call);
  if (size == 0) size = 1;
  if (place(size, align).kind == BlockKind::Invalid) {
    errno = ENOMEM;
    return nullptr;
  }
  const bool aligned = (reinterpret_cast<std::uintptr_t>(p) & (align - 1)) == 0;
  if ((arena == kNoArena || arena == space.index()) && align <= kBumpMaxAlign && aligned &&
      space.resize_in_place(p, size, call)) {
    const std::size_t new_usable = space.usable_size(p, call);
    if (new_usable > old_usable) {
      if (zero) std::memset(static_cast<std::byte*>(p) + old_usable, 0, new_usable - old_usable);
      grown_in_place_.fetch_add(1, std::memory_order_relaxed);
    }
    return p;
  }
  void* q = allocate_in(arena == kNoArena ? space.index() : arena, size, align, zero);
  if (q == nullptr) return nullptr;
  const std::size_t keep = old_usable < size ? old_usable : size;
  std::memcpy(q, p, keep);
  space.free(p, call);
  copied_.fetch_add(keep, std::memory_order_relaxed);
  moved_by_copy_.fetch_add(1, std::memory_order_relaxed);
  return q;
}

template <class Config>
std::size_t Allocator<Config>::Heap::resize_bumped_in_place(BumpSpace& space, void* p,
                                                            std::size_t size, std::size_t extra,
                                                            bool zero, const char* call) {
  const std::size_t old_usable = space.usable_size(p, call);
  if (size > kMaxRequest) return old_usable;
  const std::size_t least = size == 0 ? 1 : size;
  const std::size_t most = size + extra < size ? kMaxRequest : std::max(size + extra, least);
  // Growth only (jemalloc's xallocx never shrinks a block it cannot shrink in place).
  if (most > old_usable && !space.resize_in_place(p, most, call) && least > old_usable)
    space.resize_in_place(p, least, call);
  const std::size_t result = space.usable_size(p, call);
  if (result > old_usable) {
    grown_in_place_.fetch_add(1, std::memory_order_relaxed);
    if (zero) std::memset(static_cast<std::byte*>(p) + old_usable, 0, result - old_usable);
  }
  return result;
}

template <class Config>
void* Allocator<Config>::Heap::bump_from_cursor(pm_bump_cursor& cursor, std::size_t size,
                                                std::size_t align, bool zero) {
  ExplicitArena* e = explicit_.find(cursor.arena);
  if (e == nullptr || !e->bump.enabled()) {
    errno = EINVAL;
    return nullptr;
  }
  void* p = size <= kBumpMaxBlock && align <= kBumpMaxAlign
                ? e->bump.allocate_from_cursor(cursor, size, align)
                : nullptr;
  if (p == nullptr) return allocate_in(cursor.arena, size, align, zero);
  if (zero) std::memset(p, 0, bump_usable(size));
  return p;
}

template <class Config>
std::size_t Allocator<Config>::Heap::bumped_usable_size(unsigned arena, std::size_t size,
                                                        std::size_t align) {
  ExplicitArena* e = explicit_.find(arena);
  if (e == nullptr || !e->bump.enabled() || size > kBumpMaxBlock || align > kBumpMaxAlign) return 0;
  return bump_usable(size);
}

template <class Config>
void Allocator<Config>::Heap::flush_cursor(pm_bump_cursor& cursor) {
  if (ExplicitArena* e = explicit_.find(cursor.arena); e != nullptr && e->bump.enabled())
    e->bump.flush(cursor);
}

}  // namespace pagemalloc
