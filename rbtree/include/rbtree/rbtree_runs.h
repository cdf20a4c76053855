// The "rbtree" run manager: jemalloc's early-2008 design, the "overzealous" one.
//
// Every free run sits in two red-black trees: one ordered by address, searched to find the
// free runs just before and just after a run being freed (coalescing), and one ordered by
// (size, address), searched for the best fit. Each alloc and free therefore pays several
// O(log n) searches, inserts and erases, which "Overzealous use of my red-black tree hammer"
// (Evans, 2008) measured at up to ~10% of Firefox's speed before moving the neighbour search
// to the page map ("hybrid").
//
// The trees run through the free runs' records (run_manager_core.h), outside the chunks, and
// are keyed by the runs' addresses, so the searches are the same as over per-page nodes.
//
// The boundary tags are still written (the allocator reads the page map to free a pointer, in
// every variant); this variant only never uses them to find a neighbour.
#pragma once

#include <cstddef>

#include "pagemap/run_manager_core.h"
#include "rbtree/rbtree.h"
#include "rbtree/run_trees.h"

namespace pagemalloc {

struct RbtreeNode : RunRecord, SizeLink, AddressLink {
  std::size_t pages;  // the run's length while it is in the trees (the by-size key)
};

template <Pal P>
class RbtreeRuns : public RunManagerCore<RbtreeRuns<P>, RbtreeNode, P> {
  using Core = RunManagerCore<RbtreeRuns<P>, RbtreeNode, P>;
  friend Core;
  using SizeTree = rb::RbTree<BySizeThenAddress<RbtreeNode>, rb::NoAugment, TreeWorkCounter<>>;
  using AddressTree = rb::RbTree<ByAddress<RbtreeNode>, rb::NoAugment, TreeWorkCounter<>>;

 public:
  static constexpr const char* kName = "rbtree";
  constexpr explicit RbtreeRuns(P& pal) : Core(pal) {}

 private:
  RbtreeNode* find_fit(PageCount n) {
    if (RbtreeNode* node = by_size_[1].lower_bound({n.value(), 0})) return node;
    return by_size_[0].lower_bound({n.value(), 0});
  }

  void index_insert(RbtreeNode* node, PageCount pages) {
    node->pages = pages.value();
    by_size_[node->mostly_dirty].insert(node);
    by_address_.insert(node);
  }
  void index_remove(RbtreeNode* node, PageCount) {
    by_size_[node->mostly_dirty].erase(node);
    by_address_.erase(node);
  }

  // The free run with the highest address below page `first`, if it ends right there.
  FreeSpan left_neighbour(std::byte* chunk, PageIndex first) {
    const std::uintptr_t here = address_of(chunk + (first.value() << kLgPageSize));
    RbtreeNode* after = by_address_.lower_bound(here);
    RbtreeNode* before = after != nullptr ? by_address_.prev(after) : by_address_.last();
    if (before == nullptr || chunk_base_of(before->run) != chunk) return {};
    FreeSpan span = this->span_at(before);
    return span.end_index() == first ? span : FreeSpan{};
  }

  // The free run that starts at page `end`, if any.
  FreeSpan right_neighbour(std::byte* chunk, PageIndex end) {
    if (end >= PageIndex(kPagesPerChunk)) return {};
    RbtreeNode* at = by_address_.find(address_of(chunk + (end.value() << kLgPageSize)));
    return at != nullptr ? this->span_at(at) : FreeSpan{};
  }

  template <class F>
  void for_each_free(F&& visit) const {
    auto& tree = const_cast<AddressTree&>(by_address_);
    for (RbtreeNode* n = tree.first(); n != nullptr; n = tree.next(n)) visit(this->span_at(n));
  }

  const char* check_index() const {
    if (const char* problem = by_size_[0].check_invariants()) return problem;
    if (const char* problem = by_size_[1].check_invariants()) return problem;
    if (const char* problem = by_address_.check_invariants()) return problem;
    if (by_size_[0].size() + by_size_[1].size() != by_address_.size())
      return "the size trees and the address tree hold different runs";
    const char* problem = nullptr;
    for_each_free([&](FreeSpan s) {
      RbtreeNode* node = this->node_of(s);
      auto& by_size = const_cast<SizeTree&>(by_size_[node->mostly_dirty]);
      if (problem != nullptr) return;
      if (node->pages != s.pages.value())
        problem = "a tree node's length disagrees with its run's boundary tags";
      else if (by_size.find({node->pages, address_of(node->run)}) != node)
        problem = "a run in the address tree is missing from its size tree";
    });
    return problem;
  }

  // [1]: the mostly dirty runs, searched first (run_manager_core.h); [0]: the others.
  SizeTree by_size_[2] = {SizeTree{TreeWorkCounter<>{&this->counters_mut()}},
                          SizeTree{TreeWorkCounter<>{&this->counters_mut()}}};
  AddressTree by_address_{TreeWorkCounter<>{&this->counters_mut()}};
};

}  // namespace pagemalloc
