// A flush's regions go back to their slabs a run of one slab at a time (Arena::give_back_run:
// one page-entry look and one bin-list update per run). Whatever the order of the batch, every
// region is free again and counted once, each slab empties and goes back to the run manager,
// and a misuse inside a run (a region twice, a pointer inside a region, one in a slab's unused
// tail) is reported as a single free's would be.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <vector>

#include <sys/resource.h>

#include "address_space.h"
#include "arena/arena.h"
#include "build_config.h"
#include "design/size_classes.h"

namespace {

using pagemalloc::Arena;

constexpr unsigned kClass = 4;  // 64 bytes
const std::size_t kSize = pagemalloc::kSizeClasses[kClass].size;

// More regions than the class's stash holds, so that a flush of them all goes to the slabs.
std::vector<void*> allocate_past_the_stash(Arena& arena) {
  std::vector<void*> regions(pagemalloc::stash_capacity(kClass) + 300);
  unsigned got = 0;
  while (got < regions.size()) {
    const unsigned n =
        arena.alloc_batch(kClass, regions.data() + got, unsigned(regions.size()) - got);
    if (n == 0) break;
    got += n;
  }
  regions.resize(got);
  return regions;
}

// Regions of several slabs in one batch, in address order, shuffled, or in runs that alternate
// between slabs: all come back free and counted, and the slabs are released.
class SlabRuns : public testing::TestWithParam<int> {};

TEST_P(SlabRuns, EveryRegionOfABatchComesBackWhateverItsOrder) {
  auto arena = std::make_unique<Arena>(4201 + unsigned(GetParam()));
  std::vector<void*> regions = allocate_past_the_stash(*arena);
  ASSERT_GT(regions.size(), pagemalloc::stash_capacity(kClass));
  const std::size_t slab_bytes = std::size_t{pagemalloc::kSizeClasses[kClass].slab_pages}
                                 << pagemalloc::kLgPageSize;
  std::sort(regions.begin(), regions.end());
  const std::set<std::uintptr_t> slabs = [&] {
    std::set<std::uintptr_t> s;
    for (void* p : regions) s.insert(reinterpret_cast<std::uintptr_t>(p) / slab_bytes);
    return s;
  }();
  ASSERT_GE(slabs.size(), 3u) << "the batch should span several slabs";
  if (GetParam() == 1) std::shuffle(regions.begin(), regions.end(), std::mt19937(7));
  if (GetParam() == 2) {  // runs of 5 from the front half and the back half in turn
    std::vector<void*> mixed;
    const std::size_t half = regions.size() / 2;
    for (std::size_t i = 0; half + i < regions.size(); i += 5) {  // the back half is the longer
      for (std::size_t k = i; k < std::min(i + 5, half); ++k) mixed.push_back(regions[k]);
      for (std::size_t k = half + i; k < std::min(half + i + 5, regions.size()); ++k)
        mixed.push_back(regions[k]);
    }
    ASSERT_EQ(mixed.size(), regions.size());
    regions = mixed;
  }
  EXPECT_EQ(arena->stats().allocated, regions.size() * kSize);
  arena->free_batch(regions.data(), unsigned(regions.size()), "test");
  EXPECT_EQ(arena->stats().allocated, 0u);
  EXPECT_EQ(arena->stats().blocks, 0u);
  EXPECT_EQ(arena->check_blocks(), nullptr);
  EXPECT_EQ(arena->check_invariants(), nullptr);
  // Every slab but the one being allocated from went back to the run manager; and every
  // region can be had again.
  EXPECT_LE(arena->stats().active_pages, pagemalloc::kSizeClasses[kClass].slab_pages);
  std::vector<void*> again = allocate_past_the_stash(*arena);
  EXPECT_EQ(again.size(), regions.size());
  EXPECT_EQ(std::set<void*>(again.begin(), again.end()).size(), again.size());
  arena->free_batch(again.data(), unsigned(again.size()), "test");
  EXPECT_EQ(arena->stats().allocated, 0u);
  EXPECT_EQ(arena->check_blocks(), nullptr);
}

INSTANTIATE_TEST_SUITE_P(Orders, SlabRuns, testing::Values(0, 1, 2), [](const auto& info) {
  return std::string(info.param == 0 ? "AddressOrder" : info.param == 1 ? "Shuffled" : "Runs");
});

TEST(SlabRunsDeathTest, ARegionTwiceInOneRunIsADoubleFree) {
  auto arena = std::make_unique<Arena>(4210);
  std::vector<void*> regions = allocate_past_the_stash(*arena);
  std::sort(regions.begin(), regions.end());
  regions.insert(regions.begin() + 3, regions[2]);  // next to itself: in one run
  EXPECT_DEATH(arena->free_batch(regions.data(), unsigned(regions.size()), "pm_free"),
               "pm_free\\(0x[0-9a-f]+\\): double free");
}

// A region already free in its slab's bitmap (given back by an earlier flush) is a double
// free, reported with its own address.
TEST(SlabRunsDeathTest, ARegionAlreadyFreeInItsSlabIsADoubleFreeNamingIt) {
  auto arena = std::make_unique<Arena>(4213);
  std::vector<void*> first = allocate_past_the_stash(*arena);
  std::vector<void*> second = allocate_past_the_stash(*arena);
  std::sort(first.begin(), first.end());
  std::sort(second.begin(), second.end());
  // To the slabs, but for a neighbour that keeps the freed region's slab from going back to
  // the run manager.
  const std::size_t mid = first.size() / 2;
  void* const again = first[mid];
  auto page_of = [](void* p) {
    return reinterpret_cast<std::uintptr_t>(p) >> pagemalloc::kLgPageSize;
  };
  const std::size_t kept = page_of(first[mid + 1]) == page_of(again) ? mid + 1 : mid - 1;
  ASSERT_EQ(pagemalloc::kSizeClasses[kClass].slab_pages, 1u);
  ASSERT_EQ(page_of(first[kept]), page_of(again)) << "the kept region shares the slab";
  first.erase(first.begin() + std::ptrdiff_t(kept));
  arena->free_batch(first.data(), unsigned(first.size()), "pm_free");
  second.insert(second.begin() + 7, again);
  char address[32];
  std::snprintf(address, sizeof address, "%p", again);
  EXPECT_DEATH(arena->free_batch(second.data(), unsigned(second.size()), "pm_free"),
               std::string("pm_free\\(") + address + "\\): double free");
}

// A refill the OS cuts short (no chunk for its next slab) hands out what it took at the batch's
// start, in the order a whole one would: each region once, those of a slab at descending
// addresses (the cache pops the lowest first), every one free again at the flush. In a child
// process under a lowered RLIMIT_AS; its exit code names the first check that failed.
int refill_cut_short() {
  auto arena = std::make_unique<Arena>(4214);
  constexpr unsigned kWanted = 1u << 20;  // 64 MiB of 64-byte regions: more than the limit lets
  std::vector<void*> out(kWanted, nullptr);
  rlimit original{};
  if (::getrlimit(RLIMIT_AS, &original) != 0 || address_space_in_use() == 0) return 10;
  rlimit lowered = original;
  lowered.rlim_cur = address_space_in_use() + (std::size_t{16} << 20);
  if (::setrlimit(RLIMIT_AS, &lowered) != 0) return 11;
  const unsigned got = arena->alloc_batch(kClass, out.data(), kWanted);
  if (::setrlimit(RLIMIT_AS, &original) != 0) return 12;
  if (got == 0 || got >= kWanted) return 13;  // not cut short
  const std::set<void*> distinct(out.begin(), out.begin() + got);
  if (distinct.size() != got || distinct.count(nullptr) != 0) return 14;
  auto page_of = [](void* p) {
    return reinterpret_cast<std::uintptr_t>(p) >> pagemalloc::kLgPageSize;
  };
  for (unsigned i = 0; i + 1 < got; ++i)
    if (page_of(out[i]) == page_of(out[i + 1]) && out[i] < out[i + 1]) return 15;
  if (arena->stats().blocks != got) return 16;
  arena->free_batch(out.data(), got, "test");
  if (arena->check_blocks() != nullptr || arena->stats().blocks != 0) return 17;
  return 0;
}

TEST(SlabRunsDeathTest, ARefillTheOsCutsShortHandsOutWhatItTookInOrder) {
  EXPECT_EXIT(::_exit(refill_cut_short()), ::testing::ExitedWithCode(0), "");
}

TEST(SlabRunsDeathTest, APointerInsideARegionInARunIsReported) {
  auto arena = std::make_unique<Arena>(4211);
  std::vector<void*> regions = allocate_past_the_stash(*arena);
  std::sort(regions.begin(), regions.end());
  regions[5] = static_cast<char*>(regions[5]) + 8;  // its slab's run, past the first four
  EXPECT_DEATH(arena->free_batch(regions.data(), unsigned(regions.size()), "pm_free"),
               "pm_free\\(0x[0-9a-f]+\\): not the start of a block");
}

TEST(SlabRunsDeathTest, APointerInASlabsUnusedTailIsReported) {
  unsigned tailed = kClass;  // a class whose slab leaves bytes after its last region
  auto slab_bytes = [](unsigned c) {
    return std::size_t{pagemalloc::kSizeClasses[c].slab_pages} << pagemalloc::kLgPageSize;
  };
  while (tailed < pagemalloc::kNumClasses && std::size_t(pagemalloc::kSizeClasses[tailed].regions) *
                                                     pagemalloc::kSizeClasses[tailed].size ==
                                                 slab_bytes(tailed))
    ++tailed;
  ASSERT_LT(tailed, pagemalloc::kNumClasses);
  const auto& tc = pagemalloc::kSizeClasses[tailed];
  auto arena = std::make_unique<Arena>(4212);
  // More than the class's stash holds, so that the flush goes to the slabs.
  std::vector<void*> regions(pagemalloc::stash_capacity(tailed) + tc.regions);
  unsigned got = 0;
  while (got < regions.size())
    got += arena->alloc_batch(tailed, regions.data() + got, unsigned(regions.size()) - got);
  // Right after a region of a slab, the byte after that slab's last region (the slab's base
  // from its page entry).
  auto* slab =
      static_cast<pagemalloc::Slab*>(pagemalloc::page_entry(pagemalloc::chunk_base_of(regions[0]),
                                                            pagemalloc::page_index_of(regions[0]))
                                         .slab_descriptor());
  regions.insert(regions.begin() + 1, slab->base + std::size_t(tc.regions) * tc.size);
  EXPECT_DEATH(arena->free_batch(regions.data(), unsigned(regions.size()), "pm_free"),
               "pm_free\\(0x[0-9a-f]+\\): not the start of a block");
}

}  // namespace
