"""The talk's workloads (papers/allocator-workloads), every allocator side by side.

Source: "The Impact of Memory Allocators on Performance" (Arthur Pastel, EuroRust 2024;
docs/references.md), as docs/design.md fixes the benchmarks:

  small chunks   benchmarks/small_chunks_bench BM_SmallChunks: 1600 chunks, half freed FIFO,
                 half LIFO; chunk_size 16 .. 256
  threads        BM_SmallChunksThreads: the same with 128 bytes on N = 1 .. 16 threads
  large blocks   benchmarks/large_blocks_bench: 1000 blocks of 5-25 MB, at most 20 alive

One process per allocator and round, interleaved (gbench.py): the peers run the benchmarks'
`Malloc` rows under LD_PRELOAD (glibc: no preload), each pagemalloc variant runs the
`Pagemalloc` rows of its own build, and `pagemalloc-arena` runs the explicit arena with a
reset per round (the bump-arena comparison of the talk) where the binary has it. The time of a
case is the median over rounds of the wall time per round (small chunks: per 1600
allocations and frees; threads: the total throughput's time per 1600, so lower is better for
every row alike).

The report has one figure per workload (small_chunks.png, threads.png, large_blocks.png), the
table of medians, pagemalloc (pagemap) over each peer per workload and as geometric means, and
the spread of each allocator's rounds (the talk warns that mimalloc's timings are noisy).
"""

from allocators import PEERS, VARIANTS, benchmark_binary, peer_library
from common import (PAPERS, RESULTS, fmt_ratio, geomean, log, machine_line, markdown_table,
                    median, output_of, ratio, text_table, write_json)
from gbench import Entry, case_sort_key, case_title, real_ns, run_rounds, samples

PAPER = PAPERS / "allocator-workloads"
BINARIES = ["small_chunks_bench", "large_blocks_bench"]
ARENA_FILTER = "ArenaReset"


def has_benchmarks(binary, pattern):
    listing = output_of([str(binary), "--benchmark_list_tests=true", f"--benchmark_filter={pattern}"])
    return bool(listing.strip())


def entries():
    out = []
    for name in BINARIES:
        base = benchmark_binary("pagemap", name)
        for peer in PEERS:
            out.append(Entry(f"{peer}", base, "<Malloc>", peer_library(peer)))
        for variant in VARIANTS:
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
    outputs = run_rounds("workloads", entries(), 1 if quick else rounds, seed,
                         [f"--benchmark_min_time={min_time}"])
    by_case = samples(outputs, real_ns)
    cases = {}
    for case, by_label in by_case.items():
        for label, values in by_label.items():
            cases.setdefault(case, {}).setdefault(label.split("@")[0], []).extend(values)
    data = {"cases": cases, "rounds": 1 if quick else rounds}
    write_json(RESULTS / "workloads.json", data)
    return data


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
    axis.set_xticks([x + 0.4 - width / 2 for x in range(len(cases))],
                    [case_title(c).split(" ")[-1] if xlabel else "" for c in cases])
    log_scale = prefix == "BM_LargeBlocks"  # 0.2 ms against 4-20 ms
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
    PAPER.mkdir(parents=True, exist_ok=True)
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
        figure(data, prefix, title, xlabel, PAPER / file)
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
    (PAPER / "results.md").write_text(text)
    summary = {"machine": info, "medians": {c: {l: median(v) for l, v in d.items()}
                                            for c, d in data["cases"].items()},
               "geomean_ratio_to_peer": geo,
               "geomean_ratio_to_peer_by_workload": {
                   name: {p: geomean(group_ratios[name][p]) for p in PEERS}
                   for name, *_ in WORKLOADS}}
    write_json(PAPER / "summary.json", summary)
    lines = ["allocator workloads (papers/allocator-workloads/results.md), µs per round:",
             text_table(["workload"] + labels + ["pm/best"], [[r[0]] + r[1:] for r in rows])]
    lines.append("  pagemalloc / peer (geomean): " +
                 ", ".join(f"{p} {fmt_ratio(geo[p])}" for p in PEERS))
    return lines, geo
