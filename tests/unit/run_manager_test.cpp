// The run managers' directed tests, a TYPED_TEST each over RunManagerTypes: best fit,
// coalescing of adjacent frees, trimming the head or shrinking the tail of a run, growing into
// and being stopped by the next run, runs of kMaxRunPages, dirty pages and the decay (purge by
// age or oldest first, purged pages read zero, wholly free chunks go back to the OS), the OS
// refusing memory, and the instrumentation counters.
#include <gtest/gtest.h>

#include "run_manager_support.h"

namespace pagemalloc {
namespace {

constexpr std::size_t kDirectedPalCapacity = std::size_t{32} << 20;  // 16 chunks

// --- Directed tests -------------------------------------------------------------------------

template <class Runs>
class RunManagerTest : public testing::Test {
 protected:
  static constexpr PageCount kUsable = kUsablePages<Runs>;
  static constexpr PageIndex kFirst = kFirstRunPage<Runs>;

  PageRun Alloc(std::size_t pages) {
    AllocatedRun got = runs_.alloc(PageCount(pages));
    EXPECT_TRUE(got.run) << "alloc(" << pages << ")";
    EXPECT_EQ(got.run.pages.value(), pages);
    return got.run;
  }

  // Allocates runs until no free page is left in the existing chunks. Requires: their free
  // pages form runs of kMaxRunPages or of all that is left (as in a chunk carved from its start).
  std::vector<PageRun> FillExistingChunks() {
    std::vector<PageRun> fillers;
    std::size_t chunks = runs_.chunks();
    while (runs_.free_pages().value() > 0) {
      std::size_t n = std::min(runs_.free_pages().value(), kMaxRunPages.value());
      fillers.push_back(Alloc(n));
      if (runs_.chunks() != chunks) {
        ADD_FAILURE() << "filling the existing chunks took a new chunk";
        break;
      }
    }
    return fillers;
  }

  FakePal pal_{kDirectedPalCapacity};
  Runs runs_{pal_};
};
TYPED_TEST_SUITE(RunManagerTest, RunManagerTypes);

TYPED_TEST(RunManagerTest, FreshRunManagerIsEmpty) {
  EXPECT_EQ(this->runs_.chunks(), 0u);
  EXPECT_EQ(this->runs_.free_pages().value(), 0u);
  EXPECT_EQ(this->runs_.dirty_pages().value(), 0u);
  EXPECT_TRUE(InvariantsHold(this->runs_));
  EXPECT_EQ(this->runs_.purge(0).value(), 0u);
}

TYPED_TEST(RunManagerTest, FirstAllocTakesOneZeroedChunk) {
  AllocatedRun got = this->runs_.alloc(PageCount(3));
  ASSERT_TRUE(got.run);
  EXPECT_TRUE(got.zeroed);
  EXPECT_TRUE(ReadsZero(got.run));
  EXPECT_EQ(this->runs_.chunks(), 1u);
  EXPECT_EQ(this->pal_.live_reservations(), 1);
  EXPECT_TRUE(is_chunk_aligned(got.run.chunk));
  EXPECT_GE(got.run.first, TestFixture::kFirst);
  EXPECT_EQ(this->runs_.free_pages(), TestFixture::kUsable - PageCount(3));
  EXPECT_TRUE(InvariantsHold(this->runs_));
}

TYPED_TEST(RunManagerTest, AdjacentFreesCoalesceIntoOneRun) {
  for (bool left_first : {true, false}) {
    SCOPED_TRACE(left_first ? "left run freed first" : "right run freed first");
    PageRun left = this->Alloc(7);
    PageRun right = this->Alloc(12);
    ASSERT_EQ(right.first, left.end()) << "a fresh chunk is carved from its start";
    FillPattern(left, 1);
    FillPattern(right, 2);
    std::vector<PageRun> fillers = this->FillExistingChunks();
    ASSERT_EQ(this->runs_.free_pages().value(), 0u);
    std::size_t chunks = this->runs_.chunks();

    this->runs_.free(left_first ? left : right);
    ASSERT_TRUE(InvariantsHold(this->runs_));
    this->runs_.free(left_first ? right : left);
    ASSERT_TRUE(InvariantsHold(this->runs_));
    EXPECT_EQ(this->runs_.free_pages().value(), 19u);

    // The only free run is the coalesced one: one alloc of the combined size takes it.
    AllocatedRun both = this->runs_.alloc(PageCount(19));
    ASSERT_TRUE(both.run);
    EXPECT_EQ(both.run.base(), left.base());
    EXPECT_EQ(this->runs_.chunks(), chunks);
    EXPECT_EQ(this->runs_.free_pages().value(), 0u);
    EXPECT_FALSE(both.zeroed) << "the pages were used and not purged";
    EXPECT_TRUE(InvariantsHold(this->runs_));

    this->runs_.free(both.run);
    for (PageRun filler : fillers) this->runs_.free(filler);
    ASSERT_TRUE(InvariantsHold(this->runs_));
  }
}

TYPED_TEST(RunManagerTest, FreeBetweenTwoFreeRunsCoalescesAllThree) {
  PageRun a = this->Alloc(5);
  PageRun b = this->Alloc(6);
  PageRun c = this->Alloc(7);
  PageRun guard = this->Alloc(1);
  std::vector<PageRun> fillers = this->FillExistingChunks();
  FillPattern(guard, 9);
  this->runs_.free(a);
  this->runs_.free(c);
  this->runs_.free(b);
  ASSERT_TRUE(InvariantsHold(this->runs_));
  EXPECT_EQ(this->runs_.free_pages().value(), 18u);
  AllocatedRun all = this->runs_.alloc(PageCount(18));
  ASSERT_TRUE(all.run);
  EXPECT_EQ(all.run.base(), a.base());
  EXPECT_EQ(this->runs_.chunks(), 1u);
  EXPECT_TRUE(HasPattern(guard, 9));
  EXPECT_TRUE(InvariantsHold(this->runs_));
}

TYPED_TEST(RunManagerTest, FreeingEverythingLeavesOneWholeFreeRun) {
  std::vector<PageRun> runs;
  for (std::size_t n : {3, 1, 40, 2, 17, 9}) runs.push_back(this->Alloc(n));
  std::shuffle(runs.begin(), runs.end(), std::mt19937_64(BaseSeed()));
  for (PageRun run : runs) {
    this->runs_.free(run);
    ASSERT_TRUE(InvariantsHold(this->runs_));
  }
  EXPECT_EQ(this->runs_.free_pages(), TestFixture::kUsable);
  AllocatedRun biggest = this->runs_.alloc(kMaxRunPages);
  ASSERT_TRUE(biggest.run);
  EXPECT_EQ(this->runs_.chunks(), 1u);
  EXPECT_EQ(biggest.run.first, TestFixture::kFirst);
}

TYPED_TEST(RunManagerTest, AllocTakesTheBestFittingFreeRun) {
  // Free runs of 3, 8 and 5 pages between live walls, then the rest of the chunk.
  PageRun three = this->Alloc(3);
  this->Alloc(1);
  PageRun eight = this->Alloc(8);
  this->Alloc(1);
  PageRun five = this->Alloc(5);
  this->Alloc(1);
  this->runs_.free(three);
  this->runs_.free(eight);
  this->runs_.free(five);
  ASSERT_TRUE(InvariantsHold(this->runs_));

  AllocatedRun four = this->runs_.alloc(PageCount(4));
  ASSERT_TRUE(four.run);
  EXPECT_EQ(four.run.base(), five.base()) << "4 pages fit best in the 5-page run";
  AllocatedRun two = this->runs_.alloc(PageCount(2));
  ASSERT_TRUE(two.run);
  EXPECT_EQ(two.run.base(), three.base()) << "2 pages fit best in the 3-page run";
  AllocatedRun six = this->runs_.alloc(PageCount(6));
  ASSERT_TRUE(six.run);
  EXPECT_EQ(six.run.base(), eight.base()) << "6 pages fit best in the 8-page run";
  AllocatedRun nine = this->runs_.alloc(PageCount(9));
  ASSERT_TRUE(nine.run);
  EXPECT_GT(nine.run.base(), five.base()) << "9 pages fit only in the rest of the chunk";
  EXPECT_EQ(this->runs_.chunks(), 1u);
  EXPECT_TRUE(InvariantsHold(this->runs_));
}

TYPED_TEST(RunManagerTest, GrowInPlaceTakesTheFollowingFreeRun) {
  PageRun run = this->Alloc(4);
  FillPattern(run, 3);
  PageCount free_before = this->runs_.free_pages();

  ASSERT_TRUE(this->runs_.grow_in_place(run, PageCount(20)));
  run.pages = PageCount(20);
  EXPECT_EQ(this->runs_.free_pages(), free_before - PageCount(16));
  EXPECT_TRUE(InvariantsHold(this->runs_));
  FillPattern(run, 3, 4);

  // The next run is carved right after the grown one: nothing overlaps.
  PageRun next = this->Alloc(10);
  EXPECT_GE(next.base(), run.base() + run.pages.bytes());
  FillPattern(next, 4);
  EXPECT_TRUE(HasPattern(run, 3));
  EXPECT_TRUE(InvariantsHold(this->runs_));
}

TYPED_TEST(RunManagerTest, GrowInPlaceFailsWhenTheNextRunIsAllocated) {
  PageRun run = this->Alloc(4);
  PageRun next = this->Alloc(6);
  ASSERT_EQ(next.first, run.end());
  FillPattern(run, 5);
  FillPattern(next, 6);
  PageCount free_before = this->runs_.free_pages();

  EXPECT_FALSE(this->runs_.grow_in_place(run, PageCount(5)));
  EXPECT_EQ(this->runs_.free_pages(), free_before);
  EXPECT_TRUE(HasPattern(run, 5));
  EXPECT_TRUE(HasPattern(next, 6));
  EXPECT_TRUE(InvariantsHold(this->runs_));

  // Growing to its own length or less is a success that changes nothing.
  EXPECT_TRUE(this->runs_.grow_in_place(run, PageCount(4)));
  EXPECT_TRUE(this->runs_.grow_in_place(run, PageCount(2)));
  EXPECT_EQ(this->runs_.free_pages(), free_before);
  EXPECT_TRUE(InvariantsHold(this->runs_));
}

TYPED_TEST(RunManagerTest, GrowInPlaceFailsWhenTheFollowingFreeRunIsTooShort) {
  PageRun run = this->Alloc(4);
  PageRun hole = this->Alloc(3);
  PageRun wall = this->Alloc(2);
  ASSERT_EQ(hole.first, run.end());
  ASSERT_EQ(wall.first, hole.end());
  this->runs_.free(hole);  // three free pages between run and wall
  FillPattern(run, 7);
  FillPattern(wall, 8);
  PageCount free_before = this->runs_.free_pages();

  EXPECT_FALSE(this->runs_.grow_in_place(run, PageCount(8)));
  EXPECT_EQ(this->runs_.free_pages(), free_before);
  EXPECT_TRUE(InvariantsHold(this->runs_));

  EXPECT_TRUE(this->runs_.grow_in_place(run, PageCount(7)));  // exactly the hole
  EXPECT_EQ(this->runs_.free_pages(), free_before - PageCount(3));
  run.pages = PageCount(7);
  FillPattern(run, 7, 4);
  EXPECT_TRUE(HasPattern(run, 7));
  EXPECT_TRUE(HasPattern(wall, 8));
  EXPECT_TRUE(InvariantsHold(this->runs_));
  EXPECT_FALSE(this->runs_.grow_in_place(run, PageCount(8)));
}

TYPED_TEST(RunManagerTest, ShrinkInPlaceGivesPagesBackThatCoalesceWithTheFollowingFreeRun) {
  PageRun run = this->Alloc(30);
  FillPattern(run, 10);
  PageCount free_before = this->runs_.free_pages();

  this->runs_.shrink_in_place(run, PageCount(10));
  run.pages = PageCount(10);
  EXPECT_EQ(this->runs_.free_pages(), free_before + PageCount(20));
  EXPECT_TRUE(HasPattern(run, 10));
  EXPECT_TRUE(InvariantsHold(this->runs_));

  // The 20 pages joined the free run after them: a run longer than that free run was before
  // the shrink fits in this chunk, right after the shrunk run.
  PageCount longer = std::min(TestFixture::kUsable - PageCount(10), kMaxRunPages);
  ASSERT_GT(longer, TestFixture::kUsable - PageCount(30));
  AllocatedRun after = this->runs_.alloc(longer);
  ASSERT_TRUE(after.run);
  EXPECT_EQ(this->runs_.chunks(), 1u);
  EXPECT_EQ(after.run.first, run.end());
  EXPECT_TRUE(HasPattern(run, 10));
  EXPECT_TRUE(InvariantsHold(this->runs_));
}

TYPED_TEST(RunManagerTest, ShrinkThenGrowBackInPlace) {
  PageRun run = this->Alloc(16);
  PageRun wall = this->Alloc(1);
  FillPattern(run, 11);
  FillPattern(wall, 12);
  this->runs_.shrink_in_place(run, PageCount(5));
  EXPECT_TRUE(InvariantsHold(this->runs_));
  run.pages = PageCount(5);
  EXPECT_TRUE(this->runs_.grow_in_place(run, PageCount(16)));
  run.pages = PageCount(16);
  EXPECT_FALSE(this->runs_.grow_in_place(run, PageCount(17)));
  EXPECT_TRUE(HasPattern(PageRun{run.chunk, run.first, PageCount(5)}, 11));
  EXPECT_TRUE(HasPattern(wall, 12));
  EXPECT_TRUE(InvariantsHold(this->runs_));

  // Shrinking to its own length changes nothing.
  PageCount free_before = this->runs_.free_pages();
  this->runs_.shrink_in_place(run, PageCount(16));
  EXPECT_EQ(this->runs_.free_pages(), free_before);
  EXPECT_TRUE(InvariantsHold(this->runs_));
}

TYPED_TEST(RunManagerTest, TrimHeadFreesTheFirstPagesAndKeepsTheRest) {
  PageRun run = this->Alloc(12);
  PageRun wall = this->Alloc(1);
  FillPattern(run, 13);
  FillPattern(wall, 14);
  PageCount free_before = this->runs_.free_pages();

  this->runs_.trim_head(run, PageCount(3));
  ASSERT_TRUE(InvariantsHold(this->runs_));
  EXPECT_EQ(this->runs_.free_pages(), free_before + PageCount(3));
  PageRun rest{run.chunk, run.first + PageCount(3), PageCount(9)};
  EXPECT_TRUE(HasPattern(rest, 13));
  EXPECT_TRUE(HasPattern(wall, 14));

  // The head is a free run of its own: an exact fit takes it back.
  AllocatedRun head = this->runs_.alloc(PageCount(3));
  ASSERT_TRUE(head.run);
  EXPECT_EQ(head.run.base(), run.base());
  EXPECT_TRUE(HasPattern(rest, 13));
  EXPECT_TRUE(InvariantsHold(this->runs_));

  // The rest is a run of its own: it can be trimmed again, shrunk and freed whole.
  this->runs_.trim_head(rest, PageCount(2));
  rest = PageRun{rest.chunk, rest.first + PageCount(2), PageCount(7)};
  this->runs_.shrink_in_place(rest, PageCount(4));
  rest.pages = PageCount(4);
  ASSERT_TRUE(InvariantsHold(this->runs_));
  EXPECT_TRUE(HasPattern(rest, 13));
  this->runs_.free(rest);
  EXPECT_TRUE(InvariantsHold(this->runs_));
  EXPECT_EQ(this->runs_.free_pages(), free_before + PageCount(12) - head.run.pages);
}

TYPED_TEST(RunManagerTest, TrimHeadCoalescesWithTheFreeRunBeforeIt) {
  PageRun before = this->Alloc(5);
  PageRun run = this->Alloc(10);
  PageRun wall = this->Alloc(1);
  std::vector<PageRun> fillers = this->FillExistingChunks();
  FillPattern(run, 30);
  FillPattern(wall, 31);
  this->runs_.free(before);
  this->runs_.trim_head(run, PageCount(4));
  ASSERT_TRUE(InvariantsHold(this->runs_));
  EXPECT_EQ(this->runs_.free_pages().value(), 9u);

  AllocatedRun joined = this->runs_.alloc(PageCount(9));
  ASSERT_TRUE(joined.run);
  EXPECT_EQ(joined.run.base(), before.base());
  EXPECT_EQ(this->runs_.chunks(), 1u);
  EXPECT_TRUE(HasPattern(PageRun{run.chunk, run.first + PageCount(4), PageCount(6)}, 30));
  EXPECT_TRUE(HasPattern(wall, 31));
  EXPECT_TRUE(InvariantsHold(this->runs_));
}

TYPED_TEST(RunManagerTest, TrimHeadOfNoPagesChangesNothing) {
  PageRun run = this->Alloc(6);
  this->Alloc(1);
  PageCount free_before = this->runs_.free_pages();
  this->runs_.trim_head(run, PageCount(0));
  EXPECT_EQ(this->runs_.free_pages(), free_before);
  EXPECT_TRUE(InvariantsHold(this->runs_));
  this->runs_.free(run);
  EXPECT_EQ(this->runs_.free_pages(), free_before + PageCount(6));
  EXPECT_TRUE(InvariantsHold(this->runs_));
}

// The page where a run is later split may have been the end of a free run before: the old
// boundary tag there must not be taken for a free neighbour.
TYPED_TEST(RunManagerTest, TrimHeadOfARunBuiltFromCoalescedRunsKeepsTheRest) {
  PageRun first = this->Alloc(10);
  PageRun second = this->Alloc(10);
  PageRun wall = this->Alloc(1);
  this->runs_.free(second);
  this->runs_.free(first);  // one free run of 20 pages; its page 10 was a free run's first page
  PageRun whole = this->Alloc(20);
  ASSERT_EQ(whole.base(), first.base());
  FillPattern(whole, 15);
  FillPattern(wall, 16);
  PageCount free_before = this->runs_.free_pages();

  this->runs_.trim_head(whole, PageCount(10));
  ASSERT_TRUE(InvariantsHold(this->runs_));
  EXPECT_EQ(this->runs_.free_pages(), free_before + PageCount(10));
  PageRun rest{whole.chunk, whole.first + PageCount(10), PageCount(10)};
  EXPECT_TRUE(HasPattern(rest, 15));
  // A run longer than the freed head must not be placed over the rest.
  AllocatedRun next = this->runs_.alloc(PageCount(15));
  ASSERT_TRUE(next.run);
  EXPECT_TRUE(next.run.base() >= rest.base() + rest.pages.bytes() ||
              next.run.base() + next.run.pages.bytes() <= rest.base())
      << "alloc(15) returned a run over the live rest of the trimmed run";
  this->runs_.free(rest);
  EXPECT_TRUE(InvariantsHold(this->runs_));
}

TYPED_TEST(RunManagerTest, ShrinkOfARunBuiltFromCoalescedRunsKeepsTheRest) {
  PageRun first = this->Alloc(10);
  PageRun second = this->Alloc(10);
  PageRun wall = this->Alloc(1);
  this->runs_.free(first);
  this->runs_.free(second);  // one free run of 20 pages; its page 9 was a free run's last page
  PageRun whole = this->Alloc(20);
  ASSERT_EQ(whole.base(), first.base());
  FillPattern(whole, 17);
  FillPattern(wall, 18);
  PageCount free_before = this->runs_.free_pages();

  this->runs_.shrink_in_place(whole, PageCount(10));
  ASSERT_TRUE(InvariantsHold(this->runs_));
  EXPECT_EQ(this->runs_.free_pages(), free_before + PageCount(10));
  PageRun rest{whole.chunk, whole.first, PageCount(10)};
  EXPECT_TRUE(HasPattern(rest, 17));
  AllocatedRun next = this->runs_.alloc(PageCount(15));
  ASSERT_TRUE(next.run);
  EXPECT_TRUE(next.run.base() >= rest.base() + rest.pages.bytes() ||
              next.run.base() + next.run.pages.bytes() <= rest.base())
      << "alloc(15) returned a run over the live rest of the shrunk run";
  this->runs_.free(rest);
  EXPECT_TRUE(InvariantsHold(this->runs_));
}

// After growing into the free run that follows, the grown run's interior holds that free
// run's old first tag; trimming or shrinking the grown run there must not read it.
TYPED_TEST(RunManagerTest, TrimAndShrinkOfAGrownRunKeepTheRest) {
  PageRun run = this->Alloc(4);
  PageRun next = this->Alloc(8);
  PageRun wall = this->Alloc(1);
  this->runs_.free(next);  // a free run of 8 pages right after run
  ASSERT_TRUE(this->runs_.grow_in_place(run, PageCount(12)));
  run.pages = PageCount(12);
  FillPattern(run, 32);
  FillPattern(wall, 33);
  PageCount free_before = this->runs_.free_pages();

  this->runs_.trim_head(run, PageCount(4));  // splits at the grown-into run's first page
  ASSERT_TRUE(InvariantsHold(this->runs_));
  PageRun rest{run.chunk, run.first + PageCount(4), PageCount(8)};
  EXPECT_EQ(this->runs_.free_pages(), free_before + PageCount(4));
  EXPECT_TRUE(HasPattern(rest, 32));
  this->runs_.shrink_in_place(rest, PageCount(3));
  rest.pages = PageCount(3);
  ASSERT_TRUE(InvariantsHold(this->runs_));
  EXPECT_EQ(this->runs_.free_pages(), free_before + PageCount(9));
  EXPECT_TRUE(HasPattern(rest, 32));
  EXPECT_TRUE(HasPattern(wall, 33));
}

TYPED_TEST(RunManagerTest, AllocOfMaxRunPagesWorks) {
  AllocatedRun a = this->runs_.alloc(kMaxRunPages);
  ASSERT_TRUE(a.run);
  EXPECT_EQ(a.run.pages, kMaxRunPages);
  EXPECT_GE(a.run.first, TestFixture::kFirst);
  EXPECT_LE(a.run.end().value(), kPagesPerChunk);
  FillPattern(a.run, 19);

  AllocatedRun b = this->runs_.alloc(kMaxRunPages);
  ASSERT_TRUE(b.run);
  EXPECT_NE(b.run.chunk, a.run.chunk);
  EXPECT_EQ(this->runs_.chunks(), 2u);
  FillPattern(b.run, 20);
  EXPECT_TRUE(HasPattern(a.run, 19));
  EXPECT_TRUE(InvariantsHold(this->runs_));

  this->runs_.free(a.run);
  this->runs_.free(b.run);
  EXPECT_EQ(this->runs_.free_pages(), TestFixture::kUsable + TestFixture::kUsable);
  EXPECT_TRUE(InvariantsHold(this->runs_));
}

TYPED_TEST(RunManagerTest, FreedRunsAreDirty) {
  PageRun a = this->Alloc(8);
  PageRun wall = this->Alloc(1);
  EXPECT_EQ(this->runs_.dirty_pages().value(), 0u) << "a fresh chunk is clean";
  this->runs_.free(a);
  EXPECT_EQ(this->runs_.dirty_pages().value(), 8u);
  this->runs_.free(wall);  // coalesces with a and the clean rest: all of it may be dirty now
  EXPECT_GE(this->runs_.dirty_pages().value(), 9u);
  EXPECT_LE(this->runs_.dirty_pages(), this->runs_.free_pages());
  EXPECT_TRUE(InvariantsHold(this->runs_));
}

// Dirty runs first (run_manager_core.h): pages handed out and freed are reused before fresh
// ones, even where the fresh ones are the better fit; with one best fit over every free run,
// the fresh ones are taken.
TYPED_TEST(RunManagerTest, FreedPagesAreReusedBeforeAShorterFreshTail) {
  const std::size_t usable = TestFixture::kUsable.value();
  for (bool dirty_runs_first : {true, false}) {
    SCOPED_TRACE(dirty_runs_first ? "dirty runs first" : "one best fit");
    FakePal pal{kDirectedPalCapacity};
    TypeParam runs{pal};
    runs.set_dirty_runs_first(dirty_runs_first);
    AllocatedRun freed = runs.alloc(PageCount(100));
    AllocatedRun wall = runs.alloc(PageCount(1));
    AllocatedRun filler = runs.alloc(PageCount(usable - 100 - 1 - 20));  // 20 fresh pages left
    ASSERT_TRUE(freed.run && wall.run && filler.run);
    runs.free(freed.run);
    AllocatedRun got = runs.alloc(PageCount(10));
    ASSERT_TRUE(got.run);
    if (dirty_runs_first) {
      EXPECT_EQ(got.run.base(), freed.run.base()) << "the freed pages, not the fresh tail";
      EXPECT_FALSE(got.zeroed);
    } else {
      EXPECT_EQ(got.run.first, filler.run.end()) << "the shortest free run that fits";
      EXPECT_TRUE(got.zeroed);
    }
    EXPECT_TRUE(InvariantsHold(runs));
    for (const AllocatedRun& r : {got, wall, filler}) runs.free(r.run);
    EXPECT_TRUE(InvariantsHold(runs));
  }
}

// A freed run that coalesces with more than 1/8 of its pages clean comes after the mostly
// dirty runs; a run of one page freed beside a few clean ones stays among them.
TYPED_TEST(RunManagerTest, ARunJoinedToManyCleanPagesComesAfterTheMostlyDirtyOnes) {
  const std::size_t usable = TestFixture::kUsable.value();
  AllocatedRun dirty = this->runs_.alloc(PageCount(usable - 111));
  AllocatedRun wall = this->runs_.alloc(PageCount(1));
  AllocatedRun small = this->runs_.alloc(PageCount(8));  // 102 fresh pages after it
  ASSERT_TRUE(dirty.run && wall.run && small.run);
  this->runs_.free(small.run);  // 110 free pages, 102 of them clean
  this->runs_.free(dirty.run);  // longer than those 110, all dirty
  AllocatedRun got = this->runs_.alloc(PageCount(10));
  ASSERT_TRUE(got.run);
  EXPECT_EQ(got.run.base(), dirty.run.base())
      << "the mostly dirty run, though the run with the fresh tail fits better";
  EXPECT_TRUE(InvariantsHold(this->runs_));

  this->runs_.free(got.run);
  this->runs_.purge(0);  // every run clean: one best fit again
  AllocatedRun after_purge = this->runs_.alloc(PageCount(10));
  ASSERT_TRUE(after_purge.run);
  EXPECT_EQ(after_purge.run.first, wall.run.end()) << "the shortest free run that fits";
  EXPECT_TRUE(InvariantsHold(this->runs_));
  this->runs_.free(after_purge.run);
  this->runs_.free(wall.run);
}

TYPED_TEST(RunManagerTest, PurgeTakesOnlyRunsFreeForAtLeastTheMinimumAge) {
  PageRun older = this->Alloc(4);
  PageRun wall1 = this->Alloc(1);
  PageRun newer = this->Alloc(6);
  PageRun wall2 = this->Alloc(1);
  FillPattern(wall1, 21);
  FillPattern(wall2, 22);

  this->runs_.advance_clock(1000);
  this->runs_.free(older);
  this->runs_.advance_clock(1050);
  this->runs_.free(newer);
  this->runs_.advance_clock(1100);
  ASSERT_EQ(this->runs_.dirty_pages().value(), 10u);

  // older has been free for 100 ms, newer for 50 ms.
  EXPECT_EQ(this->runs_.purge(101).value(), 0u);
  EXPECT_EQ(this->runs_.dirty_pages().value(), 10u);
  EXPECT_EQ(this->runs_.purge(100).value(), 4u);
  EXPECT_EQ(this->runs_.dirty_pages().value(), 6u);
  EXPECT_TRUE(ReadsZero(older));
  EXPECT_TRUE(InvariantsHold(this->runs_));
  EXPECT_EQ(this->runs_.purge(51).value(), 0u);
  EXPECT_EQ(this->runs_.purge(50).value(), 6u);
  EXPECT_EQ(this->runs_.dirty_pages().value(), 0u);
  EXPECT_EQ(this->runs_.purge(0).value(), 0u) << "nothing is left to purge";
  EXPECT_EQ(this->runs_.chunks(), 1u) << "the chunk still holds live runs";
  EXPECT_TRUE(HasPattern(wall1, 21));
  EXPECT_TRUE(HasPattern(wall2, 22));
  EXPECT_TRUE(InvariantsHold(this->runs_));
}

TYPED_TEST(RunManagerTest, PurgeOldestTakesTheOldestRunsUntilEnoughPages) {
  PageRun oldest = this->Alloc(4);
  PageRun wall1 = this->Alloc(1);
  PageRun middle = this->Alloc(6);
  PageRun wall2 = this->Alloc(1);
  PageRun youngest = this->Alloc(3);
  PageRun wall3 = this->Alloc(1);
  FillPattern(wall1, 31);
  FillPattern(wall2, 32);
  FillPattern(wall3, 33);
  this->runs_.advance_clock(10);
  this->runs_.free(oldest);
  this->runs_.advance_clock(20);
  this->runs_.free(middle);
  this->runs_.advance_clock(30);
  this->runs_.free(youngest);
  ASSERT_EQ(this->runs_.dirty_pages().value(), 13u);

  EXPECT_EQ(this->runs_.purge_oldest(PageCount(0)).value(), 0u);
  // 3 pages asked: the oldest run (4) is enough, and whole runs go.
  EXPECT_EQ(this->runs_.purge_oldest(PageCount(3)).value(), 4u);
  EXPECT_TRUE(ReadsZero(oldest));
  EXPECT_EQ(this->runs_.dirty_pages().value(), 9u);
  // 7 pages: the middle run (6) is not enough, the youngest (3) goes too.
  EXPECT_EQ(this->runs_.purge_oldest(PageCount(7)).value(), 9u);
  EXPECT_EQ(this->runs_.dirty_pages().value(), 0u);
  EXPECT_EQ(this->runs_.purge_oldest(PageCount(100)).value(), 0u) << "nothing is dirty";
  EXPECT_TRUE(HasPattern(wall1, 31));
  EXPECT_TRUE(HasPattern(wall2, 32));
  EXPECT_TRUE(HasPattern(wall3, 33));
  EXPECT_TRUE(InvariantsHold(this->runs_));
}

TYPED_TEST(RunManagerTest, PurgeWithAHugeMinimumAgePurgesNothing) {
  PageRun a = this->Alloc(4);
  this->Alloc(1);
  this->runs_.advance_clock(10);
  this->runs_.free(a);
  this->runs_.advance_clock(20);
  EXPECT_EQ(this->runs_.purge(UINT64_MAX).value(), 0u)
      << "the run has been free for 10 ms, not for 2^64-1";
  EXPECT_EQ(this->runs_.purge(UINT64_MAX - 5).value(), 0u);
  EXPECT_EQ(this->runs_.dirty_pages().value(), 4u);
}

TYPED_TEST(RunManagerTest, PurgedPagesReadZeroAndAllocOverThemReportsZeroed) {
  PageRun a = this->Alloc(8);
  PageRun wall = this->Alloc(1);
  FillPattern(a, 23);
  FillPattern(wall, 24);
  std::size_t decommitted_before = this->pal_.decommitted_bytes();

  this->runs_.free(a);
  EXPECT_EQ(this->runs_.purge(0).value(), 8u);
  EXPECT_GE(this->pal_.decommitted_bytes() - decommitted_before, a.pages.bytes());
  EXPECT_TRUE(ReadsZero(a));
  EXPECT_EQ(this->runs_.dirty_pages().value(), 0u);
  EXPECT_TRUE(HasPattern(wall, 24));
  EXPECT_TRUE(InvariantsHold(this->runs_));

  AllocatedRun again = this->runs_.alloc(PageCount(8));
  ASSERT_TRUE(again.run);
  EXPECT_EQ(again.run.base(), a.base());
  EXPECT_TRUE(again.zeroed);
  FillPattern(again.run, 25);

  // A run reused without a purge in between is not zeroed.
  this->runs_.free(again.run);
  AllocatedRun dirty = this->runs_.alloc(PageCount(8));
  ASSERT_TRUE(dirty.run);
  EXPECT_EQ(dirty.run.base(), a.base());
  EXPECT_FALSE(dirty.zeroed);
  EXPECT_TRUE(HasPattern(dirty.run, 25));
  EXPECT_TRUE(InvariantsHold(this->runs_));
}

TYPED_TEST(RunManagerTest, AllocOfPartOfAPurgedRunReportsZeroed) {
  PageRun a = this->Alloc(20);
  this->Alloc(1);
  FillPattern(a, 26);
  this->runs_.free(a);
  this->runs_.purge(0);
  AllocatedRun part = this->runs_.alloc(PageCount(20 - 1));
  ASSERT_TRUE(part.run);
  EXPECT_TRUE(part.zeroed);
  EXPECT_TRUE(ReadsZero(part.run));
  EXPECT_TRUE(InvariantsHold(this->runs_));
}

TYPED_TEST(RunManagerTest, WhollyFreeChunkIsReleasedOnPurge) {
  PageRun in_first = this->Alloc(10);
  this->FillExistingChunks();  // the first chunk stays full
  PageRun in_second = this->Alloc(10);
  ASSERT_EQ(this->runs_.chunks(), 2u);
  ASSERT_EQ(this->pal_.live_reservations(), 2);
  FillPattern(in_first, 27);

  this->runs_.free(in_second);
  this->runs_.advance_clock(500);
  EXPECT_EQ(this->runs_.purge(1000).value(), 0u) << "too young to purge";
  EXPECT_EQ(this->runs_.chunks(), 2u);
  EXPECT_EQ(this->pal_.live_reservations(), 2);

  PageCount purged = this->runs_.purge(500);
  EXPECT_EQ(purged, TestFixture::kUsable);
  EXPECT_EQ(this->runs_.chunks(), 1u);
  EXPECT_EQ(this->pal_.live_reservations(), 1);
  EXPECT_EQ(this->runs_.free_pages().value(), 0u);
  EXPECT_EQ(this->runs_.dirty_pages().value(), 0u);
  EXPECT_TRUE(HasPattern(in_first, 27));
  EXPECT_TRUE(InvariantsHold(this->runs_));

  // The run manager takes a chunk again when it needs one.
  AllocatedRun again = this->runs_.alloc(PageCount(10));
  ASSERT_TRUE(again.run);
  EXPECT_TRUE(again.zeroed);
  EXPECT_EQ(this->runs_.chunks(), 2u);
  EXPECT_TRUE(InvariantsHold(this->runs_));
}

TYPED_TEST(RunManagerTest, ChunkWithLiveRunsIsNotReleasedOnPurge) {
  PageRun a = this->Alloc(10);
  PageRun b = this->Alloc(10);
  this->runs_.free(a);
  this->runs_.purge(0);
  EXPECT_EQ(this->runs_.chunks(), 1u);
  EXPECT_EQ(this->pal_.live_reservations(), 1);
  this->runs_.free(b);
  this->runs_.purge(0);
  EXPECT_EQ(this->runs_.chunks(), 0u);
  EXPECT_EQ(this->pal_.live_reservations(), 0);
  EXPECT_TRUE(InvariantsHold(this->runs_));
}

TYPED_TEST(RunManagerTest, RefusedChunkFailsTheAllocAndLeavesEverythingIntact) {
  PageRun big = this->Alloc(kMaxRunPages.value());
  FillPattern(big, 28);
  PageCount free_before = this->runs_.free_pages();

  this->pal_.refuse_all(true);
  AllocatedRun refused = this->runs_.alloc(kMaxRunPages);
  EXPECT_FALSE(refused.run);
  EXPECT_EQ(this->runs_.chunks(), 1u);
  EXPECT_EQ(this->runs_.free_pages(), free_before);
  EXPECT_TRUE(HasPattern(big, 28));
  EXPECT_TRUE(InvariantsHold(this->runs_));

  // What fits in the existing chunk is still served.
  AllocatedRun small = this->runs_.alloc(PageCount(1));
  EXPECT_TRUE(small.run);
  EXPECT_EQ(this->runs_.chunks(), 1u);
  EXPECT_TRUE(InvariantsHold(this->runs_));

  this->pal_.refuse_all(false);
  AllocatedRun later = this->runs_.alloc(kMaxRunPages);
  ASSERT_TRUE(later.run);
  EXPECT_EQ(this->runs_.chunks(), 2u);
  FillPattern(later.run, 29);
  EXPECT_TRUE(HasPattern(big, 28));
  EXPECT_TRUE(InvariantsHold(this->runs_));
}

// A clean (purged or never used) run is committed before it is handed out; when the OS
// refuses, the alloc or the grow fails and every run stays as it was.
TYPED_TEST(RunManagerTest, RefusedCommitFailsTheAllocOrGrowAndLosesNothing) {
  PageRun kept = this->Alloc(4);
  FillPattern(kept, 31);
  PageCount free_before = this->runs_.free_pages();
  const int commits_before = this->pal_.commit_calls();

  this->pal_.refuse_commit(true);
  EXPECT_FALSE(this->runs_.alloc(PageCount(8)).run);
  EXPECT_FALSE(this->runs_.grow_in_place(kept, PageCount(6)));
  EXPECT_GT(this->pal_.commit_calls(), commits_before);
  EXPECT_EQ(this->runs_.free_pages(), free_before);
  EXPECT_EQ(this->runs_.chunks(), 1u);
  EXPECT_TRUE(HasPattern(kept, 31));
  EXPECT_TRUE(InvariantsHold(this->runs_));

  this->pal_.refuse_commit(false);
  AllocatedRun later = this->runs_.alloc(PageCount(8));
  ASSERT_TRUE(later.run);
  EXPECT_TRUE(later.zeroed);
  EXPECT_TRUE(this->runs_.grow_in_place(kept, PageCount(6)) ||
              later.run.first == kept.end());  // the alloc may have taken the pages after it
  EXPECT_TRUE(HasPattern(kept, 31));
  EXPECT_TRUE(InvariantsHold(this->runs_));
}

TYPED_TEST(RunManagerTest, OneRefusedReserveFailsOneAlloc) {
  this->pal_.fail_reserve_in(1);
  EXPECT_FALSE(this->runs_.alloc(PageCount(1)).run);
  EXPECT_EQ(this->runs_.chunks(), 0u);
  EXPECT_EQ(this->runs_.free_pages().value(), 0u);
  EXPECT_TRUE(InvariantsHold(this->runs_));
  AllocatedRun next = this->runs_.alloc(PageCount(1));
  EXPECT_TRUE(next.run);
  EXPECT_EQ(this->runs_.chunks(), 1u);
  EXPECT_TRUE(InvariantsHold(this->runs_));
}

TYPED_TEST(RunManagerTest, CountersFollowTheOperations) {
  PageRun a = this->Alloc(4);                               // takes a chunk, splits its free run
  PageRun b = this->Alloc(4);                               // splits again
  ASSERT_TRUE(this->runs_.grow_in_place(b, PageCount(6)));  // splits the rest
  b.pages = PageCount(6);
  this->runs_.free(a);  // between the header and b: nothing to coalesce
  this->runs_.free(b);  // coalesces with a and with the rest
  const RunCounterValues& counters = this->runs_.counters();

  if constexpr (kCountersEnabled) {
    EXPECT_EQ(counters.operations, 5u);
    EXPECT_EQ(counters.chunks_added, 1u);
    EXPECT_EQ(counters.splits, 3u);
    EXPECT_EQ(counters.coalesces, 2u);
    EXPECT_EQ(counters.grows_in_place, 1u);
    if (std::string(TypeParam::kName) == "pagemap") {
      EXPECT_EQ(counters.nodes_visited, 0u);  // lists and bitmaps only: no tree
      EXPECT_EQ(counters.rotations, 0u);
    } else {
      EXPECT_GE(counters.nodes_visited, 2u);  // every alloc searches the by-size tree
    }
    EXPECT_GE(counters.map_reads, 2u);    // each alloc reads the tag of the run it takes
    EXPECT_GE(counters.map_writes, 10u);  // two boundary tags per run written
  } else {
    EXPECT_EQ(counters.operations, 0u);
    EXPECT_EQ(counters.nodes_visited, 0u);
    EXPECT_EQ(counters.rotations, 0u);
    EXPECT_EQ(counters.map_reads, 0u);
    EXPECT_EQ(counters.map_writes, 0u);
    EXPECT_EQ(counters.splits, 0u);
    EXPECT_EQ(counters.coalesces, 0u);
    EXPECT_EQ(counters.grows_in_place, 0u);
    EXPECT_EQ(counters.chunks_added, 0u);
  }
  EXPECT_TRUE(InvariantsHold(this->runs_));
}

TYPED_TEST(RunManagerTest, NameIsNotEmpty) { EXPECT_FALSE(std::string(TypeParam::kName).empty()); }

}  // namespace
}  // namespace pagemalloc
