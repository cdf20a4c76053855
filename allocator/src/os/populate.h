// Fresh pages faulted in ahead of their first touch (the populate option, config.h).
//
// Pages that read zero (never touched, or purged) are made resident with one
// madvise(MADV_POPULATE_WRITE), instead of one page fault per page at first touch, where they
// will be touched anyway:
// - a slab an arena carves from them, if its regions are at most a page (every page then holds
//   a region's start, which the allocator writes as it hands the region out), once the
//   arena's slabs hold kPopulateAfterSlabPages, 8 MiB (a small program does not get whole
//   slabs resident that it may never fill: espresso's pattern peaked at 4.0 MiB instead of 3.4
//   when it was 1 MiB);
// - the pages of a large or huge block that a realloc's copy of kPopulateCopyBytes or more is
//   about to fill.
// Nothing else: a slab of larger regions, or a large run, may be touched at one byte in a
// thousand (4,096 blocks of 16 KiB with one byte written in each, beside 10 MiB of small
// blocks, peaked at 78 MiB with their slabs populated, 29 MiB without).
// On the VMs the study runs on, guests of a hypervisor that keeps shadow page tables, a page
// fault costs 11-12 µs per page; populating costs 0.8-0.9 µs per page, and the first touch
// after it 5 µs (benchmarks/memory/first_touch, docs/measurements.md).
#pragma once

#include <atomic>
#include <cerrno>
#include <cstddef>

#include "pagemap/pages.h"
#include "pagemap/pal_linux.h"
#include "support/options.h"

namespace pagemalloc {

inline constexpr std::size_t kPopulateAfterSlabPages = std::size_t{8} << 20 >> kLgPageSize;
// A copy this large or larger: the copy faults its pages in a moment later anyway.
inline constexpr std::size_t kPopulateCopyBytes = std::size_t{16} << 10;

// Bytes populated since start, by every heap of the process (pm_stats's populated).
inline constinit std::atomic<std::size_t> g_populated_bytes{0};
// Set when the kernel refuses MADV_POPULATE_WRITE as unknown (before Linux 5.14): it is not
// asked again.
inline constinit std::atomic<bool> g_populate_refused{false};

// Faults in [p, p+bytes) if the option asks for it. A kernel short of memory leaves the pages
// to be faulted in at first touch, as without the option. errno is left as it was.
inline void populate_pages(void* p, std::size_t bytes) {
  if (!options().populate.load(std::memory_order_relaxed) ||
      g_populate_refused.load(std::memory_order_relaxed))
    return;
  const int saved = errno;
  if (LinuxPal::populate(p, bytes)) g_populated_bytes.fetch_add(bytes, std::memory_order_relaxed);
  else if (errno == EINVAL) g_populate_refused.store(true, std::memory_order_relaxed);
  errno = saved;
}

}  // namespace pagemalloc
