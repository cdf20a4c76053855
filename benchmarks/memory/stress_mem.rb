# stress_mem.rb: a Ruby program's memory churn on one or more threads: each thread builds
# records (a hash of strings and an array of numbers, as a parsed row), keeps the last 2,000 of
# them, and drops the older ones for the garbage collector, for `rounds` rounds of 1,000
# records; strings of 8 to 200 bytes (Ruby keeps those over 23 bytes in malloc'd buffers, and
# its hash tables and arrays beyond a few elements too). Written for this study after the
# pattern of a Ruby memory stress script (allocation-heavy threads under one interpreter lock).
#
#   ruby stress_mem.rb [threads=1] [rounds=300] [seed=1]
#
# (a later key=value wins, as in the C programs beside it). Prints one checksum line, the same
# under every allocator, and "all checked" once every kept record is found intact.
options = { "threads" => 1, "rounds" => 300, "seed" => 1 }
ARGV.each do |argument|
  key, value = argument.split("=", 2)
  abort "stress_mem.rb: unknown argument #{argument}" unless options.key?(key) && value
  options[key] = Integer(value)
end
threads, rounds, seed = options.values_at("threads", "rounds", "seed")

def churn(rounds, random)
  kept = []
  checksum = 0
  rounds.times do
    1000.times do |i|
      name = "n" * random.rand(8..200)
      record = { "name" => name, "id" => i, "text" => i.to_s * random.rand(1..20),
                 "values" => Array.new(random.rand(4..40)) { |k| k * i } }
      kept << record
      checksum += record["values"].length + name.length
    end
    kept.shift(kept.length - 2000) if kept.length > 2000
  end
  kept.each do |record|
    i = record["id"]
    intact = record["name"].count("n") == record["name"].length &&
             record["text"].start_with?(i.to_s) &&
             record["values"].each_with_index.all? { |value, k| value == k * i }
    abort "stress_mem.rb: a kept record changed" unless intact
  end
  checksum + kept.length
end

results = Array.new(threads) do |t|
  Thread.new { churn(rounds, Random.new(seed + t)) }
end.map(&:value)
puts "checksum #{results.sum}"
puts "all checked"
