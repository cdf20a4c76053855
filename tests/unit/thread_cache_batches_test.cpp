// How many regions a thread cache moves per trip to its arena (thread_cache.h): half a bin's
// limit each way, but the whole limit for a bin that flows one way only. A bin refilled
// kProducerRefills times without a flush (a producer's) refills its whole limit; a bin flushed
// twice without a refill between (a consumer's) flushes all it holds; a bin left idle while
// the cache ticks flushes what it holds above its initial limit; a bin its thread never refilled
// holds at most its unrefilled limit, and its first refill leaves its outgoing regions outgoing.
// Each test runs on a fresh thread, whose bins start empty.
#include <gtest/gtest.h>

#include <pagemalloc/pagemalloc.h>

#include <thread>
#include <vector>

#include "design/size_classes.h"
#include "threads/thread_cache.h"

namespace {

using pagemalloc::ThreadCache;

constexpr std::size_t kSize = 320;  // a class the test harness itself does not use
constexpr unsigned kClass = pagemalloc::size_class_of(kSize);

// Runs body on a new thread, which has a cache of its own.
template <class Body>
void on_fresh_thread(Body body) {
  if (!pagemalloc::BuildConfig::kThreadCaches) GTEST_SKIP() << "a design without thread caches";
  std::thread thread([&] {
    body();
    pm_purge();
  });
  thread.join();
}

// count blocks of kSize, then a flush of the thread's cache (pm_purge) after the refills that
// gave them: the bin's next flush is not yet a consumer's.
std::vector<void*> allocated_then_flushed(std::size_t count) {
  std::vector<void*> blocks(count);
  for (void*& p : blocks) p = pm_malloc(kSize);
  pm_purge();
  return blocks;
}

TEST(ThreadCacheBatches, ABinRefilledWithoutAFlushTakesItsWholeLimitFromItsFourthRefillOn) {
  on_fresh_thread([] {
    const unsigned limit = ThreadCache::initial_limit(kClass);
    std::vector<void*> blocks;
    // Three refills of half the limit, each popped to the last region.
    for (unsigned i = 0; i < ThreadCache::kProducerRefills * (limit / 2); ++i)
      blocks.push_back(pm_malloc(kSize));
    const ThreadCache* cache = ThreadCache::current();
    ASSERT_NE(cache, nullptr);
    EXPECT_EQ(cache->cached(kClass), 0u);
    blocks.push_back(pm_malloc(kSize));  // the fourth refill
    EXPECT_EQ(cache->cached(kClass), limit - 1)
        << "a bin that only refilled took less than its limit";
    for (void* p : blocks) pm_free(p);
  });
}

TEST(ThreadCacheBatches, ABinFlushedWithoutARefillBetweenFlushesAllItHolds) {
  on_fresh_thread([] {
    const unsigned limit = ThreadCache::initial_limit(kClass);
    std::vector<void*> blocks = allocated_then_flushed(4 * limit);
    const ThreadCache* cache = ThreadCache::current();
    ASSERT_NE(cache, nullptr);  // a flush after refills: the next flush is not yet a consumer's
    unsigned freed = 0;
    while (freed < limit + 1) pm_free(blocks[freed++]);
    EXPECT_EQ(cache->cached(kClass), limit / 2 + 1)
        << "the first flush after a refill did not keep the warm half";
    while (freed < limit + 1 + (limit / 2 - 1)) pm_free(blocks[freed++]);
    EXPECT_EQ(cache->cached(kClass), limit);
    pm_free(blocks[freed++]);  // a second flush with no refill since the first
    EXPECT_EQ(cache->cached(kClass), 1u) << "a bin that only took frees kept half of them";
    while (freed < blocks.size()) pm_free(blocks[freed++]);
  });
}

// A refill ends a consumer's run: the thread allocates from the bin again, so the bin grows
// when it next overflows (thread_cache.h) instead of flushing whole.
TEST(ThreadCacheBatches, ARefillEndsAConsumersRunOfWholeFlushes) {
  on_fresh_thread([] {
    const unsigned limit = ThreadCache::initial_limit(kClass);
    std::vector<void*> blocks = allocated_then_flushed(4 * limit);
    const ThreadCache* cache = ThreadCache::current();
    ASSERT_NE(cache, nullptr);
    for (void* p : blocks) pm_free(p);            // flushes whole from the second flush on
    ASSERT_LE(cache->cached(kClass), limit / 2);  // flushes of half would keep more
    ASSERT_EQ(cache->limit(kClass), limit);
    for (void*& p : blocks) p = pm_malloc(kSize);  // refills
    for (void* p : blocks) pm_free(p);
    EXPECT_GT(cache->limit(kClass), limit) << "a bin refilled since its last flush did not grow";
  });
}

// A bin whose thread has never refilled it holds at most its unrefilled limit: a thread that
// frees the blocks of one that exited (whose granules it owns, so that they enter its bins,
// not its outgoing regions) and never allocates their class keeps no more of them than that.
// Its first refill opens the bin to its initial limit and takes half of it.
TEST(ThreadCacheBatches, ABinItsThreadNeverRefilledHoldsAtMostItsUnrefilledLimit) {
  if (!pagemalloc::BuildConfig::kThreadCaches) GTEST_SKIP() << "a design without thread caches";
  const unsigned initial = ThreadCache::initial_limit(kClass);
  const unsigned unrefilled = ThreadCache::unrefilled_limit(kClass);
  ASSERT_LT(unrefilled, initial);
  std::vector<void*> blocks;
  std::thread([&] { blocks = allocated_then_flushed(initial); }).join();  // made, then exited
  on_fresh_thread([&] {
    pm_free(pm_malloc(8));  // the thread's cache, and a refill of another class
    const ThreadCache* cache = ThreadCache::current();
    ASSERT_NE(cache, nullptr);
    ASSERT_EQ(cache->limit(kClass), unrefilled);
    for (void* p : blocks) pm_free(p);
    ASSERT_EQ(cache->outgoing(kClass), 0u) << "the frees were foreign: the test shows nothing";
    EXPECT_GT(cache->cached(kClass), 0u);
    EXPECT_LE(cache->cached(kClass), unrefilled)
        << "a bin never refilled held more than its unrefilled limit";
    // Its regions popped, the next allocation refills the bin: half its initial limit.
    std::vector<void*> popped(cache->cached(kClass) + 1);
    for (void*& p : popped) p = pm_malloc(kSize);
    EXPECT_EQ(cache->limit(kClass), initial);
    EXPECT_EQ(cache->cached(kClass), initial / 2 - 1);
    for (void* p : popped) pm_free(p);
  });
}

// The first refill opens the bin above the foreign regions waiting in it: they stay outgoing,
// to go home in their batch, and the refill does not hand one back to the thread that freed it.
TEST(ThreadCacheBatches, AFirstRefillLeavesTheBinsOutgoingRegionsOutgoing) {
  if (!pagemalloc::BuildConfig::kThreadCaches) GTEST_SKIP() << "a design without thread caches";
  const unsigned initial = ThreadCache::initial_limit(kClass);
  const unsigned unrefilled = ThreadCache::unrefilled_limit(kClass);
  void* handed = pm_malloc(kSize);  // the main thread's: foreign to the thread below
  on_fresh_thread([&] {
    pm_free(pm_malloc(8));  // the thread's cache, and a refill of another class
    const ThreadCache* cache = ThreadCache::current();
    ASSERT_NE(cache, nullptr);
    pm_free(handed);
    ASSERT_EQ(cache->outgoing(kClass), 1u) << "the free was not foreign: the test shows nothing";
    ASSERT_EQ(cache->limit(kClass), unrefilled - 1);
    void* own = pm_malloc(kSize);  // the bin's first refill
    EXPECT_NE(own, handed);
    EXPECT_EQ(cache->outgoing(kClass), 1u) << "the opening sent the outgoing region home";
    EXPECT_EQ(cache->limit(kClass), initial - 1);
    EXPECT_TRUE(cache->holds(kClass, handed));
    pm_free(own);
  });
}

// A bin refilled once since its last flush keeps its limit when it overflows (its count only
// wandered between a refill and a flush); refilled kGrowthRefills times, it grows.
TEST(ThreadCacheBatches, ABinGrowsOnlyAfterRefillsOfMoreThanOneBatch) {
  for (const unsigned refills : {1u, ThreadCache::kGrowthRefills}) {
    on_fresh_thread([refills] {
      const unsigned limit = ThreadCache::initial_limit(kClass);
      std::vector<void*> blocks = allocated_then_flushed(limit + 1);  // live; the bin empty
      const ThreadCache* cache = ThreadCache::current();
      ASSERT_NE(cache, nullptr);
      ASSERT_EQ(cache->cached(kClass), 0u);
      // `refills` refills of half the limit, each popped to the last region, then freed.
      std::vector<void*> popped((refills - 1) * (limit / 2) + 1);
      for (void*& p : popped) p = pm_malloc(kSize);
      for (void* p : popped) pm_free(p);
      for (void* p : blocks) pm_free(p);  // past the limit: an overflow
      if (refills < ThreadCache::kGrowthRefills)
        EXPECT_EQ(cache->limit(kClass), limit) << "a bin refilled once since its flush grew";
      else
        EXPECT_GT(cache->limit(kClass), limit)
            << "a bin refilled " << refills << " times since its flush did not grow";
    });
  }
}

// A bin that sees no push or pop while its cache ticks gives back all it holds, to its slabs
// (thread_cache.h): a thread that moved on to other sizes keeps neither the old ones' regions
// nor their slabs, which go back to the run manager (the bin's current slab too).
TEST(ThreadCacheBatches, AnIdleBinGivesBackAllItHoldsAndItsSlabs) {
  on_fresh_thread([] {
    constexpr std::size_t kOtherSize = 448;
    constexpr unsigned kOtherClass = pagemalloc::size_class_of(kOtherSize);
    static_assert(kOtherClass != kClass);
    const auto active = [] {
      pm_stats stats;
      pm_stats_get(&stats);
      return stats.active;
    };
    pm_free(pm_malloc(kOtherSize));  // the other class's bin and slab, before the count
    const std::size_t active_before = active();
    const unsigned limit = ThreadCache::initial_limit(kClass);
    std::vector<void*> blocks(2 * limit);
    for (void*& p : blocks) p = pm_malloc(kSize);  // refills: the bin grows when it overflows
    for (void* p : blocks) pm_free(p);
    const ThreadCache* cache = ThreadCache::current();
    ASSERT_NE(cache, nullptr);
    ASSERT_GT(cache->cached(kClass), limit) << "the bin did not grow";
    ASSERT_GT(active(), active_before);
    // Two looks at every bin: the first sees it as it is, the second finds it unchanged.
    const std::size_t passes = 2 * (pagemalloc::kNumClasses / ThreadCache::kIdleBinsPerTick + 1);
    for (std::size_t i = 0; i < (passes + 1) * pagemalloc::kDecayTickBinPushes; ++i)
      pm_free(pm_malloc(kOtherSize));
    EXPECT_EQ(cache->cached(kClass), 0u) << "an idle bin kept regions";
    EXPECT_GT(cache->cached(kOtherClass), 0u) << "the bin in use gave its regions back";
    EXPECT_EQ(active(), active_before) << "the idle class's slabs are still in use";
  });
}

}  // namespace
