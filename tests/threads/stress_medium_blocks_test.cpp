// Medium blocks (design/medium_classes.h) under threads: more threads than CPUs allocate and
// free blocks of 64-256 KiB through their caches' medium bins, hand some to each other
// through shared slots (a foreign block freed by a thread of another arena goes home), and
// grow some in place, while one more thread checks the heap's invariants, which read the page
// entries the bins change without a lock. Every block keeps its pattern until it is freed.
// Run under ThreadSanitizer too (label threads).
#include <gtest/gtest.h>

#include <pagemalloc/pagemalloc.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <random>
#include <thread>
#include <vector>

#include "heap/heap_invariants.h"

namespace {

constexpr std::size_t kKiB = 1024;
constexpr unsigned kThreads = 6;
constexpr int kStepsPerThread = 3000;
constexpr unsigned kSlots = 32;

// A block's first and last words: its length, and its length again.
void write(void* p, std::size_t bytes) {
  auto* words = static_cast<std::uint64_t*>(p);
  words[0] = bytes;
  words[bytes / sizeof(std::uint64_t) - 1] = bytes;
}
bool intact(const void* p) {
  const auto* words = static_cast<const std::uint64_t*>(p);
  const std::uint64_t bytes = words[0];
  return bytes >= 64 * kKiB && bytes <= 320 * kKiB &&
         words[bytes / sizeof(std::uint64_t) - 1] == bytes;
}

TEST(StressMediumBlocks, ThreadsShareAndGrowMediumBlocksWhileTheInvariantsAreChecked) {
  std::atomic<void*> slots[kSlots] = {};
  std::atomic<bool> done{false};
  std::atomic<unsigned> broken{0};
  std::atomic<const char*> problem{nullptr};
  std::thread checker([&] {
    while (!done.load()) {
      if (const char* p = pagemalloc::check_heap_invariants()) problem.store(p);
      std::this_thread::yield();
    }
  });
  std::vector<std::thread> threads;
  for (unsigned t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937_64 rng(t + 1);
      std::uniform_int_distribution<std::size_t> length(64 * kKiB + 8, 256 * kKiB);
      std::vector<void*> mine;
      for (int step = 0; step < kStepsPerThread; ++step) {
        const std::size_t bytes = length(rng) & ~std::size_t{7};
        void* p = pm_malloc(bytes);
        if (p == nullptr) {
          broken.fetch_add(1);
          break;
        }
        write(p, bytes);
        if (step % 5 == 0) {  // handed to whoever takes the slot next
          const unsigned s = unsigned(rng() % kSlots);
          void* old = slots[s].exchange(p, std::memory_order_acq_rel);
          if (old != nullptr && !intact(old)) broken.fetch_add(1);
          pm_free(old);
        } else if (step % 7 == 0) {
          void* q = pm_rallocx(p, bytes + 64 * kKiB, PM_ALIGN(64));
          if (q == nullptr || static_cast<std::uint64_t*>(q)[0] != bytes) broken.fetch_add(1);
          if (q != nullptr) {
            write(q, bytes + 64 * kKiB);
            mine.push_back(q);
          }
        } else {
          mine.push_back(p);
        }
        if (mine.size() > 8) {
          void* victim = mine[rng() % mine.size()];
          std::erase(mine, victim);
          if (!intact(victim)) broken.fetch_add(1);
          pm_free(victim);
        }
      }
      for (void* p : mine) pm_free(p);
    });
  }
  for (std::thread& thread : threads) thread.join();
  done.store(true);
  checker.join();
  for (auto& slot : slots) {
    void* p = slot.exchange(nullptr);
    if (p != nullptr && !intact(p)) broken.fetch_add(1);
    pm_free(p);
  }
  EXPECT_EQ(broken.load(), 0u);
  EXPECT_EQ(problem.load(), nullptr) << problem.load();
  EXPECT_EQ(pagemalloc::check_heap_invariants(), nullptr);
}

}  // namespace
