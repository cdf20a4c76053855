// pm_stats_print: the statistics as text or as one JSON object, formatted with fmt into a
// buffer on the stack (printing must not allocate: it may run at exit, under the drop-in).
#include <unistd.h>

#include <fmt/format.h>

#include "pagemalloc/pagemalloc.h"
#include "arena.h"

namespace {

void write_all(int fd, const char* data, std::size_t size) {
  while (size > 0) {
    ssize_t n = ::write(fd, data, size);
    if (n <= 0) return;
    data += n;
    size -= std::size_t(n);
  }
}

}  // namespace

extern "C" void pm_stats_print(int fd, int json) {
  pm_stats s{};
  pm_stats_get(&s);
  char buffer[2048];
  const char* runs = pagemalloc::Arena::Runs::kName;
  auto r = json != 0
      ? fmt::format_to_n(buffer, sizeof(buffer),
            "{{\"runs\": \"{}\", \"allocated\": {}, \"active\": {}, \"mapped\": {}, \"dirty\": {}, "
            "\"retained\": {}, \"copied\": {}, \"grown_in_place\": {}, \"moved\": {}, "
            "\"purged\": {}}}\n",
            runs, s.allocated, s.active, s.mapped, s.dirty, s.retained, s.copied,
            s.grown_in_place, s.moved, s.purged)
      : fmt::format_to_n(buffer, sizeof(buffer),
            "pagemalloc statistics (run manager: {})\n"
            "  allocated       {:>16} bytes in live blocks\n"
            "  active          {:>16} bytes of pages holding live blocks\n"
            "  mapped          {:>16} bytes mapped from the OS\n"
            "  dirty           {:>16} bytes free, still resident (until the decay)\n"
            "  retained        {:>16} bytes free, returned to the OS\n"
            "  copied          {:>16} bytes copied by reallocation\n"
            "  grown in place  {:>16} reallocations\n"
            "  moved           {:>16} reallocations\n"
            "  purged          {:>16} bytes returned to the OS by the decay\n",
            runs, s.allocated, s.active, s.mapped, s.dirty, s.retained, s.copied,
            s.grown_in_place, s.moved, s.purged);
  write_all(fd, buffer, std::min(r.size, sizeof(buffer)));
}
