// The arena's large blocks: runs taken from and given back to the run manager, the large-run
// cache in front of it, resizing a run in place, and the tags of a block's interior pages.
// Part of the arena's definitions (arena_impl.h).
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

template <class Config>
void* Allocator<Config>::Arena::alloc_large(std::size_t bytes, std::size_t align, bool& zeroed,
                                            bool may_borrow) {
  std::size_t grown = 0;
  void* block = nullptr;
  const std::size_t needed = PageCount::covering(bytes).value();
  bool ask_neighbours = false;
  {
    Locked guard(*this);
    if constexpr (MediumClasses::kEnabled) {
      const unsigned medium_class = MediumClasses::class_of_length(needed);
      if (align <= kPageSize && medium_class != MediumClasses::kNone) {
        if (void* stashed = take_stashed_medium(medium_class)) {
          zeroed = false;
          return stashed;
        }
      }
    }
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

template <class Config>
void Allocator<Config>::Arena::free_thread_cached(void* const* blocks, unsigned n) {
  Locked guard(*this);
  free_deferred_large();
  for (unsigned i = 0; i < n; ++i) {
    std::byte* chunk = chunk_base_of(blocks[i]);
    const PageIndex first = page_index_of(blocks[i]);
    const PageEntry e = load_entry(chunk, first);
    if (e.kind() != PageKind::ThreadCached) [[unlikely]] {
      lock_.unlock();  // (report_misuse does not return)
      report_misuse("free", blocks[i], "a thread-cached block lost its tag");
    }
    // Into the medium stash if it has room (its pages stay active), else freed as any block.
    const unsigned medium_class = MediumClasses::class_of_length(e.pages().value());
    if (medium_class != MediumClasses::kNone && medium_stash_.put(medium_class, blocks[i])) {
      store_entry(chunk, first, PageEntry::cached(e.pages()));  // marks a double free
      allocated_ -= e.pages().bytes();
      --blocks_;
      continue;
    }
    store_entry(chunk, first, PageEntry::large(e.pages()));
    free_large_locked(blocks[i], e.pages(), "free");
  }
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
void* Allocator<Config>::Arena::take_stashed_medium(unsigned medium_class) {
  void* block = medium_stash_.take(medium_class);
  if (block == nullptr) return nullptr;
  const PageCount pages(MediumClasses::kPages[medium_class]);
  page_entry(chunk_base_of(block), page_index_of(block)) = PageEntry::large(pages);
  allocated_ += pages.bytes();
  ++blocks_;
  return block;
}

// Requires: lock_ held. Gives the large-run cache and the medium stash back to the run
// manager; false if both were empty.
template <class Config>
bool Allocator<Config>::Arena::flush_large_cache() {
  if (large_cache_.empty() && medium_stash_.empty()) return false;
  large_cache_.flush([this](const LargeRunCache::Entry& e) { give_back_cached(e); });
  medium_stash_.flush([this](void* block, unsigned c) {
    give_back_cached(
        LargeRunCache::Entry{static_cast<std::byte*>(block), MediumClasses::kPages[c]});
  });
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
    if (!runs_.grow_in_place(run, want) && !(flush_large_cache() && runs_.grow_in_place(run, want)))
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

}  // namespace pagemalloc
