#!/usr/bin/python3
"""Summarizes the study's Google Benchmark results as Markdown tables.

    /usr/bin/python3 tools/summarize.py --arrow results/arrow_builder_bench.json \
        --small results/small_chunks_bench.json --out results/summary.md

Prints the summary and writes it to --out. Standard library only.

Terms, and how benchmarks are recognized by name (case-insensitive):
  strategy      one benchmark of the Arrow builder (its name without /iterations:, /repeats:
                and the like); its GB/s is Google Benchmark's bytes_per_second (or a counter
                named "GB/s"), its moves a counter "moves" (or "moved"), its copies a counter
                "bytes_copied" (or "copied")
  pagemalloc    a name holding "pagemalloc", "pm_" or the word "pm"
  limit         a name holding "prefault" or "limit": appends into one pre-faulted region
  aligned       a name holding "aligned_alloc" or "alignedalloc": aligned_alloc + memcpy + free
  glibc         a name holding the word "glibc" (small chunks)
  warm          every repetition after the first (the first one also maps the memory)
  chunk size    the last number in a small-chunks benchmark's name (16 in ".../16" or
                ".../chunk_size:16"); the rest of the name is the allocator
"""

import argparse
import json
import re
import statistics
import subprocess
import sys
from pathlib import Path

NS_PER_UNIT = {"ns": 1.0, "us": 1e3, "ms": 1e6, "s": 1e9}
# Name parts Google Benchmark appends that say how, not what, was measured.
HOW_PART = re.compile(r"(iterations|repeats|min_time|min_warmup_time):.*|real_time|manual_time|process_time")
# Name parts that are arguments: "16", "chunk_size:16", "threads:4".
ARGUMENT_PART = re.compile(r"(?:([A-Za-z_]+):)?(\d+)")


def words(name):
    return set(re.split(r"[^a-z0-9]+", name.lower()))


def is_pagemalloc(name):
    lower = name.lower()
    return "pagemalloc" in lower or "pm_" in lower or "pm" in words(name)


def is_limit(name):
    lower = name.lower()
    return "prefault" in lower or "limit" in lower


def is_aligned(name):
    lower = name.lower()
    return "aligned_alloc" in lower or "alignedalloc" in lower


def is_glibc(name):
    return "glibc" in words(name)


def parse_name(name):
    """'BM_SmallChunks<Glibc>/chunk_size:16/real_time' -> ('BM_SmallChunks', 'Glibc',
    (('chunk_size', '16'),)): the family, the label (the template argument, or the name
    without its arguments), the arguments."""
    parts = [p for p in name.split("/") if not HOW_PART.fullmatch(p)]
    arguments = tuple(m.groups("") for m in map(ARGUMENT_PART.fullmatch, parts[1:]) if m)
    rest = [p for p in parts[1:] if not ARGUMENT_PART.fullmatch(p)]
    template = re.fullmatch(r"(.*?)<(.*)>", parts[0])
    if template:
        return template.group(1), "/".join([template.group(2)] + rest), arguments
    return parts[0], "/".join(parts[:1] + rest), arguments


def load(path):
    """Returns (context, runs): runs maps (family, label, arguments) to the run's iteration
    entries in repetition order, or to its median aggregate alone when the file holds no
    iteration entries."""
    data = json.loads(Path(path).read_text())
    runs, medians = {}, {}
    for entry in data.get("benchmarks", []):
        if entry.get("error_occurred"):
            raise SystemExit(f"{path}: {entry['name']}: {entry.get('error_message', 'error')}")
        key = parse_name(entry.get("run_name", entry["name"]))
        if entry.get("run_type", "iteration") == "iteration":
            runs.setdefault(key, []).append(entry)
        elif entry.get("aggregate_name") == "median":
            medians[key] = [entry]
    for key, median in medians.items():
        runs.setdefault(key, median)
    for entries in runs.values():
        entries.sort(key=lambda e: e.get("repetition_index", 0))
    return data.get("context", {}), runs


def counter(entry, *names):
    for name in names:
        if name in entry:
            return float(entry[name])
    return None


def gbps(entry):
    value = counter(entry, "GB/s", "GBps", "gbps")
    if value is not None:
        return value
    value = counter(entry, "bytes_per_second")
    return None if value is None else value / 1e9


def fmt_number(value, digits=2):
    return "n/a" if value is None else f"{value:.{digits}f}"


def fmt_bytes(value):
    if value is None:
        return "n/a"
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if abs(value) >= scale:
            return f"{value / scale:.1f} {unit}"
    return f"{value:.0f} B"


def joined(values, format_one):
    return " / ".join(format_one(v) for v in values)


def warm(values):
    """The repetitions after the first, or the only one there is."""
    return values[1:] if len(values) > 1 else values


def arrow_section(path):
    _, runs = load(path)
    lines = [
        "## Arrow builder",
        "",
        "256 appends of 2 MiB of int64 into a buffer aligned to 64 bytes that doubles when full "
        "(512 MiB at the end). One value per repetition, in order; the first repetition maps "
        "fresh memory, the later ones are warm.",
        "",
        "| strategy | GB/s | moves | bytes copied |",
        "| --- | --- | --- | --- |",
    ]
    speeds = {}
    for (_, label, arguments), entries in runs.items():
        name = "/".join([label] + [":".join(filter(None, a)) for a in arguments])
        speeds[name] = [gbps(e) for e in entries]
        moves = [counter(e, "moves", "moved") for e in entries]
        copied = [counter(e, "bytes_copied", "copied") for e in entries]
        lines.append(
            f"| {name} | {joined(speeds[name], fmt_number)} "
            f"| {joined(moves, lambda v: fmt_number(v, 0))} | {joined(copied, fmt_bytes)} |"
        )

    def reference(test):
        names = [n for n in speeds if test(n) and not is_pagemalloc(n)]
        values = [v for n in names for v in warm(speeds[n]) if v is not None]
        return (names[0] if names else None), (statistics.median(values) if values else None)

    limit_name, limit = reference(is_limit)
    aligned_name, aligned = reference(is_aligned)
    lines += [
        "",
        "pagemalloc's warm repetitions against the median warm repetition of the pre-faulted "
        f"limit ({limit_name or 'not found'}) and of aligned_alloc + memcpy "
        f"({aligned_name or 'not found'}):",
        "",
        "| pagemalloc strategy | warm GB/s | / limit | / aligned_alloc+memcpy |",
        "| --- | --- | --- | --- |",
    ]
    pm_names = [n for n in speeds if is_pagemalloc(n)]
    for name in pm_names:
        values = warm(speeds[name])

        def ratios(ref):
            return joined(values, lambda v: "n/a" if None in (v, ref) else f"{v / ref:.2f}")

        lines.append(
            f"| {name} | {joined(values, fmt_number)} | {ratios(limit)} | {ratios(aligned)} |"
        )
    if not pm_names:
        lines.append("| (no pagemalloc strategy found) | | | |")
    return lines


def small_section(path):
    _, runs = load(path)
    families = {}  # family -> label -> arguments -> real time of each repetition, in ns
    for (family, label, arguments), entries in runs.items():
        values = [e["real_time"] * NS_PER_UNIT[e.get("time_unit", "ns")] for e in entries]
        families.setdefault(family, {}).setdefault(label, {})[arguments] = values
    lines = [
        "## Small chunks",
        "",
        "Allocate 1600 chunks, free half in FIFO order, then the other half in LIFO order. "
        "Time per round in µs (real time as Google Benchmark reports it): the median of the "
        "repetitions and, in parentheses, the fastest and the slowest; the ratio is of the "
        "medians, below 1 when pagemalloc is faster.",
    ]
    for family, times in sorted(families.items()):
        labels = sorted(times, key=lambda a: (not is_pagemalloc(a), not is_glibc(a), a))
        pms = [a for a in labels if is_pagemalloc(a)]
        glibc = next((a for a in labels if is_glibc(a)), None)
        rows = sorted({args for per_label in times.values() for args in per_label},
                      key=lambda args: [int(value) for _, value in args])
        argument_names = "/".join(name or "argument" for name, _ in rows[0]) if rows else ""
        header = [argument_names or "run"] + labels
        header += [f"{pm} / {glibc}" for pm in pms] if glibc else []
        lines += ["", f"{family}:", "", "| " + " | ".join(header) + " |",
                  "|" + " --- |" * len(header)]
        for args in rows:
            row = ["/".join(value for _, value in args) or "-"]
            for label in labels:
                values = [v / 1e3 for v in times[label].get(args, [])]
                row.append(f"{statistics.median(values):.1f} ({min(values):.1f}–{max(values):.1f})"
                           if values else "n/a")
            for pm in pms if glibc else []:
                pm_values, glibc_values = times[pm].get(args), times[glibc].get(args)
                row.append("n/a" if not (pm_values and glibc_values) else
                           f"{statistics.median(pm_values) / statistics.median(glibc_values):.2f}")
            lines.append("| " + " | ".join(row) + " |")
        if glibc is None:
            lines += ["", "(no glibc benchmark found: no ratio)"]
    return lines


def command_output(*args):
    try:
        return subprocess.run(args, capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def header(paths):
    lines = [
        "# pagemalloc study: summary",
        "",
        f"- machine: `{command_output('uname', '-a')}`",
        f"- cpus: {command_output('nproc')}",
        f"- date: {command_output('date', '-u')}",
        "- results: " + ", ".join(f"`{p}`" for p in paths),
    ]
    context, _ = load(paths[0])
    if context.get("cpu_scaling_enabled"):
        lines.append("- note: CPU frequency scaling was on; timings are noisier")
    if context.get("library_build_type") == "debug":
        lines.append("- note: the Google Benchmark library says it is a debug build (Debian's is)")
    return lines


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--arrow", required=True, help="arrow_builder_bench's JSON output")
    parser.add_argument("--small", required=True, help="small_chunks_bench's JSON output")
    parser.add_argument("--out", required=True, help="the Markdown file to write")
    args = parser.parse_args()

    lines = header([args.arrow, args.small])
    lines += [""] + arrow_section(args.arrow) + [""] + small_section(args.small)
    text = "\n".join(lines) + "\n"
    Path(args.out).write_text(text)
    sys.stdout.write(text)


if __name__ == "__main__":
    main()
