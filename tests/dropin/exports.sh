#!/usr/bin/env bash
# Drop-in test: the library exports exactly its interface.
#
#   bash tests/dropin/exports.sh path/to/libpagemalloc.so
#   PAGEMALLOC_JEMALLOC_NAMES=1 bash tests/dropin/exports.sh path/to/libpagemalloc_je.so
#
# The dynamic symbol table must hold every entry point a program may call (the pm_ API, the
# standard allocation functions with C23's free_sized and free_aligned_sized, mallinfo2,
# mallinfo, malloc_stats, malloc_info, malloc_trim, glibc's __libc_ names for them, every
# operator new and delete) and nothing else: a stray export (the fmt the library is built
# with, the allocator's own C++ code) could take the place of a program's symbol of the same
# name, or bind the library to the program's copy. With PAGEMALLOC_JEMALLOC_NAMES=1 the
# interface also holds jemalloc's names (libpagemalloc_je.so).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/binding.bash"

take_library_argument "$@"

exported=$(nm -D --defined-only -- "$lib" | awk '{print $3}' | sort)
required="aligned_alloc calloc free malloc malloc_usable_size memalign posix_memalign pvalloc
realloc reallocarray valloc free_sized free_aligned_sized mallinfo2 malloc_trim mallinfo
malloc_stats malloc_info __libc_malloc __libc_free __libc_calloc __libc_realloc __libc_memalign
__libc_valloc __libc_pvalloc
pm_malloc pm_calloc pm_realloc pm_free pm_posix_memalign
pm_aligned_alloc pm_memalign pm_malloc_usable_size pm_mallocx pm_rallocx pm_xallocx pm_sallocx
pm_dallocx pm_sdallocx pm_nallocx pm_arena_create pm_arena_create_ex pm_arena_reset
pm_arena_destroy pm_arena_stats_get pm_arena_bump pm_arena_bump_flush pm_arena_bump_free
pm_stats_get
pm_stats_print pm_purge pm_ctl pm_prof_dump pm_version
_Znwm _Znam _ZnwmRKSt9nothrow_t _ZnamRKSt9nothrow_t _ZnwmSt11align_val_t _ZnamSt11align_val_t
_ZnwmSt11align_val_tRKSt9nothrow_t _ZnamSt11align_val_tRKSt9nothrow_t
_ZdlPv _ZdaPv _ZdlPvRKSt9nothrow_t _ZdaPvRKSt9nothrow_t _ZdlPvm _ZdaPvm
_ZdlPvSt11align_val_t _ZdaPvSt11align_val_t _ZdlPvmSt11align_val_t _ZdaPvmSt11align_val_t
_ZdlPvSt11align_val_tRKSt9nothrow_t _ZdaPvSt11align_val_tRKSt9nothrow_t"
if [ "${PAGEMALLOC_JEMALLOC_NAMES:-0}" = 1 ]; then
  required="$required mallocx rallocx xallocx sallocx dallocx sdallocx nallocx mallctl
malloc_stats_print"
fi

status=0
for symbol in $required; do
  if ! grep -qxF -- "$symbol" <<<"$exported"; then
    echo "FAIL: $symbol is not exported" >&2
    status=1
  fi
done
stray=$(grep -vxF -f <(tr -s ' \n' '\n' <<<"$required") <<<"$exported" || true)
if [ -n "$stray" ]; then
  echo "FAIL: exported beyond the interface ($(wc -l <<<"$stray") symbols), e.g.:" >&2
  head -n 10 <<<"$stray" | c++filt >&2
  status=1
fi
[ "$status" -eq 0 ] && echo "ok: $(wc -l <<<"$exported") symbols, exactly the interface"
exit "$status"
