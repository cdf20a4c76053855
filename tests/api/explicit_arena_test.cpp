// Explicit arenas: pm_arena_create / reset / destroy / stats_get, PM_ARENA(i) in the *allocx
// calls, and pagemalloc::ArenaResource (std::pmr) over them.
//
// Terms:
//   round   allocate many blocks from one arena, then free them all with one reset: the bump
//           arena of [Pastel 2024] and the Go arena of [Hansson 2023] (docs/references.md)
//   kinds   small (slab regions, <= 16 KiB), large (page runs, < 2 MiB), huge (own extents);
//           every test that allocates crosses all three
//
// What is checked: blocks come from the named arena and stay there across reallocation; a
// reset frees them all (the arena's and the heap's statistics drop back) and keeps the pages
// (100 rounds map nothing new); destroy returns the pages; blocks can still be freed one by
// one, from any thread; bad indices fail with EINVAL. Two tests drive an Arena directly
// (allocator/src) to check the run manager's invariants after every reset.
#include <gtest/gtest.h>

#include <pagemalloc/memory_resource.h>
#include <pagemalloc/pagemalloc.h>

#include "arena/arena.h"
#include "design/size_classes.h"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <memory>
#include <memory_resource>
#include <random>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

namespace {

constexpr std::size_t KiB = 1024;
constexpr std::size_t MiB = 1024 * KiB;

// Sizes of every kind, some odd, some on a boundary.
constexpr std::size_t kSizesOfEveryKind[] = {
    1, 8, 33, 64, 65, 4097, 8192, 16 * KiB, 16 * KiB + 1, 100 * KiB, 1 * MiB, 3 * MiB, 9 * MiB + 5};

bool is_aligned(const void* p, std::size_t alignment) {
  return reinterpret_cast<std::uintptr_t>(p) % alignment == 0;
}

pm_arena_stats arena_stats(unsigned arena) {
  pm_arena_stats out{};
  EXPECT_EQ(pm_arena_stats_get(arena, &out), 0) << "arena " << arena;
  return out;
}

pm_stats heap_stats() {
  pm_stats out{};
  pm_stats_get(&out);
  return out;
}

unsigned char pattern(std::size_t i, unsigned salt) {
  return static_cast<unsigned char>(i * 7 + salt);
}

// Writes the block's first and last bytes and one byte per 512 between them.
void stamp(void* p, std::size_t size, unsigned salt) {
  auto* bytes = static_cast<unsigned char*>(p);
  for (std::size_t i = 0; i < size; i += 512) bytes[i] = pattern(i, salt);
  bytes[size - 1] = pattern(size - 1, salt);
}

bool stamp_intact(const void* p, std::size_t size, unsigned salt) {
  const auto* bytes = static_cast<const unsigned char*>(p);
  for (std::size_t i = 0; i < size; i += 512)
    if (bytes[i] != pattern(i, salt)) return false;
  return bytes[size - 1] == pattern(size - 1, salt);
}

// An explicit arena for the length of a test.
class ScopedArena {
 public:
  ScopedArena() : index_(pm_arena_create()) {}
  ~ScopedArena() {
    if (index_ != 0) pm_arena_destroy(index_);
  }
  ScopedArena(const ScopedArena&) = delete;
  ScopedArena& operator=(const ScopedArena&) = delete;
  [[nodiscard]] unsigned index() const { return index_; }
  [[nodiscard]] int flags() const { return PM_ARENA(index_); }

 private:
  unsigned index_;
};

// ---------------------------------------------------------------------------------------------
// Creation and destruction.

TEST(ExplicitArena, CreateReturnsDistinctNonZeroIndices) {
  const unsigned a = pm_arena_create();
  const unsigned b = pm_arena_create();
  ASSERT_NE(a, 0u);
  ASSERT_NE(b, 0u);
  EXPECT_NE(a, b);
  const pm_arena_stats fresh = arena_stats(a);
  EXPECT_EQ(fresh.blocks, 0u);
  EXPECT_EQ(fresh.allocated, 0u);
  EXPECT_EQ(fresh.active, 0u);
  EXPECT_EQ(pm_arena_destroy(a), 0);
  EXPECT_EQ(pm_arena_destroy(b), 0);
}

TEST(ExplicitArena, DestroyedIndexIsFreeForTheNextArena) {
  const unsigned a = pm_arena_create();
  ASSERT_NE(a, 0u);
  void* p = pm_mallocx(100, PM_ARENA(a));
  ASSERT_NE(p, nullptr);
  ASSERT_EQ(pm_arena_destroy(a), 0);
  const unsigned again = pm_arena_create();
  EXPECT_EQ(again, a) << "the lowest free index is taken first";
  const pm_arena_stats s = arena_stats(again);
  EXPECT_EQ(s.blocks, 0u) << "a new arena of an old index starts empty";
  void* q = pm_mallocx(100, PM_ARENA(again));
  ASSERT_NE(q, nullptr);
  pm_free(q);
  EXPECT_EQ(pm_arena_destroy(again), 0);
}

// ---------------------------------------------------------------------------------------------
// Allocation and reset.

TEST(ExplicitArena, AllocatesEveryKindAndAlignmentFromTheArena) {
  ScopedArena arena;
  ASSERT_NE(arena.index(), 0u);
  const pm_stats heap_before = heap_stats();
  std::vector<std::pair<void*, std::size_t>> blocks;
  std::size_t usable_total = 0;
  for (std::size_t alignment : {std::size_t{1}, std::size_t{64}, 4 * KiB, 64 * KiB, 4 * MiB}) {
    for (std::size_t size : kSizesOfEveryKind) {
      SCOPED_TRACE("size " + std::to_string(size) + ", alignment " + std::to_string(alignment));
      void* p = pm_mallocx(size, PM_ALIGN(alignment) | arena.flags());
      ASSERT_NE(p, nullptr);
      EXPECT_TRUE(is_aligned(p, alignment)) << p;
      const std::size_t usable = pm_sallocx(p, 0);
      EXPECT_GE(usable, size);
      EXPECT_EQ(usable, pm_nallocx(size, PM_ALIGN(alignment)));
      stamp(p, usable, unsigned(blocks.size()));
      blocks.emplace_back(p, usable);
      usable_total += usable;
    }
  }
  for (std::size_t i = 0; i < blocks.size(); ++i)
    ASSERT_TRUE(stamp_intact(blocks[i].first, blocks[i].second, unsigned(i))) << "block " << i;
  const pm_arena_stats full = arena_stats(arena.index());
  EXPECT_EQ(full.blocks, blocks.size());
  EXPECT_EQ(full.allocated, usable_total);
  EXPECT_GE(full.active, full.allocated);
  EXPECT_GE(full.mapped, full.active);
  EXPECT_EQ(heap_stats().allocated - heap_before.allocated, usable_total)
      << "the heap's statistics count the explicit arena's blocks";

  ASSERT_EQ(pm_arena_reset(arena.index()), 0);
  const pm_arena_stats empty = arena_stats(arena.index());
  EXPECT_EQ(empty.blocks, 0u);
  EXPECT_EQ(empty.allocated, 0u);
  EXPECT_EQ(empty.active, 0u);
  EXPECT_EQ(heap_stats().allocated, heap_before.allocated) << "reset freed every block";
}

TEST(ExplicitArena, HundredResetRoundsMapNothingNew) {
  ScopedArena arena;
  ASSERT_NE(arena.index(), 0u);
  std::mt19937_64 rng(0xa4e7a);
  std::vector<void*> blocks;
  std::size_t mapped_after_first_round = 0;
  std::size_t arena_mapped_after_first_round = 0;
  for (int round = 0; round < 100; ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    rng.seed(0xa4e7a);  // the same blocks every round
    blocks.clear();
    for (int i = 0; i < 3000; ++i) {
      const std::size_t size = i % 1000 == 999 ? 3 * MiB + rng() % MiB
                               : i % 100 == 99 ? 20 * KiB + rng() % (200 * KiB)
                                               : 1 + rng() % 2000;
      void* p = pm_mallocx(size, arena.flags());
      ASSERT_NE(p, nullptr);
      static_cast<unsigned char*>(p)[0] = 1;
      static_cast<unsigned char*>(p)[size - 1] = 2;
      blocks.push_back(p);
    }
    EXPECT_EQ(arena_stats(arena.index()).blocks, blocks.size());
    ASSERT_EQ(pm_arena_reset(arena.index()), 0);
    EXPECT_EQ(arena_stats(arena.index()).blocks, 0u);
    if (round == 0) {
      mapped_after_first_round = heap_stats().mapped;
      arena_mapped_after_first_round = arena_stats(arena.index()).mapped;
    } else {
      ASSERT_LE(heap_stats().mapped, mapped_after_first_round) << "a later round mapped memory";
      ASSERT_LE(arena_stats(arena.index()).mapped, arena_mapped_after_first_round);
    }
  }
}

TEST(ExplicitArena, DestroyReturnsTheArenasPages) {
  const unsigned arena = pm_arena_create();
  ASSERT_NE(arena, 0u);
  const pm_stats before = heap_stats();
  for (int i = 0; i < 2000; ++i) ASSERT_NE(pm_mallocx(1000 + i % 500, PM_ARENA(arena)), nullptr);
  for (int i = 0; i < 20; ++i) ASSERT_NE(pm_mallocx(500 * KiB, PM_ARENA(arena)), nullptr);
  ASSERT_NE(pm_mallocx(16 * MiB, PM_ARENA(arena)), nullptr);
  const pm_stats full = heap_stats();
  EXPECT_GE(full.mapped - before.mapped, 2000 * 1000 + 20 * 500 * KiB + 16 * MiB);
  ASSERT_EQ(pm_arena_destroy(arena), 0);
  const pm_stats after = heap_stats();
  EXPECT_LE(after.mapped, before.mapped + 256 * KiB)
      << "only metadata may stay mapped (slab descriptors, extent records)";
  EXPECT_EQ(after.allocated, before.allocated);
}

TEST(ExplicitArena, ZeroFlagZeroesReusedDirtyMemory) {
  ScopedArena arena;
  ASSERT_NE(arena.index(), 0u);
  for (std::size_t size : kSizesOfEveryKind) {
    void* dirty = pm_mallocx(size, arena.flags());
    ASSERT_NE(dirty, nullptr);
    std::memset(dirty, 0xAB, size);
  }
  ASSERT_EQ(pm_arena_reset(arena.index()), 0);
  for (std::size_t size : kSizesOfEveryKind) {
    SCOPED_TRACE("size " + std::to_string(size));
    auto* p = static_cast<unsigned char*>(pm_mallocx(size, PM_ZERO | arena.flags()));
    ASSERT_NE(p, nullptr);
    const std::size_t usable = pm_sallocx(p, 0);
    EXPECT_EQ(std::count(p, p + usable, 0), static_cast<std::ptrdiff_t>(usable));
  }
}

TEST(ExplicitArena, ReallocationKeepsTheBlockInItsArena) {
  ScopedArena arena;
  ASSERT_NE(arena.index(), 0u);
  const pm_stats heap_before = heap_stats();
  // Grow through every kind and back, with and without the arena flag, and with pm_realloc.
  const std::size_t steps[] = {24, 3000, 40 * KiB, 700 * KiB, 5 * MiB, 12 * MiB, 90 * KiB, 100, 8};
  void* p = pm_mallocx(10, arena.flags());
  ASSERT_NE(p, nullptr);
  stamp(p, 10, 3);
  std::size_t valid = 10;
  int step_number = 0;
  for (std::size_t size : steps) {
    SCOPED_TRACE("to " + std::to_string(size) + " bytes");
    const int kind = step_number++ % 3;
    void* q = kind == 0   ? pm_rallocx(p, size, arena.flags())
              : kind == 1 ? pm_rallocx(p, size, 0)
                          : pm_realloc(p, size);
    ASSERT_NE(q, nullptr);
    const std::size_t kept = std::min(valid, size);
    auto* bytes = static_cast<unsigned char*>(q);
    for (std::size_t i = 0; i + 1 < kept; i += 512) ASSERT_EQ(bytes[i], pattern(i, 3)) << i;
    const pm_arena_stats s = arena_stats(arena.index());
    EXPECT_EQ(s.blocks, 1u) << "the block left its arena";
    EXPECT_EQ(s.allocated, pm_sallocx(q, 0));
    stamp(q, size, 3);
    valid = size;
    p = q;
  }
  EXPECT_EQ(heap_stats().allocated - heap_before.allocated, pm_sallocx(p, 0))
      << "nothing was left behind in other arenas";
  ASSERT_EQ(pm_arena_reset(arena.index()), 0);
  EXPECT_EQ(heap_stats().allocated, heap_before.allocated);
}

TEST(ExplicitArena, RallocxNamingAnotherArenaMovesTheBlockThere) {
  ScopedArena from, to;
  ASSERT_NE(from.index(), 0u);
  ASSERT_NE(to.index(), 0u);
  void* p = pm_mallocx(100, from.flags());
  ASSERT_NE(p, nullptr);
  stamp(p, 100, 9);
  void* q = pm_rallocx(p, 5000, to.flags());
  ASSERT_NE(q, nullptr);
  EXPECT_TRUE(stamp_intact(q, 100, 9));
  EXPECT_EQ(arena_stats(from.index()).blocks, 0u);
  EXPECT_EQ(arena_stats(to.index()).blocks, 1u);
  pm_free(q);
  EXPECT_EQ(arena_stats(to.index()).blocks, 0u);
}

TEST(ExplicitArena, BlocksCanBeFreedOneByOneBeforeTheReset) {
  ScopedArena arena;
  ASSERT_NE(arena.index(), 0u);
  std::vector<void*> blocks;
  for (std::size_t size : kSizesOfEveryKind) {
    void* p = pm_mallocx(size, arena.flags());
    ASSERT_NE(p, nullptr);
    blocks.push_back(p);
  }
  std::size_t live = blocks.size();
  for (std::size_t i = 0; i < blocks.size(); i += 2) {
    switch (i % 3) {
      case 0: pm_free(blocks[i]); break;
      case 1: pm_dallocx(blocks[i], arena.flags()); break;
      default: pm_sdallocx(blocks[i], kSizesOfEveryKind[i], arena.flags()); break;
    }
    --live;
    EXPECT_EQ(arena_stats(arena.index()).blocks, live);
  }
  // Freed space is reused by the arena's next blocks.
  for (std::size_t i = 0; i < blocks.size(); i += 2) {
    blocks[i] = pm_mallocx(kSizesOfEveryKind[i], arena.flags());
    ASSERT_NE(blocks[i], nullptr);
  }
  EXPECT_EQ(arena_stats(arena.index()).blocks, blocks.size());
  ASSERT_EQ(pm_arena_reset(arena.index()), 0);
  EXPECT_EQ(arena_stats(arena.index()).blocks, 0u);
}

TEST(ExplicitArena, HugeBlocksOfDifferentArenasNeverMerge) {
  // Huge extents mapped one after another usually sit side by side; each arena must keep its
  // free extents to itself, however they border each other.
  ScopedArena a, b;
  ASSERT_NE(a.index(), 0u);
  ASSERT_NE(b.index(), 0u);
  for (int round = 0; round < 20; ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    std::vector<void*> in_a, in_b, automatic;
    for (int i = 0; i < 6; ++i) {
      in_a.push_back(pm_mallocx(3 * MiB, a.flags()));
      in_b.push_back(pm_mallocx(3 * MiB, b.flags()));
      automatic.push_back(pm_malloc(3 * MiB));
    }
    for (void* p : in_b) pm_free(p);
    for (void* p : automatic) pm_free(p);
    ASSERT_EQ(pm_arena_reset(a.index()), 0);
    EXPECT_EQ(arena_stats(a.index()).blocks, 0u);
    EXPECT_EQ(arena_stats(b.index()).blocks, 0u);
    // Each arena serves its next blocks from its own free extents.
    const std::size_t b_mapped = arena_stats(b.index()).mapped;
    for (int i = 0; i < 6; ++i) ASSERT_NE(pm_mallocx(3 * MiB, b.flags()), nullptr);
    EXPECT_EQ(arena_stats(b.index()).mapped, b_mapped);
    ASSERT_EQ(pm_arena_reset(b.index()), 0);
  }
}

TEST(ExplicitArena, ArenaZeroIsTheAutomaticArena) {
  void* p = pm_mallocx(64, PM_ARENA(0));
  ASSERT_NE(p, nullptr);
  void* q = pm_mallocx(5 * MiB, PM_ARENA(0));
  ASSERT_NE(q, nullptr);
  pm_free(p);
  pm_free(q);
  EXPECT_EQ(pm_arena_reset(0), EINVAL) << "automatic arenas cannot be reset";
  EXPECT_EQ(pm_arena_destroy(0), EINVAL);
}

// ---------------------------------------------------------------------------------------------
// The reset itself, on an Arena driven directly: random small and large blocks (aligned ones
// leave freed heads before them), some freed one by one, then a reset; the run manager's
// invariants must hold and every page must be free afterwards, with checks off and on (on,
// large blocks' interior pages are tagged).

void reset_rounds_keep_invariants(std::uint64_t seed) {
  SCOPED_TRACE("seed " + std::to_string(seed));
  auto arena = std::make_unique<pagemalloc::Arena>(4000);
  std::mt19937_64 rng(seed);
  struct Live {
    void* p;
    bool large;
    std::size_t pages;
  };
  for (int round = 0; round < 30; ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    std::vector<Live> live;
    const int count = 200 + int(rng() % 2000);
    for (int i = 0; i < count; ++i) {
      if (rng() % 8 == 0) {
        const std::size_t bytes = 17 * KiB + rng() % (600 * KiB);
        const std::size_t align = std::size_t{4096} << (rng() % 6);
        bool zeroed = false;
        void* p = arena->alloc_large(bytes, align, zeroed);
        ASSERT_NE(p, nullptr);
        ASSERT_TRUE(is_aligned(p, align));
        live.push_back({p, true, (bytes + 4095) / 4096});
      } else {
        void* p = arena->alloc_small(unsigned(rng() % pagemalloc::kNumClasses));
        ASSERT_NE(p, nullptr);
        live.push_back({p, false, 0});
      }
    }
    for (std::size_t i = 0; i < live.size(); ++i) {
      if (rng() % 3 != 0) continue;
      const Live& b = live[i];
      if (b.large) {
        arena->free_large(b.p, pagemalloc::PageCount(b.pages));
      } else {
        auto e =
            pagemalloc::page_entry(pagemalloc::chunk_base_of(b.p), pagemalloc::page_index_of(b.p));
        arena->free_small(static_cast<pagemalloc::Slab*>(e.slab_descriptor()), b.p, "test");
      }
    }
    arena->reset();
    const char* problem = arena->check_invariants();
    ASSERT_EQ(problem, nullptr) << problem;
    const pagemalloc::ArenaStats s = arena->stats();
    EXPECT_EQ(s.allocated, 0u);
    EXPECT_EQ(s.blocks, 0u);
    EXPECT_EQ(s.active_pages, 0u);
    ASSERT_GT(s.chunks, 0u);
    const std::size_t header_pages = pagemalloc::kPagesPerChunk - pagemalloc::kMaxRunPages.value();
    EXPECT_GE(s.free_pages, s.chunks * (pagemalloc::kPagesPerChunk - header_pages))
        << "some pages were not freed";
  }
}

TEST(ArenaReset, FreesEveryRunAndKeepsTheRunManagersInvariants) {
  for (std::uint64_t seed : {1u, 2u, 3u}) reset_rounds_keep_invariants(seed);
}

TEST(ArenaReset, FreesEveryRunWithChecksOn) {
  long on = 1, old = 0;
  ASSERT_EQ(pm_ctl("checks", &old, &on), 0);
  reset_rounds_keep_invariants(4);
  ASSERT_EQ(pm_ctl("checks", nullptr, &old), 0);
}

// ---------------------------------------------------------------------------------------------
// Threads.

TEST(ExplicitArena, ThreadsShareOneArenaAndFreeEachOthersBlocks) {
  ScopedArena arena;
  ASSERT_NE(arena.index(), 0u);
  constexpr int kThreads = 4;
  constexpr int kBlocksPerThread = 4000;
  // Each thread allocates its blocks, then frees the odd half of its neighbour's.
  std::vector<std::vector<void*>> blocks(kThreads);
  std::atomic<int> failures{0};
  std::atomic<int> allocated_threads{0};
  auto work = [&](int t) {
    std::mt19937_64 rng(t);
    for (int i = 0; i < kBlocksPerThread; ++i) {
      const std::size_t size = i % 500 == 0 ? 40 * KiB : 1 + rng() % 1500;
      void* p = pm_mallocx(size, arena.flags());
      if (p == nullptr) {
        failures.fetch_add(1);
        continue;
      }
      std::memset(p, t + 1, size);
      blocks[t].push_back(p);
    }
    allocated_threads.fetch_add(1);
    while (allocated_threads.load() < kThreads) std::this_thread::yield();
    const auto& theirs = blocks[(t + 1) % kThreads];
    for (std::size_t i = 1; i < theirs.size(); i += 2) {
      if (*static_cast<unsigned char*>(theirs[i]) != (t + 1) % kThreads + 1) failures.fetch_add(1);
      pm_free(theirs[i]);
    }
  };
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) threads.emplace_back(work, t);
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(arena_stats(arena.index()).blocks, std::size_t{kThreads} * kBlocksPerThread / 2);
  for (const auto& mine : blocks)
    for (std::size_t i = 0; i < mine.size(); i += 2)
      ASSERT_EQ(*static_cast<unsigned char*>(mine[i]), (&mine - blocks.data()) + 1);
  ASSERT_EQ(pm_arena_reset(arena.index()), 0);
  EXPECT_EQ(arena_stats(arena.index()).blocks, 0u);
}

TEST(ExplicitArena, ThreadsCreateAndDestroyArenasAtOnce) {
  std::atomic<int> failures{0};
  auto work = [&] {
    for (int round = 0; round < 50; ++round) {
      const unsigned arena = pm_arena_create();
      if (arena == 0) {
        failures.fetch_add(1);
        continue;
      }
      for (int i = 0; i < 100; ++i)
        if (pm_mallocx(64 + i, PM_ARENA(arena)) == nullptr) failures.fetch_add(1);
      if (pm_arena_destroy(arena) != 0) failures.fetch_add(1);
    }
  };
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) threads.emplace_back(work);
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(failures.load(), 0);
}

// ---------------------------------------------------------------------------------------------
// std::pmr.

TEST(ArenaResource, PmrContainersLiveInTheArena) {
  pagemalloc::ArenaResource resource;
  {
    std::pmr::vector<std::uint64_t> values(&resource);
    for (std::uint64_t i = 0; i < 100000; ++i) values.push_back(i * i);
    std::pmr::unordered_map<std::pmr::string, std::uint64_t> index(&resource);
    for (std::uint64_t i = 0; i < 10000; ++i)
      index.emplace(
          std::pmr::string(
              "a key long enough to leave the small-string buffer " + std::to_string(i), &resource),
          i);
    EXPECT_GT(resource.stats().blocks, 10000u);
    for (std::uint64_t i = 0; i < 100000; ++i) ASSERT_EQ(values[i], i * i);
    for (std::uint64_t i = 0; i < 10000; i += 97) {
      auto it = index.find(std::pmr::string(
          "a key long enough to leave the small-string buffer " + std::to_string(i), &resource));
      ASSERT_NE(it, index.end());
      EXPECT_EQ(it->second, i);
    }
  }
  EXPECT_EQ(resource.stats().blocks, 0u) << "the containers freed every block on destruction";
}

TEST(ArenaResource, ResetFreesWhatContainersLeftAndTheArenaIsReused) {
  pagemalloc::ArenaResource resource;
  std::size_t mapped_first = 0;
  for (int round = 0; round < 20; ++round) {
    // A container whose destructor never runs: the reset takes its memory back.
    auto* values = new std::pmr::vector<int>(&resource);
    for (int i = 0; i < 50000; ++i) values->push_back(i);
    ASSERT_EQ((*values)[49999], 49999);
    ::operator delete(values);  // the vector itself, not its elements' memory
    resource.reset();
    EXPECT_EQ(resource.stats().blocks, 0u);
    if (round == 0) mapped_first = resource.stats().mapped;
    else EXPECT_LE(resource.stats().mapped, mapped_first);
  }
}

TEST(ArenaResource, HonoursAlignmentAndEquality) {
  pagemalloc::ArenaResource a, b;
  EXPECT_TRUE(a.is_equal(a));
  EXPECT_FALSE(a.is_equal(b));
  EXPECT_NE(a.arena(), b.arena());
  for (std::size_t alignment : {1ul, 8ul, 64ul, 4096ul, 65536ul}) {
    void* p = a.allocate(100, alignment);
    EXPECT_TRUE(is_aligned(p, alignment)) << alignment;
    a.deallocate(p, 100, alignment);
  }
  EXPECT_EQ(a.stats().blocks, 0u);
}

}  // namespace
