"""Seeded input files for the real-program comparison (benchmarks/real_programs/real_programs.py).

    /usr/bin/python3.11 benchmarks/real_programs/inputs.py --seed 1 --records 1000 --units 4 \
        --out /tmp/in

Everything is a function of the seed and the sizes, byte for byte, so every allocator reads
the same inputs. The data are "records": an id, a two-word name, one of 250 groups, a score,
one to five tags and a sentence of 4 to 30 words, all drawn from a vocabulary of invented
words with Zipf-like frequencies (a few words are very common, most are rare), so that hash
tables and strings get the skewed sizes of real text. From them:

  records_<n>.json   a JSON array of the first n records (python, ruby, jq)
  records_<n>.tsv    the same as tab-separated lines: id name group score tags(comma) text
                     (perl, lua, sqlite3)
  tags_<n>.tsv       one line per (record id, tag) pair (sqlite3's join)
  redis_<n>.resp     n records as Redis commands in the wire protocol (redis-cli --pipe):
                     strings, hashes, lists, sets, sorted sets, appends, counters, deletes
  templates_<n>.cpp  a C++ file of n generated types and functions that instantiate the
                     standard containers and algorithms over them (g++ -O2)
"""

import argparse
import json
import os
import random
import string

VOCABULARY_SIZE = 6000
GROUP_COUNT = 250


class RecordSource:
    """The records of one seed: record i is the same whatever n is asked for."""

    def __init__(self, seed):
        self.seed = seed
        rng = random.Random(f"vocabulary-{seed}")
        words = set()
        while len(words) < VOCABULARY_SIZE:
            length = rng.choice((2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 8, 9, 10, 12))
            words.add("".join(rng.choice(string.ascii_lowercase) for _ in range(length)))
        self.words = sorted(words)
        rng.shuffle(self.words)
        # Zipf-like: the word of rank r has weight 1 / (r + 1).
        total = 0.0
        self.cumulative_weights = []
        for rank in range(len(self.words)):
            total += 1.0 / (rank + 1)
            self.cumulative_weights.append(total)
        self.groups = [f"g{index:03d}-{self.words[index]}" for index in range(GROUP_COUNT)]
        self._records = []
        self._rng = random.Random(f"records-{seed}")

    def records(self, count):
        while len(self._records) < count:
            self._records.append(self._make_record(len(self._records)))
        return self._records[:count]

    def _draw(self, count):
        return self._rng.choices(self.words, cum_weights=self.cumulative_weights, k=count)

    def _make_record(self, index):
        rng = self._rng
        first, second = self._draw(2)
        return {
            "id": index,
            "name": f"{first.capitalize()} {second.capitalize()}",
            "group": self.groups[min(int(rng.expovariate(1 / 40)), GROUP_COUNT - 1)],
            "score": rng.randrange(1_000_000),
            "tags": sorted(set(self._draw(rng.randint(1, 5)))),
            "text": " ".join(self._draw(rng.randint(4, 30))),
        }


def write_json(path, records):
    with open(path, "w", encoding="ascii") as out:
        json.dump(records, out, separators=(",", ":"))
        out.write("\n")


def write_tsv(path, records):
    with open(path, "w", encoding="ascii") as out:
        for r in records:
            out.write(f"{r['id']}\t{r['name']}\t{r['group']}\t{r['score']}\t"
                      f"{','.join(r['tags'])}\t{r['text']}\n")


def write_tags_tsv(path, records):
    with open(path, "w", encoding="ascii") as out:
        for r in records:
            for tag in r["tags"]:
                out.write(f"{r['id']}\t{tag}\n")


def resp_command(*arguments):
    """One command in the Redis wire protocol (RESP), as redis-cli --pipe reads it."""
    parts = [f"*{len(arguments)}\r\n"]
    for argument in arguments:
        data = str(argument)
        parts.append(f"${len(data.encode())}\r\n{data}\r\n")
    return "".join(parts)


def write_redis_commands(path, records, seed):
    """Strings, hashes, lists, sets and sorted sets of varied sizes, then deletes and rewrites
    so that the server frees and reallocates as it goes; the end state is deterministic."""
    rng = random.Random(f"redis-{seed}")
    with open(path, "w", encoding="ascii", newline="") as out:
        for r in records:
            i = r["id"]
            out.write(resp_command("SET", f"text:{i}", r["text"] * rng.randint(1, 4)))
            out.write(resp_command("HSET", f"record:{i}", "name", r["name"], "group", r["group"],
                                   "score", r["score"], "tags", ",".join(r["tags"])))
            out.write(resp_command("RPUSH", f"group:{r['group']}", i))
            out.write(resp_command("SADD", f"tags:{i % 997}", *r["tags"]))
            out.write(resp_command("ZADD", f"scores:{r['group']}", r["score"], f"{r['name']}#{i}"))
            out.write(resp_command("INCRBY", f"count:{r['group']}", len(r["tags"])))
            if i % 3 == 0:
                out.write(resp_command("APPEND", f"text:{i // 2}", r["name"]))
            if i % 5 == 4:
                victim = rng.randrange(i + 1)
                out.write(resp_command("DEL", f"text:{victim}", f"record:{victim // 2}"))
            if i % 7 == 6:
                out.write(resp_command("LPOP", f"group:{r['group']}"))
                out.write(resp_command("ZREMRANGEBYRANK", f"scores:{r['group']}", 0, 0))


TEMPLATES_PRELUDE = """\
// Generated by benchmarks/real_programs/inputs.py: {count} types and functions that
// instantiate the standard containers and algorithms, compiled with g++ -O2 as a workload.
#include <algorithm>
#include <functional>
#include <map>
#include <memory>
#include <numeric>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <tuple>
#include <unordered_map>
#include <variant>
#include <vector>

template <int N> struct Fib {{ static constexpr long value = Fib<N - 1>::value + Fib<N - 2>::value; }};
template <> struct Fib<1> {{ static constexpr long value = 1; }};
template <> struct Fib<0> {{ static constexpr long value = 0; }};

template <typename T, typename Key>
std::map<Key, std::vector<T>> group_by(const std::vector<T>& items, std::function<Key(const T&)> key) {{
  std::map<Key, std::vector<T>> groups;
  for (const auto& item : items) groups[key(item)].push_back(item);
  return groups;
}}

template <typename... Ts> struct Overloaded : Ts... {{ using Ts::operator()...; }};
template <typename... Ts> Overloaded(Ts...) -> Overloaded<Ts...>;
"""

TEMPLATES_UNIT = """\

struct Record{i} {{
  int id;
  std::string name;
  std::vector<{element}> values;
  std::optional<std::tuple<int, std::string, double>> extra;
  auto operator<=>(const Record{i}&) const = default;
}};

using Value{i} = std::variant<int, double, std::string, Record{i}, std::vector<{element}>>;

long process{i}(int seed) {{
  std::vector<Record{i}> records;
  for (int k = 0; k < {n}; ++k) {{
    Record{i} r{{k * seed, std::to_string(k) + "{word}", {{}}, std::nullopt}};
    for (int j = 0; j < k % 7; ++j) r.values.push_back(static_cast<{element}>(j * {mult}));
    if (k % 3 == 0) r.extra = std::make_tuple(k, std::string("{word}"), k * 0.5);
    records.push_back(std::move(r));
  }}
  std::sort(records.begin(), records.end());
  auto groups = group_by<Record{i}, std::string>(records, [](const Record{i}& r) {{
    return r.name.substr(0, 1);
  }});
  std::unordered_map<std::string, std::set<int>> index;
  for (const auto& [key, members] : groups)
    for (const auto& m : members) index[key + "{word}"].insert(m.id);
  std::vector<Value{i}> values{{1, 2.5, std::string("{word}"), records.front(), std::vector<{element}>{{}}}};
  long total = Fib<{fib}>::value;
  for (const auto& v : values)
    total += std::visit(Overloaded{{[](int x) {{ return long(x); }}, [](double x) {{ return long(x * 2); }},
                                   [](const std::string& s) {{ return long(s.size()); }},
                                   [](const Record{i}& r) {{ return long(r.id); }},
                                   [](const std::vector<{element}>& v) {{ return long(v.size()); }}}}, v);
  std::ostringstream text;
  for (const auto& [key, ids] : index) text << key << ':' << ids.size() << ';';
  auto shared = std::make_shared<std::map<int, Record{i}>>();
  for (const auto& r : records) shared->emplace(r.id, r);
  return total + static_cast<long>(text.str().size()) + static_cast<long>(shared->size()) +
         std::accumulate(records.begin(), records.end(), 0L,
                         [](long acc, const Record{i}& r) {{ return acc + r.id + long(r.values.size()); }});
}}
"""


def write_templates_cpp(path, count, source):
    rng = random.Random(f"templates-{source.seed}")
    elements = ("int", "long", "double", "float", "short", "unsigned")
    parts = [TEMPLATES_PRELUDE.format(count=count)]
    for i in range(count):
        parts.append(TEMPLATES_UNIT.format(
            i=i, element=rng.choice(elements), n=rng.randint(10, 90), mult=rng.randint(2, 9),
            word=rng.choice(source.words), fib=rng.randint(10, 40)))
    parts.append("\nlong run_all(int seed) {\n  long total = 0;\n")
    for i in range(count):
        parts.append(f"  total += process{i}(seed + {i});\n")
    parts.append("  return total;\n}\n")
    with open(path, "w", encoding="ascii") as out:
        out.write("".join(parts))


class InputDirectory:
    """Writes each input file once into `directory` and returns its path."""

    def __init__(self, directory, seed):
        self.directory = directory
        self.seed = seed
        self.source = RecordSource(seed)
        os.makedirs(directory, exist_ok=True)

    def _file(self, name, write):
        path = os.path.join(self.directory, name)
        if not os.path.exists(path):
            partial = path + ".partial"
            write(partial)
            os.replace(partial, path)
        return path

    def records_json(self, n):
        return self._file(f"records_{n}.json", lambda p: write_json(p, self.source.records(n)))

    def records_tsv(self, n):
        return self._file(f"records_{n}.tsv", lambda p: write_tsv(p, self.source.records(n)))

    def tags_tsv(self, n):
        return self._file(f"tags_{n}.tsv", lambda p: write_tags_tsv(p, self.source.records(n)))

    def redis_commands(self, n):
        return self._file(f"redis_{n}.resp",
                          lambda p: write_redis_commands(p, self.source.records(n), self.seed))

    def templates_cpp(self, n):
        return self._file(f"templates_{n}.cpp",
                          lambda p: write_templates_cpp(p, n, self.source))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--records", type=int, default=1000, help="records per file")
    parser.add_argument("--units", type=int, default=4, help="types and functions in the C++ file")
    parser.add_argument("--out", required=True, help="directory to write into")
    args = parser.parse_args()
    inputs = InputDirectory(args.out, args.seed)
    for make in (inputs.records_json, inputs.records_tsv, inputs.tags_tsv, inputs.redis_commands):
        print(make(args.records))
    print(inputs.templates_cpp(args.units))


if __name__ == "__main__":
    main()
