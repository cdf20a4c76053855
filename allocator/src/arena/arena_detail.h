// What the arena's definitions share: the allocated runs' tree's search, a no-op for
// every other run manager.
#pragma once

#include "pagemap/pages.h"

namespace pagemalloc {

namespace arena_detail {

// The allocated runs' tree's search for the run at p (AllocatedRunsTree::pages_of). Only a
// design with the tree (Config::kAllocatedRunsTree) calls it; with any other run
// manager it compiles to nothing.
template <class Runs>
PageCount pages_in_allocated_runs_tree(Runs& runs, const void* p) {
  if constexpr (requires { runs.pages_of(p); }) return runs.pages_of(p);
  else return PageCount(0);
}

}  // namespace arena_detail

}  // namespace pagemalloc
