// The decay's ticks from ordinary calls and from the background thread (decay.h).
#pragma once

#include "process/decay.h"

#include <pthread.h>
#include <signal.h>
#include <time.h>

#include <algorithm>
#include <atomic>

#include "heap/heap.h"
#include "os/clock.h"
#include "support/options.h"

namespace pagemalloc {
namespace detail {

inline void sleep_ms(std::uint64_t ms) {
  timespec ts{time_t(ms / 1000), long(ms % 1000) * 1000000};
  while (nanosleep(&ts, &ts) != 0) {
  }
}

}  // namespace detail

template <class Config>
void* Allocator<Config>::Decay::background_loop(void*) {
  while (options().background_thread.load(std::memory_order_relaxed)) {
    heap().advance_decay(true);
    detail::sleep_ms(background_period_ms(options().decay_ms.load(std::memory_order_relaxed)));
  }
  background_running_.store(false, std::memory_order_release);
  return nullptr;
}

template <class Config>
void Allocator<Config>::Decay::tick_from_calls(std::uint64_t now) noexcept {
  std::uint64_t next = next_tick_ms_.load(std::memory_order_relaxed);
  if (now < next) return;
  if (!next_tick_ms_.compare_exchange_strong(next, now + kDecayTickMs, std::memory_order_relaxed))
    return;  // another thread ticks
  heap().advance_decay(false);
  start_background_thread_if_asked();
}

template <class Config>
void Allocator<Config>::Decay::start_background_thread_if_asked() {
  if (!options().background_thread.load(std::memory_order_relaxed)) return;
  bool running = false;
  if (!background_running_.compare_exchange_strong(running, true, std::memory_order_acq_rel))
    return;
  // The thread takes no signal: they go to the program's own threads.
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  pthread_t thread;
  const bool started = pthread_create(&thread, nullptr, background_loop, nullptr) == 0;
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  if (started) pthread_detach(thread);
  else background_running_.store(false, std::memory_order_release);
}

}  // namespace pagemalloc
