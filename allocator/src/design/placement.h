// Where a request goes: which kind of block serves `size` bytes aligned to `align`, and how
// many bytes that block offers. pm_nallocx is this function; every allocation path uses it,
// so nallocx and sallocx agree by construction.
#pragma once

#include <cstddef>

#include "design/medium_classes.h"
#include "design/size_classes.h"
#include "pagemap/page_map.h"
#include "pagemap/pages.h"

namespace pagemalloc {

// Requests above this fail with ENOMEM at once (the user half of a 48-bit address space).
inline constexpr std::size_t kMaxRequest = std::size_t{1} << 46;

enum class BlockKind { Small, Large, Huge, Invalid };

struct Placement {
  BlockKind kind = BlockKind::Invalid;
  unsigned size_class = 0;  // Small
  std::size_t usable = 0;   // bytes the block offers
};

// How far a Config's medium classes reach: none in a design without thread caches, whose blocks
// would have nowhere to wait for the next request of their class; at most half a chunk, since a
// medium block is a run of one chunk (a design of 1 MiB chunks reaches 512 KiB).
template <class Config>
inline constexpr std::size_t kMediumReachOf =
    !Config::kThreadCaches                    ? 0
    : Config::kMaxMediumSize < kChunkSize / 2 ? Config::kMaxMediumSize
                                              : kChunkSize / 2;

// The medium classes of a Config (medium_classes.h).
template <class Config>
using MediumClassesOf = MediumClassTable<Config::kMaxSmallSize, kMediumReachOf<Config>,
                                         Config::kMediumClassesPerDoubling>;
using BuildMediumClasses = MediumClassesOf<BuildConfig>;
using NoMediumClasses = MediumClassTable<0, 0, 0>;

// Requires: align is a power of two.
// Where a block of `size` bytes aligned to `align` lies in a design with these size classes
// (SizeClassTable) and medium classes: a large request aligned to at most a page takes its
// medium class's length.
template <class SizeClasses, class MediumClasses = NoMediumClasses>
constexpr Placement place_with(std::size_t size, std::size_t align) {
  if (size > kMaxRequest || align > kMaxRequest) return {};
  if (size == 0) size = 1;
  if (align <= kPageSize) {
    unsigned c = SizeClasses::class_aligned(size, align);
    if (c < SizeClasses::kCount) return {BlockKind::Small, c, SizeClasses::kClasses[c].size};
  }
  if (MediumClasses::kEnabled && align <= kPageSize && size <= MediumClasses::kMaxMediumSize)
    return {BlockKind::Large, 0, MediumClasses::rounded(size)};
  PageCount pages = PageCount::covering(size);
  PageCount extra(align > kPageSize ? align / kPageSize - 1 : 0);
  if (pages + extra <= kMaxRunPages) return {BlockKind::Large, 0, pages.bytes()};
  return {BlockKind::Huge, 0, pages.bytes()};
}

// In the build's design.
constexpr Placement place(std::size_t size, std::size_t align) {
  return place_with<BuildSizeClasses, BuildMediumClasses>(size, align);
}

}  // namespace pagemalloc
