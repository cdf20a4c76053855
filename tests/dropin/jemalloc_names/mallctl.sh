#!/usr/bin/env bash
# Drop-in test: jemalloc's names in libpagemalloc_je.so behave as jemalloc's and report
# pagemalloc's heap (tests/dropin/jemalloc_names/mallctl.c, linked with the library).
#
#   bash tests/dropin/jemalloc_names/mallctl.sh path/to/libpagemalloc_je.so
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../binding.bash"

take_library_argument "$@"
make_work_directory
here=$(dirname "$(realpath "${BASH_SOURCE[0]}")")
cc -std=c11 -Wall -Wextra -Werror -I"$here/../../../allocator/include" -o "$work/mallctl" \
  "$here/mallctl.c" "$lib" || { echo "FAIL: mallctl.c does not build against $lib" >&2; exit 1; }
LD_LIBRARY_PATH=$(dirname "$lib") "$work/mallctl"
