// The heap-wide invariant check (allocator/src/heap_invariants.h): it passes on a heap in use,
// and it catches damage of each kind it walks — a page map's tag, a slab's bitmap, the
// address map's record of a huge extent — each put there by hand and then repaired.
#include <gtest/gtest.h>

#include <pagemalloc/pagemalloc.h>

#include <cstddef>
#include <string>
#include <vector>

#include "arena/slab.h"
#include "chunks/address_map.h"
#include "design/allocator.h"
#include "heap/heap_invariants.h"
#include "pagemap/page_map.h"

namespace {

using pagemalloc::check_heap_invariants;

constexpr std::size_t KiB = 1024;
constexpr std::size_t MiB = 1024 * KiB;

std::string describe(const char* problem) { return problem == nullptr ? "(none)" : problem; }

TEST(HeapInvariants, HoldOnAHeapInUse) {
  const unsigned arena = pm_arena_create();
  ASSERT_NE(arena, 0u);
  std::vector<void*> blocks;
  for (std::size_t size : {8ul, 100ul, 3000ul, 16 * KiB, 40 * KiB, 700 * KiB, 5 * MiB}) {
    blocks.push_back(pm_malloc(size));
    blocks.push_back(pm_mallocx(size, PM_ALIGN(64 * KiB)));
    blocks.push_back(pm_mallocx(size, PM_ARENA(arena)));
  }
  for (void* p : blocks) ASSERT_NE(p, nullptr);
  EXPECT_EQ(check_heap_invariants(), nullptr) << describe(check_heap_invariants());
  for (std::size_t i = 0; i < blocks.size(); i += 2) pm_free(blocks[i]);
  EXPECT_EQ(check_heap_invariants(), nullptr) << describe(check_heap_invariants());
  ASSERT_EQ(pm_arena_destroy(arena), 0);
  for (std::size_t i = 1; i < blocks.size(); i += 2)
    if (i % 3 != 2) pm_free(blocks[i]);  // the arena's blocks went with it
  pm_purge();
  EXPECT_EQ(check_heap_invariants(), nullptr) << describe(check_heap_invariants());
}

TEST(HeapInvariants, CatchALargeBlockWhoseLastPageStartsABlock) {
  void* p = pm_malloc(100 * KiB);  // a run of 25 pages, or of its medium class's 28
  ASSERT_NE(p, nullptr);
  const pagemalloc::PageCount pages = pagemalloc::PageCount::covering(pm_malloc_usable_size(p));
  std::byte* chunk = pagemalloc::chunk_base_of(p);
  pagemalloc::PageEntry& last = pagemalloc::page_entry(
      chunk, pagemalloc::page_index_of(p) + pages - pagemalloc::PageCount(1));
  const pagemalloc::PageEntry saved = last;
  last = pagemalloc::PageEntry::large(pagemalloc::PageCount(1));
  const std::string problem = describe(check_heap_invariants());
  last = saved;
  EXPECT_EQ(problem, "a large block's last page is not tagged Allocated");
  EXPECT_EQ(check_heap_invariants(), nullptr) << describe(check_heap_invariants());
  pm_free(p);
}

TEST(HeapInvariants, CatchASlabWhoseBitmapDisagreesWithItsCount) {
  void* p = pm_mallocx(96, PM_ARENA(0));  // straight from arena 0, not through a cache
  ASSERT_NE(p, nullptr);
  const pagemalloc::PageEntry e =
      pagemalloc::page_entry(pagemalloc::chunk_base_of(p), pagemalloc::page_index_of(p));
  auto* slab = static_cast<pagemalloc::Slab*>(e.slab_descriptor());
  const std::size_t region = std::size_t(static_cast<std::byte*>(p) - slab->base) / 96;
  slab->free_bits[region / 64] ^= std::uint64_t{1} << (region % 64);  // p looks free
  const std::string problem = describe(check_heap_invariants());
  slab->free_bits[region / 64] ^= std::uint64_t{1} << (region % 64);
  EXPECT_EQ(problem, "a slab's free count disagrees with its bitmap");
  EXPECT_EQ(check_heap_invariants(), nullptr) << describe(check_heap_invariants());
  pm_free(p);
}

TEST(HeapInvariants, CatchAHugeExtentTheAddressMapForgot) {
  void* p = pm_malloc(5 * MiB);
  ASSERT_NE(p, nullptr);
  auto& map = pagemalloc::address_map();
  const std::uintptr_t saved = map.get(p);
  ASSERT_TRUE(map.set(p, 0));
  const std::string problem = describe(check_heap_invariants());
  ASSERT_TRUE(map.set(p, saved));
  EXPECT_EQ(problem, "a huge extent's first granule does not name it");
  EXPECT_EQ(check_heap_invariants(), nullptr) << describe(check_heap_invariants());
  pm_free(p);
}

}  // namespace
