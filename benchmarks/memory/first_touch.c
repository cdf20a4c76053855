/* first_touch.c: what the first touch of fresh memory costs per 4 KiB page, three ways: a page
 * fault per page; one madvise(MADV_POPULATE_WRITE) over the whole mapping before the touch
 * (what pagemalloc's populate option does for a fresh slab); and one such call per 64 KiB.
 * On a guest of a hypervisor that keeps shadow page tables, a fault costs several times what
 * it does on bare metal, and populating saves part of it (docs/measurements.md).
 *
 *   first_touch [mib=64] [rounds=3]
 *
 * Each round maps `mib` MiB for each way (MADV_NOHUGEPAGE: small pages), writes one byte per
 * page, writes them all again (resident by then), checks the bytes and unmaps it. Prints, per
 * way and round, the microseconds per page of the madvise calls, of the first pass and of the
 * second. Calls no malloc: the allocator under it does not matter. */
#include <sys/mman.h>
#include <time.h>

#include "memory_support.h"

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

enum way { FAULT, POPULATE_ALL, POPULATE_64K, WAYS };
static const char* const way_name[WAYS] = {"fault", "populate", "populate_64k"};

int main(int argc, char** argv) {
  struct parameter p[] = {
      {"mib", 64, 1, 4096, "MiB mapped per way and round"},
      {"rounds", 3, 1, 100, "rounds of the three ways"},
  };
  const int n = PARAMETER_COUNT(p);
  read_arguments(argc, argv, "the first touch of fresh pages: faulted, or populated first", p, n);
  const size_t bytes = (size_t)parameter(p, n, "mib") << 20;
  const uint64_t rounds = parameter(p, n, "rounds");
  const size_t page = 4096, pages = bytes / page, piece = (size_t)64 << 10;

  for (uint64_t round = 0; round < rounds; ++round) {
    for (int way = 0; way < WAYS; ++way) {
      unsigned char* m =
          mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
      if (m == MAP_FAILED) fail("mmap of %zu bytes failed", bytes);
      madvise(m, bytes, MADV_NOHUGEPAGE);
      const double t0 = now_s();
      if (way == POPULATE_ALL && madvise(m, bytes, MADV_POPULATE_WRITE) != 0)
        fail("MADV_POPULATE_WRITE refused (Linux 5.14 has it)");
      if (way == POPULATE_64K)
        for (size_t at = 0; at < bytes; at += piece)
          if (madvise(m + at, piece, MADV_POPULATE_WRITE) != 0)
            fail("MADV_POPULATE_WRITE refused (Linux 5.14 has it)");
      const double t1 = now_s();
      for (size_t i = 0; i < pages; ++i) m[i * page] = (unsigned char)(i + 1);
      const double t2 = now_s();
      for (size_t i = 0; i < pages; ++i) m[i * page] += 1;
      const double t3 = now_s();
      for (size_t i = 0; i < pages; ++i)
        if (m[i * page] != (unsigned char)(i + 2)) fail("page %zu lost its byte", i);
      munmap(m, bytes);
      printf(
          "round %llu %-12s madvise_us_per_page %.2f first_touch_us_per_page %.2f "
          "second_touch_us_per_page %.3f\n",
          (unsigned long long)round, way_name[way], (t1 - t0) * 1e6 / (double)pages,
          (t2 - t1) * 1e6 / (double)pages, (t3 - t2) * 1e6 / (double)pages);
    }
  }
  printf("all checked\n");
  return 0;
}
