/* A C program's bump arena through pm_arena_bump_inline and pm_arena_bump_free_inline, the
 * header's inline paths (C99, -pedantic): 10,000 blocks of 0 to 700 bytes over several spans,
 * each written and then read back, every one 16-byte aligned; every third freed soon after it
 * is bumped (inline while it lies in the cursor's span); the rest counted by
 * pm_arena_stats_get after pm_arena_bump_flush, and again after a reset. Prints "ok: ..." and
 * exits 0, or names what failed and exits 1. */
#include <pagemalloc/pagemalloc.h>

#include <stdint.h>
#include <stdio.h>
#include <string.h>

enum { kBlocks = 10000, kFreeLag = 4 };

static int failures = 0;

static void check(int ok, const char* what) {
  if (!ok) {
    fprintf(stderr, "FAIL: %s\n", what);
    ++failures;
  }
}

static size_t size_of_block(int i) { return (size_t)(i * 37) % 701; }

/* Block i is freed when block i + kFreeLag has been bumped, for every third i. */
static int freed_early(int i) { return i % 3 == 0 && i + kFreeLag < kBlocks; }

/* One round: every block bumped, written with its index, then read back and counted. */
static void round_of_blocks(pm_bump_cursor* cursor, unsigned arena) {
  static unsigned char* blocks[kBlocks];
  for (int i = 0; i < kBlocks; ++i) {
    blocks[i] = pm_arena_bump_inline(cursor, size_of_block(i));
    check(blocks[i] != NULL, "pm_arena_bump_inline returned a block");
    if (blocks[i] == NULL) return;
    check((uintptr_t)blocks[i] % 16 == 0, "a bumped block is 16-byte aligned");
    memset(blocks[i], i & 0xff, size_of_block(i));
    if (i >= kFreeLag && freed_early(i - kFreeLag))
      pm_arena_bump_free_inline(cursor, blocks[i - kFreeLag]);
  }
  int live = 0;
  for (int i = 0; i < kBlocks; ++i) {
    if (freed_early(i)) continue;
    ++live;
    for (size_t b = 0; b < size_of_block(i); ++b)
      if (blocks[i][b] != (unsigned char)(i & 0xff)) {
        check(0, "a block keeps its bytes (no two blocks overlap)");
        return;
      }
  }
  pm_arena_bump_flush(cursor);
  pm_arena_stats stats;
  check(pm_arena_stats_get(arena, &stats) == 0 && stats.blocks == (size_t)live,
        "pm_arena_stats_get counts every live block after pm_arena_bump_flush");
}

int main(void) {
  unsigned arena = pm_arena_create_ex(PM_ARENA_BUMP);
  check(arena != 0, "pm_arena_create_ex(PM_ARENA_BUMP)");
  pm_bump_cursor cursor;
  memset(&cursor, 0, sizeof cursor);
  cursor.arena = arena;
  round_of_blocks(&cursor, arena);
  check(pm_arena_reset(arena) == 0, "pm_arena_reset");
  cursor.next = cursor.end = cursor.begin = NULL; /* as pagemalloc.h asks after a reset */
  cursor.blocks = cursor.skipped = 0;
  round_of_blocks(&cursor, arena);
  pm_bump_cursor none;
  memset(&none, 0, sizeof none);
  none.arena = 4000;
  check(pm_arena_bump_inline(&none, 16) == NULL, "a cursor of no bump arena gets NULL");
  check(pm_arena_destroy(arena) == 0, "pm_arena_destroy");
  if (failures == 0) printf("ok: %d blocks bumped inline in each of two rounds\n", kBlocks);
  return failures == 0 ? 0 : 1;
}
