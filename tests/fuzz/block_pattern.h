// What the fuzz harness writes into each live block, and which bytes it writes and checks.
//
//   pattern    byte i of a block with seed s is byte i % 8 of pattern_word(i / 8, s): it
//              depends on the position, so a block copied to the wrong offset or only in part,
//              or written over by a neighbour, no longer matches
//   layout     the block's address and length when its pattern was written: they decide the
//              coverage, so that a block that moved is checked against where the pattern was
//   coverage   the bytes written and checked: all of a block up to 64 KiB; of a bigger one
//              (large and huge blocks are page-aligned and whole pages) the first and the last
//              16 KiB and one 64-byte line per 16 KiB between them (touching every page of
//              every big block would spend the run in page faults). The line's place follows
//              from the address, so a block on the pages of a freed one checks (for PM_ZERO)
//              the very bytes the freed one wrote
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>

namespace pagemalloc::fuzz {

inline constexpr std::size_t kWholeCoverage = 64 * 1024;   // blocks up to this: every byte
inline constexpr std::size_t kEdgeCoverage = 16 * 1024;    // bigger ones: each end ...
inline constexpr std::size_t kCoverageStride = 16 * 1024;  // ... and a line per stride
inline constexpr std::size_t kCoverageLine = 64;
static_assert(kEdgeCoverage % kCoverageStride == 0 && 2 * kEdgeCoverage < kWholeCoverage);
static_assert(kCoverageStride / kCoverageLine == 256);  // a line's place: 8 bits of a hash

struct Layout {
  std::uintptr_t base = 0;  // the block's address when the pattern was written
  std::size_t length = 0;   // its usable size then
};

// Calls visit(offset, bytes) for each span of the layout's coverage, in address order.
template <class Visit>
void for_each_span(const Layout& layout, Visit visit) {
  const std::size_t n = layout.length;
  if (n <= kWholeCoverage) {
    visit(std::size_t{0}, n);
    return;
  }
  visit(std::size_t{0}, kEdgeCoverage);
  for (std::size_t at = kEdgeCoverage; at + kCoverageStride <= n - kEdgeCoverage;
       at += kCoverageStride) {
    const std::uint64_t h = (layout.base + at) / kCoverageStride * 0x9E3779B97F4A7C15ull;
    visit(at + (h >> 56) * kCoverageLine, kCoverageLine);
  }
  visit(n - kEdgeCoverage, kEdgeCoverage);
}

constexpr std::uint64_t pattern_word(std::size_t word_index, std::uint64_t seed) {
  return (word_index + 1) * 0xD6E8FEB86659FD93ull ^ seed;
}

constexpr std::uint8_t pattern_byte(std::size_t offset, std::uint64_t seed) {
  return std::uint8_t(pattern_word(offset / 8, seed) >> (8 * (offset % 8)));
}

// Writes the pattern over the layout's coverage of the block at p.
inline void write_pattern(std::byte* p, const Layout& layout, std::uint64_t seed) {
  for_each_span(layout, [&](std::size_t from, std::size_t bytes) {
    std::size_t i = from;
    const std::size_t end = from + bytes;
    for (; i < end && i % 8 != 0; ++i) p[i] = std::byte(pattern_byte(i, seed));
    for (; i + 8 <= end; i += 8) {
      const std::uint64_t word = pattern_word(i / 8, seed);
      std::memcpy(p + i, &word, 8);
    }
    for (; i < end; ++i) p[i] = std::byte(pattern_byte(i, seed));
  });
}

// The first offset below `limit` in the layout's coverage where the block at p differs from
// the pattern, if any.
inline std::optional<std::size_t> pattern_mismatch(const std::byte* p, const Layout& layout,
                                                   std::uint64_t seed, std::size_t limit) {
  std::optional<std::size_t> found;
  for_each_span(layout, [&](std::size_t from, std::size_t bytes) {
    const std::size_t end = from + bytes < limit ? from + bytes : limit;
    std::size_t i = from;
    while (!found && i < end) {
      if (i % 8 == 0 && i + 8 <= end) {
        std::uint64_t word;
        std::memcpy(&word, p + i, 8);
        if (word == pattern_word(i / 8, seed)) {
          i += 8;
          continue;
        }
      }
      if (std::uint8_t(p[i]) != pattern_byte(i, seed)) found = i;
      ++i;
    }
  });
  return found;
}

// The first offset in [from, to) of the layout's coverage where the block at p is not zero.
inline std::optional<std::size_t> nonzero_byte(const std::byte* p, const Layout& layout,
                                               std::size_t from, std::size_t to) {
  std::optional<std::size_t> found;
  for_each_span(layout, [&](std::size_t span_from, std::size_t bytes) {
    std::size_t i = span_from > from ? span_from : from;
    const std::size_t end = span_from + bytes < to ? span_from + bytes : to;
    for (; !found && i < end; ++i) {
      if (i % 8 == 0 && i + 8 <= end) {
        std::uint64_t word;
        std::memcpy(&word, p + i, 8);
        if (word == 0) {
          i += 7;
          continue;
        }
      }
      if (p[i] != std::byte{0}) found = i;
    }
  });
  return found;
}

}  // namespace pagemalloc::fuzz
