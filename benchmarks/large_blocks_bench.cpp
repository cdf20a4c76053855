// The large-blocks benchmark: many big allocations, at most 20 alive, replaced at random.
//
// Source: "The Impact of Memory Allocators on Performance" ([Pastel 2024], docs/references.md),
// as docs/design.md ("The benchmarks") fixes it:
//
//   BM_LargeBlocks<A>   1000 times: allocate a block of a random size between 5 MB and 25 MB;
//                       while fewer than 20 blocks are alive, keep it, otherwise it replaces
//                       a block chosen at random (which is freed). The sizes and choices come
//                       from one generator with a fixed seed, the same in every round and for
//                       every allocator. One iteration is one such round of 1000; the blocks
//                       alive at its end are freed inside the round.
//
// A is the allocator: Malloc (malloc/free: glibc, or whichever allocator LD_PRELOAD puts
// under the process) or Pagemalloc (pm_malloc/pm_free), both in this one process. Each block
// has one byte written per 4 KiB page of its first 64 KiB, so the allocator cannot hand out
// pages it never maps, but the measure stays the allocator's work rather than memset's.
#include "allocator_calls.h"
#include "bench_context.h"

#include <benchmark/benchmark.h>
#include <pagemalloc/pagemalloc.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <random>

namespace {

constexpr int kAllocations = 1000;
constexpr std::size_t kMaxAlive = 20;
constexpr std::size_t kMinBytes = 5'000'000;
constexpr std::size_t kMaxBytes = 25'000'000;
constexpr std::uint64_t kSeed = 2024;
constexpr std::size_t kTouchedBytes = 64 * 1024;
constexpr std::size_t kTouchStride = 4096;

using pagemalloc::bench::Malloc;
using pagemalloc::bench::Pagemalloc;

void touch(void* block) {
  auto* bytes = static_cast<unsigned char*>(block);
  for (std::size_t offset = 0; offset < kTouchedBytes; offset += kTouchStride)
    bytes[offset] = static_cast<unsigned char>(offset);
}

// One round of 1000 allocations. Returns false if an allocation failed.
template <class Allocator>
bool one_round() {
  std::mt19937_64 rng(kSeed);
  std::uniform_int_distribution<std::size_t> size_of(kMinBytes, kMaxBytes);
  std::uniform_int_distribution<std::size_t> victim_of(0, kMaxAlive - 1);
  std::array<void*, kMaxAlive> alive{};
  std::size_t count = 0;
  bool ok = true;
  for (int i = 0; i < kAllocations; ++i) {
    void* block = Allocator::allocate(size_of(rng));
    if (block == nullptr) {
      ok = false;
      break;
    }
    touch(block);
    benchmark::DoNotOptimize(block);
    if (count < kMaxAlive) {
      alive[count++] = block;
    } else {
      std::size_t victim = victim_of(rng);
      Allocator::release(alive[victim]);
      alive[victim] = block;
    }
  }
  for (std::size_t i = 0; i < count; ++i) Allocator::release(alive[i]);
  return ok;
}

template <class Allocator>
void BM_LargeBlocks(benchmark::State& state) {
  for (auto _ : state) {
    if (!one_round<Allocator>()) {
      state.SkipWithError("an allocation returned NULL");
      break;
    }
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * kAllocations));
}

BENCHMARK_TEMPLATE(BM_LargeBlocks, Malloc)->Unit(benchmark::kMillisecond);
BENCHMARK_TEMPLATE(BM_LargeBlocks, Pagemalloc)->Unit(benchmark::kMillisecond);

}  // namespace

int main(int argc, char** argv) { return pagemalloc::bench::run_main(argc, argv); }
