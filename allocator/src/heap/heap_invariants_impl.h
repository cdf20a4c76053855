// The heap's invariant checks above the run managers, for tests and the fuzz harness.
//
// A run manager checks its own free runs (check_invariants). Here the rest is checked
// against what it describes:
//
//   arena      a walk over every chunk's page map, run by run: header pages, then runs that
//              tile the chunk exactly; a free run's two tags agree, a large block ends on an
//              Allocated tag, a slab's pages all name its descriptor in order; every slab's
//              bitmap agrees with its free count; a slab other than its bin's current one is
//              on the bin's list exactly when it has free regions, and is never empty. The
//              counts add up: regions in use + large blocks = blocks handed out + regions
//              stashed (and the same in bytes); slab and large pages = active pages; free pages
//              as the run manager counts them. Each chunk is tagged with its arena in the
//              address map, and so is every stashed region's chunk.
//   huge       live extents are in use, free ones not; both sets are published at their
//              first and last granules (interior granules untagged); free extents are
//              coalesced and ordered by the time they were freed; the counts are the sums.
//   heap       every automatic arena, the automatic huge manager, every explicit arena (a
//              destroyed one holds nothing and maps nothing).
//
// Each check takes the lock of what it walks and allocates nothing (the drop-in's malloc is
// this allocator). A problem is reported as a fixed sentence; the first one found is returned.
#pragma once

#include "heap/heap_invariants.h"

#include <bit>
#include <cstddef>
#include <cstdint>

#include "arena/arena.h"
#include "chunks/address_map.h"
#include "heap/heap.h"
#include "huge/huge.h"

namespace pagemalloc {
namespace invariants {

// What the page maps of an arena's chunks hold, summed over the chunks.
struct PageMapTally {
  std::size_t regions_in_use = 0;  // small regions taken from slabs (bitmap bits clear)
  std::size_t region_bytes = 0;
  std::size_t large_blocks = 0;
  std::size_t large_bytes = 0;
  std::size_t active_pages = 0;  // slab, large and cached pages
  std::size_t cached_runs = 0;   // large blocks freed into their arena's cache
  std::size_t cached_pages = 0;
  std::size_t slab_pages = 0;
  std::size_t free_pages = 0;
  std::size_t dirty_pages = 0;
  std::size_t slabs = 0;
  std::size_t listed_slabs = 0;  // slabs on their bin's list of partial slabs
};

// The slab whose first page is page `first` of `chunk`. is_current(slab): it is its bin's
// current slab.
template <class IsCurrent>
const char* check_slab(std::byte* chunk, PageIndex first, IsCurrent is_current, PageMapTally& tally,
                       std::size_t num_classes) {
  const PageEntry head = page_entry(chunk, first);
  const auto* slab = static_cast<const Slab*>(head.slab_descriptor());
  if (slab == nullptr) return "a slab page names no descriptor";
  if (head.page_in_slab() != 0) return "a run starts in the middle of a slab";
  if (slab->size_class >= num_classes || slab->size_class != head.size_class())
    return "a slab's size class disagrees with its page map";
  if (slab->base != chunk + (first.value() << kLgPageSize))
    return "a slab's descriptor does not point at its first page";
  const SizeClass& sc = kAllSizeClasses[slab->size_class];
  if (first.value() + sc.slab_pages > kPagesPerChunk) return "a slab runs past its chunk";
  for (std::size_t j = 1; j < sc.slab_pages; ++j) {
    const PageEntry e = page_entry(chunk, first + PageCount(j));
    if (e.kind() != PageKind::Slab || e.slab_descriptor() != slab || e.page_in_slab() != j ||
        e.size_class() != slab->size_class)
      return "a slab's interior page does not name its slab in order";
  }
  std::size_t free_bits = 0;
  for (std::size_t w = 0; w < kMaxSlabRegions / 64; ++w) {
    const std::uint64_t bits = slab->free_bits[w];
    free_bits += std::size_t(std::popcount(bits));
    const std::size_t first_region = w * 64;
    if (first_region >= sc.regions) {
      if (bits != 0) return "a slab's bitmap marks regions past its last one free";
    } else if (sc.regions - first_region < 64 && (bits >> (sc.regions - first_region)) != 0) {
      return "a slab's bitmap marks regions past its last one free";
    }
  }
  if (free_bits != slab->free_count) return "a slab's free count disagrees with its bitmap";
  if (slab->free_count > sc.regions) return "a slab has more free regions than regions";
  if (!is_current(slab)) {
    if (slab->free_count == sc.regions) return "an empty slab is kept that is not current";
    if ((slab->free_count > 0) != slab->listed)
      return "a slab is on its bin's list when full, or off it with free regions";
  }
  const std::size_t in_use = sc.regions - slab->free_count;
  tally.regions_in_use += in_use;
  tally.region_bytes += in_use * sc.size;
  tally.active_pages += sc.slab_pages;
  tally.slab_pages += sc.slab_pages;
  tally.slabs += 1;
  tally.listed_slabs += slab->listed ? 1 : 0;
  return nullptr;
}

// Walks one chunk's page map from run to run; the runs must tile the chunk after its header.
// num_classes: the design's size classes.
template <class IsCurrent>
const char* check_chunk(std::byte* chunk, IsCurrent is_current, PageMapTally& tally,
                        std::size_t num_classes) {
  const PageIndex end(kPagesPerChunk);
  PageIndex i(0);
  while (i < end && load_entry(chunk, i).kind() == PageKind::Header) i = i + PageCount(1);
  if (i == PageIndex(0)) return "a chunk has no header pages";
  while (i < end) {
    const PageEntry e = load_entry(chunk, i);  // a medium block's may be its thread's to change
    PageCount length(1);
    switch (e.kind()) {
      case PageKind::Free: {
        length = e.pages();
        if (length.value() == 0 || i + length > end)
          return "a free run's length is out of its chunk";
        if (page_entry(chunk, i + length - PageCount(1)) != e)
          return "a free run's last tag differs from its first";
        tally.free_pages += length.value();
        if (e.dirty()) tally.dirty_pages += length.value();
        break;
      }
      case PageKind::Large:
      case PageKind::ThreadCached:  // a medium block in a thread's cache: handed out
      case PageKind::Cached: {      // a live large block, or one in its arena's large-run cache
        const bool cached = e.kind() == PageKind::Cached;
        length = e.pages();
        if (length.value() == 0 || i + length > end)
          return cached ? "a cached block's length is out of its chunk"
                        : "a large block's length is out of its chunk";
        if (length.value() > 1 &&
            page_entry(chunk, i + length - PageCount(1)).kind() != PageKind::Allocated)
          return cached ? "a cached block's last page is not tagged Allocated"
                        : "a large block's last page is not tagged Allocated";
        if (cached) {
          tally.cached_runs += 1;
          tally.cached_pages += length.value();
        } else {
          tally.large_blocks += 1;
          tally.large_bytes += length.bytes();
        }
        tally.active_pages += length.value();
        break;
      }
      case PageKind::Slab: {
        if (const char* problem = check_slab(chunk, i, is_current, tally, num_classes))
          return problem;
        const auto* slab = static_cast<const Slab*>(e.slab_descriptor());
        length = PageCount(kAllSizeClasses[slab->size_class].slab_pages);
        break;
      }
      case PageKind::Header: return "a header page lies after the chunk's first run";
      case PageKind::Allocated:
        return "a run starts with an Allocated tag (neither slab nor large)";
      default: return "a page entry of a chunk was never written";
    }
    i = i + length;
  }
  return nullptr;
}

// The address map's granules of extent e: its first and last name its record, the others
// nothing.
template <class HugeExtent>
const char* check_published(const HugeExtent* e, const AddressMap& map) {
  const std::uintptr_t mine = AddressMap::tag(e, AddressMap::kHuge);
  if (map.get(e->base) != mine) return "a huge extent's first granule does not name it";
  if (map.get(e->base + e->reserved - kChunkSize) != mine)
    return "a huge extent's last granule does not name it";
  for (std::size_t at = kChunkSize; at + kChunkSize < e->reserved; at += kChunkSize)
    if (map.get(e->base + at) != 0) return "an interior granule of a huge extent is tagged";
  return nullptr;
}

template <class HugeExtent, class HugeManager>
const char* check_extent_shape(const HugeExtent* e, const HugeManager* owner,
                               const AddressMap& map) {
  if (e->owner != owner) return "a huge extent is listed by a manager that does not own it";
  if (!is_chunk_aligned(e->base) || e->reserved == 0 || e->reserved % kChunkSize != 0)
    return "a huge extent is not whole aligned chunks";
  return check_published(e, map);
}

}  // namespace invariants

template <class Config>
const char* Allocator<Config>::Arena::check_blocks() {
  LockGuard guard(lock_);
  auto is_current = [this](const Slab* s) { return bins_[s->size_class].current == s; };
  invariants::PageMapTally tally;
  const std::uintptr_t my_tag = AddressMap::tag(this, AddressMap::kArenaChunk);
  for (std::byte* chunk : pal_.chunks()) {
    if (address_map().get(chunk) != my_tag) return "an arena's chunk is not tagged with it";
    if (const char* problem = invariants::check_chunk(chunk, is_current, tally, kNumClasses))
      return problem;
  }
  if (pal_.chunks().size() != runs_.chunks())
    return "the arena's chunk list disagrees with its run manager";

  std::size_t listed = 0, stashed = 0, stashed_bytes = 0;
  // What the stashes handed out without lock_, read with each stash's count under its lock
  // (a class's regions move between its stash and the caches meanwhile, never elsewhere).
  std::int64_t handed_out_blocks = 0, handed_out_bytes = 0;
  for (unsigned c = 0; c < kNumClasses; ++c) {
    const SlabBin& bin = bins_[c];
    if (const Slab* s = bin.current) {
      if (s->size_class != c || s->listed)
        return "a bin's current slab is of another class or listed";
      if (address_map().get(chunk_base_of(s->base)) != my_tag)
        return "a bin's current slab is in another arena's chunk";
    }
    for (const Slab* s = bin.partial.front(); s != nullptr; s = s->next) {
      if (++listed > tally.slabs) return "a bin's list holds slabs the page maps do not (a cycle?)";
      if (!s->listed || s->size_class != c || s == bin.current || s->free_count == 0)
        return "a slab on a bin's list is unmarked, of another class, current or full";
      if (address_map().get(chunk_base_of(s->base)) != my_tag)
        return "a slab on a bin's list is in another arena's chunk";
    }
    for (unsigned set = 0; set < kMaxStashSets; ++set) {
      Stash& stash = stashes_[set][c];
      if (set >= stash_sets()) {  // no thread picks it: empty, and read without writing
        if (stash.count() != 0 || stash.handed_out != 0) return "an unused stash set holds regions";
        continue;
      }
      LockGuard stash_guard(stash.lock);
      if (stash.count() > stash_capacity(c)) return "a bin's stash holds more than its capacity";
      if (stash.untaken > stash.count()) return "a stash counts more regions untaken than it holds";
      const SizeClass& sc = kSizeClasses[c];
      for (unsigned k = 0; k < stash.count(); ++k) {
        const auto* p = static_cast<const std::byte*>(stash_of(set, c)[k]);
        std::byte* chunk = chunk_base_of(p);
        if (address_map().get(chunk) != my_tag)
          return "a stashed region is not in the arena's chunks";
        const PageEntry e = page_entry(chunk, page_index_of(p));
        if (e.kind() != PageKind::Slab || e.size_class() != c)
          return "a stashed region is not in a slab of its bin's class";
        const auto* slab = static_cast<const Slab*>(e.slab_descriptor());
        const std::size_t offset = std::size_t(p - slab->base);
        const std::uint32_t index = region_index(sc, offset);
        if (std::size_t(index) * sc.size != offset || index >= sc.regions)
          return "a stashed region is not the start of a region";
        if (slab->is_free(index)) return "a stashed region is also free in its slab's bitmap";
      }
      stashed += stash.count();
      stashed_bytes += std::size_t(stash.count()) * sc.size;
      handed_out_blocks += stash.handed_out;
      handed_out_bytes += stash.handed_out * std::int64_t(sc.size);
    }
  }
  const auto blocks = std::size_t(std::int64_t(blocks_) + handed_out_blocks);
  const auto allocated = std::size_t(std::int64_t(allocated_) + handed_out_bytes);
  if (listed != tally.listed_slabs)
    return "the slabs marked listed are not those on the bins' lists";
  if (tally.regions_in_use + tally.large_blocks != blocks + stashed)
    return "regions in use and large blocks are not the blocks handed out plus those stashed";
  if (tally.region_bytes + tally.large_bytes != allocated + stashed_bytes)
    return "bytes in use are not the bytes handed out plus those stashed";
  if (tally.cached_runs != large_cache_.size() + medium_stash_.blocks() ||
      tally.cached_pages != large_cache_.total_pages() + medium_stash_.total_pages())
    return "the page maps' cached blocks are not the large-run cache's and the medium stash's";
  const char* stash_problem = nullptr;
  medium_stash_.for_each([&](void* block, unsigned c) {
    const PageEntry e = page_entry(chunk_base_of(block), page_index_of(block));
    if (e.kind() != PageKind::Cached || e.pages().value() != MediumClasses::kPages[c])
      stash_problem = "a block of the medium stash is not tagged Cached with its class's length";
  });
  if (stash_problem != nullptr) return stash_problem;
  for (std::size_t i = 0; i < large_cache_.size(); ++i) {
    const LargeRunCache::Entry& cached = large_cache_[i];
    const PageEntry e = page_entry(chunk_base_of(cached.base), page_index_of(cached.base));
    if (e.kind() != PageKind::Cached || e.pages().value() != cached.pages)
      return "a run of the large-run cache is not tagged Cached with its length";
  }
  if (tally.active_pages != active_pages_)
    return "slab, large and cached pages are not the active pages";
  if (tally.slab_pages != slab_pages_) return "the slabs' pages are not the slab pages counted";
  if (tally.free_pages != runs_.free_pages().value())
    return "the page maps' free runs are not the run manager's free pages";
  if (tally.dirty_pages != runs_.dirty_pages().value())
    return "the page maps' dirty runs are not the run manager's dirty pages";
  return nullptr;
}

template <class Config>
const char* Allocator<Config>::HugeManager::check_invariants() {
  LockGuard guard(lock_);
  std::size_t live_bytes = 0, live_blocks = 0, live_reserved = 0;
  for (const HugeExtent* e = live_.front(); e != nullptr; e = e->next) {
    if (const char* problem = invariants::check_extent_shape(e, this, address_map()))
      return problem;
    if (!e->in_use) return "a free huge extent is on the live list";
    if (e->usable == 0 || e->usable % kPageSize != 0 || e->usable > e->reserved)
      return "a live huge extent's usable size is not whole pages within its extent";
    live_bytes += e->usable;
    live_blocks += 1;
    live_reserved += e->reserved;
  }
  std::size_t free_reserved = 0;
  std::uint64_t last_freed_at = 0;
  for (const HugeExtent* e = free_.front(); e != nullptr; e = e->next) {
    if (const char* problem = invariants::check_extent_shape(e, this, address_map()))
      return problem;
    if (e->in_use || e->usable != 0) return "a live huge extent is on the free list";
    if (e->freed_at_ms < last_freed_at) return "the free huge extents are not ordered by age";
    last_freed_at = e->freed_at_ms;
    if (free_neighbour_after(e) != nullptr)
      return "two free huge extents side by side (not coalesced)";
    free_reserved += e->reserved;
  }
  if (live_bytes != allocated_ || live_blocks != blocks_)
    return "the live huge extents are not the allocated bytes and blocks";
  if (free_reserved != cached_) return "the free huge extents are not the cached bytes";
  if (live_reserved + free_reserved != mapped_) return "the huge extents are not the mapped bytes";
  return nullptr;
}

template <class Config>
const char* Allocator<Config>::Heap::check_invariants() {
  ensure_initialized();
  const char* problem = nullptr;
  auto check_arena = [&problem](Arena& a) {
    if (problem == nullptr) problem = a.check_invariants();
    if (problem == nullptr) problem = a.check_blocks();
  };
  const unsigned automatic = automatic_.count();
  automatic_.for_each([&](Arena& a) {
    if (problem == nullptr && a.index() >= automatic)
      problem = "an automatic arena has an explicit arena's index";
    check_arena(a);
  });
  if (problem != nullptr) return problem;
  if (huge().arena() != kNoArena) return "the automatic huge manager names an explicit arena";
  if (const char* problem_of_huge = huge().check_invariants()) return problem_of_huge;
  explicit_.for_each([&](ExplicitArena& e) {
    if (problem != nullptr) return;
    if (e.blocks.index() < automatic || e.huge.arena() != e.blocks.index()) {
      problem = "an explicit arena's index is an automatic one's, or its huge manager's differs";
      return;
    }
    check_arena(e.blocks);
    if (problem == nullptr) problem = e.huge.check_invariants();
    if (problem != nullptr || e.live.load(std::memory_order_acquire)) return;
    const ArenaStats s = e.blocks.stats();
    const HugeStats h = e.huge.stats();
    if (s.blocks != 0 || h.blocks != 0) problem = "a destroyed explicit arena holds blocks";
    else if (s.chunks != 0 || h.mapped != 0) problem = "a destroyed explicit arena maps pages";
  });
  return problem;
}

}  // namespace pagemalloc
