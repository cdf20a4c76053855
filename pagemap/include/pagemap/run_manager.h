// The run manager: the one seam of pagemalloc that comes in variants.
//
// A run manager owns the free runs of pages of one arena. It splits a free run to serve
// alloc(n), coalesces a freed run with its free neighbours, grows or shrinks a run in place
// using the free run after it, adds chunks when nothing fits, and returns pages to the OS
// once they have stayed free for the decay. Variants (docs/design.md, "The run manager"):
//
//   pagemap  page-map coalescing, size-segregated free lists with a bitmap   all O(1)
//   hybrid   page-map coalescing, (size, address) red-black tree            jemalloc after 2008
//   rbtree   address tree for coalescing, (size, address) tree for fit      jemalloc early 2008
//
// The allocator reaches the run manager only through this concept and the `Runs` alias that
// PAGEMALLOC_RUNS selects (allocator/), so a measured difference is the cost of free-run
// bookkeeping and nothing else.
#pragma once

#include <concepts>
#include <cstdint>
#include <string_view>

#include "pagemap/counters.h"
#include "pagemap/pages.h"

namespace pagemalloc {

struct AllocatedRun {
  Run run;      // !run when no memory could be had
  bool zeroed;  // every page reads as zero (never touched, or purged)
};

template <class R>
concept RunManager = requires(R& r, const R& cr, Run run, PageCount n, std::uint64_t ms) {
  { R::kName } -> std::convertible_to<std::string_view>;
  { r.alloc(n) } -> std::same_as<AllocatedRun>;         // Requires: 0 < n <= kMaxRunPages
  { r.free(run) } -> std::same_as<void>;                // an allocated run, whole
  { r.grow_in_place(run, n) } -> std::same_as<bool>;    // to n pages; false: left unchanged
  { r.shrink_in_place(run, n) } -> std::same_as<void>;  // to n pages, 0 < n <= run.pages
  { r.trim_head(run, n) } -> std::same_as<void>;        // frees the first n pages
  { r.advance_clock(ms) } -> std::same_as<void>;        // "now", in ms; never goes back
  { r.purge(ms) } -> std::same_as<PageCount>;           // runs free for >= ms go back to the OS
  { r.purge_oldest(n) } -> std::same_as<PageCount>;     // the oldest dirty runs, >= n pages
  { cr.free_pages() } -> std::same_as<PageCount>;
  { cr.dirty_pages() } -> std::same_as<PageCount>;
  { cr.chunks() } -> std::same_as<std::size_t>;
  { cr.record_bytes() } -> std::same_as<std::size_t>;      // its records' pools, mapped
  { cr.check_invariants() } -> std::same_as<const char*>;  // nullptr, or what is broken
  { cr.counters() } -> std::same_as<const RunCounterValues&>;
};

}  // namespace pagemalloc
