"""What thp:auto's budget for fresh huge pages gives and takes (papers/memory/huge_pages.md).

pointer_chase (benchmarks/memory/pointer_chase.c) builds a heap of 64-byte blocks as fast as it
can and then reads it in random order. It runs under pagemalloc's drop-in in three settings:

  budget       thp:auto, thp_budget:64 (fresh huge pages' faults beyond what small pages
               cost stay within 5 ms plus 1/64 of the run time; huge_page_budget.h)
  unlimited    thp:auto, thp_budget:0 (every chunk the rules pick gets MADV_HUGEPAGE)
  small pages  thp:never (the default)

in two sizes:

  short        2,000,000 blocks (122 MiB), 2,000,000 links followed: most of the run is the
               building, where the faults of fresh huge pages are paid
  long         4,000,000 blocks (244 MiB), 20,000,000 links followed: most of the run is random
               reads, where huge pages save TLB misses (the case that punishes the budget, which
               decides while the heap is built, before the reads)

one process per (size, setting) and round, in an order shuffled from the seed and the round,
through measure_run (wall, user, sys, peak RSS). The criterion, per size: the budget's median
wall time <= 1.05 x the smaller of the other two settings' medians, on the machine at hand
(the cost of a fresh huge page depends on the host: docs/measurements.md).

Writes results/huge_pages.json (every sample), papers/memory/huge_pages.md and
papers/memory/huge_pages.png.
"""

import dataclasses
import tempfile

from allocators import build_directory
from common import (f_or_dash, fmt_ratio, log, machine_line, markdown_table, medians_of,
                    papers_directory, progress, ratio, results_directory, shown,
                    shuffled_rounds, text_table, write_json, write_report)
from launched import run_launched

TARGETS = ["pointer_chase", "measure_run"]
TIMEOUT_SECONDS = 120
LIMIT = 1.05


def paper_directory():
    return papers_directory() / "memory"


@dataclasses.dataclass
class Setting:
    name: str
    conf: str


SETTINGS = [Setting("budget", "thp:auto"), Setting("unlimited", "thp:auto,thp_budget:0"),
            Setting("small pages", "thp:never")]


@dataclasses.dataclass
class Size:
    name: str
    arguments: list
    quick_arguments: list


SIZES = [Size("short", ["blocks=2000000", "steps=2000000"], ["blocks=500000", "steps=500000"]),
         Size("long", ["blocks=4000000", "steps=20000000"], ["blocks=1000000", "steps=4000000"])]


def parse_phases(stdout):
    """built_s and read_s from pointer_chase's summary line."""
    fields = stdout.split()
    return {key: float(fields[fields.index(key) + 1]) for key in ("built_s", "read_s")
            if key in fields}


def measure(quick, rounds, seed):
    rounds = 1 if quick else rounds
    progress.plan_steps(rounds)
    binary = build_directory("pagemap") / "benchmarks" / "memory" / "pointer_chase"
    samples = {s.name: {t.name: [] for t in SETTINGS} for s in SIZES}
    entries = [(s, t) for s in SIZES for t in SETTINGS]
    with tempfile.TemporaryDirectory(prefix="huge_pages.") as scratch:
        for round_number, order in shuffled_rounds(entries, rounds, seed, "huge-pages"):
            for size, setting in order:
                arguments = size.quick_arguments if quick else size.arguments
                settings = [f"PAGEMALLOC_CONF={setting.conf}"] if setting.conf else []
                sample, stdout, _ = run_launched(binary, arguments, "pagemalloc", scratch,
                                                 TIMEOUT_SECONDS, settings)
                if sample["ok"]:
                    sample.update(parse_phases(stdout))
                else:
                    log(f"huge-pages: {size.name} ({setting.name}) failed: {sample['failure']}")
                sample["round"] = round_number
                samples[size.name][setting.name].append(sample)
    data = {"rounds": rounds, "quick": quick, "limit": LIMIT,
            "sizes": {s.name: {"arguments": s.quick_arguments if quick else s.arguments,
                               "samples": samples[s.name]} for s in SIZES},
            "settings": {t.name: t.conf for t in SETTINGS}}
    write_json(results_directory() / "huge_pages.json", data)
    return data


def medians(samples):
    return medians_of(samples, ("wall_s", "user_s", "sys_s", "maxrss_mib", "built_s", "read_s"))


def figure(table, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(1, len(SIZES), figsize=(9, 3.6))
    for ax, size in zip(axes, SIZES):
        names = [t.name for t in SETTINGS]
        built = [table[size.name][n]["built_s"] or 0 for n in names]
        read = [table[size.name][n]["read_s"] or 0 for n in names]
        ax.bar(names, built, label="building the heap")
        ax.bar(names, read, bottom=built, label="reading it")
        ax.set_title(f"{size.name} run")
        ax.set_ylabel("seconds (median)")
    axes[0].legend(fontsize=8)
    fig.suptitle("pointer_chase under pagemalloc: huge-page budget, no limit, small pages")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def report(info, data):
    """Writes papers/memory/huge_pages.md and its figure; returns the summary lines."""
    paper = paper_directory()
    paper.mkdir(parents=True, exist_ok=True)
    table = {s: {t: medians(data["sizes"][s]["samples"][t]) for t in data["settings"]}
             for s in data["sizes"]}
    verdicts, sections, summary_rows = {}, [], []
    for size in data["sizes"]:
        by = table[size]
        others = [by[t]["wall_s"] for t in data["settings"] if t != "budget"]
        best_other = min((w for w in others if w is not None), default=None)
        r = None if by["budget"]["failed"] else ratio(by["budget"]["wall_s"], best_other)
        verdicts[size] = r is not None and r <= LIMIT
        rows = [[t, *(f_or_dash(m[k], 2) for k in ("wall_s", "user_s", "sys_s", "built_s",
                                                   "read_s")),
                 f_or_dash(m["maxrss_mib"], 0), str(m["failed"])]
                for t, m in by.items()]
        arguments = " ".join(data["sizes"][size]["arguments"])
        sections += [f"## The {size} run (`pointer_chase {arguments}`)", "",
                     markdown_table(["setting", "wall s", "user s", "sys s", "building s",
                                     "reading s", "peak RSS MiB", "failed rounds"], rows), "",
                     f"budget / the better of the others: {fmt_ratio(r)} "
                     f"({'holds' if verdicts[size] else 'FAILS'}, limit {LIMIT})", ""]
        summary_rows.append([size, fmt_ratio(r), str(LIMIT),
                             "holds" if verdicts[size] else "FAILS"])
    figure(table, paper / "huge_pages.png")
    text = ["# Huge pages under a budget: results", "",
            f"{machine_line(info)}; {data['rounds']} rounds; pagemalloc's drop-in by LD_PRELOAD. "
            "Generated by `bash tools/study.sh --only huge-pages` (tools/study/huge_pages.py, "
            "whose docstring has the method); medians.", "",
            *sections, "![pointer_chase](huge_pages.png)", ""]
    write_report(paper / "huge_pages.md", "\n".join(text))
    return [f"huge pages ({shown(paper / 'huge_pages.md')}): pagemalloc's budget against no limit "
            "and small pages, wall time",
            text_table(["run", "budget / best other", "limit", "verdict"], summary_rows)]
