// The explicit arenas for the build's Config (explicit_arenas_impl.h).
#include "explicit/explicit_arenas_impl.h"

namespace pagemalloc {

template class Allocator<BuildConfig>::ExplicitArenas;

}  // namespace pagemalloc
