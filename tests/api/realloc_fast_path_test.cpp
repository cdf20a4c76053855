// realloc's inline path for small blocks (Heap::reallocate_small, reached by realloc and
// pm_realloc): a block resized within its class stays, one resized to another small class
// moves through the thread cache with its contents, and each move is counted in the
// statistics (moved, copied) also after the thread that made it has ended. Misuse still goes
// to the slow path, which reports it.
#include <gtest/gtest.h>

#include <cstddef>
#include <cstring>
#include <thread>

#include "pagemalloc/pagemalloc.h"

namespace {

pm_stats stats() {
  pm_stats s{};
  pm_stats_get(&s);
  return s;
}

void fill(void* p, std::size_t n, unsigned char seed) {
  auto* b = static_cast<unsigned char*>(p);
  for (std::size_t i = 0; i < n; ++i) b[i] = static_cast<unsigned char>(seed + i);
}

bool holds(const void* p, std::size_t n, unsigned char seed) {
  const auto* b = static_cast<const unsigned char*>(p);
  for (std::size_t i = 0; i < n; ++i)
    if (b[i] != static_cast<unsigned char>(seed + i)) return false;
  return true;
}

TEST(ReallocFastPath, ASizeInTheSameClassKeepsTheBlock) {
  void* p = pm_malloc(100);
  ASSERT_NE(p, nullptr);
  const std::size_t usable = pm_malloc_usable_size(p);
  fill(p, 100, 7);
  const pm_stats before = stats();
  EXPECT_EQ(pm_realloc(p, usable), p);
  EXPECT_EQ(pm_realloc(p, usable - 1), p);
  EXPECT_TRUE(holds(p, 100, 7));
  EXPECT_EQ(stats().moved, before.moved);
  pm_free(p);
}

TEST(ReallocFastPath, GrowingToAnotherClassMovesTheContentsAndCountsTheMove) {
  void* p = pm_malloc(24);
  ASSERT_NE(p, nullptr);
  const std::size_t old_usable = pm_malloc_usable_size(p);
  fill(p, old_usable, 3);
  const pm_stats before = stats();
  void* q = pm_realloc(p, 1000);
  ASSERT_NE(q, nullptr);
  EXPECT_NE(q, p);
  EXPECT_GE(pm_malloc_usable_size(q), 1000u);
  EXPECT_TRUE(holds(q, old_usable, 3));
  const pm_stats after = stats();
  EXPECT_EQ(after.moved, before.moved + 1);
  EXPECT_EQ(after.copied, before.copied + old_usable);
  pm_free(q);
}

TEST(ReallocFastPath, ShrinkingToAnotherClassCopiesOnlyTheNewSize) {
  void* p = pm_malloc(2000);
  ASSERT_NE(p, nullptr);
  fill(p, 2000, 11);
  const pm_stats before = stats();
  void* q = pm_realloc(p, 40);
  ASSERT_NE(q, nullptr);
  EXPECT_LT(pm_malloc_usable_size(q), 2000u);
  EXPECT_TRUE(holds(q, 40, 11));
  EXPECT_EQ(stats().copied, before.copied + 40);
  pm_free(q);
}

TEST(ReallocFastPath, TheOldBlockIsFreedAndServesTheNextRequestOfItsClass) {
  void* p = pm_malloc(48);
  ASSERT_NE(p, nullptr);
  void* q = pm_realloc(p, 3000);
  ASSERT_NE(q, nullptr);
  // The thread cache hands out the region it took last: the one realloc gave back.
  void* again = pm_malloc(48);
  EXPECT_EQ(again, p);
  pm_free(again);
  pm_free(q);
}

TEST(ReallocFastPath, GrowingPastTheSmallSizesLeavesTheInlinePathAndKeepsTheContents) {
  void* p = pm_malloc(512);
  ASSERT_NE(p, nullptr);
  fill(p, 512, 5);
  void* q = pm_realloc(p, 64 * 1024);
  ASSERT_NE(q, nullptr);
  EXPECT_TRUE(holds(q, 512, 5));
  pm_free(q);
}

TEST(ReallocFastPath, MovesOfAThreadThatEndedStayCounted) {
  const pm_stats before = stats();
  std::thread worker([] {
    void* p = pm_malloc(16);
    for (std::size_t size = 32; size <= 4096; size *= 2) p = pm_realloc(p, size);
    pm_free(p);
  });
  worker.join();
  // 16 -> 32 -> ... -> 4096: eight moves, each to a larger class.
  EXPECT_GE(stats().moved, before.moved + 8);
}

TEST(ReallocFastPathDeathTest, AReallocOfAFreedBlockIsReported) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      {
        void* p = pm_malloc(64);
        pm_free(p);
        pm_realloc(p, 2000);
      },
      "pm_realloc");
}

TEST(ReallocFastPathDeathTest, AReallocOfAPointerIntoABlockIsReported) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      {
        auto* p = static_cast<char*>(pm_malloc(64));
        pm_realloc(p + 16, 2000);
      },
      "not the start of a block");
}

}  // namespace
