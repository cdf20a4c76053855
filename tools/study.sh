#!/usr/bin/env bash
# Runs the study: builds build/release, runs the benchmarks, prints a summary and writes it.
#
#   bash tools/study.sh           (from any directory; as root or with sudo for missing packages)
#
# Installs missing Debian packages, builds the benchmarks in build/release (the `release`
# preset of CMakePresets.json), runs the Arrow builder and small-chunks benchmarks with their
# JSON output in results/<benchmark>.json, then prints the summary tables (tools/summarize.py)
# and writes them to results/summary.md. Environment: JOBS (parallel build jobs, default 2).
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
bash tools/install-deps.sh

cmake --preset release
cmake --build build/release -j "${JOBS:-2}" --target arrow_builder_bench small_chunks_bench

# Runs one benchmark binary with the given extra flags; its results go to results/<name>.json.
run_benchmark() {
  local name=$1; shift
  echo "==== $name"
  "build/release/benchmarks/$name" "$@" \
    --benchmark_out="results/$name.json" --benchmark_out_format=json </dev/null
}
mkdir -p results
# The Arrow builder fixes its own repetitions (3, in order: the first cold, the others warm).
run_benchmark arrow_builder_bench
# The small chunks run 5 times each, interleaved at random, so that a slow phase of the
# machine does not land on one allocator only.
run_benchmark small_chunks_bench --benchmark_repetitions=5 --benchmark_enable_random_interleaving=true

echo "==== summary (results/summary.md)"
/usr/bin/python3 tools/summarize.py --arrow results/arrow_builder_bench.json \
  --small results/small_chunks_bench.json --out results/summary.md
