// Run-time options, read once from PAGEMALLOC_CONF ("key:value,key:value", as jemalloc's
// MALLOC_CONF) and adjustable through pm_ctl().
//
//   decay_ms       how long freed pages stay resident before they go back to the OS
//                  (default 10000; 0 returns them at once; -1 never)
//   checks         full misuse detection (default off, or on with -DPAGEMALLOC_CHECKS=ON)
//   stats_print    print the statistics at exit: false, true (text) or json
//   stats_file     where stats_print writes (appended; "%p" becomes the process id) instead of
//                  stderr, which many programs close before they exit
//   deterministic  the same call sequence gives the same layout on every run (one arena)
//   narenas        number of automatic arenas (default 0: one per two CPUs, at most 64;
//                  automatic_arenas.h); above kMaxNarenas it is warned about and lowered
//   ncpus          the CPUs every count sized by the machine is taken from (the default
//                  arenas, the arenas' stash sets: arena.h), instead of the process's
//                  affinity mask (default 0); 1 to kMaxNcpus. More than the machine has
//                  sizes the allocator as for a bigger machine, for the tests
//   thp            transparent huge pages for arena chunks, as jemalloc's opt.thp:
//                  never (the default: every chunk MADV_NOHUGEPAGE, so a sparsely touched
//                  chunk never makes 2 MiB resident, even where the system's setting is
//                  "always"; on an AMD EPYC VM a heap partly on huge pages, as auto leaves
//                  it, was read slower than on either kind alone, and auto cost lua and
//                  python a tenth of their time, docs/measurements.md), auto
//                  (a chunk mapped for slabs, or for a large run while the arena's slabs hold
//                  at least as many pages as its large runs, once an arena has 4 chunks, is
//                  advised MADV_HUGEPAGE, since it will be used densely; the other chunks, and
//                  every chunk of the automatic arenas after the first, MADV_NOHUGEPAGE;
//                  arena_chunks.h), always (every chunk of an arena after its first
//                  MADV_HUGEPAGE) or default (no advice: the system's setting decides)
//   thp_budget     N: under thp:auto, the time spent faulting in huge pages beyond what small
//                  pages would cost stays within 1/N of the run time (default 64; 0: no
//                  limit; huge_page_budget.h)
//   background_thread  a thread that advances the decay every so often, so that a program
//                  that goes idle still returns its free pages (default false; decay.h)
//   prof           the heap profiler (profile/heap_profiler.h): false (the default) or true;
//                  read once, at the start
//   prof_active    whether allocations are sampled now (default true; pm_ctl "prof.active")
//   prof_sample    the mean bytes allocated between two samples (default 524288, as
//                  jemalloc's lg_prof_sample:19); lg_prof_sample:N sets it to 2^N
//   prof_prefix    the start of the profiles' file names (default "pagemalloc": profiles are
//                  pagemalloc.PID.SEQ.KIND.heap)
//   prof_final     write a profile at exit (KIND f; default false)
//   prof_interval  write a profile (KIND i) each time the estimated live bytes of the samples
//                  pass their last such profile's high-water mark by this many bytes (default 0:
//                  never)
//   prof_interval_ms  write a profile (KIND t) at the first sample after each this many
//                  milliseconds (default 0: never)
//   prof_leak      report on stderr at exit the sampled blocks still live, by call stack, as
//                  gperftools' heap checker does (default false)
//   populate       fault in fresh pages that will be touched with one call instead of a
//                  fault per page at first touch: a slab of regions up to a page, once the
//                  arena's slabs hold 8 MiB, and the pages a realloc's copy fills (default
//                  true; populate.h)
//
// An unknown key or a bad value gets one warning on stderr that names the valid keys or values,
// and is ignored.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdlib>
#include <string_view>

namespace pagemalloc {

#ifdef PAGEMALLOC_CHECKS
inline constexpr bool kChecksByDefault = true;
#else
inline constexpr bool kChecksByDefault = false;
#endif

// The values of the thp option; pm_ctl("thp") reads and sets them as these numbers.
enum class HugePages : long { Default = 0, Always = 1, Never = 2, Auto = 3 };
inline constexpr long kLastHugePagesMode = 3;

// The most automatic arenas narenas may ask for (AutomaticArenas::kMaxAutomaticArenas).
inline constexpr long kMaxNarenas = 256;
// The most CPUs ncpus may name.
inline constexpr long kMaxNcpus = 4096;
// The longest stats_file path, with its terminating zero (kept in Options: no allocation).
inline constexpr std::size_t kStatsFileCapacity = 256;
// The longest prof_prefix, with its terminating zero.
inline constexpr std::size_t kProfPrefixCapacity = 256;

struct Options {
  std::atomic<long> decay_ms{10000};
  std::atomic<bool> checks{kChecksByDefault};
  std::atomic<bool> stats_print{false};
  std::atomic<bool> stats_json{false};    // stats_print:json
  char stats_file[kStatsFileCapacity]{};  // empty: stderr; set only while reading the conf
  std::atomic<bool> deterministic{false};
  std::atomic<long> narenas{0};                  // 0: the default
  std::atomic<long> ncpus{0};                    // 0: the process's affinity mask
  std::atomic<HugePages> thp{HugePages::Never};  // chunks reserved from now on
  std::atomic<long> thp_budget{64};              // 0: no limit
  std::atomic<bool> background_thread{false};
  std::atomic<bool> populate{true};
  std::atomic<bool> prof{false};  // set only while reading the conf
  std::atomic<bool> prof_active{true};
  std::atomic<bool> prof_final{false};
  std::atomic<bool> prof_leak{false};
  std::atomic<long> prof_interval{0};     // 0: no interval profiles
  std::atomic<long> prof_interval_ms{0};  // 0: no timed profiles
  std::atomic<long> prof_sample{524288};
  char prof_prefix[kProfPrefixCapacity] = "pagemalloc";  // set only while reading the conf
};

inline constinit Options g_options;
inline Options& options() { return g_options; }

// Turns checks on or off, and counts it as an ownership change (g_ownership_changes,
// address_map.h), so that no thread cache's fast path goes on trusting a chunk it found its
// own while checks were off. Every change of the option goes through here.
void set_checks(bool on);

// Applies "key:value,..." to options(); warns once per bad entry.
void apply_conf(std::string_view conf);

// Prints the statistics as stats_print and stats_file ask, if they do (at exit).
void print_stats_at_exit();

// Reads PAGEMALLOC_CONF once (later calls return at once). Inline: it runs in every
// process, and its code then lies with the heap's initialization, not with the parser's
// (config.cpp, which the first malloc does not touch unless PAGEMALLOC_CONF is set).
inline constinit std::atomic<bool> g_conf_loaded{false};
inline void load_conf_from_environment_once() {
  if (g_conf_loaded.exchange(true)) return;
  if (const char* conf = std::getenv("PAGEMALLOC_CONF")) apply_conf(conf);
}
inline void load_conf_from_environment() {
  if (!g_conf_loaded.load(std::memory_order_acquire)) [[unlikely]]
    load_conf_from_environment_once();
}

}  // namespace pagemalloc
