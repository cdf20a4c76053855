// The decay's clock (clock.h): clock_gettime taken from the vDSO itself when the process has
// one, so that the allocator does not run (nor map) libc's wrapper; the time it gives is
// CLOCK_MONOTONIC_COARSE's either way.
#include <gtest/gtest.h>

#include <sys/auxv.h>
#include <time.h>

#include <cstdint>

#include "os/clock.h"

namespace {

std::uint64_t libc_now_ms() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
  return std::uint64_t(ts.tv_sec) * 1000 + std::uint64_t(ts.tv_nsec) / 1000000;
}

TEST(Clock, ComesFromTheVdsoWhenThereIsOne) {
  const unsigned long vdso = getauxval(AT_SYSINFO_EHDR);
  if (vdso == 0) GTEST_SKIP() << "no vDSO in this process (valgrind?)";
  const auto found = reinterpret_cast<std::uintptr_t>(pagemalloc::find_clock());
  EXPECT_NE(found, reinterpret_cast<std::uintptr_t>(&::clock_gettime));
  EXPECT_GE(found, vdso);
  EXPECT_LT(found, vdso + (std::uintptr_t{1} << 20)) << "not inside the vDSO";
}

TEST(Clock, GivesTheCoarseMonotonicTime) {
  for (int i = 0; i < 100; ++i) {
    const std::uint64_t before = libc_now_ms();
    const std::uint64_t now = pagemalloc::now_ms();
    const std::uint64_t after = libc_now_ms();
    ASSERT_LE(before, now);
    ASSERT_LE(now, after);
  }
}

}  // namespace
