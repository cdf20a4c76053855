#!/usr/bin/env bash
# The design options (cmake/design.cmake): a value outside an option's list stops the
# configuration with a message that names the option and the values it takes; a value in
# the list reaches the generated headers. Configures the source tree into temporary build
# trees, the library alone (no tests, no benchmarks).
#   $1: the source tree
set -u
source_dir=$1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
failures=0

configure() {  # $1: build dir name; the rest: -D options
  local dir=$work/$1
  shift
  cmake -S "$source_dir" -B "$dir" -DPAGEMALLOC_BUILD_TESTS=OFF -DPAGEMALLOC_BUILD_BENCHMARKS=OFF \
        "$@" > "$dir.log" 2>&1
}

# $1: option, $2: bad value, $3: what the message must say
expect_refused() {
  if configure "bad-$1" "-D$1=$2"; then
    echo "FAIL: $1=$2 was accepted"; failures=$((failures + 1)); return
  fi
  if ! grep -q -- "$3" "$work/bad-$1.log"; then
    echo "FAIL: $1=$2: the error does not say '$3':"; cat "$work/bad-$1.log"
    failures=$((failures + 1))
  fi
}

expect_refused PAGEMALLOC_PRESET je2009 "PAGEMALLOC_PRESET=je2009: unknown"
expect_refused PAGEMALLOC_RUNS splay "PAGEMALLOC_RUNS=splay: unknown"
expect_refused PAGEMALLOC_MAX_SMALL_SIZE 4096 "PAGEMALLOC_MAX_SMALL_SIZE=4096: use one of 2048 16384"
expect_refused PAGEMALLOC_ARENAS many "PAGEMALLOC_ARENAS=many"
expect_refused PAGEMALLOC_MAX_MEDIUM_SIZE 300000 "PAGEMALLOC_MAX_MEDIUM_SIZE=300000: use one of 0 262144"
expect_refused PAGEMALLOC_MEDIUM_SPACING 3 "PAGEMALLOC_MEDIUM_SPACING=3: use one of 0 4 8 16"
expect_refused PAGEMALLOC_CHUNK_SIZE 4194304 "PAGEMALLOC_CHUNK_SIZE=4194304: use one of 1048576 2097152"

# A chunk size in the list reaches both generated headers; the preset's when none is given.
check_chunk() {  # $1: build dir name, $2: the lg size expected; the rest: -D options
  local name=$1 lg=$2
  shift 2
  if ! configure "$name" "$@"; then
    echo "FAIL: $*: refused"; cat "$work/$name.log"; failures=$((failures + 1)); return
  fi
  grep -q "kLgChunkSize = $lg;" "$work/$name/generated/pagemap/chunk_size.h" ||
    { echo "FAIL: $*: chunk_size.h lacks kLgChunkSize = $lg"; failures=$((failures + 1)); }
}
check_chunk default 21
check_chunk one-mib 20 -DPAGEMALLOC_CHUNK_SIZE=1048576
check_chunk je2008 20 -DPAGEMALLOC_PRESET=je2008-trees
check_chunk je2008-two-mib 21 -DPAGEMALLOC_PRESET=je2008-trees -DPAGEMALLOC_CHUNK_SIZE=2097152
grep -q "static constexpr std::size_t kLgChunkSize = 21;" \
  "$work/je2008-two-mib/generated/build_config.h" ||
  { echo "FAIL: build_config.h does not override the preset's chunk size"; failures=$((failures + 1)); }

[ "$failures" -eq 0 ] && echo "design options: ok"
exit $((failures != 0))
