// Blocks that go home (thread_cache.h): a small block freed by a thread that does not own its
// page (it took no region of that page from its arena lately), or one of another arena, never
// enters the pops of the freeing thread's cache. It waits among the bin's outgoing regions
// and goes back to its arena in one batch. So a thread that frees a block another thread
// allocated, then allocates its own, is not handed that block beside the other's hot objects
// (Hoard's passive false sharing); the thread that owns the page still reuses its blocks.
#include <gtest/gtest.h>

#include <pagemalloc/pagemalloc.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <set>
#include <thread>
#include <vector>

#include "heap/heap.h"
#include "threads/thread_cache.h"

namespace {

using pagemalloc::ThreadCache;

constexpr bool kCaches = pagemalloc::BuildConfig::kThreadCaches;

std::vector<void*> allocate_blocks(std::size_t count, std::size_t size) {
  std::vector<void*> blocks(count);
  for (void*& p : blocks) p = pm_malloc(size);
  return blocks;
}

std::uintptr_t line_of(const void* p) { return reinterpret_cast<std::uintptr_t>(p) / 64; }

// What a thread saw that freed blocks of the main thread and then allocated as many of the
// same size: its arena, the regions its cache could pop before and after the frees, its
// outgoing regions, and the blocks it was given.
struct FreedThenAllocated {
  const pagemalloc::Arena* arena = nullptr;
  unsigned cached_before = 0;
  unsigned cached_after = 0;
  unsigned outgoing = 0;
  std::vector<void*> given;
};

FreedThenAllocated free_then_allocate(const std::vector<void*>& blocks, std::size_t size) {
  FreedThenAllocated seen;
  std::thread other([&] {
    pm_free(pm_malloc(size));  // the thread's cache and arena, and a refill of the class
    const ThreadCache* cache = ThreadCache::current();
    const unsigned size_class = pagemalloc::size_class_of(size);
    seen.arena = cache->arena();
    seen.cached_before = cache->cached(size_class);
    for (void* p : blocks) pm_free(p);
    seen.cached_after = cache->cached(size_class);
    seen.outgoing = cache->outgoing(size_class);
    seen.given = allocate_blocks(blocks.size(), size);
    for (void* p : seen.given) pm_free(p);
    pm_purge();
  });
  other.join();
  return seen;
}

void expect_none_given_back(const std::vector<void*>& blocks, const FreedThenAllocated& seen) {
  const std::set<void*> freed(blocks.begin(), blocks.end());
  for (void* p : seen.given)
    EXPECT_EQ(freed.count(p), 0u) << p << ": a block the thread freed for another came back to it";
  EXPECT_EQ(seen.cached_after, seen.cached_before)
      << "the frees of another thread's blocks entered the pops of the freeing thread's cache";
  EXPECT_EQ(seen.outgoing, blocks.size());
  const char* problem = pagemalloc::heap().check_invariants();
  EXPECT_EQ(problem, nullptr) << problem;
}

// The main thread's blocks freed by a thread of another arena (the suite runs with two).
TEST(BlocksGoHome, AThreadOfAnotherArenaDoesNotReuseTheBlocksItFrees) {
  if (!kCaches) GTEST_SKIP() << "a design without thread caches frees every block to its arena";
  constexpr std::size_t kSize = 48;
  const std::vector<void*> blocks = allocate_blocks(16, kSize);
  ASSERT_GT(pagemalloc::heap().automatic_arena_count(), 1u);
  const FreedThenAllocated seen = free_then_allocate(blocks, kSize);
  ASSERT_NE(seen.arena, ThreadCache::current()->arena()) << "the threads should differ in arena";
  expect_none_given_back(blocks, seen);
}

// The same with a thread of the main thread's own arena: a second thread, kept alive, takes
// the other arena, so that the third shares the main thread's.
TEST(BlocksGoHome, AThreadOfTheSameArenaDoesNotReuseTheBlocksItFrees) {
  if (!kCaches) GTEST_SKIP() << "a design without thread caches frees every block to its arena";
  constexpr std::size_t kSize = 48;
  const std::vector<void*> blocks = allocate_blocks(16, kSize);
  std::atomic<bool> done{false};
  std::atomic<bool> started{false};
  std::thread occupant([&] {
    pm_free(pm_malloc(8));
    started = true;
    while (!done) std::this_thread::yield();
  });
  while (!started) std::this_thread::yield();
  const FreedThenAllocated seen = free_then_allocate(blocks, kSize);
  done = true;
  occupant.join();
  ASSERT_EQ(seen.arena, ThreadCache::current()->arena()) << "the threads should share an arena";
  expect_none_given_back(blocks, seen);
}

// Hoard's cache-scratch: the main thread allocates one block per thread, side by side; each
// thread frees the one it was handed and then allocates its own, which must share no cache
// line with any handed block (another thread may still write its own).
TEST(BlocksGoHome, ThreadsHandedAdjacentBlocksAllocateOnLinesOfTheirOwn) {
  if (!kCaches) GTEST_SKIP() << "a design without thread caches frees every block to its arena";
  constexpr std::size_t kThreads = 8, kSize = 8;
  const std::vector<void*> handed = allocate_blocks(kThreads, kSize);
  std::set<std::uintptr_t> handed_lines;
  for (void* p : handed) handed_lines.insert(line_of(p));
  std::vector<void*> own(kThreads);
  std::vector<std::thread> threads;
  for (std::size_t t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      pm_free(handed[t]);
      own[t] = pm_malloc(kSize);
      static_cast<char*>(own[t])[0] = 1;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));  // all live at once
      pm_free(own[t]);
    });
  }
  for (auto& thread : threads) thread.join();
  for (std::size_t t = 0; t < kThreads; ++t)
    EXPECT_EQ(handed_lines.count(line_of(own[t])), 0u)
        << "thread " << t << " was given " << own[t] << ", on a line of the blocks handed out";
}

// The thread that owns the page still reuses what it frees: a free and a malloc of one size
// give back the same block, with another thread alive.
TEST(BlocksGoHome, TheOwnerOfAPageReusesItsBlocks) {
  if (!kCaches) GTEST_SKIP() << "a design without thread caches frees every block to its arena";
  std::thread other([] {
    pm_free(pm_malloc(8));
    void* p = pm_malloc(64);
    pm_free(p);
    EXPECT_EQ(pm_malloc(64), p) << "a thread's own block did not come back from its cache";
    pm_free(p);
  });
  other.join();
}

// A thread that frees many of another's blocks keeps at most a foreign limit of them (then
// they go home in one batch), in a class it allocates from too, and the freed blocks, once
// home, serve the main thread's arena again.
TEST(BlocksGoHome, AThreadFreeingOthersBlocksKeepsAtMostAForeignLimit) {
  if (!kCaches) GTEST_SKIP() << "a design without thread caches frees every block to its arena";
  constexpr std::size_t kSize = 1024;
  constexpr unsigned kClass = pagemalloc::size_class_of(kSize);
  const std::vector<void*> blocks = allocate_blocks(2000, kSize);
  std::size_t most = 0;
  std::thread other([&] {
    void* mine = pm_malloc(kSize);  // a refill of the class
    const std::size_t before = ThreadCache::bytes_cached_by_all();
    for (void* p : blocks) {
      pm_free(p);
      const std::size_t now = ThreadCache::bytes_cached_by_all();
      most = std::max(most, now > before ? now - before : 0);
      EXPECT_LE(ThreadCache::current()->outgoing(kClass), ThreadCache::foreign_limit(kClass));
    }
    pm_free(mine);
    pm_purge();
  });
  other.join();
  EXPECT_LE(most, ThreadCache::foreign_limit(kClass) * kSize + kSize);
  const char* problem = pagemalloc::heap().check_invariants();
  EXPECT_EQ(problem, nullptr) << problem;
}

// A thread that starts owns the granules of threads that exited just before: their blocks
// have no owner left, and the new thread reuses them (Larson's generations of threads).
TEST(BlocksGoHome, ANewThreadReusesTheBlocksOfAThreadThatExited) {
  if (!kCaches) GTEST_SKIP() << "a design without thread caches frees every block to its arena";
  constexpr std::size_t kSize = 48;
  constexpr unsigned kClass = pagemalloc::size_class_of(kSize);
  std::vector<void*> blocks;
  std::thread([&] { blocks = allocate_blocks(16, kSize); }).join();  // made, then exited
  unsigned cached_before = 0, cached_after = 0, outgoing = 0;
  std::thread([&] {
    pm_free(pm_malloc(kSize));
    const ThreadCache* cache = ThreadCache::current();
    cached_before = cache->cached(kClass);
    for (void* p : blocks) pm_free(p);
    cached_after = cache->cached(kClass);
    outgoing = cache->outgoing(kClass);
    pm_purge();
  }).join();
  EXPECT_EQ(outgoing, 0u) << "the blocks of a thread that exited went home";
  EXPECT_EQ(cached_after, cached_before + blocks.size());
}

// A free of a block waiting among the outgoing regions is a double free.
TEST(BlocksGoHomeDeathTest, AnOutgoingBlockFreedAgainIsADoubleFree) {
  if (!kCaches) GTEST_SKIP() << "a design without thread caches frees every block to its arena";
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      {
        void* p = pm_malloc(32);
        std::thread other([p] {
          pm_free(pm_malloc(8));
          pm_free(p);
          pm_free(p);
        });
        other.join();
      },
      "pm_free\\(0x[0-9a-f]+\\): double free");
}

}  // namespace
