// Medium classes: the lengths, in whole pages, that large requests above the largest slab class
// and up to a design's kMaxMediumSize are rounded up to, so that a block freed by one request
// serves the next of its class from the thread's cache (thread_cache.h) with no lock, as
// gperftools' classes of 64-256 KiB in 8 KiB steps do. A medium block stays a run of pages: it
// grows and shrinks in place as any large block, and only its length is rounded.
//
// Spacing (a Config's kMediumClassesPerDoubling): N classes per doubling above the largest slab
// class (8: 72, 80, ..., 128 KiB, then 144, 160, ..., 256 KiB, and on to 1 MiB in today's design,
// at most 1/8 of a block past its request, like the small classes), each a whole number of
// pages; 0 is page-exact, a class per page count (every request keeps its own length, and a
// freed block serves only a request of its own length). The rounding costs address space, not
// memory: the pages past a request are untouched unless the program writes them.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

#include "pagemap/page_map.h"
#include "pagemap/pages.h"

namespace pagemalloc {

// The medium classes of a design whose slabs end at kMin bytes and whose medium classes end at
// kMax (0: none), kPerDoubling apart (0: page-exact).
template <std::size_t kMin, std::size_t kMax, unsigned kPerDoubling>
struct MediumClassTable {
  static constexpr bool kEnabled = kMax > kMin;
  static constexpr std::size_t kMaxMediumSize = kEnabled ? kMax : 0;
  static constexpr std::size_t kMinPages = kMin / kPageSize;  // exclusive
  static constexpr std::size_t kMaxPages = kEnabled ? kMax / kPageSize : 0;
  static_assert(!kEnabled || (kMax % kPageSize == 0 && kMin % kPageSize == 0),
                "medium classes start and end on whole pages");
  static_assert(!kEnabled || PageCount(kMaxPages) <= kMaxRunPages,
                "a medium block is a run of one chunk");
  static constexpr unsigned kNone = ~0u;

  // Each class's pages, smallest first.
  static constexpr auto kPages = [] {
    std::array<std::uint16_t, kMaxPages + 1> pages{};
    std::size_t n = 0;
    if constexpr (kEnabled) {
      std::size_t at = kMinPages;
      for (std::size_t group = kMinPages; at < kMaxPages; group *= 2) {
        const std::size_t step =
            kPerDoubling == 0 || group / kPerDoubling == 0 ? 1 : group / kPerDoubling;
        for (; at < 2 * group && at < kMaxPages;) {
          at = at + step > kMaxPages ? kMaxPages : at + step;
          pages[n++] = std::uint16_t(at);
        }
      }
    }
    return pages;
  }();
  static constexpr unsigned kCount = [] {
    unsigned n = 0;
    while (n < kPages.size() && kPages[n] != 0) ++n;
    return n;
  }();
  static_assert(!kEnabled || kPages[kCount - 1] == kMaxPages);

  // The class of a block of `pages` pages (kMinPages < pages <= kMaxPages): the smallest that
  // holds it. kNone outside that range.
  static constexpr unsigned class_holding(std::size_t pages) {
    return pages <= kMinPages || pages > kMaxPages ? kNone : kHolding[pages];
  }
  // class_holding for a request of `size` bytes, kMaxSmallSize < size <= kMaxMediumSize (the
  // malloc fast path's: one table load).
  static constexpr unsigned class_of_size(std::size_t size) {
    return kHolding[(size + kPageSize - 1) >> kLgPageSize];
  }
  // The class whose length is exactly `pages` (a freed block's), or kNone: one compare and one
  // load of a byte.
  static constexpr unsigned class_of_length(std::size_t pages) {
    return pages >= kEntryLengths ? kNone : class_of_entry_length(pages);
  }
  // class_of_length for the length in a page entry (below 2^10 pages): one load of a byte.
  static constexpr unsigned class_of_entry_length(std::size_t pages) {
    const unsigned c = kOfEntryLength[pages & (kEntryLengths - 1)];
    return c == kNoClass ? kNone : c;
  }
  // Each class's first page entry in and out of a thread's cache (one load each, on free's
  // and malloc's paths).
  static constexpr auto kThreadCachedEntries = [] {
    std::array<PageEntry, kCount == 0 ? 1 : kCount> entries{};
    for (unsigned c = 0; c < kCount; ++c)
      entries[c] = PageEntry::thread_cached(PageCount(kPages[c]));
    return entries;
  }();
  static constexpr auto kLargeEntries = [] {
    std::array<PageEntry, kCount == 0 ? 1 : kCount> entries{};
    for (unsigned c = 0; c < kCount; ++c) entries[c] = PageEntry::large(PageCount(kPages[c]));
    return entries;
  }();
  static constexpr std::size_t bytes(unsigned size_class) {
    return std::size_t{kPages[size_class]} * kPageSize;
  }
  // The usable bytes of a request of `size` bytes in the medium range: its class's, or the
  // pages covering it outside the range.
  static constexpr std::size_t rounded(std::size_t size) {
    const std::size_t pages = PageCount::covering(size).value();
    const unsigned c = class_holding(pages);
    return c == kNone ? pages * kPageSize : bytes(c);
  }

 private:
  static constexpr auto kHolding = [] {
    std::array<std::uint16_t, kMaxPages + 1> holding{};
    unsigned c = 0;
    for (std::size_t p = kMinPages + 1; p <= kMaxPages; ++p) {
      while (kPages[c] < p) ++c;
      holding[p] = std::uint16_t(c);
    }
    return holding;
  }();
  static constexpr std::uint8_t kNoClass = 0xff;
  static_assert(kCount < kNoClass, "a class is a byte");
  // Each length an entry holds (every page count below 2^10): its class if a class has exactly
  // that length, else kNoClass; so that free's lookup needs no compare of the length.
  static constexpr std::size_t kEntryLengths = 1024;
  static_assert(kMaxPages < kEntryLengths);
  static constexpr auto kOfEntryLength = [] {
    std::array<std::uint8_t, kEntryLengths> of_length{};
    for (auto& c : of_length) c = kNoClass;
    for (unsigned c = 0; c < kCount; ++c) of_length[kPages[c]] = std::uint8_t(c);
    return of_length;
  }();
};

}  // namespace pagemalloc
