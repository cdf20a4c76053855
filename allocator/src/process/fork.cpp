// The fork handlers and the heap's lock order for the build's Config (fork_impl.h).
#include "process/fork_impl.h"

namespace pagemalloc {

template class Allocator<BuildConfig>::Fork;
template void Allocator<BuildConfig>::Heap::lock_for_fork();
template void Allocator<BuildConfig>::Heap::unlock_after_fork_in_parent();
template void Allocator<BuildConfig>::Heap::reset_after_fork_in_child();

}  // namespace pagemalloc
