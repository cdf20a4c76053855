// The huge blocks' manager for the build's Config (huge_impl.h).
#include "huge/huge_impl.h"

namespace pagemalloc {

template class Allocator<BuildConfig>::HugeManager;

}  // namespace pagemalloc
