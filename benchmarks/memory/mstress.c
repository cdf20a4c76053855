/* mstress.c: server-like allocation by several threads in phases, the pattern of mstress
 * (mimalloc's test-stress) in the small programs of mimalloc-bench (Daan Leijen et al.,
 * https://github.com/daanx/mimalloc-bench). Written for this study; not mimalloc's code.
 *
 *   mstress [threads=4] [phases=10] [steps=30000] [slots=2000] [seed=1]
 *
 * In each phase `threads` threads run over one shared table of `slots` slots per thread:
 * each step allocates a block of a power-of-two-like size (mostly 16 B-1 KiB, one in 100 up
 * to 64 KiB, one in 10,000 up to 1 MiB) into a random slot, freeing (after checking) the block
 * there, which another thread may have allocated; one in 8 steps frees a slot without
 * refilling it. After each phase the threads end and new ones start; a tenth of the slots
 * survive into the next phase, the rest are freed by the main thread. */
#include <pthread.h>
#include <stdatomic.h>

#include "memory_support.h"

struct slot {
  _Atomic(unsigned char*) block;
};

struct shared {
  struct slot* slot;
  uint64_t slots, steps;
};

struct worker {
  pthread_t thread;
  struct shared* shared;
  uint64_t seed;
};

static size_t stress_size(struct random_state* r) {
  const uint64_t dice = random_next(r) % 10000;
  const size_t most = dice == 0 ? 1 << 20 : dice < 100 ? 64 << 10 : 1024;
  size_t size = 16; /* room for the size word and the check byte */
  while (size < most && random_next(r) % 3 != 0) size *= 2;
  return size + (size_t)random_between(r, 0, size / 4);
}

/* A block records its size in its first word and a check byte at its end. */
static unsigned char* stress_block(size_t size) {
  unsigned char* b = checked_malloc(size);
  memcpy(b, &size, sizeof size);
  b[size - 1] = (unsigned char)(size * 7);
  return b;
}

static void stress_free(unsigned char* b) {
  if (b == NULL) return;
  size_t size;
  memcpy(&size, b, sizeof size);
  if (b[size - 1] != (unsigned char)(size * 7)) fail("a block of %zu bytes changed", size);
  free(b);
}

static void* work(void* argument) {
  struct worker* w = argument;
  struct random_state r = random_seeded(w->seed);
  struct shared* s = w->shared;
  for (uint64_t i = 0; i < s->steps; ++i) {
    struct slot* at = &s->slot[random_between(&r, 0, s->slots - 1)];
    unsigned char* fresh = random_next(&r) % 8 == 0 ? NULL : stress_block(stress_size(&r));
    stress_free(atomic_exchange(&at->block, fresh));
  }
  return NULL;
}

int main(int argc, char** argv) {
  struct parameter p[] = {
      {"threads", 4, 1, 256, "threads per phase"},
      {"phases", 10, 1, 1 << 20, "phases (threads end and new ones start)"},
      {"steps", 30000, 1, 1ULL << 32, "steps of each thread per phase"},
      {"slots", 2000, 1, 1 << 24, "slots of the shared table, per thread"},
      {"seed", 1, 0, UINT64_MAX, "random sequence"},
  };
  const int n = PARAMETER_COUNT(p);
  read_arguments(argc, argv, "threads in phases sharing blocks (mstress's pattern)", p, n);
  const unsigned threads = (unsigned)parameter(p, n, "threads");
  const uint64_t phases = parameter(p, n, "phases");
  struct shared s = {NULL, parameter(p, n, "slots") * threads, parameter(p, n, "steps")};
  s.slot = checked_malloc(s.slots * sizeof *s.slot);
  for (uint64_t i = 0; i < s.slots; ++i) atomic_init(&s.slot[i].block, NULL);
  struct worker* w = checked_malloc(threads * sizeof *w);
  struct random_state r = random_seeded(parameter(p, n, "seed"));
  for (uint64_t phase = 0; phase < phases; ++phase) {
    for (unsigned t = 0; t < threads; ++t) {
      w[t].shared = &s;
      w[t].seed = parameter(p, n, "seed") * 1000003 + phase * 257 + t;
      if (pthread_create(&w[t].thread, NULL, work, &w[t]) != 0) fail("pthread_create");
    }
    for (unsigned t = 0; t < threads; ++t) pthread_join(w[t].thread, NULL);
    for (uint64_t i = 0; i < s.slots; ++i)
      if (random_next(&r) % 10 != 0) stress_free(atomic_exchange(&s.slot[i].block, NULL));
  }
  for (uint64_t i = 0; i < s.slots; ++i) stress_free(atomic_exchange(&s.slot[i].block, NULL));
  free(s.slot);
  free(w);
  printf("threads %u phases %llu\nall checked\n", threads, (unsigned long long)phases);
  return 0;
}
