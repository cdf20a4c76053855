"""The tree-overhead study (papers/tree-overhead): what red-black trees cost the run manager.

Source: "Overzealous use of my red-black tree hammer" (Jason Evans, 2008; docs/references.md).
Three run managers, one seam (docs/design.md): pagemap (O(1) page-map coalescing, free lists with
a bitmap), hybrid (page-map coalescing, a (size, address) tree), rbtree (an address tree and a
(size, address) tree). Measured three ways, from the closest to the run manager outwards:

  micro     benchmarks/run_manager_bench[_counted]: alloc/free with n free runs in the heap,
            n = 16 .. 65,536; ns/op and counters per op, every variant in one process
  replay    benchmarks/trace_replay[_counted]: the run-manager calls of real programs
            (recorded once by a tracing drop-in) replayed through every variant in one process;
            ns per call, counters per call, and the chunks each variant needed (memory)
  macro     the talk's workloads (small chunks, threads, large blocks), the medium blocks
            (64-256 KiB, replaced at random: the run manager splits and coalesces on most calls)
            and the real programs,
            on the allocator built in each variant (the `workloads` and `real-programs` parts
            of the study measure those; this report takes the pagemalloc rows)

--quick: one short repetition of the micro study and of the replays, the traces recorded from
the real-programs runner's quick inputs of python, sqlite, g++, jq and lua (real_programs.py
with PAGEMALLOC_TRACE) instead of record_trace.sh's larger ones, and the macro rows of the
pagemap variant alone.

Writes papers/tree-overhead/results.md (tables), micro.png and replay.png (figures) and
summary.json (the numbers the README's verdict quotes).
"""

import re
import shutil

from allocators import VARIANTS
from common import (PYTHON, fmt_ratio, geomean, machine_line, markdown_table, median,
                    papers_directory, progress, ratio, read_json, results_directory, run, shown,
                    write_json, write_report)
from gbench import case_sort_key, case_title, real_ns

# The programs benchmarks/record_trace.sh records; a quick run records them from the
# real-programs runner's quick inputs.
TRACED_PROGRAMS = ["python", "sqlite", "gxx", "jq", "lua"]
VARIANT_OF_TYPE = {"PagemapRuns": "pagemap", "HybridRuns": "hybrid", "RbtreeRuns": "rbtree"}
COUNTERS = ["nodes_visited", "rotations", "map_reads", "map_writes", "splits", "coalesces"]
MICRO_NAME = re.compile(r"BM_RunManager<pagemalloc::(\w+)<\w+>>/free_runs:(\d+)")
REPLAY_NAME = re.compile(r"replay/([^/]+)/(\w+)(?:/(\w+))?")


def paper_directory():
    return papers_directory() / "tree-overhead"


# ---- measuring -------------------------------------------------------------------------------

def measure_micro(build, quick):
    """Runs the micro study, uncounted and counted; returns the two JSON paths."""
    progress.plan_steps(5)  # the micro study's two binaries, the traces, the two replays
    outputs = []
    for binary in ["run_manager_bench", "run_manager_bench_counted"]:
        out = results_directory() / f"{binary}.json"
        args = ["--benchmark_repetitions=1", "--benchmark_min_time=0.05"] if quick else []
        progress.step(f"tree-overhead: micro, {binary}")
        run([build / "benchmarks" / binary, f"--benchmark_out={out}",
             "--benchmark_out_format=json", *args], quiet=True)
        outputs.append(out)
    return outputs


def record_quick_traces(tracing_library, traces, seed):
    """The quick run's traces: TRACED_PROGRAMS once each on the real-programs runner's quick
    inputs under the tracing drop-in; each program's largest trace (g++: cc1plus's) becomes
    traces/<program>.trace, as record_trace.sh names them."""
    raw = traces / "all"
    shutil.rmtree(raw, ignore_errors=True)
    raw.mkdir(parents=True)
    out = results_directory() / "traced_real_programs.json"
    run([PYTHON, "benchmarks/real_programs/real_programs.py", "--quick", "--rounds", "1",
         "--seed", str(seed), "--out", out, "--programs", ",".join(TRACED_PROGRAMS),
         "--allocators", "trace", "--pagemalloc", f"trace={tracing_library}",
         "--skip-binding-check", "--pagemalloc-env",
         f"PAGEMALLOC_TRACE={raw}/{{program}}.%p.trace"], quiet=True)
    largest = {}
    for path in raw.glob("*.trace"):
        program = path.name.split(".")[0]
        if program not in largest or path.stat().st_size > largest[program].stat().st_size:
            largest[program] = path
    for program, path in largest.items():
        path.rename(traces / f"{program}.trace")
    shutil.rmtree(raw)


def measure_replay(build, tracing_library, quick, seed=1):
    """Records traces of real programs with the tracing drop-in (a library path), then replays
    them through every variant, uncounted and counted; returns the two JSON paths."""
    traces = results_directory() / "traces"
    if traces.exists():
        for old in traces.glob("*.trace"):
            old.unlink()
    progress.step("tree-overhead: recording run-manager traces of real programs")
    if quick:
        record_quick_traces(tracing_library, traces, seed)
    else:
        run(["bash", "benchmarks/record_trace.sh", tracing_library, traces], quiet=True)
    main_traces = sorted(p for p in traces.glob("*.trace") if ".other." not in p.name)
    if not main_traces:
        raise RuntimeError("no trace was recorded")
    outputs = []
    for binary in ["trace_replay", "trace_replay_counted"]:
        out = results_directory() / f"{binary}.json"
        args = ["--benchmark_repetitions=1", "--benchmark_min_time=0.05"] if quick else []
        progress.step(f"tree-overhead: replay, {binary}, {len(main_traces)} traces")
        run([build / "benchmarks" / binary, *[f"--trace={t}" for t in main_traces],
             f"--benchmark_out={out}", "--benchmark_out_format=json", *args], quiet=True)
        outputs.append(out)
    return outputs


# ---- reading ---------------------------------------------------------------------------------

def micro_table(path):
    """{(variant, n): {"ns": median ns/op, counter: median per op}} from one JSON."""
    cells = {}
    for b in read_json(path)["benchmarks"]:
        if b.get("run_type") == "aggregate" or b.get("error_occurred"):
            continue
        m = MICRO_NAME.match(b["run_name"] if "run_name" in b else b["name"])
        if not m:
            continue
        key = (VARIANT_OF_TYPE[m.group(1)], int(m.group(2)))
        cell = cells.setdefault(key, {"ns": [], **{c: [] for c in COUNTERS}})
        cell["ns"].append(real_ns(b))
        for c in COUNTERS:
            cell[c].append(b.get(c, 0.0))
    return {k: {name: median(v) for name, v in cell.items()} for k, cell in cells.items()}


def replay_table(path, pal):
    """{(program, variant): {"ns_per_op": .., counters.., "peak_chunks": ..}} (medians) for
    the replays over one OS layer: "linux" (mmap and page faults included) or "pooled" (chunks
    mapped and faulted in before the timed part: the bookkeeping alone)."""
    wanted = ["ns_per_op", "ns_per_run_op", "peak_chunks", "peak_footprint_pages", "ops",
              "grow_mismatches"] + COUNTERS
    cells = {}
    for b in read_json(path)["benchmarks"]:
        if b.get("run_type") == "aggregate" or b.get("error_occurred"):
            continue
        m = REPLAY_NAME.match(b.get("run_name", b["name"]))
        if not m or (m.group(3) or "linux") != pal:
            continue
        program = m.group(1).removesuffix(".trace")
        cell = cells.setdefault((program, m.group(2)), {w: [] for w in wanted})
        for w in wanted:
            cell[w].append(b.get(w))
    return {k: {w: median(v) for w, v in cell.items()} for k, cell in cells.items()}


# ---- reporting -------------------------------------------------------------------------------

def f(value, digits=1):
    return "—" if value is None else f"{value:,.{digits}f}"


def micro_section(plain, counted):
    sizes = sorted({n for (_, n) in plain})
    rows = []
    for n in sizes:
        ns = {v: plain.get((v, n), {}).get("ns") for v in VARIANTS}
        rows.append([f"{n:,}"] + [f(ns[v]) for v in VARIANTS] +
                    [fmt_ratio(ratio(ns["hybrid"], ns["pagemap"])),
                     fmt_ratio(ratio(ns["rbtree"], ns["pagemap"])),
                     fmt_ratio(ratio(ns["pagemap"], plain.get(("pagemap", sizes[0]), {}).get("ns")))])
    table = markdown_table(["free runs n"] + [f"{v} ns/op" for v in VARIANTS] +
                           ["hybrid / pagemap", "rbtree / pagemap", f"pagemap / pagemap(n={sizes[0]})"],
                           rows)
    counter_rows = []
    for n in [sizes[0], sizes[len(sizes) // 2], sizes[-1]]:
        for v in VARIANTS:
            c = counted.get((v, n), {})
            counter_rows.append([f"{n:,}", v] + [f(c.get(name), 2) for name in COUNTERS])
    counter_table = markdown_table(["n", "variant"] + [f"{c}/op" for c in COUNTERS], counter_rows)
    cost_rows = []
    for v in VARIANTS:
        ratios = [ratio(counted.get((v, n), {}).get("ns"), plain.get((v, n), {}).get("ns"))
                  for n in sizes]
        cost_rows.append([v, fmt_ratio(geomean(ratios)),
                          fmt_ratio(min((r for r in ratios if r), default=None)),
                          fmt_ratio(max((r for r in ratios if r), default=None))])
    cost_table = markdown_table(["variant", "counted / plain, geomean over n", "min", "max"],
                                cost_rows)
    return table, counter_table, cost_table


def micro_figure(plain, counted, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    sizes = sorted({n for (_, n) in plain})
    figure, (left, right) = plt.subplots(1, 2, figsize=(11, 4.2))
    for v, marker in zip(VARIANTS, "os^"):
        left.plot(sizes, [plain.get((v, n), {}).get("ns") for n in sizes], marker=marker, label=v)
        right.plot(sizes, [counted.get((v, n), {}).get("nodes_visited") for n in sizes],
                   marker=marker, label=v)
    left.set(xscale="log", xlabel="free runs in the heap (n)", ylabel="ns per alloc or free",
             title="Run-manager cost per operation")
    right.set(xscale="log", xlabel="free runs in the heap (n)", ylabel="tree nodes visited per op",
              title="Tree nodes visited per operation (counted build)")
    for axis in (left, right):
        axis.grid(True, which="both", alpha=0.3)
        axis.legend()
    left.set_ylim(bottom=0)
    right.set_ylim(bottom=0)
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    plt.close(figure)


def replay_section(plain, linux, counted):
    programs = sorted({p for (p, _) in plain})
    rows = []
    ratios = {"hybrid": [], "rbtree": [], "hybrid-linux": [], "rbtree-linux": []}
    for p in programs:
        ns = {v: plain.get((p, v), {}).get("ns_per_op") for v in VARIANTS}
        os_ns = {v: linux.get((p, v), {}).get("ns_per_op") for v in VARIANTS}
        chunks = {v: plain.get((p, v), {}).get("peak_chunks") for v in VARIANTS}
        ops = plain.get((p, "pagemap"), {}).get("ops")
        for v in ("hybrid", "rbtree"):
            ratios[v].append(ratio(ns[v], ns["pagemap"]))
            ratios[f"{v}-linux"].append(ratio(os_ns[v], os_ns["pagemap"]))
        rows.append([p, f(ops, 0)] + [f(ns[v]) for v in VARIANTS] +
                    [fmt_ratio(ratio(ns["hybrid"], ns["pagemap"])),
                     fmt_ratio(ratio(ns["rbtree"], ns["pagemap"])),
                     fmt_ratio(ratio(os_ns["hybrid"], os_ns["pagemap"])),
                     fmt_ratio(ratio(os_ns["rbtree"], os_ns["pagemap"]))] +
                    [" / ".join(f(chunks[v], 0) for v in VARIANTS)])
    rows.append(["geometric mean", "", "", "", "", fmt_ratio(geomean(ratios["hybrid"])),
                 fmt_ratio(geomean(ratios["rbtree"])), fmt_ratio(geomean(ratios["hybrid-linux"])),
                 fmt_ratio(geomean(ratios["rbtree-linux"])), ""])
    table = markdown_table(["program", "calls"] + [f"{v} ns/call" for v in VARIANTS] +
                           ["hybrid / pagemap", "rbtree / pagemap",
                            "hybrid / pagemap, with the OS", "rbtree / pagemap, with the OS",
                            "peak chunks " + " / ".join(VARIANTS)], rows)
    counter_rows = []
    for p in programs:
        for v in VARIANTS:
            c = counted.get((p, v), {})
            counter_rows.append([p, v] + [f(c.get(name), 2) for name in COUNTERS])
    counter_table = markdown_table(["program", "variant"] + [f"{c}/call" for c in COUNTERS],
                                   counter_rows)
    return table, counter_table


def replay_figure(plain, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    programs = sorted({p for (p, _) in plain})
    figure, axis = plt.subplots(figsize=(7, 3.8))
    width = 0.8 / len(VARIANTS)
    for i, v in enumerate(VARIANTS):
        values = [ratio(plain.get((p, v), {}).get("ns_per_op"),
                        plain.get((p, "pagemap"), {}).get("ns_per_op")) or 0 for p in programs]
        axis.bar([x + i * width for x in range(len(programs))], values, width, label=v)
    axis.set_xticks([x + width for x in range(len(programs))], programs)
    axis.set(ylabel="time per call / pagemap's", title="Replayed run-manager calls of real programs")
    axis.axhline(1.0, color="black", linewidth=0.8)
    axis.legend()
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    plt.close(figure)


def macro_section(workloads, real_programs):
    """Tables of the pagemalloc rows of the workloads and real-program parts, by variant."""
    sections = []
    if workloads:
        rows = []
        for case in sorted(workloads["cases"], key=case_sort_key):
            by_label = workloads["cases"][case]
            ns = {v: median(by_label.get(f"pagemalloc-{v}", [])) for v in VARIANTS}
            rows.append([case_title(case)] + [f(x / 1e3 if x else None, 1) for x in ns.values()] +
                        [fmt_ratio(ratio(ns["hybrid"], ns["pagemap"])),
                         fmt_ratio(ratio(ns["rbtree"], ns["pagemap"]))])
        sections.append(("The talk's workloads and the medium blocks on the allocator built in "
                         "each variant (median µs per round)",
                         markdown_table(["workload"] + [f"{v} µs" for v in VARIANTS] +
                                        ["hybrid / pagemap", "rbtree / pagemap"], rows)))
    if real_programs:
        rows = []
        time_ratios = {v: [] for v in VARIANTS}
        rss_ratios = {v: [] for v in VARIANTS}
        for program, by_alloc in sorted(real_programs.items()):
            t = {v: by_alloc.get(f"pagemalloc-{v}", {}).get("time") for v in VARIANTS}
            r = {v: by_alloc.get(f"pagemalloc-{v}", {}).get("rss") for v in VARIANTS}
            for v in VARIANTS:
                time_ratios[v].append(ratio(t[v], t["pagemap"]))
                rss_ratios[v].append(ratio(r[v], r["pagemap"]))
            rows.append([program] + [f(t[v], 3) for v in VARIANTS] +
                        [f(r[v], 1) for v in VARIANTS] +
                        [fmt_ratio(ratio(t["rbtree"], t["pagemap"])),
                         fmt_ratio(ratio(r["rbtree"], r["pagemap"]))])
        rows.append(["geometric mean", "", "", "", "", "", "",
                     fmt_ratio(geomean(time_ratios["rbtree"])),
                     fmt_ratio(geomean(rss_ratios["rbtree"]))])
        sections.append(("Real programs under the drop-in built in each variant (median wall "
                         "seconds, median peak RSS MiB)",
                         markdown_table(["program"] + [f"{v} s" for v in VARIANTS] +
                                        [f"{v} MiB" for v in VARIANTS] +
                                        ["rbtree / pagemap time", "rbtree / pagemap RSS"], rows)))
    return sections


def goals(plain, counted):
    sizes = sorted({n for (_, n) in plain})
    small, large = sizes[0], sizes[-1]
    flat = ratio(plain.get(("pagemap", large), {}).get("ns"), plain.get(("pagemap", small), {}).get("ns"))
    tree = ratio(plain.get(("rbtree", large), {}).get("ns"), plain.get(("pagemap", large), {}).get("ns"))
    visits = max((counted.get(("pagemap", n), {}).get("nodes_visited") or 0) for n in sizes)
    return [
        (f"pagemap's ns/op at n = {large:,} within 1.3 x its ns/op at n = {small}", flat,
         flat is not None and flat <= 1.3),
        (f"rbtree at least 3 x pagemap at n = {large:,}", tree, tree is not None and tree >= 3.0),
        ("pagemap visits 0 tree nodes per operation (every n)", visits, visits == 0),
    ]


def report(info, micro_paths, replay_paths, workloads=None, real_programs=None):
    """Writes the paper's generated part; returns the summary lines to print."""
    paper = paper_directory()
    paper.mkdir(parents=True, exist_ok=True)
    plain, counted = (micro_table(p) for p in micro_paths)
    micro, micro_counters, counting_cost = micro_section(plain, counted)
    micro_figure(plain, counted, paper / "micro.png")
    parts = [
        "# Tree overhead: measured results",
        "",
        "Generated by `bash tools/study.sh --only tree-overhead` (part of `bash tools/study.sh`);"
        " do not edit by hand.",
        "",
        f"Machine and date: {machine_line(info)}.",
        "",
        "## Micro: one alloc or free with n free runs in the heap",
        "",
        "![ns/op against n](micro.png)",
        "",
        micro,
        "",
        "Counters per operation (build with the counters compiled in):",
        "",
        micro_counters,
        "",
        "What counting costs (ns/op of the counted build over the plain one):",
        "",
        counting_cost,
        "",
    ]
    checks = goals(plain, counted)
    parts += ["Goals:", ""]
    parts += [f"- {'met' if ok else 'NOT met'}: {text} (measured {f(value, 2)})"
              for text, value, ok in checks]
    parts.append("")
    summary = {"machine": info, "goals": [{"goal": t, "value": v, "met": ok} for t, v, ok in checks],
               "micro": {f"{v}/{n}": cell for (v, n), cell in plain.items()}}
    if replay_paths:
        replay_plain = replay_table(replay_paths[0], "pooled")
        replay_linux = replay_table(replay_paths[0], "linux")
        replay_counted = replay_table(replay_paths[1], "pooled")
        replay, replay_counters = replay_section(replay_plain, replay_linux, replay_counted)
        replay_figure(replay_plain, paper / "replay.png")
        parts += ["## Replay: the run-manager calls of real programs", "",
                  "![replay ratios](replay.png)", "",
                  "ns/call: the bookkeeping alone (chunks mapped and faulted in before the timed"
                  " part: the pooled OS layer); \"with the OS\": the same replay over mmap, page"
                  " faults included (LinuxPal).", "", replay, "",
                  "Counters per call (counted build):", "", replay_counters, ""]
        summary["replay"] = {f"{p}/{v}": cell for (p, v), cell in replay_plain.items()}
    for title, table in macro_section(workloads, real_programs):
        parts += [f"## Macro: {title}", "", table, ""]
    write_report(paper / "results.md", "\n".join(parts))
    write_json(paper / "summary.json", summary)
    lines = [f"tree overhead ({shown(paper / 'results.md')}):"]
    for n in sorted({n for (_, n) in plain}):
        lines.append(f"  n={n:>6}: " + "  ".join(
            f"{v} {f(plain.get((v, n), {}).get('ns'))} ns" for v in VARIANTS))
    lines += [f"  {'met' if ok else 'NOT met'}: {text} ({f(value, 2)})" for text, value, ok in checks]
    return lines
