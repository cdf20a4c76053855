// Medium classes (design/medium_classes.h), a thread's medium bins (threads/medium_bins.h) and
// an arena's medium stash (arena/medium_stash.h): the classes' lengths and rounding in each
// spacing; the bins' bounds, halving and idle trim on fake blocks; and, in a design that has
// them, that a freed medium block comes back from the thread's cache at its class's length,
// that a second free of it is reported, that a block of another arena never enters the
// freeing thread's bins, that a thread's exit gives its blocks back, that a block grows in
// place into pages the thread's bins held, and that the heap's invariants hold throughout.
#include <gtest/gtest.h>

#include <pagemalloc/pagemalloc.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <random>
#include <thread>
#include <vector>

#include "arena/medium_stash.h"
#include "chunks/address_map.h"
#include "design/medium_classes.h"
#include "heap/heap.h"
#include "heap/heap_invariants.h"
#include "threads/medium_bins.h"
#include "threads/thread_cache.h"

namespace {

using pagemalloc::BuildMediumClasses;
using pagemalloc::kPageSize;
using pagemalloc::PageKind;

constexpr std::size_t kKiB = 1024;

using EighthTable = pagemalloc::MediumClassTable<65536, 262144, 8>;
using PageExactTable = pagemalloc::MediumClassTable<65536, 262144, 0>;
using WideTable = pagemalloc::MediumClassTable<65536, 524288, 8>;  // (1 MiB: 2 MiB chunks only)
using NoTable = pagemalloc::MediumClassTable<2048, 0, 8>;

TEST(MediumClassTable, EightPerDoublingAreEightKiBThenSixteenKiBApart) {
  ASSERT_EQ(EighthTable::kCount, 16u);
  for (unsigned c = 0; c < 8; ++c) EXPECT_EQ(EighthTable::kPages[c], 18u + 2 * c);
  for (unsigned c = 8; c < 16; ++c) EXPECT_EQ(EighthTable::kPages[c], 36u + 4 * (c - 8));
  EXPECT_EQ(EighthTable::rounded(64 * kKiB + 1), 72 * kKiB);
  EXPECT_EQ(EighthTable::rounded(129 * kKiB), 144 * kKiB);
  EXPECT_EQ(EighthTable::rounded(256 * kKiB), 256 * kKiB);
  EXPECT_EQ(EighthTable::rounded(300 * kKiB), 300 * kKiB) << "above the range: whole pages";
  EXPECT_EQ(EighthTable::class_of_length(36), 8u);
  EXPECT_EQ(EighthTable::class_of_length(37), EighthTable::kNone) << "no class is 37 pages";
  EXPECT_EQ(EighthTable::class_of_length(16), EighthTable::kNone) << "a slab class's length";
  EXPECT_EQ(EighthTable::class_of_length(65), EighthTable::kNone);
  for (std::size_t size = 64 * kKiB + 1; size <= 256 * kKiB; size += 1000) {
    const std::size_t usable = EighthTable::rounded(size);
    ASSERT_GE(usable, size);
    ASSERT_LE((usable - size) * 8, usable) << "at most an eighth past the request, " << size;
    ASSERT_EQ(EighthTable::class_of_size(size), EighthTable::class_holding(usable / kPageSize));
  }
  ASSERT_EQ(WideTable::kCount, 24u);
  EXPECT_EQ(WideTable::kPages[WideTable::kCount - 1], 128u);
}

// class_of_length's byte table gives what its definition says: the class whose length is
// exactly the page count, for every count up to past the range.
template <class Table>
void expect_exact_lengths() {
  for (std::size_t pages = 0; pages <= Table::kMaxPages + 2; ++pages) {
    const unsigned holding = Table::class_holding(pages);
    const unsigned exact =
        holding != Table::kNone && Table::kPages[holding] == pages ? holding : Table::kNone;
    ASSERT_EQ(Table::class_of_length(pages), exact) << pages << " pages";
  }
}

TEST(MediumClassTable, TheClassOfALengthIsTheOneOfExactlyThatLength) {
  expect_exact_lengths<EighthTable>();
  expect_exact_lengths<PageExactTable>();
  expect_exact_lengths<WideTable>();
}

TEST(MediumClassTable, PageExactKeepsEveryLengthAndNoneIsEmpty) {
  ASSERT_EQ(PageExactTable::kCount, 48u);
  for (std::size_t size = 64 * kKiB + 1; size <= 256 * kKiB; size += 999)
    ASSERT_EQ(PageExactTable::rounded(size), pagemalloc::PageCount::covering(size).bytes());
  EXPECT_FALSE(NoTable::kEnabled);
  EXPECT_EQ(NoTable::kCount, 0u);
  EXPECT_EQ(NoTable::class_holding(20), NoTable::kNone);
}

// A design's reach is its kMaxMediumSize, at most half a chunk (a medium block is a run of
// one chunk: the 2008 designs' 1 MiB chunks reach 512 KiB), and none without thread caches.
struct ReachOfAMebibyte {
  static constexpr bool kThreadCaches = true;
  static constexpr std::size_t kMaxMediumSize = 1024 * 1024;
};
struct ReachWithoutCaches : ReachOfAMebibyte {
  static constexpr bool kThreadCaches = false;
};
TEST(MediumClasses, TheReachIsAtMostHalfAChunkAndNoneWithoutThreadCaches) {
  EXPECT_EQ(pagemalloc::kMediumReachOf<ReachOfAMebibyte>,
            std::min<std::size_t>(1024 * kKiB, pagemalloc::kChunkSize / 2));
  EXPECT_EQ(pagemalloc::kMediumReachOf<ReachWithoutCaches>, 0u);
  EXPECT_LE(BuildMediumClasses::kMaxMediumSize, pagemalloc::kChunkSize / 2);
}

// Fake blocks (never read) on a table of their own (4 classes per doubling, the last 256 KiB),
// so that the process-wide claim is theirs and not the heap's.
using FakeTable = pagemalloc::MediumClassTable<65536, 262144, 4>;
static_assert(FakeTable::kCount == 8 && FakeTable::kPages[7] == 64);
using FakeBins = pagemalloc::MediumBins<FakeTable>;
void* fake(std::uintptr_t n) { return reinterpret_cast<void*>(n << 20); }

struct Sink {
  std::vector<void*> given;
  auto fn() {
    return
        [this](void* const* blocks, unsigned n) { given.insert(given.end(), blocks, blocks + n); };
  }
};

// Pushes block as a thread whose requests outrun its bin: after a miss (a pop of an empty bin,
// the bin emptied first and refilled), so that a full bin may grow.
bool push_in_use(FakeBins& bins, unsigned c, void* block, Sink& sink) {
  std::vector<void*> held;
  while (void* p = bins.pop(c)) held.push_back(p);
  EXPECT_EQ(bins.pop(c), nullptr);  // the miss
  for (auto it = held.rbegin(); it != held.rend(); ++it) EXPECT_TRUE(bins.try_push(c, *it));
  return bins.try_push(c, block) || bins.push_full(c, block, sink.fn());
}

TEST(MediumBins, ALimitGrowsByOneWithinTheThreadsBoundThenHalvesTheBin) {
  auto bins = std::make_unique<FakeBins>();
  Sink sink;
  const std::size_t before = FakeBins::claimed_by_all().load();
  EXPECT_FALSE(bins->try_push(7, fake(1))) << "a bin starts with no room";
  ASSERT_TRUE(bins->push_full(7, fake(1), sink.fn()));
  EXPECT_EQ(bins->limit(7), 1u);
  EXPECT_EQ(FakeBins::claimed_by_all().load(), before + 256 * kKiB);
  // 256 KiB blocks: the thread's bound lets its limits reach kThreadBytes / 256 KiB.
  const unsigned most = unsigned(FakeBins::kThreadBytes / (256 * kKiB));
  const unsigned cap = most < FakeBins::kSlots ? most : FakeBins::kSlots;
  for (std::uintptr_t i = 2; i <= cap; ++i) ASSERT_TRUE(push_in_use(*bins, 7, fake(i), sink));
  EXPECT_EQ(bins->limit(7), cap);
  EXPECT_TRUE(sink.given.empty());
  ASSERT_TRUE(push_in_use(*bins, 7, fake(100), sink));
  EXPECT_EQ(sink.given.size(), (cap + 1) / 2) << "the older half went back";
  EXPECT_EQ(sink.given.front(), fake(1));
  EXPECT_EQ(bins->pop(7), fake(100)) << "the newest comes out first";
  EXPECT_EQ(bins->check(), nullptr);
  bins->empty_all(sink.fn());
  EXPECT_EQ(FakeBins::claimed_by_all().load(), before) << "every limit given back";
  EXPECT_EQ(bins->pop(7), nullptr);
  EXPECT_EQ(bins->check(), nullptr);
}

TEST(MediumBins, ABinOnlyPushedToKeepsOneBlockAndGivesTheRestBack) {
  // A thread that frees blocks of a length others allocate (a consumer, a main thread freeing
  // what exited threads made) never finds its bin empty: it may not grow past one.
  auto bins = std::make_unique<FakeBins>();
  Sink sink;
  const std::size_t before = FakeBins::claimed_by_all().load();
  for (std::uintptr_t i = 1; i <= 8; ++i) {
    if (!bins->try_push(7, fake(i))) {
      ASSERT_TRUE(bins->push_full(7, fake(i), sink.fn()));
    }
  }
  EXPECT_EQ(bins->limit(7), 1u);
  EXPECT_EQ(bins->count(7), 1u);
  EXPECT_EQ(sink.given.size(), 7u) << "every block but the newest went to the arena";
  EXPECT_EQ(FakeBins::claimed_by_all().load(), before + 256 * kKiB);
  // Once a pop finds it empty, it may grow again.
  ASSERT_TRUE(push_in_use(*bins, 7, fake(9), sink));
  EXPECT_EQ(bins->limit(7), 2u);
  EXPECT_EQ(bins->check(), nullptr);
  bins->empty_all(sink.fn());
  EXPECT_EQ(FakeBins::claimed_by_all().load(), before);
}

TEST(MediumBins, EveryKTickUsesPushesAndPopsOfABinTickTheCacheOnce) {
  // The thread cache's decay ticks from medium calls come from the bins' own counts.
  auto bins = std::make_unique<FakeBins>();
  Sink sink;
  bool tick = false;
  ASSERT_FALSE(bins->try_push(7, fake(1), tick));
  ASSERT_TRUE(bins->push_full(7, fake(1), sink.fn(), tick));  // use 1
  unsigned ticks = tick ? 1 : 0;
  for (unsigned use = 2; use <= 4 * FakeBins::kTickUses; use += 2) {
    tick = false;
    void* p = bins->pop(7, tick);
    ASSERT_NE(p, nullptr);
    ticks += tick;
    tick = false;
    ASSERT_TRUE(bins->try_push(7, p, tick));
    ticks += tick;
  }
  EXPECT_EQ(ticks, 4u) << "one tick per kTickUses uses, pops and pushes alike";
  bins->empty_all(sink.fn());
  EXPECT_EQ(bins->check(), nullptr);
}

TEST(MediumBins, TheBoundOfAllThreadsStopsGrowthAndAnIdleBinIsEmptied) {
  Sink sink;
  std::vector<std::unique_ptr<FakeBins>> threads;
  std::uintptr_t next = 1;
  // Enough bins of 256 KiB blocks to reach kAllBytes: the last ones cannot grow.
  const std::size_t per_thread = FakeBins::kSlots * 256 * kKiB < FakeBins::kThreadBytes
                                     ? FakeBins::kSlots * 256 * kKiB
                                     : FakeBins::kThreadBytes / (256 * kKiB) * 256 * kKiB;
  const std::size_t needed = FakeBins::kAllBytes / per_thread + 2;
  unsigned refused = 0;
  for (std::size_t t = 0; t < needed; ++t) {
    threads.push_back(std::make_unique<FakeBins>());
    for (unsigned i = 0; i < FakeBins::kSlots; ++i) {
      if (!push_in_use(*threads.back(), 7, fake(next), sink)) ++refused;
      else ++next;
    }
  }
  EXPECT_GT(refused, 0u) << "a bin that may not grow takes nothing";
  EXPECT_LE(FakeBins::claimed_by_all().load(), FakeBins::kAllBytes);
  FakeBins& first = *threads.front();
  ASSERT_NE(first.count(7), 0u);
  first.trim_idle(sink.fn());  // the first look: used since (or never looked at)
  EXPECT_NE(first.count(7), 0u);
  first.trim_idle(sink.fn());  // no push or pop since the last look
  EXPECT_EQ(first.count(7), 0u);
  EXPECT_EQ(first.limit(7), 0u);
  for (auto& bins : threads) bins->empty_all(sink.fn());
  EXPECT_EQ(FakeBins::claimed_by_all().load(), 0u);
  EXPECT_EQ(sink.given.size(), next - 1) << "every block pushed came back once";
}

TEST(MediumBins, PushesThatFindNoRoomEmptyTheThreadsIdleBinsForTheLengthsItUsesNow) {
  // A thread moves to another length while the bound of all threads is taken, its own share by
  // a bin of a length it no longer uses: within 2 * kStarvedLook refused pushes that bin is
  // emptied and the new length's bin grows, while a bin the thread still uses keeps its room.
  Sink sink;
  std::vector<std::unique_ptr<FakeBins>> threads;
  threads.push_back(std::make_unique<FakeBins>());
  FakeBins& mover = *threads.front();
  std::uintptr_t next = 1;
  ASSERT_TRUE(push_in_use(mover, 6, fake(next++), sink));  // a length still in use
  for (unsigned i = 0; i < FakeBins::kSlots; ++i)
    ASSERT_TRUE(push_in_use(mover, 7, fake(next++), sink));  // the length left behind
  while (FakeBins::claimed_by_all().load() + FakeTable::bytes(0) <= FakeBins::kAllBytes) {
    threads.push_back(std::make_unique<FakeBins>());  // other threads take the rest of the bound
    for (unsigned i = 0; i < FakeBins::kSlots; ++i) {
      if (!push_in_use(*threads.back(), 0, fake(next), sink)) break;
      ++next;
    }
  }
  const std::size_t given_before = sink.given.size();
  unsigned refused = 0;
  for (unsigned i = 0; i < 2 * FakeBins::kStarvedLook; ++i) {
    void* in_use = mover.pop(6);  // the length in use: a pop and a push between the looks
    ASSERT_NE(in_use, nullptr);
    ASSERT_TRUE(mover.try_push(6, in_use));
    if (push_in_use(mover, 0, fake(next), sink)) break;
    ++refused;
  }
  EXPECT_EQ(refused, 2 * FakeBins::kStarvedLook - 1) << "the second look made room";
  EXPECT_EQ(mover.count(0), 1u);
  EXPECT_EQ(mover.limit(7), 0u) << "the idle bin was emptied";
  EXPECT_EQ(sink.given.size() - given_before, FakeBins::kSlots) << "its blocks went back";
  EXPECT_EQ(mover.limit(6), 1u) << "the bin in use keeps its room";
  EXPECT_EQ(mover.check(), nullptr);
  for (auto& bins : threads) bins->empty_all(sink.fn());
  EXPECT_EQ(FakeBins::claimed_by_all().load(), 0u);
}

TEST(MediumStash, KeepsEachClassLastInFirstOutWithinItsBounds) {
  auto stash = std::make_unique<pagemalloc::MediumStash<EighthTable>>();
  EXPECT_EQ(stash->take(3), nullptr);
  ASSERT_TRUE(stash->put(3, fake(1)));
  ASSERT_TRUE(stash->put(3, fake(2)));
  EXPECT_EQ(stash->total_pages(), 2u * EighthTable::kPages[3]);
  EXPECT_EQ(stash->take(3), fake(2));
  unsigned kept = 0;
  while (stash->put(15, fake(10 + kept))) ++kept;
  EXPECT_LE(kept, pagemalloc::MediumStash<EighthTable>::kSlots);
  EXPECT_LE(kept * 256 * kKiB, pagemalloc::MediumStash<EighthTable>::kMaxBytes);
  std::size_t flushed = 0;
  stash->flush([&](void*, unsigned) { ++flushed; });
  EXPECT_EQ(flushed, kept + 1);
  EXPECT_TRUE(stash->empty());
}

// The allocator with medium classes.
class MediumBlocks : public ::testing::Test {
 protected:
  void SetUp() override {
    if constexpr (!BuildMediumClasses::kEnabled)
      GTEST_SKIP() << "this design has no medium classes (no thread caches)";
  }
  static PageKind kind_of(const void* p) {
    return pagemalloc::load_entry(pagemalloc::chunk_base_of(p), pagemalloc::page_index_of(p))
        .kind();
  }
  static const char* problems() {
    const char* problem = pagemalloc::check_heap_invariants();
    return problem == nullptr ? "(none)" : problem;
  }
  // Two blocks of `length` one after the other (a fresh chunk's runs are carved in order), the
  // second freed into its bin, then the first grown to twice its length.
  static void grow_into_the_block_a_bin_holds(std::size_t length) {
    std::vector<void*> tried;
    void* a = nullptr;
    void* b = nullptr;
    for (int i = 0; i < 64 && b == nullptr; ++i) {
      void* p = pm_malloc(length);
      void* q = pm_malloc(length);
      if (static_cast<std::byte*>(q) == static_cast<std::byte*>(p) + length) {
        a = p;
        b = q;
      } else {
        tried.push_back(p);
        tried.push_back(q);
      }
    }
    ASSERT_NE(b, nullptr) << "no two blocks in a row";
    pm_free(b);
    ASSERT_EQ(kind_of(b), PageKind::ThreadCached);
    void* grown = pm_rallocx(a, 2 * length, PM_ALIGN(64));
    EXPECT_EQ(grown, a) << "grown in place once the bins gave the block after it back";
    EXPECT_STREQ(problems(), "(none)");
    pm_free(grown);
    for (void* p : tried) pm_free(p);
  }
};

TEST_F(MediumBlocks, AFreedBlockComesBackFromTheThreadsCacheAtItsClassLength) {
  void* p = pm_malloc(100 * kKiB);
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(pm_malloc_usable_size(p), 104 * kKiB);
  EXPECT_EQ(pm_nallocx(100 * kKiB, 0), 104 * kKiB);
  pm_free(p);
  EXPECT_EQ(kind_of(p), PageKind::ThreadCached);
  EXPECT_STREQ(problems(), "(none)");
  void* again = pm_malloc(97 * kKiB);  // the same class
  EXPECT_EQ(again, p);
  EXPECT_EQ(kind_of(again), PageKind::Large);
  EXPECT_EQ(pm_sallocx(again, 0), 104 * kKiB);
  pm_free(again);
}

TEST_F(MediumBlocks, ABlockOfTheLargestClassComesBackFromTheThreadsCache) {
  // The largest class (1 MiB in today's design): a request a little past the class below it.
  const std::size_t largest = BuildMediumClasses::kMaxMediumSize;
  const unsigned top = BuildMediumClasses::kCount - 1;
  const std::size_t below = top == 0 ? 64 * kKiB : BuildMediumClasses::bytes(top - 1);
  void* p = pm_malloc(largest);
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(pm_malloc_usable_size(p), largest);
  pm_free(p);
  EXPECT_EQ(kind_of(p), PageKind::ThreadCached);
  void* again = pm_malloc(below + 1);
  EXPECT_EQ(again, p) << "the same class, from the bin";
  EXPECT_EQ(pm_malloc_usable_size(again), largest);
  EXPECT_EQ(kind_of(again), PageKind::Large);
  EXPECT_STREQ(problems(), "(none)");
  pm_free(again);
}

TEST_F(MediumBlocks, ManyBlocksOfEveryClassKeepTheBoundsAndTheInvariants) {
  std::mt19937_64 rng(7);
  std::uniform_int_distribution<std::size_t> length(64 * kKiB + 1,
                                                    BuildMediumClasses::kMaxMediumSize);
  std::vector<void*> live(300, nullptr);
  for (int round = 0; round < 4000; ++round) {
    void*& slot = live[rng() % live.size()];
    pm_free(slot);
    slot = pm_malloc(length(rng));
    ASSERT_NE(slot, nullptr);
    static_cast<unsigned char*>(slot)[0] = 1;
  }
  EXPECT_STREQ(problems(), "(none)");
  for (void*& p : live) pm_free(p);
  EXPECT_STREQ(problems(), "(none)");
  const auto* cache = pagemalloc::ThreadCache::current();
  ASSERT_NE(cache, nullptr);
  EXPECT_EQ(cache->medium().check(), nullptr);
  EXPECT_LE(cache->medium().bytes_held(), pagemalloc::ThreadCache::Medium::kThreadBytes);
  EXPECT_TRUE(cache->holds_medium());
  pm_purge();  // the thread's cache, then the arena's stash, given back
  EXPECT_FALSE(cache->holds_medium());
  EXPECT_EQ(cache->medium().bytes_held(), 0u);
  EXPECT_STREQ(problems(), "(none)");
}

TEST_F(MediumBlocks, ABlockOfAnotherArenaGoesHomeNotIntoTheFreeingThreadsBins) {
  const unsigned arena = pm_arena_create();
  ASSERT_NE(arena, 0u);
  void* p = pm_mallocx(128 * kKiB, PM_ARENA(arena));
  ASSERT_NE(p, nullptr);
  pm_free(p);
  EXPECT_NE(kind_of(p), PageKind::ThreadCached) << "an explicit arena's block stays its arena's";
  pm_free(pm_malloc(16));  // this thread's cache, if it had none
  const auto* cache = pagemalloc::ThreadCache::current();
  ASSERT_NE(cache, nullptr);
  const unsigned c = BuildMediumClasses::class_of_length(32);
  EXPECT_FALSE(cache->medium().holds(c, p));
  EXPECT_STREQ(problems(), "(none)");
  EXPECT_EQ(pm_arena_destroy(arena), 0);
  // A block of another automatic arena (the suite runs with two: tests/CMakeLists.txt), made by
  // a thread of that arena, freed here: back to its arena, not into this thread's bins.
  auto arena_of = [](const void* block) {
    return pagemalloc::AddressMap::owner_of<pagemalloc::Arena>(
        pagemalloc::address_map().get(pagemalloc::chunk_base_of(block)));
  };
  void* foreign = nullptr;
  for (int tries = 0; tries < 16 && foreign == nullptr; ++tries) {
    void* made = nullptr;
    std::thread([&] { made = pm_malloc(128 * kKiB); }).join();
    if (arena_of(made) != cache->arena()) foreign = made;
    else pm_free(made);
  }
  if (foreign == nullptr) GTEST_SKIP() << "every thread got this thread's arena";
  pm_free(foreign);
  EXPECT_NE(kind_of(foreign), PageKind::ThreadCached);
  EXPECT_FALSE(cache->medium().holds(c, foreign));
  EXPECT_STREQ(problems(), "(none)");
}

TEST_F(MediumBlocks, AThreadsExitGivesItsBlocksBack) {
  std::vector<void*> freed;
  const std::size_t claimed = pagemalloc::ThreadCache::Medium::claimed_by_all().load();
  std::thread([&] {
    std::vector<void*> blocks;
    for (int i = 0; i < 20; ++i) blocks.push_back(pm_malloc(200 * kKiB));
    for (void* p : blocks) pm_free(p);
    for (void* p : blocks)
      if (kind_of(p) == PageKind::ThreadCached) freed.push_back(p);
  }).join();
  EXPECT_FALSE(freed.empty()) << "the thread's bins held some of its blocks";
  for (void* p : freed) EXPECT_NE(kind_of(p), PageKind::ThreadCached);
  EXPECT_EQ(pagemalloc::ThreadCache::Medium::claimed_by_all().load(), claimed);
  EXPECT_STREQ(problems(), "(none)");
}

TEST_F(MediumBlocks, ABlockGrowsInPlaceIntoPagesTheThreadsBinsHeld) {
  grow_into_the_block_a_bin_holds(128 * kKiB);
}

TEST_F(MediumBlocks, ABlockOfHalfAMebibyteGrowsInPlaceIntoPagesTheThreadsBinsHeld) {
  if constexpr (BuildMediumClasses::kMaxMediumSize < 1024 * kKiB)
    GTEST_SKIP() << "this design's medium classes end below 1 MiB";
  grow_into_the_block_a_bin_holds(512 * kKiB);
}

class MediumBlocksDeathTest : public MediumBlocks {};

TEST_F(MediumBlocksDeathTest, ASecondFreeOfACachedBlockIsReported) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      {
        void* p = pm_malloc(150 * kKiB);
        pm_free(p);
        pm_free(p);
      },
      "pagemalloc: pm_free\\(0x[0-9a-f]+\\): double free");
  EXPECT_DEATH(
      {
        void* p = pm_malloc(150 * kKiB);
        pm_free(p);
        pm_malloc_usable_size(p);
      },
      "not a live block");
}

}  // namespace
