// Monotonic clocks (a vDSO call, no system call): a coarse one in milliseconds for the decay,
// a fine one in nanoseconds for timing a page fault (huge_page_budget.h).
#pragma once

#include <time.h>

#include <atomic>
#include <cstdint>

namespace pagemalloc {

// How often a tick looks for free pages older than the decay: a quarter of decay_ms (> 0), at
// most once a second, so that pages go back at most about a second after their time.
inline std::uint64_t purge_interval_ms(long decay_ms) {
  const auto quarter = std::uint64_t(decay_ms) / 4;
  return quarter < 1000 ? quarter : 1000;
}

// clock_gettime: the vDSO's, called directly, or libc's (clock.cpp).
using ClockFunction = int (*)(clockid_t, timespec*);
[[gnu::hot]] ClockFunction find_clock();
inline constinit std::atomic<ClockFunction> g_clock{nullptr};

inline ClockFunction clock_function() {
  ClockFunction clock = g_clock.load(std::memory_order_relaxed);
  if (clock == nullptr) [[unlikely]] {  // the first call: every thread finds the same one
    clock = find_clock();
    g_clock.store(clock, std::memory_order_relaxed);
  }
  return clock;
}

inline std::uint64_t now_ms() {
  timespec ts{};
  clock_function()(CLOCK_MONOTONIC_COARSE, &ts);
  return std::uint64_t(ts.tv_sec) * 1000 + std::uint64_t(ts.tv_nsec) / 1000000;
}

inline std::uint64_t now_ns() {
  timespec ts{};
  clock_function()(CLOCK_MONOTONIC, &ts);
  return std::uint64_t(ts.tv_sec) * 1000000000 + std::uint64_t(ts.tv_nsec);
}

}  // namespace pagemalloc
