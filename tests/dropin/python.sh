#!/usr/bin/env bash
# Drop-in test: Debian's Python on the preloaded allocator.
#
#   bash tests/dropin/python.sh path/to/libpagemalloc.so
#
# Runs a small allocation-heavy Python program with PYTHONMALLOC=malloc (so every object goes
# through malloc, not pymalloc) without and with LD_PRELOAD=$1; both runs must succeed and
# print the same bytes, and the preloaded run must bind malloc to the library.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/binding.bash"

take_library_argument "$@"
python=/usr/bin/python3   # Debian's interpreter; python3 on PATH may be a pyenv shim
[ -x "$python" ] || { echo "FAIL: $python not found (apt-get install python3)" >&2; exit 1; }
make_work_directory

program='print(sum(len(str(i)) for i in range(10**6)))'
export PYTHONMALLOC=malloc

# Runs the program under the given environment assignments; stdout goes to file $1.
run() {
  local out=$1; shift
  env "$@" "$python" -c "$program" >"$out" ||
    { echo "FAIL: python exited with status $? (env: ${*:-none})" >&2; exit 1; }
}
expect_same_output_with_preload "$lib" "$work"
name=$(basename -- "$lib")
echo "ok: python output identical ($(cat "$work/plain.out")), malloc bound to $name"
