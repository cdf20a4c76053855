#!/usr/bin/env bash
# Installs the Debian 12 packages that pagemalloc's build, tests and study need.
#
#   bash tools/install-deps.sh [PACKAGE...]
#
# Arguments name packages wanted beyond the usual ones (tools/fuzz.sh: clang-14 and libFuzzer).
# Checks each package with `dpkg -s`; when some are missing, runs `apt-get update` once and
# `apt-get install -y` with only the missing ones (through sudo unless already root). When
# everything is installed it does nothing and needs no privileges.
set -euo pipefail

packages=(
  build-essential cmake                          # compiler, make, CMake
  libgtest-dev libgmock-dev                      # googletest
  libbenchmark-dev                               # Google Benchmark
  libfmt-dev                                     # fmt
  libjemalloc-dev libmimalloc-dev                # peers in the benchmarks; jeprof (heap profiles)
  graphviz                                       # jeprof --svg: the heap profiles' call graphs
  libgoogle-perftools-dev                        # tcmalloc, a peer
  python3 python3-matplotlib                     # the study's summary and figures
  coreutils binutils diffutils mawk              # the drop-in tests: sort, nm, cmp, awk
  perl lua5.4 ruby sqlite3 jq                    # real programs: drop-in tests, benchmarks/real_programs
  libpython3.11-testsuite                        # CPython's regression tests: a drop-in test
  stress-ng                                      # stress-ng's malloc, fork and thread stressors: a drop-in test
  duktape mujs                                   # JavaScript engines: the tree-overhead study
  redis-server redis-tools                       # real programs: redis-server, redis-cli, redis-benchmark
  libjemalloc2 g++                               # real programs: jemalloc preload, the g++ compile
  valgrind                                       # the study's fast-path instruction counts (callgrind)
  linux-perf                                     # the study's profiles of the real programs
  pkg-config                                     # the install test: a consumer built by pkg-config
  clang-format                                   # the format check (tests/layout/format_test.sh)
  "$@"
)

missing=()
for package in "${packages[@]}"; do
  if ! dpkg -s "$package" 2>/dev/null | grep -q '^Status: install ok installed'; then
    missing+=("$package")
  fi
done
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi

echo "install-deps: installing ${missing[*]}"
if [ "$(id -u)" -eq 0 ]; then
  as_root=()
elif command -v sudo >/dev/null 2>&1; then
  as_root=(sudo)
else
  echo "install-deps: missing packages (${missing[*]}); run as root or install sudo" >&2
  exit 1
fi
"${as_root[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update </dev/null
"${as_root[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y "${missing[@]}" </dev/null
