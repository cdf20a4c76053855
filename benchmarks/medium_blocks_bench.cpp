// The medium-blocks benchmark: blocks of 64-256 KiB, above the small size classes and far
// below the large-blocks benchmark's megabytes, freed and asked for again at random. These are
// the lengths where an allocator's page runs are split and coalesced on every call unless it
// keeps freed blocks for the next request (tcmalloc's size classes reach 256 KiB; glibc serves
// them from its heap below its mmap threshold; pagemalloc's large-run cache keeps 8 per arena).
// Not one of the talk's workloads: added to measure where pagemalloc may lose.
//
//   BM_MediumBlocks<A>/live:L/min_kib:LO/max_kib:HI
//       One round: allocate L blocks, then 1000 times free one chosen at random and allocate a
//       block of a length drawn between LO and HI KiB (any byte count in between) in its
//       place, then free the L blocks. The lengths and choices come from one generator with a
//       fixed seed, the same in every round and for every allocator. Each block has its first
//       and last byte written, so its first and last pages are the allocator's to provide.
//
// Cases: one buffer of 128 KiB replaced (a program's scratch buffer reused); 4, 32 and 100 live
// blocks of 64-256 KiB (100: 16 MiB live); and 1, 4, 32 and 100 live blocks of 256 KiB-1 MiB
// (100: 64 MiB live, more than any thread cache keeps).
//
//   BM_MediumBlocksOnward<A>/live:L/min_kib:LO/max_kib:HI   (only with --onward)
//       The same rounds, but the generator is seeded once and carries on from round to round,
//       as a program's requests never repeat: every round is a new sequence. An allocator
//       whose heap is back in the same state after a round (every block freed) gives the same
//       addresses to the repeated sequence and touches the same pages again; with a new
//       sequence, which pages it touches over many rounds is the measure of its memory.
//       Cases: 100 live blocks of each range, 1,000 rounds (the same sequence for every
//       allocator, whatever its speed).
#include "allocator_calls.h"
#include "bench_context.h"

#include <benchmark/benchmark.h>
#include <pagemalloc/pagemalloc.h>

#include <cstddef>
#include <cstdint>
#include <random>
#include <string_view>
#include <vector>

namespace {

constexpr int kReplacements = 1000;
constexpr std::uint64_t kSeed = 2026;
constexpr std::size_t kKiB = 1024;

using pagemalloc::bench::Malloc;
using pagemalloc::bench::Pagemalloc;

void write_ends(void* block, std::size_t bytes) {
  auto* b = static_cast<unsigned char*>(block);
  b[0] = 1;
  b[bytes - 1] = 2;
  benchmark::DoNotOptimize(b);
}

// One round, its lengths and choices drawn from rng. Returns false if an allocation failed
// (every block it made is freed).
template <class Allocator>
bool one_round(std::vector<void*>& live, std::size_t min_bytes, std::size_t max_bytes,
               std::mt19937_64& rng) {
  std::uniform_int_distribution<std::size_t> length_of(min_bytes, max_bytes);
  std::uniform_int_distribution<std::size_t> victim_of(0, live.size() - 1);
  bool ok = true;
  for (void*& block : live) {
    const std::size_t bytes = length_of(rng);
    block = Allocator::allocate(bytes);
    if (block == nullptr) {
      ok = false;
      break;
    }
    write_ends(block, bytes);
  }
  for (int i = 0; ok && i < kReplacements; ++i) {
    void*& block = live[victim_of(rng)];
    Allocator::release(block);
    const std::size_t bytes = length_of(rng);
    block = Allocator::allocate(bytes);
    if (block == nullptr) ok = false;
    else write_ends(block, bytes);
  }
  for (void*& block : live) {
    if (block != nullptr) Allocator::release(block);
    block = nullptr;
  }
  return ok;
}

// Every round from the seed (repeated) or one generator for all rounds (onward).
enum class Sequence { kRepeated, kOnward };

template <class Allocator, Sequence kSequence>
void medium_rounds(benchmark::State& state) {
  std::vector<void*> live(static_cast<std::size_t>(state.range(0)), nullptr);
  const auto min_bytes = static_cast<std::size_t>(state.range(1)) * kKiB;
  const auto max_bytes = static_cast<std::size_t>(state.range(2)) * kKiB;
  std::mt19937_64 rng(kSeed);
  for (auto _ : state) {
    if constexpr (kSequence == Sequence::kRepeated) rng.seed(kSeed);
    if (!one_round<Allocator>(live, min_bytes, max_bytes, rng)) {
      state.SkipWithError("an allocation returned NULL");
      break;
    }
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations()) *
                          (kReplacements + state.range(0)));
}

template <class Allocator>
void BM_MediumBlocks(benchmark::State& state) {
  medium_rounds<Allocator, Sequence::kRepeated>(state);
}

void medium_cases(benchmark::internal::Benchmark* b) {
  b->ArgNames({"live", "min_kib", "max_kib"});
  b->Args({1, 128, 128});
  for (const std::int64_t live : {4, 32, 100}) b->Args({live, 64, 256});
  for (const std::int64_t live : {1, 4, 32, 100}) b->Args({live, 256, 1024});
  b->Unit(benchmark::kMicrosecond);
}

BENCHMARK_TEMPLATE(BM_MediumBlocks, Malloc)->Apply(medium_cases);
BENCHMARK_TEMPLATE(BM_MediumBlocks, Pagemalloc)->Apply(medium_cases);

constexpr int kOnwardRounds = 1000;

void onward_cases(benchmark::internal::Benchmark* b) {
  b->ArgNames({"live", "min_kib", "max_kib"});
  b->Args({100, 64, 256});
  b->Args({100, 256, 1024});
  b->Iterations(kOnwardRounds);  // every allocator the same sequence
  b->Unit(benchmark::kMicrosecond);
}

// The onward cases, registered only when asked for: the study's workloads keep their cases.
void register_onward() {
  benchmark::RegisterBenchmark("BM_MediumBlocksOnward<Malloc>",
                               medium_rounds<Malloc, Sequence::kOnward>)
      ->Apply(onward_cases);
  benchmark::RegisterBenchmark("BM_MediumBlocksOnward<Pagemalloc>",
                               medium_rounds<Pagemalloc, Sequence::kOnward>)
      ->Apply(onward_cases);
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<char*> arguments;
  bool onward = false;
  for (int i = 0; i < argc; ++i) {
    if (std::string_view(argv[i]) == "--onward") onward = true;
    else arguments.push_back(argv[i]);
  }
  if (onward) register_onward();
  const int count = static_cast<int>(arguments.size());
  arguments.push_back(nullptr);
  return pagemalloc::bench::run_main(count, arguments.data());
}
