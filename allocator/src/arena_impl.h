// Arena: slabs and large runs over the selected run manager.
#pragma once

#include "arena.h"

#include <algorithm>
#include <cstring>

#include "clock.h"
#include "config.h"
#include "decay.h"
#include "diagnostics.h"
#include "populate.h"

namespace pagemalloc {

namespace arena_detail {

// The allocated runs' tree's search for the run at p (AllocatedRunsTree::pages_of). Only a
// design with the tree (Config::kAllocatedRunsTree) calls it; with any other run
// manager it compiles to nothing.
template <class Runs>
PageCount pages_in_allocated_runs_tree(Runs& runs, const void* p) {
  if constexpr (requires { runs.pages_of(p); }) return runs.pages_of(p);
  else return PageCount(0);
}

}  // namespace arena_detail

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
  Bin& bin = bins_[size_class];
  // The stashes, this CPU's first (a design without them has them empty).
  const unsigned here = Config::kTransferStash ? stash_set_here() : 0;
  for (unsigned k = 0; Config::kTransferStash && k < kStashSets && taken < n; ++k) {
    const unsigned set = (here + k) % kStashSets;
    Stash& stash = stashes_[set][size_class];
    if (stash.count() == 0) continue;
    LockGuard stash_guard(stash.lock);
    const unsigned from_stash = n - taken < stash.count() ? n - taken : stash.count();
    take_from_stash(set, size_class, out + taken, from_stash);
    taken += from_stash;
  }
  const unsigned from_slabs = taken;
  while (taken < n) {
    Slab* slab = bin.current;
    if (slab == nullptr || slab->free_count == 0) {
      slab = next_slab(bin, size_class);
      if (slab == nullptr) break;
    }
    taken += slab->take_many(out + taken, n - taken);
  }
  // A slab gives its regions lowest address first, and a cache pops from the top of its
  // stack: reversed, a run of allocations gets consecutive regions at ascending addresses.
  // What a program allocates together then lies together in the order it was made, which the
  // hardware's prefetchers follow (python 9-10 % faster, docs/measurements.md).
  std::reverse(out + from_slabs, out + taken);
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
bool Allocator<Config>::Arena::take_stashed(unsigned size_class, void** out, unsigned n) {
  if (!Config::kTransferStash || remote_waiting(size_class) || deferred_large_.maybe_nonempty())
    return false;
  const unsigned here = stash_set_here();
  for (unsigned k = 0; k < kStashSets; ++k) {  // this CPU's stash first
    const unsigned set = (here + k) % kStashSets;
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
  for (auto& set : stashes_) {
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
  for (unsigned i = 0; i < n; ++i) {
    void* p = regions[i];
    PageEntry e = page_entry(chunk_base_of(p), page_index_of(p));
    give_back(static_cast<Slab*>(e.slab_descriptor()), p, call);
  }
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
  for (unsigned set = 0; set < kStashSets; ++set) {
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
  for (unsigned set = 0; set < kStashSets; ++set) {
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
  const SizeClass& sc = kSizeClasses[slab->size_class];
  const std::size_t offset = std::size_t(static_cast<std::byte*>(p) - slab->base);
  const std::uint32_t index = region_index(sc, offset);
  if (std::size_t(index) * sc.size != offset || index >= sc.regions) [[unlikely]] {
    lock_.unlock();
    report_misuse(call, p, "not the start of a block");
  }
  if (slab->is_free(index)) [[unlikely]] {
    lock_.unlock();
    report_misuse(call, p, "double free");
  }
  slab->give_back(index);
  allocated_ -= sc.size;
  --blocks_;
  Bin& bin = bins_[slab->size_class];
  if (slab == bin.current) {
    // In a 2008 design (Config::kReleaseCurrentSlab) even the slab being allocated from
    // goes back to the run manager when it empties; today's keeps it for the next refill.
    if (Config::kReleaseCurrentSlab && slab->empty()) {
      bin.current = nullptr;
      release_slab(slab);
    }
    return;
  }
  if (slab->empty()) {
    if (slab->listed) bin.partial.remove(slab);
    release_slab(slab);
  } else if (!slab->listed) {
    bin.partial.push_front(slab);
    slab->listed = true;
  }
}

// Requires: lock_ held; bin.current is null or full.
template <class Config>
Slab* Allocator<Config>::Arena::next_slab(Bin& bin, unsigned size_class) {
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
  bin.current = slab;
  return slab;
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

template <class Config>
void* Allocator<Config>::Arena::alloc_large(std::size_t bytes, std::size_t align, bool& zeroed,
                                            bool may_borrow) {
  std::size_t grown = 0;
  void* block = nullptr;
  const std::size_t needed = PageCount::covering(bytes).value();
  bool ask_neighbours = false;
  {
    Locked guard(*this);
    if constexpr (Config::kLargeRunCache) {
      if (align <= kPageSize) {
        if (void* cached = take_cached(PageCount(needed))) {
          zeroed = false;
          return cached;  // pages already active: no growth
        }
      }
    }
    update_resident();
    // Freed pages kept resident here: the block is cut from them (if they are not too cut up).
    ask_neighbours = may_borrow && neighbours_.lend != nullptr && align <= kPageSize &&
                     resident_pages_ < active_pages_ + needed;
    if (!ask_neighbours) {
      block = alloc_large_locked(bytes, align, zeroed);
      grown = growth();
    }
  }
  if (ask_neighbours) {
    block = neighbours_.lend(neighbours_.context, *this, bytes, align, zeroed);
    if (block != nullptr) return block;
    Locked guard(*this);
    block = alloc_large_locked(bytes, align, zeroed);
    grown = growth();
  }
  balance_growth(grown);
  return block;
}

template <class Config>
void* Allocator<Config>::Arena::alloc_large_locked(std::size_t bytes, std::size_t align,
                                                   bool& zeroed) {
  const PageCount pages = PageCount::covering(bytes);
  const PageCount extra(align > kPageSize ? align / kPageSize - 1 : 0);
  tick();
  const std::size_t large_pages = active_pages_ - slab_pages_ + pages.value();
  pal_.next_run_for(slab_pages_ >= large_pages ? ChunkUse::Dense : ChunkUse::MaybeSparse);
  AllocatedRun r = runs_.alloc(pages + extra);
  if (!r.run) return nullptr;
  zeroed = r.zeroed;
  const auto base = reinterpret_cast<std::uintptr_t>(r.run.base());
  const std::uintptr_t aligned = (base + align - 1) & ~(std::uintptr_t(align) - 1);
  const PageCount lead((aligned - base) >> kLgPageSize);
  const Run block{r.run.chunk, r.run.first + lead, pages};
  if (extra.value() != 0) {
    runs_.shrink_in_place(r.run, lead + pages);
    runs_.trim_head(Run{r.run.chunk, r.run.first, lead + pages}, lead);
  }
  page_entry(block.chunk, block.first) = PageEntry::large(pages);
  tag_interior(block.chunk, block.first + PageCount(1), block.end());
  allocated_ += pages.bytes();
  ++blocks_;
  active_pages_ += pages.value();
  return block.base();
}

template <class Config>
void Allocator<Config>::Arena::free_large(void* p, PageCount pages, const char* call) {
  // The block's pages are not read unless the lock is taken: a large block may be mostly
  // untouched, and reading its first word would fault a page in (on some kernels a page of
  // its own, not the shared zero page) for every block freed.
  if (!lock_.try_lock()) {
    // A deferred block's first word holds kDeferredKey: a second free of it waits for the
    // lock, which frees the deferred blocks first, and then finds the block free (a double
    // free).
    auto* first_word = static_cast<std::uintptr_t*>(p);
    if (*first_word != kDeferredKey) {
      *first_word = kDeferredKey;
      void* block = p;
      deferred_large_.push(&block, 1);
      // The holder may have released the lock before the push: then nobody frees it until
      // the next call, unless this thread can take the lock now.
      if (lock_.try_lock()) unlock();
      return;
    }
    lock_.lock();
  }
  free_deferred_large();  // first: a deferred block freed again must be found free below
  free_large_locked(p, pages, call);
  unlock();
}

// Requires: lock_ held.
template <class Config>
void Allocator<Config>::Arena::free_large_locked(void* p, PageCount pages, const char* call) {
  // The 2008 design took a large block's length from the allocated runs' tree
  // (arena_dalloc_large): a search, where the page map's entry serves today's.
  if constexpr (Config::kAllocatedRunsTree)
    pages = arena_detail::pages_in_allocated_runs_tree(runs_, p);
  Run run = Run::at(p, pages);
  PageEntry& entry = page_entry(run.chunk, run.first);
  if (entry.kind() != PageKind::Large || entry.pages() != pages) [[unlikely]] {
    lock_.unlock();
    report_misuse(call, p, "double free");
  }
  allocated_ -= pages.bytes();
  --blocks_;
  if constexpr (Config::kLargeRunCache) {
    if (LargeRunCache::fits(pages)) {    // its pages stay active until the cache gives them back
      entry = PageEntry::cached(pages);  // marks a double free
      large_cache_.put(run.base(), pages,
                       [this](const LargeRunCache::Entry& e) { give_back_cached(e); });
      return;
    }
  }
  tick();  // first: its flush of the large-run cache may coalesce with this run's neighbours
  entry = PageEntry::free(pages, true);  // marks a double free
  runs_.free(run);
  active_pages_ -= pages.value();
}

// Requires: lock_ held.
template <class Config>
void* Allocator<Config>::Arena::take_cached(PageCount pages) {
  const LargeRunCache::Entry cached = large_cache_.take(pages);
  if (cached.base == nullptr) {
    large_cache_.evict_oldest([this](const LargeRunCache::Entry& e) { give_back_cached(e); });
    return nullptr;
  }
  const Run block = Run::at(cached.base, pages);
  if (cached.pages != pages.value()) {  // the rest back to the run manager, as a free would
    runs_.shrink_in_place(Run::at(cached.base, PageCount(cached.pages)), pages);
    active_pages_ -= cached.pages - pages.value();
  }
  page_entry(block.chunk, block.first) = PageEntry::large(pages);
  allocated_ += pages.bytes();
  ++blocks_;
  return cached.base;
}

// Requires: lock_ held.
template <class Config>
void Allocator<Config>::Arena::give_back_cached(const LargeRunCache::Entry& cached) {
  const Run run = Run::at(cached.base, PageCount(cached.pages));
  page_entry(run.chunk, run.first) = PageEntry::free(run.pages, true);
  runs_.free(run);
  active_pages_ -= cached.pages;
}

// Requires: lock_ held.
template <class Config>
bool Allocator<Config>::Arena::flush_large_cache() {
  if (large_cache_.empty()) return false;
  large_cache_.flush([this](const LargeRunCache::Entry& e) { give_back_cached(e); });
  return true;
}

template <class Config>
void Allocator<Config>::Arena::free_deferred_large() {
  deferred_large_.take_all([this](void* p) {
    *static_cast<std::uintptr_t*>(p) = 0;
    const PageEntry e = page_entry(chunk_base_of(p), page_index_of(p));
    free_large_locked(p, e.pages(), "free");
  });
}

template <class Config>
PageCount Allocator<Config>::Arena::large_pages_in_tree(const void* p) {
  LockGuard guard(lock_);
  return arena_detail::pages_in_allocated_runs_tree(runs_, p);
}

template <class Config>
bool Allocator<Config>::Arena::resize_large(void* p, PageCount pages, PageCount want) {
  Locked guard(*this);
  Run run = Run::at(p, pages);
  tick();
  if (want > pages) {
    // A cached run just after the block is given back first: it may be the room to grow into.
    if (!runs_.grow_in_place(run, want) &&
        !(Config::kLargeRunCache && flush_large_cache() && runs_.grow_in_place(run, want)))
      return false;
    tag_interior(run.chunk, run.end(), run.first + want);
    allocated_ += (want - pages).bytes();
    active_pages_ += (want - pages).value();
  } else if (want < pages) {
    runs_.shrink_in_place(run, want);
    allocated_ -= (pages - want).bytes();
    active_pages_ -= (pages - want).value();
  }
  page_entry(run.chunk, run.first) = PageEntry::large(want);
  return true;
}

// With checks on, a large block's interior pages are tagged, so that freeing a pointer into
// them is reported instead of taking a stale entry for the start of a block. O(pages): checks
// mode only.
template <class Config>
void Allocator<Config>::Arena::tag_interior(std::byte* chunk, PageIndex from, PageIndex to) {
  if (!options().checks.load(std::memory_order_relaxed)) return;
  for (PageIndex i = from; i < to; i = i + PageCount(1))
    page_entry(chunk, i) = PageEntry::allocated(PageCount(0));
}

// Requires: lock_ held.
template <class Config>
void Allocator<Config>::Arena::tick() {
  const long decay = options().decay_ms.load(std::memory_order_relaxed);
  if (decay < 0) return;
  const std::uint64_t now = now_ms();
  runs_.advance_clock(now);
  if (decay == 0 || now - last_purge_ms_ >= purge_interval_ms(decay)) {
    if constexpr (Config::kLargeRunCache) flush_large_cache();  // to decay as free runs do
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
  for (Bin& bin : bins_) {
    bin.current = nullptr;
    bin.partial = {};
  }
  for (auto& set : stashes_) {
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
               e.kind() == PageKind::Cached) {
      length = std::max(e.pages(), PageCount(1));
    }
    const bool block =
        slab != nullptr || e.kind() == PageKind::Large || e.kind() == PageKind::Cached;
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
  for (Bin& bin : bins_) {
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
  const std::size_t cached = large_cache_.total_pages();
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
