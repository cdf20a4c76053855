// The context every benchmark binary here records beside its results.
//
// Google Benchmark prints the context at the top of the console output and stores it in the
// "context" object of --benchmark_out=x.json, so a result file says by itself which pagemalloc
// build produced it and under which system settings that change the numbers:
//
//   pagemalloc.runs       the run manager the library was built with (PAGEMALLOC_RUNS, or the
//                         preset's: cmake/design.cmake)
//   pagemalloc.preset     the design the library was assembled from (PAGEMALLOC_PRESET)
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

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <string>
#include <string_view>
#include <vector>

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
  benchmark::AddCustomContext("pagemalloc.preset", PAGEMALLOC_BENCH_PRESET);
  benchmark::AddCustomContext("pagemalloc.counters", PAGEMALLOC_BENCH_COUNTERS ? "on" : "off");
  benchmark::AddCustomContext("pagemalloc.checks", PAGEMALLOC_BENCH_CHECKS ? "on" : "off");
  long decay_ms = 0;
  benchmark::AddCustomContext("pagemalloc.decay_ms", pm_ctl("decay_ms", &decay_ms, nullptr) == 0
                                                         ? fmt::format("{}", decay_ms)
                                                         : "unknown");
  const char* conf = std::getenv("PAGEMALLOC_CONF");
  benchmark::AddCustomContext("pagemalloc.conf", conf != nullptr ? conf : "");
  benchmark::AddCustomContext("thp", transparent_huge_pages());
}

// Google Benchmark's command line with `repetitions` repetitions, interleaved at random, unless
// the command line says otherwise (these machines have phases where everything runs about 2x
// slower). The result ends with a null pointer, as argv does; its strings live until exit.
inline std::vector<char*> with_default_repetitions(int argc, char** argv, int repetitions) {
  static std::string repetitions_flag;
  static std::string interleaving_flag = "--benchmark_enable_random_interleaving=true";
  repetitions_flag = fmt::format("--benchmark_repetitions={}", repetitions);
  std::vector<char*> args(argv, argv + argc);
  const auto given = [&](std::string_view flag) {
    return std::any_of(args.begin(), args.end(),
                       [&](const char* arg) { return std::string_view(arg).starts_with(flag); });
  };
  if (!given("--benchmark_repetitions")) args.push_back(repetitions_flag.data());
  if (!given("--benchmark_enable_random_interleaving")) args.push_back(interleaving_flag.data());
  args.push_back(nullptr);
  return args;
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
