// Clearing a block that must read zero (calloc, PM_ZERO, a zeroed realloc's new bytes) when
// its pages may hold old bytes.
//
// Such pages are not always resident: a freed block may have touched few of its pages, the
// decay may have purged some, and a chunk taken from the huge blocks' cache (arena_chunks.h) holds
// whatever its old block touched. Writing zeros over a page that is not resident makes it
// resident: 256 calloc(1, 256 KiB) touched at one byte each, in chunks taken from a freed
// 64 MiB block touched at one byte per 64 pages, peaked at 59 MB; glibc, which maps such blocks
// anew, at 2.5 (docs/measurements.md). So a block of kClearByResidencyBytes or more is cleared
// by windows of whole pages, each as mincore finds it:
// - fewer than one page in kSparseResidency resident: the window is dropped whole
//   (MADV_DONTNEED); it reads zero and holds no memory until touched, and the few resident
//   pages dropped cost a fault each if touched again;
// - otherwise its resident pages are written zero and the rest dropped (a page swapped out
//   reads as not resident but keeps its bytes until dropped; one never touched costs nothing
//   to drop).
// A smaller block, the partial pages at a block's ends, and any window the kernel refuses to
// describe or drop are written zero, as before. A block of resident pages costs one mincore
// per window beside the writing: 0.4 µs, against 2 µs to write 128 KiB (Intel Xeon, calloc
// and free of one size in a loop; docs/measurements.md), hence the threshold, glibc's
// default for mapping a block anew.
#pragma once

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "pagemap/pages.h"
#include "pagemap/pal_linux.h"

namespace pagemalloc {

inline constexpr std::size_t kClearByResidencyBytes = std::size_t{128} << 10;
inline constexpr std::size_t kSparseResidency = 32;
inline constexpr std::size_t kClearWindowPages = 256;

namespace clear_detail {

// Clears the whole pages [p, p + pages * kPageSize), pages <= kClearWindowPages.
inline void clear_window(std::byte* p, std::size_t pages) {
  const std::size_t bytes = pages << kLgPageSize;
  unsigned char resident[kClearWindowPages];
  if (!LinuxPal::resident_pages(p, bytes, resident)) {
    std::memset(p, 0, bytes);
    return;
  }
  std::size_t resident_count = 0;
  for (std::size_t i = 0; i < pages; ++i) resident_count += resident[i] & 1;
  if (resident_count * kSparseResidency < pages) {
    if (!LinuxPal::drop_pages(p, bytes)) std::memset(p, 0, bytes);
    return;
  }
  for (std::size_t i = 0; i < pages;) {
    const bool in_memory = (resident[i] & 1) != 0;
    std::size_t end = i + 1;
    while (end < pages && ((resident[end] & 1) != 0) == in_memory) ++end;
    std::byte* run = p + (i << kLgPageSize);
    const std::size_t run_bytes = (end - i) << kLgPageSize;
    if (in_memory || !LinuxPal::drop_pages(run, run_bytes)) std::memset(run, 0, run_bytes);
    i = end;
  }
}

}  // namespace clear_detail

// Makes [p, p+bytes) read zero, within memory of the allocator's own anonymous mappings (never
// a file's: dropping its pages would read the file again). errno is left as it was.
inline void clear_block(void* p, std::size_t bytes) {
  auto* first = static_cast<std::byte*>(p);
  if (bytes < kClearByResidencyBytes) {
    std::memset(first, 0, bytes);
    return;
  }
  const auto address = reinterpret_cast<std::uintptr_t>(first);
  const std::uintptr_t pages_begin = (address + kPageSize - 1) & ~(kPageSize - 1);
  const std::uintptr_t pages_end = (address + bytes) & ~(kPageSize - 1);
  std::memset(first, 0, pages_begin - address);
  std::memset(reinterpret_cast<std::byte*>(pages_end), 0, address + bytes - pages_end);
  const int saved = errno;
  for (std::uintptr_t at = pages_begin; at < pages_end;) {
    const std::size_t pages =
        std::min<std::size_t>((pages_end - at) >> kLgPageSize, kClearWindowPages);
    clear_detail::clear_window(reinterpret_cast<std::byte*>(at), pages);
    at += pages << kLgPageSize;
  }
  errno = saved;
}

}  // namespace pagemalloc
