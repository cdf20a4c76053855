// What the run-manager tests share: the variants under test (every run manager over the fake
// OS layer), the seed, byte patterns written into live runs and checked after every step, and
// the invariant check as a googletest assertion.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <map>
#include <ostream>
#include <random>
#include <string>
#include <vector>

#include "pagemap/counters.h"
#include "pagemap/page_map.h"
#include "pagemap/pagemap_runs.h"
#include "pagemap/pages.h"
#include "pagemap/run_manager.h"
#include "pagemap/testing/pal_fake.h"
#include "rbtree/allocated_runs_tree.h"
#include "rbtree/hybrid_runs.h"
#include "rbtree/rbtree_runs.h"

namespace pagemalloc {

// Failure messages show page counts and indices as numbers (found by googletest through ADL).
inline void PrintTo(PageCount n, std::ostream* os) { *os << n.value() << " pages"; }
inline void PrintTo(PageIndex i, std::ostream* os) { *os << "page " << i.value(); }

namespace {

// googletest's fixtures have a member function named Run, which hides pagemalloc::Run inside
// test bodies.
using PageRun = ::pagemalloc::Run;

// The variants under test: every run manager meets the same contract.
// (AllocatedRunsTree is the rbtree variant with 2008's tree of allocated runs beside it.)
using RunManagerTypes = testing::Types<PagemapRuns<FakePal>, HybridRuns<FakePal>,
                                       RbtreeRuns<FakePal>, AllocatedRunsTree<RbtreeRuns<FakePal>>>;

static_assert(RunManager<PagemapRuns<FakePal>>);
static_assert(RunManager<HybridRuns<FakePal>>);
static_assert(RunManager<RbtreeRuns<FakePal>>);
static_assert(RunManager<AllocatedRunsTree<RbtreeRuns<FakePal>>>);

template <class Runs>
constexpr PageCount kUsablePages = Runs::Layout::kUsablePages;
template <class Runs>
constexpr PageIndex kFirstRunPage = Runs::Layout::kFirstRunPage;

inline std::uint64_t BaseSeed() {
  if (const char* text = std::getenv("PAGEMALLOC_TEST_SEED")) {
    return std::strtoull(text, nullptr, 0);
  }
  return 0x9e3779b97f4a7c15;
}

// --- Byte patterns --------------------------------------------------------------------------
//
// The first and last byte of every page of a live run hold values derived from the run's tag
// and the page's address, never zero. Because they depend on the address (not on the page's
// position in the run) they stay valid when a run loses its head or tail.

inline std::uint32_t PageNumber(const std::byte* page) {
  return static_cast<std::uint32_t>(reinterpret_cast<std::uintptr_t>(page) >> kLgPageSize);
}
inline std::uint8_t FirstBytePattern(std::uint8_t tag, const std::byte* page) {
  return static_cast<std::uint8_t>((tag * 131u + PageNumber(page) * 7u) % 255u + 1u);
}
inline std::uint8_t LastBytePattern(std::uint8_t tag, const std::byte* page) {
  return static_cast<std::uint8_t>((tag * 17u + PageNumber(page) * 13u + 101u) % 255u + 1u);
}

inline void FillPattern(PageRun run, std::uint8_t tag, std::size_t from_page = 0) {
  for (std::size_t i = from_page; i < run.pages.value(); ++i) {
    std::byte* page = run.base() + i * kPageSize;
    page[0] = std::byte{FirstBytePattern(tag, page)};
    page[kPageSize - 1] = std::byte{LastBytePattern(tag, page)};
  }
}

inline testing::AssertionResult HasPattern(PageRun run, std::uint8_t tag) {
  for (std::size_t i = 0; i < run.pages.value(); ++i) {
    const std::byte* page = run.base() + i * kPageSize;
    auto first = std::to_integer<unsigned>(page[0]);
    auto last = std::to_integer<unsigned>(page[kPageSize - 1]);
    if (first != FirstBytePattern(tag, page) || last != LastBytePattern(tag, page)) {
      return testing::AssertionFailure()
             << "page " << i << " of the run at " << static_cast<void*>(run.base()) << " ("
             << run.pages.value() << " pages) lost its pattern: first byte " << first << " (want "
             << unsigned(FirstBytePattern(tag, page)) << "), last byte " << last << " (want "
             << unsigned(LastBytePattern(tag, page)) << ")";
    }
  }
  return testing::AssertionSuccess();
}

// Every page's first and last byte is zero (the only bytes these tests ever write).
inline testing::AssertionResult ReadsZero(PageRun run) {
  for (std::size_t i = 0; i < run.pages.value(); ++i) {
    const std::byte* page = run.base() + i * kPageSize;
    if (page[0] != std::byte{0} || page[kPageSize - 1] != std::byte{0}) {
      return testing::AssertionFailure() << "page " << i << " of the run at "
                                         << static_cast<void*>(run.base()) << " is not zero";
    }
  }
  return testing::AssertionSuccess();
}

template <class Runs>
inline testing::AssertionResult InvariantsHold(const Runs& runs) {
  if (const char* problem = runs.check_invariants()) {
    return testing::AssertionFailure() << "check_invariants: " << problem;
  }
  return testing::AssertionSuccess();
}

}  // namespace
}  // namespace pagemalloc
