#!/usr/bin/env bash
# Drop-in test: the reports on the heap are not cancellation points.
#
#   bash tests/dropin/reports_under_cancellation.sh path/to/libpagemalloc.so
#
# tests/dropin/programs/reports_under_cancellation.c has a thread with its own cancellation
# pending (deferred) make one report, the scenario of glibc's tst-malloc-stats-cancellation.
# Under LD_PRELOAD, for malloc_stats, malloc_info to unbuffered stderr and stdout, and
# pm_stats_print: the report's whole text is written, the call returns with cancellation
# enabled, and the thread is then cancelled at pthread_testcancel. glibc's own malloc_stats,
# without the preload, passes the same check; and malloc_stats and malloc_info bind to the
# library under the preload, so that it is the library's report that passed.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/binding.bash"

take_library_argument "$@"
make_work_directory
program=$work/reports_under_cancellation
cc -std=c11 -O2 -Wall -Wextra -Werror -pthread -o "$program" \
  "$(dirname "${BASH_SOURCE[0]}")/programs/reports_under_cancellation.c"

# expect_report REPORT FIRST LAST [ENV=VALUE...]: the program passes for REPORT, and its output
# has a line that FIRST matches and one that LAST matches (whole lines, extended regexes): the
# report's first line and its last (or, where lines follow that a build may add, a late one).
expect_report() {
  local report=$1 first=$2 last=$3; shift 3
  local status=0
  env "$@" "$program" "$report" >"$work/$report.out" 2>&1 || status=$?
  local line
  for line in "$first" "$last"; do
    if [ "$status" -ne 0 ] || ! grep -qxE -- "$line" "$work/$report.out"; then
      echo "FAIL: $report with a cancellation pending (${*:-without the preload}): status" \
        "$status, no line '$line' in its output:" >&2
      cat "$work/$report.out" >&2
      exit 1
    fi
  done
  echo "$(tail -n 1 "$work/$report.out") (${*:-without the preload})"
}

expect_report malloc_stats 'Arena 0:' 'max mmap bytes += +0'
expect_report malloc_stats 'Arena 0:' 'max mmap bytes += +0' LD_PRELOAD="$lib"
for stream in stderr stdout; do
  expect_report "malloc_info_$stream" '<malloc version="1">' '</malloc>' LD_PRELOAD="$lib"
done
expect_report pm_stats_print 'pagemalloc statistics \(run manager: .+\)' \
  ' +[0-9]+ ns of faults charged to it' LD_PRELOAD="$lib"

for symbol in malloc_stats malloc_info; do
  report=$symbol
  [ "$symbol" = malloc_info ] && report=malloc_info_stderr
  LD_PRELOAD=$lib LD_DEBUG=bindings LD_DEBUG_OUTPUT=$work/$symbol "$program" "$report" \
    >/dev/null 2>&1 || true
  if ! cat "$work/$symbol".* | grep -F "symbol \`$symbol'" | grep -qF "/$(basename "$lib") ["; then
    echo "FAIL: $symbol does not bind to $(basename "$lib") under LD_PRELOAD" >&2
    exit 1
  fi
done
echo "ok: malloc_stats and malloc_info bind to $(basename "$lib") under LD_PRELOAD"
