// Trace replay: the run-manager calls of a real program, recorded by the drop-in built with
// -DPAGEMALLOC_TRACE_RUNS=ON (pagemap/tracing_runs.h, benchmarks/record_trace.sh), replayed
// through every run manager in this one process, so that the cost of the free-run bookkeeping
// is measured on a real program's sequence of calls with the rest of the allocator (size
// classes, slabs, thread caches, locks) taken away.
//
// Run, from the build tree (one benchmark per trace, variant and OS layer):
//
//   benchmarks/trace_replay --trace=traces/python.trace [--trace=...] [--pal=linux|pooled|both]
//       [--benchmark_out=replay.json --benchmark_out_format=json]
//   benchmarks/trace_replay_counted --trace=...     (the same, with the counters compiled in)
//
// The traces may also be named by PAGEMALLOC_REPLAY_TRACE (paths separated by ':'). Unless the
// command line says otherwise, every benchmark is repeated 5 times with the repetitions of all
// of them interleaved in random order (--benchmark_repetitions=5
// --benchmark_enable_random_interleaving=true): these machines have phases where everything
// runs about 2x slower.
//
// Replaying. The trace names runs by address, and each variant places runs differently, so the
// trace is first translated (once, at load) into a program over *slots*: an alloc fills a slot
// with the run the replaying variant returns, later calls on that run name the slot, a free
// empties it. Each variant then gets, per iteration, fresh run managers (one per run manager of
// the recorded process) and executes the program. Construction and teardown are outside the
// timed part. A failed alloc is an error. A grow_in_place whose outcome differs from the
// recorded one (the free run after the block is not the same in another layout) is replayed
// as the allocator would go on: a grow that failed in the recording but succeeds here is
// undone with shrink_in_place; a grow that succeeded in the recording but fails here becomes
// alloc + free (the block moves). Both count in grow_mismatches.
//
// Two OS layers (--pal, both by default):
//
//   linux    LinuxPal, as in the allocator: the timed part includes reserving chunks (mmap),
//            the page faults of writing their headers, purges (madvise) and releases (munmap)
//   pooled   chunks from a pool mapped and pre-faulted before the timed part, commit and
//            decommit doing nothing: the timed part is the free-run bookkeeping alone
//
// The variants: pagemap, hybrid, rbtree, and rbtree_allocated (rbtree with every allocated run
// also in an address tree, the je2008-trees design's run manager; its extra search for a large
// block's length, Arena::large_pages, is not a run-manager call and is not in a trace).
//
// Reported per benchmark (name replay/<trace>/<variant>/<pal>):
//
//   Time, CPU              one whole replay of the trace
//   ops, ns_per_op         calls in the trace; CPU ns per call (extra calls of mismatched grows
//                          are inside the time, not in ops)
//   run_ops, ns_per_run_op the calls that change runs (alloc, free, grow_in_place,
//                          shrink_in_place, trim_head; about half of all calls, since the
//                          allocator advances the clock on every slow path); the same CPU time
//                          per such call
//   nodes_visited, rotations, map_reads, map_writes, splits, coalesces, grows_in_place,
//   chunks_added           counters per op (zero unless built counted: trace_replay_counted)
//   counters_enabled       1 when this binary counts
//   peak_chunks            the most chunks held at once (all run managers together): memory
//   free_pages_at_peak     free pages when the chunks peaked
//   peak_footprint_pages   the most pages that were in use or dirty at once: all pages of all
//                          chunks less the free pages that were never touched or were purged
//   final_chunks           chunks held at the end of the trace
//   header_pages           pages of each chunk's header (the page map)
//   grow_mismatches        see above
//   same_place             the fraction of allocs that got the same place as in the recording
//                          (the same chunk, in order of first use, and the same page counted
//                          from the chunk's first run page): 1 for the recorded variant, which
//                          shows that the replay reproduces the recording
//   managers               run managers in the recorded process (arenas)
//   pool_misses            pooled only: chunks the pool lacked, taken from the OS in the replay
//
// The memory figures, the counters, grow_mismatches and same_place come from one untimed
// replay per variant over LinuxPal, made at start, which also checks the run managers'
// invariants at the end; they do not depend on timing.
#include "bench_context.h"
#include "run_counters_report.h"

#include <benchmark/benchmark.h>
#include <fmt/format.h>
#include <time.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <unordered_map>
#include <utility>
#include <vector>

#include "pagemap/counters.h"
#include "pagemap/pagemap_runs.h"
#include "pagemap/pal_linux.h"
#include "pagemap/run_manager.h"
#include "pagemap/tracing/tracing_runs.h"
#include "rbtree/allocated_runs_tree.h"
#include "rbtree/hybrid_runs.h"
#include "rbtree/rbtree_runs.h"

namespace {

using pagemalloc::AllocatedRun;
using pagemalloc::kPageSize;
using pagemalloc::LinuxPal;
using pagemalloc::PageCount;
using pagemalloc::Run;
using pagemalloc::RunCounterValues;
using pagemalloc::TraceOp;
using pagemalloc::TraceRecord;

// A run-manager variant, to be instantiated over either OS layer.
template <template <pagemalloc::Pal> class RunsOver>
struct Variant {
  template <pagemalloc::Pal P>
  using Runs = RunsOver<P>;
};

template <class... Variants>
struct VariantList {};

// rbtree with every allocated run also kept in an address tree: the run manager of the
// je2008-trees design (early 2008's jemalloc), named apart from plain rbtree.
template <pagemalloc::Pal P>
struct RbtreeAllocatedRuns : pagemalloc::AllocatedRunsTree<pagemalloc::RbtreeRuns<P>> {
  using pagemalloc::AllocatedRunsTree<pagemalloc::RbtreeRuns<P>>::AllocatedRunsTree;
  static constexpr const char* kName = "rbtree_allocated";
};

// The variants, one entry each.
using Variants = VariantList<Variant<pagemalloc::PagemapRuns>, Variant<pagemalloc::HybridRuns>,
                             Variant<pagemalloc::RbtreeRuns>, Variant<RbtreeAllocatedRuns>>;

// One call of the translated program.
struct ReplayOp {
  TraceOp op;
  bool recorded_grown = false;  // GrowInPlace: the recording grew the run
  std::uint16_t manager = 0;    // index of the run manager (recorded instance - 1)
  std::uint32_t slot = 0;       // the run's slot
  std::uint32_t pages = 0;      // Alloc, GrowInPlace, ShrinkInPlace, TrimHead: n
  std::uint64_t value = 0;      // Purge: minimum age (ms); PurgeOldest: pages;
                                // AdvanceClock: now (ms);
                                // Alloc: where the recording placed the run (place_of)
};

// Where a run lies: its chunk's rank in the order chunks first appeared, and its first page
// counted from the chunk's first run page.
std::uint64_t place_of(std::uint64_t chunk_rank, std::uint64_t first_page) {
  return chunk_rank * pagemalloc::kPagesPerChunk + first_page;
}

struct OpTally {
  std::uint64_t by_op[pagemalloc::kTraceOpCount] = {};
  std::uint64_t failed_allocs_recorded = 0;  // allocs that failed in the recording (skipped)
};

struct Program {
  std::string name;  // the trace file's name, without directory
  std::string path;
  std::vector<ReplayOp> ops;
  std::size_t slots = 0;
  std::size_t managers = 0;
  std::string recorded_variant;  // the run manager of the recording
  std::uint32_t recorded_first_run_page = 0;
  std::uint64_t recorded_pid = 0;
  std::uintmax_t file_bytes = 0;
  OpTally tally;

  // The calls that change runs: all but the purges and advance_clock.
  [[nodiscard]] std::uint64_t run_ops() const {
    const auto count = [&](TraceOp op) { return tally.by_op[static_cast<std::size_t>(op)]; };
    return count(TraceOp::Alloc) + count(TraceOp::Free) + count(TraceOp::GrowInPlace) +
           count(TraceOp::ShrinkInPlace) + count(TraceOp::TrimHead);
  }
};

std::string_view op_name(TraceOp op) {
  switch (op) {
    case TraceOp::Header: return "header";
    case TraceOp::Alloc: return "alloc";
    case TraceOp::Free: return "free";
    case TraceOp::GrowInPlace: return "grow_in_place";
    case TraceOp::ShrinkInPlace: return "shrink_in_place";
    case TraceOp::TrimHead: return "trim_head";
    case TraceOp::Purge: return "purge";
    case TraceOp::PurgeOldest: return "purge_oldest";
    case TraceOp::AdvanceClock: return "advance_clock";
  }
  return "unknown";
}

// Reads a trace and translates run addresses into slots; std::nullopt (and a message on
// stderr) when the file is not a consistent trace.
std::optional<Program> load_trace(const std::string& path) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) {
    fmt::print(stderr, "trace_replay: cannot open {}\n", path);
    return std::nullopt;
  }
  const auto bytes = static_cast<std::size_t>(in.tellg());
  if (bytes % sizeof(TraceRecord) != 0 || bytes < sizeof(TraceRecord)) {
    fmt::print(stderr, "trace_replay: {}: {} bytes is not a whole number of records\n", path,
               bytes);
    return std::nullopt;
  }
  std::vector<TraceRecord> records(bytes / sizeof(TraceRecord));
  in.seekg(0);
  in.read(reinterpret_cast<char*>(records.data()), static_cast<std::streamsize>(bytes));
  const TraceRecord& header = records.front();
  if (header.op != TraceOp::Header || header.run_base != pagemalloc::kTraceMagic ||
      header.argument != pagemalloc::kTraceVersion) {
    fmt::print(stderr, "trace_replay: {}: not a pagemalloc trace of version {}\n", path,
               pagemalloc::kTraceVersion);
    return std::nullopt;
  }

  Program program;
  program.path = path;
  program.name = path.substr(path.find_last_of('/') + 1);
  program.recorded_pid = header.result;
  program.file_bytes = bytes;
  program.ops.reserve(records.size());

  struct SlotState {
    std::uint32_t slot;
    std::uint32_t pages;  // the run's length in the recording
  };
  std::unordered_map<std::uint64_t, SlotState> live;  // recorded first-page address -> slot
  std::unordered_map<std::uint64_t, std::uint64_t> chunk_ranks;  // recorded chunk -> rank
  std::vector<std::uint32_t> free_slots;
  const auto fail = [&](std::size_t index, std::string_view what) {
    fmt::print(stderr, "trace_replay: {}: record {} ({}): {}\n", path, index,
               op_name(records[index].op), what);
    return std::nullopt;
  };

  for (std::size_t i = 1; i < records.size(); ++i) {
    const TraceRecord& r = records[i];
    if (static_cast<std::uint8_t>(r.op) >= pagemalloc::kTraceOpCount || r.instance == 0)
      return fail(i, "not a call record");
    if (r.op == TraceOp::Header) {  // a run manager introduces itself
      program.recorded_variant.clear();
      for (std::uint64_t name = r.argument; name != 0; name >>= 8)
        program.recorded_variant += static_cast<char>(name & 0xff);
      program.recorded_first_run_page = r.run_pages;
      continue;
    }
    ReplayOp op{.op = r.op, .manager = static_cast<std::uint16_t>(r.instance - 1)};
    program.managers = std::max<std::size_t>(program.managers, r.instance);
    const auto pages = static_cast<std::uint32_t>(r.argument);
    switch (r.op) {
      case TraceOp::Alloc: {
        if (r.run_base == 0) {  // the OS refused memory in the recording: nothing to replay
          ++program.tally.failed_allocs_recorded;
          continue;
        }
        std::uint32_t slot;
        if (!free_slots.empty()) {
          slot = free_slots.back();
          free_slots.pop_back();
        } else {
          slot = static_cast<std::uint32_t>(program.slots++);
        }
        if (!live.emplace(r.run_base, SlotState{slot, r.run_pages}).second)
          return fail(i, "a run allocated twice");
        op.slot = slot;
        op.pages = pages;
        const std::uint64_t chunk = r.run_base & ~std::uint64_t{pagemalloc::kChunkSize - 1};
        const std::uint64_t rank = chunk_ranks.emplace(chunk, chunk_ranks.size()).first->second;
        const std::uint64_t page = (r.run_base - chunk) / kPageSize;
        op.value = place_of(rank, page - program.recorded_first_run_page);
        break;
      }
      case TraceOp::Free:
      case TraceOp::GrowInPlace:
      case TraceOp::ShrinkInPlace:
      case TraceOp::TrimHead: {
        const auto found = live.find(r.run_base);
        if (found == live.end()) return fail(i, "a run that is not allocated");
        SlotState& state = found->second;
        if (state.pages != r.run_pages) return fail(i, "the run's length differs from the trace's");
        op.slot = state.slot;
        op.pages = pages;
        if (r.op == TraceOp::Free) {
          free_slots.push_back(state.slot);
          live.erase(found);
        } else if (r.op == TraceOp::GrowInPlace) {
          op.recorded_grown = r.result != 0;
          if (op.recorded_grown) state.pages = std::max(state.pages, pages);
        } else if (r.op == TraceOp::ShrinkInPlace) {
          state.pages = std::min(state.pages, pages);
        } else if (pages != 0 && pages < state.pages) {  // TrimHead: the run now starts later
          const SlotState moved{state.slot, state.pages - pages};
          live.erase(found);
          live.emplace(r.run_base + std::uint64_t{pages} * kPageSize, moved);
        }
        break;
      }
      case TraceOp::Purge:
      case TraceOp::PurgeOldest:
      case TraceOp::AdvanceClock: op.value = r.argument; break;
      case TraceOp::Header: break;
    }
    ++program.tally.by_op[static_cast<std::size_t>(r.op)];
    program.ops.push_back(op);
  }
  return program;
}

// The memory a variant needed, from the untimed replay.
struct MemoryFigures {
  std::size_t peak_chunks = 0;
  std::size_t free_pages_at_peak = 0;
  std::size_t peak_footprint_pages = 0;
  std::size_t final_chunks = 0;
};

struct ReplayOutcome {
  std::string error;  // empty: the replay went through
  std::uint64_t grow_mismatches = 0;
  std::uint64_t same_places = 0;  // allocs placed where the recording placed them
  MemoryFigures memory;
  RunCounterValues counters;
};

template <class Runs>
class Replay {
 public:
  template <class P>
  Replay(const Program& program, P& pal) : slots_(program.slots) {
    managers_.reserve(program.managers);
    for (std::size_t i = 0; i < program.managers; ++i)
      managers_.push_back(std::make_unique<Runs>(pal));
  }

  // Executes the program; with kMeasure, also follows the memory and checks the invariants at
  // the end.
  template <bool kMeasure>
  bool run(const Program& program, ReplayOutcome& outcome) {
    for (const ReplayOp& op : program.ops) {
      Runs& runs = *managers_[op.manager];
      Run& run = slots_[op.slot];
      const PageCount n(op.pages);
      switch (op.op) {
        case TraceOp::Alloc: {
          const AllocatedRun fresh = runs.alloc(n);
          if (!fresh.run) [[unlikely]] {
            outcome.error = fmt::format("alloc({}) failed in the replay", op.pages);
            return false;
          }
          run = fresh.run;
          if constexpr (kMeasure) outcome.same_places += place(run) == op.value ? 1 : 0;
          break;
        }
        case TraceOp::Free: runs.free(run); break;
        case TraceOp::GrowInPlace: {
          const bool grown = runs.grow_in_place(run, n);
          if (grown == op.recorded_grown) [[likely]] {
            if (grown && n > run.pages) run.pages = n;
          } else if (!move_as_recorded(runs, run, n, grown, outcome)) {
            return false;
          }
          break;
        }
        case TraceOp::ShrinkInPlace:
          runs.shrink_in_place(run, n);
          if (n < run.pages) run.pages = n;
          break;
        case TraceOp::TrimHead:
          runs.trim_head(run, n);
          if (n.value() != 0 && n < run.pages) {
            run.first = run.first + n;
            run.pages = run.pages - n;
          }
          break;
        case TraceOp::Purge: runs.purge(op.value); break;
        case TraceOp::PurgeOldest: runs.purge_oldest(PageCount(op.value)); break;
        case TraceOp::AdvanceClock: runs.advance_clock(op.value); break;
        case TraceOp::Header: break;
      }
      if constexpr (kMeasure) follow_memory(outcome.memory);
    }
    if constexpr (kMeasure) {
      for (const auto& runs : managers_) {
        if (const char* broken = runs->check_invariants()) {
          outcome.error = fmt::format("invariant broken at the end: {}", broken);
          return false;
        }
        add(outcome.counters, runs->counters());
        outcome.memory.final_chunks += runs->chunks();
      }
    }
    return true;
  }

 private:
  // A grow whose outcome differs from the recording's, replayed so that the run is again what
  // the recording had after the call.
  static bool move_as_recorded(Runs& runs, Run& run, PageCount n, bool grown,
                               ReplayOutcome& outcome) {
    ++outcome.grow_mismatches;
    if (grown) {  // the recording did not grow: undo
      runs.shrink_in_place(Run{run.chunk, run.first, n}, run.pages);
      return true;
    }
    const AllocatedRun moved = runs.alloc(n);  // the recording grew: move the block
    if (!moved.run) {
      outcome.error = fmt::format("alloc({}) for a moved block failed in the replay", n.value());
      return false;
    }
    runs.free(run);
    run = moved.run;
    return true;
  }

  // The replay's counterpart of the recorded place of a run (place_of).
  std::uint64_t place(const Run& run) {
    const auto chunk = reinterpret_cast<std::uintptr_t>(run.chunk);
    const std::uint64_t rank = chunk_ranks_.emplace(chunk, chunk_ranks_.size()).first->second;
    return place_of(rank, run.first.value() - Runs::Layout::kFirstRunPage.value());
  }

  void follow_memory(MemoryFigures& memory) const {
    std::size_t chunks = 0, free_pages = 0, clean_free_pages = 0;
    for (const auto& runs : managers_) {
      chunks += runs->chunks();
      free_pages += runs->free_pages().value();
      clean_free_pages += runs->free_pages().value() - runs->dirty_pages().value();
    }
    if (chunks > memory.peak_chunks) {
      memory.peak_chunks = chunks;
      memory.free_pages_at_peak = free_pages;
    }
    const std::size_t footprint = chunks * pagemalloc::kPagesPerChunk - clean_free_pages;
    memory.peak_footprint_pages = std::max(memory.peak_footprint_pages, footprint);
  }

  static void add(RunCounterValues& sum, const RunCounterValues& more) {
    sum.operations += more.operations;
    sum.nodes_visited += more.nodes_visited;
    sum.rotations += more.rotations;
    sum.map_reads += more.map_reads;
    sum.map_writes += more.map_writes;
    sum.splits += more.splits;
    sum.coalesces += more.coalesces;
    sum.grows_in_place += more.grows_in_place;
    sum.chunks_added += more.chunks_added;
  }

  std::vector<std::unique_ptr<Runs>> managers_;
  std::vector<Run> slots_;
  std::unordered_map<std::uintptr_t, std::uint64_t> chunk_ranks_;  // the measuring replay's
};

std::uint64_t thread_cpu_ns() {
  timespec now{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &now);
  return std::uint64_t(now.tv_sec) * 1'000'000'000 + std::uint64_t(now.tv_nsec);
}

// An OS layer that keeps the OS out of the timed replay: chunks come from a pool mapped, and
// their header pages written, before the replay (no mmap, no page fault inside it), a released
// chunk goes back to the pool, and commit and decommit do nothing (the replay never touches a
// run's pages). Reservations read zero, as the Pal contract wants: a chunk released during a
// replay has its header zeroed when it is reserved again. When the pool runs dry, chunks come
// from the OS (counted in pool_misses).
class PooledPal {
 public:
  PooledPal(std::size_t chunks, std::size_t header_bytes) : header_bytes_(header_bytes) {
    for (std::size_t i = 0; i < chunks; ++i)
      if (void* chunk = os_.reserve(pagemalloc::kChunkSize, pagemalloc::kChunkSize))
        clean_.push_back(static_cast<std::byte*>(chunk));
    owned_ = clean_;
  }
  ~PooledPal() {
    for (std::byte* chunk : owned_) os_.release(chunk, pagemalloc::kChunkSize);
  }
  PooledPal(const PooledPal&) = delete;
  PooledPal& operator=(const PooledPal&) = delete;

  // Between replays (untimed): every chunk of the pool back to clean, its header zeroed.
  // Requires: every run manager over this pool is gone.
  void refill() {
    clean_.clear();
    released_.clear();
    for (std::byte* chunk : owned_) {
      std::memset(chunk, 0, header_bytes_);
      clean_.push_back(chunk);
    }
  }

  void* reserve(std::size_t bytes, std::size_t align) {
    if (bytes == pagemalloc::kChunkSize && align == pagemalloc::kChunkSize) {
      if (!clean_.empty()) {
        std::byte* chunk = clean_.back();
        clean_.pop_back();
        return chunk;
      }
      if (!released_.empty()) {
        std::byte* chunk = released_.back();
        released_.pop_back();
        std::memset(chunk, 0, header_bytes_);
        return chunk;
      }
    }
    ++pool_misses_;
    return os_.reserve(bytes, align);
  }
  void release(void* p, std::size_t bytes) {
    auto* chunk = static_cast<std::byte*>(p);
    const bool pooled = std::find(owned_.begin(), owned_.end(), chunk) != owned_.end();
    if (bytes == pagemalloc::kChunkSize && pooled) {  // rare: a whole chunk purged
      released_.push_back(chunk);
      return;
    }
    os_.release(p, bytes);
  }
  bool commit(void*, std::size_t) { return true; }
  void decommit(void*, std::size_t) {}
  bool grow(void*, std::size_t, std::size_t) { return false; }

  [[nodiscard]] std::uint64_t pool_misses() const { return pool_misses_; }

 private:
  LinuxPal os_;
  std::size_t header_bytes_;
  std::vector<std::byte*> owned_;     // every chunk of the pool
  std::vector<std::byte*> clean_;     // in the pool, header zeroed
  std::vector<std::byte*> released_;  // in the pool, released during this replay
  std::uint64_t pool_misses_ = 0;
};
static_assert(pagemalloc::Pal<PooledPal>);

// Which OS layer a replay runs over.
enum class PalChoice { Linux, Pooled };
constexpr std::string_view pal_name(PalChoice pal) {
  return pal == PalChoice::Linux ? "linux" : "pooled";
}

// The untimed replay of a variant (over LinuxPal): memory, counters, checks.
template <class V>
ReplayOutcome measure(const Program& program) {
  LinuxPal pal;
  ReplayOutcome measured;
  Replay<typename V::template Runs<LinuxPal>> replay(program, pal);
  replay.template run<true>(program, measured);
  if (measured.error.empty() && pagemalloc::kCountersEnabled && program.run_ops() != 0 &&
      measured.counters.operations == 0)
    measured.error = "counters are compiled in but did not count (conflicting definitions?)";
  return measured;
}

template <class V, PalChoice kPal>
void replay_benchmark(benchmark::State& state, const Program& program,
                      const ReplayOutcome& measured) {
  using Runs =
      typename V::template Runs<std::conditional_t<kPal == PalChoice::Linux, LinuxPal, PooledPal>>;
  using Layout = typename Runs::Layout;
  std::optional<LinuxPal> linux_pal;
  std::optional<PooledPal> pooled_pal;
  if constexpr (kPal == PalChoice::Linux) {
    linux_pal.emplace();
  } else {
    pooled_pal.emplace(measured.memory.peak_chunks + measured.memory.peak_chunks / 8 + 4,
                       Layout::kHeaderPages.bytes());
  }
  auto& pal = [&]() -> auto& {
    if constexpr (kPal == PalChoice::Linux) return *linux_pal;
    else return *pooled_pal;
  }
  ();

  std::uint64_t replay_ns = 0;
  for (auto _ : state) {
    state.PauseTiming();
    if constexpr (kPal == PalChoice::Pooled) pal.refill();
    auto replay = std::make_unique<Replay<Runs>>(program, pal);
    ReplayOutcome outcome;
    state.ResumeTiming();
    const std::uint64_t start = thread_cpu_ns();
    const bool ok = replay->template run<false>(program, outcome);
    replay_ns += thread_cpu_ns() - start;
    state.PauseTiming();
    replay.reset();
    state.ResumeTiming();
    if (!ok) {
      state.SkipWithError(outcome.error.c_str());
      return;
    }
  }
  const auto ops = static_cast<double>(program.ops.size());
  const double replays = static_cast<double>(state.iterations());
  const auto run_ops = static_cast<double>(program.run_ops());
  const auto allocs = static_cast<double>(program.tally.by_op[std::size_t(TraceOp::Alloc)]);
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * program.ops.size()));
  state.SetLabel(fmt::format("{} over {}", Runs::kName, pal_name(kPal)));
  state.counters["ops"] = ops;
  state.counters["ns_per_op"] = static_cast<double>(replay_ns) / (ops * replays);
  state.counters["run_ops"] = run_ops;
  state.counters["ns_per_run_op"] = static_cast<double>(replay_ns) / (run_ops * replays);
  pagemalloc::bench::report_run_counters_per_op(state, measured.counters, ops);
  state.counters["peak_chunks"] = static_cast<double>(measured.memory.peak_chunks);
  state.counters["free_pages_at_peak"] = static_cast<double>(measured.memory.free_pages_at_peak);
  state.counters["peak_footprint_pages"] =
      static_cast<double>(measured.memory.peak_footprint_pages);
  state.counters["final_chunks"] = static_cast<double>(measured.memory.final_chunks);
  state.counters["header_pages"] = static_cast<double>(Layout::kHeaderPages.value());
  state.counters["grow_mismatches"] = static_cast<double>(measured.grow_mismatches);
  state.counters["same_place"] =
      allocs > 0 ? static_cast<double>(measured.same_places) / allocs : 1.0;
  state.counters["managers"] = static_cast<double>(program.managers);
  if constexpr (kPal == PalChoice::Pooled)
    state.counters["pool_misses"] = static_cast<double>(pal.pool_misses());
}

// The untimed replay of one variant, then its benchmarks. False if the replay failed.
template <class V>
bool register_variant(const Program& program, std::span<const PalChoice> pals) {
  const ReplayOutcome measured = measure<V>(program);
  const std::string_view name = V::template Runs<LinuxPal>::kName;
  if (!measured.error.empty()) {
    fmt::print(stderr, "trace_replay: {} through {}: {}\n", program.name, name, measured.error);
    return false;
  }
  for (PalChoice pal : pals) {
    const std::string title = fmt::format("replay/{}/{}/{}", program.name, name, pal_name(pal));
    if (pal == PalChoice::Linux) {
      benchmark::RegisterBenchmark(title.c_str(), [&program, measured](benchmark::State& state) {
        replay_benchmark<V, PalChoice::Linux>(state, program, measured);
      });
    } else {
      benchmark::RegisterBenchmark(title.c_str(), [&program, measured](benchmark::State& state) {
        replay_benchmark<V, PalChoice::Pooled>(state, program, measured);
      });
    }
  }
  return true;
}

template <class... V>
bool register_variants(const Program& program, std::span<const PalChoice> pals, VariantList<V...>) {
  return (register_variant<V>(program, pals) && ...);
}

std::string describe(const Program& program) {
  std::string text = fmt::format(
      "recorded with {}, {} bytes, {} calls, {} run managers:", program.recorded_variant,
      program.file_bytes, program.ops.size(), program.managers);
  for (std::uint8_t op = 1; op < pagemalloc::kTraceOpCount; ++op)
    text += fmt::format(" {}={}", op_name(TraceOp(op)), program.tally.by_op[op]);
  if (program.tally.failed_allocs_recorded != 0)
    text +=
        fmt::format(" (allocs failed in the recording: {})", program.tally.failed_allocs_recorded);
  return text;
}

struct ReplayOptions {
  std::vector<std::string> traces;
  std::vector<PalChoice> pals{PalChoice::Linux, PalChoice::Pooled};
  std::string error;  // not empty: the command line is wrong
};

// Takes this program's own flags out of argv (Google Benchmark rejects flags it does not
// know): --trace=PATH (repeatable; else PAGEMALLOC_REPLAY_TRACE, paths separated by ':') and
// --pal=linux|pooled|both.
ReplayOptions take_own_flags(int& argc, char** argv) {
  constexpr std::string_view kTrace = "--trace=";
  constexpr std::string_view kPal = "--pal=";
  ReplayOptions options;
  int kept = 1;
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (arg.starts_with(kTrace)) {
      options.traces.emplace_back(arg.substr(kTrace.size()));
    } else if (arg.starts_with(kPal)) {
      const std::string_view pal = arg.substr(kPal.size());
      if (pal == "linux") {
        options.pals = {PalChoice::Linux};
      } else if (pal == "pooled") {
        options.pals = {PalChoice::Pooled};
      } else if (pal == "both") {
        options.pals = {PalChoice::Linux, PalChoice::Pooled};
      } else {
        options.error = fmt::format("--pal={}: use linux, pooled or both", pal);
      }
    } else {
      argv[kept++] = argv[i];
    }
  }
  argc = kept;
  argv[argc] = nullptr;
  if (options.traces.empty()) {
    if (const char* listed = std::getenv("PAGEMALLOC_REPLAY_TRACE")) {
      std::string_view rest = listed;
      while (!rest.empty()) {
        const auto colon = rest.find(':');
        if (colon != 0) options.traces.emplace_back(rest.substr(0, colon));
        if (colon == std::string_view::npos) break;
        rest.remove_prefix(colon + 1);
      }
    }
  }
  if (options.traces.empty() && options.error.empty()) options.error = "no trace given";
  return options;
}

}  // namespace

int main(int argc, char** argv) {
  const ReplayOptions options = take_own_flags(argc, argv);
  if (!options.error.empty()) {
    fmt::print(stderr,
               "{}: {}\n"
               "usage: {} --trace=FILE [--trace=FILE ...] [--pal=linux|pooled|both]\n"
               "       [benchmark flags]   (or PAGEMALLOC_REPLAY_TRACE=FILE[:FILE...])\n",
               argv[0], options.error, argv[0]);
    return 2;
  }
  std::vector<std::unique_ptr<Program>> programs;  // stable addresses: benchmarks refer to them
  for (const std::string& path : options.traces) {
    std::optional<Program> program = load_trace(path);
    if (!program) return 1;
    programs.push_back(std::make_unique<Program>(std::move(*program)));
    benchmark::AddCustomContext(fmt::format("trace.{}", programs.back()->name),
                                describe(*programs.back()));
    if (!register_variants(*programs.back(), options.pals, Variants{})) return 1;
  }
  benchmark::AddCustomContext("run_managers.counters", pagemalloc::kCountersEnabled ? "on" : "off");
  std::vector<char*> args = pagemalloc::bench::with_default_repetitions(argc, argv, 5);
  return pagemalloc::bench::run_main(static_cast<int>(args.size() - 1), args.data());
}
