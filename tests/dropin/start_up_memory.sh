#!/usr/bin/env bash
# Drop-in test: what loading the library and a first malloc cost a C program in resident
# memory.
#
#   bash tests/dropin/start_up_memory.sh path/to/libpagemalloc.so
#
# - The library's .data (initialized writable data, mapped from its file) is at most 4 KiB:
#   the heap's static storage is all zero until the first allocation constructs it, so it lies
#   in .bss (anonymous pages, resident only where touched). In .data, the kernel maps its
#   pages from the file in large folios: some 120 KiB resident before any allocation.
# - A C program that allocates one block and reads its own resident size (/proc/self/statm)
#   has at most 640 KiB more resident under LD_PRELOAD than without: the library's own pages,
#   its first chunk's touched pages, one thread cache's touched slots (measured on Debian 12,
#   x86-64: about 320 KiB; with libstdc++, libm and libgcc_s loaded it was about 1.9 MiB).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/binding.bash"

take_library_argument "$@"
make_work_directory

data_hex=$(readelf -SW -- "$lib" | sed -n 's/.*\] \.data  *PROGBITS  *[0-9a-f]*  *[0-9a-f]*  *\([0-9a-f]*\) .*/\1/p')
data_bytes=$((16#${data_hex:-0}))
if [ -z "$data_hex" ] || [ "$data_bytes" -gt 4096 ]; then
  echo "FAIL: $lib has ${data_bytes:-no} bytes of .data (at most 4096 expected)" >&2
  exit 1
fi

cat >"$work/first_malloc.c" <<'C'
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
int main(void) {
  char* volatile p = malloc(100);
  p[0] = 1;
  unsigned long size = 0, resident = 0;
  FILE* statm = fopen("/proc/self/statm", "r");
  if (statm == NULL || fscanf(statm, "%lu %lu", &size, &resident) != 2) return 1;
  printf("%lu\n", resident * (unsigned long)sysconf(_SC_PAGESIZE) / 1024);
  free(p);
  return 0;
}
C
cc -O2 -o "$work/first_malloc" "$work/first_malloc.c"
plain=$("$work/first_malloc")
preloaded=$(LD_PRELOAD="$lib" "$work/first_malloc")
extra=$((preloaded - plain))
if [ "$extra" -gt 640 ]; then
  echo "FAIL: one malloc under LD_PRELOAD=$lib: $preloaded KiB resident, $plain KiB without" \
    "(+$extra KiB, at most 640 expected)" >&2
  exit 1
fi
echo "ok: .data $data_bytes bytes; one malloc +$extra KiB resident ($preloaded against $plain)"
