// The pm_ API over the heap of any Config (allocator.h): argument checks and errno, then the
// heap, as one static member function per pm_ function, of the same name without the prefix.
// api.cpp's C entry points are PmApi<BuildConfig>'s; a program that holds another Config's
// heap calls it through PmApi<ItsConfig> (tests/support/fault_workload.h). Each entry point names
// itself in misuse reports.
#pragma once

#include <cerrno>
#include <cstddef>

#include "api/entry_points.h"
#include "heap/heap.h"
#include "pagemalloc/pagemalloc.h"
#include "support/flags.h"

namespace pagemalloc {

template <class Config>
struct PmApi {
  static typename Allocator<Config>::Heap& heap() { return Allocator<Config>::heap(); }

  static void* malloc(std::size_t size) { return heap().allocate(size, 1, false); }
  static void* calloc(std::size_t count, std::size_t size) {
    return calloc_checked<Config>(count, size);
  }
  static void* realloc(void* ptr, std::size_t size) {
    return realloc_as_glibc<Config>(ptr, size, "pm_realloc");
  }
  static void free(void* ptr) { heap().deallocate(ptr, "pm_free"); }
  static int posix_memalign(void** out, std::size_t alignment, std::size_t size) {
    return posix_memalign_checked<Config>(out, alignment, size);
  }
  static void* aligned_alloc(std::size_t alignment, std::size_t size) {
    return aligned_alloc_checked<Config>(alignment, size);
  }
  static std::size_t malloc_usable_size(const void* ptr) {
    return heap().usable_size(ptr, "pm_malloc_usable_size");
  }

  static void* mallocx(std::size_t size, int flags) {
    const auto f = decode_flags(flags);
    if (f.arena != kNoArena) return heap().allocate_in(f.arena, size, f.align, f.zero);
    return heap().allocate(size, f.align, f.zero);
  }
  static void* rallocx(void* ptr, std::size_t size, int flags) {
    const auto f = decode_flags(flags);
    if (ptr == nullptr) return mallocx(size, flags);
    return heap().reallocate(ptr, size, f.align, f.zero, f.arena, "pm_rallocx");
  }
  static std::size_t xallocx(void* ptr, std::size_t size, std::size_t extra, int flags) {
    return heap().resize_in_place(ptr, size, extra, decode_flags(flags).zero, "pm_xallocx");
  }
  static std::size_t sallocx(const void* ptr, int) { return heap().usable_size(ptr, "pm_sallocx"); }
  static void dallocx(void* ptr, int) { heap().deallocate(ptr, "pm_dallocx"); }
  static void sdallocx(void* ptr, std::size_t size, int flags) {
    heap().deallocate_sized(ptr, size, decode_flags(flags).align, "pm_sdallocx");
  }
  static std::size_t nallocx(std::size_t size, int flags) {
    const auto f = decode_flags(flags);
    if (f.arena != kNoArena) {
      if (const std::size_t bumped = heap().bumped_usable_size(f.arena, size, f.align))
        return bumped;
    }
    const auto where = Allocator<Config>::place(size, f.align);
    return where.kind == BlockKind::Invalid ? 0 : where.usable;
  }

  static unsigned arena_create() { return heap().create_arena(); }
  static unsigned arena_create_ex(unsigned flags) {
    constexpr unsigned kKnown = PM_ARENA_BUMP | PM_ARENA_NO_FREE;
    if ((flags & ~kKnown) != 0 ||
        ((flags & PM_ARENA_NO_FREE) != 0 && (flags & PM_ARENA_BUMP) == 0)) {
      errno = EINVAL;
      return 0;
    }
    return heap().create_arena(flags);
  }
  static void* arena_bump(pm_bump_cursor* cursor, std::size_t size, int flags) {
    if (cursor == nullptr) {
      errno = EINVAL;
      return nullptr;
    }
    if (flags == 0) [[likely]] {
      if (void* p = heap().bump_from_current_span(*cursor, size)) [[likely]]
        return p;
    }
    const auto f = decode_flags(flags);
    return heap().bump_from_cursor(*cursor, size, f.align, f.zero);
  }
  // The inline free, for a cursor whose span is of its arena's current epoch: a cursor left
  // as it was after a reset or destroy (misuse) frees through pm_free, which reports it.
  static void arena_bump_free(pm_bump_cursor* cursor, void* p) {
    if (cursor != nullptr && heap().cursor_is_current(*cursor)) [[likely]]
      return pm_arena_bump_free_inline(cursor, p);
    free(p);
  }
  static void arena_bump_flush(pm_bump_cursor* cursor) {
    if (cursor != nullptr) heap().flush_cursor(*cursor);
  }
  static int arena_reset(unsigned arena) { return heap().reset_arena(arena); }
  static int arena_destroy(unsigned arena) { return heap().destroy_arena(arena); }
  static int arena_stats_get(unsigned arena, pm_arena_stats* out) {
    if (out == nullptr) return EINVAL;
    return heap().arena_stats(arena, *out);
  }
  static void stats_get(pm_stats* out) { heap().stats(*out); }
  static void purge() { heap().purge(); }
};

}  // namespace pagemalloc
