// The automatic arenas' default count (automatic_arenas.h): one per two CPUs the process may
// run on (at least one), at most kMaxDefaultArenas, the mask read by the system call rather
// than through glibc.
#include <gtest/gtest.h>

#include <sched.h>

#include <algorithm>

#include <pagemalloc/pagemalloc.h>

#include "heap/heap.h"
#include "threads/automatic_arenas.h"

namespace {

using pagemalloc::AutomaticArenas;

// The ncpus option (the suite sets it) put aside for a test, and back after it.
class WithoutForcedCpus {
 public:
  WithoutForcedCpus() : saved_(pagemalloc::options().ncpus.exchange(0)) {}
  ~WithoutForcedCpus() { pagemalloc::options().ncpus.store(saved_); }
  WithoutForcedCpus(const WithoutForcedCpus&) = delete;
  WithoutForcedCpus& operator=(const WithoutForcedCpus&) = delete;

 private:
  long saved_;
};

TEST(AutomaticArenas, TheDefaultCountIsOnePerTwoCpusOfTheAffinityMaskOrTheDesigns) {
  WithoutForcedCpus unforced;
  cpu_set_t cpus;
  CPU_ZERO(&cpus);
  ASSERT_EQ(sched_getaffinity(0, sizeof(cpus), &cpus), 0);
  const unsigned per_two_cpus = std::max(1u, unsigned(CPU_COUNT(&cpus)) / 2);
  const unsigned expected =
      pagemalloc::BuildConfig::kArenas != 0  // a design that fixes the number (presets.h)
          ? pagemalloc::BuildConfig::kArenas
          : std::min(per_two_cpus, AutomaticArenas::kMaxDefaultArenas);
  EXPECT_EQ(AutomaticArenas::default_count(), expected);
}

TEST(AutomaticArenas, TheDefaultCountFollowsANarrowerMask) {
  WithoutForcedCpus unforced;
  cpu_set_t all, one;
  CPU_ZERO(&all);
  ASSERT_EQ(sched_getaffinity(0, sizeof(all), &all), 0);
  CPU_ZERO(&one);
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu)
    if (CPU_ISSET(cpu, &all)) {
      CPU_SET(cpu, &one);
      break;
    }
  ASSERT_EQ(sched_setaffinity(0, sizeof(one), &one), 0);
  const unsigned count = AutomaticArenas::default_count();
  ASSERT_EQ(sched_setaffinity(0, sizeof(all), &all), 0);
  EXPECT_EQ(count, 1u);
}

// ncpus sizes the default count as for that many CPUs, whatever the machine has; the arenas'
// stash sets are the CPUs each arena serves, rounded up, at most kMaxStashSets.
TEST(AutomaticArenas, AForcedCpuCountSizesTheArenasAndTheirStashSets) {
  const long saved = pagemalloc::options().ncpus.exchange(64);
  const unsigned count = AutomaticArenas::default_count();
  const unsigned cpus = AutomaticArenas::cpus();
  pagemalloc::options().ncpus.store(saved);
  EXPECT_EQ(cpus, 64u);
  if (pagemalloc::BuildConfig::kArenas == 0) {
    EXPECT_EQ(count, 32u);
  }
  EXPECT_EQ(pagemalloc::stash_sets_for(64, 32), 2u);
  EXPECT_EQ(pagemalloc::stash_sets_for(64, 1), pagemalloc::kMaxStashSets);
  EXPECT_EQ(pagemalloc::stash_sets_for(2, 1), 2u);
  EXPECT_EQ(pagemalloc::stash_sets_for(3, 2), 2u);
  EXPECT_EQ(pagemalloc::stash_sets_for(1, 4), 1u);
  EXPECT_GE(AutomaticArenas::affinity_cpus(), 1u);
}

// The suite's own setting (tests/CMakeLists.txt: ncpus:4 over two arenas) gave two stash sets.
TEST(AutomaticArenas, TheHeapTookItsStashSetsFromTheCpusAndArenas) {
  pm_free(pm_malloc(8));  // the heap started
  const long forced = pagemalloc::options().ncpus.load();
  const unsigned cpus = forced > 0 ? unsigned(forced) : AutomaticArenas::affinity_cpus();
  EXPECT_EQ(pagemalloc::stash_sets(),
            pagemalloc::stash_sets_for(cpus, pagemalloc::heap().automatic_arena_count()));
}

}  // namespace
