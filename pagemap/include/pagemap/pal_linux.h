// The Linux OS layer: mmap, munmap, madvise and mremap.
//
// reserve() over-maps by the alignment and trims both ends so that the result is aligned.
// Memory is mapped readable and writable at once: Linux commits pages on first touch, so
// "reserve" and "commit" are the same call here.
#pragma once

#include <sys/mman.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>

#include "pagemap/pages.h"
#include "pagemap/pal.h"

namespace pagemalloc {

class LinuxPal {
 public:
  // Requires: bytes and align are multiples of the page size; align is a power of two.
  void* reserve(std::size_t bytes, std::size_t align) {
    if (align <= kPageSize) return map(bytes);
    const std::size_t padded = bytes + align - kPageSize;
    if (padded < bytes) return fail();
    auto* raw = static_cast<std::byte*>(map(padded));
    if (raw == nullptr) return nullptr;
    const auto addr = reinterpret_cast<std::uintptr_t>(raw);
    const std::size_t lead = ((addr + align - 1) & ~(align - 1)) - addr;
    if (lead != 0) ::munmap(raw, lead);
    const std::size_t trail = padded - lead - bytes;
    if (trail != 0) ::munmap(raw + lead + bytes, trail);
    return raw + lead;
  }

  void release(void* p, std::size_t bytes) { ::munmap(p, bytes); }

  // Linux gives decommitted (MADV_DONTNEED) pages back, zero-filled, on first touch.
  bool commit(void*, std::size_t) { return true; }

  void decommit(void* p, std::size_t bytes) { drop_pages(p, bytes); }
  // The same, saying whether the kernel did it: the pages then read zero at their next touch,
  // whatever they held (resident, swapped out or never touched).
  static bool drop_pages(void* p, std::size_t bytes) {
    return ::madvise(p, bytes, MADV_DONTNEED) == 0;
  }

  // Hints, not part of the Pal concept: ask the kernel to back [p, p+bytes) with transparent
  // huge pages at first touch (MADV_HUGEPAGE), or never to (MADV_NOHUGEPAGE). A kernel
  // without them refuses the hint, which changes nothing.
  static void prefer_huge_pages(void* p, std::size_t bytes) { ::madvise(p, bytes, MADV_HUGEPAGE); }
  static void avoid_huge_pages(void* p, std::size_t bytes) { ::madvise(p, bytes, MADV_NOHUGEPAGE); }
  // Another hint: fault in [p, p+bytes) now, writable (MADV_POPULATE_WRITE, Linux 5.14). False
  // (errno EINVAL) from a kernel without it.
  static bool populate(void* p, std::size_t bytes) {
    return ::madvise(p, bytes, MADV_POPULATE_WRITE) == 0;
  }

  // Which of the pages of [p, p+bytes) are resident: bit 0 of vec[i] for the i-th page
  // (mincore). p is page-aligned; vec holds one byte per page. False if the kernel refuses.
  // A page swapped out reads as not resident, though it still holds its bytes.
  static bool resident_pages(void* p, std::size_t bytes, unsigned char* vec) {
    return ::mincore(p, bytes, vec) == 0;
  }

  bool grow(void* p, std::size_t old_bytes, std::size_t new_bytes) {
    return ::mremap(p, old_bytes, new_bytes, 0) != MAP_FAILED;
  }

  // Moves the pages of [p, p+old_bytes) to `to` and extends them to new_bytes, without copying
  // their contents (the kernel moves page-table entries). `to` must be a reservation of
  // new_bytes, which this replaces.
  bool move(void* p, std::size_t old_bytes, void* to, std::size_t new_bytes) {
    return ::mremap(p, old_bytes, new_bytes, MREMAP_MAYMOVE | MREMAP_FIXED, to) != MAP_FAILED;
  }

 private:
  static void* map(std::size_t bytes) {
    void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    return p == MAP_FAILED ? fail() : p;
  }
  static void* fail() {
    errno = ENOMEM;
    return nullptr;
  }
};
static_assert(Pal<LinuxPal>);

}  // namespace pagemalloc
