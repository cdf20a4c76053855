#!/usr/bin/env bash
# Drop-in test: the C interfaces beyond malloc and free.
#
#   bash tests/dropin/c_interfaces.sh path/to/libpagemalloc.so
#
# Builds tests/dropin/c_interfaces.c linked with the library (so that its free_sized,
# free_aligned_sized and mallinfo2 are the library's) and checks:
#   - C23's free_sized and free_aligned_sized free what they are given, with checks off and on
#     (on: the sizes are compared with the blocks', and must match);
#   - free_sized with a wrong size, under checks:true, aborts naming free_sized;
#   - mallinfo2, mallinfo, malloc_stats and malloc_info report pagemalloc's statistics
#     (glibc's would describe its own idle heap), and bind to the library under LD_PRELOAD
#     too;
#   - malloc_trim(0) returns the free pages to the OS (glibc's would trim only its own heap),
#     and binds to the library under LD_PRELOAD too;
#   - glibc's __libc_malloc, __libc_free and their kin are the library's: their blocks are
#     pagemalloc's, freed by either name, and they bind to it under LD_PRELOAD.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/binding.bash"

take_library_argument "$@"
make_work_directory
here=$(dirname "$(realpath "${BASH_SOURCE[0]}")")
include=$here/../../allocator/include
cc -std=c11 -Wall -Wextra -Werror -I"$include" -o "$work/c_interfaces" "$here/c_interfaces.c" \
  "$lib" || { echo "FAIL: c_interfaces.c does not build against $lib" >&2; exit 1; }
program() { LD_LIBRARY_PATH=$(dirname "$lib") "$@"; }

program "$work/c_interfaces" sized
PAGEMALLOC_CONF=checks:true program "$work/c_interfaces" sized
program "$work/c_interfaces" mallinfo
program "$work/c_interfaces" reports >"$work/out" 2>"$work/err"
read -r _ allocated _ mapped < <(grep '^allocated' "$work/out")
for line in "in use bytes     = *$allocated" "system bytes     = *$mapped" "Arena 0:"; do
  if ! grep -qx -- "$line" "$work/err"; then
    echo "FAIL: malloc_stats does not print '$line' (stdout: $(cat "$work/out")); stderr:" >&2
    cat "$work/err" >&2
    exit 1
  fi
done
echo "ok: malloc_stats and malloc_info report pm_stats (allocated $allocated, mapped $mapped)"
program "$work/c_interfaces" trim
program "$work/c_interfaces" libc_names

status=0
PAGEMALLOC_CONF=checks:true program "$work/c_interfaces" mismatch >"$work/out" 2>"$work/err" ||
  status=$?
if [ "$status" -eq 0 ] || ! grep -q 'pagemalloc: free_sized(0x[0-9a-f]*, 5000): size does not match' "$work/err"; then
  echo "FAIL: free_sized with a wrong size under checks:true: status $status, stderr:" >&2
  cat "$work/err" >&2
  exit 1
fi
echo "ok: free_sized with a wrong size aborts: $(head -n 1 "$work/err")"

# Under LD_PRELOAD, in a program not linked with the library, SYMBOL binds to it when MODE runs.
expect_binding_under_preload() {
  local symbol=$1 mode=$2
  LD_PRELOAD=$lib LD_DEBUG=bindings LD_DEBUG_OUTPUT=$work/$mode program "$work/c_interfaces" \
    "$mode" >/dev/null 2>"$work/$mode.stderr"
  if ! cat "$work/$mode".* | grep -F "symbol \`$symbol'" | grep -qF "/$(basename "$lib") ["; then
    echo "FAIL: $symbol does not bind to $(basename "$lib")" >&2
    exit 1
  fi
  echo "ok: $symbol binds to $(basename "$lib")"
}
expect_binding_under_preload mallinfo2 mallinfo
expect_binding_under_preload mallinfo mallinfo
expect_binding_under_preload malloc_stats reports
expect_binding_under_preload malloc_info reports
expect_binding_under_preload malloc_trim trim
expect_binding_under_preload __libc_malloc libc_names
expect_binding_under_preload __libc_free libc_names
