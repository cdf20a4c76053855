// Whole allocators of different designs side by side in one process: three heaps, each
// assembled from its own Config (allocator/src/allocator.h), run the same workloads.
//
//   Today       today's choices (presets.h, default): thread caches, transfer stashes, one arena
//   per CPU, slabs
//               up to 16 KiB and kept, the O(1) page-map run manager
//   Trees2008   jemalloc as Firefox 3.0 shipped it (presets.h, je2008-trees): no thread
//               caches, one arena, slabs up to 2 KiB released as soon as they empty, every
//               free validated, red-black trees for free runs and an address tree of the
//               allocated ones
//   Pagemap2008 the same with the page-map run manager (je2008-pagemap)
//
// Each takes the build's chunk size (the Configs of one binary share it), so in a default
// build the 2008 designs here have 2 MiB chunks (the state of the study's sweep before its
// chunk step, tools/study/design_sweep.py), and in a je2008 build all three have 1 MiB.
//
//   GcChurn     the GC-arena churn the tree-overhead study measures (benchmarks/memory/
//               gc_arena_churn.c, in small): waves of 4 KiB blocks aligned to 4 KiB, as
//               SpiderMonkey's GC arenas came from posix_memalign(4096, 4096), beside small
//               objects; each wave frees most of the previous one
//   SmallObjects 1600 small blocks of 16-512 bytes, freed half first-in-first-out and half
//               last-in-first-out (the talk's small-chunk workload, one thread)
//
// Every call goes through PmApi<Config> (pm_api.h). Not a test: the output is a measurement.
#include <benchmark/benchmark.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

// First: fork_impl.h declares __dso_handle, which the compiler declares itself (with C++
// linkage) once the file has a static with a destructor, as bench_context.h's.
#include "heap/allocator_impl.h"

#include "api/pm_api.h"
#include "bench_context.h"

namespace pagemalloc::bench {
namespace {

// A named design (presets.h) with the build's chunk size.
template <class Preset>
struct WithBuildChunks : Preset {
  static constexpr std::size_t kLgChunkSize = BuildConfig::kLgChunkSize;
};
using Today = WithBuildChunks<DefaultConfig>;
using Trees2008 = WithBuildChunks<Je2008TreesConfig>;
using Pagemap2008 = WithBuildChunks<Je2008PagemapConfig>;

// A small pseudo-random sequence (xorshift64*), the same in every heap.
struct Random {
  std::uint64_t state = 0x9e3779b97f4a7c15;
  std::uint64_t next() {
    state ^= state >> 12;
    state ^= state << 25;
    state ^= state >> 27;
    return state * 0x2545f4914f6cdd1d;
  }
};

template <class Config>
void GcChurn(benchmark::State& state) {
  using Api = PmApi<Config>;
  constexpr std::size_t kArenasPerWave = 256;
  constexpr std::size_t kObjectsPerArena = 16;
  std::vector<void*> arenas, objects, older_arenas, older_objects;
  Random random;
  for (auto _ : state) {
    for (void* p : older_arenas) Api::free(p);
    for (void* p : older_objects) Api::free(p);
    older_arenas.clear();
    older_objects.clear();
    // Keep one arena in eight of the last wave (live GC things), free the rest now.
    for (std::size_t i = 0; i < arenas.size(); ++i) {
      if (i % 8 == 0) older_arenas.push_back(arenas[i]);
      else Api::free(arenas[i]);
    }
    for (void* p : objects) Api::free(p);
    arenas.clear();
    objects.clear();
    for (std::size_t i = 0; i < kArenasPerWave; ++i) {
      void* arena = Api::aligned_alloc(4096, 4096);
      std::memset(arena, 0, 64);
      arenas.push_back(arena);
      for (std::size_t j = 0; j < kObjectsPerArena; ++j) {
        void* object = Api::malloc(16 + random.next() % 240);
        std::memset(object, 1, 16);
        objects.push_back(object);
      }
    }
    benchmark::ClobberMemory();
  }
  for (void* p : arenas) Api::free(p);
  for (void* p : objects) Api::free(p);
  for (void* p : older_arenas) Api::free(p);
  state.SetItemsProcessed(state.iterations() * kArenasPerWave * (1 + kObjectsPerArena));
}

template <class Config>
void SmallObjects(benchmark::State& state) {
  using Api = PmApi<Config>;
  constexpr std::size_t kBlocks = 1600;
  std::vector<void*> blocks(kBlocks);
  Random random;
  for (auto _ : state) {
    for (void*& p : blocks) {
      p = Api::malloc(16 + random.next() % 497);
      *static_cast<char*>(p) = 1;
    }
    for (std::size_t i = 0; i < kBlocks / 2; ++i) Api::free(blocks[i]);
    for (std::size_t i = kBlocks; i > kBlocks / 2; --i) Api::free(blocks[i - 1]);
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(state.iterations() * kBlocks);
}

BENCHMARK(GcChurn<Today>)->Name("GcChurn/Today");
BENCHMARK(GcChurn<Trees2008>)->Name("GcChurn/Trees2008");
BENCHMARK(GcChurn<Pagemap2008>)->Name("GcChurn/Pagemap2008");
BENCHMARK(SmallObjects<Today>)->Name("SmallObjects/Today");
BENCHMARK(SmallObjects<Trees2008>)->Name("SmallObjects/Trees2008");
BENCHMARK(SmallObjects<Pagemap2008>)->Name("SmallObjects/Pagemap2008");

}  // namespace
}  // namespace pagemalloc::bench

int main(int argc, char** argv) { return pagemalloc::bench::run_main(argc, argv); }
