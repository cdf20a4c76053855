// The background thread (PAGEMALLOC_CONF=background_thread:true, pm_ctl "background_thread";
// allocator/src/decay.h): a program that frees a run and a huge block and then makes no call
// at all has their pages returned about decay_ms later; without the thread they stay. The
// thread stops when the option is unset, and a forked child starts its own at its next tick.
// Threaded (ThreadSanitizer runs it too).
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "pagemalloc/pagemalloc.h"
#include "process/decay.h"

#if defined(__SANITIZE_THREAD__)
// ThreadSanitizer refuses to start a thread in a child forked by a multithreaded process
// unless told that the program knows what it does; the child here starts the background
// thread with no other thread holding any lock.
extern "C" const char* __tsan_default_options() { return "die_after_fork=0"; }
#endif

namespace {

using namespace std::chrono_literals;

pm_stats stats() {
  pm_stats s{};
  pm_stats_get(&s);
  return s;
}

// Waits, making no allocation, until pred() holds or `limit` has passed; returns pred().
template <class Pred>
bool wait_for(Pred pred, std::chrono::milliseconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (!pred() && std::chrono::steady_clock::now() < deadline) std::this_thread::sleep_for(20ms);
  return pred();
}

// A 1 MiB run and an 8 MiB huge block, written and freed; returns the bytes.
std::size_t free_a_burst() {
  constexpr std::size_t kRun = 1 << 20, kHuge = std::size_t{8} << 20;
  for (std::size_t bytes : {kRun, kHuge}) {
    auto* p = static_cast<char*>(pm_malloc(bytes));
    if (p == nullptr) return 0;
    std::memset(p, 1, bytes);
    pm_free(p);
  }
  return kRun + kHuge;
}

class BackgroundThread : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(pm_ctl("decay_ms", &saved_decay_, nullptr), 0);
    const long decay = 100;
    ASSERT_EQ(pm_ctl("decay_ms", nullptr, &decay), 0);
  }
  void TearDown() override {
    const long off = 0;
    pm_ctl("background_thread", nullptr, &off);
    EXPECT_TRUE(wait_for([] { return !pagemalloc::background_thread_running(); }, 5s));
    pm_ctl("decay_ms", nullptr, &saved_decay_);
  }
  long saved_decay_ = 0;
};

// (A huge block mapped anew has the arenas purge as many bytes at once, as the burst's does:
// huge.h. So what the decay returns is counted from the end of the burst.)
TEST_F(BackgroundThread, WithoutItAnIdleProgramKeepsItsFreePages) {
  ASSERT_FALSE(pagemalloc::background_thread_running());
  ASSERT_NE(free_a_burst(), 0u);
  const pm_stats before = stats();
  ASSERT_GE(before.dirty, std::size_t{8} << 20);
  std::this_thread::sleep_for(600ms);  // six times the decay, and no call
  EXPECT_EQ(stats().purged, before.purged);
  EXPECT_EQ(stats().dirty, before.dirty);
}

TEST_F(BackgroundThread, ReturnsAnIdleProgramsFreePagesAndStopsWhenUnset) {
  const long on = 1;
  ASSERT_EQ(pm_ctl("background_thread", nullptr, &on), 0);
  long value = 0;
  ASSERT_EQ(pm_ctl("background_thread", &value, nullptr), 0);
  EXPECT_EQ(value, 1);
  EXPECT_TRUE(pagemalloc::background_thread_running());
  ASSERT_NE(free_a_burst(), 0u);
  const pm_stats before = stats();
  ASSERT_GE(before.dirty, std::size_t{8} << 20);
  EXPECT_TRUE(wait_for([&] { return stats().purged >= before.purged + before.dirty; }, 5s))
      << "purged " << stats().purged - before.purged << " of " << before.dirty << " bytes";
  EXPECT_EQ(stats().dirty, 0u);
  const long off = 0;
  ASSERT_EQ(pm_ctl("background_thread", nullptr, &off), 0);
  EXPECT_TRUE(wait_for([] { return !pagemalloc::background_thread_running(); }, 5s));
}

TEST_F(BackgroundThread, AForkedChildStartsItsOwnAtItsNextTick) {
  const long on = 1;
  ASSERT_EQ(pm_ctl("background_thread", nullptr, &on), 0);
  ASSERT_TRUE(pagemalloc::background_thread_running());
  const pid_t child = fork();
  ASSERT_NE(child, -1);
  if (child == 0) {
    if (pagemalloc::background_thread_running()) _exit(2);  // the parent's is not the child's
    const auto deadline = std::chrono::steady_clock::now() + 5s;
    void* kept = nullptr;
    while (!pagemalloc::background_thread_running() &&
           std::chrono::steady_clock::now() < deadline) {
      for (int i = 0; i < 5000; ++i) {
        pm_free(kept);
        kept = pm_malloc(48);
      }
      std::this_thread::sleep_for(10ms);
    }
    pm_free(kept);
    _exit(pagemalloc::background_thread_running() ? 0 : 3);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "2: the child thought it had a thread; 3: none started";
}

}  // namespace
