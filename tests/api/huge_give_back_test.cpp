// Free pages are not kept on one side while the other maps more (huge.h): before an arena
// maps a chunk, it takes one from the free extents the huge blocks' manager beside it caches,
// pages resident as they are (arena_chunks.h); after the manager maps more, the arena purges as
// many bytes of its oldest free pages (a wholly free chunk goes back to the OS). Each
// test runs in an explicit arena of its own (its own huge blocks' manager and chunks), with
// the decay switched off, so that only these can unmap; the arena's `mapped` tells what the
// OS holds for it.
#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <set>
#include <utility>
#include <vector>

#include "build_config.h"
#include "heap/heap.h"
#include "pagemalloc/pagemalloc.h"

namespace {

constexpr std::size_t kMiB = std::size_t{1} << 20;
// Sizes that count chunks are in chunks (2 MiB, or 1 MiB in the 2008 designs): a run of three
// quarters of one takes a chunk of its own, and a block of several is huge.
constexpr std::size_t kChunk = pagemalloc::kChunkSize;
constexpr std::size_t kRun = 3 * kChunk / 4;

class HugeGiveBack : public ::testing::Test {
 protected:
  void SetUp() override {
    const long never = -1;
    ASSERT_EQ(pm_ctl("decay_ms", &saved_decay_, &never), 0);
    arena_ = pm_arena_create();
    ASSERT_NE(arena_, 0u);
  }
  void TearDown() override {
    EXPECT_EQ(pm_arena_destroy(arena_), 0);
    pm_ctl("decay_ms", nullptr, &saved_decay_);
  }

  std::size_t mapped() const {
    pm_arena_stats s{};
    EXPECT_EQ(pm_arena_stats_get(arena_, &s), 0);
    return s.mapped;
  }
  void* alloc(std::size_t bytes) {
    void* p = pm_mallocx(bytes, PM_ARENA(arena_));
    EXPECT_NE(p, nullptr);
    if (p != nullptr) std::memset(p, 0x5a, bytes);  // resident, as a program's would be
    return p;
  }
  void release(void* p) { pm_dallocx(p, PM_ARENA(arena_)); }

  long saved_decay_ = 0;
  unsigned arena_ = 0;
};

TEST_F(HugeGiveBack, AFreedExtentIsReusedAsItIsWithoutMappingMore) {
  void* first = alloc(8 * kMiB);
  release(first);
  const std::size_t cached = mapped();
  void* again = alloc(8 * kMiB);
  EXPECT_EQ(again, first);
  EXPECT_EQ(mapped(), cached);
  release(again);
}

TEST_F(HugeGiveBack, AHugeBlockThatNoExtentFitsLeavesTheCacheAlone) {
  const std::size_t before = mapped();
  release(alloc(4 * kMiB));
  void* big = alloc(8 * kMiB);  // mapped anew; the 4 MiB extent stays for a later fit
  EXPECT_GE(mapped(), before + 12 * kMiB);
  void* fits = alloc(4 * kMiB);
  EXPECT_LE(mapped(), before + 12 * kMiB + kMiB);
  release(fits);
  release(big);
}

TEST_F(HugeGiveBack, NewChunksForSmallerBlocksAreTakenFromTheCacheFirst) {
  release(alloc(4 * kChunk));
  const std::size_t cached = mapped();
  // Six runs, one per chunk.
  void* runs[6];
  for (void*& p : runs) p = alloc(kRun);
  // Without the cache's chunks the arena would map six chunks more; with them, 6 - 4 = 2.
  EXPECT_LE(mapped(), cached + 2 * kChunk + kChunk / 2);
  for (void* p : runs) release(p);
}

TEST_F(HugeGiveBack, OnlyWhatIsNeededLeavesTheCache) {
  release(alloc(8 * kChunk));
  const std::size_t cached = mapped();
  void* run = alloc(kRun);  // one chunk of the 8 goes to the arena
  // The chunk comes out of the cache; the run manager's records (two first blocks of
  // 64 KiB, record_pool.h; a third for the allocated runs' tree in a design that has it)
  // are mapped beside it.
  const std::size_t record_blocks = pagemalloc::BuildConfig::kAllocatedRunsTree ? 3 : 2;
  EXPECT_LE(mapped(), cached + record_blocks * 64 * 1024);
  // The 7 chunks left are still cached: a block of 6 is carved from them.
  void* big = alloc(6 * kChunk);
  EXPECT_LE(mapped(), cached + kChunk / 2);
  release(big);
  release(run);
}

// The arena's chunks are the extent's granules, taken with the bytes the huge block left in
// them: what the arena hands out as zeroed reads zero all the same, and the arena's and the
// huge blocks' records agree throughout.
TEST_F(HugeGiveBack, ChunksTakenFromTheCacheKeepTheirPagesAndStillGiveZeroedBlocks) {
  auto* extent = static_cast<std::byte*>(alloc(8 * kMiB));  // every byte 0x5a
  ASSERT_NE(extent, nullptr);
  release(extent);
  const std::size_t cached = mapped();
  auto within_extent = [&](const void* p) {
    const auto* b = static_cast<const std::byte*>(p);
    return b >= extent && b < extent + 8 * kMiB;
  };
  auto reads_zero = [](const void* p, std::size_t bytes) {
    const auto* b = static_cast<const unsigned char*>(p);
    for (std::size_t i = 0; i < bytes; ++i)
      if (b[i] != 0) return false;
    return true;
  };
  // Small blocks and runs of a page to 256 KiB, 4 MiB in all: more than one chunk's worth.
  std::vector<std::pair<void*, std::size_t>> blocks;
  std::set<std::uintptr_t> chunks;
  for (std::size_t size = 16; blocks.size() < 120; size = size >= 256 * 1024 ? 16 : size * 2) {
    void* p = pm_mallocx(size, PM_ARENA(arena_) | PM_ZERO);
    ASSERT_NE(p, nullptr);
    EXPECT_TRUE(within_extent(p)) << size;
    EXPECT_TRUE(reads_zero(p, size)) << size;
    std::memset(p, 0xa5, size);
    blocks.emplace_back(p, size);
    chunks.insert(reinterpret_cast<std::uintptr_t>(p) & ~(pagemalloc::kChunkSize - 1));
  }
  EXPECT_GE(chunks.size(), 2u);
  EXPECT_EQ(pagemalloc::heap().check_invariants(), nullptr);
  // Taken, not mapped: what is new is metadata (records, in blocks of 64 KiB), less than half
  // a chunk, where one chunk mapped anew would add a whole one.
  EXPECT_LT(mapped(), cached + pagemalloc::kChunkSize / 2);
  for (auto [p, size] : blocks) release(p);
  EXPECT_EQ(pagemalloc::heap().check_invariants(), nullptr);
}

TEST_F(HugeGiveBack, AHugeBlockMappedAnewHasTheArenaPurgeItsOldestFreePages) {
  void* runs[6];  // one run per chunk
  for (void*& p : runs) p = alloc(kRun);
  for (void* p : runs) release(p);
  const std::size_t dirty = mapped();  // six wholly free chunks, dirty, still mapped
  void* big = alloc(4 * kChunk);
  // Four chunks' worth mapped, and as many bytes of free pages purged: four of the chunks,
  // released.
  EXPECT_LE(mapped(), dirty + kChunk / 2);
  release(big);
}

TEST_F(HugeGiveBack, AHugeBlockCarvedFromTheCacheLeavesTheArenaAlone) {
  release(alloc(4 * kChunk));
  void* runs[2];
  for (void*& p : runs) p = alloc(kRun);  // these two chunks take 2 of the 4
  for (void* p : runs) release(p);
  const std::size_t before = mapped();
  void* fits = alloc(2 * kChunk);  // carved from the 2 left: nothing mapped, nothing purged
  EXPECT_EQ(mapped(), before);
  release(fits);
}

// The same two ways on the automatic arenas and their shared huge blocks' manager (the
// heap's wiring, heap.h), through pm_malloc and the heap's statistics.
class HugeGiveBackAutomatic : public ::testing::Test {
 protected:
  void SetUp() override {
    const long never = -1;
    ASSERT_EQ(pm_ctl("decay_ms", &saved_decay_, &never), 0);
    pm_purge();  // no extent or free page left from an earlier test of this process
  }
  void TearDown() override { pm_ctl("decay_ms", nullptr, &saved_decay_); }

  static std::size_t mapped() {
    pm_stats s{};
    pm_stats_get(&s);
    return s.mapped;
  }
  static void* alloc(std::size_t bytes) {
    void* p = pm_malloc(bytes);
    EXPECT_NE(p, nullptr);
    if (p != nullptr) std::memset(p, 0x5a, bytes);
    return p;
  }

  long saved_decay_ = 0;
};

TEST_F(HugeGiveBackAutomatic, NewChunksAreTakenFromTheSharedCacheFirst) {
  pm_free(alloc(4 * kChunk));
  const std::size_t cached = mapped();
  void* runs[6];
  for (void*& p : runs) p = alloc(kRun);
  EXPECT_LE(mapped(), cached + 2 * kChunk + kChunk / 2);
  for (void* p : runs) pm_free(p);
}

TEST_F(HugeGiveBackAutomatic, AHugeBlockMappedAnewHasTheArenasPurge) {
  void* runs[6];
  for (void*& p : runs) p = alloc(kRun);
  for (void* p : runs) pm_free(p);
  const std::size_t dirty = mapped();
  void* big = alloc(4 * kChunk);
  EXPECT_LE(mapped(), dirty + kChunk / 2);
  pm_free(big);
}

}  // namespace
