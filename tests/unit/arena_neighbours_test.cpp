// The automatic arenas as neighbours (arena.h, ArenaNeighbours): a large block an arena cannot
// cut from the freed pages it keeps resident is lent by a neighbour that keeps enough of them
// beyond its allowance, and an arena that makes new pages resident has its neighbours purge
// as many of the freed pages they keep beyond theirs, unless they used them all lately. An
// arena within its allowance keeps its pages either way, and a block asked of a named arena is
// that arena's.
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <memory>
#include <thread>
#include <vector>

#include "arena/arena.h"
#include "chunks/address_map.h"
#include "design/size_classes.h"
#include "threads/automatic_arenas.h"

namespace {

using pagemalloc::Arena;
using pagemalloc::AutomaticArenas;
using pagemalloc::PageCount;

// Longer than the large-run cache keeps (LargeRunCache::kMaxPages): every block freed goes back
// to the run manager, whose freed pages are what a neighbour lends.
constexpr std::size_t kLarge = 512 * 1024;
static_assert(kLarge > pagemalloc::LargeRunCache::kMaxPages * pagemalloc::kPageSize);
constexpr std::size_t kMiB = std::size_t{1} << 20;

// Two automatic arenas beside each other (no huge blocks' manager).
struct TwoArenas {
  TwoArenas() : arenas(std::make_unique<AutomaticArenas>()) {
    arenas->start(nullptr);
    arenas->configure(2);
    first = arenas->at(0);
    second = arenas->at(1);
  }
  std::unique_ptr<AutomaticArenas> arenas;
  Arena* first = nullptr;
  Arena* second = nullptr;
};

// Allocates `bytes` of large blocks from the arena and frees them: its freed pages stay
// resident (no decay within a test).
void allocate_and_free(Arena& arena, std::size_t bytes) {
  std::vector<void*> blocks;
  bool zeroed = false;
  for (std::size_t done = 0; done < bytes; done += kLarge) {
    blocks.push_back(arena.alloc_large(kLarge, pagemalloc::kPageSize, zeroed));
    ASSERT_NE(blocks.back(), nullptr);
    std::memset(blocks.back(), 1, kLarge);
  }
  for (void* p : blocks) arena.free_large(p, PageCount::covering(kLarge));
}

Arena* owner_of(const void* p) {
  return pagemalloc::AddressMap::owner_of<Arena>(
      pagemalloc::address_map().get(pagemalloc::chunk_base_of(p)));
}

TEST(ArenaNeighbours, ALargeBlockIsLentFromTheFreedPagesANeighbourKeeps) {
  TwoArenas two;
  allocate_and_free(*two.first, 8 * kMiB);  // 8 MiB freed: beyond the 2 MiB allowance
  const std::size_t mapped_first = two.first->stats().chunks;
  bool zeroed = true;
  void* p = two.second->alloc_large(kLarge, pagemalloc::kPageSize, zeroed, true);
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(owner_of(p), two.first) << "the neighbour's freed pages serve the block";
  EXPECT_EQ(two.second->stats().chunks, 0u) << "the asking arena mapped nothing";
  EXPECT_EQ(two.first->stats().chunks, mapped_first);
  EXPECT_FALSE(zeroed);
  // The block is the lender's: freed to it, its statistics count it meanwhile.
  EXPECT_EQ(two.first->stats().allocated, kLarge);
  two.first->free_large(p, PageCount::covering(kLarge));
  EXPECT_EQ(two.first->stats().allocated, 0u);
  EXPECT_EQ(two.first->check_blocks(), nullptr);
  EXPECT_EQ(two.second->check_blocks(), nullptr);
}

TEST(ArenaNeighbours, ANeighbourWithinItsAllowanceLendsNothing) {
  TwoArenas two;
  allocate_and_free(*two.first, 1 * kMiB);  // within the allowance (kResidentSlackBytes)
  bool zeroed = false;
  void* p = two.second->alloc_large(kLarge, pagemalloc::kPageSize, zeroed, true);
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(owner_of(p), two.second);
  two.second->free_large(p, PageCount::covering(kLarge));
}

// 2 MiB of small regions from the arena's own slabs: 2 MiB made resident. Frees them again.
void grow_by_small_regions(Arena& arena, std::size_t bytes) {
  constexpr unsigned kClass = pagemalloc::size_class_of(1024);
  const unsigned n = unsigned(bytes / pagemalloc::kSizeClasses[kClass].size);
  std::vector<void*> regions(n);
  unsigned got = 0;
  while (got < n) got += arena.alloc_batch(kClass, regions.data() + got, n - got);
  arena.free_batch(regions.data(), n, "test");
}

TEST(ArenaNeighbours, ABlockFromANamedArenaIsNeverLent) {
  TwoArenas two;
  allocate_and_free(*two.first, 8 * kMiB);
  bool zeroed = false;
  void* p = two.second->alloc_large(kLarge, pagemalloc::kPageSize, zeroed);  // may_borrow off
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(owner_of(p), two.second);
  two.second->free_large(p, PageCount::covering(kLarge));
}

TEST(ArenaNeighbours, ANeighbourThatJustUsedItsPagesIsNotPurged) {
  TwoArenas two;
  allocate_and_free(*two.first, 8 * kMiB);  // used all its pages a moment ago
  grow_by_small_regions(*two.second, 2 * kMiB);
  EXPECT_EQ(two.first->stats().purged_pages, 0u)
      << "an arena that keeps using its pages would fault them back at once";
}

TEST(ArenaNeighbours, GrowingMakesANeighbourPurgeWhatItKeepsBeyondItsAllowance) {
  TwoArenas two;
  allocate_and_free(*two.first, 8 * kMiB);
  ASSERT_EQ(two.first->stats().purged_pages, 0u);
  std::this_thread::sleep_for(std::chrono::milliseconds(2 * Arena::kIdleMs));  // idle since
  // Small regions come from slabs of the arena's own: 2 MiB of them makes 2 MiB resident.
  constexpr unsigned kClass = pagemalloc::size_class_of(1024);
  const unsigned n = unsigned(2 * kMiB / pagemalloc::kSizeClasses[kClass].size);
  std::vector<void*> regions(n);
  unsigned got = 0;
  while (got < n) got += two.second->alloc_batch(kClass, regions.data() + got, n - got);
  const std::size_t purged = two.first->stats().purged_pages * pagemalloc::kPageSize;
  EXPECT_GE(purged, 1 * kMiB) << "the neighbour purges about as much as the arena grew";
  EXPECT_LE(purged, 8 * kMiB - Arena::kResidentSlackBytes) << "and never below its allowance";
  two.second->free_batch(regions.data(), n, "test");
  EXPECT_EQ(two.second->check_blocks(), nullptr);
  const char* problem = two.first->check_invariants();
  EXPECT_EQ(problem, nullptr) << problem;
}

TEST(ArenaNeighbours, ANeighbourWithinItsAllowanceIsNotPurged) {
  TwoArenas two;
  allocate_and_free(*two.first, 1 * kMiB);
  std::this_thread::sleep_for(std::chrono::milliseconds(2 * Arena::kIdleMs));
  constexpr unsigned kClass = pagemalloc::size_class_of(1024);
  const unsigned n = unsigned(4 * kMiB / pagemalloc::kSizeClasses[kClass].size);
  std::vector<void*> regions(n);
  unsigned got = 0;
  while (got < n) got += two.second->alloc_batch(kClass, regions.data() + got, n - got);
  EXPECT_EQ(two.first->stats().purged_pages, 0u);
  two.second->free_batch(regions.data(), n, "test");
}

}  // namespace
