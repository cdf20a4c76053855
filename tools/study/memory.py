"""What the allocators hold: sparse large blocks, pages given back after a burst, small
programs (papers/memory).

The programs (benchmarks/memory/, plain C: a C program loads no C++ runtime) call malloc/free;
every allocator is put under them by LD_PRELOAD (glibc: nothing preloaded; pagemalloc: the
release tree's libpagemalloc.so), one process per (program, allocator) and round, in an order
shuffled from the seed and the round, each started through measure_run
(benchmarks/measure_run.c), which reports its peak RSS (ru_maxrss), wall, user and sys time.

  sparse          sparse_blocks: 32,768 live blocks of 64-512 KiB, one byte touched in each
                  (--quick: 4,096)
  sparse-16k      the same with 16,384 live blocks (--quick: 2,048)
  sparse-beside-small  sparse_blocks: 8,192 live blocks of 8-16 KiB, one byte touched in
                  each, after 16 MiB of 64-byte blocks (--quick: 2,048 after 10 MiB): where
                  an allocator that backs a large heap's blocks ahead of use would back them
  calloc-after-sparse  calloc_after_sparse: a 64 MiB block touched at one byte per 64 pages
                  and freed, then 256 calloc'd blocks of 256 KiB touched at one byte each: where
                  an allocator that keeps the freed pages and clears them would make them
                  resident
  burst           burst_then_small: 200 MB in blocks of 4-256 KiB, all freed, then small
                  malloc/free calls for decay + 3 s, its resident size sampled every 100 ms
  burst-fast-path the same, then only malloc/free pairs of 16 to 2,015 bytes that a thread
                  cache serves, a 1 ms sleep every thousand (no call reaches an arena)
  burst-idle      the same, sleeping after the burst; pagemalloc with background_thread:true
  small programs  cfrac_like, espresso_like, glibc_simple, mleak, mstress (the allocation
                  patterns of mimalloc-bench's small programs), an empty C program, and
                  stress_mem.rb under Debian's ruby on one and on two threads
  growth          realloc_growth: 1,000 strings grown a byte at a time to 4 KiB, and 16 grown
                  8 bytes at a time to 100,000 bytes, all in turn (every size class crossed is
                  used by all the strings and then left): reported, with no limit

--quick: one round, the smaller scales given above, and the burst programs (6 s each, most of
the part) under glibc and pagemalloc only.

pagemalloc runs with PAGEMALLOC_CONF=decay_ms:2000 in the burst programs (its default is 10 s;
the shorter decay keeps the study short, and the criterion is relative to it), and with its
defaults everywhere else; the peers always with theirs.

The criteria (the medians over the rounds that succeeded):
  sparse        pagemalloc's peak RSS <= 1.3 x the smaller of glibc's and tcmalloc's (each
                of the three sparse programs)
  burst         resident <= half the burst (100 MiB) at the first sample decay + 3 s after the
                burst was freed, while the small calls go on
  burst-fast-path  resident <= 10% of the burst (20 MiB) at the same time, while the pairs go on
  burst-idle    resident <= 10% of the burst (20 MiB) at the same time, with
                background_thread:true, while the program sleeps
  small         geometric mean of pagemalloc's peak RSS / glibc's <= 1.3, and no program > 2
  (growth has none: its table shows each allocator's peak RSS / glibc's and / the best
  peer's)

Writes results/memory.json (every sample), papers/memory/results.md, papers/memory/burst.png
(resident size over time after the burst, per allocator), papers/memory/small.png and
papers/memory/summary.json.
"""

import dataclasses
import tempfile
from pathlib import Path

from allocators import PEERS, build_directory
from launched import run_launched
from common import (fmt_ratio, geomean, log, machine_line, markdown_table, medians_of,
                    papers_directory, progress, ratio, results_directory, shown,
                    shuffled_rounds, text_table, write_json, write_report)

ALLOCATORS = PEERS + ["pagemalloc"]
QUICK_BURST_ALLOCATORS = ["glibc", "pagemalloc"]
PROGRAM_TARGETS = ["sparse_blocks", "calloc_after_sparse", "burst_then_small", "cfrac_like",
                   "espresso_like", "glibc_simple", "mleak", "mstress", "realloc_growth",
                   "empty"]
TARGETS = PROGRAM_TARGETS + ["measure_run"]
TIMEOUT_SECONDS = 120
DECAY_MS = 2000
BURST_MIB = 200
SPARSE_LIMIT, BURST_LIMIT, IDLE_LIMIT = 1.3, 0.5, 0.1
SMALL_GEOMEAN_LIMIT, SMALL_EACH_LIMIT = 1.3, 2.0


@dataclasses.dataclass
class Program:
    name: str
    binary: str
    arguments: list
    quick_arguments: list
    kind: str  # "sparse", "burst", "small" or "growth"
    title: str
    pagemalloc_conf: str = ""


BURST_SECONDS = (DECAY_MS + 3000) // 1000 + 1
RUBY_STRESS = "benchmarks/memory/stress_mem.rb"  # from the repository's root, the study's directory
PROGRAMS = [
    Program("sparse", "sparse_blocks", [], ["blocks=4096"], "sparse",
            "32,768 live blocks of 64-512 KiB, one byte touched in each"),
    Program("sparse-16k", "sparse_blocks", ["blocks=16384"], ["blocks=2048"], "sparse",
            "16,384 live blocks of 64-512 KiB, one byte touched in each"),
    Program("sparse-beside-small", "sparse_blocks",
            ["blocks=8192", "least_kib=8", "most_kib=16", "small_mib=16"],
            ["blocks=2048", "least_kib=8", "most_kib=16", "small_mib=10"], "sparse",
            "8,192 live blocks of 8-16 KiB, one byte touched in each, beside 16 MiB of "
            "64-byte blocks"),
    Program("calloc-after-sparse", "calloc_after_sparse", [], [], "sparse",
            "a 64 MiB block touched at one byte per 64 pages and freed, then 256 calloc'd "
            "blocks of 256 KiB touched at one byte each"),
    Program("burst", "burst_then_small",
            [f"burst_mib={BURST_MIB}", f"seconds={BURST_SECONDS}"], [], "burst",
            f"{BURST_MIB} MB allocated and freed, then {BURST_SECONDS} s of small calls",
            f"decay_ms:{DECAY_MS}"),
    Program("burst-fast-path", "burst_then_small",
            [f"burst_mib={BURST_MIB}", f"seconds={BURST_SECONDS}", "pairs=1"], [], "burst",
            f"{BURST_MIB} MB allocated and freed, then {BURST_SECONDS} s of malloc/free pairs "
            "a thread cache serves", f"decay_ms:{DECAY_MS}"),
    Program("burst-idle", "burst_then_small",
            [f"burst_mib={BURST_MIB}", f"seconds={BURST_SECONDS}", "idle=1"], [], "burst",
            f"{BURST_MIB} MB allocated and freed, then {BURST_SECONDS} s asleep",
            f"decay_ms:{DECAY_MS},background_thread:true"),
    Program("empty", "empty", [], [], "small", "an empty C program (one line of output)"),
    Program("ruby-stress", "/usr/bin/ruby", [RUBY_STRESS, "threads=1"], ["rounds=60"],
            "small", "Ruby building records and dropping them for its collector (one thread)"),
    Program("ruby-stress-2", "/usr/bin/ruby", [RUBY_STRESS, "threads=2"], ["rounds=60"],
            "small", "the same on two threads under the interpreter's lock"),
    Program("cfrac", "cfrac_like", [], ["steps=300000"], "small",
            "small short-lived bignums (cfrac's pattern)"),
    Program("espresso", "espresso_like", [], ["rounds=1000"], "small",
            "covers of cubes built and freed (espresso's pattern)"),
    Program("glibc-simple", "glibc_simple", [], ["iterations=500"], "small",
            "batches of fixed-size blocks of 16 B-4 KiB (glibc's malloc-simple)"),
    Program("mleak", "mleak", [], ["rounds=100"], "small",
            "2 short-lived threads at a time, 400 rounds, blocks left to the main thread "
            "(mleak's pattern)"),
    Program("mstress", "mstress", [], ["phases=4"], "small",
            "4 threads in 10 phases sharing a table of blocks (mimalloc's test-stress)"),
    Program("growth-bytes", "realloc_growth", [], ["strings=250"], "growth",
            "1,000 strings grown by realloc a byte at a time to 4 KiB, all in turn"),
    Program("growth-steps", "realloc_growth", ["strings=16", "most=100000", "step=8"],
            ["strings=4", "most=100000", "step=8"], "growth",
            "16 strings grown by realloc 8 bytes at a time to 100,000 bytes, all in turn"),
]


def paper_directory():
    return papers_directory() / "memory"


def program_directory():
    return build_directory("pagemap") / "benchmarks" / "memory"




def huge_page_mode():
    """The system's transparent huge page setting, e.g. "madvise"."""
    try:
        text = Path("/sys/kernel/mm/transparent_hugepage/enabled").read_text()
        return text[text.index("[") + 1:text.index("]")]
    except (OSError, ValueError):
        return "unknown"




def parse_burst_output(text):
    """The curve [(ms, KiB)] and the summary line's fields of burst_then_small."""
    curve, summary = [], {}
    for line in text.splitlines():
        fields = line.split()
        if fields[:1] == ["sample"] and len(fields) == 4:
            curve.append((int(fields[1]), int(fields[2])))
        elif fields[:1] == ["burst_blocks"]:
            summary = {fields[i]: int(fields[i + 1]) for i in range(0, len(fields) - 1, 2)}
    return curve, summary


def resident_after(curve, since_ms):
    """The first sample at or after since_ms (KiB), or None."""
    for ms, kib in curve:
        if ms >= since_ms:
            return kib
    return None


def run_once(program, allocator, quick, scratch):
    """One process: returns its sample (with "ok" and, when not ok, "failure")."""
    arguments = program.arguments + (program.quick_arguments if quick else [])
    settings = ([f"PAGEMALLOC_CONF={program.pagemalloc_conf}"]
                if allocator == "pagemalloc" and program.pagemalloc_conf else [])
    # A program is a C program of benchmarks/memory, or an interpreter given a script there.
    binary = (Path(program.binary) if program.binary.startswith("/")
              else program_directory() / program.binary)
    sample, stdout, stderr = run_launched(binary, arguments,
                                          allocator, scratch, TIMEOUT_SECONDS, settings)
    if sample["ok"]:
        if program.kind == "burst":
            curve, summary = parse_burst_output(stdout)
            sample["curve"] = curve
            sample.update({k: summary.get(k) for k in ("burst_end_ms", "burst_kib", "last_kib")})
            if summary.get("burst_end_ms") is not None:
                sample["resident_at_deadline_kib"] = resident_after(
                    curve, summary["burst_end_ms"] + DECAY_MS + 3000)
        if stderr:
            sample["stderr"] = stderr[-400:]
    return sample


def measure(quick, rounds, seed):
    """Runs every program under every allocator in interleaved rounds; returns the data."""
    rounds = 1 if quick else rounds
    progress.plan_steps(rounds)
    samples = {p.name: {a: [] for a in ALLOCATORS} for p in PROGRAMS}
    entries = [(p, a) for p in PROGRAMS for a in ALLOCATORS
               if not (quick and p.kind == "burst" and a not in QUICK_BURST_ALLOCATORS)]
    with tempfile.TemporaryDirectory(prefix="memory.") as scratch:
        for round_number, order in shuffled_rounds(entries, rounds, seed, "memory"):
            for program, allocator in order:
                sample = run_once(program, allocator, quick, scratch)
                sample["round"] = round_number
                samples[program.name][allocator].append(sample)
                if not sample["ok"]:
                    log(f"memory: {program.name} under {allocator} failed: {sample['failure']}")
    data = {"rounds": rounds, "quick": quick, "huge_pages": huge_page_mode(),
            "decay_ms": DECAY_MS, "burst_mib": BURST_MIB,
            "programs": {p.name: {"title": p.title, "binary": p.binary, "kind": p.kind,
                                  "arguments": p.arguments + (p.quick_arguments if quick else []),
                                  "pagemalloc_conf": p.pagemalloc_conf,
                                  "samples": samples[p.name]} for p in PROGRAMS}}
    write_json(results_directory() / "memory.json", data)
    return data


def medians(samples):
    return medians_of(samples, ("maxrss_mib", "wall_s", "user_s", "sys_s", "burst_kib",
                                "resident_at_deadline_kib", "last_kib"))


def median_curve(samples):
    """The curve of the round whose resident size at the deadline is the median one."""
    good = [s for s in samples if s["ok"] and s.get("curve")]
    if not good:
        return None
    good.sort(key=lambda s: (s.get("resident_at_deadline_kib") or 0))
    return good[len(good) // 2]


def burst_figure(data, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = [p.name for p in PROGRAMS if p.kind == "burst"]
    fig, axes = plt.subplots(1, len(names), figsize=(7 * len(names), 4.5), sharey=True)
    for axis, name in zip(axes, names):
        entry = data["programs"][name]
        for allocator in ALLOCATORS:
            chosen = median_curve(entry["samples"][allocator])
            if chosen is None:
                continue
            start = chosen["burst_end_ms"]
            xs = [(ms - start) / 1000 for ms, _ in chosen["curve"]]
            ys = [kib / 1024 for _, kib in chosen["curve"]]
            axis.plot(xs, ys, label=allocator, linewidth=2 if allocator == "pagemalloc" else 1)
        deadline = (DECAY_MS + 3000) / 1000
        limit = BURST_LIMIT if name == "burst" else IDLE_LIMIT
        axis.axvline(deadline, color="black", linestyle="--", linewidth=0.8)
        axis.axhline(BURST_MIB * limit, color="grey", linestyle=":", linewidth=0.8)
        axis.set(title=f"{name}: resident size (0 s: the burst freed)\n"
                       f"deadline decay + 3 s (dashed), limit {limit:g} x the burst (dotted)",
                 xlabel="seconds since the burst was freed", ylabel="resident MiB")
        axis.grid(True, alpha=0.3)
        axis.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def small_figure(table, names, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    width = 0.8 / len(ALLOCATORS)
    fig, axis = plt.subplots(figsize=(10, 4.5))
    for i, allocator in enumerate(ALLOCATORS):
        values = [ratio(table[n][allocator]["maxrss_mib"], table[n]["glibc"]["maxrss_mib"])
                  for n in names]
        axis.bar([x + i * width for x in range(len(names))],
                 [float("nan") if v is None else v for v in values], width, label=allocator)
    axis.axhline(SMALL_GEOMEAN_LIMIT, color="black", linestyle="--", linewidth=0.8)
    axis.axhline(SMALL_EACH_LIMIT, color="black", linestyle=":", linewidth=0.8)
    axis.axhline(1.0, color="grey", linewidth=0.5)
    axis.set_xticks([x + 0.4 - width / 2 for x in range(len(names))], names)
    axis.set(title="small programs: peak RSS / glibc's (limits: geometric mean 1.3, each 2)",
             ylabel="ratio, lower is better")
    axis.grid(True, axis="y", alpha=0.3)
    axis.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def fmt_mib(value, digits=1):
    return "—" if value is None else f"{value:,.{digits}f}"


def kib_to_mib(value):
    return None if value is None else value / 1024


def verdict(passed):
    return "holds" if passed else "DOES NOT HOLD"


def report(info, data):
    """Writes papers/memory/results.md, the figures and summary.json; returns summary lines."""
    paper = paper_directory()
    paper.mkdir(parents=True, exist_ok=True)
    table = {name: {a: medians(entry["samples"][a]) for a in ALLOCATORS}
             for name, entry in data["programs"].items()}
    criteria, sections = {}, []

    # Sparse blocks: large ones alone, and smaller ones beside a heap of small blocks.
    for name, heading in (("sparse", "Sparse large blocks"),
                          ("sparse-16k", "Sparse large blocks, 16,384 live"),
                          ("sparse-beside-small", "Sparse blocks beside small ones"),
                          ("calloc-after-sparse", "Zeroed blocks after a sparsely touched one")):
        if name not in table:
            continue
        sparse = table[name]
        reference = min((sparse[a]["maxrss_mib"] for a in ("glibc", "tcmalloc")
                         if sparse[a]["maxrss_mib"] is not None), default=None)
        r = None if sparse["pagemalloc"]["failed"] else ratio(sparse["pagemalloc"]["maxrss_mib"],
                                                              reference)
        criteria[name] = {"ratio": r, "limit": SPARSE_LIMIT,
                          "passed": r is not None and r <= SPARSE_LIMIT,
                          "text": "peak RSS / min(glibc, tcmalloc)"}
        rows = [[a, fmt_mib(sparse[a]["maxrss_mib"]), fmt_mib(sparse[a]["wall_s"], 2),
                 fmt_ratio(ratio(sparse[a]["maxrss_mib"], reference)), str(sparse[a]["failed"])]
                for a in ALLOCATORS]
        entry = data["programs"][name]
        sections += [f"## {heading}", "",
                     f"{entry['title']} (`{' '.join([entry['binary'], *entry['arguments']])}`); "
                     f"transparent huge pages: `{data['huge_pages']}`.", "",
                     markdown_table(["allocator", "peak RSS MiB", "wall s",
                                     "RSS / min(glibc, tcmalloc)", "failed rounds"], rows), ""]

    # The bursts.
    burst_rows = []
    for name, limit in (("burst", BURST_LIMIT), ("burst-fast-path", IDLE_LIMIT),
                        ("burst-idle", IDLE_LIMIT)):
        entry = data["programs"][name]
        rows = []
        for a in ALLOCATORS:
            m = table[name][a]
            rows.append([a, fmt_mib(kib_to_mib(m["burst_kib"])),
                         fmt_mib(kib_to_mib(m["resident_at_deadline_kib"])),
                         fmt_ratio(ratio(kib_to_mib(m["resident_at_deadline_kib"]), BURST_MIB)),
                         fmt_mib(kib_to_mib(m["last_kib"])), fmt_mib(m["maxrss_mib"]),
                         str(m["failed"])])
        ours = table[name]["pagemalloc"]
        r = None if ours["failed"] else ratio(kib_to_mib(ours["resident_at_deadline_kib"]),
                                              BURST_MIB)
        criteria[name] = {"ratio": r, "limit": limit, "passed": r is not None and r <= limit,
                          "text": f"resident {DECAY_MS / 1000:g} + 3 s after the burst / burst"}
        conf = f" pagemalloc with `PAGEMALLOC_CONF={entry['pagemalloc_conf']}`."
        sections += [f"## {name}", "",
                     f"{entry['title']} (`{' '.join([entry['binary'], *entry['arguments']])}`);"
                     + conf, "",
                     markdown_table(["allocator", "resident with the burst live MiB",
                                     f"resident {DECAY_MS / 1000:g} + 3 s after MiB",
                                     f"that / the {BURST_MIB} MiB burst", "last sample MiB",
                                     "peak RSS MiB", "failed rounds"], rows), ""]
        burst_rows.append(name)
    burst_figure(data, paper / "burst.png")

    # The small programs.
    small = [p.name for p in PROGRAMS if p.kind == "small"]
    rows, ours_ratios = [], []
    for name in small:
        glibc = table[name]["glibc"]["maxrss_mib"]
        row = [name]
        for a in ALLOCATORS:
            row.append(f"{fmt_mib(table[name][a]['maxrss_mib'], 2)} "
                       f"({fmt_ratio(ratio(table[name][a]['maxrss_mib'], glibc))})")
        rows.append(row)
        failed = table[name]["pagemalloc"]["failed"] > 0
        ours_ratios.append(None if failed else ratio(table[name]["pagemalloc"]["maxrss_mib"],
                                                     glibc))
    geo = {a: geomean([ratio(table[n][a]["maxrss_mib"], table[n]["glibc"]["maxrss_mib"])
                       for n in small]) for a in ALLOCATORS}
    rows.append(["geometric mean of the ratios"] + [fmt_ratio(geo[a]) for a in ALLOCATORS])
    worst = max((x for x in ours_ratios if x is not None), default=None)
    any_failed = any(x is None for x in ours_ratios)
    criteria["small-geomean"] = {"ratio": geo["pagemalloc"], "limit": SMALL_GEOMEAN_LIMIT,
                                 "passed": not any_failed and geo["pagemalloc"] is not None
                                 and geo["pagemalloc"] <= SMALL_GEOMEAN_LIMIT,
                                 "text": "geometric mean of peak RSS / glibc's"}
    criteria["small-each"] = {"ratio": worst, "limit": SMALL_EACH_LIMIT,
                              "passed": not any_failed and worst is not None
                              and worst <= SMALL_EACH_LIMIT,
                              "text": "largest peak RSS / glibc's"}
    small_figure(table, small, paper / "small.png")
    titles = "; ".join(f"{n}: {data['programs'][n]['title']}" for n in small)
    sections += ["## Small programs", "",
                 "Peak RSS in MiB (in brackets: / glibc's). " + titles + ".", "",
                 markdown_table(["program"] + ALLOCATORS, rows), "",
                 "![small programs](small.png)", ""]

    # Growing strings: reported, no limit.
    growth = [p.name for p in PROGRAMS if p.kind == "growth"]
    rows = []
    for name in growth:
        glibc = table[name]["glibc"]["maxrss_mib"]
        best = min((table[name][a]["maxrss_mib"] for a in PEERS
                    if table[name][a]["maxrss_mib"] is not None), default=None)
        for a in ALLOCATORS:
            m = table[name][a]["maxrss_mib"]
            rows.append([name, a, fmt_mib(m, 2), fmt_ratio(ratio(m, glibc)),
                         fmt_ratio(ratio(m, best)), str(table[name][a]["failed"])])
    if growth:
        commands = {n: " ".join([data["programs"][n]["binary"], *data["programs"][n]["arguments"]])
                    for n in growth}
        titles = "; ".join(f"{n}: {data['programs'][n]['title']} (`{commands[n]}`)"
                           for n in growth)
        sections += ["## Strings grown by realloc (no limit)", "", titles + ".", "",
                     markdown_table(["program", "allocator", "peak RSS MiB", "/ glibc's",
                                     "/ the best peer's", "failed rounds"], rows), ""]

    verdict_rows = [[name, c["text"], fmt_ratio(c["ratio"]), f"≤ {c['limit']:g}",
                     verdict(c["passed"])] for name, c in criteria.items()]
    text = "\n".join([
        "# Memory: measured results", "",
        "Generated by `bash tools/study.sh --only memory` (part of `bash tools/study.sh`);"
        " do not edit by hand.", "",
        f"Machine and date: {machine_line(info)}. Transparent huge pages: "
        f"`{data['huge_pages']}`. Rounds: {data['rounds']}"
        f"{' (quick: smaller scale)' if data['quick'] else ''}, interleaved; every number is"
        " the median over the rounds that succeeded (a burst's curve: the round with the median"
        " resident size at the deadline).", "",
        "## pagemalloc against the criteria", "",
        markdown_table(["criterion", "measure", "pagemalloc", "limit", "verdict"],
                       verdict_rows), "",
        "![resident size after the burst](burst.png)", "",
        *sections])
    write_report(paper / "results.md", text)
    write_json(paper / "summary.json", {"machine": info, "rounds": data["rounds"],
                                        "quick": data["quick"],
                                        "huge_pages": data["huge_pages"],
                                        "criteria": criteria, "medians": table})
    summary_rows = [[name, fmt_ratio(c["ratio"]), f"{c['limit']:g}", verdict(c["passed"])]
                    for name, c in criteria.items()]
    growth_line = ", ".join(f"{n} {fmt_ratio(ratio(table[n]['pagemalloc']['maxrss_mib'], g))}"
                            for n in growth
                            for g in [table[n]["glibc"]["maxrss_mib"]])
    return [f"memory ({shown(paper / 'results.md')}), transparent huge pages {data['huge_pages']}:",
            text_table(["criterion", "pagemalloc", "limit", "verdict"], summary_rows),
            "  strings grown by realloc (no limit), pagemalloc's peak RSS / glibc's: "
            + growth_line]
