// The decay's tick from ordinary calls (allocator/src/decay.h): a thread that keeps allocating
// and freeing small blocks, which its thread cache serves without any slow path, still has a
// freed run's pages and a freed huge block's extent returned to the OS about decay_ms after
// they were freed. The statistics read here do not tick the decay themselves.
#include <gtest/gtest.h>

#include <chrono>
#include <cstddef>
#include <cstdlib>
#include <cstring>

#include "build_config.h"
#include "design/placement.h"
#include "pagemalloc/pagemalloc.h"

namespace {

class DecayTicker : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(pm_ctl("decay_ms", &saved_decay_, nullptr), 0);
    const long decay = 100;
    ASSERT_EQ(pm_ctl("decay_ms", nullptr, &decay), 0);
    pm_free(pm_malloc(64));  // the thread's cache exists before the blocks below
  }
  void TearDown() override { pm_ctl("decay_ms", nullptr, &saved_decay_); }
  // A large run past the medium classes (a freed medium block would wait in the thread's bins),
  // within a chunk of every design's.
  static constexpr std::size_t kLargeRun =
      pagemalloc::BuildMediumClasses::kEnabled
          ? pagemalloc::BuildMediumClasses::kMaxMediumSize + 16 * pagemalloc::kPageSize
          : std::size_t{1} << 20;
  long saved_decay_ = 0;

  static pm_stats stats() {
    pm_stats s{};
    pm_stats_get(&s);
    return s;
  }

  // Small mallocs and frees (thread-cache hits only) until `purged` has grown by `bytes` or
  // 5 s have passed; returns the growth. The sizes are 16 + i % spread bytes: one class when
  // spread is 1 (every free goes into the same bin, whose count of pushes ticks the decay).
  static std::size_t small_calls_until_purged(std::size_t purged_before, std::size_t bytes,
                                              unsigned spread = 128) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    void* kept[16] = {};
    unsigned i = 0;
    while (std::chrono::steady_clock::now() < deadline) {
      for (int k = 0; k < 10000; ++k, ++i) {
        pm_free(kept[i % 16]);
        kept[i % 16] = pm_malloc(16 + i % spread);
      }
      if (stats().purged >= purged_before + bytes) break;
    }
    for (void* p : kept) pm_free(p);
    return stats().purged - purged_before;
  }
};

TEST_F(DecayTicker, SmallCallsReturnAFreedRunsPagesAfterTheDecay) {
  // Where a slab goes back to the run manager as soon as it empties (the 2008 designs:
  // presets.h), the small calls below keep taking slabs from the freed run and giving them
  // back: each merge makes the run freshly freed again, so it never ages past the decay.
  if (pagemalloc::BuildConfig::kReleaseCurrentSlab)
    GTEST_SKIP() << "slabs released and taken again beside the run keep it young";
  constexpr std::size_t kBlock = kLargeRun;
  auto* p = static_cast<char*>(pm_malloc(kBlock));
  ASSERT_NE(p, nullptr);
  std::memset(p, 1, kBlock);
  pm_free(p);
  const pm_stats before = stats();
  ASSERT_GE(before.dirty, kBlock);
  EXPECT_GE(small_calls_until_purged(before.purged, kBlock), kBlock);
  EXPECT_LT(stats().dirty, before.dirty);
}

TEST_F(DecayTicker, SmallCallsOfOneClassReturnAFreedRunsPagesAfterTheDecay) {
  if (pagemalloc::BuildConfig::kReleaseCurrentSlab)
    GTEST_SKIP() << "slabs released and taken again beside the run keep it young";
  constexpr std::size_t kBlock = kLargeRun;
  auto* p = static_cast<char*>(pm_malloc(kBlock));
  ASSERT_NE(p, nullptr);
  std::memset(p, 1, kBlock);
  pm_free(p);
  const pm_stats before = stats();
  EXPECT_GE(small_calls_until_purged(before.purged, kBlock, 1), kBlock);
}

// A block kept live holds the arena's chunk: where a slab goes back to the run manager as
// soon as it empties (the 2008 designs), the decay would otherwise release that chunk, and
// the small calls would take the next one from the freed huge block's extent (arena_chunks.h),
// whose granule is then the arena's, in use.
TEST_F(DecayTicker, SmallCallsReturnAFreedHugeBlockAfterTheDecay) {
  constexpr std::size_t kBlock = std::size_t{8} << 20;  // a huge block: its own mapping
  void* holds_the_chunk = pm_malloc(64);
  auto* p = static_cast<char*>(pm_malloc(kBlock));
  ASSERT_NE(p, nullptr);
  std::memset(p, 1, kBlock);
  pm_free(p);
  const pm_stats before = stats();
  EXPECT_GE(small_calls_until_purged(before.purged, kBlock), kBlock);
  pm_free(holds_the_chunk);
}

TEST_F(DecayTicker, NothingGoesBackWhenTheDecayIsOff) {
  const long never = -1;
  ASSERT_EQ(pm_ctl("decay_ms", nullptr, &never), 0);
  constexpr std::size_t kBlock = 1 << 19;  // a large run, whatever the chunk size
  auto* p = static_cast<char*>(pm_malloc(kBlock));
  ASSERT_NE(p, nullptr);
  std::memset(p, 1, kBlock);
  pm_free(p);
  const pm_stats before = stats();
  void* kept = nullptr;
  for (int i = 0; i < 200000; ++i) {
    pm_free(kept);
    kept = pm_malloc(32);
  }
  pm_free(kept);
  EXPECT_EQ(stats().purged, before.purged);
}

}  // namespace
