/* A single-threaded program whose signal handler forks, often while fork() or malloc() is
 * running in the main program (modelled on glibc's test tst-mallocfork2, GNU C Library,
 * malloc/, https://sourceware.org/glibc/).
 *
 *   fork_in_signal_handler FORKS
 *
 * A timer sends SIGUSR1 every 500 microseconds; the handler forks and its child exits at
 * once. The main program forks FORKS times (each child allocates and exits), then allocates
 * and frees until the handler has forked FORKS times. Prints "forks N" and exits 0; a hang is
 * caught by the caller's timeout. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static volatile sig_atomic_t handler_forks;

static void on_signal(int signo) {
  (void)signo;
  int saved_errno = errno;
  if (fork() == 0) _exit(0);
  handler_forks = handler_forks + 1;
  errno = saved_errno;
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
  timer_t timer;
  struct itimerspec period = {{0, 500000}, {0, 500000}};
  if (timer_create(CLOCK_MONOTONIC, &event, &timer) != 0 ||
      timer_settime(timer, 0, &period, NULL) != 0)
    return 1;
  for (int i = 0; i < forks; ++i) {
    pid_t pid = fork();
    if (pid < 0) return 1;
    if (pid == 0) {
      free(malloc(100000));
      _exit(0);
    }
    while (waitpid(pid, NULL, 0) < 0 && errno == EINTR) {
    }
  }
  for (long i = 0; handler_forks < forks; ++i) {
    void* p = malloc(16 + i % 70000);
    if (p == NULL) return 1;
    free(p);
  }
  timer_delete(timer);
  printf("forks %d\n", forks);
  return 0;
}
