// AllocatedRunsTree<Inner>: a run manager that does what Inner does and, beside it, keeps
// every allocated run in a red-black tree ordered by address, as jemalloc did from January to
// July 2008 (`runs_alloced_ad`, FreeBSD malloc.c 1.161-1.162, the version Firefox 3.0
// shipped): inserted when a run is allocated, found and erased when it is freed, found when a
// run grows, shrinks or loses its head, and searched for a large block's length
// (pages_of: jemalloc's arena_salloc and arena_dalloc_large read it there, where the page
// map serves pagemalloc). The 2008 fix removed it with the address tree of free runs.
//
// The tree's nodes come from a pool of their own (record_pool.h), reserved before a run is
// taken so that a free never needs memory; the node visits and rotations count in Inner's
// counters, as its own trees' do.
#pragma once

#include <cstddef>

#include "pagemap/record_pool.h"
#include "pagemap/run_manager.h"
#include "rbtree/rbtree.h"
#include "rbtree/run_trees.h"

namespace pagemalloc {

struct AllocatedRunNode : AddressLink {
  std::byte* run;     // the run's first byte (the key)
  std::size_t pages;  // its length
};

template <RunManager Inner>
class AllocatedRunsTree {
  using Tree = rb::RbTree<ByAddress<AllocatedRunNode>, rb::NoAugment, TreeWorkCounter<>>;

 public:
  static constexpr auto kName = Inner::kName;
  using Layout = typename Inner::Layout;

  template <class P>
  constexpr explicit AllocatedRunsTree(P& pal)
      : inner_(pal), tree_(TreeWorkCounter<>{&inner_.counters_mut()}) {}

  AllocatedRun alloc(PageCount n) {
    if (!nodes_.reserve(nodes_.in_use() + 1)) return {Run{}, false};
    const AllocatedRun result = inner_.alloc(n);
    if (!result.run) return result;
    AllocatedRunNode* node = nodes_.take();
    node->run = result.run.base();
    node->pages = n.value();
    tree_.insert(node);
    return result;
  }

  void free(Run run) {
    forget(run.base());
    inner_.free(run);
  }

  bool grow_in_place(Run run, PageCount n) {
    if (!inner_.grow_in_place(run, n)) return false;
    find(run.base())->pages = n.value();
    return true;
  }

  void shrink_in_place(Run run, PageCount n) {
    inner_.shrink_in_place(run, n);
    find(run.base())->pages = n.value();
  }

  void trim_head(Run run, PageCount n) {
    if (n.value() == 0 || n >= run.pages) return;
    inner_.trim_head(run, n);
    AllocatedRunNode* node = find(run.base());
    tree_.erase(node);  // its key changes: out and in again
    node->run = run.base() + n.bytes();
    node->pages = (run.pages - n).value();
    tree_.insert(node);
  }

  // The length of the allocated run that starts at `base`, by a search of the tree; 0 pages
  // when no allocated run starts there.
  PageCount pages_of(const void* base) {
    const AllocatedRunNode* node = tree_.find(address_of(base));
    return PageCount(node != nullptr ? node->pages : 0);
  }

  void advance_clock(std::uint64_t now_ms) { inner_.advance_clock(now_ms); }
  constexpr void set_dirty_runs_first(bool on) { inner_.set_dirty_runs_first(on); }
  // A purge also gives back the nodes' pool when no run is allocated (an arena reset or
  // destroyed keeps no block of it mapped).
  PageCount purge(std::uint64_t min_age_ms) {
    release_nodes_if_unused();
    return inner_.purge(min_age_ms);
  }
  PageCount purge_oldest(PageCount at_least) {
    release_nodes_if_unused();
    return inner_.purge_oldest(at_least);
  }

  [[nodiscard]] PageCount free_pages() const { return inner_.free_pages(); }
  [[nodiscard]] PageCount dirty_pages() const { return inner_.dirty_pages(); }
  [[nodiscard]] std::size_t chunks() const { return inner_.chunks(); }
  [[nodiscard]] std::size_t record_bytes() const {
    return inner_.record_bytes() + nodes_.mapped_bytes();
  }
  [[nodiscard]] const RunCounterValues& counters() const { return inner_.counters(); }
  constexpr RunCounters& counters_mut() { return inner_.counters_mut(); }

  [[nodiscard]] const char* check_invariants() const {
    if (const char* problem = inner_.check_invariants()) return problem;
    if (const char* problem = tree_.check_invariants()) return problem;
    if (tree_.size() != nodes_.in_use()) return "the allocated-runs tree lost a node";
    auto& tree = const_cast<Tree&>(tree_);
    const std::byte* end_of_previous = nullptr;
    for (AllocatedRunNode* n = tree.first(); n != nullptr; n = tree.next(n)) {
      if (n->pages == 0) return "an allocated run of no pages in the allocated-runs tree";
      if (n->run < end_of_previous) return "allocated runs in the tree overlap";
      end_of_previous = n->run + PageCount(n->pages).bytes();
    }
    return nullptr;
  }

 private:
  AllocatedRunNode* find(const void* base) { return tree_.find(address_of(base)); }
  void release_nodes_if_unused() {
    if (nodes_.in_use() == 0 && nodes_.mapped_bytes() != 0) nodes_.release_all();
  }
  void forget(const void* base) {
    AllocatedRunNode* node = find(base);
    tree_.erase(node);
    nodes_.give(node);
  }

  Inner inner_;
  Tree tree_;
  RecordPool<AllocatedRunNode> nodes_;
};

}  // namespace pagemalloc
