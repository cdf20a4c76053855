// The fast paths' test of ownership (ThreadCache::owns_chunk): a thread cache remembers up to
// kRememberedChunks chunks it found to be its arena's, one per slot, and asks the address map
// again whenever an entry that named an owner changes (a chunk released, or taken by another
// arena) or the checks option does (g_ownership_changes, address_map.h).
#include <gtest/gtest.h>

#include <pagemalloc/pagemalloc.h>

#include <cstdint>
#include <cstdlib>
#include <memory>
#include <vector>

#include "chunks/address_map.h"
#include "heap/heap.h"
#include "threads/thread_cache.h"

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

// Blocks of 64 bytes, allocated until they lie in `count` chunks; the first block of each
// chunk in order of allocation, the rest of them in `all` (for the caller to free).
std::vector<void*> blocks_in_chunks(std::size_t count, std::vector<void*>& all) {
  std::vector<void*> firsts;
  while (firsts.size() < count && all.size() < 4'000'000) {
    void* block = pm_malloc(64);
    if (block == nullptr) break;
    all.push_back(block);
    const void* chunk = pagemalloc::chunk_base_of(block);
    bool known = false;
    for (void* first : firsts) known = known || pagemalloc::chunk_base_of(first) == chunk;
    if (!known) firsts.push_back(block);
  }
  return firsts;
}

// Frees that alternate between chunks find each chunk remembered, in its own slot, and an
// ownership change empties the table: no chunk is trusted under a count it was not found
// under.
TEST(OwnedChunk, AThreadRemembersSeveralChunksUntilOwnershipChanges) {
  std::vector<void*> all;
  const std::vector<void*> firsts = blocks_in_chunks(3, all);
  pagemalloc::ThreadCache* cache = pagemalloc::ThreadCache::current();
  if (cache == nullptr || pagemalloc::options().checks.load())
    GTEST_SKIP() << "no thread cache in this design, or checks on: the fast paths are not taken";
  ASSERT_EQ(firsts.size(), 3u);
  std::vector<const void*> chunks;
  for (void* first : firsts) chunks.push_back(pagemalloc::chunk_base_of(first));
  const auto slot = [](const void* chunk) {
    return (reinterpret_cast<std::uintptr_t>(chunk) >> pagemalloc::kLgChunkSize) %
           pagemalloc::kRememberedChunks;
  };
  ASSERT_NE(slot(chunks[0]), slot(chunks[1]));
  ASSERT_NE(slot(chunks[1]), slot(chunks[2]));
  ASSERT_NE(slot(chunks[0]), slot(chunks[2]));
  for (const void* chunk : chunks) ASSERT_TRUE(cache->owns_chunk(chunk));
  for (const void* chunk : chunks)
    EXPECT_TRUE(pagemalloc::ThreadCache::remembers(chunk)) << "forgotten when another came in";

  const std::uintptr_t entry = pagemalloc::address_map().get(chunks[0]);
  int another_arena = 0;
  ASSERT_TRUE(pagemalloc::address_map().set(
      chunks[0], AddressMap::tag(&another_arena, AddressMap::kArenaChunk)));
  ASSERT_TRUE(pagemalloc::address_map().set(chunks[0], entry));
  for (const void* chunk : chunks)
    EXPECT_FALSE(pagemalloc::ThreadCache::remembers(chunk)) << "trusted after a change";
  ASSERT_TRUE(cache->owns_chunk(chunks[1]));
  EXPECT_TRUE(pagemalloc::ThreadCache::remembers(chunks[1]));
  EXPECT_FALSE(pagemalloc::ThreadCache::remembers(chunks[2]))
      << "a chunk found before the change came back with the table's new count";
  for (void* block : all) pm_free(block);
}

// Two chunks whose numbers differ by the table's size share a slot: the one found last is
// remembered, the other is asked for again (and found again) at its next test.
TEST(OwnedChunk, ChunksThatShareASlotTakeItInTurn) {
  pm_free(pm_malloc(64));  // the thread's cache
  pagemalloc::ThreadCache* cache = pagemalloc::ThreadCache::current();
  if (cache == nullptr || pagemalloc::options().checks.load())
    GTEST_SKIP() << "no thread cache in this design, or checks on: the fast paths are not taken";
  // Two granules far from anything mapped, a table's size of chunks apart, named the cache's
  // arena's for the test and given back to nobody after.
  const auto base = std::uintptr_t{0x5b5b} << 32;
  const auto* first = reinterpret_cast<const void*>(base);
  const auto* second =
      reinterpret_cast<const void*>(base + pagemalloc::kRememberedChunks * pagemalloc::kChunkSize);
  const std::uintptr_t own = AddressMap::tag(cache->arena(), AddressMap::kArenaChunk);
  ASSERT_TRUE(pagemalloc::address_map().set(first, own));
  ASSERT_TRUE(pagemalloc::address_map().set(second, own));
  EXPECT_TRUE(cache->owns_chunk(first));
  EXPECT_TRUE(cache->owns_chunk(second));
  EXPECT_TRUE(pagemalloc::ThreadCache::remembers(second));
  EXPECT_FALSE(pagemalloc::ThreadCache::remembers(first)) << "two chunks in one slot";
  EXPECT_TRUE(cache->owns_chunk(first)) << "found again";
  ASSERT_TRUE(pagemalloc::address_map().set(first, 0));
  ASSERT_TRUE(pagemalloc::address_map().set(second, 0));
  EXPECT_FALSE(cache->owns_chunk(first));
  EXPECT_FALSE(cache->owns_chunk(second));
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
