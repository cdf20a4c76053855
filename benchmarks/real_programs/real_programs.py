#!/usr/bin/python3.11
"""Real programs under each allocator by LD_PRELOAD: wall time, peak RSS, identical output.

    bash tools/install-deps.sh          # the programs and the peer allocators (Debian packages)
    /usr/bin/python3.11 benchmarks/real_programs/real_programs.py \\
        --pagemalloc pagemap=build/release/allocator/libpagemalloc.so \\
        [--pagemalloc rbtree=build/rbtree/allocator/libpagemalloc.so ...] \\
        [--quick] [--rounds 5] [--seed 1] [--programs python,jq] [--allocators glibc,pagemap] \\
        [--out results/real_programs.json]

What it runs (docs/design.md, "The benchmarks", "Real programs"): allocation-heavy programs from
Debian's packages, on inputs generated at the start from --seed (inputs.py; the same bytes for
every allocator), one process per (program, allocator):

  python   /usr/bin/python3.11 with PYTHONMALLOC=malloc: dicts, lists, strings, sorting, JSON
  perl     hashes of words and bigrams, hashes of arrays, regular expressions, sprintf
  lua      lua5.4: tables and strings
  ruby     objects (Struct), strings, hashes, JSON
  sqlite   sqlite3 on a :memory: database: .import of 100k rows, indexes, group by, join,
           a window function, updates and deletes
  gxx      g++ -std=c++20 -O2 -c on a generated file of templates; the output is the object
           file's SHA-256
  jq       a large JSON array through group_by, sort_by, from_entries
  redis    redis-server on 127.0.0.1 (a free port, --save '' --appendonly no): a generated
           workload through redis-cli --pipe, then a fixed redis-benchmark run (-P 16). The
           output is the pipe's summary, DBSIZE, DEBUG DIGEST and INFO keyspace after the
           workload; the time is redis-benchmark's wall time; the RSS is the server's.

The allocators: glibc (no preload), jemalloc, mimalloc and tcmalloc (Debian's libraries, or
--peer NAME=PATH), and each --pagemalloc NAME=PATH (the caller builds the variants). Debian's
redis-server links jemalloc itself, so its glibc row preloads a shim (glibc_malloc_shim.c,
built here with cc) that forwards every entry point, jemalloc's extensions included, to glibc.

How it measures:
  - round r runs every program under every allocator, in an order shuffled from the seed and
    r; --rounds rounds (default 5; --quick: 1 round of smaller inputs, the JavaScript suite at
    1 of its 4 rounds, within about 2 minutes with the binding pass, a smoke test rather than
    a measurement);
  - every process starts through a small launcher (benchmarks/measure_run.c, built here with cc)
    that forks, execs and waits with wait4: wall time from fork to exit (redis: the
    redis-benchmark run), peak RSS as ru_maxrss (which covers the children a process waited
    for, e.g. cc1plus under g++; redis: the server), user and system CPU time. Forked from
    the launcher rather than from this Python process, a program does not inherit Python's
    RSS as its starting peak;
  - before the timed rounds, each (program, allocator) runs once with LD_DEBUG=bindings: in
    every process, malloc must bind to the allocator's library (glibc: libc.so.6; redis's
    glibc row: the shim). Where an allocation symbol binds to a library other than the
    allocator's (e.g. redis-server's mallctl going to its own jemalloc), it is reported;
  - every output (stdout, or the object file for g++) must be the same bytes under every
    allocator in every round.

It prints medians of wall time, peak RSS and CPU time per program and allocator, the ratio of
each pagemalloc build to each other allocator and their geometric means over programs (CPU
time is the steadier measure when other work shares the machine), and writes
JSON (--out) with the machine, the date, package versions, the libraries' digests and every
raw sample. Exit status: 0 when every run succeeded, bound correctly and gave identical
output; 1 otherwise (the reasons are printed last); 2 for bad arguments or missing programs.
It installs nothing: missing programs are installed by tools/install-deps.sh.

Environment: each run starts from this process's environment without LD_PRELOAD, LD_DEBUG*,
MALLOC_CONF, PAGEMALLOC_CONF, MIMALLOC_* and TCMALLOC_*, with LC_ALL=C and TZ=UTC.
"""

import argparse
import dataclasses
import datetime
import glob
import hashlib
import json
import math
import os
import platform
import random
import re
import shlex
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import time

SCRIPT_DIRECTORY = os.path.dirname(os.path.abspath(__file__))
REPOSITORY_ROOT = os.path.dirname(os.path.dirname(SCRIPT_DIRECTORY))
WORKLOADS = os.path.join(SCRIPT_DIRECTORY, "workloads")
sys.path.insert(0, SCRIPT_DIRECTORY)
sys.dont_write_bytecode = True  # no __pycache__ in the source tree
import inputs  # noqa: E402  (the generator beside this script)

LIBRARY_DIRECTORY = "/usr/lib/x86_64-linux-gnu"
PEER_LIBRARIES = {
    "jemalloc": f"{LIBRARY_DIRECTORY}/libjemalloc.so.2",
    "mimalloc": f"{LIBRARY_DIRECTORY}/libmimalloc.so.2",
    "tcmalloc": f"{LIBRARY_DIRECTORY}/libtcmalloc_minimal.so.4",
}
GLIBC = "glibc"

# Debian packages whose versions go into the JSON (the programs, their allocation-relevant
# libraries and the peers).
PACKAGES = ["libc6", "python3.11", "perl", "lua5.4", "ruby3.1", "libruby3.1", "sqlite3",
            "libsqlite3-0", "g++-12", "cpp-12", "binutils", "jq", "libjq1", "redis-server",
            "redis-tools", "libjemalloc2", "libmimalloc2.0", "libtcmalloc-minimal4",
            "libgoogle-perftools4", "duktape", "mujs"]

# Symbols whose binding targets are recorded in the LD_DEBUG=bindings check.
ALLOCATION_SYMBOLS = [
    "malloc", "free", "calloc", "realloc", "reallocarray", "posix_memalign", "aligned_alloc",
    "memalign", "valloc", "pvalloc", "malloc_usable_size", "mallctl", "mallctlnametomib",
    "mallctlbymib", "nallocx", "mallocx", "rallocx", "xallocx", "sallocx", "dallocx",
    "sdallocx", "malloc_stats_print", "_Znwm", "_Znam", "_ZdlPv", "_ZdaPv", "_ZdlPvm",
    "_ZnwmSt11align_val_t", "_ZdlPvSt11align_val_t",
]

# Input sizes: records per program (gxx: generated template units; redis: records loaded and
# redis-benchmark's -n; js_rounds: the JavaScript suite's ROUNDS, the script's own 4 when not
# given).
FULL_SIZES = {"python": 40_000, "perl": 50_000, "lua": 40_000, "ruby": 30_000,
              "sqlite": 100_000, "gxx": 4, "jq": 20_000, "redis": 30_000,
              "redis_benchmark_requests": 100_000}
QUICK_SIZES = {"python": 5_000, "perl": 8_000, "lua": 6_000, "ruby": 4_000,
               "sqlite": 15_000, "gxx": 1, "jq": 3_000, "redis": 5_000,
               "redis_benchmark_requests": 10_000, "js_rounds": 1}
REDIS_BENCHMARK_TESTS = "set,get,incr,lpush,rpush,lpop,rpop,sadd,hset,spop,zadd,zpopmin"


class SetupError(Exception):
    """A problem with the arguments or the machine: exit status 2."""


# ---------------------------------------------------------------------------------------------
# Allocators


@dataclasses.dataclass
class Allocator:
    name: str
    kind: str            # "glibc", "peer" or "pagemalloc"
    library: str | None  # the preloaded library; None for glibc

    def preload_for(self, program, shim):
        """The library to preload for `program` (redis's glibc row preloads the shim)."""
        if self.library is None:
            return shim if program.links_jemalloc else None
        return self.library

    def expected_malloc_library(self, program, shim):
        preload = self.preload_for(program, shim)
        return os.path.basename(preload) if preload else "libc.so.6"


def parse_named_path(text, option, value_kind="PATH"):
    name, separator, path = text.partition("=")
    if not separator or not name or not path:
        raise SetupError(f"{option} wants NAME={value_kind}, got {text!r}")
    if not re.fullmatch(r"[A-Za-z0-9_.+-]+", name):
        raise SetupError(f"{option}: the name {name!r} should be letters, digits, _.+-")
    return name, path


def make_allocators(args):
    peers = dict(PEER_LIBRARIES)
    for text in args.peer:
        name, path = parse_named_path(text, "--peer")
        peers[name] = path
    allocators = [Allocator(GLIBC, "glibc", None)]
    allocators += [Allocator(name, "peer", path) for name, path in peers.items()]
    for text in args.pagemalloc:
        name, path = parse_named_path(text, "--pagemalloc")
        allocators.append(Allocator(name, "pagemalloc", path))
    names = [a.name for a in allocators]
    if len(set(names)) != len(names):
        raise SetupError(f"two allocators share a name: {names}")
    if args.allocators:
        wanted = args.allocators.split(",")
        unknown = [name for name in wanted if name not in names]
        if unknown:
            raise SetupError(f"--allocators: unknown {unknown}; known: {names}")
        allocators = [a for a in allocators if a.name in wanted]
    for allocator in allocators:
        if allocator.library is not None:
            if not os.path.isfile(allocator.library):
                hint = ("bash tools/install-deps.sh" if allocator.kind == "peer"
                        else "build it first")
                raise SetupError(f"{allocator.name}: no such library {allocator.library} ({hint})")
            allocator.library = os.path.realpath(allocator.library)
    return allocators


def exported_symbols(library):
    output = subprocess.run(["nm", "-D", "--defined-only", library], capture_output=True,
                            text=True, check=True).stdout
    return {line.split()[-1].split("@")[0] for line in output.splitlines() if line.strip()}


def sha256_of_file(path):
    digest = hashlib.sha256()
    with open(path, "rb") as source:
        for block in iter(lambda: source.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def cmake_build_facts(library):
    """For a library inside a CMake build tree: its options and the source tree's commit."""
    directory = os.path.dirname(library)
    for _ in range(4):
        cache = os.path.join(directory, "CMakeCache.txt")
        if os.path.isfile(cache):
            facts = {"build_directory": directory}
            wanted = ("CMAKE_BUILD_TYPE", "CMAKE_HOME_DIRECTORY", "PAGEMALLOC_PRESET",
                      "PAGEMALLOC_RUNS_RESOLVED",
                      "PAGEMALLOC_COUNTERS", "PAGEMALLOC_CHECKS", "PAGEMALLOC_SANITIZE")
            with open(cache, encoding="utf-8", errors="replace") as source:
                for line in source:
                    key, _, value = line.rstrip("\n").partition("=")
                    key = key.split(":")[0]
                    if key in wanted:
                        facts[key] = value
            home = facts.get("CMAKE_HOME_DIRECTORY")
            if home:
                head = run_text(["git", "-C", home, "rev-parse", "HEAD"])
                dirty = run_text(["git", "-C", home, "status", "--porcelain",
                                  "--untracked-files=no"])
                facts["source_commit"] = head.strip() if head else None
                facts["source_modified_files"] = len(dirty.splitlines()) if dirty else 0
            return facts
        directory = os.path.dirname(directory)
    return {}


def run_text(command):
    try:
        return subprocess.run(command, capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return None


# ---------------------------------------------------------------------------------------------
# Running one process


@dataclasses.dataclass
class ProcessResult:
    status: int          # exit status, or -signal
    wall_s: float
    maxrss_kib: int
    user_s: float
    system_s: float
    timed_out: bool


def describe_status(status):
    if status >= 0:
        return f"exit status {status}"
    try:
        return f"killed by {signal.Signals(-status).name}"
    except ValueError:
        return f"killed by signal {-status}"


# Set by main: the launcher (benchmarks/measure_run.c) that every measured process starts
# through.
measure_run_path = None
# The launcher's own time limit: a backstop behind wait_process's, which kills the group.
LAUNCHER_TIMEOUT_S = 3600
# Variables that must reach the measured program and never the launcher.
CHILD_ONLY_VARIABLES = ("LD_PRELOAD", "LD_DEBUG", "LD_DEBUG_OUTPUT")


@dataclasses.dataclass
class StartedProcess:
    popen: subprocess.Popen
    result_path: str
    started: float


def start_process(command, env, cwd, stdin_path, stdout_path, stderr_path):
    """Starts `command` through the launcher, in a new session (so that a timeout can kill the
    whole group); LD_PRELOAD and LD_DEBUG* apply to the command only."""
    result_path = stdout_path + ".measure"
    settings = []
    for key in CHILD_ONLY_VARIABLES:
        if key in env:
            settings += ["-e", f"{key}={env[key]}"]
    launcher_env = {k: v for k, v in env.items() if k not in CHILD_ONLY_VARIABLES}
    stdin = open(stdin_path, "rb") if stdin_path else subprocess.DEVNULL
    with open(stdout_path, "wb") as stdout, open(stderr_path, "wb") as stderr:
        try:
            started = time.perf_counter()
            popen = subprocess.Popen([measure_run_path, result_path, str(LAUNCHER_TIMEOUT_S),
                                      *settings, "--", *command], env=launcher_env, cwd=cwd,
                                     stdin=stdin, stdout=stdout, stderr=stderr,
                                     start_new_session=True)
        finally:
            if stdin_path:
                stdin.close()
    return StartedProcess(popen, result_path, started)


def kill_group(process):
    try:
        os.killpg(process.popen.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def wait_process(process, timeout_s):
    """Waits for the launcher and reads what it measured; after timeout_s seconds kills the
    whole process group."""
    timed_out = False
    try:
        process.popen.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        timed_out = True
        kill_group(process)
        process.popen.wait()
    wall = time.perf_counter() - process.started
    try:
        with open(process.result_path, encoding="ascii") as source:
            fields = source.read().split()
        values = dict(zip(fields[0::2], (int(v) for v in fields[1::2])))
        return ProcessResult(values["status"], values["wall_ns"] / 1e9, values["maxrss_kib"],
                             values["user_us"] / 1e6, values["system_us"] / 1e6, timed_out)
    except (OSError, ValueError, KeyError):
        # The launcher itself was killed (a timeout) or failed: what Python saw.
        status = process.popen.returncode
        return ProcessResult(status if status != 0 else 125, wall, 0, 0.0, 0.0, timed_out)


def run_process(command, env, cwd, stdout_path, stderr_path, timeout_s, stdin_path=None):
    return wait_process(start_process(command, env, cwd, stdin_path, stdout_path, stderr_path),
                        timeout_s)


def tail_of(path, lines=15):
    try:
        with open(path, "rb") as source:
            text = source.read()[-8192:].decode(errors="replace")
    except OSError:
        return ""
    return "\n".join(text.splitlines()[-lines:])


# ---------------------------------------------------------------------------------------------
# Programs


@dataclasses.dataclass
class Sample:
    """One timed run of one program under one allocator."""
    ok: bool
    wall_s: float
    maxrss_kib: int
    user_s: float
    system_s: float
    output: bytes
    failure: str | None = None
    extra: dict = dataclasses.field(default_factory=dict)


class Program:
    """A program run as one process: `command` on generated inputs; its stdout is the output."""

    executable = None          # checked before anything runs
    links_jemalloc = False

    def __init__(self, name, inputs_directory, sizes):
        self.name = name
        self.inputs = inputs_directory
        self.sizes = sizes

    def prepare(self, work):
        """Generates the inputs; returns nothing. Called once before any run."""

    def command(self, run_directory):
        raise NotImplementedError

    def environment(self):
        return {}

    def stdin_path(self):
        return None

    def output_of(self, run_directory, stdout):
        return stdout

    def run(self, env, run_directory, timeout_s):
        stdout_path = os.path.join(run_directory, "stdout")
        stderr_path = os.path.join(run_directory, "stderr")
        result = run_process(self.command(run_directory), {**env, **self.environment()},
                             run_directory, stdout_path, stderr_path, timeout_s,
                             self.stdin_path())
        with open(stdout_path, "rb") as source:
            stdout = source.read()
        failure = None
        if result.timed_out:
            failure = f"timed out after {timeout_s} s"
        elif result.status != 0:
            failure = describe_status(result.status)
        if failure:
            failure += f"; stderr:\n{tail_of(stderr_path)}"
            output = stdout
        else:
            output = self.output_of(run_directory, stdout)
        return Sample(failure is None, result.wall_s, result.maxrss_kib, result.user_s,
                      result.system_s, output, failure)

    def describe(self, run_directory="RUN"):
        command = shlex.join(self.command(run_directory))
        stdin = self.stdin_path()
        return command + (f" < {stdin}" if stdin else "")

    def reproduce(self, preload, run_directory="RUN"):
        """The command line that reproduces one run, with its environment."""
        settings = {**self.environment(), **({"LD_PRELOAD": preload} if preload else {})}
        prefix = " ".join(f"{key}={shlex.quote(value)}" for key, value in settings.items())
        return (prefix + " " if prefix else "") + self.describe(run_directory)


class PythonProgram(Program):
    executable = "/usr/bin/python3.11"

    def prepare(self, work):
        self.records = self.inputs.records_json(self.sizes["python"])

    def command(self, run_directory):
        return [self.executable, os.path.join(WORKLOADS, "python_records.py"), self.records]

    def environment(self):
        # PYTHONMALLOC=malloc: every object through malloc, not pymalloc. A fixed hash seed:
        # the same set and dict layouts, so the same allocations, under every allocator.
        return {"PYTHONMALLOC": "malloc", "PYTHONHASHSEED": "0"}


class PerlProgram(Program):
    executable = "/usr/bin/perl"

    def prepare(self, work):
        self.records = self.inputs.records_tsv(self.sizes["perl"])

    def command(self, run_directory):
        return [self.executable, os.path.join(WORKLOADS, "perl_records.pl"), self.records]

    def environment(self):
        return {"PERL_HASH_SEED": "0", "PERL_PERTURB_KEYS": "0"}


class LuaProgram(Program):
    executable = "/usr/bin/lua5.4"

    def prepare(self, work):
        self.records = self.inputs.records_tsv(self.sizes["lua"])

    def command(self, run_directory):
        return [self.executable, os.path.join(WORKLOADS, "lua_records.lua"), self.records]


class RubyProgram(Program):
    executable = "/usr/bin/ruby"

    def prepare(self, work):
        self.records = self.inputs.records_json(self.sizes["ruby"])

    def command(self, run_directory):
        return [self.executable, "--disable-gems", os.path.join(WORKLOADS, "ruby_records.rb"),
                self.records]


class SqliteProgram(Program):
    executable = "/usr/bin/sqlite3"

    def prepare(self, work):
        n = self.sizes["sqlite"]
        with open(os.path.join(WORKLOADS, "sqlite_records.sql"), encoding="ascii") as source:
            script = source.read()
        script = script.replace("{records_tsv}", self.inputs.records_tsv(n))
        script = script.replace("{tags_tsv}", self.inputs.tags_tsv(n))
        self.script = os.path.join(work, f"sqlite_records_{n}.sql")
        with open(self.script, "w", encoding="ascii") as out:
            out.write(script)

    def command(self, run_directory):
        return [self.executable, "-batch", "-bail", ":memory:"]

    def stdin_path(self):
        return self.script


class GxxProgram(Program):
    executable = "/usr/bin/g++"

    def prepare(self, work):
        self.source = self.inputs.templates_cpp(self.sizes["gxx"])

    def command(self, run_directory):
        return [self.executable, "-std=c++20", "-O2", "-frandom-seed=templates", "-c",
                self.source, "-o", os.path.join(run_directory, "templates.o")]

    def output_of(self, run_directory, stdout):
        object_path = os.path.join(run_directory, "templates.o")
        return stdout + (f"templates.o {os.path.getsize(object_path)} bytes, sha256 "
                         f"{sha256_of_file(object_path)}\n").encode()


class JqProgram(Program):
    executable = "/usr/bin/jq"

    def prepare(self, work):
        self.records = self.inputs.records_json(self.sizes["jq"])

    def command(self, run_directory):
        return [self.executable, "-c", "-f", os.path.join(WORKLOADS, "jq_records.jq"),
                self.records]


def free_local_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class RedisProgram(Program):
    """redis-server under the allocator; redis-cli and redis-benchmark (clients) without."""

    executable = "/usr/bin/redis-server"
    links_jemalloc = True
    client = "/usr/bin/redis-cli"
    benchmark = "/usr/bin/redis-benchmark"

    def prepare(self, work):
        self.commands = self.inputs.redis_commands(self.sizes["redis"])
        first = self.inputs.source.records(1)[0]
        self.probe_group = first["group"]
        self.probe_record = f"record:{self.sizes['redis'] - 1}"

    def command(self, run_directory, port=0):
        return [self.executable, "--port", str(port), "--bind", "127.0.0.1",
                "--protected-mode", "yes", "--save", "", "--appendonly", "no",
                "--enable-debug-command", "local", "--daemonize", "no",
                "--dir", run_directory, "--logfile", ""]

    def benchmark_command(self, port):
        return [self.benchmark, "-h", "127.0.0.1", "-p", str(port), "-q",
                "-n", str(self.sizes["redis_benchmark_requests"]), "-P", "16", "-c", "50",
                "-r", "100000", "-d", "64", "--dbnum", "1", "-t", REDIS_BENCHMARK_TESTS]

    def describe(self, run_directory="RUN"):
        return (shlex.join(self.command(run_directory, port="PORT"))
                + f"; redis-cli -p PORT --pipe < {self.commands}; "
                + shlex.join(self.benchmark_command("PORT")))

    def _cli(self, port, *arguments, stdin_path=None, timeout_s=120, check=True):
        stdin = open(stdin_path, "rb") if stdin_path else subprocess.DEVNULL
        try:
            completed = subprocess.run([self.client, "-h", "127.0.0.1", "-p", str(port),
                                        *arguments], stdin=stdin, capture_output=True,
                                       env=clean_environment(), timeout=timeout_s)
        finally:
            if stdin_path:
                stdin.close()
        if check and completed.returncode != 0:
            raise RuntimeError(f"redis-cli {' '.join(arguments)}: exit status "
                               f"{completed.returncode}: {completed.stderr.decode(errors='replace')}")
        return completed.stdout

    def run(self, env, run_directory, timeout_s):
        port = free_local_port()
        stdout_path = os.path.join(run_directory, "server.stdout")
        stderr_path = os.path.join(run_directory, "server.stderr")
        server = start_process(self.command(run_directory, port), env, run_directory, None,
                               stdout_path, stderr_path)
        output = b""
        failure = None
        extra = {}
        wall = 0.0
        try:
            deadline = time.monotonic() + 30
            while True:
                if server.popen.poll() is not None:
                    raise RuntimeError("redis-server exited during start-up")
                try:
                    if self._cli(port, "PING", timeout_s=5).strip() == b"PONG":
                        break
                except (RuntimeError, subprocess.TimeoutExpired):
                    pass
                if time.monotonic() > deadline:
                    raise RuntimeError("redis-server did not answer PING within 30 s")
                time.sleep(0.05)
            load_started = time.perf_counter()
            pipe_summary = self._cli(port, "--pipe", stdin_path=self.commands, timeout_s=timeout_s)
            extra["load_s"] = time.perf_counter() - load_started
            # The compared output: the pipe's summary line and the data set it left behind.
            lines = [line for line in pipe_summary.splitlines() if line.startswith(b"errors:")]
            output += b"pipe " + b" ".join(lines) + b"\n"
            output += b"dbsize " + self._cli(port, "DBSIZE")
            output += b"digest " + self._cli(port, "DEBUG", "DIGEST")
            keyspace = self._cli(port, "INFO", "keyspace").replace(b"\r", b"")
            output += b"".join(line + b"\n" for line in keyspace.splitlines()
                               if line.startswith(b"db0:"))
            output += (self.probe_record.encode() + b" " + self._cli(
                port, "HGETALL", self.probe_record).replace(b"\n", b" ") + b"\n")
            output += b"scores " + self._cli(port, "ZRANGE", f"scores:{self.probe_group}", "0", "4",
                                             "WITHSCORES").replace(b"\n", b" ") + b"\n"
            output += b"group " + self._cli(port, "LRANGE", f"group:{self.probe_group}", "0", "9"
                                            ).replace(b"\n", b" ") + b"\n"
            output += b"tags:5 " + self._cli(port, "SCARD", "tags:5")
            bench_stdout = os.path.join(run_directory, "benchmark.stdout")
            bench_stderr = os.path.join(run_directory, "benchmark.stderr")
            bench = run_process(self.benchmark_command(port), clean_environment(),
                                run_directory, bench_stdout, bench_stderr, timeout_s)
            wall = bench.wall_s
            if bench.status != 0 or bench.timed_out:
                raise RuntimeError(f"redis-benchmark: {describe_status(bench.status)}"
                                   f"{' (timed out)' if bench.timed_out else ''}:\n"
                                   f"{tail_of(bench_stderr)}")
            with open(bench_stdout, "rb") as source:
                extra["benchmark"] = re.sub(rb".*\r", b"", source.read()).decode(errors="replace")
            if server.popen.poll() is not None:
                raise RuntimeError("redis-server exited during redis-benchmark")
            memory = self._cli(port, "INFO", "memory").decode(errors="replace")
            extra["info_memory"] = {
                key: value for key, _, value in (line.strip().partition(":")
                                                 for line in memory.splitlines())
                if key in ("used_memory", "used_memory_rss", "used_memory_peak",
                           "allocator_allocated", "allocator_active", "allocator_resident",
                           "mem_allocator", "mem_fragmentation_ratio")}
            # The server closes the connection as it exits: redis-cli may report an error.
            self._cli(port, "SHUTDOWN", "NOSAVE", timeout_s=30, check=False)
        except (RuntimeError, subprocess.TimeoutExpired) as error:
            failure = str(error)
            if server.popen.poll() is None:
                try:
                    self._cli(port, "SHUTDOWN", "NOSAVE", timeout_s=30, check=False)
                except subprocess.TimeoutExpired:
                    kill_group(server)
        result = wait_process(server, 60)
        if failure is None and result.status != 0:
            failure = f"redis-server: {describe_status(result.status)}"
        if failure is not None:
            failure += f"\nserver stderr:\n{tail_of(stderr_path)}\nserver log:\n{tail_of(stdout_path)}"
            if result.status < 0:
                failure = f"redis-server {describe_status(result.status)}; " + failure
        return Sample(failure is None, wall, result.maxrss_kib, result.user_s, result.system_s,
                      output, failure, extra)


class JavaScriptProgram(Program):
    """A JavaScript engine that allocates through malloc, on a SunSpider-like script
    (workloads/js_suite.js): the kind of workload the 2008 tree-overhead claim was measured on.
    The script generates its own data; it takes no input file. With sizes["js_rounds"] (the
    quick sizes), a copy of it with that ROUNDS runs instead, from the work directory."""

    script = os.path.join(WORKLOADS, "js_suite.js")

    def prepare(self, work):
        rounds = self.sizes.get("js_rounds")
        if rounds is None:
            return
        with open(self.script, encoding="utf-8") as source:
            text, count = re.subn(r"^var ROUNDS = \d+;", f"var ROUNDS = {rounds};", source.read(),
                                  count=1, flags=re.MULTILINE)
        if count != 1:
            raise SetupError("workloads/js_suite.js: no 'var ROUNDS = N;' line to scale")
        self.script = os.path.join(work, f"js_suite.rounds{rounds}.js")
        with open(self.script, "w", encoding="utf-8") as out:
            out.write(text)

    def command(self, run_directory):
        return [self.executable, self.script]


class DuktapeProgram(JavaScriptProgram):
    executable = "/usr/bin/duk"


class MujsProgram(JavaScriptProgram):
    executable = "/usr/bin/mujs"


class GcArenaChurnProgram(Program):
    """A garbage collector's 4 KiB arenas from posix_memalign(4096, 4096) in waves beside
    small objects (benchmarks/memory/gc_arena_churn.c, SpiderMonkey 1.8's pattern), as built
    in the release tree."""
    executable = os.path.join(REPOSITORY_ROOT, "build", "release", "benchmarks", "memory",
                              "gc_arena_churn")

    def command(self, run_directory):
        return [self.executable]


PROGRAM_CLASSES = {"python": PythonProgram, "perl": PerlProgram, "lua": LuaProgram,
                   "ruby": RubyProgram, "sqlite": SqliteProgram, "gxx": GxxProgram,
                   "jq": JqProgram, "redis": RedisProgram,
                   "duk": DuktapeProgram, "mujs": MujsProgram, "gc-churn": GcArenaChurnProgram}
# The programs run when --programs names none: the eight of the allocator comparison. The
# JavaScript engines and gc-churn are for the tree-overhead study's 2008 designs.
DEFAULT_PROGRAMS = ["python", "perl", "lua", "ruby", "sqlite", "gxx", "jq", "redis"]
REQUIRED_TOOLS = {"redis": [RedisProgram.client, RedisProgram.benchmark]}


# ---------------------------------------------------------------------------------------------
# The binding check


BINDING_LINE = re.compile(r"binding file (\S+) \[\d+\] to (\S+) \[\d+\]: \S+ symbol `([^']+)'")


SHARED_LIBRARY_NAME = re.compile(r"\.so(\.|$)")


def read_bindings(paths, allocator_library):
    """{symbol: {library basename, ...}} over every LD_DEBUG=bindings file, and for malloc the
    set per process (file). Three kinds of binding are left out: those made by the allocator's
    own library (its dlsym lookups of the next definition); those of a library to itself (what
    dlsym on a library's handle shows); and those that go to the program's executable (a
    program that takes a function's address gets a canonical PLT entry, and the libraries bind
    to that; the executable's own reference shows where the call really goes)."""
    targets = {}
    malloc_per_process = []
    for path in paths:
        malloc_here = set()
        with open(path, encoding="utf-8", errors="replace") as source:
            for line in source:
                match = BINDING_LINE.search(line)
                if not match:
                    continue
                symbol = match.group(3)
                if symbol in ALLOCATION_SYMBOLS:
                    library = os.path.basename(match.group(2))
                    source_file = os.path.basename(match.group(1))
                    if (source_file in (allocator_library, library)
                            or not SHARED_LIBRARY_NAME.search(library)):
                        continue
                    targets.setdefault(symbol, set()).add(library)
                    if symbol == "malloc":
                        malloc_here.add(library)
        malloc_per_process.append((os.path.basename(path), malloc_here))
    return targets, malloc_per_process


def check_bindings(program, allocator, shim, exports, paths):
    """Returns (problems, notes): problems fail the run; notes say where allocation symbols
    the allocator does not export went."""
    expected = allocator.expected_malloc_library(program, shim)
    preload = allocator.preload_for(program, shim)
    targets, malloc_per_process = read_bindings(paths, os.path.basename(preload or "libc.so.6"))
    problems, notes = [], []
    if not paths:
        problems.append("LD_DEBUG=bindings wrote no file")
    for process, libraries in malloc_per_process:
        if libraries and libraries != {expected}:
            problems.append(f"malloc binds to {sorted(libraries)} in {process}, not {expected}")
    if "malloc" not in targets:
        problems.append("no binding of malloc seen")
    if preload:
        own = exports[preload]
        for symbol, libraries in sorted(targets.items()):
            elsewhere = sorted(libraries - {expected})
            if not elsewhere:
                continue
            if symbol in own:
                problems.append(f"{symbol} binds to {elsewhere}, though {expected} exports it")
            else:
                notes.append(f"{symbol} -> {', '.join(elsewhere)} (not exported by {expected})")
    return problems, notes, {symbol: sorted(libraries) for symbol, libraries in targets.items()}


# ---------------------------------------------------------------------------------------------
# Statistics and the report


def first_difference(reference, other):
    """Where `other` first differs from `reference`, line by line, in one short string."""
    reference_lines = reference.decode(errors="replace").splitlines()
    other_lines = other.decode(errors="replace").splitlines()
    for number, (a, b) in enumerate(zip(reference_lines, other_lines), start=1):
        if a != b:
            return f"line {number}: {a[:120]!r} (most runs) != {b[:120]!r}"
    return (f"the same first {min(len(reference_lines), len(other_lines))} lines; "
            f"{len(reference_lines)} lines (most runs) != {len(other_lines)}")


def geometric_mean(values):
    values = [v for v in values if v and v > 0]
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else None


def summarize(samples, programs, allocators):
    medians = {}
    for program in programs:
        for allocator in allocators:
            runs = [s for s in samples if s["program"] == program and
                    s["allocator"] == allocator and s["ok"]]
            if runs:
                medians.setdefault(program, {})[allocator] = {
                    "runs": len(runs),
                    "wall_s": statistics.median(s["wall_s"] for s in runs),
                    "maxrss_mib": statistics.median(s["maxrss_kib"] for s in runs) / 1024,
                    "cpu_s": statistics.median(s["user_s"] + s["system_s"] for s in runs),
                    "wall_s_min": min(s["wall_s"] for s in runs),
                    "wall_s_max": max(s["wall_s"] for s in runs),
                }
    return medians


def ratios_of(medians, programs, subject, others):
    """For `subject` (a pagemalloc build): median(subject) / median(other) per program and the
    geometric means over the programs that have both."""
    result = {}
    for other in others:
        per_program = {}
        for program in programs:
            pair = medians.get(program, {})
            if subject in pair and other in pair:
                per_program[program] = {
                    metric: pair[subject][metric] / pair[other][metric]
                    for metric in ("wall_s", "maxrss_mib", "cpu_s") if pair[other][metric] > 0}
        result[other] = {
            "programs": per_program,
            "geomean": {metric: geometric_mean([r.get(metric) for r in per_program.values()])
                        for metric in ("wall_s", "maxrss_mib", "cpu_s")},
        }
    return result


def format_table(header, rows, right_from=1):
    widths = [max(len(str(row[i])) for row in [header] + rows) for i in range(len(header))]

    def line(row):
        cells = []
        for i, cell in enumerate(row):
            cell = str(cell)
            cells.append(cell.rjust(widths[i]) if i >= right_from else cell.ljust(widths[i]))
        return "  ".join(cells).rstrip()

    return "\n".join([line(header), line(["-" * w for w in widths])] + [line(r) for r in rows])


def report_text(medians, ratios, programs, allocator_names, rounds):
    parts = []
    for metric, title, form in (("wall_s", f"wall time, median of {rounds} (s)", "{:.3f}"),
                                ("maxrss_mib", f"peak RSS, median of {rounds} (MiB)", "{:.1f}"),
                                ("cpu_s", f"CPU time user+system, median of {rounds} (s)",
                                 "{:.3f}")):
        rows = []
        for program in programs:
            row = [program]
            for name in allocator_names:
                cell = medians.get(program, {}).get(name)
                row.append(form.format(cell[metric]) if cell else "FAIL")
            rows.append(row)
        parts.append(title + "\n" + format_table(["program"] + allocator_names, rows))
    for subject, by_other in ratios.items():
        others = list(by_other)
        for metric, title in (("wall_s", "wall time"), ("maxrss_mib", "peak RSS"),
                              ("cpu_s", "CPU time")):
            rows = []
            for program in programs:
                row = [program]
                for other in others:
                    value = by_other[other]["programs"].get(program, {}).get(metric)
                    row.append(f"{value:.3f}" if value else "-")
                rows.append(row)
            geomeans = [by_other[o]["geomean"][metric] for o in others]
            rows.append(["geomean"] + [f"{g:.3f}" if g else "-" for g in geomeans])
            parts.append(f"{subject} / other, {title} (below 1: {subject} is better)\n"
                         + format_table(["program"] + [f"/{o}" for o in others], rows))
    return "\n\n".join(parts)


# ---------------------------------------------------------------------------------------------
# The machine


def machine_facts():
    facts = {"uname": " ".join(platform.uname()), "nproc": len(os.sched_getaffinity(0)),
             "cpu_count": os.cpu_count(), "python": sys.version.split()[0]}
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as source:
            models = [line.split(":", 1)[1].strip() for line in source
                      if line.startswith("model name")]
        facts["cpu_model"] = models[0] if models else None
    except OSError:
        facts["cpu_model"] = None
    try:
        with open("/proc/meminfo", encoding="utf-8") as source:
            facts["mem_total"] = source.readline().split(":", 1)[1].strip()
    except OSError:
        pass
    try:
        with open("/etc/debian_version", encoding="utf-8") as source:
            facts["debian_version"] = source.read().strip()
    except OSError:
        pass
    facts["loadavg_at_start"] = os.getloadavg()
    return facts


def package_versions():
    output = run_text(["dpkg-query", "-W", "-f", "${Package}\t${Version}\t${db:Status-Abbrev}\n",
                       *PACKAGES]) or ""
    versions = {}
    for line in output.splitlines():
        name, version, status = (line.split("\t") + ["", ""])[:3]
        if status.startswith("ii"):
            versions[name] = version
    return versions


# ---------------------------------------------------------------------------------------------
# Main


def parse_arguments(argv):
    parser = argparse.ArgumentParser(
        description="Real programs under each allocator by LD_PRELOAD (see the top of this file).",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pagemalloc", action="append", default=[], metavar="NAME=PATH",
                        help="a pagemalloc drop-in build to measure (repeatable)")
    parser.add_argument("--peer", action="append", default=[], metavar="NAME=PATH",
                        help="add or replace a peer allocator library (default: jemalloc, "
                             "mimalloc, tcmalloc from Debian)")
    parser.add_argument("--allocators", help="comma-separated subset of allocator names")
    parser.add_argument("--programs", help="comma-separated programs (default: all "
                                           "but duk, mujs and gc-churn) of: "
                                           + ",".join(PROGRAM_CLASSES))
    parser.add_argument("--rounds", type=int, help="rounds (default 5; --quick: 1)")
    parser.add_argument("--quick", action="store_true",
                        help="smaller inputs and 1 round: about 2 minutes in all")
    parser.add_argument("--seed", type=int, default=1, help="inputs and run order (default 1)")
    parser.add_argument("--out", default=os.path.join(REPOSITORY_ROOT, "results",
                                                      "real_programs.json"),
                        help="the JSON results (default results/real_programs.json)")
    parser.add_argument("--work-dir", help="inputs and run directories (default: a directory "
                                           "under /tmp named after the seed and generator)")
    parser.add_argument("--timeout", type=float, default=600, help="seconds per run")
    parser.add_argument("--pagemalloc-env", action="append", default=[], metavar="NAME=VALUE",
                        help="an environment variable for the pagemalloc builds' runs only "
                             "(repeatable); {program} and {allocator} in VALUE become their "
                             "names, e.g. PAGEMALLOC_CONF=stats_print:json,stats_file:"
                             "/tmp/s/{allocator}.{program}.%%p.json")
    parser.add_argument("--skip-binding-check", action="store_true",
                        help="do not run the LD_DEBUG=bindings pass")
    args = parser.parse_args(argv)
    if args.rounds is None:
        args.rounds = 1 if args.quick else 5
    if args.rounds < 1:
        parser.error("--rounds must be at least 1")
    return args


def clean_environment():
    env = {key: value for key, value in os.environ.items()
           if not (key in ("LD_PRELOAD", "MALLOC_CONF", "PAGEMALLOC_CONF", "PYTHONMALLOC")
                   or key.startswith(("LD_DEBUG", "MIMALLOC_", "TCMALLOC_", "JE_MALLOC")))}
    env.update({"LC_ALL": "C", "TZ": "UTC"})
    return env


def compile_helper(work, source_name, output_name, flags, libraries=()):
    """Builds one of the C helpers beside this script into the work directory."""
    compiler = shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        raise SetupError("no C compiler (cc): bash tools/install-deps.sh")
    output = os.path.join(work, output_name)
    subprocess.run([compiler, "-O2", "-Wall", *flags, "-o", output,
                    os.path.join(SCRIPT_DIRECTORY, source_name), *libraries], check=True)
    return output


def main(argv=None):
    args = parse_arguments(argv)
    began = time.monotonic()
    machine = machine_facts()
    try:
        allocators = make_allocators(args)
        names = list(DEFAULT_PROGRAMS)
        if args.programs:
            names = args.programs.split(",")
            unknown = [n for n in names if n not in PROGRAM_CLASSES]
            if unknown:
                raise SetupError(f"--programs: unknown {unknown}; known: {list(PROGRAM_CLASSES)}")
        missing = [path for name in names
                   for path in [PROGRAM_CLASSES[name].executable] + REQUIRED_TOOLS.get(name, [])
                   if not os.access(path, os.X_OK)]
        if missing:
            raise SetupError(f"missing programs {missing}: run bash tools/install-deps.sh")
        pagemalloc_env = dict(parse_named_path(text, "--pagemalloc-env", "VALUE")
                              for text in args.pagemalloc_env)
    except SetupError as error:
        print(f"real_programs: {error}", file=sys.stderr)
        return 2

    # Taken before the runs: the libraries and the source tree as they were measured.
    allocator_facts = {
        a.name: {"kind": a.kind, "library": a.library,
                 "sha256": sha256_of_file(a.library) if a.library else None,
                 **(cmake_build_facts(a.library) if a.kind == "pagemalloc" else {})}
        for a in allocators}
    sizes = QUICK_SIZES if args.quick else FULL_SIZES
    generator_digest = sha256_of_file(os.path.join(SCRIPT_DIRECTORY, "inputs.py"))[:12]
    work = args.work_dir or os.path.join("/tmp", "pagemalloc-real-programs",
                                         f"seed{args.seed}-{generator_digest}")
    runs_directory = os.path.join(work, "runs")
    shutil.rmtree(runs_directory, ignore_errors=True)
    os.makedirs(runs_directory)
    print(f"real_programs: work directory {work}; generating inputs (seed {args.seed}, "
          f"{'quick' if args.quick else 'full'} sizes)", flush=True)
    input_directory = inputs.InputDirectory(os.path.join(work, "inputs"), args.seed)
    programs = {name: PROGRAM_CLASSES[name](name, input_directory, sizes) for name in names}
    for program in programs.values():
        program.prepare(work)
    global measure_run_path
    measure_run_path = compile_helper(work, "../measure_run.c", "measure_run", [])
    shim = (compile_helper(work, "glibc_malloc_shim.c", "libglibc_malloc_shim.so",
                           ["-shared", "-fPIC"], ["-ldl"])
            if any(p.links_jemalloc for p in programs.values()) else None)
    exports = {}
    for library in {a.library for a in allocators if a.library} | ({shim} if shim else set()):
        exports[library] = exported_symbols(library)
    env = clean_environment()

    def environment_for(program, allocator):
        preload = allocator.preload_for(program, shim)
        run_env = {**env, "LD_PRELOAD": preload} if preload else dict(env)
        if allocator.kind == "pagemalloc":
            run_env.update({name: value.replace("{program}", program.name)
                            .replace("{allocator}", allocator.name)
                            for name, value in pagemalloc_env.items()})
        return run_env

    failures, binding_problems, binding_notes, bindings = [], [], {}, {}
    samples = []

    def fresh_directory(*parts):
        directory = os.path.join(runs_directory, *parts)
        os.makedirs(directory)
        return directory

    # The LD_DEBUG=bindings pass: once per (program, allocator), untimed (it also warms the
    # page cache); its outputs are compared with the timed ones too.
    binding_outputs = []
    if not args.skip_binding_check:
        print("real_programs: checking where malloc binds (LD_DEBUG=bindings)", flush=True)
        for program in programs.values():
            for allocator in allocators:
                directory = fresh_directory("bindings", f"{program.name}-{allocator.name}")
                ld_prefix = os.path.join(directory, "ld")
                run_env = {**environment_for(program, allocator), "LD_DEBUG": "bindings",
                           "LD_DEBUG_OUTPUT": ld_prefix}
                sample = program.run(run_env, directory, args.timeout)
                if not sample.ok:
                    failures.append({"program": program.name, "allocator": allocator.name,
                                     "round": "bindings", "failure": sample.failure,
                                     "command": program.reproduce(
                                         allocator.preload_for(program, shim), directory)})
                    print(f"  FAIL {program.name} under {allocator.name}: "
                          f"{sample.failure.splitlines()[0]}", flush=True)
                    continue
                binding_outputs.append((program.name, allocator.name, "bindings", sample.output))
                problems, notes, targets = check_bindings(
                    program, allocator, shim, exports, sorted(glob.glob(ld_prefix + ".*")))
                bindings.setdefault(program.name, {})[allocator.name] = targets
                for problem in problems:
                    binding_problems.append(f"{program.name} under {allocator.name}: {problem}")
                    print(f"  BINDING {program.name} under {allocator.name}: {problem}", flush=True)
                if notes:
                    binding_notes.setdefault(program.name, {})[allocator.name] = notes
                shutil.rmtree(directory, ignore_errors=True)

    print(f"real_programs: {args.rounds} rounds of {len(programs)} programs x "
          f"{len(allocators)} allocators", flush=True)
    for round_index in range(args.rounds):
        order = [(p, a) for p in programs.values() for a in allocators]
        random.Random(f"order-{args.seed}-{round_index}").shuffle(order)
        for position, (program, allocator) in enumerate(order):
            directory = fresh_directory(f"round{round_index}", f"{program.name}-{allocator.name}")
            load_before = os.getloadavg()[0]
            sample = program.run(environment_for(program, allocator), directory, args.timeout)
            record = {"round": round_index, "position": position, "program": program.name,
                      "allocator": allocator.name, "ok": sample.ok, "wall_s": sample.wall_s,
                      "maxrss_kib": sample.maxrss_kib, "user_s": sample.user_s,
                      "system_s": sample.system_s, "loadavg_1min_before": load_before,
                      "output_sha256": hashlib.sha256(sample.output).hexdigest(), **sample.extra}
            if not sample.ok:
                record["failure"] = sample.failure
                failures.append({"program": program.name, "allocator": allocator.name,
                                 "round": round_index, "failure": sample.failure,
                                 "command": program.reproduce(
                                     allocator.preload_for(program, shim), directory)})
            samples.append((record, sample.output))
            status = "ok" if sample.ok else "FAIL " + sample.failure.splitlines()[0]
            print(f"  round {round_index + 1}/{args.rounds} {program.name:>6} "
                  f"{allocator.name:>10}  {sample.wall_s:8.3f} s  "
                  f"{sample.maxrss_kib / 1024:8.1f} MiB  {status}", flush=True)
            if sample.ok:
                shutil.rmtree(directory, ignore_errors=True)

    # Identical outputs: per program, every successful run of every allocator.
    differences = {}
    outputs_directory = os.path.join(work, "outputs")
    shutil.rmtree(outputs_directory, ignore_errors=True)
    for program in programs.values():
        by_digest = {}
        runs = [(r["allocator"], r["round"], output) for r, output in samples
                if r["program"] == program.name and r["ok"]]
        runs += [(a, rnd, output) for p, a, rnd, output in binding_outputs if p == program.name]
        for allocator, round_index, output in runs:
            digest = hashlib.sha256(output).hexdigest()
            entry = by_digest.setdefault(digest, {"allocators": set(), "output": output})
            entry["allocators"].add(f"{allocator}/{round_index}")
        if len(by_digest) > 1:
            os.makedirs(outputs_directory, exist_ok=True)
            described = {}
            reference = None
            for digest, entry in sorted(by_digest.items(),
                                        key=lambda item: -len(item[1]["allocators"])):
                path = os.path.join(outputs_directory, f"{program.name}-{digest[:12]}.out")
                with open(path, "wb") as out:
                    out.write(entry["output"])
                described[digest] = {"runs (allocator/round)": sorted(entry["allocators"]),
                                     "file": path}
                if reference is None:
                    reference = entry["output"]
                else:
                    described[digest]["first difference"] = first_difference(reference,
                                                                             entry["output"])
            differences[program.name] = described

    allocator_names = [a.name for a in allocators]
    records = [record for record, _ in samples]
    medians = summarize(records, list(programs), allocator_names)
    ratios = {}
    for subject in (a.name for a in allocators if a.kind == "pagemalloc"):
        ratios[subject] = ratios_of(medians, list(programs), subject,
                                    [n for n in allocator_names if n != subject])

    print()
    print(report_text(medians, ratios, list(programs), allocator_names, args.rounds))
    if binding_notes:
        print("\nallocation symbols that bind outside the preloaded allocator (LD_DEBUG=bindings):")
        for program_name, by_allocator in binding_notes.items():
            for allocator_name, notes in by_allocator.items():
                for note in notes:
                    print(f"  {program_name} under {allocator_name}: {note}")

    reference_outputs = {}
    for record, output in samples:
        if record["ok"] and record["program"] not in reference_outputs:
            reference_outputs[record["program"]] = output.decode(errors="replace")[:4000]
    results = {
        "benchmark": "real programs under LD_PRELOAD (benchmarks/real_programs/real_programs.py)",
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "machine": {**machine, "loadavg_at_end": os.getloadavg()},
        "packages": package_versions(),
        "seed": args.seed, "mode": "quick" if args.quick else "full", "rounds": args.rounds,
        "sizes": sizes, "work_directory": work,
        "elapsed_s": time.monotonic() - began,
        "allocators": allocator_facts,
        "glibc_shim_for_jemalloc_linked_programs": shim,
        "programs": {p.name: {"command": p.describe(), "environment": p.environment(),
                              "output_excerpt": reference_outputs.get(p.name)}
                     for p in programs.values()},
        "bindings": bindings, "binding_notes": binding_notes,
        "binding_problems": binding_problems,
        "medians": medians, "ratios": ratios,
        "failures": failures, "differences": {
            program: {digest: info for digest, info in described.items()}
            for program, described in differences.items()},
        "samples": records,
    }
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out, "w", encoding="utf-8") as out:
        json.dump(results, out, indent=1, sort_keys=False, default=list)
        out.write("\n")
    print(f"\nreal_programs: wrote {args.out} ({results['elapsed_s']:.0f} s in all)")

    verdict = 0
    for failure in failures:
        verdict = 1
        print(f"\nFAIL: {failure['program']} under {failure['allocator']} "
              f"(round {failure['round']}): {failure['failure']}\n  command: {failure['command']}",
              file=sys.stderr)
    for problem in binding_problems:
        verdict = 1
        print(f"FAIL: binding: {problem}", file=sys.stderr)
    for program_name, described in differences.items():
        verdict = 1
        print(f"FAIL: {program_name}: the output differs between allocators:", file=sys.stderr)
        for digest, info in described.items():
            print(f"  sha256 {digest[:16]}: {', '.join(info['runs (allocator/round)'])} "
                  f"({info['file']})", file=sys.stderr)
            if "first difference" in info:
                print(f"    {info['first difference']}", file=sys.stderr)
    return verdict


if __name__ == "__main__":
    sys.exit(main())
