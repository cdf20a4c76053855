/* pointer_chase.c: a heap built quickly and then read for long in random order, where the
 * huge-page advice of an allocator's chunks either pays (fewer TLB misses over the long reads)
 * or costs (the faults of fresh huge pages, where the machine backs them slowly).
 *
 *   pointer_chase [blocks=2000000] [steps=2000000] [seed=1]
 *
 * Allocates `blocks` blocks of 64 bytes, links them into one cycle in a random order, then
 * follows the links `steps` times, and checks that the cycle holds every block once. Wall,
 * user and system time (measured by the launcher) are the result; the program prints how long
 * the building and the reading took. */
#include <time.h>

#include "memory_support.h"

struct node {
  struct node* next;
  uint64_t index;
  uint64_t pad[6]; /* 64 bytes: one cache line per block */
};

static double seconds_since(const struct timespec* start) {
  struct timespec now;
  clock_gettime(CLOCK_MONOTONIC, &now);
  return (double)(now.tv_sec - start->tv_sec) + (double)(now.tv_nsec - start->tv_nsec) / 1e9;
}

int main(int argc, char** argv) {
  struct parameter p[] = {
      {"blocks", 2000000, 2, 1 << 26, "blocks of 64 bytes"},
      {"steps", 2000000, 0, UINT64_MAX, "links followed"},
      {"seed", 1, 0, UINT64_MAX, "random order"},
  };
  const int n = PARAMETER_COUNT(p);
  read_arguments(argc, argv, "a heap of 64-byte blocks read in random order", p, n);
  const uint64_t blocks = parameter(p, n, "blocks");
  const uint64_t steps = parameter(p, n, "steps");
  struct random_state r = random_seeded(parameter(p, n, "seed"));

  struct timespec start;
  clock_gettime(CLOCK_MONOTONIC, &start);
  struct node** node = checked_malloc(blocks * sizeof *node);
  for (uint64_t i = 0; i < blocks; ++i) {
    node[i] = checked_malloc(sizeof(struct node));
    node[i]->index = i;
  }
  /* A random order (Fisher-Yates), then each block links to the next in it. */
  for (uint64_t i = blocks - 1; i > 0; --i) {
    const uint64_t j = random_between(&r, 0, i);
    struct node* t = node[i];
    node[i] = node[j];
    node[j] = t;
  }
  for (uint64_t i = 0; i < blocks; ++i) node[i]->next = node[(i + 1) % blocks];
  const double built_s = seconds_since(&start);

  struct node* at = node[0];
  uint64_t sum = 0;
  for (uint64_t s = 0; s < steps; ++s) {
    sum += at->index;
    at = at->next;
  }
  const double read_s = seconds_since(&start) - built_s;

  uint64_t length = 0;
  struct node* walk = node[0];
  do {
    ++length;
    walk = walk->next;
  } while (walk != node[0] && length <= blocks);
  if (length != blocks)
    fail("the cycle holds %llu blocks, not %llu", (unsigned long long)length,
         (unsigned long long)blocks);
  for (uint64_t i = 0; i < blocks; ++i) free(node[i]);
  free(node);
  printf("blocks %llu steps %llu built_s %.3f read_s %.3f sum %llu\n", (unsigned long long)blocks,
         (unsigned long long)steps, built_s, read_s, (unsigned long long)sum);
  printf("all checked\n");
  return 0;
}
