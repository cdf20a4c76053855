// A coarse monotonic clock in milliseconds, for the decay (a vDSO call, no system call).
#pragma once

#include <time.h>

#include <cstdint>

namespace pagemalloc {

inline std::uint64_t now_ms() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
  return std::uint64_t(ts.tv_sec) * 1000 + std::uint64_t(ts.tv_nsec) / 1000000;
}

}  // namespace pagemalloc
