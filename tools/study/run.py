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
                  blocks (64-256 KiB) under glibc, jemalloc, mimalloc, tcmalloc and each
                  pagemalloc variant (papers/allocator-workloads)
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
figures, and the summary to results/summary.md, printed at the end. --quick runs one short
round of everything (a smoke test of the whole pipeline, within 15 minutes on 2 cores once
built); the default takes about 100 minutes, 60 of them tree-overhead-2008's. Environment: JOBS
(build jobs, default 2).
"""

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import arrow  # noqa: E402
import cross_thread  # noqa: E402
import design_sweep  # noqa: E402
import huge_pages  # noqa: E402
import instructions  # noqa: E402
import memory  # noqa: E402
import profiles  # noqa: E402
import tree_overhead  # noqa: E402
import workloads  # noqa: E402
from allocators import VARIANTS, build_directory, dropin  # noqa: E402
from common import RESULTS, ROOT, log, machine, read_json, run, write_json  # noqa: E402

PARTS = ["arrow", "tree-overhead", "tree-overhead-2008", "workloads", "real-programs", "cross-thread", "instructions",
         "profiles", "memory", "huge-pages"]
# The parts that run every run-manager variant's build (the others need the release tree only).
VARIANT_PARTS = {"arrow", "tree-overhead", "workloads", "real-programs"}
BENCHMARKS = ["small_chunks_bench", "large_blocks_bench", "medium_blocks_bench",
              "arrow_builder_bench"]


def build(preset, targets):
    log(f"build: {preset} ({', '.join(targets)})")
    run(["cmake", "--preset", preset], quiet=True)
    run(["cmake", "--build", f"build/{preset}", "-j", os.environ.get("JOBS", "2"),
         "--target", *targets], quiet=True)


def build_everything(parts):
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
    build("release", release_targets)
    for variant in VARIANTS[1:] if variants else []:
        build(variant, ["pagemalloc", *BENCHMARKS])
    if "tree-overhead" in parts:
        build("trace", ["pagemalloc"])


def real_programs(quick, rounds, seed):
    out = RESULTS / "real_programs.json"
    command = [sys.executable, "benchmarks/real_programs/real_programs.py", "--out", out,
               "--seed", str(seed), "--rounds", str(rounds)]
    for variant in VARIANTS:
        command += ["--pagemalloc", f"pagemalloc-{variant}={dropin(variant)}"]
    if quick:
        command.append("--quick")
    log("real programs: every program under every allocator (interleaved rounds)")
    result = run(command, check=False)
    if result.returncode != 0:
        log(f"real programs: exit status {result.returncode} (see above)")
    return read_json(out) if out.exists() else None


def real_program_medians(data):
    """{program: {allocator: {"time": s, "rss": MiB}}} from real_programs.json."""
    if not data:
        return None
    return {program: {alloc: {"time": cell.get("wall_s"), "rss": cell.get("maxrss_mib")}
                      for alloc, cell in by_alloc.items()}
            for program, by_alloc in data.get("medians", {}).items()}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="one short round of everything")
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

    RESULTS.mkdir(exist_ok=True)
    info = machine()
    write_json(RESULTS / "machine.json", info)
    if not args.no_build:
        build_everything(parts)

    summary = []
    workload_data = real_data = None
    if "arrow" in parts:
        summary += arrow.report(info, arrow.measure(args.quick, args.rounds, args.seed)) + [""]
    if "workloads" in parts or "tree-overhead" in parts:
        workload_data = workloads.measure(args.quick, args.rounds, args.seed)
    if "real-programs" in parts:
        real_data = real_programs(args.quick, 1 if args.quick else args.program_rounds, args.seed)
    if "workloads" in parts:
        lines, _ = workloads.report(info, workload_data)
        summary += lines + [""]
    if "tree-overhead" in parts:
        micro = tree_overhead.measure_micro(build_directory("pagemap"), args.quick)
        replay = tree_overhead.measure_replay(build_directory("pagemap"), ROOT / "build" / "trace",
                                              args.quick)
        summary += tree_overhead.report(info, micro, replay, workload_data,
                                        real_program_medians(real_data)) + [""]
    if "tree-overhead-2008" in parts:
        data = design_sweep.measure(args.quick, 1 if args.quick else args.program_rounds,
                                    args.seed)
        summary += design_sweep.report(info, data) + [""]
    if "cross-thread" in parts:
        summary += cross_thread.report(info, cross_thread.measure(args.quick, args.rounds,
                                                                  args.seed)) + [""]
    if "instructions" in parts:
        summary += instructions.report(info, instructions.measure(args.quick)) + [""]
    if "profiles" in parts:
        summary += profiles.report(info, profiles.measure(args.quick, args.seed)) + [""]
    if "memory" in parts:
        summary += memory.report(info, memory.measure(args.quick, args.rounds, args.seed)) + [""]
    if "huge-pages" in parts:
        summary += huge_pages.report(info, huge_pages.measure(args.quick, args.rounds,
                                                              args.seed)) + [""]
    text = "\n".join(summary)
    (RESULTS / "summary.md").write_text(
        "# Study summary\n\n```\n" + text + "\n```\n")
    print("\n==== summary (results/summary.md)\n" + text)


if __name__ == "__main__":
    main()
