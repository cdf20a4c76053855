#!/usr/bin/env bash
# Drop-in test: part of CPython's own regression suite on the preloaded allocator.
#
#   bash tests/dropin/python_regrtest.sh path/to/libpagemalloc.so
#
# Runs Debian's Python 3.11 test suite (package libpython3.11-testsuite) for the modules where
# an allocator shows: threads started and ended by the hundred, fork and subprocess (a child
# that allocates in whatever state the parent's other threads left the heap), signals that
# interrupt allocating code, the cyclic garbage collector and weak references freeing in
# unusual orders, mmap and ctypes buffers, tracemalloc's hooks, and the containers that grow
# by realloc. PYTHONMALLOC=malloc sends every object through malloc (not pymalloc's pools),
# and regrtest's worker processes and the children the tests start inherit LD_PRELOAD. Every
# test module must pass; a run with LD_DEBUG=bindings checks that malloc binds to the library.
#
# Left out: modules the Debian package does not ship (test_capi, test_sqlite3) and those that
# need the network or a terminal. test_concurrent_futures, which waits on its pools most of
# its 2-3 minutes, sets the run's length; regrtest runs two modules at a time.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/binding.bash"

take_library_argument "$@"
python=/usr/bin/python3   # Debian's interpreter; python3 on PATH may be a pyenv shim
[ -x "$python" ] || { echo "FAIL: $python not found (apt-get install python3)" >&2; exit 1; }
if ! "$python" -c 'import test.libregrtest' 2>/dev/null; then
  echo "FAIL: CPython's test suite not installed (apt-get install libpython3.11-testsuite)" >&2
  exit 1
fi
make_work_directory

modules=(
  test_thread test_threading test_threading_local test_threadedtempfile test_queue
  test_concurrent_futures test_fork1 test_wait4 test_subprocess test_os test_signal
  test_faulthandler test_gc test_weakref test_tracemalloc test_sys test_mmap test_ctypes
  test_dict test_list test_set test_deque test_bytes test_unicode test_io test_re test_pickle
  test_decimal test_zlib
)

export PYTHONMALLOC=malloc
status=0
( cd "$work" && LD_PRELOAD="$lib" "$python" -m test -j2 --timeout 600 "${modules[@]}" ) \
  >"$work/regrtest.out" 2>&1 || status=$?
if [ "$status" -ne 0 ]; then
  echo "FAIL: CPython's regression tests failed under LD_PRELOAD=$lib (status $status):" >&2
  grep -E 'failed|crashed|timed out|Tests result' "$work/regrtest.out" | head -n 20 >&2
  tail -n 40 "$work/regrtest.out" >&2
  exit 1
fi
if ! grep -qE '^(All )?[0-9]* tests OK\.' "$work/regrtest.out"; then
  echo "FAIL: regrtest exited 0 without reporting its tests OK" >&2
  tail -n 20 "$work/regrtest.out" >&2
  exit 1
fi

LD_PRELOAD="$lib" LD_DEBUG=bindings LD_DEBUG_OUTPUT="$work/ld" "$python" -c 'import test.support' \
  >/dev/null
expect_malloc_bound_to "$lib" "$work"/ld.*
echo "ok: CPython's regression tests passed, ${#modules[@]} modules, malloc bound to $(basename -- "$lib")"
