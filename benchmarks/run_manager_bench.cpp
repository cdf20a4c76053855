// The run-manager cost study: what one alloc or free of a page run costs in each run manager
// as the number of free runs it manages grows.
//
// Source: "Overzealous use of my red-black tree hammer" (Evans, 2008; docs/references.md), as
// docs/design.md ("The benchmarks", run-manager cost) fixes it: build a heap with n free runs of
// varied sizes, n = 16 ... 65,536, then time alloc/free of page runs; per variant, ns/op and
// the instrumentation counters per op. Every variant runs in this one binary over LinuxPal
// (address space is reserved, but only the chunks' page maps and the run managers' records
// are ever written, so the resident memory stays a few tens of MiB even at 65,536 free runs,
// about 1,500 chunks).
//
// The heap (built before the timed loop, once per benchmark run):
//
//   1. Runs of random 1..8 pages are allocated from a fresh run manager. In a fresh heap each
//      chunk fills from its first page on, so in address order a chunk's runs touch.
//   2. In address order, every other run of each chunk is freed (never the last one before a
//      chunk's free tail), n + W of them: these *holes* are free runs of 1..8 pages, each
//      between two allocated runs, the *separators*, which stay allocated throughout. Holes
//      therefore cannot coalesce with one another.
//   3. A *window* of W = max(n / 4, 4) runs of random 1..8 pages is allocated (best fit puts
//      them into holes, where an exact fit takes a whole hole), then the window is turned over
//      2W times untimed so that the timed loop starts in its steady state.
//
// The timed loop turns the window over: free the oldest run of the window, allocate a new run
// of a random 1..8 pages (a fixed-seed sequence) in its place. A freed window run goes back
// into its hole, coalescing with what is left of the hole, so the number of free runs stays
// about n (the counters free_runs_before / free_runs_after, counted by walking the page maps
// before and after the timed loop, show by how much; the last chunk's free tail adds one).
// Without the separators (freeing the oldest of all allocated runs) the heap coalesces within
// one pass down to about one free run per chunk, whatever n was: n would no longer be the
// number of free runs. With hundreds of holes of every length, best fit nearly always finds
// an exact fit, so from n = 256 on almost no op splits or coalesces (see the counters): what
// is measured there is finding, indexing and unindexing free runs. With n = 16 about one op
// in ten splits or coalesces, and which free run fits is harder to predict.
//
// Reported per benchmark (one iteration = one op = one alloc or one free, alternately):
//
//   Time, CPU            nanoseconds per op (wall, CPU)
//   items_per_second     ops per second of CPU time
//   nodes_visited, rotations, map_reads, map_writes, splits, coalesces, grows_in_place,
//   chunks_added
//                        the run manager's counters over the timed loop, per op; zero unless
//                        the run managers count (run_manager_bench_counted, or a build with
//                        -DPAGEMALLOC_COUNTERS=ON)
//   counters_enabled     1 when the counters count in this binary, else 0
//   free_runs_before/_after, chunks, window   the shape of the heap (see above)
//
// Run, from the build tree (both binaries come from this one source file):
//
//   benchmarks/run_manager_bench --benchmark_out=runs.json --benchmark_out_format=json
//   benchmarks/run_manager_bench_counted --benchmark_out=counted.json --benchmark_out_format=json
//
// Unless the command line says otherwise, each benchmark is repeated 3 times and the
// repetitions of all benchmarks are interleaved in random order
// (--benchmark_repetitions=3 --benchmark_enable_random_interleaving=true), because these
// machines have phases where everything runs about 2x slower.
#include "bench_context.h"
#include "run_counters_report.h"

#include <benchmark/benchmark.h>
#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "pagemap/counters.h"
#include "pagemap/page_map.h"
#include "pagemap/pagemap_runs.h"
#include "pagemap/pal_linux.h"
#include "pagemap/run_manager.h"
#include "rbtree/hybrid_runs.h"
#include "rbtree/rbtree_runs.h"

namespace {

using pagemalloc::AllocatedRun;
using pagemalloc::LinuxPal;
using pagemalloc::PageCount;
using pagemalloc::PageIndex;
using pagemalloc::Run;
using pagemalloc::RunCounterValues;

constexpr std::size_t kMinRunPages = 1;
constexpr std::size_t kMaxRunPages = 8;
constexpr std::uint64_t kSeed = 2008;  // the post's year; any fixed value
constexpr std::size_t kSizeSequenceLength = std::size_t{1} << 16;  // sizes of the timed loop
static_assert(std::has_single_bit(kSizeSequenceLength));
constexpr std::size_t kMinWindow = 4;

std::size_t window_size(std::size_t free_runs) { return std::max(free_runs / 4, kMinWindow); }

// Random run lengths, 1..8 pages, from a fixed seed: the same sequence for every variant.
std::vector<std::uint8_t> run_sizes(std::size_t count, std::uint64_t seed) {
  std::mt19937_64 generator(seed);
  std::uniform_int_distribution<std::size_t> pages(kMinRunPages, kMaxRunPages);
  std::vector<std::uint8_t> sizes(count);
  for (auto& size : sizes) size = static_cast<std::uint8_t>(pages(generator));
  return sizes;
}

bool address_order(const Run& a, const Run& b) {
  return a.chunk != b.chunk ? a.chunk < b.chunk : a.first < b.first;
}

// The free runs in `chunks`, counted by walking their page maps from the
// first run page: every run's first entry holds its length.
template <class Runs>
std::size_t count_free_runs(std::vector<std::byte*> chunks) {
  std::sort(chunks.begin(), chunks.end());
  chunks.erase(std::unique(chunks.begin(), chunks.end()), chunks.end());
  std::size_t free_runs = 0;
  for (std::byte* chunk : chunks) {
    for (PageIndex i = Runs::Layout::kFirstRunPage; i < PageIndex(pagemalloc::kPagesPerChunk);) {
      const pagemalloc::PageEntry entry = pagemalloc::page_entry(chunk, i);
      if (entry.pages().value() == 0) return 0;  // not a run's first page: the walk is lost
      free_runs += entry.is_free() ? 1 : 0;
      i = i + entry.pages();
    }
  }
  return free_runs;
}

// A run manager holding about `free_runs` free runs of 1..8 pages, separated by allocated
// runs, and a window of allocated runs that the timed loop turns over (see the top of file).
template <class Runs>
class FragmentedHeap {
 public:
  FragmentedHeap(std::size_t free_runs, LinuxPal& pal)
      : runs_(std::make_unique<Runs>(pal)), window_(window_size(free_runs)) {
    std::mt19937_64 generator(kSeed);
    std::uniform_int_distribution<std::size_t> pages(kMinRunPages, kMaxRunPages);
    const std::size_t holes_wanted = free_runs + window_.size();
    std::vector<Run> holes;
    while (holes.size() < holes_wanted && ok_) {
      // About two runs per hole, plus one run per chunk that cannot become a hole.
      const std::size_t more = 2 * (holes_wanted - holes.size()) + holes_wanted / 32 + 16;
      for (std::size_t i = 0; i < more && ok_; ++i) take(PageCount(pages(generator)));
      holes = pick_holes(holes_wanted);
    }
    for (const Run& hole : holes) runs_->free(hole);
    allocated_.clear();
    for (Run& run : window_) run = take(PageCount(pages(generator)));
    const auto warm_up_sizes = run_sizes(2 * window_.size(), kSeed + 1);
    for (std::uint8_t size : warm_up_sizes) ok_ = ok_ && turn(PageCount(size));
  }

  [[nodiscard]] bool ok() const { return ok_; }
  Runs& runs() { return *runs_; }

  // Frees the oldest run of the window and allocates one of `pages` in its place.
  bool turn(PageCount pages) {
    free_oldest();
    return refill_oldest(pages);
  }

  // The two halves of a turn, one op each.
  void free_oldest() { runs_->free(window_[oldest_]); }
  bool refill_oldest(PageCount pages) {
    const AllocatedRun fresh = runs_->alloc(pages);
    window_[oldest_] = fresh.run;
    if (++oldest_ == window_.size()) oldest_ = 0;
    return static_cast<bool>(fresh.run);
  }

  [[nodiscard]] std::size_t free_runs() const { return count_free_runs<Runs>(chunks_); }
  [[nodiscard]] std::size_t window() const { return window_.size(); }

 private:
  Run take(PageCount pages) {
    const AllocatedRun fresh = runs_->alloc(pages);
    if (!fresh.run) {
      ok_ = false;
      return Run{};
    }
    allocated_.push_back(fresh.run);
    chunks_.push_back(fresh.run.chunk);
    return fresh.run;
  }

  // Every other run of each chunk in address order, each with an allocated run on both sides
  // (the first run page's left neighbour is the header), up to `wanted` of them.
  std::vector<Run> pick_holes(std::size_t wanted) {
    std::sort(allocated_.begin(), allocated_.end(), address_order);
    std::vector<Run> holes;
    for (std::size_t i = 1; i + 1 < allocated_.size() && holes.size() < wanted; ++i) {
      const Run& before = allocated_[i - 1];
      const Run& run = allocated_[i];
      const Run& after = allocated_[i + 1];
      const bool touches_both = before.chunk == run.chunk && before.end() == run.first &&
                                after.chunk == run.chunk && run.end() == after.first;
      const bool before_is_hole = !holes.empty() && holes.back().chunk == before.chunk &&
                                  holes.back().first == before.first;
      if (touches_both && !before_is_hole) holes.push_back(run);
    }
    return holes;
  }

  std::unique_ptr<Runs> runs_;
  std::vector<Run> allocated_;      // while building: every run taken so far
  std::vector<std::byte*> chunks_;  // the chunk of every run ever taken (repeats included)
  std::vector<Run> window_;
  std::size_t oldest_ = 0;  // the window's oldest run
  bool ok_ = true;
};

RunCounterValues difference(const RunCounterValues& after, const RunCounterValues& before) {
  return RunCounterValues{
      .operations = after.operations - before.operations,
      .nodes_visited = after.nodes_visited - before.nodes_visited,
      .rotations = after.rotations - before.rotations,
      .map_reads = after.map_reads - before.map_reads,
      .map_writes = after.map_writes - before.map_writes,
      .splits = after.splits - before.splits,
      .coalesces = after.coalesces - before.coalesces,
      .grows_in_place = after.grows_in_place - before.grows_in_place,
      .chunks_added = after.chunks_added - before.chunks_added,
  };
}

template <class Runs>
void BM_RunManager(benchmark::State& state) {
  const auto free_runs = static_cast<std::size_t>(state.range(0));
  LinuxPal pal;
  FragmentedHeap<Runs> heap(free_runs, pal);
  if (!heap.ok()) {
    state.SkipWithError("the OS refused memory while the heap was built");
    return;
  }
  if (pagemalloc::kCountersEnabled && heap.runs().counters().map_writes == 0) {
    state.SkipWithError("counters are compiled in but did not count (conflicting definitions?)");
    return;
  }
  static const std::vector<std::uint8_t> sizes = run_sizes(kSizeSequenceLength, kSeed + 2);
  const std::size_t free_runs_before = heap.free_runs();
  const RunCounterValues before = heap.runs().counters();

  // One iteration is one op: a free of the window's oldest run, then (next iteration) an alloc
  // in its place. An odd iteration count ends with the oldest slot freed and not refilled.
  std::size_t step = 0;
  bool freeing = true;
  for (auto _ : state) {
    if (freeing) {
      heap.free_oldest();
    } else if (!heap.refill_oldest(PageCount(sizes[step++ & (kSizeSequenceLength - 1)])))
        [[unlikely]] {
      state.SkipWithError("alloc failed in the timed loop");
      break;
    }
    freeing = !freeing;
  }

  const RunCounterValues work = difference(heap.runs().counters(), before);
  const double ops = static_cast<double>(state.iterations());
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations()));
  state.SetLabel(Runs::kName);
  pagemalloc::bench::report_run_counters_per_op(state, work, ops);
  state.counters["free_runs_before"] = static_cast<double>(free_runs_before);
  state.counters["free_runs_after"] = static_cast<double>(heap.free_runs());
  state.counters["chunks"] = static_cast<double>(heap.runs().chunks());
  state.counters["window"] = static_cast<double>(heap.window());
}

void heap_sizes(benchmark::internal::Benchmark* benchmark) {
  benchmark->ArgName("free_runs");
  for (std::int64_t n : {16, 64, 256, 1024, 4096, 16384, 65536}) benchmark->Arg(n);
}

// The variants, one line each.
BENCHMARK_TEMPLATE(BM_RunManager, pagemalloc::PagemapRuns<LinuxPal>)->Apply(heap_sizes);
BENCHMARK_TEMPLATE(BM_RunManager, pagemalloc::HybridRuns<LinuxPal>)->Apply(heap_sizes);
BENCHMARK_TEMPLATE(BM_RunManager, pagemalloc::RbtreeRuns<LinuxPal>)->Apply(heap_sizes);

}  // namespace

int main(int argc, char** argv) {
  benchmark::AddCustomContext("run_managers.counters", pagemalloc::kCountersEnabled ? "on" : "off");
  std::vector<char*> args = pagemalloc::bench::with_default_repetitions(argc, argv, 3);
  return pagemalloc::bench::run_main(static_cast<int>(args.size() - 1), args.data());
}
