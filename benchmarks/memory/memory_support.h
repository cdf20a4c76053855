/* memory_support.h: what the memory study's programs share: their NAME=VALUE arguments, a
 * seeded random generator, the process's resident size, a clock, and failing loudly.
 *
 * The programs are plain C executables calling malloc/free (a C program loads no C++ runtime,
 * whose megabyte would hide what the allocators differ by), so that the study
 * (tools/study/memory.py) can put any allocator under them with LD_PRELOAD. Each takes its
 * scale from arguments such as `blocks=32768 seed=1` (every one optional, with its default and
 * bounds shown by `--help`), does a fixed amount of work, checks what it wrote, prints its
 * results and an "all checked" line, and exits 0; it exits 1 when a check fails and 2 on a bad
 * argument (unknown name, not a number, out of bounds), saying which. */
#ifndef PAGEMALLOC_BENCHMARKS_MEMORY_MEMORY_SUPPORT_H
#define PAGEMALLOC_BENCHMARKS_MEMORY_MEMORY_SUPPORT_H

#define _GNU_SOURCE
#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* One NAME=VALUE argument: its value (the default until an argument sets it) and bounds. */
struct parameter {
  const char* name;
  uint64_t value;
  uint64_t least;
  uint64_t most;
  const char* meaning;
};

/* A failed check: the program's result would be wrong, so it stops with status 1. */
static inline void fail(const char* format, ...) __attribute__((noreturn, format(printf, 1, 2)));
static inline void fail(const char* format, ...) {
  va_list args;
  va_start(args, format);
  fputs("check failed: ", stderr);
  vfprintf(stderr, format, args);
  fputc('\n', stderr);
  va_end(args);
  _Exit(1);
}

static inline void usage(const char* program, const char* summary, const struct parameter* p, int n,
                         FILE* out) {
  fprintf(out, "%s: %s\nusage: %s [NAME=VALUE]...\n", program, summary, program);
  for (int i = 0; i < n; ++i)
    fprintf(out, "  %-12s %s (default %llu, %llu to %llu)\n", p[i].name, p[i].meaning,
            (unsigned long long)p[i].value, (unsigned long long)p[i].least,
            (unsigned long long)p[i].most);
}

/* Reads argv into the parameters; exits 2 with a message on a bad argument, 0 after printing
 * the usage for --help. */
static inline void read_arguments(int argc, char** argv, const char* summary, struct parameter* p,
                                  int n) {
  for (int i = 1; i < argc; ++i) {
    const char* text = argv[i];
    if (strcmp(text, "--help") == 0 || strcmp(text, "-h") == 0) {
      usage(argv[0], summary, p, n, stdout);
      exit(0);
    }
    const char* equals = strchr(text, '=');
    if (equals == NULL) {
      fprintf(stderr, "%s: expected NAME=VALUE, got '%s'\n", argv[0], text);
      exit(2);
    }
    const size_t name_length = (size_t)(equals - text);
    struct parameter* found = NULL;
    for (int k = 0; k < n; ++k)
      if (strlen(p[k].name) == name_length && strncmp(p[k].name, text, name_length) == 0)
        found = &p[k];
    if (found == NULL) {
      fprintf(stderr, "%s: unknown parameter '%.*s'\n", argv[0], (int)name_length, text);
      usage(argv[0], summary, p, n, stderr);
      exit(2);
    }
    const char* digits = equals + 1;
    char* end = NULL;
    errno = 0;
    const unsigned long long value = strtoull(digits, &end, 10);
    if (*digits < '0' || *digits > '9' || *end != '\0' || errno != 0) {
      fprintf(stderr, "%s: %s: '%s' is not a whole number\n", argv[0], found->name, digits);
      exit(2);
    }
    if (value < found->least || value > found->most) {
      fprintf(stderr, "%s: %s=%llu is out of bounds [%llu, %llu]\n", argv[0], found->name, value,
              (unsigned long long)found->least, (unsigned long long)found->most);
      exit(2);
    }
    found->value = value;
  }
}

/* The value of a parameter by name (a misspelt name in the program is a check failure). */
static inline uint64_t parameter(const struct parameter* p, int n, const char* name) {
  for (int i = 0; i < n; ++i)
    if (strcmp(p[i].name, name) == 0) return p[i].value;
  fail("no parameter named %s", name);
}

/* xorshift64*: a small seeded generator, the same sequence under every allocator. */
struct random_state {
  uint64_t state;
};
static inline struct random_state random_seeded(uint64_t seed) {
  struct random_state r = {seed * 0x9E3779B97F4A7C15ULL + 0x2545F4914F6CDD1DULL};
  return r;
}
static inline uint64_t random_next(struct random_state* r) {
  r->state ^= r->state >> 12;
  r->state ^= r->state << 25;
  r->state ^= r->state >> 27;
  return r->state * 0x2545F4914F6CDD1DULL;
}
/* Uniform in [least, most]. */
static inline uint64_t random_between(struct random_state* r, uint64_t least, uint64_t most) {
  return least + random_next(r) % (most - least + 1);
}

/* malloc that fails the run instead of returning NULL. */
static inline void* checked_malloc(size_t size) {
  void* p = malloc(size);
  if (p == NULL) fail("malloc(%zu) returned NULL", size);
  return p;
}

/* The process's resident size now, in KiB (/proc/self/statm's second field). */
static inline uint64_t resident_kib(void) {
  FILE* statm = fopen("/proc/self/statm", "r");
  unsigned long long size = 0, resident = 0;
  if (statm == NULL || fscanf(statm, "%llu %llu", &size, &resident) != 2)
    fail("cannot read /proc/self/statm");
  fclose(statm);
  return resident * (uint64_t)sysconf(_SC_PAGESIZE) / 1024;
}

static inline uint64_t now_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (uint64_t)t.tv_sec * 1000 + (uint64_t)t.tv_nsec / 1000000;
}

#define PARAMETER_COUNT(array) ((int)(sizeof(array) / sizeof((array)[0])))

#endif
