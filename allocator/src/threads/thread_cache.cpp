// The thread caches for the build's Config (thread_cache_impl.h).
#include "threads/thread_cache_impl.h"

namespace pagemalloc {

template class Allocator<BuildConfig>::ThreadCache;

}  // namespace pagemalloc
