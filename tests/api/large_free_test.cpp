// Freeing a large block reads none of its pages: a block that was reserved and barely touched
// (a table sparsely filled) must not have pages faulted in by its free. A read of an untouched
// page maps the shared zero page on some kernels and a page of its own on others (both show in
// mincore), and costs a fault either way.
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>

#include "pagemalloc/pagemalloc.h"

namespace {

// Whether the page holding p is mapped (resident or the zero page).
bool page_mapped(const void* p) {
  const auto page_size = static_cast<std::uintptr_t>(::sysconf(_SC_PAGESIZE));
  void* page = reinterpret_cast<void*>(reinterpret_cast<std::uintptr_t>(p) & ~(page_size - 1));
  unsigned char state = 0;
  EXPECT_EQ(::mincore(page, page_size, &state), 0);
  return (state & 1) != 0;
}

TEST(LargeFree, FreeingAnUntouchedLargeBlockMapsNoneOfItsPages) {
  constexpr std::size_t kBlock = 512 * 1024;  // a large run (above the small sizes, in a chunk)
  constexpr int kBlocks = 16;
  char* blocks[kBlocks];
  for (char*& b : blocks) {
    b = static_cast<char*>(pm_malloc(kBlock));
    ASSERT_NE(b, nullptr);
  }
  for (char* b : blocks) {
    // Fresh pages in a new process: nothing has touched them yet.
    ASSERT_FALSE(page_mapped(b)) << "the block's first page was mapped before the test";
    b[kBlock / 2] = 1;  // touch one page in the middle, as a sparse table does
  }
  for (char* b : blocks) pm_free(b);
  for (char* b : blocks) EXPECT_FALSE(page_mapped(b)) << "free mapped the block's first page";
}

}  // namespace
