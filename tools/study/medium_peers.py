"""The medium blocks' memory beside the peers (papers/allocator-workloads/medium_peers.md).

Each case with 100 live medium blocks (64-256 KiB and 256 KiB-1 MiB) of the release tree's
benchmarks/medium_blocks_bench, its <Malloc> version, runs alone in its process under the
launcher (benchmarks/measure_run.c) with each allocator preloaded: glibc, jemalloc, mimalloc,
tcmalloc and pagemalloc's drop-in, in interleaved rounds in an order shuffled from the seed.
Two sequences of requests: repeated (every round the same, from the seed: the workloads' cases)
and onward (`--onward`: one generator for 1,000 rounds, every round a new sequence). A heap that
is back in the same state after each round gives the repeated sequence the same addresses and
touches the same pages again; the onward sequence shows what an allocator keeps resident when
requests do not repeat. For each case: time per round (google benchmark's, µs) and the
process's peak RSS, and pagemalloc over the best peer in each.

--quick: one round, 0.05 s a repeated case.

Writes results/medium_peers.json and papers/allocator-workloads/medium_peers.md; returns the
summary's lines.
"""

import tempfile
from pathlib import Path

from allocators import PEERS, benchmark_binary
from common import (f_or_dash, fmt_ratio, machine_line, markdown_table, median,
                    papers_directory, ratio, read_json, results_directory, shown,
                    shuffled_rounds, text_table, write_json, write_report)
from gbench import case_title
from launched import run_launched

BINARY = "medium_blocks_bench"
ALLOCATORS = [*PEERS, "pagemalloc"]
CASES = [  # (title, benchmark name, extra arguments)
    ("100 × 64-256 KiB, repeated", "BM_MediumBlocks<Malloc>/live:100/min_kib:64/max_kib:256", []),
    ("100 × 256 KiB-1 MiB, repeated", "BM_MediumBlocks<Malloc>/live:100/min_kib:256/max_kib:1024",
     []),
    ("100 × 64-256 KiB, onward",
     "BM_MediumBlocksOnward<Malloc>/live:100/min_kib:64/max_kib:256/iterations:1000",
     ["--onward"]),
    ("100 × 256 KiB-1 MiB, onward",
     "BM_MediumBlocksOnward<Malloc>/live:100/min_kib:256/max_kib:1024/iterations:1000",
     ["--onward"]),
]
TIMEOUT_S = 300


def run_case(case, allocator, min_time, scratch):
    """One case alone under one allocator: {"us": ..., "maxrss_mib": ...} or None."""
    _, name, extra = case
    out = Path(scratch) / "case.json"
    sample, _, _ = run_launched(benchmark_binary("pagemap", BINARY),
                                [*extra, f"--benchmark_filter=^{name}$",
                                 f"--benchmark_min_time={min_time}", f"--benchmark_out={out}",
                                 "--benchmark_out_format=json"],
                                allocator, scratch, TIMEOUT_S, checked=False)
    if not sample["ok"] or not out.exists() or out.stat().st_size == 0:
        return None  # (an empty output: the filter matched no case)
    benchmarks = [b for b in read_json(out)["benchmarks"] if not b.get("error_occurred")]
    out.unlink()
    if not benchmarks:
        return None
    return {"us": benchmarks[0]["real_time"], "maxrss_mib": sample["maxrss_mib"]}


def measure(quick, rounds, seed):
    rounds = 1 if quick else rounds
    min_time = "0.05" if quick else "0.2"
    entries = [(case, allocator) for case in CASES for allocator in ALLOCATORS]
    samples = {case[0]: {allocator: [] for allocator in ALLOCATORS} for case in CASES}
    with tempfile.TemporaryDirectory() as scratch:
        for _, order in shuffled_rounds(entries, rounds, seed, "medium-peers"):
            for case, allocator in order:
                samples[case[0]][allocator].append(run_case(case, allocator, min_time, scratch))
    data = {"cases": [case[0] for case in CASES], "allocators": ALLOCATORS, "rounds": rounds,
            "samples": samples}
    write_json(results_directory() / "medium_peers.json", data)
    return data


def medians(data):
    out = {}
    for case, by_allocator in data["samples"].items():
        out[case] = {}
        for allocator, runs in by_allocator.items():
            good = [r for r in runs if r is not None]
            out[case][allocator] = {"us": median([r["us"] for r in good]),
                                    "maxrss_mib": median([r["maxrss_mib"] for r in good]),
                                    "failed": len(runs) - len(good)}
    return out


def over_best_peer(row, metric):
    """pagemalloc's median over the smallest peer's, and that peer."""
    peers = [(row[p][metric], p) for p in PEERS if row[p][metric] is not None]
    if not peers or row["pagemalloc"][metric] is None:
        return None, "-"
    best, peer = min(peers)
    return ratio(row["pagemalloc"][metric], best), peer


def rows_of(table, cases, metric, digits):
    rows = []
    for case in cases:
        row = table[case]
        r, peer = over_best_peer(row, metric)
        rows.append([case, *(f_or_dash(row[a][metric], digits) for a in ALLOCATORS),
                     f"{fmt_ratio(r)} ({peer})"])
    return rows


def report(info, data):
    paper = papers_directory() / "allocator-workloads"
    paper.mkdir(parents=True, exist_ok=True)
    table = medians(data)
    cases = data["cases"]
    header = ["case", *ALLOCATORS, "pagemalloc / best peer"]
    time_rows = rows_of(table, cases, "us", 1)
    rss_rows = rows_of(table, cases, "maxrss_mib", 1)
    failed = sum(v["failed"] for row in table.values() for v in row.values())
    text = ["# Medium blocks beside the peers, each case alone: results", "",
            f"{machine_line(info)}; {data['rounds']} rounds; each case of "
            "`benchmarks/medium_blocks_bench` (its malloc version) alone in its process under "
            "each allocator. Generated by `bash tools/study.sh --only medium-classes` "
            "(tools/study/medium_peers.py, whose docstring has the method); medians; "
            f"{failed} failed runs.", "",
            "Repeated: every round the same requests, from the seed (the workloads' cases). "
            "Onward: 1,000 rounds, each a new sequence from one generator.", "",
            "## Time per round, µs (1,000 replacements)", "", markdown_table(header, time_rows),
            "", "## Peak RSS of the process, MiB", "", markdown_table(header, rss_rows), ""]
    write_report(paper / "medium_peers.md", "\n".join(text))
    short = [[row[0], row[-1], rss[-1]] for row, rss in zip(time_rows, rss_rows)]
    return [f"medium blocks beside the peers ({shown(paper / 'medium_peers.md')}): pagemalloc "
            "over the best peer",
            text_table(["case", "time", "peak RSS"], short)]
