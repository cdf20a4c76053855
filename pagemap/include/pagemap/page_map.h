// The linear page map: one 64-bit entry per page of a chunk, at the start of the chunk. It is
// the chunk's whole header: one page (ChunkLayout), the only metadata page a chunk has.
//
// Pointer -> metadata is a mask (the chunk) and an index (the page): O(1) in every run
// manager. Entries are accurate only where they must be (boundary tags, as jemalloc 2008's
// arena_chunk_map_t and mimalloc's first and last slice):
//
//   free run        first and last page: Free, its length, whether its pages may be dirty,
//                   and the run manager's record of the run (kept outside the chunk)
//   allocated run   first and last page: not Free (Allocated, Large or Slab)
//   large block     first page: Large and its length
//   cached block    first page: Cached and its length: a large block freed into its arena's
//                   cache (allocator/src/large_run_cache.h), allocated to the run manager
//   thread-cached   first page: ThreadCached and its length: a medium block freed into a
//                   thread's cache (allocator/src/threads/thread_cache.h), allocated to the
//                   run manager and counted by its arena as handed out. The thread writes
//                   the entry without the arena's lock (store_entry), and the run manager
//                   reads a neighbour's entry with load_entry: both 64-bit atomic accesses
//   slab            every page: Slab, the slab's descriptor, size class and the page's
//                   distance from the slab's start (so a free needs no descriptor)
//   header          the page map's own page: Header, and the run manager's record of the chunk
//
// Interior pages of free runs and large blocks hold stale values. Coalescing reads only the
// entries just before and just after a run, which are always ends of runs.
//
// An entry's bits:
//
//   0-2 kind | 3 dirty (Free) | 4-47 record (Free, Header; 16-byte aligned, below 2^48)
//            | 6-47 descriptor (Slab; 64-byte aligned) | 48-57 pages (Free, Allocated, Large,
//            Cached)
//            | 48-55 page in slab, 56-63 128 + size class (Slab)
//
// Only a Slab entry has bit 63 set (records lie below 2^48, lengths below 2^10): the free
// path's test of a slab page is the entry's sign, and its class is the top byte less 128.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>

#include "pagemap/pages.h"

namespace pagemalloc {

enum class PageKind : std::uint8_t {
  Header = 1,
  Free = 2,
  Allocated = 3,
  Large = 4,
  Slab = 5,
  Cached = 6,
  ThreadCached = 7
};

class PageEntry {
 public:
  constexpr PageEntry() = default;

  // Requires: pages < 1024; a record is aligned to 16 bytes and below 2^48. Without a record
  // (nullptr), a Free entry only marks pages as not allocated (a later free of them is a
  // double free) until the run manager writes the run's tags.
  static constexpr PageEntry header() { return PageEntry(std::uint64_t(PageKind::Header)); }
  static PageEntry header(const void* record) {
    return PageEntry(std::uint64_t(PageKind::Header) | reinterpret_cast<std::uintptr_t>(record));
  }
  static constexpr PageEntry free(PageCount pages, bool dirty) {
    return PageEntry(std::uint64_t(PageKind::Free) | (dirty ? kDirtyBit : 0) |
                     (std::uint64_t(pages.value()) << kPagesShift));
  }
  static PageEntry free(PageCount pages, bool dirty, const void* record) {
    return PageEntry(free(pages, dirty).bits_ | reinterpret_cast<std::uintptr_t>(record));
  }
  static constexpr PageEntry allocated(PageCount pages) {
    return PageEntry(std::uint64_t(PageKind::Allocated) |
                     (std::uint64_t(pages.value()) << kPagesShift));
  }
  static constexpr PageEntry large(PageCount pages) {
    return PageEntry(std::uint64_t(PageKind::Large) |
                     (std::uint64_t(pages.value()) << kPagesShift));
  }
  static constexpr PageEntry cached(PageCount pages) {
    return PageEntry(std::uint64_t(PageKind::Cached) |
                     (std::uint64_t(pages.value()) << kPagesShift));
  }
  static constexpr PageEntry thread_cached(PageCount pages) {
    return PageEntry(std::uint64_t(PageKind::ThreadCached) |
                     (std::uint64_t(pages.value()) << kPagesShift));
  }
  // Requires: descriptor is aligned to 64 bytes and below 2^48; size_class < 128;
  // page_in_slab (this page's distance from the slab's first page) < 256.
  static PageEntry slab(const void* descriptor, unsigned size_class, unsigned page_in_slab) {
    return PageEntry(std::uint64_t(PageKind::Slab) | reinterpret_cast<std::uintptr_t>(descriptor) |
                     (std::uint64_t(page_in_slab) << kSlabPageShift) |
                     (std::uint64_t(size_class + kClassBias) << kClassShift));
  }

  [[nodiscard]] constexpr PageKind kind() const { return PageKind(bits_ & kKindMask); }
  // kind() == PageKind::Slab, in one test of the sign.
  [[nodiscard]] constexpr bool is_slab() const { return std::int64_t(bits_) < 0; }
  [[nodiscard]] constexpr bool is_free() const { return kind() == PageKind::Free; }
  [[nodiscard]] constexpr bool dirty() const { return (bits_ & kDirtyBit) != 0; }
  // Free, Allocated, Large, Cached and ThreadCached entries: the run's length.
  [[nodiscard]] constexpr PageCount pages() const {
    return PageCount((bits_ >> kPagesShift) & kPagesMask);
  }
  // Free and Header entries: the run manager's record of the run or the chunk (nullptr: none).
  [[nodiscard]] void* record() const { return reinterpret_cast<void*>(bits_ & kRecordMask); }
  // Slab entries: the slab's descriptor and size class.
  [[nodiscard]] void* slab_descriptor() const {
    return reinterpret_cast<void*>(bits_ & kDescriptorMask);
  }
  [[nodiscard]] constexpr unsigned size_class() const {
    return unsigned(bits_ >> kClassShift) - kClassBias;
  }
  // Slab entries: (size_class() + kClassBias) * 16, the class byte moved down to bits 4-11
  // (a shift and a mask: the index of a 16-byte record in a table that starts kClassBias
  // records early).
  [[nodiscard]] constexpr std::size_t class_byte_times_16() const {
    return std::size_t(bits_ >> (kClassShift - 4)) & 0xff0;
  }
  // Slab entries: how many pages before this one the slab starts.
  [[nodiscard]] constexpr unsigned page_in_slab() const {
    return unsigned((bits_ >> kSlabPageShift) & 0xff);
  }

  constexpr bool operator==(const PageEntry&) const = default;

  // A Slab entry's top byte is its class plus this: it sets bit 63 in every Slab entry.
  static constexpr unsigned kClassBias = 128;

 private:
  constexpr explicit PageEntry(std::uint64_t bits) : bits_(bits) {}

  static constexpr std::uint64_t kKindMask = 0x7;
  static constexpr std::uint64_t kDirtyBit = 0x8;
  static constexpr unsigned kPagesShift = 48;
  static constexpr std::uint64_t kPagesMask = 0x3ff;
  static constexpr std::uint64_t kRecordMask = 0x0000fffffffffff0;
  static constexpr unsigned kSlabPageShift = 48;
  static constexpr unsigned kClassShift = 56;
  static constexpr std::uint64_t kDescriptorMask = 0x0000ffffffffffc0;

  std::uint64_t bits_ = 0;  // 0: never written (no page of a live chunk stays so)
};
static_assert(sizeof(PageEntry) == 8);

// Where things are in a chunk: the page map fills the first page, runs the rest. Everything
// else the run manager keeps about a chunk or a free run lives in records outside the chunk
// (record_pool.h), found through the page map's Header and Free entries, so that a chunk whose
// runs are touched sparsely has no other metadata page resident.
//
//   [ PageEntry x kPagesPerChunk (512: 4 KiB; 256 with chunks of 1 MiB) ] [ runs ... ]
//
// kMaxRunPages, the longest run the allocator asks for, leaves room for a header of up to
// kMaxHeaderPages pages (the size at which blocks stop being large runs and become huge).
inline constexpr std::size_t kMaxHeaderPages = 16;
inline constexpr PageCount kMaxRunPages = PageCount(kPagesPerChunk - kMaxHeaderPages);

struct ChunkLayout {
  static constexpr PageCount kHeaderPages = PageCount::covering(sizeof(PageEntry) * kPagesPerChunk);
  static constexpr PageCount kUsablePages = PageCount(kPagesPerChunk) - kHeaderPages;
  static constexpr PageIndex kFirstRunPage = PageIndex(kHeaderPages.value());
  static_assert(kHeaderPages.value() == 1, "the page map is the chunk's one header page");
  static_assert(kUsablePages >= kMaxRunPages);
};

// The page map of a chunk: readable by anyone holding a pointer into the chunk.
inline PageEntry* page_map(std::byte* chunk) { return reinterpret_cast<PageEntry*>(chunk); }
inline PageEntry& page_entry(std::byte* chunk, PageIndex i) { return page_map(chunk)[i.value()]; }

// An entry that a thread may change without its arena's lock (a medium block's first page,
// Large <-> ThreadCached) read and written as one relaxed 64-bit atomic: the same plain move
// on x86-64, and no data race for the language or ThreadSanitizer.
inline PageEntry load_entry(std::byte* chunk, PageIndex i) {
  static_assert(sizeof(PageEntry) == sizeof(std::uint64_t));
  const std::uint64_t bits = __atomic_load_n(
      reinterpret_cast<const std::uint64_t*>(&page_entry(chunk, i)), __ATOMIC_RELAXED);
  return std::bit_cast<PageEntry>(bits);
}
inline void store_entry(PageEntry& where, PageEntry e) {
  __atomic_store_n(reinterpret_cast<std::uint64_t*>(&where), std::bit_cast<std::uint64_t>(e),
                   __ATOMIC_RELAXED);
}
inline void store_entry(std::byte* chunk, PageIndex i, PageEntry e) {
  store_entry(page_entry(chunk, i), e);
}

}  // namespace pagemalloc
