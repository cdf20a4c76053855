// The Configs pagemalloc is assembled from: one struct per named design, each a complete set
// of the design choices a researcher can switch. The build picks one by PAGEMALLOC_PRESET and
// may change any single choice by its own option (build_config.h.in, cmake/design.cmake);
// the code reads the result as BuildConfig.
//
//   Pal                  the OS layer chunks and huge blocks come from (pagemap/pal.h): Linux
//                        mmap; a test's Config may wrap it (tests/api/fault_injection_test.cpp)
//   Runs                 the run manager over an OS layer: PagemapRuns (O(1) page map),
//                        HybridRuns (page-map coalescing, a size tree), RbtreeRuns (trees only)
//   kThreadCaches        small blocks pass through per-thread caches; off, every malloc and
//                        free of a small block takes its arena's lock
//   kTransferStash       an arena keeps the regions caches return in a per-class stash
//                        (tcmalloc's transfer cache); off, each goes back to its slab's bitmap
//   kArenas              automatic arenas when PAGEMALLOC_CONF sets no narenas: 0 is one per
//                        CPU (automatic_arenas.h)
//   kMaxSmallSize        the largest size served from slabs (2 KiB: jemalloc's bins in 2008,
//                        half a page; 64 KiB today, 16 KiB before); anything larger is a run
//                        of pages
//   kMaxMediumSize       large requests up to this many bytes are rounded up to a medium class
//                        and freed into the thread's cache, from which the next request of
//                        the class takes them with no lock (medium_classes.h, thread_cache.h);
//                        0: none, every large block goes to its arena (jemalloc in 2008);
//                        1 MiB today (256 KiB, gperftools' largest class, left blocks of
//                        256 KiB-1 MiB to the arena's lock: docs/measurements.md)
//   kMediumClassesPerDoubling  the medium classes' spacing: N per doubling, 0 page-exact
//   kReleaseCurrentSlab  a slab goes back to the run manager as soon as it empties, even the
//                        one its bin allocates from (jemalloc in 2008); off, that one is kept
//   kLargeRunCache       an arena keeps a few freed large blocks of up to 256 KiB as they were,
//                        for the next request of the same length (large_run_cache.h); off,
//                        each goes back to the run manager at once (jemalloc in 2008)
//   kDirtyRunsFirst      the run manager's fit looks among the free runs at most 1/8 of whose
//                        pages are clean (fresh or purged) before the others, so that freed
//                        pages are reused before fresh ones are touched (run_manager_core.h);
//                        off, one best fit over every free run (jemalloc in 2008)
//   kAllocatedRunsTree   every allocated run also sits in an address tree, searched for a
//                        large block's length (AllocatedRunsTree: jemalloc from January to
//                        July 2008); off, the page map's first entry gives it
//   kValidateFree        every free first searches an address tree of its arena's chunks,
//                        and a large block's length (ChunkTree: jemalloc's malloc zone on OS X
//                        in 2008, where free() asked the zone's size() which zone a pointer
//                        came from); off, the address map alone says
//   kLgChunkSize         chunks of 2^20 (1 MiB: jemalloc in 2008) or 2^21 bytes (2 MiB:
//                        today's, a transparent huge page); the largest run, and so where
//                        huge blocks begin, is a chunk less its header. One per build: every
//                        layer counts in it (pagemap/chunk_size.h)
//
// The je2008 presets describe jemalloc as Firefox 3.0 shipped it (FreeBSD malloc.c 1.162,
// February 2008): no thread caches, one arena, bins up to 2 KiB, an emptied run returned at
// once, every free validated as on OS X, where the post measured, chunks of 1 MiB. They
// differ in the run manager alone: red-black trees as then, the allocated runs' tree
// included (je2008-trees), the July 2008 fix (je2008-fixed: page-map coalescing beside a
// size tree) and the O(1) page map (je2008-pagemap). See papers/tree-overhead.
#pragma once

#include <cstddef>

#include "pagemap/pagemap_runs.h"
#include "pagemap/pal_linux.h"
#include "rbtree/allocated_runs_tree.h"
#include "rbtree/hybrid_runs.h"
#include "rbtree/rbtree_runs.h"

namespace pagemalloc {

// Today's pagemalloc.
struct DefaultConfig {
  using Pal = LinuxPal;
  template <class OsLayer>
  using Runs = PagemapRuns<OsLayer>;
  static constexpr bool kThreadCaches = true;
  static constexpr bool kTransferStash = true;
  static constexpr unsigned kArenas = 0;
  static constexpr std::size_t kMaxSmallSize = 65536;
  static constexpr std::size_t kMaxMediumSize = 1048576;
  static constexpr unsigned kMediumClassesPerDoubling = 8;
  static constexpr bool kReleaseCurrentSlab = false;
  static constexpr bool kLargeRunCache = true;
  static constexpr bool kDirtyRunsFirst = true;
  static constexpr bool kAllocatedRunsTree = false;
  static constexpr bool kValidateFree = false;
  static constexpr std::size_t kLgChunkSize = 21;
};

// jemalloc as in Firefox 3.0, run manager as then: red-black trees for free runs.
struct Je2008TreesConfig : DefaultConfig {
  template <class OsLayer>
  using Runs = RbtreeRuns<OsLayer>;
  static constexpr bool kThreadCaches = false;
  static constexpr bool kTransferStash = false;
  static constexpr unsigned kArenas = 1;
  static constexpr std::size_t kMaxSmallSize = 2048;
  static constexpr std::size_t kMaxMediumSize = 0;
  static constexpr bool kReleaseCurrentSlab = true;
  static constexpr bool kLargeRunCache = false;
  static constexpr bool kDirtyRunsFirst = false;
  static constexpr bool kAllocatedRunsTree = true;
  static constexpr bool kValidateFree = true;
  static constexpr std::size_t kLgChunkSize = 20;
};

// The same after July 2008's fix: coalescing in the page map, free runs in a size tree, no
// tree of allocated runs.
struct Je2008FixedConfig : Je2008TreesConfig {
  template <class OsLayer>
  using Runs = HybridRuns<OsLayer>;
  static constexpr bool kAllocatedRunsTree = false;
};

// The same with the O(1) page-map run manager.
struct Je2008PagemapConfig : Je2008TreesConfig {
  template <class OsLayer>
  using Runs = PagemapRuns<OsLayer>;
  static constexpr bool kAllocatedRunsTree = false;
};

}  // namespace pagemalloc
