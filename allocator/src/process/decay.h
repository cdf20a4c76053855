// The decay advanced outside the allocator's slow paths, so that free pages go back to the OS
// about decay_ms after they were freed even in a program that stays on the fast paths, and in
// one that goes idle.
//
// - Ordinary calls: each bin of a thread cache counts the frees it takes and, every
//   kDecayTickBinPushes of them, calls decay_tick_from_calls() (as jemalloc's decay ticker).
//   The count is on free's path, in the word of the bin that a free changes anyway
//   (thread_cache.h): a counter of its own cost a tight loop of frees a tenth of its time. At
//   most one such call per kDecayTickMs, over all threads, goes on to tick every automatic
//   arena and the huge blocks' manager whose lock is free (it never waits for a lock).
//   In a design without thread caches, the frees of small blocks to their arenas count.
// - The background thread (PAGEMALLOC_CONF=background_thread:true, or pm_ctl): wakes every
//   background_period_ms() and ticks every arena and huge manager, explicit ones included,
//   under their locks. It starts when the heap is initialized with the option set, or when
//   pm_ctl sets it (in a forked child, at the next tick), and stops within one period after
//   the option is unset.
#pragma once

#include <atomic>
#include <cstdint>

#include "design/allocator.h"
#include "os/clock.h"

namespace pagemalloc {

inline constexpr std::uint32_t kDecayTickCalls = 1024;     // frees without a thread cache
inline constexpr std::uint32_t kDecayTickBinPushes = 256;  // frees into one bin of a cache
inline constexpr std::uint64_t kDecayTickMs = 100;

// How long the background thread sleeps between ticks: an eighth of decay_ms, between 10 ms
// and 1 s (1 s when the decay is off).
std::uint64_t background_period_ms(long decay_ms);

// One heap's ticks (allocator.h: each Config's heap has its own).
template <class Config>
class Allocator<Config>::Decay {
 public:
  // Called by a thread cache every kDecayTickBinPushes frees into one of its bins (noexcept,
  // so that a noexcept operator delete can end in it). Requires: no lock held.
  [[gnu::hot]] static void tick_from_calls() noexcept { tick_from_calls(now_ms()); }
  // The same for a caller that has just read the clock (now: now_ms()).
  [[gnu::hot]] static void tick_from_calls(std::uint64_t now) noexcept;

  // A small block freed without a thread cache (to its arena, under the lock): in a design
  // without caches (Config::kThreadCaches), every kDecayTickCalls such frees of a thread
  // tick the decay as a cache's would. Requires: no lock held.
  static void count_uncached_free() {
    if (++t_frees_ == kDecayTickCalls) [[unlikely]] {
      t_frees_ = 0;
      tick_from_calls();
    }
  }

  // Starts the background thread if the option asks for it and none runs. Requires: no lock
  // held; the heap initialized.
  [[gnu::hot]] static void start_background_thread_if_asked();
  // Whether the background thread runs (for the tests and statistics).
  static bool background_thread_running() {
    return background_running_.load(std::memory_order_acquire);
  }
  // fork(): the child has no background thread; its next tick starts one if asked.
  static void forget_background_thread_in_child() {
    background_running_.store(false, std::memory_order_relaxed);
  }

 private:
  static void* background_loop(void*);

  static inline constinit std::atomic<std::uint64_t> next_tick_ms_{0};
  static inline constinit std::atomic<bool> background_running_{false};
  static inline constinit thread_local std::uint32_t t_frees_ = 0;
};

// The build's.
inline bool background_thread_running() {
  return Allocator<BuildConfig>::Decay::background_thread_running();
}

}  // namespace pagemalloc
