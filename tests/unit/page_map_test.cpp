// Tests of the page-level vocabulary (pages.h) and the page map's encodings (page_map.h):
//
//   - every PageEntry kind (Header, Free, Allocated, Large, Slab) decodes to what was encoded,
//     over the whole range of run lengths, with and without the dirty bit, Free and Header
//     entries with 16-byte-aligned records anywhere below 2^48, and slab entries for
//     64-byte-aligned descriptors with every size class 0..255 and page-in-slab 0..255;
//   - PageCount::covering rounds bytes up to whole pages;
//   - chunk_base_of / page_index_of / is_chunk_aligned / Run::at split an address into its
//     chunk and page, and Run's base/last/end agree with them;
//   - ChunkLayout's header is the page map alone, one page, and leaves room for a run of
//     kMaxRunPages.
#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <ostream>

#include "pagemap/page_map.h"
#include "pagemap/pages.h"

namespace pagemalloc {

// Failure messages show page counts and indices as numbers (found by googletest through ADL).
inline void PrintTo(PageCount n, std::ostream* os) { *os << n.value() << " pages"; }
inline void PrintTo(PageIndex i, std::ostream* os) { *os << "page " << i.value(); }

namespace {

// --- PageEntry ------------------------------------------------------------------------------

TEST(PageEntry, DefaultEntryIsNeverWrittenAndNotFree) {
  PageEntry e;
  EXPECT_FALSE(e.is_free());
  EXPECT_FALSE(e.dirty());
  EXPECT_EQ(e.pages().value(), 0u);
  EXPECT_NE(e, PageEntry::header());
}

TEST(PageEntry, HeaderRoundTrips) {
  PageEntry e = PageEntry::header();
  EXPECT_EQ(e.kind(), PageKind::Header);
  EXPECT_FALSE(e.is_free());
  EXPECT_FALSE(e.dirty());
}

TEST(PageEntry, FreeRoundTripsEveryLengthAndDirtiness) {
  for (std::size_t n = 1; n <= kPagesPerChunk; ++n) {
    for (bool dirty : {false, true}) {
      SCOPED_TRACE(testing::Message() << "pages=" << n << " dirty=" << dirty);
      PageEntry e = PageEntry::free(PageCount(n), dirty);
      ASSERT_EQ(e.kind(), PageKind::Free);
      ASSERT_TRUE(e.is_free());
      ASSERT_EQ(e.dirty(), dirty);
      ASSERT_EQ(e.pages(), PageCount(n));
      ASSERT_EQ(e.record(), nullptr);
    }
  }
}

// Records at the lowest and highest 16-byte-aligned addresses below 2^48, and in between.
TEST(PageEntry, FreeAndHeaderRoundTripTheirRecord) {
  const std::uintptr_t addresses[] = {0x10, 0x7f12'3456'7890, 0xffff'ffff'fff0};
  for (std::uintptr_t a : addresses) {
    const auto* record = reinterpret_cast<const void*>(a);
    for (std::size_t n : {std::size_t{1}, std::size_t{255}, std::size_t{256}, kPagesPerChunk}) {
      for (bool dirty : {false, true}) {
        SCOPED_TRACE(testing::Message() << "record=" << record << " pages=" << n);
        PageEntry e = PageEntry::free(PageCount(n), dirty, record);
        ASSERT_TRUE(e.is_free());
        ASSERT_EQ(e.dirty(), dirty);
        ASSERT_EQ(e.pages(), PageCount(n));
        ASSERT_EQ(e.record(), record);
        ASSERT_NE(e, PageEntry::free(PageCount(n), dirty));
      }
    }
    PageEntry h = PageEntry::header(record);
    EXPECT_EQ(h.kind(), PageKind::Header);
    EXPECT_EQ(h.record(), record);
    EXPECT_EQ(h.pages().value(), 0u);
  }
  EXPECT_EQ(PageEntry::header().record(), nullptr);
}

TEST(PageEntry, FreeRoundTripsTheLargestEncodableLength) {
  // The length field is 10 bits wide: more than any run inside a chunk needs.
  constexpr std::size_t kLargest = (std::size_t{1} << 10) - 1;
  PageEntry e = PageEntry::free(PageCount(kLargest), true);
  EXPECT_TRUE(e.is_free());
  EXPECT_TRUE(e.dirty());
  EXPECT_EQ(e.pages().value(), kLargest);
}

TEST(PageEntry, DirtyBitIsTheOnlyDifferenceBetweenDirtyAndCleanFreeEntries) {
  PageEntry clean = PageEntry::free(PageCount(37), false);
  PageEntry dirty = PageEntry::free(PageCount(37), true);
  EXPECT_NE(clean, dirty);
  EXPECT_EQ(clean.pages(), dirty.pages());
  EXPECT_EQ(clean.kind(), dirty.kind());
}

TEST(PageEntry, AllocatedAndLargeRoundTripEveryLength) {
  for (std::size_t n = 1; n <= kPagesPerChunk; ++n) {
    SCOPED_TRACE(testing::Message() << "pages=" << n);
    PageEntry a = PageEntry::allocated(PageCount(n));
    ASSERT_EQ(a.kind(), PageKind::Allocated);
    ASSERT_FALSE(a.is_free());
    ASSERT_FALSE(a.dirty());
    ASSERT_EQ(a.pages(), PageCount(n));

    PageEntry l = PageEntry::large(PageCount(n));
    ASSERT_EQ(l.kind(), PageKind::Large);
    ASSERT_FALSE(l.is_free());
    ASSERT_FALSE(l.dirty());
    ASSERT_EQ(l.pages(), PageCount(n));
    ASSERT_NE(a, l);
  }
}

TEST(PageEntry, ConstexprEncodingsAreUsableAtCompileTime) {
  static_assert(PageEntry::free(PageCount(3), true).is_free());
  static_assert(PageEntry::free(PageCount(3), true).dirty());
  static_assert(PageEntry::free(PageCount(3), true).pages() == PageCount(3));
  static_assert(PageEntry::allocated(PageCount(9)).kind() == PageKind::Allocated);
  static_assert(PageEntry::large(PageCount(9)).pages() == PageCount(9));
  static_assert(PageEntry::header().kind() == PageKind::Header);
  SUCCEED();
}

TEST(PageEntry, SlabRoundTripsDescriptorClassAndPageInSlab) {
  // Real 64-byte-aligned descriptors at several places of a buffer, and synthetic ones with
  // every descriptor bit set and with only the highest one set (below 2^48, as the encoding
  // requires).
  struct alignas(64) Descriptor {
    std::byte bytes[64];
  };
  auto descriptors = std::make_unique<Descriptor[]>(8);
  const void* addresses[] = {
      &descriptors[0],
      &descriptors[1],
      &descriptors[7],
      reinterpret_cast<const void*>(std::uintptr_t{0x0000'ffff'ffff'ffc0}),
      reinterpret_cast<const void*>(std::uintptr_t{0x0000'8000'0000'0000}),
      reinterpret_cast<const void*>(std::uintptr_t{0x40}),
  };
  for (const void* descriptor : addresses) {
    ASSERT_EQ(reinterpret_cast<std::uintptr_t>(descriptor) % 64, 0u);
    for (unsigned size_class = 0; size_class < 128; ++size_class) {
      for (unsigned page_in_slab : {0u, 1u, 2u, 127u, 128u, 254u, 255u}) {
        SCOPED_TRACE(testing::Message() << "descriptor=" << descriptor << " class=" << size_class
                                        << " page_in_slab=" << page_in_slab);
        PageEntry e = PageEntry::slab(descriptor, size_class, page_in_slab);
        ASSERT_EQ(e.kind(), PageKind::Slab);
        ASSERT_TRUE(e.is_slab());
        ASSERT_FALSE(e.is_free());
        ASSERT_FALSE(e.dirty());
        ASSERT_EQ(e.slab_descriptor(), descriptor);
        ASSERT_EQ(e.size_class(), size_class);
        ASSERT_EQ(e.page_in_slab(), page_in_slab);
      }
    }
  }
}

TEST(PageEntry, SlabPageInSlabRoundTripsEveryValue) {
  alignas(64) static std::byte storage[64];
  for (unsigned page_in_slab = 0; page_in_slab < 256; ++page_in_slab) {
    PageEntry e = PageEntry::slab(storage, 127, page_in_slab);
    ASSERT_EQ(e.page_in_slab(), page_in_slab);
    ASSERT_EQ(e.size_class(), 127u);
    ASSERT_EQ(e.slab_descriptor(), static_cast<void*>(storage));
  }
}

// The free path tests a slab page by the entry's sign alone: no other kind of entry may have
// its top bit set, whatever its fields hold.
TEST(PageEntry, OnlySlabEntriesAreSlabsByTheirSign) {
  const void* highest_record = reinterpret_cast<const void*>(std::uintptr_t{0x0000'ffff'ffff'fff0});
  const PageCount longest(1023);
  EXPECT_FALSE(PageEntry().is_slab());
  EXPECT_FALSE(PageEntry::header().is_slab());
  EXPECT_FALSE(PageEntry::header(highest_record).is_slab());
  for (bool dirty : {false, true}) {
    EXPECT_FALSE(PageEntry::free(longest, dirty).is_slab());
    EXPECT_FALSE(PageEntry::free(longest, dirty, highest_record).is_slab());
  }
  EXPECT_FALSE(PageEntry::allocated(longest).is_slab());
  EXPECT_FALSE(PageEntry::large(longest).is_slab());
  alignas(64) static std::byte storage[64];
  EXPECT_TRUE(PageEntry::slab(storage, 0, 0).is_slab());
  EXPECT_TRUE(PageEntry::slab(storage, 127, 255).is_slab());
}

TEST(PageEntry, SlabEntriesGiveTheirBiasedClassTimesSixteen) {
  alignas(64) static std::byte storage[64];
  const void* highest_record = reinterpret_cast<const void*>(std::uintptr_t{0x0000'ffff'ffff'ffc0});
  for (unsigned size_class = 0; size_class < 128; ++size_class)
    for (unsigned page : {0u, 1u, 15u, 255u})
      for (const void* descriptor : {static_cast<const void*>(storage), highest_record})
        EXPECT_EQ(PageEntry::slab(descriptor, size_class, page).class_byte_times_16(),
                  (size_class + PageEntry::kClassBias) * 16)
            << size_class << " " << page;
}

TEST(PageEntry, SlabEntriesOfDifferentFieldsDiffer) {
  alignas(64) static std::byte storage[128];
  EXPECT_NE(PageEntry::slab(storage, 3, 0), PageEntry::slab(storage, 4, 0));
  EXPECT_NE(PageEntry::slab(storage, 3, 0), PageEntry::slab(storage + 64, 3, 0));
  EXPECT_NE(PageEntry::slab(storage, 3, 0), PageEntry::slab(storage, 3, 1));
  EXPECT_EQ(PageEntry::slab(storage, 3, 5), PageEntry::slab(storage, 3, 5));
}

// --- PageCount and PageIndex ----------------------------------------------------------------

TEST(PageCount, CoveringRoundsBytesUpToWholePages) {
  EXPECT_EQ(PageCount::covering(0).value(), 0u);
  EXPECT_EQ(PageCount::covering(1).value(), 1u);
  EXPECT_EQ(PageCount::covering(kPageSize - 1).value(), 1u);
  EXPECT_EQ(PageCount::covering(kPageSize).value(), 1u);
  EXPECT_EQ(PageCount::covering(kPageSize + 1).value(), 2u);
  EXPECT_EQ(PageCount::covering(kChunkSize).value(), kPagesPerChunk);
  EXPECT_EQ(PageCount::covering(kChunkSize + 1).value(), kPagesPerChunk + 1);
  for (std::size_t bytes = 0; bytes < 5 * kPageSize; bytes += 97) {
    std::size_t pages = PageCount::covering(bytes).value();
    ASSERT_GE(pages * kPageSize, bytes) << bytes;
    if (pages > 0) {
      ASSERT_LT((pages - 1) * kPageSize, bytes) << bytes;
    }
  }
}

TEST(PageCount, ArithmeticAndBytes) {
  EXPECT_EQ((PageCount(5) + PageCount(3)).value(), 8u);
  EXPECT_EQ((PageCount(5) - PageCount(3)).value(), 2u);
  EXPECT_EQ(PageCount(3).bytes(), 3 * kPageSize);
  EXPECT_LT(PageCount(2), PageCount(3));
  EXPECT_EQ(PageCount().value(), 0u);
}

TEST(PageIndex, OffsetsByPageCountsAndDistance) {
  PageIndex i(10);
  EXPECT_EQ((i + PageCount(5)).value(), 15u);
  EXPECT_EQ((i - PageCount(4)).value(), 6u);
  EXPECT_EQ(PageIndex(15) - PageIndex(10), PageCount(5));
  EXPECT_LT(PageIndex(3), PageIndex(4));
}

// --- Addresses: chunk and page of a pointer -------------------------------------------------

TEST(Addresses, ChunkBaseAndPageIndexOfEveryPage) {
  constexpr std::uintptr_t kChunk = std::uintptr_t{0x7f12'3440'0000};
  static_assert(kChunk % kChunkSize == 0);
  for (std::size_t page = 0; page < kPagesPerChunk; ++page) {
    for (std::size_t offset : {std::size_t{0}, std::size_t{1}, kPageSize - 1}) {
      auto* p = reinterpret_cast<const void*>(kChunk + page * kPageSize + offset);
      ASSERT_EQ(reinterpret_cast<std::uintptr_t>(chunk_base_of(p)), kChunk);
      ASSERT_EQ(page_index_of(p).value(), page);
      ASSERT_EQ(is_chunk_aligned(p), page == 0 && offset == 0);
    }
  }
  // The last byte of one chunk and the first of the next belong to different chunks.
  auto* last = reinterpret_cast<const void*>(kChunk + kChunkSize - 1);
  auto* next = reinterpret_cast<const void*>(kChunk + kChunkSize);
  EXPECT_NE(chunk_base_of(last), chunk_base_of(next));
  EXPECT_EQ(page_index_of(next).value(), 0u);
  EXPECT_TRUE(is_chunk_aligned(next));
}

TEST(Addresses, RunAtAndBaseLastEndAgree) {
  void* buffer = std::aligned_alloc(kChunkSize, kChunkSize);
  ASSERT_NE(buffer, nullptr);
  auto* chunk = static_cast<std::byte*>(buffer);
  const std::size_t firsts[] = {0, 16, 100, kPagesPerChunk - 1};
  for (std::size_t first : firsts) {
    std::size_t pages = kPagesPerChunk - first;
    SCOPED_TRACE(testing::Message() << "first=" << first << " pages=" << pages);
    pagemalloc::Run run = pagemalloc::Run::at(chunk + first * kPageSize, PageCount(pages));
    EXPECT_TRUE(run);
    EXPECT_EQ(run.chunk, chunk);
    EXPECT_EQ(run.first.value(), first);
    EXPECT_EQ(run.base(), chunk + first * kPageSize);
    EXPECT_EQ(run.last().value(), kPagesPerChunk - 1);
    EXPECT_EQ(run.end().value(), kPagesPerChunk);
  }
  EXPECT_FALSE(pagemalloc::Run{});
  std::free(buffer);
}

// --- ChunkLayout ----------------------------------------------------------------------------

TEST(ChunkLayout, HeaderIsThePageMapAlone) {
  EXPECT_EQ(ChunkLayout::kHeaderPages.value(), 1u);
  // The page map fills its page (2 MiB chunks) or half of it (1 MiB).
  EXPECT_GE(ChunkLayout::kHeaderPages.bytes(), sizeof(PageEntry) * kPagesPerChunk);
  EXPECT_GE(sizeof(PageEntry) * kPagesPerChunk, ChunkLayout::kHeaderPages.bytes() / 2);
  EXPECT_EQ(ChunkLayout::kUsablePages.value(), kPagesPerChunk - 1);
  EXPECT_EQ(ChunkLayout::kFirstRunPage.value(), 1u);
  EXPECT_GE(ChunkLayout::kUsablePages, kMaxRunPages);
}

TEST(ChunkLayout, MaxRunPagesLeavesRoomForTheLargestHeader) {
  EXPECT_EQ(kMaxRunPages.value() + kMaxHeaderPages, kPagesPerChunk);
}

TEST(ChunkLayout, PageMapIsAtTheStartOfTheChunk) {
  void* buffer = std::aligned_alloc(kChunkSize, kChunkSize);
  ASSERT_NE(buffer, nullptr);
  auto* chunk = static_cast<std::byte*>(buffer);
  EXPECT_EQ(reinterpret_cast<std::byte*>(&page_entry(chunk, PageIndex(0))), chunk);
  EXPECT_EQ(&page_entry(chunk, PageIndex(kPagesPerChunk - 1)),
            page_map(chunk) + (kPagesPerChunk - 1));
  EXPECT_LE(reinterpret_cast<std::byte*>(page_map(chunk) + kPagesPerChunk),
            chunk + ChunkLayout::kHeaderPages.bytes());
  std::free(buffer);
}

}  // namespace
}  // namespace pagemalloc
