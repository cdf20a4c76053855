// The tree of allocated runs (rbtree/allocated_runs_tree.h): it knows every allocated run's
// length through splits, frees, grows, shrinks and trimmed heads, and nothing of freed ones.
#include <gtest/gtest.h>

#include "run_manager_support.h"

namespace pagemalloc {
namespace {

constexpr std::size_t kDirectedPalCapacity = std::size_t{32} << 20;  // 16 chunks

TEST(AllocatedRunsTree, KnowsEachAllocatedRunsLengthAndForgetsFreedOnes) {
  FakePal pal(kDirectedPalCapacity);
  AllocatedRunsTree<RbtreeRuns<FakePal>> runs(pal);
  std::vector<PageRun> live;
  for (std::size_t n : {1, 3, 8, 2, 17}) live.push_back(runs.alloc(PageCount(n)).run);
  for (const PageRun& r : live) EXPECT_EQ(runs.pages_of(r.base()), r.pages);
  runs.free(live[1]);
  EXPECT_EQ(runs.pages_of(live[1].base()).value(), 0u) << "a freed run is still in the tree";
  EXPECT_EQ(runs.pages_of(live[1].base() + kPageSize).value(), 0u);
  // The freed pages after live[0] let it grow; then shrink it again.
  ASSERT_TRUE(runs.grow_in_place(live[0], PageCount(4)));
  EXPECT_EQ(runs.pages_of(live[0].base()).value(), 4u);
  runs.shrink_in_place(PageRun{live[0].chunk, live[0].first, PageCount(4)}, PageCount(2));
  EXPECT_EQ(runs.pages_of(live[0].base()).value(), 2u);
  // A trimmed head moves the run's key: found at its new start only.
  runs.trim_head(live[2], PageCount(5));
  EXPECT_EQ(runs.pages_of(live[2].base()).value(), 0u);
  EXPECT_EQ(runs.pages_of(live[2].base() + PageCount(5).bytes()).value(), 3u);
  EXPECT_TRUE(InvariantsHold(runs));
  runs.free(PageRun{live[0].chunk, live[0].first, PageCount(2)});
  runs.free(PageRun{live[2].chunk, live[2].first + PageCount(5), PageCount(3)});
  runs.free(live[3]);
  runs.free(live[4]);
  for (const PageRun& r : live) EXPECT_EQ(runs.pages_of(r.base()).value(), 0u);
  EXPECT_TRUE(InvariantsHold(runs));
}

// Its searches count as the rbtree variant's own: more nodes visited for the same calls.
TEST(AllocatedRunsTree, ItsSearchesCountAsTreeWork) {
  if (!kCountersEnabled) GTEST_SKIP() << "built without PAGEMALLOC_COUNTERS";
  FakePal plain_pal(kDirectedPalCapacity), tracked_pal(kDirectedPalCapacity);
  RbtreeRuns<FakePal> plain(plain_pal);
  AllocatedRunsTree<RbtreeRuns<FakePal>> tracked(tracked_pal);
  for (int i = 0; i < 64; ++i) {
    plain.free(plain.alloc(PageCount(1 + i % 5)).run);
    tracked.free(tracked.alloc(PageCount(1 + i % 5)).run);
  }
  EXPECT_GT(tracked.counters().nodes_visited, plain.counters().nodes_visited);
}

}  // namespace
}  // namespace pagemalloc
