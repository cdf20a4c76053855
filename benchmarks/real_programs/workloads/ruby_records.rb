# Ruby workload of the real-program comparison: objects, strings, hashes, JSON.
#
#   ruby ruby_records.rb records_N.json
#
# Parses the records into objects, groups and sorts them, counts words, builds many strings
# (interpolation, gsub, join), rebuilds every object twice (the old ones become garbage),
# renders JSON, and prints counts and SHA-256 digests: the same bytes under every allocator.
require 'json'
require 'digest'

Record = Struct.new(:id, :name, :group, :score, :tags, :words)

def digest(text) = Digest::SHA256.hexdigest(text)[0, 16]

records = JSON.parse(File.read(ARGV[0])).map do |h|
  Record.new(h['id'], h['name'], h['group'], h['score'], h['tags'], h['text'].split(' '))
end

word_count = Hash.new(0)
records.each { |r| r.words.each { |w| word_count[w] += 1 } }
by_group = records.group_by(&:group)
by_tag = Hash.new { |h, k| h[k] = [] }
records.each { |r| r.tags.each { |t| by_tag[t] << r.id } }

2.times do |generation|
  records = records.map do |r|
    Record.new(r.id, "#{r.name.downcase}##{generation}", r.group, (r.score * 31 + generation) % 1_000_003,
               r.tags.reverse, r.words.map { |w| w.gsub(/[aeiou]/) { |v| v.upcase } })
  end
end

ranked = records.sort_by { |r| [r.score, r.id] }
lines = records.map { |r| format('%08d %-30s %s', r.id, r.name, r.words.join(' ')) }.join("\n")
groups = by_group.keys.sort.map do |g|
  members = by_group[g]
  "#{g} #{members.size} #{members.sum(&:score)} #{members.max_by(2) { |m| [m.score, -m.id] }.map(&:name).join(',')}"
end.join("\n")
tags = by_tag.keys.sort.map { |t| "#{t}:#{by_tag[t].sort.join(',')}" }.join("\n")
rendered = JSON.generate(records.first(20_000).map(&:to_h))
top = word_count.sort_by { |w, n| [-n, w] }.first(10).map { |w, n| "#{w}=#{n}" }

puts "records #{records.size} words #{word_count.size} groups #{by_group.size} tags #{by_tag.size}"
puts "top words #{top.join(' ')}"
puts "lowest #{ranked.first.id} highest #{ranked.last.id}"
puts "lines #{digest(lines)} #{lines.size}"
puts "groups #{digest(groups)}"
puts "tags #{digest(tags)}"
puts "json #{digest(rendered)} #{rendered.size}"
