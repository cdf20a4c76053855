#!/usr/bin/env bash
# Drop-in test: stress-ng's allocator and process stressors on the preloaded allocator.
#
#   bash tests/dropin/stress_ng.sh path/to/libpagemalloc.so
#
# stress-ng (package stress-ng) is a program written to break things: its malloc stressor mixes
# malloc, calloc, realloc and free of random sizes over thousands of live blocks and calls
# malloc_trim every few operations; here it also runs with eight threads on however many cores
# there are, with blocks of up to 4 MiB (the huge path), and with every page touched and every
# freed block zeroed. bigheap grows one block by realloc until it is large; fork, vfork and clone
# start and end processes (the fork handlers); tsearch, hsearch and judy are libc and library code
# that allocate in their own patterns. The pthread stressor is not run: in stress-ng 0.15.06 a
# thread created just as the stressor's time runs out is never joined, and it reads its argument
# from the stressor's stack frame after that has returned. It then dies of SIGSEGV in stress-ng's
# own code, under glibc's malloc as well (with --pthread-max 1 --pthread-ops 1, in 220 of 500
# rounds of three runs; docs/measurements.md, "The pthread stressor's crash"). thread_churn.sh
# runs its pattern with every thread joined. Each configuration runs two seconds with --verify
# (stress-ng checks what it can of its own results) and must report a successful run. stress-ng
# restarts a stressor that crashes and still reports success, so the run is verbose and any line
# that says a child died, was killed or failed fails the test. A run with LD_DEBUG=bindings checks
# that malloc binds to the library.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/binding.bash"

take_library_argument "$@"
if ! command -v stress-ng >/dev/null; then
  echo "FAIL: stress-ng not found (apt-get install stress-ng)" >&2
  exit 1
fi
make_work_directory

configurations=(
  "--malloc 2"
  "--malloc 1 --malloc-pthreads 8"
  "--malloc 1 --malloc-bytes 4M --malloc-max 256"
  "--malloc 2 --malloc-touch --malloc-zerofree"
  "--bigheap 2 --bigheap-growth 16K --bigheap-ops 20000"
  "--fork 2 --fork-vm"
  "--vfork 1 --clone 1"
  "--tsearch 1 --hsearch 1 --judy 1"
)

for configuration in "${configurations[@]}"; do
  read -r -a options <<<"$configuration"
  status=0
  ( cd "$work" && LD_PRELOAD="$lib" stress-ng "${options[@]}" --verify --timeout 2 --verbose \
      --temp-path "$work" ) >"$work/run.out" 2>&1 || status=$?
  if [ "$status" -ne 0 ] || ! grep -q 'successful run completed' "$work/run.out" ||
      grep -qiE 'fail|error|died|killed|signal|abort' "$work/run.out"; then
    echo "FAIL: stress-ng $configuration under LD_PRELOAD=$lib (status $status):" >&2
    grep -iE 'fail|error|died|killed|signal|abort' "$work/run.out" | head -n 10 >&2
    tail -n 5 "$work/run.out" >&2
    exit 1
  fi
done

( cd "$work" && LD_PRELOAD="$lib" LD_DEBUG=bindings LD_DEBUG_OUTPUT="$work/ld" \
    stress-ng --malloc 1 --malloc-ops 1000 --timeout 2 ) >/dev/null 2>&1
expect_malloc_bound_to "$lib" "$work"/ld.*
echo "ok: stress-ng passed ${#configurations[@]} configurations," \
  "malloc bound to $(basename -- "$lib")"
