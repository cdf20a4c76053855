// Size classes: the sizes a small request is rounded up to, and the slab that holds each.
//
// Classes are 8, then multiples of 16 up to 128, then eight per doubling up to 64 KiB
// (144, 160, ..., 256, 288, 320, ...), as mimalloc's; up to 16 KiB or 2 KiB in a build whose
// design says so (a Config's kMaxSmallSize, presets.h; SizeClassTable). A request above 128
// bytes wastes at most 1/8 of its block (four per doubling, as jemalloc's, lose up to a
// quarter: a program's most common object of 392 bytes takes 448 there, 416 here); below, waste
// is under the 16-byte alignment granule. Every request above the largest class is a run of
// whole pages (at most 7% waste, at 64 KiB + 1), rounded up to its medium class where the
// design has them (medium_classes.h: at most 1/8 more, in pages a program need not touch).
//
// Classes above 16 KiB keep blocks that programs replace by the thousand (buffers, a
// runtime's pages) in the thread caches, where a run of pages took the arena's lock for every
// allocation and free and was carved from other pages each time (docs/measurements.md,
// "Slab classes up to 64 KiB").
//
// A slab is a run of 1..16 pages (1..64 for classes above 16 KiB) cut into equal regions of
// one class; its geometry is chosen at compile time so that the tail it cannot use is small.
// Region index = offset * magic >> kMagicShift (exact for every offset in a slab), so freeing
// needs no division.
#pragma once

#include <algorithm>
#include <array>
#include <bit>
#include <cstddef>
#include <cstdint>

#include "build_config.h"
#include "pagemap/pages.h"

namespace pagemalloc {

inline constexpr std::size_t kMaxSlabRegions = 512;
inline constexpr std::size_t kMaxSlabPages = 64;
// Classes up to 16 KiB keep slabs of at most this many pages.
inline constexpr std::size_t kMaxSmallSlabPages = 16;
inline constexpr std::uint32_t kClassesPerDoubling = 8;  // above 128 bytes
// Wide enough that offset * magic is exact for every offset of a 64-page slab (with 32, only
// within 16 pages), narrow enough that the product fits 64 bits.
inline constexpr unsigned kMagicShift = 48;

struct SizeClass {
  std::uint32_t size;        // bytes per region
  std::uint32_t slab_pages;  // pages per slab
  std::uint32_t regions;     // regions per slab, <= kMaxSlabRegions
  std::uint64_t magic;       // ceil(2^kMagicShift / size): index = offset * magic >> kMagicShift
};

namespace detail {

constexpr std::size_t count_classes(std::size_t max_small_size) {
  std::size_t n = 1;                                // 8
  for (std::size_t s = 16; s <= 128; s += 16) ++n;  // 16 .. 128
  for (std::size_t group = 256; group <= max_small_size; group *= 2) n += kClassesPerDoubling;
  return n;
}

constexpr SizeClass make_class(std::uint32_t size) {
  // The fewest pages that hold at least four regions (where the class's most pages can) and
  // whose tail waste is at most 1/64 of the slab; else the least waste.
  const std::size_t max_pages =
      size <= (std::size_t{16} << 10) ? kMaxSmallSlabPages : kMaxSlabPages;
  const std::uint64_t min_regions = std::min<std::uint64_t>(4, max_pages * kPageSize / size);
  std::uint32_t best_pages = 1;
  std::uint64_t best_waste = ~std::uint64_t{0};
  for (std::uint32_t pages = 1; pages <= max_pages; ++pages) {
    std::uint64_t bytes = std::uint64_t{pages} * kPageSize;
    if (bytes / size < min_regions || bytes / size > kMaxSlabRegions) continue;
    std::uint64_t waste = bytes % size;
    if (waste * 64 <= bytes) {
      best_pages = pages;
      break;
    }
    if (waste * best_pages * kPageSize < best_waste * bytes) {  // compare waste fractions
      best_waste = waste;
      best_pages = pages;
    }
  }
  std::uint32_t regions = std::uint32_t(best_pages * kPageSize / size);
  std::uint64_t magic = ((std::uint64_t{1} << kMagicShift) + size - 1) / size;
  return SizeClass{size, best_pages, regions, magic};
}

template <std::size_t kMax>
constexpr auto make_classes() {
  std::array<SizeClass, count_classes(kMax)> classes{};
  std::size_t i = 0;
  classes[i++] = make_class(8);
  for (std::uint32_t s = 16; s <= 128; s += 16) classes[i++] = make_class(s);
  for (std::uint32_t group = 128; group < kMax; group *= 2)
    for (std::uint32_t step = 1; step <= kClassesPerDoubling; ++step)
      classes[i++] = make_class(group + step * group / kClassesPerDoubling);
  return classes;
}

// Class of sizes 1..1024 at 8-byte steps, and of 1025..kMax at 128-byte steps (all classes
// above 1024 are multiples of 128, so the coarse step never straddles a class boundary).
template <class Classes>
constexpr std::uint8_t class_for_slow(const Classes& classes, std::size_t size) {
  std::uint8_t c = 0;
  while (classes[c].size < size) ++c;
  return c;
}
template <class Classes>
constexpr auto make_fine_lookup(const Classes& classes) {
  std::array<std::uint8_t, 1024 / 8 + 1> t{};
  for (std::size_t i = 0; i < t.size(); ++i) t[i] = class_for_slow(classes, i == 0 ? 1 : i * 8);
  return t;
}
template <std::size_t kMax, class Classes>
constexpr auto make_coarse_lookup(const Classes& classes) {
  std::array<std::uint8_t, kMax / 128 + 1> t{};
  for (std::size_t i = 0; i < t.size(); ++i) t[i] = class_for_slow(classes, i == 0 ? 1 : i * 128);
  return t;
}

}  // namespace detail

// The size classes of a design whose slabs end at kMax bytes (a Config's kMaxSmallSize).
template <std::size_t kMax>
struct SizeClassTable {
  static_assert(kMax == 2048 || kMax == 16384 || kMax == 65536);
  static constexpr std::size_t kMaxSmallSize = kMax;
  static constexpr auto kClasses = detail::make_classes<kMax>();
  static constexpr std::size_t kCount = kClasses.size();
  static_assert(kCount == (kMax == 65536 ? 81 : kMax == 16384 ? 65 : 41));
  static_assert(kClasses.back().size == kMax);

  // Requires: size <= kMax. Size 0 has the class of size 1 (a malloc(0) block).
  static constexpr unsigned class_of(std::size_t size) {
    return size <= kMaxFineSize ? fine_class_of(size) : coarse_class_of(size);
  }
  // class_of's two tables: sizes up to kMaxFineSize in steps of 8 bytes, the rest in steps
  // of 128.
  static constexpr std::size_t kMaxFineSize = 1024;
  static constexpr unsigned fine_class_of(std::size_t size) { return kFineLookup[(size + 7) >> 3]; }
  static constexpr unsigned coarse_class_of(std::size_t size) {
    return kCoarseLookup[(size + 127) >> 7];
  }
  // The smallest class that holds `size` bytes and whose regions are all aligned to `align`
  // (a power of two <= the page size: a slab starts on a page, so a class that is a multiple
  // of `align` keeps every region aligned). kCount when none does. A multiple of `align` is
  // at least `align`, so the search starts at that class and takes a few steps at most (100
  // bytes aligned to 4 KiB is the 4 KiB class, found at once).
  static constexpr unsigned class_aligned(std::size_t size, std::size_t align) {
    if (size < align) size = align;
    if (size > kMax) return unsigned(kCount);
    unsigned c = class_of(size);
    while (c < kCount && (kClasses[c].size & (align - 1)) != 0) ++c;
    return c;
  }

 private:
  static constexpr auto kFineLookup = detail::make_fine_lookup(kClasses);
  static constexpr auto kCoarseLookup = detail::make_coarse_lookup<kMax>(kClasses);
};

// Every class of any design: a design's classes are the first of these, up to its
// kMaxSmallSize (a class is the same in every table it is in), so a slab, a stash or a
// cache bin looks its class up here whatever its Config.
inline constexpr const auto& kAllSizeClasses = SizeClassTable<65536>::kClasses;
inline constexpr std::size_t kAllClassesCount = SizeClassTable<65536>::kCount;
static_assert(kAllClassesCount < 128, "a slab's page-map entry holds its class below 128");
static_assert([] {
  for (std::size_t c = 0; c < SizeClassTable<2048>::kCount; ++c)
    if (SizeClassTable<2048>::kClasses[c].size != kAllSizeClasses[c].size) return false;
  return true;
}());

// The build's (BuildConfig::kMaxSmallSize): code outside Allocator<Config> and the tests.
inline constexpr std::size_t kMaxSmallSize = BuildConfig::kMaxSmallSize;
using BuildSizeClasses = SizeClassTable<kMaxSmallSize>;
inline constexpr const auto& kSizeClasses = BuildSizeClasses::kClasses;
inline constexpr std::size_t kNumClasses = BuildSizeClasses::kCount;
constexpr unsigned size_class_of(std::size_t size) { return BuildSizeClasses::class_of(size); }
static_assert(size_class_of(0) == size_class_of(1));

constexpr std::uint32_t region_index(const SizeClass& sc, std::size_t offset) {
  return std::uint32_t((offset * sc.magic) >> kMagicShift);
}

// The magic division is exact for every offset a slab can hold.
constexpr bool magic_is_exact() {
  for (const SizeClass& sc : kAllSizeClasses)
    for (std::size_t i = 0; i < sc.regions; ++i)
      for (std::size_t off : {i * sc.size, i * sc.size + sc.size - 1})
        if (region_index(sc, off) != i) return false;
  return true;
}
static_assert(magic_is_exact());

}  // namespace pagemalloc
