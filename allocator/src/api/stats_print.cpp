// pm_stats_print: the statistics as text or as one JSON object, formatted with fmt into a
// buffer on the stack (printing must not allocate: it may run at exit, under the drop-in) and
// written by write_fully (not a cancellation point); and the statistics at exit that
// PAGEMALLOC_CONF's stats_print and stats_file ask for.
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "support/format.h"

#include "api/stats_format.h"
#include "arena/arena.h"
#include "heap/heap.h"
#include "os/huge_page_budget.h"
#include "pagemalloc/pagemalloc.h"
#include "profile/heap_profiler.h"
#include "support/diagnostics.h"
#include "support/options.h"

namespace {

// stats_file with "%p" replaced by the process id, into `out` (zero-terminated, cut short if
// it does not fit).
void expand_stats_file(const char* pattern, char* out, std::size_t capacity) {
  std::size_t n = 0;
  for (const char* c = pattern; *c != '\0' && n + 1 < capacity; ++c) {
    if (c[0] == '%' && c[1] == 'p') {
      auto r = fmt::format_to_n(out + n, capacity - 1 - n, "{}", ::getpid());
      n += std::min(r.size, capacity - 1 - n);
      ++c;
    } else {
      out[n++] = *c;
    }
  }
  out[n] = '\0';
}

}  // namespace

// At exit: to stats_file when set (appended), else to stderr. A file that cannot be opened is
// warned about, and the statistics go to stderr instead of being lost. Not a cancellation
// point (open and close are ones), as pm_stats_print is not.
void pagemalloc::print_stats_at_exit() {
  const pagemalloc::Options& o = pagemalloc::options();
  if (!o.stats_print.load()) return;
  const pagemalloc::CancellationHeldOff held_off;
  const int json = o.stats_json.load() ? 1 : 0;
  if (o.stats_file[0] == '\0') return pm_stats_print(STDERR_FILENO, json);
  char path[pagemalloc::kStatsFileCapacity + 32];
  expand_stats_file(o.stats_file, path, sizeof(path));
  const int fd = ::open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) {
    char message[512];
    auto r = fmt::format_to_n(message, sizeof(message),
                              "stats_file: cannot open '{}' ({}); statistics to stderr", path,
                              std::strerror(errno));
    pagemalloc::warn(std::string_view(message, std::min(r.size, sizeof(message))));
    return pm_stats_print(STDERR_FILENO, json);
  }
  pm_stats_print(fd, json);
  ::close(fd);
}

std::size_t pagemalloc::format_stats(char* buffer, std::size_t capacity, bool json) {
  pm_stats s{};
  pm_stats_get(&s);
  const char* runs = pagemalloc::Arena::Runs::kName;
  auto r = json ? fmt::format_to_n(
                      buffer, capacity,
                      "{{\"runs\": \"{}\", \"allocated\": {}, \"active\": {}, \"mapped\": {}, "
                      "\"dirty\": {}, "
                      "\"retained\": {}, \"copied\": {}, \"grown_in_place\": {}, \"moved\": {}, "
                      "\"purged\": {}, \"populated\": {}",
                      runs, s.allocated, s.active, s.mapped, s.dirty, s.retained, s.copied,
                      s.grown_in_place, s.moved, s.purged, s.populated)
                : fmt::format_to_n(
                      buffer, capacity,
                      "pagemalloc statistics (run manager: {})\n"
                      "  allocated       {:>16} bytes in live blocks\n"
                      "  active          {:>16} bytes of pages holding live blocks\n"
                      "  mapped          {:>16} bytes mapped from the OS\n"
                      "  dirty           {:>16} bytes free, still resident (until the decay)\n"
                      "  retained        {:>16} bytes free, returned to the OS\n"
                      "  copied          {:>16} bytes copied by reallocation\n"
                      "  grown in place  {:>16} reallocations\n"
                      "  moved           {:>16} reallocations\n"
                      "  purged          {:>16} bytes returned to the OS, since start\n"
                      "  populated       {:>16} bytes faulted in ahead of use, since start\n",
                      runs, s.allocated, s.active, s.mapped, s.dirty, s.retained, s.copied,
                      s.grown_in_place, s.moved, s.purged, s.populated);
  std::size_t used = std::min(r.size, capacity);
  // What thp:auto's huge pages cost (huge_page_budget.h).
  const pagemalloc::HugePageBudget::Totals h = pagemalloc::g_huge_page_budget.totals();
  auto huge = json ? fmt::format_to_n(buffer + used, capacity - used,
                                      ", \"huge_pages\": {{\"advised\": {}, \"refused\": {}, "
                                      "\"charged_ns\": {}}}",
                                      h.touched, h.refused, h.charged_ns)
                   : fmt::format_to_n(buffer + used, capacity - used,
                                      "  huge pages      {:>16} chunks advised (thp:auto)\n"
                                      "                  {:>16} chunks refused by thp_budget\n"
                                      "                  {:>16} ns of faults charged to it\n",
                                      h.touched, h.refused, h.charged_ns);
  used += std::min(huge.size, capacity - used);
  // With prof:true, the heap profiler's samples and the memory it mapped (heap_profiler.h).
  if (pagemalloc::HeapProfiler::enabled()) {
    const pagemalloc::HeapProfiler::Counts p = pagemalloc::HeapProfiler::counts();
    auto prof =
        json ? fmt::format_to_n(buffer + used, capacity - used,
                                ", \"profile\": {{\"live_samples\": {}, \"live_estimate\": {}, "
                                "\"stacks\": {}, \"dropped_stacks\": {}, \"mapped\": {}}}",
                                p.live_samples, p.live_estimate, p.stacks, p.dropped_stacks,
                                p.mapped_bytes)
             : fmt::format_to_n(buffer + used, capacity - used,
                                "  heap profile    {:>16} live samples\n"
                                "                  {:>16} bytes they stand for\n"
                                "                  {:>16} stacks ({} dropped)\n"
                                "                  {:>16} bytes mapped for them\n",
                                p.live_samples, p.live_estimate, p.stacks, p.dropped_stacks,
                                p.mapped_bytes);
    used += std::min(prof.size, capacity - used);
  }
  // A build with counting (PAGEMALLOC_COUNTERS) adds what its run managers did.
  if constexpr (pagemalloc::kCountersEnabled) {
    const pagemalloc::RunCounterValues c = pagemalloc::heap().run_counters();
    auto counted =
        json ? fmt::format_to_n(buffer + used, capacity - used,
                                ", \"run_manager\": {{\"calls\": {}, \"nodes_visited\": {}, "
                                "\"rotations\": {}, \"map_reads\": {}, \"map_writes\": {}, "
                                "\"splits\": {}, \"coalesces\": {}, \"chunks_added\": {}}}",
                                c.operations, c.nodes_visited, c.rotations, c.map_reads,
                                c.map_writes, c.splits, c.coalesces, c.chunks_added)
             : fmt::format_to_n(buffer + used, capacity - used,
                                "  run manager     {:>16} calls\n"
                                "                  {:>16} tree nodes visited\n"
                                "                  {:>16} rotations\n"
                                "                  {:>16} page-map reads\n"
                                "                  {:>16} page-map writes\n"
                                "                  {:>16} splits\n"
                                "                  {:>16} coalesces\n"
                                "                  {:>16} chunks added\n",
                                c.operations, c.nodes_visited, c.rotations, c.map_reads,
                                c.map_writes, c.splits, c.coalesces, c.chunks_added);
    used += std::min(counted.size, capacity - used);
  }
  if (json) {
    auto closing = fmt::format_to_n(buffer + used, capacity - used, "}}\n");
    used += std::min(closing.size, capacity - used);
  }
  return used;
}

extern "C" void pm_stats_print(int fd, int json) {
  char buffer[pagemalloc::kStatsTextCapacity];
  pagemalloc::write_fully(
      fd, std::string_view(buffer, pagemalloc::format_stats(buffer, sizeof(buffer), json != 0)));
}
