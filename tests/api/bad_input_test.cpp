// Bad input: one test (or more) per row of docs/design.md's table "What each kind of input gets".
//
//   size 0                        a unique, freeable pointer, from every entry point
//   size too large, calloc        NULL with errno = ENOMEM, and the statistics do not move
//     overflow
//   bad alignment                 EINVAL from pm_posix_memalign (*out untouched), NULL + EINVAL
//                                 from pm_aligned_alloc and pm_memalign
//   the OS refuses memory         NULL + ENOMEM; earlier blocks intact; later calls work
//                                 (in a child process under a lowered RLIMIT_AS)
//   free(NULL)                    nothing
//   an arena index that names     NULL + EINVAL from pm_mallocx / pm_rallocx (the block kept);
//     no explicit arena           EINVAL from pm_arena_reset / _destroy / _stats_get; 0 with
//                                 EAGAIN from pm_arena_create once every index is taken
//   misuse                        abort with "pagemalloc: <call>(<pointer>...): <what>" on
//                                 stderr: double free and foreign pointers always; a wrong size
//                                 to pm_sdallocx and interior pointers with checks on
//
// The death tests run in the "threadsafe" style: the child re-executes this binary and runs
// only the statement, so the allocator's state there is fresh.
#include <gtest/gtest.h>

#include <pagemalloc/pagemalloc.h>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <string>
#include <thread>
#include <vector>

#include "address_space.h"

namespace {

constexpr std::size_t KiB = 1024;
constexpr std::size_t MiB = 1024 * KiB;

pm_stats current_stats() {
  pm_stats stats{};
  pm_stats_get(&stats);
  return stats;
}

bool all_bytes_are(const void* p, std::size_t n, unsigned char value) {
  const auto* bytes = static_cast<const unsigned char*>(p);
  return n == 0 || (bytes[0] == value && std::memcmp(bytes, bytes + 1, n - 1) == 0);
}

// ---------------------------------------------------------------------------------------------
// Size 0.

TEST(ZeroSize, EveryEntryPointReturnsAUniqueFreeablePointer) {
  void* from_malloc = pm_malloc(0);
  void* from_calloc = pm_calloc(0, 0);
  void* from_realloc = pm_realloc(nullptr, 0);
  void* from_aligned_alloc = pm_aligned_alloc(64, 0);
  void* from_memalign = pm_memalign(64, 0);
  void* from_posix_memalign = nullptr;
  ASSERT_EQ(pm_posix_memalign(&from_posix_memalign, 64, 0), 0);
  void* const blocks[] = {from_malloc,        from_calloc,   from_realloc,
                          from_aligned_alloc, from_memalign, from_posix_memalign};
  for (std::size_t i = 0; i < std::size(blocks); ++i) {
    EXPECT_NE(blocks[i], nullptr) << "entry point #" << i;
    for (std::size_t j = 0; j < i; ++j)
      EXPECT_NE(blocks[i], blocks[j]) << "entry points #" << j << " and #" << i;
  }
  for (std::size_t i = 3; i < std::size(blocks); ++i)
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(blocks[i]) % 64, 0u) << "entry point #" << i;
  for (void* p : blocks) pm_free(p);
}

// ---------------------------------------------------------------------------------------------
// Sizes that cannot be served.

// Runs `attempt` (which must fail) and checks NULL, errno == ENOMEM and unchanged statistics.
template <class Attempt>
void expect_out_of_memory(const char* call, Attempt attempt) {
  SCOPED_TRACE(call);
  void* warm_up = pm_malloc(64);  // the allocator is initialised before the first snapshot
  const pm_stats before = current_stats();
  errno = 0;
  void* p = attempt();
  const int error = errno;
  const pm_stats after = current_stats();
  EXPECT_EQ(p, nullptr);
  EXPECT_EQ(error, ENOMEM);
  EXPECT_EQ(after.allocated, before.allocated);
  EXPECT_EQ(after.active, before.active);
  if (p != nullptr) pm_free(p);
  pm_free(warm_up);
}

TEST(TooLarge, MallocFailsWithEnomem) {
  expect_out_of_memory("pm_malloc(SIZE_MAX)", [] { return pm_malloc(SIZE_MAX); });
  expect_out_of_memory("pm_malloc(SIZE_MAX / 2)", [] { return pm_malloc(SIZE_MAX / 2); });
  // Rounding these up to a page or a class would wrap around to a small size.
  expect_out_of_memory("pm_malloc(SIZE_MAX - 4095)", [] { return pm_malloc(SIZE_MAX - 4095); });
  expect_out_of_memory("pm_malloc(SIZE_MAX - 16)", [] { return pm_malloc(SIZE_MAX - 16); });
}

TEST(TooLarge, CallocOverflowFailsWithEnomem) {
  expect_out_of_memory("pm_calloc(SIZE_MAX / 2, 3)", [] { return pm_calloc(SIZE_MAX / 2, 3); });
  expect_out_of_memory("pm_calloc(SIZE_MAX, SIZE_MAX)",
                       [] { return pm_calloc(SIZE_MAX, SIZE_MAX); });
  // 2^32 * 2^32 wraps to exactly 0.
  expect_out_of_memory("pm_calloc(2^32, 2^32)",
                       [] { return pm_calloc(std::size_t{1} << 32, std::size_t{1} << 32); });
  expect_out_of_memory("pm_calloc(3, SIZE_MAX / 3 + 1)",
                       [] { return pm_calloc(3, SIZE_MAX / 3 + 1); });
}

TEST(TooLarge, MallocxAndAlignedEntryPointsFailWithEnomem) {
  expect_out_of_memory("pm_mallocx(SIZE_MAX, 0)", [] { return pm_mallocx(SIZE_MAX, 0); });
  expect_out_of_memory("pm_mallocx(SIZE_MAX / 2, PM_ALIGN(64))",
                       [] { return pm_mallocx(SIZE_MAX / 2, PM_ALIGN(64)); });
  expect_out_of_memory("pm_mallocx(SIZE_MAX - 62, PM_ALIGN(64))",
                       [] { return pm_mallocx(SIZE_MAX - 62, PM_ALIGN(64)); });
  expect_out_of_memory("pm_mallocx(SIZE_MAX - 4096, PM_ZERO)",
                       [] { return pm_mallocx(SIZE_MAX - 4096, PM_ZERO); });
  expect_out_of_memory("pm_aligned_alloc(4096, SIZE_MAX - 4095)",
                       [] { return pm_aligned_alloc(4096, SIZE_MAX - 4095); });
  expect_out_of_memory("pm_memalign(1 MiB, SIZE_MAX - 1 MiB)",
                       [] { return pm_memalign(MiB, SIZE_MAX - MiB); });
}

TEST(TooLarge, PosixMemalignReturnsEnomemAndLeavesOutAlone) {
  for (std::size_t size : {SIZE_MAX, SIZE_MAX / 2, SIZE_MAX - (MiB / 2)}) {
    SCOPED_TRACE("size " + std::to_string(size));
    void* const untouched = reinterpret_cast<void*>(0x1234);
    void* out = untouched;
    EXPECT_EQ(pm_posix_memalign(&out, MiB, size), ENOMEM);
    EXPECT_EQ(out, untouched);
  }
}

TEST(TooLarge, NallocxOfAnImpossibleSizeIsZero) {
  EXPECT_EQ(pm_nallocx(SIZE_MAX, 0), 0u);
  EXPECT_EQ(pm_nallocx(SIZE_MAX - 4095, 0), 0u);
  EXPECT_EQ(pm_nallocx(SIZE_MAX / 2, PM_ALIGN(64)), 0u);
}

// Grows a filled block to `new_size` through `resize`, which must fail and leave the block be.
template <class Resize>
void expect_failed_growth_keeps_block(const char* call, std::size_t old_size, Resize resize) {
  SCOPED_TRACE(std::string(call) + " of a block of " + std::to_string(old_size) + " bytes");
  void* p = pm_malloc(old_size);
  ASSERT_NE(p, nullptr);
  std::memset(p, 0x3C, old_size);
  const std::size_t usable = pm_malloc_usable_size(p);
  const pm_stats before = current_stats();
  errno = 0;
  void* q = resize(p);
  const int error = errno;
  const pm_stats after = current_stats();
  EXPECT_EQ(q, nullptr);
  EXPECT_EQ(error, ENOMEM);
  EXPECT_EQ(after.allocated, before.allocated);
  EXPECT_EQ(pm_malloc_usable_size(p), usable);
  EXPECT_TRUE(all_bytes_are(p, old_size, 0x3C)) << "the block's contents changed";
  pm_free(q != nullptr ? q : p);
}

TEST(TooLarge, ReallocAndRallocxFailAndKeepTheBlock) {
  for (std::size_t old_size : {100ul, 40000ul, 3 * MiB}) {
    expect_failed_growth_keeps_block("pm_realloc(p, SIZE_MAX)", old_size,
                                     [](void* p) { return pm_realloc(p, SIZE_MAX); });
    expect_failed_growth_keeps_block("pm_realloc(p, SIZE_MAX - 4095)", old_size,
                                     [](void* p) { return pm_realloc(p, SIZE_MAX - 4095); });
    expect_failed_growth_keeps_block("pm_rallocx(p, SIZE_MAX, 0)", old_size,
                                     [](void* p) { return pm_rallocx(p, SIZE_MAX, 0); });
    expect_failed_growth_keeps_block(
        "pm_rallocx(p, SIZE_MAX / 2, PM_ALIGN(64))", old_size,
        [](void* p) { return pm_rallocx(p, SIZE_MAX / 2, PM_ALIGN(64)); });
  }
}

TEST(TooLarge, XallocxOfAnImpossibleSizeLeavesTheBlockAlone) {
  for (std::size_t old_size : {100ul, 40000ul, 3 * MiB}) {
    SCOPED_TRACE("a block of " + std::to_string(old_size) + " bytes");
    void* p = pm_malloc(old_size);
    ASSERT_NE(p, nullptr);
    std::memset(p, 0x3C, old_size);
    const std::size_t usable = pm_malloc_usable_size(p);
    EXPECT_EQ(pm_xallocx(p, SIZE_MAX, 0, 0), usable);
    EXPECT_EQ(pm_xallocx(p, SIZE_MAX - 4095, 0, 0), usable);
    // size + extra overflows; the size itself is what the block already has.
    EXPECT_GE(pm_xallocx(p, old_size, SIZE_MAX, 0), old_size);
    EXPECT_TRUE(all_bytes_are(p, old_size, 0x3C));
    pm_free(p);
  }
}

// ---------------------------------------------------------------------------------------------
// Bad alignments.

TEST(BadAlignment, PosixMemalignRejectsNonPowersOfTwoAndSubPointerAlignments) {
  for (std::size_t alignment : {0ul, 3ul, 24ul, 48ul, 100ul, 1ul, 2ul, 4ul, 4097ul}) {
    SCOPED_TRACE("alignment " + std::to_string(alignment));
    void* const untouched = reinterpret_cast<void*>(0x1234);
    void* out = untouched;
    EXPECT_EQ(pm_posix_memalign(&out, alignment, 100), EINVAL);
    EXPECT_EQ(out, untouched);
  }
}

TEST(BadAlignment, AlignedAllocAndMemalignRejectNonPowersOfTwo) {
  for (std::size_t alignment : {3ul, 24ul, 48ul, 100ul, 4097ul}) {
    SCOPED_TRACE("alignment " + std::to_string(alignment));
    errno = 0;
    EXPECT_EQ(pm_aligned_alloc(alignment, 100), nullptr);
    EXPECT_EQ(errno, EINVAL);
    errno = 0;
    EXPECT_EQ(pm_memalign(alignment, 100), nullptr);
    EXPECT_EQ(errno, EINVAL);
  }
}

TEST(BadAlignment, AlignmentsBeyondTheAddressSpaceFail) {
  for (unsigned lg : {47u, 50u, 62u, 63u}) {
    const std::size_t alignment = std::size_t{1} << lg;
    SCOPED_TRACE("alignment 2^" + std::to_string(lg));
    errno = 0;
    EXPECT_EQ(pm_aligned_alloc(alignment, 100), nullptr);
    EXPECT_TRUE(errno == ENOMEM || errno == EINVAL) << "errno " << errno;
    errno = 0;
    EXPECT_EQ(pm_memalign(alignment, 100), nullptr);
    EXPECT_TRUE(errno == ENOMEM || errno == EINVAL) << "errno " << errno;
    errno = 0;
    EXPECT_EQ(pm_mallocx(100, PM_LG_ALIGN(lg)), nullptr);
    EXPECT_TRUE(errno == ENOMEM || errno == EINVAL) << "errno " << errno;
    void* const untouched = reinterpret_cast<void*>(0x1234);
    void* out = untouched;
    const int result = pm_posix_memalign(&out, alignment, 100);
    EXPECT_TRUE(result == ENOMEM || result == EINVAL) << "result " << result;
    EXPECT_EQ(out, untouched);
  }
}

// ---------------------------------------------------------------------------------------------
// free(NULL).

TEST(NullFree, DoesNothingWithChecksOffOrOn) {
  void* witness = pm_malloc(100);
  long old_checks = 0;
  for (long checks : {0L, 1L}) {
    SCOPED_TRACE("checks " + std::to_string(checks));
    ASSERT_EQ(pm_ctl("checks", checks == 0 ? &old_checks : nullptr, &checks), 0);
    const pm_stats before = current_stats();
    pm_free(nullptr);
    const pm_stats after = current_stats();
    EXPECT_EQ(after.allocated, before.allocated);
    EXPECT_EQ(after.active, before.active);
  }
  pm_ctl("checks", nullptr, &old_checks);
  pm_free(witness);
}

// ---------------------------------------------------------------------------------------------
// Arena indices that name no explicit arena.

// An index that was an explicit arena and is no more.
unsigned destroyed_arena() {
  const unsigned arena = pm_arena_create();
  EXPECT_NE(arena, 0u);
  EXPECT_EQ(pm_arena_destroy(arena), 0);
  return arena;
}

TEST(BadArena, MallocxFailsWithEinvalAndChangesNothing) {
  const unsigned gone = destroyed_arena();
  for (unsigned arena : {gone, 4000u, 4094u}) {
    SCOPED_TRACE("arena " + std::to_string(arena));
    const pm_stats before = current_stats();
    for (std::size_t size : {std::size_t{16}, 100 * KiB, 8 * MiB}) {
      errno = 0;
      EXPECT_EQ(pm_mallocx(size, PM_ARENA(arena)), nullptr);
      EXPECT_EQ(errno, EINVAL);
      errno = 0;
      EXPECT_EQ(pm_rallocx(nullptr, size, PM_ARENA(arena) | PM_ZERO), nullptr);
      EXPECT_EQ(errno, EINVAL);
    }
    EXPECT_EQ(current_stats().allocated, before.allocated);
  }
}

TEST(BadArena, RallocxThatMustMoveFailsWithEinvalAndKeepsTheBlock) {
  const unsigned gone = destroyed_arena();
  auto* p = static_cast<unsigned char*>(pm_malloc(100));
  ASSERT_NE(p, nullptr);
  std::memset(p, 0x3C, 100);
  errno = 0;
  EXPECT_EQ(pm_rallocx(p, 100 * KiB, PM_ARENA(gone)), nullptr);
  EXPECT_EQ(errno, EINVAL);
  EXPECT_TRUE(all_bytes_are(p, 100, 0x3C));
  EXPECT_EQ(pm_malloc_usable_size(p), pm_nallocx(100, 0));
  pm_free(p);
}

TEST(BadArena, ResetDestroyAndStatsReturnEinval) {
  const unsigned gone = destroyed_arena();
  pm_arena_stats stats{};
  for (unsigned arena : {0u, gone, 4094u, 4095u, 100000u, ~0u}) {
    SCOPED_TRACE("arena " + std::to_string(arena));
    EXPECT_EQ(pm_arena_reset(arena), EINVAL);
    EXPECT_EQ(pm_arena_destroy(arena), EINVAL);
    EXPECT_EQ(pm_arena_stats_get(arena, &stats), EINVAL);
  }
  const unsigned live = pm_arena_create();
  ASSERT_NE(live, 0u);
  EXPECT_EQ(pm_arena_stats_get(live, nullptr), EINVAL);
  EXPECT_EQ(pm_arena_destroy(live), 0);
  EXPECT_EQ(pm_arena_destroy(live), EINVAL) << "a second destroy";
}

TEST(BadArena, CreateFailsWithEagainOnceEveryIndexIsTaken) {
  std::vector<unsigned> arenas;
  for (;;) {
    errno = 0;
    const unsigned arena = pm_arena_create();
    if (arena == 0) break;
    arenas.push_back(arena);
    ASSERT_LT(arenas.size(), 5000u) << "pm_arena_create never ran out of indices";
  }
  EXPECT_EQ(errno, EAGAIN);
  EXPECT_GT(arenas.size(), 4000u);
  EXPECT_NE(pm_mallocx(64, PM_ARENA(arenas.back())), nullptr) << "the last index works";
  for (unsigned arena : arenas) ASSERT_EQ(pm_arena_destroy(arena), 0);
  const unsigned again = pm_arena_create();
  EXPECT_NE(again, 0u) << "indices are free again after destroy";
  EXPECT_EQ(pm_arena_destroy(again), 0);
}

// ---------------------------------------------------------------------------------------------
// The OS refuses memory. Runs in a child process: it lowers the address-space limit.

// Writes a line to stderr without allocating; returns `code` for _exit.
int failed(int code, const char* what) {
  char line[256];
  const int length = std::snprintf(line, sizeof(line), "out-of-memory scenario: %s\n", what);
  ssize_t ignored = ::write(STDERR_FILENO, line, std::size_t(length));
  (void)ignored;
  return code;
}

// The scenario of the row "the OS refuses memory"; returns the child's exit code (0: passed).
int run_address_space_exhaustion() {
  constexpr int kSmall = 200, kLarge = 8, kHuge = 2, kMaxAttempts = 4096;
  static void* small[kSmall];
  static void* large[kLarge];
  static void* huge[kHuge];
  static void* filler[kMaxAttempts];
  for (int i = 0; i < kSmall; ++i) {
    if ((small[i] = pm_malloc(64)) == nullptr) return failed(10, "warm-up small block");
    std::memset(small[i], i & 0xFF, 64);
  }
  for (int i = 0; i < kLarge; ++i) {
    if ((large[i] = pm_malloc(100 * KiB)) == nullptr) return failed(11, "warm-up large block");
    std::memset(large[i], 0x40 + i, 100 * KiB);
  }
  for (int i = 0; i < kHuge; ++i) {
    if ((huge[i] = pm_malloc(8 * MiB)) == nullptr) return failed(12, "warm-up huge block");
    std::memset(huge[i], 0x60 + i, 8 * MiB);
  }
  // Leave free slots in the 64-byte slabs: small requests must not need the OS afterwards.
  for (int i = 1; i < kSmall; i += 2) {
    pm_free(small[i]);
    small[i] = nullptr;
  }

  rlimit original{};
  if (::getrlimit(RLIMIT_AS, &original) != 0) return failed(13, "getrlimit");
  const std::size_t in_use = address_space_in_use();
  if (in_use == 0) return failed(14, "VmSize unreadable");
  rlimit lowered = original;
  lowered.rlim_cur = in_use + 32 * MiB;
  if (::setrlimit(RLIMIT_AS, &lowered) != 0) return failed(15, "setrlimit (lowering)");

  int filled = 0;
  int error = 0;
  for (; filled < kMaxAttempts; ++filled) {
    const std::size_t size = filled % 2 == 0 ? 16 * MiB : 512 * KiB;
    errno = 0;
    filler[filled] = pm_malloc(size);
    if (filler[filled] == nullptr) {
      error = errno;
      break;
    }
    static_cast<unsigned char*>(filler[filled])[0] = 1;
  }
  if (filled == kMaxAttempts) return failed(20, "no allocation failed under the lowered limit");
  if (error != ENOMEM) return failed(21, "the failed allocation did not set errno = ENOMEM");

  for (int i = 0; i < kSmall; i += 2)
    if (!all_bytes_are(small[i], 64, i & 0xFF)) return failed(22, "a small block changed");
  for (int i = 0; i < kLarge; ++i)
    if (!all_bytes_are(large[i], 100 * KiB, 0x40 + i)) return failed(23, "a large block changed");
  for (int i = 0; i < kHuge; ++i)
    if (!all_bytes_are(huge[i], 8 * MiB, 0x60 + i)) return failed(24, "a huge block changed");

  for (int i = 1; i < kSmall; i += 2) {
    if ((small[i] = pm_malloc(64)) == nullptr)
      return failed(25, "a small allocation failed though its slab had free slots");
    std::memset(small[i], 0x77, 64);
  }
  pm_free(large[0]);
  if ((large[0] = pm_malloc(100 * KiB)) == nullptr)
    return failed(26, "re-allocating a just-freed large block failed");
  std::memset(large[0], 0x78, 100 * KiB);

  if (::setrlimit(RLIMIT_AS, &original) != 0) return failed(27, "setrlimit (restoring)");
  void* big = pm_malloc(64 * MiB);
  if (big == nullptr) return failed(28, "a 64 MiB allocation failed after the limit was raised");
  std::memset(big, 0x11, 64 * MiB);
  void* more = pm_malloc(512 * KiB);
  if (more == nullptr) return failed(29, "a 512 KiB allocation failed after the limit was raised");
  pm_free(big);
  pm_free(more);
  for (int i = 0; i < filled; ++i) pm_free(filler[i]);
  for (void* p : small) pm_free(p);
  for (void* p : large) pm_free(p);
  for (void* p : huge) pm_free(p);
  return 0;
}

class ThreadsafeDeathTest : public ::testing::Test {
 protected:
  ThreadsafeDeathTest() { GTEST_FLAG_SET(death_test_style, "threadsafe"); }
};

class OutOfMemoryDeathTest : public ThreadsafeDeathTest {};

TEST_F(OutOfMemoryDeathTest, FailsCleanlyAndRecoversWhenTheOsRefusesAddressSpace) {
  EXPECT_EXIT(::_exit(run_address_space_exhaustion()), ::testing::ExitedWithCode(0), "");
}

// ---------------------------------------------------------------------------------------------
// Misuse, detected without checks.

const char kDoubleFree[] = "pagemalloc: pm_free\\(0x[0-9a-f]+\\): double free";
const char kNotOurs[] = "pagemalloc: pm_free\\(0x[0-9a-f]+\\): not allocated by pagemalloc";
const char kDallocxDoubleFree[] = "pagemalloc: pm_dallocx\\(0x[0-9a-f]+\\): double free";
const char kDallocxNotOurs[] =
    "pagemalloc: pm_dallocx\\(0x[0-9a-f]+\\): not allocated by pagemalloc";
const char kSdallocxDoubleFree[] =
    "pagemalloc: pm_sdallocx\\(0x[0-9a-f]+(, [0-9]+)?\\): double free";
const char kSdallocxNotOurs[] =
    "pagemalloc: pm_sdallocx\\(0x[0-9a-f]+(, [0-9]+)?\\): not allocated by pagemalloc";

class MisuseDeathTest : public ThreadsafeDeathTest {};

void free_twice(std::size_t size) {
  void* p = pm_malloc(size);
  pm_free(p);
  pm_free(p);
}

TEST_F(MisuseDeathTest, DoubleFreeOfSmallBlockAborts) { EXPECT_DEATH(free_twice(64), kDoubleFree); }

TEST_F(MisuseDeathTest, DoubleFreeOfLargeBlockAborts) {
  EXPECT_DEATH(free_twice(100 * KiB), kDoubleFree);
}

TEST_F(MisuseDeathTest, DoubleFreeOfHugeBlockAborts) {
  EXPECT_DEATH(free_twice(8 * MiB), kDoubleFree);
}

TEST_F(MisuseDeathTest, DoubleFreeAfterOtherTrafficAborts) {
  EXPECT_DEATH(
      {
        void* p = pm_malloc(64);
        void* others[8];
        for (void*& other : others) other = pm_malloc(64);
        pm_free(p);
        for (void* other : others) pm_free(other);
        pm_free(p);
      },
      kDoubleFree);
}

TEST_F(MisuseDeathTest, FreeOfStackAddressAborts) {
  EXPECT_DEATH(
      {
        int local = 0;
        pm_free(&local);
      },
      kNotOurs);
}

TEST_F(MisuseDeathTest, FreeOfGlibcPointerAborts) {
  EXPECT_DEATH(pm_free(std::malloc(64)), kNotOurs);
}

// The usable-size calls read a small block's size from its page-map entry (heap.h): a pointer
// into a region, on any page of its slab, is still reported, without checks.
TEST_F(MisuseDeathTest, UsableSizeOfInteriorPointerOfSmallBlockAborts) {
  EXPECT_DEATH(
      {
        auto* p = static_cast<char*>(pm_malloc(64));
        pm_malloc_usable_size(p + 8);
      },
      "pagemalloc: pm_malloc_usable_size\\(0x[0-9a-f]+\\): not the start of a block");
  EXPECT_DEATH(
      {
        // A 416-byte region: the thread cache hands out the last of a refill first, on a
        // later page of its 13-page slab.
        auto* p = static_cast<char*>(pm_malloc(400));
        pm_malloc_usable_size(p + 8);
      },
      "pagemalloc: pm_malloc_usable_size\\(0x[0-9a-f]+\\): not the start of a block");
}

TEST_F(MisuseDeathTest, FreeOfPointerIntoStaticArrayAborts) {
  static char storage[256];
  EXPECT_DEATH(pm_free(storage + 16), kNotOurs);
}

TEST_F(MisuseDeathTest, FreeOfPointerIntoForeignMappingAborts) {
  EXPECT_DEATH(
      {
        void* page =
            ::mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        pm_free(page);
      },
      kNotOurs);
}

TEST_F(MisuseDeathTest, DallocxDoubleFreeAborts) {
  EXPECT_DEATH(
      {
        void* p = pm_mallocx(64, 0);
        pm_dallocx(p, 0);
        pm_dallocx(p, 0);
      },
      kDallocxDoubleFree);
  EXPECT_DEATH(
      {
        void* p = pm_mallocx(100 * KiB, PM_ALIGN(64));
        pm_dallocx(p, PM_ALIGN(64));
        pm_dallocx(p, PM_ALIGN(64));
      },
      kDallocxDoubleFree);
}

TEST_F(MisuseDeathTest, DallocxOfForeignPointerAborts) {
  EXPECT_DEATH(
      {
        int local = 0;
        pm_dallocx(&local, 0);
      },
      kDallocxNotOurs);
}

TEST_F(MisuseDeathTest, SdallocxDoubleFreeAborts) {
  EXPECT_DEATH(
      {
        void* p = pm_mallocx(64, 0);
        pm_sdallocx(p, 64, 0);
        pm_sdallocx(p, 64, 0);
      },
      kSdallocxDoubleFree);
  EXPECT_DEATH(
      {
        void* p = pm_mallocx(8 * MiB, 0);
        pm_sdallocx(p, 8 * MiB, 0);
        pm_sdallocx(p, 8 * MiB, 0);
      },
      kSdallocxDoubleFree);
}

TEST_F(MisuseDeathTest, SdallocxOfForeignPointerAborts) {
  static char storage[256];
  EXPECT_DEATH(pm_sdallocx(storage + 64, 64, 0), kSdallocxNotOurs);
}

// A block of an explicit arena, freed after the arena was reset or destroyed.
void free_after(bool destroy, std::size_t size) {
  const unsigned arena = pm_arena_create();
  void* p = pm_mallocx(size, PM_ARENA(arena));
  if (destroy) pm_arena_destroy(arena);
  else pm_arena_reset(arena);
  pm_free(p);
}

TEST_F(MisuseDeathTest, FreeOfABlockAfterItsArenaWasResetAborts) {
  EXPECT_DEATH(free_after(false, 64), kDoubleFree);
  EXPECT_DEATH(free_after(false, 100 * KiB), kDoubleFree);
  EXPECT_DEATH(free_after(false, 8 * MiB), kDoubleFree);
}

TEST_F(MisuseDeathTest, FreeOfABlockAfterItsArenaWasDestroyedAborts) {
  EXPECT_DEATH(free_after(true, 64), kNotOurs);
  EXPECT_DEATH(free_after(true, 100 * KiB), kNotOurs);
  EXPECT_DEATH(free_after(true, 8 * MiB), kNotOurs);
}

// ---------------------------------------------------------------------------------------------
// Misuse, detected with checks on.

void turn_checks_on() {
  const long one = 1;
  if (pm_ctl("checks", nullptr, &one) != 0) {
    std::fputs("pm_ctl(\"checks\") failed\n", stderr);
    ::_exit(3);
  }
}

class CheckedMisuseDeathTest : public ThreadsafeDeathTest {};

TEST_F(CheckedMisuseDeathTest, SdallocxWithSizeOfAnotherClassAborts) {
  EXPECT_DEATH(
      {
        turn_checks_on();
        void* p = pm_malloc(100);
        pm_sdallocx(p, 5000, 0);
      },
      "pagemalloc: pm_sdallocx\\(0x[0-9a-f]+, 5000\\): size does not match");
  EXPECT_DEATH(
      {
        turn_checks_on();
        void* p = pm_malloc(100);
        pm_sdallocx(p, 50, 0);
      },
      "pagemalloc: pm_sdallocx\\(0x[0-9a-f]+, 50\\): size does not match");
}

// The sized free tries free's fast path before it looks at the checks option: it relies on
// no chunk being remembered while checks are on. A chunk remembered before they were turned on
// (a free of a block in it) is forgotten when they are (an ownership change), so the size is
// still checked.
TEST_F(CheckedMisuseDeathTest, SdallocxWithWrongSizeAbortsInAChunkRememberedBeforeChecks) {
  EXPECT_DEATH(
      {
        void* p = pm_malloc(100);
        pm_free(pm_malloc(100));  // the chunk is remembered as the thread's arena's
        turn_checks_on();
        pm_sdallocx(p, 5000, 0);
      },
      "pagemalloc: pm_sdallocx\\(0x[0-9a-f]+, 5000\\): size does not match");
}

TEST_F(CheckedMisuseDeathTest, SdallocxWithWrongSizeOfLargeAndHugeBlocksAborts) {
  EXPECT_DEATH(
      {
        turn_checks_on();
        void* p = pm_malloc(100 * KiB);
        pm_sdallocx(p, 200 * KiB, 0);
      },
      "pagemalloc: pm_sdallocx\\(0x[0-9a-f]+, 204800\\): size does not match");
  EXPECT_DEATH(
      {
        turn_checks_on();
        void* p = pm_malloc(8 * MiB);
        pm_sdallocx(p, 100, 0);
      },
      "pagemalloc: pm_sdallocx\\(0x[0-9a-f]+, 100\\): size does not match");
}

TEST_F(CheckedMisuseDeathTest, InteriorPointerOfSmallBlockAborts) {
  EXPECT_DEATH(
      {
        turn_checks_on();
        auto* p = static_cast<char*>(pm_malloc(64));
        pm_free(p + 8);
      },
      "pagemalloc: pm_free\\(0x[0-9a-f]+\\): not the start of a block");
}

// The thread's cache knows the block's chunk (it freed a block there) when another thread
// turns checks on: the next free is checked all the same.
TEST_F(CheckedMisuseDeathTest, InteriorPointerAbortsWhenAnotherThreadTurnedChecksOn) {
  EXPECT_DEATH(
      {
        auto* p = static_cast<char*>(pm_malloc(64));
        pm_free(pm_malloc(64));
        std::thread(turn_checks_on).join();
        pm_free(p + 8);
      },
      "pagemalloc: pm_free\\(0x[0-9a-f]+\\): not the start of a block");
}

TEST_F(CheckedMisuseDeathTest, InteriorPointerOfLargeAndHugeBlocksAborts) {
  EXPECT_DEATH(
      {
        turn_checks_on();
        auto* p = static_cast<char*>(pm_malloc(100 * KiB));
        pm_free(p + 4096);
      },
      "pagemalloc: pm_free\\(0x[0-9a-f]+\\): not the start of a block");
  EXPECT_DEATH(
      {
        turn_checks_on();
        auto* p = static_cast<char*>(pm_malloc(8 * MiB));
        pm_free(p + 64);
      },
      "pagemalloc: pm_free\\(0x[0-9a-f]+\\): not the start of a block");
}

// The arena's chunk is a granule of the freed huge block, taken as it is: the block's words
// where the chunk's page map now lies, each one a slab page's entry (page_map.h: kind 5, a
// descriptor that points nowhere, class 0), do not make a pointer into the chunk's free pages
// look like a block.
TEST_F(CheckedMisuseDeathTest, PointerIntoTheFreePagesOfAChunkTakenFromAFreedHugeBlockAborts) {
  EXPECT_DEATH(
      {
        turn_checks_on();
        const unsigned arena = pm_arena_create();
        void* huge = pm_mallocx(8 * MiB, PM_ARENA(arena));
        auto* words = static_cast<std::uint64_t*>(huge);
        for (std::size_t i = 0; i < 8 * MiB / sizeof(std::uint64_t); ++i)
          words[i] = 0x8000'1234'5678'9005u;
        pm_dallocx(huge, PM_ARENA(arena));
        auto* p = static_cast<char*>(pm_mallocx(100 * KiB, PM_ARENA(arena)));
        if (p < static_cast<char*>(huge) || p >= static_cast<char*>(huge) + 8 * MiB) abort();
        pm_free(p + 512 * KiB);
      },
      "pagemalloc: pm_free\\(0x[0-9a-f]+\\): not the start of a block");
}

TEST_F(CheckedMisuseDeathTest, InteriorPointerToDallocxAborts) {
  EXPECT_DEATH(
      {
        turn_checks_on();
        auto* p = static_cast<char*>(pm_mallocx(256, 0));
        pm_dallocx(p + 16, 0);
      },
      "pagemalloc: pm_dallocx\\(0x[0-9a-f]+\\): not the start of a block");
}

}  // namespace
