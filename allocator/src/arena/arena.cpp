// The arena's operations for the build's Config (arena_impl.h).
#include "arena/arena_impl.h"

namespace pagemalloc {

template class Allocator<BuildConfig>::Arena;

}  // namespace pagemalloc
