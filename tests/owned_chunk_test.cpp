// The fast paths' test of ownership (ThreadCache::owns_chunk): a thread cache remembers the
// last chunk it found to be its arena's, and asks the address map again whenever an entry
// that named an owner changes (a chunk released, or taken by another arena) or the checks
// option does (g_ownership_changes, address_map.h).
#include <gtest/gtest.h>

#include <pagemalloc/pagemalloc.h>

#include <cstdint>
#include <cstdlib>
#include <memory>

#include "address_map.h"
#include "heap.h"
#include "thread_cache.h"

namespace {

using pagemalloc::AddressMap;

TEST(OwnershipChanges, AreCountedWhenAnEntryThatNamedAnArenaChunkChanges) {
  auto map = std::make_unique<AddressMap>();
  // A granule far from anything mapped; the map's leaf for it is mapped on first use.
  const auto* granule = reinterpret_cast<const void*>(std::uintptr_t{0x5a5a} << 32);
  int owner = 0, other = 0;
  const std::uint64_t start = pagemalloc::g_ownership_changes.load();
  ASSERT_TRUE(map->set(granule, AddressMap::tag(&owner, AddressMap::kArenaChunk)));
  EXPECT_EQ(pagemalloc::g_ownership_changes.load(), start) << "a new owner changes nothing";
  ASSERT_TRUE(map->set(granule, AddressMap::tag(&owner, AddressMap::kArenaChunk)));
  EXPECT_EQ(pagemalloc::g_ownership_changes.load(), start) << "the same owner again";
  ASSERT_TRUE(map->set(granule, AddressMap::tag(&other, AddressMap::kArenaChunk)));
  EXPECT_EQ(pagemalloc::g_ownership_changes.load(), start + 1);
  ASSERT_TRUE(map->set(granule, 0));
  EXPECT_EQ(pagemalloc::g_ownership_changes.load(), start + 2);
  // A huge extent's granule, which no cache remembers, comes and goes uncounted.
  ASSERT_TRUE(map->set(granule, AddressMap::tag(&other, AddressMap::kHuge)));
  ASSERT_TRUE(map->set(granule, 0));
  EXPECT_EQ(pagemalloc::g_ownership_changes.load(), start + 2);
}

TEST(OwnershipChanges, AreCountedWhenChecksAreTurnedOnOrOff) {
  long old_checks = 0;
  const long flipped = pagemalloc::options().checks.load() ? 0 : 1;
  const std::uint64_t start = pagemalloc::g_ownership_changes.load();
  ASSERT_EQ(pm_ctl("checks", &old_checks, &flipped), 0);
  EXPECT_EQ(pagemalloc::g_ownership_changes.load(), start + 1);
  ASSERT_EQ(pm_ctl("checks", nullptr, &old_checks), 0);
  EXPECT_EQ(pagemalloc::g_ownership_changes.load(), start + 2);
}

// A chunk the cache remembers, whose entry then names another arena (as when it was released
// and mapped again for another), is not the cache's any more; named again, it is.
TEST(OwnedChunk, ARememberedChunkIsAskedForAgainAfterAnOwnershipChange) {
  void* block = pm_malloc(64);
  ASSERT_NE(block, nullptr);
  pagemalloc::ThreadCache* cache = pagemalloc::ThreadCache::current();
  if (cache == nullptr || pagemalloc::options().checks.load())
    GTEST_SKIP() << "no thread cache in this design, or checks on: the fast paths are not taken";
  const void* chunk = pagemalloc::chunk_base_of(block);
  EXPECT_TRUE(cache->owns_chunk(chunk));
  EXPECT_TRUE(cache->owns_chunk(chunk)) << "remembered";
  const std::uintptr_t entry = pagemalloc::address_map().get(chunk);
  int another_arena = 0;
  ASSERT_TRUE(pagemalloc::address_map().set(
      chunk, AddressMap::tag(&another_arena, AddressMap::kArenaChunk)));
  EXPECT_FALSE(cache->owns_chunk(chunk)) << "the remembered chunk was trusted after it changed";
  ASSERT_TRUE(pagemalloc::address_map().set(chunk, entry));
  EXPECT_TRUE(cache->owns_chunk(chunk));
  EXPECT_FALSE(
      cache->owns_chunk(static_cast<const std::byte*>(chunk) + pagemalloc::kChunkSize * 1024))
      << "a chunk nobody owns";
  pm_free(block);
}

// The fast free path has no test of chunk alignment: a chunk-aligned pointer must fail its
// test of ownership or of the page's kind. Each runs in a fresh process (the "threadsafe"
// death-test style re-executes the binary), where no ownership change has been counted yet.
class OwnedChunkDeathTest : public ::testing::Test {
 protected:
  void SetUp() override { GTEST_FLAG_SET(death_test_style, "threadsafe"); }
};

// A cache that remembers no chunk yet (the count of changes still 0) and a free of nullptr,
// whose chunk base is 0: it must not be taken for the remembered chunk.
TEST_F(OwnedChunkDeathTest, AFreeOfNullBeforeAnyChunkIsRememberedDoesNothing) {
  EXPECT_EXIT(
      {
        void* block = pm_malloc(64);  // the thread's cache, with no chunk remembered
        pm_free(nullptr);
        pm_free(block);
        std::exit(0);
      },
      ::testing::ExitedWithCode(0), "");
}

// The base of the thread's own remembered chunk is its header page, no slab region: reported,
// not cached.
TEST_F(OwnedChunkDeathTest, AFreeOfTheRememberedChunksBaseIsReported) {
  EXPECT_DEATH(
      {
        void* block = pm_malloc(64);
        pm_free(pm_malloc(64));  // remembers the chunk
        pm_free(pagemalloc::chunk_base_of(block));
      },
      "pagemalloc: pm_free\\(0x[0-9a-f]+\\): ");
}

}  // namespace
