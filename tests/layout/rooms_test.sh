#!/usr/bin/env bash
# The rooms' include rule (allocator/src/README.md), and that its check can fail.
#
#   bash tests/layout/rooms_test.sh SOURCE_DIR
#
# Runs tools/check_rooms.py on the source tree's allocator/src, which must keep the rule. Then,
# on copies of allocator/src, it breaks the rule three ways and expects the check to refuse
# each, naming the file: a declarations file of a low room (support/lock.h) including a
# higher room's header (heap/heap.h), an include that names no room, and a definitions file
# including another room's definitions.
set -euo pipefail

[ $# -eq 1 ] || { echo "usage: $0 SOURCE_DIR" >&2; exit 2; }
source_dir=$(realpath -e -- "$1")
check=(python3 "$source_dir/tools/check_rooms.py")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

"${check[@]}" "$source_dir/allocator/src"

# expect_refused NAME FILE LINE: a copy with LINE appended to FILE must fail the check, and
# the check must name FILE.
expect_refused() {
  local name=$1 file=$2 line=$3 copy=$work/$1
  cp -r "$source_dir/allocator/src" "$copy"
  printf '%s\n' "$line" >>"$copy/$file"
  local status=0
  "${check[@]}" "$copy" >"$work/$name.out" 2>&1 || status=$?
  if [ "$status" -ne 1 ] || ! grep -q "^$file:" "$work/$name.out"; then
    echo "FAIL: $name: the check did not refuse $file (status $status):"
    cat "$work/$name.out"
    exit 1
  fi
  echo "refused as expected ($name): $(grep "^$file:" "$work/$name.out" | head -n 1)"
}

expect_refused upward support/lock.h '#include "heap/heap.h"'
expect_refused no_room arena/slab.h '#include "lock.h"'
expect_refused definitions process/decay_impl.h '#include "arena/arena_impl.h"'
echo "rooms: the rule holds, and each breach is refused"
