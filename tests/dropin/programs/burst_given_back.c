/* A freed burst given back while every later call is served by the thread cache.
 *
 *   burst_given_back SIZES LATER SLEEP THREAD DEADLINE_MS
 *
 * Allocates 4,000 blocks (SIZES "fixed": 50,000 bytes each, 200 MB; "random": 4 to 256 KiB),
 * writes every byte, frees them all, then makes only calls a thread cache serves: a thousand
 * malloc and free pairs (LATER "constant": 16 bytes; "cycling": 16 to 2,015 bytes, one more each
 * call), a 1 ms sleep if SLEEP is 1, again. THREAD "same" makes the burst on the thread that
 * makes the later calls, "other" on a thread that has exited by then. Every block is written
 * through a volatile pointer, so that the compiler keeps each call (it removes a
 * free(malloc(n)) whose block is not used, and then no call reaches the allocator at all).
 *
 * Prints the burst's resident KiB and the milliseconds after the burst's free at which the
 * resident size fell to a tenth of the burst's; exits 1 if it had not by DEADLINE_MS. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

enum { kBlocks = 4000 };

static long resident_kib(void) {
  unsigned long size = 0, resident = 0;
  FILE* statm = fopen("/proc/self/statm", "r");
  if (statm == NULL || fscanf(statm, "%lu %lu", &size, &resident) != 2) exit(2);
  fclose(statm);
  return (long)(resident * (unsigned long)sysconf(_SC_PAGESIZE) / 1024);
}

static double now_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

static int random_sizes;
static long burst_kib;

/* Allocates and writes the burst, notes its resident size, and frees it. */
static void* make_and_free_burst(void* unused) {
  (void)unused;
  static char* blocks[kBlocks];
  srand(1);
  for (int i = 0; i < kBlocks; ++i) {
    size_t size = random_sizes ? 4096 + (size_t)rand() % (252 * 1024) : 50000;
    blocks[i] = malloc(size);
    if (blocks[i] == NULL) exit(2);
    memset(blocks[i], 1, size);
  }
  burst_kib = resident_kib();
  for (int i = 0; i < kBlocks; ++i) free(blocks[i]);
  return NULL;
}

int main(int argc, char** argv) {
  if (argc != 6) {
    fprintf(stderr,
            "usage: burst_given_back fixed|random constant|cycling 0|1 same|other "
            "DEADLINE_MS\n");
    return 2;
  }
  random_sizes = strcmp(argv[1], "random") == 0;
  int cycling = strcmp(argv[2], "cycling") == 0;
  int sleeps = atoi(argv[3]);
  int other_thread = strcmp(argv[4], "other") == 0;
  double deadline_ms = atof(argv[5]);

  long before_kib = resident_kib();
  if (other_thread) {
    pthread_t thread;
    if (pthread_create(&thread, NULL, make_and_free_burst, NULL) != 0) return 2;
    pthread_join(thread, NULL);
  } else {
    make_and_free_burst(NULL);
  }
  long burst_only_kib = burst_kib - before_kib;
  double freed_at = now_ms();
  size_t size = 16;
  for (;;) {
    for (int i = 0; i < 1000; ++i) {
      char* volatile block = malloc(size);
      block[0] = 1;
      free(block);
      if (cycling) size = size >= 2015 ? 16 : size + 1;
    }
    if (sleeps) usleep(1000);
    double elapsed = now_ms() - freed_at;
    long held_kib = resident_kib() - before_kib;
    if (held_kib * 10 <= burst_only_kib) {
      printf("burst %ld KiB; a tenth of it left at %.0f ms\n", burst_only_kib, elapsed);
      return 0;
    }
    if (elapsed > deadline_ms) {
      printf("burst %ld KiB; %ld KiB still resident at %.0f ms\n", burst_only_kib, held_kib,
             elapsed);
      return 1;
    }
  }
}
