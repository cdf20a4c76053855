/* measure_run.c: runs one command and writes its wall time, peak RSS, CPU times and context
 * switches: the launcher every measured process of the real-program and cross-thread studies
 * starts through.
 *
 *   measure_run RESULT_FILE TIMEOUT_SECONDS [-e NAME=VALUE]... -- COMMAND [ARGUMENT]...
 *
 * The child sets each NAME=VALUE (e.g. LD_PRELOAD, which so never applies to this launcher)
 * and execs COMMAND; the launcher waits with wait4 and writes one line to RESULT_FILE:
 *
 *   status <exit status, or -signal> timed_out <0|1> wall_ns <n> maxrss_kib <n> user_us <n>
 *   system_us <n> voluntary_switches <n> involuntary_switches <n>
 *
 * A command still running after TIMEOUT_SECONDS is killed (SIGKILL): status -9, timed_out 1.
 *
 * Why a launcher: Linux keeps a process's peak RSS across exec, so a child forked from a big
 * parent (the Python runner holding its inputs) would start with the parent's RSS as its
 * peak. Forked from this small launcher, it starts near 1 MiB. wait4's ru_maxrss covers the
 * child and the descendants it waited for (cc1plus and as under g++).
 *
 * Built by benchmarks/cross_thread/CMakeLists.txt, and with cc by real_programs.py.
 *
 * Exit status: 0 when the line was written (whatever the command did), 125 on a usage or
 * system error, 127 when the command could not be executed.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/time.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static volatile sig_atomic_t timed_out = 0;

static void on_alarm(int signal_number) {
  (void)signal_number;
  timed_out = 1;
}

static long long now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (long long)t.tv_sec * 1000000000LL + t.tv_nsec;
}

static long long microseconds(struct timeval t) {
  return (long long)t.tv_sec * 1000000LL + t.tv_usec;
}

int main(int argc, char** argv) {
  if (argc < 5) {
    fprintf(stderr,
            "usage: %s RESULT_FILE TIMEOUT_SECONDS [-e NAME=VALUE]... -- COMMAND [ARGUMENT]...\n",
            argv[0]);
    return 125;
  }
  const char* result_path = argv[1];
  char* end = NULL;
  long timeout = strtol(argv[2], &end, 10);
  if (*argv[2] == '\0' || *end != '\0' || timeout <= 0) {
    fprintf(stderr, "measure_run: TIMEOUT_SECONDS must be a positive whole number, got %s\n",
            argv[2]);
    return 125;
  }
  int first_setting = 3, command = 3;
  while (command < argc && strcmp(argv[command], "--") != 0) {
    if (strcmp(argv[command], "-e") != 0 || command + 1 >= argc ||
        strchr(argv[command + 1], '=') == NULL) {
      fprintf(stderr, "measure_run: expected -e NAME=VALUE or --, got %s\n", argv[command]);
      return 125;
    }
    command += 2;
  }
  if (command + 1 >= argc) {
    fprintf(stderr, "measure_run: no command after --\n");
    return 125;
  }
  FILE* result = fopen(result_path, "w");
  if (result == NULL) {
    fprintf(stderr, "measure_run: cannot write %s: %s\n", result_path, strerror(errno));
    return 125;
  }

  long long started = now_ns();
  pid_t child = fork();
  if (child < 0) {
    fprintf(stderr, "measure_run: fork: %s\n", strerror(errno));
    return 125;
  }
  if (child == 0) {
    for (int i = first_setting; i < command; i += 2) {
      if (putenv(argv[i + 1]) != 0) _exit(125);
    }
    execvp(argv[command + 1], &argv[command + 1]);
    fprintf(stderr, "measure_run: cannot execute %s: %s\n", argv[command + 1], strerror(errno));
    _exit(127);
  }

  struct sigaction action;
  memset(&action, 0, sizeof action);
  action.sa_handler = on_alarm; /* no SA_RESTART: wait4 returns EINTR */
  sigaction(SIGALRM, &action, NULL);
  alarm((unsigned)timeout);
  int wait_status;
  struct rusage usage;
  while (wait4(child, &wait_status, 0, &usage) < 0) {
    if (errno != EINTR) {
      fprintf(stderr, "measure_run: wait4: %s\n", strerror(errno));
      return 125;
    }
    if (timed_out) kill(child, SIGKILL);
  }
  alarm(0);
  long long wall = now_ns() - started;
  int status = WIFEXITED(wait_status)     ? WEXITSTATUS(wait_status)
               : WIFSIGNALED(wait_status) ? -WTERMSIG(wait_status)
                                          : -1;
  fprintf(result,
          "status %d timed_out %d wall_ns %lld maxrss_kib %ld user_us %lld system_us %lld "
          "voluntary_switches %ld involuntary_switches %ld\n",
          status, (int)timed_out, wall, usage.ru_maxrss, microseconds(usage.ru_utime),
          microseconds(usage.ru_stime), usage.ru_nvcsw, usage.ru_nivcsw);
  return fclose(result) == 0 ? 0 : 125;
}
