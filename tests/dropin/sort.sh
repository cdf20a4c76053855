#!/usr/bin/env bash
# Drop-in test: coreutils sort on the preloaded allocator.
#
#   bash tests/dropin/sort.sh path/to/libpagemalloc.so
#
# Generates a seeded file of 200,000 random lines, sorts it as text and numerically, without
# and with LD_PRELOAD=$1; every run must succeed, the outputs must be identical byte for byte,
# and the preloaded run must bind malloc to the library.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/binding.bash"

take_library_argument "$@"
for tool in sort awk cmp; do
  command -v "$tool" >/dev/null || { echo "FAIL: $tool not found" >&2; exit 1; }
done
make_work_directory
export LC_ALL=C   # the same collation in every run, whatever the caller's locale

# Lines of varied length: a number of 1 to 9 digits, then 1 to 40 random letters.
awk 'BEGIN {
  srand(20240521)
  for (i = 0; i < 200000; i++) {
    line = int(rand() * 10 ^ int(1 + rand() * 9)) " "
    n = 1 + int(rand() * 40)
    for (j = 0; j < n; j++) line = line sprintf("%c", 97 + int(rand() * 26))
    print line
  }
}' >"$work/input"

# Runs sort with the given flags under the given environment assignments; stdout to file $1.
run() {
  local out=$1 flags=$2; shift 2
  env "$@" sort ${flags:+"$flags"} "$work/input" >"$out" ||
    { echo "FAIL: sort${flags:+ $flags} exited with status $? (env: ${*:-none})" >&2; exit 1; }
}
for flags in "" "-n"; do
  run "$work/plain.out" "$flags"
  run "$work/preload.out" "$flags" LD_PRELOAD="$lib"
  if ! cmp -s "$work/plain.out" "$work/preload.out"; then
    echo "FAIL: sort${flags:+ $flags} output differs under LD_PRELOAD=$lib" >&2
    cmp "$work/plain.out" "$work/preload.out" >&2 || true
    exit 1
  fi
done
[ "$(wc -l <"$work/preload.out")" -eq 200000 ] || { echo "FAIL: sort lost lines" >&2; exit 1; }

# The loader only warns when a preload fails: check that malloc really binds to the library
# (and never to libc) in every process.
run "$work/bindings.out" "-n" LD_PRELOAD="$lib" LD_DEBUG=bindings LD_DEBUG_OUTPUT="$work/ld"
expect_malloc_bound_to "$lib" "$work"/ld.*
name=$(basename -- "$lib")
echo "ok: sort and sort -n of 200000 lines identical, malloc bound to $name"
