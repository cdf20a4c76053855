// Messages about misuse and bad configuration, written without allocating.
//
// Misuse aborts with one line that names pagemalloc, the call and the pointer:
//   pagemalloc: pm_free(0x7f3a1c000040): double free
#pragma once

#include <cstddef>
#include <string_view>

namespace pagemalloc {

[[noreturn]] void report_misuse(const char* call, const void* ptr, std::string_view what);
[[noreturn]] void report_size_mismatch(const char* call, const void* ptr, std::size_t size,
                                       std::size_t usable);
// One line on stderr, prefixed "pagemalloc: ".
void warn(std::string_view message);
// Every byte of text to fd, through short writes; stops at an error (there is nowhere to
// report it).
void write_fully(int fd, std::string_view text);

}  // namespace pagemalloc
