// Fresh pages faulted in ahead of their first touch (the populate option, config.h).
//
// When an arena carves a slab, or a large run while its slabs hold at least as many pages as
// its large runs (the run will be used densely: chunk_pal.h's ChunkUse), from pages that read
// zero (never touched, or purged), one madvise(MADV_POPULATE_WRITE) makes them resident at
// once, instead of one page fault per page as they are first touched. On the VMs the study
// runs on, guests of a hypervisor that keeps shadow page tables, a page fault costs about
// 12 µs per page; populating costs about 0.7 µs per page, and the first touch after it about
// 5 µs (docs/measurements.md). Only once the arena's slabs hold kPopulateAfterSlabPages: a
// small program does not get whole slabs resident that it may never fill.
#pragma once

#include <atomic>
#include <cerrno>
#include <cstddef>

#include "config.h"
#include "pagemap/pages.h"
#include "pagemap/pal_linux.h"

namespace pagemalloc {

inline constexpr std::size_t kPopulateAfterSlabPages = std::size_t{1} << 20 >> kLgPageSize;

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
  if (!LinuxPal::populate(p, bytes) && errno == EINVAL)
    g_populate_refused.store(true, std::memory_order_relaxed);
  errno = saved;
}

}  // namespace pagemalloc
