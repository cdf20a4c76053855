// The two allocators a workload benchmark holds side by side in one process, as template
// arguments with the same two calls:
//
//   Malloc      malloc/free: glibc, or whichever allocator LD_PRELOAD puts under the process
//   Pagemalloc  pm_malloc/pm_free of the static library linked in
#ifndef PAGEMALLOC_BENCHMARKS_ALLOCATOR_CALLS_H
#define PAGEMALLOC_BENCHMARKS_ALLOCATOR_CALLS_H

#include <pagemalloc/pagemalloc.h>

#include <cstddef>
#include <cstdlib>

namespace pagemalloc::bench {

struct Malloc {
  static void* allocate(std::size_t size) { return std::malloc(size); }
  static void release(void* p) { std::free(p); }
};

struct Pagemalloc {
  static void* allocate(std::size_t size) { return pm_malloc(size); }
  static void release(void* p) { pm_free(p); }
};

}  // namespace pagemalloc::bench

#endif  // PAGEMALLOC_BENCHMARKS_ALLOCATOR_CALLS_H
