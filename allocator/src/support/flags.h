// Decoding of the *allocx flags, laid out as jemalloc's MALLOCX_*: the low 6 bits hold
// lg(alignment), 0x40 asks for zeroed memory, bits 20..31 hold an arena index + 1 (0: none).
#pragma once

#include <cstddef>

namespace pagemalloc {

// No arena named: the calling thread's (through its cache).
inline constexpr unsigned kNoArena = ~0u;
// Arena indices the flags can name: 0 .. kArenaIndices-1 (12 bits, the value 0 meaning none).
inline constexpr unsigned kArenaIndices = (1u << 12) - 1;

struct AllocFlags {
  std::size_t align;
  bool zero;
  unsigned arena;  // an index, or kNoArena
};

constexpr AllocFlags decode_flags(int flags) {
  const unsigned lg = unsigned(flags) & 0x3f;
  const unsigned arena_field = unsigned(flags) >> 20;
  return AllocFlags{lg == 0 ? 1 : std::size_t{1} << (lg < 63 ? lg : 63), (flags & 0x40) != 0,
                    arena_field == 0 ? kNoArena : arena_field - 1};
}
static_assert(decode_flags(int((0u + 1) << 20)).arena == 0);
static_assert(decode_flags(int((4094u + 1) << 20)).arena == kArenaIndices - 1);
static_assert(decode_flags(0x40 | 6).arena == kNoArena);

}  // namespace pagemalloc
