// The heap's operations for the build's Config (heap_impl.h).
#include "heap/heap_impl.h"

namespace pagemalloc {

template class Allocator<BuildConfig>::Heap;

}  // namespace pagemalloc
