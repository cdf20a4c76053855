// The call stack of an allocation, for the heap profiler: return addresses, innermost first,
// from libgcc's unwinder (_Unwind_Backtrace, which reads the .eh_frame tables every object on
// Debian carries, so a program built without frame pointers unwinds too, and which allocates
// nothing; libgcc is linked into the library already). The allocator's own frames are left
// out when the allocator is a shared object of its own (the drop-in); linked into the program,
// they stay at the top of each stack.
#pragma once

#include <cstdint>

namespace pagemalloc {

inline constexpr unsigned kMaxStackDepth = 128;

// Fills pcs with up to max return addresses of the calling thread, the first the caller's of
// the allocator's entry point; returns how many.
unsigned capture_backtrace(std::uintptr_t* pcs, unsigned max);

}  // namespace pagemalloc
