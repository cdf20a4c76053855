// Messages about misuse and bad configuration, written without allocating.
//
// Misuse aborts with one line that names pagemalloc, the call and the pointer:
//   pagemalloc: pm_free(0x7f3a1c000040): double free
//
// None of these is a cancellation point (write(2) is one: a thread with a cancellation pending
// would end there, its text unwritten or a misuse report's abort not reached); nor are the
// reports on the heap, which write through write_fully or hold cancellation off as it does
// (glibc's malloc_stats is not one either).
#pragma once

#include <cstddef>
#include <string_view>

namespace pagemalloc {

[[noreturn]] void report_misuse(const char* call, const void* ptr, std::string_view what);
[[noreturn]] void report_size_mismatch(const char* call, const void* ptr, std::size_t size,
                                       std::size_t usable);
// One line on stderr, prefixed "pagemalloc: ".
void warn(std::string_view message);
// Every byte of text to fd, through short writes and interrupted ones; stops at an error
// (false: there is nowhere to report it).
bool write_fully(int fd, std::string_view text);

// While it lives, the thread cannot be cancelled: write(2), open(2), close(2) and stdio's
// writes do not act on a cancellation request, which stays pending for the thread's next
// cancellation point once the state before is restored.
class CancellationHeldOff {
 public:
  CancellationHeldOff();
  ~CancellationHeldOff();
  CancellationHeldOff(const CancellationHeldOff&) = delete;
  CancellationHeldOff& operator=(const CancellationHeldOff&) = delete;

 private:
  int state_before_;
};

}  // namespace pagemalloc
