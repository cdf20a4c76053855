// Trace replay: the run-manager calls of a real program, recorded by the drop-in built with
// -DPAGEMALLOC_TRACE_RUNS=ON (pagemap/tracing_runs.h, benchmarks/record_trace.sh), replayed
// through every run manager in this one process, so that the cost of the free-run bookkeeping
// is measured on a real program's sequence of calls with the rest of the allocator (size
// classes, slabs, thread caches, locks) taken away.
//
// Run, from the build tree (one benchmark per trace and variant):
//
//   benchmarks/trace_replay --trace=traces/python.1234.trace [--trace=...]
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
// empties it. Each variant then gets, per iteration, fresh run managers over LinuxPal (one per
// run manager of the recorded process) and executes the program. Construction and teardown are
// outside the timed part; chunk reservations (mmap) and purges (madvise) inside it are the
// variant's own work, as in the allocator. A failed alloc is an error. A grow_in_place whose
// outcome differs from the recorded one (the free run after the block is not the same in
// another layout) is replayed as the allocator would go on: a grow that failed in the
// recording but succeeds here is undone with shrink_in_place; a grow that succeeded in the
// recording but fails here becomes alloc + free (the block moves). Both count in
// grow_mismatches (0 for the recorded variant itself).
//
// Reported per benchmark (name replay/<trace>/<variant>):
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
//   grow_mismatches        see above
//   managers               run managers in the recorded process (arenas)
//
// The memory figures come from one untimed replay per variant, made at start, which also
// checks the run managers' invariants at the end; they do not depend on timing.
#include "bench_context.h"

#include <benchmark/benchmark.h>
#include <fmt/format.h>
#include <time.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "pagemap/counters.h"
#include "pagemap/pagemap_runs.h"
#include "pagemap/pal_linux.h"
#include "pagemap/run_manager.h"
#include "pagemap/tracing_runs.h"
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

template <class... Runs>
struct VariantList {};

// The variants, one entry each.
using Variants = VariantList<pagemalloc::PagemapRuns<LinuxPal>,
                             pagemalloc::HybridRuns<LinuxPal>,
                             pagemalloc::RbtreeRuns<LinuxPal>>;

// One call of the translated program.
struct ReplayOp {
  TraceOp op;
  bool recorded_grown = false;  // GrowInPlace: the recording grew the run
  std::uint16_t manager = 0;    // index of the run manager (recorded instance - 1)
  std::uint32_t slot = 0;       // the run's slot
  std::uint32_t pages = 0;      // Alloc, GrowInPlace, ShrinkInPlace, TrimHead: n
  std::uint64_t ms = 0;         // Purge: minimum age; AdvanceClock: now
};

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
  std::uint64_t recorded_pid = 0;
  std::uintmax_t file_bytes = 0;
  OpTally tally;

  // The calls that change runs: all but purge and advance_clock.
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
  std::vector<std::uint32_t> free_slots;
  const auto fail = [&](std::size_t index, std::string_view what) {
    fmt::print(stderr, "trace_replay: {}: record {} ({}): {}\n", path, index,
               op_name(records[index].op), what);
    return std::nullopt;
  };

  for (std::size_t i = 1; i < records.size(); ++i) {
    const TraceRecord& r = records[i];
    if (static_cast<std::uint8_t>(r.op) >= pagemalloc::kTraceOpCount || r.op == TraceOp::Header ||
        r.instance == 0)
      return fail(i, "not a call record");
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
      case TraceOp::AdvanceClock:
        op.ms = r.argument;
        break;
      case TraceOp::Header:
        break;
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
  MemoryFigures memory;
  RunCounterValues counters;
};

template <class Runs>
class Replay {
 public:
  Replay(const Program& program, LinuxPal& pal) : slots_(program.slots) {
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
          break;
        }
        case TraceOp::Free:
          runs.free(run);
          break;
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
        case TraceOp::Purge:
          runs.purge(op.ms);
          break;
        case TraceOp::AdvanceClock:
          runs.advance_clock(op.ms);
          break;
        case TraceOp::Header:
          break;
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
    memory.peak_footprint_pages =
        std::max(memory.peak_footprint_pages, chunks * pagemalloc::kPagesPerChunk - clean_free_pages);
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
};

std::uint64_t thread_cpu_ns() {
  timespec now{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &now);
  return std::uint64_t(now.tv_sec) * 1'000'000'000 + std::uint64_t(now.tv_nsec);
}

template <class Runs>
void replay_benchmark(benchmark::State& state, const Program& program,
                      const ReplayOutcome& measured) {
  LinuxPal pal;
  std::uint64_t replay_ns = 0;
  for (auto _ : state) {
    state.PauseTiming();
    auto replay = std::make_unique<Replay<Runs>>(program, pal);
    ReplayOutcome outcome;
    const std::uint64_t start = thread_cpu_ns();
    state.ResumeTiming();
    const bool ok = replay->template run<false>(program, outcome);
    state.PauseTiming();
    replay_ns += thread_cpu_ns() - start;
    replay.reset();
    state.ResumeTiming();
    if (!ok) {
      state.SkipWithError(outcome.error.c_str());
      return;
    }
  }
  const auto ops = static_cast<double>(program.ops.size());
  const auto per_op = [&](std::uint64_t count) { return static_cast<double>(count) / ops; };
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * program.ops.size()));
  state.SetLabel(Runs::kName);
  const double replays = static_cast<double>(state.iterations());
  const auto run_ops = static_cast<double>(program.run_ops());
  state.counters["ops"] = ops;
  state.counters["ns_per_op"] = static_cast<double>(replay_ns) / (ops * replays);
  state.counters["run_ops"] = run_ops;
  state.counters["ns_per_run_op"] = static_cast<double>(replay_ns) / (run_ops * replays);
  const RunCounterValues& c = measured.counters;
  state.counters["nodes_visited"] = per_op(c.nodes_visited);
  state.counters["rotations"] = per_op(c.rotations);
  state.counters["map_reads"] = per_op(c.map_reads);
  state.counters["map_writes"] = per_op(c.map_writes);
  state.counters["splits"] = per_op(c.splits);
  state.counters["coalesces"] = per_op(c.coalesces);
  state.counters["grows_in_place"] = per_op(c.grows_in_place);
  state.counters["chunks_added"] = per_op(c.chunks_added);
  state.counters["counters_enabled"] = pagemalloc::kCountersEnabled ? 1 : 0;
  state.counters["peak_chunks"] = static_cast<double>(measured.memory.peak_chunks);
  state.counters["free_pages_at_peak"] = static_cast<double>(measured.memory.free_pages_at_peak);
  state.counters["peak_footprint_pages"] =
      static_cast<double>(measured.memory.peak_footprint_pages);
  state.counters["final_chunks"] = static_cast<double>(measured.memory.final_chunks);
  state.counters["grow_mismatches"] = static_cast<double>(measured.grow_mismatches);
  state.counters["managers"] = static_cast<double>(program.managers);
}

// The untimed replay of one variant, then its benchmark. False if the replay failed.
template <class Runs>
bool register_variant(const Program& program) {
  LinuxPal pal;
  ReplayOutcome measured;
  {
    Replay<Runs> replay(program, pal);
    replay.template run<true>(program, measured);
  }
  if (measured.error.empty() && pagemalloc::kCountersEnabled && program.run_ops() != 0 &&
      measured.counters.operations == 0)
    measured.error = "counters are compiled in but did not count (conflicting definitions?)";
  if (!measured.error.empty()) {
    fmt::print(stderr, "trace_replay: {} through {}: {}\n", program.name, Runs::kName,
               measured.error);
    return false;
  }
  benchmark::RegisterBenchmark(fmt::format("replay/{}/{}", program.name, Runs::kName).c_str(),
                               [&program, measured](benchmark::State& state) {
                                 replay_benchmark<Runs>(state, program, measured);
                               });
  return true;
}

template <class... Runs>
bool register_variants(const Program& program, VariantList<Runs...>) {
  return (register_variant<Runs>(program) && ...);
}

std::string describe(const Program& program) {
  std::string text = fmt::format("{} bytes, {} calls, {} run managers:", program.file_bytes,
                                 program.ops.size(), program.managers);
  for (std::uint8_t op = 1; op < pagemalloc::kTraceOpCount; ++op)
    text += fmt::format(" {}={}", op_name(TraceOp(op)), program.tally.by_op[op]);
  if (program.tally.failed_allocs_recorded != 0)
    text += fmt::format(" (allocs failed in the recording: {})",
                        program.tally.failed_allocs_recorded);
  return text;
}

// Takes the --trace=PATH flags out of argv (Google Benchmark rejects flags it does not know);
// falls back on PAGEMALLOC_REPLAY_TRACE.
std::vector<std::string> take_trace_paths(int& argc, char** argv) {
  constexpr std::string_view kFlag = "--trace=";
  std::vector<std::string> paths;
  int kept = 1;
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (arg.starts_with(kFlag)) {
      paths.emplace_back(arg.substr(kFlag.size()));
    } else {
      argv[kept++] = argv[i];
    }
  }
  argc = kept;
  argv[argc] = nullptr;
  if (paths.empty()) {
    if (const char* listed = std::getenv("PAGEMALLOC_REPLAY_TRACE")) {
      std::string_view rest = listed;
      while (!rest.empty()) {
        const auto colon = rest.find(':');
        if (colon != 0) paths.emplace_back(rest.substr(0, colon));
        if (colon == std::string_view::npos) break;
        rest.remove_prefix(colon + 1);
      }
    }
  }
  return paths;
}

// Google Benchmark's own flags, with defaults for repetitions and interleaving unless given.
std::vector<char*> with_default_flags(int argc, char** argv) {
  static std::string repetitions = "--benchmark_repetitions=5";
  static std::string interleaving = "--benchmark_enable_random_interleaving=true";
  std::vector<char*> args(argv, argv + argc);
  const auto given = [&](std::string_view flag) {
    return std::any_of(args.begin(), args.end(),
                       [&](const char* arg) { return std::string_view(arg).starts_with(flag); });
  };
  if (!given("--benchmark_repetitions")) args.push_back(repetitions.data());
  if (!given("--benchmark_enable_random_interleaving")) args.push_back(interleaving.data());
  args.push_back(nullptr);
  return args;
}

}  // namespace

int main(int argc, char** argv) {
  const std::vector<std::string> paths = take_trace_paths(argc, argv);
  if (paths.empty()) {
    fmt::print(stderr,
               "usage: {} --trace=FILE [--trace=FILE ...] [benchmark flags]\n"
               "       (or PAGEMALLOC_REPLAY_TRACE=FILE[:FILE...])\n",
               argv[0]);
    return 2;
  }
  std::vector<std::unique_ptr<Program>> programs;  // stable addresses: benchmarks refer to them
  for (const std::string& path : paths) {
    std::optional<Program> program = load_trace(path);
    if (!program) return 1;
    programs.push_back(std::make_unique<Program>(std::move(*program)));
    benchmark::AddCustomContext(fmt::format("trace.{}", programs.back()->name),
                                describe(*programs.back()));
    if (!register_variants(*programs.back(), Variants{})) return 1;
  }
  benchmark::AddCustomContext("run_managers.counters",
                              pagemalloc::kCountersEnabled ? "on" : "off");
  std::vector<char*> args = with_default_flags(argc, argv);
  return pagemalloc::bench::run_main(static_cast<int>(args.size() - 1), args.data());
}
