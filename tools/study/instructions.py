"""Instructions per malloc and per free on the fast path, counted by callgrind
(papers/cross-thread/instructions.md).

benchmarks/cross_thread/fast_path_calls runs N allocations and frees through named wrapper
functions (measured_malloc, measured_free, measured_new, measured_sized_delete,
measured_aligned_alloc) in one of six modes:

  pair16   malloc(16) then free, N times
  mixed    malloc/free of a size cycling through 8 classes from 16 to 1024 bytes
  batch    64 mallocs of 48 bytes, then their 64 frees, N/64 times
  sized    operator new(32) then the sized operator delete(p, 32), N times
  aligned  aligned_alloc(A, 100) then free, A cycling through 64, 256 and 4096, N times
  lone16   pair16 without other blocks alive (the others keep 64 blocks of each size they
           use allocated throughout: otherwise a page or slab goes empty at every free)

Each allocator (glibc, jemalloc, mimalloc, tcmalloc by LD_PRELOAD, and pagemalloc: the release
tree's libpagemalloc.so) runs each mode twice under `valgrind --tool=callgrind`, with N1 and
N2 = 2 x N1 calls. callgrind_annotate gives each wrapper's inclusive and self instruction
counts; inclusive - self is what the allocator's entry point executed (the wrappers are built
without tail calls and without PLT stubs, so that is the allocator's code alone, reached by one
indirect call). Instructions per call = (count at N2 - count at N1) / (N2 - N1): start-up,
warm-up and the caches' first refills cancel. Slow paths that recur (a cache refilled or
flushed every k calls) are included, spread over the calls, as a program would pay them.

Callgrind counts instructions, not time: a cache miss or a mispredicted branch costs the same
as an add here. The count is exact and does not depend on the machine's load, so one run is
enough (no rounds).

Writes results/instructions.json and papers/cross-thread/instructions.md; returns summary lines.
Needs valgrind (Debian's package, installed by tools/install-deps.sh).
"""

import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

from allocators import PEERS, build_directory, dropin, peer_library
from common import (fmt_ratio, machine_line, markdown_table, output_of, papers_directory,
                    progress, ratio, results_directory, shown, text_table, write_json,
                    write_report)

ALLOCATORS = PEERS + ["pagemalloc"]
TARGETS = ["fast_path_calls"]
# (mode, the wrapper of the allocation, the wrapper of the free, what it does)
MODES = [
    ("pair16", "measured_malloc", "measured_free", "malloc(16), free"),
    ("mixed", "measured_malloc", "measured_free", "malloc/free, 8 sizes 16-1024 B in turn"),
    ("batch", "measured_malloc", "measured_free", "64 x malloc(48), then 64 frees"),
    ("sized", "measured_new", "measured_sized_delete", "operator new(32), operator delete(p, 32)"),
    ("aligned", "measured_aligned_alloc", "measured_free",
     "aligned_alloc(64, 256 or 4096 in turn, 100), free"),
    ("lone16", "measured_malloc", "measured_free", "malloc(16), free, no other block alive"),
]
COUNTS = (65536, 131072)  # multiples of 64 (batch mode)
QUICK_COUNTS = (16384, 32768)
SCRUBBED = ("LD_PRELOAD", "MALLOC_CONF", "PAGEMALLOC_CONF", "GLIBC_TUNABLES")


def paper_directory():
    return papers_directory() / "cross-thread"


def program():
    return build_directory("pagemap") / "benchmarks" / "cross_thread" / "fast_path_calls"


def preload_of(allocator):
    return dropin("pagemap") if allocator == "pagemalloc" else peer_library(allocator)


def annotate_costs(out_file, inclusive):
    """{function name: instructions} from callgrind_annotate (inclusive or self)."""
    text = subprocess.run(["callgrind_annotate", f"--inclusive={'yes' if inclusive else 'no'}",
                           "--threshold=100", str(out_file)], capture_output=True, text=True,
                          check=True).stdout
    costs = {}
    # e.g. "  2,621,440 (12.34%)  ???:measured_malloc [/path/fast_path_calls]"; the object in
    # brackets is left out when it is the same as the line before's.
    line_pattern = re.compile(r"^\s*([\d,]+)\s+\(\s*[\d.]+%\)\s+(.*?)(?:\s+\[[^\]]*\])?\s*$")
    for line in text.splitlines():
        match = line_pattern.match(line)
        if match:
            function = match.group(2).rsplit(":", 1)[-1]
            costs[function] = costs.get(function, 0) + int(match.group(1).replace(",", ""))
    return costs


def callee_instructions(allocator, mode, wrappers, n, scratch):
    """Instructions executed below each wrapper (inclusive - self) in one callgrind run."""
    out_file = Path(scratch) / f"callgrind.{allocator}.{mode}.{n}.out"
    env = {k: v for k, v in os.environ.items() if k not in SCRUBBED}
    library = preload_of(allocator)
    if library is not None:
        env["LD_PRELOAD"] = str(library)
    finished = subprocess.run(["valgrind", "--tool=callgrind", f"--callgrind-out-file={out_file}",
                               str(program()), mode, str(n)], env=env, capture_output=True,
                              text=True, stdin=subprocess.DEVNULL, timeout=600)
    if finished.returncode != 0:
        raise RuntimeError(f"callgrind {allocator} {mode} {n}: exit {finished.returncode}: "
                           f"{finished.stderr[-1000:]}")
    inclusive, own = annotate_costs(out_file, True), annotate_costs(out_file, False)
    missing = [w for w in wrappers if w not in inclusive]
    if missing:
        raise RuntimeError(f"callgrind {allocator} {mode} {n}: no cost for {missing} in "
                           f"{out_file}")
    return {w: inclusive[w] - own.get(w, 0) for w in wrappers}


def measure(quick):
    """Counts every allocator in every mode; returns the data."""
    if shutil.which("valgrind") is None or shutil.which("callgrind_annotate") is None:
        raise RuntimeError("valgrind is not installed (bash tools/install-deps.sh installs it)")
    n1, n2 = QUICK_COUNTS if quick else COUNTS
    counts = {}
    progress.plan_steps(len(ALLOCATORS))
    with tempfile.TemporaryDirectory(prefix="instructions.") as scratch:
        for allocator in ALLOCATORS:
            progress.step(f"instructions: {allocator} under callgrind ({len(MODES)} modes, N = {n1}, {n2})")
            for mode, allocate, release, _ in MODES:
                low = callee_instructions(allocator, mode, (allocate, release), n1, scratch)
                high = callee_instructions(allocator, mode, (allocate, release), n2, scratch)
                counts.setdefault(allocator, {})[mode] = {
                    "malloc": (high[allocate] - low[allocate]) / (n2 - n1),
                    "free": (high[release] - low[release]) / (n2 - n1),
                    "raw": {str(n1): low, str(n2): high}}
    data = {"counts": counts, "n": [n1, n2],
            "valgrind": output_of(["valgrind", "--version"])}
    write_json(results_directory() / "instructions.json", data)
    return data


def report(info, data):
    """Writes papers/cross-thread/instructions.md; returns summary lines."""
    paper = paper_directory()
    paper.mkdir(parents=True, exist_ok=True)
    counts = data["counts"]
    rows, summary_rows = [], []
    for mode, _, _, what in MODES:
        for kind in ("malloc", "free"):
            values = {a: counts[a][mode][kind] for a in ALLOCATORS}
            best_peer = min(values[p] for p in PEERS)
            label = f"{mode} {'allocation' if kind == 'malloc' else 'free'}"
            rows.append([f"{label} ({what})"] + [f"{values[a]:.1f}" for a in ALLOCATORS]
                        + [fmt_ratio(ratio(values["pagemalloc"], best_peer)),
                           fmt_ratio(ratio(values["pagemalloc"], values["mimalloc"]))])
            summary_rows.append([label] + [f"{values[a]:.1f}" for a in ALLOCATORS])
    header = (["call (mode)"] + [f"{a}" for a in ALLOCATORS]
              + ["pagemalloc / fewest of peers", "pagemalloc / mimalloc"])
    n1, n2 = data["n"]
    text = "\n".join([
        "# Fast-path instructions per call: measured results", "",
        "Generated by `bash tools/study.sh --only instructions` (part of `bash tools/study.sh`);"
        " do not edit by hand.", "",
        f"Machine and date: {machine_line(info)}; {data['valgrind']}.", "",
        "Instructions executed inside the allocator per call, counted by callgrind:"
        f" (count at N = {n2} - count at N = {n1}) / {n2 - n1}, so start-up and warm-up cancel"
        " (tools/study/instructions.py; the program is benchmarks/cross_thread/fast_path_calls)."
        " `sized` is the C++ sized delete, `operator delete(void*, size_t)`; an allocator"
        " without its own operators is reached through libstdc++'s, which call malloc and"
        " free.", "",
        markdown_table(header, rows), ""])
    write_report(paper / "instructions.md", text)
    return [f"fast-path instructions per call ({shown(paper / 'instructions.md')}):",
            text_table(["call"] + ALLOCATORS, summary_rows)]
