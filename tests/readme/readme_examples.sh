#!/usr/bin/env bash
# README test: every code block of README.md that is a whole program compiles and runs.
#
#   bash tests/readme/readme_examples.sh README.md INCLUDE_DIR path/to/libpagemalloc.so
#
# A whole program is a ```c or ```cpp block that defines main. Each is compiled (C with cc
# -std=c11, C++ with c++ -std=c++20, warnings as errors) against the public headers in
# INCLUDE_DIR and linked with the library, then run; it must exit 0. Blocks without main
# (declarations, fragments) are left alone. The test fails when the README holds no program,
# so that a change to the markers cannot make it pass by finding nothing.
set -euo pipefail

[ $# -eq 3 ] || { echo "usage: $0 README.md INCLUDE_DIR path/to/libpagemalloc.so" >&2; exit 2; }
readme=$(realpath -e -- "$1")
name=$(basename -- "$readme")
include=$(realpath -e -- "$2")
lib=$(realpath -e -- "$3")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# Writes block N (in order of appearance) to $work/block-N.c or .cpp; records its first line.
awk -v dir="$work" '
  /^```(c|cpp)[[:space:]]*$/ && !inside { inside = 1; n++; ext = substr($0, 4); sub(/[[:space:]]+$/, "", ext)
                                          file = dir "/block-" n "." ext; print NR > (dir "/block-" n ".line"); next }
  /^```/ && inside { inside = 0; close(file); next }
  inside { print > file }
' "$readme"

programs=0
status=0
for source in "$work"/block-*.c "$work"/block-*.cpp; do
  [ -e "$source" ] || continue
  grep -qE '^int main\(' "$source" || continue
  programs=$((programs + 1))
  line=$(cat "${source%.*}.line")
  exe=${source%.*}.exe
  case $source in
    *.c) compile=(cc -std=c11 -Wall -Wextra -Werror) ;;
    *.cpp) compile=(c++ -std=c++20 -Wall -Wextra -Werror) ;;
  esac
  if ! "${compile[@]}" -I"$include" -o "$exe" "$source" "$lib" 2>"$work/compile.log"; then
    echo "FAIL: the program at $name line $line does not compile:" >&2
    cat "$work/compile.log" >&2
    status=1
    continue
  fi
  if ! output=$(LD_LIBRARY_PATH=$(dirname "$lib") "$exe" 2>&1); then
    echo "FAIL: the program at $name line $line exited non-zero: $output" >&2
    status=1
    continue
  fi
  echo "ok: $name line $line: $output"
done
if [ "$programs" -eq 0 ]; then
  echo "FAIL: no whole program (a \`\`\`c or \`\`\`cpp block with main) found in $readme" >&2
  exit 1
fi
[ "$status" -eq 0 ] && echo "ok: $programs README programs compiled and ran"
exit "$status"
