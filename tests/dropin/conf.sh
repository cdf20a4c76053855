#!/usr/bin/env bash
# Drop-in test: PAGEMALLOC_CONF as a program on the drop-in sees it.
#
#   bash tests/dropin/conf.sh path/to/libpagemalloc.so
#
# With tests/dropin/c_interfaces.c linked with the library, checks:
#   - stats_print:json with stats_file:PATH.%p writes one JSON object to PATH.<pid> at exit,
#     even though the program closed stderr before exiting;
#   - stats_print:true without stats_file prints the text statistics to stderr;
#   - a stats_file that cannot be opened is warned about and the statistics go to stderr;
#   - a bad value or an unknown key gets one warning that names the valid values or keys;
#   - narenas above the limit is warned about and the limit is used.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/binding.bash"

take_library_argument "$@"
make_work_directory
here=$(dirname "$(realpath "${BASH_SOURCE[0]}")")
cc -std=c11 -Wall -Wextra -Werror -I"$here/../../allocator/include" -o "$work/program" \
  "$here/c_interfaces.c" "$lib" || { echo "FAIL: c_interfaces.c does not build" >&2; exit 1; }
run() { LD_LIBRARY_PATH=$(dirname "$lib") "$work/program" "$@"; }
fail() { echo "FAIL: $*" >&2; exit 1; }

# JSON statistics to a file, the program's stderr closed before exit.
PAGEMALLOC_CONF="stats_print:json,stats_file:$work/stats.%p.json" run exit
files=("$work"/stats.*.json)
[ "${#files[@]}" -eq 1 ] && [ -s "${files[0]}" ] || fail "stats_file: no statistics file written"
[[ ${files[0]} =~ /stats\.[0-9]+\.json$ ]] || fail "stats_file: %p not replaced: ${files[0]}"
/usr/bin/python3 - "${files[0]}" <<'PY' || fail "stats_file: not one JSON object with the counters"
import json, sys
stats = json.load(open(sys.argv[1]))
assert stats["allocated"] >= 123456, stats
assert stats["mapped"] >= stats["allocated"], stats
assert stats["runs"], stats
PY
echo "ok: stats_print:json,stats_file: $(tr -d '\n' <"${files[0]}" | cut -c1-80)..."

# Text statistics to stderr.
PAGEMALLOC_CONF=stats_print:true run narenas 2>"$work/err" >/dev/null
grep -q '^pagemalloc statistics' "$work/err" || fail "stats_print:true printed nothing on stderr"
echo "ok: stats_print:true prints to stderr"

# A stats_file that cannot be opened: warned about, statistics on stderr.
PAGEMALLOC_CONF="stats_print:true,stats_file:$work/no/such/dir/stats" run narenas \
  2>"$work/err" >/dev/null
grep -q "pagemalloc: stats_file: cannot open '$work/no/such/dir/stats'" "$work/err" ||
  fail "an unopenable stats_file is not warned about: $(cat "$work/err")"
grep -q '^pagemalloc statistics' "$work/err" || fail "the statistics were lost with the stats_file"
echo "ok: an unopenable stats_file is warned about; statistics on stderr"

# Each bad entry: one warning naming what is valid; the program runs on.
expect_warning() {
  local conf=$1 expected=$2
  PAGEMALLOC_CONF=$conf run narenas >/dev/null 2>"$work/err" || fail "the program failed with $conf"
  grep -qF -- "$expected" "$work/err" || fail "PAGEMALLOC_CONF=$conf: want '$expected', got: $(cat "$work/err")"
  [ "$(grep -c PAGEMALLOC_CONF "$work/err")" -eq 1 ] || fail "PAGEMALLOC_CONF=$conf: not one warning"
  echo "ok: $conf: $(cat "$work/err")"
}
expect_warning thp:sometimes "bad value in 'thp:sometimes' ignored (thp takes auto, always, never or default)"
expect_warning stats_print:maybe "(stats_print takes true, false or json)"
expect_warning checks:yes "(checks takes true, false, 1 or 0)"
expect_warning populate:often "(populate takes true, false, 1 or 0)"
expect_warning decay_ms:soon "(decay_ms takes -1 (never), 0 or milliseconds)"
expect_warning narenas:0 "(narenas takes 1 to 256)"
expect_warning ncpus:0 "(ncpus takes 1 to 4096)"
expect_warning colour:blue "unknown key in 'colour:blue' ignored (the keys are decay_ms, checks,"
expect_warning stats_file: "(stats_file takes a path of 1 to 255 bytes)"
expect_warning narenas:1000 "'narenas:1000' is above the limit; using narenas:256"
[ "$(PAGEMALLOC_CONF=narenas:1000 run narenas 2>/dev/null)" = 256 ] ||
  fail "narenas:1000 did not give 256 arenas"
[ "$(PAGEMALLOC_CONF=narenas:3 run narenas 2>/dev/null)" = 3 ] || fail "narenas:3 did not give 3"
echo "ok: narenas:1000 gives 256 arenas, narenas:3 gives 3"
