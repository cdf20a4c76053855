// prof_leak's report at exit: the sampled blocks still live, by call stack, largest first, as
// gperftools' heap checker lists its leaks:
//
//   pagemalloc: prof_leak: about 1064960 bytes in 4 blocks live at exit, from 3 call stacks
//   (12 samples; prof_sample 524288)
//   Leak of about 1048576 bytes in about 1 blocks allocated from:
//       @ 0x55d0c1a2b1c4 make_table+0x24 (/usr/bin/program)
//       @ 0x7f0a12a3b24a __libc_start_call_main+0x7a (/lib/x86_64-linux-gnu/libc.so.6)
//
// The estimates scale each stack's samples as jeprof does (sampling.h's sample_weight of the
// stack's mean block). Names come from the dynamic symbol tables (dladdr); a function the
// program does not export shows as its address and object, which jeprof or addr2line resolve.
#pragma once

#include <cstdint>

#include "profile/stack_table.h"

namespace pagemalloc {

// Writes the report to fd without allocating, the kMaxListedLeaks stacks of most live bytes in
// full; false if a write failed.
bool write_leak_report(int fd, std::uint64_t sample_mean, const StackTable& stacks);
inline constexpr unsigned kMaxListedLeaks = 32;

}  // namespace pagemalloc
