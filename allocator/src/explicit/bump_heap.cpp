// The heap's operations on bump arenas' blocks for the build's Config (bump_heap_impl.h).
#include "explicit/bump_heap_impl.h"

namespace pagemalloc {

using BuildHeap = Allocator<BuildConfig>::Heap;
template void* BuildHeap::reallocate_bumped(BumpSpace&, void*, std::size_t, std::size_t, bool,
                                            unsigned, const char*);
template std::size_t BuildHeap::resize_bumped_in_place(BumpSpace&, void*, std::size_t, std::size_t,
                                                       bool, const char*);
template void* BuildHeap::bump_from_cursor(pm_bump_cursor&, std::size_t, std::size_t, bool);
template std::size_t BuildHeap::bumped_usable_size(unsigned, std::size_t, std::size_t);
template void BuildHeap::flush_cursor(pm_bump_cursor&);

}  // namespace pagemalloc
