#!/usr/bin/env bash
# Drop-in test: jq on the preloaded allocator.
#
#   bash tests/dropin/jq.sh path/to/libpagemalloc.so
#
# Generates a JSON array of 10,000 records (with jq itself, without the preload: the same
# bytes on every run), then runs a filter of group_by, sort_by, string building and
# from_entries over it without and with LD_PRELOAD=$1; both runs must succeed and print the
# same bytes, and the preloaded run must bind malloc to the library.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/binding.bash"

take_library_argument "$@"
jq=$(command -v jq || true)
[ -n "$jq" ] || { echo "FAIL: jq not found (bash tools/install-deps.sh)" >&2; exit 1; }
make_work_directory

"$jq" -n -c '[range(0; 10000) | (. * 7919 % 10007) as $x
  | {id: ., group: "g\($x % 37)", score: ($x * 31 % 1000),
     name: "item-\(.)-\($x)", tags: [range(0; . % 5) | "t\(. * $x % 11)"]}]' >"$work/records.json"

filter='
  { groups: (group_by(.group)
             | map({group: .[0].group, n: length, total: (map(.score) | add),
                    best: (sort_by(-.score, .id) | .[0:3] | map(.name))})
             | sort_by(-.n, .group)),
    tags: ([.[].tags[]] | group_by(.) | map({tag: .[0], n: length}) | sort_by(-.n, .tag)),
    entries: (map({key: "\(.group)/\(.id)", value: (.name | ascii_upcase)}) | from_entries
              | to_entries | length) }'

# Runs the filter under the given environment assignments; stdout goes to file $1.
run() {
  local out=$1; shift
  env "$@" "$jq" -c "$filter" "$work/records.json" >"$out" ||
    { echo "FAIL: jq exited with status $? (env: ${*:-none})" >&2; exit 1; }
}
run "$work/plain.out"
run "$work/preload.out" LD_PRELOAD="$lib"
if ! cmp -s "$work/plain.out" "$work/preload.out"; then
  echo "FAIL: output differs under LD_PRELOAD=$lib" >&2
  cmp "$work/plain.out" "$work/preload.out" >&2 || true
  exit 1
fi

# The loader only warns when a preload fails: check that malloc really binds to the library
# (and never to libc) in every process.
run "$work/bindings.out" LD_PRELOAD="$lib" LD_DEBUG=bindings LD_DEBUG_OUTPUT="$work/ld"
expect_malloc_bound_to "$lib" "$work"/ld.*
name=$(basename -- "$lib")
echo "ok: jq output identical ($(wc -c <"$work/plain.out") bytes), malloc bound to $name"
