/* burst_then_small.c: a burst of large allocations, all freed, then a long stretch of small
 * calls (or of sleep): does the allocator give the burst's pages back while the program runs
 * on, within about its decay time?
 *
 *   burst_then_small [burst_mib=200] [seconds=13] [idle=0] [pairs=0] [sample_ms=100] [seed=1]
 *
 * The burst allocates blocks of random sizes from 4 KiB to 256 KiB, writing every page, until
 * burst_mib MiB are live, checks and frees them all. Then for `seconds` seconds it either
 * makes small calls (idle=0: malloc and free of 16-512 bytes over a working set of 1,000
 * blocks, checked), or only calls a thread cache serves (pairs=1: a thousand malloc and free
 * pairs of 16 to 2,015 bytes, one more each call, each block written through a volatile
 * pointer so that the compiler keeps the calls, then a 1 ms sleep), or sleeps (idle=1). It
 * samples its own resident size every sample_ms
 * milliseconds from the start and prints the curve, one line per sample:
 *
 *   sample <ms since the start> <resident KiB> <phase: burst|after>
 *
 * and then `burst_end_ms` (when the burst was freed), `burst_kib` (resident with the whole
 * burst live), `peak_kib` and `last_kib` (the largest and the last sample) and "all checked". */
#include "memory_support.h"

enum { kWorkingSet = 1000 };

struct sampler {
  uint64_t start_ms, next_ms, every_ms, peak_kib, last_kib;
};

static void sample_if_due(struct sampler* s, const char* phase) {
  const uint64_t now = now_ms();
  if (now < s->next_ms) return;
  const uint64_t kib = resident_kib();
  printf("sample %llu %llu %s\n", (unsigned long long)(now - s->start_ms), (unsigned long long)kib,
         phase);
  if (kib > s->peak_kib) s->peak_kib = kib;
  s->last_kib = kib;
  while (s->next_ms <= now) s->next_ms += s->every_ms;
}

int main(int argc, char** argv) {
  struct parameter p[] = {
      {"burst_mib", 200, 1, 1 << 16, "MiB live at the end of the burst"},
      {"seconds", 13, 1, 3600, "length of the stretch after the burst"},
      {"idle", 0, 0, 1, "1: sleep after the burst instead of small calls"},
      {"pairs", 0, 0, 1, "1: malloc and free pairs after the burst, a 1 ms sleep a thousand"},
      {"sample_ms", 100, 1, 60000, "resident size sampled every this many ms"},
      {"seed", 1, 0, UINT64_MAX, "random sequence"},
  };
  const int n = PARAMETER_COUNT(p);
  read_arguments(argc, argv, "a burst of large blocks, freed, then small calls or sleep", p, n);
  const uint64_t burst = parameter(p, n, "burst_mib") << 20;
  const uint64_t seconds = parameter(p, n, "seconds");
  const int idle = (int)parameter(p, n, "idle");
  const int pairs = (int)parameter(p, n, "pairs");
  struct random_state r = random_seeded(parameter(p, n, "seed"));
  struct sampler s = {now_ms(), 0, parameter(p, n, "sample_ms"), 0, 0};
  s.next_ms = s.start_ms;

  /* The burst: blocks chained through their first word, every page written. */
  void* chain = NULL;
  uint64_t live = 0, count = 0;
  while (live < burst) {
    const size_t size = (size_t)random_between(&r, 4096, 256 * 1024) & ~(size_t)7;
    unsigned char* b = checked_malloc(size);
    for (size_t at = 16; at < size; at += 4096) b[at] = (unsigned char)(count + at);
    memcpy(b, &chain, sizeof chain);
    ((size_t*)b)[1] = size;
    chain = b;
    live += size;
    ++count;
    sample_if_due(&s, "burst");
  }
  const uint64_t burst_kib = resident_kib();
  uint64_t freed = 0;
  while (chain != NULL) {
    unsigned char* b = chain;
    const size_t size = ((size_t*)b)[1];
    memcpy(&chain, b, sizeof chain);
    ++freed;
    if (b[size - 1 - (size - 17) % 4096] !=
        (unsigned char)(count - freed + size - 1 - (size - 17) % 4096))
      fail("burst block %llu changed", (unsigned long long)(count - freed));
    free(b);
  }
  const uint64_t burst_end = now_ms() - s.start_ms;

  /* The stretch after it. */
  void* set[kWorkingSet] = {0};
  size_t sizes[kWorkingSet] = {0};
  const uint64_t stop = now_ms() + seconds * 1000;
  uint64_t calls = 0;
  s.next_ms = now_ms();
  while (now_ms() < stop) {
    if (idle) {
      sample_if_due(&s, "after");
      usleep(10000);
      continue;
    }
    if (pairs) {
      static size_t pair_size = 16;
      for (int k = 0; k < 1000; ++k) {
        unsigned char* volatile block = checked_malloc(pair_size);
        block[0] = (unsigned char)pair_size;
        free(block);
        pair_size = pair_size >= 2015 ? 16 : pair_size + 1;
        ++calls;
      }
      usleep(1000);
      sample_if_due(&s, "after");
      continue;
    }
    for (int k = 0; k < 1000; ++k) {
      const unsigned slot = (unsigned)random_between(&r, 0, kWorkingSet - 1);
      if (set[slot] != NULL) {
        if (((unsigned char*)set[slot])[sizes[slot] - 1] != (unsigned char)sizes[slot])
          fail("small block of %zu bytes changed", sizes[slot]);
        free(set[slot]);
      }
      sizes[slot] = (size_t)random_between(&r, 16, 512);
      set[slot] = checked_malloc(sizes[slot]);
      ((unsigned char*)set[slot])[sizes[slot] - 1] = (unsigned char)sizes[slot];
      ++calls;
    }
    sample_if_due(&s, "after");
  }
  for (int k = 0; k < kWorkingSet; ++k) free(set[k]);
  printf(
      "burst_blocks %llu burst_end_ms %llu burst_kib %llu small_calls %llu peak_kib %llu "
      "last_kib %llu\n",
      (unsigned long long)count, (unsigned long long)burst_end, (unsigned long long)burst_kib,
      (unsigned long long)calls, (unsigned long long)s.peak_kib, (unsigned long long)s.last_kib);
  printf("all checked\n");
  return 0;
}
