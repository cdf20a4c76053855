// Fork scenarios that hang an allocator whose fork handlers take their locks in the wrong
// order or cannot be re-entered (modelled on glibc's own tests tst-malloc-fork-deadlock and
// tst-mallocfork2, in the GNU C Library's malloc/ directory, https://sourceware.org/glibc/):
//
//   StdioFlushWhileForking   a thread writes to a stdio stream and calls fflush(NULL), whose
//                            writes allocate, while the main thread forks 100 times: the
//                            forking thread must not hold the heap's locks while it waits for
//                            the stdio list's lock that a flushing thread holds
//   SignalHandlerForksWhileForking
//                            a single-threaded process forks 100 times while a timer's signal
//                            handler forks too, once per fork, mostly inside the first fork's
//                            handlers
//
// (A handler that forks while the process allocates, glibc's tst-mallocfork2, is in
// fork_signal_test.cpp: it holds only for a process with one thread, which a process under
// ThreadSanitizer, with its runtime's own thread, never is.)
//
// Each scenario runs in a child of the test process, killed if it has not finished within a
// minute, so that a hang fails the test instead of stalling the suite. The streams are fopencookie
// streams whose write function allocates with pm_malloc (blocks above the small sizes, which
// take an arena's lock), so the scenario reaches pagemalloc's locks both in the Release tree
// and under ThreadSanitizer, where the C library's own allocations do not.
#include <gtest/gtest.h>

#include <pagemalloc/pagemalloc.h>

#include <stdio.h>

#include <atomic>
#include <cstdint>
#include <cstring>
#include <thread>
#include <vector>

#include "fork_scenario_support.h"

namespace {

using namespace fork_scenarios;

// A stdio stream whose writes allocate and free through pagemalloc.
ssize_t allocating_write(void* failures, const char* data, size_t size) {
  auto* copy = static_cast<char*>(pm_malloc(size + kLockingSize));
  if (copy == nullptr) {
    static_cast<std::atomic<int>*>(failures)->fetch_add(1);
    return -1;
  }
  std::memcpy(copy, data, size);
  pm_free(copy);
  return ssize_t(size);
}

FILE* open_allocating_stream(std::atomic<int>& failures) {
  cookie_io_functions_t io{};
  io.write = &allocating_write;
  return ::fopencookie(&failures, "w", io);
}

TEST(ForkScenarios, StdioFlushWhileForking) {
  run_in_child([] {
    std::atomic<bool> stop{false};
    std::atomic<int> failures{0};
    std::vector<std::thread> threads;
    // One stream, written and flushed by one thread: the C library's stream locks are not
    // seen by ThreadSanitizer, so a flush of another thread's stream would look like a race.
    std::fflush(nullptr);  // nothing of the parent's left in stdout's buffer for it to flush
    threads.emplace_back([&] {
      FILE* stream = open_allocating_stream(failures);
      if (stream == nullptr) failures.fetch_add(1);
      for (unsigned i = 0; stream != nullptr && !stop.load(std::memory_order_relaxed); ++i) {
        std::fprintf(stream, "line %u\n", i);
        std::fflush(nullptr);  // holds the stdio list's lock while the stream allocates
      }
      if (stream != nullptr) std::fclose(stream);
    });
    threads.emplace_back([&] {
      while (!stop.load(std::memory_order_relaxed))
        if (!churn_locking_block()) failures.fetch_add(1);
    });
    int result = 0;
    for (int i = 0; i < kForks && result == 0; ++i) result = fork_and_allocate_in_child();
    stop.store(true);
    for (std::thread& t : threads) t.join();
    return result != 0 ? 10 + result : failures.load() != 0 ? 20 : 0;
  });
}

// One signal per fork, due at a random moment within the time the last fork took, so that
// most land inside a fork (in its handlers) however long forks take on the machine.
TEST(ForkScenarios, SignalHandlerForksWhileForking) {
  run_in_child([] {
    ForkingSignalHandler handler(ForkingSignalHandler::Mode::kArmedOnce);
    if (!handler.ok()) return 1;
    long long fork_ns = 500'000;  // until the first fork is timed
    std::uint64_t random = 0x9E37'79B9'7F4A'7C15;
    for (int i = 0; i < kForks; ++i) {
      random ^= random << 13;
      random ^= random >> 7;
      random ^= random << 17;
      if (!handler.arm_once(1 + static_cast<long long>(random % std::uint64_t(fork_ns)))) return 3;
      if (const int failed = fork_and_allocate_in_child(&fork_ns)) return 10 + failed;
      if (fork_ns < 1000) fork_ns = 1000;
    }
    return ForkingSignalHandler::forks() > 0 ? 0 : 2;
  });
}

}  // namespace
