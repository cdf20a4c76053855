// calloc's inline path for small blocks (Heap::allocate_zeroed, reached by calloc and
// pm_calloc): a region the thread cache hands out again after it held data comes back
// cleared over its whole usable size, for every small class; overflow and the large sizes keep
// their answers.
#include <gtest/gtest.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "pagemalloc/pagemalloc.h"

namespace {

bool all_zero(const void* p, std::size_t n) {
  const auto* b = static_cast<const unsigned char*>(p);
  for (std::size_t i = 0; i < n; ++i)
    if (b[i] != 0) return false;
  return true;
}

TEST(CallocFastPath, AReusedRegionComesBackClearedOverItsUsableSize) {
  for (std::size_t size = 1; size <= 16384; size += size < 256 ? 8 : size / 4) {
    void* dirty = pm_malloc(size);
    ASSERT_NE(dirty, nullptr);
    const std::size_t usable = pm_malloc_usable_size(dirty);
    std::memset(dirty, 0xA5, usable);
    pm_free(dirty);
    void* p = pm_calloc(1, size);
    ASSERT_NE(p, nullptr);
    EXPECT_EQ(p, dirty) << "the cache should hand the same region out again (size " << size << ")";
    EXPECT_TRUE(all_zero(p, pm_malloc_usable_size(p))) << "size " << size;
    pm_free(p);
  }
}

TEST(CallocFastPath, ZeroCountGivesASmallClearedBlock) {
  void* p = pm_calloc(0, 8);
  ASSERT_NE(p, nullptr);
  EXPECT_TRUE(all_zero(p, pm_malloc_usable_size(p)));
  pm_free(p);
}

TEST(CallocFastPath, AnOverflowingProductIsRefusedWithEnomem) {
  errno = 0;
  EXPECT_EQ(pm_calloc(SIZE_MAX / 2, 3), nullptr);
  EXPECT_EQ(errno, ENOMEM);
}

TEST(CallocFastPath, ALargeBlockIsClearedToo) {
  void* dirty = pm_malloc(40000);
  ASSERT_NE(dirty, nullptr);
  std::memset(dirty, 0x5A, 40000);
  pm_free(dirty);
  void* p = pm_calloc(4, 10000);
  ASSERT_NE(p, nullptr);
  EXPECT_TRUE(all_zero(p, 40000));
  pm_free(p);
}

}  // namespace
