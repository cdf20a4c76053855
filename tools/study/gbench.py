"""Runs Google Benchmark binaries one process per allocator, in interleaved rounds.

An *entry* is one process to run each round: a label (the allocator, e.g. "jemalloc" or
"pagemalloc-hybrid"), a benchmark binary, a --benchmark_filter selecting that allocator's
benchmarks in the binary, and an optional library to preload. Each round runs every entry
once, in an order shuffled from the seed and the round, so that a slow phase of the machine
spreads over all allocators; every process writes Google Benchmark's JSON to
results/raw/<study>/<label>.<round>.json (a quick run: results/quick/raw/...).

A *case* is a benchmark's name without its allocator: "BM_SmallChunks<Malloc>/chunk_size:16"
and "BM_SmallChunks<Pagemalloc>/chunk_size:16" are both the case
"BM_SmallChunks/chunk_size:16".
"""

import dataclasses
import re
from pathlib import Path

from common import read_json, results_directory, run, shuffled_rounds

TEMPLATE_ARGUMENT = re.compile(r"<[^<>]*(?:<[^<>]*>[^<>]*)*>")


@dataclasses.dataclass
class Entry:
    label: str
    binary: Path
    filter: str
    preload: Path | None = None
    env: dict | None = None


def case_sort_key(case):
    """Orders cases by name, then by their numbers as numbers (16 before 128)."""
    return (re.sub(r"\d+", "", case), [int(x) for x in re.findall(r"\d+", case)])


def case_title(case):
    """'BM_SmallChunks/chunk_size:16' -> 'small chunks 16', and so on."""
    title = (case.replace("/real_time", "").replace("BM_SmallChunksThreads/threads:", "threads N=")
             .replace("BM_SmallChunks/chunk_size:", "small chunks ").replace("BM_LargeBlocks", "large blocks"))
    title = re.sub(r"BM_MediumBlocks/live:(\d+)/min_kib:(\d+)/max_kib:(\d+)",
                   lambda m: f"medium blocks {m[1]}×{m[2]}" +
                   ("" if m[2] == m[3] else f"-{m[3]}") + "KiB", title)
    return re.sub(r"/min_time:[0-9.]+", "", title)


def case_of(name):
    return TEMPLATE_ARGUMENT.sub("", name, count=1)


def run_rounds(study, entries, rounds, seed, extra_args=()):
    """Runs every entry once per round; returns {label: [json paths, one per round]}."""
    directory = results_directory() / "raw" / study
    directory.mkdir(parents=True, exist_ok=True)
    outputs = {entry.label: [] for entry in entries}
    for round_number, order in shuffled_rounds(entries, rounds, seed, study,
                                               describe=lambda e: e.label):
        for entry in order:
            out = directory / f"{entry.label}.{round_number}.json"
            env = {"LD_PRELOAD": str(entry.preload)} if entry.preload else {}
            env.update(entry.env or {})
            run([entry.binary, f"--benchmark_filter={entry.filter}",
                 f"--benchmark_out={out}", "--benchmark_out_format=json", *extra_args],
                env=env, quiet=True)
            outputs[entry.label].append(out)
    return outputs


def samples(outputs, value):
    """{case: {label: [value(benchmark) per round]}} over the runs of run_rounds; `value`
    maps one benchmark object of the JSON to a number (or None to skip it)."""
    table = {}
    for label, paths in outputs.items():
        for path in paths:
            for benchmark in read_json(path)["benchmarks"]:
                if benchmark.get("run_type") == "aggregate" or benchmark.get("error_occurred"):
                    continue
                number = value(benchmark)
                if number is None:
                    continue
                table.setdefault(case_of(benchmark["name"]), {}).setdefault(label, []).append(number)
    return table


NS_PER_UNIT = {"ns": 1.0, "us": 1e3, "ms": 1e6, "s": 1e9}


def real_ns(benchmark):
    """Wall time per iteration, in nanoseconds."""
    return benchmark["real_time"] * NS_PER_UNIT[benchmark.get("time_unit", "ns")]


def cpu_ns(benchmark):
    return benchmark["cpu_time"] * NS_PER_UNIT[benchmark.get("time_unit", "ns")]
