// What the pm_ API and the drop-in's standard functions share: glibc's argument rules
// (calloc overflow, realloc to 0 frees, posix_memalign's EINVAL, aligned_alloc's NULL + EINVAL)
// in front of the heap. `call` names the entry point in misuse reports.
#pragma once

#include <cerrno>
#include <cstddef>

#include "heap/heap.h"

namespace pagemalloc {

constexpr bool is_power_of_two(std::size_t a) { return a != 0 && (a & (a - 1)) == 0; }

template <class Config = BuildConfig>
inline void* calloc_checked(std::size_t count, std::size_t size) {
  std::size_t total = 0;
  if (__builtin_mul_overflow(count, size, &total)) {
    errno = ENOMEM;
    return nullptr;
  }
  return Allocator<Config>::heap().allocate_zeroed(total);
}

template <class Config = BuildConfig>
inline void* realloc_as_glibc(void* p, std::size_t size, const char* call) {
  if (p == nullptr) return Allocator<Config>::heap().allocate(size, 1, false);
  if (size == 0) {  // glibc frees and returns NULL
    Allocator<Config>::heap().deallocate(p, call);
    return nullptr;
  }
  return Allocator<Config>::heap().reallocate_small(p, size, call);
}

template <class Config = BuildConfig>
inline int posix_memalign_checked(void** out, std::size_t alignment, std::size_t size) {
  if (!is_power_of_two(alignment) || alignment % sizeof(void*) != 0) return EINVAL;
  const int saved = errno;
  void* p = Allocator<Config>::heap().allocate(size, alignment, false);
  errno = saved;
  if (p == nullptr) return ENOMEM;
  *out = p;
  return 0;
}

template <class Config = BuildConfig>
inline void* aligned_alloc_checked(std::size_t alignment, std::size_t size) {
  if (!is_power_of_two(alignment)) {
    errno = EINVAL;
    return nullptr;
  }
  return Allocator<Config>::heap().allocate(size, alignment, false);
}

}  // namespace pagemalloc
