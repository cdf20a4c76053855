"""Profiles of the real programs: where pagemalloc's time goes that the fastest peer's does not
(papers/real-programs/profiles.md).

For each real program of benchmarks/real_programs (the same inputs, environment and commands;
redis is left out: its time is a client's, its allocations a server's), under pagemalloc (the
release tree's drop-in) and under the peer that was fastest for that program in the last
real-programs run (results/real_programs.json; jemalloc when there is none):

  perf stat     task-clock, page faults, context switches, and cycles, instructions and dTLB
                load misses where the machine has hardware counters (a VM often has none:
                those are reported as not supported, never guessed)
  perf record   sampled call stacks (-g), reported as the share of samples per shared object
                (the program, libc, the allocator, the kernel) and the functions above 1%;
                glibc's malloc lives in libc, so under glibc its functions count as the
                allocator's, not libc's

and from those, the bound on what a faster allocator could give: were the allocator's own
code free and the rest of the program as it runs, a program would take (1 - the allocator's
share) of its time. Under the peer that is the best any allocator could do against the peer
without making the program's own code faster; under pagemalloc, the best pagemalloc could do
against the peer by making its own code faster.

One run of each (a profile is a distribution, not a timing: its shares are steady from run to
run where the total time is not). --quick: the runner's quick inputs, and the seven programs of
the real-programs study only (not the JavaScript engines and gc-churn, shown only, and mujs
alone a minute). Writes results/profiles.json and
papers/real-programs/profiles.md; returns summary lines. Needs perf (Debian's linux-perf,
installed by tools/install-deps.sh) and the programs (the same script installs them).
"""

import os
import re
import shutil
import subprocess
import sys
import tempfile

from allocators import PEERS, dropin, peer_library
from common import (ROOT, geomean, machine_line, markdown_table, papers_directory, progress,
                    read_json, results_directory, write_json, write_report)

sys.path.insert(0, str(ROOT / "benchmarks" / "real_programs"))
import inputs  # noqa: E402
import real_programs  # noqa: E402

PROGRAMS = [name for name in real_programs.PROGRAM_CLASSES if name != "redis"]
QUICK_PROGRAMS = [name for name in real_programs.DEFAULT_PROGRAMS if name != "redis"]
EVENTS = ["task-clock", "page-faults", "context-switches", "cycles", "instructions",
          "dTLB-load-misses"]
TOP_FUNCTIONS = 12
# What a shared object's path is reported as.
GROUPS = [("[kernel.kallsyms]", "kernel"), ("libpagemalloc", "allocator"),
          ("libjemalloc", "allocator"), ("libmimalloc", "allocator"),
          ("libtcmalloc", "allocator"), ("libc.so", "libc")]
# glibc's malloc functions, as perf names them in libc.so.
GLIBC_MALLOC = re.compile(r"^(__libc_)?(malloc|free|cfree|calloc|realloc|memalign|valloc|pvalloc|"
                          r"posix_memalign|aligned_alloc|malloc_usable_size)$|^_int_|^_mid_memalign"
                          r"|^malloc_|^tcache_|^sysmalloc|^systrim|^unlink_chunk|^arena_get|"
                          r"^ptmalloc_|^__malloc_")


def paper_directory():
    return papers_directory() / "real-programs"


def fastest_peers():
    """{program: the peer with the smallest median wall time in results/real_programs.json}
    (a quick run: results/quick/real_programs.json); {} if there is none."""
    path = results_directory() / "real_programs.json"
    data = read_json(path) if path.exists() else {}
    fastest = {}
    for program, by_allocator in data.get("medians", {}).items():
        times = {a: cell.get("wall_s") for a, cell in by_allocator.items()
                 if a in PEERS and cell.get("wall_s")}
        if times:
            fastest[program] = min(times, key=times.get)
    return fastest


def library_of(allocator):
    return str(dropin("pagemap")) if allocator == "pagemalloc" else peer_library(allocator)


def run_perf(prefix, program, allocator, directory, timeout_s=600):
    """Runs the program under `perf <prefix...> --`, in `directory`; raises on failure."""
    env = {**real_programs.clean_environment(), **program.environment()}
    library = library_of(allocator)
    if library is not None:
        env["LD_PRELOAD"] = str(library)
    stdin_path = program.stdin_path()
    with open(stdin_path or os.devnull, "rb") as stdin, \
            open(os.path.join(directory, "stdout"), "wb") as stdout, \
            open(os.path.join(directory, "stderr"), "wb") as stderr:
        finished = subprocess.run(["perf", *prefix, "--", *program.command(directory)], env=env,
                                  cwd=directory, stdin=stdin, stdout=stdout, stderr=stderr,
                                  timeout=timeout_s)
    if finished.returncode != 0:
        with open(os.path.join(directory, "stderr"), errors="replace") as err:
            raise RuntimeError(f"profiles: {program.name} under {allocator}: exit "
                               f"{finished.returncode}: {err.read()[-800:]}")


def counters(program, allocator, directory):
    """{event: value or None (not supported)} from perf stat's CSV output."""
    out = os.path.join(directory, "stat.csv")
    run_perf(["stat", "-x,", "-o", out, "-e", ",".join(EVENTS)], program, allocator, directory)
    values = {}
    with open(out) as source:
        for line in source:
            fields = line.strip().split(",")
            if len(fields) < 3 or fields[2] not in EVENTS:
                continue
            try:
                values[fields[2]] = float(fields[0])
            except ValueError:
                values[fields[2]] = None  # "<not supported>" or "<not counted>"
    return values


def report_lines(data_file, sort, percent_limit=0.5):
    """[(percent, fields...)] of `perf report --sort <sort>`, children not counted."""
    text = subprocess.run(["perf", "report", "-i", data_file, "--stdio", "--no-children",
                           "--sort", sort, "--percent-limit", str(percent_limit), "-g", "none"],
                          capture_output=True, text=True, check=True).stdout
    rows = []
    for line in text.splitlines():
        match = re.match(r"^\s+([\d.]+)%\s+(.*)$", line)
        if match:
            rows.append((float(match.group(1)), match.group(2).strip()))
    return rows


def group_of(dso):
    """The group of a shared object: an executable (the program, or a child such as g++'s
    cc1plus) is the program's."""
    for needle, group in GROUPS:
        if needle in dso:
            return group
    return "other libraries" if ".so" in dso else "program"


def samples(program, allocator, directory):
    """Shares of samples by group of shared objects, and the functions above 1%."""
    data_file = os.path.join(directory, "perf.data")
    run_perf(["record", "-g", "-F", "499", "-q", "-o", data_file], program, allocator, directory)
    shares = {}
    for percent, dso in report_lines(data_file, "dso"):
        group = group_of(dso)
        shares[group] = shares.get(group, 0.0) + percent
    functions = []
    for percent, rest in report_lines(data_file, "dso,sym", percent_limit=0):
        parts = rest.split(None, 1)
        symbol = re.sub(r"^\[[.k]\]\s+", "", parts[1] if len(parts) > 1 else "")
        functions.append({"percent": percent, "dso": os.path.basename(parts[0]),
                          "symbol": symbol})
        if allocator == "glibc" and "libc.so" in parts[0] and GLIBC_MALLOC.match(symbol):
            shares["libc"] = shares.get("libc", 0.0) - percent
            shares["allocator"] = shares.get("allocator", 0.0) + percent
    return {"shares": shares,
            "functions": [f for f in functions if f["percent"] >= 1.0][:TOP_FUNCTIONS]}


def measure(quick, seed):
    if shutil.which("perf") is None:
        raise RuntimeError("perf is not installed (bash tools/install-deps.sh installs it)")
    peers = fastest_peers()
    sizes = real_programs.QUICK_SIZES if quick else real_programs.FULL_SIZES
    digest = real_programs.sha256_of_file(str(ROOT / "benchmarks" / "real_programs" /
                                              "inputs.py"))[:12]
    work = os.path.join("/tmp", "pagemalloc-real-programs", f"seed{seed}-{digest}")
    input_directory = inputs.InputDirectory(os.path.join(work, "inputs"), seed)
    results = {}
    programs = QUICK_PROGRAMS if quick else PROGRAMS
    progress.plan_steps(2 * len(programs))
    with tempfile.TemporaryDirectory(prefix="profiles.") as scratch:
        for name in programs:
            program = real_programs.PROGRAM_CLASSES[name](name, input_directory, sizes)
            program.prepare(work)
            peer = peers.get(name, "jemalloc")
            for allocator in ("pagemalloc", peer):
                progress.step(f"profiles: {name} under {allocator}")
                directory = os.path.join(scratch, f"{name}-{allocator}")
                os.makedirs(directory)
                results.setdefault(name, {})[allocator] = {
                    "counters": counters(program, allocator, directory),
                    **samples(program, allocator, directory)}
            results[name]["peer"] = peer
    data = {"programs": results, "quick": quick,
            "perf": subprocess.run(["perf", "--version"], capture_output=True,
                                   text=True).stdout.strip()}
    write_json(results_directory() / "profiles.json", data)
    return data


def number(value, scale=1.0, digits=0):
    return "n/s" if value is None else f"{value / scale:,.{digits}f}"


def bound_rows(programs):
    """Per program: [name, peer, pagemalloc's time over the peer's, pagemalloc's allocator
    share, the peer's, pagemalloc with its own code free, any allocator with its code free]
    (as numbers), from task-clock and the samples' shares."""
    rows = []
    for name, by_allocator in programs.items():
        peer = by_allocator["peer"]
        pm, other = by_allocator["pagemalloc"], by_allocator[peer]
        pm_time, peer_time = (pm["counters"].get("task-clock"),
                              other["counters"].get("task-clock"))
        if not pm_time or not peer_time:
            continue
        pm_share = pm["shares"].get("allocator", 0.0) / 100
        peer_share = other["shares"].get("allocator", 0.0) / 100
        ratio = pm_time / peer_time
        rows.append([name, peer, ratio, pm_share, peer_share, ratio * (1 - pm_share),
                     1 - peer_share])
    return rows


def bound_section(programs):
    """The bound's table and its geometric means, as markdown lines and a summary line."""
    rows = bound_rows(programs)
    if not rows:
        return [], []
    table = [[r[0], r[1], f"{r[2]:.3f}", f"{100 * r[3]:.1f}", f"{100 * r[4]:.1f}",
              f"{r[5]:.3f}", f"{r[6]:.3f}"] for r in rows]
    counted = [r for r in rows if r[0] in real_programs.DEFAULT_PROGRAMS]
    if not counted:
        return [], []
    means = [geomean([r[i] for r in counted]) for i in (2, 5, 6)]
    table.append([f"geometric mean of {len(counted)}", "", f"{means[0]:.3f}", "", "",
                  f"{means[1]:.3f}", f"{means[2]:.3f}"])
    lines = [
        "## What a faster allocator could give",
        "",
        "Were an allocator's own code free and the rest of the program to run as it does, the",
        "program would take (1 - the allocator's share of the samples) of its time. Under the",
        "peer, that is the best any allocator could do against the peer without making the",
        "program's own code (or the kernel's work for it) faster; under pagemalloc, the best",
        "pagemalloc could do by making its own code faster. Times are one run's task-clock.",
        "The geometric mean is over the real-programs study's programs (redis aside); the",
        "JavaScript engines and gc-churn, there for the tree-overhead study, are shown only.",
        "",
        markdown_table(["program", "peer", "pagemalloc / peer", "pagemalloc's allocator %",
                        "peer's allocator %", "pagemalloc, own code free / peer",
                        "any allocator, own code free / peer"], table),
        "",
    ]
    summary = [f"  bound: any allocator with its own code free {means[2]:.3f} x the peers' time "
               f"(geometric mean); pagemalloc with its own code free {means[1]:.3f}; "
               f"pagemalloc as run {means[0]:.3f}"]
    return lines, summary


def report(info, data):
    """Writes papers/real-programs/profiles.md; returns summary lines."""
    paper = paper_directory()
    paper.mkdir(parents=True, exist_ok=True)
    programs = data["programs"]
    groups = ["program", "libc", "allocator", "kernel", "other libraries"]
    count_rows, share_rows, summary = [], [], []
    for name, by_allocator in programs.items():
        peer = by_allocator["peer"]
        for allocator in ("pagemalloc", peer):
            c = by_allocator[allocator]["counters"]
            count_rows.append([name, allocator, number(c.get("task-clock"), 1.0, 0),
                               number(c.get("page-faults")), number(c.get("context-switches")),
                               number(c.get("cycles"), 1e6), number(c.get("instructions"), 1e6),
                               number(c.get("dTLB-load-misses"), 1e3)])
            shares = by_allocator[allocator]["shares"]
            share_rows.append([name, allocator] + [f"{shares.get(g, 0.0):.1f}" for g in groups])
        pm, other = by_allocator["pagemalloc"], by_allocator[peer]
        summary.append(f"  {name:7s} allocator {pm['shares'].get('allocator', 0):4.1f}% "
                       f"(under {peer} {other['shares'].get('allocator', 0):4.1f}%), kernel "
                       f"{pm['shares'].get('kernel', 0):4.1f}% ({other['shares'].get('kernel', 0):4.1f}%), "
                       f"page faults {number(pm['counters'].get('page-faults'))} "
                       f"({number(other['counters'].get('page-faults'))})")
    lines = [
        "# Profiles of the real programs",
        "",
        "Generated by `bash tools/study.sh --only profiles` (tools/study/profiles.py): each real",
        "program (redis left out) once under pagemalloc and once under the peer that was fastest",
        "for it in the last real-programs run, with `perf stat` and `perf record -g`. n/s: the",
        "machine has no such counter (virtual machines often have no hardware counters).",
        "",
        machine_line(info),
        "",
        "## Counters",
        "",
        markdown_table(["program", "allocator", "task-clock (ms)", "page faults",
                        "context switches", "cycles (M)", "instructions (M)",
                        "dTLB load misses (k)"], count_rows),
        "",
        "## Share of samples by where they fell (%)",
        "",
        markdown_table(["program", "allocator"] + groups, share_rows),
        "",
    ]
    bound_lines, bound_summary = bound_section(programs)
    lines += bound_lines + ["## Functions above 1% of the samples", ""]
    for name, by_allocator in programs.items():
        for allocator in ("pagemalloc", by_allocator["peer"]):
            lines.append(f"**{name} under {allocator}**")
            lines.append("")
            lines.append(markdown_table(
                ["%", "object", "function"],
                [[f"{f['percent']:.1f}", f["dso"], f["symbol"]]
                 for f in by_allocator[allocator]["functions"]]))
            lines.append("")
    write_report(paper / "profiles.md", "\n".join(lines) + "\n")
    return ["Profiles (share of samples in the allocator and in the kernel, page faults; under "
            "the fastest peer in parentheses):"] + summary + bound_summary
