// A slab: a run of pages cut into equal regions of one size class, with a bitmap of the
// free ones. Its descriptor lives outside the slab (in a MetaPool), so the regions start on
// the page boundary and a class that is a multiple of an alignment keeps every region aligned.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>

#include "design/size_classes.h"

namespace pagemalloc {

struct alignas(64) Slab {
  std::byte* base = nullptr;  // the first region (the run's first page)
  Slab* prev = nullptr;       // the bin's list of slabs that have free regions
  Slab* next = nullptr;
  std::uint16_t size_class = 0;
  std::uint16_t free_count = 0;                        // regions free, 0 .. regions
  bool listed = false;                                 // on the bin's list
  std::uint64_t free_bits[kMaxSlabRegions / 64] = {};  // bit i set: region i is free

  void init(std::byte* run_base, unsigned cls) {
    base = run_base;
    size_class = std::uint16_t(cls);
    const std::uint32_t regions = kAllSizeClasses[cls].regions;
    free_count = std::uint16_t(regions);
    for (std::uint32_t w = 0; w < kMaxSlabRegions / 64; ++w) {
      std::uint32_t first = w * 64;
      if (regions >= first + 64) free_bits[w] = ~std::uint64_t{0};
      else if (regions > first) free_bits[w] = (std::uint64_t{1} << (regions - first)) - 1;
      else free_bits[w] = 0;
    }
  }

  // Takes up to n free regions, a bitmap word at a time, lowest address first, into
  // top[-1], top[-2], ... (down from top: the order a cache that pops its stack's top hands
  // them out in, with no pass to reverse them); returns how many.
  unsigned take_many_down(void** top, unsigned n) {
    const SizeClass& sc = kAllSizeClasses[size_class];
    const unsigned words = (sc.regions + 63) / 64;
    void** out = top;
    void** const last = top - n;
    for (unsigned w = 0; w < words && out != last; ++w) {
      std::uint64_t bits = free_bits[w];
      std::byte* const word_base = base + std::size_t(w) * 64 * sc.size;
      while (bits != 0 && out != last) {
        const unsigned bit = unsigned(std::countr_zero(bits));
        bits &= bits - 1;
        *--out = word_base + std::size_t(bit) * sc.size;
      }
      free_bits[w] = bits;
    }
    const auto got = unsigned(top - out);
    free_count = std::uint16_t(free_count - got);
    return got;
  }

  [[nodiscard]] bool is_free(std::uint32_t index) const {
    return (free_bits[index / 64] >> (index % 64)) & 1;
  }
  // Region index free again; the caller adds the regions it marks to free_count (a run of
  // them at once: Arena::give_back_run).
  void mark_free(std::uint32_t index) { free_bits[index / 64] |= std::uint64_t{1} << (index % 64); }
  [[nodiscard]] bool empty() const { return free_count == kAllSizeClasses[size_class].regions; }
};

}  // namespace pagemalloc
