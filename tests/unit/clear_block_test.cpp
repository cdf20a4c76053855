// Clearing a block that must read zero (clear_block.h): every byte reads zero afterwards and
// nothing outside the block changes; pages that were not resident stay so; a window where few
// pages are resident is dropped whole; resident pages of a dense window are written. And
// through the allocator: zeroed blocks carved from a freed huge block touched at one byte per
// 64 pages, or the block's whole extent taken again by a zeroed huge block, do not make its
// untouched pages resident.
#include <gtest/gtest.h>
#include <sys/mman.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "os/clear_block.h"
#include "pagemalloc/pagemalloc.h"
#include "pagemap/pages.h"
#include "resident_pages.h"

namespace {

constexpr std::size_t kPage = pagemalloc::kPageSize;
constexpr std::size_t kWindow = pagemalloc::kClearWindowPages;

using pagemalloc::test::resident_pages;

bool reads_zero(const std::byte* p, std::size_t bytes) {
  for (std::size_t i = 0; i < bytes; ++i)
    if (p[i] != std::byte{0}) return false;
  return true;
}

// An anonymous mapping of `pages` pages, unmapped at the end of the test.
class Mapping {
 public:
  explicit Mapping(std::size_t pages) : bytes_(pages * kPage) {
    void* p = ::mmap(nullptr, bytes_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    EXPECT_NE(p, MAP_FAILED);
    base_ = static_cast<std::byte*>(p);
    ::madvise(base_, bytes_, MADV_NOHUGEPAGE);  // pages resident one by one, as written
  }
  ~Mapping() { ::munmap(base_, bytes_); }
  Mapping(const Mapping&) = delete;
  Mapping& operator=(const Mapping&) = delete;
  [[nodiscard]] std::byte* page(std::size_t i) const { return base_ + i * kPage; }
  // Writes 0xab over page i.
  void dirty(std::size_t i) const { std::memset(page(i), 0xab, kPage); }

 private:
  std::size_t bytes_;
  std::byte* base_;
};

TEST(ClearBlock, ResidentPagesOfADenseWindowReadZeroAndTheOthersStayOut) {
  constexpr std::size_t kPages = 2 * kWindow + 40;  // two whole windows and part of a third
  Mapping m(kPages);
  for (std::size_t i = 0; i < kPages; ++i)
    if (i % 4 != 3) m.dirty(i);  // three pages in four resident
  pagemalloc::clear_block(m.page(0), kPages * kPage);
  EXPECT_EQ(resident_pages(m.page(0), kPages), kPages - kPages / 4);
  EXPECT_TRUE(reads_zero(m.page(0), kPages * kPage));
}

TEST(ClearBlock, AWindowWithFewResidentPagesIsDroppedWhole) {
  Mapping m(kWindow);
  for (std::size_t i = 0; i < kWindow; i += 64) m.dirty(i);  // one page in 64
  ASSERT_EQ(resident_pages(m.page(0), kWindow), kWindow / 64);
  pagemalloc::clear_block(m.page(0), kWindow * kPage);
  EXPECT_EQ(resident_pages(m.page(0), kWindow), 0u);
  EXPECT_TRUE(reads_zero(m.page(0), kWindow * kPage));
}

TEST(ClearBlock, PartialPagesAtTheEndsAreWrittenAndNothingOutsideChanges) {
  constexpr std::size_t kPages = 64;
  Mapping m(kPages);
  for (std::size_t i = 0; i < kPages; ++i) m.dirty(i);
  const std::size_t head = 100, bytes = (kPages - 2) * kPage + 50;
  static_assert((kPages - 2) * kPage >= pagemalloc::kClearByResidencyBytes);
  pagemalloc::clear_block(m.page(0) + head, bytes);
  for (std::size_t i = 0; i < head; ++i) ASSERT_EQ(m.page(0)[i], std::byte{0xab}) << i;
  EXPECT_TRUE(reads_zero(m.page(0) + head, bytes));
  for (std::size_t i = head + bytes; i < kPages * kPage; ++i)
    ASSERT_EQ(m.page(0)[i], std::byte{0xab}) << i;
}

TEST(ClearBlock, ASmallBlockIsWritten) {
  Mapping m(8);
  m.dirty(0);
  pagemalloc::clear_block(m.page(0) + 8, 3 * kPage);  // pages 1-3 were not resident
  EXPECT_TRUE(reads_zero(m.page(0) + 8, 3 * kPage));
  EXPECT_EQ(resident_pages(m.page(0), 8), 4u);
  EXPECT_EQ(m.page(0)[7], std::byte{0xab});
}

TEST(ClearBlock, LeavesErrnoAsItWas) {
  Mapping m(kWindow);
  m.dirty(1);
  errno = 1234;
  pagemalloc::clear_block(m.page(0), kWindow * kPage);
  EXPECT_EQ(errno, 1234);
}

// A 64 MiB block written at one byte per 64 pages and freed: its extent stays cached (its
// touched pages resident), and what is allocated next may be carved from it. False if the
// system backed the block with huge pages (transparent huge pages "always"): then its
// touched bytes made every page resident, and there is nothing to keep out.
bool freed_a_sparsely_touched_block() {
  constexpr std::size_t kBig = std::size_t{64} << 20;
  auto* big = static_cast<unsigned char*>(pm_malloc(kBig));
  EXPECT_NE(big, nullptr);
  if (big == nullptr) return false;
  for (std::size_t at = 0; at < kBig; at += 64 * kPage) big[at] = 0xab;
  const bool sparse = resident_pages(big, kBig / kPage) <= kBig / kPage / 32;
  pm_free(big);
  return sparse;
}

TEST(ClearBlock, ZeroedBlocksAfterASparselyTouchedFreedBlockStayMostlyOut) {
  if (!freed_a_sparsely_touched_block()) GTEST_SKIP() << "the block was backed by huge pages";
  constexpr std::size_t kBlocks = 256, kBytes = 256 * 1024, kPages = kBytes / kPage;
  std::vector<void*> blocks;
  std::size_t resident = 0;
  for (std::size_t i = 0; i < kBlocks; ++i) {
    void* p = pm_calloc(1, kBytes);
    ASSERT_NE(p, nullptr);
    resident += resident_pages(p, kPages);
    blocks.push_back(p);
  }
  // At most the few pages the freed block touched (written zero when their window is dense),
  // where writing zeros would make all 16,384 resident.
  EXPECT_LE(resident, kBlocks * kPages / 32);
  for (void* p : blocks) {
    EXPECT_TRUE(reads_zero(static_cast<std::byte*>(p), kBytes));
    pm_free(p);
  }
}

TEST(ClearBlock, AZeroedHugeBlockInTheFreedExtentStaysMostlyOut) {
  if (!freed_a_sparsely_touched_block()) GTEST_SKIP() << "the block was backed by huge pages";
  constexpr std::size_t kBytes = std::size_t{48} << 20, kPages = kBytes / kPage;
  void* p = pm_mallocx(kBytes, PM_ZERO);
  ASSERT_NE(p, nullptr);
  EXPECT_LE(resident_pages(p, kPages), kPages / 32);
  EXPECT_TRUE(reads_zero(static_cast<std::byte*>(p), kBytes));
  pm_free(p);
}

}  // namespace
