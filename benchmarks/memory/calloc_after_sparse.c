/* calloc_after_sparse.c: zeroed blocks carved from memory a freed block touched sparsely. An
 * allocator that keeps a freed block's pages and then clears them for calloc makes pages
 * resident that neither block touched; one that maps the blocks anew does not.
 *
 *   calloc_after_sparse [first_mib=64] [stride_pages=64] [blocks=256] [kib=256] [dense=0]
 *                       [seed=1]
 *
 * Allocates one block of first_mib MiB, writes one byte in every stride_pages pages of it and
 * frees it. Then callocs `blocks` blocks of `kib` KiB, keeping them all live, and checks that
 * 16 random bytes of each read zero; then writes one byte at a random offset of each (dense=1:
 * every byte, the case where clearing resident pages is the cheapest way), checks them and frees
 * every block. Peak RSS and time (measured by the launcher) are the results; the program
 * prints how long the calloc phase took. */
#include "memory_support.h"

#include <string.h>

int main(int argc, char** argv) {
  struct parameter p[] = {
      {"first_mib", 64, 1, 1 << 14, "MiB of the sparsely touched block freed first"},
      {"stride_pages", 64, 1, 1 << 20, "pages between its touched bytes"},
      {"blocks", 256, 1, 1 << 20, "zeroed blocks allocated after it"},
      {"kib", 256, 1, 1 << 20, "size of each, KiB"},
      {"dense", 0, 0, 1, "1: write every byte of each zeroed block"},
      {"seed", 1, 0, UINT64_MAX, "random sequence"},
  };
  const int n = PARAMETER_COUNT(p);
  read_arguments(argc, argv, "zeroed blocks after a sparsely touched freed block", p, n);
  const size_t first = (size_t)parameter(p, n, "first_mib") << 20;
  const size_t stride = (size_t)parameter(p, n, "stride_pages") * 4096;
  const uint64_t blocks = parameter(p, n, "blocks");
  const size_t size = (size_t)parameter(p, n, "kib") * 1024;
  const int dense = (int)parameter(p, n, "dense");
  struct random_state r = random_seeded(parameter(p, n, "seed"));

  unsigned char* sparse = checked_malloc(first);
  for (size_t at = 0; at < first; at += stride) sparse[at] = (unsigned char)(at / stride + 1);
  const uint64_t resident_sparse = resident_kib();
  free(sparse);

  const uint64_t started = now_ms();
  unsigned char** block = checked_malloc(blocks * sizeof *block);
  size_t* offset = checked_malloc(blocks * sizeof *offset);
  for (uint64_t i = 0; i < blocks; ++i) {
    block[i] = calloc(1, size);
    if (block[i] == NULL) fail("calloc(1, %zu) failed", size);
    for (int k = 0; k < 16; ++k) {
      const size_t at = (size_t)random_between(&r, 0, size - 1);
      if (block[i][at] != 0)
        fail("block %llu: byte %zu of a calloc'd block is not zero", (unsigned long long)i, at);
    }
  }
  const uint64_t calloc_ms = now_ms() - started;
  for (uint64_t i = 0; i < blocks; ++i) {
    offset[i] = (size_t)random_between(&r, 0, size - 1);
    if (dense) memset(block[i], (int)(i * 131 + 7) & 0xff, size);
    else block[i][offset[i]] = (unsigned char)(i * 131 + 7);
  }
  const uint64_t resident = resident_kib();
  for (uint64_t i = 0; i < blocks; ++i) {
    if (block[i][offset[i]] != (unsigned char)(i * 131 + 7))
      fail("block %llu: byte at %zu changed", (unsigned long long)i, offset[i]);
    free(block[i]);
  }
  free(offset);
  free(block);
  printf("sparse_resident_kib %llu calloc_ms %llu resident_kib_with_all_live %llu\n",
         (unsigned long long)resident_sparse, (unsigned long long)calloc_ms,
         (unsigned long long)resident);
  printf("all checked\n");
  return 0;
}
