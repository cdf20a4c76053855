"""The talk's workloads (papers/allocator-workloads), every allocator side by side.

Source: "The Impact of Memory Allocators on Performance" (Arthur Pastel, EuroRust 2024;
docs/references.md), as docs/design.md fixes the benchmarks:

  small chunks   benchmarks/small_chunks_bench BM_SmallChunks: 1600 chunks, half freed FIFO,
                 half LIFO; chunk_size 16 .. 256
  threads        BM_SmallChunksThreads: the same with 128 bytes on N = 1 .. 16 threads
  large blocks   benchmarks/large_blocks_bench: 1000 blocks of 5-25 MB, at most 20 alive

and one workload of this study's own, not the talk's:

  medium blocks  benchmarks/medium_blocks_bench: 1000 blocks of 64 KiB-1 MiB freed and asked for
                 again at random: 1 live (one length, 128 KiB), 4, 32 and 100 of 64-256 KiB,
                 1, 4, 32 and 100 of 256 KiB-1 MiB

One process per allocator and round, interleaved (gbench.py): the peers run the benchmarks'
`Malloc` rows under LD_PRELOAD (glibc: no preload), each pagemalloc variant runs the
`Pagemalloc` rows of its own build (--quick: the pagemap variant only, one round of a
shorter minimum time), and `pagemalloc-arena` runs the explicit arena with a
reset per round (the bump-arena comparison of the talk) where the binary has it. The time of a
case is the median over rounds of the wall time per round (small chunks: per 1600
allocations and frees; threads: the total throughput's time per 1600, so lower is better for
every row alike).

The report has one figure per workload (small_chunks.png, threads.png, large_blocks.png,
medium_blocks.png), the table of medians, pagemalloc (pagemap) over each peer per workload and
as geometric means, and the spread of each allocator's rounds (the talk warns that mimalloc's
timings are noisy).

Arena rounds (benchmarks/arena_rounds_bench, arena_rounds.md and arena_rounds.png): the
small-chunk workload with one release per round instead of a free per chunk (1600 chunks of
16 .. 256 B, each written), the Go arena's pattern (a quarter freed early, the rest at the
end) and the reset round on 2 threads (own arenas, one shared arena): pagemalloc's bump arena
(pagemalloc::BumpArena, pm_mallocx(PM_ARENA(i)), ArenaResource), its arena of slabs and runs,
pm_malloc/pm_free, a bare bump pointer in a pre-faulted buffer (the limit),
std::pmr::monotonic_buffer_resource and std::pmr::unsynchronized_pool_resource. One process per
kind and round, interleaved; single-thread cases by CPU time per round (the machine is shared:
wall time counts other programs' time slices), threaded cases by wall time.
"""

from allocators import PEERS, VARIANTS, benchmark_binary, measured_variants, peer_library
from common import (fmt_ratio, geomean, machine_line, markdown_table, median, output_of,
                    papers_directory, progress, ratio, read_json, results_directory, shown,
                    text_table, write_json, write_report)
from gbench import Entry, case_sort_key, case_title, cpu_ns, real_ns, run_rounds, samples


def paper_directory():
    return papers_directory() / "allocator-workloads"


BINARIES = ["small_chunks_bench", "large_blocks_bench", "medium_blocks_bench"]
ARENA_FILTER = "ArenaReset"
ARENA_BINARY = "arena_rounds_bench"
# The arena-rounds kinds (template arguments in arena_rounds_bench), in the tables' order.
ARENA_KINDS = ["BareBump", "BumpArena", "BumpCursorInline", "BumpCursorCall", "BumpMallocx",
               "BumpResource", "Monotonic", "MonotonicVirtual", "UnsyncPool", "PlainArena",
               "PmMallocFree", "SharedBumpMallocx"]
ARENA_TITLES = {
    "BareBump": "bare bump pointer (pre-faulted buffer)",
    "BumpArena": "pagemalloc::BumpArena",
    "BumpCursorInline": ("pm_arena_bump_inline(&cursor, size), pm_arena_bump_free_inline:"
                         " C's inline path"),
    "BumpCursorCall": "pm_arena_bump(&cursor, size, 0), pm_arena_bump_free: one call a block",
    "BumpMallocx": "pm_mallocx(PM_ARENA(bump arena))",
    "BumpResource": "pagemalloc::ArenaResource (bump)",
    "Monotonic": "std::pmr::monotonic_buffer_resource",
    "MonotonicVirtual": "std::pmr::monotonic_buffer_resource through memory_resource&",
    "UnsyncPool": "std::pmr::unsynchronized_pool_resource",
    "PlainArena": "pm_mallocx(PM_ARENA(arena of slabs and runs))",
    "PmMallocFree": "pm_malloc / pm_free",
    "SharedBumpMallocx": "pm_mallocx, one bump arena shared by both threads",
}


def has_benchmarks(binary, pattern):
    listing = output_of([str(binary), "--benchmark_list_tests=true", f"--benchmark_filter={pattern}"])
    return bool(listing.strip())


def entries(quick=False):
    out = []
    for name in BINARIES:
        base = benchmark_binary("pagemap", name)
        for peer in PEERS:
            out.append(Entry(f"{peer}", base, "<Malloc>", peer_library(peer)))
        for variant in measured_variants(quick):
            out.append(Entry(f"pagemalloc-{variant}", benchmark_binary(variant, name), "<Pagemalloc>"))
        if has_benchmarks(base, ARENA_FILTER):
            out.append(Entry("pagemalloc-arena", base, f"<{ARENA_FILTER}>"))
    # One process per allocator and binary: the label says the allocator, the binary the file.
    for entry in out:
        entry.label = f"{entry.label}@{entry.binary.name}"
    return out


def measure(quick, rounds, seed):
    """Runs every allocator on every workload; returns {"cases": {case: {allocator: [ns]}}}."""
    min_time = "0.05" if quick else "0.2"
    progress.plan_steps(2 * (1 if quick else rounds))  # the workloads' rounds, the arena's
    outputs = run_rounds("workloads", entries(quick), 1 if quick else rounds, seed,
                         [f"--benchmark_min_time={min_time}"])
    by_case = samples(outputs, real_ns)
    cases = {}
    for case, by_label in by_case.items():
        for label, values in by_label.items():
            cases.setdefault(case, {}).setdefault(label.split("@")[0], []).extend(values)
    data = {"cases": cases, "rounds": 1 if quick else rounds,
            "arena_rounds": measure_arena_rounds(quick, rounds, seed)}
    write_json(results_directory() / "workloads.json", data)
    return data


def arena_value(benchmark):
    """CPU time per round for one thread, wall time for the threaded rounds (ns)."""
    return real_ns(benchmark) if "/threads:" in benchmark["name"] else cpu_ns(benchmark)


def measure_arena_rounds(quick, rounds, seed):
    """Every arena-rounds kind, one process each per round: {"cases": {case: {kind: [ns]}},
    "regions_per_round": [...] (the shared arena's spans: how often a thread took its lock)}."""
    binary = benchmark_binary("pagemap", ARENA_BINARY)
    entries = [Entry(kind, binary, f"<{kind}>") for kind in ARENA_KINDS]
    min_time = "0.05" if quick else "0.2"
    outputs = run_rounds("arena-rounds", entries, 1 if quick else rounds, seed,
                         [f"--benchmark_min_time={min_time}"])
    regions = [b["regions_per_round"] for path in outputs["SharedBumpMallocx"]
               for b in read_json(path)["benchmarks"] if "regions_per_round" in b]
    return {"cases": samples(outputs, arena_value), "rounds": 1 if quick else rounds,
            "regions_per_round": regions}


def allocators_in(data):
    labels = {label for by_label in data["cases"].values() for label in by_label}
    order = PEERS + [f"pagemalloc-{v}" for v in VARIANTS] + ["pagemalloc-arena"]
    return [label for label in order if label in labels]


# The workloads, each with its own figure: (name, file, title, case prefix, x-axis label).
WORKLOADS = [
    ("small chunks", "small_chunks.png", "Small chunks: 1600 allocations, half freed FIFO, half LIFO",
     "BM_SmallChunks/", "chunk size (bytes)"),
    ("threads", "threads.png", "Threads: 1600 chunks of 128 bytes on each of N threads",
     "BM_SmallChunksThreads/", "threads N"),
    ("large blocks", "large_blocks.png", "Large blocks: 1000 blocks of 5-25 MB, at most 20 alive",
     "BM_LargeBlocks", ""),
    ("medium blocks", "medium_blocks.png",
     "Medium blocks: 1000 of 64 KiB-1 MiB replaced at random (not the talk's)", "BM_MediumBlocks/",
     "live blocks × lengths"),
]


def cases_of(data, prefix):
    return sorted((c for c in data["cases"] if c.startswith(prefix)), key=case_sort_key)


def figure(data, prefix, title, xlabel, path):
    """One workload: a group of bars per case, one bar per allocator (median of rounds), with
    the smallest and largest round as an error bar."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cases = cases_of(data, prefix)
    labels = [l for l in allocators_in(data) if any(data["cases"][c].get(l) for c in cases)]
    width = 0.8 / max(len(labels), 1)
    figure, axis = plt.subplots(figsize=(10, 4.5))
    for i, label in enumerate(labels):
        samples_us = [[v / 1e3 for v in data["cases"][c].get(label, [])] for c in cases]
        mids = [median(s) or 0 for s in samples_us]
        low = [m - min(s) if s else 0 for m, s in zip(mids, samples_us)]
        high = [max(s) - m if s else 0 for m, s in zip(mids, samples_us)]
        axis.bar([x + i * width for x in range(len(cases))], mids, width, label=label,
                 yerr=[low, high], capsize=2, error_kw={"linewidth": 0.7})
    # "32×256-1024KiB" as "32 ×\n256-1024KiB": the medium blocks' labels overlap on one line.
    axis.set_xticks([x + 0.4 - width / 2 for x in range(len(cases))],
                    [case_title(c).split(" ")[-1].replace("×", " ×\n") if xlabel else ""
                     for c in cases])
    # Large blocks: 0.2 ms against 4-20 ms; medium blocks: 10 µs against 600.
    log_scale = prefix in ("BM_LargeBlocks", "BM_MediumBlocks/")
    if log_scale:
        axis.set_yscale("log")
    axis.set(title=title, xlabel=xlabel,
             ylabel="µs per round, lower is better" + (" (log scale)" if log_scale else ""))
    axis.grid(True, axis="y", alpha=0.3)
    axis.legend(fontsize=7, ncol=2)
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)


def spread(values):
    """(largest - smallest) / median of one case's rounds."""
    mid = median(values)
    return (max(values) - min(values)) / mid if values and mid else None


def median_spread(data, prefix, label):
    """The median over a workload's cases of one allocator's spread."""
    return median([spread(data["cases"][c].get(label, [])) for c in cases_of(data, prefix)])


def fmt_percent(fraction):
    return "—" if fraction is None else f"{100 * fraction:.0f}%"


def report(info, data):
    """Writes papers/allocator-workloads/results.md and one PNG per workload; returns summary
    lines and the geometric-mean ratios of pagemalloc (pagemap) to every peer."""
    paper = paper_directory()
    paper.mkdir(parents=True, exist_ok=True)
    labels = allocators_in(data)
    rows, ratios = [], {peer: [] for peer in PEERS}
    group_ratios = {name: {peer: [] for peer in PEERS} for name, *_ in WORKLOADS}
    for case in sorted(data["cases"], key=case_sort_key):
        by_label = data["cases"][case]
        med = {label: median(by_label.get(label, [])) for label in labels}
        ours = med.get("pagemalloc-pagemap")
        best_peer = min((med[p] for p in PEERS if med.get(p)), default=None)
        group = next(name for name, _, _, prefix, _ in WORKLOADS if case.startswith(prefix))
        for peer in PEERS:
            ratios[peer].append(ratio(ours, med.get(peer)))
            group_ratios[group][peer].append(ratio(ours, med.get(peer)))
        rows.append([case_title(case)] + [f"{med[l] / 1e3:,.1f}" if med[l] else "—" for l in labels]
                    + [fmt_ratio(ratio(ours, best_peer))])
    header = ["workload"] + [f"{l} µs" for l in labels] + ["pagemap / best peer"]
    table = markdown_table(header, rows)
    geo = {peer: geomean(values) for peer, values in ratios.items()}
    geo_rows = [[name] + [fmt_ratio(geomean(group_ratios[name][p])) for p in PEERS]
                for name, *_ in WORKLOADS]
    geo_rows.append([f"all {len(rows)} workloads"] + [fmt_ratio(geo[p]) for p in PEERS])
    geo_table = markdown_table(["pagemalloc (pagemap) / peer, geometric mean"] + PEERS, geo_rows)
    spread_rows = [[name] + [fmt_percent(median_spread(data, prefix, l)) for l in labels]
                   for name, _, _, prefix, _ in WORKLOADS]
    spread_table = markdown_table(["round-to-round spread, median over cases"] + labels,
                                  spread_rows)
    figures = []
    for name, file, title, prefix, xlabel in WORKLOADS:
        figure(data, prefix, title, xlabel, paper / file)
        figures += [f"![{name}]({file})", ""]
    text = "\n".join([
        "# Allocator workloads: measured results", "",
        "Generated by `bash tools/study.sh --only workloads` (part of `bash tools/study.sh`);"
        " do not edit by hand.", "",
        f"Machine and date: {machine_line(info)}. Rounds: {data['rounds']} (median of rounds;"
        " error bars: the smallest and largest round).", "",
        *figures,
        "Time per round in µs (lower is better):", "",
        table, "", geo_table, "",
        "Spread of the rounds, (largest - smallest) / median, for each allocator:", "",
        spread_table, ""])
    write_report(paper / "results.md", text)
    summary = {"machine": info, "medians": {c: {l: median(v) for l, v in d.items()}
                                            for c, d in data["cases"].items()},
               "geomean_ratio_to_peer": geo,
               "geomean_ratio_to_peer_by_workload": {
                   name: {p: geomean(group_ratios[name][p]) for p in PEERS}
                   for name, *_ in WORKLOADS}}
    write_json(paper / "summary.json", summary)
    arena = data.get("arena_rounds")
    arena_lines = report_arena_rounds(info, arena) if arena else []
    lines = [f"allocator workloads ({shown(paper / 'results.md')}), µs per round:",
             text_table(["workload"] + labels + ["pm/best"], [[r[0]] + r[1:] for r in rows])]
    lines.append("  pagemalloc / peer (geomean): " +
                 ", ".join(f"{p} {fmt_ratio(geo[p])}" for p in PEERS))
    return lines + arena_lines, geo


def arena_case_title(case):
    return (case.replace("/real_time", "")
            .replace("BM_ResetRoundThreads/threads:2", "reset round, 2 threads, 128 B")
            .replace("BM_ResetRound/chunk_size:", "reset round ")
            .replace("BM_GoArenaRound", "Go-arena round (16-256 B)")
            .replace("/min_time:0.050", "").replace("/min_time:0.200", ""))


def arena_figure(data, path):
    """The single-thread reset rounds: a group of bars per chunk size, one bar per kind."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cases = sorted((c for c in data["cases"] if c.startswith("BM_ResetRound/")), key=case_sort_key)
    kinds = [k for k in ARENA_KINDS if any(data["cases"][c].get(k) for c in cases)]
    width = 0.8 / max(len(kinds), 1)
    figure, axis = plt.subplots(figsize=(11, 4.5))
    for i, kind in enumerate(kinds):
        mids = [(median(data["cases"][c].get(kind, [])) or 0) / 1e3 for c in cases]
        axis.bar([x + i * width for x in range(len(cases))], mids, width, label=ARENA_TITLES[kind],
                 color=plt.cm.tab20(i))  # (more kinds than the default cycle's 10 colours)
    axis.set_xticks([x + 0.4 - width / 2 for x in range(len(cases))],
                    [c.split(":")[-1] for c in cases])
    axis.set(title="1600 chunks written, then released: one round (CPU time)",
             xlabel="chunk size (bytes)", ylabel="µs per round, lower is better")
    axis.set_yscale("log")
    axis.grid(True, axis="y", alpha=0.3)
    # Below the axes: inside, the legend hid the tallest bars.
    axis.legend(fontsize=7, ncol=3, loc="upper center", bbox_to_anchor=(0.5, -0.2))
    figure.tight_layout()
    figure.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(figure)


def report_arena_rounds(info, data):
    """Writes papers/allocator-workloads/arena_rounds.md and arena_rounds.png; returns summary
    lines."""
    cases = sorted(data["cases"], key=case_sort_key)
    kinds = [k for k in ARENA_KINDS if any(data["cases"][c].get(k) for c in cases)]
    rows, ratio_rows = [], []
    for case in cases:
        med = {k: median(data["cases"][case].get(k, [])) for k in kinds}
        rows.append([arena_case_title(case)] +
                    [f"{med[k] / 1e3:,.2f}" if med[k] else "—" for k in kinds])
        bare, mono = med.get("BareBump"), med.get("Monotonic")
        ratio_rows.append([arena_case_title(case)] +
                          [fmt_ratio(ratio(med.get(k), bare))
                           for k in ("BumpArena", "BumpMallocx", "BumpResource", "PlainArena")] +
                          [fmt_ratio(ratio(med.get("BumpArena"), mono)), fmt_ratio(ratio(mono, bare))] +
                          [fmt_ratio(ratio(med.get(k), mono))
                           for k in ("BumpCursorInline", "BumpCursorCall", "BumpMallocx")] +
                          [fmt_ratio(ratio(med.get("BumpCursorCall"), med.get("MonotonicVirtual")))])
    table = markdown_table(["case"] + [f"{k} µs" for k in kinds], rows)
    ratio_titles = ["case", "BumpArena / bare", "BumpMallocx / bare", "BumpResource / bare",
                    "PlainArena / bare", "BumpArena / monotonic", "monotonic / bare",
                    "BumpCursorInline / monotonic", "BumpCursorCall / monotonic",
                    "BumpMallocx / monotonic", "BumpCursorCall / monotonic virtual"]
    ratios = markdown_table(ratio_titles, ratio_rows)
    legend = [f"- `{k}`: {ARENA_TITLES[k]}" for k in kinds]
    regions = data.get("regions_per_round") or []
    arena_figure(data, paper_directory() / "arena_rounds.png")
    text = "\n".join([
        "# Allocator workloads: arena rounds", "",
        "Generated by `bash tools/study.sh --only workloads` (part of `bash tools/study.sh`);"
        " do not edit by hand.", "",
        f"Machine and date: {machine_line(info)}. Rounds: {data['rounds']} (median of rounds).", "",
        "Single-thread cases: CPU time per round; the 2-thread case: wall time per 1600 chunks of"
        " both threads together (benchmarks/arena_rounds_bench.cpp says what each case does).", "",
        "![arena rounds](arena_rounds.png)", "",
        *legend, "",
        "Time per round in µs (lower is better):", "",
        table, "",
        "Ratios of medians (1.00: as fast as the bare bump pointer):", "",
        ratios, "",
        "Regions of 128 KiB the shared bump arena handed out per round, in spans of up to 4,"
        " each taken under the arena's lock (no other allocation takes it), per run: " +
        (", ".join(f"{r:.1f}" for r in regions) or "—") + ".", ""])
    write_report(paper_directory() / "arena_rounds.md", text)
    lines = [f"arena rounds ({shown(paper_directory() / 'arena_rounds.md')}), µs per round:",
             text_table(["case"] + kinds, [[r[0]] + r[1:] for r in rows]),
             text_table([t.replace(" / ", "/") for t in ratio_titles], ratio_rows)]
    return lines


if __name__ == "__main__":
    # The arena rounds alone, after a release build of arena_rounds_bench:
    #   /usr/bin/python3 tools/study/workloads.py ROUNDS
    import sys
    from common import machine
    found = measure_arena_rounds(False, int(sys.argv[1]) if len(sys.argv) > 1 else 5, 1)
    write_json(results_directory() / "arena_rounds.json", found)
    print("\n".join(report_arena_rounds(machine(), found)))
