// The arena's upkeep: the decay tick, purging, reset (every block freed at once), lending
// chunks, statistics and the invariant checks. Part of the arena's definitions (arena_impl.h).
#pragma once

#include "arena/arena.h"

#include <algorithm>
#include <cstring>

#include "arena/arena_detail.h"
#include "os/clock.h"
#include "os/populate.h"
#include "process/decay.h"
#include "support/diagnostics.h"
#include "support/options.h"

namespace pagemalloc {

// Requires: lock_ held.
template <class Config>
void Allocator<Config>::Arena::tick() {
  const long decay = options().decay_ms.load(std::memory_order_relaxed);
  if (decay < 0) return;
  const std::uint64_t now = now_ms();
  runs_.advance_clock(now);
  if (decay == 0 || now - last_purge_ms_ >= purge_interval_ms(decay)) {
    flush_large_cache();  // to decay as free runs do
    purged_pages_ += runs_.purge(std::uint64_t(decay)).value();
    last_purge_ms_ = now;
  }
}

template <class Config>
void Allocator<Config>::Arena::advance_decay(bool wait) {
  if (wait) lock_.lock();
  else if (!lock_.try_lock()) return;
  tick();
  unlock();
}

template <class Config>
void Allocator<Config>::Arena::reset() {
  LockGuard guard(lock_);
  for (unsigned c = 0; c < kNumClasses; ++c)  // every block is freed below
    remote_rings_[c].drain_alone(ring_slots(c), [](void*) {});
  for (RemoteFrees& inbox : remote_) inbox.take_chain();
  for (unsigned c = 0; c < kNumClasses; ++c)
    taken_chain(c).store(nullptr, std::memory_order_relaxed);
  deferred_large_.take_all([](void* p) { *static_cast<std::uintptr_t*>(p) = 0; });
  large_cache_.clear();  // the walk below frees its runs
  medium_stash_.clear();
  for (SlabBin& bin : bins_) {
    bin.current = nullptr;
    bin.partial = {};
  }
  for (StashSet& set : used_stash_sets()) {
    for (Stash& stash : set) {
      LockGuard stash_guard(stash.lock);
      stash.set_count(0);
      stash.handed_out = 0;
    }
  }
  for (std::byte* chunk : pal_.chunks()) free_every_block(chunk);
  allocated_ = 0;
  blocks_ = 0;
  active_pages_ = 0;
  slab_pages_ = 0;
  tick();
}

// Requires: lock_ held. Frees every slab and large block of the chunk, walking its page map
// from run to run: the first entry of each run tells its kind and length. Freeing a run
// rewrites the boundary tags of the free run it merges into, which may end on the first
// page of a free run just after it; so that run's length is read before the free, and the
// walk steps over both. No decay tick here: it could release the chunk being walked.
template <class Config>
void Allocator<Config>::Arena::free_every_block(std::byte* chunk) {
  const PageIndex end(kPagesPerChunk);
  PageIndex i(0);
  while (i < end) {
    const PageEntry e = page_entry(chunk, i);
    PageCount length(1);
    Slab* slab = nullptr;
    if (e.kind() == PageKind::Slab) {
      slab = static_cast<Slab*>(e.slab_descriptor());
      length = PageCount(kSizeClasses[slab->size_class].slab_pages);
    } else if (e.kind() == PageKind::Large || e.kind() == PageKind::Free ||
               e.kind() == PageKind::Cached || e.kind() == PageKind::ThreadCached) {
      length = std::max(e.pages(), PageCount(1));
    }
    const bool block = slab != nullptr || e.kind() == PageKind::Large ||
                       e.kind() == PageKind::Cached || e.kind() == PageKind::ThreadCached;
    if (!block) {  // a free run or a header page
      i = i + length;
      continue;
    }
    const PageIndex after = i + length;
    PageCount free_after(0);
    if (after < end && page_entry(chunk, after).is_free())
      free_after = page_entry(chunk, after).pages();
    if (slab != nullptr) {
      mark_slab_pages_free(slab);
      slab_pool_.release(slab);
    } else {
      page_entry(chunk, i) = PageEntry::free(length, true);  // a later free: double free
    }
    runs_.free(Run{chunk, i, length});
    i = after + free_after;
  }
}

template <class Config>
std::size_t Allocator<Config>::Arena::purge_oldest(std::size_t bytes) {
  LockGuard guard(lock_);
  const PageCount purged = runs_.purge_oldest(PageCount::covering(bytes));
  purged_pages_ += purged.value();
  return purged.bytes();
}

template <class Config>
std::size_t Allocator<Config>::Arena::purge_excess(std::size_t bytes) {
  if (!lock_.try_lock()) return 0;  // busy: the other neighbours are asked
  std::size_t purged = 0;
  const std::size_t excess = resident_excess_pages() * kPageSize;
  if (excess != 0 && now_ms() - full_ms_ >= kIdleMs) {
    purged = runs_.purge_oldest(PageCount::covering(std::min(bytes, excess))).bytes();
    purged_pages_ += purged / kPageSize;
  }
  unlock();
  return purged;
}

template <class Config>
void* Allocator<Config>::Arena::lend_large(std::size_t bytes, std::size_t align, bool& zeroed) {
  if (!lock_.try_lock()) return nullptr;
  void* block = nullptr;
  if (resident_excess_pages() >= PageCount::covering(bytes).value()) {
    block = alloc_large_locked(bytes, align, zeroed);
    growth();  // from pages kept resident: no growth to balance, or too little to matter
  }
  unlock();
  return block;
}

template <class Config>
std::size_t Allocator<Config>::Arena::purge_all() {
  LockGuard guard(lock_);
  free_deferred_large();
  collect_all_remote();
  unstash_all();
  // An empty current slab too: with nothing live, nothing stays.
  for (SlabBin& bin : bins_) {
    if (bin.current != nullptr && bin.current->empty()) {
      Slab* slab = bin.current;
      bin.current = nullptr;
      release_slab(slab);
    }
  }
  flush_large_cache();
  runs_.advance_clock(now_ms());
  const std::uint64_t purged = runs_.purge(0).value();
  purged_pages_ += purged;
  return std::size_t(purged) * kPageSize;
}

template <class Config>
ArenaStats Allocator<Config>::Arena::stats() {
  LockGuard guard(lock_);
  free_deferred_large();
  collect_all_remote();
  const HandedOut handed_out = stash_handed_out();
  // The large-run cache's pages count as free and dirty, as they would be without it.
  const std::size_t cached = large_cache_.total_pages() + medium_stash_.total_pages();
  return ArenaStats{std::size_t(std::int64_t(allocated_) + handed_out.bytes),
                    std::size_t(std::int64_t(blocks_) + handed_out.blocks),
                    active_pages_ - cached,
                    runs_.chunks(),
                    runs_.dirty_pages().value() + cached,
                    runs_.free_pages().value() + cached,
                    purged_pages_,
                    slab_pool_.mapped_bytes() + runs_.record_bytes()};
}

template <class Config>
void Allocator<Config>::Arena::validate_freed_in_tree(const void* p, PageEntry e) {
  LockGuard guard(lock_);
  if (!pal_.validated_chunks().contains(chunk_base_of(p)) || e.kind() != PageKind::Large) return;
  arena_detail::pages_in_allocated_runs_tree(runs_, p);  // nothing without the allocated runs' tree
}

template <class Config>
std::uint64_t Allocator<Config>::Arena::validated_frees() {
  LockGuard guard(lock_);
  return pal_.validated_chunks().searches();
}

template <class Config>
const char* Allocator<Config>::Arena::check_invariants() {
  LockGuard guard(lock_);
  if constexpr (Config::kValidateFree) {
    if (const char* problem = pal_.validated_chunks().check_invariants()) return problem;
    if (pal_.validated_chunks().size() != pal_.chunks().size())
      return "the chunk tree does not hold the arena's chunks";
  }
  return runs_.check_invariants();
}

}  // namespace pagemalloc
