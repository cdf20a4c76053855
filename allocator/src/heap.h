// The heap: the whole allocator behind the pm_ API — one arena (slabs and large runs) and the
// huge-block manager — and the operations every entry point is made of.
//
// Every pointer is classified through the page map: chunk-aligned pointers are huge blocks
// (looked up in the address map); any other is inside an arena chunk, and its page's entry
// says small (slab) or large (run). A pointer in no chunk of ours is reported, not followed.
#pragma once

#include <atomic>
#include <cstddef>

#include "arena.h"
#include "huge.h"
#include "placement.h"

struct pm_stats;

namespace pagemalloc {

class Heap {
 public:
  constexpr Heap() = default;

  // nullptr with errno = ENOMEM on failure. Requires: align is a power of two.
  void* allocate(std::size_t size, std::size_t align, bool zero);
  void deallocate(void* p, const char* call);
  void deallocate_sized(void* p, std::size_t size, std::size_t align, const char* call);
  // nullptr with errno = ENOMEM on failure, and p is untouched.
  void* reallocate(void* p, std::size_t size, std::size_t align, bool zero, const char* call);
  // jemalloc's xallocx: resizes in place only; returns the usable size afterwards.
  std::size_t resize_in_place(void* p, std::size_t size, std::size_t extra, bool zero,
                              const char* call);
  std::size_t usable_size(const void* p, const char* call);

  void purge();
  void stats(pm_stats& out);
  Arena& arena() { return arena_; }

 private:
  struct Block {
    BlockKind kind;
    std::size_t usable;
    unsigned size_class;  // Small
  };
  Block locate(const void* p, const char* call);

  Arena arena_;
  HugeManager huge_;
  std::atomic<std::size_t> copied_{0};
  std::atomic<std::size_t> grown_in_place_{0};
  std::atomic<std::size_t> moved_by_copy_{0};
};

// The process's heap (never destroyed: other code may free memory during exit).
Heap& heap();

}  // namespace pagemalloc
