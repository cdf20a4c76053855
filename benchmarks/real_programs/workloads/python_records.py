"""Python workload of the real-program comparison: dicts, lists, strings, sorting, JSON.

    PYTHONMALLOC=malloc /usr/bin/python3.11 python_records.py records_N.json

Reads the records, indexes them by group, tag and word, sorts many small tuples, rebuilds
every record three times (the old ones are freed), renders and parses JSON, and prints counts
and SHA-256 digests: the same bytes under every allocator.
"""
import hashlib
import json
import sys
from collections import defaultdict


def digest(text):
    return hashlib.sha256(text.encode()).hexdigest()[:16]


with open(sys.argv[1], encoding="ascii") as source:
    records = json.load(source)

by_group = defaultdict(list)
by_tag = defaultdict(set)
word_counts = {}
for r in records:
    by_group[r["group"]].append(r)
    for tag in r["tags"]:
        by_tag[tag].add(r["id"])
    for word in r["text"].split():
        word_counts[word] = word_counts.get(word, 0) + 1

ranked = sorted((r["score"], r["name"], r["id"]) for r in records)
lines = sorted(f"{r['id']}:{r['name'].lower()}:{'|'.join(reversed(r['tags']))}" for r in records)
top_words = sorted(word_counts.items(), key=lambda item: (-item[1], item[0]))[:10]

for generation in range(3):
    records = [dict(r, score=(r["score"] * 31 + generation) % 1_000_003,
                    tags=r["tags"][::-1] + [r["group"][:4]],
                    text=" ".join(reversed(r["text"].split())))
               for r in records]

summary = {
    group: {"n": len(members),
            "top": [m["name"] for m in sorted(members, key=lambda m: (-m["score"], m["id"]))[:5]],
            "words": sum(len(m["text"].split()) for m in members)}
    for group, members in by_group.items()
}
rendered = json.dumps(summary, sort_keys=True)
parsed = json.loads(rendered)
rerendered = json.dumps([dict(r, tags=sorted(r["tags"])) for r in records], sort_keys=True)

print("records", len(records), "groups", len(by_group), "tags", len(by_tag),
      "words", len(word_counts))
print("lowest", ranked[0], "highest", ranked[-1])
print("top words", top_words)
print("lines", digest("\n".join(lines)))
print("summary", digest(rendered), len(parsed))
print("records json", digest(rerendered), len(rerendered))
print("tag sizes", sum(len(ids) for ids in by_tag.values()))
