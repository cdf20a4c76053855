// The allocator's lock (lock.h): mutual exclusion among threads, try_lock, and a waiter that
// sleeps in the kernel instead of spinning while the holder keeps the lock.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "lock.h"

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

}  // namespace
