#!/usr/bin/env bash
# Drop-in test: the library loads no C++ runtime, and a C++ program's operator new failures
# still go through the program's own.
#
#   bash tests/dropin/cxx_runtime.sh path/to/libpagemalloc.so
#
# - The library needs libc only (readelf's NEEDED entries): libstdc++ with the libm and
#   libgcc_s it brings would add about 1.2 MiB to the resident memory of every C program.
# - A C program under LD_PRELOAD runs with no libstdc++ mapped (/proc/self/maps).
# - tests/dropin/programs/operator_new_failures.cpp prints the same lines with and without
#   the preload: bad_alloc caught by the program, the new-handler called, nullptr from the
#   nothrow forms (also when the handler throws), and std::uncaught_exceptions() at 0.
# - A C program that dlopens a C++ library (whose libstdc++ stays in its local scope) and
#   asks it for too large a block: the library's catch clause gets std::bad_alloc.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/binding.bash"

take_library_argument "$@"
make_work_directory
here=$(dirname "$(realpath "${BASH_SOURCE[0]}")")

needed=$(readelf -d -- "$lib" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' | tr '\n' ' ')
if [ "$needed" != "libc.so.6 " ]; then
  echo "FAIL: $lib needs more than libc.so.6: $needed" >&2
  exit 1
fi

cat >"$work/maps.c" <<'C'
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
int main(void) {
  void* p = malloc(100);
  FILE* maps = fopen("/proc/self/maps", "r");
  char line[4096];
  int found = 0;
  while (maps != NULL && fgets(line, sizeof line, maps) != NULL)
    if (strstr(line, "libstdc++") != NULL || strstr(line, "libgcc_s") != NULL) found = 1;
  printf("%s\n", found ? "C++ runtime mapped" : "no C++ runtime");
  free(p);
  return 0;
}
C
cc -O2 -o "$work/maps" "$work/maps.c"
mapped=$(LD_PRELOAD="$lib" "$work/maps")
if [ "$mapped" != "no C++ runtime" ]; then
  echo "FAIL: a C program under LD_PRELOAD=$lib has the C++ runtime mapped" >&2
  exit 1
fi

c++ -std=c++20 -O2 -Wall -Wextra -Werror -o "$work/operator_new_failures" \
  "$here/programs/operator_new_failures.cpp"
run() {
  local out=$1; shift
  env "$@" "$work/operator_new_failures" >"$out"
}
expect_same_output_with_preload "$lib" "$work"
expected="new: std::bad_alloc
uncaught exceptions after the catch: 0
new[]: std::bad_alloc
aligned new: std::bad_alloc
nothrow new: nullptr
aligned nothrow new: nullptr
new with a handler that gives up: std::bad_alloc, handler calls 1
nothrow new with a handler that throws: nullptr, handler calls 1
uncaught exceptions at the end: 0
new of 100 bytes: a block"
if [ "$(cat "$work/preload.out")" != "$expected" ]; then
  echo "FAIL: operator new's failures under LD_PRELOAD=$lib:" >&2
  diff <(echo "$expected") "$work/preload.out" >&2 || true
  exit 1
fi
cat >"$work/late.cpp" <<'CXX'
#include <new>
extern "C" const char* too_large() {
  try {
    return ::operator new(std::size_t{1} << 62) == nullptr ? "nullptr" : "a block";
  } catch (const std::bad_alloc&) {
    return "std::bad_alloc";
  }
}
CXX
cat >"$work/late_main.c" <<'C'
#include <dlfcn.h>
#include <stdio.h>
int main(int argc, char** argv) {
  void* library = argc == 2 ? dlopen(argv[1], RTLD_NOW) : NULL;
  if (library == NULL) return 2;
  const char* (*too_large)(void) = (const char* (*)(void))dlsym(library, "too_large");
  printf("%s\n", too_large());
  return 0;
}
C
c++ -std=c++20 -O2 -shared -fPIC -o "$work/late.so" "$work/late.cpp"
cc -O2 -o "$work/late_main" "$work/late_main.c"
late=$(LD_PRELOAD="$lib" "$work/late_main" "$work/late.so")
if [ "$late" != "std::bad_alloc" ]; then
  echo "FAIL: a dlopen'ed C++ library under LD_PRELOAD=$lib got '$late', not std::bad_alloc" >&2
  exit 1
fi
echo "ok: needs libc only; operator new's failures as without the preload"
