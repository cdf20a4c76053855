// Several Configs in one binary (allocator/src/allocator.h): a heap assembled from another
// Config than the build's is a whole allocator of its own. Its blocks are not the build
// heap's (its own address map, its own statistics), a pointer of one heap is foreign to the
// other, and each heap follows its own Config's choices, its size classes among them,
// whatever the build chose.
#include <gtest/gtest.h>

#include <pagemalloc/pagemalloc.h>

#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <thread>

#include "api/pm_api.h"
#include "fork_scenario_support.h"
#include "heap/allocator_impl.h"

namespace pagemalloc {
namespace {

// Today's design (presets.h) with the build's chunk size (the Configs of one binary share
// it), except the thread caches (none) and the size classes (2008's: slabs up to 2 KiB).
struct UncachedConfig : DefaultConfig {
  static constexpr std::size_t kLgChunkSize = BuildConfig::kLgChunkSize;
  static constexpr bool kThreadCaches = false;
  static constexpr unsigned kArenas = 1;
  static constexpr std::size_t kMaxSmallSize = 2048;
};
// The same with thread caches, slabs up to 16 KiB, and jemalloc's 2008 run manager and trees.
struct CachedTreesConfig : UncachedConfig {
  template <class OsLayer>
  using Runs = RbtreeRuns<OsLayer>;
  static constexpr bool kThreadCaches = true;
  static constexpr std::size_t kMaxSmallSize = 16384;
  static constexpr bool kAllocatedRunsTree = true;
  static constexpr bool kValidateFree = true;
};
using Uncached = PmApi<UncachedConfig>;
using CachedTrees = PmApi<CachedTreesConfig>;

std::size_t allocated(void (*stats_get)(pm_stats*)) {
  pm_stats s{};
  stats_get(&s);
  return s.allocated;
}

constexpr std::size_t kSizes[] = {100, 100 << 10, 5 << 20};  // small, large, huge

TEST(SeveralConfigs, AnotherHeapsBlocksAreItsOwn) {
  const std::size_t build_before = allocated(&pm_stats_get);
  const std::size_t other_before = allocated(&Uncached::stats_get);
  void* blocks[3];
  std::size_t usable = 0;
  for (int i = 0; i < 3; ++i) {
    blocks[i] = Uncached::malloc(kSizes[i]);
    ASSERT_NE(blocks[i], nullptr);
    usable += Uncached::sallocx(blocks[i], 0);
    const void* chunk = chunk_base_of(blocks[i]);
    EXPECT_NE(Allocator<UncachedConfig>::address_map().get(chunk), 0u) << kSizes[i];
    EXPECT_EQ(address_map().get(chunk), 0u) << kSizes[i] << ": in the build heap's map";
    EXPECT_EQ(Allocator<CachedTreesConfig>::address_map().get(chunk), 0u) << kSizes[i];
  }
  EXPECT_EQ(allocated(&Uncached::stats_get), other_before + usable);
  EXPECT_EQ(allocated(&pm_stats_get), build_before);
  EXPECT_EQ(Uncached::heap().check_invariants(), nullptr);
  for (void* p : blocks) Uncached::free(p);
  EXPECT_EQ(allocated(&Uncached::stats_get), other_before);
}

// Each heap's slabs end at its own largest small size: 4 KiB is a slab region of one and a
// run of pages of the other, as pm_nallocx and the page map say.
TEST(SeveralConfigs, EachHeapHasItsOwnSizeClasses) {
  EXPECT_EQ(Allocator<UncachedConfig>::kNumClasses, 41u);
  EXPECT_EQ(Allocator<CachedTreesConfig>::kNumClasses, 65u);
  EXPECT_EQ(Allocator<UncachedConfig>::place(4096, 1).kind, BlockKind::Large);
  EXPECT_EQ(Allocator<CachedTreesConfig>::place(4096, 1).kind, BlockKind::Small);
  EXPECT_EQ(Uncached::nallocx(2049, 0), 4096u);
  EXPECT_EQ(CachedTrees::nallocx(2049, 0), 2304u);
  void* run = Uncached::malloc(3000);
  void* region = CachedTrees::malloc(3000);
  ASSERT_NE(run, nullptr);
  ASSERT_NE(region, nullptr);
  EXPECT_EQ(page_entry(chunk_base_of(run), page_index_of(run)).kind(), PageKind::Large);
  EXPECT_EQ(page_entry(chunk_base_of(region), page_index_of(region)).kind(), PageKind::Slab);
  EXPECT_EQ(Uncached::sallocx(run, 0), 4096u);
  EXPECT_EQ(CachedTrees::sallocx(region, 0), 3072u);
  Uncached::free(run);
  CachedTrees::free(region);
  EXPECT_EQ(Uncached::heap().check_invariants(), nullptr);
  EXPECT_EQ(CachedTrees::heap().check_invariants(), nullptr);
}

TEST(SeveralConfigsDeathTest, APointerOfOneHeapIsForeignToAnother) {
  void* p = pm_malloc(100);
  EXPECT_DEATH(Uncached::free(p), "pm_free.*not allocated by pagemalloc");
  void* q = CachedTrees::malloc(100 << 10);
  EXPECT_DEATH(pm_free(q), "pm_free.*not allocated by pagemalloc");
  EXPECT_DEATH(Uncached::sallocx(q, 0), "pm_sallocx.*not allocated by pagemalloc");
  pm_free(p);
  CachedTrees::free(q);
}

// Each heap follows its own Config: a thread that allocates small blocks from all three gets
// a cache in the heaps whose Config has them, and in the build's when the build's does.
TEST(SeveralConfigs, EachHeapFollowsItsOwnConfig) {
  bool build_cache = false, uncached_cache = true, cached_cache = false;
  std::thread t([&] {
    pm_free(pm_malloc(32));
    Uncached::free(Uncached::malloc(32));
    CachedTrees::free(CachedTrees::malloc(32));
    build_cache = Allocator<BuildConfig>::ThreadCache::current() != nullptr;
    uncached_cache = Allocator<UncachedConfig>::ThreadCache::current() != nullptr;
    cached_cache = Allocator<CachedTreesConfig>::ThreadCache::current() != nullptr;
  });
  t.join();
  EXPECT_EQ(build_cache, BuildConfig::kThreadCaches);
  EXPECT_FALSE(uncached_cache);
  EXPECT_TRUE(cached_cache);
  // The trees' heap validates every free with a search of its chunk tree; the other does not.
  void* p = CachedTrees::malloc(100 << 10);
  void* q = Uncached::malloc(100 << 10);
  ASSERT_NE(p, nullptr);
  ASSERT_NE(q, nullptr);
  auto& trees_arena = *AddressMap::owner_of<Allocator<CachedTreesConfig>::Arena>(
      Allocator<CachedTreesConfig>::address_map().get(chunk_base_of(p)));
  auto& plain_arena = *AddressMap::owner_of<Allocator<UncachedConfig>::Arena>(
      Allocator<UncachedConfig>::address_map().get(chunk_base_of(q)));
  const std::uint64_t trees_before = trees_arena.validated_frees();
  CachedTrees::free(p);
  Uncached::free(q);
  EXPECT_EQ(trees_arena.validated_frees(), trees_before + 1);
  EXPECT_EQ(plain_arena.validated_frees(), 0u);
  EXPECT_EQ(CachedTrees::heap().check_invariants(), nullptr);
  EXPECT_EQ(Uncached::heap().check_invariants(), nullptr);
}

// Each initialised heap registers its own fork handlers: a process whose threads keep
// allocating from two heaps forks, and the child allocates and frees in both, and in the
// build's, without waiting for a lock a vanished thread held.
TEST(SeveralConfigs, AChildOfABusyProcessUsesEveryHeap) {
  // Every heap initialised first: a heap whose fork handlers are installed while a fork runs
  // the other heaps' prepare handlers misses that fork (the next test).
  Uncached::free(Uncached::malloc(1));
  CachedTrees::free(CachedTrees::malloc(1));
  pm_free(pm_malloc(1));
  std::atomic<bool> stop{false};
  std::thread busy([&] {
    while (!stop.load(std::memory_order_relaxed)) {
      Uncached::free(Uncached::malloc(100 << 10));
      CachedTrees::free(CachedTrees::malloc(48));
      pm_free(pm_malloc(64));
    }
  });
  for (int i = 0; i < 20; ++i) {
    const pid_t child = fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
      void* a = Uncached::malloc(100);
      void* b = CachedTrees::malloc(200 << 10);
      void* c = pm_malloc(300);
      const bool ok = a != nullptr && b != nullptr && c != nullptr &&
                      Uncached::heap().check_invariants() == nullptr &&
                      CachedTrees::heap().check_invariants() == nullptr;
      Uncached::free(a);
      CachedTrees::free(b);
      pm_free(c);
      _exit(ok ? 0 : 1);
    }
    int status = 0;
    ASSERT_EQ(waitpid(child, &status, 0), child);
    ASSERT_TRUE(WIFEXITED(status)) << "fork " << i;
    EXPECT_EQ(WEXITSTATUS(status), 0) << "fork " << i;
  }
  stop.store(true);
  busy.join();
}

// Used by the next test only, so that its heap is still uninitialised in every process the
// test forks.
struct LateStartConfig : UncachedConfig {};
using LateStart = PmApi<LateStartConfig>;

// Whether the child exits with 0 within `seconds` (else it is killed).
bool child_succeeds(pid_t child, int seconds) {
  int status = 0;
  return fork_scenarios::wait_in_time(child, seconds, &status) == child && WIFEXITED(status) &&
         WEXITSTATUS(status) == 0;
}

// In a process whose LateStart heap is uninitialised: one thread makes the heap's first call
// while the other forks over and over, so that forks land all through the initialisation;
// every child allocates and frees. Returns whether every child did, in time.
bool fork_while_another_thread_initialises() {
  std::atomic<bool> started{false}, initialised{false};
  std::thread first([&] {
    started.store(true);
    LateStart::free(LateStart::malloc(64));
    initialised.store(true);
  });
  while (!started.load()) {
  }
  bool ok = true;
  do {
    const pid_t child = fork();
    if (child < 0) {
      ok = false;
      break;
    }
    if (child == 0) {
      prctl(PR_SET_PDEATHSIG, SIGKILL);  // a hung child goes with its killed parent
      void* p = LateStart::malloc(100);
      void* q = LateStart::malloc(200 << 10);
      const bool heap_ok =
          p != nullptr && q != nullptr && LateStart::heap().check_invariants() == nullptr;
      LateStart::free(p);
      LateStart::free(q);
      _exit(heap_ok ? 0 : 1);
    }
    ok = child_succeeds(child, 10);
  } while (ok && !initialised.load());
  first.join();
  return ok;
}

// A fork while another thread initialises a heap: the child's first call finishes the
// initialisation (starts it over when the fork came before the heap's fork handlers were
// installed) instead of waiting for a thread the child does not have. Each of kProcesses
// processes starts with the heap uninitialised.
//
// In a process of its own (a threadsafe death test starts the binary afresh), where no other
// heap has fork handlers: glibc runs each prepare handler without its lock of the handlers'
// list, and a handler registered meanwhile is skipped for that fork, child handler included.
// So a heap that finishes its initialisation while another handler of the same fork runs may
// have its lock taken, then copied held into the child. That window is left open.
TEST(SeveralConfigsDeathTest, AForkDuringAHeapsInitialisationLeavesTheChildAHeap) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  auto scenarios = [] {
    constexpr int kProcesses = 40;
    for (int i = 0; i < kProcesses; ++i) {
      const pid_t process = fork();
      if (process < 0) _exit(3);
      if (process == 0) _exit(fork_while_another_thread_initialises() ? 0 : 1);
      if (!child_succeeds(process, 30)) _exit(1);
    }
    _exit(0);
  };
  EXPECT_EXIT(scenarios(), testing::ExitedWithCode(0), "");
}

}  // namespace
}  // namespace pagemalloc
