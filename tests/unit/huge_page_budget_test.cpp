// thp:auto's budget for fresh huge pages (huge_page_budget.h), with times given by the test:
// a fault no slower than small pages' is never charged; slower ones are charged beyond that,
// and once the charge exceeds the grant plus 1/share of the time since the first chunk, no
// chunk is advised until enough time has passed; share 0 lifts the limit.
#include <gtest/gtest.h>

#include <cstdint>

#include "os/huge_page_budget.h"

namespace {

using pagemalloc::HugePageBudget;

constexpr std::uint64_t kMs = 1'000'000;
constexpr std::uint64_t kStart = 1000 * kMs;  // the first chunk's time
constexpr long kShare = 64;

TEST(HugePageBudget, AFreshBudgetAllowsTheFirstChunk) {
  HugePageBudget budget;
  EXPECT_TRUE(budget.allows(kStart, kShare));
}

TEST(HugePageBudget, FaultsNoSlowerThanSmallPagesAreNeverCharged) {
  HugePageBudget budget;
  ASSERT_TRUE(budget.allows(kStart, kShare));
  for (int i = 0; i < 1000; ++i) budget.charge(HugePageBudget::kSmallPagesNs);
  EXPECT_EQ(budget.totals().charged_ns, 0u);
  EXPECT_EQ(budget.totals().touched, 1000u);
  EXPECT_TRUE(budget.allows(kStart, kShare));
}

TEST(HugePageBudget, SlowFaultsAreChargedBeyondWhatSmallPagesCost) {
  HugePageBudget budget;
  budget.charge(5 * kMs);
  EXPECT_EQ(budget.totals().charged_ns, 5 * kMs - HugePageBudget::kSmallPagesNs);
}

// Three faults of 5 ms charge 12 ms: past the 5 ms grant at once. The allowance reaches 12 ms
// when (12 - 5) ms is 1/64 of the time since the start: 448 ms after it.
TEST(HugePageBudget, AnExhaustedBudgetRefusesUntilTheRunTimeCoversTheCharge) {
  HugePageBudget budget;
  ASSERT_TRUE(budget.allows(kStart, kShare));
  for (int i = 0; i < 3; ++i) budget.charge(5 * kMs);
  ASSERT_EQ(budget.totals().charged_ns, 12 * kMs);
  EXPECT_FALSE(budget.allows(kStart, kShare));
  EXPECT_FALSE(budget.allows(kStart + 447 * kMs, kShare));
  EXPECT_TRUE(budget.allows(kStart + 448 * kMs, kShare));
  // A larger share of the run time allows it sooner.
  EXPECT_TRUE(budget.allows(kStart + 224 * kMs, kShare / 2));
}

TEST(HugePageBudget, TheClockStartsAtTheFirstChunkAskedFor) {
  HugePageBudget budget;
  ASSERT_TRUE(budget.allows(kStart + 10'000 * kMs, kShare));  // after 10 s of other work
  budget.charge(13 * kMs);                                    // 12 ms charged
  // 10 s earlier would have covered it; since the first chunk, only 448 ms will.
  EXPECT_FALSE(budget.allows(kStart + 10'000 * kMs + 447 * kMs, kShare));
  EXPECT_TRUE(budget.allows(kStart + 10'000 * kMs + 448 * kMs, kShare));
}

TEST(HugePageBudget, AShareOfZeroLiftsTheLimit) {
  HugePageBudget budget;
  budget.charge(1000 * kMs);
  EXPECT_TRUE(budget.allows(kStart, 0));
  EXPECT_FALSE(budget.allows(kStart, kShare));
}

TEST(HugePageBudget, RefusalsAreCounted) {
  HugePageBudget budget;
  budget.count_refusal();
  budget.count_refusal();
  EXPECT_EQ(budget.totals().refused, 2u);
}

}  // namespace
