// Automatic arenas lending large blocks to each other and purging for each other while their
// threads allocate and free (arena.h, ArenaNeighbours): each thread works in its own arena,
// waves of large blocks and of small regions, and frees every block to the arena its chunk
// names, which may be a neighbour that lent it. Nothing is lost, no block is handed out twice,
// and every arena's books balance at the end. Run under ThreadSanitizer too (label threads).
#include <gtest/gtest.h>

#include <atomic>
#include <barrier>
#include <cstdint>
#include <cstring>
#include <latch>
#include <memory>
#include <random>
#include <set>
#include <thread>
#include <vector>

#include "arena/arena.h"
#include "chunks/address_map.h"
#include "design/size_classes.h"
#include "threads/automatic_arenas.h"

namespace {

using pagemalloc::Arena;
using pagemalloc::PageCount;

Arena* owner_of(const void* p) {
  return pagemalloc::AddressMap::owner_of<Arena>(
      pagemalloc::address_map().get(pagemalloc::chunk_base_of(p)));
}

TEST(StressArenaNeighbours, ArenasLendAndPurgeWhileTheirThreadsWork) {
  constexpr unsigned kThreads = 4, kWaves = 400, kLargePerWave = 24;
  auto arenas = std::make_unique<pagemalloc::AutomaticArenas>();
  arenas->start(nullptr);
  arenas->configure(kThreads);
  constexpr unsigned kMaxRounds = 32;
  std::atomic<std::size_t> lent{0};  // blocks a neighbour served
  // The threads start their waves together: one that ran all its waves before the others
  // started (a loaded machine) would find no neighbour to lend, or be lent nothing. Whether a
  // neighbour lends depends on timing (its lock free, its freed pages not yet reused), so the
  // threads run another round of waves, together, until one was lent (at most kMaxRounds).
  std::latch start(kThreads);
  unsigned rounds = 0;
  bool done = false;
  std::barrier round_end(kThreads, [&]() noexcept {
    ++rounds;
    done = lent.load() > 0 || rounds == kMaxRounds;
  });
  std::vector<std::thread> threads;
  for (unsigned t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      start.arrive_and_wait();
      Arena& mine = *arenas->at(t);
      std::mt19937 random(t + 1);
      std::vector<std::pair<void*, std::size_t>> large;
      std::vector<void*> small(300);
      constexpr unsigned kClass = pagemalloc::size_class_of(512);
      // A failed assertion returns from this round only: the thread still meets the others.
      auto round = [&] {
        for (unsigned wave = 0; wave < kWaves; ++wave) {
          // Waves of different heights: the arenas' peaks come at different times.
          const unsigned count = 1 + (wave * 7 + t * 5) % kLargePerWave;
          for (unsigned i = 0; i < count; ++i) {
            const std::size_t bytes = (20 + random() % 280) * 1024;
            bool zeroed = false;
            void* p = mine.alloc_large(bytes, pagemalloc::kPageSize, zeroed, true);
            ASSERT_NE(p, nullptr);
            std::memset(p, int(t), 64);  // a block handed out twice would be overwritten
            if (owner_of(p) != &mine) lent.fetch_add(1, std::memory_order_relaxed);
            large.emplace_back(p, bytes);
          }
          unsigned got = mine.alloc_batch(kClass, small.data(), unsigned(small.size()));
          for (auto& [p, bytes] : large) {
            ASSERT_EQ(*static_cast<unsigned char*>(p), t);
            owner_of(p)->free_large(p, PageCount::covering(bytes));
          }
          large.clear();
          mine.free_batch(small.data(), got, "test");
        }
      };
      while (true) {
        round();
        round_end.arrive_and_wait();
        if (done || ::testing::Test::HasFatalFailure()) break;
      }
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_GT(lent.load(), 0u) << "no block was lent in " << rounds
                             << " rounds: the test did not exercise the lending";
  for (unsigned t = 0; t < kThreads; ++t) {
    Arena& arena = *arenas->at(t);
    EXPECT_EQ(arena.stats().allocated, 0u) << "arena " << t;
    EXPECT_EQ(arena.check_blocks(), nullptr) << "arena " << t;
    const char* problem = arena.check_invariants();
    EXPECT_EQ(problem, nullptr) << "arena " << t << ": " << problem;
  }
}

}  // namespace
