"""Heap profiles of the real programs: what each allocates, from where, and for how long
(papers/real-programs/heap-profiles.md), so that the real-programs results can be read against
what each program does.

Each real program of benchmarks/real_programs (the same inputs, environment and commands as
the real-programs part; redis left out: its allocations are a server's, its time a client's)
runs once under pagemalloc's drop-in with its heap profiler on at the default rate
(PAGEMALLOC_CONF=prof:true,prof_final:true,prof_interval_ms:N): a profile every N ms while it
allocates and one at exit, in the heap_v2 format jemalloc's profiler writes. Of a program that
runs several processes (g++ runs cc1plus and as), the process that allocated the most is
shown. From the profiles:

  sizes          bytes allocated in all and live at exit, by the size of each call stack's
                 blocks (the stack's mean block: a stack allocates blocks of one size or a few)
  live over time the live bytes by that size, in each timed profile (the figure)
  peak           the timed profile of the most live bytes
  call sites     the five functions of most bytes allocated (the final profile) and of most
                 bytes live at the peak, as `jeprof --text` names them (the function that
                 called the allocator: the innermost frame outside it)
  call graph     `jeprof --svg` of the bytes allocated, per program (graphviz)

and what the profiler costs: each program's instructions (all its processes', counted by
valgrind's callgrind: deterministic where these machines' wall times vary by 10-30 % from run
to run) with prof:false and with prof:true at the default rate, at the real-programs study's
quick sizes (callgrind runs some 50 times slower than the program).

Every count is a sample's, scaled as jeprof scales it: a stack's samples of mean size s stand
for 1 / (1 - exp(-s / prof_sample)) times their bytes. Writes results/heap_profiles.json,
papers/real-programs/heap-profiles.md, heap-profiles.png and heap-profiles/PROGRAM.svg;
returns summary lines. Needs jeprof (libjemalloc-dev) and graphviz, which
tools/install-deps.sh installs, and valgrind for the cost.
"""

import math
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

from allocators import dropin
from common import (ROOT, geomean, machine_line, markdown_table, papers_directory, progress,
                    results_directory, shown, write_json, write_report)

sys.path.insert(0, str(ROOT / "benchmarks" / "real_programs"))
import inputs  # noqa: E402
import real_programs  # noqa: E402

PROGRAMS = [name for name in real_programs.PROGRAM_CLASSES if name != "redis"]
QUICK_PROGRAMS = [name for name in real_programs.DEFAULT_PROGRAMS if name != "redis"]
INTERVAL_MS = {True: 50, False: 100}  # quick, full
TOP_SITES = 5
# The programs whose instructions are counted (quick run, full run).
COST_PROGRAMS = {True: ["python", "jq"],
                 False: [n for n in real_programs.DEFAULT_PROGRAMS if n != "redis"]}
COLLECTED = re.compile(r"^==\d+== Collected : (\d+)$", re.M)
# Upper bounds of the size buckets (bytes); the last takes the rest.
BUCKETS = [64, 256, 1024, 4096, 16384, 65536, 262144, 1048576]
BUCKET_NAMES = ["<=64 B", "<=256 B", "<=1 KiB", "<=4 KiB", "<=16 KiB", "<=64 KiB", "<=256 KiB",
                "<=1 MiB", ">1 MiB"]
PROFILE_NAME = re.compile(r"^heap\.(\d+)\.(\d+)\.([a-z])\.heap$")


def paper_directory():
    return papers_directory() / "real-programs"


def bucket_of(size):
    for i, bound in enumerate(BUCKETS):
        if size <= bound:
            return i
    return len(BUCKETS)


def scale(count, total, mean):
    """jeprof's factor for samples of `total` bytes in `count` blocks."""
    if count == 0 or total == 0:
        return 0.0
    return 1.0 / -math.expm1(-(total / count) / mean)


def read_profile(path):
    """{mean, stacks: [{live_count, live_bytes, total_count, total_bytes, size}], executable}
    from a heap_v2 file, each stack's counts scaled (size: its mean block)."""
    stacks, mean, executable = [], None, None
    counts = re.compile(r"^\s*t\*: (\d+): (\d+) \[(\d+): (\d+)\]")
    with open(path) as source:
        lines = source.read().splitlines()
    header = re.match(r"^heap_v2/(\d+)$", lines[0]) if lines else None
    if header is None:
        raise RuntimeError(f"heap-profiles: {path} is not a heap_v2 profile")
    mean = int(header.group(1))
    in_maps = False
    for i, line in enumerate(lines):
        if line.startswith("MAPPED_LIBRARIES:"):
            in_maps = True
            continue
        if in_maps:
            fields = line.split()
            if executable is None and len(fields) >= 6 and fields[5].startswith("/"):
                executable = fields[5]  # the first mapping: the program's own file
            continue
        if line.startswith("@") and i + 1 < len(lines):
            match = counts.match(lines[i + 1])
            if match is None:
                continue
            lc, lb, tc, tb = (int(g) for g in match.groups())
            live, total = scale(lc, lb, mean), scale(tc, tb, mean)
            stacks.append({"live_count": lc * live, "live_bytes": lb * live,
                           "total_count": tc * total, "total_bytes": tb * total,
                           "size": tb / tc if tc else 0})
    return {"mean": mean, "stacks": stacks, "executable": executable}


def by_bucket(profile, field):
    values = [0.0] * (len(BUCKETS) + 1)
    for s in profile["stacks"]:
        values[bucket_of(s["size"])] += s[field]
    return values


def jeprof_sites(executable, path, space):
    """The TOP_SITES functions of most flat bytes: [(function, bytes)]."""
    text = subprocess.run(["jeprof", "--text", "--show_bytes", f"--{space}", executable, path],
                          capture_output=True, text=True, timeout=600).stdout
    sites = []
    for line in text.splitlines():
        fields = line.split(None, 5)
        if len(fields) == 6 and fields[0].isdigit() and int(fields[0]) > 0:
            sites.append((fields[5], int(fields[0])))
    return sites[:TOP_SITES]


def call_graph(executable, path, out):
    """jeprof's call graph of the bytes allocated, as SVG; False if it could not be drawn."""
    if shutil.which("dot") is None:
        return False
    with open(out, "w") as svg:
        drawn = subprocess.run(["jeprof", "--svg", "--alloc_space", "--nodecount=24", executable,
                                path], stdout=svg, stderr=subprocess.DEVNULL, timeout=600)
    return drawn.returncode == 0 and os.path.getsize(out) > 0


def profile_one(program, directory, interval_ms):
    """Runs the program once profiled; returns its largest process's profiles."""
    env = {**real_programs.clean_environment(), "LD_PRELOAD": str(dropin("pagemap")),
           "PAGEMALLOC_CONF": f"prof:true,prof_final:true,prof_interval_ms:{interval_ms},"
                              f"prof_prefix:{os.path.join(directory, 'heap')}"}
    started = time.time()
    sample = program.run(env, directory, 900)
    if not sample.ok:
        raise RuntimeError(f"heap-profiles: {program.name}: {sample.failure}")
    processes = {}
    for name in os.listdir(directory):
        match = PROFILE_NAME.match(name)
        if match:
            pid, sequence, kind = int(match.group(1)), int(match.group(2)), match.group(3)
            processes.setdefault(pid, []).append((sequence, kind, os.path.join(directory, name)))
    finals = {pid: next((p for _, k, p in files if k == "f"), None)
              for pid, files in processes.items()}
    finals = {pid: read_profile(p) for pid, p in finals.items() if p is not None}
    if not finals:
        raise RuntimeError(f"heap-profiles: {program.name} wrote no profile at exit")
    pid = max(finals, key=lambda p: sum(s["total_bytes"] for s in finals[p]["stacks"]))
    timeline = []  # the timed profiles, then the one at exit
    for sequence, kind, path in sorted(processes[pid], key=lambda f: (f[1] == "f", f[0])):
        if kind in "tf":
            profile = finals[pid] if kind == "f" else read_profile(path)
            timeline.append({"seconds": os.path.getmtime(path) - started,
                             "live": by_bucket(profile, "live_bytes"), "path": path})
    return finals[pid], timeline, processes[pid], sample.wall_s


def instructions_of(program, directory, conf):
    """The instructions of every process of one run under callgrind, with PAGEMALLOC_CONF conf."""
    os.makedirs(directory)
    plain = program.command
    out = os.path.join(directory, "callgrind.%p")
    program.command = lambda d: ["valgrind", "--tool=callgrind", "--trace-children=yes",
                                 f"--callgrind-out-file={out}", *plain(d)]
    try:
        env = {**real_programs.clean_environment(), "LD_PRELOAD": str(dropin("pagemap")),
               "PAGEMALLOC_CONF": conf}
        sample = program.run(env, directory, 3600)
    finally:
        program.command = plain
    if not sample.ok:
        raise RuntimeError(f"heap-profiles: {program.name} under callgrind: {sample.failure}")
    with open(os.path.join(directory, "stderr")) as err:
        counts = [int(n) for n in COLLECTED.findall(err.read())]
    if not counts:
        raise RuntimeError(f"heap-profiles: callgrind counted nothing for {program.name}")
    return sum(counts)


def measure_cost(quick, input_directory, work, scratch):
    """{program: {"off": instructions, "on": instructions}} at the quick sizes."""
    if shutil.which("valgrind") is None:
        raise RuntimeError("valgrind is not installed (bash tools/install-deps.sh installs it)")
    cost = {}
    for name in COST_PROGRAMS[quick]:
        program = real_programs.PROGRAM_CLASSES[name](name, input_directory,
                                                      real_programs.QUICK_SIZES)
        program.prepare(work)
        for mode in ("off", "on"):
            progress.step(f"heap-profiles: {name}'s instructions, profiler {mode}")
            cost.setdefault(name, {})[mode] = instructions_of(
                program, os.path.join(scratch, f"cost-{name}-{mode}"),
                "prof:true" if mode == "on" else "prof:false")
    return cost


def measure(quick, seed):
    if shutil.which("jeprof") is None:
        raise RuntimeError("jeprof is not installed (bash tools/install-deps.sh installs it)")
    sizes = real_programs.QUICK_SIZES if quick else real_programs.FULL_SIZES
    digest = real_programs.sha256_of_file(str(ROOT / "benchmarks" / "real_programs" /
                                              "inputs.py"))[:12]
    work = os.path.join("/tmp", "pagemalloc-real-programs", f"seed{seed}-{digest}")
    input_directory = inputs.InputDirectory(os.path.join(work, "inputs"), seed)
    os.makedirs(work, exist_ok=True)
    # (the launcher that runs each program and measures it, as the real-programs part's)
    real_programs.measure_run_path = real_programs.compile_helper(work, "../measure_run.c",
                                                                  "measure_run", [])
    programs = QUICK_PROGRAMS if quick else PROGRAMS
    graphs = paper_directory() / "heap-profiles"
    graphs.mkdir(parents=True, exist_ok=True)
    results = {}
    progress.plan_steps(len(programs) + 2 * len(COST_PROGRAMS[quick]))
    with tempfile.TemporaryDirectory(prefix="heap-profiles.") as scratch:
        for name in programs:
            progress.step(f"heap-profiles: {name}")
            program = real_programs.PROGRAM_CLASSES[name](name, input_directory, sizes)
            program.prepare(work)
            directory = os.path.join(scratch, name)
            os.makedirs(directory)
            final, timeline, files, wall_s = profile_one(program, directory, INTERVAL_MS[quick])
            final_path = next(p for _, k, p in files if k == "f")
            executable = final["executable"] or program.command(directory)[0]
            peak = max(timeline, key=lambda t: sum(t["live"]), default=None)
            graph = graphs / f"{name}.svg"
            results[name] = {
                "executable": executable,
                "wall_s": wall_s,
                "stacks": len(final["stacks"]),
                "allocated": by_bucket(final, "total_bytes"),
                "allocated_blocks": sum(s["total_count"] for s in final["stacks"]),
                "live_at_exit": by_bucket(final, "live_bytes"),
                "timeline": [{"seconds": t["seconds"], "live": t["live"]} for t in timeline],
                "peak": None if peak is None else {"seconds": peak["seconds"],
                                                   "live": sum(peak["live"])},
                "allocated_sites": jeprof_sites(executable, final_path, "alloc_space"),
                "peak_sites": [] if peak is None else jeprof_sites(executable, peak["path"],
                                                                   "inuse_space"),
                "graph": graph.name if call_graph(executable, final_path, graph) else None,
            }
        cost = measure_cost(quick, input_directory, work, scratch)
    data = {"programs": results, "cost": cost, "quick": quick, "interval_ms": INTERVAL_MS[quick]}
    write_json(results_directory() / "heap_profiles.json", data)
    return data


def mib(value):
    return f"{value / 2**20:,.1f}"


def figure(programs, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = [n for n in programs if programs[n]["timeline"]]
    if not names:
        return False
    columns = 3
    rows = (len(names) + columns - 1) // columns
    fig, axes = plt.subplots(rows, columns, figsize=(5.5 * columns, 3.6 * rows), squeeze=False)
    for axis, name in zip(axes.flat, names):
        timeline = programs[name]["timeline"]
        xs = [t["seconds"] for t in timeline]
        layers = [[t["live"][b] / 2**20 for t in timeline] for b in range(len(BUCKET_NAMES))]
        axis.stackplot(xs, layers, labels=BUCKET_NAMES)
        axis.set(title=f"{name}: live MiB by block size", xlabel="seconds", ylabel="MiB")
        axis.grid(True, alpha=0.3)
    for axis in list(axes.flat)[len(names):]:
        axis.axis("off")
    handles, labels = axes.flat[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=len(BUCKET_NAMES), fontsize=8)
    fig.tight_layout(rect=(0, 0.05, 1, 1))
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return True


def sites_cell(sites):
    return "; ".join(f"{name} {mib(bytes_)}" for name, bytes_ in sites) or "—"


def report(info, data):
    """Writes papers/real-programs/heap-profiles.md and its figure; returns summary lines."""
    paper = paper_directory()
    paper.mkdir(parents=True, exist_ok=True)
    programs = data["programs"]
    drawn = figure(programs, paper / "heap-profiles.png")
    overview, size_rows, site_rows, summary = [], [], [], []
    for name, p in programs.items():
        allocated, live_exit = sum(p["allocated"]), sum(p["live_at_exit"])
        blocks = p["allocated_blocks"]
        peak = p["peak"]["live"] if p["peak"] else None
        overview.append([name, f"{p['wall_s']:.2f}", mib(allocated), f"{blocks:,.0f}",
                         f"{allocated / blocks:,.0f}" if blocks else "—",
                         "—" if peak is None else mib(peak),
                         "—" if peak is None else f"{p['peak']['seconds']:.2f}", mib(live_exit)])
        share = [f"{100 * b / allocated:.0f}" if allocated else "—" for b in p["allocated"]]
        size_rows.append([name] + share)
        site_rows.append([name, sites_cell(p["allocated_sites"]), sites_cell(p["peak_sites"])])
        summary.append(f"  {name:8s} {mib(allocated):>9s} MiB allocated in {blocks:>11,.0f} "
                       f"blocks, peak live {'—' if peak is None else mib(peak):>7s} MiB; "
                       f"top site {p['allocated_sites'][0][0] if p['allocated_sites'] else '—'}")
    graphs = [f"[{name}](heap-profiles/{p['graph']})" for name, p in programs.items()
              if p["graph"]]
    cost = data.get("cost", {})
    cost_rows = [[name, f"{c['off'] / 1e6:,.1f}", f"{c['on'] / 1e6:,.1f}",
                  f"{c['on'] / c['off']:.4f}"] for name, c in cost.items()]
    cost_mean = geomean([c["on"] / c["off"] for c in cost.values()]) if cost else None
    if cost_mean is not None:
        cost_rows.append([f"geometric mean of {len(cost)}", "", "", f"**{cost_mean:.4f}**"])
    lines = [
        "# Heap profiles of the real programs",
        "",
        "What does each real program allocate, from where, and for how long? The real-programs",
        "study says how fast each program runs under each allocator; this part says what the",
        "program asks of it, read from pagemalloc's heap profiler (README, \"heap profiles\").",
        "",
        "Method: each program once under pagemalloc's drop-in with "
        f"`PAGEMALLOC_CONF=prof:true,prof_final:true,prof_interval_ms:{data['interval_ms']}` (a",
        "sample every 512 KiB allocated on average, a profile every interval while the program",
        "allocates and one at exit), the real-programs study's inputs and commands. Of a program",
        "that runs several processes (g++: cc1plus), the one that allocated the most. Bytes and",
        "blocks are the samples' scaled as jeprof scales them; a block's size is its call",
        "stack's mean. Regenerate: `bash tools/study.sh --only heap-profiles` (tools/study/",
        "heap_profiles.py).",
        "",
        machine_line(info),
        "",
        "## What each program allocates",
        "",
        markdown_table(["program", "time (s, profiled)", "allocated (MiB)", "blocks",
                        "mean block (B)", "peak live (MiB)", "at (s)", "live at exit (MiB)"],
                       overview),
        "",
        "## Bytes allocated by block size (% of each program's)",
        "",
        markdown_table(["program"] + BUCKET_NAMES, size_rows),
        "",
        "## Call sites (MiB)",
        "",
        "The functions that called the allocator, as `jeprof --text` names them: the five of",
        "most bytes allocated over the run, and of most bytes live at the peak. Names come from",
        "the objects' symbol tables: in a stripped library (Debian's liblua5.4 and libsqlite3)",
        "the nearest exported function before an address stands for the static ones after it,",
        "so lua's and sqlite's bytes all fall to one name, and the JavaScript engines' stripped",
        "executables (duk, mujs), whose one dynamic symbol is glibc's `stdout`, to that.",
        "",
        markdown_table(["program", "most allocated", "most live at the peak"], site_rows),
        "",
        "## What the profiler costs",
        "",
        "Instructions of each program's run (all its processes) under valgrind's callgrind,",
        "with `prof:false` and with `prof:true` at the default rate, at the real-programs",
        "study's quick sizes: the samples' unwinding and bookkeeping, and the slow paths a",
        "profiled thread takes (its medium blocks and sampled small ones from the arena).",
        "",
        markdown_table(["program", "instructions off (M)", "on (M)", "on / off"], cost_rows)
        if cost_rows else "(not measured)",
        "",
        "## Figures",
        "",
    ]
    if drawn:
        lines += ["![live bytes by block size over time](heap-profiles.png)", "",
                  "Live bytes by block size in each timed profile and at exit (stacked).", ""]
    if graphs:
        lines += ["Call graphs of the bytes allocated (`jeprof --svg`, the 24 largest nodes): "
                  + ", ".join(graphs) + ".", ""]
    write_report(paper / "heap-profiles.md", "\n".join(lines) + "\n")
    cost_line = ([] if cost_mean is None else
                 [f"  the profiler at the default rate: {cost_mean:.4f} x the instructions "
                  f"without it (geometric mean of {len(cost)}, callgrind)"])
    return ([f"Heap profiles ({shown(paper / 'heap-profiles.md')}): bytes allocated, peak "
             "live, the top call site:"] + summary + cost_line)
