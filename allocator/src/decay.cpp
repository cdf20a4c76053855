// The decay's ticks from ordinary calls and from the background thread (decay.h).
#include "decay.h"

#include <pthread.h>
#include <signal.h>
#include <time.h>

#include <algorithm>
#include <atomic>

#include "clock.h"
#include "config.h"
#include "heap.h"

namespace pagemalloc {
namespace {

constinit std::atomic<std::uint64_t> g_next_tick_ms{0};
constinit std::atomic<bool> g_background_running{false};

void sleep_ms(std::uint64_t ms) {
  timespec ts{time_t(ms / 1000), long(ms % 1000) * 1000000};
  while (nanosleep(&ts, &ts) != 0) {
  }
}

void* background_loop(void*) {
  while (options().background_thread.load(std::memory_order_relaxed)) {
    heap().advance_decay(true);
    sleep_ms(background_period_ms(options().decay_ms.load(std::memory_order_relaxed)));
  }
  g_background_running.store(false, std::memory_order_release);
  return nullptr;
}

}  // namespace

void decay_tick_from_calls() {
  const std::uint64_t now = now_ms();
  std::uint64_t next = g_next_tick_ms.load(std::memory_order_relaxed);
  if (now < next) return;
  if (!g_next_tick_ms.compare_exchange_strong(next, now + kDecayTickMs, std::memory_order_relaxed))
    return;  // another thread ticks
  heap().advance_decay(false);
  start_background_thread_if_asked();
}

std::uint64_t background_period_ms(long decay_ms) {
  if (decay_ms < 0) return 1000;
  return std::clamp<std::uint64_t>(std::uint64_t(decay_ms) / 8, 10, 1000);
}

void start_background_thread_if_asked() {
  if (!options().background_thread.load(std::memory_order_relaxed)) return;
  bool running = false;
  if (!g_background_running.compare_exchange_strong(running, true, std::memory_order_acq_rel))
    return;
  // The thread takes no signal: they go to the program's own threads.
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  pthread_t thread;
  const bool started = pthread_create(&thread, nullptr, background_loop, nullptr) == 0;
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  if (started) pthread_detach(thread);
  else g_background_running.store(false, std::memory_order_release);
}

bool background_thread_running() { return g_background_running.load(std::memory_order_acquire); }

void forget_background_thread_in_child() {
  g_background_running.store(false, std::memory_order_relaxed);
}

}  // namespace pagemalloc
