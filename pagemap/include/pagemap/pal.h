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

}  // namespace pagemalloc
