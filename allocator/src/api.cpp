// The pm_ C API: argument checks and errno, then the heap. Each entry point names itself in
// misuse reports.
#include <cerrno>
#include <cstdint>

#include "config.h"
#include "decay.h"
#include "entry_points.h"
#include "flags.h"
#include "heap.h"
#include "pagemalloc/pagemalloc.h"

using pagemalloc::decode_flags;
using pagemalloc::heap;

extern "C" {

void* pm_malloc(size_t size) { return heap().allocate(size, 1, false); }

void* pm_calloc(size_t count, size_t size) { return pagemalloc::calloc_checked(count, size); }

void* pm_realloc(void* ptr, size_t size) {
  return pagemalloc::realloc_as_glibc(ptr, size, "pm_realloc");
}

void pm_free(void* ptr) { heap().deallocate(ptr, "pm_free"); }

int pm_posix_memalign(void** out, size_t alignment, size_t size) {
  return pagemalloc::posix_memalign_checked(out, alignment, size);
}

void* pm_aligned_alloc(size_t alignment, size_t size) {
  return pagemalloc::aligned_alloc_checked(alignment, size);
}

void* pm_memalign(size_t alignment, size_t size) {
  return pagemalloc::aligned_alloc_checked(alignment, size);
}

size_t pm_malloc_usable_size(const void* ptr) {
  return heap().usable_size(ptr, "pm_malloc_usable_size");
}

void* pm_mallocx(size_t size, int flags) {
  const auto f = decode_flags(flags);
  if (f.arena != pagemalloc::kNoArena) return heap().allocate_in(f.arena, size, f.align, f.zero);
  return heap().allocate(size, f.align, f.zero);
}

void* pm_rallocx(void* ptr, size_t size, int flags) {
  const auto f = decode_flags(flags);
  if (ptr == nullptr) return pm_mallocx(size, flags);
  return heap().reallocate(ptr, size, f.align, f.zero, f.arena, "pm_rallocx");
}

size_t pm_xallocx(void* ptr, size_t size, size_t extra, int flags) {
  return heap().resize_in_place(ptr, size, extra, decode_flags(flags).zero, "pm_xallocx");
}

size_t pm_sallocx(const void* ptr, int) { return heap().usable_size(ptr, "pm_sallocx"); }

void pm_dallocx(void* ptr, int) { heap().deallocate(ptr, "pm_dallocx"); }

void pm_sdallocx(void* ptr, size_t size, int flags) {
  heap().deallocate_sized(ptr, size, decode_flags(flags).align, "pm_sdallocx");
}

size_t pm_nallocx(size_t size, int flags) {
  const auto f = decode_flags(flags);
  if (f.arena != pagemalloc::kNoArena) {
    if (const size_t bumped = heap().bumped_usable_size(f.arena, size, f.align)) return bumped;
  }
  const auto where = pagemalloc::place(size, decode_flags(flags).align);
  return where.kind == pagemalloc::BlockKind::Invalid ? 0 : where.usable;
}

unsigned pm_arena_create(void) { return heap().create_arena(); }

unsigned pm_arena_create_ex(unsigned flags) {
  constexpr unsigned kKnown = PM_ARENA_BUMP | PM_ARENA_NO_FREE;
  if ((flags & ~kKnown) != 0 || ((flags & PM_ARENA_NO_FREE) != 0 && (flags & PM_ARENA_BUMP) == 0)) {
    errno = EINVAL;
    return 0;
  }
  return heap().create_arena(flags);
}

void* pm_arena_bump(pm_bump_cursor* cursor, size_t size, int flags) {
  if (cursor == nullptr) {
    errno = EINVAL;
    return nullptr;
  }
  const auto f = decode_flags(flags);
  return heap().bump_from_cursor(*cursor, size, f.align, f.zero);
}

void pm_arena_bump_flush(pm_bump_cursor* cursor) {
  if (cursor != nullptr) heap().flush_cursor(*cursor);
}

int pm_arena_reset(unsigned arena) { return heap().reset_arena(arena); }

int pm_arena_destroy(unsigned arena) { return heap().destroy_arena(arena); }

int pm_arena_stats_get(unsigned arena, pm_arena_stats* out) {
  if (out == nullptr) return EINVAL;
  return heap().arena_stats(arena, *out);
}

void pm_stats_get(pm_stats* out) { heap().stats(*out); }

void pm_purge(void) { heap().purge(); }

int pm_ctl(const char* name, long* old_value, const long* new_value) {
  pagemalloc::load_conf_from_environment();
  auto& o = pagemalloc::options();
  const std::string_view key = name == nullptr ? "" : name;
  if (key == "decay_ms") {
    if (old_value != nullptr) *old_value = o.decay_ms.load();
    if (new_value != nullptr) {
      if (*new_value < -1) return EINVAL;
      o.decay_ms = *new_value;
    }
    return 0;
  }
  if (key == "checks") {
    if (old_value != nullptr) *old_value = o.checks.load() ? 1 : 0;
    if (new_value != nullptr) o.checks = *new_value != 0;
    return 0;
  }
  if (key == "thp") {  // 0 default, 1 always, 2 never, 3 auto (config.h); later chunks
    if (old_value != nullptr) *old_value = static_cast<long>(o.thp.load());
    if (new_value != nullptr) {
      if (*new_value < 0 || *new_value > pagemalloc::kLastHugePagesMode) return EINVAL;
      o.thp = static_cast<pagemalloc::HugePages>(*new_value);
    }
    return 0;
  }
  if (key == "background_thread") {  // 0 or 1: 1 starts it now (decay.h)
    if (old_value != nullptr) *old_value = o.background_thread.load() ? 1 : 0;
    if (new_value != nullptr) {
      o.background_thread = *new_value != 0;
      if (*new_value != 0) {
        heap().ensure_initialized();
        pagemalloc::start_background_thread_if_asked();
      }
    }
    return 0;
  }
  if (key == "narenas") {  // fixed at initialization
    if (new_value != nullptr) return EPERM;
    if (old_value != nullptr) *old_value = long(heap().automatic_arena_count());
    return 0;
  }
  return EINVAL;
}

}  // extern "C"

// Statistics at exit, when PAGEMALLOC_CONF asks for them (stats_print.cpp). The option is
// looked at here, so that a process that does not ask never runs (nor maps) the printer.
__attribute__((destructor)) static void print_stats_at_exit() {
  if (pagemalloc::options().stats_print.load(std::memory_order_relaxed))
    pagemalloc::print_stats_at_exit();
}
