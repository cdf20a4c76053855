// An arena's stashes under their own locks (arena.h): a flush the class's stash has room for
// and a refill it serves whole take no other lock, so they go on while another thread holds
// the arena's. What passes through them that way is still counted (the statistics and the
// invariant checks add it to the arena's totals), and a refill or a flush the stash cannot
// take whole still goes through the arena's lock, stash first. A class has a stash per set of
// CPUs: a refill takes first what was flushed on its CPU's set, then the others'.
#include <gtest/gtest.h>

#include <pagemalloc/pagemalloc.h>
#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <future>
#include <memory>
#include <set>
#include <thread>
#include <utility>
#include <vector>

#include "arena/arena.h"
#include "build_config.h"
#include "design/size_classes.h"

namespace {

using pagemalloc::Arena;
using namespace std::chrono_literals;

constexpr unsigned kClass = 4;  // 64 bytes
const std::size_t kSize = pagemalloc::kSizeClasses[kClass].size;
using pagemalloc::stash_sets;

// Two CPUs the process may run on whose stash sets differ, or {-1, -1}.
std::pair<int, int> two_cpus_of_different_sets() {
  pm_free(pm_malloc(8));  // the heap started: it set the count of stash sets
  cpu_set_t allowed;
  if (sched_getaffinity(0, sizeof allowed, &allowed) != 0) return {-1, -1};
  int first = -1;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (!CPU_ISSET(cpu, &allowed)) continue;
    if (first < 0) first = cpu;
    else if (unsigned(cpu) % stash_sets() != unsigned(first) % stash_sets()) return {first, cpu};
  }
  return {-1, -1};
}

// Moves the calling thread to cpu; whether it runs there now.
bool move_to(int cpu) {
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(cpu, &one);
  return pthread_setaffinity_np(pthread_self(), sizeof one, &one) == 0 && sched_getcpu() == cpu;
}

// Runs work on another thread while this one holds the arena's lock; whether it finished
// within the deadline (a wait for the lock never does). Work that needs no lock is given a
// generous one; work expected to wait, a short one.
template <class Work>
bool finishes_while_the_arena_is_locked(Arena& arena, Work work,
                                        std::chrono::milliseconds deadline = 20s) {
  arena.lock_for_tests().lock();
  auto done = std::async(std::launch::async, work);
  const bool finished = done.wait_for(deadline) == std::future_status::ready;
  arena.lock_for_tests().unlock();
  done.wait();
  return finished;
}

TEST(ArenaStash, AFlushItHasRoomForAndARefillItServesTakeNoArenaLock) {
  if (!pagemalloc::BuildConfig::kTransferStash)
    GTEST_SKIP() << "a design without stashes frees every flushed region to its slab";
  auto arena = std::make_unique<Arena>(4101);
  void* regions[32];
  ASSERT_EQ(arena->alloc_batch(kClass, regions, 32), 32u);
  const std::size_t allocated = arena->stats().allocated;
  void* again[32] = {};
  EXPECT_TRUE(finishes_while_the_arena_is_locked(*arena, [&] {
    arena->free_batch(regions, 32, "test");
    EXPECT_EQ(arena->alloc_batch(kClass, again, 32), 32u);
  }));
  EXPECT_EQ(std::set<void*>(regions, regions + 32), std::set<void*>(again, again + 32));
  EXPECT_EQ(arena->stats().allocated, allocated);
  EXPECT_EQ(arena->check_blocks(), nullptr);
  arena->free_batch(again, 32, "test");
  EXPECT_EQ(arena->stats().allocated, allocated - 32 * kSize);
  EXPECT_EQ(arena->check_blocks(), nullptr);
}

TEST(ArenaStash, WhatPassesThroughItWithoutTheArenaLockIsCounted) {
  auto arena = std::make_unique<Arena>(4102);
  void* regions[48];
  ASSERT_EQ(arena->alloc_batch(kClass, regions, 48), 48u);
  EXPECT_EQ(arena->stats().allocated, 48 * kSize);
  EXPECT_EQ(arena->stats().blocks, 48u);
  arena->free_batch(regions, 48, "test");  // into the stash, by its lock alone
  EXPECT_EQ(arena->stats().allocated, 0u);
  EXPECT_EQ(arena->stats().blocks, 0u);
  EXPECT_EQ(arena->check_blocks(), nullptr);
  ASSERT_EQ(arena->alloc_batch(kClass, regions, 16), 16u);  // out of it the same way
  EXPECT_EQ(arena->stats().allocated, 16 * kSize);
  EXPECT_EQ(arena->stats().blocks, 16u);
  EXPECT_EQ(arena->check_blocks(), nullptr);
  arena->free_batch(regions, 16, "test");
  arena->purge_all();  // the stash back to its slabs, under both locks
  EXPECT_EQ(arena->stats().allocated, 0u);
  EXPECT_EQ(arena->check_blocks(), nullptr);
}

TEST(ArenaStash, ARefillLargerThanTheStashTakesItAllThenSlabs) {
  auto arena = std::make_unique<Arena>(4103);
  void* first[20];
  ASSERT_EQ(arena->alloc_batch(kClass, first, 20), 20u);
  arena->free_batch(first, 20, "test");
  void* refill[50];
  ASSERT_EQ(arena->alloc_batch(kClass, refill, 50), 50u);
  const std::set<void*> got(refill, refill + 50);
  EXPECT_EQ(got.size(), 50u);
  for (void* p : first) EXPECT_EQ(got.count(p), 1u) << "a stashed region was left behind";
  EXPECT_EQ(arena->stats().allocated, 50 * kSize);
  EXPECT_EQ(arena->check_blocks(), nullptr);
}

TEST(ArenaStash, AFlushThatDoesNotFitGoesToTheSlabsUnderTheArenaLock) {
  auto arena = std::make_unique<Arena>(4104);
  const unsigned capacity = pagemalloc::stash_capacity(kClass);
  std::vector<void*> regions(capacity + 10);
  unsigned got = 0;
  while (got < regions.size())
    got += arena->alloc_batch(kClass, regions.data() + got, unsigned(regions.size()) - got);
  // Both flushes on one CPU (each thread moved there, where it may be), so into one stash.
  const int cpu = sched_getcpu();
  std::thread([&] {
    EXPECT_TRUE(move_to(cpu));
    arena->free_batch(regions.data(), capacity, "test");  // fills this CPU's stash
  }).join();
  EXPECT_FALSE(finishes_while_the_arena_is_locked(
      *arena,
      [&] {
        EXPECT_TRUE(move_to(cpu));
        arena->free_batch(regions.data() + capacity, 10, "test");  // must wait for the lock
      },
      300ms));
  EXPECT_EQ(arena->stats().allocated, 0u);
  EXPECT_EQ(arena->check_blocks(), nullptr);
}

TEST(ArenaStash, ARefillTakesFirstWhatWasFlushedOnItsCpusSetThenAnotherSetsWithoutTheArenaLock) {
  if (!pagemalloc::BuildConfig::kTransferStash)
    GTEST_SKIP() << "a design without stashes frees every flushed region to its slab";
  const auto [cpu_a, cpu_b] = two_cpus_of_different_sets();
  if (cpu_a < 0) GTEST_SKIP() << "the process may not run on CPUs of two stash sets";
  auto arena = std::make_unique<Arena>(4106);
  std::thread([&] {  // a thread of its own: the test's moves leave the others where they were
    void* on_a[32];
    void* on_b[32];
    ASSERT_EQ(arena->alloc_batch(kClass, on_a, 32), 32u);
    ASSERT_EQ(arena->alloc_batch(kClass, on_b, 32), 32u);
    ASSERT_TRUE(move_to(cpu_a));
    arena->free_batch(on_a, 32, "test");
    ASSERT_TRUE(move_to(cpu_b));
    arena->free_batch(on_b, 32, "test");
    void* refill[32];
    ASSERT_EQ(arena->alloc_batch(kClass, refill, 32), 32u);
    EXPECT_EQ(std::set<void*>(refill, refill + 32), std::set<void*>(on_b, on_b + 32))
        << "a refill on CPU " << cpu_b << " took another set's regions before its own";
    arena->free_batch(refill, 32, "test");  // on cpu_b's set again
    ASSERT_TRUE(move_to(cpu_a));
    EXPECT_EQ(arena->check_blocks(), nullptr);
    // Both sets hold 32: a refill on cpu_a takes cpu_a's.
    ASSERT_EQ(arena->alloc_batch(kClass, refill, 32), 32u);
    EXPECT_EQ(std::set<void*>(refill, refill + 32), std::set<void*>(on_a, on_a + 32));
    // cpu_a's stash is empty now: a refill there is served whole by cpu_b's, with no wait for
    // the arena's lock.
    void* from_b[32];
    EXPECT_TRUE(finishes_while_the_arena_is_locked(*arena, [&] {
      EXPECT_TRUE(move_to(cpu_a));
      EXPECT_EQ(arena->alloc_batch(kClass, from_b, 32), 32u);
    }));
    EXPECT_EQ(std::set<void*>(from_b, from_b + 32), std::set<void*>(on_b, on_b + 32));
    EXPECT_EQ(arena->stats().allocated, 64 * kSize);
    EXPECT_EQ(arena->check_blocks(), nullptr);
  })
      .join();
}

TEST(ArenaStash, ThreadsTradingTwoClassesLoseNothingAndTheChecksHoldMeanwhile) {
  auto arena = std::make_unique<Arena>(4105);
  constexpr int kThreads = 4, kRounds = 4000, kBatch = 24, kMinChecks = 50;
  std::atomic<int> running{kThreads};
  // The threads trade until the checks below have run kMinChecks times, so that the checks
  // overlap the trading however the threads are scheduled.
  std::atomic<int> checks{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      void* regions[kBatch];
      for (int r = 0; r < kRounds || checks.load() < kMinChecks; ++r) {
        const unsigned n = arena->alloc_batch(kClass + unsigned(r % 2), regions, kBatch);
        arena->free_batch(regions, n, "test");
        if (n != unsigned(kBatch)) {
          ADD_FAILURE() << "a refill of " << kBatch << " regions got " << n;
          break;  // still counted out below, so that the checks stop
        }
      }
      running.fetch_sub(1);
    });
  }
  // The invariant checks, while regions move between the stashes and the threads.
  while (running.load() > 0) {
    if (const char* problem = arena->check_blocks()) {
      ADD_FAILURE() << "while the threads trade: " << problem;
      checks.store(kMinChecks);  // so that the threads stop
      break;                     // and are joined
    }
    checks.fetch_add(1);
  }
  for (std::thread& t : threads) t.join();
  EXPECT_GE(checks.load(), kMinChecks);
  EXPECT_EQ(arena->stats().allocated, 0u);
  EXPECT_EQ(arena->stats().blocks, 0u);
  EXPECT_EQ(arena->check_blocks(), nullptr);
}

// Allocates n regions of the class into out (batches of up to 64); whether all came.
bool allocate_all(Arena& arena, unsigned size_class, std::vector<void*>& out) {
  for (std::size_t got = 0; got < out.size();) {
    const unsigned want = unsigned(std::min<std::size_t>(64, out.size() - got));
    const unsigned n = arena.alloc_batch(size_class, out.data() + got, want);
    if (n == 0) return false;
    got += n;
  }
  return true;
}

TEST(ArenaStash, RegionsNoRefillTookWhileTheArenaCutFreshSlabsGoBackToTheirSlab) {
  if (!pagemalloc::BuildConfig::kTransferStash)
    GTEST_SKIP() << "a design without stashes frees every flushed region to its slab";
  auto arena = std::make_unique<Arena>(4107);
  const pagemalloc::SizeClass& sc = pagemalloc::kSizeClasses[kClass];
  std::vector<void*> whole(sc.regions);
  ASSERT_TRUE(allocate_all(*arena, kClass, whole));  // the whole of one fresh slab
  std::vector<void*> next(1);
  ASSERT_TRUE(allocate_all(*arena, kClass, next));      // the bin's current slab is another now
  arena->free_batch(whole.data(), sc.regions, "test");  // into the stash
  ASSERT_EQ(arena->stats().active_pages, 2 * sc.slab_pages);
  // Another class's slabs, kept live: fresh pages enough for three looks at the stashes. The
  // first may find the stashed regions just stashed; the next finds them untaken since.
  const unsigned other = pagemalloc::size_class_of(1024);
  const pagemalloc::SizeClass& so = pagemalloc::kSizeClasses[other];
  const std::size_t slabs = 3 * Arena::kStashLookPages / so.slab_pages + 1;
  std::vector<void*> live(slabs * so.regions);
  ASSERT_TRUE(allocate_all(*arena, other, live));
  const pagemalloc::ArenaStats stats = arena->stats();
  EXPECT_EQ(stats.active_pages, sc.slab_pages + slabs * so.slab_pages)
      << "the slab of the stashed regions is still in use";
  EXPECT_EQ(stats.allocated, kSize + live.size() * so.size);
  EXPECT_EQ(stats.blocks, 1 + live.size());
  EXPECT_EQ(arena->check_blocks(), nullptr);
  // Regions the stash has handed out since its last look stay in it: a slab's regions
  // stashed again, and a refill that takes 8 of them and a flush that returns them between
  // any two slabs of the other class, keep that slab in use (its bin's current slab is
  // another, so that it would go back to the run manager if it emptied).
  std::vector<void*> rest(sc.regions - 1);
  ASSERT_TRUE(allocate_all(*arena, kClass, rest));  // the slab of `next`, full
  std::vector<void*> last(1);
  ASSERT_TRUE(allocate_all(*arena, kClass, last));  // current now
  arena->free_batch(next.data(), 1, "test");
  arena->free_batch(rest.data(), unsigned(rest.size()), "test");
  std::vector<void*> more(slabs * so.regions);
  for (std::size_t got = 0; got < more.size(); got += so.regions) {
    void* traded[8];
    ASSERT_EQ(arena->alloc_batch(kClass, traded, 8), 8u);
    arena->free_batch(traded, 8, "test");
    ASSERT_EQ(arena->alloc_batch(other, more.data() + got, so.regions), so.regions);
  }
  EXPECT_EQ(arena->stats().active_pages, 2 * sc.slab_pages + 2 * slabs * so.slab_pages)
      << "the slab of the regions traded through the stash was given back";
  EXPECT_EQ(arena->check_blocks(), nullptr);
  arena->free_batch(last.data(), 1, "test");
  arena->free_batch(live.data(), unsigned(live.size()), "test");
  arena->free_batch(more.data(), unsigned(more.size()), "test");
  EXPECT_EQ(arena->stats().allocated, 0u);
  EXPECT_EQ(arena->check_blocks(), nullptr);
}

TEST(ArenaStash, ThreadsTradingThroughTheStashWhileTheArenaLooksAtItLoseNothing) {
  auto arena = std::make_unique<Arena>(4108);
  constexpr int kThreads = 2, kRounds = 20000, kBatch = 24;
  std::atomic<bool> cutting{true};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      void* regions[kBatch];
      for (int r = 0; r < kRounds || cutting.load(); ++r) {
        const unsigned n = arena->alloc_batch(kClass, regions, kBatch);
        arena->free_batch(regions, n, "test");
        if (n != unsigned(kBatch)) {
          ADD_FAILURE() << "a refill of " << kBatch << " regions got " << n;
          break;
        }
      }
    });
  }
  // Fresh slabs of another class for eight looks, freed, while the threads trade.
  const unsigned other = pagemalloc::size_class_of(1024);
  const pagemalloc::SizeClass& so = pagemalloc::kSizeClasses[other];
  std::vector<void*> live(8 * Arena::kStashLookPages / so.slab_pages * so.regions);
  EXPECT_TRUE(allocate_all(*arena, other, live));
  EXPECT_EQ(arena->check_blocks(), nullptr);
  arena->free_batch(live.data(), unsigned(live.size()), "test");
  cutting.store(false);
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(arena->stats().allocated, 0u);
  EXPECT_EQ(arena->stats().blocks, 0u);
  EXPECT_EQ(arena->check_blocks(), nullptr);
}

}  // namespace
