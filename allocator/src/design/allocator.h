// The allocator assembled from one Config (presets.h): Allocator<Config> names every part of
// pagemalloc that a design choice shapes or that keeps state of its own, as a member class
// defined in the part's header. A part names the others without qualification, so each of
// them is the same Config's: Allocator<Je2008TreesConfig>::Heap is a whole allocator (its
// arenas, huge blocks, thread caches, address map, decay and fork handlers), and another
// Config's heap in the same process shares nothing with it but the process's options
// (config.h) and clock.
//
// The shipped libraries instantiate Allocator<BuildConfig> (build_config.h), the Config CMake
// assembled: each part's definitions lie in its *_impl.h, and its .cpp file instantiates
// them for BuildConfig alone. A program that wants another Config includes allocator_impl.h
// and names Allocator<ItsConfig>::Heap (tests/api/fault_injection_test.cpp;
// benchmarks/whole_designs_bench.cpp). The names without Allocator<...> (Heap, Arena,
// heap(), ...) are BuildConfig's.
//
// What every Config of one binary shares: the page geometry (pagemap/pages.h, the chunk size
// CMake wrote), which every layer counts in. A Config whose kLgChunkSize differs from the
// build's does not compile here. Its size classes are its own (up to its kMaxSmallSize).
#pragma once

#include <cstddef>
#include <type_traits>

#include "build_config.h"
#include "chunks/address_map.h"
#include "design/placement.h"
#include "design/size_classes.h"
#include "pagemap/pal.h"

namespace pagemalloc {

template <class Config>
struct Allocator {
  static_assert(Config::kLgChunkSize == kLgChunkSize,
                "every Config of one binary has the build's chunk size (pagemap/pages.h)");
  static_assert(Pal<typename Config::Pal>);

  // The OS layer: Linux mmap, or a stand-in a test gives its Config.
  using OsPal = typename Config::Pal;

  // The size classes, up to the Config's largest small size (size_classes.h). These names
  // hide the build's within every part.
  using SizeClasses = SizeClassTable<Config::kMaxSmallSize>;
  static constexpr std::size_t kMaxSmallSize = Config::kMaxSmallSize;
  static constexpr std::size_t kNumClasses = SizeClasses::kCount;
  static constexpr const auto& kSizeClasses = SizeClasses::kClasses;
  static constexpr unsigned size_class_of(std::size_t size) { return SizeClasses::class_of(size); }
  // The medium classes (medium_classes.h): large lengths kept in the thread caches.
  using MediumClasses = MediumClassesOf<Config>;
  static constexpr Placement place(std::size_t size, std::size_t align) {
    return place_with<SizeClasses, MediumClasses>(size, align);
  }

  class ArenaChunks;       // arena_chunks.h
  struct HugeExtent;       // huge.h
  class HugeManager;       // huge.h
  struct ArenaNeighbours;  // arena.h
  class Arena;             // arena.h
  class ThreadCache;       // thread_cache.h
  class AutomaticArenas;   // automatic_arenas.h
  struct BumpLease;        // bump_space.h
  class BumpSpace;         // bump_space.h
  struct ExplicitArena;    // explicit_arenas.h
  class ExplicitArenas;    // explicit_arenas.h
  class Decay;             // decay.h
  class Fork;              // fork.h
  class Heap;              // heap.h

  // This Config's heap (heap.h), never destroyed.
  static Heap& heap();
  // This Config's map of chunks to their owners.
  static AddressMap& address_map() { return g_address_map<Config>; }
};

// The build's.
inline AddressMap& address_map() { return Allocator<BuildConfig>::address_map(); }

}  // namespace pagemalloc
