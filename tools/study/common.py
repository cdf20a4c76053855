"""What every part of the study shares: paths, progress, processes, the machine, statistics.

Terms:
  root        the repository (two levels above this file)
  results     results/ under the root: every raw measurement of the last run, as JSON
  papers      papers/ under the root: one folder per reproduced study (the reports)
  sample      one measurement from one process (one round); a median is taken over rounds
"""

import datetime
import json
import math
import os
import platform
import random
import shlex
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "results"
PAPERS = ROOT / "papers"
PYTHON = "/usr/bin/python3"

_started = time.monotonic()


def log(message):
    """Prints one progress line, prefixed with the minutes and seconds since the start."""
    elapsed = int(time.monotonic() - _started)
    print(f"[{elapsed // 60:2d}:{elapsed % 60:02d}] {message}", flush=True)


def run(command, env=None, check=True, quiet=False, cwd=ROOT, timeout=None):
    """Runs a command (a list) from the root; returns the CompletedProcess. With quiet, its
    output is captured and shown only if it fails."""
    full_env = dict(os.environ)
    if env:
        full_env.update(env)
    shown = " ".join(shlex.quote(str(c)) for c in command)
    result = subprocess.run([str(c) for c in command], env=full_env, cwd=cwd,
                            stdin=subprocess.DEVNULL, text=True, timeout=timeout,
                            stdout=subprocess.PIPE if quiet else None,
                            stderr=subprocess.STDOUT if quiet else None)
    if check and result.returncode != 0:
        if quiet and result.stdout:
            sys.stdout.write(result.stdout[-4000:])
        raise RuntimeError(f"failed ({result.returncode}): {shown}")
    return result


def output_of(command):
    """The stripped standard output of a command, or "" if it cannot run."""
    try:
        return subprocess.run(command, capture_output=True, text=True, check=False,
                              stdin=subprocess.DEVNULL).stdout.strip()
    except OSError:
        return ""


def package_versions(packages):
    versions = {}
    for package in packages:
        line = output_of(["dpkg-query", "-W", "-f=${Version}", package])
        versions[package] = line or "not installed"
    return versions


def cpu_model():
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def memory_gib():
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return round(int(line.split()[1]) / (1024 * 1024), 1)
    except OSError:
        pass
    return None


def machine():
    """What was measured on, recorded beside every table."""
    return {
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "host": platform.node(),
        "kernel": platform.release(),
        "os": output_of(["sh", "-c", ". /etc/os-release && echo $PRETTY_NAME"]),
        "cpu": cpu_model(),
        "cores": os.cpu_count(),
        "memory_gib": memory_gib(),
        "compiler": output_of(["c++", "--version"]).splitlines()[0:1],
        "commit": output_of(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"]),
        "packages": package_versions(["libc6", "libjemalloc2", "libmimalloc2.0",
                                      "libtcmalloc-minimal4", "libbenchmark-dev",
                                      "python3-matplotlib"]),
    }


def machine_line(info):
    """One line that says where and when: for the top of every table."""
    return (f"{info['date']}, {info['cpu']}, {info['cores']} cores, {info['memory_gib']} GiB, "
            f"{info['os']}, kernel {info['kernel']}, commit {info['commit']}")


def write_json(path, data):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=1, sort_keys=False) + "\n")


def read_json(path):
    return json.loads(Path(path).read_text())


def shuffled_rounds(entries, rounds, seed, part, describe=None):
    """Yields (round number, the entries in an order shuffled from the seed and the round), so
    that a run can be repeated; logs each round as it starts (describe: one entry's name, to
    list the order; else the count)."""
    for round_number in range(rounds):
        order = list(entries)
        random.Random(seed * 1000 + round_number).shuffle(order)
        listed = (", ".join(describe(e) for e in order) if describe
                  else f"({len(order)} processes)")
        log(f"{part}: round {round_number + 1}/{rounds}{':' if describe else ''} {listed}")
        yield round_number, order


def median(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def medians_of(samples, metrics):
    """{metric: median over the samples that succeeded} for each metric, and "failed": how many
    did not."""
    good = [s for s in samples if s["ok"]]
    out = {metric: median([s.get(metric) for s in good]) for metric in metrics}
    out["failed"] = len(samples) - len(good)
    return out


def geomean(values):
    values = [v for v in values if v is not None and v > 0]
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else None


def ratio(a, b):
    return a / b if a is not None and b not in (None, 0) else None


def fmt_ratio(r):
    return "—" if r is None else f"{r:.2f}"


def f_or_dash(value, digits=1, thousands=""):
    """A number with `digits` decimals (thousands: "," to group them), or a dash for None."""
    return "—" if value is None else f"{value:{thousands}.{digits}f}"


def markdown_table(header, rows):
    """A Markdown table; cells are strings already."""
    lines = ["| " + " | ".join(header) + " |", "| " + " | ".join("---" for _ in header) + " |"]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def text_table(header, rows):
    """The same table aligned for a terminal."""
    cells = [header] + [[str(c) for c in row] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
    out = []
    for n, row in enumerate(cells):
        out.append("  ".join(c.ljust(w) if i == 0 else c.rjust(w)
                             for i, (c, w) in enumerate(zip(row, widths))))
        if n == 0:
            out.append("  ".join("-" * w for w in widths))
    return "\n".join(out)
