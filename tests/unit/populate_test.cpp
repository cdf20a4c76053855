// The populate option (populate.h), through pm_stats's count of populated bytes and mincore:
// once an arena's slabs hold 8 MiB, a fresh slab of regions up to a page is populated; below
// 8 MiB of slabs, with the option off, a slab of larger regions and a large run are not. A
// realloc that moves a block into fresh pages populates those its copy fills. And the option
// through pm_ctl and PAGEMALLOC_CONF.
#include <gtest/gtest.h>
#include <sys/mman.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "design/size_classes.h"
#include "os/populate.h"
#include "pagemalloc/pagemalloc.h"
#include "pagemap/pages.h"
#include "resident_pages.h"
#include "support/options.h"

namespace {

constexpr std::size_t kPage = pagemalloc::kPageSize;
constexpr std::size_t kSlabBlock = 16384;
constexpr std::size_t kSlabBlockPages = kSlabBlock / kPage;
// Regions of 2 KiB (a small size in every design) and the bytes of their slab.
constexpr std::size_t kSmallRegion = 2048;
constexpr std::size_t kSmallRegionSlabBytes =
    pagemalloc::kSizeClasses[pagemalloc::size_class_of(kSmallRegion)].slab_pages * kPage;
static_assert(kSmallRegionSlabBytes > kPage);
// Slabs of a little more, and of half, what the arena must hold before it populates.
constexpr std::size_t kAboveThreshold = (pagemalloc::kPopulateAfterSlabPages + 256) * kPage;
constexpr std::size_t kBelowThreshold = pagemalloc::kPopulateAfterSlabPages / 2 * kPage;

using pagemalloc::test::resident_pages;

class Populate : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(pm_ctl("populate", &saved_, nullptr), 0);
    arena_ = pm_arena_create();
    ASSERT_NE(arena_, 0u);
  }
  void TearDown() override {
    EXPECT_EQ(pm_arena_destroy(arena_), 0);
    EXPECT_EQ(pm_ctl("populate", nullptr, &saved_), 0);
  }
  static void set_populate(long on) { ASSERT_EQ(pm_ctl("populate", nullptr, &on), 0); }
  static std::size_t populated() {
    pm_stats s{};
    pm_stats_get(&s);
    return s.populated;
  }
  void* alloc(std::size_t bytes) {
    void* p = pm_mallocx(bytes, PM_ARENA(arena_));
    EXPECT_NE(p, nullptr);
    return p;
  }
  // Blocks of 64 bytes in slabs of `bytes` in all, each written (as a program would).
  void fill_slabs(std::size_t bytes) {
    for (std::size_t i = 0; i < bytes / 64; ++i) *static_cast<char*>(alloc(64)) = 1;
  }
  // The bytes populated by the first block of 2 KiB in the arena, after slabs of `slab_bytes`,
  // with the option `on` or off.
  std::size_t populated_by_a_small_region(long on, std::size_t slab_bytes) {
    set_populate(on);
    fill_slabs(slab_bytes);
    const std::size_t before = populated();
    alloc(kSmallRegion);
    return populated() - before;
  }
  long saved_ = 1;
  unsigned arena_ = 0;
};

TEST_F(Populate, IsOnByDefault) { EXPECT_TRUE(pagemalloc::Options{}.populate.load()); }

TEST_F(Populate, AFreshSlabOfSmallRegionsIsPopulatedOnceTheArenaHoldsEnoughSlabs) {
  EXPECT_EQ(populated_by_a_small_region(1, kAboveThreshold), kSmallRegionSlabBytes);
}

TEST_F(Populate, NotBeforeTheArenaHoldsEnoughSlabs) {
  EXPECT_EQ(populated_by_a_small_region(1, kBelowThreshold), 0u);
}

TEST_F(Populate, NotWhenTheOptionIsOff) {
  EXPECT_EQ(populated_by_a_small_region(0, kAboveThreshold), 0u);
}

// A block of 16 KiB (a slab of four, 16 pages), not touched: its pages after the first (the
// allocator writes a region's first word) stay out of memory. A program with many buffers it
// barely uses would otherwise have them all resident.
TEST_F(Populate, ASlabOfRegionsLargerThanAPageIsLeftToFault) {
  set_populate(1);
  fill_slabs(kAboveThreshold);
  const std::size_t before = populated();
  void* p = alloc(kSlabBlock);
  EXPECT_EQ(resident_pages(static_cast<char*>(p) + kPage, kSlabBlockPages - 1), 0u);
  EXPECT_EQ(populated() - before, 0u);
}

// A large run may be touched at one byte in a thousand.
TEST_F(Populate, ALargeRunIsLeftToFault) {
  set_populate(1);
  fill_slabs(kAboveThreshold);
  const std::size_t before = populated();
  void* large = alloc(64 * kPage);
  EXPECT_EQ(resident_pages(large, 64), 0u);
  EXPECT_EQ(populated() - before, 0u);
}

// A large block moved by realloc into a fresh huge block: the pages the copy fills are
// populated first (pm_stats counts them), and not with the option off.
std::size_t populated_by_a_move_to_a_huge_block() {
  constexpr std::size_t kOld = std::size_t{256} << 10;
  auto* p = static_cast<unsigned char*>(pm_malloc(kOld));
  EXPECT_NE(p, nullptr);
  for (std::size_t i = 0; i < kOld; i += kPage) p[i] = static_cast<unsigned char>(i / kPage);
  pm_stats before{}, after{};
  pm_stats_get(&before);
  auto* q = static_cast<unsigned char*>(pm_realloc(p, std::size_t{64} << 20));
  pm_stats_get(&after);
  EXPECT_NE(q, nullptr);
  for (std::size_t i = 0; i < kOld; i += kPage)
    EXPECT_EQ(q[i], static_cast<unsigned char>(i / kPage)) << "page " << i / kPage;
  pm_free(q);
  return after.populated - before.populated;
}

TEST_F(Populate, AReallocCopyIntoFreshPagesPopulatesThemFirst) {
  set_populate(1);
  EXPECT_GE(populated_by_a_move_to_a_huge_block(), std::size_t{256} << 10);
}

TEST_F(Populate, AReallocCopyPopulatesNothingWithTheOptionOff) {
  set_populate(0);
  EXPECT_EQ(populated_by_a_move_to_a_huge_block(), 0u);
}

TEST_F(Populate, PmCtlReadsAndSetsIt) {
  set_populate(0);
  long value = -1;
  ASSERT_EQ(pm_ctl("populate", &value, nullptr), 0);
  EXPECT_EQ(value, 0);
  set_populate(7);
  ASSERT_EQ(pm_ctl("populate", &value, nullptr), 0);
  EXPECT_EQ(value, 1);
}

TEST_F(Populate, PagemallocConfTakesABooleanAndWarnsOfAnythingElse) {
  set_populate(1);
  ::testing::internal::CaptureStderr();
  pagemalloc::apply_conf("populate:false");
  EXPECT_EQ(::testing::internal::GetCapturedStderr(), "");
  EXPECT_FALSE(pagemalloc::options().populate.load());
  ::testing::internal::CaptureStderr();
  pagemalloc::apply_conf("populate:often");
  const std::string out = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(out.find("PAGEMALLOC_CONF: bad value in 'populate:often' ignored (populate takes "
                     "true, false, 1 or 0)"),
            std::string::npos)
      << out;
  EXPECT_FALSE(pagemalloc::options().populate.load());
}

}  // namespace
