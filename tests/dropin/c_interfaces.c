/* The drop-in's C interfaces beyond malloc, for tests/dropin/c_interfaces.sh, linked with the
 * library under test.
 *
 *   c_interfaces sized      free_sized and free_aligned_sized free what they are given
 *   c_interfaces mismatch   free_sized with a wrong size (run with checks:true: must abort)
 *   c_interfaces mallinfo   mallinfo2 and mallinfo report pagemalloc's statistics
 *   c_interfaces reports    malloc_stats and malloc_info report them too (malloc_stats's text
 *                           goes to stderr, with pm_stats's allocated and mapped printed
 *                           before it to stdout, for the script to compare)
 *   c_interfaces trim       malloc_trim(0) returns freed pages to the OS (pm_purge)
 *   c_interfaces libc_names glibc's __libc_malloc and its kin are pagemalloc's: blocks from
 *                           either name are pagemalloc's blocks, freed by either
 *   c_interfaces narenas    prints pm_ctl("narenas")
 *   c_interfaces exit       allocates, closes stderr and exits (statistics at exit)
 *
 * Prints "ok: ..." and exits 0 when every check holds; names the failed check otherwise. */
#include <pagemalloc/pagemalloc.h>

#include <errno.h>
#include <malloc.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* glibc exports these without declaring them. */
void* __libc_malloc(size_t size);
void __libc_free(void* p);
void* __libc_calloc(size_t count, size_t size);
void* __libc_realloc(void* p, size_t size);
void* __libc_memalign(size_t alignment, size_t size);
void* __libc_valloc(size_t size);
void* __libc_pvalloc(size_t size);

/* C23 (glibc 2.43); Debian 12's headers do not declare them. */
void free_sized(void* p, size_t size);
void free_aligned_sized(void* p, size_t alignment, size_t size);

static int failures = 0;

static void check(int ok, const char* what) {
  if (!ok) {
    fprintf(stderr, "FAIL: %s\n", what);
    ++failures;
  }
}

static size_t allocated(void) {
  pm_stats s;
  pm_stats_get(&s);
  return s.allocated;
}

static void check_sized_frees(void) {
  enum { kBlocks = 2000 };
  static void* blocks[kBlocks];
  static size_t sizes[kBlocks];
  for (int i = 0; i < kBlocks; ++i) {
    sizes[i] = 1 + (size_t)i * 97 % 70000; /* small and large */
    blocks[i] = i % 2 ? malloc(sizes[i]) : aligned_alloc(64, sizes[i]);
    check(blocks[i] != NULL, "malloc / aligned_alloc");
    memset(blocks[i], 1, sizes[i]);
  }
  for (int i = 0; i < kBlocks; ++i) {
    if (i % 2) free_sized(blocks[i], sizes[i]);
    else free_aligned_sized(blocks[i], 64, sizes[i]);
  }
  /* A large block is not cached: the statistics see its free at once. */
  const size_t before = allocated();
  void* big = malloc(1 << 20);
  check(allocated() >= before + (1 << 20), "a 1 MiB block is counted");
  free_sized(big, 1 << 20);
  check(allocated() <= before, "free_sized of the 1 MiB block frees it");
  void* aligned = aligned_alloc(4096, 3 << 20); /* huge */
  check(aligned != NULL && (uintptr_t)aligned % 4096 == 0, "aligned_alloc(4096, 3 MiB)");
  free_aligned_sized(aligned, 4096, 3 << 20);
  check(allocated() <= before, "free_aligned_sized of the 3 MiB block frees it");
  free_sized(NULL, 10);
  free_aligned_sized(NULL, 64, 10);
  if (failures == 0) printf("ok: %d blocks freed by free_sized and free_aligned_sized\n", kBlocks);
}

static void check_mallinfo2(void) {
  const struct mallinfo2 before = mallinfo2();
  char* p = malloc(8 << 20);
  check(p != NULL, "malloc(8 MiB)");
  memset(p, 1, 8 << 20);
  const struct mallinfo2 during = mallinfo2();
  check(during.uordblks >= before.uordblks + (8 << 20), "uordblks counts the 8 MiB block");
  check(during.arena >= during.uordblks, "arena (mapped) >= uordblks (allocated)");
  pm_stats s;
  pm_stats_get(&s);
  const struct mallinfo2 now = mallinfo2();
  check(now.uordblks == s.allocated, "uordblks == pm_stats.allocated");
  check(now.arena == s.mapped, "arena == pm_stats.mapped");
  check(now.fordblks == s.mapped - s.allocated, "fordblks == mapped - allocated");
  /* mallinfo's fields are int: the same totals while they fit. */
  pm_stats_get(&s);
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations" /* still called by programs */
  const struct mallinfo narrow = mallinfo();
#pragma GCC diagnostic pop
  check(narrow.uordblks == (int)s.allocated, "mallinfo's uordblks == pm_stats.allocated");
  check(narrow.arena == (int)s.mapped, "mallinfo's arena == pm_stats.mapped");
  check(narrow.hblkhd == 0 && narrow.ordblks == 0, "mallinfo's other counts are 0");
  free(p);
  if (failures == 0)
    printf("ok: mallinfo2 and mallinfo uordblks %zu, arena %zu\n", now.uordblks, now.arena);
}

/* The number after `key` in text, or -1. */
static long long number_after(const char* text, const char* key) {
  const char* at = strstr(text, key);
  return at == NULL ? -1 : strtoll(at + strlen(key), NULL, 10);
}

static void check_reports(void) {
  printf("reports\n"); /* stdout's buffer, allocated before the statistics are read */
  char* kept = malloc(3 << 20);
  check(kept != NULL, "malloc(3 MiB)");
  memset(kept, 1, 3 << 20);
  check(malloc_info(1, stdout) == EINVAL, "malloc_info with options 1 returns EINVAL");
  FILE* xml = tmpfile();
  check(xml != NULL, "tmpfile");
  if (xml == NULL) return;
  fputc(' ', xml); /* the stream's buffer, allocated before the statistics are read */
  rewind(xml);
  pm_stats before, after;
  pm_stats_get(&before);
  check(malloc_info(0, xml) == 0, "malloc_info(0, stream) returns 0");
  pm_stats_get(&after);
  static char text[4096];
  rewind(xml);
  const size_t n = fread(text, 1, sizeof(text) - 1, xml);
  text[n] = '\0';
  fclose(xml);
  check(strncmp(text, "<malloc version=\"1\">\n", 20) == 0, "malloc_info starts <malloc>");
  check(n > 10 && strcmp(text + n - 10, "</malloc>\n") == 0, "malloc_info ends </malloc>");
  const long long current = number_after(text, "<system type=\"current\" size=\"");
  check(current >= (long long)before.mapped && current <= (long long)after.mapped,
        "malloc_info's current system size is pm_stats.mapped");
  /* malloc_stats: its text to stderr, the statistics read just before to stdout. */
  fflush(stdout);
  pm_stats now;
  pm_stats_get(&now);
  printf("allocated %zu mapped %zu\n", now.allocated, now.mapped);
  fflush(stdout);
  malloc_stats();
  free(kept);
}

static void check_malloc_trim(void) {
  long decay = -1; /* nothing goes back unless malloc_trim returns it */
  check(pm_ctl("decay_ms", NULL, &decay) == 0, "pm_ctl(decay_ms, -1)");
  /* Above the medium classes, which a thread's cache keeps as live blocks: */
  enum { kBlocks = 64, kBlock = 1536 << 10 };
  char* blocks[kBlocks];
  for (int i = 0; i < kBlocks; ++i) {
    blocks[i] = malloc(kBlock);
    check(blocks[i] != NULL, "malloc(1.5 MiB)");
    memset(blocks[i], 1, kBlock);
  }
  for (int i = 0; i < kBlocks; ++i) free(blocks[i]);
  pm_stats before, after;
  pm_stats_get(&before);
  check(before.dirty >= (size_t)kBlocks * kBlock, "the freed blocks' pages are dirty");
  check(malloc_trim(0) == 1, "malloc_trim(0) returns 1 when pages went back");
  pm_stats_get(&after);
  check(after.purged >= before.purged + (size_t)kBlocks * kBlock, "malloc_trim purged them");
  check(after.dirty < before.dirty, "fewer dirty bytes after malloc_trim");
  check(malloc_trim(0) == 0, "a second malloc_trim(0), with nothing to return, returns 0");
  if (failures == 0)
    printf("ok: malloc_trim returned %zu dirty bytes\n", before.dirty - after.dirty);
}

/* A block of at least `size` bytes that pagemalloc knows (pm_malloc_usable_size reports
 * misuse of any other pointer). */
static void check_ours(void* p, size_t size, const char* what) {
  check(p != NULL && pm_malloc_usable_size(p) >= size, what);
}

static void check_libc_names(void) {
  char* a = __libc_malloc(100);
  check_ours(a, 100, "__libc_malloc(100) is pagemalloc's");
  memset(a, 7, 100);
  a = __libc_realloc(a, 100000);
  check_ours(a, 100000, "__libc_realloc(p, 100000) is pagemalloc's");
  check(a[0] == 7 && a[99] == 7, "__libc_realloc keeps the bytes");
  free(a);
  unsigned char* z = __libc_calloc(1000, 10);
  check_ours(z, 10000, "__libc_calloc(1000, 10) is pagemalloc's");
  int zero = 1;
  for (int i = 0; i < 10000; ++i) zero &= z[i] == 0;
  check(zero, "__libc_calloc's block reads zero");
  __libc_free(z);
  void* m = __libc_memalign(256, 300);
  check_ours(m, 300, "__libc_memalign(256, 300) is pagemalloc's");
  check((uintptr_t)m % 256 == 0, "__libc_memalign aligns");
  void* v = __libc_valloc(5000);
  check_ours(v, 5000, "__libc_valloc(5000) is pagemalloc's");
  check((uintptr_t)v % 4096 == 0, "__libc_valloc aligns to the page");
  void* pv = __libc_pvalloc(5000);
  check_ours(pv, 8192, "__libc_pvalloc(5000) is pagemalloc's, two pages");
  __libc_free(m);
  __libc_free(v);
  free(pv);
  void* b = malloc(50);
  __libc_free(b);
  __libc_free(NULL);
  if (failures == 0) printf("ok: __libc_malloc and its kin are pagemalloc's\n");
}

int main(int argc, char** argv) {
  const char* mode = argc > 1 ? argv[1] : "";
  if (strcmp(mode, "sized") == 0) {
    check_sized_frees();
  } else if (strcmp(mode, "mismatch") == 0) {
    void* p = malloc(100);
    free_sized(p, 5000);
    printf("free_sized with a wrong size returned\n");
  } else if (strcmp(mode, "mallinfo") == 0) {
    check_mallinfo2();
  } else if (strcmp(mode, "reports") == 0) {
    check_reports();
  } else if (strcmp(mode, "libc_names") == 0) {
    check_libc_names();
  } else if (strcmp(mode, "trim") == 0) {
    check_malloc_trim();
  } else if (strcmp(mode, "narenas") == 0) {
    long n = 0;
    check(pm_ctl("narenas", &n, NULL) == 0, "pm_ctl(narenas)");
    printf("%ld\n", n);
  } else if (strcmp(mode, "exit") == 0) {
    void* kept = malloc(123456);
    check(kept != NULL, "malloc");
    close(STDERR_FILENO);
  } else {
    fprintf(stderr, "usage: %s sized|mismatch|mallinfo|reports|trim|libc_names|narenas|exit\n",
            argv[0]);
    return 2;
  }
  return failures == 0 ? 0 : 1;
}
