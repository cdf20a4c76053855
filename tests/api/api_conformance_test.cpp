// API conformance: the pm_* entry points against the contract of docs/design.md ("The API") and
// the semantics jemalloc documents for its *allocx calls, which pagemalloc follows.
//
// Terms used below:
//   usable size  what pm_malloc_usable_size / pm_sallocx report for a block; the caller may
//                write all of it, and reallocation must carry all of it over.
//   small        a request of at most 16 KiB, served from a slab region;
//   large        a run of pages inside a chunk (above 16 KiB, below the chunk size);
//   huge         a mapping of its own (sizes here: 3 MiB and more).
// The sizes in each test are chosen so that every kind is crossed, in both directions where
// a block changes size.
//
// Randomized tests use a fixed seed and print it on failure (SCOPED_TRACE).
//
// The automatic arenas' tests read the arena of a block from the address map (allocator/src):
// threads are spread over the arenas, and a block goes back to its own arena whoever frees it.
#include <gtest/gtest.h>

#include <pagemalloc/pagemalloc.h>

#include <unistd.h>

#include "arena/arena.h"
#include "chunks/address_map.h"
#include "failure_log.h"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <mutex>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace {

using pagemalloc::test::FailureLog;

constexpr std::size_t KiB = 1024;
constexpr std::size_t MiB = 1024 * KiB;

bool is_aligned(const void* p, std::size_t alignment) {
  return reinterpret_cast<std::uintptr_t>(p) % alignment == 0;
}

// The offset of the first of the n bytes at p that is not `value`, or n when all are.
std::size_t first_byte_not(const void* p, std::size_t n, unsigned char value) {
  const auto* bytes = static_cast<const unsigned char*>(p);
  if (n == 0) return 0;
  if (bytes[0] == value && std::memcmp(bytes, bytes + 1, n - 1) == 0) return n;
  for (std::size_t i = 0; i < n; ++i)
    if (bytes[i] != value) return i;
  return n;
}

// A position-dependent pattern: a block copied to the wrong offset, or only in part, does not
// match it. `salt` tells the patterns of successive steps apart.
std::uint64_t pattern_word(std::size_t word_index, std::uint64_t salt) {
  return (word_index + 1) * 0x9E3779B97F4A7C15ull ^ salt;
}

void fill_pattern(void* p, std::size_t n, std::uint64_t salt) {
  auto* bytes = static_cast<unsigned char*>(p);
  const std::size_t words = n / 8;
  for (std::size_t w = 0; w < words; ++w) {
    std::uint64_t value = pattern_word(w, salt);
    std::memcpy(bytes + 8 * w, &value, 8);
  }
  std::uint64_t tail = pattern_word(words, salt);
  std::memcpy(bytes + 8 * words, &tail, n % 8);
}

// The offset of the first of the n bytes at p that differs from fill_pattern(.., salt), or n.
std::size_t pattern_mismatch(const void* p, std::size_t n, std::uint64_t salt) {
  const auto* bytes = static_cast<const unsigned char*>(p);
  for (std::size_t offset = 0; offset < n; offset += 8) {
    std::uint64_t expected = pattern_word(offset / 8, salt);
    std::size_t length = std::min<std::size_t>(8, n - offset);
    if (std::memcmp(bytes + offset, &expected, length) != 0) {
      const auto* expected_bytes = reinterpret_cast<const unsigned char*>(&expected);
      for (std::size_t i = 0; i < length; ++i)
        if (bytes[offset + i] != expected_bytes[i]) return offset + i;
    }
  }
  return n;
}

std::string describe(const char* what, std::size_t value) {
  return std::string(what) + " " + std::to_string(value);
}

// Leaves freed, written-over memory of `size` bytes behind, so that a following allocation of
// the same size is likely to be served from dirty memory.
void dirty_and_free(std::size_t size) {
  void* p = pm_malloc(size);
  ASSERT_NE(p, nullptr) << describe("size", size);
  std::memset(p, 0xAB, pm_malloc_usable_size(p));
  pm_free(p);
}

// Allocates blocks of `size` bytes until two lie back to back (the second starts where the
// first one's usable size ends) and frees all the others. {nullptr, nullptr} if none did.
std::pair<unsigned char*, unsigned char*> allocate_adjacent_pair(std::size_t size) {
  std::set<unsigned char*> blocks;
  std::pair<unsigned char*, unsigned char*> pair{nullptr, nullptr};
  auto adjacent = [](unsigned char* first, unsigned char* second) {
    return first + pm_malloc_usable_size(first) == second;
  };
  for (int i = 0; i < 1024 && pair.first == nullptr; ++i) {
    auto* block = static_cast<unsigned char*>(pm_malloc(size));
    if (block == nullptr) break;
    auto [at, inserted] = blocks.insert(block);
    if (at != blocks.begin() && adjacent(*std::prev(at), block)) pair = {*std::prev(at), block};
    if (std::next(at) != blocks.end() && adjacent(block, *std::next(at)))
      pair = {block, *std::next(at)};
  }
  for (unsigned char* block : blocks)
    if (block != pair.first && block != pair.second) pm_free(block);
  return pair;
}

pm_stats current_stats() {
  pm_stats stats{};
  pm_stats_get(&stats);
  return stats;
}

// ---------------------------------------------------------------------------------------------
// Aligned allocation through every entry point that takes an alignment.

enum class AlignedEntry {
  posix_memalign,
  aligned_alloc,
  memalign,
  mallocx_align,
  mallocx_lg_align
};

std::string entry_name(AlignedEntry entry) {
  switch (entry) {
    case AlignedEntry::posix_memalign: return "pm_posix_memalign";
    case AlignedEntry::aligned_alloc: return "pm_aligned_alloc";
    case AlignedEntry::memalign: return "pm_memalign";
    case AlignedEntry::mallocx_align: return "pm_mallocx_PM_ALIGN";
    case AlignedEntry::mallocx_lg_align: return "pm_mallocx_PM_LG_ALIGN";
  }
  return "unknown";
}

int mallocx_flags(AlignedEntry entry, unsigned lg_alignment) {
  return entry == AlignedEntry::mallocx_align ? PM_ALIGN(std::size_t{1} << lg_alignment)
                                              : PM_LG_ALIGN(lg_alignment);
}

void* allocate_aligned(AlignedEntry entry, unsigned lg_alignment, std::size_t size) {
  const std::size_t alignment = std::size_t{1} << lg_alignment;
  switch (entry) {
    case AlignedEntry::posix_memalign: {
      void* p = nullptr;
      return pm_posix_memalign(&p, alignment, size) == 0 ? p : nullptr;
    }
    case AlignedEntry::aligned_alloc: return pm_aligned_alloc(alignment, size);
    case AlignedEntry::memalign: return pm_memalign(alignment, size);
    case AlignedEntry::mallocx_align:
    case AlignedEntry::mallocx_lg_align:
      return pm_mallocx(size, mallocx_flags(entry, lg_alignment));
  }
  return nullptr;
}

void release_aligned(AlignedEntry entry, unsigned lg_alignment, void* p) {
  if (entry == AlignedEntry::mallocx_align || entry == AlignedEntry::mallocx_lg_align)
    pm_dallocx(p, mallocx_flags(entry, lg_alignment));
  else pm_free(p);
}

class AlignedAllocation : public ::testing::TestWithParam<AlignedEntry> {};

TEST_P(AlignedAllocation, HonoursEveryAlignmentFrom1To16MiB) {
  const AlignedEntry entry = GetParam();
  const std::size_t sizes[] = {1, 8, 24, 100, 4096, 16 * KiB + 1, 1 * MiB + 40, 3 * MiB + 8};
  for (unsigned lg = 0; lg <= 24; ++lg) {
    const std::size_t alignment = std::size_t{1} << lg;
    if (entry == AlignedEntry::posix_memalign && alignment < sizeof(void*)) continue;
    for (std::size_t size : sizes) {
      SCOPED_TRACE(entry_name(entry) + ": alignment " + std::to_string(alignment) + ", size " +
                   std::to_string(size));
      void* p = allocate_aligned(entry, lg, size);
      ASSERT_NE(p, nullptr);
      EXPECT_TRUE(is_aligned(p, alignment)) << p;
      const std::size_t usable = pm_malloc_usable_size(p);
      EXPECT_GE(usable, size);
      EXPECT_EQ(pm_sallocx(p, 0), usable);
      std::memset(p, 0x5A, usable);
      EXPECT_EQ(first_byte_not(p, usable, 0x5A), usable);
      release_aligned(entry, lg, p);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(EveryEntryPoint, AlignedAllocation,
                         ::testing::Values(AlignedEntry::posix_memalign,
                                           AlignedEntry::aligned_alloc, AlignedEntry::memalign,
                                           AlignedEntry::mallocx_align,
                                           AlignedEntry::mallocx_lg_align),
                         [](const ::testing::TestParamInfo<AlignedEntry>& info) {
                           return entry_name(info.param);
                         });

// ---------------------------------------------------------------------------------------------
// Usable sizes.

// Sizes from 16 KiB to 64 MiB: eight steps per doubling, each with its neighbours.
std::vector<std::size_t> sparse_sizes_to_64MiB() {
  std::vector<std::size_t> sizes;
  for (std::size_t power = 16 * KiB; power < 64 * MiB; power *= 2)
    for (std::size_t step = 0; step < 8; ++step) {
      std::size_t size = power + step * (power / 8);
      for (std::size_t s : {size - 1, size, size + 1}) sizes.push_back(s);
    }
  for (std::size_t s : {64 * MiB - 1, 64 * MiB}) sizes.push_back(s);
  return sizes;
}

TEST(UsableSize, CoversEveryRequestFrom0To20000) {
  for (std::size_t size = 0; size <= 20000; ++size) {
    auto* p = static_cast<unsigned char*>(pm_malloc(size));
    ASSERT_NE(p, nullptr) << describe("size", size);
    const std::size_t usable = pm_malloc_usable_size(p);
    ASSERT_GE(usable, size) << describe("size", size);
    ASSERT_EQ(pm_sallocx(p, 0), usable) << describe("size", size);
    if (usable > 0) {
      p[0] = 1;
      p[usable - 1] = 2;
    }
    pm_free(p);
  }
}

TEST(UsableSize, CoversSparseRequestsUpTo64MiB) {
  for (std::size_t size : sparse_sizes_to_64MiB()) {
    auto* p = static_cast<unsigned char*>(pm_malloc(size));
    ASSERT_NE(p, nullptr) << describe("size", size);
    const std::size_t usable = pm_malloc_usable_size(p);
    EXPECT_GE(usable, size) << describe("size", size);
    EXPECT_EQ(pm_sallocx(p, 0), usable) << describe("size", size);
    p[0] = 1;
    p[usable - 1] = 2;
    pm_free(p);
  }
}

TEST(UsableSize, NallocxPredictsTheUsableSizeOfMallocx) {
  std::vector<std::size_t> sizes;
  for (std::size_t size = 1; size <= 600; ++size) sizes.push_back(size);
  for (std::size_t size = 601; size <= 20000; size += 97) sizes.push_back(size);
  for (std::size_t size : sparse_sizes_to_64MiB())
    if (size % 3 == 0) sizes.push_back(size);  // a third of them keeps the test short
  const std::size_t alignments[] = {0, 8, 16, 64, 256, 4096, 64 * KiB, 2 * MiB};
  for (std::size_t alignment : alignments) {
    const int flags = alignment == 0 ? 0 : PM_ALIGN(alignment);
    for (std::size_t size : sizes) {
      const std::size_t predicted = pm_nallocx(size, flags);
      void* p = pm_mallocx(size, flags);
      ASSERT_NE(p, nullptr) << describe("size", size) << describe(", alignment", alignment);
      EXPECT_EQ(predicted, pm_sallocx(p, 0))
          << describe("size", size) << describe(", alignment", alignment);
      EXPECT_GE(predicted, size) << describe("size", size) << describe(", alignment", alignment);
      pm_dallocx(p, flags);
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Live blocks are disjoint.

struct LiveBlock {
  unsigned char* start;
  std::size_t usable;
  unsigned char fill;
};

TEST(LiveBlocks, NeverOverlapAndKeepTheirContents) {
  constexpr std::uint64_t seed = 0x5eed0001;
  SCOPED_TRACE(describe("seed", seed));
  std::mt19937_64 rng(seed);
  constexpr int kBlocks = 3000;
  const pm_stats baseline = current_stats();
  std::vector<LiveBlock> blocks;
  for (int i = 0; i < kBlocks; ++i) {
    std::size_t size;
    if (i % 400 == 7)  // a few huge blocks
      size = 2 * MiB + 1 + rng() % (6 * MiB);
    else if (i % 25 == 3)  // about 4% large
      size = 16 * KiB + 1 + rng() % (2 * MiB - 16 * KiB);
    else  // small, spread over all classes
      size = 1 + rng() % (std::size_t{1} << (rng() % 15));
    auto* p = static_cast<unsigned char*>(pm_malloc(size));
    ASSERT_NE(p, nullptr) << describe("size", size);
    LiveBlock block{p, pm_malloc_usable_size(p), static_cast<unsigned char>(1 + i % 251)};
    ASSERT_GE(block.usable, size);
    std::memset(block.start, block.fill, block.usable);
    blocks.push_back(block);
  }

  std::vector<LiveBlock> by_address = blocks;
  std::sort(by_address.begin(), by_address.end(),
            [](const LiveBlock& a, const LiveBlock& b) { return a.start < b.start; });
  for (std::size_t i = 0; i + 1 < by_address.size(); ++i)
    EXPECT_LE(by_address[i].start + by_address[i].usable, by_address[i + 1].start)
        << "block at " << static_cast<void*>(by_address[i].start) << " with usable size "
        << by_address[i].usable << " overlaps the block at "
        << static_cast<void*>(by_address[i + 1].start);
  for (const LiveBlock& block : blocks)
    EXPECT_EQ(first_byte_not(block.start, block.usable, block.fill), block.usable)
        << "block at " << static_cast<void*>(block.start);

  std::shuffle(blocks.begin(), blocks.end(), rng);
  for (const LiveBlock& block : blocks) {
    ASSERT_EQ(first_byte_not(block.start, block.usable, block.fill), block.usable)
        << "block at " << static_cast<void*>(block.start) << " changed while others were freed";
    pm_free(block.start);
  }
  EXPECT_EQ(current_stats().allocated, baseline.allocated) << "allocated bytes did not come back";
}

// ---------------------------------------------------------------------------------------------
// Reallocation keeps contents across small, large and huge, in both directions.

const std::size_t kResizeChain[] = {24, 5000, 40000, 3 * MiB, 100 * MiB, 3 * MiB, 40000, 5000, 24};

// Runs the resize chain through `resize`, filling each block's whole usable size with a fresh
// pattern and checking that the next block starts with it (as far as both blocks reach).
template <class Allocate, class Resize>
void check_resize_chain(Allocate allocate, Resize resize, std::size_t alignment) {
  std::size_t size = kResizeChain[0];
  void* p = allocate(size);
  ASSERT_NE(p, nullptr);
  std::size_t usable = pm_malloc_usable_size(p);
  fill_pattern(p, usable, 0);
  for (std::size_t step = 1; step < std::size(kResizeChain); ++step) {
    const std::size_t new_size = kResizeChain[step];
    SCOPED_TRACE("step " + std::to_string(step) + ": " + std::to_string(size) + " -> " +
                 std::to_string(new_size) + " bytes");
    void* q = resize(p, new_size);
    ASSERT_NE(q, nullptr);
    EXPECT_TRUE(is_aligned(q, alignment)) << q;
    const std::size_t new_usable = pm_malloc_usable_size(q);
    EXPECT_GE(new_usable, new_size);
    const std::size_t kept = std::min(usable, new_size);
    EXPECT_EQ(pattern_mismatch(q, kept, step - 1), kept)
        << "contents not carried over (the old usable size was " << usable << ")";
    fill_pattern(q, new_usable, step);
    p = q;
    size = new_size;
    usable = new_usable;
  }
  pm_free(p);
}

TEST(Reallocation, ReallocKeepsContentsAcrossAllSizeKinds) {
  check_resize_chain([](std::size_t size) { return pm_malloc(size); },
                     [](void* p, std::size_t size) { return pm_realloc(p, size); }, 1);
}

TEST(Reallocation, RallocxKeepsContentsAndAlignmentAcrossAllSizeKinds) {
  check_resize_chain([](std::size_t size) { return pm_mallocx(size, PM_ALIGN(64)); },
                     [](void* p, std::size_t size) { return pm_rallocx(p, size, PM_ALIGN(64)); },
                     64);
}

TEST(Reallocation, RallocxToAStricterAlignmentReturnsAnAlignedBlock) {
  const std::size_t sizes[] = {24, 100, 5000, 40000, 1 * MiB, 3 * MiB};
  const std::size_t alignments[] = {256, 4096, 64 * KiB, 2 * MiB, 4 * MiB};
  for (std::size_t size : sizes) {
    for (std::size_t alignment : alignments) {
      SCOPED_TRACE(describe("size", size) + describe(", alignment", alignment));
      void* p = pm_malloc(size);
      ASSERT_NE(p, nullptr);
      fill_pattern(p, size, 9);
      for (std::size_t new_size : {size, size + size / 2}) {
        void* q = pm_rallocx(p, new_size, PM_ALIGN(alignment));
        ASSERT_NE(q, nullptr);
        EXPECT_TRUE(is_aligned(q, alignment)) << q << describe(", new size", new_size);
        EXPECT_GE(pm_sallocx(q, 0), new_size);
        EXPECT_EQ(pattern_mismatch(q, size, 9), size);
        p = q;
      }
      pm_free(p);
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Zeroed memory.

const std::size_t kZeroingSizes[] = {100, 3000, 40000, 1 * MiB, 8 * MiB};

TEST(ZeroedMemory, MallocxZeroIsZeroEvenOverDirtyMemory) {
  for (std::size_t size : kZeroingSizes) {
    SCOPED_TRACE(describe("size", size));
    dirty_and_free(size);
    void* p = pm_mallocx(size, PM_ZERO);
    ASSERT_NE(p, nullptr);
    EXPECT_EQ(first_byte_not(p, size, 0), size);
    pm_dallocx(p, 0);
  }
}

TEST(ZeroedMemory, MallocxZeroWithAlignmentIsZeroEvenOverDirtyMemory) {
  for (std::size_t size : kZeroingSizes) {
    SCOPED_TRACE(describe("size", size));
    dirty_and_free(size);
    void* p = pm_mallocx(size, PM_ZERO | PM_ALIGN(64));
    ASSERT_NE(p, nullptr);
    EXPECT_TRUE(is_aligned(p, 64));
    EXPECT_EQ(first_byte_not(p, size, 0), size);
    pm_dallocx(p, PM_ALIGN(64));
  }
}

TEST(ZeroedMemory, CallocIsZeroEvenOverDirtyMemory) {
  for (std::size_t size : kZeroingSizes) {
    SCOPED_TRACE(describe("size", size));
    dirty_and_free(size);
    void* p = pm_calloc(size / 4, 4);
    ASSERT_NE(p, nullptr);
    EXPECT_EQ(first_byte_not(p, size / 4 * 4, 0), size / 4 * 4);
    pm_free(p);
    dirty_and_free(size);
    p = pm_calloc(1, size);
    ASSERT_NE(p, nullptr);
    EXPECT_EQ(first_byte_not(p, size, 0), size);
    pm_free(p);
  }
}

// jemalloc: "In the growing reallocation case, the real size prior to reallocation defines the
// boundary between untouched bytes and those that are initialized to contain zero bytes."
void check_rallocx_zero_grows(void* p, std::size_t new_size) {
  const std::size_t old_usable = pm_malloc_usable_size(p);
  fill_pattern(p, old_usable, 42);
  void* q = pm_rallocx(p, new_size, PM_ZERO);
  ASSERT_NE(q, nullptr);
  ASSERT_GE(pm_malloc_usable_size(q), new_size);
  EXPECT_EQ(pattern_mismatch(q, old_usable, 42), old_usable) << "old contents lost";
  auto* grown = static_cast<unsigned char*>(q) + old_usable;
  EXPECT_EQ(first_byte_not(grown, new_size - old_usable, 0), new_size - old_usable)
      << "grown bytes (from offset " << old_usable << ") are not zero; moved: " << (q != p);
  pm_free(q);
}

TEST(ZeroedMemory, RallocxZeroZeroesTheGrownBytesOfSmallAndHugeBlocks) {
  const std::pair<std::size_t, std::size_t> growths[] = {
      {100, 200}, {100, 3000}, {3000, 40000}, {40000, 1 * MiB}, {3 * MiB, 24 * MiB}};
  for (auto [old_size, new_size] : growths) {
    SCOPED_TRACE(std::to_string(old_size) + " -> " + std::to_string(new_size) + " bytes");
    dirty_and_free(new_size);
    void* p = pm_malloc(old_size);
    ASSERT_NE(p, nullptr);
    check_rallocx_zero_grows(p, new_size);
  }
}

TEST(ZeroedMemory, RallocxZeroZeroesDirtyPagesGrownIntoInPlace) {
  auto [block, neighbour] = allocate_adjacent_pair(72 * KiB);  // runs: above the slab classes
  ASSERT_NE(block, nullptr) << "no two of 1024 blocks of 72 KiB were adjacent";
  std::memset(neighbour, 0xAB, pm_malloc_usable_size(neighbour));
  pm_free(neighbour);
  check_rallocx_zero_grows(block, 144 * KiB);
}

// ---------------------------------------------------------------------------------------------
// pm_xallocx resizes in place only.

TEST(ResizeInPlace, XallocxOfSmallBlockToAnotherClassKeepsTheBlock) {
  auto* p = static_cast<unsigned char*>(pm_malloc(100));
  ASSERT_NE(p, nullptr);
  const std::size_t usable = pm_malloc_usable_size(p);
  fill_pattern(p, usable, 7);
  EXPECT_EQ(pm_xallocx(p, 5000, 0, 0), usable);
  EXPECT_EQ(pm_malloc_usable_size(p), usable);
  EXPECT_EQ(pattern_mismatch(p, usable, 7), usable);
  pm_free(p);
}

TEST(ResizeInPlace, XallocxGrowsIntoFreePagesAndNotIntoLiveOnes) {
  // Blocks of 72 KiB: runs of pages, above the largest slab class (64 KiB).
  auto [block, neighbour] = allocate_adjacent_pair(72 * KiB);
  ASSERT_NE(block, nullptr) << "no two of 1024 blocks of 72 KiB were adjacent";
  const std::size_t usable = pm_malloc_usable_size(block);
  ASSERT_GE(usable, 72 * KiB);
  fill_pattern(block, usable, 1);

  // The neighbour is live: nothing to grow into.
  EXPECT_EQ(pm_xallocx(block, 100000, 0, 0), usable) << "grew over a live block";
  EXPECT_EQ(pm_malloc_usable_size(block), usable);

  // The neighbour's pages are free: growing to 100000 fits.
  pm_free(neighbour);
  const std::size_t grown = pm_xallocx(block, 100000, 0, 0);
  EXPECT_GE(grown, 100000u);
  EXPECT_EQ(pm_malloc_usable_size(block), grown);
  EXPECT_EQ(pattern_mismatch(block, usable, 1), usable);
  fill_pattern(block, grown, 2);

  // size + extra = 140000 still fits in the two blocks' pages (147456 bytes).
  const std::size_t with_extra = pm_xallocx(block, 100000, 40000, 0);
  EXPECT_GE(with_extra, 140000u) << "the extra bytes were not taken though the pages were free";
  EXPECT_EQ(pm_malloc_usable_size(block), with_extra);
  EXPECT_EQ(pattern_mismatch(block, grown, 2), grown);

  // Shrinking in place: at least the request, at most what the block had.
  const std::size_t shrunk = pm_xallocx(block, 30000, 0, 0);
  EXPECT_GE(shrunk, 30000u);
  EXPECT_LE(shrunk, with_extra);
  EXPECT_EQ(pm_malloc_usable_size(block), shrunk);
  EXPECT_EQ(pattern_mismatch(block, 30000, 2), 30000u);
  pm_free(block);
}

TEST(ResizeInPlace, XallocxNeverMovesAndAlwaysKeepsTheRequest) {
  constexpr std::uint64_t seed = 0x5eed0002;
  SCOPED_TRACE(describe("seed", seed));
  std::mt19937_64 rng(seed);
  const std::size_t sizes[] = {24, 100, 3000, 16 * KiB, 40000, 300 * KiB, 1 * MiB, 3 * MiB};
  for (int round = 0; round < 200; ++round) {
    const std::size_t size = sizes[rng() % std::size(sizes)];
    const std::size_t target = sizes[rng() % std::size(sizes)];
    const std::size_t extra = rng() % 2 == 0 ? 0 : rng() % (64 * KiB);
    SCOPED_TRACE(std::to_string(size) + " -> xallocx(" + std::to_string(target) + ", " +
                 std::to_string(extra) + ")");
    void* p = pm_malloc(size);
    ASSERT_NE(p, nullptr);
    const std::size_t usable = pm_malloc_usable_size(p);
    fill_pattern(p, usable, round);
    const std::size_t result = pm_xallocx(p, target, extra, 0);
    EXPECT_EQ(result, pm_malloc_usable_size(p));
    // Either the request was met, or the block kept its old usable size.
    if (result < target) {
      EXPECT_EQ(result, usable);
    }
    EXPECT_GE(result, std::min(size, target));
    const std::size_t kept = std::min(usable, result);
    EXPECT_EQ(pattern_mismatch(p, kept, round), kept);
    pm_free(p);
  }
}

// ---------------------------------------------------------------------------------------------
// Size 0, NULL and realloc edge cases (as glibc).

TEST(EdgeCases, MallocOfZeroReturnsDistinctFreeablePointers) {
  void* first = pm_malloc(0);
  void* second = pm_malloc(0);
  ASSERT_NE(first, nullptr);
  ASSERT_NE(second, nullptr);
  EXPECT_NE(first, second);
  pm_free(first);
  pm_free(second);
}

TEST(EdgeCases, CallocOfZeroReturnsFreeablePointers) {
  void* zero_count = pm_calloc(0, 5);
  void* zero_size = pm_calloc(5, 0);
  ASSERT_NE(zero_count, nullptr);
  ASSERT_NE(zero_size, nullptr);
  EXPECT_NE(zero_count, zero_size);
  pm_free(zero_count);
  pm_free(zero_size);
}

TEST(EdgeCases, ReallocOfNullIsMalloc) {
  void* empty = pm_realloc(nullptr, 0);
  ASSERT_NE(empty, nullptr);
  pm_free(empty);
  for (std::size_t size : {1ul, 100ul, 40000ul, 3 * MiB}) {
    auto* p = static_cast<unsigned char*>(pm_realloc(nullptr, size));
    ASSERT_NE(p, nullptr) << describe("size", size);
    EXPECT_GE(pm_malloc_usable_size(p), size);
    std::memset(p, 0x11, size);
    pm_free(p);
  }
}

TEST(EdgeCases, ReallocToZeroFreesAndReturnsNull) {
  for (std::size_t size : {100ul, 1 * MiB, 8 * MiB}) {
    SCOPED_TRACE(describe("size", size));
    void* p = pm_malloc(size);
    ASSERT_NE(p, nullptr);
    const pm_stats before = current_stats();
    EXPECT_EQ(pm_realloc(p, 0), nullptr);
    const pm_stats after = current_stats();
    EXPECT_LE(after.allocated + size, before.allocated) << "the block was not freed";
  }
}

TEST(EdgeCases, UsableSizeOfNullIsZero) { EXPECT_EQ(pm_malloc_usable_size(nullptr), 0u); }

TEST(EdgeCases, FreeOfNullDoesNothing) {
  void* witness = pm_malloc(100);
  const pm_stats before = current_stats();
  pm_free(nullptr);
  const pm_stats after = current_stats();
  EXPECT_EQ(after.allocated, before.allocated);
  EXPECT_EQ(after.active, before.active);
  pm_free(witness);
}

// ---------------------------------------------------------------------------------------------
// pm_sdallocx accepts any size between the request and the usable size.

void free_with_every_accepted_size() {
  const std::size_t sizes[] = {1, 24, 100, 1000, 5000, 16 * KiB, 40000, 1 * MiB + 5, 3 * MiB + 5};
  for (int flags : {0, PM_ALIGN(64)}) {
    for (std::size_t size : sizes) {
      SCOPED_TRACE(describe("size", size) + describe(", flags", flags));
      void* p = pm_mallocx(size, flags);
      ASSERT_NE(p, nullptr);
      const std::size_t usable = pm_sallocx(p, 0);
      pm_sdallocx(p, size, flags);
      p = pm_mallocx(size, flags);
      ASSERT_NE(p, nullptr);
      pm_sdallocx(p, usable, flags);
      p = pm_mallocx(size, flags);
      ASSERT_NE(p, nullptr);
      pm_sdallocx(p, size + (usable - size) / 2, flags);
    }
  }
}

TEST(SizedFree, AcceptsRequestUsableSizeAndAnythingBetween) { free_with_every_accepted_size(); }

TEST(SizedFree, AcceptsRequestUsableSizeAndAnythingBetweenWithChecksOn) {
  long old_checks = 0;
  const long on = 1;
  ASSERT_EQ(pm_ctl("checks", &old_checks, &on), 0);
  free_with_every_accepted_size();
  pm_ctl("checks", nullptr, &old_checks);
}

// ---------------------------------------------------------------------------------------------
// Introspection.

TEST(Statistics, AllocatedFollowsAllocationAndFree) {
  for (std::size_t size : {100ul, 40000ul, 8 * MiB}) {
    SCOPED_TRACE(describe("size", size));
    const pm_stats before = current_stats();
    void* p = pm_malloc(size);
    ASSERT_NE(p, nullptr);
    const pm_stats during = current_stats();
    EXPECT_GE(during.allocated, before.allocated + size);
    pm_free(p);
    const pm_stats after = current_stats();
    EXPECT_LE(after.allocated + size, during.allocated);
  }
}

TEST(Statistics, AllocatedFitsInActiveWhichFitsInMapped) {
  std::vector<void*> blocks;
  for (std::size_t size : {8ul, 100ul, 3000ul, 40000ul, 1 * MiB, 8 * MiB})
    blocks.push_back(pm_malloc(size));
  const pm_stats stats = current_stats();
  EXPECT_LE(stats.allocated, stats.active);
  EXPECT_LE(stats.active, stats.mapped);
  for (void* p : blocks) pm_free(p);
}

TEST(Statistics, PurgeReturnsEveryFreePageAndKeepsLiveBlocks) {
  std::vector<std::pair<unsigned char*, std::size_t>> live;
  for (std::size_t size : {100ul, 40000ul, 1 * MiB, 8 * MiB}) {
    dirty_and_free(size);
    auto* p = static_cast<unsigned char*>(pm_malloc(size));
    ASSERT_NE(p, nullptr);
    std::memset(p, 0x3D, size);
    live.emplace_back(p, size);
    dirty_and_free(2 * size);
  }
  const pm_stats before = current_stats();
  pm_purge();
  const pm_stats after = current_stats();
  EXPECT_EQ(after.dirty, 0u);
  EXPECT_GE(after.purged, before.purged + before.dirty);
  EXPECT_EQ(after.allocated, before.allocated);
  for (auto [p, size] : live) {
    EXPECT_EQ(first_byte_not(p, size, 0x3D), size) << describe("block of size", size);
    pm_free(p);
  }
}

std::string captured_stats_output(int json) {
  std::FILE* file = std::tmpfile();
  if (file == nullptr) return "(tmpfile failed)";
  const int fd = fileno(file);
  pm_stats_print(fd, json);
  std::string text;
  char buffer[4096];
  ::lseek(fd, 0, SEEK_SET);
  for (ssize_t n; (n = ::read(fd, buffer, sizeof(buffer))) > 0;)
    text.append(buffer, std::size_t(n));
  std::fclose(file);
  return text;
}

std::string trimmed(const std::string& text) {
  const auto first = text.find_first_not_of(" \t\r\n");
  if (first == std::string::npos) return "";
  return text.substr(first, text.find_last_not_of(" \t\r\n") - first + 1);
}

TEST(Statistics, PrintWritesText) {
  void* p = pm_malloc(1000);
  const std::string text = captured_stats_output(0);
  EXPECT_FALSE(trimmed(text).empty());
  pm_free(p);
}

TEST(Statistics, PrintWritesOneJsonObject) {
  void* p = pm_malloc(1000);
  const std::string json = trimmed(captured_stats_output(1));
  ASSERT_FALSE(json.empty());
  EXPECT_EQ(json.front(), '{') << json;
  EXPECT_EQ(json.back(), '}') << json;
  EXPECT_NE(json.find("\"allocated\""), std::string::npos) << json;
  // Braces and brackets balance outside strings.
  int depth = 0;
  bool in_string = false;
  for (std::size_t i = 0; i < json.size(); ++i) {
    const char c = json[i];
    if (in_string) {
      if (c == '\\') ++i;
      else if (c == '"') in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '{' || c == '[') {
      ++depth;
    } else if (c == '}' || c == ']') {
      --depth;
      EXPECT_TRUE(depth > 0 || i + 1 == json.size()) << "the object closes early at " << i;
    }
  }
  EXPECT_EQ(depth, 0);
  EXPECT_FALSE(in_string);
  pm_free(p);
}

// A build with counting (PAGEMALLOC_COUNTERS) reports its run managers' work in both forms;
// one without reports none, rather than zeros that would read as "no calls".
TEST(Statistics, RunManagerCountsOnlyInCountingBuilds) {
  void* large = pm_malloc(256 * 1024);  // a run of its own: at least one run-manager call
  ASSERT_NE(large, nullptr);
  const std::string json = captured_stats_output(1);
  const std::string text = captured_stats_output(0);
  pm_free(large);
  const std::string prefix = "\"run_manager\": {\"calls\": ";
  const std::size_t field = json.find(prefix);
  if constexpr (pagemalloc::kCountersEnabled) {
    ASSERT_NE(field, std::string::npos) << json;
    const long calls = std::strtol(json.c_str() + field + prefix.size(), nullptr, 10);
    EXPECT_GT(calls, 0) << json;
    EXPECT_NE(json.find("\"nodes_visited\": "), std::string::npos) << json;
    EXPECT_NE(text.find("run manager"), std::string::npos) << text;
  } else {
    EXPECT_EQ(field, std::string::npos) << json;
    EXPECT_EQ(text.find("run manager "), std::string::npos) << text;
  }
}

TEST(Control, ReadsAndSetsOptionsAndRejectsUnknownNames) {
  long old_checks = -1;
  ASSERT_EQ(pm_ctl("checks", &old_checks, nullptr), 0);
  EXPECT_TRUE(old_checks == 0 || old_checks == 1) << old_checks;
  const long flipped = old_checks == 0 ? 1 : 0;
  long seen = -1;
  ASSERT_EQ(pm_ctl("checks", nullptr, &flipped), 0);
  ASSERT_EQ(pm_ctl("checks", &seen, &old_checks), 0);
  EXPECT_EQ(seen, flipped);
  long decay = -2;
  EXPECT_EQ(pm_ctl("decay_ms", &decay, nullptr), 0);
  EXPECT_GE(decay, -1);
  long ignored = 0;
  EXPECT_EQ(pm_ctl("no_such_option", &ignored, nullptr), EINVAL);
  long narenas = 0;
  EXPECT_EQ(pm_ctl("narenas", &narenas, nullptr), 0);
  EXPECT_GE(narenas, 1);
  EXPECT_EQ(pm_ctl("narenas", nullptr, &narenas), EPERM) << "narenas is read-only";
}

// ---------------------------------------------------------------------------------------------
// Threads: private blocks, and blocks handed to another thread to free.

struct OwnedBlock {
  unsigned char* start = nullptr;
  std::size_t size = 0;
  unsigned char fill = 0;
};

class Handoff {
 public:
  void put(OwnedBlock block) {
    std::lock_guard lock(mutex_);
    blocks_.push_back(block);
  }
  bool take(std::mt19937_64& rng, OwnedBlock& out) {
    std::lock_guard lock(mutex_);
    if (blocks_.empty()) return false;
    std::swap(blocks_[rng() % blocks_.size()], blocks_.back());
    out = blocks_.back();
    blocks_.pop_back();
    return true;
  }
  std::vector<OwnedBlock> take_all() {
    std::lock_guard lock(mutex_);
    return std::exchange(blocks_, {});
  }

 private:
  std::mutex mutex_;
  std::vector<OwnedBlock> blocks_;
};

std::size_t random_thread_size(std::mt19937_64& rng) {
  const unsigned r = rng() % 1000;
  if (r < 800) return 1 + rng() % 1024;
  if (r < 980) return 1 + rng() % (16 * KiB);
  if (r < 998) return 16 * KiB + rng() % (240 * KiB);
  return 2 * MiB + rng() % (2 * MiB);
}

bool block_intact(const OwnedBlock& block) {
  return first_byte_not(block.start, block.size, block.fill) == block.size;
}

void run_thread_workload(unsigned thread_index, std::uint64_t seed, Handoff& handoff,
                         FailureLog& failures) {
  std::mt19937_64 rng(seed + thread_index);
  std::vector<OwnedBlock> slots(128);
  auto where = [&](const char* what, const OwnedBlock& block) {
    return "thread " + std::to_string(thread_index) + ": " + what + " (block of " +
           std::to_string(block.size) + " bytes)";
  };
  auto allocate = [&](OwnedBlock& slot) {
    slot.size = random_thread_size(rng);
    slot.start = static_cast<unsigned char*>(pm_malloc(slot.size));
    slot.fill = static_cast<unsigned char>(rng() | 1);
    if (slot.start == nullptr) return failures.record(where("pm_malloc returned NULL", slot));
    std::memset(slot.start, slot.fill, slot.size);
  };
  for (int op = 0; op < 20000; ++op) {
    OwnedBlock& slot = slots[rng() % slots.size()];
    if (slot.start == nullptr) {
      allocate(slot);
      continue;
    }
    const unsigned r = rng() % 100;
    if (r < 35) {
      if (!block_intact(slot)) failures.record(where("contents changed before free", slot));
      pm_free(slot.start);
      slot = {};
    } else if (r < 70) {
      if (!block_intact(slot)) failures.record(where("contents changed before realloc", slot));
      const std::size_t new_size = random_thread_size(rng);
      auto* q = static_cast<unsigned char*>(pm_realloc(slot.start, new_size));
      if (q == nullptr) {
        failures.record(where("pm_realloc returned NULL", slot));
        continue;
      }
      slot.start = q;
      slot.size = std::min(slot.size, new_size);
      if (!block_intact(slot)) failures.record(where("contents lost by realloc", slot));
      slot.size = new_size;
      slot.fill = static_cast<unsigned char>(rng() | 1);
      std::memset(slot.start, slot.fill, slot.size);
    } else if (r < 85) {
      handoff.put(slot);
      slot = {};
    } else {
      OwnedBlock foreign;
      if (handoff.take(rng, foreign)) {
        if (!block_intact(foreign)) failures.record(where("handed-off block changed", foreign));
        pm_free(foreign.start);
      }
    }
  }
  for (OwnedBlock& slot : slots)
    if (slot.start != nullptr) {
      if (!block_intact(slot)) failures.record(where("contents changed at the end", slot));
      pm_free(slot.start);
    }
}

TEST(Threads, MixedWorkloadWithCrossThreadFrees) {
  constexpr std::uint64_t seed = 0x5eed0003;
  SCOPED_TRACE(describe("seed", seed));
  const pm_stats baseline = current_stats();
  Handoff handoff;
  FailureLog failures;
  std::vector<std::thread> threads;
  for (unsigned t = 0; t < 4; ++t)
    threads.emplace_back(run_thread_workload, t, seed, std::ref(handoff), std::ref(failures));
  for (std::thread& thread : threads) thread.join();
  for (const OwnedBlock& block : handoff.take_all()) {
    if (!block_intact(block)) failures.record("a handed-off block changed before the end");
    pm_free(block.start);
  }
  EXPECT_EQ(failures.count(), 0) << "first failure: " << failures.first();
  EXPECT_EQ(current_stats().allocated, baseline.allocated) << "allocated bytes did not come back";
}

// ---------------------------------------------------------------------------------------------
// Automatic arenas: threads are spread over pm_ctl("narenas") arenas (a new thread takes the
// arena the fewest live threads use, a new one when each has a thread); a block is freed to
// the arena that holds it, whichever thread frees it. The arena of a block is read
// from the address map (allocator/src), which tags every chunk with its arena.

unsigned arena_of(const void* p) {
  using pagemalloc::AddressMap;
  const std::uintptr_t entry = pagemalloc::address_map().get(pagemalloc::chunk_base_of(p));
  return AddressMap::owner_of<pagemalloc::Arena>(entry)->index();
}

long automatic_arenas() {
  long n = 0;
  EXPECT_EQ(pm_ctl("narenas", &n, nullptr), 0);
  return n;
}

TEST(AutomaticArenas, ThreadsAreSpreadOverTheArenas) {
  const long arenas = automatic_arenas();
  const unsigned threads = unsigned(std::min(arenas, 8L));
  std::vector<unsigned> seen(threads);
  std::vector<std::thread> workers;
  std::atomic<unsigned> started{0}, allocated{0};
  for (unsigned t = 0; t < threads; ++t) {
    workers.emplace_back([&, t] {
      started.fetch_add(1);
      while (started.load() < threads) std::this_thread::yield();  // all alive at once
      void* small = pm_malloc(48);
      void* large = pm_malloc(100 * KiB);
      seen[t] = arena_of(small);
      EXPECT_EQ(arena_of(large), seen[t]) << "a thread's large blocks come from its arena";
      pm_free(small);
      pm_free(large);
      allocated.fetch_add(1);
      while (allocated.load() < threads) std::this_thread::yield();  // none ends before all
    });
  }
  for (std::thread& w : workers) w.join();
  std::set<unsigned> distinct(seen.begin(), seen.end());
  EXPECT_EQ(distinct.size(), threads) << "threads alive at once share arenas";
  for (unsigned a : distinct) EXPECT_LT(a, unsigned(arenas));
}

// Threads that run one after another (each ends before the next starts) take the same
// arena: round-robin would give each the next one, each with its own slabs of every class.
TEST(AutomaticArenas, ThreadsOneAfterAnotherShareAnArena) {
  if (automatic_arenas() < 2) GTEST_SKIP() << "one automatic arena";
  void* mine = pm_malloc(48);  // this thread has its arena (and its cache) before the others
  std::vector<unsigned> seen;
  for (int t = 0; t < 6; ++t) {
    std::thread([&] {
      void* small = pm_malloc(48);
      seen.push_back(arena_of(small));
      pm_free(small);
    }).join();
  }
  for (unsigned a : seen) EXPECT_EQ(a, seen[0]) << "a thread after another took a new arena";
  EXPECT_NE(seen[0], arena_of(mine)) << "a new thread shares a busy arena while others are idle";
  pm_free(mine);
}

TEST(AutomaticArenas, PmArenaNamesEveryAutomaticArena) {
  const long arenas = automatic_arenas();
  for (long i = 0; i < arenas; ++i) {
    void* p = pm_mallocx(64, PM_ARENA(i));
    void* q = pm_mallocx(64 * KiB, PM_ARENA(i));
    ASSERT_NE(p, nullptr);
    ASSERT_NE(q, nullptr);
    EXPECT_EQ(arena_of(p), unsigned(i));
    EXPECT_EQ(arena_of(q), unsigned(i));
    pm_free(p);
    pm_free(q);
  }
}

TEST(AutomaticArenas, BlocksFreedByAnotherThreadGoBackToTheirArena) {
  if (automatic_arenas() < 2) GTEST_SKIP() << "one automatic arena";
  const pm_stats baseline = current_stats();
  constexpr int kBlocks = 20000;
  std::vector<void*> blocks(kBlocks);
  unsigned producer_arena = 0, consumer_arena = 0;
  std::atomic<bool> produced{false}, consumed{false};
  // The producer lives until the consumer is done, so that the two have arenas of their own.
  std::thread producer([&] {
    for (int i = 0; i < kBlocks; ++i) {
      blocks[i] = pm_malloc(16 + std::size_t(i % 40) * 24);
      std::memset(blocks[i], 0x5C, 16);
    }
    producer_arena = arena_of(blocks[0]);
    produced.store(true);
    while (!consumed.load()) std::this_thread::yield();
  });
  while (!produced.load()) std::this_thread::yield();
  std::thread consumer([&] {
    void* mine = pm_malloc(48);
    consumer_arena = arena_of(mine);
    pm_free(mine);
    for (void* p : blocks)
      pm_free(p);  // into this thread's cache, then back to the producer's arena
  });
  consumer.join();
  consumed.store(true);
  producer.join();
  EXPECT_NE(producer_arena, consumer_arena) << "two live threads share an arena";
  EXPECT_EQ(current_stats().allocated, baseline.allocated) << "blocks were lost on their way back";
  void* again[64];
  for (void*& p : again) p = pm_malloc(40);
  for (void* p : again) pm_free(p);
  pm_purge();
  const pm_stats purged = current_stats();
  EXPECT_EQ(purged.allocated, baseline.allocated);
  EXPECT_EQ(purged.dirty, 0u);
}

// The number of automatic arenas, read in a child process started with PAGEMALLOC_CONF=conf.
class ArenaCountTest : public ::testing::Test {
 protected:
  ArenaCountTest() { GTEST_FLAG_SET(death_test_style, "threadsafe"); }
  static void expect_arenas_with(const char* conf, long expected) {
    ::setenv("PAGEMALLOC_CONF", conf, 1);
    EXPECT_EXIT(
        {
          long n = 0;
          pm_ctl("narenas", &n, nullptr);
          std::fprintf(stderr, "narenas %ld\n", n);
          ::_exit(n == expected ? 0 : 1);
        },
        ::testing::ExitedWithCode(0), "")
        << "PAGEMALLOC_CONF=" << conf;
    ::unsetenv("PAGEMALLOC_CONF");
  }
};

TEST_F(ArenaCountTest, DeterministicMeansOneArenaAndNarenasSetsTheCount) {
  expect_arenas_with("deterministic:true", 1);
  expect_arenas_with("narenas:3", 3);
  expect_arenas_with("narenas:3,deterministic:true", 1);
  expect_arenas_with("narenas:1000", 256);  // at most 256
}

}  // namespace
