#!/usr/bin/env bash
# Drop-in test: a C program bumps blocks from a bump arena through the header's inline path.
#
#   bash tests/dropin/c_bump_cursor.sh path/to/libpagemalloc.so
#
# Builds tests/dropin/programs/bump_cursor.c as C99 with -pedantic -Werror, linked with the
# library, and runs it: its blocks must be distinct, aligned and counted (the program says
# which check failed).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/binding.bash"

take_library_argument "$@"
make_work_directory
here=$(dirname "$(realpath "${BASH_SOURCE[0]}")")
cc -std=c99 -pedantic -Wall -Wextra -Werror -O2 -I"$here/../../allocator/include" \
  -o "$work/bump_cursor" "$here/programs/bump_cursor.c" "$lib" ||
  { echo "FAIL: bump_cursor.c does not build against $lib" >&2; exit 1; }
LD_LIBRARY_PATH=$(dirname "$lib") "$work/bump_cursor"
