// Pages and chunks: the units every layer of pagemalloc counts in.
//
// A *page* is 4 KiB. A *chunk* is a 2 MiB region (1 MiB in a design that chooses so:
// kLgChunkSize, pagemap/chunk_size.h) aligned to its size, obtained from the OS;
// its first page holds the chunk's header (the page map), the rest are handed out as *runs*,
// contiguous spans of pages. Page counts and page indices are strong types (as tcmalloc's
// `Length` and `PageId`), so that bytes, pages and indices are never mixed by accident.
#pragma once

#include <compare>
#include <cstddef>
#include <cstdint>

#include "pagemap/chunk_size.h"

namespace pagemalloc {

inline constexpr std::size_t kLgPageSize = 12;
inline constexpr std::size_t kPageSize = std::size_t{1} << kLgPageSize;
inline constexpr std::size_t kChunkSize = std::size_t{1} << kLgChunkSize;
inline constexpr std::size_t kPagesPerChunk = kChunkSize / kPageSize;
static_assert(kLgChunkSize == 20 || kLgChunkSize == 21, "chunks of 1 MiB or 2 MiB");

// A number of pages.
class PageCount {
 public:
  constexpr PageCount() = default;
  constexpr explicit PageCount(std::size_t n) : n_(n) {}
  [[nodiscard]] constexpr std::size_t value() const { return n_; }
  [[nodiscard]] constexpr std::size_t bytes() const { return n_ << kLgPageSize; }
  constexpr auto operator<=>(const PageCount&) const = default;
  constexpr PageCount operator+(PageCount o) const { return PageCount(n_ + o.n_); }
  constexpr PageCount operator-(PageCount o) const { return PageCount(n_ - o.n_); }

  // The fewest pages that hold `bytes`.
  static constexpr PageCount covering(std::size_t bytes) {
    return PageCount((bytes + kPageSize - 1) >> kLgPageSize);
  }

 private:
  std::size_t n_ = 0;
};

// The position of a page inside its chunk, 0 .. kPagesPerChunk-1.
class PageIndex {
 public:
  constexpr PageIndex() = default;
  constexpr explicit PageIndex(std::size_t i) : i_(static_cast<std::uint32_t>(i)) {}
  [[nodiscard]] constexpr std::size_t value() const { return i_; }
  constexpr auto operator<=>(const PageIndex&) const = default;
  constexpr PageIndex operator+(PageCount n) const { return PageIndex(i_ + n.value()); }
  constexpr PageIndex operator-(PageCount n) const { return PageIndex(i_ - n.value()); }
  constexpr PageCount operator-(PageIndex o) const { return PageCount(i_ - o.i_); }

 private:
  std::uint32_t i_ = 0;
};

// The chunk that holds an address (a mask), and the page of it the address falls in.
inline std::byte* chunk_base_of(const void* p) {
  return reinterpret_cast<std::byte*>(reinterpret_cast<std::uintptr_t>(p) & ~(kChunkSize - 1));
}
inline PageIndex page_index_of(const void* p) {
  return PageIndex((reinterpret_cast<std::uintptr_t>(p) & (kChunkSize - 1)) >> kLgPageSize);
}
inline bool is_chunk_aligned(const void* p) {
  return (reinterpret_cast<std::uintptr_t>(p) & (kChunkSize - 1)) == 0;
}

// A run: `pages` pages starting at page `first` of the chunk at `chunk`.
struct Run {
  std::byte* chunk = nullptr;  // chunk base; nullptr means "no run" (allocation failed)
  PageIndex first;
  PageCount pages;

  [[nodiscard]] std::byte* base() const { return chunk + (first.value() << kLgPageSize); }
  [[nodiscard]] PageIndex last() const { return first + pages - PageCount(1); }
  [[nodiscard]] PageIndex end() const { return first + pages; }
  explicit operator bool() const { return chunk != nullptr; }

  static Run at(void* address, PageCount pages) {
    return Run{chunk_base_of(address), page_index_of(address), pages};
  }
};

}  // namespace pagemalloc
