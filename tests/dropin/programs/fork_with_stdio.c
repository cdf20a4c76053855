/* A program that forks while other threads use stdio (modelled on glibc's test
 * tst-malloc-fork-deadlock, GNU C Library, malloc/, https://sourceware.org/glibc/).
 *
 *   fork_with_stdio FILE FORKS
 *
 * Two threads read FILE line by line with getline (which reallocates its line buffer while it
 * holds the stream's lock), two write lines to a growing memory stream and call fflush(NULL)
 * (which holds the C library's list of streams while it flushes), and one allocates and frees
 * blocks of every size; the main thread forks FORKS times. Each child allocates, writes a
 * line through stdio and exits. Prints "forks N, lines N" and exits 0, or 1 on a failed check;
 * a hang is caught by the caller's timeout. */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static atomic_int stop;
static atomic_long lines_read;
static atomic_int failures;
static const char* path;

static void* read_lines(void* unused) {
  (void)unused;
  while (!atomic_load(&stop)) {
    FILE* f = fopen(path, "r");
    if (f == NULL) {
      atomic_fetch_add(&failures, 1);
      break;
    }
    char* line = NULL;
    size_t capacity = 0;
    while (getline(&line, &capacity, f) > 0) atomic_fetch_add(&lines_read, 1);
    free(line);
    fclose(f);
  }
  return NULL;
}

static void* write_and_flush(void* unused) {
  (void)unused;
  while (!atomic_load(&stop)) {
    char* buffer = NULL;
    size_t size = 0;
    FILE* f = open_memstream(&buffer, &size);
    if (f == NULL) {
      atomic_fetch_add(&failures, 1);
      break;
    }
    for (int i = 0; i < 200; ++i) {
      fprintf(f, "line %d of a memory stream that grows by reallocation\n", i);
      if (i % 50 == 0) fflush(NULL);
    }
    fclose(f);
    if (size == 0 || buffer == NULL) atomic_fetch_add(&failures, 1);
    free(buffer);
  }
  return NULL;
}

static void* churn(void* unused) {
  (void)unused;
  unsigned seed = 12345;
  while (!atomic_load(&stop)) {
    seed = seed * 1103515245u + 12345u;
    size_t size = (seed >> 8) % 4 == 0 ? 16384 + (seed >> 12) % (1 << 20) : 1 + (seed >> 12) % 2048;
    unsigned char* p = malloc(size);
    if (p == NULL) {
      atomic_fetch_add(&failures, 1);
      break;
    }
    p[0] = 1;
    p[size - 1] = 2;
    free(p);
  }
  return NULL;
}

int main(int argc, char** argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: %s FILE FORKS\n", argv[0]);
    return 2;
  }
  path = argv[1];
  const int forks = atoi(argv[2]);
  void* (*bodies[])(void*) = {read_lines, read_lines, write_and_flush, write_and_flush, churn};
  enum { kThreads = sizeof bodies / sizeof bodies[0] };
  pthread_t threads[kThreads];
  for (int i = 0; i < kThreads; ++i) pthread_create(&threads[i], NULL, bodies[i], NULL);
  /* The forks start once the readers are reading (or have failed). */
  while (atomic_load(&lines_read) == 0 && atomic_load(&failures) == 0) sched_yield();
  int failed = 0;
  for (int i = 0; i < forks && !failed; ++i) {
    pid_t pid = fork();
    if (pid < 0) {
      failed = 1;
      break;
    }
    if (pid == 0) {
      char* p = malloc(100000);
      char* q = malloc(100);
      if (p == NULL || q == NULL) _exit(1);
      snprintf(q, 100, "child %d", i);
      fflush(NULL);
      free(p);
      free(q);
      _exit(0);
    }
    int status = 0;
    if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
      failed = 1;
  }
  atomic_store(&stop, 1);
  for (int i = 0; i < kThreads; ++i) pthread_join(threads[i], NULL);
  printf("forks %d, lines %s\n", forks, atomic_load(&lines_read) > 0 ? "read" : "none");
  return failed || atomic_load(&failures) != 0;
}
