// Each design choice of the build's Config (allocator/src/presets.h) shows in what the
// allocator does: every test asserts the behaviour of the choice this build made, so the
// default tree checks today's design and the je2008 trees (tools/test.sh) check 2008's.
#include <gtest/gtest.h>

#include <pagemalloc/pagemalloc.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <random>
#include <set>
#include <thread>
#include <vector>

#include "arena/arena.h"
#include "build_config.h"
#include "chunks/address_map.h"
#include "chunks/chunk_tree.h"
#include "design/placement.h"
#include "design/size_classes.h"
#include "heap/heap.h"
#include "threads/thread_cache.h"

namespace {

using pagemalloc::Arena;
using pagemalloc::BuildConfig;
using pagemalloc::kSizeClasses;

// kMaxSmallSize: the largest size a slab serves; one byte more is a run of pages.
TEST(DesignChoices, SlabsEndAtTheLargestSmallSize) {
  EXPECT_EQ(pagemalloc::kMaxSmallSize, BuildConfig::kMaxSmallSize);
  EXPECT_EQ(kSizeClasses.back().size, BuildConfig::kMaxSmallSize);
  EXPECT_EQ(pagemalloc::place(BuildConfig::kMaxSmallSize, 1).kind, pagemalloc::BlockKind::Small);
  const pagemalloc::Placement above = pagemalloc::place(BuildConfig::kMaxSmallSize + 1, 1);
  EXPECT_EQ(above.kind, pagemalloc::BlockKind::Large);
  EXPECT_EQ(above.usable % pagemalloc::kPageSize, 0u);
  // A GC arena of 2008's JavaScript engine: a slab region today, a one-page run then.
  EXPECT_EQ(pagemalloc::place(4096, 4096).kind, BuildConfig::kMaxSmallSize >= 4096
                                                    ? pagemalloc::BlockKind::Small
                                                    : pagemalloc::BlockKind::Large);
}

// kThreadCaches: a thread that allocated a small block has a cache, or never one.
TEST(DesignChoices, AThreadHasACacheExactlyWhenTheDesignHasThem) {
  bool has_cache = false;
  std::thread t([&] {
    pm_free(pm_malloc(32));
    has_cache = pagemalloc::ThreadCache::current() != nullptr;
  });
  t.join();
  EXPECT_EQ(has_cache, BuildConfig::kThreadCaches);
}

// kReleaseCurrentSlab: an arena's only slab of a class, emptied, goes back to the run
// manager (its pages are no longer active) or stays for the next allocation.
TEST(DesignChoices, AnEmptiedCurrentSlabIsReleasedOrKeptAsTheDesignSays) {
  auto arena = std::make_unique<Arena>(4101);
  constexpr unsigned kClass = 4;  // 64 bytes
  void* p = arena->alloc_small(kClass);
  ASSERT_NE(p, nullptr);
  const std::size_t slab_pages = kSizeClasses[kClass].slab_pages;
  EXPECT_EQ(arena->stats().active_pages, slab_pages);
  arena->free_small(
      static_cast<pagemalloc::Slab*>(
          pagemalloc::page_entry(pagemalloc::chunk_base_of(p), pagemalloc::page_index_of(p))
              .slab_descriptor()),
      p, "test");
  EXPECT_EQ(arena->stats().active_pages, BuildConfig::kReleaseCurrentSlab ? 0u : slab_pages);
  EXPECT_EQ(arena->check_blocks(), nullptr);
}

// kTransferStash: a batch a thread cache flushes goes to the arena's stash (its slab keeps
// the regions as allocated, so the emptied slab stays) or straight back to the slab (which,
// emptied and not the current one, is released).
TEST(DesignChoices, AFlushedBatchIsStashedOrReturnedToItsSlabAsTheDesignSays) {
  auto arena = std::make_unique<Arena>(4102);
  constexpr unsigned kClass = 4;
  const unsigned per_slab = kSizeClasses[kClass].regions;
  std::vector<void*> first(per_slab), second(per_slab);
  ASSERT_EQ(arena->alloc_batch(kClass, first.data(), per_slab), per_slab);
  ASSERT_EQ(arena->alloc_batch(kClass, second.data(), per_slab), per_slab);  // a second slab
  const std::size_t active = arena->stats().active_pages;
  const unsigned batch = per_slab < 64 ? per_slab : 64;  // within one stash's capacity
  for (unsigned at = 0; at < per_slab; at += batch)
    arena->free_batch(first.data() + at, per_slab - at < batch ? per_slab - at : batch, "test");
  const std::size_t released = BuildConfig::kTransferStash ? 0 : kSizeClasses[kClass].slab_pages;
  EXPECT_EQ(arena->stats().active_pages, active - released);
  EXPECT_EQ(arena->stats().allocated, std::size_t{per_slab} * kSizeClasses[kClass].size);
  EXPECT_EQ(arena->check_blocks(), nullptr);
}

// kAllocatedRunsTree: a large block's length comes from the tree (or the page map) and is
// right either way, also after it is resized. (That a freed run is no longer found is
// tested on the tree itself: tests/unit/allocated_runs_tree_test.cpp.)
TEST(DesignChoices, ALargeBlocksLengthIsRightWhereverItIsKept) {
  const std::size_t size = 17 * pagemalloc::kPageSize + 100;  // above every slab class
  void* p = pm_malloc(size);
  ASSERT_NE(p, nullptr);
  // 18 pages, or its medium class's length (design/medium_classes.h): as pm_nallocx says.
  EXPECT_EQ(pm_malloc_usable_size(p), pagemalloc::place(size, 1).usable);
  EXPECT_GE(pm_malloc_usable_size(p), 18 * pagemalloc::kPageSize);
  void* q = pm_rallocx(p, 25 * pagemalloc::kPageSize, 0);
  ASSERT_NE(q, nullptr);
  EXPECT_EQ(pm_sallocx(q, 0), pm_nallocx(25 * pagemalloc::kPageSize, 0));
  EXPECT_GE(pm_sallocx(q, 0), 25 * pagemalloc::kPageSize);
  EXPECT_EQ(pagemalloc::heap().check_invariants(), nullptr);
  pm_free(q);
}

// kDirtyRunsFirst: a large request takes pages a freed block left before a chunk's fresh tail
// that fits it better, or the best fit of all. An explicit arena of its own: A, a wall, a filler,
// and 20 fresh pages; A freed; then 18 pages asked for.
TEST(DesignChoices, FreedPagesAreReusedBeforeFreshOnesOrNotAsTheDesignSays) {
  const unsigned arena = pm_arena_create();
  ASSERT_NE(arena, 0u);
  constexpr std::size_t kPage = pagemalloc::kPageSize;
  const std::size_t usable = pagemalloc::ChunkLayout::kUsablePages.value();
  // A's pages: longer than the large-run cache keeps and than the medium classes, so that its
  // free takes it back to the run manager.
  const std::size_t a_pages =
      std::max<std::size_t>(100, pagemalloc::BuildMediumClasses::kMaxPages + 4);
  const std::size_t fresh = usable - a_pages - 18 - 20;  // the filler's pages
  auto* freed = static_cast<std::byte*>(pm_mallocx(a_pages * kPage, PM_ARENA(arena)));
  void* wall = pm_mallocx(18 * kPage, PM_ARENA(arena));  // (18 pages: a medium class too)
  auto* filler = static_cast<std::byte*>(pm_mallocx(fresh * kPage, PM_ARENA(arena)));
  ASSERT_TRUE(freed != nullptr && wall != nullptr && filler != nullptr);
  ASSERT_EQ(filler, freed + (a_pages + 18) * kPage)
      << "a fresh arena carves its chunk from the start";
  pm_free(freed);
  void* got = pm_mallocx(18 * kPage, PM_ARENA(arena));
  EXPECT_EQ(got, BuildConfig::kDirtyRunsFirst ? freed : filler + fresh * kPage);
  EXPECT_EQ(pagemalloc::heap().check_invariants(), nullptr);
  for (void* p : {got, wall, static_cast<void*>(filler)}) pm_free(p);
  EXPECT_EQ(pm_arena_destroy(arena), 0);
}

// kValidateFree: every free searches its arena's chunk tree first, or nothing is searched.
TEST(DesignChoices, EveryFreeIsValidatedOrNoneAsTheDesignSays) {
  constexpr int kBlocks = 50;
  std::vector<void*> blocks;
  for (int i = 0; i < kBlocks; ++i) blocks.push_back(pm_malloc(i % 2 == 0 ? 48 : 3 * 4096));
  ASSERT_NE(blocks.front(), nullptr);
  Arena* arena = pagemalloc::AddressMap::owner_of<Arena>(
      pagemalloc::address_map().get(pagemalloc::chunk_base_of(blocks.front())));
  const std::uint64_t before = arena->validated_frees();
  for (void* p : blocks) pm_free(p);
  EXPECT_EQ(arena->validated_frees() - before, BuildConfig::kValidateFree ? kBlocks : 0u);
  EXPECT_EQ(arena->check_invariants(), nullptr);
}

// kLgChunkSize: chunks of the size the design chose. A block of 1.5 MiB is a run of a 2 MiB
// chunk or, past the largest run of a 1 MiB chunk, a huge extent of its own.
TEST(DesignChoices, ChunksAreTheSizeTheDesignChose) {
  constexpr std::size_t kMiB = std::size_t{1} << 20;
  EXPECT_EQ(pagemalloc::kChunkSize, std::size_t{1} << BuildConfig::kLgChunkSize);
  EXPECT_LT(pagemalloc::kMaxRunPages.bytes(), pagemalloc::kChunkSize);
  const bool small_chunks = BuildConfig::kLgChunkSize == 20;
  void* p = pm_malloc(3 * kMiB / 2);
  ASSERT_NE(p, nullptr);
  const auto tag = pagemalloc::AddressMap::tag_of(pagemalloc::address_map().get(p));
  EXPECT_EQ(tag,
            small_chunks ? pagemalloc::AddressMap::kHuge : pagemalloc::AddressMap::kArenaChunk);
  // A huge extent starts a chunk; a run never does (the chunk's header comes first).
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(p) % kMiB == 0, small_chunks);
  EXPECT_EQ(pagemalloc::heap().check_invariants(), nullptr);
  pm_free(p);
}

// The chunk tree itself: it finds exactly the chunks it holds, through inserts and erases.
TEST(DesignChoices, TheChunkTreeFindsExactlyTheChunksItHolds) {
  pagemalloc::ChunkTree tree;
  std::set<std::byte*> model;
  std::mt19937_64 random(7);
  auto chunk = [&] {
    return reinterpret_cast<std::byte*>((random() % 4096 + 1) << pagemalloc::kLgChunkSize);
  };
  for (int step = 0; step < 20000; ++step) {
    std::byte* c = chunk();
    if (random() % 3 != 0 && !model.contains(c)) {
      ASSERT_TRUE(tree.insert(c));
      model.insert(c);
    } else if (model.contains(c)) {
      tree.erase(c);
      model.erase(c);
    }
    const std::byte* probe = chunk();
    ASSERT_EQ(tree.contains(probe), model.contains(const_cast<std::byte*>(probe))) << step;
  }
  EXPECT_EQ(tree.size(), model.size());
  EXPECT_EQ(tree.searches(), 20000u);
  EXPECT_GT(tree.nodes_visited(), 20000u);
  EXPECT_EQ(tree.check_invariants(), nullptr);
  for (std::byte* c : model) tree.erase(c);
  EXPECT_EQ(tree.size(), 0u);
  EXPECT_EQ(tree.mapped_bytes(), 0u);
}

}  // namespace
