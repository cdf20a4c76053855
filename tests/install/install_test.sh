#!/usr/bin/env bash
# Install test: pagemalloc installed into a fresh prefix, then used from outside as a user would.
#
#   bash tests/install/install_test.sh BUILD_DIR VERSION
#
# Runs `cmake --install BUILD_DIR --prefix TMP`, checks what landed there (the public headers
# and nothing test-only, the shared libraries' SONAME, the package and pkg-config files), then
# builds tests/install/consumer/ twice, as separate projects would:
#   - with CMake, find_package(pagemalloc) and the targets pagemalloc::pagemalloc and
#     pagemalloc::core;
#   - with a bare C compiler and `pkg-config --cflags --libs pagemalloc` (and pagemalloc-core);
# and runs every program, which must check the version and the pm_ API and print "ok".
set -euo pipefail

[ $# -eq 2 ] || { echo "usage: $0 BUILD_DIR VERSION" >&2; exit 2; }
build=$(realpath -e -- "$1")
version=$2
consumer=$(dirname "$(realpath "${BASH_SOURCE[0]}")")/consumer
for tool in cmake pkg-config cc readelf; do
  command -v "$tool" >/dev/null || { echo "FAIL: $tool not found (bash tools/install-deps.sh)" >&2; exit 1; }
done
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
prefix=$work/prefix

fail() { echo "FAIL: $*" >&2; exit 1; }

cmake --install "$build" --prefix "$prefix" >"$work/install.log" ||
  { cat "$work/install.log" >&2; fail "cmake --install"; }

# The headers: exactly the public ones.
headers=$(cd "$prefix/include" && find . -type f | sort | tr '\n' ' ')
[ "$headers" = "./pagemalloc/memory_resource.h ./pagemalloc/pagemalloc.h " ] ||
  fail "installed headers are not exactly the public ones: $headers"
# The libraries, the shared one under its SONAME.
libdir=$(dirname "$(find "$prefix" -name libpagemalloc_core.a | head -n 1)")
[ -f "$libdir/libpagemalloc_core.a" ] || fail "libpagemalloc_core.a not installed"
soname=$(readelf -d "$libdir/libpagemalloc.so" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
major_minor=$(cut -d. -f1-2 <<<"$version")
[ "$soname" = "libpagemalloc.so.$major_minor" ] || fail "SONAME is '$soname', not libpagemalloc.so.$major_minor"
[ -e "$libdir/$soname" ] || fail "$soname is not installed beside libpagemalloc.so"
for file in cmake/pagemalloc/pagemallocConfig.cmake cmake/pagemalloc/pagemallocConfigVersion.cmake \
            pkgconfig/pagemalloc.pc pkgconfig/pagemalloc-core.pc; do
  [ -f "$libdir/$file" ] || fail "$file not installed in $libdir"
done

# 1. CMake: find_package(pagemalloc 0.1) from a separate project.
cmake -S "$consumer" -B "$work/cmake" -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_BUILD_TYPE=Release \
  >"$work/configure.log" 2>&1 || { cat "$work/configure.log" >&2; fail "find_package(pagemalloc)"; }
cmake --build "$work/cmake" >"$work/build.log" 2>&1 ||
  { cat "$work/build.log" >&2; fail "building the consumer of the CMake package"; }
"$work/cmake/shared_consumer" "$version" dropin
"$work/cmake/core_consumer" "$version" core
"$work/cmake/resource_consumer"

# 2. pkg-config, from a bare C compiler.
export PKG_CONFIG_PATH=$libdir/pkgconfig
[ "$(pkg-config --modversion pagemalloc)" = "$version" ] || fail "pkg-config --modversion pagemalloc"
# shellcheck disable=SC2046  # the flags are words
cc -o "$work/pc_shared" "$consumer/consumer.c" $(pkg-config --cflags --libs pagemalloc) ||
  fail "cc consumer.c \$(pkg-config --cflags --libs pagemalloc)"
# shellcheck disable=SC2046
cc -o "$work/pc_core" "$consumer/consumer.c" $(pkg-config --cflags --libs pagemalloc-core) ||
  fail "cc consumer.c \$(pkg-config --cflags --libs pagemalloc-core)"
LD_LIBRARY_PATH=$libdir "$work/pc_shared" "$version" dropin
"$work/pc_core" "$version" core
echo "ok: installed into a prefix; find_package and pkg-config consumers built and ran"
