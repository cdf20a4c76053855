// The OS layer ("platform abstraction layer", as snmalloc calls it): the four things the
// allocator asks of the operating system. Every layer above takes its Pal as a template
// parameter, so tests substitute a fake that serves a fixed buffer and injects failures.
//
//   reserve(bytes, align)  address space, readable and writable, zero-filled; nullptr if refused
//   release(p, bytes)      give address space back (any page-aligned part of a reservation)
//   commit(p, bytes)       make decommitted pages usable again; false if refused
//   decommit(p, bytes)     drop the physical pages but keep the address space; the pages read
//                          as zero afterwards
//   grow(p, old, new)      extend a reservation in place; false when the space after is taken
//
// A Pal may also hand over chunks already mapped (ReusesChunks): take_used_chunk() returns a
// chunk-sized, chunk-aligned reservation whose pages may hold old data (a huge block's freed
// pages, still resident), or nullptr when it has none. The run manager asks for one before
// it reserves a fresh chunk, and takes its pages as dirty.
#pragma once

#include <concepts>
#include <cstddef>

namespace pagemalloc {

template <class P>
concept Pal = requires(P& pal, void* p, std::size_t bytes) {
  { pal.reserve(bytes, bytes) } -> std::same_as<void*>;
  { pal.release(p, bytes) } -> std::same_as<void>;
  { pal.commit(p, bytes) } -> std::same_as<bool>;
  { pal.decommit(p, bytes) } -> std::same_as<void>;
  { pal.grow(p, bytes, bytes) } -> std::same_as<bool>;
};

template <class P>
concept ReusesChunks = Pal<P> && requires(P& pal) {
  { pal.take_used_chunk() } -> std::same_as<void*>;
};

}  // namespace pagemalloc
