// A signal handler that forks while a process with one thread allocates and frees (modelled on
// glibc's test tst-mallocfork2, GNU C Library, malloc/, https://sourceware.org/glibc/): the
// handler's fork must not wait for a lock that the allocation it interrupted holds. As glibc's
// malloc, pagemalloc's fork handlers take no lock in a process with one thread. (Not a threaded
// test: under ThreadSanitizer, whose runtime runs a thread of its own, no process has one.)
#include <gtest/gtest.h>

#include <pagemalloc/pagemalloc.h>

#include "fork_scenario_support.h"

namespace {

using namespace fork_scenarios;

TEST(ForkScenarios, SignalHandlerForksWhileAllocating) {
  run_in_child([] {
    ForkingSignalHandler handler;
    if (!handler.ok()) return 1;
    for (long i = 0; ForkingSignalHandler::forks() < kForks; ++i) {
      void* small = pm_malloc(std::size_t(16 + i % 512));
      if (small == nullptr || !churn_locking_block()) return 3;
      pm_free(small);
    }
    return 0;
  });
}

}  // namespace
