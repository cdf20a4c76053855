// The one place where the run manager is chosen: PAGEMALLOC_RUNS (CMake) sets
// PAGEMALLOC_RUNS_<NAME>, and `SelectedRuns` names that variant over an OS layer.
// With PAGEMALLOC_TRACE_RUNS (the CMake option of the same name) the variant is wrapped in
// TracingRuns, which records every call to the file $PAGEMALLOC_TRACE names
// (pagemap/tracing_runs.h; replayed by benchmarks/trace_replay.cpp).
#pragma once

#include "pagemap/run_manager.h"

#if defined(PAGEMALLOC_RUNS_PAGEMAP)
#include "pagemap/pagemap_runs.h"
#elif defined(PAGEMALLOC_RUNS_HYBRID)
#include "rbtree/hybrid_runs.h"
#elif defined(PAGEMALLOC_RUNS_RBTREE)
#include "rbtree/rbtree_runs.h"
#endif
#if defined(PAGEMALLOC_TRACE_RUNS)
#include "pagemap/tracing_runs.h"
#endif

namespace pagemalloc {

#if defined(PAGEMALLOC_RUNS_PAGEMAP)
template <class P>
using VariantRuns = PagemapRuns<P>;
#elif defined(PAGEMALLOC_RUNS_HYBRID)
template <class P>
using VariantRuns = HybridRuns<P>;
#elif defined(PAGEMALLOC_RUNS_RBTREE)
template <class P>
using VariantRuns = RbtreeRuns<P>;
#else
#error "PAGEMALLOC_RUNS selects no known run manager"
#endif

#if defined(PAGEMALLOC_TRACE_RUNS)
template <class P>
using SelectedRuns = TracingRuns<VariantRuns<P>>;
#else
template <class P>
using SelectedRuns = VariantRuns<P>;
#endif

}  // namespace pagemalloc
