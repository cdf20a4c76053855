"""The tree-overhead study under 2008's design, and the sweep from it to today's design.

Source: "Overzealous use of my red-black tree hammer" (Jason Evans, 2008; docs/references.md).
The post's ~10% was measured on an allocator that reached its run manager far more often than
today's pagemalloc: no thread caches, one arena, slabs up to 2 KiB, a bin's run returned as
soon as it emptied, every allocated run in an address tree too, and on OS X, where the post
measured, every free validated by a search of the arena's chunk tree. pagemalloc builds that design
from one option (docs/design.md, "The design's other choices"): je2008-trees (red-black trees,
and the allocated-runs tree searched for a large block's length), je2008-fixed (the hybrid
run manager, as after the post's fix) and je2008-pagemap (the O(1) page map). Measured per
program (the JS engines, the GC-arena churn and the eight real programs):

  calls       run-manager calls and tree nodes visited: a counting build of each library
              (PAGEMALLOC_COUNTERS), one run, PAGEMALLOC_CONF=stats_print:json; every process
              of the program summed
  time, RSS   wall time and peak RSS, medians of interleaved rounds (real_programs.py, outputs
              compared)
  prediction  calls x the extra time per call the trees cost on this program's own calls: its
              run-manager calls recorded under je2008-trees (a tracing build) and replayed
              through each run manager (trace_replay, chunks faulted in beforehand: the
              bookkeeping alone). The allocated-runs tree's search for a large block's length
              is not a run-manager call, so the replay leaves it out

The sweep switches one design choice per step from je2008-trees towards today's default
(STEPS; cumulative), builds every step with the trees and with the page map, and measures the
trees' cost at each step on the programs that reach the run manager most (SWEEP_PROGRAMS). Its
predictions use the per-call cost from the replay of the 2008 traces (rbtree_allocated at the
first two steps, rbtree after them), since a trace of each step would add nothing but time.

Last, benchmarks/whole_designs_bench runs today's design and 2008's with each run manager as
three heaps in one process (the release tree's binary), on two small workloads of its own, with
its repetitions interleaved at random: the same comparison without the noise between processes.

The libraries are built under build/sweep/<name> (the library target only, Release): 47 of
them, about a minute each on 2 cores. Writes papers/tree-overhead/results-2008.md
(tables), sweep.png and prediction.png (figures) and summary-2008.json; raw results in
results/tree_overhead_2008/.

--quick (QUICK_STEPS): the three presets and the sweep's last step (today's design), one
library each (five), built with the counters and the trace recorder both compiled in, so that
the same library gives the calls, the traces and the times (the recorder idle while timed); as
unity builds (CMake's CMAKE_UNITY_BUILD: half the compile time) under build/sweep/quick/<name>.
One pass of every program under the five, with the counters' statistics written at exit; one
of je2008-trees with the recorder on; one repetition of whole_designs_bench. About 4 minutes on
2 cores, its builds included.
"""

import json
import os
import re
import shutil

from allocators import benchmark_binary
from common import (PYTHON, ROOT, build_tree, f_or_dash, fmt_ratio, geomean, log, machine_line,
                    markdown_table, papers_directory, progress, ratio, read_json,
                    results_directory, run, run_streamed, shown, write_json, write_report)
from tree_overhead import replay_table

SWEEP_BUILDS = ROOT / "build" / "sweep"
DESIGN_OPTIONS = ["PAGEMALLOC_RUNS", "PAGEMALLOC_THREAD_CACHES", "PAGEMALLOC_TRANSFER_STASH",
                  "PAGEMALLOC_ARENAS", "PAGEMALLOC_MAX_SMALL_SIZE",
                  "PAGEMALLOC_RELEASE_CURRENT_SLAB", "PAGEMALLOC_ALLOCATED_RUNS_TREE",
                  "PAGEMALLOC_VALIDATE_FREE", "PAGEMALLOC_CHUNK_SIZE", "PAGEMALLOC_LARGE_RUN_CACHE",
                  "PAGEMALLOC_DIRTY_RUNS_FIRST"]
# One design choice per step, from 2008's towards today's; each step keeps the ones before it.
# After the last, the design is today's default (allocator/src/design/presets.h).
STEPS = [
    ("2008 design", {}),
    ("frees not validated", {"PAGEMALLOC_VALIDATE_FREE": "OFF"}),
    ("no allocated-runs tree", {"PAGEMALLOC_ALLOCATED_RUNS_TREE": "OFF"}),
    ("emptied slabs kept", {"PAGEMALLOC_RELEASE_CURRENT_SLAB": "OFF"}),
    ("slabs up to 16 KiB", {"PAGEMALLOC_MAX_SMALL_SIZE": "16384"}),
    ("thread caches", {"PAGEMALLOC_THREAD_CACHES": "ON"}),
    ("transfer stash", {"PAGEMALLOC_TRANSFER_STASH": "ON"}),
    ("chunks of 2 MiB", {"PAGEMALLOC_CHUNK_SIZE": "2097152"}),
    ("one arena per CPU", {"PAGEMALLOC_ARENAS": "0"}),
    ("large-run cache", {"PAGEMALLOC_LARGE_RUN_CACHE": "ON"}),
    ("dirty runs first", {"PAGEMALLOC_DIRTY_RUNS_FIRST": "ON"}),
]
PROGRAMS = ["duk", "mujs", "gc-churn", "python", "perl", "lua", "ruby", "sqlite", "gxx", "jq",
            "redis"]
EIGHT = ["python", "perl", "lua", "ruby", "sqlite", "gxx", "jq", "redis"]
# The programs the sweep measures at every step: the ones the 2008 design sends to its run
# manager most (the JS engines, the GC-arena churn, sqlite and g++).
SWEEP_PROGRAMS = ["duk", "mujs", "gc-churn", "sqlite", "gxx"]
PRESET_OF = {"trees": "je2008-trees", "fixed": "je2008-fixed", "pagemap": "je2008-pagemap"}
# The trace_replay variant whose cost is the trees' at a step (the allocated-runs tree goes at
# step 2).
REPLAY_TREES = ["rbtree_allocated"] * 2 + ["rbtree"] * (len(STEPS) - 2)
# The steps a quick run builds and measures: the three presets, and today's design.
QUICK_STEPS = [0, len(STEPS) - 1]
QUICK_BUILDS = SWEEP_BUILDS / "quick"
# real_programs.py's line for each run: "  round 2/5 python  s0-trees ...".
ROUND_LINE = re.compile(r"^\s+round (\d+)/(\d+) ")


def paper_directory():
    return papers_directory() / "tree-overhead"


def raw_directory():
    return results_directory() / "tree_overhead_2008"


def step_designs(step):
    return ["trees", "fixed", "pagemap"] if step == 0 else ["trees", "pagemap"]


def step_options(step):
    options = {}
    for _, switched in STEPS[:step + 1]:
        options.update(switched)
    return options


def library_name(step, design, kind=""):
    return f"s{step}-{design}" + (f"-{kind}" if kind else "")


# ---- building --------------------------------------------------------------------------------

def build_library(name, preset, options, counters=False, trace=False, count="",
                  quick=False):
    """Configures build/sweep/<name> (quick: build/sweep/quick/<name>, a unity build, or a
    plain one if that fails) with every design option given (empty: the preset's) and builds
    the drop-in; returns its path. count: "k of n", for the progress line."""
    directory = (QUICK_BUILDS if quick else SWEEP_BUILDS) / name
    settings = {option: options.get(option, "") for option in DESIGN_OPTIONS}
    settings.update({"CMAKE_BUILD_TYPE": "Release", "PAGEMALLOC_SANITIZE": "",
                     "PAGEMALLOC_BUILD_TESTS": "OFF", "PAGEMALLOC_BUILD_BENCHMARKS": "OFF",
                     "PAGEMALLOC_PRESET": preset, "PAGEMALLOC_COUNTERS": "ON" if counters else "OFF",
                     "PAGEMALLOC_TRACE_RUNS": "ON" if trace else "OFF"})

    def build(extra):
        build_tree(f"{shown(directory)}{f' ({count})' if count else ''}",
                   ["cmake", "-S", ROOT, "-B", directory,
                    *[f"-D{k}={v}" for k, v in {**settings, **extra}.items()]],
                   ["cmake", "--build", directory, "-j", os.environ.get("JOBS", "2"), "--target",
                    "pagemalloc"], begin=progress.step)

    if not quick:
        build({})
    else:
        try:
            build({"CMAKE_UNITY_BUILD": "ON"})
        except RuntimeError:
            log(f"{shown(directory)}: the unity build failed; building it file by file")
            build({"CMAKE_UNITY_BUILD": "OFF"})
    return directory / "allocator" / "libpagemalloc.so"


def planned_builds(quick):
    """[(name, design, step, kind)] of the libraries the part builds: each step's trees and
    page-map builds, plain and counting, je2008-fixed at the first step, and the tracing
    je2008-trees; quick: one library per design at QUICK_STEPS, counting and tracing."""
    if quick:
        return [(library_name(step, design), design, step, "quick")
                for step in QUICK_STEPS for design in step_designs(step)]
    builds = [(library_name(step, design, kind), design, step, kind)
              for step in range(len(STEPS)) for design in step_designs(step)
              for kind in ["", "counted"]]
    return builds + [(library_name(0, "trees", "trace"), "trees", 0, "trace")]


_built = {}


def build_libraries(quick=False):
    """{name: path} of every library the part runs (planned_builds; "trace": the tracing
    je2008-trees). Built once per run: a quick run builds them among the study's first builds
    (run.py), and the tree-overhead part records its traces with today's design from them."""
    if quick in _built:
        return _built[quick]
    libraries = {}
    builds = planned_builds(quick)
    for number, (name, design, step, kind) in enumerate(builds, 1):
        path = build_library(name, PRESET_OF[design], step_options(step),
                             counters=kind in ("counted", "quick"), trace=kind in ("trace", "quick"),
                             count=f"{number} of {len(builds)}", quick=quick)
        libraries["trace" if kind == "trace" else name] = path
    if quick:
        libraries["trace"] = libraries[library_name(0, "trees")]
    _built[quick] = libraries
    return libraries


def todays_tracing_library():
    """A quick run's library of today's design (the last step's page map) with the trace
    recorder compiled in: the tree-overhead part's tracing drop-in in a quick run."""
    return build_libraries(quick=True)[library_name(len(STEPS) - 1, "pagemap")]


# ---- measuring -------------------------------------------------------------------------------

def real_programs(libraries, programs, rounds, seed, quick, out, extra=(), what=""):
    """real_programs.py over the given pagemalloc builds only; returns its JSON. Logs each
    round as it starts, as a step of the part (what: the pass, for the line)."""
    command = [PYTHON, "benchmarks/real_programs/real_programs.py", "--out", out, "--seed",
               str(seed), "--rounds", str(rounds), "--programs", ",".join(programs),
               "--allocators", ",".join(libraries), "--skip-binding-check", *extra]
    for name, path in libraries.items():
        command += ["--pagemalloc", f"{name}={path}"]
    if quick:
        command.append("--quick")
    progress.step(f"tree-overhead-2008: {what}" + (f", round 1 of {rounds}" if rounds > 1 else ""))
    rounds_seen = {"1"}

    def on_line(line):
        found = ROUND_LINE.match(line)
        if found and found.group(1) not in rounds_seen:
            rounds_seen.add(found.group(1))
            progress.step(f"tree-overhead-2008: {what}, round {found.group(1)} of {rounds}")

    status, output = run_streamed(command, on_line)
    if status != 0:
        log(f"tree-overhead-2008: real_programs.py exit status {status}:\n" + output[-3000:])
    return read_json(out) if out.exists() else {}


def stats_setting(stats):
    """The PAGEMALLOC_CONF that has each process write its counters to stats/ at exit."""
    shutil.rmtree(stats, ignore_errors=True)
    stats.mkdir(parents=True)
    return f"PAGEMALLOC_CONF=stats_print:json,stats_file:{stats}/{{allocator}}.{{program}}.%p.json"


def count_calls(libraries, quick, seed):
    """{(library, program): {"calls": .., "nodes_visited": .., ..}} from counting builds."""
    counted = {name: path for name, path in libraries.items() if name.endswith("-counted")}
    stats = raw_directory() / "stats"
    conf = stats_setting(stats)
    # Every program at the first step and at the last (today's design); the sweep's programs
    # at the steps between.
    ends = ("s0-", f"s{len(STEPS) - 1}-")
    for part, names, programs in [
            ("ends", [n for n in counted if n.startswith(ends)], PROGRAMS),
            ("between", [n for n in counted if not n.startswith(ends)], SWEEP_PROGRAMS)]:
        real_programs({n: counted[n] for n in names}, programs, 1, seed, quick,
                      raw_directory() / f"counts-{part}.json", ["--pagemalloc-env", conf],
                      f"run-manager calls, {len(names)} counting builds")
    return read_counts(stats)


def read_counts(stats):
    """{(library, program): counters summed over the program's processes} from the files
    stats_setting's processes wrote."""
    totals = {}
    for path in stats.glob("*.json"):
        library, program = path.name.split(".")[:2]
        cell = totals.setdefault((library.removesuffix("-counted"), program), {"processes": 0})
        for line in path.read_text().splitlines():
            counters = json.loads(line).get("run_manager", {})
            cell["processes"] += 1
            for key, value in counters.items():
                cell[key] = cell.get(key, 0) + value
    return totals


def replay_costs(libraries, quick, seed):
    """{(program, variant): ns per call} from the je2008-trees traces replayed (pooled)."""
    traces = raw_directory() / "traces"
    shutil.rmtree(traces, ignore_errors=True)
    traces.mkdir(parents=True)
    real_programs({"trace": libraries["trace"]}, PROGRAMS, 1, seed, quick,
                  raw_directory() / "traced.json",
                  ["--pagemalloc-env", f"PAGEMALLOC_TRACE={traces}/{{program}}.%p.trace"],
                  "recording the run-manager calls of je2008-trees")
    # Each program's largest trace (g++: cc1plus's) becomes traces/<program>.trace.
    largest = {}
    for path in traces.glob("*.trace"):
        program = path.name.split(".")[0]
        if program not in largest or path.stat().st_size > largest[program].stat().st_size:
            largest[program] = path
    kept = {path.rename(traces / f"{program}.trace") for program, path in largest.items()}
    for path in set(traces.glob("*.trace")) - kept:
        path.unlink()
    out = raw_directory() / "replay.json"
    progress.step(f"tree-overhead-2008: replaying {len(kept)} traces")
    run([ROOT / "build" / "release" / "benchmarks" / "trace_replay",
         *[f"--trace={p}" for p in sorted(kept)], "--pal=pooled",
         "--benchmark_filter=/(pagemap|rbtree|rbtree_allocated)/",
         f"--benchmark_out={out}", "--benchmark_out_format=json",
         *(["--benchmark_repetitions=1", "--benchmark_min_time=0.05"] if quick else [])],
        quiet=True)
    return {key: cell["ns_per_op"] for key, cell in replay_table(out, "pooled").items()}


# whole_designs_bench's heaps, in the order the report shows them.
WHOLE_DESIGNS = [("Trees2008", "2008, trees"), ("Pagemap2008", "2008, page map"),
                 ("Today", "today's design")]
WHOLE_WORKLOADS = [("GcChurn", "GC arenas beside small objects, one wave"),
                   ("SmallObjects", "1,600 small blocks")]


def whole_designs(quick):
    """{"<workload>/<design>": median µs per iteration} from whole_designs_bench."""
    out = raw_directory() / "whole_designs.json"
    repetitions = 1 if quick else 10
    progress.step(f"tree-overhead-2008: whole designs in one process, {repetitions} repetitions")
    run([benchmark_binary("pagemap", "whole_designs_bench"),
         f"--benchmark_repetitions={repetitions}", "--benchmark_enable_random_interleaving=true",
         f"--benchmark_out={out}", "--benchmark_out_format=json"], quiet=True)
    times = {}
    for b in read_json(out)["benchmarks"]:
        if b.get("error_occurred") or b.get("aggregate_name", "median") != "median":
            continue
        if repetitions > 1 and b.get("run_type") != "aggregate":
            continue
        scale = {"ns": 1e-3, "us": 1.0, "ms": 1e3}[b.get("time_unit", "ns")]
        times[b["run_name"]] = b["real_time"] * scale
    return times


def whole_designs_section(times):
    """The table of whole_designs_bench's medians, and {workload: trees / page map}."""
    rows, ratios = [], {}
    for workload, title in WHOLE_WORKLOADS:
        cell = {design: times.get(f"{workload}/{design}") for design, _ in WHOLE_DESIGNS}
        trees, pagemap = cell["Trees2008"], cell["Pagemap2008"]
        ratios[workload] = ratio(trees, pagemap)
        micros = {d: "—" if cell[d] is None else f"{cell[d]:.1f} µs" for d in cell}
        rows.append([title, micros["Trees2008"], micros["Pagemap2008"],
                     fmt_ratio(ratios[workload]), micros["Today"]])
    table = markdown_table(["workload", *[t for _, t in WHOLE_DESIGNS[:2]], "trees / page map",
                            WHOLE_DESIGNS[2][1]], rows)
    return table, ratios


def measure(quick, rounds, seed):
    raw_directory().mkdir(parents=True, exist_ok=True)
    if quick:
        return measure_quick(seed)
    # The steps: the builds, the rounds of the two timed passes, the two counting passes, the
    # traces, their replay and the whole designs.
    progress.plan_steps(len(planned_builds(False)) + 2 * rounds + 5)
    libraries = build_libraries()
    plain = {n: p for n, p in libraries.items() if not n.endswith(("-counted", "-trace"))}
    presets = real_programs({n: p for n, p in plain.items() if n.startswith("s0-")}, PROGRAMS,
                            rounds, seed, quick, raw_directory() / "presets.json", (),
                            "the three 2008 designs on every program (interleaved rounds)")
    sweep = real_programs({n: p for n, p in plain.items() if not n.startswith("s0-")},
                          SWEEP_PROGRAMS, rounds, seed, quick, raw_directory() / "sweep.json", (),
                          "the sweep (interleaved rounds)")
    data = {"medians": {**_medians(presets), **_medians(sweep)},
            "failures": presets.get("failures", []) + sweep.get("failures", []),
            "differences": {**presets.get("differences", {}), **sweep.get("differences", {})},
            "counts": {f"{lib}/{prog}": cell
                       for (lib, prog), cell in count_calls(libraries, quick, seed).items()},
            "replay": {f"{prog}/{variant}": ns
                       for (prog, variant), ns in replay_costs(libraries, quick, seed).items()},
            "whole_designs": whole_designs(quick),
            "rounds": rounds}
    write_json(raw_directory() / "measured.json", data)
    return data


def measure_quick(seed):
    """The quick run (QUICK_STEPS): every program once under the five libraries, which write
    their counters at exit, then the traces of je2008-trees, their replay and the whole
    designs."""
    libraries = build_libraries(quick=True)  # among the study's first builds (run.py)
    # The pass under the five (most of the part), the traces, their replay, the whole designs.
    progress.plan_steps([9, 2, 0.5, 0.5])
    designs = {n: p for n, p in libraries.items() if n != "trace"}
    stats = raw_directory() / "stats"
    measured = real_programs(designs, PROGRAMS, 1, seed, True, raw_directory() / "quick.json",
                             ["--pagemalloc-env", stats_setting(stats)],
                             f"every program under the {len(designs)} libraries, one round")
    data = {"medians": _medians(measured), "failures": measured.get("failures", []),
            "differences": measured.get("differences", {}),
            "counts": {f"{lib}/{prog}": cell for (lib, prog), cell in read_counts(stats).items()},
            "replay": {f"{prog}/{variant}": ns
                       for (prog, variant), ns in replay_costs(libraries, True, seed).items()},
            "whole_designs": whole_designs(True),
            "rounds": 1, "steps": QUICK_STEPS, "quick": True}
    write_json(raw_directory() / "measured.json", data)
    return data


def _medians(results):
    """{"<library>/<program>": {"time": s, "rss": MiB}} from real_programs.json."""
    return {f"{lib}/{prog}": {"time": cell.get("wall_s"), "rss": cell.get("maxrss_mib")}
            for prog, by_lib in results.get("medians", {}).items()
            for lib, cell in by_lib.items()}


# ---- reporting -------------------------------------------------------------------------------

def _cell(data, step, design, program):
    return data["medians"].get(f"{library_name(step, design)}/{program}", {})


def predicted_extra_s(data, step, program):
    """calls x (trees' ns per call - pagemap's) in seconds, or None."""
    calls = data["counts"].get(f"{library_name(step, 'trees')}/{program}", {}).get("calls")
    trees = data["replay"].get(f"{program}/{REPLAY_TREES[step]}")
    pagemap = data["replay"].get(f"{program}/pagemap")
    if None in (calls, trees, pagemap):
        return None
    return calls * (trees - pagemap) * 1e-9


def trees_cost(data, step, program):
    """(measured trees / pagemap time, predicted ratio, peak RSS ratio) at a step."""
    trees, pagemap = _cell(data, step, "trees", program), _cell(data, step, "pagemap", program)
    measured = ratio(trees.get("time"), pagemap.get("time"))
    extra = predicted_extra_s(data, step, program)
    predicted = (1 + extra / pagemap["time"]) if extra is not None and pagemap.get("time") else None
    return measured, predicted, ratio(trees.get("rss"), pagemap.get("rss"))


def presets_section(data):
    rows, summary = [], {}
    for program in PROGRAMS:
        counts = data["counts"].get(f"{library_name(0, 'trees')}/{program}", {})
        calls = counts.get("calls")
        nodes = ratio(counts.get("nodes_visited"), calls)
        today = data["counts"].get(f"{library_name(len(STEPS) - 1, 'pagemap')}/{program}", {})
        trees_ns = data["replay"].get(f"{program}/rbtree_allocated")
        pagemap_ns = data["replay"].get(f"{program}/pagemap")
        extra = predicted_extra_s(data, 0, program)
        measured, predicted, rss = trees_cost(data, 0, program)
        t, p = _cell(data, 0, "trees", program), _cell(data, 0, "pagemap", program)
        fixed = ratio(_cell(data, 0, "fixed", program).get("time"), p.get("time"))
        summary[program] = {"calls": calls, "nodes_per_call": nodes,
                            "calls_today": today.get("calls"), "replay_ns": [trees_ns, pagemap_ns],
                            "predicted_ratio": predicted, "measured_ratio": measured,
                            "fixed_ratio": fixed, "rss_ratio": rss}
        rows.append([program, f_or_dash(calls, 0, ","), f_or_dash(nodes, 1),
                     f_or_dash(today.get("calls"), 0, ","),
                     f"{f_or_dash(trees_ns, 1)} / {f_or_dash(pagemap_ns, 1)}",
                     f_or_dash(extra * 1e3 if extra is not None else None, 1),
                     f"{f_or_dash(t.get('time'), 3)} / {f_or_dash(p.get('time'), 3)}",
                     fmt_ratio(predicted), f"**{fmt_ratio(measured)}**", fmt_ratio(fixed),
                     fmt_ratio(rss)])
    means = {}
    for label, programs in [("eight programs", EIGHT), ("all eleven", PROGRAMS),
                            ("all but gc-churn", [p for p in PROGRAMS if p != "gc-churn"])]:
        cells = [summary[p] for p in programs]
        means[label] = {k: geomean([c[k] for c in cells])
                        for k in ["predicted_ratio", "measured_ratio", "fixed_ratio", "rss_ratio"]}
        rows.append([f"geometric mean, {label}", "", "", "", "", "", "",
                     fmt_ratio(means[label]["predicted_ratio"]),
                     f"**{fmt_ratio(means[label]['measured_ratio'])}**",
                     fmt_ratio(means[label]["fixed_ratio"]), fmt_ratio(means[label]["rss_ratio"])])
    table = markdown_table(
        ["program", "run-manager calls, 2008 design", "tree nodes per call",
         "calls, today's design", "replay ns/call trees / pagemap", "predicted extra ms",
         "wall s trees / pagemap", "predicted trees / pagemap", "measured trees / pagemap",
         "fixed / pagemap", "peak RSS trees / pagemap"], rows)
    return table, {"programs": summary, "means": means}


def sweep_section(data):
    rows, summary = [], []
    for step in data.get("steps", range(len(STEPS))):
        label = STEPS[step][0]
        cells = {}
        for program in SWEEP_PROGRAMS:
            measured, predicted, rss = trees_cost(data, step, program)
            calls = data["counts"].get(f"{library_name(step, 'trees')}/{program}", {}).get("calls")
            cells[program] = {"measured": measured, "predicted": predicted, "rss": rss,
                              "calls": calls}
        summary.append({"step": step, "switched": label, "programs": cells,
                        "measured_geomean": geomean([c["measured"] for c in cells.values()])})
        rows.append([f"{step}: {label}" if step else f"0: {label} (je2008-trees / -pagemap)"] +
                    [f"{fmt_ratio(c['measured'])} ({fmt_ratio(c['predicted'])}; "
                     f"{f_or_dash(c['calls'], 0, ',')})" for c in cells.values()] +
                    [fmt_ratio(summary[-1]["measured_geomean"])])
    table = markdown_table(["step (choice switched towards today's)"] +
                           [f"{p}: measured (predicted; calls)" for p in SWEEP_PROGRAMS] +
                           ["geometric mean, measured"], rows)
    return table, summary


def sweep_figure(sweep, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    steps = [s["step"] for s in sweep]
    figure, (left, right) = plt.subplots(1, 2, figsize=(12, 4.6))
    for n, program in enumerate(SWEEP_PROGRAMS):
        color = f"C{n}"
        cells = [s["programs"][program] for s in sweep]
        left.plot(steps, [c["measured"] for c in cells], marker="o", color=color, label=program)
        left.plot(steps, [c["predicted"] for c in cells], linestyle=":", color=color)
        right.plot(steps, [c["calls"] for c in cells], marker="o", color=color, label=program)
    left.axhline(1.0, color="grey", linewidth=0.8)
    labels = [f"{s}: {STEPS[s][0]}" for s in steps]
    left.set(ylabel="wall time, trees / page map", title="The trees' cost at each step "
             "(solid: measured; dotted: predicted)")
    right.set(yscale="log", ylabel="run-manager calls (trees build)",
              title="How often the run manager is called")
    for axis in (left, right):
        axis.set_xticks(steps)
        axis.set_xticklabels(labels, rotation=35, ha="right", fontsize=8)
        axis.grid(True, alpha=0.3)
        axis.legend(fontsize=8)
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    plt.close(figure)


def prediction_figure(presets, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cells = presets["programs"]
    programs = [p for p in PROGRAMS if cells[p]["measured_ratio"] is not None]
    x = range(len(programs))
    figure, axis = plt.subplots(figsize=(10, 4.2))

    def percent(key):
        return [((cells[p][key] or 1.0) - 1) * 100 for p in programs]

    axis.bar([i - 0.2 for i in x], percent("predicted_ratio"), width=0.4, label="predicted")
    axis.bar([i + 0.2 for i in x], percent("measured_ratio"), width=0.4, label="measured")
    axis.axhline(0, color="grey", linewidth=0.8)
    axis.set_xticks(list(x))
    axis.set_xticklabels(programs)
    axis.set(ylabel="trees' extra wall time, % of page map's",
             title="2008 design: je2008-trees against je2008-pagemap")
    axis.grid(True, axis="y", alpha=0.3)
    axis.legend()
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    plt.close(figure)


def report(info, data):
    """Writes results-2008.md, the figures and summary-2008.json; returns summary lines."""
    paper = paper_directory()
    paper.mkdir(parents=True, exist_ok=True)
    presets_table, presets = presets_section(data)
    sweep_table, sweep = sweep_section(data)
    prediction_figure(presets, paper / "prediction.png")
    sweep_figure(sweep, paper / "sweep.png")
    problems = [f"{x['program']} under {x['allocator']} (round {x['round']}): "
                f"{x['failure'].splitlines()[0]}" for x in data["failures"]]
    problems += [f"{program}: outputs differ between builds" for program in data["differences"]]
    parts = [
        "# Tree overhead under 2008's design: measured results", "",
        "Generated by `bash tools/study.sh --only tree-overhead-2008` (part of "
        "`bash tools/study.sh`); do not edit by hand.", "",
        f"Machine and date: {machine_line(info)}. Wall time and peak RSS: medians of "
        f"{data['rounds']} interleaved rounds.", "",
        *(["Quick run: the three presets and the sweep's last step (today's design) only, each "
           "library built once with the counters and the trace recorder compiled in (a unity "
           "build): the calls, the traces and the times (the recorder idle) come from the same "
           "library; quick inputs, one round.", ""] if data.get("quick") else []),
        "## The three 2008 designs", "",
        "![predicted and measured extra time](prediction.png)", "",
        "Run-manager calls and tree nodes: counting builds, one run, every process summed. "
        "Replay: the program's run-manager calls under je2008-trees replayed through "
        "rbtree with the allocated-runs tree and through the page map (bookkeeping alone). "
        "Predicted extra = calls x the replay's difference per call.", "",
        presets_table, "",
        "## The sweep: one design choice per step towards today's", "",
        "![the trees' cost at each step](sweep.png)", "",
        "Each cell: the trees build's wall time over the page-map build's at that step, the "
        "prediction in brackets (calls x the 2008 traces' replay difference per call: "
        "rbtree_allocated at steps 0 and 1, rbtree after them) and the trees build's run-manager calls.",
        "", sweep_table, "",
    ]
    whole_table, whole = whole_designs_section(data.get("whole_designs", {}))
    parts += [
        "## Whole designs in one process", "",
        "`benchmarks/whole_designs_bench`: today's design and 2008's with each run manager "
        "(the build's chunk size) as three heaps in one process, median time per iteration "
        "over its repetitions, interleaved at random.", "",
        whole_table, "",
    ]
    if problems:
        parts += ["Problems:", ""] + [f"- {p}" for p in problems] + [""]
    write_report(paper / "results-2008.md", "\n".join(parts))
    write_json(paper / "summary-2008.json", {"machine": info, "presets": presets, "sweep": sweep,
                                              "whole_designs": whole, "problems": problems})
    means = presets["means"]
    lines = [f"tree overhead under 2008's design ({shown(paper / 'results-2008.md')}):"]
    for label in ["eight programs", "all eleven"]:
        m = means[label]
        lines.append(f"  trees / pagemap, {label}: measured {fmt_ratio(m['measured_ratio'])}, "
                     f"predicted {fmt_ratio(m['predicted_ratio'])}, peak RSS "
                     f"{fmt_ratio(m['rss_ratio'])}")
    gc = presets["programs"]["gc-churn"]
    lines.append(f"  gc-churn: measured {fmt_ratio(gc['measured_ratio'])}, predicted "
                 f"{fmt_ratio(gc['predicted_ratio'])}")
    lines.append("  sweep, measured geometric mean per step: " + ", ".join(
        f"{s['step']} {fmt_ratio(s['measured_geomean'])}" for s in sweep))
    lines.append("  whole designs in one process, trees / page map: " + ", ".join(
        f"{title} {fmt_ratio(whole[w])}" for w, title in WHOLE_WORKLOADS))
    lines += [f"  PROBLEM: {p}" for p in problems]
    return lines
