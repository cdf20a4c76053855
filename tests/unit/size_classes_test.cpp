// Size classes and placement: every request maps to the smallest class that holds it, waste
// stays within the stated bounds, slab geometry is sound, the region-index magic is exact,
// and place() (which pm_nallocx reports) agrees with what an allocation really gets.
#include <gtest/gtest.h>

#include <cstdint>

#include "design/placement.h"
#include "design/size_classes.h"
#include "pagemalloc/pagemalloc.h"

namespace pagemalloc {
namespace {

TEST(SizeClasses, AreStrictlyIncreasingAndSixteenByteAlignedAboveEight) {
  for (std::size_t c = 1; c < kNumClasses; ++c) {
    EXPECT_LT(kSizeClasses[c - 1].size, kSizeClasses[c].size) << "class " << c;
    EXPECT_EQ(kSizeClasses[c].size % 16, 0u) << "class " << c;
  }
  EXPECT_EQ(kSizeClasses.front().size, 8u);
  EXPECT_EQ(kSizeClasses.back().size, kMaxSmallSize);
}

TEST(SizeClasses, EverySizeRoundTripsToTheSmallestClassThatHoldsIt) {
  for (std::size_t size = 1; size <= kMaxSmallSize; ++size) {
    const unsigned c = size_class_of(size);
    ASSERT_LT(c, kNumClasses) << "size " << size;
    ASSERT_GE(kSizeClasses[c].size, size) << "size " << size;
    if (c > 0) {
      ASSERT_LT(kSizeClasses[c - 1].size, size) << "size " << size;
    }
  }
}

TEST(SizeClasses, WasteIsAtMostAnEighthAbove128BytesAndUnderTheGranuleBelow) {
  for (std::size_t size = 1; size <= kMaxSmallSize; ++size) {
    const std::size_t block = kSizeClasses[size_class_of(size)].size;
    if (size > 128) {
      ASSERT_LE((block - size) * 8, block) << "size " << size << " -> " << block;
    } else {
      ASSERT_LT(block - size, 16u) << "size " << size << " -> " << block;
    }
  }
  // Page runs above the small sizes: whole pages, at most 20% waste above 16 KiB (16 KiB + 1
  // byte -> 5 pages). A design whose slabs end at 2 KiB wastes up to half below 16 KiB, as
  // jemalloc's did in 2008 (2 KiB + 1 byte -> 1 page). A medium request takes its class's
  // pages (design/medium_classes.h), at most an eighth past it with 8 classes per doubling.
  for (std::size_t size = kMaxSmallSize + 1; size <= 4 * 1024 * 1024; size += 4093) {
    const Placement where = place(size, 1);
    if (size <= BuildMediumClasses::kMaxMediumSize) {
      ASSERT_EQ(where.usable, BuildMediumClasses::rounded(size)) << "size " << size;
      ASSERT_EQ(where.usable % kPageSize, 0u) << "size " << size;
      ASSERT_GE(where.usable, size) << "size " << size;
      if (BuildConfig::kMediumClassesPerDoubling == 8) {
        ASSERT_LE((where.usable - size) * 8, where.usable) << "size " << size;
      }
      continue;
    }
    ASSERT_EQ(where.usable, PageCount::covering(size).bytes()) << "size " << size;
    if (size > 16384) {
      ASSERT_LE((where.usable - size) * 5, where.usable) << "size " << size;
    }
  }
}

TEST(SizeClasses, SlabsHoldBetweenOneAndFiveHundredTwelveRegionsWithLittleTail) {
  for (const SizeClass& sc : kSizeClasses) {
    const std::size_t bytes = std::size_t{sc.slab_pages} * kPageSize;
    EXPECT_GE(sc.slab_pages, 1u);
    EXPECT_LE(sc.slab_pages, kMaxSlabPages);
    EXPECT_EQ(sc.regions, bytes / sc.size) << "class " << sc.size;
    EXPECT_GE(sc.regions, 1u);
    EXPECT_LE(sc.regions, kMaxSlabRegions);
    EXPECT_LE((bytes % sc.size) * 8, bytes) << "class " << sc.size << ": tail over 1/8";
  }
}

// The classes above 16 KiB get slabs of up to kMaxSlabPages; those up to 16 KiB keep the
// geometry they had when they were the largest (at most kMaxSmallSlabPages).
TEST(SizeClasses, ClassesUpTo16KiBKeepSlabsOfAtMost16Pages) {
  for (const SizeClass& sc : kAllSizeClasses) {
    if (sc.size <= 16384) {
      EXPECT_LE(sc.slab_pages, kMaxSmallSlabPages) << "class " << sc.size;
    }
    EXPECT_LE(sc.slab_pages, kMaxSlabPages) << "class " << sc.size;
  }
}

TEST(SizeClasses, RegionIndexMagicIsExactForEveryOffsetInASlab) {
  for (const SizeClass& sc : kSizeClasses) {
    for (std::size_t offset = 0; offset < std::size_t{sc.slab_pages} * kPageSize; ++offset) {
      ASSERT_EQ(region_index(sc, offset), offset / sc.size) << "class " << sc.size;
    }
  }
}

TEST(Placement, AlignedSmallClassesKeepEveryRegionAligned) {
  for (std::size_t align = 1; align <= kPageSize; align *= 2) {
    for (std::size_t size = 1; size <= kMaxSmallSize; size += 7) {
      const Placement where = place(size, align);
      ASSERT_NE(where.kind, BlockKind::Invalid);
      ASSERT_GE(where.usable, size);
      if (where.kind == BlockKind::Small) {
        ASSERT_EQ(where.usable % align, 0u);
      }
    }
  }
}

// The smallest class that both holds the size and is a multiple of the alignment, as a search
// through every class finds it, in each table a design may build with.
template <class Table>
void expect_smallest_aligned_classes() {
  for (std::size_t align = 1; align <= kPageSize; align *= 2) {
    for (std::size_t size = 0; size <= Table::kMaxSmallSize + 64; size += size < 1024 ? 1 : 61) {
      unsigned expected = 0;
      while (expected < Table::kCount &&
             (Table::kClasses[expected].size < size || Table::kClasses[expected].size % align != 0))
        ++expected;
      ASSERT_EQ(Table::class_aligned(size, align), expected) << size << " aligned to " << align;
    }
  }
}

TEST(Placement, AnAlignedRequestTakesTheSmallestClassThatIsAMultipleOfItsAlignment) {
  expect_smallest_aligned_classes<SizeClassTable<2048>>();
  expect_smallest_aligned_classes<SizeClassTable<16384>>();
  expect_smallest_aligned_classes<SizeClassTable<65536>>();
}

TEST(Placement, KindsFollowTheThresholds) {
  EXPECT_EQ(place(0, 1).kind, BlockKind::Small);
  EXPECT_EQ(place(kMaxSmallSize, 1).kind, BlockKind::Small);
  EXPECT_EQ(place(kMaxSmallSize + 1, 1).kind, BlockKind::Large);
  EXPECT_EQ(place(kMaxRunPages.bytes(), 1).kind, BlockKind::Large);
  EXPECT_EQ(place(kMaxRunPages.bytes() + 1, 1).kind, BlockKind::Huge);
  EXPECT_EQ(place(SIZE_MAX, 1).kind, BlockKind::Invalid);
  EXPECT_EQ(place(100, std::size_t{1} << 13).kind, BlockKind::Large);
}

// The default design serves 16-64 KiB from slab classes (at most 1/8 rounding), not runs of
// whole pages; a block freed comes back from the thread's cache.
TEST(Placement, BlocksOf16To64KiBAreSlabRegionsInTheDefaultDesign) {
  if (kMaxSmallSize < 65536) GTEST_SKIP() << "a design whose slabs end below 64 KiB";
  for (std::size_t size : {16385ul, 20000ul, 40000ul, 65536ul}) {
    const Placement where = place(size, 1);
    EXPECT_EQ(where.kind, BlockKind::Small) << size;
    EXPECT_LE(where.usable, size + size / 8) << size;
    void* p = pm_malloc(size);
    ASSERT_NE(p, nullptr);
    EXPECT_EQ(pm_malloc_usable_size(p), where.usable) << size;
    pm_free(p);
    if (BuildConfig::kThreadCaches) {
      void* q = pm_malloc(size);
      EXPECT_EQ(q, p) << size << ": not the region just freed";
      pm_free(q);
    }
  }
}

TEST(Placement, NallocxIsWhatAnAllocationGets) {
  for (std::size_t size :
       {1ul, 17ul, 100ul, 1000ul, 16384ul, 16385ul, 100000ul, 2000000ul, 2100000ul, 9000000ul}) {
    for (int lg : {0, 4, 6, 12, 14}) {
      void* p = pm_mallocx(size, PM_LG_ALIGN(lg));
      ASSERT_NE(p, nullptr);
      EXPECT_EQ(pm_nallocx(size, PM_LG_ALIGN(lg)), pm_sallocx(p, 0)) << size << " lg " << lg;
      pm_dallocx(p, 0);
    }
  }
}

}  // namespace
}  // namespace pagemalloc
