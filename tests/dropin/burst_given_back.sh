#!/usr/bin/env bash
# Drop-in test: a freed burst goes back to the OS within decay_ms + 3 s while every later call is
# served by the thread cache (no slow path, no background thread).
#
#   bash tests/dropin/burst_given_back.sh path/to/libpagemalloc.so
#
# tests/dropin/programs/burst_given_back.c allocates and writes 200 MB (4,000 blocks of 50,000
# bytes, or of 4 to 256 KiB), frees it, and goes on making malloc and free pairs of 16 bytes, or
# of 16 to 2,015 bytes, with or without a 1 ms sleep between thousands, on the thread that made
# the burst or after that thread has exited. With decay_ms:1000, at most a tenth of the burst
# may be resident 4 s after its free. Each of the eight cases runs once; they take about 1 to 2 s
# each where the decay works.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/binding.bash"

take_library_argument "$@"
make_work_directory
cc -O2 -pthread -o "$work/burst_given_back" \
  "$(dirname "${BASH_SOURCE[0]}")/programs/burst_given_back.c"

failures=0
# "random same": blocks of 64-256 KiB among them wait in the calling thread's medium bins.
for sizes_thread in "fixed same" "random other" "random same"; do
  for later in constant cycling; do
    for sleeps in 0 1; do
      read -r sizes thread <<<"$sizes_thread"
      case="$sizes sizes, $later later calls, sleep $sleeps, burst on the $thread thread"
      if out=$(LD_PRELOAD="$lib" PAGEMALLOC_CONF=decay_ms:1000 timeout 60 \
               "$work/burst_given_back" "$sizes" "$later" "$sleeps" "$thread" 4000); then
        echo "ok: $case: $out"
      else
        echo "FAIL: $case under LD_PRELOAD=$lib: ${out:-no output}" >&2
        failures=$((failures + 1))
      fi
    done
  done
done
[ "$failures" -eq 0 ] || exit 1
# The program's calls reach the library: malloc bound to it.
LD_PRELOAD="$lib" LD_DEBUG=bindings LD_DEBUG_OUTPUT="$work/ld" PAGEMALLOC_CONF=decay_ms:0 \
  "$work/burst_given_back" fixed constant 0 same 4000 >/dev/null
expect_malloc_bound_to "$lib" "$work"/ld.*
