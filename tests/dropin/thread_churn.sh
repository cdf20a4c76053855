#!/usr/bin/env bash
# Drop-in test: threads started, signalled and joined in waves, on the preloaded allocator.
#
#   bash tests/dropin/thread_churn.sh path/to/libpagemalloc.so
#
# tests/dropin/programs/thread_churn.c runs 200 waves of 64 threads. Each thread frees a block
# the main thread allocated, allocates blocks of 16 bytes to 300 KiB (so that it has a thread
# cache, which its exit tears down), keeps four for the main thread to check and free, and
# exits after a sigtimedwait for the SIGUSR1 the main thread queues to it: stress-ng's pthread
# stressor's pattern, with every thread joined. Two copies run at once, five times, so that
# threads of two processes share the two cores. Each output must match the run without the
# preload, and malloc must bind to the library.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/binding.bash"

take_library_argument "$@"
make_work_directory
cc -O2 -pthread -o "$work/thread_churn" "$(dirname "${BASH_SOURCE[0]}")/programs/thread_churn.c"

# run OUT [ENV=VALUE...]: the program once, its output to OUT.
run() {
  local out=$1; shift
  if ! env "$@" timeout 120 "$work/thread_churn" 200 64 >"$out"; then
    echo "FAIL: thread_churn ${*:+with $*} failed or hung" >&2
    exit 1
  fi
}
expect_same_output_with_preload "$lib" "$work"
for ((i = 1; i <= 5; ++i)); do
  run "$work/a.out" LD_PRELOAD="$lib" &
  first=$!
  run "$work/b.out" LD_PRELOAD="$lib" &
  second=$!
  status=0
  wait "$first" || status=1
  wait "$second" || status=1
  [ "$status" -eq 0 ] || exit 1
  for out in a b; do
    if ! cmp -s "$work/plain.out" "$work/$out.out"; then
      echo "FAIL: round $i: output differs under LD_PRELOAD=$lib" >&2
      exit 1
    fi
  done
done
echo "ok: 200 waves of 64 threads, two processes at once five times, malloc bound to" \
  "$(basename -- "$lib")"
