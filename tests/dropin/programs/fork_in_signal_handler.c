/* A single-threaded program whose signal handler forks, often while fork() or malloc() is
 * running in the main program (modelled on glibc's test tst-mallocfork2, GNU C Library,
 * malloc/, https://sourceware.org/glibc/).
 *
 *   fork_in_signal_handler FORKS
 *
 * A timer sends SIGUSR1; the handler forks and its child exits at once. The main program forks
 * FORKS times (each child allocates and exits), with one signal due per fork at a random moment
 * within the time the last fork took, so that most land inside a fork (a periodic signal would
 * starve the main program wherever a fork takes longer than the period: 4 ms on some virtual
 * machines). Then the handler arms the next signal 500 microseconds after each of its forks
 * while the main program allocates and frees until the handler has forked FORKS times more. Prints
 * "forks N" and exits 0; a hang is caught by the caller's timeout. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static volatile sig_atomic_t handler_forks;
static volatile sig_atomic_t repeat; /* the handler arms the next signal */
static timer_t timer;

/* One signal delay_ns from now (async-signal-safe: timer_settime is). */
static int arm_once(long long delay_ns) {
  struct itimerspec once = {{0, 0}, {delay_ns / 1000000000, delay_ns % 1000000000}};
  return timer_settime(timer, 0, &once, NULL);
}

static void on_signal(int signo) {
  (void)signo;
  int saved_errno = errno;
  if (fork() == 0) _exit(0);
  handler_forks = handler_forks + 1;
  if (repeat) arm_once(500000);
  errno = saved_errno;
}

static long long now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1000000000LL + t.tv_nsec;
}

int main(int argc, char** argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s FORKS\n", argv[0]);
    return 2;
  }
  const int forks = atoi(argv[1]);
  free(malloc(1));
  signal(SIGCHLD, SIG_IGN); /* children reaped by the kernel */
  struct sigaction action = {0};
  action.sa_handler = on_signal;
  action.sa_flags = SA_RESTART;
  sigaction(SIGUSR1, &action, NULL);
  struct sigevent event = {0};
  event.sigev_notify = SIGEV_SIGNAL;
  event.sigev_signo = SIGUSR1;
  if (timer_create(CLOCK_MONOTONIC, &event, &timer) != 0) return 1;
  long long fork_ns = 500000; /* until the first fork is timed */
  unsigned long long random = 0x9E3779B97F4A7C15ULL;
  for (int i = 0; i < forks; ++i) {
    random ^= random << 13;
    random ^= random >> 7;
    random ^= random << 17;
    if (arm_once(1 + (long long)(random % (unsigned long long)fork_ns)) != 0) return 1;
    const long long start = now_ns();
    pid_t pid = fork();
    fork_ns = now_ns() - start;
    if (fork_ns < 1000) fork_ns = 1000;
    if (pid < 0) return 1;
    if (pid == 0) {
      free(malloc(100000));
      _exit(0);
    }
    while (waitpid(pid, NULL, 0) < 0 && errno == EINTR) {
    }
  }
  const int forked_while_forking = handler_forks;
  repeat = 1;
  if (arm_once(500000) != 0) return 1;
  for (long i = 0; handler_forks < forked_while_forking + forks; ++i) {
    void* p = malloc(16 + i % 70000);
    if (p == NULL) return 1;
    free(p);
  }
  repeat = 0;
  timer_delete(timer);
  printf("forks %d\n", forks);
  return 0;
}
