// The small-chunks benchmarks: the cost of many small allocations and frees in two orders,
// on one thread and on several threads sharing one allocator.
//
// Source: "The Impact of Memory Allocators on Performance" ([Pastel 2024], docs/references.md),
// its glibc_malloc benchmarks, as docs/design.md ("The benchmarks") fixes them:
//
//   BM_SmallChunks<A>/chunk_size:S     allocate 1600 chunks of S bytes; free the first half in
//                                      FIFO order (the oldest first: 0, 1, ... 799), then the
//                                      other half in LIFO order (the newest first: 1599, 1598,
//                                      ... 800); S = 16, 32, 64, 128, 256
//   BM_SmallChunksThreads<A>/threads:N the same with S = 128 on N threads at once, each with its
//                                      own 1600 chunks, all on the same allocator;
//                                      N = 1, 2, 4, 8, 16
//
// A is the allocator: Malloc (malloc/free: glibc, or whichever allocator LD_PRELOAD puts under
// the process), Pagemalloc (pm_malloc/pm_free), both in this one process, or ArenaReset: the
// bump-arena way of the talk, on pagemalloc's explicit arenas — every chunk comes from
// pm_mallocx(PM_ARENA(i)) and, instead of 1600 frees, one pm_arena_reset(i) ends the round
// (each thread has its own arena). The chunks are not written: the measure is the allocator's own
// work.
//
// One iteration is one round of 1600 allocations and 1600 frees; items_per_second counts one
// item per allocation+free pair. The threaded benchmarks use wall time, and Google Benchmark
// divides it by the rounds of all threads together: their reported time is 1600 /
// items_per_second, the total throughput of the N threads. The seed's measure, the time in
// which each of N threads does its round, is the counter round_wall_s (about N times the
// reported time).
#include "allocator_calls.h"
#include "bench_context.h"

#include <benchmark/benchmark.h>
#include <pagemalloc/pagemalloc.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstdlib>

namespace {

constexpr std::size_t kChunks = 1600;
constexpr std::size_t kThreadedChunkBytes = 128;
static_assert(kChunks % 2 == 0, "the chunks split into two equal halves");

using pagemalloc::bench::Malloc;
using pagemalloc::bench::Pagemalloc;

// One explicit arena per thread, created on first use and destroyed at thread exit.
class ThreadArena {
 public:
  ThreadArena() : index_(pm_arena_create()) {}
  ~ThreadArena() {
    if (index_ != 0) pm_arena_destroy(index_);
  }
  [[nodiscard]] unsigned index() const { return index_; }

 private:
  unsigned index_;
};

unsigned this_thread_arena() {
  thread_local ThreadArena arena;
  return arena.index();
}

using Chunks = std::array<void*, kChunks>;

// One round: allocate every chunk, free the first half oldest first, then the second half
// newest first. Returns false if an allocation failed (every chunk is freed all the same).
template <class Allocator>
bool one_round(Chunks& chunks, std::size_t chunk_size) {
  bool all_allocated = true;
  for (void*& chunk : chunks) {
    chunk = Allocator::allocate(chunk_size);
    benchmark::DoNotOptimize(chunk);
    all_allocated &= chunk != nullptr;
  }
  benchmark::ClobberMemory();
  for (std::size_t i = 0; i < kChunks / 2; ++i) Allocator::release(chunks[i]);
  for (std::size_t i = kChunks; i-- > kChunks / 2;) Allocator::release(chunks[i]);
  return all_allocated;
}

// The bump-arena round: allocate every chunk from this thread's arena, then one reset.
struct ArenaReset {};

template <>
bool one_round<ArenaReset>(Chunks& chunks, std::size_t chunk_size) {
  const unsigned arena = this_thread_arena();
  if (arena == 0) return false;
  bool all_allocated = true;
  for (void*& chunk : chunks) {
    chunk = pm_mallocx(chunk_size, PM_ARENA(arena));
    benchmark::DoNotOptimize(chunk);
    all_allocated &= chunk != nullptr;
  }
  benchmark::ClobberMemory();
  return pm_arena_reset(arena) == 0 && all_allocated;
}

template <class Allocator>
void run_rounds(benchmark::State& state, std::size_t chunk_size) {
  Chunks chunks{};
  for (auto _ : state) {
    if (!one_round<Allocator>(chunks, chunk_size)) {
      state.SkipWithError("an allocation returned NULL");
      break;
    }
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * kChunks));
}

template <class Allocator>
void BM_SmallChunks(benchmark::State& state) {
  run_rounds<Allocator>(state, static_cast<std::size_t>(state.range(0)));
}

template <class Allocator>
void BM_SmallChunksThreads(benchmark::State& state) {
  run_rounds<Allocator>(state, kThreadedChunkBytes);
  // Summed over the threads, divided by the wall time and by N, inverted: the seconds one
  // round takes on one thread while all N run.
  state.counters["round_wall_s"] = benchmark::Counter(
      static_cast<double>(state.iterations()),
      benchmark::Counter::kIsRate | benchmark::Counter::kAvgThreads | benchmark::Counter::kInvert);
}

void chunk_sizes(benchmark::internal::Benchmark* b) {
  b->ArgName("chunk_size");
  for (std::int64_t size : {16, 32, 64, 128, 256}) b->Arg(size);
}

void thread_counts(benchmark::internal::Benchmark* b) {
  b->UseRealTime();
  for (int threads : {1, 2, 4, 8, 16}) b->Threads(threads);
}

BENCHMARK_TEMPLATE(BM_SmallChunks, Malloc)->Apply(chunk_sizes);
BENCHMARK_TEMPLATE(BM_SmallChunks, Pagemalloc)->Apply(chunk_sizes);
BENCHMARK_TEMPLATE(BM_SmallChunks, ArenaReset)->Apply(chunk_sizes);
BENCHMARK_TEMPLATE(BM_SmallChunksThreads, Malloc)->Apply(thread_counts);
BENCHMARK_TEMPLATE(BM_SmallChunksThreads, Pagemalloc)->Apply(thread_counts);
BENCHMARK_TEMPLATE(BM_SmallChunksThreads, ArenaReset)->Apply(thread_counts);

}  // namespace

int main(int argc, char** argv) { return pagemalloc::bench::run_main(argc, argv); }
