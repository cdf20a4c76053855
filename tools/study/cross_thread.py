"""Blocks freed by other threads than the ones that allocated them (papers/cross-thread).

The programs (benchmarks/cross_thread/, each file's top comment names the public benchmark it
is modelled on) are plain executables calling malloc/free; every allocator is put under them
by LD_PRELOAD (glibc: nothing preloaded; pagemalloc: the release tree's libpagemalloc.so):

  pipeline        8 producers hand blocks of 8 B-300 KB through bounded queues to 8 consumers
                  (256 blocks per queue)
  pipeline-deep   the same with 16,384 blocks per queue, so that consumers can lag far behind
  rptest          rpmalloc-style random alloc/free, a share of blocks freed by the next thread
  rptest-medium   the same with blocks of 16-64 KiB (runs of pages under pagemalloc until its
                  slab classes went up to 64 KiB)
  larson          Larson's server simulation: arrays handed to successor threads
  larson-large    the same with 1 M live blocks of 16-64 B: frees spread over many chunks
  xmalloc         one thread allocates, another frees (4 pairs, xmalloc-test style)
  oversubscribed  16 threads on 2 CPUs, small blocks, some freed by another thread
  sh6bench        SmartHeap-style batches freed half oldest-first, half newest-first
  sh8bench        the same with the newest-first half freed by the next thread
  sh8bench-bursts the original sh8bench's bursts: 200,000 blocks of 8-48 B allocated, then freed
  false-sharing   2 threads each write 8-byte blocks of their own, each after freeing a block
                  the main thread allocated beside the other's (Hoard's cache-scratch)
  false-sharing-active  the same without the blocks handed over (Hoard's cache-thrash)
  thread-churn    waves of 64 threads that live a few milliseconds: each frees a block the main
                  thread allocated, allocates 32 of 16 B-300 KB and hands 4 back to the main
                  thread, which frees them once the thread has exited

Each program checks every block it frees and its totals, and must exit 0 and print its
"all checked" line. One process per (program, allocator) and round, in an order shuffled from
the seed and the round (5 rounds; --quick: 1 round at a smaller scale), each started through
measure_run (benchmarks/measure_run.c, so that its peak RSS is its own), which reports wall
time, user and sys time, peak RSS (ru_maxrss) and voluntary and involuntary context switches.
A median is taken over the rounds that succeeded.

The criteria, per program, for pagemalloc against the peers measured in the same run:
  wall time  <= 1.1 x the best (smallest) median wall time among glibc, jemalloc, mimalloc,
             tcmalloc
  peak RSS   <= 1.5 x the smallest median peak RSS among the peers
  sys time   <= 2 x glibc's median sys time, both counted as at least SYS_FLOOR_S (10 ms):
             the kernel charges system time in scheduler ticks (4 ms here), so 4 ms against
             0 ms is one tick, not a ratio
A program that failed or timed out in any round under pagemalloc fails all three. The load
average of the machine is recorded at the start and after each round. Every program also runs
under pagemalloc-ncpus64: pagemalloc with PAGEMALLOC_CONF=ncpus:64, sized as on a machine of 64
CPUs (32 arenas and their stash sets on these 2 cores), shown beside the criteria, not judged.

Writes results/cross_thread.json (every sample), papers/cross-thread/results.md (tables and
the verdicts), papers/cross-thread/cross_thread.png and papers/cross-thread/summary.json.
"""

import dataclasses
import os
import re
import tempfile

from allocators import PEERS, build_directory
from launched import run_launched
from common import (fmt_ratio, log, machine_line, markdown_table, median, medians_of,
                    papers_directory, progress, ratio, results_directory, shown,
                    shuffled_rounds, text_table, write_json, write_report)


def paper_directory():
    return papers_directory() / "cross-thread"


ALLOCATORS = PEERS + ["pagemalloc", "pagemalloc-ncpus64"]
# pagemalloc as it sizes itself for 64 CPUs on these 2 (32 arenas, their stash sets), shown
# beside the criteria, not judged by them: what a machine bigger than the study's would run.
SETTINGS = {"pagemalloc-ncpus64": ["PAGEMALLOC_CONF=ncpus:64"]}
TARGETS = ["pipeline_bench", "rptest_bench", "larson_bench", "xmalloc_bench",
           "oversubscribed_bench", "shbench_bench", "false_sharing_bench", "thread_churn_bench",
           "measure_run"]
TIMEOUT_SECONDS = 120
WALL_LIMIT, RSS_LIMIT, SYS_LIMIT = 1.1, 1.5, 2.0
SYS_FLOOR_S = 0.010  # sys times below this are compared as this (see the criteria above)
# Variables that would change an allocator's behaviour: never passed to the programs.


@dataclasses.dataclass
class Program:
    name: str
    binary: str
    arguments: list
    quick_arguments: list
    title: str


PROGRAMS = [
    Program("pipeline", "pipeline_bench", [], ["items=30000"],
            "8 producers hand blocks of 8 B-300 KB to 8 consumers through bounded queues of "
            "256 blocks"),
    Program("pipeline-deep", "pipeline_bench", ["queue=16384"], ["items=30000"],
            "the same with queues of 16,384 blocks: consumers may lag far behind"),
    Program("rptest", "rptest_bench", [], ["loops=500"],
            "rpmalloc-style random alloc/free on 4 threads, a share freed by the next thread"),
    Program("rptest-medium", "rptest_bench", ["least=16384", "most=65536"], ["loops=500"],
            "the same with blocks of 16-64 KiB (runs of pages under pagemalloc until its slab "
            "classes went up to 64 KiB)"),
    Program("larson", "larson_bench", [], ["generations=25"],
            "Larson server simulation: 4 arrays handed to successor threads, 100 generations"),
    Program("larson-large", "larson_bench",
            ["slots=250000", "ops=1000000", "generations=5", "least=16", "most=64"],
            ["ops=250000", "generations=2"],
            "Larson with a large live set: 4 arrays of 250,000 blocks of 16-64 B (1 M live, "
            "over a dozen chunks), 5 generations of 1,000,000 replacements per thread"),
    Program("xmalloc", "xmalloc_bench", [], ["batches=4000"],
            "one thread allocates, another frees: 4 pairs, blocks of 8-512 B"),
    Program("oversubscribed", "oversubscribed_bench", [], ["ops=400000"],
            "16 threads on 2 CPUs, blocks of 8-512 B, every 8th freed by the next thread"),
    Program("sh6bench", "shbench_bench", [], ["rounds=5000"],
            "SmartHeap-style: 4 threads, batches of 500 blocks of 8-1000 B freed half FIFO, "
            "half LIFO"),
    Program("sh8bench", "shbench_bench", ["cross=1", "rounds=3000"], ["rounds=1000"],
            "the same, the LIFO half of each batch freed by the next thread"),
    Program("sh8bench-bursts", "shbench_bench", ["batch=200000", "least=8", "most=48",
                                                 "rounds=100"], ["rounds=10"],
            "sh8bench's own pattern (MicroQuill's SH8BENCH.C as mimalloc-bench runs it): 4 "
            "threads each allocate bursts of 200,000 blocks of 8-48 B and free them, half "
            "oldest-first, half newest-first (without the original's producer thread, whose "
            "frees are 2 % of all)"),
    Program("false-sharing", "false_sharing_bench", [], ["writes=300000"],
            "2 threads each write 100 blocks of 8 B of their own in turn, 500,000 times a byte, "
            "after freeing a block the main thread allocated beside the other's (cache-scratch)"),
    Program("false-sharing-4", "false_sharing_bench", ["threads=4"], ["writes=300000"],
            "the same with 4 threads"),
    Program("false-sharing-8", "false_sharing_bench", ["threads=8"], ["writes=300000"],
            "the same with 8 threads"),
    Program("false-sharing-active", "false_sharing_bench", ["handoff=0"], ["writes=300000"],
            "the same without the hand-off: only blocks given out side by side to the two "
            "threads can share a cache line (cache-thrash)"),
    Program("false-sharing-active-8", "false_sharing_bench", ["handoff=0", "threads=8"],
            ["writes=300000"], "the same with 8 threads"),
    Program("thread-churn", "thread_churn_bench", [], ["waves=60"],
            "200 waves of 64 threads, each freeing a block the main thread allocated, "
            "allocating 32 of 16 B-300 KB and handing 4 back, freed after it exits"),
]


def program_directory():
    return build_directory("pagemap") / "benchmarks" / "cross_thread"





def run_once(program, allocator, quick, scratch):
    """One process: returns its sample (with "ok" and, when not ok, "failure")."""
    arguments = program.arguments + (program.quick_arguments if quick else [])
    sample, stdout, _ = run_launched(program_directory() / program.binary, arguments, allocator,
                                     scratch, TIMEOUT_SECONDS, SETTINGS.get(allocator, ()))
    if sample["ok"]:
        sample["output"] = stdout.strip()
        found = re.search(r"peak in flight: (\d+) KiB", sample["output"])
        if found:
            sample["in_flight_mib"] = int(found.group(1)) / 1024
    return sample


def measure(quick, rounds, seed):
    """Runs every program under every allocator in interleaved rounds; returns the data."""
    rounds = 1 if quick else rounds
    progress.plan_steps(rounds)
    samples = {p.name: {a: [] for a in ALLOCATORS} for p in PROGRAMS}
    entries = [(p, a) for p in PROGRAMS for a in ALLOCATORS]
    load = [os.getloadavg()[0]]
    with tempfile.TemporaryDirectory(prefix="cross_thread.") as scratch:
        for round_number, order in shuffled_rounds(entries, rounds, seed, "cross-thread"):
            for program, allocator in order:
                sample = run_once(program, allocator, quick, scratch)
                sample["round"] = round_number
                samples[program.name][allocator].append(sample)
                if not sample["ok"]:
                    log(f"cross-thread: {program.name} under {allocator} failed: "
                        f"{sample['failure']}")
            load.append(os.getloadavg()[0])
    data = {"rounds": rounds, "quick": quick, "load_average": load,
            "programs": {p.name: {"title": p.title, "binary": p.binary,
                                  "arguments": p.arguments + (p.quick_arguments if quick else []),
                                  "samples": samples[p.name]} for p in PROGRAMS}}
    write_json(results_directory() / "cross_thread.json", data)
    return data


METRICS = ["wall_s", "user_s", "sys_s", "maxrss_mib", "voluntary_switches",
           "involuntary_switches"]


def medians(samples):
    """{metric: median over the successful samples}, and the number of failed ones."""
    good = [s for s in samples if s["ok"]]
    out = medians_of(samples, METRICS)
    out["switches"] = median([s["voluntary_switches"] + s["involuntary_switches"] for s in good])
    flights = [s["in_flight_mib"] for s in good if "in_flight_mib" in s]
    out["in_flight_mib"] = median(flights) if flights else None
    return out


def verdicts(by_allocator):
    """The three criteria for pagemalloc in one program: {criterion: (ratio, limit, passed)}."""
    ours = by_allocator["pagemalloc"]
    peers = [by_allocator[p] for p in PEERS if by_allocator[p]["wall_s"] is not None]
    best_wall = min((p["wall_s"] for p in peers), default=None)
    best_rss = min((p["maxrss_mib"] for p in peers), default=None)
    glibc_sys = by_allocator["glibc"]["sys_s"]
    failed = ours["failed"] > 0 or ours["wall_s"] is None
    out = {}
    for name, value, reference, limit in [("wall", ours["wall_s"], best_wall, WALL_LIMIT),
                                          ("rss", ours["maxrss_mib"], best_rss, RSS_LIMIT),
                                          ("sys", ours["sys_s"], glibc_sys, SYS_LIMIT)]:
        if name == "sys" and value is not None and reference is not None:
            value, reference = max(value, SYS_FLOOR_S), max(reference, SYS_FLOOR_S)
        r = None if failed else ratio(value, reference)
        out[name] = (r, limit, r is not None and r <= limit)
    return out


def figure(table, path):
    """Three panels: pagemalloc and every peer relative to the best peer in wall time and peak
    RSS, and sys time relative to glibc's, with the criteria's limits as dashed lines."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FormatStrFormatter, LogLocator, NullFormatter

    names = list(table)
    panels = [("wall_s", "wall time / best peer's", lambda t: min(
        t[p]["wall_s"] for p in PEERS if t[p]["wall_s"] is not None), WALL_LIMIT),
              ("maxrss_mib", "peak RSS / smallest peer's", lambda t: min(
                  t[p]["maxrss_mib"] for p in PEERS if t[p]["maxrss_mib"] is not None), RSS_LIMIT),
              ("sys_s", "sys time / glibc's", lambda t: t["glibc"]["sys_s"], SYS_LIMIT)]
    width = 0.8 / len(ALLOCATORS)
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.5))
    for axis, (metric, title, reference_of, limit) in zip(axes, panels):
        for i, allocator in enumerate(ALLOCATORS):
            values = []
            for name in names:
                reference = reference_of(table[name])
                value = ratio(table[name][allocator][metric], reference)
                values.append(float("nan") if value is None else value)
            axis.bar([x + i * width for x in range(len(names))], values, width, label=allocator)
        axis.axhline(limit, color="black", linestyle="--", linewidth=0.8)
        axis.axhline(1.0, color="grey", linewidth=0.5)
        axis.set_xticks([x + 0.4 - width / 2 for x in range(len(names))], names, rotation=30,
                        ha="right")
        axis.set(title=title + f" (limit {limit})", ylabel="ratio, lower is better")
        axis.set_yscale("log")
        axis.yaxis.set_major_locator(LogLocator(subs=(1.0, 2.0, 5.0)))
        axis.yaxis.set_major_formatter(FormatStrFormatter("%g"))
        axis.yaxis.set_minor_formatter(NullFormatter())
        axis.grid(True, axis="y", alpha=0.3)
    axes[0].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def fmt_number(value, digits=2):
    return "—" if value is None else f"{value:,.{digits}f}"


def fmt_count(value):
    return "—" if value is None else f"{value:,.0f}"


def report(info, data):
    """Writes papers/cross-thread/results.md, the figure and summary.json; returns summary
    lines."""
    paper = paper_directory()
    paper.mkdir(parents=True, exist_ok=True)
    table = {name: {a: medians(entry["samples"][a]) for a in ALLOCATORS}
             for name, entry in data["programs"].items()}
    sections, verdict_rows, summary_rows, summary = [], [], [], {}
    for name, entry in data["programs"].items():
        by_allocator = table[name]
        best_wall = min((by_allocator[p]["wall_s"] for p in PEERS
                         if by_allocator[p]["wall_s"] is not None), default=None)
        best_rss = min((by_allocator[p]["maxrss_mib"] for p in PEERS
                        if by_allocator[p]["maxrss_mib"] is not None), default=None)
        rows = []
        for allocator in ALLOCATORS:
            m = by_allocator[allocator]
            rows.append([allocator, fmt_number(m["wall_s"]), fmt_number(m["user_s"]),
                         fmt_number(m["sys_s"]), fmt_number(m["maxrss_mib"], 1),
                         fmt_count(m["voluntary_switches"]), fmt_count(m["involuntary_switches"]),
                         fmt_ratio(ratio(m["wall_s"], best_wall)),
                         fmt_ratio(ratio(m["maxrss_mib"], best_rss)),
                         fmt_ratio(ratio(m["sys_s"], by_allocator["glibc"]["sys_s"])),
                         str(m["failed"])])
        header = ["allocator", "wall s", "user s", "sys s", "peak RSS MiB", "voluntary cs",
                  "involuntary cs", "wall / best peer", "RSS / best peer", "sys / glibc",
                  "failed rounds"]
        if any(by_allocator[a]["in_flight_mib"] is not None for a in ALLOCATORS):
            # The program reports the most bytes ever made and not yet freed.
            header.insert(5, "peak in flight MiB")
            for row, allocator in zip(rows, ALLOCATORS):
                row.insert(5, fmt_number(by_allocator[allocator]["in_flight_mib"], 1))
        command = " ".join([entry["binary"], *entry["arguments"]])
        sections += [f"### {name}", "", f"{entry['title']} (`{command}`).", "",
                     markdown_table(header, rows), ""]
        v = verdicts(by_allocator)
        both_floored = all(by_allocator[a]["sys_s"] is not None and
                           by_allocator[a]["sys_s"] < SYS_FLOOR_S for a in ("pagemalloc", "glibc"))
        forced = by_allocator["pagemalloc-ncpus64"]
        verdict_rows.append([name] + [
            ("under 10 ms, as glibc's" if c == "sys" and both_floored else fmt_ratio(v[c][0]))
            + f" ({'pass' if v[c][2] else 'FAIL'})" for c in ("wall", "rss", "sys")] + [
            fmt_ratio(ratio(forced["wall_s"], best_wall)) + " / "
            + fmt_ratio(ratio(forced["maxrss_mib"], best_rss))])
        summary_rows.append([name] + [fmt_ratio(v[c][0]) + ("" if v[c][2] else " !")
                                      for c in ("wall", "rss", "sys")])
        summary[name] = {"medians": by_allocator,
                         "criteria": {c: {"ratio": v[c][0], "limit": v[c][1], "passed": v[c][2]}
                                      for c in v}}
    passed = sum(all(summary[n]["criteria"][c]["passed"] for c in ("wall", "rss", "sys"))
                 for n in summary)
    verdict_header = ["program", f"wall / best peer (≤ {WALL_LIMIT})",
                      f"peak RSS / smallest peer's (≤ {RSS_LIMIT})",
                      f"sys / glibc (≤ {SYS_LIMIT})", "ncpus:64: wall / RSS over best peer"]
    figure(table, paper / "cross_thread.png")
    text = "\n".join([
        "# Cross-thread frees: measured results", "",
        "Generated by `bash tools/study.sh --only cross-thread` (part of `bash tools/study.sh`);"
        " do not edit by hand.", "",
        f"Machine and date: {machine_line(info)}. Rounds: {data['rounds']}"
        f"{' (quick: smaller scale)' if data['quick'] else ''}, interleaved; every number is the"
        " median over the rounds that succeeded. The machine's 1-minute load average at the"
        " start and after each round: "
        + ", ".join(f"{x:.1f}" for x in data.get("load_average", [])) + " (other work on the"
        " 2 cores lengthens wall times; user and sys time are the steadier measures).", "",
        "![cross-thread programs](cross_thread.png)", "",
        f"## pagemalloc against the criteria: {passed} of {len(summary)} programs pass all three",
        "",
        markdown_table(verdict_header, verdict_rows), "",
        "Best peer: the smallest median among glibc, jemalloc, mimalloc and tcmalloc, taken"
        " separately for wall time and for peak RSS. Sys times under 10 ms count as 10 ms in"
        " the sys criterion: the kernel charges them in scheduler ticks of 4 ms, so 4 ms against"
        " glibc's 0 is one tick, not a ratio. A program that failed in any round under"
        " pagemalloc fails every criterion. The last column is pagemalloc sized for 64 CPUs"
        " on these 2 (`PAGEMALLOC_CONF=ncpus:64`: 32 arenas and their stash sets, the"
        " pagemalloc-ncpus64 rows below), not judged: what a bigger machine's counts cost"
        " here.", "",
        "## Each program, every allocator", "",
        "cs: context switches of the whole process (voluntary: it waited, e.g. on a futex;"
        " involuntary: it was preempted). Peak in flight (the pipelines): the most bytes the"
        " producers had made and the consumers not yet freed, as the program counts them: what"
        " any allocator must hold at least. It depends on how far the producers run ahead of"
        " the consumers, so an allocator whose producers are slower holds less of it.", "",
        *sections])
    write_report(paper / "results.md", text)
    write_json(paper / "summary.json", {"machine": info, "rounds": data["rounds"],
                                        "quick": data["quick"], "programs": summary})
    lines = [f"cross-thread ({shown(paper / 'results.md')}): pagemalloc passes {passed} of "
             f"{len(summary)}; ratios (! = over the limit):",
             text_table(["program", "wall/best", "rss/best", "sys/glibc"], summary_rows)]
    return lines
