// The heap's initialization and allocation: the arena (or huge manager) a request goes to,
// by placement. Part of the heap's definitions (heap_impl.h).
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
#include "profile/heap_profiler.h"
#include "support/diagnostics.h"
#include "support/options.h"
#include "threads/thread_cache.h"

namespace pagemalloc {

template <class Config>
void Allocator<Config>::Heap::initialize() {
  // A call made by the initialization itself (pthread_atfork may allocate) goes ahead on
  // the defaults; any other thread of this process waits for the first one to finish.
  static constinit thread_local bool t_initializing = false;
  if (t_initializing) return;
  const int process = ::getpid();
  int state = init_state_.load(std::memory_order_acquire);
  for (;;) {
    if (state == kInitialized) return;
    if (state == process) {  // another thread of this process initializes
      sched_yield();
      state = init_state_.load(std::memory_order_acquire);
      continue;
    }
    // Uninitialized, or another process's initialization that a fork cut short: this child
    // has no thread to finish it, so it starts over. That is safe because the fork came
    // before the heap's fork handlers were installed (after, the child's handler marks the
    // heap initialized, unless glibc skipped it for this fork: docs/architecture.md), and
    // nothing before them takes a lock or hands out a block: the parts constructed so far
    // are constructed again, and PAGEMALLOC_CONF read again.
    if (init_state_.compare_exchange_weak(state, process, std::memory_order_acq_rel)) break;
  }
  if (state != kUninitialized) g_conf_loaded.store(false, std::memory_order_relaxed);
  t_initializing = true;
  huge_.construct(kNoArena, typename HugeManager::Neighbours{&purge_automatic_arenas, this});
  automatic_.start(&huge());  // one arena until configure(): allocations made meanwhile use it
  load_conf_from_environment();
  const long wanted = options().deterministic.load() ? 1 : options().narenas.load();
  automatic_.configure(wanted > 0 ? unsigned(wanted) : AutomaticArenas::default_count());
  const unsigned cpus = AutomaticArenas::cpus();
  set_stash_sets(stash_sets_for(cpus, automatic_.count()), cpus > AutomaticArenas::affinity_cpus());
  Fork::install_handlers();
  t_initializing = false;
  init_state_.store(kInitialized, std::memory_order_release);
  Decay::start_background_thread_if_asked();
}

// 0, EINVAL (no arena has the index) or ENOMEM (no memory for an automatic arena's record).
template <class Config>
int Allocator<Config>::Heap::find_source(unsigned index, Source& out) {
  if (index < automatic_.count()) {
    Arena* a = automatic_.at(index);
    if (a == nullptr) return ENOMEM;
    out = Source{a, &huge(), false};
    return 0;
  }
  ExplicitArena* a = explicit_.find(index);
  if (a == nullptr) return EINVAL;
  out = Source{&a->blocks, &a->huge, false};
  return 0;
}

template <class Config>
void* Allocator<Config>::Heap::allocate_slow(std::size_t size, std::size_t align, bool zero) {
  ensure_initialized();
  return allocate_from(Source{&automatic_.for_thread(), &huge(), true}, size, align, zero);
}

template <class Config>
void* Allocator<Config>::Heap::allocate_in(unsigned arena, std::size_t size, std::size_t align,
                                           bool zero) {
  ExplicitArena* e = explicit_.find(arena);
  // A bump arena made with prof:true is of its own kind (BumpSpace::sampled), whose blocks
  // bump_sampled serves: the unsampled kind's path makes no test for the profiler.
  if (e != nullptr && e->bump.bumps_unsampled()) [[likely]] {
    if (void* p = e->bump.allocate(size, align)) [[likely]] {
      if (zero) std::memset(p, 0, bump_usable(size));
      return p;
    }
  } else if (e != nullptr && e->bump.enabled()) {
    if (void* p = bump_sampled(e->bump, size, align, zero)) return p;
  }
  // (A bump arena's own slabs and runs serve what it does not bump.)
  if (e != nullptr && e->bump.enabled() && !e->ordinary_used.load(std::memory_order_relaxed))
    e->ordinary_used.store(true, std::memory_order_relaxed);
  ensure_initialized();
  Source source{};
  if (const int error = find_source(arena, source)) {
    errno = error;
    return nullptr;
  }
  return allocate_from(source, size, align, zero);
}

template <class Config>
void* Allocator<Config>::Heap::allocate_from(const Source& source, std::size_t size,
                                             std::size_t align, bool zero, std::size_t will_write) {
  if (size == 0) size = 1;  // the smallest block of its kind, as place() counts it
  const Placement where = place(size, align);
  if (HeapProfiler::enabled()) [[unlikely]] {
    if (void* p = allocate_profiled(source, where, size, align, zero); p != kNotProfiled) return p;
  }
  void* p = nullptr;
  bool zeroed = false;
  switch (where.kind) {
    case BlockKind::Small:
      p = source.through_cache ? allocate_small(where.size_class)
                               : source.blocks->alloc_small(where.size_class);
      break;
    case BlockKind::Large:
      if (source.through_cache && align <= kPageSize) {
        p = pop_medium(*source.blocks, where.usable);
        if (p != nullptr) break;
      }
      // A block from the thread's own arena may come from a neighbour's freed pages; one from
      // an arena the caller named must come from that arena.
      p = source.blocks->alloc_large(where.usable, align, zeroed, source.through_cache);
      break;
    case BlockKind::Huge: p = source.huge->alloc(size, align, zeroed); break;
    case BlockKind::Invalid: break;
  }
  if (p == nullptr) return heap_detail::out_of_memory();
  if (zero && !zeroed) clear_block(p, where.usable);
  if (zeroed && will_write >= kPopulateCopyBytes) populate_pages(p, will_write & ~(kPageSize - 1));
  return p;
}

template <class Config>
void* Allocator<Config>::Heap::allocate_profiled(const Source& source, const Placement& where,
                                                 std::size_t size, std::size_t align, bool zero) {
  if (where.kind == BlockKind::Small && source.through_cache) {
    bool sampled = false;
    Arena& mine = *source.blocks;
    ThreadCache* cache = ThreadCache::get(mine);
    // (A design without thread caches counts down the thread's bytes.)
    if (cache == nullptr) sampled = take_profiled(where.usable);
    void* p = sampled            ? nullptr
              : cache != nullptr ? cache->pop_sampling(where.size_class, sampled)
                                 : mine.alloc_small(where.size_class);
    if (sampled) return allocate_sampled(source, where, size, align, zero);
    if (p == nullptr) return heap_detail::out_of_memory();
    if (zero) clear_block(p, where.usable);
    return p;
  }
  if (where.kind != BlockKind::Invalid && take_profiled(where.usable))
    return allocate_sampled(source, where, size, align, zero);
  return kNotProfiled;
}

template <class Config>
bool Allocator<Config>::Heap::take_profiled(std::size_t usable) {
  ThreadCache::follow_profiling(HeapProfiler::follow_active());
  return HeapProfiler::take_sample(usable);
}

template <class Config>
void* Allocator<Config>::Heap::bump_sampled(BumpSpace& space, std::size_t size, std::size_t align,
                                            bool zero) {
  void* p = space.allocate(size, align);
  if (p == nullptr) return nullptr;
  const std::size_t usable = bump_usable(size);
  if (zero) std::memset(p, 0, usable);
  ThreadCache::follow_profiling(HeapProfiler::follow_active());
  if (HeapProfiler::take_sample(usable)) HeapProfiler::record(p, usable);
  return p;
}

template <class Config>
void* Allocator<Config>::Heap::allocate_sampled(const Source& source, const Placement& where,
                                                std::size_t size, std::size_t align, bool zero) {
  // A small block is a run of its own pages: its free never takes the fast path, which pushes
  // small blocks on the thread cache without a look at the profiler.
  bool zeroed = false;
  void* p = where.kind == BlockKind::Huge
                ? source.huge->alloc(size, align, zeroed)
                : source.blocks->alloc_large(PageCount::covering(where.usable).value() * kPageSize,
                                             align, zeroed, source.through_cache);
  if (p == nullptr) return heap_detail::out_of_memory();
  if (zero && !zeroed) clear_block(p, where.usable);
  HeapProfiler::record(p, where.usable);
  return p;
}

template <class Config>
void* Allocator<Config>::Heap::pop_medium(Arena& mine, std::size_t usable) {
  if constexpr (!MediumClasses::kEnabled) return nullptr;
  const unsigned medium_class = MediumClasses::class_of_length(PageCount::covering(usable).value());
  if (medium_class == MediumClasses::kNone) return nullptr;
  ThreadCache* cache = ThreadCache::get(mine);
  if (cache == nullptr || cache->arena() != &mine) return nullptr;
  return cache->pop_medium(medium_class);
}

template <class Config>
void* Allocator<Config>::Heap::allocate_small(unsigned size_class) {
  Arena& mine = automatic_.for_thread();
  if (ThreadCache* cache = ThreadCache::get(mine)) [[likely]]
    return cache->pop(size_class);
  return mine.alloc_small(size_class);
}

}  // namespace pagemalloc
