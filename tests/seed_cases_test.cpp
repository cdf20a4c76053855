// The cases of two seed texts (../shared/seeds/), turned into checks on the pm_ API.
//
// Go arena seed (seeds/003, "Go memory arenas for apache arrow, Part 2"): Arrow buffers are
// 64-byte aligned. Its tests allocate 33, 64, 65, 4097 and 8192 bytes ("lt alignment", "eq
// alignment", "gt alignment unaligned", "large unaligned", "large aligned") and reallocate a
// 200-byte buffer filled with i & 0xFF to 100, 200 and 300 bytes, expecting the common prefix
// back. Here the same through pm_mallocx / pm_rallocx with PM_ALIGN(64).
//
// Arrow seed (seeds/000, "Faster, scalable memory allocations in Apache Arrow with jemalloc"):
// a builder appends to a 64-byte-aligned buffer whose capacity doubles through rallocx. After a
// first build has left free pages behind, later builds should grow in place rather than copy.
// Here: DESIGN.md's Arrow benchmark (2 MiB of int64 appended 256 times, 512 MiB at the end),
// built twice; the second build may copy at most 1% of the final size.
#include <gtest/gtest.h>

#include <pagemalloc/pagemalloc.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <string>

namespace {

constexpr std::size_t KiB = 1024;
constexpr std::size_t MiB = 1024 * KiB;
constexpr int kAlign64 = PM_ALIGN(64);

bool is_aligned_64(const void* p) { return reinterpret_cast<std::uintptr_t>(p) % 64 == 0; }

// ---------------------------------------------------------------------------------------------
// Go arena seed.

TEST(GoArenaSeed, AlignedAllocationsOfTheSeedSizes) {
  for (std::size_t size : {33ul, 64ul, 65ul, 4097ul, 8192ul}) {
    SCOPED_TRACE("size " + std::to_string(size));
    auto* p = static_cast<unsigned char*>(pm_mallocx(size, kAlign64));
    ASSERT_NE(p, nullptr);
    EXPECT_TRUE(is_aligned_64(p)) << static_cast<void*>(p);
    const std::size_t usable = pm_sallocx(p, 0);
    EXPECT_GE(usable, size);
    EXPECT_EQ(pm_nallocx(size, kAlign64), usable);
    std::memset(p, 0xEE, usable);
    for (std::size_t i = 0; i < usable; ++i) ASSERT_EQ(p[i], 0xEE) << "offset " << i;
    pm_dallocx(p, kAlign64);
  }
}

TEST(GoArenaSeed, TwoAllocationsAreDistinctAndDisjoint) {
  auto* first = static_cast<unsigned char*>(pm_mallocx(10, kAlign64));
  auto* second = static_cast<unsigned char*>(pm_mallocx(11, kAlign64));
  ASSERT_NE(first, nullptr);
  ASSERT_NE(second, nullptr);
  EXPECT_TRUE(first + pm_sallocx(first, 0) <= second || second + pm_sallocx(second, 0) <= first);
  pm_dallocx(first, kAlign64);
  pm_dallocx(second, kAlign64);
}

TEST(GoArenaSeed, ReallocationKeepsTheCommonPrefixAndTheAlignment) {
  for (std::size_t new_size : {100ul, 200ul, 300ul}) {
    SCOPED_TRACE("200 -> " + std::to_string(new_size) + " bytes");
    auto* p = static_cast<unsigned char*>(pm_mallocx(200, kAlign64));
    ASSERT_NE(p, nullptr);
    for (std::size_t i = 0; i < 200; ++i) p[i] = static_cast<unsigned char>(i & 0xFF);
    auto* q = static_cast<unsigned char*>(pm_rallocx(p, new_size, kAlign64));
    ASSERT_NE(q, nullptr);
    EXPECT_TRUE(is_aligned_64(q)) << static_cast<void*>(q);
    EXPECT_GE(pm_sallocx(q, 0), new_size);
    for (std::size_t i = 0; i < std::min<std::size_t>(200, new_size); ++i)
      ASSERT_EQ(q[i], i & 0xFF) << "offset " << i;
    std::memset(q, 0x12, new_size);
    pm_dallocx(q, kAlign64);
  }
}

// ---------------------------------------------------------------------------------------------
// Arrow seed.

constexpr std::size_t kAppendBytes = 2 * MiB;                           // one append
constexpr std::size_t kValuesPerAppend = kAppendBytes / sizeof(std::int64_t);  // 262,144
constexpr int kAppends = 256;
constexpr std::size_t kFinalBytes = kAppendBytes * kAppends;            // 512 MiB

// Builds the buffer as the Arrow builder does; returns the number of wrong values (or -1 when
// an allocation failed or lost its alignment).
long build_and_check_buffer() {
  std::size_t capacity = kAppendBytes;
  auto* values = static_cast<std::int64_t*>(pm_mallocx(capacity, kAlign64));
  if (values == nullptr || !is_aligned_64(values)) return -1;
  std::size_t length = 0;  // values appended so far
  for (int append = 0; append < kAppends; ++append) {
    if ((length + kValuesPerAppend) * sizeof(std::int64_t) > capacity) {
      capacity *= 2;
      values = static_cast<std::int64_t*>(pm_rallocx(values, capacity, kAlign64));
      if (values == nullptr || !is_aligned_64(values)) return -1;
    }
    for (std::size_t i = 0; i < kValuesPerAppend; ++i, ++length)
      values[length] = static_cast<std::int64_t>(length);
  }
  long wrong = 0;
  for (std::size_t i = 0; i < length; ++i) wrong += values[i] != static_cast<std::int64_t>(i);
  pm_dallocx(values, kAlign64);
  return wrong;
}

TEST(ArrowSeed, SecondBuilderRunGrowsInPlaceInsteadOfCopying) {
  EXPECT_EQ(build_and_check_buffer(), 0) << "first build";

  pm_stats before{};
  pm_stats_get(&before);
  EXPECT_EQ(build_and_check_buffer(), 0) << "second build";
  pm_stats after{};
  pm_stats_get(&after);

  // Each of the eight doublings (2 MiB -> 512 MiB) either grew in place or moved.
  EXPECT_EQ((after.grown_in_place - before.grown_in_place) + (after.moved - before.moved), 8u)
      << "the reallocation counters missed some of the eight doublings";
  const std::size_t copied = after.copied - before.copied;
  EXPECT_LE(copied, kFinalBytes / 100)
      << "the second build copied " << copied << " bytes; it grew in place "
      << after.grown_in_place - before.grown_in_place << " times and moved "
      << after.moved - before.moved << " times";
}

}  // namespace
