// A small lock for the allocator's short critical sections: test-and-test-and-set, yielding
// the CPU when the lock stays taken. No allocation, no static initialisation, usable before
// main and from the dynamic loader.
#pragma once

#include <sched.h>

#include <atomic>

namespace pagemalloc {

class SpinLock {
 public:
  void lock() {
    while (locked_.exchange(true, std::memory_order_acquire)) {
      for (int spins = 0; locked_.load(std::memory_order_relaxed); ++spins)
        if (spins > 64) sched_yield();
    }
  }
  void unlock() { locked_.store(false, std::memory_order_release); }
  bool try_lock() { return !locked_.exchange(true, std::memory_order_acquire); }

 private:
  std::atomic<bool> locked_{false};
};

class LockGuard {
 public:
  explicit LockGuard(SpinLock& lock) : lock_(lock) { lock_.lock(); }
  ~LockGuard() { lock_.unlock(); }
  LockGuard(const LockGuard&) = delete;
  LockGuard& operator=(const LockGuard&) = delete;

 private:
  SpinLock& lock_;
};

}  // namespace pagemalloc
