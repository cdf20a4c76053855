/* glibc_simple.c: fixed-size blocks allocated in batches and freed in batches, the pattern of
 * glibc's malloc-simple benchmark in the small programs of mimalloc-bench (Daan Leijen et al.,
 * https://github.com/daanx/mimalloc-bench). Written for this study; not glibc's code.
 *
 *   glibc_simple [iterations=2000] [seed=1]
 *
 * For every size of 16 B to 4 KiB (powers of two) and every batch of 25, 100, 400 and 1,600
 * blocks: `iterations` times, allocate the batch, write each block's first and last byte,
 * then check and free the batch (in allocation order, then in reverse every other time). */
#include "memory_support.h"

enum { kMostBlocks = 1600 };

int main(int argc, char** argv) {
  struct parameter p[] = {
      {"iterations", 2000, 1, 1ULL << 32, "batches of each size and count"},
      {"seed", 1, 0, UINT64_MAX, "random sequence (unused: the pattern is fixed)"},
  };
  const int n = PARAMETER_COUNT(p);
  read_arguments(argc, argv, "batches of fixed-size blocks (glibc's malloc-simple)", p, n);
  const uint64_t iterations = parameter(p, n, "iterations");
  static unsigned char* block[kMostBlocks];
  static const unsigned batches[] = {25, 100, 400, kMostBlocks};
  uint64_t calls = 0;
  for (size_t size = 16; size <= 4096; size *= 2) {
    for (unsigned b = 0; b < sizeof batches / sizeof batches[0]; ++b) {
      const unsigned count = batches[b];
      for (uint64_t it = 0; it < iterations / (count / 25); ++it) {
        for (unsigned i = 0; i < count; ++i) {
          block[i] = checked_malloc(size);
          block[i][0] = (unsigned char)i;
          block[i][size - 1] = (unsigned char)(i + size);
        }
        for (unsigned k = 0; k < count; ++k) {
          const unsigned i = it % 2 ? count - 1 - k : k;
          if (block[i][0] != (unsigned char)i || block[i][size - 1] != (unsigned char)(i + size))
            fail("block %u of %zu bytes changed", i, size);
          free(block[i]);
        }
        calls += count;
      }
    }
  }
  printf("mallocs %llu\nall checked\n", (unsigned long long)calls);
  return 0;
}
