// The invariant checks for the build's Config (heap_invariants_impl.h).
#include "heap/heap_invariants_impl.h"

namespace pagemalloc {

template const char* Allocator<BuildConfig>::Arena::check_blocks();
template const char* Allocator<BuildConfig>::HugeManager::check_invariants();
template const char* Allocator<BuildConfig>::Heap::check_invariants();

const char* check_heap_invariants() { return heap().check_invariants(); }

}  // namespace pagemalloc
