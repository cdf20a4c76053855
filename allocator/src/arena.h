// An arena: one run manager and the slabs and large blocks cut from its runs, behind one lock.
//
//   small (<= 16 KiB)   a region of a slab; each size class has a bin: the slab being
//                       allocated from and a list of the others that have free regions
//   large (<= ~2 MiB)   a run of whole pages, its length in the page map's first entry
//
// Slow paths (a new slab, a run freed) tick the decay clock; free runs that stayed dirty for
// decay_ms are returned to the OS.
#pragma once

#include <cstddef>
#include <cstdint>

#include "chunk_pal.h"
#include "meta_pool.h"
#include "pagemap/intrusive_list.h"
#include "pagemap/page_map.h"
#include "runs.h"
#include "size_classes.h"
#include "slab.h"
#include "spin_lock.h"

namespace pagemalloc {

struct ArenaStats {
  std::size_t allocated = 0;      // usable bytes of live small and large blocks
  std::size_t active_pages = 0;   // pages in slabs and large runs
  std::size_t chunks = 0;
  std::size_t dirty_pages = 0;
  std::size_t free_pages = 0;     // dirty + retained
  std::size_t purged_pages = 0;   // since start
  std::size_t metadata = 0;       // bytes of slab descriptors' pools
};

class Arena {
 public:
  using Runs = SelectedRuns<ChunkPal>;
  static_assert(RunManager<Runs>);

  constexpr Arena() : pal_(this), runs_(pal_) {}

  // nullptr when the OS refuses memory.
  void* alloc_small(unsigned size_class);
  // Requires: slab's entry was read for p. Aborts on misuse.
  void free_small(Slab* slab, void* p, const char* call);

  // A run of at least `bytes` (> kMaxSmallSize) aligned to `align`; nullptr when the OS
  // refuses memory. `zeroed` tells whether its pages are known to read zero.
  void* alloc_large(std::size_t bytes, std::size_t align, bool& zeroed);
  void free_large(void* p, PageCount pages);
  // Grows or shrinks the large block at p (pages long) to `want` pages without moving it.
  bool resize_large(void* p, PageCount pages, PageCount want);

  void purge_all();
  ArenaStats stats();
  const char* check_invariants();
  const RunCounterValues& run_counters() const { return runs_.counters(); }

 private:
  struct Bin {
    Slab* current = nullptr;  // allocated from first; never on `partial`
    IntrusiveList<Slab, &Slab::prev, &Slab::next> partial;  // other slabs with free regions
  };

  Slab* next_slab(Bin& bin, unsigned size_class);
  void release_slab(Slab* slab);
  void tick();

  SpinLock lock_;
  ChunkPal pal_;
  Runs runs_;
  Bin bins_[kNumClasses];
  MetaPool<Slab> slab_pool_;
  std::size_t allocated_ = 0;
  std::size_t active_pages_ = 0;
  std::size_t purged_pages_ = 0;
  std::uint64_t last_purge_ms_ = 0;
};

}  // namespace pagemalloc
