#!/usr/bin/env bash
# Records traces of run-manager calls from real, allocation-heavy Debian programs, for
# benchmarks/trace_replay.cpp.
#
#   bash benchmarks/record_trace.sh path/to/libpagemalloc.so out_dir
#
# The library must be a tracing build (builds nothing itself), for example:
#
#   cmake -S . -B build/trace -DPAGEMALLOC_TRACE_RUNS=ON && cmake --build build/trace -j2
#   bash benchmarks/record_trace.sh build/trace/allocator/libpagemalloc.so traces
#   build/trace/benchmarks/trace_replay --trace=traces/python.trace --trace=traces/sqlite.trace
#
# Each program that is installed (checked with command -v; the others are skipped) runs once
# on a seeded, generated workload under LD_PRELOAD with PAGEMALLOC_TRACE=out_dir/<name>.%p.trace
# (one trace per process). Then the largest trace of each program (for g++, cc1plus's) becomes
# out_dir/<name>.trace and the traces of its other processes (the g++ driver, as) are kept as
# out_dir/<name>.other.<pid>.trace. Programs:
#
#   python   /usr/bin/python3.11 with PYTHONMALLOC=malloc (so that objects up to 512 bytes reach
#            the allocator, not pymalloc): dicts, lists and strings of records, JSON, sorting
#   sqlite   sqlite3 :memory: on a generated SQL script: inserts, an index, joins, group by
#   gxx      g++ -O2 -c on a generated C++ file of templates over the standard containers
#   jq       jq grouping and reshaping a generated JSON array of records
#   lua      lua5.4 building, sorting and concatenating tables of strings
#
# Prints, per trace, its size and the number of run-manager calls it holds (32-byte records
# after a 32-byte file header, one record per call and one that introduces each run manager).
set -euo pipefail

[ $# -eq 2 ] || { echo "usage: $0 path/to/libpagemalloc.so out_dir" >&2; exit 2; }
lib=$(realpath -e -- "$1") || { echo "no such library: $1" >&2; exit 1; }
out=$2
mkdir -p -- "$out"
out=$(realpath -e -- "$out")
python=/usr/bin/python3.11  # not a pyenv shim from PATH
[ -x "$python" ] || python=$(command -v python3) || { echo "python3 is needed" >&2; exit 1; }

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# The library must record: one traced run of a program that allocates leaves a file (a program
# that never calls malloc, as /bin/true, never starts the heap, and records nothing).
PAGEMALLOC_TRACE="$work/probe.%p.trace" LD_PRELOAD="$lib" "$python" -c pass
if ! compgen -G "$work/probe.*.trace" >/dev/null; then
  echo "$lib records no trace: build it with -DPAGEMALLOC_TRACE_RUNS=ON" >&2
  exit 1
fi

# --- the generated inputs (seeded, so every run records the same programs) -----------------
"$python" - "$work" <<'PY'
import json, random, sys
work = sys.argv[1]
rng = random.Random(2008)
words = ["".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(2, 12)))
         for _ in range(4000)]
def sentence():
    return " ".join(rng.choice(words) for _ in range(rng.randint(3, 60)))
records = [{"id": i, "name": rng.choice(words) + " " + rng.choice(words),
            "group": "g%03d" % rng.randrange(250), "score": rng.random() * 100,
            "tags": rng.sample(words, rng.randint(1, 5)), "text": sentence()}
           for i in range(60000)]
with open(f"{work}/records.json", "w") as f:
    json.dump(records, f)

# sqlite: two tables, filled row by row in one transaction, then queries that sort and group.
schema = """
CREATE TABLE records(id INTEGER PRIMARY KEY, name TEXT, grp TEXT, score REAL, text TEXT);
CREATE TABLE tags(record INTEGER, tag TEXT);
BEGIN;
"""
queries = """
COMMIT;
CREATE INDEX tags_by_tag ON tags(tag);
SELECT grp, count(*), avg(score), max(length(text)) FROM records
  GROUP BY grp ORDER BY 2 DESC LIMIT 5;
SELECT t.tag, count(*), group_concat(r.name, ',') FROM tags t JOIN records r ON r.id = t.record
  GROUP BY t.tag ORDER BY 2 DESC LIMIT 5;
SELECT count(DISTINCT text) FROM records;
SELECT sum(length(x)) FROM (SELECT group_concat(text, ' ') AS x FROM records GROUP BY grp);
DELETE FROM records WHERE score < 50;
VACUUM;
SELECT count(*) FROM records;
"""
with open(f"{work}/script.sql", "w") as f:
    f.write(schema)
    for r in records:
        text = r["text"].replace("'", "''")
        f.write(f"INSERT INTO records VALUES({r['id']}, '{r['name']}', '{r['group']}', "
                f"{r['score']:.4f}, '{text}');\n")
        for t in r["tags"]:
            f.write(f"INSERT INTO tags VALUES({r['id']}, '{t}');\n")
    f.write(queries)

# g++: many small types, each instantiating standard containers and algorithms.
with open(f"{work}/templates.cpp", "w") as f:
    f.write("#include <algorithm>\n#include <map>\n#include <set>\n#include <string>\n"
            "#include <unordered_map>\n#include <vector>\n#include <sstream>\n\n")
    for i in range(120):
        f.write(f"""
struct Item{i} {{ int key; std::string name; std::vector<double> values; }};
std::map<std::string, std::vector<Item{i}>> group{i}(const std::vector<Item{i}>& items) {{
  std::map<std::string, std::vector<Item{i}>> groups;
  for (const auto& item : items) groups[item.name].push_back(item);
  for (auto& [name, members] : groups)
    std::sort(members.begin(), members.end(),
              [](const Item{i}& a, const Item{i}& b) {{ return a.key < b.key; }});
  return groups;
}}
std::string describe{i}(const std::unordered_map<int, std::set<std::string>>& index) {{
  std::ostringstream out;
  for (const auto& [key, names] : index)
    for (const auto& name : names) out << key << ':' << name << ';';
  return out.str();
}}
""")
PY

cat >"$work/workload.py" <<'PY'
import json, sys
with open(sys.argv[1]) as f:
    records = json.load(f)
by_group = {}
for r in records:
    by_group.setdefault(r["group"], []).append(r)
index = {}
for r in records:
    for word in r["text"].split():
        index.setdefault(word, set()).add(r["id"])
ranked = sorted(index.items(), key=lambda kv: (-len(kv[1]), kv[0]))
text = json.dumps({g: [r["name"] for r in rs] for g, rs in by_group.items()})
copies = [dict(r, text=r["text"].upper()) for r in records]
chunks = ["".join(r["text"] for r in records[i:i + 500]) for i in range(0, len(records), 500)]
print(len(by_group), len(index), ranked[0][0], len(text), len(copies), sum(map(len, chunks)))
PY

cat >"$work/workload.jq" <<'JQ'
group_by(.group)
| map({group: .[0].group, n: length, names: map(.name),
       words: (map(.text | split(" ")) | add | unique | length)})
| sort_by(-.n) | .[0:5]
JQ

cat >"$work/workload.lua" <<'LUA'
local words, rows = {}, {}
local seed = 2008
local function random(n) seed = (seed * 1103515245 + 12345) % 2147483648; return seed % n end
for i = 1, 4000 do
  local w = {}
  for j = 1, 2 + random(10) do w[j] = string.char(97 + random(26)) end
  words[i] = table.concat(w)
end
for i = 1, 150000 do
  local parts = {}
  for j = 1, 3 + random(40) do parts[j] = words[1 + random(#words)] end
  rows[i] = {id = i, text = table.concat(parts, " "), score = random(1000)}
end
table.sort(rows, function(a, b)
  return a.score < b.score or (a.score == b.score and a.id < b.id)
end)
local counts = {}
for _, row in ipairs(rows) do
  for word in row.text:gmatch("%a+") do counts[word] = (counts[word] or 0) + 1 end
end
local total = 0
for _, n in pairs(counts) do total = total + n end
print(#rows, total)
LUA

# --- recording ---------------------------------------------------------------------------------
# record NAME COMMAND...: runs COMMAND on the tracing library; its traces go to out_dir.
record() {
  local name=$1
  shift
  rm -f -- "$out/$name".*trace
  if ! PAGEMALLOC_TRACE="$out/$name.%p.trace" LD_PRELOAD="$lib" "$@" >"$work/$name.out" 2>&1; then
    echo "$name: the program failed:" >&2
    tail -5 "$work/$name.out" >&2
    return 1
  fi
  if ! compgen -G "$out/$name.[0-9]*.trace" >/dev/null; then
    echo "$name: no trace recorded (a static or setuid program ignores LD_PRELOAD)" >&2
    return 1
  fi
  local largest
  largest=$(ls -S -- "$out/$name".[0-9]*.trace | head -1)
  mv -- "$largest" "$out/$name.trace"
  for other in "$out/$name".[0-9]*.trace; do
    [ -e "$other" ] || continue
    local pid=${other#"$out/$name."}
    mv -- "$other" "$out/$name.other.$pid"
  done
}

recorded=()
if [ -x "$python" ]; then
  PYTHONMALLOC=malloc record python "$python" "$work/workload.py" "$work/records.json" &&
    recorded+=(python)
fi
if command -v sqlite3 >/dev/null; then
  record sqlite sqlite3 :memory: ".read $work/script.sql" && recorded+=(sqlite)
fi
if command -v g++ >/dev/null; then
  record gxx g++ -O2 -c "$work/templates.cpp" -o "$work/templates.o" && recorded+=(gxx)
fi
if command -v jq >/dev/null; then
  record jq jq -c -f "$work/workload.jq" "$work/records.json" && recorded+=(jq)
fi
if command -v lua5.4 >/dev/null; then
  record lua lua5.4 "$work/workload.lua" && recorded+=(lua)
fi

echo "traces in $out (calls: 32-byte records less the file header and one per run manager):"
printf '  %-28s %12s %12s\n' trace bytes calls
for trace in "$out"/*.trace; do
  [ -e "$trace" ] || continue
  bytes=$(stat -c %s -- "$trace")
  managers=$("$python" -c '
import sys
data = open(sys.argv[1], "rb").read()
print(sum(1 for i in range(32, len(data), 32) if data[i] == 0))' "$trace")
  printf '  %-28s %12d %12d\n' "$(basename -- "$trace")" "$bytes" $((bytes / 32 - 1 - managers))
done
replay="replay: trace_replay"
for name in "${recorded[@]}"; do replay+=" --trace=$out/$name.trace"; done
echo "$replay"
