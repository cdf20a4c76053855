#!/usr/bin/env bash
# Runs pagemalloc's whole test suite; exits non-zero if anything fails.
#
#   bash tools/test.sh            (from any directory; as root or with sudo for missing packages)
#
# Installs missing Debian packages, then configures, builds and tests eight trees (see
# CMakePresets.json):
#   build/release    Release: every test, including the LD_PRELOAD drop-in tests of real programs
#   build/hybrid     the same with the hybrid run manager (PAGEMALLOC_RUNS=hybrid)
#   build/rbtree     the same with the rbtree run manager (PAGEMALLOC_RUNS=rbtree)
#   build/je2008-trees, build/je2008-fixed, build/je2008-pagemap
#                    the same, every test, in the 2008 design (PAGEMALLOC_PRESET: no thread
#                    caches, one arena, slabs up to 2 KiB) with each run manager
#                    (hybrid, rbtree and je2008-pagemap leave out the suites of the run-manager
#                    layer alone, which release and je2008-trees build with the same chunk size
#                    and counters: tests/CMakeLists.txt)
#   build/sanitize   RelWithDebInfo with ASan+UBSan: every googletest suite (labels `unit`, `api`,
#                    `threads`, `process`: the folders of tests/)
#   build/tsan       RelWithDebInfo with ThreadSanitizer: the threaded tests (label `threads`,
#                    the only ones this tree builds), run with address-space randomization off
#                    when the system allows it (GCC 12's ThreadSanitizer stops with "unexpected
#                    memory mapping" on kernels that randomize mmap over more bits)
# A tree that fails to build is reported and the next tree still runs. Prints a line per tree
# and `N passed, N failed` over all of them. Environment: JOBS (parallel build and test jobs,
# default 2); PAGEMALLOC_TEST_SEED and PAGEMALLOC_STRESS_SCALE reach the tests.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
bash tools/install-deps.sh
jobs=${JOBS:-2}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1}

summaries=()
total_passed=0
total_failed=0
failed=0

# Runs the tests of the next trees through this command, if any.
test_launcher=()

# Configures, builds and tests one tree. $1: the preset (and build/ folder) name; the rest:
# extra ctest arguments.
run_tree() {
  local tree=$1; shift
  local dir=build/$tree log=build/$tree/ctest.log started=$SECONDS
  echo "==== $tree: configure and build ($dir)"
  if ! cmake --preset "$tree" || ! cmake --build "$dir" -j "$jobs"; then
    summaries+=("$tree: BUILD FAILED")
    failed=1
    return
  fi
  echo "==== $tree: test"
  local status=0 summary_index=${#summaries[@]}
  "${test_launcher[@]}" ctest --test-dir "$dir" --output-on-failure --no-tests=error \
    -j "$jobs" --timeout 900 "$@" </dev/null 2>&1 | tee "$log" || status=$?
  # ctest ends with "NN% tests passed, F tests failed out of T".
  local line passed=0 failures=0
  line=$(grep -E '^[0-9]+% tests passed, [0-9]+ tests? failed out of [0-9]+' "$log" | tail -n 1 || true)
  if [ -n "$line" ]; then
    failures=$(sed -E 's/.* ([0-9]+) tests? failed out of.*/\1/' <<<"$line")
    passed=$(( $(sed -E 's/.* out of ([0-9]+).*/\1/' <<<"$line") - failures ))
  fi
  total_passed=$((total_passed + passed))
  total_failed=$((total_failed + failures))
  if [ "$status" -ne 0 ] || [ -z "$line" ]; then
    failed=1
    summaries+=("$tree: FAILED, $passed passed, $failures failed (ctest status $status)")
    # ctest lists the failed tests after "The following tests FAILED:"; the summary repeats
    # them, so that the end of the output names what failed.
    while IFS= read -r test_line; do
      summaries+=("  $tree:$test_line")
    done < <(sed -n '/^The following tests FAILED:/,/^Errors while running/p' "$log" |
             grep -E '^[[:space:]]+[0-9]+ - ' || true)
    # and the first lines in which the failed tests said why (a drop-in test's "FAIL: ...",
    # googletest's "...: Failure" and the line after it), since a long log may be cut.
    while IFS= read -r why_line; do
      summaries+=("    $why_line")
    done < <(grep -E -A1 '^FAIL|: Failure$' "$log" | grep -v '^--$' | head -n 10 || true)
  else
    summaries+=("$tree: ok, $passed passed, $failures failed")
  fi
  summaries[$summary_index]+=" in $(( (SECONDS - started) / 60 )) min $(( (SECONDS - started) % 60 )) s"
  echo "==== ${summaries[$summary_index]}"
}

run_tree release
run_tree hybrid
run_tree rbtree
run_tree je2008-trees
run_tree je2008-fixed
run_tree je2008-pagemap
run_tree sanitize --label-regex '^(unit|api|threads|process)$'
if setarch "$(uname -m)" -R true 2>/dev/null; then
  test_launcher=(setarch "$(uname -m)" -R)
fi
run_tree tsan --label-regex '^threads$'

echo "==== summary"
printf '%s\n' "${summaries[@]}"
echo "$total_passed passed, $total_failed failed in $((SECONDS / 60)) min"
if [ "$failed" -ne 0 ]; then
  echo "TESTS FAILED"
  exit 1
fi
echo "all tests passed"
