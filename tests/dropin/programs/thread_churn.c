/* Threads that start, allocate, wait for a signal and exit, in waves: the pattern of
 * stress-ng's pthread stressor (thread starts and exits while the parent queues signals to
 * its threads), with every thread joined before the next wave.
 *
 *   thread_churn WAVES THREADS
 *
 * Each wave, the main thread allocates one block per thread and starts THREADS threads. Each
 * thread checks and frees its block (a block of another thread's cache), allocates and frees
 * blocks of small and large sizes (so that it has a cache, which its exit tears down), keeps
 * a few of them, counts itself in, waits on a condition variable until the main thread has
 * seen every thread counted, then waits in sigtimedwait for the SIGUSR1 the main thread
 * queues to it with pthread_sigqueue, and returns its kept blocks. The main thread joins every
 * thread, checks and frees the kept blocks, and goes on to the next wave. Prints
 * "waves N, threads N, blocks N" and exits 0, or 1 on a failed check. */
#define _GNU_SOURCE /* pthread_sigqueue */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { kKept = 4, kMaxThreads = 256 };

struct thread_work {
  pthread_t thread;
  unsigned index;
  unsigned char* given;       /* allocated by the main thread, freed by this one */
  unsigned char* kept[kKept]; /* allocated by this thread, freed by the main thread */
  int failed;
};

static pthread_mutex_t mutex = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t all_counted = PTHREAD_COND_INITIALIZER;
static unsigned counted;
static int released;

static size_t size_of(unsigned index, unsigned k) {
  static const size_t sizes[] = {16, 48, 200, 1000, 5000, 40000, 70000, 300000};
  return sizes[(index + k) % (sizeof sizes / sizeof sizes[0])];
}

static unsigned char pattern(unsigned index, unsigned k) { return (unsigned char)(index * 7 + k); }

static int holds(const unsigned char* p, size_t size, unsigned char value) {
  return p[0] == value && p[size / 2] == value && p[size - 1] == value;
}

static void* run(void* argument) {
  struct thread_work* work = argument;
  if (!holds(work->given, size_of(work->index, 0), pattern(work->index, 0))) work->failed = 1;
  free(work->given);
  for (unsigned k = 0; k < 32; ++k) {
    const size_t size = size_of(work->index, k);
    unsigned char* p = malloc(size);
    if (p == NULL) {
      work->failed = 1;
      continue;
    }
    memset(p, pattern(work->index, k), size);
    if (k < kKept) work->kept[k] = p;
    else free(p);
  }
  pthread_mutex_lock(&mutex);
  ++counted;
  pthread_cond_broadcast(&all_counted);
  while (!released) {
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_nsec += 10000000;
    if (until.tv_nsec >= 1000000000) {
      until.tv_nsec -= 1000000000;
      ++until.tv_sec;
    }
    pthread_cond_timedwait(&all_counted, &mutex, &until);
  }
  pthread_mutex_unlock(&mutex);
  sigset_t usr1;
  sigemptyset(&usr1);
  sigaddset(&usr1, SIGUSR1);
  const struct timespec timeout = {0, 1000000};
  siginfo_t info;
  (void)sigtimedwait(&usr1, &info, &timeout); /* the signal may come after the timeout */
  return NULL;
}

int main(int argc, char** argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: thread_churn WAVES THREADS\n");
    return 2;
  }
  const unsigned waves = (unsigned)atoi(argv[1]);
  const unsigned threads = (unsigned)atoi(argv[2]);
  if (waves == 0 || threads == 0 || threads > kMaxThreads) {
    fprintf(stderr, "thread_churn: need WAVES >= 1 and THREADS from 1 to %d\n", kMaxThreads);
    return 2;
  }
  /* Blocked in every thread (they inherit the mask): a queued SIGUSR1 that sigtimedwait does
   * not take stays pending and dies with its thread. */
  sigset_t usr1;
  sigemptyset(&usr1);
  sigaddset(&usr1, SIGUSR1);
  pthread_sigmask(SIG_BLOCK, &usr1, NULL);
  static struct thread_work work[kMaxThreads];
  unsigned long blocks = 0;
  int failed = 0;
  for (unsigned wave = 0; wave < waves; ++wave) {
    counted = 0;
    released = 0;
    unsigned started = 0;
    for (unsigned t = 0; t < threads; ++t) {
      memset(&work[t], 0, sizeof work[t]);
      work[t].index = wave * threads + t;
      const size_t size = size_of(work[t].index, 0);
      work[t].given = malloc(size);
      if (work[t].given == NULL) {
        failed = 1;
        break;
      }
      memset(work[t].given, pattern(work[t].index, 0), size);
      const int error = pthread_create(&work[t].thread, NULL, run, &work[t]);
      if (error != 0) {
        fprintf(stderr, "pthread_create: %s\n", strerror(error));
        free(work[t].given);
        failed = 1;
        break;
      }
      ++started;
    }
    pthread_mutex_lock(&mutex);
    while (counted < started) pthread_cond_wait(&all_counted, &mutex);
    released = 1;
    pthread_cond_broadcast(&all_counted);
    pthread_mutex_unlock(&mutex);
    for (unsigned t = 0; t < started; ++t) {
      const union sigval value = {.sival_int = (int)t};
      (void)pthread_sigqueue(work[t].thread, SIGUSR1, value);
    }
    for (unsigned t = 0; t < started; ++t) {
      pthread_join(work[t].thread, NULL);
      if (work[t].failed) failed = 1;
      for (unsigned k = 0; k < kKept; ++k) {
        unsigned char* p = work[t].kept[k];
        if (p == NULL) continue;
        if (!holds(p, size_of(work[t].index, k), pattern(work[t].index, k))) failed = 1;
        free(p);
        ++blocks;
      }
    }
    if (failed) break;
  }
  if (failed) {
    fprintf(stderr, "thread_churn: a block did not hold what its thread wrote\n");
    return 1;
  }
  printf("waves %u, threads %u, blocks %lu\n", waves, threads, blocks);
  return 0;
}
