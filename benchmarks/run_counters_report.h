// Reports a run manager's counters (pagemap/counters.h) as Google Benchmark counters, each
// divided by the number of operations it was counted over, plus counters_enabled: 1 when this
// binary counts (built with PAGEMALLOC_COUNTERS), else 0 and every counter reads zero.
#ifndef PAGEMALLOC_BENCHMARKS_RUN_COUNTERS_REPORT_H
#define PAGEMALLOC_BENCHMARKS_RUN_COUNTERS_REPORT_H

#include <benchmark/benchmark.h>

#include <cstdint>

#include "pagemap/counters.h"

namespace pagemalloc::bench {

inline void report_run_counters_per_op(benchmark::State& state, const RunCounterValues& work,
                                       double ops) {
  const auto per_op = [&](std::uint64_t count) {
    return benchmark::Counter(ops > 0 ? static_cast<double>(count) / ops : 0.0);
  };
  state.counters["nodes_visited"] = per_op(work.nodes_visited);
  state.counters["rotations"] = per_op(work.rotations);
  state.counters["map_reads"] = per_op(work.map_reads);
  state.counters["map_writes"] = per_op(work.map_writes);
  state.counters["splits"] = per_op(work.splits);
  state.counters["coalesces"] = per_op(work.coalesces);
  state.counters["grows_in_place"] = per_op(work.grows_in_place);
  state.counters["chunks_added"] = per_op(work.chunks_added);
  state.counters["counters_enabled"] = kCountersEnabled ? 1 : 0;
}

}  // namespace pagemalloc::bench

#endif  // PAGEMALLOC_BENCHMARKS_RUN_COUNTERS_REPORT_H
