// Misuse reports and warnings: fmt formats into a buffer on the stack and write(2) sends it,
// so reporting works even when the heap is corrupt or its lock is held, with cancellation
// held off.
#include "support/diagnostics.h"

#include <pthread.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>

#include "support/format.h"

namespace pagemalloc {
namespace {

template <class... Args>
void write_line(fmt::format_string<Args...> format, Args&&... args) {
  char buffer[512];
  auto result = fmt::format_to_n(buffer, sizeof(buffer) - 1, format, std::forward<Args>(args)...);
  std::size_t length = std::min(result.size, sizeof(buffer) - 1);
  buffer[length] = '\n';
  write_fully(STDERR_FILENO, std::string_view(buffer, length + 1));
}

}  // namespace

void report_misuse(const char* call, const void* ptr, std::string_view what) {
  write_line("pagemalloc: {}({}): {}", call, ptr, what);
  std::abort();
}

void report_size_mismatch(const char* call, const void* ptr, std::size_t size, std::size_t usable) {
  write_line("pagemalloc: {}({}, {}): size does not match the block (its usable size is {})", call,
             ptr, size, usable);
  std::abort();
}

void warn(std::string_view message) { write_line("pagemalloc: {}", message); }

CancellationHeldOff::CancellationHeldOff() {
  ::pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &state_before_);
}

CancellationHeldOff::~CancellationHeldOff() {
  int held_off;
  ::pthread_setcancelstate(state_before_, &held_off);
}

bool write_fully(int fd, std::string_view text) {
  const CancellationHeldOff held_off;
  const char* data = text.data();
  std::size_t size = text.size();
  while (size > 0) {
    const ssize_t n = ::write(fd, data, size);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    data += n;
    size -= std::size_t(n);
  }
  return true;
}

}  // namespace pagemalloc
