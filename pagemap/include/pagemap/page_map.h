// The linear page map: one 64-bit entry per page of a chunk, at the start of the chunk.
//
// Pointer -> metadata is a mask (the chunk) and an index (the page): O(1) in every run
// manager. Entries are accurate only where they must be (boundary tags, as jemalloc 2008's
// arena_chunk_map_t and mimalloc's first and last slice):
//
//   free run        first and last page: Free, its length, whether its pages may be dirty
//   allocated run   first and last page: not Free (Allocated, Large or Slab)
//   large block     first page: Large and its length
//   slab            every page: Slab, the slab's descriptor, size class and the page's
//                   distance from the slab's start (so a free needs no descriptor)
//   header          every header page: Header
//
// Interior pages of free runs and large blocks hold stale values. Coalescing reads only the
// entries just before and just after a run, which are always ends of runs.
#pragma once

#include <cstddef>
#include <cstdint>

#include "pagemap/pages.h"

namespace pagemalloc {

enum class PageKind : std::uint8_t { Header = 1, Free = 2, Allocated = 3, Large = 4, Slab = 5 };

class PageEntry {
 public:
  constexpr PageEntry() = default;

  static constexpr PageEntry header() { return PageEntry(std::uint64_t(PageKind::Header)); }
  static constexpr PageEntry free(PageCount pages, bool dirty) {
    return PageEntry(std::uint64_t(PageKind::Free) | (dirty ? kDirtyBit : 0) |
                     (std::uint64_t(pages.value()) << kPagesShift));
  }
  static constexpr PageEntry allocated(PageCount pages) {
    return PageEntry(std::uint64_t(PageKind::Allocated) |
                     (std::uint64_t(pages.value()) << kPagesShift));
  }
  static constexpr PageEntry large(PageCount pages) {
    return PageEntry(std::uint64_t(PageKind::Large) |
                     (std::uint64_t(pages.value()) << kPagesShift));
  }
  // Requires: descriptor is aligned to 64 bytes and below 2^48; size_class < 256;
  // page_in_slab (this page's distance from the slab's first page) < 256.
  static PageEntry slab(const void* descriptor, unsigned size_class, unsigned page_in_slab) {
    return PageEntry(std::uint64_t(PageKind::Slab) | reinterpret_cast<std::uintptr_t>(descriptor) |
                     (std::uint64_t(page_in_slab) << kSlabPageShift) |
                     (std::uint64_t(size_class) << kClassShift));
  }

  [[nodiscard]] constexpr PageKind kind() const { return PageKind(bits_ & kKindMask); }
  [[nodiscard]] constexpr bool is_free() const { return kind() == PageKind::Free; }
  [[nodiscard]] constexpr bool dirty() const { return (bits_ & kDirtyBit) != 0; }
  // Free, Allocated and Large entries: the run's length.
  [[nodiscard]] constexpr PageCount pages() const {
    return PageCount((bits_ >> kPagesShift) & kPagesMask);
  }
  // Slab entries: the slab's descriptor and size class.
  [[nodiscard]] void* slab_descriptor() const {
    return reinterpret_cast<void*>(bits_ & kDescriptorMask);
  }
  [[nodiscard]] constexpr unsigned size_class() const { return unsigned(bits_ >> kClassShift); }
  // Slab entries: how many pages before this one the slab starts.
  [[nodiscard]] constexpr unsigned page_in_slab() const {
    return unsigned((bits_ >> kSlabPageShift) & 0xff);
  }

  constexpr bool operator==(const PageEntry&) const = default;

 private:
  constexpr explicit PageEntry(std::uint64_t bits) : bits_(bits) {}

  static constexpr std::uint64_t kKindMask = 0x7;
  static constexpr std::uint64_t kDirtyBit = 0x8;
  static constexpr unsigned kPagesShift = 8;
  static constexpr std::uint64_t kPagesMask = 0xffffff;
  static constexpr unsigned kSlabPageShift = 48;
  static constexpr unsigned kClassShift = 56;
  static constexpr std::uint64_t kDescriptorMask = 0x0000ffffffffffc0;

  std::uint64_t bits_ = 0;  // 0: never written (no page of a live chunk stays so)
};
static_assert(sizeof(PageEntry) == 8);

// Chunk bookkeeping shared by every run manager, stored after the page map.
struct ChunkInfo {
  ChunkInfo* prev = nullptr;  // the owning run manager's list of chunks
  ChunkInfo* next = nullptr;
  std::uint64_t check_marks[kPagesPerChunk / 64] = {};  // scratch for check_invariants()
};

// Where things are in a chunk's header. `Node` is a run manager's per-page record for the
// first page of a free run (free-list links or tree nodes); every variant has one per page.
//
//   [ PageEntry x 512 | ChunkInfo | Node x 512 | pad to a page ] [ runs ... ]
inline constexpr std::size_t kMaxHeaderPages = 16;
inline constexpr PageCount kMaxRunPages = PageCount(kPagesPerChunk - kMaxHeaderPages);

template <class Node>
struct ChunkLayout {
  static constexpr std::size_t kInfoOffset = sizeof(PageEntry) * kPagesPerChunk;
  static constexpr std::size_t kNodesOffset =
      (kInfoOffset + sizeof(ChunkInfo) + alignof(Node) - 1) / alignof(Node) * alignof(Node);
  static constexpr PageCount kHeaderPages =
      PageCount::covering(kNodesOffset + sizeof(Node) * kPagesPerChunk);
  static constexpr PageCount kUsablePages = PageCount(kPagesPerChunk) - kHeaderPages;
  static constexpr PageIndex kFirstRunPage = PageIndex(kHeaderPages.value());
  static_assert(kHeaderPages.value() <= kMaxHeaderPages, "a chunk header must fit 16 pages");

  static ChunkInfo* info(std::byte* chunk) {
    return reinterpret_cast<ChunkInfo*>(chunk + kInfoOffset);
  }
  static std::byte* chunk_of(const ChunkInfo* info) { return chunk_base_of(info); }
  static Node* nodes(std::byte* chunk) { return reinterpret_cast<Node*>(chunk + kNodesOffset); }
  static Node* node(std::byte* chunk, PageIndex i) { return nodes(chunk) + i.value(); }
  static PageIndex index_of(const Node* node) {
    auto* chunk = chunk_base_of(node);
    return PageIndex(std::size_t(node - reinterpret_cast<const Node*>(chunk + kNodesOffset)));
  }
};

// The page map of a chunk: readable by anyone holding a pointer into the chunk.
inline PageEntry* page_map(std::byte* chunk) { return reinterpret_cast<PageEntry*>(chunk); }
inline PageEntry& page_entry(std::byte* chunk, PageIndex i) { return page_map(chunk)[i.value()]; }

}  // namespace pagemalloc
