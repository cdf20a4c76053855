// The OS layer arena chunks (chunk_pal.h) and huge blocks (huge.h) come from: Linux mmap.
//
// In a library compiled with PAGEMALLOC_FAULT_INJECTION (the target pagemalloc_core_faults,
// linked only by tests/fault_injection_test.cpp) it is the same layer wrapped in
// FaultInjectingPal, whose reserve, commit, grow and move fail when the process's fault
// injector (pagemap/fault_injector.h) says so. The shipped libraries never contain it.
#pragma once

#include <type_traits>

#include "pagemap/pal.h"
#include "pagemap/pal_fault_injecting.h"
#include "pagemap/pal_linux.h"

namespace pagemalloc {

#ifdef PAGEMALLOC_FAULT_INJECTION
inline constexpr bool kFaultInjection = true;
#else
inline constexpr bool kFaultInjection = false;
#endif

using OsPal = std::conditional_t<kFaultInjection, FaultInjectingPal<LinuxPal>, LinuxPal>;
static_assert(Pal<OsPal>);

}  // namespace pagemalloc
