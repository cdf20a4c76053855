"""One checked program under one allocator, through the launcher (benchmarks/measure_run.c):
what the cross-thread, memory, huge-pages and medium-classes parts share.

run_launched starts the program with the allocator preloaded (none for glibc), from an
environment without any allocator's settings, and returns its sample: wall, user and sys
time, peak RSS and context switches from the launcher, "ok", and when not ok a "failure"
(launcher error, timeout, exit status, or no "all checked" line: every such program checks
the blocks it was given before it says so).
"""

import os
import subprocess
from pathlib import Path

from allocators import build_directory, dropin, peer_library

SCRUBBED = ("LD_PRELOAD", "MALLOC_CONF", "PAGEMALLOC_CONF", "GLIBC_TUNABLES", "MALLOC_ARENA_MAX")
SCRUBBED_PREFIXES = ("MIMALLOC_", "TCMALLOC_", "LD_DEBUG")


def launcher():
    return build_directory("pagemap") / "benchmarks" / "cross_thread" / "measure_run"


def preload_of(allocator):
    """The library to preload for an allocator; None for glibc. Every "pagemalloc..." name
    (pagemalloc under settings of its own, as the cross-thread part's pagemalloc-ncpus64) is
    the pagemap variant's drop-in."""
    return dropin("pagemap") if allocator.startswith("pagemalloc") else peer_library(allocator)


def clean_environment():
    return {name: value for name, value in os.environ.items()
            if name not in SCRUBBED and not name.startswith(SCRUBBED_PREFIXES)}


def parse_result_line(text):
    """The launcher's "key value ..." line as a sample."""
    fields = text.split()
    values = {fields[i]: int(fields[i + 1]) for i in range(0, len(fields) - 1, 2)}
    return {
        "status": values["status"],
        "timed_out": bool(values["timed_out"]),
        "wall_s": values["wall_ns"] / 1e9,
        "user_s": values["user_us"] / 1e6,
        "sys_s": values["system_us"] / 1e6,
        "maxrss_mib": values["maxrss_kib"] / 1024,
        "voluntary_switches": values["voluntary_switches"],
        "involuntary_switches": values["involuntary_switches"],
    }


def run_launched(binary, arguments, allocator, scratch, timeout_s, settings=(), checked=True):
    """Runs `binary arguments` under `allocator` (settings: extra "NAME=VALUE" for the
    program); returns (sample, stdout, stderr). checked=False: a program that prints no "all
    checked" line (a google benchmark binary) is ok on exit status 0."""
    result_file = Path(scratch) / "result.txt"
    command = [str(launcher()), str(result_file), str(timeout_s)]
    library = preload_of(allocator)
    if library is not None:
        command += ["-e", f"LD_PRELOAD={library}"]
    for setting in settings:
        command += ["-e", setting]
    command += ["--", str(binary), *arguments]
    finished = subprocess.run(command, env=clean_environment(), capture_output=True, text=True,
                              stdin=subprocess.DEVNULL, timeout=timeout_s + 60)
    stderr = finished.stderr.strip()
    if finished.returncode != 0 or not result_file.exists():
        return ({"ok": False, "failure": f"launcher exit {finished.returncode}: {stderr[-400:]}"},
                finished.stdout, stderr)
    sample = parse_result_line(result_file.read_text())
    result_file.unlink()
    if sample["timed_out"]:
        sample.update(ok=False, failure=f"timed out after {timeout_s} s")
    elif sample["status"] != 0:
        sample.update(ok=False, failure=f"exit status {sample['status']}: {stderr[-400:]}")
    elif checked and "all checked" not in finished.stdout:
        sample.update(ok=False, failure=f"no 'all checked' line in {finished.stdout[-200:]!r}")
    else:
        sample["ok"] = True
    return sample, finished.stdout, stderr
