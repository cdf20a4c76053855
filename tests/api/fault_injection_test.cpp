// Failure injection through the OS layer, for the whole allocator: docs/design.md's row "the OS
// refuses memory: NULL + ENOMEM; every earlier allocation intact; later calls work".
//
// The allocator under test is a second heap in this binary, beside the build's: the build's
// Config over FaultInjectingPal (FaultyConfig, fault_workload.h), so that the reserve, commit,
// grow and move calls of every arena and huge-block manager fail when the process's fault
// injector says so. A random workload of the pm_ API, called on that heap (fault_workload.h),
// runs meanwhile and checks every call against its model.
//
//   RandomFailuresOfEachKind   each kind of OS call alone fails at random steps (p = 0.25;
//                              0.5 for grow and move, which only huge blocks make), in
//                              phases with and without failures
//   RandomFailuresOfAllKinds   all kinds together, at p = 0.05, 0.3 and 1 (the OS refuses
//                              everything: only memory already held can serve)
//   RefusedCommitOfANew...     a new chunk whose commit is refused goes back at once
//   EveryStepOfAFixedSequence  one fixed call sequence, replayed with its k-th OS call
//                              failing, for every k the sequence makes
//
// After every workload, with failures off: every kind of call works again; once everything
// is freed, the statistics are back where they started, and after pm_purge so is the address
// space the OS layer holds (nothing leaked around a failure). decay_ms is 0 during the tests
// (freed pages go back to the OS at once, so that reuse goes through commit), except where the
// workload sets it to 10 s for a while. Seeds are fixed; PAGEMALLOC_TEST_SEED replaces the
// base seed, and a failure prints it.
#include <gtest/gtest.h>

#include <pagemalloc/pagemalloc.h>

#include <fmt/format.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "fault_workload.h"
#include "pagemap/testing/fault_injector.h"

namespace pagemalloc::test {
namespace {

constexpr const char* kCallNames[kPalCallKinds] = {"reserve", "commit", "grow", "move"};
constexpr PalCall kCallKinds[kPalCallKinds] = {PalCall::Reserve, PalCall::Commit, PalCall::Grow,
                                               PalCall::Move};

FaultInjector& injector() { return g_fault_injector; }

std::uint64_t base_seed() {
  if (const char* text = std::getenv("PAGEMALLOC_TEST_SEED"))
    return std::strtoull(text, nullptr, 0);
  return 5;
}

// Every kind of call, each of which must work: small, large and huge blocks from pm_malloc,
// pm_calloc, pm_mallocx (aligned, zeroed, in an explicit arena), pm_aligned_alloc and
// pm_posix_memalign; growth by pm_realloc, pm_rallocx and pm_xallocx, keeping the bytes.
void expect_every_call_works() {
  auto expect_zero = [](const void* p, std::size_t n, const char* call) {
    EXPECT_EQ(first_byte_not(static_cast<const unsigned char*>(p), n, 0), n) << call;
  };
  std::vector<void*> blocks;
  for (std::size_t size : {std::size_t{100}, 100 * kKiB, 5 * kMiB}) {
    void* p = Faulty::malloc(size);
    EXPECT_NE(p, nullptr) << "pm_malloc(" << size << ")";
    blocks.push_back(p);
    void* z = Faulty::calloc(size, 1);
    EXPECT_NE(z, nullptr) << "pm_calloc";
    if (z != nullptr) expect_zero(z, size, "pm_calloc");
    blocks.push_back(z);
    void* x = Faulty::mallocx(size, PM_ALIGN(64 * kKiB) | PM_ZERO);
    EXPECT_NE(x, nullptr) << "pm_mallocx";
    if (x != nullptr) expect_zero(x, size, "pm_mallocx(PM_ZERO)");
    blocks.push_back(x);
    blocks.push_back(Faulty::aligned_alloc(4096, size));
    EXPECT_NE(blocks.back(), nullptr) << "pm_aligned_alloc";
    void* a = nullptr;
    EXPECT_EQ(Faulty::posix_memalign(&a, 256, size), 0);
    blocks.push_back(a);
  }
  auto* grown = static_cast<unsigned char*>(Faulty::malloc(64));
  ASSERT_NE(grown, nullptr);
  std::memset(grown, 0x5a, 64);
  for (std::size_t size : {std::size_t{4000}, 300 * kKiB, 3 * kMiB, 9 * kMiB}) {
    grown = static_cast<unsigned char*>(Faulty::realloc(grown, size));
    ASSERT_NE(grown, nullptr) << "pm_realloc to " << size;
    EXPECT_EQ(first_byte_not(grown, 64, 0x5a), 64u) << "pm_realloc to " << size;
  }
  grown = static_cast<unsigned char*>(Faulty::rallocx(grown, 12 * kMiB, PM_ALIGN(64) | PM_ZERO));
  ASSERT_NE(grown, nullptr) << "pm_rallocx";
  EXPECT_EQ(first_byte_not(grown, 64, 0x5a), 64u) << "pm_rallocx";
  EXPECT_GE(Faulty::xallocx(grown, 14 * kMiB, 0, 0), 12 * kMiB) << "pm_xallocx";
  blocks.push_back(grown);
  const unsigned arena = Faulty::arena_create();
  ASSERT_NE(arena, 0u);
  for (std::size_t size : {std::size_t{100}, 100 * kKiB, 5 * kMiB}) {
    blocks.push_back(Faulty::mallocx(size, PM_ARENA(arena)));
    EXPECT_NE(blocks.back(), nullptr) << "pm_mallocx(PM_ARENA) of " << size;
  }
  for (void* p : blocks) Faulty::free(p);
  EXPECT_EQ(Faulty::arena_destroy(arena), 0);
}

class FaultInjection : public testing::Test {
 protected:
  void SetUp() override {
    const long zero = 0;
    ASSERT_EQ(pm_ctl("decay_ms", &saved_decay_, &zero), 0);
    Faulty::purge();
    held_at_start_ = injector().held_bytes();
    allocated_at_start_ = current_stats().allocated;
  }
  void TearDown() override {
    injector().stop();
    pm_ctl("decay_ms", nullptr, &saved_decay_);
  }

  // With failures off: every call works, then with everything freed the statistics are where
  // they started, and after pm_purge the address space held through the OS layer too.
  void expect_recovered(FaultWorkload& workload) {
    injector().stop();
    expect_every_call_works();
    workload.free_everything();
    EXPECT_EQ(current_stats().allocated, allocated_at_start_);
    Faulty::purge();
    EXPECT_EQ(injector().held_bytes(), held_at_start_)
        << "address space reserved through the OS layer was not given back";
  }

  long saved_decay_ = 0;
  std::size_t held_at_start_ = 0;
  std::size_t allocated_at_start_ = 0;
};

TEST_F(FaultInjection, RandomFailuresOfEachKind) {
  const std::uint64_t seed = base_seed();
  SCOPED_TRACE(fmt::format("seed {:#x} (set PAGEMALLOC_TEST_SEED to replay)", seed));
  for (PalCall kind : kCallKinds) {
    SCOPED_TRACE(kCallNames[unsigned(kind)]);
    const std::uint64_t failures_before = injector().failures(kind);
    // Growth and moves happen to huge blocks only: more of them for those.
    const bool huge_calls = kind == PalCall::Grow || kind == PalCall::Move;
    FaultWorkload workload(seed + unsigned(kind), Sizes{.huge_percent = huge_calls ? 40u : 10u});
    for (std::uint64_t phase = 0; phase < 4 && !HasFailure(); ++phase) {
      injector().fail_randomly(seed ^ (phase << 32), huge_calls ? 0.5 : 0.25, {kind});
      workload.run(300);
      injector().stop();
      workload.run(100);  // without failures: every call works
    }
    const std::uint64_t failures = injector().failures(kind) - failures_before;
    fmt::print("{}: {} steps, {} OS calls failed, {} pm_ calls refused\n",
               kCallNames[unsigned(kind)], workload.steps(), failures, workload.refused());
    EXPECT_GT(failures, 0u) << "the workload never reached this kind of call";
    if (kind == PalCall::Reserve || kind == PalCall::Commit) {
      EXPECT_GT(workload.refused(), 0u) << "no call ever failed";
    }
    expect_recovered(workload);
  }
}

TEST_F(FaultInjection, RandomFailuresOfAllKinds) {
  const std::uint64_t seed = base_seed() + 100;
  SCOPED_TRACE(fmt::format("seed {:#x} (set PAGEMALLOC_TEST_SEED to replay)", seed - 100));
  const std::uint64_t failures_before = injector().failures();
  FaultWorkload workload(seed);
  for (double p : {0.05, 0.3, 1.0}) {
    injector().fail_randomly(seed + std::uint64_t(p * 100), p);
    workload.run(400);
    injector().stop();
    workload.run(150);
  }
  fmt::print("all kinds: {} steps, {} OS calls failed, {} pm_ calls refused\n", workload.steps(),
             injector().failures() - failures_before, workload.refused());
  EXPECT_GT(workload.refused(), 0u);
  expect_recovered(workload);
}

// The first block of a new arena takes a new chunk, whose pages are committed before use:
// when the commit is refused, the call fails and the chunk goes back to the OS at once.
TEST_F(FaultInjection, RefusedCommitOfANewChunkKeepsNothing) {
  const unsigned arena = Faulty::arena_create();
  ASSERT_NE(arena, 0u);
  const std::uint64_t failures_before = injector().failures(PalCall::Commit);
  injector().fail_nth(1, {PalCall::Commit});
  errno = 0;
  EXPECT_EQ(Faulty::mallocx(100 * kKiB, PM_ARENA(arena)), nullptr);
  EXPECT_EQ(errno, ENOMEM);
  injector().stop();
  EXPECT_EQ(injector().failures(PalCall::Commit) - failures_before, 1u);
  EXPECT_EQ(injector().held_bytes(), held_at_start_) << "the new chunk was kept";
  void* p = Faulty::mallocx(100 * kKiB, PM_ARENA(arena));
  EXPECT_NE(p, nullptr);
  Faulty::free(p);
  EXPECT_EQ(Faulty::arena_destroy(arena), 0);
  Faulty::purge();
  EXPECT_EQ(injector().held_bytes(), held_at_start_);
}

// What one run of the fixed sequence saw.
struct SweepRun {
  std::uint64_t os_calls = 0;
  std::uint64_t failures = 0;
  std::uint64_t refused = 0;
};

TEST_F(FaultInjection, EveryStepOfAFixedSequence) {
  constexpr std::uint64_t kSteps = 120;
  // Smaller blocks than the other tests': each of the runs faults its pages in afresh.
  constexpr Sizes kSweepSizes{
      .large_max = 128 * kKiB, .huge_max = 2 * kMiB + 256 * kKiB, .huge_percent = 15};
  constexpr std::uint64_t kMaxRuns = 400;
  const std::uint64_t seed = base_seed() + 200;
  SCOPED_TRACE(fmt::format("seed {:#x} (set PAGEMALLOC_TEST_SEED to replay)", seed - 200));
  std::uint64_t failures_by_kind[kPalCallKinds] = {};
  std::uint64_t calls_by_kind[kPalCallKinds] = {};
  // One run of the sequence from a purged heap with its k-th OS call failing (k = 0: none),
  // then everything freed and checked.
  auto run = [&](std::uint64_t k) {
    const long zero = 0;  // as the first run had it (the workload may have changed it)
    pm_ctl("decay_ms", nullptr, &zero);
    Faulty::purge();
    FaultWorkload workload(seed, kSweepSizes);
    std::uint64_t failures[kPalCallKinds], calls[kPalCallKinds];
    for (PalCall c : kCallKinds) {
      failures[unsigned(c)] = injector().failures(c);
      calls[unsigned(c)] = injector().calls(c);
    }
    injector().fail_nth(k == 0 ? ~std::uint64_t{0} : k);
    workload.run(kSteps);
    SweepRun result{injector().armed_calls(), 0, workload.refused()};
    injector().stop();
    for (PalCall c : kCallKinds) {
      const std::uint64_t failed = injector().failures(c) - failures[unsigned(c)];
      result.failures += failed;
      failures_by_kind[unsigned(c)] += failed;
      if (k == 0) calls_by_kind[unsigned(c)] = injector().calls(c) - calls[unsigned(c)];
    }
    workload.free_everything();
    EXPECT_EQ(current_stats().allocated, allocated_at_start_) << "k = " << k;
    Faulty::purge();
    EXPECT_EQ(injector().held_bytes(), held_at_start_) << "k = " << k;
    return result;
  };

  const SweepRun dry = run(0);
  ASSERT_EQ(dry.refused, 0u);
  ASSERT_GT(dry.os_calls, 0u);
  const std::uint64_t runs = std::min(dry.os_calls, kMaxRuns);
  std::uint64_t hit = 0, refused = 0;
  for (std::uint64_t k = 1; k <= runs && !HasFailure(); ++k) {
    const SweepRun r = run(k);
    EXPECT_LE(r.failures, 1u) << "k = " << k;
    EXPECT_LE(r.refused, 1u) << "k = " << k << ": one OS failure refused several calls";
    hit += r.failures;
    refused += r.refused;
  }
  fmt::print(
      "sweep: {} steps make {} OS calls (reserve {}, commit {}, grow {}, move {}); "
      "{} runs, {} with the failure reached, {} calls refused\n",
      kSteps, dry.os_calls, calls_by_kind[0], calls_by_kind[1], calls_by_kind[2], calls_by_kind[3],
      runs, hit, refused);
  // The runs replay the same calls up to the failing one, so nearly every run reaches it
  // (the kernel's choice of addresses may change a huge block's path now and then).
  EXPECT_GE(hit * 10, runs * 9);
  for (PalCall c : kCallKinds) {
    if (calls_by_kind[unsigned(c)] != 0 && runs == dry.os_calls) {
      EXPECT_GT(failures_by_kind[unsigned(c)], 0u) << kCallNames[unsigned(c)] << " never failed";
    }
  }
  injector().stop();
  expect_every_call_works();
}

}  // namespace
}  // namespace pagemalloc::test
