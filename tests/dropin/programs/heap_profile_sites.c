/* heap_profile_sites.c: allocations of known sizes at known call sites, for the heap profile
 * test (tests/dropin/heap_profile.sh). Each site_* function allocates directly (its frame is
 * the innermost of the block's stack); the program prints, per site, the blocks it left live
 * and their size and the blocks it allocated in all, then asks for a profile (pm_prof_dump,
 * found at run time, to the path given) and exits with the blocks still live.
 *
 *   heap_profile_sites PROFILE_PATH
 *   heap_profile_sites -            (no profile asked for: under another profiler)
 *
 * Sizes are sizes of pagemalloc's classes (64 B, 256 B, 512 B, 2 KiB, 96 KiB, 8 MiB), so that
 * the bytes a sample counts are the bytes asked for. Two sites run on threads of their own,
 * one block in ten of another is freed on the way, realloc grows a site's blocks (a moved
 * block is a new sample), and a thousand blocks of 1 KiB are allocated and freed in turn. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void fail(const char* what) {
  fprintf(stderr, "heap_profile_sites: %s\n", what);
  exit(1);
}

struct site {
  const char* name;
  size_t size, live, allocated; /* blocks; allocated 0: of several sizes, not counted here */
};
static struct site sites[16];
static int site_count;
static void report(const char* name, size_t size, size_t live, size_t allocated) {
  sites[site_count++] = (struct site){name, size, live, allocated};
}

static void* checked(void* p) {
  if (p == NULL) fail("out of memory");
  return p;
}

enum {
  kSmall = 200000,
  kThreadBlocks = 100000,
  kMedium = 300,
  kHuge = 6,
  kGrown = 20000,
  kZeroed = 50000,
  kChurn = 100000
};
static void* small_blocks[kSmall];
static void* thread_blocks[2][kThreadBlocks];
static void* medium_blocks[kMedium];
static void* huge_blocks[kHuge];
static void* grown_blocks[kGrown];
static void* zeroed_blocks[kZeroed];

__attribute__((noinline)) void site_small(void) {
  for (int i = 0; i < kSmall; ++i) {
    small_blocks[i] = checked(malloc(64));
    memset(small_blocks[i], 1, 64);
  }
  /* One in ten freed. */
  for (int i = 0; i < kSmall; i += 10) free(small_blocks[i]), small_blocks[i] = NULL;
}

__attribute__((noinline)) void* site_thread(void* argument) {
  void** blocks = argument;
  for (int i = 0; i < kThreadBlocks; ++i) {
    blocks[i] = checked(malloc(256));
    memset(blocks[i], 2, 256);
  }
  return NULL;
}

__attribute__((noinline)) void site_medium(void) {
  for (int i = 0; i < kMedium; ++i) {
    medium_blocks[i] = checked(malloc(96 * 1024));
    memset(medium_blocks[i], 3, 4096);
  }
}

__attribute__((noinline)) void site_huge(void) {
  for (int i = 0; i < kHuge; ++i) {
    huge_blocks[i] = checked(malloc(8 << 20));
    memset(huge_blocks[i], 4, 4096);
  }
}

__attribute__((noinline)) void site_grown(void) {
  for (int i = 0; i < kGrown; ++i) {
    char* p = checked(malloc(16));
    for (size_t size = 64; size <= 2048; size *= 2) p = checked(realloc(p, size));
    p[2047] = 5;
    grown_blocks[i] = p;
  }
}

__attribute__((noinline)) void site_zeroed(void) {
  for (int i = 0; i < kZeroed; ++i) {
    unsigned char* p = checked(calloc(1, 512));
    if (p[0] != 0 || p[511] != 0) fail("calloc's block does not read zero");
    zeroed_blocks[i] = p;
  }
}

__attribute__((noinline)) void site_churn(void) {
  for (int i = 0; i < kChurn; ++i) {
    char* volatile p = checked(malloc(1024));
    p[0] = 6;
    free(p);
  }
}

int main(int argc, char** argv) {
  if (argc != 2) fail("usage: heap_profile_sites PROFILE_PATH");
  const int asked = strcmp(argv[1], "-") != 0;
  int (*dump)(const char*) = (int (*)(const char*))dlsym(RTLD_DEFAULT, "pm_prof_dump");
  if (asked && dump == NULL) fail("pm_prof_dump not found: run under LD_PRELOAD=libpagemalloc.so");
  site_small();
  report("site_small", 64, kSmall - kSmall / 10, kSmall);
  pthread_t threads[2];
  for (int t = 0; t < 2; ++t)
    if (pthread_create(&threads[t], NULL, site_thread, thread_blocks[t]) != 0)
      fail("pthread_create");
  for (int t = 0; t < 2; ++t) pthread_join(threads[t], NULL);
  report("site_thread", 256, 2 * kThreadBlocks, 2 * kThreadBlocks);
  site_medium();
  report("site_medium", 96 * 1024, kMedium, kMedium);
  site_huge();
  report("site_huge", 8 << 20, kHuge, kHuge);
  site_grown();
  report("site_grown", 2048, kGrown, 0); /* (its smaller steps were allocated too) */
  site_zeroed();
  report("site_zeroed", 512, kZeroed, kZeroed);
  site_churn();
  report("site_churn", 1024, 0, kChurn);
  const int error = asked ? dump(argv[1]) : 0;
  if (error != 0) {
    fprintf(stderr, "heap_profile_sites: pm_prof_dump: error %d\n", error);
    return 1;
  }
  for (int i = 0; i < site_count; ++i)
    if (sites[i].allocated == 0)
      printf("%s %zu %zu -\n", sites[i].name, sites[i].size, sites[i].live);
    else
      printf("%s %zu %zu %zu\n", sites[i].name, sites[i].size, sites[i].live, sites[i].allocated);
  return 0;
}
