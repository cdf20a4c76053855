// Text for a file descriptor gathered in a buffer on the stack and written when full, with no
// allocation: the profiles and reports of the heap profiler.
#pragma once

#include <cstddef>
#include <string_view>
#include <utility>

#include "support/diagnostics.h"
#include "support/format.h"

namespace pagemalloc {

class ProfileOutput {
 public:
  explicit ProfileOutput(int fd) : fd_(fd) {}
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
  static constexpr std::size_t kLongestLine = 512;
  void flush() {
    write_all(buffer_, used_);
    used_ = 0;
  }
  void write_all(const char* bytes, std::size_t n) {
    ok_ = ok_ && write_fully(fd_, std::string_view(bytes, n));
  }
  int fd_;
  bool ok_ = true;
  std::size_t used_ = 0;
  char buffer_[8192];
};

}  // namespace pagemalloc
