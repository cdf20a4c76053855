// Bump arenas: pm_arena_create_ex(PM_ARENA_BUMP [| PM_ARENA_NO_FREE]), their blocks under
// every pm_ call, reset and destroy, pagemalloc::BumpArena and ArenaResource over them, and
// the misuse they still catch.
//
// Terms:
//   bumped   a block of up to 16 KiB (alignment up to a page) served from the calling
//            thread's span: its usable size is bump_usable(size) (16-byte steps), and its
//            chunk is a bump chunk in the address map (is_bumped)
//   round    blocks of 16..256 B written, then one reset (the talk's small-chunk workload)
//
// What is checked: every size and alignment is served and usable to its last byte; frees
// count (or, with PM_ARENA_NO_FREE, do nothing); the last block grows in place; larger
// blocks go to the arena's slabs and runs and are freed by the reset too; the arena's mapped
// bytes stay flat over 10,000 rounds and destroy returns them; a span costs one slow call
// (the stats count the regions handed out); other threads' blocks and frees are counted while
// they run and after they exit; bad cursor calls fail with EINVAL; misuse after a reset
// aborts with a message.
#include <gtest/gtest.h>

#include <pagemalloc/memory_resource.h>
#include <pagemalloc/pagemalloc.h>

#include "explicit/bump_space.h"
#include "explicit/explicit_arenas.h"

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <memory_resource>
#include <random>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

namespace {

using pagemalloc::bump_usable;
using pagemalloc::kBumpRegionSize;

constexpr std::size_t KiB = 1024;
constexpr std::size_t MiB = 1024 * KiB;

bool is_bumped(const void* p) { return pagemalloc::BumpSpace::owner_of(p) != nullptr; }

bool is_aligned(const void* p, std::size_t alignment) {
  return reinterpret_cast<std::uintptr_t>(p) % alignment == 0;
}

pm_arena_stats arena_stats(unsigned arena) {
  pm_arena_stats out{};
  EXPECT_EQ(pm_arena_stats_get(arena, &out), 0) << "arena " << arena;
  return out;
}

pm_stats heap_stats() {
  pm_stats out{};
  pm_stats_get(&out);
  return out;
}

void fill(void* p, std::size_t size, unsigned salt) {
  auto* bytes = static_cast<unsigned char*>(p);
  for (std::size_t i = 0; i < size; ++i) bytes[i] = static_cast<unsigned char>(i * 31 + salt);
}

bool intact(const void* p, std::size_t size, unsigned salt) {
  const auto* bytes = static_cast<const unsigned char*>(p);
  for (std::size_t i = 0; i < size; ++i)
    if (bytes[i] != static_cast<unsigned char>(i * 31 + salt)) return false;
  return true;
}

// A bump arena for the length of a test.
class ScopedBumpArena {
 public:
  explicit ScopedBumpArena(unsigned flags = PM_ARENA_BUMP) : index_(pm_arena_create_ex(flags)) {}
  ~ScopedBumpArena() {
    if (index_ != 0) pm_arena_destroy(index_);
  }
  ScopedBumpArena(const ScopedBumpArena&) = delete;
  ScopedBumpArena& operator=(const ScopedBumpArena&) = delete;
  [[nodiscard]] unsigned index() const { return index_; }
  [[nodiscard]] int flags() const { return PM_ARENA(index_); }

 private:
  unsigned index_;
};

// ---------------------------------------------------------------------------------------------
// Creation.

TEST(BumpArenaCreate, RejectsUnknownFlagsWithEinval) {
  for (unsigned flags : {0x4u, 0x80000000u, unsigned(PM_ARENA_NO_FREE), ~0u}) {
    SCOPED_TRACE("flags " + std::to_string(flags));
    errno = 0;
    EXPECT_EQ(pm_arena_create_ex(flags), 0u);
    EXPECT_EQ(errno, EINVAL);
  }
}

TEST(BumpArenaCreate, ZeroFlagsMakeAnOrdinaryArena) {
  const unsigned arena = pm_arena_create_ex(0);
  ASSERT_NE(arena, 0u);
  void* p = pm_mallocx(100, PM_ARENA(arena));
  ASSERT_NE(p, nullptr);
  EXPECT_FALSE(is_bumped(p)) << "a slab region, not a bumped block";
  EXPECT_EQ(pm_malloc_usable_size(p), pm_nallocx(100, 0));
  EXPECT_EQ(pm_arena_destroy(arena), 0);
}

// ---------------------------------------------------------------------------------------------
// Blocks under every pm_ call.

TEST(BumpArenaBlocks, EverySizeIsBumpedAlignedAndUsableToItsEnd) {
  ScopedBumpArena arena;
  ASSERT_NE(arena.index(), 0u);
  std::vector<std::pair<void*, std::size_t>> blocks;
  unsigned salt = 0;
  for (std::size_t size :
       {0ul, 1ul, 8ul, 15ul, 16ul, 17ul, 100ul, 255ul, 256ul, 1000ul, 4097ul, 16 * KiB}) {
    for (int copy = 0; copy < 3; ++copy) {
      void* p = pm_mallocx(size, arena.flags());
      ASSERT_NE(p, nullptr) << size;
      EXPECT_TRUE(is_aligned(p, 16)) << size;
      EXPECT_TRUE(is_bumped(p)) << size;
      EXPECT_EQ(pm_malloc_usable_size(p), bump_usable(size)) << size;
      EXPECT_EQ(pm_sallocx(p, 0), bump_usable(size)) << size;
      fill(p, bump_usable(size), ++salt);
      blocks.emplace_back(p, size);
    }
  }
  salt = 0;
  for (auto [p, size] : blocks) EXPECT_TRUE(intact(p, bump_usable(size), ++salt)) << size;
  EXPECT_EQ(arena_stats(arena.index()).blocks, blocks.size());
  for (std::size_t i = 0; i < blocks.size(); i += 2) pm_free(blocks[i].first);
  for (std::size_t i = 1; i < blocks.size(); i += 4) pm_dallocx(blocks[i].first, 0);
  for (std::size_t i = 3; i < blocks.size(); i += 4)
    pm_sdallocx(blocks[i].first, blocks[i].second, 0);
  EXPECT_EQ(arena_stats(arena.index()).blocks, 0u);
}

// A chunk's first line holds its size map's address: blocks of a multiple of 64 bytes, from
// the first of a chunk on, lie on lines of their own (16 bytes off, a 256-byte block's memset
// spans five lines and took 1.7 times as long), in every round.
TEST(BumpArenaBlocks, BlocksOfAMultipleOfSixtyFourBytesLieOnCacheLines) {
  ScopedBumpArena arena;
  pagemalloc::BumpArena inline_arena;
  for (int round = 0; round < 3; ++round) {
    for (int i = 0; i < 600; ++i) {  // over a region of 128 KiB: the next span's blocks too
      void* p = pm_mallocx(256, arena.flags());
      void* q = inline_arena.allocate(i % 2 == 0 ? 64 : 256);
      ASSERT_TRUE(is_bumped(p) && is_bumped(q));
      EXPECT_TRUE(is_aligned(p, 64)) << p << " in round " << round;
      EXPECT_TRUE(is_aligned(q, 64)) << q << " in round " << round;
    }
    pm_arena_reset(arena.index());
    inline_arena.reset();
  }
}

TEST(BumpArenaBlocks, AlignmentUpToAPageStaysOnTheBumpPath) {
  ScopedBumpArena arena;
  for (std::size_t alignment = 1; alignment <= 4096; alignment *= 2) {
    for (std::size_t size : {1ul, 100ul, 3000ul}) {
      void* p = pm_mallocx(size, arena.flags() | PM_ALIGN(alignment));
      ASSERT_NE(p, nullptr);
      EXPECT_TRUE(is_aligned(p, alignment)) << alignment;
      EXPECT_TRUE(is_bumped(p)) << alignment;
      EXPECT_EQ(pm_malloc_usable_size(p), bump_usable(size)) << alignment << " " << size;
      fill(p, size, unsigned(alignment));
      EXPECT_TRUE(intact(p, size, unsigned(alignment)));
    }
  }
  void* p = pm_mallocx(100, arena.flags() | PM_ALIGN(64 * KiB));
  ASSERT_NE(p, nullptr);
  EXPECT_TRUE(is_aligned(p, 64 * KiB));
  EXPECT_FALSE(is_bumped(p)) << "beyond a page: the arena's runs";
  pm_free(p);
}

TEST(BumpArenaBlocks, LargerBlocksGoToTheArenasRunsAndTheResetFreesThem) {
  ScopedBumpArena arena;
  const pm_stats before = heap_stats();
  for (std::size_t size : {16 * KiB + 1, 100 * KiB, 1 * MiB, 5 * MiB}) {
    void* p = pm_mallocx(size, arena.flags());
    ASSERT_NE(p, nullptr);
    EXPECT_FALSE(is_bumped(p)) << size;
    EXPECT_EQ(pm_malloc_usable_size(p), pm_nallocx(size, 0)) << size;
    fill(p, size, 7);
    EXPECT_TRUE(intact(p, size, 7));
  }
  void* small = pm_mallocx(64, arena.flags());
  ASSERT_NE(small, nullptr);
  EXPECT_EQ(arena_stats(arena.index()).blocks, 5u);
  ASSERT_EQ(pm_arena_reset(arena.index()), 0);
  EXPECT_EQ(arena_stats(arena.index()).blocks, 0u);
  EXPECT_LE(heap_stats().allocated, before.allocated)
      << "the regions handed out count again from the next one";
}

TEST(BumpArenaBlocks, ZeroFlagZeroesMemoryOfAnEarlierRound) {
  ScopedBumpArena arena;
  for (int round = 0; round < 3; ++round) {
    for (int i = 0; i < 1000; ++i) {
      auto* p = static_cast<unsigned char*>(pm_mallocx(200, arena.flags() | PM_ZERO));
      ASSERT_NE(p, nullptr);
      for (std::size_t b = 0; b < 200; ++b) ASSERT_EQ(p[b], 0) << "round " << round;
      std::memset(p, 0xAB, 200);
    }
    ASSERT_EQ(pm_arena_reset(arena.index()), 0);
  }
}

TEST(BumpArenaBlocks, RallocxGrowsTheLastBlockInPlace) {
  ScopedBumpArena arena;
  void* p = pm_mallocx(100, arena.flags());
  ASSERT_NE(p, nullptr);
  fill(p, 100, 1);
  const std::size_t grown_before = heap_stats().grown_in_place;
  void* q = pm_rallocx(p, 1000, arena.flags());
  EXPECT_EQ(q, p) << "the last block bumped grows where it is";
  EXPECT_EQ(pm_malloc_usable_size(q), bump_usable(1000));
  EXPECT_TRUE(intact(q, 100, 1));
  EXPECT_EQ(heap_stats().grown_in_place, grown_before + 1);
  EXPECT_EQ(pm_xallocx(q, 2000, 0, 0), bump_usable(2000)) << "xallocx too";
  q = pm_rallocx(q, 50, 0);
  EXPECT_EQ(q, p) << "shrinks in place";
  EXPECT_EQ(pm_malloc_usable_size(q), bump_usable(50));

  // No longer the last: growth moves it, within its arena, keeping its bytes.
  void* other = pm_mallocx(16, arena.flags());
  ASSERT_NE(other, nullptr);
  fill(q, 50, 2);
  void* moved = pm_rallocx(q, 3000, 0);
  ASSERT_NE(moved, nullptr);
  EXPECT_NE(moved, q);
  EXPECT_TRUE(intact(moved, 50, 2));
  EXPECT_EQ(pm_malloc_usable_size(moved), bump_usable(3000));
  EXPECT_EQ(pm_xallocx(other, 5000, 0, 0), bump_usable(16)) << "not the last: stays as it is";
  EXPECT_EQ(arena_stats(arena.index()).blocks, 2u) << "the old copy was freed";

  // The moved copy is the last block now: it grows in place up to 16 KiB; past that it moves
  // to the arena's runs.
  void* grown = pm_rallocx(moved, 16 * KiB, 0);
  EXPECT_EQ(grown, moved);
  EXPECT_EQ(pm_malloc_usable_size(grown), bump_usable(16 * KiB));
  void* large = pm_rallocx(grown, 64 * KiB, 0);
  ASSERT_NE(large, nullptr);
  EXPECT_NE(large, grown);
  EXPECT_FALSE(is_bumped(large));
  EXPECT_TRUE(intact(large, 50, 2));
  EXPECT_EQ(pm_malloc_usable_size(large), pm_nallocx(64 * KiB, 0));
  EXPECT_EQ(arena_stats(arena.index()).blocks, 2u);
}

TEST(BumpArenaBlocks, RallocxNamingAnotherArenaMovesTheBlockThere) {
  ScopedBumpArena from;
  ScopedBumpArena to;
  void* p = pm_mallocx(64, from.flags());
  ASSERT_NE(p, nullptr);
  fill(p, 64, 3);
  void* q = pm_rallocx(p, 64, to.flags());
  ASSERT_NE(q, nullptr);
  EXPECT_NE(q, p);
  EXPECT_TRUE(intact(q, 64, 3));
  EXPECT_EQ(arena_stats(from.index()).blocks, 0u);
  EXPECT_EQ(arena_stats(to.index()).blocks, 1u);
}

TEST(BumpArenaBlocks, NoFreeArenaIgnoresFreesAndKeepsTheOtherBlocks) {
  ScopedBumpArena arena(PM_ARENA_BUMP | PM_ARENA_NO_FREE);
  ASSERT_NE(arena.index(), 0u);
  std::vector<void*> blocks;
  for (unsigned i = 0; i < 100; ++i) {
    blocks.push_back(pm_mallocx(48, arena.flags()));
    fill(blocks.back(), 48, i);
  }
  for (unsigned i = 0; i < 100; i += 2) pm_free(blocks[i]);
  for (unsigned i = 0; i < 100; i += 2) pm_free(blocks[i]) /* again: nothing to free */;
  for (unsigned i = 1; i < 100; i += 2) EXPECT_TRUE(intact(blocks[i], 48, i));
  EXPECT_EQ(arena_stats(arena.index()).blocks, 100u) << "nothing is freed before the reset";
  ASSERT_EQ(pm_arena_reset(arena.index()), 0);
  EXPECT_EQ(arena_stats(arena.index()).blocks, 0u);
}

TEST(BumpArenaBlocks, OtherThreadsBlocksAndFreesAreCountedWhileTheyRunAndAfterTheyExit) {
  ScopedBumpArena arena;
  std::vector<void*> mine;
  for (int i = 0; i < 10; ++i) mine.push_back(pm_mallocx(100, arena.flags()));
  std::atomic<int> stage{0};
  std::vector<void*> theirs;
  std::thread other([&] {
    for (int i = 0; i < 7; ++i) theirs.push_back(pm_mallocx(50, arena.flags()));
    for (int i = 0; i < 4; ++i) pm_free(mine[i]);  // frees of another thread's blocks
    stage = 1;
    while (stage.load() != 2) std::this_thread::yield();
  });
  while (stage.load() != 1) std::this_thread::yield();
  pm_arena_stats during = arena_stats(arena.index());
  EXPECT_EQ(during.blocks, 10u + 7u - 4u) << "the running thread's lease is counted";
  EXPECT_EQ(during.allocated, 6 * bump_usable(100) + 7 * bump_usable(50));
  stage = 2;
  other.join();
  EXPECT_EQ(arena_stats(arena.index()).blocks, 13u) << "and kept after the thread exits";
  for (void* p : theirs) pm_free(p);
  EXPECT_EQ(arena_stats(arena.index()).blocks, 6u);
  EXPECT_EQ(arena_stats(arena.index()).allocated, 6 * bump_usable(100));
}

TEST(BumpArenaBlocks, CursorCallsRefuseBadInputAndChangeNothing) {
  errno = 0;
  EXPECT_EQ(pm_arena_bump(nullptr, 16, 0), nullptr);
  EXPECT_EQ(errno, EINVAL);
  pm_arena_bump_flush(nullptr);  // nothing to flush, no crash
  const unsigned plain = pm_arena_create();
  ASSERT_NE(plain, 0u);
  for (unsigned arena : {plain, 0u, 4000u}) {
    pm_bump_cursor cursor{};
    cursor.arena = arena;
    errno = 0;
    EXPECT_EQ(pm_arena_bump(&cursor, 16, 0), nullptr) << arena;
    EXPECT_EQ(errno, EINVAL) << "not a bump arena: " << arena;
    EXPECT_EQ(cursor.next, nullptr) << "the cursor is untouched";
    pm_arena_bump_flush(&cursor);
  }
  EXPECT_EQ(arena_stats(plain).blocks, 0u);
  EXPECT_EQ(pm_arena_destroy(plain), 0);
  ScopedBumpArena arena;
  pm_bump_cursor cursor{};
  cursor.arena = arena.index();
  errno = 0;
  EXPECT_EQ(pm_arena_bump(&cursor, ~std::size_t{0}, 0), nullptr);
  EXPECT_EQ(errno, ENOMEM);
  EXPECT_EQ(arena_stats(arena.index()).blocks, 0u);
}

// pm_arena_bump_inline (C's inline path) and pm_arena_bump (one call a block) over one cursor:
// every size up to 16 KiB, over several spans and a reset.
TEST(BumpArenaBlocks, CursorInlineAndCallPathsServeDistinctCountedBlocks) {
  ScopedBumpArena arena;
  pm_bump_cursor cursor{};
  cursor.arena = arena.index();
  for (int round = 0; round < 2; ++round) {
    std::vector<std::pair<void*, std::size_t>> blocks;
    std::size_t bytes = 0;
    for (std::size_t i = 0; bytes < 2 * kBumpRegionSize + 100 * KiB; ++i) {
      const std::size_t size = i % 97 == 0 ? 16 * KiB : (i * 37) % 700;
      void* p = i % 2 == 0 ? pm_arena_bump_inline(&cursor, size) : pm_arena_bump(&cursor, size, 0);
      ASSERT_NE(p, nullptr) << "block " << i << " of " << size << " bytes";
      EXPECT_TRUE(is_bumped(p));
      EXPECT_TRUE(is_aligned(p, 16));
      EXPECT_EQ(pm_sallocx(p, 0), bump_usable(size)) << size;
      fill(p, size, unsigned(i));
      blocks.emplace_back(p, size);
      bytes += bump_usable(size);
    }
    for (std::size_t i = 0; i < blocks.size(); ++i)
      ASSERT_TRUE(intact(blocks[i].first, blocks[i].second, unsigned(i))) << "block " << i;
    pm_arena_bump_flush(&cursor);
    EXPECT_EQ(arena_stats(arena.index()).blocks, blocks.size()) << "round " << round;
    EXPECT_EQ(arena_stats(arena.index()).allocated, bytes) << "round " << round;
    ASSERT_EQ(pm_arena_reset(arena.index()), 0);
    EXPECT_EQ(arena_stats(arena.index()).blocks, 0u);
    cursor.next = cursor.end = cursor.begin = nullptr;  // as pagemalloc.h asks after a reset
    cursor.blocks = cursor.skipped = 0;
  }
}

// A cursor left as it was across a reset: its call takes a span of the new round (the span it
// held may be lent to another cursor), and counts only what it bumps after the reset.
TEST(BumpArenaBlocks, CursorCallAfterAResetTakesASpanOfTheNewRound) {
  ScopedBumpArena arena;
  pm_bump_cursor stale{};
  stale.arena = arena.index();
  for (int i = 0; i < 10; ++i) ASSERT_NE(pm_arena_bump(&stale, 64, 0), nullptr);
  ASSERT_EQ(pm_arena_reset(arena.index()), 0);
  pm_bump_cursor fresh{};
  fresh.arena = arena.index();
  void* theirs = pm_arena_bump(&fresh, 64, 0);
  ASSERT_NE(theirs, nullptr);
  fill(theirs, 64, 7);
  void* mine = pm_arena_bump(&stale, 64, 0);
  ASSERT_NE(mine, nullptr);
  fill(mine, 64, 9);
  EXPECT_NE(mine, theirs);
  EXPECT_TRUE(intact(theirs, 64, 7)) << "the stale cursor bumped over a block of the new round";
  pm_arena_bump_flush(&stale);
  pm_arena_bump_flush(&fresh);
  EXPECT_EQ(arena_stats(arena.index()).blocks, 2u);
}

// pm_arena_bump_free_inline: a live block of the cursor's span since its last flush is freed
// inline (the cursor's count drops by one, its bytes by the block's); any other block (bumped
// before a flush, another owner's, aligned with a gap before it) takes pm_free. The arena's
// statistics count every free either way.
TEST(BumpArenaBlocks, CursorInlineFreeCountsEveryBlockItFrees) {
  ScopedBumpArena arena;
  pm_bump_cursor cursor{};
  cursor.arena = arena.index();
  struct Block {
    void* p;
    std::size_t size;
    unsigned salt;
  };
  std::vector<Block> live;
  std::size_t live_bytes = 0;
  std::size_t inline_frees = 0;
  for (std::size_t i = 0; i < 3000; ++i) {
    const std::size_t size = i % 101 == 0 ? 16 * KiB : (i * 37) % 700;
    void* p = i % 7 == 0 ? pm_arena_bump(&cursor, size, PM_ALIGN(256))
                         : pm_arena_bump_inline(&cursor, size);
    ASSERT_NE(p, nullptr);
    fill(p, size, unsigned(i));
    live.push_back(Block{p, size, unsigned(i)});
    live_bytes += bump_usable(size);
    if (i % 500 == 499) pm_arena_bump_flush(&cursor);  // the blocks before it take the call
    if (i % 3 == 0 && live.size() > 4) {
      void* const q = live[live.size() - 4].p;
      live_bytes -= bump_usable(live[live.size() - 4].size);
      live.erase(live.end() - 4);
      const bool in_span = q >= cursor.begin && q < cursor.next;
      const std::size_t blocks_before = cursor.blocks;
      pm_arena_bump_free_inline(&cursor, q);
      if (in_span) {
        EXPECT_EQ(cursor.blocks, blocks_before - 1) << "block " << i - 3 << " freed inline";
        ++inline_frees;
      } else {
        EXPECT_EQ(cursor.blocks, blocks_before) << "block " << i - 3 << " took the call";
      }
    }
  }
  void* leased = pm_mallocx(64, arena.flags());  // the thread's lease, not the cursor's span
  pm_arena_bump_free_inline(&cursor, leased);
  EXPECT_GT(inline_frees, 500u);
  for (const Block& b : live) {
    ASSERT_TRUE(intact(b.p, b.size, b.salt)) << "block " << b.salt << " lost its bytes";
    ASSERT_EQ(pm_sallocx(b.p, 0), bump_usable(b.size)) << "block " << b.salt << " is live";
  }
  pm_arena_bump_flush(&cursor);
  EXPECT_EQ(arena_stats(arena.index()).blocks, live.size());
  EXPECT_EQ(arena_stats(arena.index()).allocated, live_bytes);
}

// pm_arena_bump_free, the call a binding makes: the inline free for a cursor of the arena's
// current epoch, pm_free for any other cursor (or none).
TEST(BumpArenaBlocks, CursorFreeCallFreesInlineOnlyForACursorOfTheCurrentEpoch) {
  ScopedBumpArena arena;
  pm_bump_cursor cursor{};
  cursor.arena = arena.index();
  void* a = pm_arena_bump(&cursor, 100, 0);
  void* b = pm_arena_bump(&cursor, 200, 0);
  void* c = pm_arena_bump(&cursor, 300, 0);
  ASSERT_NE(c, nullptr);
  pm_arena_bump_free(&cursor, a);
  EXPECT_EQ(cursor.blocks, 2u) << "a block of the span, freed inline";
  pm_arena_bump_free(nullptr, b);
  EXPECT_EQ(cursor.blocks, 2u) << "no cursor: pm_free";
  pm_arena_bump_flush(&cursor);
  EXPECT_EQ(arena_stats(arena.index()).blocks, 1u);
  EXPECT_EQ(arena_stats(arena.index()).allocated, bump_usable(300));
  // Misuse, with checks off: a cursor kept across a reset. Its span may be lent again, so its
  // counts are not touched; the block goes to pm_free.
  void* d = pm_arena_bump(&cursor, 64, 0);
  ASSERT_NE(d, nullptr);
  ASSERT_EQ(pm_arena_reset(arena.index()), 0);
  const std::size_t stale_blocks = cursor.blocks;
  pm_arena_bump_free(&cursor, d);
  EXPECT_EQ(cursor.blocks, stale_blocks) << "a stale cursor's free took the inline path";
}

// A null pointer, and a cursor that holds no span yet: both go to pm_free, which does nothing
// with null; the counts stay as they were.
TEST(BumpArenaBlocks, CursorFreesOfNullAndOfACursorWithNoSpanChangeNothing) {
  ScopedBumpArena arena;
  pm_bump_cursor empty{};
  empty.arena = arena.index();
  pm_arena_bump_free_inline(&empty, nullptr);
  pm_arena_bump_free(&empty, nullptr);
  EXPECT_EQ(empty.blocks, 0u);
  pm_bump_cursor cursor{};
  cursor.arena = arena.index();
  ASSERT_NE(pm_arena_bump_inline(&cursor, 48), nullptr);
  pm_arena_bump_free_inline(&cursor, nullptr);
  pm_arena_bump_free(&cursor, nullptr);
  EXPECT_EQ(cursor.blocks, 1u);
  pagemalloc::BumpArena bump;
  (void)bump.allocate(48);
  bump.deallocate(nullptr);
  EXPECT_EQ(bump.stats().blocks, 1u);
  pm_arena_bump_flush(&cursor);
  EXPECT_EQ(arena_stats(arena.index()).blocks, 1u);
}

TEST(BumpArenaBlocks, CursorInlineFreeOfANoFreeArenaCountsNothing) {
  ScopedBumpArena arena(PM_ARENA_BUMP | PM_ARENA_NO_FREE);
  pm_bump_cursor cursor{};
  cursor.arena = arena.index();
  void* p = pm_arena_bump_inline(&cursor, 100);
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(cursor.freeable, 0u);
  pm_arena_bump_free_inline(&cursor, p);
  EXPECT_EQ(cursor.blocks, 1u);
  EXPECT_EQ(pm_sallocx(p, 0), bump_usable(100)) << "the block stays live until the reset";
  pm_arena_bump_flush(&cursor);
  EXPECT_EQ(arena_stats(arena.index()).blocks, 1u);
}

// ---------------------------------------------------------------------------------------------
// Reset and destroy.

// The talk's round: 1600 blocks of 16..256 B, each written, then one reset.
void small_chunk_round(unsigned arena, std::mt19937& rng) {
  std::uniform_int_distribution<std::size_t> size_of(16, 256);
  for (int i = 0; i < 1600; ++i) {
    const std::size_t size = size_of(rng);
    void* p = pm_mallocx(size, PM_ARENA(arena));
    ASSERT_NE(p, nullptr);
    std::memset(p, i, size);
  }
  ASSERT_EQ(pm_arena_reset(arena), 0);
}

TEST(BumpArenaReset, MappedBytesStayFlatOverTenThousandRoundsAndDestroyReturnsThem) {
  const pm_stats before = heap_stats();
  const unsigned arena = pm_arena_create_ex(PM_ARENA_BUMP);
  ASSERT_NE(arena, 0u);
  std::mt19937 rng(15);
  small_chunk_round(arena, rng);
  const std::size_t mapped_first = arena_stats(arena).mapped;
  const std::size_t heap_mapped_first = heap_stats().mapped;
  for (int round = 1; round < 10000; ++round) {
    small_chunk_round(arena, rng);
    if (round % 1000 == 0) {
      ASSERT_EQ(arena_stats(arena).mapped, mapped_first) << round;
    }
  }
  EXPECT_EQ(arena_stats(arena).mapped, mapped_first);
  EXPECT_EQ(heap_stats().mapped, heap_mapped_first) << "nothing mapped again";
  EXPECT_EQ(arena_stats(arena).blocks, 0u);
  ASSERT_EQ(pm_arena_destroy(arena), 0);
  // The record (metadata) stays for the next arena of the index; every chunk goes back.
  EXPECT_LE(heap_stats().mapped, before.mapped + pagemalloc::ExplicitArenas::record_bytes());
  EXPECT_LT(heap_stats().mapped + pagemalloc::kChunkSize, heap_mapped_first + 1);
}

TEST(BumpArenaReset, AResetArenaServesItsFirstAddressesAgain) {
  ScopedBumpArena arena;
  void* first = pm_mallocx(32, arena.flags());
  ASSERT_EQ(pm_arena_reset(arena.index()), 0);
  void* again = pm_mallocx(32, arena.flags());
  EXPECT_EQ(again, first) << "the same region, from its start";
}

// Spans of 1, 2, 4, 4, ... regions: a thread takes the lock once per span.
TEST(BumpArenaReset, RegionsAreTakenInDoublingSpans) {
  ScopedBumpArena arena;
  constexpr std::size_t kBlocks = 100000, kSize = 64;
  for (std::size_t i = 0; i < kBlocks; ++i) ASSERT_NE(pm_mallocx(kSize, arena.flags()), nullptr);
  const std::size_t regions = arena_stats(arena.index()).active / kBumpRegionSize;
  const std::size_t bytes = kBlocks * pagemalloc::bump_stride(kSize);
  const std::size_t needed = (bytes + kBumpRegionSize - 1) / kBumpRegionSize;
  EXPECT_GE(regions, needed);
  EXPECT_LE(regions, needed + pagemalloc::kBumpMaxSpan) << "at most one span unused";
  // The next round starts with the last span's size: 4 regions.
  ASSERT_EQ(pm_arena_reset(arena.index()), 0);
  ASSERT_NE(pm_mallocx(kSize, arena.flags()), nullptr);
  EXPECT_EQ(arena_stats(arena.index()).active, pagemalloc::kBumpMaxSpan * kBumpRegionSize);
}

// ---------------------------------------------------------------------------------------------
// pagemalloc::BumpArena and ArenaResource.

TEST(BumpArenaClass, AllocatesCreatesGrowsAndResets) {
  pagemalloc::BumpArena arena;
  struct Node {
    int value;
    Node* next;
  };
  Node* list = nullptr;
  for (int i = 0; i < 20000; ++i) list = arena.create<Node>(i, list);
  int expect = 19999;
  for (Node* n = list; n != nullptr; n = n->next) ASSERT_EQ(n->value, expect--);
  EXPECT_EQ(arena.stats().blocks, 20000u);
  EXPECT_EQ(pm_malloc_usable_size(list), bump_usable(sizeof(Node)));

  auto* text = static_cast<char*>(arena.allocate(10));
  std::memcpy(text, "012345678", 10);
  auto* longer = static_cast<char*>(arena.reallocate(text, 10, 4000));
  EXPECT_EQ(longer, text) << "the last block grows in place";
  EXPECT_STREQ(longer, "012345678");
  EXPECT_EQ(pm_malloc_usable_size(longer), bump_usable(4000)) << "the library sees the growth";

  void* aligned = arena.allocate(100, 4096);
  EXPECT_TRUE(is_aligned(aligned, 4096));
  void* big = arena.allocate(1 * MiB);
  std::memset(big, 1, 1 * MiB);
  EXPECT_EQ(pm_malloc_usable_size(big), 1 * MiB);
  arena.deallocate(big);
  pm_free(aligned);
  EXPECT_EQ(arena.stats().blocks, 20001u);
  arena.reset();
  EXPECT_EQ(arena.stats().blocks, 0u);
  EXPECT_EQ(arena.create<Node>(1, nullptr)->value, 1);
}

TEST(BumpArenaClass, ZeroBytesTakeAGranuleAndSixteenKibStayOnTheBumpPath) {
  pagemalloc::BumpArena arena;
  void* empty = arena.allocate(0);
  EXPECT_TRUE(is_bumped(empty));
  EXPECT_EQ(pm_malloc_usable_size(empty), bump_usable(0));
  void* largest = arena.allocate(16 * KiB);
  EXPECT_TRUE(is_bumped(largest)) << "16 KiB is the largest bumped block";
  EXPECT_EQ(pm_malloc_usable_size(largest), 16 * KiB);
  std::memset(largest, 7, 16 * KiB);
  EXPECT_EQ(arena.stats().blocks, 2u);
}

// The fast path keeps the cursor in registers while the caller writes each block (the
// benchmarks' pattern: a size known only at run time, a memset per block): blocks stay apart,
// every length reaches the size map, and the count reaches the statistics, across spans and
// resets.
TEST(BumpArenaClass, BlocksWrittenBetweenAllocationsStayApartAcrossSpansAndResets) {
  pagemalloc::BumpArena arena;
  volatile std::size_t runtime_size = 48;
  const std::size_t size = runtime_size;
  std::vector<void*> blocks(20000);
  for (int round = 0; round < 3; ++round) {
    for (std::size_t i = 0; i < blocks.size(); ++i) {
      blocks[i] = arena.allocate(size);
      std::memset(blocks[i], int(i + round), size);
    }
    for (std::size_t i = 0; i < blocks.size(); ++i) {
      const auto* bytes = static_cast<const unsigned char*>(blocks[i]);
      ASSERT_EQ(bytes[0], static_cast<unsigned char>(i + round)) << "block " << i;
      ASSERT_EQ(bytes[size - 1], static_cast<unsigned char>(i + round)) << "block " << i;
      ASSERT_EQ(pm_malloc_usable_size(blocks[i]), bump_usable(size)) << "block " << i;
    }
    EXPECT_EQ(arena.stats().blocks, blocks.size()) << "round " << round;
    arena.reset();
  }
}

TEST(BumpArenaClass, IsHeldByValueAndMoved) {
  std::vector<pagemalloc::BumpArena> arenas;
  for (int i = 0; i < 4; ++i) arenas.emplace_back();
  std::vector<int*> values;
  for (int i = 0; i < 4; ++i) values.push_back(arenas[i].create<int>(i));
  pagemalloc::BumpArena moved = std::move(arenas[2]);
  EXPECT_EQ(arenas[2].arena(), 0u) << "a moved-from arena owns nothing";
  for (int i = 0; i < 1000; ++i) *moved.create<int>(i) = i;
  for (int i = 0; i < 4; ++i) EXPECT_EQ(*values[i], i);
  EXPECT_EQ(moved.stats().blocks, 1001u);
}

// deallocate frees a block of the span the arena bumps from inline and any other (of an
// earlier span, or larger than 16 KiB) through pm_free: the live count is right either way.
TEST(BumpArenaClass, DeallocateCountsBlocksOfEverySpan) {
  pagemalloc::BumpArena arena;
  std::vector<void*> blocks;
  for (std::size_t i = 0; i < 20000; ++i) {
    const std::size_t size = i % 1000 == 0 ? 64 * KiB : 16 + i % 200;
    blocks.push_back(arena.allocate(size));
    std::memset(blocks.back(), int(i), size);
    if (i % 2 == 1) arena.deallocate(blocks[i - 1]);  // the block before: mostly in the span
  }
  for (std::size_t i = 0; i < blocks.size(); i += 3)
    if (i % 2 == 1) arena.deallocate(blocks[i]);  // older spans' blocks too
  std::size_t live = 0;
  for (std::size_t i = 0; i < blocks.size(); ++i) live += i % 2 == 1 && i % 3 != 0 ? 1 : 0;
  EXPECT_EQ(arena.stats().blocks, live);
  EXPECT_GT(arena.stats().active, 2 * kBumpRegionSize) << "the blocks spanned several spans";
}

TEST(BumpArenaClass, NoFreeDeallocateDoesNothing) {
  pagemalloc::BumpArena arena(PM_ARENA_NO_FREE);
  void* p = arena.allocate(100);
  arena.deallocate(p);
  arena.deallocate(p);
  EXPECT_EQ(arena.stats().blocks, 1u);
}

TEST(ArenaResourceBump, ContainersLiveOnTheBumpPath) {
  pagemalloc::ArenaResource resource;
  std::pmr::vector<std::pmr::string> words(&resource);
  for (int i = 0; i < 10000; ++i)
    words.emplace_back("a word too long for the small-string buffer " + std::to_string(i));
  EXPECT_TRUE(is_bumped(words[5].data()));
  EXPECT_EQ(pm_malloc_usable_size(words[5].data()), bump_usable(words[5].capacity() + 1));
  for (int i = 0; i < 10000; i += 101)
    EXPECT_EQ(std::string_view(words[i]),
              "a word too long for the small-string buffer " + std::to_string(i));
  const std::size_t blocks = resource.stats().blocks;
  EXPECT_GE(blocks, 10001u);
  words = std::pmr::vector<std::pmr::string>(&resource);
  EXPECT_EQ(resource.stats().blocks, 0u);
}

TEST(ArenaResourceBump, NoFreeResourceAsAMonotonicBuffer) {
  pagemalloc::ArenaResource resource(PM_ARENA_BUMP | PM_ARENA_NO_FREE);
  {
    std::pmr::vector<int> values(&resource);
    for (int i = 0; i < 100000; ++i) values.push_back(i);
    EXPECT_EQ(values[99999], 99999);
  }
  EXPECT_GT(resource.stats().blocks, 0u) << "freed only at the reset";
  resource.reset();
  EXPECT_EQ(resource.stats().blocks, 0u);
}

// ---------------------------------------------------------------------------------------------
// Misuse, reported as for any explicit arena's block.

class BumpMisuseDeathTest : public ::testing::Test {
 protected:
  BumpMisuseDeathTest() { GTEST_FLAG_SET(death_test_style, "threadsafe"); }
};

void turn_checks_on() {
  const long one = 1;
  if (pm_ctl("checks", nullptr, &one) != 0) std::abort();
}

TEST_F(BumpMisuseDeathTest, FreeAfterTheResetIsReported) {
  for (unsigned flags : {unsigned(PM_ARENA_BUMP), unsigned(PM_ARENA_BUMP | PM_ARENA_NO_FREE)}) {
    EXPECT_DEATH(
        {
          turn_checks_on();
          const unsigned arena = pm_arena_create_ex(flags);
          void* p = pm_mallocx(64, PM_ARENA(arena));
          pm_arena_reset(arena);
          pm_free(p);
        },
        "pagemalloc: pm_free\\(0x[0-9a-f]+\\): double free \\(or not a block: its arena was "
        "reset\\?\\)");
  }
}

TEST_F(BumpMisuseDeathTest, UseAfterTheResetIsReported) {
  EXPECT_DEATH(
      {
        turn_checks_on();
        const unsigned arena = pm_arena_create_ex(PM_ARENA_BUMP);
        void* p = pm_mallocx(64, PM_ARENA(arena));
        pm_arena_reset(arena);
        (void)pm_rallocx(p, 128, 0);
      },
      "pagemalloc: pm_rallocx\\(0x[0-9a-f]+\\): not a live block \\(freed, or its arena was "
      "reset\\?\\)");
  EXPECT_DEATH(
      {
        turn_checks_on();
        pagemalloc::BumpArena arena;
        void* p = arena.allocate(64);
        arena.reset();
        (void)pm_malloc_usable_size(p);
      },
      "pagemalloc: pm_malloc_usable_size\\(0x[0-9a-f]+\\): not a live block");
}

TEST_F(BumpMisuseDeathTest, DoubleFreeIsReported) {
  EXPECT_DEATH(
      {
        const unsigned arena = pm_arena_create_ex(PM_ARENA_BUMP);
        void* p = pm_mallocx(64, PM_ARENA(arena));
        pm_free(p);
        pm_free(p);
      },
      "pagemalloc: pm_free\\(0x[0-9a-f]+\\): double free");
}

// A cursor of a new bump arena, and the first block it bumps inline (64 bytes).
char* first_block_of_a_new_cursor(pm_bump_cursor& cursor) {
  cursor = pm_bump_cursor{};
  cursor.arena = pm_arena_create_ex(PM_ARENA_BUMP);
  return static_cast<char*>(pm_arena_bump_inline(&cursor, 64));
}

// The inline frees report what pm_free reports: they leave every doubtful block to it.
TEST_F(BumpMisuseDeathTest, InlineFreesReportDoubleFreesAndPointersIntoBlocks) {
  EXPECT_DEATH(
      {
        pagemalloc::BumpArena arena;
        void* p = arena.allocate(64);
        arena.deallocate(p);
        arena.deallocate(p);
      },
      "pagemalloc: pm_free\\(0x[0-9a-f]+\\): double free");
  pm_bump_cursor cursor;
  EXPECT_DEATH(
      {
        char* p = first_block_of_a_new_cursor(cursor);
        pm_arena_bump_free_inline(&cursor, p);
        pm_arena_bump_free_inline(&cursor, p);
      },
      "pagemalloc: pm_free\\(0x[0-9a-f]+\\): double free");
  EXPECT_DEATH(pm_arena_bump_free_inline(&cursor, first_block_of_a_new_cursor(cursor) + 8),
               "pagemalloc: pm_free\\(0x[0-9a-f]+\\): not the start of a block");
  EXPECT_DEATH(pm_arena_bump_free_inline(&cursor, first_block_of_a_new_cursor(cursor) + 32),
               "pagemalloc: pm_free\\(0x[0-9a-f]+\\): double free \\(or not a block");
}

// A cursor not cleared after a reset: the call sees its old epoch and leaves the block to
// pm_free, which reports the block of the earlier round (checks on).
TEST_F(BumpMisuseDeathTest, CursorFreeCallAfterTheResetIsReported) {
  EXPECT_DEATH(
      {
        turn_checks_on();
        pm_bump_cursor cursor{};
        cursor.arena = pm_arena_create_ex(PM_ARENA_BUMP);
        void* p = pm_arena_bump(&cursor, 64, 0);
        pm_arena_reset(cursor.arena);
        pm_arena_bump_free(&cursor, p);
      },
      "pagemalloc: pm_free\\(0x[0-9a-f]+\\): double free \\(or not a block: its arena was "
      "reset\\?\\)");
}

TEST_F(BumpMisuseDeathTest, InteriorPointerAndWrongSizeAreReported) {
  EXPECT_DEATH(
      {
        const unsigned arena = pm_arena_create_ex(PM_ARENA_BUMP);
        auto* p = static_cast<char*>(pm_mallocx(64, PM_ARENA(arena)));
        pm_free(p + 8);
      },
      "pagemalloc: pm_free\\(0x[0-9a-f]+\\): not the start of a block");
  EXPECT_DEATH(
      {
        const unsigned arena = pm_arena_create_ex(PM_ARENA_BUMP);
        auto* p = static_cast<char*>(pm_mallocx(64, PM_ARENA(arena)));
        pm_free(p + 32);
      },
      "pagemalloc: pm_free\\(0x[0-9a-f]+\\): double free \\(or not a block");
  EXPECT_DEATH(
      {
        turn_checks_on();
        const unsigned arena = pm_arena_create_ex(PM_ARENA_BUMP);
        void* p = pm_mallocx(64, PM_ARENA(arena));
        pm_sdallocx(p, 500, 0);
      },
      "pagemalloc: pm_sdallocx\\(0x[0-9a-f]+, 500\\): size does not match");
}

TEST_F(BumpMisuseDeathTest, FreeAfterDestroyIsReported) {
  EXPECT_DEATH(
      {
        const unsigned arena = pm_arena_create_ex(PM_ARENA_BUMP);
        void* p = pm_mallocx(64, PM_ARENA(arena));
        pm_arena_destroy(arena);
        pm_free(p);
      },
      "pagemalloc: pm_free\\(0x[0-9a-f]+\\): not allocated by pagemalloc");
}

}  // namespace
