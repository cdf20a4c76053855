// The automatic arenas' default count (automatic_arenas.h): one per two CPUs the process may
// run on (at least one), at most kMaxDefaultArenas, the mask read by the system call rather
// than through glibc.
#include <gtest/gtest.h>

#include <sched.h>

#include <algorithm>

#include "threads/automatic_arenas.h"

namespace {

using pagemalloc::AutomaticArenas;

TEST(AutomaticArenas, TheDefaultCountIsOnePerTwoCpusOfTheAffinityMaskOrTheDesigns) {
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

}  // namespace
