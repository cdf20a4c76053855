// Calls a thread makes after its cache is gone: POSIX runs a thread's pthread-key destructors
// again while they set values, so a program's destructor may run after the one that tears the
// thread's cache down (thread_cache.h). Its mallocs and frees must then bypass the cache:
// malloc's fast path reads the empty kNoBins, not the bins of a record the pool may already
// have given to another thread.
#include <gtest/gtest.h>

#include <pagemalloc/pagemalloc.h>
#include <pthread.h>

#include <atomic>
#include <cstdint>
#include <cstring>

#include "build_config.h"
#include "threads/thread_cache.h"

namespace {

pthread_key_t g_key;
std::atomic<int> g_calls_after_teardown{0};
std::atomic<int> g_failures{0};

void late_destructor(void* value) {
  const auto round = reinterpret_cast<std::uintptr_t>(value);
  if (pagemalloc::ThreadCache::current() == nullptr) {
    if (pagemalloc::ThreadCache::fast_path_has_bins()) ++g_failures;
    for (unsigned i = 0; i < 64; ++i) {
      void* p = pm_malloc(16 + i);
      if (p == nullptr) {
        ++g_failures;
        continue;
      }
      std::memset(p, 0xab, 16 + i);
      pm_free(p);
    }
    ++g_calls_after_teardown;
    return;
  }
  if (round < 3) pthread_setspecific(g_key, reinterpret_cast<void*>(round + 1));
}

void* thread_body(void*) {
  void* blocks[64];
  for (unsigned i = 0; i < 64; ++i) blocks[i] = pm_malloc(16 + i);  // fills some bins
  for (void* p : blocks) pm_free(p);
  if (!pagemalloc::ThreadCache::fast_path_has_bins()) ++g_failures;  // the cache is there
  pthread_setspecific(g_key, reinterpret_cast<void*>(std::uintptr_t{1}));
  return nullptr;
}

TEST(ThreadExitCalls, CallsAfterTheCacheIsGoneBypassIt) {
  if constexpr (!pagemalloc::BuildConfig::kThreadCaches)
    GTEST_SKIP() << "no thread caches in this design";
  pm_free(pm_malloc(16));  // this thread's cache, and with it the allocator's key, exist first
  ASSERT_EQ(pthread_key_create(&g_key, late_destructor), 0);
  for (int t = 0; t < 4; ++t) {
    pthread_t thread;
    ASSERT_EQ(pthread_create(&thread, nullptr, thread_body, nullptr), 0);
    ASSERT_EQ(pthread_join(thread, nullptr), 0);
  }
  pthread_key_delete(g_key);
  EXPECT_EQ(g_failures.load(), 0);
  EXPECT_EQ(g_calls_after_teardown.load(), 4)
      << "each thread's destructor ran after its cache went";
}

}  // namespace
