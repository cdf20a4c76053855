// jemalloc's names, for libpagemalloc_je.so: the drop-in for programs linked against jemalloc,
// which call these besides malloc and free. Without them such a program (Debian's
// redis-server, for one) would allocate from pagemalloc but read its memory statistics from,
// and hand sized frees and size-class questions to, an idle jemalloc.
//
//   mallocx rallocx xallocx sallocx dallocx sdallocx nallocx   as pm_*allocx (the flags have
//                     jemalloc's layout already; MALLOCX_TCACHE bits are ignored)
//   malloc_stats_print   pagemalloc's statistics, as text or as JSON (opts holding 'J'), to
//                     the callback or to stderr (not a cancellation point, as malloc_stats)
//   mallctl           the names below; any other gets ENOENT, as from a jemalloc without it
//
// mallctl names (jemalloc's types; reading with a wrong *oldlenp gives EINVAL, writing a
// read-only name EPERM):
//   version              const char*  "pagemalloc <version>"
//   epoch                uint64_t     read; a write (any value) advances it. pagemalloc's
//                                     statistics are always current, so it refreshes nothing
//   stats.allocated      size_t       bytes in live blocks (pm_stats.allocated)
//   stats.active         size_t       bytes of pages holding live blocks
//   stats.mapped         size_t       bytes mapped from the OS
//   stats.resident       size_t       mapped minus the free pages given back (retained), at
//                                     least active
//   stats.retained       size_t       free pages given back to the OS, address space kept
//   arenas.narenas       unsigned     the automatic arenas
//   arenas.page          size_t       4096
//   arenas.quantum       size_t       16
//   arenas.create        unsigned     a new explicit arena (pm_arena_create); extent hooks
//                                     (a written value) are not supported: EINVAL
//   arena.<i>.reset      -            pm_arena_reset(i)
//   arena.<i>.destroy    -            pm_arena_destroy(i)
//   arena.<i>.purge, arena.<i>.decay  every arena's free pages back to the OS (pm_purge;
//                                     jemalloc purges arena i only)
//   thread.tcache.flush  -            the calling thread's cache back to its arena
//   opt.prof             bool         prof:true was given (the heap profiler,
//                                     profile/heap_profiler.h)
//   opt.prof_active, opt.prof_final, opt.prof_leak  bool  the options as given
//   opt.lg_prof_sample, prof.lg_sample  size_t  log2 of prof_sample (rounded down)
//   opt.prof_prefix      const char*  prof_prefix
//   prof.active          bool         read and write: whether allocations are sampled now;
//                                     ENOENT without prof:true
//   prof.dump            const char*  write: a profile to that path, or with NULL (or no
//                                     value) to prof_prefix.PID.SEQ.m.heap; ENOENT without
//                                     prof:true, EFAULT when the file cannot be written
#include <algorithm>
#include <atomic>
#include <bit>
#include <cerrno>
#include <charconv>
#include <cstdint>
#include <cstring>
#include <string_view>

#include <unistd.h>

#include "api/stats_format.h"
#include "design/placement.h"
#include "heap/heap.h"
#include "pagemalloc/pagemalloc.h"
#include "support/diagnostics.h"
#include "support/flags.h"
#include "support/options.h"
#include "threads/thread_cache.h"

using pagemalloc::decode_flags;
using pagemalloc::heap;

namespace {

constexpr const char* kVersion = "pagemalloc " PAGEMALLOC_VERSION_STRING;

std::atomic<std::uint64_t> g_epoch{1};

// jemalloc's rule for reading: *oldlenp must be the value's size; otherwise as much as fits
// is copied and the call fails with EINVAL.
template <class T>
int read_value(const T& value, void* oldp, std::size_t* oldlenp) {
  if (oldp == nullptr || oldlenp == nullptr) return 0;
  if (*oldlenp != sizeof(T)) {
    const std::size_t n = std::min(*oldlenp, sizeof(T));
    std::memcpy(oldp, &value, n);
    *oldlenp = n;
    return EINVAL;
  }
  std::memcpy(oldp, &value, sizeof(T));
  return 0;
}

template <class T>
int read_only(const T& value, void* oldp, std::size_t* oldlenp, const void* newp,
              std::size_t newlen) {
  if (newp != nullptr || newlen != 0) return EPERM;
  return read_value(value, oldp, oldlenp);
}

// A name that is an action: neither reads nor writes a value.
bool is_pure_action(const void* oldp, const void* newp) {
  return oldp == nullptr && newp == nullptr;
}

int stats_ctl(std::string_view what, void* oldp, std::size_t* oldlenp, const void* newp,
              std::size_t newlen) {
  pm_stats s{};
  pm_stats_get(&s);
  const std::size_t resident =
      std::max(s.mapped > s.retained ? s.mapped - s.retained : 0, s.active);
  std::size_t value = 0;
  if (what == "allocated") value = s.allocated;
  else if (what == "active") value = s.active;
  else if (what == "mapped") value = s.mapped;
  else if (what == "resident") value = resident;
  else if (what == "retained") value = s.retained;
  else return ENOENT;
  return read_only(value, oldp, oldlenp, newp, newlen);
}

// The heap profiler's names ("opt.prof..." and "prof.*"); ENOENT for any other.
int prof_ctl(std::string_view name, void* oldp, std::size_t* oldlenp, void* newp,
             std::size_t newlen) {
  pagemalloc::load_conf_from_environment();  // (a call before the program's first malloc)
  const pagemalloc::Options& o = pagemalloc::options();
  const std::size_t lg_sample =
      std::size_t(63 - std::countl_zero(std::uint64_t(o.prof_sample.load()) | 1));
  if (name == "opt.prof") return read_only(o.prof.load(), oldp, oldlenp, newp, newlen);
  if (name == "opt.prof_active")
    return read_only(o.prof_active.load(), oldp, oldlenp, newp, newlen);
  if (name == "opt.prof_final") return read_only(o.prof_final.load(), oldp, oldlenp, newp, newlen);
  if (name == "opt.prof_leak") return read_only(o.prof_leak.load(), oldp, oldlenp, newp, newlen);
  if (name == "opt.lg_prof_sample" || name == "prof.lg_sample")
    return read_only(lg_sample, oldp, oldlenp, newp, newlen);
  if (name == "opt.prof_prefix") {
    const char* prefix = o.prof_prefix;
    return read_only(prefix, oldp, oldlenp, newp, newlen);
  }
  if (name == "prof.active") {
    if (!o.prof.load()) return ENOENT;
    bool wanted = false;
    if (newp != nullptr) {
      if (newlen != sizeof(bool)) return EINVAL;
      std::memcpy(&wanted, newp, sizeof(bool));
    }
    if (const int error = read_value(o.prof_active.load(), oldp, oldlenp)) return error;
    if (newp != nullptr) {
      const long value = wanted ? 1 : 0;
      pm_ctl("prof.active", nullptr, &value);
    }
    return 0;
  }
  if (name == "prof.dump") {
    if (oldp != nullptr) return EPERM;
    const char* path = nullptr;
    if (newp != nullptr) {
      if (newlen != sizeof(const char*)) return EINVAL;
      std::memcpy(&path, newp, sizeof(const char*));
    }
    if (!o.prof.load()) return ENOENT;
    return pm_prof_dump(path) == 0 ? 0 : EFAULT;
  }
  return ENOENT;
}

// "arena.<i>.<action>"; ENOENT for any other form or action.
int arena_ctl(std::string_view rest, const void* oldp, const void* newp) {
  const auto dot = rest.find('.');
  if (dot == std::string_view::npos) return ENOENT;
  unsigned index = 0;
  const auto [end, error] = std::from_chars(rest.data(), rest.data() + dot, index);
  if (error != std::errc{} || end != rest.data() + dot) return ENOENT;
  const std::string_view action = rest.substr(dot + 1);
  if (action != "reset" && action != "destroy" && action != "purge" && action != "decay")
    return ENOENT;
  if (!is_pure_action(oldp, newp)) return EPERM;
  if (action == "reset") return pm_arena_reset(index);
  if (action == "destroy") return pm_arena_destroy(index);
  pm_purge();
  return 0;
}

int ctl(std::string_view name, void* oldp, std::size_t* oldlenp, void* newp, std::size_t newlen) {
  if (name == "version") return read_only(kVersion, oldp, oldlenp, newp, newlen);
  if (name == "epoch") {
    if (newp != nullptr) {
      if (newlen != sizeof(std::uint64_t)) return EINVAL;
      g_epoch.fetch_add(1, std::memory_order_relaxed);
    }
    return read_value(g_epoch.load(std::memory_order_relaxed), oldp, oldlenp);
  }
  if (name.starts_with("stats.")) return stats_ctl(name.substr(6), oldp, oldlenp, newp, newlen);
  if (name == "arenas.narenas") {
    long n = 0;
    pm_ctl("narenas", &n, nullptr);
    return read_only(unsigned(n), oldp, oldlenp, newp, newlen);
  }
  if (name == "arenas.page") return read_only(pagemalloc::kPageSize, oldp, oldlenp, newp, newlen);
  if (name == "arenas.quantum") return read_only(std::size_t{16}, oldp, oldlenp, newp, newlen);
  if (name == "arenas.create") {
    if (newp != nullptr) return EINVAL;  // extent hooks
    const unsigned index = pm_arena_create();
    if (index == 0) return errno;
    return read_value(index, oldp, oldlenp);
  }
  if (name.starts_with("arena.")) return arena_ctl(name.substr(6), oldp, newp);
  if (name.starts_with("opt.prof") || name == "opt.lg_prof_sample" || name.starts_with("prof."))
    return prof_ctl(name, oldp, oldlenp, newp, newlen);
  if (name == "thread.tcache.flush") {
    if (!is_pure_action(oldp, newp)) return EPERM;
    if (pagemalloc::ThreadCache* cache = pagemalloc::ThreadCache::current()) cache->flush_all();
    return 0;
  }
  return ENOENT;
}

}  // namespace

extern "C" {

void* mallocx(size_t size, int flags) {
  const auto f = decode_flags(flags);
  if (f.arena != pagemalloc::kNoArena) return heap().allocate_in(f.arena, size, f.align, f.zero);
  return heap().allocate(size, f.align, f.zero);
}

void* rallocx(void* ptr, size_t size, int flags) {
  if (ptr == nullptr) return mallocx(size, flags);
  const auto f = decode_flags(flags);
  return heap().reallocate(ptr, size, f.align, f.zero, f.arena, "rallocx");
}

size_t xallocx(void* ptr, size_t size, size_t extra, int flags) {
  return heap().resize_in_place(ptr, size, extra, decode_flags(flags).zero, "xallocx");
}

size_t sallocx(const void* ptr, int) { return heap().usable_size(ptr, "sallocx"); }

void dallocx(void* ptr, int) { heap().deallocate(ptr, "dallocx"); }

void sdallocx(void* ptr, size_t size, int flags) {
  heap().deallocate_sized(ptr, size, decode_flags(flags).align, "sdallocx");
}

size_t nallocx(size_t size, int flags) {
  const auto where = pagemalloc::place(size, decode_flags(flags).align);
  return where.kind == pagemalloc::BlockKind::Invalid ? 0 : where.usable;
}

int mallctl(const char* name, void* oldp, size_t* oldlenp, void* newp, size_t newlen) {
  if (name == nullptr) return ENOENT;
  return ctl(name, oldp, oldlenp, newp, newlen);
}

void malloc_stats_print(void (*write_cb)(void*, const char*), void* cbopaque, const char* opts) {
  const bool json = opts != nullptr && std::strchr(opts, 'J') != nullptr;
  char buffer[pagemalloc::kStatsTextCapacity + 1];
  const std::size_t n = pagemalloc::format_stats(buffer, sizeof(buffer) - 1, json);
  buffer[n] = '\0';
  if (write_cb != nullptr) return write_cb(cbopaque, buffer);
  pagemalloc::write_fully(STDERR_FILENO, std::string_view(buffer, n));
}

}  // extern "C"
