// write_heap_profile (profile_writer.h).
#include "profile/profile_writer.h"

#include <fcntl.h>
#include <unistd.h>

#include "profile/profile_output.h"

namespace pagemalloc {
namespace {

void copy_maps(ProfileOutput& out) {
  const int maps = ::open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
  if (maps < 0) return;
  char chunk[4096];
  for (;;) {
    const ssize_t n = ::read(maps, chunk, sizeof(chunk));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    out.put(chunk, std::size_t(n));
  }
  ::close(maps);
}

}  // namespace

bool write_heap_profile(int fd, std::uint64_t sample_mean, const StackTable& stacks) {
  std::uint64_t live_count = 0, live_bytes = 0, total_count = 0, total_bytes = 0;
  stacks.for_each([&](const StackRecord& s) {
    live_count += s.live_count;
    live_bytes += s.live_bytes;
    total_count += s.total_count;
    total_bytes += s.total_bytes;
  });
  ProfileOutput out(fd);
  out.print("heap_v2/{}\n  t*: {}: {} [{}: {}]\n", sample_mean, live_count, live_bytes, total_count,
            total_bytes);
  stacks.for_each([&](const StackRecord& s) {
    if (s.total_count == 0) return;
    out.print("@");
    if (s.depth == 0) out.print(" 0x0");  // (the readers need an address after the @)
    // The first address is a return address too: one back, inside the call, as the readers
    // take one off every later address themselves.
    for (std::uint32_t i = 0; i < s.depth; ++i)
      out.print(" {:#x}", i == 0 ? s.pcs[i] - 1 : s.pcs[i]);
    out.print("\n  t*: {}: {} [{}: {}]\n", s.live_count, s.live_bytes, s.total_count,
              s.total_bytes);
  });
  out.print("\nMAPPED_LIBRARIES:\n");
  copy_maps(out);
  return out.finish();
}

}  // namespace pagemalloc
