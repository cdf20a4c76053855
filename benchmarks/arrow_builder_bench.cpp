// The Arrow builder benchmark: the cost of growing a 64-byte-aligned buffer while data is
// appended to it, by copy or in place.
//
// Source: "Faster, scalable memory allocations in Apache Arrow with jemalloc" ([Korn 2018],
// docs/references.md),
// Arrow C++'s BuildPrimitiveArrayNoNulls. An int64 column is built by appending 2 MiB
// (262,144 values) 256 times, 512 MiB at the end. The capacity starts at 0 and becomes
// max(2 * capacity, needed) whenever an append does not fit: 2, 4, 8, ... 512 MiB, so the
// buffer is allocated once and grown 8 times, and a strategy that copies on every grow copies
// 2 + 4 + ... + 256 = 510 MiB. Arrow needs 64-byte alignment (for SIMD), which glibc can give
// only by aligned_alloc + memcpy + free; jemalloc's rallocx(MALLOCX_ALIGN(64)) keeps the
// alignment and can grow in place when the pages after the buffer are free. The post measured
// three repetitions: the first alike for both allocators, the second and third about twice as
// fast with jemalloc, which reused the pages the first build had left behind. (Whether today's
// jemalloc still does, and why not: papers/arrow-inplace.)
//
// Strategies, one benchmark each, all appending through the same routine (append_values):
//
//   GlibcAlignedAllocMemcpy   aligned_alloc(64) + memcpy of the used bytes + free (glibc)
//   GlibcRealloc              glibc realloc; not 64-byte aligned, so for reference only
//   JemallocRallocx           jemalloc's mallocx / rallocx / dallocx with MALLOCX_ALIGN(64)
//   MimallocReallocAligned    mimalloc's mi_malloc_aligned / mi_realloc_aligned / mi_free, 64
//   PagemallocRallocx         pm_mallocx / pm_rallocx / pm_dallocx with PM_ALIGN(64)
//   PrefaultedRegion          the limit: one 512 MiB region mapped and written before the
//                             timed part, so growing is free and no page faults are left
//
// The names "malloc", "aligned_alloc" and "free" mean whichever allocator the process runs on:
// glibc, or the one LD_PRELOAD puts under it. jemalloc cannot be dlopen'ed (static TLS), so
// its rows run in a process of their own with libjemalloc preloaded, as mimalloc's with
// libmimalloc: their functions are looked up at start (preloaded_peers.h), and each of the
// two benchmarks is registered only in a process where its functions exist.
//
// Each benchmark runs one build per repetition (Iterations(1)) and three repetitions, each
// reported on its own line, so repetitions 2 and 3 show the warm behaviour. The timed part is
// the whole life of the column: the first allocation, the appends, the grows and the final
// free (as in Arrow, where the builder's buffer dies inside the timed loop); only the limit's
// mapping and unmapping are outside it. A check that every page kept its values runs with the
// timer paused.
//
// Reported per repetition:
//   bytes_per_second   512 MiB / wall time
//   grows              reallocations after the first allocation (8 for every strategy)
//   moves              grows that returned a different address
//   bytes_copied       bytes the grows copied: counted at the memcpy for aligned_alloc,
//                      pm_stats.copied for pagemalloc, the used bytes of every move for
//                      jemalloc and mimalloc (both memcpy the old block when they move it);
//                      none for glibc realloc, which copies some blocks, moves mmapped ones
//                      with mremap and does not say which
//   grown_in_place     pagemalloc only: pm_stats.grown_in_place
//   pm_moved           pagemalloc only: pm_stats.moved (should equal moves)
#include "bench_context.h"
#include "preloaded_peers.h"

#include <benchmark/benchmark.h>
#include <fmt/format.h>
#include <pagemalloc/pagemalloc.h>
#include <sys/mman.h>

#include <algorithm>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <string>

namespace {

constexpr std::size_t kMiB = std::size_t{1} << 20;
constexpr std::size_t kAppendValues = 262'144;                              // values per append
constexpr std::size_t kAppendBytes = kAppendValues * sizeof(std::int64_t);  // 2 MiB
constexpr std::size_t kAppends = 256;
constexpr std::size_t kFinalBytes = kAppends * kAppendBytes;  // 512 MiB
constexpr std::size_t kAlignment = 64;
constexpr std::size_t kPageBytes = 4096;
static_assert(kAppendBytes == 2 * kMiB);
static_assert(kFinalBytes == 512 * kMiB);

// What a way of growing the buffer offers the builder.
template <class S>
concept GrowthStrategy = requires(S s, const S cs, std::byte* p, std::size_t n,
                                  benchmark::State& state) {
  { S::kAligned } -> std::convertible_to<bool>;  // results must be kAlignment-aligned
  { cs.ready() } -> std::convertible_to<bool>;   // the untimed setup succeeded
  // Returns a buffer of new_capacity bytes whose first `used` bytes are those of `old`
  // (old == nullptr on the first call), or nullptr with `old` still valid.
  { s.grow(p, n, n) } -> std::same_as<std::byte*>;
  s.release(p);      // frees what grow returned last
  cs.report(state);  // adds the strategy's own counters, totals since construction
};

// Counts what a growth copies: a reallocation memcpys the old block when it moves it, and
// the block is full (used bytes) whenever the builder grows it.
class MoveCopies {
 public:
  void count(const std::byte* old, const std::byte* grown, std::size_t used) {
    if (old != nullptr && grown != nullptr && grown != old) copied_ += used;
  }

  void report(benchmark::State& state) const {
    state.counters["bytes_copied"] =
        benchmark::Counter(static_cast<double>(copied_), benchmark::Counter::kAvgIterations,
                           benchmark::Counter::kIs1024);
  }

 private:
  std::size_t copied_ = 0;  // bytes, since construction
};

// glibc without an aligned realloc: Arrow's path before jemalloc.
class GlibcAlignedAllocMemcpy {
 public:
  static constexpr bool kAligned = true;

  bool ready() const { return true; }

  std::byte* grow(std::byte* old, std::size_t used, std::size_t new_capacity) {
    auto* grown = static_cast<std::byte*>(std::aligned_alloc(kAlignment, new_capacity));
    if (grown == nullptr) return nullptr;
    if (used != 0) std::memcpy(grown, old, used);
    copies_.count(old, grown, used);
    std::free(old);
    return grown;
  }

  void release(std::byte* data) { std::free(data); }

  void report(benchmark::State& state) const { copies_.report(state); }

 private:
  MoveCopies copies_;
};

// glibc realloc: may grow in place or move by mremap, but loses the 64-byte alignment.
class GlibcRealloc {
 public:
  static constexpr bool kAligned = false;

  bool ready() const { return true; }

  std::byte* grow(std::byte* old, std::size_t, std::size_t new_capacity) {
    return static_cast<std::byte*>(std::realloc(old, new_capacity));
  }

  void release(std::byte* data) { std::free(data); }

  void report(benchmark::State&) const {}
};

// jemalloc's aligned reallocation, as Arrow used it: mallocx / rallocx / dallocx.
class JemallocRallocx {
 public:
  static constexpr bool kAligned = true;
  static constexpr int kFlags = pagemalloc::bench::JemallocApi::align(kAlignment);
  static_assert(kFlags == PM_ALIGN(kAlignment), "PM_ALIGN encodes as MALLOCX_ALIGN does");

  static bool available() { return pagemalloc::bench::jemalloc().complete(); }

  bool ready() const { return available(); }

  std::byte* grow(std::byte* old, std::size_t used, std::size_t new_capacity) {
    const auto& api = pagemalloc::bench::jemalloc();
    // rallocx requires a live pointer: the first allocation is a mallocx.
    auto* grown = static_cast<std::byte*>(old == nullptr ? api.mallocx(new_capacity, kFlags)
                                                         : api.rallocx(old, new_capacity, kFlags));
    copies_.count(old, grown, used);
    return grown;
  }

  void release(std::byte* data) { pagemalloc::bench::jemalloc().dallocx(data, kFlags); }

  void report(benchmark::State& state) const { copies_.report(state); }

 private:
  MoveCopies copies_;
};

// mimalloc's aligned reallocation: mi_malloc_aligned / mi_realloc_aligned / mi_free.
class MimallocReallocAligned {
 public:
  static constexpr bool kAligned = true;

  static bool available() { return pagemalloc::bench::mimalloc().complete(); }

  bool ready() const { return available(); }

  std::byte* grow(std::byte* old, std::size_t used, std::size_t new_capacity) {
    const auto& api = pagemalloc::bench::mimalloc();
    auto* grown = static_cast<std::byte*>(old == nullptr
                                              ? api.malloc_aligned(new_capacity, kAlignment)
                                              : api.realloc_aligned(old, new_capacity, kAlignment));
    copies_.count(old, grown, used);
    return grown;
  }

  void release(std::byte* data) { pagemalloc::bench::mimalloc().free(data); }

  void report(benchmark::State& state) const { copies_.report(state); }

 private:
  MoveCopies copies_;
};

// pagemalloc's jemalloc-style aligned reallocation.
class PagemallocRallocx {
 public:
  static constexpr bool kAligned = true;
  static constexpr int kFlags = PM_ALIGN(kAlignment);

  PagemallocRallocx() { pm_stats_get(&before_); }

  bool ready() const { return true; }

  std::byte* grow(std::byte* old, std::size_t, std::size_t new_capacity) {
    // rallocx, like jemalloc's, requires a live pointer: the first allocation is a mallocx.
    void* grown =
        old == nullptr ? pm_mallocx(new_capacity, kFlags) : pm_rallocx(old, new_capacity, kFlags);
    return static_cast<std::byte*>(grown);
  }

  void release(std::byte* data) { pm_dallocx(data, kFlags); }

  void report(benchmark::State& state) const {
    pm_stats after{};
    pm_stats_get(&after);
    const auto delta = [](std::size_t now, std::size_t then) {
      return static_cast<double>(now - then);
    };
    state.counters["bytes_copied"] =
        benchmark::Counter(delta(after.copied, before_.copied), benchmark::Counter::kAvgIterations,
                           benchmark::Counter::kIs1024);
    state.counters["grown_in_place"] = benchmark::Counter(
        delta(after.grown_in_place, before_.grown_in_place), benchmark::Counter::kAvgIterations);
    state.counters["pm_moved"] =
        benchmark::Counter(delta(after.moved, before_.moved), benchmark::Counter::kAvgIterations);
  }

 private:
  pm_stats before_{};  // snapshot taken before the timed loop
};

// The limit: the appends alone, into memory that is already mapped and faulted in.
class PrefaultedRegion {
 public:
  static constexpr bool kAligned = true;

  PrefaultedRegion() {
    void* region =
        mmap(nullptr, kFinalBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (region == MAP_FAILED) return;
    region_ = static_cast<std::byte*>(region);
    std::memset(region_, 0xa5, kFinalBytes);  // fault every page in, outside the timed part
    benchmark::DoNotOptimize(region_);
    benchmark::ClobberMemory();
  }
  ~PrefaultedRegion() {
    if (region_ != nullptr) munmap(region_, kFinalBytes);
  }
  PrefaultedRegion(const PrefaultedRegion&) = delete;
  PrefaultedRegion& operator=(const PrefaultedRegion&) = delete;

  bool ready() const { return region_ != nullptr; }

  std::byte* grow(std::byte*, std::size_t, std::size_t new_capacity) {
    return new_capacity <= kFinalBytes ? region_ : nullptr;
  }

  void release(std::byte*) {}

  void report(benchmark::State& state) const {
    state.counters["bytes_copied"] =
        benchmark::Counter(0, benchmark::Counter::kAvgIterations, benchmark::Counter::kIs1024);
  }

 private:
  std::byte* region_ = nullptr;  // kFinalBytes, page-aligned, every page written
};

// The one append routine of every strategy: stores first, first + 1, ... as int64, as a
// builder copying a batch of values would. Out of line so that all strategies run the same
// machine code.
// Requires: dst has room for count values.
[[gnu::noinline]] void append_values(std::int64_t* dst, std::size_t count, std::int64_t first) {
  std::iota(dst, dst + count, first);
}

struct BuildResult {
  std::byte* data = nullptr;  // the final buffer (kFinalBytes used), nullptr on failure
  std::size_t grows = 0;      // capacity changes after the first allocation
  std::size_t moves = 0;      // grows that returned a different address
  std::string error;          // why data is nullptr
};

// Builds the column: 256 appends of 2 MiB, growing the capacity to max(2 * capacity, needed).
template <GrowthStrategy Strategy>
BuildResult build_column(Strategy& strategy) {
  BuildResult result;
  std::byte* data = nullptr;
  std::size_t capacity = 0;  // bytes
  std::size_t used = 0;      // bytes
  for (std::size_t append = 0; append < kAppends; ++append) {
    const std::size_t needed = used + kAppendBytes;
    if (needed > capacity) {
      const std::size_t new_capacity = std::max(2 * capacity, needed);
      std::byte* grown = strategy.grow(data, used, new_capacity);
      if (grown == nullptr) {
        if (data != nullptr) strategy.release(data);
        result.error = fmt::format("could not grow the buffer from {} to {} MiB", capacity / kMiB,
                                   new_capacity / kMiB);
        return result;
      }
      if (Strategy::kAligned && reinterpret_cast<std::uintptr_t>(grown) % kAlignment != 0) {
        strategy.release(grown);
        result.error = fmt::format("a buffer of {} MiB is not {}-byte aligned: {}",
                                   new_capacity / kMiB, kAlignment, fmt::ptr(grown));
        return result;
      }
      if (data != nullptr) {
        ++result.grows;
        if (grown != data) ++result.moves;
      }
      data = grown;
      capacity = new_capacity;
    }
    append_values(reinterpret_cast<std::int64_t*>(data + used), kAppendValues,
                  static_cast<std::int64_t>(append * kAppendValues));
    used = needed;
    benchmark::DoNotOptimize(data);
    benchmark::ClobberMemory();
  }
  result.data = data;
  return result;
}

// Checks one value per page and the last one: each must equal its index.
bool column_is_intact(const std::byte* data) {
  const auto* values = reinterpret_cast<const std::int64_t*>(data);
  constexpr std::size_t kCount = kFinalBytes / sizeof(std::int64_t);
  constexpr std::size_t kStride = kPageBytes / sizeof(std::int64_t);
  for (std::size_t i = 0; i < kCount; i += kStride) {
    if (values[i] != static_cast<std::int64_t>(i)) return false;
  }
  return values[kCount - 1] == static_cast<std::int64_t>(kCount - 1);
}

template <GrowthStrategy Strategy>
void BM_ArrowBuilder(benchmark::State& state) {
  Strategy strategy;  // untimed setup: the limit maps and faults its region here
  if (!strategy.ready()) {
    state.SkipWithError("the untimed setup failed (mmap of 512 MiB)");
    return;
  }
  std::size_t grows = 0;
  std::size_t moves = 0;
  for (auto _ : state) {
    BuildResult column = build_column(strategy);
    if (column.data == nullptr) {
      state.SkipWithError(column.error.c_str());
      break;
    }
    state.PauseTiming();
    const bool intact = column_is_intact(column.data);
    state.ResumeTiming();
    strategy.release(column.data);
    if (!intact) {
      state.SkipWithError("the built column lost values while it grew");
      break;
    }
    grows += column.grows;
    moves += column.moves;
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * kFinalBytes));
  state.counters["grows"] =
      benchmark::Counter(static_cast<double>(grows), benchmark::Counter::kAvgIterations);
  state.counters["moves"] =
      benchmark::Counter(static_cast<double>(moves), benchmark::Counter::kAvgIterations);
  strategy.report(state);
}

// One build per repetition, three repetitions as in the post, each reported on its own line.
void one_build_three_times(benchmark::internal::Benchmark* b) {
  b->Iterations(1)->Repetitions(3)->ReportAggregatesOnly(false)->UseRealTime()->Unit(
      benchmark::kMillisecond);
}

BENCHMARK_TEMPLATE(BM_ArrowBuilder, GlibcAlignedAllocMemcpy)->Apply(one_build_three_times);
BENCHMARK_TEMPLATE(BM_ArrowBuilder, GlibcRealloc)->Apply(one_build_three_times);
BENCHMARK_TEMPLATE(BM_ArrowBuilder, PagemallocRallocx)->Apply(one_build_three_times);
BENCHMARK_TEMPLATE(BM_ArrowBuilder, PrefaultedRegion)->Apply(one_build_three_times);

// The peers' own aligned reallocation, in a process that runs on that peer.
void register_preloaded_peers() {
  if (JemallocRallocx::available()) {
    benchmark::RegisterBenchmark("BM_ArrowBuilder<JemallocRallocx>",
                                 BM_ArrowBuilder<JemallocRallocx>)
        ->Apply(one_build_three_times);
  }
  if (MimallocReallocAligned::available()) {
    benchmark::RegisterBenchmark("BM_ArrowBuilder<MimallocReallocAligned>",
                                 BM_ArrowBuilder<MimallocReallocAligned>)
        ->Apply(one_build_three_times);
  }
}

}  // namespace

int main(int argc, char** argv) {
  register_preloaded_peers();
  return pagemalloc::bench::run_main(argc, argv);
}
