// Decoding of the *allocx flags, laid out as jemalloc's MALLOCX_*: the low 6 bits hold
// lg(alignment), 0x40 asks for zeroed memory, bits 20.. hold an arena index + 1.
#pragma once

#include <cstddef>

namespace pagemalloc {

struct AllocFlags {
  std::size_t align;
  bool zero;
};

constexpr AllocFlags decode_flags(int flags) {
  const unsigned lg = unsigned(flags) & 0x3f;
  return AllocFlags{lg == 0 ? 1 : std::size_t{1} << (lg < 63 ? lg : 63), (flags & 0x40) != 0};
}

}  // namespace pagemalloc
