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
# (no sample taken while off), prof_leak's report at exit, prof_interval's profiles, profiles
# written by forked children while threads allocate and another writes profiles, and bad
# options.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/binding.bash"

take_library_argument "$@"
make_work_directory
programs="$(dirname "${BASH_SOURCE[0]}")/programs"
# (-rdynamic: prof_leak's report names the sites from the dynamic symbol table.)
cc -O2 -g -pthread -rdynamic -o "$work/sites" "$programs/heap_profile_sites.c" -ldl
cc -O2 -g -pthread -o "$work/fork" "$programs/heap_profile_fork.c" -ldl
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

# prof_leak: the live samples at exit on stderr, their total near what the program left live,
# by stack, largest first, each site that left blocks named.
LD_PRELOAD="$lib" PAGEMALLOC_CONF=prof:true,prof_leak:true,prof_sample:4096 \
  "$work/sites" - >"$work/leak.truth" 2>"$work/leak.err"
python3 - "$work/leak.truth" "$work/leak.err" <<'PY'
import re, sys
truth = sum(int(size) * int(live) for _, size, live, _ in (l.split() for l in open(sys.argv[1])))
report = open(sys.argv[2]).read().splitlines()
summary = [l for l in report if l.startswith("pagemalloc: prof_leak: about ")]
if not summary:
    sys.exit("FAIL: prof_leak wrote no report:\n" + "\n".join(report))
got = int(re.match(r"pagemalloc: prof_leak: about (\d+) bytes", summary[0]).group(1))
# The estimate of some 200 MiB live, most of it in huge blocks sampled with certainty: a few %.
if abs(got - truth) > 0.05 * truth:
    sys.exit(f"FAIL: prof_leak reports {got} bytes live, the program left {truth}")
leaks = [(int(m.group(1)), i) for i, l in enumerate(report)
         if (m := re.match(r"Leak of about (\d+) bytes in about \d+ blocks allocated from:", l))]
if [b for b, _ in leaks] != sorted((b for b, _ in leaks), reverse=True):
    sys.exit(f"FAIL: the leaks are not listed largest first: {[b for b, _ in leaks]}")
named = {report[i + 1].split()[2].split("+")[0] for _, i in leaks if i + 1 < len(report)}
missing = {"site_small", "site_thread", "site_medium", "site_huge", "site_grown", "site_zeroed"} - named
if missing:
    sys.exit(f"FAIL: prof_leak names no stack of {sorted(missing)}:\n" + "\n".join(report))
print(f"ok: prof_leak reports {got} bytes live at exit (the program left {truth}), "
      f"{len(leaks)} stacks largest first, each site named")
PY

# prof_interval: profiles as the live bytes grow (the program keeps some 200 MiB: many).
LD_PRELOAD="$lib" PAGEMALLOC_CONF=prof:true,prof_interval:8388608,prof_sample:4096,prof_prefix:"$work/interval" \
  "$work/sites" - >/dev/null
intervals=$(ls "$work"/interval.*.i.heap 2>/dev/null | wc -l)
[ "$intervals" -ge 3 ] || { echo "FAIL: prof_interval:8 MiB wrote $intervals profiles" >&2; exit 1; }
last=$(ls -v "$work"/interval.*.i.heap | tail -n 1)
jeprof --text --show_bytes "$work/sites" "$last" 2>/dev/null | grep -q ' site_huge$' ||
  { echo "FAIL: the last interval profile does not name site_huge" >&2; exit 1; }
echo "ok: prof_interval wrote $intervals profiles"

# prof_interval_ms: a profile at the first sample after each interval, for a program that
# allocates for a second (python3 building and dropping lists for 1.2 s): 100 ms apart.
LD_PRELOAD="$lib" PAGEMALLOC_CONF=prof:true,prof_interval_ms:100,prof_sample:65536,prof_prefix:"$work/timed" \
  python3 -c '
import time
end = time.monotonic() + 1.2
while time.monotonic() < end:
    kept = [bytes(500) for _ in range(20000)]' >/dev/null
timed=$(ls "$work"/timed.*.t.heap 2>/dev/null | wc -l)
[ "$timed" -ge 5 ] && [ "$timed" -le 16 ] ||
  { echo "FAIL: prof_interval_ms:100 over 1.2 s wrote $timed profiles" >&2; exit 1; }
echo "ok: prof_interval_ms:100 wrote $timed profiles in 1.2 s"

# Profiles around fork: children forked while threads allocate and one writes profiles each
# write their own, which jeprof reads; none hangs.
mkdir -p "$work/forked"
LD_PRELOAD="$lib" PAGEMALLOC_CONF=prof:true,prof_sample:4096 timeout 300 "$work/fork" "$work/forked" 50 ||
  { echo "FAIL: profiles around fork (status $?)" >&2; exit 1; }
for n in 0 49; do
  head -n 1 "$work/forked/child.$n.heap" | grep -qx 'heap_v2/4096' ||
    { echo "FAIL: child $n's profile is not heap_v2/4096" >&2; exit 1; }
  jeprof --text --show_bytes "$work/fork" "$work/forked/child.$n.heap" 2>/dev/null | grep -q ' child$' ||
    { echo "FAIL: child $n's profile does not name its allocations' site" >&2; exit 1; }
done
echo "ok: 50 children forked amid allocations and dumps wrote profiles jeprof reads"

# Bad values: one warning each, naming the option, and the program runs on.
for entry in prof:maybe prof_sample:0 prof_sample:-5 lg_prof_sample:63 prof_prefix: prof_final:2 \
  prof_leak:yes prof_interval:-1 prof_interval:8M prof_interval_ms:x; do
  LD_PRELOAD="$lib" PAGEMALLOC_CONF="prof:true,$entry" "$work/sites" "$work/bad.heap" \
    >/dev/null 2>"$work/bad.err" || { echo "FAIL: $entry stopped the program" >&2; exit 1; }
  key=${entry%%:*}
  grep -q "PAGEMALLOC_CONF: bad value in '$entry' ignored ($key takes" "$work/bad.err" ||
    { echo "FAIL: no warning for $entry: $(cat "$work/bad.err")" >&2; exit 1; }
done
echo "ok: bad prof values warned about"
