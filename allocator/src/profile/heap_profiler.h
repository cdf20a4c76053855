// The heap profiler: sampled allocations by call stack, written in the format jemalloc's
// profiler writes (heap_v2), so that jeprof and pprof read it. Off unless PAGEMALLOC_CONF says
// prof:true; then every thread's allocations are sampled, a sample every prof_sample bytes on
// average (sampling.h), while prof_active (pm_ctl "prof.active") is on.
//
// How the fast paths stay as they are: with prof off nothing changes in them; with it on, they
// still do exactly what they do, and the count of allocations to each class's next sample comes
// from the thread cache's own fields (ThreadCache::BinSampling): a bin shows its fast path only
// as many regions, and as many pushes to its tick, as keep the class's next sample on a slow
// path, where ThreadCache::pop_sampling decides. Medium, large and huge blocks, whose
// allocations take slow paths, count down the thread's bytes. A sampled small block is served
// as a run of its own pages, whose free never takes the small blocks' fast path: the slow path
// that frees large and huge blocks asks the profiler whether the block was a sample. A thread
// notices that prof_active changed at its next allocation that takes a slow path.
//
// Its memory (stacks, live samples) is mapped from the OS, never allocated through the heap.
// The profiler's own allocations (the unwinder's, none on Linux) are not sampled.
#pragma once

#include <cstddef>
#include <cstdint>

#include "profile/sampling.h"
#include "support/options.h"

namespace pagemalloc {

// A thread's part of the profiler.
struct ThreadProfile {
  SampleCountdown countdown;
  // prof_active as the thread last looked (HeapProfiler::follow_active), and not inside the
  // profiler, whose own allocations are not sampled.
  bool sampling = false;
  bool busy = false;
};
inline constinit thread_local ThreadProfile t_profile{};

class HeapProfiler {
 public:
  // Whether prof:true was given (fixed once the configuration is read).
  static bool enabled() { return options().prof.load(std::memory_order_relaxed); }
  static bool active() {
    return enabled() && options().prof_active.load(std::memory_order_relaxed);
  }

  // Whether the calling thread's allocation of `bytes` is sampled (the countdown moves on);
  // false while profiling is inactive or the thread is inside the profiler.
  static bool take_sample(std::size_t bytes) {
    ThreadProfile& t = t_profile;
    if (!t.sampling) return false;
    return t.countdown.take(bytes,
                            std::uint64_t(options().prof_sample.load(std::memory_order_relaxed)));
  }
  // take_sample's common case with no call (the fast paths'): false, the bytes counted, when
  // the allocation is not sampled; true when take_sample must decide.
  static bool must_decide(std::size_t bytes) {
    ThreadProfile& t = t_profile;
    return t.sampling && t.countdown.must_decide(bytes);
  }
  // A distance in bytes to the calling thread's next sampled byte, drawn anew.
  static std::uint64_t draw_distance() {
    return t_profile.countdown.draw_distance(
        std::uint64_t(options().prof_sample.load(std::memory_order_relaxed)));
  }
  // The calling thread takes up prof_active's value (at its allocations that miss its cache);
  // returns it.
  static bool follow_active() {
    ThreadProfile& t = t_profile;
    const bool on = active();
    t.sampling = on && !t.busy;
    return on;
  }
  // The block p of `bytes` is a sample: its stack is taken and it is counted live.
  static void record(const void* p, std::size_t bytes);
  // The block p is being freed: if it was a sample, it is counted freed.
  static void forget(const void* p);
  static bool is_sampled(const void* p);
  // Every sample whose block belongs(address, context) is counted freed: the blocks of an
  // explicit arena that is reset or destroyed, which are freed without a call for each.
  static void forget_where(bool (*belongs)(std::uintptr_t address, const void* context),
                           const void* context);
  // The block p moved to q without a free (a huge block remapped): its sample goes with it.
  static void moved(const void* p, const void* q);

  // Writes a profile to path, or, with nullptr, to prof_prefix.PID.SEQ.m.heap. 0, ENOENT
  // (profiling not enabled), EDEADLK (called from a signal handler that interrupted the
  // profiler, whose tables may be half changed) or the errno of the file's creation.
  static int dump(const char* path);
  // At exit: prof_final's profile, prof_prefix.PID.SEQ.f.heap, and prof_leak's report on
  // stderr (leak_report.h). (prof_interval's profiles, prof_prefix.PID.SEQ.i.heap, are written
  // by the allocation whose sample brings the live estimate to the next one.)
  static void dump_at_exit();

  // Live samples, stacks, and the bytes the profiler mapped.
  struct Counts {
    std::size_t live_samples, stacks, dropped_stacks, mapped_bytes;
    std::uint64_t taken;          // samples since the start
    std::uint64_t live_estimate;  // the bytes the live samples stand for (sample_weight)
  };
  static Counts counts();

  // fork(): the profiler's lock is held across it (every fork runs these: hot).
  [[gnu::hot]] static void lock_for_fork();
  [[gnu::hot]] static void unlock_after_fork();
};

}  // namespace pagemalloc
