// The "hybrid" run manager: jemalloc after the 2008 fix.
//
// "Overzealous use of my red-black tree hammer" (Evans, 2008) moved the search for a run's
// free neighbours out of a red-black tree and into the linear page map: coalescing reads the
// boundary tags just before and just after the run, O(1), as in the "pagemap" variant. The
// best fit stays a red-black tree of free runs ordered by (size, address), O(log n) per
// insert, erase and search — that is what this variant measures against "pagemap".
#pragma once

#include <cstddef>

#include "pagemap/run_manager_core.h"
#include "rbtree/rbtree.h"
#include "rbtree/run_trees.h"

namespace pagemalloc {

struct HybridNode : RunRecord, SizeLink {
  std::size_t pages;  // the run's length while it is in the tree (the by-size key)
};

template <Pal P>
class HybridRuns : public RunManagerCore<HybridRuns<P>, HybridNode, P> {
  using Core = RunManagerCore<HybridRuns<P>, HybridNode, P>;
  friend Core;
  using SizeTree = rb::RbTree<BySizeThenAddress<HybridNode>, rb::NoAugment, TreeWorkCounter<>>;

 public:
  static constexpr const char* kName = "hybrid";
  constexpr explicit HybridRuns(P& pal) : Core(pal) {}

 private:
  HybridNode* find_fit(PageCount n) {
    if (HybridNode* node = by_size_[1].lower_bound({n.value(), 0})) return node;
    return by_size_[0].lower_bound({n.value(), 0});
  }

  void index_insert(HybridNode* node, PageCount pages) {
    node->pages = pages.value();
    by_size_[node->mostly_dirty].insert(node);
  }
  void index_remove(HybridNode* node, PageCount) { by_size_[node->mostly_dirty].erase(node); }

  FreeSpan left_neighbour(std::byte* chunk, PageIndex first) const {
    return this->free_run_ending_before(chunk, first);
  }
  FreeSpan right_neighbour(std::byte* chunk, PageIndex end) const {
    return this->free_run_starting_at(chunk, end);
  }

  template <class F>
  void for_each_free(F&& visit) const {
    for (const SizeTree& index : by_size_) {
      auto& tree = const_cast<SizeTree&>(index);
      for (HybridNode* n = tree.first(); n != nullptr; n = tree.next(n)) visit(this->span_at(n));
    }
  }

  const char* check_index() const {
    for (bool mostly_dirty : {false, true}) {
      if (const char* problem = by_size_[mostly_dirty].check_invariants()) return problem;
      auto& tree = const_cast<SizeTree&>(by_size_[mostly_dirty]);
      for (HybridNode* n = tree.first(); n != nullptr; n = tree.next(n)) {
        if (n->pages != this->span_at(n).pages.value())
          return "a tree node's length disagrees with its run's boundary tags";
        if (n->mostly_dirty != mostly_dirty)
          return "a run is among the mostly dirty runs or the others by mistake";
      }
    }
    return nullptr;
  }

  // [1]: the mostly dirty runs, searched first (run_manager_core.h); [0]: the others.
  SizeTree by_size_[2] = {SizeTree{TreeWorkCounter<>{&this->counters_mut()}},
                          SizeTree{TreeWorkCounter<>{&this->counters_mut()}}};
};

}  // namespace pagemalloc
