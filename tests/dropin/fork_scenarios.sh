#!/usr/bin/env bash
# Drop-in test: fork scenarios that hang an allocator whose fork handlers take their locks in
# the wrong order or cannot be re-entered, with the C library's own stdio and malloc calls
# going to the preloaded library.
#
#   bash tests/dropin/fork_scenarios.sh path/to/libpagemalloc.so
#
# tests/dropin/programs/fork_with_stdio.c (threads in getline and fflush(NULL) while the main
# thread forks) and tests/dropin/programs/fork_in_signal_handler.c (a signal handler that
# forks during fork() and malloc()), each run 100 times in a row under the preload, with a timeout: a
# run that hangs or fails fails the test. Outputs must match the runs without the preload, and malloc
# must bind to the library.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/binding.bash"

take_library_argument "$@"
make_work_directory
programs=$(dirname "${BASH_SOURCE[0]}")/programs
cc -O2 -pthread -o "$work/fork_with_stdio" "$programs/fork_with_stdio.c"
cc -O2 -o "$work/fork_in_signal_handler" "$programs/fork_in_signal_handler.c" -lrt
seq 1 5000 | sed 's/$/ a line for getline to read/' >"$work/lines.txt"

RUNS=${RUNS:-100}
# run OUT [ENV=VALUE...]: each program once, its output to OUT.
run() {
  local out=$1; shift
  : >"$out"
  for program in "fork_with_stdio $work/lines.txt 5" "fork_in_signal_handler 20"; do
    if ! env "$@" timeout 60 $work/$program >>"$out"; then
      echo "FAIL: '$program' ${*:+with $*} failed or hung" >&2
      exit 1
    fi
  done
}
run "$work/plain.out"
for ((i = 1; i <= RUNS; ++i)); do
  run "$work/preload.out" LD_PRELOAD="$lib"
  if ! cmp -s "$work/plain.out" "$work/preload.out"; then
    echo "FAIL: run $i: output differs under LD_PRELOAD=$lib" >&2
    diff "$work/plain.out" "$work/preload.out" | head -n 20 >&2
    exit 1
  fi
done
run "$work/bindings.out" LD_PRELOAD="$lib" LD_DEBUG=bindings LD_DEBUG_OUTPUT="$work/ld"
expect_malloc_bound_to "$lib" "$work"/ld.*
echo "ok: $RUNS runs in a row of each scenario under the preload"
