/* heap_profile_fork.c: profiles written around fork, for the heap profile test
 * (tests/dropin/heap_profile.sh). Four threads allocate and free blocks of every size without
 * pause (each allocation may be sampled, each free forgets a sample) while a fifth writes
 * profiles in a loop and the main thread forks: each child allocates, writes a profile of its
 * own (pm_prof_dump, found at run time) and exits. A child that inherited the profiler's lock
 * held, or its tables half updated, hangs or writes a broken profile; the parent waits for
 * each child with a deadline.
 *
 *   heap_profile_fork DIRECTORY FORKS
 * writes DIRECTORY/child.N.heap and DIRECTORY/parent.heap. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static int (*prof_dump)(const char*);
static atomic_int stop;
static char directory[512];

static void fail(const char* what) {
  fprintf(stderr, "heap_profile_fork: %s\n", what);
  exit(1);
}

static void* churn(void* argument) {
  unsigned seed = (unsigned)(size_t)argument;
  void* live[128] = {0};
  while (!atomic_load(&stop)) {
    unsigned slot = (unsigned)rand_r(&seed) % 128, kind = (unsigned)rand_r(&seed) % 100;
    free(live[slot]);
    size_t size = kind < 90   ? 16 + (size_t)rand_r(&seed) % 2000
                  : kind < 99 ? 70000 + (size_t)rand_r(&seed) % 200000
                              : (size_t)3 << 20;
    live[slot] = malloc(size);
    if (live[slot] == NULL) fail("malloc failed");
    memset(live[slot], 1, 64);
  }
  for (int i = 0; i < 128; ++i) free(live[i]);
  return NULL;
}

static void* dumper(void* argument) {
  (void)argument;
  char path[600];
  snprintf(path, sizeof(path), "%s/parent.heap", directory);
  while (!atomic_load(&stop))
    if (prof_dump(path) != 0) fail("the parent's pm_prof_dump failed");
  return NULL;
}

/* The child: blocks of its own, sampled, then its profile. */
static int child(int n) {
  void* blocks[256];
  for (int i = 0; i < 256; ++i) {
    blocks[i] = malloc(4096 + (size_t)i * 64);
    if (blocks[i] == NULL) return 2;
  }
  char path[600];
  snprintf(path, sizeof(path), "%s/child.%d.heap", directory, n);
  const int error = prof_dump(path);
  for (int i = 0; i < 128; ++i) free(blocks[i]);
  return error == 0 ? 0 : 3;
}

int main(int argc, char** argv) {
  if (argc != 3) fail("usage: heap_profile_fork DIRECTORY FORKS");
  snprintf(directory, sizeof(directory), "%s", argv[1]);
  const int forks = atoi(argv[2]);
  prof_dump = (int (*)(const char*))dlsym(RTLD_DEFAULT, "pm_prof_dump");
  if (prof_dump == NULL) fail("no pm_prof_dump: not run under pagemalloc");
  pthread_t threads[5];
  for (int t = 0; t < 4; ++t)
    if (pthread_create(&threads[t], NULL, churn, (void*)(size_t)(t + 1)) != 0)
      fail("pthread_create failed");
  if (pthread_create(&threads[4], NULL, dumper, NULL) != 0) fail("pthread_create failed");
  for (int n = 0; n < forks; ++n) {
    const pid_t pid = fork();
    if (pid < 0) fail("fork failed");
    if (pid == 0) _exit(child(n));
    /* Ten seconds for each child: far more than it needs, unless it hangs. */
    int status = 0;
    for (int waited = 0;; ++waited) {
      const pid_t done = waitpid(pid, &status, WNOHANG);
      if (done == pid) break;
      if (waited == 10000) {
        kill(pid, SIGKILL);
        fail("a child hung");
      }
      struct timespec ms = {0, 1000000};
      nanosleep(&ms, NULL);
    }
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      fprintf(stderr, "heap_profile_fork: child %d: status %d\n", n, status);
      return 1;
    }
  }
  atomic_store(&stop, 1);
  for (int t = 0; t < 5; ++t) pthread_join(threads[t], NULL);
  printf("%d children wrote their profiles\n", forks);
  return 0;
}
