// Size 0 on the paths that serve it with a page run or a huge extent, found by the fuzz
// harness (tests/fuzz/).
//
// Size 0 asks for the smallest block (docs/design.md: "a distinct pointer that can be freed"),
// as place()
// (pm_nallocx) counts it: 1 byte. These are the paths that once handed the raw size on where
// the block is, or stays, a page run or an extent, and made a block of zero pages:
//
//   pm_mallocx(0, PM_ALIGN(a)), a > 4 KiB (and pm_aligned_alloc, pm_memalign,
//   pm_posix_memalign)                  a "block" of no pages, pm_sallocx 0
//   pm_rallocx(large, 0, PM_ALIGN(a))   a > 4 KiB keeps it large: the run resized to 0 pages
//                                       was freed while the block was live
//   pm_rallocx(huge, 0, PM_ALIGN(a))    a large enough to keep it huge: the extent given away
//   pm_xallocx(large, 0, 0, 0)          size + extra = 0: the run resized to 0 pages
//   pm_xallocx(huge, 0, 0, 0)           the extent resized to 0 bytes
//
// Each must leave a live block of at least one byte and a heap whose invariants hold.
#include <gtest/gtest.h>

#include <pagemalloc/pagemalloc.h>

#include <cstddef>

#include "heap/heap_invariants.h"

namespace {

constexpr std::size_t KiB = 1024;
constexpr std::size_t MiB = 1024 * KiB;

// The block asked for with size 0 is a live block of at least one byte, and the heap is intact.
void expect_live_and_heap_intact(void* p) {
  ASSERT_NE(p, nullptr);
  const char* problem = pagemalloc::check_heap_invariants();
  EXPECT_EQ(problem, nullptr) << problem;
  EXPECT_GE(pm_sallocx(p, 0), 1u);
  pm_free(p);
  problem = pagemalloc::check_heap_invariants();
  EXPECT_EQ(problem, nullptr) << problem;
}

TEST(SizeZero, MallocxAlignedAboveAPage) {
  expect_live_and_heap_intact(pm_mallocx(0, PM_ALIGN(8 * KiB)));
}

TEST(SizeZero, AlignedAllocAndPosixMemalignAboveAPage) {
  expect_live_and_heap_intact(pm_aligned_alloc(64 * KiB, 0));
  void* p = nullptr;
  ASSERT_EQ(pm_posix_memalign(&p, 8 * KiB, 0), 0);
  expect_live_and_heap_intact(p);
}

TEST(SizeZero, RallocxOfAnAlignedLargeBlock) {
  void* p = pm_mallocx(100 * KiB, PM_ALIGN(64 * KiB));
  ASSERT_NE(p, nullptr);
  expect_live_and_heap_intact(pm_rallocx(p, 0, PM_ALIGN(64 * KiB)));
}

TEST(SizeZero, RallocxOfAnAlignedHugeBlock) {
  void* p = pm_mallocx(5 * MiB, PM_ALIGN(8 * MiB));
  ASSERT_NE(p, nullptr);
  expect_live_and_heap_intact(pm_rallocx(p, 0, PM_ALIGN(8 * MiB)));
}

TEST(SizeZero, XallocxOfALargeBlock) {
  void* p = pm_malloc(100 * KiB);
  ASSERT_NE(p, nullptr);
  EXPECT_GE(pm_xallocx(p, 0, 0, 0), 1u);
  expect_live_and_heap_intact(p);
}

TEST(SizeZero, XallocxOfAHugeBlock) {
  void* p = pm_malloc(5 * MiB);
  ASSERT_NE(p, nullptr);
  EXPECT_GE(pm_xallocx(p, 0, 0, 0), 1u);
  expect_live_and_heap_intact(p);
}

}  // namespace
