// The trees the two tree run managers keep their free runs in, and how they count their work.
//
// A free run is indexed by its record (run_manager_core.h), which holds the run's address.
//
//   by size      key (pages, run address): lower_bound({n, 0}) is the best fit — the
//                smallest run of at least n pages, the lowest-addressed among equals
//                (jemalloc's runs_avail tree, 2008)
//   by address   key run address: the free runs just before and after a run are its
//                neighbours (jemalloc's early-2008 design, before the page map took over)
//
// The run length used as the key is kept in the node itself (`pages`), so a search never
// reads the page map. The observer adds tree nodes visited and rotations to the run
// manager's counters (counters.h), and so costs nothing when they are compiled out.
#pragma once

#include <compare>
#include <cstddef>
#include <cstdint>

#include "pagemap/counters.h"
#include "rbtree/rbtree.h"

namespace pagemalloc {

struct SizeLink : rb::RbLink {};     // membership of the by-size tree
struct AddressLink : rb::RbLink {};  // membership of the by-address tree

struct SizeAddressKey {
  std::size_t pages;
  std::uintptr_t address;
  friend auto operator<=>(const SizeAddressKey&, const SizeAddressKey&) = default;
};

// A run's address as the key of both trees' address component.
inline std::uintptr_t address_of(const void* run) { return reinterpret_cast<std::uintptr_t>(run); }

template <class Node>
struct BySizeThenAddress : rb::LinkAsBase<Node, SizeLink> {
  using Key = SizeAddressKey;
  static Key key(const Node& n) { return {n.pages, address_of(n.run)}; }
};

template <class Node>
struct ByAddress : rb::LinkAsBase<Node, AddressLink> {
  using Key = std::uintptr_t;
  static Key key(const Node& n) { return address_of(n.run); }
};

// A template over the counters' type, so that its name, like RunCounters', differs between
// code built with and without counting (counters.h).
template <class Counters = RunCounters>
struct TreeWorkCounter {
  Counters* counters;
  void visited() { counters->node_visited(); }
  void rotated() { counters->rotation(); }
};

}  // namespace pagemalloc
