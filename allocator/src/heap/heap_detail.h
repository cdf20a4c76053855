// What the heap's definitions share: the failure of an allocation (errno ENOMEM) and the
// test of a pointer's alignment.
#pragma once

#include <cerrno>
#include <cstddef>
#include <cstdint>

namespace pagemalloc {

namespace heap_detail {

inline void* out_of_memory() {
  errno = ENOMEM;
  return nullptr;
}

inline bool is_aligned(const void* p, std::size_t align) {
  return (reinterpret_cast<std::uintptr_t>(p) & (align - 1)) == 0;
}

}  // namespace heap_detail

}  // namespace pagemalloc
