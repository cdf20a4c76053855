// The large-run cache (large_run_cache.h): which run a request gets back and which the cache
// gives up, and, in the designs that have it (kLargeRunCache), that a freed large block comes
// back at the same length, that a second free of it is still reported, that a block grows in
// place into a cached run after it, and that the statistics count cached pages as free.
#include <gtest/gtest.h>

#include <pagemalloc/pagemalloc.h>

#include <cstddef>
#include <vector>

#include "arena/large_run_cache.h"
#include "heap/heap.h"

namespace {

using pagemalloc::LargeRunCache;
using pagemalloc::PageCount;

constexpr std::size_t kKiB = 1024;

// A fake run base: the cache never reads through it.
std::byte* base(std::size_t n) { return reinterpret_cast<std::byte*>(n << 12); }

struct GivenBack {
  std::vector<LargeRunCache::Entry> runs;
  auto sink() {
    return [this](const LargeRunCache::Entry& e) { runs.push_back(e); };
  }
};

TEST(LargeRunCache, TakesTheNewestRunOfExactlyTheLengthAsked) {
  LargeRunCache cache;
  GivenBack back;
  cache.put(base(1), PageCount(10), back.sink());
  cache.put(base(2), PageCount(20), back.sink());
  cache.put(base(3), PageCount(10), back.sink());
  EXPECT_EQ(cache.take(PageCount(10)).base, base(3));
  EXPECT_EQ(cache.take(PageCount(10)).base, base(1));
  EXPECT_EQ(cache.total_pages(), 20u);
  EXPECT_EQ(cache.take(PageCount(20)).base, base(2));
  EXPECT_TRUE(cache.empty());
  EXPECT_EQ(cache.take(PageCount(1)).base, nullptr) << "an empty cache has nothing to give";
  EXPECT_TRUE(back.runs.empty());
}

TEST(LargeRunCache, WithoutThatLengthTakesTheShortestLongerRun) {
  LargeRunCache cache;
  GivenBack back;
  cache.put(base(1), PageCount(30), back.sink());
  cache.put(base(2), PageCount(12), back.sink());
  cache.put(base(3), PageCount(8), back.sink());
  cache.put(base(4), PageCount(12), back.sink());
  const LargeRunCache::Entry taken = cache.take(PageCount(10));
  EXPECT_EQ(taken.base, base(4)) << "the shortest that is long enough, the newest of those";
  EXPECT_EQ(taken.pages, 12u) << "the whole run: the caller gives back the rest";
  EXPECT_EQ(cache.take(PageCount(13)).base, base(1));
  EXPECT_EQ(cache.take(PageCount(13)).base, nullptr) << "no run is long enough";
  EXPECT_EQ(cache.total_pages(), 20u);
  EXPECT_TRUE(back.runs.empty());
}

TEST(LargeRunCache, AFullCacheGivesBackItsOldestRun) {
  LargeRunCache cache;
  GivenBack back;
  for (std::size_t i = 0; i < LargeRunCache::kSlots; ++i)
    cache.put(base(i + 1), PageCount(1), back.sink());
  EXPECT_TRUE(back.runs.empty());
  cache.put(base(100), PageCount(2), back.sink());
  ASSERT_EQ(back.runs.size(), 1u);
  EXPECT_EQ(back.runs[0].base, base(1));
  EXPECT_EQ(cache.size(), LargeRunCache::kSlots);
  EXPECT_EQ(cache.total_pages(), LargeRunCache::kSlots + 1);
}

TEST(LargeRunCache, OldRunsGoBackUntilTheNewOneFitsTheTotal) {
  LargeRunCache cache;
  GivenBack back;
  const PageCount longest(LargeRunCache::kMaxPages);
  for (std::size_t i = 0; i < LargeRunCache::kMaxTotalPages / LargeRunCache::kMaxPages; ++i)
    cache.put(base(i + 1), longest, back.sink());
  EXPECT_EQ(cache.total_pages(), LargeRunCache::kMaxTotalPages);
  EXPECT_TRUE(back.runs.empty());
  cache.put(base(100), PageCount(3), back.sink());
  ASSERT_EQ(back.runs.size(), 1u);
  EXPECT_EQ(back.runs[0].base, base(1));
  EXPECT_EQ(cache.total_pages(), LargeRunCache::kMaxTotalPages - LargeRunCache::kMaxPages + 3);
  EXPECT_FALSE(LargeRunCache::fits(PageCount(LargeRunCache::kMaxPages + 1)));
}

TEST(LargeRunCache, EvictionAndFlushGoOldestFirst) {
  LargeRunCache cache;
  GivenBack back;
  for (std::size_t i = 1; i <= 4; ++i) cache.put(base(i), PageCount(i), back.sink());
  cache.evict_oldest(back.sink());
  ASSERT_EQ(back.runs.size(), 1u);
  EXPECT_EQ(back.runs[0].base, base(1));
  cache.flush(back.sink());
  ASSERT_EQ(back.runs.size(), 4u);
  EXPECT_EQ(back.runs[1].base, base(2));
  EXPECT_EQ(back.runs[3].base, base(4));
  EXPECT_TRUE(cache.empty());
  EXPECT_EQ(cache.total_pages(), 0u);
  cache.evict_oldest(back.sink());  // nothing left: nothing given back
  EXPECT_EQ(back.runs.size(), 4u);
}

// The allocator with its cache: an explicit arena, whose layout no other test's blocks touch.
class ArenaWithCache : public ::testing::Test {
 protected:
  void SetUp() override {
    if constexpr (!pagemalloc::BuildConfig::kLargeRunCache)
      GTEST_SKIP() << "this design returns every freed large block to its run manager";
    arena_ = pm_arena_create();
    ASSERT_NE(arena_, 0u);
  }
  void TearDown() override {
    if (arena_ != 0) {
      EXPECT_EQ(pagemalloc::heap().check_invariants(), nullptr);
      EXPECT_EQ(pm_arena_destroy(arena_), 0);
    }
  }
  void* allocate(std::size_t bytes) { return pm_mallocx(bytes, PM_ARENA(arena_)); }
  static pagemalloc::PageKind kind_of(const void* p) {
    return pagemalloc::page_entry(pagemalloc::chunk_base_of(p), pagemalloc::page_index_of(p))
        .kind();
  }
  unsigned arena_ = 0;
};

TEST_F(ArenaWithCache, AFreedBlockComesBackForTheSameLength) {
  void* p = allocate(128 * kKiB);
  ASSERT_NE(p, nullptr);
  pm_free(p);
  EXPECT_EQ(kind_of(p), pagemalloc::PageKind::Cached);
  EXPECT_EQ(pagemalloc::heap().check_invariants(), nullptr);
  void* again = allocate(128 * kKiB);
  EXPECT_EQ(again, p);
  EXPECT_EQ(kind_of(again), pagemalloc::PageKind::Large);
  pm_free(again);
}

TEST_F(ArenaWithCache, ALongerRequestGivesTheOldestCachedBlockBack) {
  void* p = allocate(128 * kKiB);
  ASSERT_NE(p, nullptr);
  pm_free(p);
  ASSERT_EQ(kind_of(p), pagemalloc::PageKind::Cached);
  void* other = allocate(200 * kKiB);
  ASSERT_NE(other, nullptr);
  EXPECT_NE(kind_of(p), pagemalloc::PageKind::Cached)
      << "back to the run manager, to be coalesced and cut again (perhaps for this request)";
  EXPECT_EQ(pagemalloc::heap().check_invariants(), nullptr);
  pm_free(other);
}

TEST_F(ArenaWithCache, AShorterRequestTakesACachedBlockAndGivesTheRestBack) {
  void* p = allocate(128 * kKiB);
  void* after = allocate(128 * kKiB);  // live: the rest cannot coalesce past it
  ASSERT_NE(p, nullptr);
  ASSERT_NE(after, nullptr);
  pm_free(p);
  ASSERT_EQ(kind_of(p), pagemalloc::PageKind::Cached);
  pm_arena_stats before{};
  ASSERT_EQ(pm_arena_stats_get(arena_, &before), 0);
  void* shorter = allocate(96 * kKiB);
  EXPECT_EQ(shorter, p) << "the cached block's first pages";
  EXPECT_EQ(kind_of(shorter), pagemalloc::PageKind::Large);
  EXPECT_EQ(pm_malloc_usable_size(shorter), 96 * kKiB) << "the length asked, as pm_nallocx says";
  EXPECT_EQ(pm_nallocx(96 * kKiB, 0), 96 * kKiB);
  EXPECT_EQ(kind_of(static_cast<std::byte*>(p) + 96 * kKiB), pagemalloc::PageKind::Free)
      << "the other 32 KiB are the run manager's again";
  pm_arena_stats taken{};
  ASSERT_EQ(pm_arena_stats_get(arena_, &taken), 0);
  EXPECT_EQ(taken.active, before.active + 96 * kKiB);
  EXPECT_EQ(pagemalloc::heap().check_invariants(), nullptr);
  pm_free(shorter);
  pm_free(after);
}

TEST_F(ArenaWithCache, CachedPagesCountAsFreeNotActive) {
  void* p = allocate(128 * kKiB);
  ASSERT_NE(p, nullptr);
  pm_arena_stats before{};
  ASSERT_EQ(pm_arena_stats_get(arena_, &before), 0);
  pm_free(p);
  ASSERT_EQ(kind_of(p), pagemalloc::PageKind::Cached);
  pm_arena_stats after{};
  ASSERT_EQ(pm_arena_stats_get(arena_, &after), 0);
  EXPECT_EQ(after.blocks, before.blocks - 1);
  EXPECT_EQ(after.active, before.active - 128 * kKiB);
}

TEST_F(ArenaWithCache, ABlockGrowsInPlaceIntoACachedBlockAfterIt) {
  auto* first = static_cast<std::byte*>(allocate(128 * kKiB));
  auto* second = static_cast<std::byte*>(allocate(128 * kKiB));
  ASSERT_EQ(second, first + 128 * kKiB) << "a fresh arena carves its runs one after another";
  pm_free(second);
  ASSERT_EQ(kind_of(second), pagemalloc::PageKind::Cached);
  void* grown = pm_rallocx(first, 256 * kKiB, PM_ALIGN(64) | PM_ARENA(arena_));
  EXPECT_EQ(grown, first) << "the cached block after it went back to the run manager first";
  pm_free(grown);
}

TEST_F(ArenaWithCache, AResetForgetsTheCachedBlocks) {
  void* p = allocate(64 * kKiB + 1);
  ASSERT_NE(p, nullptr);
  pm_free(p);
  ASSERT_EQ(kind_of(p), pagemalloc::PageKind::Cached);
  ASSERT_EQ(pm_arena_reset(arena_), 0);
  EXPECT_EQ(kind_of(p), pagemalloc::PageKind::Free);
  EXPECT_EQ(pagemalloc::heap().check_invariants(), nullptr);
  void* again = allocate(64 * kKiB + 1);
  ASSERT_NE(again, nullptr);
  pm_free(again);
}

TEST_F(ArenaWithCache, TheDecayTakesCachedBlocksBackWithTheFreeRuns) {
  long old_decay = 0;
  const long at_once = 0;
  ASSERT_EQ(pm_ctl("decay_ms", &old_decay, &at_once), 0);
  // A live block before it keeps the chunk mapped: with decay_ms:0 a tick may hand a chunk
  // with nothing live in it back to the system, and its page map with it.
  void* anchor = allocate(128 * kKiB);
  void* p = allocate(128 * kKiB);
  ASSERT_NE(anchor, nullptr);
  ASSERT_NE(p, nullptr);
  ASSERT_EQ(pagemalloc::chunk_base_of(p), pagemalloc::chunk_base_of(anchor));
  pm_free(p);
  ASSERT_EQ(kind_of(p), pagemalloc::PageKind::Cached);
  void* longer = allocate(512 * kKiB);  // too long to cache: the run manager's, after a tick
  ASSERT_NE(longer, nullptr);
  EXPECT_NE(kind_of(p), pagemalloc::PageKind::Cached) << "a tick with decay_ms:0 flushes it";
  pm_free(longer);
  pm_free(anchor);
  ASSERT_EQ(pm_ctl("decay_ms", nullptr, &old_decay), 0);
}

class ArenaWithCacheDeathTest : public ArenaWithCache {};

TEST_F(ArenaWithCacheDeathTest, ASecondFreeOfACachedBlockIsADoubleFree) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      {
        void* p = allocate(128 * kKiB);
        pm_free(p);
        pm_free(p);
      },
      "pagemalloc: pm_free\\(0x[0-9a-f]+\\): double free");
  EXPECT_DEATH(
      {
        void* p = allocate(128 * kKiB);
        pm_free(p);
        pm_malloc_usable_size(p);
      },
      "not a live block");
}

}  // namespace
