// The run managers over a Pal that hands over used chunks (ReusesChunks, pal.h), as the huge
// blocks' manager hands an arena the granules of the extents it caches: the run manager takes
// such a chunk before it reserves a fresh one, clears its page map (bad_input_test: a pointer
// into its free pages is still reported as misuse), and takes its pages as dirty. So no run
// carved from it is ever reported zeroed, its free runs coalesce and purge as any freed run's
// do, and a used chunk left wholly free goes back to the OS on a purge. Every test runs over
// each variant, with chunks filled with a byte whose page map entries would read as slabs
// (bit 63 set) if they were taken as they are.
#include <gtest/gtest.h>

#include <cstddef>
#include <cstring>
#include <vector>

#include "pagemap/pagemap_runs.h"
#include "pagemap/pages.h"
#include "pagemap/pal.h"
#include "pagemap/run_manager.h"
#include "pagemap/testing/pal_fake.h"
#include "rbtree/allocated_runs_tree.h"
#include "rbtree/hybrid_runs.h"
#include "rbtree/rbtree_runs.h"

namespace pagemalloc {
namespace {

using PageRun = ::pagemalloc::Run;

constexpr std::byte kStale{0xff};

// The fake OS layer, with chunks to hand over used: each is reserved from the fake and
// filled with kStale when the test asks for it.
class UsedChunkPal : public FakePal {
 public:
  UsedChunkPal() : FakePal(std::size_t{32} << 20) {}

  std::byte* add_used_chunk() {
    auto* chunk = static_cast<std::byte*>(reserve(kChunkSize, kChunkSize));
    if (chunk != nullptr) {
      std::memset(chunk, int(kStale), kChunkSize);
      used_.push_back(chunk);
    }
    return chunk;
  }
  void* take_used_chunk() {
    if (used_.empty()) return nullptr;
    std::byte* chunk = used_.back();
    used_.pop_back();
    return chunk;
  }

 private:
  std::vector<std::byte*> used_;
};
static_assert(ReusesChunks<UsedChunkPal>);
static_assert(!ReusesChunks<FakePal>);

bool PageStartsWith(const PageRun& run, std::byte value) {
  for (std::size_t i = 0; i < run.pages.value(); ++i)
    if (run.base()[i * kPageSize] != value) return false;
  return true;
}

template <class Runs>
class UsedChunksTest : public testing::Test {
 protected:
  static constexpr PageCount kUsable = Runs::Layout::kUsablePages;

  testing::AssertionResult InvariantsHold() const {
    if (const char* problem = runs_.check_invariants())
      return testing::AssertionFailure() << "check_invariants: " << problem;
    return testing::AssertionSuccess();
  }

  UsedChunkPal pal_;
  Runs runs_{pal_};
};

using Variants =
    testing::Types<PagemapRuns<UsedChunkPal>, HybridRuns<UsedChunkPal>, RbtreeRuns<UsedChunkPal>,
                   AllocatedRunsTree<RbtreeRuns<UsedChunkPal>>>;
TYPED_TEST_SUITE(UsedChunksTest, Variants);

TYPED_TEST(UsedChunksTest, AUsedChunkIsTakenBeforeAFreshOneAndItsPagesAreDirty) {
  std::byte* used = this->pal_.add_used_chunk();
  ASSERT_NE(used, nullptr);
  const int reserves = this->pal_.reserve_calls();

  AllocatedRun got = this->runs_.alloc(PageCount(3));
  ASSERT_TRUE(got.run);
  EXPECT_EQ(got.run.chunk, used);
  EXPECT_FALSE(got.zeroed);
  EXPECT_TRUE(PageStartsWith(got.run, kStale)) << "the pages are handed out as they were";
  EXPECT_EQ(this->pal_.reserve_calls(), reserves);
  EXPECT_EQ(this->runs_.free_pages(), TestFixture::kUsable - PageCount(3));
  EXPECT_EQ(this->runs_.dirty_pages(), TestFixture::kUsable - PageCount(3));
  EXPECT_TRUE(this->InvariantsHold());

  // Once none is left, the next chunk is a fresh one, zeroed.
  AllocatedRun rest = this->runs_.alloc(TestFixture::kUsable - PageCount(3));
  ASSERT_TRUE(rest.run);
  EXPECT_EQ(rest.run.chunk, used);
  EXPECT_FALSE(rest.zeroed);
  AllocatedRun fresh = this->runs_.alloc(PageCount(3));
  ASSERT_TRUE(fresh.run);
  EXPECT_NE(fresh.run.chunk, used);
  EXPECT_TRUE(fresh.zeroed);
  EXPECT_EQ(this->pal_.reserve_calls(), reserves + 1);
  EXPECT_TRUE(this->InvariantsHold());
}

TYPED_TEST(UsedChunksTest, RunsOfAUsedChunkCoalesceAndAreNeverReportedZeroed) {
  ASSERT_NE(this->pal_.add_used_chunk(), nullptr);
  std::vector<PageRun> runs;
  for (std::size_t pages : {1, 5, 2, 9, 1, 4}) {
    AllocatedRun got = this->runs_.alloc(PageCount(pages));
    ASSERT_TRUE(got.run);
    EXPECT_FALSE(got.zeroed) << pages << " pages";
    runs.push_back(got.run);
  }
  for (std::size_t i : {1, 3, 0, 5, 2, 4}) {
    this->runs_.free(runs[i]);
    EXPECT_TRUE(this->InvariantsHold()) << "after freeing run " << i;
  }
  EXPECT_EQ(this->runs_.free_pages(), TestFixture::kUsable);
  EXPECT_EQ(this->runs_.dirty_pages(), TestFixture::kUsable);
  AllocatedRun whole = this->runs_.alloc(TestFixture::kUsable);
  ASSERT_TRUE(whole.run) << "the freed runs coalesced into the whole chunk";
  EXPECT_FALSE(whole.zeroed);
  EXPECT_TRUE(this->InvariantsHold());
}

TYPED_TEST(UsedChunksTest, AUsedChunkIsPurgedByAgeAndReleasedWhenWhollyFree) {
  ASSERT_NE(this->pal_.add_used_chunk(), nullptr);
  this->runs_.advance_clock(1000);
  PageRun run = this->runs_.alloc(PageCount(4)).run;
  ASSERT_TRUE(run);
  this->runs_.advance_clock(1500);
  EXPECT_EQ(this->runs_.purge(1000).value(), 0u) << "taken at 1000: too young at 1500";
  EXPECT_EQ(this->runs_.purge(500), TestFixture::kUsable - PageCount(4));
  EXPECT_EQ(this->runs_.dirty_pages().value(), 0u);
  // Purged pages read zero (the fake's decommit): a run carved from them is zeroed.
  AllocatedRun clean = this->runs_.alloc(PageCount(2));
  ASSERT_TRUE(clean.run);
  EXPECT_TRUE(clean.zeroed);
  EXPECT_TRUE(PageStartsWith(clean.run, std::byte{0}));
  EXPECT_TRUE(this->InvariantsHold());

  this->runs_.free(clean.run);
  this->runs_.free(run);
  EXPECT_EQ(this->pal_.live_reservations(), 1);
  this->runs_.purge(0);
  EXPECT_EQ(this->runs_.chunks(), 0u);
  EXPECT_EQ(this->pal_.live_reservations(), 0) << "the used chunk went back to the OS";
  EXPECT_TRUE(this->InvariantsHold());
}

}  // namespace
}  // namespace pagemalloc
