# jq workload of the real-program comparison: a filter over a large JSON array.
#
#   jq -c -f jq_records.jq records_N.json
#
# Per group: count, total score, word count and best names; per tag: the number of records;
# the most common words; and every record reshaped. Prints compact JSON: the same bytes under
# every allocator.
def words: .text | split(" ");
{
  groups: (group_by(.group)
           | map({group: .[0].group, count: length, total: (map(.score) | add),
                  words: (map(words | length) | add),
                  best: (sort_by(-.score, .id) | .[0:3] | map(.name))})
           | sort_by(-.count, .group)),
  tags: ([.[] | .tags[] ] | group_by(.) | map({tag: .[0], n: length}) | sort_by(-.n, .tag) | .[0:25]),
  top_words: ([.[] | select(.id % 3 == 0) | words[]] | group_by(.) | map([.[0], length])
              | sort_by(-.[1], .[0]) | .[0:20]),
  reshaped: (map(select(.score % 5 != 0)
                 | {key: "\(.group)/\(.id)", value: {name: (.name | ascii_downcase),
                                                    tags: (.tags | join("+")), n: (words | length)}})
             | from_entries | to_entries | length)
}
