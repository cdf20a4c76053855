// mallinfo2 in the drop-in: glibc's summary of the heap, answered from pagemalloc's statistics
// (pm_stats_get) instead of glibc's own, which would report its idle arena as zeros.
//
//   arena     bytes mapped from the OS (pm_stats.mapped)
//   uordblks  bytes in live blocks (allocated)
//   fordblks  bytes mapped but not in live blocks (mapped - allocated)
//   keepcost  free bytes still resident, which a trim could return (dirty)
//   hblkhd    0: huge blocks are counted in arena, as everything pagemalloc maps
//   the rest  0 (glibc's counts of its own free lists and fastbins have no counterpart)
#include <malloc.h>

#include "pagemalloc/pagemalloc.h"

extern "C" __attribute__((visibility("default"))) struct mallinfo2 mallinfo2(void) noexcept {
  pm_stats s{};
  pm_stats_get(&s);
  struct mallinfo2 info {};
  info.arena = s.mapped;
  info.uordblks = s.allocated;
  info.fordblks = s.mapped > s.allocated ? s.mapped - s.allocated : 0;
  info.keepcost = s.dirty;
  return info;
}
