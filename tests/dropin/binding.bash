# Sourced by the drop-in tests (not a test itself: ctest runs tests/dropin/*.sh only).
#
#   expect_malloc_bound_to LIB LD_DEBUG_FILES...
#
# The loader only warns when a preload fails, so each test runs its program once more with
# LD_DEBUG=bindings and checks that malloc bound to LIB, and never to libc, in every process.
expect_malloc_bound_to() {
  local lib=$1; shift
  local name malloc_lines
  name=$(basename -- "$lib")
  malloc_lines=$(cat "$@" | grep -F "symbol \`malloc'" || true)
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
