/* realloc_growth.c: strings grown by realloc a few bytes at a time, all of them in turn, the
 * way a program that reads records appends to many buffers at once. Every string passes
 * through each size on its way, so every size class it crosses is used for a while by all the
 * strings together and then by none: what an allocator keeps of the classes left behind shows
 * in the peak. Written for this study.
 *
 *   realloc_growth [strings=1000] [most=4096] [step=1] [rounds=1] [seed=1]
 *
 * Each round grows every string from `step` bytes to `most`, `step` bytes at a time and one
 * string after another, writing the bytes it adds; then checks every string's bytes and frees
 * them all. */
#include "memory_support.h"

/* The byte at offset i of string s: what the check expects. */
static char byte_at(uint64_t s, uint64_t i, uint64_t seed) {
  return (char)((s * 131 + i * 7 + seed) & 0x7f);
}

int main(int argc, char** argv) {
  struct parameter p[] = {
      {"strings", 1000, 1, 1 << 20, "strings grown together"},
      {"most", 4096, 1, 1 << 26, "bytes each string grows to"},
      {"step", 1, 1, 1 << 20, "bytes added to a string at a time"},
      {"rounds", 1, 1, 1 << 20, "times the strings are grown and freed"},
      {"seed", 1, 0, UINT64_MAX, "the strings' contents"},
  };
  const int n = PARAMETER_COUNT(p);
  read_arguments(argc, argv, "strings grown by realloc a few bytes at a time, all in turn", p, n);
  const uint64_t strings = parameter(p, n, "strings");
  const uint64_t most = parameter(p, n, "most");
  const uint64_t step = parameter(p, n, "step");
  const uint64_t rounds = parameter(p, n, "rounds");
  const uint64_t seed = parameter(p, n, "seed");
  if (step > most) {
    fprintf(stderr, "%s: need step <= most\n", argv[0]);
    return 2;
  }
  char** text = checked_malloc(strings * sizeof *text);
  uint64_t reallocs = 0;
  for (uint64_t round = 0; round < rounds; ++round) {
    for (uint64_t s = 0; s < strings; ++s) text[s] = NULL;
    uint64_t length = 0;
    for (uint64_t next = step; next <= most; next += step) {
      for (uint64_t s = 0; s < strings; ++s) {
        char* grown = realloc(text[s], next);
        if (grown == NULL) fail("realloc(%llu) returned NULL", (unsigned long long)next);
        for (uint64_t i = length; i < next; ++i) grown[i] = byte_at(s, i, seed);
        text[s] = grown;
        ++reallocs;
      }
      length = next;
    }
    for (uint64_t s = 0; s < strings; ++s) {
      for (uint64_t i = 0; i < length; ++i)
        if (text[s][i] != byte_at(s, i, seed))
          fail("string %llu byte %llu changed", (unsigned long long)s, (unsigned long long)i);
      free(text[s]);
    }
  }
  free(text);
  printf("strings %llu bytes %llu reallocs %llu\nall checked\n", (unsigned long long)strings,
         (unsigned long long)(most / step * step), (unsigned long long)reallocs);
  return 0;
}
