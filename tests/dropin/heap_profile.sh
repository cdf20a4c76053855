#!/usr/bin/env bash
# Drop-in test: the heap profiler's profiles, read by jeprof (Debian's, from libjemalloc-dev),
# name each call site with the bytes it allocated, within the sampling error.
#
#   bash tests/dropin/heap_profile.sh path/to/libpagemalloc.so
#
# tests/dropin/programs/heap_profile_sites.c allocates blocks of known sizes at known sites
# (small to huge, two threads, some freed, realloc, calloc), dumps a profile with pm_prof_dump
# and prints what each site left live and allocated in all. At prof_sample 4 KiB and at the
# default (512 KiB), `jeprof --text --show_bytes` must give each site's live bytes
# (--inuse_space) and allocated bytes (--alloc_space) within the sampling error: a site of n
# blocks of s bytes, each sampled with probability p = 1 - exp(-s / rate), is estimated as
# k s / p for k sampled blocks, whose standard deviation is s / p * sqrt(n p (1 - p)); the test
# allows 4 of them, plus 0.5 % for the rounding of jeprof's scaling. Then: the profile at exit
# (prof_final) under prof_prefix's name, --collapsed and --svg output, prof.active switched off
# (no sample taken while off), a profile written by a forked child, and bad options.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/binding.bash"

take_library_argument "$@"
make_work_directory
programs="$(dirname "${BASH_SOURCE[0]}")/programs"
cc -O2 -g -pthread -o "$work/sites" "$programs/heap_profile_sites.c" -ldl
for tool in jeprof python3; do
  command -v "$tool" >/dev/null || { echo "FAIL: $tool is not installed (bash tools/install-deps.sh)" >&2; exit 1; }
done

# check_sites TRUTH TEXT COLUMN RATE: each site's bytes in jeprof's TEXT against TRUTH's column
# (live or allocated blocks).
check_sites() {
  python3 - "$@" <<'PY'
import math, sys
truth_path, text_path, column, rate = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4])
flat = {}
for line in open(text_path):
    fields = line.split()
    if len(fields) == 6 and fields[0].isdigit():
        flat[fields[5]] = int(fields[0])
failed = False
for line in open(truth_path):
    name, size, live, allocated = line.split()
    if column == "allocated" and allocated == "-":
        continue  # blocks of several sizes: not counted by the program
    size, n = int(size), int(live if column == "live" else allocated)
    p = 1 - math.exp(-size / rate)
    expected = n * size
    allowed = 4 * size / p * math.sqrt(n * p * (1 - p)) + 0.005 * expected
    got = flat.get(name, 0)
    ok = abs(got - expected) <= allowed
    print(f"{'ok' if ok else 'FAIL'}: rate {rate:.0f}, {column} bytes of {name}: {got} "
          f"(expected {expected} +- {allowed:.0f})")
    failed |= not ok
sys.exit(1 if failed else 0)
PY
}

for rate in 4096 524288; do
  LD_PRELOAD="$lib" PAGEMALLOC_CONF=prof:true,prof_sample:$rate \
    "$work/sites" "$work/sites.$rate.heap" >"$work/truth.$rate"
  head -n 1 "$work/sites.$rate.heap" | grep -qx "heap_v2/$rate" ||
    { echo "FAIL: the profile's header is not heap_v2/$rate" >&2; exit 1; }
  jeprof --text --show_bytes --inuse_space "$work/sites" "$work/sites.$rate.heap" \
    >"$work/inuse.$rate" 2>"$work/jeprof.err"
  check_sites "$work/truth.$rate" "$work/inuse.$rate" live "$rate"
  jeprof --text --show_bytes --alloc_space "$work/sites" "$work/sites.$rate.heap" \
    >"$work/alloc.$rate" 2>"$work/jeprof.err"
  check_sites "$work/truth.$rate" "$work/alloc.$rate" allocated "$rate"
done

# The other readers' forms: collapsed stacks name the sites below main; the call graph is SVG.
jeprof --collapsed "$work/sites" "$work/sites.4096.heap" >"$work/collapsed" 2>/dev/null
grep -qE ';main(<[0-9a-f]+>)?;site_small(<[0-9a-f]+>)? [1-9]' "$work/collapsed" ||
  { echo "FAIL: jeprof --collapsed has no stack of main;site_small" >&2; head -n 5 "$work/collapsed" >&2; exit 1; }
if command -v dot >/dev/null; then
  jeprof --svg "$work/sites" "$work/sites.4096.heap" >"$work/graph.svg" 2>/dev/null
  grep -q '<svg' "$work/graph.svg" && grep -q 'site_medium' "$work/graph.svg" ||
    { echo "FAIL: jeprof --svg drew no call graph with site_medium" >&2; exit 1; }
  echo "ok: jeprof --collapsed and --svg read the profile"
fi

# The samples' stacks are the program's: the allocator's own frames are left out.
if grep -E ' (malloc|calloc|realloc|pagemalloc::.*)$' "$work/inuse.4096" | grep -v '^ *0 ' | grep -q .; then
  echo "FAIL: the allocator's frames hold bytes of their own in the profile" >&2
  grep -E ' (malloc|calloc|realloc|pagemalloc::.*)$' "$work/inuse.4096" >&2; exit 1
fi

# prof_final: a profile at exit, named prof_prefix.PID.SEQ.f.heap, with the live blocks.
LD_PRELOAD="$lib" PAGEMALLOC_CONF=prof:true,prof_final:true,prof_sample:4096,prof_prefix:"$work/final" \
  "$work/sites" "$work/dumped.heap" >/dev/null
final=$(ls "$work"/final.*.f.heap 2>/dev/null | head -n 1)
[ -n "$final" ] || { echo "FAIL: prof_final wrote no $work/final.PID.SEQ.f.heap" >&2; ls "$work" >&2; exit 1; }
jeprof --text --show_bytes "$work/sites" "$final" 2>/dev/null | grep -q ' site_huge$' ||
  { echo "FAIL: the profile at exit does not name site_huge" >&2; exit 1; }
echo "ok: prof_final wrote $(basename "$final")"

# prof_active:false at the start: the profile holds no sample.
LD_PRELOAD="$lib" PAGEMALLOC_CONF=prof:true,prof_active:false,prof_sample:4096 \
  "$work/sites" "$work/inactive.heap" >/dev/null
grep -q '^@' "$work/inactive.heap" &&
  { echo "FAIL: samples were taken with prof_active:false" >&2; exit 1; }
echo "ok: no sample with prof_active:false"

# Without prof:true, pm_prof_dump says ENOENT (2) and writes nothing.
if LD_PRELOAD="$lib" "$work/sites" "$work/off.heap" >/dev/null 2>"$work/off.err"; then
  echo "FAIL: pm_prof_dump succeeded without prof:true" >&2; exit 1
fi
grep -q 'pm_prof_dump: error 2$' "$work/off.err" && [ ! -e "$work/off.heap" ] ||
  { echo "FAIL: pm_prof_dump without prof:true: $(cat "$work/off.err")" >&2; exit 1; }
echo "ok: pm_prof_dump without prof:true is ENOENT"

# Bad values: one warning each, naming the option, and the program runs on.
for entry in prof:maybe prof_sample:0 prof_sample:-5 lg_prof_sample:63 prof_prefix: prof_final:2; do
  LD_PRELOAD="$lib" PAGEMALLOC_CONF="prof:true,$entry" "$work/sites" "$work/bad.heap" \
    >/dev/null 2>"$work/bad.err" || { echo "FAIL: $entry stopped the program" >&2; exit 1; }
  key=${entry%%:*}
  grep -q "PAGEMALLOC_CONF: bad value in '$entry' ignored ($key takes" "$work/bad.err" ||
    { echo "FAIL: no warning for $entry: $(cat "$work/bad.err")" >&2; exit 1; }
done
echo "ok: bad prof values warned about"
