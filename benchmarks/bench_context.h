// The context every benchmark binary here records beside its results.
//
// Google Benchmark prints the context at the top of the console output and stores it in the
// "context" object of --benchmark_out=x.json, so a result file says by itself which pagemalloc
// build produced it and under which system settings that change the numbers:
//
//   pagemalloc.runs       the run manager the library was built with (PAGEMALLOC_RUNS)
//   pagemalloc.counters   whether the run managers count their work (PAGEMALLOC_COUNTERS)
//   pagemalloc.checks     whether full misuse detection is always on (PAGEMALLOC_CHECKS)
//   pagemalloc.decay_ms   the purge decay at start (pm_ctl "decay_ms"), or "unknown"
//   pagemalloc.conf       the PAGEMALLOC_CONF environment variable, or "" when unset
//   thp                   the kernel's transparent-huge-page mode (page faults cost differ)
#ifndef PAGEMALLOC_BENCHMARKS_BENCH_CONTEXT_H
#define PAGEMALLOC_BENCHMARKS_BENCH_CONTEXT_H

#include <benchmark/benchmark.h>
#include <fmt/format.h>
#include <pagemalloc/pagemalloc.h>

#include <cstdlib>
#include <fstream>
#include <string>

namespace pagemalloc::bench {

// Returns the bracketed choice of a /sys/kernel/mm/transparent_hugepage file, e.g. "madvise".
inline std::string transparent_huge_pages() {
  std::ifstream in("/sys/kernel/mm/transparent_hugepage/enabled");
  std::string line;
  if (!std::getline(in, line)) return "unknown";
  const auto open = line.find('[');
  const auto close = line.find(']', open);
  if (open == std::string::npos || close == std::string::npos) return line;
  return line.substr(open + 1, close - open - 1);
}

inline void add_context() {
  benchmark::AddCustomContext("pagemalloc.runs", PAGEMALLOC_BENCH_RUNS);
  benchmark::AddCustomContext("pagemalloc.counters", PAGEMALLOC_BENCH_COUNTERS ? "on" : "off");
  benchmark::AddCustomContext("pagemalloc.checks", PAGEMALLOC_BENCH_CHECKS ? "on" : "off");
  long decay_ms = 0;
  benchmark::AddCustomContext(
      "pagemalloc.decay_ms",
      pm_ctl("decay_ms", &decay_ms, nullptr) == 0 ? fmt::format("{}", decay_ms) : "unknown");
  const char* conf = std::getenv("PAGEMALLOC_CONF");
  benchmark::AddCustomContext("pagemalloc.conf", conf != nullptr ? conf : "");
  benchmark::AddCustomContext("thp", transparent_huge_pages());
}

// The main of every benchmark binary here: the library's own flags, then the context, then
// the benchmarks the flags select.
inline int run_main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  add_context();
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}

}  // namespace pagemalloc::bench

#endif  // PAGEMALLOC_BENCHMARKS_BENCH_CONTEXT_H
