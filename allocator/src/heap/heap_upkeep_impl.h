// The heap's upkeep: creating explicit arenas, purging and advancing the decay of every
// arena, and the statistics. Part of the heap's definitions (heap_impl.h).
#pragma once

#include "heap/heap.h"

#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "chunks/address_map.h"
#include "heap/heap_detail.h"
#include "os/clear_block.h"
#include "os/populate.h"
#include "pagemalloc/pagemalloc.h"
#include "process/decay.h"
#include "process/fork.h"
#include "support/diagnostics.h"
#include "support/options.h"
#include "threads/thread_cache.h"

namespace pagemalloc {

template <class Config>
unsigned Allocator<Config>::Heap::create_arena(unsigned flags) {
  ensure_initialized();
  return explicit_.create(automatic_.count(), flags);
}

template <class Config>
std::size_t Allocator<Config>::Heap::purge() {
  ensure_initialized();
  if (ThreadCache* cache = ThreadCache::current()) cache->flush_all();
  std::size_t purged = 0;
  automatic_.for_each([&](Arena& a) { purged += a.purge_all(); });
  purged += huge().purge_all();
  explicit_.for_each(
      [&](ExplicitArena& a) { purged += a.blocks.purge_all() + a.huge.purge_all(); });
  return purged;
}

template <class Config>
void Allocator<Config>::Heap::advance_decay(bool wait) {
  ensure_initialized();
  automatic_.for_each([&](Arena& a) { a.advance_decay(wait); });
  huge().advance_decay(wait);
  if (!wait) return;
  explicit_.for_each([](ExplicitArena& a) {
    a.blocks.advance_decay(true);
    a.huge.advance_decay(true);
  });
}

template <class Config>
void Allocator<Config>::Heap::stats(pm_stats& out) {
  ensure_initialized();
  ArenaStats a{};
  HugeStats h{};
  auto add_arena = [&](Arena& arena) { a += arena.stats(); };
  auto add_huge = [&](HugeManager& huge) { h += huge.stats(); };
  automatic_.for_each(add_arena);
  add_huge(huge());
  const std::size_t cached = ThreadCache::bytes_cached_by_all();
  a.allocated = a.allocated > cached ? a.allocated - cached : 0;
  std::size_t records = automatic_.record_bytes();
  BumpStats bumped{};
  explicit_.for_each([&](ExplicitArena& e) {
    add_arena(e.blocks);
    add_huge(e.huge);
    records += ExplicitArenas::record_bytes();
    const BumpStats b = e.bump.stats();
    bumped.bytes += b.bytes;
    bumped.regions += b.regions;
    bumped.chunks += b.chunks;
  });
  out.allocated = a.allocated + h.allocated + bumped.bytes;
  out.active = a.active_pages * kPageSize + h.allocated + bumped.regions * kBumpRegionSize;
  out.mapped = a.chunks * kChunkSize + h.mapped + a.metadata + h.metadata + records +
               bumped.chunks * (kChunkSize + kBumpSizeMapBytes);
  out.dirty = a.dirty_pages * kPageSize + h.cached;
  out.retained = (a.free_pages - a.dirty_pages) * kPageSize;
  const typename ThreadCache::Moves fast = ThreadCache::moves_by_all();
  out.copied = copied_.load(std::memory_order_relaxed) + fast.copied;
  out.grown_in_place = grown_in_place_.load(std::memory_order_relaxed);
  out.moved = moved_by_copy_.load(std::memory_order_relaxed) + h.moved + fast.moved;
  out.purged = a.purged_pages * kPageSize + h.purged;
  out.populated = g_populated_bytes.load(std::memory_order_relaxed);
}

template <class Config>
RunCounterValues Allocator<Config>::Heap::run_counters() {
  ensure_initialized();
  RunCounterValues sum{};
  automatic_.for_each([&](Arena& a) { sum += a.run_counters(); });
  explicit_.for_each([&](ExplicitArena& e) { sum += e.blocks.run_counters(); });
  return sum;
}

}  // namespace pagemalloc
