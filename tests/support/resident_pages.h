// How many pages of a range are resident, as the tests that check what the allocator leaves
// out of memory count them (mincore).
#pragma once

#include <gtest/gtest.h>
#include <sys/mman.h>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "pagemap/pages.h"

namespace pagemalloc::test {

// How many of the `pages` pages from the one that holds p are resident. A refused mincore
// fails the calling test.
inline std::size_t resident_pages(const void* p, std::size_t pages) {
  const auto first = reinterpret_cast<std::uintptr_t>(p) & ~(kPageSize - 1);
  std::vector<unsigned char> in_core(pages);
  EXPECT_EQ(::mincore(reinterpret_cast<void*>(first), pages * kPageSize, in_core.data()), 0);
  std::size_t resident = 0;
  for (unsigned char c : in_core) resident += c & 1;
  return resident;
}

}  // namespace pagemalloc::test
