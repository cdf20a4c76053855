// The arena-rounds benchmarks: the talk's small-chunk workload with one release per round
// instead of a free per chunk — the case for bump allocators ("use bump allocators when
// dealing with a lot of short-lived small objects") — and the Go arena's pattern.
//
//   BM_ResetRound<K>/chunk_size:S     1600 chunks of S bytes (S = 16 .. 256), each written
//                                     (memset of S bytes), then released: by the kind's reset
//                                     when it has one, else one by one
//   BM_GoArenaRound<K>                1600 chunks of 16 .. 256 bytes (a fixed pseudo-random
//                                     sequence), each written; every fourth freed early (eight
//                                     allocations after it), the rest released at the end
//   BM_ResetRoundThreads<K>/threads:2 BM_ResetRound with S = 128 on 2 threads at once; each
//                                     thread checks the first and last byte of its chunks
//                                     before the release (a wrong byte fails the benchmark).
//                                     Shared kinds: both threads allocate from one arena and
//                                     the last to finish its round resets it (a spin barrier,
//                                     no futex)
//
// K, the kind of memory (one object per thread unless shared):
//   BareBump           a pointer bumped through a pre-faulted buffer that starts on a cache
//                      line, reset to its start: the limit no allocator can beat
//   Monotonic          std::pmr::monotonic_buffer_resource over new/delete, release() per round
//   UnsyncPool         std::pmr::unsynchronized_pool_resource: deallocate per chunk
//   BumpArena          pagemalloc::BumpArena (inline bump, reset())
//   BumpMallocx        pm_mallocx(S, PM_ARENA(i)) of a PM_ARENA_BUMP arena, pm_arena_reset(i)
//   BumpResource       pagemalloc::ArenaResource (a bump arena) through memory_resource&
//   BumpCursorInline   a C program's path: pm_arena_bump_inline(&cursor, S) of a
//                      PM_ARENA_BUMP arena (pagemalloc.h), pm_arena_bump_free_inline per
//                      early free, pm_arena_reset(i)
//   BumpCursorCall     a binding's path that can only call: pm_arena_bump(&cursor, S, 0),
//                      pm_arena_bump_free(&cursor, p)
//   MonotonicVirtual   Monotonic through memory_resource& (a virtual call per chunk, as a pmr
//                      container makes; Monotonic's calls are resolved at compile time)
//   PlainArena         pm_mallocx(S, PM_ARENA(i)) of a pm_arena_create() arena (slabs and
//                      runs), pm_arena_reset(i)
//   PmMallocFree       pm_malloc / pm_free per chunk, for reference
//   SharedBumpMallocx  (threads) one PM_ARENA_BUMP arena for both threads; its counter
//                      regions_per_round says how often a thread took the arena's lock
//
// One iteration is one round; items_per_second counts one item per chunk. The threaded
// benchmarks use wall time (their reported time is 1600 / items_per_second of both threads).
#include "bench_context.h"

#include <benchmark/benchmark.h>
#include <pagemalloc/memory_resource.h>
#include <pagemalloc/pagemalloc.h>
#include <sched.h>

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory_resource>
#include <random>
#include <type_traits>
#include <vector>

namespace {

constexpr std::size_t kChunks = 1600;
constexpr std::size_t kThreadedChunkBytes = 128;
constexpr std::size_t kMaxChunkBytes = 256;
constexpr std::size_t kAlign = 16;
constexpr std::size_t kRegionBytes = std::size_t{128} << 10;  // bump_space.h: kBumpRegionSize

using Chunks = std::array<void*, kChunks>;

// ---------------------------------------------------------------------------------------------
// The kinds: allocate(size), free_one(p, size) (a chunk freed before the end of the round),
// end_round(chunks, sizes, live) (the release).

class BareBump {
 public:
  BareBump() : buffer_(kChunks * (kMaxChunkBytes + kAlign) + kLine) {
    std::memset(buffer_.data(), 1, buffer_.size());  // pre-faulted
    start_ = align_up(buffer_.data());
    next_ = start_;
  }
  void* allocate(std::size_t size) {
    std::byte* p = next_;
    next_ += (size + kAlign - 1) & ~(kAlign - 1);
    return p;
  }
  void free_one(void*, std::size_t) {}
  void end_round(const Chunks&, const std::size_t*, const bool*) { next_ = start_; }

 private:
  // To a line: chunks of a multiple of 64 bytes then lie on lines of their own, as fast as a
  // buffer can be (16 bytes off, a 256-byte chunk spans five lines).
  static constexpr std::uintptr_t kLine = 64;
  static std::byte* align_up(std::byte* p) {
    return reinterpret_cast<std::byte*>((reinterpret_cast<std::uintptr_t>(p) + kLine - 1) &
                                        ~(kLine - 1));
  }
  std::vector<std::byte> buffer_;
  std::byte* start_;
  std::byte* next_;
};

class Monotonic {
 public:
  void* allocate(std::size_t size) { return resource_.allocate(size, kAlign); }
  void free_one(void* p, std::size_t size) { resource_.deallocate(p, size, kAlign); }
  void end_round(const Chunks&, const std::size_t*, const bool*) { resource_.release(); }

 private:
  std::pmr::monotonic_buffer_resource resource_;
};

class UnsyncPool {
 public:
  void* allocate(std::size_t size) { return resource_.allocate(size, kAlign); }
  void free_one(void* p, std::size_t size) { resource_.deallocate(p, size, kAlign); }
  void end_round(const Chunks& chunks, const std::size_t* sizes, const bool* live) {
    for (std::size_t i = 0; i < kChunks; ++i)
      if (live[i]) resource_.deallocate(chunks[i], sizes[i], kAlign);
  }

 private:
  std::pmr::unsynchronized_pool_resource resource_;
};

class BumpArena {
 public:
  void* allocate(std::size_t size) { return arena_.allocate(size); }
  void free_one(void* p, std::size_t) { arena_.deallocate(p); }
  void end_round(const Chunks&, const std::size_t*, const bool*) { arena_.reset(); }

 private:
  pagemalloc::BumpArena arena_;
};

template <unsigned kFlags>
class ArenaByIndex {
 public:
  ArenaByIndex() : arena_(pm_arena_create_ex(kFlags)) {}
  ~ArenaByIndex() { pm_arena_destroy(arena_); }
  ArenaByIndex(const ArenaByIndex&) = delete;
  ArenaByIndex& operator=(const ArenaByIndex&) = delete;
  void* allocate(std::size_t size) { return pm_mallocx(size, PM_ARENA(arena_)); }
  void free_one(void* p, std::size_t) { pm_free(p); }
  void end_round(const Chunks&, const std::size_t*, const bool*) { pm_arena_reset(arena_); }

 private:
  unsigned arena_;
};
using BumpMallocx = ArenaByIndex<PM_ARENA_BUMP>;
using PlainArena = ArenaByIndex<0>;

// A C program's cursor over a bump arena: inline bumps (kInline) or one call per chunk.
template <bool kInline>
class BumpCursor {
 public:
  BumpCursor() { cursor_.arena = arena_; }
  ~BumpCursor() { pm_arena_destroy(arena_); }
  BumpCursor(const BumpCursor&) = delete;
  BumpCursor& operator=(const BumpCursor&) = delete;
  void* allocate(std::size_t size) {
    if constexpr (kInline) return pm_arena_bump_inline(&cursor_, size);
    return pm_arena_bump(&cursor_, size, 0);
  }
  void free_one(void* p, std::size_t) {
    if constexpr (kInline) {
      pm_arena_bump_free_inline(&cursor_, p);
    } else {
      pm_arena_bump_free(&cursor_, p);
    }
  }
  void end_round(const Chunks&, const std::size_t*, const bool*) {
    pm_arena_reset(arena_);
    cursor_.next = cursor_.end = cursor_.begin = nullptr;  // as pagemalloc.h asks
    cursor_.blocks = cursor_.skipped = 0;
  }

 private:
  unsigned arena_ = pm_arena_create_ex(PM_ARENA_BUMP);
  pm_bump_cursor cursor_{};
};
using BumpCursorInline = BumpCursor<true>;
using BumpCursorCall = BumpCursor<false>;

class MonotonicVirtual {
 public:
  void* allocate(std::size_t size) { return memory_->allocate(size, kAlign); }
  void free_one(void* p, std::size_t size) { memory_->deallocate(p, size, kAlign); }
  void end_round(const Chunks&, const std::size_t*, const bool*) { resource_.release(); }

 private:
  std::pmr::monotonic_buffer_resource resource_;
  std::pmr::memory_resource* memory_ = &resource_;
};

class BumpResource {
 public:
  void* allocate(std::size_t size) { return memory_->allocate(size, kAlign); }
  void free_one(void* p, std::size_t size) { memory_->deallocate(p, size, kAlign); }
  void end_round(const Chunks&, const std::size_t*, const bool*) { resource_.reset(); }

 private:
  pagemalloc::ArenaResource resource_;
  std::pmr::memory_resource* memory_ = &resource_;
};

class PmMallocFree {
 public:
  void* allocate(std::size_t size) { return pm_malloc(size); }
  void free_one(void* p, std::size_t) { pm_free(p); }
  void end_round(const Chunks& chunks, const std::size_t*, const bool* live) {
    for (std::size_t i = 0; i < kChunks; ++i)
      if (live[i]) pm_free(chunks[i]);
  }
};

// Two threads meet at the end of each round; the last to arrive runs `last` before either
// goes on. Spins (and yields): no futex.
class SpinBarrier {
 public:
  template <class Last>
  void arrive_and_wait(unsigned threads, Last&& last) {
    const unsigned generation = generation_.load(std::memory_order_acquire);
    if (arrived_.fetch_add(1, std::memory_order_acq_rel) + 1 == threads) {
      last();
      arrived_.store(0, std::memory_order_relaxed);
      generation_.store(generation + 1, std::memory_order_release);
      return;
    }
    for (int spins = 0; generation_.load(std::memory_order_acquire) == generation; ++spins)
      if (spins > 100) sched_yield();
  }

 private:
  std::atomic<unsigned> arrived_{0};
  std::atomic<unsigned> generation_{0};
};

// One bump arena for every thread of the benchmark; the last thread of a round resets it.
class SharedBumpMallocx {
 public:
  explicit SharedBumpMallocx(unsigned threads) : threads_(threads) {}
  void* allocate(std::size_t size) { return pm_mallocx(size, PM_ARENA(shared().arena)); }
  void free_one(void* p, std::size_t) { pm_free(p); }
  void end_round(const Chunks&, const std::size_t*, const bool*) {
    Shared& s = shared();
    s.barrier.arrive_and_wait(threads_, [&] {
      pm_arena_stats stats{};
      pm_arena_stats_get(s.arena, &stats);
      s.regions += stats.active / kRegionBytes;
      ++s.rounds;
      pm_arena_reset(s.arena);
    });
  }
  static double regions_per_round() {
    Shared& s = shared();
    return s.rounds == 0 ? 0 : double(s.regions) / double(s.rounds);
  }
  static void clear_counts() {
    shared().regions = 0;
    shared().rounds = 0;
  }

 private:
  struct Shared {
    unsigned arena = pm_arena_create_ex(PM_ARENA_BUMP);
    SpinBarrier barrier;
    std::size_t regions = 0;  // written by the last thread of a round, read after the run
    std::size_t rounds = 0;
  };
  static Shared& shared() {
    static Shared s;
    return s;
  }
  unsigned threads_;
};

template <class Kind>
Kind make_kind(const benchmark::State&) {
  return Kind();
}
template <>
SharedBumpMallocx make_kind<SharedBumpMallocx>(const benchmark::State& state) {
  return SharedBumpMallocx(unsigned(state.threads()));
}

// ---------------------------------------------------------------------------------------------
// The rounds.

template <class Kind>
void BM_ResetRound(benchmark::State& state) {
  const auto size = static_cast<std::size_t>(state.range(0));
  auto kind = make_kind<Kind>(state);
  Chunks chunks{};
  std::array<std::size_t, kChunks> sizes;
  sizes.fill(size);
  std::array<bool, kChunks> live;
  live.fill(true);
  for (auto _ : state) {
    for (std::size_t i = 0; i < kChunks; ++i) {
      void* p = kind.allocate(size);
      std::memset(p, int(i), size);
      chunks[i] = p;
    }
    benchmark::ClobberMemory();
    kind.end_round(chunks, sizes.data(), live.data());
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * kChunks));
}

// The Go arena's pattern: sizes from a fixed sequence; chunk i - 8 freed at chunk i when
// i is a multiple of 4; the rest at the end.
template <class Kind>
void BM_GoArenaRound(benchmark::State& state) {
  auto kind = make_kind<Kind>(state);
  std::array<std::size_t, kChunks> sizes;
  std::mt19937 rng(3);
  std::uniform_int_distribution<std::size_t> size_of(16, kMaxChunkBytes);
  for (std::size_t& s : sizes) s = size_of(rng);
  Chunks chunks{};
  std::array<bool, kChunks> live;
  for (auto _ : state) {
    for (std::size_t i = 0; i < kChunks; ++i) {
      void* p = kind.allocate(sizes[i]);
      std::memset(p, int(i), sizes[i]);
      chunks[i] = p;
      live[i] = true;
      if (i >= 8 && i % 4 == 0) {
        kind.free_one(chunks[i - 8], sizes[i - 8]);
        live[i - 8] = false;
      }
    }
    benchmark::ClobberMemory();
    kind.end_round(chunks, sizes.data(), live.data());
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * kChunks));
}

template <class Kind>
void BM_ResetRoundThreads(benchmark::State& state) {
  auto kind = make_kind<Kind>(state);
  if constexpr (std::is_same_v<Kind, SharedBumpMallocx>) {
    if (state.thread_index() == 0) SharedBumpMallocx::clear_counts();
  }
  Chunks chunks{};
  std::array<std::size_t, kChunks> sizes;
  sizes.fill(kThreadedChunkBytes);
  std::array<bool, kChunks> live;
  live.fill(true);
  const unsigned salt = unsigned(state.thread_index()) * 101;
  bool intact = true;
  for (auto _ : state) {
    for (std::size_t i = 0; i < kChunks; ++i) {
      void* p = kind.allocate(kThreadedChunkBytes);
      std::memset(p, int(i + salt), kThreadedChunkBytes);
      chunks[i] = p;
    }
    for (std::size_t i = 0; i < kChunks; ++i) {
      const auto* bytes = static_cast<const unsigned char*>(chunks[i]);
      const auto expected = static_cast<unsigned char>(i + salt);
      intact &= bytes[0] == expected && bytes[kThreadedChunkBytes - 1] == expected;
    }
    kind.end_round(chunks, sizes.data(), live.data());
  }
  if (!intact) state.SkipWithError("a chunk lost the bytes its thread wrote");
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * kChunks));
  if constexpr (std::is_same_v<Kind, SharedBumpMallocx>) {
    if (state.thread_index() == 0)
      state.counters["regions_per_round"] = SharedBumpMallocx::regions_per_round();
  }
}

void chunk_sizes(benchmark::internal::Benchmark* b) {
  b->ArgName("chunk_size");
  for (std::int64_t size : {16, 32, 64, 128, 256}) b->Arg(size);
}

void two_threads(benchmark::internal::Benchmark* b) { b->UseRealTime()->Threads(2); }

BENCHMARK_TEMPLATE(BM_ResetRound, BareBump)->Apply(chunk_sizes);
BENCHMARK_TEMPLATE(BM_ResetRound, Monotonic)->Apply(chunk_sizes);
BENCHMARK_TEMPLATE(BM_ResetRound, UnsyncPool)->Apply(chunk_sizes);
BENCHMARK_TEMPLATE(BM_ResetRound, BumpArena)->Apply(chunk_sizes);
BENCHMARK_TEMPLATE(BM_ResetRound, BumpMallocx)->Apply(chunk_sizes);
BENCHMARK_TEMPLATE(BM_ResetRound, BumpResource)->Apply(chunk_sizes);
BENCHMARK_TEMPLATE(BM_ResetRound, BumpCursorInline)->Apply(chunk_sizes);
BENCHMARK_TEMPLATE(BM_ResetRound, BumpCursorCall)->Apply(chunk_sizes);
BENCHMARK_TEMPLATE(BM_ResetRound, MonotonicVirtual)->Apply(chunk_sizes);
BENCHMARK_TEMPLATE(BM_ResetRound, PlainArena)->Apply(chunk_sizes);
BENCHMARK_TEMPLATE(BM_ResetRound, PmMallocFree)->Apply(chunk_sizes);

BENCHMARK_TEMPLATE(BM_GoArenaRound, BareBump);
BENCHMARK_TEMPLATE(BM_GoArenaRound, Monotonic);
BENCHMARK_TEMPLATE(BM_GoArenaRound, UnsyncPool);
BENCHMARK_TEMPLATE(BM_GoArenaRound, BumpArena);
BENCHMARK_TEMPLATE(BM_GoArenaRound, BumpMallocx);
BENCHMARK_TEMPLATE(BM_GoArenaRound, BumpResource);
BENCHMARK_TEMPLATE(BM_GoArenaRound, BumpCursorInline);
BENCHMARK_TEMPLATE(BM_GoArenaRound, BumpCursorCall);
BENCHMARK_TEMPLATE(BM_GoArenaRound, MonotonicVirtual);
BENCHMARK_TEMPLATE(BM_GoArenaRound, PlainArena);
BENCHMARK_TEMPLATE(BM_GoArenaRound, PmMallocFree);

BENCHMARK_TEMPLATE(BM_ResetRoundThreads, BareBump)->Apply(two_threads);
BENCHMARK_TEMPLATE(BM_ResetRoundThreads, Monotonic)->Apply(two_threads);
BENCHMARK_TEMPLATE(BM_ResetRoundThreads, BumpArena)->Apply(two_threads);
BENCHMARK_TEMPLATE(BM_ResetRoundThreads, BumpMallocx)->Apply(two_threads);
BENCHMARK_TEMPLATE(BM_ResetRoundThreads, SharedBumpMallocx)->Apply(two_threads);

}  // namespace

int main(int argc, char** argv) { return pagemalloc::bench::run_main(argc, argv); }
