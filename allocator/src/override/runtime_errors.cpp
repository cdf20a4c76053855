// The C++ runtime's error reports that the library's own code can reach (the standard
// containers and fmt's buffers call them on a size beyond any possible one), defined in the
// drop-ins so that these need nothing of libstdc++ (weak_cxx_runtime.h says why). The library
// is built without exceptions, so where libstdc++ would throw through its frames these report
// what happened and abort. Not exported: a program's own calls reach its own runtime.
#include <unistd.h>

#include <cstdlib>
#include <string_view>

#include "support/diagnostics.h"

namespace {

// write_fully holds cancellation off: a thread with a cancellation pending still aborts.
[[noreturn]] void report_and_abort(std::string_view what) {
  pagemalloc::write_fully(STDERR_FILENO, "pagemalloc: internal error: ");
  pagemalloc::write_fully(STDERR_FILENO, what);
  pagemalloc::write_fully(STDERR_FILENO, "\n");
  std::abort();
}

}  // namespace

namespace std {

void __throw_bad_alloc() { report_and_abort("std::bad_alloc"); }
void __throw_bad_array_new_length() { report_and_abort("std::bad_array_new_length"); }
void __throw_length_error(const char* what) { report_and_abort(what); }
void __throw_out_of_range_fmt(const char* format, ...) { report_and_abort(format); }

}  // namespace std
