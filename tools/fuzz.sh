#!/usr/bin/env bash
# Fuzzes the pm_ API with libFuzzer against the shadow heap (tests/fuzz/), in each run-manager
# variant, and counts the operations run.
#
#   bash tools/fuzz.sh [-o OPERATIONS] [-t SECONDS] [-b BUILD_ROOT] [VARIANT...]
#
# VARIANT: pagemap, hybrid, rbtree (default: all three, one after the other). For each, builds
# BUILD_ROOT/fuzz-VARIANT (default BUILD_ROOT: build) with clang++-14 and
# -fsanitize=fuzzer,address,undefined (tests/fuzz/CMakeLists.txt), then runs libFuzzer in
# rounds of at most SECONDS (default 600) until OPERATIONS (default 10000000) operations have
# run; after the first round, a round lasts as long as the rate so far says the rest needs. The
# corpus stays in BUILD_ROOT/fuzz-VARIANT/corpus from round to round and run to run. Each
# round's log is BUILD_ROOT/fuzz-VARIANT/round-N.log; the harness prints its operation count
# at exit, and this script adds them up.
#
# A finding (a failed check, a sanitizer report, a crash or a timeout) ends that variant's
# run: libFuzzer leaves the input as BUILD_ROOT/fuzz-VARIANT/crash-* (or timeout-*, oom-*);
# `BUILD_ROOT/fuzz-VARIANT/pagemalloc_fuzz FILE` replays it, PAGEMALLOC_FUZZ_TRACE=1 prints
# every call. Prints a line per variant and exits non-zero if any variant had a finding.
# Installs clang-14 and libclang-rt-14-dev (libFuzzer) with the other packages when missing.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
operations=10000000
seconds=600
build_root=build
while getopts "o:t:b:" option; do
  case $option in
    o) operations=$OPTARG ;;
    t) seconds=$OPTARG ;;
    b) build_root=$OPTARG ;;
    *) sed -n '2,20p' "$0" >&2; exit 2 ;;
  esac
done
shift $((OPTIND - 1))
variants=("$@")
[ ${#variants[@]} -eq 0 ] && variants=(pagemap hybrid rbtree)

bash tools/install-deps.sh clang-14 libclang-rt-14-dev

summaries=()
found=0
for variant in "${variants[@]}"; do
  dir=$build_root/fuzz-$variant
  echo "==== $variant: build ($dir)"
  CC=clang-14 CXX=clang++-14 cmake -S tests/fuzz -B "$dir" -DPAGEMALLOC_RUNS="$variant" >/dev/null
  cmake --build "$dir" -j "${JOBS:-2}" --target pagemalloc_fuzz
  mkdir -p "$dir/corpus"
  total=0 inputs=0 round=0 status=0
  start=$(date +%s)
  while [ "$total" -lt "$operations" ]; do
    round=$((round + 1))
    log=$dir/round-$round.log
    status=0
    length=$seconds
    if [ "$total" -gt 0 ]; then  # the rest at the rate so far, and 10% more
      spent=$(( $(date +%s) - start ))
      length=$(( (operations - total) * spent * 11 / (total * 10) + 10 ))
      [ "$length" -gt "$seconds" ] && length=$seconds
    fi
    "$dir/pagemalloc_fuzz" -max_total_time="$length" -max_len=8192 -timeout=120 \
      -rss_limit_mb=4096 -print_final_stats=1 -artifact_prefix="$dir/" "$dir/corpus" \
      >"$log" 2>&1 || status=$?
    # The harness's last word: "pagemalloc_fuzz: N operations in M inputs".
    line=$(grep -E '^pagemalloc_fuzz: [0-9]+ operations in [0-9]+ inputs' "$log" | tail -n 1 || true)
    if [ -n "$line" ]; then
      total=$((total + $(awk '{print $2}' <<<"$line")))
      inputs=$((inputs + $(awk '{print $5}' <<<"$line")))
    fi
    echo "==== $variant: round $round: ${line:-no count} (total $total); status $status"
    if [ "$status" -ne 0 ]; then
      found=1
      grep -E 'pagemalloc_fuzz: check failed|ERROR: |runtime error|Test unit written' "$log" >&2 || true
      break
    fi
  done
  elapsed=$(( $(date +%s) - start ))
  if [ "$status" -ne 0 ]; then
    summaries+=("$variant: FINDING after $total operations in $inputs inputs, ${elapsed} s (see $log)")
  else
    summaries+=("$variant: $total operations in $inputs inputs, ${elapsed} s, no finding")
  fi
  echo "==== ${summaries[-1]}"
done

echo "==== summary"
printf '%s\n' "${summaries[@]}"
exit "$found"
