// Where a thread cache keeps its stacks (thread_cache.h): every class's first stack in one
// packed area, so that a thread using many classes touches few pages of its record; a stack
// that grows a little moves to a second packed area, one that grows more to room of its own,
// and only a bin its thread refilled since its last flush grows. And the order it hands a refill
// out in: ascending addresses, as the slab holds them.
#include <gtest/gtest.h>

#include <pagemalloc/pagemalloc.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <thread>
#include <vector>

#include "design/size_classes.h"
#include "threads/thread_cache.h"

namespace {

using pagemalloc::kSizeClasses;
using pagemalloc::ThreadCache;

// Pages of [begin, begin + bytes) resident now.
std::size_t resident_pages(const void* begin, std::size_t bytes) {
  const std::size_t page = std::size_t(sysconf(_SC_PAGESIZE));
  const auto first = reinterpret_cast<std::uintptr_t>(begin) & ~(page - 1);
  const auto end = reinterpret_cast<std::uintptr_t>(begin) + bytes;
  std::vector<unsigned char> present((end - first + page - 1) / page);
  if (mincore(reinterpret_cast<void*>(first), end - first, present.data()) != 0) return ~0u;
  std::size_t n = 0;
  for (unsigned char p : present) n += p & 1;
  return n;
}

// A new thread's consecutive blocks of one class lie at ascending addresses, each right after
// the one before: what a program makes together stays together, in the order it was made
// (python ran 9-10 % faster than when a refill came out highest address first). Also in a
// design without thread caches, where the slab hands them out itself.
TEST(ThreadCacheLayout, ConsecutiveBlocksOfAClassLieAtAscendingAddresses) {
  constexpr std::size_t kSize = 1280;  // a class nothing else in this process uses
  constexpr unsigned kBlocks = 8;      // within a first refill of the class (half of 25)
  const std::size_t step = pm_nallocx(kSize, 0);
  std::vector<std::uintptr_t> addresses;
  std::thread thread([&] {
    std::vector<void*> blocks;
    for (unsigned i = 0; i < kBlocks; ++i) blocks.push_back(pm_malloc(kSize));
    for (void* p : blocks) addresses.push_back(reinterpret_cast<std::uintptr_t>(p));
    // Last first: regions freed come back last freed first (a stack, and the arena's stash
    // when the thread exits), so a repeat of this test in the process gets the same order.
    for (auto p = blocks.rbegin(); p != blocks.rend(); ++p) pm_free(*p);
  });
  thread.join();
  ASSERT_EQ(addresses.size(), kBlocks);
  for (unsigned i = 1; i < kBlocks; ++i)
    EXPECT_EQ(addresses[i], addresses[i - 1] + step) << "block " << i << " of " << kBlocks;
}

// A new thread that allocates and frees a block of each of 40 classes touches the pages of its
// record's header and of the packed area's first 40 stacks (about 7), not one page per class.
TEST(ThreadCacheLayout, ManyClassesTouchFewPagesOfTheRecord) {
  if (!pagemalloc::BuildConfig::kThreadCaches) GTEST_SKIP() << "a design without thread caches";
  std::size_t pages = 0;
  std::thread thread([&] {
    for (unsigned c = 0; c < 40; ++c) pm_free(pm_malloc(kSizeClasses[c].size));
    const ThreadCache* cache = ThreadCache::current();
    ASSERT_NE(cache, nullptr);
    pages = resident_pages(cache, sizeof(ThreadCache));
  });
  thread.join();
  EXPECT_LE(pages, 10u) << "a thread cache record touched a page per class used";
}

// A stack lies in the packed area of first stacks; when a thread frees more of its class than
// it holds, it grows: to the packed area of small growths while its limit is at most
// kPackedGrowth, then to the class's own room, and every block comes back.
TEST(ThreadCacheLayout, AGrowingStackMovesToPackedRoomThenToItsOwn) {
  if (!pagemalloc::BuildConfig::kThreadCaches) GTEST_SKIP() << "a design without thread caches";
  constexpr std::size_t kSize = 64;
  constexpr unsigned kClass = pagemalloc::size_class_of(kSize);
  static_assert(ThreadCache::initial_limit(kClass) * 2 <= pagemalloc::kPackedGrowth);
  constexpr std::size_t kFirstStacks =
      pagemalloc::kCacheInitialOffsets[pagemalloc::kNumClasses] * sizeof(void*);
  constexpr std::size_t kPackedGrowths = pagemalloc::kCachePackedGrowthSlots * sizeof(void*);
  std::thread thread([&] {
    std::vector<void*> blocks(1000);
    for (void*& p : blocks) p = pm_malloc(kSize);
    const ThreadCache* cache = ThreadCache::current();
    ASSERT_NE(cache, nullptr);
    EXPECT_EQ(cache->stack_offset(kClass),
              pagemalloc::kCacheInitialOffsets[kClass] * sizeof(void*));
    EXPECT_EQ(cache->limit(kClass), ThreadCache::initial_limit(kClass));
    std::size_t freed = 0;
    while (cache->limit(kClass) == ThreadCache::initial_limit(kClass)) pm_free(blocks[freed++]);
    EXPECT_GE(cache->stack_offset(kClass), kFirstStacks) << "grew: no longer in the first area";
    EXPECT_LT(cache->stack_offset(kClass), kFirstStacks + kPackedGrowths)
        << "a small growth: in the packed area of growths";
    while (freed < blocks.size()) pm_free(blocks[freed++]);
    EXPECT_GT(cache->limit(kClass), pagemalloc::kPackedGrowth);
    EXPECT_GE(cache->stack_offset(kClass), kFirstStacks + kPackedGrowths)
        << "a larger growth: in the class's own room";
    for (void*& p : blocks) {  // they come back from the stack, each once
      p = pm_malloc(kSize);
      ASSERT_NE(p, nullptr);
    }
    std::sort(blocks.begin(), blocks.end());
    EXPECT_EQ(std::adjacent_find(blocks.begin(), blocks.end()), blocks.end());
    // Last first: regions freed come back last freed first (a stack, and the arena's stash
    // when the thread exits), so a repeat of this test in the process gets the same order.
    for (auto p = blocks.rbegin(); p != blocks.rend(); ++p) pm_free(*p);
  });
  thread.join();
}

// A bin grows only for a thread that allocates from it: one whose regions all came back from
// a flush (pm_purge here; in a program, a thread that frees what another thread of its arena
// allocated) flushes half its stack when it fills instead of growing, so that a thread that only
// frees keeps no more than its first limit. The same frees after a refill grow it.
TEST(ThreadCacheLayout, ABinGrowsOnlyIfItsThreadRefilledItSinceItsLastFlush) {
  if (!pagemalloc::BuildConfig::kThreadCaches) GTEST_SKIP() << "a design without thread caches";
  constexpr std::size_t kSize = 64;
  constexpr unsigned kClass = pagemalloc::size_class_of(kSize);
  std::thread thread([&] {
    std::vector<void*> blocks(1000);
    for (void*& p : blocks) p = pm_malloc(kSize);
    const ThreadCache* cache = ThreadCache::current();
    ASSERT_NE(cache, nullptr);
    pm_purge();  // flushes the thread's cache: no refill since
    for (void* p : blocks) pm_free(p);
    EXPECT_EQ(cache->limit(kClass), ThreadCache::initial_limit(kClass))
        << "a bin that only took frees since its last flush grew";
    for (void*& p : blocks) p = pm_malloc(kSize);  // refills
    for (void* p : blocks) pm_free(p);
    EXPECT_GT(cache->limit(kClass), ThreadCache::initial_limit(kClass))
        << "a bin its thread refilled did not grow when the thread freed more than it held";
    pm_purge();
  });
  thread.join();
}

}  // namespace
