// The freed key: free writes it into a region's first word and takes a region whose first word
// holds it for a possible double free (thread_cache.h). A live block that holds the same value
// by chance must still be freed as any other: the slow path asks the thread's cache and the
// slab, finds the block in neither, and caches it. Nothing is reported, nothing is lost.
#include <gtest/gtest.h>

#include <pagemalloc/pagemalloc.h>

#include <cstdint>
#include <cstring>
#include <thread>
#include <vector>

#include "build_config.h"
#include "heap/heap.h"
#include "threads/thread_cache.h"

namespace {

constexpr std::uintptr_t kKey = pagemalloc::ThreadCache::freed_key();

void write_key(void* p) { std::memcpy(p, &kKey, sizeof(kKey)); }

TEST(FreedKey, IsAnImmediateThatNoPointerTakes) {
  EXPECT_EQ(std::intptr_t(kKey), std::int32_t(kKey));
  EXPECT_GT(kKey, std::uintptr_t{0xffff'8000'0000'0000});  // above every user-space address
  EXPECT_NE(kKey, ~std::uintptr_t{0});                     // not -1
}

TEST(FreedKey, ALiveBlockHoldingItIsFreedAndReused) {
  for (std::size_t size : {16, 64, 1000, 16384}) {
    void* p = pm_malloc(size);
    ASSERT_NE(p, nullptr);
    write_key(p);
    pm_free(p);  // not reported as a double free
    void* q = pm_malloc(size);
    EXPECT_EQ(q, p) << size;  // the cache's top, or the slab's first free region
    // A cache clears the mark of a region it hands out; without caches the block keeps the
    // value written into it, and its next free must not be reported either.
    if (pagemalloc::BuildConfig::kThreadCaches) {
      EXPECT_EQ(*static_cast<const std::uintptr_t*>(q), 0u) << size;
    }
    pm_free(q);
  }
}

TEST(FreedKey, BlocksHoldingItFreedByAnotherThreadAreNotLost) {
  pm_stats before{};
  pm_stats_get(&before);
  std::vector<void*> blocks;
  for (int i = 0; i < 512; ++i) {
    void* p = pm_malloc(48);
    ASSERT_NE(p, nullptr);
    write_key(p);
    blocks.push_back(p);
  }
  std::thread([&] {
    for (void* p : blocks) pm_free(p);
  }).join();
  pm_stats after{};
  pm_stats_get(&after);
  EXPECT_EQ(after.allocated, before.allocated);  // every block counted free again
  EXPECT_EQ(pagemalloc::heap().check_invariants(), nullptr);
}

}  // namespace
