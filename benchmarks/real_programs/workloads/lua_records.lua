-- Lua workload of the real-program comparison: tables and strings.
--
--   lua5.4 lua_records.lua records_N.tsv
--
-- Reads the records into tables, counts words and bigrams, indexes records by group and tag,
-- builds and concatenates many strings, sorts, rebuilds every record twice (the old tables
-- become garbage), and prints counts and a checksum: the same bytes under every allocator.
-- (Lua seeds its string hashes at random, so nothing here depends on the order of pairs().)

local function checksum(text, sum)
  sum = sum or 0
  for i = 1, #text, 7 do sum = (sum * 31 + text:byte(i)) & 0xffffffff end
  return (sum * 31 + #text) & 0xffffffff
end

local function sorted_keys(t)
  local keys = {}
  for k in pairs(t) do keys[#keys + 1] = k end
  table.sort(keys)
  return keys
end

local records, word_count, bigram_count, by_group, by_tag = {}, {}, {}, {}, {}
for line in io.lines(arg[1]) do
  local id, name, group, score, tags, text = line:match("^(%d+)\t([^\t]*)\t([^\t]*)\t(%d+)\t([^\t]*)\t(.*)$")
  local r = { id = tonumber(id), name = name, group = group, score = tonumber(score), tags = {}, words = {} }
  for tag in tags:gmatch("[^,]+") do
    r.tags[#r.tags + 1] = tag
    local ids = by_tag[tag]
    if not ids then ids = {}; by_tag[tag] = ids end
    ids[#ids + 1] = r.id
  end
  local previous
  for word in text:gmatch("%S+") do
    r.words[#r.words + 1] = word
    word_count[word] = (word_count[word] or 0) + 1
    if previous then
      local bigram = previous .. " " .. word
      bigram_count[bigram] = (bigram_count[bigram] or 0) + 1
    end
    previous = word
  end
  local members = by_group[group]
  if not members then members = {}; by_group[group] = members end
  members[#members + 1] = r
  records[#records + 1] = r
end

for generation = 1, 2 do
  for i, r in ipairs(records) do
    local words = {}
    for j = #r.words, 1, -1 do words[#words + 1] = r.words[j]:upper() end
    records[i] = { id = r.id, name = r.name:lower() .. "#" .. generation, group = r.group,
                   score = (r.score * 31 + generation) % 1000003, tags = r.tags, words = words,
                   line = table.concat(words, " ") }
  end
end

table.sort(records, function(a, b)
  if a.score ~= b.score then return a.score < b.score end
  return a.id < b.id
end)

local words = sorted_keys(word_count)
table.sort(words, function(a, b)
  if word_count[a] ~= word_count[b] then return word_count[a] > word_count[b] end
  return a < b
end)
local top = {}
for i = 1, 10 do top[i] = words[i] .. "=" .. word_count[words[i]] end

local lines_sum = 0
for _, r in ipairs(records) do lines_sum = checksum(string.format("%d %s %s", r.id, r.name, r.line), lines_sum) end
local groups_sum = 0
for _, group in ipairs(sorted_keys(by_group)) do
  local members, total = by_group[group], 0
  for _, m in ipairs(members) do total = total + m.score end
  groups_sum = checksum(group .. " " .. #members .. " " .. total, groups_sum)
end
local tags_sum, tag_pairs = 0, 0
for _, tag in ipairs(sorted_keys(by_tag)) do
  local ids = by_tag[tag]
  table.sort(ids)
  tag_pairs = tag_pairs + #ids
  tags_sum = checksum(tag .. ":" .. table.concat(ids, ","), tags_sum)
end
local bigrams = 0
for _ in pairs(bigram_count) do bigrams = bigrams + 1 end

print("records " .. #records .. " words " .. #words .. " bigrams " .. bigrams .. " tag pairs " .. tag_pairs)
print("top words " .. table.concat(top, " "))
print("lowest " .. records[1].id .. " highest " .. records[#records].id)
print(string.format("checksums %08x %08x %08x", lines_sum, groups_sum, tags_sum))
