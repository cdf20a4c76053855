// The C++ runtime's error reports that the library's own code can reach (the standard
// containers and fmt's buffers call them on a size beyond any possible one), defined in the
// drop-ins so that these need nothing of libstdc++ (weak_cxx_runtime.h says why). The library
// is built without exceptions, so where libstdc++ would throw through its frames these report
// what happened and abort. Not exported: a program's own calls reach its own runtime.
#include <unistd.h>

#include <cstdlib>
#include <string_view>

namespace {

[[noreturn]] void report_and_abort(std::string_view what) {
  constexpr std::string_view prefix = "pagemalloc: internal error: ";
  [[maybe_unused]] auto written = write(STDERR_FILENO, prefix.data(), prefix.size());
  written = write(STDERR_FILENO, what.data(), what.size());
  written = write(STDERR_FILENO, "\n", 1);
  std::abort();
}

}  // namespace

namespace std {

void __throw_bad_alloc() { report_and_abort("std::bad_alloc"); }
void __throw_bad_array_new_length() { report_and_abort("std::bad_array_new_length"); }
void __throw_length_error(const char* what) { report_and_abort(what); }
void __throw_out_of_range_fmt(const char* format, ...) { report_and_abort(format); }

}  // namespace std
