#!/usr/bin/python3
"""The study: builds what it needs, measures pagemalloc against its peers, writes the papers.

    bash tools/study.sh [--quick] [--only PART[,PART...]] [--rounds N] [--seed S]

Parts (all by default, in this order):

  arrow           the Arrow builder: pm_rallocx in every variant against aligned_alloc+memcpy
                  under every peer, and the pre-faulted limit (papers/arrow-inplace)
  tree-overhead   the run-manager study in every variant: micro, trace replay of real
                  programs, and the macro rows of the parts below (papers/tree-overhead)
  tree-overhead-2008  the same question under 2008's design: the allocator built as
                  je2008-trees, je2008-fixed and je2008-pagemap on the JS engines, the GC-arena
                  churn and the real programs (calls, time, peak RSS, the prediction from a
                  replay of their calls), the sweep that switches one design choice per
                  step towards today's, and today's and 2008's designs as three heaps in one
                  process (whole_designs_bench) (papers/tree-overhead/results-2008.md)
  workloads       the talk's small-chunk, thread and large-block workloads and the medium
                  blocks (64 KiB-1 MiB) under glibc, jemalloc, mimalloc, tcmalloc and each
                  pagemalloc variant (papers/allocator-workloads)
  medium-classes  the medium blocks under six builds of pagemalloc: the medium classes' reach
                  (256 KiB, 512 KiB, 1 MiB) and spacing (page-exact, 4, 8, 16 per doubling),
                  one choice at a time (papers/allocator-workloads/medium_classes.md); and
                  100 live medium blocks alone under each allocator, with repeated and
                  onward sequences, time and peak RSS (medium_peers.md)
  real-programs   python, perl, lua, ruby, sqlite, g++, jq and redis under every allocator by
                  LD_PRELOAD, outputs compared (benchmarks/real_programs)
  cross-thread    programs whose blocks other threads free (pipeline with shallow and deep
                  queues, rptest, larson, xmalloc, oversubscribed, sh8bench) and sh6bench
                  under glibc, jemalloc, mimalloc, tcmalloc and pagemalloc by LD_PRELOAD:
                  wall, sys, peak RSS, context switches, and pagemalloc's criteria against
                  the peers (papers/cross-thread)
  instructions    instructions per malloc and per free on the fast path, counted with
                  valgrind's callgrind, every allocator (papers/cross-thread/instructions.md)
  profiles        each real program under pagemalloc and under its fastest peer in the last
                  real-programs run, with perf stat and perf record: where the time goes
                  (papers/real-programs/profiles.md)
  heap-profiles   each real program under pagemalloc's heap profiler: what it allocates (bytes
                  by block size, live bytes over time, the top call sites, jeprof's call graph)
                  (papers/real-programs/heap-profiles.md)
  memory          what the allocators hold: sparse large blocks, the resident size after a
                  200 MB burst (with small calls going on, and idle), small C programs in the
                  patterns of mimalloc-bench's; peak RSS under every allocator by LD_PRELOAD
                  and pagemalloc's criteria (papers/memory)
  huge-pages      a heap built fast and read in random order (short and long runs) under
                  pagemalloc with its huge-page budget, without the limit, and with small pages
                  only: what the budget gives and takes (papers/memory/huge_pages.md)

It builds the presets of CMakePresets.json it needs (release = the pagemap variant, hybrid,
rbtree, trace = the tracing drop-in), only the targets it runs; raw results go to results/
(Google Benchmark's JSON where it applies), the reports to papers/<study>/results.md with PNG
figures, and the summary to results/summary.md, printed at the end. It takes about 100 minutes
on 2 cores, 60 of them tree-overhead-2008's (47 library builds, then its interleaved rounds).

--quick gives a first result of every part in about 10 minutes on 2 cores from a fresh clone,
builds included: a check of the whole pipeline rather than a measurement. It builds the release
tree only (no hybrid, rbtree or trace trees: the variants are compared in one process by the
tree-overhead part) and five libraries of the 2008 designs (the three presets and today's
design, see design_sweep.py), runs one round everywhere, at the smaller sizes each part has
(the real programs' quick inputs, without their binding pass) and cut to each part's essentials
(each module's docstring says how). Its raw results, reports and summary go to results/quick/
(reports in results/quick/papers/<study>/), so that the committed full-run reports in papers/
stay as they are.

Progress: a line per event, "part k of n: NAME" as each part starts (the builds are part 1),
"round r of R" (or the build, the program) within it, with an estimate of the time left once a
step is done (the time so far scaled by the work left, from each part's nominal minutes in
PART_MINUTES); builds say when they start, how far they got each minute, and when they end.
The time each part took is printed before the summary and written to results/study_times.json.
Environment: JOBS (build jobs, default 2).
"""

import argparse
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import arrow  # noqa: E402
import cross_thread  # noqa: E402
import design_sweep  # noqa: E402
import heap_profiles  # noqa: E402
import huge_pages  # noqa: E402
import instructions  # noqa: E402
import medium_classes  # noqa: E402
import medium_peers  # noqa: E402
import memory  # noqa: E402
import profiles  # noqa: E402
import tree_overhead  # noqa: E402
import workloads  # noqa: E402
from allocators import VARIANT_PRESET, build_directory, dropin, measured_variants  # noqa: E402
from common import (ROOT, build_tree, clock, log, machine, progress, read_json,  # noqa: E402
                    results_directory, run_streamed, shown, text_table, use_quick_outputs,
                    write_json)

PARTS = ["arrow", "tree-overhead", "tree-overhead-2008", "workloads", "medium-classes", "real-programs", "cross-thread", "instructions",
         "profiles", "heap-profiles", "memory", "huge-pages"]
# The order they run in, after the builds (the workloads and the real programs before the
# tree-overhead part, which reports their pagemalloc rows).
ORDER = ["build", "arrow", "workloads", "medium-classes", "real-programs", "tree-overhead", "tree-overhead-2008",
         "cross-thread", "instructions", "profiles", "heap-profiles", "memory", "huge-pages"]
# Each part's nominal minutes on 2 cores (--quick, full run): only the weights of the estimate
# of the time left, which scales them by the machine's actual speed as the run goes. The build
# part's are its builds' (BUILD_MINUTES).
PART_MINUTES = {"arrow": (0.35, 1), "workloads": (0.25, 2), "medium-classes": (0.7, 3),
                "real-programs": (0.75, 20),
                "tree-overhead": (0.4, 3), "tree-overhead-2008": (1.8, 55),
                "cross-thread": (0.6, 4), "instructions": (0.8, 1), "profiles": (0.7, 2),
                "heap-profiles": (1.0, 10),
                "memory": (0.45, 5), "huge-pages": (0.1, 2)}
BUILD_MINUTES = {"release": 2.5, "hybrid": 1.2, "rbtree": 1.2, "trace": 1.0}
QUICK_LIBRARY_MINUTES = 0.5  # one of the quick run's libraries of the 2008 designs
# The parts that run every run-manager variant's build (the others need the release tree only).
VARIANT_PARTS = {"arrow", "tree-overhead", "workloads", "real-programs"}
BENCHMARKS = ["small_chunks_bench", "large_blocks_bench", "medium_blocks_bench",
              "arrow_builder_bench"]
# real_programs.py's line for each run ("  round 2/5 python glibc ...") and its binding pass.
ROUND_LINE = re.compile(r"^\s+round (\d+)/(\d+) ")
BINDING_LINE = "real_programs: checking where malloc binds"


def build(preset, targets):
    targets = list(dict.fromkeys(targets))  # each once
    build_tree(f"build/{preset} ({len(targets)} targets)", ["cmake", "--preset", preset],
               ["cmake", "--build", f"build/{preset}", "-j", os.environ.get("JOBS", "2"),
                "--target", *targets], begin=progress.step)


def quick_sweep(parts, quick):
    """Whether the quick run's libraries of the 2008 designs are built with the others (and
    give the tree-overhead part its tracing drop-in)."""
    return quick and "tree-overhead-2008" in parts


def planned_trees(parts, quick):
    """[(preset, targets)] of the trees to build."""
    variants = bool(VARIANT_PARTS & set(parts))
    release_targets = ["pagemalloc", *(BENCHMARKS if variants else []), workloads.ARENA_BINARY]
    if "tree-overhead" in parts:
        release_targets += ["run_manager_bench", "run_manager_bench_counted", "trace_replay",
                            "trace_replay_counted"]
    if "tree-overhead-2008" in parts:
        release_targets += ["trace_replay", "gc_arena_churn", "whole_designs_bench"]
    if "cross-thread" in parts:
        release_targets += cross_thread.TARGETS
    if "instructions" in parts:
        release_targets += instructions.TARGETS
    if "memory" in parts:
        release_targets += memory.TARGETS
    if "huge-pages" in parts:
        release_targets += huge_pages.TARGETS
    trees = [("release", release_targets)]
    trees += [(VARIANT_PRESET[v], ["pagemalloc", *BENCHMARKS])
              for v in (measured_variants(quick)[1:] if variants else [])]
    if "tree-overhead" in parts and not quick_sweep(parts, quick):
        trees.append(("trace", ["pagemalloc"]))
    return trees


def build_minutes(parts, quick):
    """The nominal minutes of each build of the build part, in order."""
    sweep = design_sweep.planned_builds(True) if quick_sweep(parts, quick) else []
    return ([BUILD_MINUTES[preset] for preset, _ in planned_trees(parts, quick)]
            + [QUICK_LIBRARY_MINUTES] * len(sweep))


def build_everything(parts, quick):
    progress.plan_steps(build_minutes(parts, quick))
    for preset, targets in planned_trees(parts, quick):
        build(preset, targets)
    if quick_sweep(parts, quick):
        design_sweep.build_libraries(quick=True)


def tracing_library(parts, quick):
    """The tracing drop-in the tree-overhead part records its traces with."""
    if quick_sweep(parts, quick):
        return design_sweep.todays_tracing_library()
    return ROOT / "build" / "trace" / "allocator" / "libpagemalloc.so"


def real_programs(quick, rounds, seed):
    out = results_directory() / "real_programs.json"
    command = [sys.executable, "benchmarks/real_programs/real_programs.py", "--out", out,
               "--seed", str(seed), "--rounds", str(rounds)]
    for variant in measured_variants(quick):
        command += ["--pagemalloc", f"pagemalloc-{variant}={dropin(variant)}"]
    if quick:
        command += ["--quick", "--skip-binding-check"]
    log("real programs: every program under every allocator (interleaved rounds)")
    progress.plan_steps(rounds + (0 if quick else 1))
    rounds_seen = set()

    def on_line(line):
        found = ROUND_LINE.match(line)
        if found and found.group(1) not in rounds_seen:
            rounds_seen.add(found.group(1))
            progress.step(f"real programs: round {found.group(1)} of {found.group(2)}")
        elif line.startswith(BINDING_LINE):
            progress.step("real programs: the binding pass (LD_DEBUG=bindings)")
        sys.stdout.write(line)
        sys.stdout.flush()

    status, _ = run_streamed(command, on_line)
    if status != 0:
        log(f"real programs: exit status {status} (see above)")
    return read_json(out) if out.exists() else None


def real_program_medians(data):
    """{program: {allocator: {"time": s, "rss": MiB}}} from real_programs.json."""
    if not data:
        return None
    return {program: {alloc: {"time": cell.get("wall_s"), "rss": cell.get("maxrss_mib")}
                      for alloc, cell in by_alloc.items()}
            for program, by_alloc in data.get("medians", {}).items()}


def report_times(times):
    """Prints and writes (study_times.json) the time each part took."""
    rows = [[name, clock(seconds)] for name, seconds in times.items()]
    rows.append(["all", clock(sum(times.values()))])
    write_json(results_directory() / "study_times.json", {"seconds": times})
    print("\n==== time per part (" + shown(results_directory() / "study_times.json") + ")\n"
          + text_table(["part", "m:ss"], rows))


def main():
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n")[0],
        epilog="--quick: every part cut short, in about 10 minutes on 2 cores from a fresh "
               "clone (builds included), reports in results/quick/; the full run: about 100 "
               "minutes. See the top of tools/study/run.py.")
    parser.add_argument("--quick", action="store_true",
                        help="one short round of every part, about 10 minutes on 2 cores with "
                             "the builds; raw results and reports go to results/quick/ "
                             "(papers/ is left as it is)")
    parser.add_argument("--only", default=",".join(PARTS), help="comma-separated parts: " + ", ".join(PARTS))
    parser.add_argument("--rounds", type=int, default=5, help="interleaved rounds (default 5)")
    parser.add_argument("--program-rounds", type=int, default=5,
                        help="rounds of the real programs (default 5: about 25 minutes)")
    parser.add_argument("--seed", type=int, default=1, help="order of the rounds, inputs")
    parser.add_argument("--no-build", action="store_true", help="use the build/ trees as they are")
    args = parser.parse_args()
    parts = [p.strip() for p in args.only.split(",") if p.strip()]
    unknown = [p for p in parts if p not in PARTS]
    if unknown:
        parser.error(f"unknown part(s): {', '.join(unknown)}; choose from {', '.join(PARTS)}")

    if args.quick:
        use_quick_outputs()
        log("quick run: one short round of every part; raw results, reports and the summary go "
            f"to {shown(results_directory())}/ (reports in {shown(results_directory())}/papers/), "
            "papers/ is left as it is")
    results_directory().mkdir(parents=True, exist_ok=True)
    info = machine()
    write_json(results_directory() / "machine.json", info)
    running = [name for name in ORDER
               if (name == "build" and not args.no_build) or name in parts
               or (name == "workloads" and "tree-overhead" in parts)]
    progress.plan([(name, sum(build_minutes(parts, args.quick)) if name == "build"
                    else PART_MINUTES[name][0 if args.quick else 1]) for name in running])

    def start(name):
        if name in running:
            progress.start(name)
            return True
        return False

    summary = {}
    workload_data = real_data = None
    if start("build"):
        build_everything(parts, args.quick)
        progress.finish()
    if start("arrow"):
        summary["arrow"] = arrow.report(info, arrow.measure(args.quick, args.rounds, args.seed))
        progress.finish()
    if start("workloads"):
        workload_data = workloads.measure(args.quick, args.rounds, args.seed)
        if "workloads" in parts:
            summary["workloads"], _ = workloads.report(info, workload_data)
        progress.finish()
    if start("medium-classes"):
        summary["medium-classes"] = medium_classes.report(
            info, medium_classes.measure(args.quick, args.rounds, args.seed))
        summary["medium-classes"] += medium_peers.report(
            info, medium_peers.measure(args.quick, args.rounds, args.seed))
        progress.finish()
    if start("real-programs"):
        real_data = real_programs(args.quick, 1 if args.quick else args.program_rounds, args.seed)
        progress.finish()
    if start("tree-overhead"):
        micro = tree_overhead.measure_micro(build_directory("pagemap"), args.quick)
        replay = tree_overhead.measure_replay(build_directory("pagemap"),
                                              tracing_library(parts, args.quick), args.quick,
                                              args.seed)
        summary["tree-overhead"] = tree_overhead.report(info, micro, replay, workload_data,
                                                        real_program_medians(real_data))
        progress.finish()
    if start("tree-overhead-2008"):
        data = design_sweep.measure(args.quick, 1 if args.quick else args.program_rounds,
                                    args.seed)
        summary["tree-overhead-2008"] = design_sweep.report(info, data)
        progress.finish()
    if start("cross-thread"):
        summary["cross-thread"] = cross_thread.report(
            info, cross_thread.measure(args.quick, args.rounds, args.seed))
        progress.finish()
    if start("instructions"):
        summary["instructions"] = instructions.report(info, instructions.measure(args.quick))
        progress.finish()
    if start("profiles"):
        summary["profiles"] = profiles.report(info, profiles.measure(args.quick, args.seed))
        progress.finish()
    if start("heap-profiles"):
        summary["heap-profiles"] = heap_profiles.report(
            info, heap_profiles.measure(args.quick, args.seed))
        progress.finish()
    if start("memory"):
        summary["memory"] = memory.report(info, memory.measure(args.quick, args.rounds,
                                                               args.seed))
        progress.finish()
    if start("huge-pages"):
        summary["huge-pages"] = huge_pages.report(info, huge_pages.measure(args.quick,
                                                                           args.rounds, args.seed))
        progress.finish()
    # The summary in the order of PARTS' reports.
    lines = []
    for name in ["arrow", "workloads", "medium-classes", "tree-overhead", "tree-overhead-2008", "cross-thread",
                 "instructions", "profiles", "heap-profiles", "memory", "huge-pages"]:
        if name in summary:
            lines += summary[name] + [""]
    text = "\n".join(lines)
    (results_directory() / "summary.md").write_text(
        "# Study summary\n\n```\n" + text + "\n```\n")
    report_times(progress.times)
    print(f"\n==== summary ({shown(results_directory() / 'summary.md')})\n" + text)


if __name__ == "__main__":
    main()
