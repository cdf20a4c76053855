/* jemalloc's names in libpagemalloc_je.so, called as a jemalloc program calls them
 * (tests/dropin/jemalloc_names/mallctl.sh links this with the library). Prints "ok: ..." and
 * exits 0 when every check holds; names each failed check otherwise.
 *
 *   mallctl                  the names, the heap profiler's without prof:true
 *   mallctl prof DIRECTORY   the heap profiler's names, run with PAGEMALLOC_CONF=prof:true,
 *                            prof_sample:4096,prof_prefix:DIRECTORY/je: a service's dump through
 *                            mallctl("prof.dump") */
#include <pagemalloc/pagemalloc.h>
#include <stdbool.h>

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* jemalloc's declarations (jemalloc/jemalloc.h), with its flag layout. */
void* mallocx(size_t size, int flags);
void* rallocx(void* ptr, size_t size, int flags);
size_t xallocx(void* ptr, size_t size, size_t extra, int flags);
size_t sallocx(const void* ptr, int flags);
void dallocx(void* ptr, int flags);
void sdallocx(void* ptr, size_t size, int flags);
size_t nallocx(size_t size, int flags);
int mallctl(const char* name, void* oldp, size_t* oldlenp, void* newp, size_t newlen);
void malloc_stats_print(void (*write_cb)(void*, const char*), void* cbopaque, const char* opts);
#define MALLOCX_LG_ALIGN(la) ((int)(la))
#define MALLOCX_ZERO ((int)0x40)
#define MALLOCX_TCACHE_NONE ((int)(1 << 8))
#define MALLOCX_ARENA(a) ((int)(((unsigned)(a) + 1) << 20))

static int failures = 0;

static void check(int ok, const char* what) {
  if (!ok) {
    fprintf(stderr, "FAIL: %s\n", what);
    ++failures;
  }
}

static size_t read_size(const char* name) {
  size_t value = 0, length = sizeof value;
  int error = mallctl(name, &value, &length, NULL, 0);
  if (error != 0) fprintf(stderr, "FAIL: mallctl(\"%s\") = %d\n", name, error), ++failures;
  return value;
}

static char printed[8192];
static void collect(void* opaque, const char* text) {
  (void)opaque;
  strncat(printed, text, sizeof printed - strlen(printed) - 1);
}

/* The heap profiler through jemalloc's names; profiling: PAGEMALLOC_CONF has prof:true. */
static void check_profiler(bool profiling, const char* directory) {
  bool on = false;
  size_t length = sizeof on;
  check(mallctl("opt.prof", &on, &length, NULL, 0) == 0 && on == profiling, "opt.prof");
  if (!profiling) {
    const char* path = "/nonexistent/je.heap";
    check(mallctl("prof.dump", NULL, NULL, &path, sizeof path) == ENOENT,
          "prof.dump without prof:true is ENOENT");
    check(mallctl("prof.active", &on, &length, NULL, 0) == ENOENT,
          "prof.active without prof:true is ENOENT");
    return;
  }
  check(read_size("opt.lg_prof_sample") == 12 && read_size("prof.lg_sample") == 12,
        "opt.lg_prof_sample and prof.lg_sample are 12 for prof_sample:4096");
  bool leak = true;
  length = sizeof leak;
  check(mallctl("opt.prof_leak", &leak, &length, NULL, 0) == 0 && !leak, "opt.prof_leak");
  const char* prefix = NULL;
  length = sizeof prefix;
  check(mallctl("opt.prof_prefix", &prefix, &length, NULL, 0) == 0 && prefix != NULL &&
            strstr(prefix, "/je") != NULL,
        "opt.prof_prefix");
  bool off = false, was = false;
  length = sizeof was;
  check(mallctl("prof.active", &was, &length, &off, sizeof off) == 0 && was, "prof.active off");
  length = sizeof was;
  check(mallctl("prof.active", &was, &length, NULL, 0) == 0 && !was, "prof.active reads off");
  bool again = true;
  check(mallctl("prof.active", NULL, NULL, &again, sizeof again) == 0, "prof.active on");
  void* blocks[2000];
  for (int i = 0; i < 2000; ++i) blocks[i] = malloc(1000);
  char path[512];
  snprintf(path, sizeof path, "%s/named.heap", directory);
  const char* named = path;
  check(mallctl("prof.dump", NULL, NULL, &named, sizeof named) == 0, "prof.dump to a path");
  FILE* f = fopen(path, "r");
  char header[32] = "";
  check(
      f != NULL && fgets(header, sizeof header, f) != NULL && strcmp(header, "heap_v2/4096\n") == 0,
      "prof.dump wrote a heap_v2 profile");
  if (f != NULL) fclose(f);
  check(mallctl("prof.dump", NULL, NULL, NULL, 0) == 0, "prof.dump to prof_prefix's name");
  const char* nowhere = "/nonexistent/je.heap";
  check(mallctl("prof.dump", NULL, NULL, &nowhere, sizeof nowhere) == EFAULT,
        "prof.dump to a path that cannot be made is EFAULT");
  for (int i = 0; i < 2000; ++i) free(blocks[i]);
}

int main(int argc, char** argv) {
  if (argc == 3 && strcmp(argv[1], "prof") == 0) {
    check_profiler(true, argv[2]);
    if (failures != 0) return 1;
    printf("ok: the heap profiler's mallctl names\n");
    return 0;
  }
  check_profiler(false, NULL);
  /* version, epoch */
  const char* version = NULL;
  size_t length = sizeof version;
  check(mallctl("version", &version, &length, NULL, 0) == 0 && version != NULL &&
            strncmp(version, "pagemalloc ", 11) == 0,
        "version names pagemalloc");
  uint64_t epoch = 1, before = 0, after = 0;
  length = sizeof before;
  check(mallctl("epoch", &before, &length, NULL, 0) == 0, "epoch read");
  length = sizeof after;
  check(mallctl("epoch", &after, &length, &epoch, sizeof epoch) == 0 && after == before + 1,
        "a write advances the epoch");

  /* stats.* are pagemalloc's statistics */
  void* big = malloc(8 << 20);
  memset(big, 1, 8 << 20);
  pm_stats s;
  pm_stats_get(&s);
  const size_t allocated = read_size("stats.allocated");
  check(allocated == s.allocated, "stats.allocated == pm_stats.allocated");
  check(allocated >= (8 << 20), "stats.allocated counts an 8 MiB block");
  check(read_size("stats.active") == s.active, "stats.active == pm_stats.active");
  check(read_size("stats.mapped") == s.mapped, "stats.mapped == pm_stats.mapped");
  check(read_size("stats.retained") == s.retained, "stats.retained == pm_stats.retained");
  const size_t resident = read_size("stats.resident");
  check(resident >= s.active && resident <= s.mapped, "active <= stats.resident <= mapped");
  free(big);

  /* bad uses: unknown name, wrong length, writing a read-only name */
  size_t value = 0;
  length = sizeof value;
  check(mallctl("stats.no_such_thing", &value, &length, NULL, 0) == ENOENT, "unknown: ENOENT");
  check(mallctl("opt.no_such_option", &value, &length, NULL, 0) == ENOENT, "unknown: ENOENT");
  uint32_t narrow = 0;
  length = sizeof narrow;
  check(mallctl("stats.allocated", &narrow, &length, NULL, 0) == EINVAL, "short read: EINVAL");
  length = sizeof value;
  check(mallctl("stats.allocated", &value, &length, &value, sizeof value) == EPERM,
        "writing stats.allocated: EPERM");

  /* arenas */
  unsigned narenas = 0;
  long pm_narenas = 0;
  length = sizeof narenas;
  pm_ctl("narenas", &pm_narenas, NULL);
  check(
      mallctl("arenas.narenas", &narenas, &length, NULL, 0) == 0 && narenas == (unsigned)pm_narenas,
      "arenas.narenas == pm_ctl(narenas)");
  check(read_size("arenas.page") == 4096, "arenas.page");
  unsigned arena = 0;
  length = sizeof arena;
  check(mallctl("arenas.create", &arena, &length, NULL, 0) == 0 && arena != 0, "arenas.create");
  for (int i = 0; i < 100; ++i) check(mallocx(64, MALLOCX_ARENA(arena)) != NULL, "arena block");
  pm_arena_stats arena_stats;
  check(pm_arena_stats_get(arena, &arena_stats) == 0 && arena_stats.blocks == 100,
        "mallocx(MALLOCX_ARENA) allocates from the created arena");
  char name[64];
  snprintf(name, sizeof name, "arena.%u.reset", arena);
  check(mallctl(name, NULL, NULL, NULL, 0) == 0, "arena.<i>.reset");
  check(pm_arena_stats_get(arena, &arena_stats) == 0 && arena_stats.blocks == 0,
        "arena.<i>.reset frees the blocks");
  snprintf(name, sizeof name, "arena.%u.purge", narenas);
  check(mallctl(name, NULL, NULL, NULL, 0) == 0, "arena.<all>.purge");
  snprintf(name, sizeof name, "arena.%u.destroy", arena);
  check(mallctl(name, NULL, NULL, NULL, 0) == 0, "arena.<i>.destroy");
  check(mallctl(name, NULL, NULL, NULL, 0) == EINVAL, "arena.<i>.destroy twice: EINVAL");
  check(mallctl("thread.tcache.flush", NULL, NULL, NULL, 0) == 0, "thread.tcache.flush");

  /* the *allocx calls */
  char* p = mallocx(100, MALLOCX_LG_ALIGN(6) | MALLOCX_ZERO | MALLOCX_TCACHE_NONE);
  check(p != NULL && (uintptr_t)p % 64 == 0 && p[99] == 0, "mallocx(align 64, zero)");
  check(sallocx(p, 0) == nallocx(100, MALLOCX_LG_ALIGN(6)), "sallocx == nallocx");
  check(sallocx(p, 0) == pm_malloc_usable_size(p), "sallocx == pm_malloc_usable_size");
  p = rallocx(p, 200000, 0);
  check(p != NULL && p[0] == 0 && sallocx(p, 0) >= 200000, "rallocx grows, keeps the bytes");
  check(xallocx(p, 100000, 0, 0) >= 100000, "xallocx");
  sdallocx(p, sallocx(p, 0), 0);
  dallocx(mallocx(10, 0), 0);

  /* malloc_stats_print */
  malloc_stats_print(collect, NULL, NULL);
  check(strstr(printed, "pagemalloc statistics") != NULL, "malloc_stats_print: text");
  printed[0] = '\0';
  malloc_stats_print(collect, NULL, "J");
  check(printed[0] == '{' && strstr(printed, "\"allocated\"") != NULL, "malloc_stats_print: JSON");

  if (failures != 0) return 1;
  printf("ok: mallctl, the *allocx calls and malloc_stats_print are pagemalloc's (%s)\n", version);
  return 0;
}
