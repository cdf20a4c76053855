// Bump arenas from two threads, under ThreadSanitizer too (label `threads`): each thread with
// arenas of its own (a pagemalloc::BumpArena and one used through pm_mallocx), and both on one
// shared arena, round after round, with a reset of every arena between rounds.
//
// What is checked: every block keeps the bytes its thread wrote until the round ends (no two
// threads were given the same memory); the shared arena handed out no more regions than the
// bytes bumped need plus one span (at most 4 regions) per thread and round, so
// its lock was taken only when a thread's span was full, never per block; after each reset
// the live counts are zero. The main thread reads the statistics while the threads bump.
#include <gtest/gtest.h>

#include <pagemalloc/memory_resource.h>
#include <pagemalloc/pagemalloc.h>

#include "explicit/bump_space.h"

#include <algorithm>
#include <barrier>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <random>
#include <thread>
#include <vector>

namespace {

constexpr int kThreads = 2;
constexpr int kRounds = 40;
constexpr int kBlocksPerRound = 4000;

struct Block {
  unsigned char* p;
  std::size_t size;
  unsigned char value;
};

void write(Block& b) { std::memset(b.p, b.value, b.size); }

bool intact(const Block& b) {
  for (std::size_t i = 0; i < b.size; ++i)
    if (b.p[i] != b.value) return false;
  return true;
}

TEST(BumpArenaThreads, OwnAndSharedArenasKeepEveryThreadsBytes) {
  const unsigned shared = pm_arena_create_ex(PM_ARENA_BUMP);
  ASSERT_NE(shared, 0u);
  std::barrier round_end(kThreads + 1);
  std::barrier round_start(kThreads + 1);
  std::vector<std::size_t> shared_bytes(kThreads, 0);
  std::vector<int> failures(kThreads, 0);

  auto work = [&](int t) {
    pagemalloc::BumpArena mine;
    const unsigned own = pm_arena_create_ex(PM_ARENA_BUMP);
    std::mt19937 rng(unsigned(t) * 7919u + 1u);
    std::uniform_int_distribution<std::size_t> size_of(16, 256);
    for (int round = 0; round < kRounds; ++round) {
      round_start.arrive_and_wait();
      std::vector<Block> blocks;
      blocks.reserve(3 * kBlocksPerRound);
      for (int i = 0; i < kBlocksPerRound; ++i) {
        const auto value = static_cast<unsigned char>(t * 100 + i);
        const std::size_t a = size_of(rng), b = size_of(rng), c = size_of(rng);
        blocks.push_back({static_cast<unsigned char*>(mine.allocate(a)), a, value});
        blocks.push_back({static_cast<unsigned char*>(pm_mallocx(b, PM_ARENA(own))), b, value});
        blocks.push_back({static_cast<unsigned char*>(pm_mallocx(c, PM_ARENA(shared))), c, value});
        shared_bytes[t] += pagemalloc::bump_stride(c);
        for (std::size_t k = blocks.size() - 3; k < blocks.size(); ++k) write(blocks[k]);
        if (i % 8 == 0) pm_free(blocks[blocks.size() - 1].p), blocks.pop_back();
      }
      for (const Block& b : blocks)
        if (!intact(b)) ++failures[t];
      round_end.arrive_and_wait();  // the main thread resets the shared arena
      mine.reset();
      pm_arena_reset(own);
      pm_arena_stats s{};
      if (mine.stats().blocks != 0 || pm_arena_stats_get(own, &s) != 0 || s.blocks != 0)
        ++failures[t];
    }
    pm_arena_destroy(own);
  };

  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) threads.emplace_back(work, t);
  std::size_t most_regions = 0;
  std::size_t most_needed = 0;
  for (int round = 0; round < kRounds; ++round) {
    round_start.arrive_and_wait();
    // The statistics read every thread's lease while the threads bump (relaxed atomics: no
    // data race for ThreadSanitizer); the live count only grows within a round.
    std::size_t seen = 0;
    for (int look = 0; look < 20; ++look) {
      pm_arena_stats during{};
      ASSERT_EQ(pm_arena_stats_get(shared, &during), 0);
      pm_stats heap{};
      pm_stats_get(&heap);
      EXPECT_GE(during.blocks + kBlocksPerRound, seen) << "round " << round;
      seen = during.blocks;
    }
    round_end.arrive_and_wait();
    pm_arena_stats s{};
    ASSERT_EQ(pm_arena_stats_get(shared, &s), 0);
    const std::size_t regions = s.active / pagemalloc::kBumpRegionSize;
    std::size_t needed = 0;
    for (int t = 0; t < kThreads; ++t) {
      needed += shared_bytes[t] / pagemalloc::kBumpRegionSize + 1;
      shared_bytes[t] = 0;
    }
    most_regions = std::max(most_regions, regions);
    most_needed = std::max(most_needed, needed);
    EXPECT_LE(regions, needed + kThreads * pagemalloc::kBumpMaxSpan) << "round " << round;
    ASSERT_EQ(pm_arena_reset(shared), 0);
    ASSERT_EQ(pm_arena_stats_get(shared, &s), 0);
    EXPECT_EQ(s.blocks, 0u);
  }
  for (std::thread& t : threads) t.join();
  for (int t = 0; t < kThreads; ++t) EXPECT_EQ(failures[t], 0) << "thread " << t;
  EXPECT_GT(most_regions, 1u);
  EXPECT_EQ(pm_arena_destroy(shared), 0);
}

}  // namespace
