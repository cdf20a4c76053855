#!/usr/bin/env bash
# Drop-in test: GCC's C++ compiler on the preloaded allocator.
#
#   bash tests/dropin/gxx.sh path/to/libpagemalloc.so
#
# Compiles a small C++ file (std::map, std::string, std::vector) with `g++ -O2 -c` without and
# with LD_PRELOAD=$1 (the driver, cc1plus and as all run on the library); both compiles must
# succeed and the object files must be identical byte for byte, and malloc must bind to the
# library.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/binding.bash"

take_library_argument "$@"
for tool in g++ cmp; do
  command -v "$tool" >/dev/null || { echo "FAIL: $tool not found" >&2; exit 1; }
done
make_work_directory

cat >"$work/words.cpp" <<'CPP'
#include <algorithm>
#include <map>
#include <sstream>
#include <string>
#include <vector>

// Counts the words of a text and returns them by falling frequency.
std::vector<std::pair<std::string, int>> rank_words(const std::string& text) {
  std::map<std::string, int> counts;
  std::istringstream in(text);
  for (std::string word; in >> word;) ++counts[word];
  std::vector<std::pair<std::string, int>> ranked(counts.begin(), counts.end());
  std::stable_sort(ranked.begin(), ranked.end(),
                   [](const auto& a, const auto& b) { return a.second > b.second; });
  return ranked;
}
CPP

# Compiles words.cpp to the object file $1 under the given environment assignments.
run() {
  local out=$1; shift
  (cd "$work" && env "$@" g++ -std=c++20 -O2 -frandom-seed=words -c words.cpp -o "$out") ||
    { echo "FAIL: g++ exited with status $? (env: ${*:-none})" >&2; exit 1; }
}
run plain.o
run preload.o LD_PRELOAD="$lib"
if ! cmp -s "$work/plain.o" "$work/preload.o"; then
  echo "FAIL: g++ -O2 -c produced a different object file under LD_PRELOAD=$lib" >&2
  cmp "$work/plain.o" "$work/preload.o" >&2 || true
  exit 1
fi

# The loader only warns when a preload fails: check that malloc really binds to the library
# (and never to libc) in every process: the driver, cc1plus, as.
run bindings.o LD_PRELOAD="$lib" LD_DEBUG=bindings LD_DEBUG_OUTPUT="$work/ld"
expect_malloc_bound_to "$lib" "$work"/ld.*
name=$(basename -- "$lib")
echo "ok: g++ -O2 -c object files identical ($(wc -c <"$work/plain.o") bytes), malloc bound to $name"
