// The one place where the run manager is chosen: PAGEMALLOC_RUNS (CMake) sets
// PAGEMALLOC_RUNS_<NAME>, and `SelectedRuns` names that variant over an OS layer.
#pragma once

#include "pagemap/run_manager.h"

#if defined(PAGEMALLOC_RUNS_PAGEMAP)
#include "pagemap/pagemap_runs.h"
#elif defined(PAGEMALLOC_RUNS_HYBRID)
#include "rbtree/hybrid_runs.h"
#elif defined(PAGEMALLOC_RUNS_RBTREE)
#include "rbtree/rbtree_runs.h"
#endif

namespace pagemalloc {

#if defined(PAGEMALLOC_RUNS_PAGEMAP)
template <class P>
using SelectedRuns = PagemapRuns<P>;
#elif defined(PAGEMALLOC_RUNS_HYBRID)
template <class P>
using SelectedRuns = HybridRuns<P>;
#elif defined(PAGEMALLOC_RUNS_RBTREE)
template <class P>
using SelectedRuns = RbtreeRuns<P>;
#else
#error "PAGEMALLOC_RUNS selects no known run manager"
#endif

}  // namespace pagemalloc
