// A heap profile as jemalloc's profiler writes it (heap_v2), which jeprof and pprof read:
//
//   heap_v2/524288                        the mean bytes between samples
//     t*: 28: 56637512 [153: 112235112]   live samples: count and bytes [all samples: ...]
//   @ 0x4011a5 0x40123c 0x7f0a12a3b24a     a stack, return addresses innermost first
//     t*: 13: 6688 [20: 9840]             its samples
//   ...
//
//   MAPPED_LIBRARIES:
//   (the process's /proc/self/maps, for the symbols)
//
// The counts are the samples' own: the readers scale them by 1 / (1 - exp(-size / mean)).
#pragma once

#include <cstdint>

#include "profile/stack_table.h"

namespace pagemalloc {

// Writes the profile to fd without allocating; false if a write failed.
bool write_heap_profile(int fd, std::uint64_t sample_mean, const StackTable& stacks);

}  // namespace pagemalloc
