// The automatic arenas for the build's Config (automatic_arenas_impl.h).
#include "threads/automatic_arenas_impl.h"

namespace pagemalloc {

template class Allocator<BuildConfig>::AutomaticArenas;

}  // namespace pagemalloc
