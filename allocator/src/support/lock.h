// The allocator's lock: a futex mutex (Ulrich Drepper, "Futexes Are Tricky", 2011,
// https://www.akkadia.org/drepper/futex.pdf, its third mutex) with a brief spin before it
// sleeps. A waiter that finds the lock taken spins for a few hundred cycles (most critical
// sections here are shorter), then sleeps in FUTEX_WAIT until the holder wakes it: with more
// threads than cores, a holder that was preempted is not fought for by threads burning the CPU
// it needs. No allocation, no static initialisation: usable before main and from the loader.
//
// State: 0 free, 1 held, 2 held and someone may sleep on it (unlock then wakes one).
//
// While the calling thread is the process's only one (glibc's __libc_single_threaded), the lock
// is taken and released by plain stores, as glibc's malloc skips its atomics: nobody else can
// hold it or wait. A thread made while the lock is held sees it held and waits by the atomic
// protocol; the release, made once the process has two threads, is atomic and wakes it.
#pragma once

#include <linux/futex.h>
#include <sys/single_threaded.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>

namespace pagemalloc {

// A hint to the CPU that this thread is spinning (x86's pause; elsewhere nothing).
inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

// Whether no other thread can exist now: glibc's flag (since 2.32), nonzero only while the
// calling thread is the only one in the process ("definitely single-threaded", the glibc
// manual's "Detecting Single-Threaded Execution"); pthread_create clears it before the new
// thread runs. Then a lock may be taken and released with plain stores (an atomic
// read-modify-write on x86 waits for every store the thread has buffered, its own cache misses
// among them; glibc's malloc skips its atomics so, SINGLE_THREAD_P), and fork needs no lock
// (fork_impl.h).
inline bool single_threaded() { return __libc_single_threaded != 0; }

class Lock {
 public:
  void lock() {
    // (Held while the process has one thread: a signal handler's call in the middle of this
    // thread's, which waits below as it always has.)
    if (single_threaded() && state_.load(std::memory_order_relaxed) == kFree) [[likely]] {
      state_.store(kHeld, std::memory_order_relaxed);
      return;
    }
    std::uint32_t expected = kFree;
    if (state_.compare_exchange_strong(expected, kHeld, std::memory_order_acquire,
                                       std::memory_order_relaxed)) [[likely]]
      return;
    lock_contended();
  }
  void unlock() {
    // One thread now: no other exists to wait, however the lock was taken.
    if (single_threaded()) [[likely]] {
      state_.store(kFree, std::memory_order_release);
      return;
    }
    if (state_.exchange(kFree, std::memory_order_release) == kHeldWithWaiters) [[unlikely]]
      futex(FUTEX_WAKE_PRIVATE, 1);
  }
  bool try_lock() {
    if (single_threaded()) [[likely]] {
      if (state_.load(std::memory_order_relaxed) != kFree) return false;  // this thread's
      state_.store(kHeld, std::memory_order_relaxed);
      return true;
    }
    std::uint32_t expected = kFree;
    return state_.compare_exchange_strong(expected, kHeld, std::memory_order_acquire,
                                          std::memory_order_relaxed);
  }
  // How many times a thread has slept on this lock (statistics and tests).
  [[nodiscard]] std::uint64_t sleeps() const { return sleeps_.load(std::memory_order_relaxed); }

 private:
  static constexpr std::uint32_t kFree = 0, kHeld = 1, kHeldWithWaiters = 2;
  static constexpr int kSpins = 100;

  [[gnu::hot, gnu::noinline]] void lock_contended() {
    for (int i = 0; i < kSpins; ++i) {
      if (state_.load(std::memory_order_relaxed) == kFree && try_lock()) return;
      cpu_relax();
    }
    // From here on the lock is taken as "held with waiters": the unlock that follows wakes
    // the next sleeper, if any.
    std::uint32_t c = state_.exchange(kHeldWithWaiters, std::memory_order_acquire);
    while (c != kFree) {
      sleeps_.fetch_add(1, std::memory_order_relaxed);
      futex(FUTEX_WAIT_PRIVATE, kHeldWithWaiters);
      c = state_.exchange(kHeldWithWaiters, std::memory_order_acquire);
    }
  }
  void futex(int op, std::uint32_t value) {
    syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(&state_), op, value, nullptr, nullptr, 0);
  }

  std::atomic<std::uint32_t> state_{kFree};
  std::atomic<std::uint64_t> sleeps_{0};
};
static_assert(sizeof(std::atomic<std::uint32_t>) == sizeof(std::uint32_t));

class LockGuard {
 public:
  explicit LockGuard(Lock& lock) : lock_(lock) { lock_.lock(); }
  ~LockGuard() { lock_.unlock(); }
  LockGuard(const LockGuard&) = delete;
  LockGuard& operator=(const LockGuard&) = delete;

 private:
  Lock& lock_;
};

}  // namespace pagemalloc
