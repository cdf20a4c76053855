"""The medium classes' two design choices, one at a time (papers/allocator-workloads/medium_classes.md).

How far the medium classes reach (kMaxMediumSize: 256 KiB, 512 KiB or 1 MiB) and how far apart
they lie (kMediumClassesPerDoubling: page-exact, 4, 8 or 16 per doubling), each switched alone
from today's design (1 MiB, 8 per doubling; allocator/src/design/presets.h). Each is a build of
benchmarks/medium_blocks_bench (the one target, Release) under build/medium/<name>. Every
pagemalloc case of that benchmark runs in a process of its own under the launcher
(benchmarks/measure_run.c), in interleaved rounds in an order shuffled from the seed: its time
per round (google benchmark's, µs; 1,000 replacements) and the process's peak RSS. Unlike the
workloads part, which runs the cases one after the other in one process, each case starts from
an empty heap here.

--quick: today's design and the 256 KiB reach only, one round, 0.05 s a case.

Writes results/medium_classes.json, papers/allocator-workloads/medium_classes.md and
medium_classes.png; returns the summary's lines.
"""

import os
import tempfile
from pathlib import Path

from common import (ROOT, build_tree, f_or_dash, fmt_ratio, geomean, machine_line,
                    markdown_table, median, output_of, papers_directory, ratio, read_json,
                    results_directory, shown, shuffled_rounds, text_table, write_json,
                    write_report)
from gbench import case_title
from launched import run_launched

BUILDS_ROOT = ROOT / "build" / "medium"
BINARY = "medium_blocks_bench"
TODAY = "1 MiB, 8 per doubling"
# (name, directory, the design options): today's first, then one choice changed in each.
BUILDS = [
    (TODAY, "max1m-8", {}),
    ("256 KiB, 8 per doubling", "max256k-8", {"PAGEMALLOC_MAX_MEDIUM_SIZE": "262144"}),
    ("512 KiB, 8 per doubling", "max512k-8", {"PAGEMALLOC_MAX_MEDIUM_SIZE": "524288"}),
    ("1 MiB, page-exact", "max1m-exact", {"PAGEMALLOC_MEDIUM_SPACING": "0"}),
    ("1 MiB, 4 per doubling", "max1m-4", {"PAGEMALLOC_MEDIUM_SPACING": "4"}),
    ("1 MiB, 16 per doubling", "max1m-16", {"PAGEMALLOC_MEDIUM_SPACING": "16"}),
]
QUICK_BUILDS = BUILDS[:2]
TIMEOUT_S = 120


def paper_directory():
    return papers_directory() / "allocator-workloads"


def binary_of(directory):
    return BUILDS_ROOT / directory / "benchmarks" / BINARY


def build_all(builds):
    for name, directory, options in builds:
        configure = ["cmake", "--preset", "release", "-B", str(BUILDS_ROOT / directory),
                     "-DPAGEMALLOC_MAX_MEDIUM_SIZE=", "-DPAGEMALLOC_MEDIUM_SPACING="]
        configure += [f"-D{option}={value}" for option, value in options.items()]
        build_tree(f"build/medium/{directory} ({name})", configure,
                   ["cmake", "--build", str(BUILDS_ROOT / directory), "-j",
                    os.environ.get("JOBS", "2"), "--target", BINARY])


def cases(binary):
    listing = output_of([str(binary), "--benchmark_list_tests=true",
                         "--benchmark_filter=<Pagemalloc>"])
    return [line.strip() for line in listing.splitlines() if line.strip()]


def run_case(binary, case, min_time, scratch, allocator="glibc", extra=()):
    """One case in a process of its own under an allocator (glibc's malloc: the binary's own
    pagemalloc serves its Pagemalloc cases; extra: the binary's own arguments): {"us": time
    per round, "maxrss_mib": ...} or None."""
    out = Path(scratch) / "case.json"
    sample, _, _ = run_launched(binary, [*extra, f"--benchmark_filter=^{case}$",
                                         f"--benchmark_min_time={min_time}",
                                         f"--benchmark_out={out}",
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
    """Builds every design, runs every case of each; returns the samples."""
    builds = QUICK_BUILDS if quick else BUILDS
    build_all(builds)
    names = cases(binary_of(builds[0][1]))
    rounds = 1 if quick else rounds
    min_time = "0.05" if quick else "0.2"
    samples = {name: {case: [] for case in names} for name, _, _ in builds}
    entries = [(name, directory, case) for name, directory, _ in builds for case in names]
    with tempfile.TemporaryDirectory() as scratch:
        for _, order in shuffled_rounds(entries, rounds, seed, "medium-classes"):
            for name, directory, case in order:
                samples[name][case].append(run_case(binary_of(directory), case, min_time,
                                                    scratch))
    data = {"builds": [name for name, _, _ in builds], "cases": names, "rounds": rounds,
            "samples": samples}
    write_json(results_directory() / "medium_classes.json", data)
    return data


def medians(data):
    """{outer: {inner: runs}} (build and case here; case and allocator in medium_peers) as
    {outer: {inner: {"us": median, "maxrss_mib": median, "failed": n}}}."""
    out = {}
    for outer, by_inner in data["samples"].items():
        out[outer] = {}
        for inner, runs in by_inner.items():
            good = [r for r in runs if r is not None]
            out[outer][inner] = {"us": median([r["us"] for r in good]),
                                 "maxrss_mib": median([r["maxrss_mib"] for r in good]),
                                 "failed": len(runs) - len(good)}
    return out


def title_of(case):
    return case_title(case.replace("<Pagemalloc>", "")).replace("medium blocks ", "")


def figure(table, builds, case_names, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(2, 1, figsize=(12, 8), sharex=True)
    width = 0.8 / len(builds)
    for i, build in enumerate(builds):
        xs = [k + (i - (len(builds) - 1) / 2) * width for k in range(len(case_names))]
        axes[0].bar(xs, [table[build][c]["us"] or 0 for c in case_names], width, label=build)
        axes[1].bar(xs, [table[build][c]["maxrss_mib"] or 0 for c in case_names], width,
                    label=build)
    axes[0].set_yscale("log")
    axes[0].set_ylabel("µs per round (log)")
    axes[1].set_ylabel("peak RSS, MiB")
    axes[0].set_title("Medium classes: how far they reach and how far apart (each case alone "
                      "in its process)")
    axes[1].set_xticks(range(len(case_names)))
    axes[1].set_xticklabels([title_of(c).replace("×", " ×\n") for c in case_names], fontsize=8)
    axes[1].legend(fontsize=8, ncol=3, loc="upper center", bbox_to_anchor=(0.5, -0.22))
    fig.tight_layout()
    fig.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(fig)


def report(info, data):
    """Writes medium_classes.md and its figure; returns the summary lines."""
    paper = paper_directory()
    paper.mkdir(parents=True, exist_ok=True)
    table = medians(data)
    builds, case_names = data["builds"], data["cases"]
    header = ["case", *builds]
    time_rows = [[title_of(c), *(f_or_dash(table[b][c]["us"], 1) for b in builds)]
                 for c in case_names]
    rss_rows = [[title_of(c), *(f_or_dash(table[b][c]["maxrss_mib"], 1) for b in builds)]
                for c in case_names]
    ratio_rows = []
    for build in builds:
        times = [ratio(table[build][c]["us"], table[TODAY][c]["us"]) for c in case_names]
        rss = [ratio(table[build][c]["maxrss_mib"], table[TODAY][c]["maxrss_mib"])
               for c in case_names]
        failed = sum(table[build][c]["failed"] for c in case_names)
        ratio_rows.append([build, fmt_ratio(geomean([t for t in times if t])),
                           fmt_ratio(max((t for t in times if t), default=None)),
                           fmt_ratio(geomean([r for r in rss if r])),
                           fmt_ratio(max((r for r in rss if r), default=None)), str(failed)])
    figure(table, builds, case_names, paper / "medium_classes.png")
    text = ["# Medium classes, one design choice at a time: results", "",
            f"{machine_line(info)}; {data['rounds']} rounds; each case of "
            "`benchmarks/medium_blocks_bench` alone in its process. Generated by `bash "
            "tools/study.sh --only medium-classes` (tools/study/medium_classes.py, whose "
            "docstring has the method); medians.", "",
            "## Time per round, µs (1,000 replacements)", "", markdown_table(header, time_rows),
            "", "## Peak RSS of the process, MiB", "", markdown_table(header, rss_rows), "",
            f"## Each design over today's ({TODAY})", "",
            markdown_table(["design", "time, geometric mean", "time, worst case",
                            "peak RSS, geometric mean", "peak RSS, worst case",
                            "failed runs"], ratio_rows), "",
            "![medium classes](medium_classes.png)", ""]
    write_report(paper / "medium_classes.md", "\n".join(text))
    return [f"medium classes ({shown(paper / 'medium_classes.md')}): each design over today's "
            f"({TODAY}), geometric means over the cases",
            text_table(["design", "time", "worst", "peak RSS", "worst", "failed"], ratio_rows)]
