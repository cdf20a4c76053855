/* A report on the heap made by a thread whose cancellation is pending, for
 * tests/dropin/reports_under_cancellation.sh: the scenario of glibc's test
 * tst-malloc-stats-cancellation, where malloc_stats is not a cancellation point.
 *
 *   reports_under_cancellation REPORT
 *
 * REPORT is one of
 *   malloc_stats        malloc_stats(), to stderr
 *   malloc_info_stderr  malloc_info(0, stderr) (unbuffered: the text is written in the call)
 *   malloc_info_stdout  malloc_info(0, stdout), stdout made unbuffered
 *   pm_stats_print      pm_stats_print(1, 0), found with dlsym: the program is not linked with
 *                       the library, whose pm_ functions a preload brings
 *
 * A thread asks for its own cancellation (deferred, the default type), makes the report, notes
 * that it returned and the cancellation state it left, then reaches pthread_testcancel, where
 * it must end. The main thread joins it and prints "ok: ..." to stderr and exits 0 when the
 * report returned with cancellation enabled and the thread was cancelled after it; it names
 * what failed and exits 1 otherwise. The script checks that the report's text was written. */
#define _GNU_SOURCE /* RTLD_DEFAULT */
#include <dlfcn.h>
#include <malloc.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

enum progress { kStarted, kCancelRequested, kReportReturned, kPastTestcancel };

static const char* report_name;
static volatile int progress = kStarted;
static int state_after_report = -1;

static int make_report(void) {
  if (strcmp(report_name, "malloc_stats") == 0) {
    malloc_stats();
    return 0;
  }
  if (strcmp(report_name, "malloc_info_stderr") == 0) return malloc_info(0, stderr);
  if (strcmp(report_name, "malloc_info_stdout") == 0) return malloc_info(0, stdout);
  void (*print)(int, int) = (void (*)(int, int))dlsym(RTLD_DEFAULT, "pm_stats_print");
  if (print == NULL) return -1;
  print(1, 0);
  return 0;
}

static void* report_with_cancellation_pending(void* result) {
  pthread_cancel(pthread_self());
  progress = kCancelRequested;
  *(int*)result = make_report();
  progress = kReportReturned;
  pthread_setcancelstate(PTHREAD_CANCEL_ENABLE, &state_after_report);
  pthread_testcancel();
  progress = kPastTestcancel;
  return NULL;
}

static int fail(const char* what) {
  fprintf(stderr, "FAIL: %s: %s\n", report_name, what);
  return 1;
}

int main(int argc, char** argv) {
  static const char* const kReports[] = {"malloc_stats", "malloc_info_stderr", "malloc_info_stdout",
                                         "pm_stats_print"};
  int known = 0;
  for (size_t i = 0; argc == 2 && i < sizeof(kReports) / sizeof(kReports[0]); ++i)
    known |= strcmp(argv[1], kReports[i]) == 0;
  if (!known) {
    fprintf(stderr,
            "usage: %s malloc_stats|malloc_info_stderr|malloc_info_stdout|"
            "pm_stats_print\n",
            argv[0]);
    return 2;
  }
  report_name = argv[1];
  setvbuf(stdout, NULL, _IONBF, 0);
  int result = -2;
  pthread_t thread;
  void* joined = NULL;
  if (pthread_create(&thread, NULL, report_with_cancellation_pending, &result) != 0)
    return fail("pthread_create");
  if (pthread_join(thread, &joined) != 0) return fail("pthread_join");
  if (progress == kCancelRequested) return fail("the thread was cancelled in the report");
  if (progress != kReportReturned && progress != kPastTestcancel)
    return fail("the thread did not reach the report");
  if (result != 0) return fail("the report returned an error");
  if (state_after_report != PTHREAD_CANCEL_ENABLE)
    return fail("the report left cancellation disabled");
  if (progress == kPastTestcancel || joined != PTHREAD_CANCELED)
    return fail("the thread was not cancelled at pthread_testcancel after the report");
  fprintf(stderr,
          "ok: %s returned with a cancellation pending, which pthread_testcancel then "
          "acted on\n",
          report_name);
  return 0;
}
