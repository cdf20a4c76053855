// The cases of two published texts (docs/references.md), turned into checks on the pm_ API.
//
// [Hansson 2023] ("Go memory arenas for apache arrow, Part 2"): Arrow buffers are
// 64-byte aligned. Its tests allocate 33, 64, 65, 4097 and 8192 bytes ("lt alignment", "eq
// alignment", "gt alignment unaligned", "large unaligned", "large aligned") and reallocate a
// 200-byte buffer filled with i & 0xFF to 100, 200 and 300 bytes, expecting the common prefix
// back. Here the same through pm_mallocx / pm_rallocx with PM_ALIGN(64), then once more on an
// explicit arena, as the seed's GoArenaAllocator: CheckSize (the live allocations, 0, 1, 2,
// 1, 0 in its TestMemory) is pm_arena_stats' block count, and the Free that brings it to 0
// frees the whole arena (a reset). The seed's example program ran its builder a million times
// and watched the Go arena's heap grow to 1.1 GB; here the same pattern of allocations runs
// 100,000 times on one explicit arena and the mapped memory must stay flat. The arena cases
// run twice: on an arena of slabs and runs, and on a bump arena (PM_ARENA_BUMP).
//
// [Korn 2018] ("Faster, scalable memory allocations in Apache Arrow with jemalloc"):
// a builder appends to a 64-byte-aligned buffer whose capacity doubles through rallocx. After a
// first build has left free pages behind, later builds should grow in place rather than copy.
// Here: the Arrow benchmark of docs/design.md (2 MiB of int64 appended 256 times, 512 MiB at
// the end), built twice; the second build may copy at most 1% of the final size.
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

// The seed's GoArenaAllocator over an explicit arena: of slabs and runs (flags 0), or a bump
// arena (PM_ARENA_BUMP), whose frees are the seed's bookkeeping and whose reset is the
// seed's arena.Free().
class GoArenaAllocator {
 public:
  explicit GoArenaAllocator(unsigned flags = 0)
      : arena_(flags == 0 ? pm_arena_create() : pm_arena_create_ex(flags)) {}
  ~GoArenaAllocator() { pm_arena_destroy(arena_); }
  GoArenaAllocator(const GoArenaAllocator&) = delete;
  GoArenaAllocator& operator=(const GoArenaAllocator&) = delete;

  [[nodiscard]] bool valid() const { return arena_ != 0; }
  [[nodiscard]] unsigned index() const { return arena_; }

  unsigned char* allocate(std::size_t size) {
    return static_cast<unsigned char*>(pm_mallocx(size, flags()));
  }
  // The seed keeps a buffer of unchanged length, and otherwise moves it to a new one.
  unsigned char* reallocate(std::size_t size, unsigned char* buffer, std::size_t length) {
    if (size == length) return buffer;
    return static_cast<unsigned char*>(pm_rallocx(buffer, size, flags()));
  }
  // The last free releases the whole arena, as arena.Free() in the seed.
  void free(unsigned char* buffer) {
    pm_dallocx(buffer, flags());
    if (check_size() == 0) pm_arena_reset(arena_);
  }
  std::size_t check_size() const {
    pm_arena_stats stats{};
    pm_arena_stats_get(arena_, &stats);
    return stats.blocks;
  }

 private:
  [[nodiscard]] int flags() const { return kAlign64 | PM_ARENA(arena_); }
  unsigned arena_;
};

void counts_live_allocations(unsigned flags) {  // the seed's TestMemory
  GoArenaAllocator a(flags);
  ASSERT_TRUE(a.valid());
  EXPECT_EQ(a.check_size(), 0u);
  unsigned char* s1 = a.allocate(10);
  ASSERT_NE(s1, nullptr);
  EXPECT_EQ(a.check_size(), 1u);
  unsigned char* s2 = a.allocate(11);
  ASSERT_NE(s2, nullptr);
  EXPECT_EQ(a.check_size(), 2u);
  a.free(s1);
  EXPECT_EQ(a.check_size(), 1u);
  a.free(s2);
  EXPECT_EQ(a.check_size(), 0u);
}

void allocates_the_seed_sizes_aligned(unsigned flags) {
  for (std::size_t size : {33ul, 65ul, 64ul, 4097ul, 8192ul}) {
    SCOPED_TRACE("size " + std::to_string(size));
    GoArenaAllocator a(flags);
    ASSERT_TRUE(a.valid());
    unsigned char* buffer = a.allocate(size);
    ASSERT_NE(buffer, nullptr);
    EXPECT_TRUE(is_aligned_64(buffer));
    EXPECT_GE(pm_sallocx(buffer, 0), size);
    std::memset(buffer, 0x5A, size);
    EXPECT_EQ(a.check_size(), 1u);
    a.free(buffer);
    EXPECT_EQ(a.check_size(), 0u);
  }
}

void reallocation_keeps_the_common_prefix(unsigned flags) {
  for (std::size_t new_size : {100ul, 200ul, 300ul}) {
    SCOPED_TRACE("200 -> " + std::to_string(new_size) + " bytes");
    GoArenaAllocator a(flags);
    ASSERT_TRUE(a.valid());
    unsigned char* buffer = a.allocate(200);
    ASSERT_NE(buffer, nullptr);
    for (std::size_t i = 0; i < 200; ++i) buffer[i] = static_cast<unsigned char>(i & 0xFF);
    unsigned char* grown = a.reallocate(new_size, buffer, 200);
    ASSERT_NE(grown, nullptr);
    EXPECT_TRUE(is_aligned_64(grown));
    for (std::size_t i = 0; i < std::min<std::size_t>(200, new_size); ++i)
      ASSERT_EQ(grown[i], i & 0xFF) << "offset " << i;
    EXPECT_EQ(a.check_size(), 1u) << "the buffer stayed in the arena, and only it";
    a.free(grown);
    EXPECT_EQ(a.check_size(), 0u);
  }
}

// The seed's run(): a fixed-size-list builder of int64 (validity bitmaps, offsets, values that
// grow once), turned into an array and released, on one arena.
bool run_builder_once(GoArenaAllocator& a) {
  unsigned char* list_validity = a.allocate(64);
  unsigned char* value_validity = a.allocate(64);
  unsigned char* values = a.allocate(10 * sizeof(std::int64_t));
  if (list_validity == nullptr || value_validity == nullptr || values == nullptr) return false;
  for (int i = 0; i < 10; ++i) reinterpret_cast<std::int64_t*>(values)[i] = i;
  values = a.reallocate(15 * sizeof(std::int64_t), values, 10 * sizeof(std::int64_t));
  if (values == nullptr || reinterpret_cast<std::int64_t*>(values)[9] != 9) return false;
  unsigned char* array_data = a.allocate(96);
  if (array_data == nullptr || a.check_size() != 4) return false;
  for (unsigned char* buffer : {array_data, values, value_validity, list_validity}) a.free(buffer);
  return a.check_size() == 0;
}

void runs_the_builder_a_hundred_thousand_times_in_flat_memory(unsigned flags) {
  GoArenaAllocator a(flags);
  ASSERT_TRUE(a.valid());
  for (int i = 0; i < 1000; ++i) ASSERT_TRUE(run_builder_once(a)) << "run " << i;
  pm_arena_stats warm{};
  ASSERT_EQ(pm_arena_stats_get(a.index(), &warm), 0);
  for (int i = 0; i < 100000; ++i) ASSERT_TRUE(run_builder_once(a)) << "run " << i;
  pm_arena_stats after{};
  ASSERT_EQ(pm_arena_stats_get(a.index(), &after), 0);
  EXPECT_EQ(after.mapped, warm.mapped) << "the arena's memory grew with the runs";
  EXPECT_EQ(after.blocks, 0u);
}

TEST(GoArenaSeed, ExplicitArenaCountsLiveAllocations) { counts_live_allocations(0); }
TEST(GoArenaSeed, ExplicitArenaAllocatesTheSeedSizesAligned) {
  allocates_the_seed_sizes_aligned(0);
}
TEST(GoArenaSeed, ExplicitArenaReallocationKeepsTheCommonPrefix) {
  reallocation_keeps_the_common_prefix(0);
}
TEST(GoArenaSeed, ExplicitArenaRunsTheBuilderAHundredThousandTimesInFlatMemory) {
  runs_the_builder_a_hundred_thousand_times_in_flat_memory(0);
}

TEST(GoArenaSeed, BumpArenaCountsLiveAllocations) { counts_live_allocations(PM_ARENA_BUMP); }
TEST(GoArenaSeed, BumpArenaAllocatesTheSeedSizesAligned) {
  allocates_the_seed_sizes_aligned(PM_ARENA_BUMP);
}
TEST(GoArenaSeed, BumpArenaReallocationKeepsTheCommonPrefix) {
  reallocation_keeps_the_common_prefix(PM_ARENA_BUMP);
}
TEST(GoArenaSeed, BumpArenaRunsTheBuilderAHundredThousandTimesInFlatMemory) {
  runs_the_builder_a_hundred_thousand_times_in_flat_memory(PM_ARENA_BUMP);
}

// ---------------------------------------------------------------------------------------------
// Arrow seed.

constexpr std::size_t kAppendBytes = 2 * MiB;                                  // one append
constexpr std::size_t kValuesPerAppend = kAppendBytes / sizeof(std::int64_t);  // 262,144
constexpr int kAppends = 256;
constexpr std::size_t kFinalBytes = kAppendBytes * kAppends;  // 512 MiB

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
