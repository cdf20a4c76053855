// The fault-injecting OS layer (pagemap/pal_fault_injecting.h) and its injector
// (pagemap/fault_injector.h), on their own: over the fake OS layer for the schedule and the
// ledger, over Linux for moving pages.
//
//   fail_nth        exactly the n-th call of the armed kinds fails, with ENOMEM from reserve;
//                   calls of other kinds neither fail nor count towards n
//   fail_randomly   the share of failed calls is close to p; the same seed fails the same
//                   calls, another seed others; p = 0 never fails, p = 1 always does
//   stop            no failure afterwards, and the calls are still counted
//   ledger          held bytes follow reserve, grow, release and move, and stay unchanged
//                   when a call is refused
//
// Each test has its own injector, so that counts start at zero.
#include <gtest/gtest.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstring>
#include <utility>
#include <vector>

#include "pagemap/pages.h"
#include "pagemap/pal_linux.h"
#include "pagemap/testing/fault_injector.h"
#include "pagemap/testing/pal_fake.h"
#include "pagemap/testing/pal_fault_injecting.h"

namespace pagemalloc {
namespace {

constexpr std::size_t kFakeCapacity = 16 * kChunkSize;

constinit FaultInjector nth_injector;
constinit FaultInjector kinds_injector;
constinit FaultInjector random_injector;
constinit FaultInjector stop_injector;
constinit FaultInjector ledger_injector;
constinit FaultInjector move_injector;

TEST(FaultInjectingPal, FailNthFailsExactlyThatCall) {
  FaultInjectingPal<FakePal, nth_injector> pal(std::in_place, kFakeCapacity);
  nth_injector.fail_nth(3, {PalCall::Reserve});
  std::vector<void*> got;
  for (int i = 1; i <= 5; ++i) {
    errno = 0;
    void* p = pal.reserve(kChunkSize, kChunkSize);
    if (i == 3) {
      EXPECT_EQ(p, nullptr);
      EXPECT_EQ(errno, ENOMEM);
    } else {
      EXPECT_NE(p, nullptr) << "reserve #" << i;
      got.push_back(p);
    }
  }
  EXPECT_EQ(nth_injector.calls(PalCall::Reserve), 5u);
  EXPECT_EQ(nth_injector.failures(PalCall::Reserve), 1u);
  EXPECT_EQ(nth_injector.failures(), 1u);
  EXPECT_EQ(pal.inner().live_reservations(), 4);
  for (void* p : got) pal.release(p, kChunkSize);
}

TEST(FaultInjectingPal, OnlyTheArmedKindsFailAndCount) {
  FaultInjectingPal<FakePal, kinds_injector> pal(std::in_place, kFakeCapacity);
  kinds_injector.fail_nth(2, {PalCall::Commit});
  void* p = pal.reserve(kChunkSize, kChunkSize);
  ASSERT_NE(p, nullptr);
  EXPECT_TRUE(pal.commit(p, kPageSize));          // commit #1
  void* q = pal.reserve(kChunkSize, kChunkSize);  // not armed: neither fails nor counts
  ASSERT_NE(q, nullptr);
  EXPECT_TRUE(pal.grow(q, kChunkSize, 2 * kChunkSize));  // the fake grows its last reservation
  EXPECT_FALSE(pal.commit(p, kPageSize));                // commit #2
  EXPECT_TRUE(pal.commit(p, kPageSize));                 // #3
  EXPECT_EQ(kinds_injector.armed_calls(), 3u);
  EXPECT_EQ(kinds_injector.failures(PalCall::Commit), 1u);
  EXPECT_EQ(kinds_injector.failures(PalCall::Reserve), 0u);
  EXPECT_EQ(kinds_injector.failures(PalCall::Grow), 0u);
  pal.release(q, 2 * kChunkSize);
  pal.release(p, kChunkSize);
}

// The pattern of failures of n calls of should_fail(Commit).
std::vector<bool> failure_pattern(std::uint64_t seed, double p, int n) {
  random_injector.fail_randomly(seed, p, {PalCall::Commit});
  std::vector<bool> pattern;
  for (int i = 0; i < n; ++i) pattern.push_back(random_injector.should_fail(PalCall::Commit));
  random_injector.stop();
  return pattern;
}

TEST(FaultInjectingPal, RandomFailuresHaveTheRateAndReplayBySeed) {
  constexpr int kCalls = 20000;
  const std::vector<bool> first = failure_pattern(42, 0.25, kCalls);
  const auto failed = std::count(first.begin(), first.end(), true);
  EXPECT_GT(failed, kCalls * 22 / 100);
  EXPECT_LT(failed, kCalls * 28 / 100);
  EXPECT_EQ(failure_pattern(42, 0.25, kCalls), first) << "the same seed must replay";
  EXPECT_NE(failure_pattern(43, 0.25, kCalls), first) << "another seed, other failures";
  const std::vector<bool> never = failure_pattern(42, 0.0, 1000);
  EXPECT_EQ(std::count(never.begin(), never.end(), true), 0);
  const std::vector<bool> always = failure_pattern(42, 1.0, 1000);
  EXPECT_EQ(std::count(always.begin(), always.end(), false), 0);
}

TEST(FaultInjectingPal, StopEndsFailuresButNotCounting) {
  FaultInjectingPal<FakePal, stop_injector> pal(std::in_place, kFakeCapacity);
  stop_injector.fail_randomly(1, 1.0);
  EXPECT_EQ(pal.reserve(kChunkSize, kChunkSize), nullptr);
  stop_injector.stop();
  void* p = pal.reserve(kChunkSize, kChunkSize);
  EXPECT_NE(p, nullptr);
  EXPECT_TRUE(pal.commit(p, kPageSize));
  EXPECT_EQ(stop_injector.calls(), 3u);
  EXPECT_EQ(stop_injector.failures(), 1u);
  pal.release(p, kChunkSize);
}

TEST(FaultInjectingPal, LedgerFollowsTheAddressSpaceHeld) {
  FaultInjectingPal<FakePal, ledger_injector> pal(std::in_place, kFakeCapacity);
  void* p = pal.reserve(kChunkSize, kChunkSize);
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(ledger_injector.held_bytes(), kChunkSize);
  ASSERT_TRUE(pal.grow(p, kChunkSize, 3 * kChunkSize));
  EXPECT_EQ(ledger_injector.held_bytes(), 3 * kChunkSize);
  ledger_injector.fail_randomly(7, 1.0);
  EXPECT_FALSE(pal.grow(p, 3 * kChunkSize, 4 * kChunkSize));
  EXPECT_EQ(pal.reserve(kChunkSize, kChunkSize), nullptr);
  EXPECT_EQ(ledger_injector.held_bytes(), 3 * kChunkSize) << "a refused call holds nothing more";
  ledger_injector.stop();
  pal.release(p, 3 * kChunkSize);
  EXPECT_EQ(ledger_injector.held_bytes(), 0u);
}

TEST(FaultInjectingPal, MoveGoesToLinuxUnlessRefused) {
  FaultInjectingPal<LinuxPal, move_injector> pal;
  auto* from = static_cast<unsigned char*>(pal.reserve(kChunkSize, kChunkSize));
  auto* to = static_cast<unsigned char*>(pal.reserve(2 * kChunkSize, kChunkSize));
  ASSERT_NE(from, nullptr);
  ASSERT_NE(to, nullptr);
  std::memset(from, 0xab, kChunkSize);
  EXPECT_EQ(move_injector.held_bytes(), 3 * kChunkSize);

  move_injector.fail_nth(1, {PalCall::Move});
  EXPECT_FALSE(pal.move(from, kChunkSize, to, 2 * kChunkSize));
  EXPECT_EQ(from[kChunkSize - 1], 0xab) << "a refused move leaves the pages where they were";
  EXPECT_EQ(move_injector.held_bytes(), 3 * kChunkSize);

  ASSERT_TRUE(pal.move(from, kChunkSize, to, 2 * kChunkSize));
  EXPECT_EQ(to[0], 0xab);
  EXPECT_EQ(to[kChunkSize - 1], 0xab);
  EXPECT_EQ(to[2 * kChunkSize - 1], 0) << "the grown part reads zero";
  EXPECT_EQ(move_injector.held_bytes(), 2 * kChunkSize);
  EXPECT_EQ(move_injector.failures(PalCall::Move), 1u);
  pal.release(to, 2 * kChunkSize);
  EXPECT_EQ(move_injector.held_bytes(), 0u);
}

}  // namespace
}  // namespace pagemalloc
