"""The Arrow builder (papers/arrow-inplace): does a 64-byte-aligned buffer grow in place?

Source: "Faster, scalable memory allocations in Apache Arrow with jemalloc" (Uwe Korn, 2018;
[Korn 2018] in docs/references.md). benchmarks/arrow_builder_bench builds a 512 MiB int64
column by 2 MiB appends,
doubling its capacity; three repetitions, the first cold, the next two warm. Rows:

  <peer> aligned_alloc+memcpy    the portable way, under glibc and every peer (LD_PRELOAD)
  glibc realloc (unaligned)      not 64-byte aligned: for reference
  jemalloc rallocx               jemalloc's own aligned reallocation, as Arrow used it
  mimalloc mi_realloc_aligned    mimalloc's own aligned reallocation
  pagemalloc-<variant> pm_rallocx   in each variant's build (--quick: the pagemap variant's)
  limit (pre-faulted)            appends into one pre-faulted region

One process per row and round, interleaved (gbench.py); the jemalloc and mimalloc rows run in
a process with that allocator preloaded, where the benchmark finds its functions. Reported per
repetition: GB/s (median over rounds), moves (grows that changed the address) and bytes copied;
the figure shows the GB/s of each repetition, row by row, against the limit.
"""

import dataclasses
import re

from allocators import PEERS, benchmark_binary, measured_variants, peer_library
from common import (fmt_ratio, log, machine_line, markdown_table, median, papers_directory,
                    progress, ratio, results_directory, shown, text_table, write_json,
                    write_report)
from gbench import Entry, read_json, run_rounds


def paper_directory():
    return papers_directory() / "arrow-inplace"


BINARY = "arrow_builder_bench"
LIMIT = "limit (pre-faulted)"


@dataclasses.dataclass
class Row:
    name: str            # as the table shows it
    variant: str         # the pagemalloc build whose binary runs it
    filter: str          # the benchmark's strategy
    peer: str = "glibc"  # the allocator under the process

    def entry(self):
        label = re.sub(r"[^A-Za-z0-9_.-]+", "_", self.name).strip("_")
        return Entry(label, benchmark_binary(self.variant, BINARY), self.filter,
                     peer_library(self.peer))


def rows(quick=False):
    out = [Row(f"{peer} aligned_alloc+memcpy", "pagemap", "GlibcAlignedAllocMemcpy", peer)
           for peer in PEERS]
    out.append(Row("glibc realloc (unaligned)", "pagemap", "GlibcRealloc"))
    out.append(Row("jemalloc rallocx", "pagemap", "JemallocRallocx", "jemalloc"))
    out.append(Row("mimalloc mi_realloc_aligned", "pagemap", "MimallocReallocAligned", "mimalloc"))
    out += [Row(f"pagemalloc-{v} pm_rallocx", v, "PagemallocRallocx")
            for v in measured_variants(quick)]
    out.append(Row(LIMIT, "pagemap", "PrefaultedRegion"))
    return out


def measure(quick, rounds, seed):
    """Runs every row; returns {"rows": {name: {rep: {"gbps": [...], "moves": [...],
    "copied": [...]}}}} with one value per round in each list."""
    table = rows(quick)
    entries = [row.entry() for row in table]
    rounds = 1 if quick else min(rounds, 3)
    progress.plan_steps(rounds)
    outputs = run_rounds("arrow", entries, rounds, seed)
    data = {}
    for row, entry in zip(table, entries):
        for path in outputs[entry.label]:
            if not path.exists():
                log(f"arrow: {row.name}: no result in {path.name} (benchmark not registered?)")
                continue
            reps = [b for b in read_json(path)["benchmarks"]
                    if b.get("run_type") != "aggregate" and not b.get("error_occurred")]
            for index, b in enumerate(reps):
                cell = data.setdefault(row.name, {}).setdefault(
                    str(index), {"gbps": [], "moves": [], "copied": []})
                cell["gbps"].append(b.get("bytes_per_second", 0) / 1e9)
                cell["moves"].append(b.get("moves"))
                cell["copied"].append(b.get("bytes_copied"))
    result = {"rows": data}
    write_json(results_directory() / "arrow.json", result)
    return result


def per_rep(reps, key):
    """The median over rounds of `key`, one value per repetition, in order."""
    return [median(reps[k][key]) for k in sorted(reps, key=int)]


def warm(values):
    """The median of the warm repetitions (all but the first)."""
    return median(values[1:]) if len(values) > 1 else None


def slash(values, scale=1.0):
    return " / ".join("—" if v is None else f"{v / scale:,.0f}" for v in values)


def figure(data, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(data["rows"])
    gbps = {name: per_rep(data["rows"][name], "gbps") for name in names}
    moves = {name: per_rep(data["rows"][name], "moves") for name in names}
    reps = max(len(v) for v in gbps.values())
    width = 0.8 / reps
    figure, axis = plt.subplots(figsize=(12, 5))
    for rep in range(reps):
        heights = [gbps[n][rep] if rep < len(gbps[n]) else 0 for n in names]
        label = "repetition 1 (cold)" if rep == 0 else f"repetition {rep + 1} (warm)"
        bars = axis.bar([x + rep * width for x in range(len(names))], heights, width, label=label)
        for bar, name in zip(bars, names):
            m = moves[name][rep] if rep < len(moves[name]) else None
            if m is not None:
                axis.annotate(f"{m:.0f}", (bar.get_x() + bar.get_width() / 2, bar.get_height()),
                              ha="center", va="bottom", fontsize=7)
    limit = warm(gbps.get(LIMIT, []))
    if limit:
        axis.axhline(limit, color="grey", linestyle="--", linewidth=1,
                     label=f"limit, warm ({limit:.1f} GB/s)")
    axis.set_xticks([x + width * (reps - 1) / 2 for x in range(len(names))], names,
                    rotation=30, ha="right", fontsize=8)
    axis.set(ylabel="GB/s (higher is better)",
             title="Arrow builder: 512 MiB appended, capacity doubled "
                   "(numbers on the bars: moves of 8 grows)")
    axis.grid(True, axis="y", alpha=0.3)
    axis.legend(fontsize=8)
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)


def report(info, data):
    paper = paper_directory()
    paper.mkdir(parents=True, exist_ok=True)
    limit_warm = warm(per_rep(data["rows"].get(LIMIT, {}), "gbps"))
    table_rows = []
    for name, reps in data["rows"].items():
        gbps = per_rep(reps, "gbps")
        table_rows.append([name] + [f"{g:.2f}" for g in gbps] +
                          [slash(per_rep(reps, "moves")),
                           slash(per_rep(reps, "copied"), 2**20),
                           fmt_ratio(ratio(warm(gbps), limit_warm))])
    header = ["strategy", "rep 1 GB/s", "rep 2 GB/s", "rep 3 GB/s", "moves (rep 1 / 2 / 3)",
              "MiB copied (rep 1 / 2 / 3)", "warm / limit"]
    figure(data, paper / "arrow.png")
    text = "\n".join([
        "# Arrow builder: measured results", "",
        "Generated by `bash tools/study.sh --only arrow` (part of `bash tools/study.sh`);"
        " do not edit by hand.", "",
        f"Machine and date: {machine_line(info)}.", "",
        "GB/s: median over rounds of each repetition (repetition 1 cold, 2 and 3 warm); moves:"
        " grows of 8 that changed the buffer's address; warm / limit: the median of"
        " repetitions 2 and 3 over the pre-faulted limit's.", "",
        "![GB/s per repetition, every strategy](arrow.png)", "",
        markdown_table(header, table_rows), ""])
    write_report(paper / "results.md", text)
    write_json(paper / "summary.json", {"machine": info, "rows": data["rows"]})
    return [f"arrow builder ({shown(paper / 'results.md')}):", text_table(header, table_rows)]
