"""What every part of the study shares: paths, progress, processes, the machine, statistics.

Terms:
  root        the repository (two levels above this file)
  results     results/ under the root: every raw measurement of the last run, as JSON
  papers      papers/ under the root: one folder per reproduced study (the reports)
  quick       a --quick run writes both under results/quick/ instead (raw results there,
              reports in results/quick/papers/<study>/), so that its one short round never
              replaces the full run's reports in papers/
  sample      one measurement from one process (one round); a median is taken over rounds
  part        one of the study's parts (run.py's PARTS, and the builds before them); the
              progress lines say which part of how many is running, which round of it, and
              an estimate of the time left
"""

import datetime
import json
import math
import os
import platform
import random
import re
import shlex
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "results"
PAPERS = ROOT / "papers"
QUICK = RESULTS / "quick"
PYTHON = "/usr/bin/python3"

_started = time.monotonic()
_outputs = {"results": RESULTS, "papers": PAPERS, "quick": False}


def use_quick_outputs():
    """From now on, raw results go to results/quick/ and reports to results/quick/papers/."""
    _outputs.update(results=QUICK, papers=QUICK / "papers", quick=True)


def quick_outputs():
    return _outputs["quick"]


def results_directory():
    """results/, or results/quick/ in a quick run."""
    return _outputs["results"]


def papers_directory():
    """papers/, or results/quick/papers/ in a quick run."""
    return _outputs["papers"]


def shown(path):
    """A path as the reports and the summary name it: relative to the root."""
    path = Path(path)
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)


def write_report(path, text):
    """Writes a report; a quick run's says under its title that it is one (and where the full
    run's is)."""
    path = Path(path)
    if quick_outputs():
        title, _, rest = text.partition("\n")
        full = PAPERS / path.relative_to(papers_directory())
        text = (f"{title}\n\n> Quick run (`bash tools/study.sh --quick`): one short round at"
                f" smaller sizes, a check of the whole pipeline rather than a measurement. The"
                f" full run's report is {shown(full)}.\n{rest}")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def clock(seconds):
    """Seconds as m:ss."""
    seconds = int(seconds)
    return f"{seconds // 60}:{seconds % 60:02d}"


def log(message):
    """Prints one progress line, prefixed with the minutes and seconds since the start."""
    elapsed = int(time.monotonic() - _started)
    print(f"[{elapsed // 60:2d}:{elapsed % 60:02d}] {message}", flush=True)


class Progress:
    """Where the study is, for the progress lines: the parts planned, each with a nominal
    duration (its weight), the one running, and within it the steps begun of those planned
    (rounds, builds, programs: equal shares of the part unless given weights). The estimate of
    the time left is the time elapsed so far times the work left over the work done, in
    nominal minutes: known once a step or a part is done, it follows the machine's own
    speed."""

    def __init__(self):
        self.parts = []      # [(name, nominal minutes)], in the order they run
        self.index = -1      # the running part; the ones before it are done
        self.steps = []      # the running part's steps' weights
        self.begun = 0
        self.started = self.part_started = time.monotonic()
        self.times = {}      # {name: seconds it took}

    def plan(self, parts):
        self.parts = list(parts)
        self.started = time.monotonic()

    def start(self, name):
        """Starts a part; logs "part k of n: NAME"."""
        self.index = [n for n, _ in self.parts].index(name)
        self.steps, self.begun = [], 0
        self.part_started = time.monotonic()
        log(f"part {self.index + 1} of {len(self.parts)}: {name}{self.estimate()}")

    def finish(self):
        """Ends the running part; logs the time it took."""
        name = self.parts[self.index][0]
        self.times[name] = time.monotonic() - self.part_started
        self.index += 1
        self.steps, self.begun = [], 0
        log(f"part {self.index} of {len(self.parts)}: {name} done in "
            f"{clock(self.times[name])}{self.estimate()}")

    def plan_steps(self, steps):
        """The running part's steps (rounds, builds, programs): how many, or a list of their
        weights."""
        self.steps = [1] * steps if isinstance(steps, int) else list(steps)
        self.begun = 0

    def step(self, message):
        """Logs a step as it begins (the ones before it are done), with the estimate."""
        self.begun += 1
        log(message + self.estimate())

    def estimate(self):
        """"; estimate: N min left", or "" before anything is done."""
        if not self.parts or self.index < 0:
            return ""
        total = sum(weight for _, weight in self.parts)
        work = sum(weight for _, weight in self.parts[:self.index])
        if self.index < len(self.parts) and sum(self.steps) > 0:
            done = sum(self.steps[:max(self.begun - 1, 0)])
            work += self.parts[self.index][1] * done / sum(self.steps)
        elapsed = time.monotonic() - self.started
        if work <= 0 or work >= total:
            return ""
        left = elapsed * (total - work) / work
        return ("; estimate: under a minute left" if left < 60
                else f"; estimate: {round(left / 60)} min left")


progress = Progress()


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


def run_streamed(command, on_line, env=None, cwd=ROOT):
    """Runs a command (a list), handing each line of its output (stdout and stderr together) to
    on_line as it comes; returns (exit status, the output's last 4000 characters)."""
    full_env = dict(os.environ)
    if env:
        full_env.update(env)
    tail = []
    with subprocess.Popen([str(c) for c in command], env=full_env, cwd=cwd,
                          stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, errors="replace") as process:
        for line in process.stdout:
            tail.append(line)
            if len(tail) > 200:
                del tail[:100]
            on_line(line)
    return process.returncode, "".join(tail)[-4000:]


BUILT_TARGET = re.compile(r"Built target (\S+)")
COMPILING = re.compile(r"Building (C|CXX) object ")
HEARTBEAT_S = 60


def build_tree(label, configure, build, begin=log):
    """Runs a configure command and a build command (lists; the build's targets after
    "--target"), quietly: logs the build's start (through begin: log, or progress.step), a line
    a minute with how far it got (the files compiled, the targets built) and its end with the
    time it took; shows the output and raises RuntimeError if either command fails."""
    began = time.monotonic()
    begin(f"build {label}: started")
    run(configure, quiet=True)
    build = [str(c) for c in build]
    targets = set(build[build.index("--target") + 1:]) if "--target" in build else set()
    last = {"logged": began, "built": set(), "compiled": 0}

    def heartbeat(line):
        found = BUILT_TARGET.search(line)
        if found and found.group(1) in targets:
            last["built"].add(found.group(1))
        if COMPILING.search(line):
            last["compiled"] += 1
        now = time.monotonic()
        if now - last["logged"] >= HEARTBEAT_S:
            last["logged"] = now
            log(f"build {label}: {last['compiled']} files compiled, {len(last['built'])} of "
                f"{len(targets)} targets built, {clock(now - began)} so far")

    status, tail = run_streamed(build, heartbeat)
    if status != 0:
        sys.stdout.write(tail)
        raise RuntimeError(f"build {label} failed ({status}): "
                           + " ".join(shlex.quote(str(c)) for c in build))
    log(f"build {label}: done in {clock(time.monotonic() - began)}")


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
    that a run can be repeated; logs each round as it starts, as a step of the part's progress
    (describe: one entry's name, to list the order; else the count)."""
    for round_number in range(rounds):
        order = list(entries)
        random.Random(seed * 1000 + round_number).shuffle(order)
        listed = (", ".join(describe(e) for e in order) if describe
                  else f"({len(order)} processes)")
        progress.step(f"{part}: round {round_number + 1} of {rounds}"
                      f"{':' if describe else ''} {listed}")
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
