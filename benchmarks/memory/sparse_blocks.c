/* sparse_blocks.c: a table reserved but sparsely filled: many live large blocks with one byte
 * touched in each, so that an allocator which backs a block with more than the page the
 * program touches (a huge page, say) multiplies the memory the program uses.
 *
 *   sparse_blocks [blocks=32768] [least_kib=64] [most_kib=512] [small_mib=0] [seed=1]
 *
 * First allocates small_mib MiB of 64-byte blocks, each written and kept (a heap of small
 * objects beside the table: an allocator that backs a heap's blocks ahead of use once it is
 * large may back the table's too). Then allocates `blocks` blocks of random sizes from
 * least_kib to most_kib KiB, writes one byte at a random offset in each, then checks every
 * byte and frees every block. Peak RSS (measured by the launcher) is the result: the bytes the
 * program needs are `blocks` pages and the small blocks. */
#include "memory_support.h"

int main(int argc, char** argv) {
  struct parameter p[] = {
      {"blocks", 32768, 1, 1 << 22, "live blocks"},
      {"least_kib", 64, 1, 1 << 20, "smallest block, KiB"},
      {"most_kib", 512, 1, 1 << 20, "largest block, KiB"},
      {"small_mib", 0, 0, 1 << 12, "MiB of 64-byte blocks allocated first"},
      {"seed", 1, 0, UINT64_MAX, "random sequence"},
  };
  const int n = PARAMETER_COUNT(p);
  read_arguments(argc, argv, "live large blocks, one byte touched in each", p, n);
  const uint64_t blocks = parameter(p, n, "blocks");
  const uint64_t least = parameter(p, n, "least_kib") * 1024;
  const uint64_t most = parameter(p, n, "most_kib") * 1024;
  if (least > most) {
    fprintf(stderr, "%s: need least_kib <= most_kib\n", argv[0]);
    return 2;
  }
  struct random_state r = random_seeded(parameter(p, n, "seed"));

  const uint64_t small_count = parameter(p, n, "small_mib") * (1024 * 1024 / 64);
  unsigned char** small = checked_malloc((small_count + 1) * sizeof *small);
  for (uint64_t i = 0; i < small_count; ++i) {
    small[i] = checked_malloc(64);
    small[i][0] = (unsigned char)i;
  }

  unsigned char** block = checked_malloc(blocks * sizeof *block);
  size_t* offset = checked_malloc(blocks * sizeof *offset);
  uint64_t reserved = 0;
  for (uint64_t i = 0; i < blocks; ++i) {
    const size_t size = (size_t)random_between(&r, least, most);
    block[i] = checked_malloc(size);
    offset[i] = (size_t)random_between(&r, 0, size - 1);
    block[i][offset[i]] = (unsigned char)(i * 131 + 7);
    reserved += size;
  }
  const uint64_t resident = resident_kib();
  for (uint64_t i = 0; i < blocks; ++i) {
    if (block[i][offset[i]] != (unsigned char)(i * 131 + 7))
      fail("block %llu: byte at %zu changed", (unsigned long long)i, offset[i]);
    free(block[i]);
  }
  for (uint64_t i = 0; i < small_count; ++i) {
    if (small[i][0] != (unsigned char)i) fail("small block %llu changed", (unsigned long long)i);
    free(small[i]);
  }
  free(small);
  free(offset);
  free(block);
  printf("blocks %llu reserved_mib %.1f resident_kib_with_all_live %llu\n",
         (unsigned long long)blocks, reserved / 1048576.0, (unsigned long long)resident);
  printf("all checked\n");
  return 0;
}
