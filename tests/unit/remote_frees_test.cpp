// Blocks freed by a thread other than their arena's: small regions through the arena's inbox
// (remote_frees.h), collected by the arena's next refill of the class; large blocks deferred
// when another thread holds the arena's lock, and freed by whoever takes it next (arena.h).
// Nothing is lost either way, and a block freed twice is still reported as a double free.
#include <gtest/gtest.h>

#include <pagemalloc/pagemalloc.h>

#include <algorithm>
#include <memory>
#include <set>
#include <thread>
#include <vector>

#include "arena/arena.h"
#include "arena/remote_frees.h"
#include "heap/heap.h"
#include "threads/thread_cache.h"

namespace {

using pagemalloc::Arena;
using pagemalloc::PageCount;

// ---------------------------------------------------------------------------------------------
// The inbox alone.

TEST(RemoteFrees, TakesEveryRegionPushedInBatches) {
  std::vector<std::unique_ptr<std::byte[]>> storage;
  std::vector<void*> regions;
  for (int i = 0; i < 100; ++i) {
    storage.push_back(std::make_unique<std::byte[]>(32));
    regions.push_back(storage.back().get());
  }
  pagemalloc::RemoteFrees inbox;
  EXPECT_FALSE(inbox.maybe_nonempty());
  EXPECT_EQ(inbox.push(regions.data(), 1), 1u);
  EXPECT_EQ(inbox.push(regions.data() + 1, 60), 61u);
  EXPECT_EQ(inbox.push(regions.data() + 61, 39), 100u);
  EXPECT_TRUE(inbox.maybe_nonempty());
  std::set<void*> taken;
  inbox.take_all([&](void* p) { EXPECT_TRUE(taken.insert(p).second) << "taken twice"; });
  EXPECT_EQ(taken, std::set<void*>(regions.begin(), regions.end()));
  EXPECT_EQ(inbox.count(), 0u);
  EXPECT_FALSE(inbox.maybe_nonempty());
}

TEST(RemoteFrees, ConcurrentPushersLoseNothing) {
  constexpr int kThreads = 4, kPerThread = 5000;
  std::vector<std::unique_ptr<std::byte[]>> storage(kThreads * kPerThread);
  for (auto& s : storage) s = std::make_unique<std::byte[]>(16);
  pagemalloc::RemoteFrees inbox;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kPerThread; i += 5) {
        void* batch[5];
        for (int k = 0; k < 5; ++k) batch[k] = storage[t * kPerThread + i + k].get();
        inbox.push(batch, 5);
      }
    });
  }
  std::size_t taken = 0;
  while (taken < storage.size()) inbox.take_all([&](void*) { ++taken; });
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(taken, storage.size());
}

// ---------------------------------------------------------------------------------------------
// An arena's inbox of small regions.

TEST(ArenaRemoteFrees, ARefillHandsOutTheRegionsOtherThreadsFreed) {
  auto arena = std::make_unique<Arena>(4001);
  constexpr unsigned kClass = 3;  // 48 bytes
  void* regions[64];
  ASSERT_EQ(arena->alloc_batch(kClass, regions, 64), 64u);
  const std::size_t allocated = arena->stats().allocated;
  std::thread other([&] { arena->free_remote(regions, 64); });
  other.join();
  void* again[64];
  ASSERT_EQ(arena->alloc_batch(kClass, again, 64), 64u);
  EXPECT_EQ(std::set<void*>(regions, regions + 64), std::set<void*>(again, again + 64))
      << "the refill takes the inbox before any slab";
  EXPECT_EQ(arena->stats().allocated, allocated);
  EXPECT_EQ(arena->check_blocks(), nullptr);
}

TEST(ArenaRemoteFrees, StatisticsCollectTheInbox) {
  auto arena = std::make_unique<Arena>(4002);
  void* regions[10];
  ASSERT_EQ(arena->alloc_batch(5, regions, 10), 10u);
  const std::size_t before = arena->stats().allocated;
  arena->free_remote(regions, 10);
  EXPECT_EQ(arena->stats().allocated, before - 10 * pagemalloc::kSizeClasses[5].size);
  EXPECT_EQ(arena->check_blocks(), nullptr);
}

TEST(ArenaRemoteFrees, AFullInboxIsCollectedByItsPusher) {
  auto arena = std::make_unique<Arena>(4003);
  constexpr unsigned kClass = 20;
  const std::size_t size = pagemalloc::kSizeClasses[kClass].size;
  const unsigned n = unsigned(Arena::kRemoteCollectBytes / size) + 1;
  std::vector<void*> regions(n);
  unsigned got = 0;
  while (got < n) got += arena->alloc_batch(kClass, regions.data() + got, n - got);
  // Pushed in batches of one: the push that reaches the bound collects the inbox (the lock is
  // free), so no region is left waiting in it.
  for (void* p : regions) arena->free_remote(&p, 1);
  void* probe = nullptr;
  ASSERT_EQ(arena->alloc_batch(kClass, &probe, 1), 1u);
  arena->free_batch(&probe, 1, "test");
  EXPECT_EQ(arena->check_blocks(), nullptr);
  EXPECT_EQ(arena->stats().allocated, 0u);
}

// Through the heap: a thread of another arena frees, its cache flushes to the owner's inbox.
TEST(ArenaRemoteFrees, BlocksFreedByAnotherThreadComeBackToTheirArena) {
  std::vector<void*> blocks(5000);
  for (void*& p : blocks) p = pm_malloc(64);
  std::thread other([&] {
    // This thread's arena differs from the main thread's when there are several arenas.
    for (void* p : blocks) pm_free(p);
    // Flushes this thread's cache: the foreign regions go to the owner's inbox. (Without
    // caches each went to its arena at once, and a purge would unmap what is to be reused.)
    if (pagemalloc::BuildConfig::kThreadCaches) pm_purge();
  });
  other.join();
  const char* problem = pagemalloc::heap().check_invariants();
  EXPECT_EQ(problem, nullptr) << problem;
  // Collected by the statistics, and reused: allocating as many again maps nothing more.
  pm_stats before{};
  pm_stats_get(&before);
  EXPECT_LT(before.allocated, 5000u * 64);
  for (void*& p : blocks) p = pm_malloc(64);
  pm_stats after{};
  pm_stats_get(&after);
  EXPECT_EQ(after.mapped, before.mapped);
  for (void* p : blocks) pm_free(p);
}

// What a thread other than the main one saw while it freed the main thread's blocks: its
// arena, and the most the thread caches held above what they held before its first free.
struct FreedElsewhere {
  const pagemalloc::Arena* arena = nullptr;
  std::size_t most_cached = 0;
};

// On a new thread: `first` (which gives the thread its cache and arena), a free of every
// block, `last`, and a flush of the thread's cache.
template <class First, class Last>
FreedElsewhere free_elsewhere(const std::vector<void*>& blocks, First first, Last last) {
  FreedElsewhere seen;
  std::thread other([&] {
    first();
    seen.arena = pagemalloc::ThreadCache::current()->arena();
    const std::size_t before = pagemalloc::ThreadCache::bytes_cached_by_all();
    for (void* p : blocks) {
      pm_free(p);
      const std::size_t now = pagemalloc::ThreadCache::bytes_cached_by_all();
      seen.most_cached = std::max(seen.most_cached, now > before ? now - before : 0);
    }
    last();
    pm_purge();
  });
  other.join();
  return seen;
}

std::vector<void*> allocate_blocks(std::size_t count, std::size_t size) {
  std::vector<void*> blocks(count);
  for (void*& p : blocks) p = pm_malloc(size);
  return blocks;
}

// A thread that only frees other arenas' blocks keeps few of them: its cache's bin for them
// does not grow past its first limit (it flushes them to their owners instead).
TEST(ArenaRemoteFrees, AThreadFreeingOthersBlocksDoesNotGrowItsCache) {
  if (!pagemalloc::BuildConfig::kThreadCaches)
    GTEST_SKIP() << "a design without thread caches frees every block to its arena at once";
  constexpr std::size_t kSize = 64;
  constexpr unsigned kClass = pagemalloc::size_class_of(kSize);
  const std::vector<void*> blocks = allocate_blocks(5000, kSize);
  ASSERT_GT(pagemalloc::heap().automatic_arena_count(), 1u);
  const pagemalloc::Arena* mine = pagemalloc::ThreadCache::current()->arena();
  const FreedElsewhere seen = free_elsewhere(
      blocks, [] { pm_free(pm_malloc(kSize)); }, [] {});
  ASSERT_NE(mine, seen.arena) << "the threads should have different arenas";
  EXPECT_LE(seen.most_cached, pagemalloc::ThreadCache::initial_limit(kClass) * kSize)
      << "5000 foreign blocks freed: the bin should flush at its first limit, not grow";
}

// In a larger class, the foreign regions a thread keeps are fewer still: 8 KiB worth, not its
// cache's first limit (32 KiB worth), so that a consumer of many classes holds little of each.
TEST(ArenaRemoteFrees, AThreadKeepsAtMostAForeignLimitOfOthersBlocks) {
  if (!pagemalloc::BuildConfig::kThreadCaches)
    GTEST_SKIP() << "a design without thread caches frees every block to its arena at once";
  constexpr std::size_t kSize = 1024;
  constexpr unsigned kClass = pagemalloc::size_class_of(kSize);
  static_assert(pagemalloc::ThreadCache::foreign_limit(kClass) <
                pagemalloc::ThreadCache::initial_limit(kClass));
  const std::vector<void*> blocks = allocate_blocks(2000, kSize);
  ASSERT_GT(pagemalloc::heap().automatic_arena_count(), 1u);
  const pagemalloc::Arena* mine = pagemalloc::ThreadCache::current()->arena();
  // The thread's own block is of another class: its 1 KiB bin never refills.
  const FreedElsewhere seen = free_elsewhere(
      blocks, [] { pm_free(pm_malloc(8)); }, [] {});
  ASSERT_NE(mine, seen.arena) << "the threads should have different arenas";
  EXPECT_LE(seen.most_cached, pagemalloc::ThreadCache::foreign_limit(kClass) * kSize)
      << "a thread freeing others' 1 KiB blocks kept more of them than its foreign limit";
}

// A thread whose bin of a class is full of its own regions, freeing another arena's block,
// flushes the older half of its own and keeps the block among its outgoing regions, which
// go back to their own arena, not into the thread's arena's stash.
TEST(ArenaRemoteFrees, AForeignFreeIntoAFullBinKeepsItOutgoingAndItGoesHome) {
  if (!pagemalloc::BuildConfig::kThreadCaches)
    GTEST_SKIP() << "a design without thread caches frees every block to its arena at once";
  constexpr std::size_t kSize = 320;
  constexpr unsigned kClass = pagemalloc::size_class_of(kSize);
  const unsigned limit = pagemalloc::ThreadCache::initial_limit(kClass);
  void* foreign = pm_malloc(kSize);
  ASSERT_GT(pagemalloc::heap().automatic_arena_count(), 1u);
  const pagemalloc::Arena* mine = pagemalloc::ThreadCache::current()->arena();
  const std::size_t mine_allocated = pagemalloc::ThreadCache::current()->arena()->stats().allocated;
  const pagemalloc::Arena* theirs = nullptr;
  std::thread other([&] {
    const std::vector<void*> own = allocate_blocks(2 * limit, kSize);
    const pagemalloc::ThreadCache* cache = pagemalloc::ThreadCache::current();
    theirs = cache->arena();
    pm_purge();
    for (unsigned i = 0; i < limit; ++i) pm_free(own[i]);
    ASSERT_EQ(cache->cached(kClass), limit);
    pm_free(foreign);  // a full bin: its older half goes back, the block waits outgoing
    EXPECT_EQ(cache->cached(kClass), limit - limit / 2);
    EXPECT_EQ(cache->outgoing(kClass), 1u);
    pm_purge();
    EXPECT_EQ(cache->outgoing(kClass), 0u);
    for (unsigned i = limit; i < own.size(); ++i) pm_free(own[i]);
    pm_purge();
  });
  other.join();
  ASSERT_NE(mine, theirs) << "the threads should have different arenas";
  // Home: the main thread's arena counts the block as free again.
  EXPECT_EQ(pagemalloc::ThreadCache::current()->arena()->stats().allocated, mine_allocated - kSize);
  const char* problem = pagemalloc::heap().check_invariants();
  EXPECT_EQ(problem, nullptr) << problem;
}

// ---------------------------------------------------------------------------------------------
// Large blocks freed while another thread holds the arena's lock.

TEST(ArenaDeferredLargeFrees, AFreeDoesNotWaitForTheLockAndTheNextHolderFreesTheBlock) {
  auto arena = std::make_unique<Arena>(4004);
  bool zeroed = false;
  void* p = arena->alloc_large(100 * 1024, 4096, zeroed);
  ASSERT_NE(p, nullptr);
  const std::size_t allocated = arena->stats().allocated;
  arena->lock_for_fork();  // this thread holds the lock, as another thread would
  std::thread freer([&] { arena->free_large(p, PageCount::covering(100 * 1024)); });
  freer.join();  // returned without the lock: the block is deferred
  arena->unlock_after_fork();
  // Still counted until someone takes the lock; the statistics take it and free it.
  EXPECT_EQ(arena->stats().allocated, allocated - 100 * 1024);
  EXPECT_EQ(arena->check_blocks(), nullptr);
  const char* problem = arena->check_invariants();
  EXPECT_EQ(problem, nullptr) << problem;
  // The pages are free again: the same block comes back.
  void* q = arena->alloc_large(100 * 1024, 4096, zeroed);
  EXPECT_EQ(q, p);
}

TEST(ArenaDeferredLargeFrees, ADeferredBlockFreedAgainIsADoubleFree) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      {
        auto arena = std::make_unique<Arena>(4005);
        bool zeroed = false;
        void* p = arena->alloc_large(64 * 1024, 4096, zeroed);
        arena->lock_for_fork();
        std::thread freer([&] { arena->free_large(p, PageCount::covering(64 * 1024)); });
        freer.join();
        arena->unlock_after_fork();
        arena->free_large(p, PageCount::covering(64 * 1024), "pm_free");
      },
      "pm_free\\(0x[0-9a-f]+\\): double free");
}

}  // namespace
