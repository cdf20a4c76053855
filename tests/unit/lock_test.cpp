// The allocator's lock (lock.h): mutual exclusion among threads, try_lock, a waiter that
// sleeps in the kernel instead of spinning while the holder keeps the lock, and the plain
// stores of a process that has one thread, which must hand over to the atomic protocol when
// a second thread comes while the lock is held.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <thread>
#include <vector>

#include "support/lock.h"

namespace {

using pagemalloc::Lock;
using pagemalloc::LockGuard;

TEST(Lock, ExcludesOtherThreads) {
  Lock lock;
  long counter = 0;  // plain: a lost update shows a broken exclusion
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 100000; ++i) {
        LockGuard guard(lock);
        counter = counter + 1;
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(counter, 400000);
}

TEST(Lock, TryLockFailsWhileHeld) {
  Lock lock;
  ASSERT_TRUE(lock.try_lock());
  bool other = true;
  std::thread([&] { other = lock.try_lock(); }).join();
  EXPECT_FALSE(other);
  lock.unlock();
  std::thread([&] { other = lock.try_lock(); }).join();
  EXPECT_TRUE(other);
  lock.unlock();
}

TEST(Lock, AWaiterSleepsWhileTheHolderKeepsIt) {
  Lock lock;
  lock.lock();
  std::atomic<bool> got{false};
  std::thread waiter([&] {
    LockGuard guard(lock);
    got = true;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));  // far past the brief spin
  EXPECT_FALSE(got.load());
  EXPECT_GE(lock.sleeps(), 1u) << "the waiter should sleep in FUTEX_WAIT, not spin";
  lock.unlock();  // wakes it
  waiter.join();
  EXPECT_TRUE(got.load());
}

// Each runs in a fresh process (the "threadsafe" death-test style re-executes the binary and
// runs only this test), which has had one thread until the test makes a second.
class SingleThreadedLockDeathTest : public ::testing::Test {
 protected:
  void SetUp() override { GTEST_FLAG_SET(death_test_style, "threadsafe"); }
};

// One thread: the lock is taken and given back by plain stores, and still excludes a second
// taking by the same thread (try_lock fails while it is held).
TEST_F(SingleThreadedLockDeathTest, OneThreadTakesAndReleasesTheLock) {
  EXPECT_EXIT(
      {
        if (!pagemalloc::single_threaded()) std::_Exit(2);
        Lock lock;
        lock.lock();
        if (lock.try_lock()) std::_Exit(3);
        lock.unlock();
        if (!lock.try_lock()) std::_Exit(4);
        lock.unlock();
        std::thread([] {}).join();
        if (pagemalloc::single_threaded()) std::_Exit(5);  // a second thread was made
        std::_Exit(0);
      },
      ::testing::ExitedWithCode(0), "");
}

// The lock taken while the process had one thread, then a second thread that waits for it:
// the release, made after that thread exists, must wake it.
TEST_F(SingleThreadedLockDeathTest, AWaiterThatCameWhileTheLockWasHeldIsWoken) {
  EXPECT_EXIT(
      {
        if (!pagemalloc::single_threaded()) std::_Exit(2);
        Lock lock;
        lock.lock();  // by plain stores
        std::atomic<bool> got{false};
        std::thread waiter([&] {
          LockGuard guard(lock);
          got = true;
        });
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
        if (got.load()) std::_Exit(3);         // the lock did not exclude it
        if (lock.sleeps() < 1) std::_Exit(4);  // it should sleep in FUTEX_WAIT
        lock.unlock();
        waiter.join();  // hangs (the test times out) if the release did not wake it
        std::_Exit(got.load() ? 0 : 5);
      },
      ::testing::ExitedWithCode(0), "");
}

}  // namespace
