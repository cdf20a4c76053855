// The one place where the run manager is chosen: PAGEMALLOC_RUNS (CMake) sets
// PAGEMALLOC_RUNS_<NAME>, and `Runs` names that variant over the Linux OS layer.
#pragma once

#include "pagemap/pagemap_runs.h"
#include "pagemap/pal_linux.h"
#include "pagemap/run_manager.h"

namespace pagemalloc {

class ChunkPal;  // chunk_pal.h

#if defined(PAGEMALLOC_RUNS_PAGEMAP)
template <class P>
using SelectedRuns = PagemapRuns<P>;
#else
#error "PAGEMALLOC_RUNS selects no known run manager"
#endif

}  // namespace pagemalloc
