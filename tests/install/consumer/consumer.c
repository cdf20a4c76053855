/* A C program on the installed pagemalloc, built by tests/install/install_test.sh through
 * find_package and through pkg-config.
 *
 *   consumer VERSION dropin|core
 *
 * Checks that the header's version macros and pm_version() both equal VERSION (the project's
 * version), that the pm_ API works (an aligned block, an explicit arena, the statistics) and,
 * with "dropin", that the program's own malloc is pagemalloc's. Prints one line, exits 0 when
 * every check holds. */
#include <pagemalloc/pagemalloc.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int failures = 0;

static void check(int ok, const char* what) {
  if (!ok) {
    fprintf(stderr, "FAIL: %s\n", what);
    ++failures;
  }
}

int main(int argc, char** argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: %s VERSION dropin|core\n", argv[0]);
    return 2;
  }
  char header_version[32];
  snprintf(header_version, sizeof header_version, "%d.%d.%d", PAGEMALLOC_VERSION_MAJOR,
           PAGEMALLOC_VERSION_MINOR, PAGEMALLOC_VERSION_PATCH);
  check(strcmp(header_version, argv[1]) == 0, "PAGEMALLOC_VERSION_* differ from the project's");
  check(strcmp(PAGEMALLOC_VERSION_STRING, argv[1]) == 0, "PAGEMALLOC_VERSION_STRING differs");
  check(strcmp(pm_version(), argv[1]) == 0, "pm_version() differs from the project's version");

  char* block = pm_mallocx(100000, PM_ALIGN(64) | PM_ZERO);
  check(block != NULL && (uintptr_t)block % 64 == 0, "pm_mallocx(PM_ALIGN(64))");
  check(block != NULL && block[99999] == 0, "PM_ZERO");
  pm_stats stats;
  pm_stats_get(&stats);
  check(stats.allocated >= 100000, "pm_stats_get counts the block");
  pm_dallocx(block, 0);

  unsigned arena = pm_arena_create();
  check(arena != 0, "pm_arena_create");
  for (int i = 0; i < 1000; ++i) check(pm_mallocx(48, PM_ARENA(arena)) != NULL, "arena block");
  pm_arena_stats arena_stats;
  check(pm_arena_stats_get(arena, &arena_stats) == 0 && arena_stats.blocks == 1000,
        "the arena holds 1000 blocks");
  check(pm_arena_reset(arena) == 0, "pm_arena_reset");
  check(pm_arena_stats_get(arena, &arena_stats) == 0 && arena_stats.blocks == 0,
        "the reset freed every block");
  check(pm_arena_destroy(arena) == 0, "pm_arena_destroy");

  if (strcmp(argv[2], "dropin") == 0) {
    /* Linked with libpagemalloc.so, the program's malloc is pagemalloc's: pm_ calls know it. */
    void* p = malloc(1000);
    check(p != NULL && pm_malloc_usable_size(p) >= 1000, "malloc is pagemalloc's");
    free(p);
  }
  if (failures != 0) return 1;
  printf("ok: pagemalloc %s (%s)\n", pm_version(), argv[2]);
  return 0;
}
