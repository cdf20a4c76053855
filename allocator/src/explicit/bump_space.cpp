// The bump arenas' space for the build's Config (bump_space_impl.h).
#include "explicit/bump_space_impl.h"

namespace pagemalloc {

template class Allocator<BuildConfig>::BumpSpace;

}  // namespace pagemalloc
