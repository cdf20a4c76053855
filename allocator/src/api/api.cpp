// The pm_ C API: the build's heap through PmApi (pm_api.h), and pm_ctl over the process's
// options.
#include <cerrno>
#include <cstdint>

#include "api/pm_api.h"
#include "process/decay.h"
#include "profile/heap_profiler.h"
#include "support/options.h"

using pagemalloc::heap;
using Api = pagemalloc::PmApi<pagemalloc::BuildConfig>;

extern "C" {

void* pm_malloc(size_t size) { return Api::malloc(size); }
void* pm_calloc(size_t count, size_t size) { return Api::calloc(count, size); }
void* pm_realloc(void* ptr, size_t size) { return Api::realloc(ptr, size); }
void pm_free(void* ptr) { Api::free(ptr); }
int pm_posix_memalign(void** out, size_t alignment, size_t size) {
  return Api::posix_memalign(out, alignment, size);
}
void* pm_aligned_alloc(size_t alignment, size_t size) {
  return Api::aligned_alloc(alignment, size);
}
void* pm_memalign(size_t alignment, size_t size) { return Api::aligned_alloc(alignment, size); }
size_t pm_malloc_usable_size(const void* ptr) { return Api::malloc_usable_size(ptr); }

void* pm_mallocx(size_t size, int flags) { return Api::mallocx(size, flags); }
void* pm_rallocx(void* ptr, size_t size, int flags) { return Api::rallocx(ptr, size, flags); }
size_t pm_xallocx(void* ptr, size_t size, size_t extra, int flags) {
  return Api::xallocx(ptr, size, extra, flags);
}
size_t pm_sallocx(const void* ptr, int flags) { return Api::sallocx(ptr, flags); }
void pm_dallocx(void* ptr, int flags) { Api::dallocx(ptr, flags); }
void pm_sdallocx(void* ptr, size_t size, int flags) { Api::sdallocx(ptr, size, flags); }
size_t pm_nallocx(size_t size, int flags) { return Api::nallocx(size, flags); }

unsigned pm_arena_create(void) { return Api::arena_create(); }
unsigned pm_arena_create_ex(unsigned flags) { return Api::arena_create_ex(flags); }
void* pm_arena_bump(pm_bump_cursor* cursor, size_t size, int flags) {
  return Api::arena_bump(cursor, size, flags);
}
void pm_arena_bump_flush(pm_bump_cursor* cursor) { Api::arena_bump_flush(cursor); }
void pm_arena_bump_free(pm_bump_cursor* cursor, void* ptr) { Api::arena_bump_free(cursor, ptr); }
int pm_arena_reset(unsigned arena) { return Api::arena_reset(arena); }
int pm_arena_destroy(unsigned arena) { return Api::arena_destroy(arena); }
int pm_arena_stats_get(unsigned arena, pm_arena_stats* out) {
  return Api::arena_stats_get(arena, out);
}
void pm_stats_get(pm_stats* out) { Api::stats_get(out); }
void pm_purge(void) { Api::purge(); }

int pm_prof_dump(const char* path) {
  pagemalloc::load_conf_from_environment();
  return pagemalloc::HeapProfiler::dump(path);
}

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
    if (new_value != nullptr) pagemalloc::set_checks(*new_value != 0);
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
  if (key == "thp_budget") {  // N: 1/N of the run time; 0: no limit (config.h)
    if (old_value != nullptr) *old_value = o.thp_budget.load();
    if (new_value != nullptr) {
      if (*new_value < 0) return EINVAL;
      o.thp_budget = *new_value;
    }
    return 0;
  }
  if (key == "background_thread") {  // 0 or 1: 1 starts it now (decay.h)
    if (old_value != nullptr) *old_value = o.background_thread.load() ? 1 : 0;
    if (new_value != nullptr) {
      o.background_thread = *new_value != 0;
      if (*new_value != 0) {
        heap().ensure_initialized();
        pagemalloc::Allocator<pagemalloc::BuildConfig>::Decay::start_background_thread_if_asked();
      }
    }
    return 0;
  }
  if (key == "populate") {  // 0 or 1 (populate.h)
    if (old_value != nullptr) *old_value = o.populate.load() ? 1 : 0;
    if (new_value != nullptr) o.populate = *new_value != 0;
    return 0;
  }
  if (key == "prof") {  // fixed at initialization
    if (new_value != nullptr) return EPERM;
    if (old_value != nullptr) *old_value = o.prof.load() ? 1 : 0;
    return 0;
  }
  if (key == "prof.active") {  // heap_profiler.h
    if (!o.prof.load()) return ENOENT;
    if (old_value != nullptr) *old_value = o.prof_active.load() ? 1 : 0;
    if (new_value != nullptr) o.prof_active = *new_value != 0;
    return 0;
  }
  if (key == "prof.sample") {
    if (new_value != nullptr) return EPERM;
    if (old_value != nullptr) *old_value = o.prof_sample.load();
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
  if (pagemalloc::HeapProfiler::enabled()) pagemalloc::HeapProfiler::dump_at_exit();
}
