"""The allocators the study compares, and how each is put under a process.

  glibc       the system malloc: no preload
  jemalloc    Debian's libjemalloc2, by LD_PRELOAD
  mimalloc    Debian's libmimalloc2.0, by LD_PRELOAD
  tcmalloc    Debian's libtcmalloc-minimal4 (gperftools), by LD_PRELOAD
  pagemalloc  one build per run-manager variant (pagemap, hybrid, rbtree): the benchmarks
              link its static pm_* library; real programs preload its drop-in (a quick run
              builds and measures the pagemap variant only: measured_variants)

jemalloc cannot be dlopen'ed (static TLS), so every comparison runs one process per
allocator, in interleaved rounds (docs/design.md).
"""

from pathlib import Path

from common import ROOT

LIBRARY_DIRECTORY = Path("/usr/lib/x86_64-linux-gnu")
PEER_CANDIDATES = {
    "jemalloc": ["libjemalloc.so.2"],
    "mimalloc": ["libmimalloc.so.2", "libmimalloc.so"],
    "tcmalloc": ["libtcmalloc_minimal.so.4", "libtcmalloc.so.4"],
}
PEERS = ["glibc", "jemalloc", "mimalloc", "tcmalloc"]
VARIANTS = ["pagemap", "hybrid", "rbtree"]
# The CMake preset (and build/ folder) of each variant's build.
VARIANT_PRESET = {"pagemap": "release", "hybrid": "hybrid", "rbtree": "rbtree"}


def measured_variants(quick):
    """The variants whose builds a run measures: all of them, or the release tree's (pagemap)
    in a quick run, which leaves the hybrid and rbtree trees unbuilt (their run managers are
    still compared in one process by the tree-overhead part's micro and replay studies)."""
    return VARIANTS[:1] if quick else VARIANTS


def peer_library(name):
    """The library to preload for a peer; None for glibc (nothing to preload)."""
    if name == "glibc":
        return None
    for candidate in PEER_CANDIDATES[name]:
        path = LIBRARY_DIRECTORY / candidate
        if path.exists():
            return path
    raise FileNotFoundError(f"{name}: none of {PEER_CANDIDATES[name]} in {LIBRARY_DIRECTORY} "
                            "(bash tools/install-deps.sh installs it)")


def build_directory(variant):
    return ROOT / "build" / VARIANT_PRESET[variant]


def dropin(variant):
    return build_directory(variant) / "allocator" / "libpagemalloc.so"


def benchmark_binary(variant, name):
    return build_directory(variant) / "benchmarks" / name
