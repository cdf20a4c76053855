// write_heap_profile (profile_writer.h).
#include "profile/profile_writer.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <string_view>

#include "support/format.h"

namespace pagemalloc {
namespace {

// Output gathered in a buffer on the stack, written when full.
class Output {
 public:
  explicit Output(int fd) : fd_(fd) {}
  template <class... Args>
  void print(fmt::format_string<Args...> format, Args&&... args) {
    if (sizeof(buffer_) - used_ < kLongestLine) flush();
    auto r = fmt::format_to_n(buffer_ + used_, sizeof(buffer_) - used_, format,
                              std::forward<Args>(args)...);
    used_ += r.size < sizeof(buffer_) - used_ ? r.size : sizeof(buffer_) - used_;
  }
  void put(const char* bytes, std::size_t n) {
    flush();
    write_all(bytes, n);
  }
  bool finish() {
    flush();
    return ok_;
  }

 private:
  static constexpr std::size_t kLongestLine = 160;
  void flush() {
    write_all(buffer_, used_);
    used_ = 0;
  }
  void write_all(const char* bytes, std::size_t n) {
    while (ok_ && n != 0) {
      const ssize_t w = ::write(fd_, bytes, n);
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0) {
        ok_ = false;
        return;
      }
      bytes += w;
      n -= std::size_t(w);
    }
  }
  int fd_;
  bool ok_ = true;
  std::size_t used_ = 0;
  char buffer_[8192];
};

void copy_maps(Output& out) {
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
  Output out(fd);
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
