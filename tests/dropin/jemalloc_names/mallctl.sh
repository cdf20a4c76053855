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
# The heap profiler's names (prof.dump, prof.active, opt.prof*), with prof:true.
LD_LIBRARY_PATH=$(dirname "$lib") PAGEMALLOC_CONF=prof:true,prof_sample:4096,prof_prefix:"$work/je" \
  "$work/mallctl" prof "$work"
ls "$work"/je.*.m.heap >/dev/null 2>&1 ||
  { echo "FAIL: mallctl(\"prof.dump\") with no path wrote no $work/je.PID.SEQ.m.heap" >&2; exit 1; }
