#!/usr/bin/env bash
# Drop-in test: a real program's heap profile taken under pagemalloc agrees with one taken under
# jemalloc's own profiler (Debian's libjemalloc2 is built with it), both read by jeprof.
#
#   bash tests/dropin/heap_profile_peers.sh path/to/libpagemalloc.so
#
# Python (PYTHONMALLOC=malloc) builds a heap of dicts, tuples, byte arrays and sets and asks
# for a profile while all of it is live (tests/dropin/programs/heap_profile_python.py), under
# pagemalloc (prof:true,prof_sample:4096) and under jemalloc (prof:true,lg_prof_sample:12).
# jeprof --text --show_bytes gives each profile's sites by live bytes: the five largest must be
# the same functions (or tie with the fifth where they differ), and each site's bytes must
# agree within the sampling error of the two
# profiles together (a site of B bytes sampled every R bytes on average is estimated within
# about sqrt(B R); the test allows 4 times the root of both variances, and 10 % besides for the
# two allocators' size classes: a profile counts each block's usable size, and the same requests
# round up to 4.7 % more bytes under jemalloc's classes than under pagemalloc's for the byte
# arrays here).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/binding.bash"

take_library_argument "$@"
make_work_directory
python=/usr/bin/python3
jemalloc=/usr/lib/x86_64-linux-gnu/libjemalloc.so.2
for needed in "$python" "$jemalloc" "$(command -v jeprof || echo jeprof)"; do
  [ -e "$needed" ] || { echo "FAIL: $needed is missing (bash tools/install-deps.sh)" >&2; exit 1; }
done
program="$(dirname "${BASH_SOURCE[0]}")/programs/heap_profile_python.py"

LD_PRELOAD="$lib" PYTHONMALLOC=malloc PAGEMALLOC_CONF=prof:true,prof_sample:4096 \
  "$python" "$program" "$work/pagemalloc.heap" >"$work/pagemalloc.out"
LD_PRELOAD="$jemalloc" PYTHONMALLOC=malloc MALLOC_CONF=prof:true,lg_prof_sample:12 \
  "$python" "$program" "$work/jemalloc.heap" >"$work/jemalloc.out"
cmp -s "$work/pagemalloc.out" "$work/jemalloc.out" ||
  { echo "FAIL: the program's output differs between the two" >&2; exit 1; }
for who in pagemalloc jemalloc; do
  jeprof --text --show_bytes "$python" "$work/$who.heap" >"$work/$who.txt" 2>/dev/null
done

python3 - "$work/pagemalloc.txt" "$work/jemalloc.txt" <<'PY'
import math, sys
RATE = 4096
def sites(path):
    flat = {}
    for line in open(path):
        fields = line.split()
        if len(fields) >= 6 and fields[0].isdigit():
            flat[" ".join(fields[5:])] = int(fields[0])
    return flat
ours, theirs = sites(sys.argv[1]), sites(sys.argv[2])
top = lambda s: [name for name, _ in sorted(s.items(), key=lambda kv: -kv[1])[:5]]
failed = False
error = lambda a, b: 4 * math.sqrt((a + b) * RATE) + 0.10 * max(a, b)
# A site in one profile's five largest and not in the other's must be a tie there: within the
# error of that profile's fifth largest.
for mine, other, who in ((ours, theirs, "jemalloc"), (theirs, ours, "pagemalloc")):
    fifth = sorted(other.values(), reverse=True)[4]
    for name in set(top(mine)) - set(top(other)):
        tie = abs(other.get(name, 0) - fifth) <= error(other.get(name, 0), fifth)
        print(f"{'ok' if tie else 'FAIL'}: {name} is not among {who}'s five largest sites"
              f"{' (a tie with the fifth)' if tie else ''}")
        failed |= not tie
for name in top(theirs):
    a, b = ours.get(name, 0), theirs[name]
    allowed = error(a, b)
    ok = abs(a - b) <= allowed
    print(f"{'ok' if ok else 'FAIL'}: {name}: pagemalloc {a} B, jemalloc {b} B (+- {allowed:.0f})")
    failed |= not ok
sys.exit(1 if failed else 0)
PY
