// The process's address space as the kernel counts it against RLIMIT_AS, for the tests that
// lower that limit in a child process so that the OS refuses memory.
#pragma once

#include <fcntl.h>
#include <unistd.h>

#include <cstddef>
#include <cstdlib>
#include <cstring>

// The process's address space in bytes (VmSize in /proc/self/status); 0 if unreadable. Reads
// with open/read so that it allocates nothing.
inline std::size_t address_space_in_use() {
  static char text[16384];
  const int fd = ::open("/proc/self/status", O_RDONLY);
  if (fd < 0) return 0;
  const ssize_t length = ::read(fd, text, sizeof(text) - 1);
  ::close(fd);
  if (length <= 0) return 0;
  text[length] = '\0';
  const char* line = std::strstr(text, "VmSize:");
  if (line == nullptr) return 0;
  return std::strtoull(line + 7, nullptr, 10) * 1024;  // the value is in kB
}
