// Free pages are not kept on one side while the other maps more (huge.h): before an arena
// maps a chunk, it takes one from the free extents the huge blocks' manager beside it caches,
// pages resident as they are (chunk_pal.h); after the manager maps more, the arena purges as
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
#include "heap.h"
#include "pagemalloc/pagemalloc.h"

namespace {

constexpr std::size_t kMiB = std::size_t{1} << 20;

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
  release(alloc(8 * kMiB));
  const std::size_t cached = mapped();
  // Six runs of 1.5 MiB: one per 2 MiB chunk, 12 MiB of chunks in all.
  void* runs[6];
  for (void*& p : runs) p = alloc(3 * kMiB / 2);
  // Without the cache's chunks the arena would map 12 MiB more; with them, 12 - 8 = 4 MiB.
  EXPECT_LE(mapped(), cached + 4 * kMiB + kMiB);
  for (void* p : runs) release(p);
}

TEST_F(HugeGiveBack, OnlyWhatIsNeededLeavesTheCache) {
  release(alloc(16 * kMiB));
  const std::size_t cached = mapped();
  void* run = alloc(3 * kMiB / 2);  // one chunk: 2 MiB of the 16 go back
  // The chunk's 2 MiB come out of the cache; the run manager's records (two first blocks of
  // 64 KiB, record_pool.h; a third for the allocated runs' tree in a design that has it)
  // are mapped beside it.
  const std::size_t record_blocks = pagemalloc::BuildConfig::kAllocatedRunsTree ? 3 : 2;
  EXPECT_LE(mapped(), cached + record_blocks * 64 * 1024);
  // The 14 MiB left are still cached: a block of 12 MiB is carved from them.
  void* big = alloc(12 * kMiB);
  EXPECT_LE(mapped(), cached + kMiB);
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
  void* runs[6];  // one 1.5 MiB run per 2 MiB chunk
  for (void*& p : runs) p = alloc(3 * kMiB / 2);
  for (void* p : runs) release(p);
  const std::size_t dirty = mapped();  // six wholly free chunks, dirty, still mapped
  void* big = alloc(8 * kMiB);
  // 8 MiB mapped, and at least 8 MiB of free pages purged: four of the chunks, released.
  EXPECT_LE(mapped(), dirty + 8 * kMiB - 8 * kMiB + kMiB);
  release(big);
}

TEST_F(HugeGiveBack, AHugeBlockCarvedFromTheCacheLeavesTheArenaAlone) {
  release(alloc(8 * kMiB));
  void* runs[2];
  for (void*& p : runs) p = alloc(3 * kMiB / 2);  // these two chunks take 4 of the 8 MiB
  for (void* p : runs) release(p);
  const std::size_t before = mapped();
  void* fits = alloc(4 * kMiB);  // carved from the 4 MiB left: nothing mapped, nothing purged
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
  pm_free(alloc(8 * kMiB));
  const std::size_t cached = mapped();
  void* runs[6];
  for (void*& p : runs) p = alloc(3 * kMiB / 2);
  EXPECT_LE(mapped(), cached + 4 * kMiB + kMiB);
  for (void* p : runs) pm_free(p);
}

TEST_F(HugeGiveBackAutomatic, AHugeBlockMappedAnewHasTheArenasPurge) {
  void* runs[6];
  for (void*& p : runs) p = alloc(3 * kMiB / 2);
  for (void* p : runs) pm_free(p);
  const std::size_t dirty = mapped();
  void* big = alloc(8 * kMiB);
  EXPECT_LE(mapped(), dirty + kMiB);
  pm_free(big);
}

}  // namespace
