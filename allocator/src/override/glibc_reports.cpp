// glibc's reports on the heap in the drop-in, answered from pagemalloc's statistics
// (pm_stats_get) instead of glibc's own, which would describe its idle heap as empty:
//
//   mallinfo2, mallinfo  the summary: arena  bytes mapped from the OS (pm_stats.mapped)
//                                     uordblks  bytes in live blocks (allocated)
//                                     fordblks  mapped but not in live blocks
//                                     keepcost  free bytes still resident, which a trim
//                                               could return (dirty)
//                        hblkhd 0 (huge blocks are counted in arena, as everything pagemalloc
//                        maps); the rest 0 (glibc's counts of its free lists and fastbins have
//                        no counterpart). mallinfo's fields are int: as glibc, it truncates.
//   malloc_stats         glibc's text to stderr, one arena for the whole heap: system bytes
//                        (mapped) and in use bytes (allocated); glibc's mmap counts 0
//   malloc_info          glibc's XML to a stream, the same totals; options other than 0
//                        return EINVAL, as glibc's do
//
// The text is formatted on the stack: malloc_stats may run where allocating is unwelcome.
// Neither is a cancellation point (glibc's malloc_stats is not): a thread with a cancellation
// pending gets the whole report, and the request acts at its next cancellation point.
#include <malloc.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>

#include "support/format.h"

#include "support/diagnostics.h"

#include "pagemalloc/pagemalloc.h"

namespace {

pm_stats current_stats() {
  pm_stats s{};
  pm_stats_get(&s);
  return s;
}

std::size_t free_bytes(const pm_stats& s) {
  return s.mapped > s.allocated ? s.mapped - s.allocated : 0;
}

}  // namespace

extern "C" {

__attribute__((visibility("default"))) struct mallinfo2 mallinfo2(void) noexcept {
  const pm_stats s = current_stats();
  struct mallinfo2 info {};
  info.arena = s.mapped;
  info.uordblks = s.allocated;
  info.fordblks = free_bytes(s);
  info.keepcost = s.dirty;
  return info;
}

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
__attribute__((visibility("default"))) struct mallinfo mallinfo(void) noexcept {
  const struct mallinfo2 wide = mallinfo2();
  struct mallinfo info {};
  info.arena = int(wide.arena);
  info.uordblks = int(wide.uordblks);
  info.fordblks = int(wide.fordblks);
  info.keepcost = int(wide.keepcost);
  return info;
}
#pragma GCC diagnostic pop

__attribute__((visibility("default"))) void malloc_stats(void) noexcept {
  const pm_stats s = current_stats();
  char text[512];
  const auto r = fmt::format_to_n(text, sizeof(text),
                                  "Arena 0:\n"
                                  "system bytes     = {:10}\n"
                                  "in use bytes     = {:10}\n"
                                  "Total (incl. mmap):\n"
                                  "system bytes     = {:10}\n"
                                  "in use bytes     = {:10}\n"
                                  "max mmap regions = {:10}\n"
                                  "max mmap bytes   = {:10}\n",
                                  s.mapped, s.allocated, s.mapped, s.allocated, 0, 0);
  const pagemalloc::CancellationHeldOff held_off;
  std::fflush(stderr);  // after what the program wrote there, as glibc's does
  pagemalloc::write_fully(STDERR_FILENO,
                          std::string_view(text, r.size < sizeof(text) ? r.size : sizeof(text)));
}

__attribute__((visibility("default"))) int malloc_info(int options, FILE* stream) noexcept {
  if (options != 0) return EINVAL;
  const pm_stats s = current_stats();
  char text[1024];
  const auto r = fmt::format_to_n(text, sizeof(text) - 1,
                                  "<malloc version=\"1\">\n"
                                  "<heap nr=\"0\">\n<sizes>\n</sizes>\n"
                                  "<total type=\"fast\" count=\"0\" size=\"0\"/>\n"
                                  "<total type=\"rest\" count=\"0\" size=\"{0}\"/>\n"
                                  "<system type=\"current\" size=\"{1}\"/>\n"
                                  "<aspace type=\"total\" size=\"{1}\"/>\n"
                                  "</heap>\n"
                                  "<total type=\"fast\" count=\"0\" size=\"0\"/>\n"
                                  "<total type=\"rest\" count=\"0\" size=\"{0}\"/>\n"
                                  "<total type=\"mmap\" count=\"0\" size=\"0\"/>\n"
                                  "<system type=\"current\" size=\"{1}\"/>\n"
                                  "<aspace type=\"total\" size=\"{1}\"/>\n"
                                  "</malloc>\n",
                                  free_bytes(s), s.mapped);
  text[r.size < sizeof(text) - 1 ? r.size : sizeof(text) - 1] = '\0';
  const pagemalloc::CancellationHeldOff held_off;
  return std::fputs(text, stream) < 0 ? -1 : 0;
}

}  // extern "C"
