/* mleak.c: short-lived threads, one after another, each allocating and freeing blocks and
 * leaving a few for the main thread to free after it ended: whether an allocator gives back
 * what a finished thread held (its caches) or lets it pile up. The pattern of mleak in the
 * small programs of mimalloc-bench (Daan Leijen et al., https://github.com/daanx/mimalloc-bench),
 * which checks that terminated threads do not "leak" memory. Written for this study; not
 * mimalloc-bench's code.
 *
 *   mleak [rounds=400] [threads=2] [blocks=5000] [seed=1]
 *
 * Each round starts `threads` threads; each allocates `blocks` blocks of 16 B-1 KiB over a
 * working set of 500, freeing as it goes, and hands every block still live when it ends to the
 * main thread, which checks and frees them after joining it. */
#include <pthread.h>

#include "memory_support.h"

enum { kWorkingSet = 500 };

struct worker {
  pthread_t thread;
  uint64_t seed, blocks;
  unsigned char* left[kWorkingSet]; /* handed to the main thread */
  size_t left_size[kWorkingSet];
};

static void* work(void* argument) {
  struct worker* w = argument;
  struct random_state r = random_seeded(w->seed);
  memset(w->left, 0, sizeof w->left);
  for (uint64_t i = 0; i < w->blocks; ++i) {
    const unsigned slot = (unsigned)random_between(&r, 0, kWorkingSet - 1);
    if (w->left[slot] != NULL) {
      if (w->left[slot][w->left_size[slot] - 1] != (unsigned char)w->left_size[slot])
        fail("a block changed in its thread");
      free(w->left[slot]);
    }
    const size_t size = (size_t)random_between(&r, 16, 1024);
    w->left[slot] = checked_malloc(size);
    w->left_size[slot] = size;
    w->left[slot][size - 1] = (unsigned char)size;
  }
  return NULL;
}

int main(int argc, char** argv) {
  struct parameter p[] = {
      {"rounds", 400, 1, 1ULL << 32, "rounds of threads"},
      {"threads", 2, 1, 256, "threads per round"},
      {"blocks", 5000, 1, 1ULL << 32, "blocks each thread allocates"},
      {"seed", 1, 0, UINT64_MAX, "random sequence"},
  };
  const int n = PARAMETER_COUNT(p);
  read_arguments(argc, argv, "short-lived threads leaving blocks behind (mleak's pattern)", p, n);
  const uint64_t rounds = parameter(p, n, "rounds");
  const unsigned threads = (unsigned)parameter(p, n, "threads");
  struct worker* w = checked_malloc(threads * sizeof *w);
  uint64_t freed_after = 0;
  for (uint64_t round = 0; round < rounds; ++round) {
    for (unsigned t = 0; t < threads; ++t) {
      w[t].seed = parameter(p, n, "seed") * 1000003 + round * 257 + t;
      w[t].blocks = parameter(p, n, "blocks");
      if (pthread_create(&w[t].thread, NULL, work, &w[t]) != 0) fail("pthread_create");
    }
    for (unsigned t = 0; t < threads; ++t) {
      pthread_join(w[t].thread, NULL);
      for (unsigned k = 0; k < kWorkingSet; ++k) {
        if (w[t].left[k] == NULL) continue;
        if (w[t].left[k][w[t].left_size[k] - 1] != (unsigned char)w[t].left_size[k])
          fail("a block changed after its thread ended");
        free(w[t].left[k]);
        ++freed_after;
      }
    }
  }
  free(w);
  printf("rounds %llu freed_after_exit %llu\nall checked\n", (unsigned long long)rounds,
         (unsigned long long)freed_after);
  return 0;
}
