// The arena's small blocks: batches handed to and taken from the thread caches, the stash of
// whole batches, remote frees, and slabs (the next one for a bin, giving regions back,
// releasing an empty slab). Part of the arena's definitions (arena_impl.h).
#pragma once

#include "arena/arena.h"

#include <cstring>

#include "arena/arena_detail.h"
#include "os/clock.h"
#include "os/populate.h"
#include "process/decay.h"
#include "support/diagnostics.h"
#include "support/options.h"

namespace pagemalloc {

template <class Config>
void* Allocator<Config>::Arena::alloc_small(unsigned size_class) {
  void* p = nullptr;
  return alloc_batch(size_class, &p, 1) == 1 ? p : nullptr;
}

template <class Config>
unsigned Allocator<Config>::Arena::alloc_batch(unsigned size_class, void** out, unsigned n) {
  if (take_stashed(size_class, out, n)) return n;
  std::size_t grown = 0;
  unsigned taken = 0;
  {
    Locked guard(*this);
    taken = alloc_batch_locked(size_class, out, n);
    grown = growth();
  }
  balance_growth(grown);
  return taken;
}

template <class Config>
unsigned Allocator<Config>::Arena::alloc_batch_locked(unsigned size_class, void** out, unsigned n) {
  unsigned taken = 0;
  if (remote_waiting(size_class)) taken = take_remote(size_class, out, n);
  SlabBin& bin = bins_[size_class];
  // The stashes, this CPU's first (a design without them has them empty).
  const unsigned here = Config::kTransferStash ? stash_set_here() : 0;
  const unsigned sets = stash_sets();
  for (unsigned k = 0; Config::kTransferStash && k < sets && taken < n; ++k) {
    const unsigned set = (here + k) % sets;
    Stash& stash = stashes_[set][size_class];
    if (stash.count() == 0) continue;
    LockGuard stash_guard(stash.lock);
    const unsigned from_stash = n - taken < stash.count() ? n - taken : stash.count();
    take_from_stash(set, size_class, out + taken, from_stash);
    taken += from_stash;
  }
  // A slab gives its regions lowest address first, and a cache pops from the top of its
  // stack: written from out[n - 1] down, a run of allocations gets consecutive regions at
  // ascending addresses. What a program allocates together then lies together in the order it
  // was made, which the hardware's prefetchers follow (python 9-10 % faster,
  // docs/measurements.md).
  const unsigned from_slabs = taken;
  while (taken < n) {
    Slab* slab = bin.current;
    if (slab == nullptr || slab->free_count == 0) {
      slab = next_slab(bin, size_class);
      if (slab == nullptr) break;
    }
    taken += slab->take_many_down(out + n - (taken - from_slabs), n - taken);
  }
  if (taken < n)  // out of memory: the regions taken moved down to follow the stashes'
    std::memmove(out + from_slabs, out + n - (taken - from_slabs),
                 (taken - from_slabs) * sizeof(void*));
  allocated_ += std::size_t(taken) * kSizeClasses[size_class].size;
  blocks_ += taken;
  return taken;
}

template <class Config>
void Allocator<Config>::Arena::free_small(Slab* slab, void* p, const char* call) {
  {
    LockGuard guard(lock_);
    give_back(slab, p, call);
  }
  if constexpr (!Config::kThreadCaches) Decay::count_uncached_free();
}

template <class Config>
void Allocator<Config>::Arena::free_batch(void* const* regions, unsigned n, const char* call) {
  if (n == 0 || stash_whole(regions, n, true)) return;
  Locked guard(*this);
  free_batch_locked(regions, n, call);
}

template <class Config>
bool Allocator<Config>::Arena::free_idle_batch(void* const* regions, unsigned n) {
  if (n == 0) return true;
  // A bin idle now is idle at a later look too: no thread waits for it.
  if (!lock_.try_lock()) return false;
  const unsigned size_class =
      page_entry(chunk_base_of(regions[0]), page_index_of(regions[0])).size_class();
  give_back_regions(regions, n, "free");
  SlabBin& bin = bins_[size_class];
  if (Slab* slab = bin.current; slab != nullptr && slab->empty()) {
    bin.current = nullptr;
    release_slab(slab);
  }
  unlock();
  return true;
}

template <class Config>
bool Allocator<Config>::Arena::take_stashed(unsigned size_class, void** out, unsigned n) {
  if (!Config::kTransferStash || remote_waiting(size_class) || deferred_large_.maybe_nonempty())
    return false;
  const unsigned here = stash_set_here();
  const unsigned sets = stash_sets();
  for (unsigned k = 0; k < sets; ++k) {  // this CPU's stash first
    const unsigned set = (here + k) % sets;
    Stash& stash = stashes_[set][size_class];
    if (stash.count() < n) continue;  // a hint: saves the lock when the stash is short
    LockGuard guard(stash.lock);
    if (stash.count() < n) continue;
    take_from_stash(set, size_class, out, n);
    stash.handed_out += n;
    return true;
  }
  return false;
}

template <class Config>
bool Allocator<Config>::Arena::stash_whole(void* const* regions, unsigned n, bool wait) {
  if (!Config::kTransferStash || deferred_large_.maybe_nonempty()) return false;
  const unsigned size_class =
      page_entry(chunk_base_of(regions[0]), page_index_of(regions[0])).size_class();
  // This CPU's stash only: a full one sends the batch to the slabs as before, so that a thread
  // that stays on one CPU parks no more regions than with one stash, and refills from the
  // slabs' address order as often.
  const unsigned set = stash_set_here();
  Stash& stash = stashes_[set][size_class];
  if (wait) stash.lock.lock();
  else if (!stash.lock.try_lock()) return false;
  const bool fits = stash.count() + n <= stash_capacity(size_class);
  if (fits) {
    put_in_stash(set, size_class, regions, n);
    stash.handed_out -= n;
  }
  stash.lock.unlock();
  return fits;
}

// Requires: lock_ held.
template <class Config>
typename Allocator<Config>::Arena::HandedOut Allocator<Config>::Arena::stash_handed_out() {
  HandedOut total;
  for (StashSet& set : used_stash_sets()) {
    for (unsigned c = 0; c < kNumClasses; ++c) {
      Stash& stash = set[c];
      LockGuard guard(stash.lock);
      total.blocks += stash.handed_out;
      total.bytes += stash.handed_out * std::int64_t(kSizeClasses[c].size);
    }
  }
  return total;
}

// Requires: lock_ held.
template <class Config>
void Allocator<Config>::Arena::free_batch_locked(void* const* regions, unsigned n,
                                                 const char* call) {
  const unsigned size_class =
      page_entry(chunk_base_of(regions[0]), page_index_of(regions[0])).size_class();
  if constexpr (Config::kTransferStash) {
    const unsigned set = stash_set_here();
    Stash& stash = stashes_[set][size_class];
    LockGuard stash_guard(stash.lock);
    if (stash.count() + n <= stash_capacity(size_class)) {  // one class per batch: a cache's bin
      put_in_stash(set, size_class, regions, n);
      allocated_ -= std::size_t(n) * kSizeClasses[size_class].size;
      blocks_ -= n;
      return;
    }
  }
  // A batch's regions come in runs of one slab (a refill takes them a slab at a time, and a
  // program frees them in much the order it made them): one page-entry look, one bin-list
  // update and one count per run, not per region.
  give_back_regions(regions, n, call);
}

template <class Config>
void Allocator<Config>::Arena::free_remote(void* const* regions, unsigned n) {
  if (n == 0) return;
  // Into the stash if its lock is free and it has room; else, the arena's lock free, it is
  // taken for the batch: a stash or a slab takes it with one copy or one bitmap each, where
  // the inbox would leave a chain for the owner to walk one cold region at a time. Held, the
  // batch goes to the inbox: a remote free never waits for a lock.
  if (stash_whole(regions, n, false)) return;
  if (lock_.try_lock()) {
    free_batch_locked(regions, n, "free");
    return unlock();
  }
  const unsigned size_class =
      page_entry(chunk_base_of(regions[0]), page_index_of(regions[0])).size_class();
  const std::size_t size = kSizeClasses[size_class].size;
  RemoteRing& ring = remote_rings_[size_class];
  const unsigned in_ring = ring.push(ring_slots(size_class), regions, n);
  std::size_t waiting = ring.count();
  if (in_ring < n) {
    if (size < RemoteFrees::kMinRegionSize) [[unlikely]]
      return free_batch(regions + in_ring, n - in_ring, "free");
    waiting += remote_[size_class].push(regions + in_ring, n - in_ring);
  }
  if (waiting * size >= kRemoteCollectBytes && lock_.try_lock()) {
    collect_remote(size_class);
    unlock();
  }
}

// Each region taken counts as freed here; alloc_batch counts those it hands out again.
template <class Config>
unsigned Allocator<Config>::Arena::take_remote(unsigned size_class, void** out, unsigned n) {
  void* chain = taken_chain(size_class).load(std::memory_order_relaxed);
  unsigned taken = remote_rings_[size_class].take(ring_slots(size_class), out, n);
  while (taken < n) {
    if (chain == nullptr && (chain = remote_[size_class].take_chain()) == nullptr) break;
    out[taken++] = chain;
    chain = RemoteFrees::next(chain);
  }
  taken_chain(size_class).store(chain, std::memory_order_relaxed);
  allocated_ -= std::size_t(taken) * kSizeClasses[size_class].size;
  blocks_ -= taken;
  return taken;
}

template <class Config>
void Allocator<Config>::Arena::take_back(unsigned size_class, void* p, bool stash_locked) {
  if constexpr (Config::kTransferStash) {
    const unsigned set = stash_set_here();
    Stash& stash = stashes_[set][size_class];
    if (!stash_locked) stash.lock.lock();
    const bool fits = stash.count() < stash_capacity(size_class);
    if (fits) {
      put_in_stash(set, size_class, &p, 1);
      allocated_ -= kSizeClasses[size_class].size;
      --blocks_;
    }
    if (!stash_locked) stash.lock.unlock();
    if (fits) return;
  }
  const PageEntry e = page_entry(chunk_base_of(p), page_index_of(p));
  give_back(static_cast<Slab*>(e.slab_descriptor()), p, "free");  // counts it
}

template <class Config>
void Allocator<Config>::Arena::collect_remote(unsigned size_class) {
  auto give = [&](void* p) { take_back(size_class, p); };
  remote_rings_[size_class].take_all(ring_slots(size_class), give);
  for (void* p = taken_chain(size_class).load(std::memory_order_relaxed); p != nullptr;) {
    void* after = RemoteFrees::next(p);
    give(p);
    p = after;
  }
  taken_chain(size_class).store(nullptr, std::memory_order_relaxed);
  remote_[size_class].take_all(give);
}

template <class Config>
void Allocator<Config>::Arena::settle_remote_in_child() {
  for (unsigned c = 0; c < kNumClasses; ++c)
    remote_rings_[c].drain_alone(ring_slots(c), [&](void* p) { take_back(c, p, true); });
}

// Requires: lock_ held.
template <class Config>
void Allocator<Config>::Arena::collect_all_remote() {
  for (unsigned c = 0; c < kNumClasses; ++c)
    if (remote_waiting(c)) collect_remote(c);
}

template <class Config>
bool Allocator<Config>::Arena::region_is_free(Slab* slab, const void* p) {
  const SizeClass& sc = kSizeClasses[slab->size_class];
  LockGuard guard(lock_);
  collect_remote(slab->size_class);  // a region waiting in the inbox is free too
  for (unsigned set = 0; set < stash_sets(); ++set) {
    Stash& stash = stashes_[set][slab->size_class];
    LockGuard stash_guard(stash.lock);
    for (unsigned i = 0; i < stash.count(); ++i)
      if (stash_of(set, slab->size_class)[i] == p) return true;
  }
  return slab->is_free(
      region_index(sc, std::size_t(static_cast<const std::byte*>(p) - slab->base)));
}

// Requires: lock_ held.
template <class Config>
void Allocator<Config>::Arena::unstash_all() {
  for (unsigned set = 0; set < stash_sets(); ++set) {
    for (unsigned size_class = 0; size_class < kNumClasses; ++size_class) {
      Stash& stash = stashes_[set][size_class];
      // A hint, read without the lock: an empty stash costs no lock (a program may trim after
      // every few frees). A region stashed after the read stays there: no page is lost.
      if (stash.count() == 0) continue;
      LockGuard stash_guard(stash.lock);  // give_back takes no stash's lock
      const unsigned n = stash.count();
      stash.set_count(0);
      for (unsigned i = 0; i < n; ++i) {
        void* p = stash_of(set, size_class)[i];
        PageEntry e = page_entry(chunk_base_of(p), page_index_of(p));
        allocated_ += kSizeClasses[e.size_class()].size;  // give_back subtracts it again
        ++blocks_;
        give_back(static_cast<Slab*>(e.slab_descriptor()), p, "pm_purge");
      }
    }
  }
}

// Requires: lock_ held.
template <class Config>
void Allocator<Config>::Arena::give_back(Slab* slab, void* p, const char* call) {
  give_back_run(slab, &p, 1, call);
}

template <class Config>
void Allocator<Config>::Arena::report_in_run(const void* p, const char* what, const char* call) {
  lock_.unlock();
  report_misuse(call, p, what);
}

// Requires: lock_ held; n >= 1, regions[0] in slab's pages.
template <class Config>
unsigned Allocator<Config>::Arena::give_back_run(Slab* slab, void* const* regions, unsigned n,
                                                 const char* call) {
  const SizeClass& sc = kSizeClasses[slab->size_class];
  const auto base = reinterpret_cast<std::uintptr_t>(slab->base);
  const std::size_t span = std::size_t(sc.regions) * sc.size;
  unsigned given = 0;
  for (; given < n; ++given) {
    // A pointer below the base wraps to an offset past the span, as one in another slab lies.
    const std::size_t offset = reinterpret_cast<std::uintptr_t>(regions[given]) - base;
    if (offset >= span && given != 0) break;  // the first is in the slab's pages: reported
    const std::uint32_t index = region_index(sc, offset);
    if (std::size_t(index) * sc.size != offset || index >= sc.regions) [[unlikely]]
      report_in_run(regions[given], "not the start of a block", call);
    if (slab->is_free(index)) [[unlikely]]  // also a region twice in the run
      report_in_run(regions[given], "double free", call);
    slab->mark_free(index);
  }
  slab->free_count = std::uint16_t(slab->free_count + given);
  allocated_ -= std::size_t(given) * sc.size;
  blocks_ -= given;
  SlabBin& bin = bins_[slab->size_class];
  if (slab == bin.current) {
    // In a 2008 design (Config::kReleaseCurrentSlab) even the slab being allocated from
    // goes back to the run manager when it empties; today's keeps it for the next refill.
    if (Config::kReleaseCurrentSlab && slab->empty()) {
      bin.current = nullptr;
      release_slab(slab);
    }
    return given;
  }
  if (slab->empty()) {
    if (slab->listed) bin.partial.remove(slab);
    release_slab(slab);
  } else if (!slab->listed) {
    bin.partial.push_front(slab);
    slab->listed = true;
  }
  return given;
}

// Requires: lock_ held; bin.current is null or full.
template <class Config>
Slab* Allocator<Config>::Arena::next_slab(SlabBin& bin, unsigned size_class) {
  if (Config::kTransferStash && fresh_slab_pages_ >= kStashLookPages) [[unlikely]] {
    give_back_untaken_stashed();
    // Regions given back to the bin's own slab (full, as it was left) make it current again.
    if (bin.current != nullptr && bin.current->free_count != 0) return bin.current;
  }
  if (Slab* s = bin.partial.front()) {
    bin.partial.remove(s);
    s->listed = false;
    bin.current = s;
    return s;
  }
  tick();
  const SizeClass& sc = kSizeClasses[size_class];
  Slab* slab = slab_pool_.acquire();
  if (slab == nullptr) return nullptr;
  pal_.next_run_for(ChunkUse::Dense);
  AllocatedRun r = runs_.alloc(PageCount(sc.slab_pages));
  if (!r.run) {
    slab_pool_.release(slab);
    return nullptr;
  }
  if (r.zeroed && sc.size <= kPageSize && slab_pages_ >= kPopulateAfterSlabPages)
    populate_pages(r.run.base(), r.run.pages.bytes());
  slab->init(r.run.base(), size_class);
  for (std::size_t i = 0; i < sc.slab_pages; ++i)
    page_entry(r.run.chunk, r.run.first + PageCount(i)) =
        PageEntry::slab(slab, size_class, unsigned(i));
  active_pages_ += sc.slab_pages;
  slab_pages_ += sc.slab_pages;
  fresh_slab_pages_ += sc.slab_pages;
  bin.current = slab;
  return slab;
}

// Requires: lock_ held.
template <class Config>
void Allocator<Config>::Arena::give_back_untaken_stashed() {
  fresh_slab_pages_ = 0;
  for (unsigned set = 0; set < stash_sets(); ++set) {
    for (unsigned c = 0; c < kNumClasses; ++c) {
      Stash& stash = stashes_[set][c];
      if (stash.count() == 0) continue;  // a hint: untaken is never above the count
      LockGuard stash_guard(stash.lock);
      const unsigned n = stash.untaken;
      void** slots = stash_of(set, c);
      allocated_ += std::size_t(n) * kSizeClasses[c].size;  // give_back_run subtracts it again
      blocks_ += n;
      give_back_regions(slots, n, "free");
      const unsigned kept = stash.count() - n;
      std::memmove(slots, slots + n, kept * sizeof(void*));
      stash.set_count(kept);
      stash.untaken = kept;
    }
  }
}

// Requires: lock_ held. A later free of any region of the slab is taken for a double free.
template <class Config>
void Allocator<Config>::Arena::mark_slab_pages_free(const Slab* slab) {
  const SizeClass& sc = kSizeClasses[slab->size_class];
  const Run run = Run::at(slab->base, PageCount(sc.slab_pages));
  for (std::size_t i = 0; i < sc.slab_pages; ++i)
    page_entry(run.chunk, run.first + PageCount(i)) = PageEntry::free(run.pages, true);
}

// Requires: lock_ held; slab is empty and on no list.
template <class Config>
void Allocator<Config>::Arena::release_slab(Slab* slab) {
  const SizeClass& sc = kSizeClasses[slab->size_class];
  Run run = Run::at(slab->base, PageCount(sc.slab_pages));
  tick();  // first, as in free_large_locked
  mark_slab_pages_free(slab);
  runs_.free(run);
  active_pages_ -= sc.slab_pages;
  slab_pages_ -= sc.slab_pages;
  slab_pool_.release(slab);
}

}  // namespace pagemalloc
