#!/usr/bin/env bash
# Drop-in test: Lua 5.4 on the preloaded allocator.
#
#   bash tests/dropin/lua.sh path/to/libpagemalloc.so
#
# Runs a small table- and string-heavy Lua program (a seeded word list counted, indexed,
# concatenated and sorted, then rebuilt so that the old tables become garbage) without and
# with LD_PRELOAD=$1; both runs must succeed and print the same bytes, and the preloaded run
# must bind malloc to the library. (Lua's allocator calls realloc and free only: a drop-in
# that replaces some entry points and not others crashes it.)
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/binding.bash"

take_library_argument "$@"
lua=$(command -v lua5.4 || true)
[ -n "$lua" ] || { echo "FAIL: lua5.4 not found (bash tools/install-deps.sh)" >&2; exit 1; }
make_work_directory

cat >"$work/tables.lua" <<'LUA'
-- A linear congruential generator: the same words on every run, whatever Lua's own seed.
local state = 20240521
local function next_random(n)
  state = (state * 1103515245 + 12345) % 2147483648
  return state % n
end
local letters = "abcdefghijklmnopqrstuvwxyz"
local vocabulary = {}
for i = 1, 2000 do
  local length, word = 2 + next_random(9), {}
  for j = 1, length do
    local k = 1 + next_random(26)
    word[j] = letters:sub(k, k)
  end
  vocabulary[i] = table.concat(word)
end

local counts, index, lines = {}, {}, {}
for line = 1, 30000 do
  local words = {}
  for j = 1, 3 + next_random(12) do
    local word = vocabulary[1 + next_random(1 + next_random(#vocabulary))]
    words[j] = word
    counts[word] = (counts[word] or 0) + 1
    local positions = index[word]
    if not positions then positions = {}; index[word] = positions end
    positions[#positions + 1] = line
  end
  lines[line] = table.concat(words, " ")
end
for generation = 1, 3 do
  for i, text in ipairs(lines) do lines[i] = text:upper():reverse() .. "#" .. generation end
end

local words = {}
for word in pairs(counts) do words[#words + 1] = word end
table.sort(words, function(a, b)
  if counts[a] ~= counts[b] then return counts[a] > counts[b] end
  return a < b
end)
local sum = 0
for _, text in ipairs(lines) do
  for i = 1, #text, 5 do sum = (sum * 31 + text:byte(i)) & 0xffffffff end
end
local positions = 0
for _, list in pairs(index) do positions = positions + #list end
print(#words, positions, words[1], counts[words[1]], words[#words], string.format("%08x", sum))
LUA

# Runs the program under the given environment assignments; stdout goes to file $1.
run() {
  local out=$1; shift
  env "$@" "$lua" "$work/tables.lua" >"$out" ||
    { echo "FAIL: lua5.4 exited with status $? (env: ${*:-none})" >&2; exit 1; }
}
expect_same_output_with_preload "$lib" "$work"
name=$(basename -- "$lib")
echo "ok: lua5.4 output identical ($(cat "$work/plain.out")), malloc bound to $name"
