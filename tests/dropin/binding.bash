# Sourced by the drop-in tests (not a test itself: ctest runs tests/dropin/*.sh only).
#
#   take_library_argument "$@"   sets lib to the absolute path of the test's one argument
#   make_work_directory          sets work to a fresh directory, removed when the test exits
#   expect_malloc_bound_to LIB LD_DEBUG_FILES...
#   expect_same_output_with_preload LIB WORK_DIR
#
# The loader only warns when a preload fails, so each test runs its program once more with
# LD_DEBUG=bindings and checks that malloc bound to LIB, and never to libc, in every process.
expect_malloc_bound_to() {
  local lib=$1; shift
  local name malloc_lines
  name=$(basename -- "$lib")
  # One record per binding, cut out of its line: processes forked with the same LD_DEBUG_OUTPUT
  # file write to it at once, and a record's tail may land after another process's record.
  malloc_lines=$(cat "$@" | grep -oE "binding file [^ ]+ \[[0-9]+\] to [^ ]+ \[[0-9]+\]: normal symbol \`malloc'" || true)
  if ! grep -qF "/$name [" <<<"$malloc_lines"; then
    echo "FAIL: malloc does not bind to $name under LD_PRELOAD" >&2
    exit 1
  fi
  if grep -q ' to [^ ]*/libc\.so[^ ]* \[' <<<"$malloc_lines"; then
    echo "FAIL: malloc still binds to libc under LD_PRELOAD=$lib:" >&2
    grep ' to [^ ]*/libc\.so' <<<"$malloc_lines" | head -n 5 >&2
    exit 1
  fi
}

# Calls the test's own `run OUT [ENV=VALUE...]` (its program, stdout to OUT) three times:
# without the preload and with it, whose outputs must be the same bytes, and with
# LD_DEBUG=bindings, where malloc must bind to LIB in every process.
expect_same_output_with_preload() {
  local lib=$1 work=$2
  run "$work/plain.out"
  run "$work/preload.out" LD_PRELOAD="$lib"
  if ! cmp -s "$work/plain.out" "$work/preload.out"; then
    echo "FAIL: output differs under LD_PRELOAD=$lib" >&2
    diff "$work/plain.out" "$work/preload.out" | head -n 20 >&2
    exit 1
  fi
  run "$work/bindings.out" LD_PRELOAD="$lib" LD_DEBUG=bindings LD_DEBUG_OUTPUT="$work/ld"
  expect_malloc_bound_to "$lib" "$work"/ld.*
}

take_library_argument() {
  [ $# -eq 1 ] || { echo "usage: $0 path/to/libpagemalloc.so" >&2; exit 2; }
  lib=$(realpath -e -- "$1") || { echo "FAIL: no such library: $1" >&2; exit 1; }
}

make_work_directory() {
  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT
}
