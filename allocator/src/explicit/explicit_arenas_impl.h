// Explicit arenas: creation (of either kind), reset, destruction and statistics.
#pragma once

#include "explicit/explicit_arenas.h"

#include <sys/mman.h>

#include <cerrno>
#include <new>

#include "chunks/address_map.h"
#include "pagemalloc/pagemalloc.h"
#include "profile/heap_profiler.h"

namespace pagemalloc {

template <class Config>
std::size_t Allocator<Config>::ExplicitArenas::record_bytes() {
  return kRecordBytes;
}

template <class Config>
unsigned Allocator<Config>::ExplicitArenas::create(unsigned first, unsigned flags) {
  LockGuard guard(lock_);
  first_.store(first, std::memory_order_relaxed);
  unsigned index = first;
  while (index < kArenaIndices) {
    ExplicitArena* a = slots_[index].load(std::memory_order_relaxed);
    if (a == nullptr || !a->live.load(std::memory_order_relaxed)) break;
    ++index;
  }
  if (index == kArenaIndices) {
    errno = EAGAIN;
    return 0;
  }
  ExplicitArena* a = slots_[index].load(std::memory_order_relaxed);
  if (a == nullptr) {
    void* mem =
        ::mmap(nullptr, kRecordBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (mem == MAP_FAILED) {
      errno = ENOMEM;
      return 0;
    }
    a = new (mem) ExplicitArena(index);
    slots_[index].store(a, std::memory_order_release);
    if (index + 1 > end_) end_ = index + 1;
  }
  a->bump.set_kind((flags & PM_ARENA_BUMP) != 0, (flags & PM_ARENA_NO_FREE) == 0,
                   HeapProfiler::enabled());
  a->live.store(true, std::memory_order_release);
  return index;
}

// The heap profiler's samples among the blocks of a: a reset frees them with no call each.
template <class Config>
void Allocator<Config>::ExplicitArenas::forget_samples(const ExplicitArena& a) {
  if (!HeapProfiler::enabled()) [[likely]]
    return;
  HeapProfiler::forget_where(
      [](std::uintptr_t address, const void* context) {
        const auto& arena = *static_cast<const ExplicitArena*>(context);
        const std::uintptr_t entry =
            address_map().get(chunk_base_of(reinterpret_cast<const void*>(address)));
        switch (AddressMap::tag_of(entry)) {
          case AddressMap::kArenaChunk: return AddressMap::owner_of<Arena>(entry) == &arena.blocks;
          case AddressMap::kBumpChunk: return AddressMap::owner_of<BumpSpace>(entry) == &arena.bump;
          case AddressMap::kHuge:
            return AddressMap::owner_of<HugeExtent>(entry)->owner == &arena.huge;
          default: return false;
        }
      },
      &a);
}

template <class Config>
int Allocator<Config>::ExplicitArenas::reset(unsigned index) {
  LockGuard guard(lock_);
  ExplicitArena* a = find(index);
  if (a == nullptr) return EINVAL;
  forget_samples(*a);
  if (a->bump.enabled()) {
    a->bump.reset();
    if (!a->ordinary_used.exchange(false, std::memory_order_acq_rel)) return 0;
  }
  a->blocks.reset();
  a->huge.free_all();
  return 0;
}

template <class Config>
int Allocator<Config>::ExplicitArenas::destroy(unsigned index) {
  LockGuard guard(lock_);
  ExplicitArena* a = find(index);
  if (a == nullptr) return EINVAL;
  forget_samples(*a);
  a->live.store(false, std::memory_order_release);
  a->bump.release_all();
  a->blocks.reset();
  a->huge.free_all();
  a->blocks.purge_all();
  a->huge.purge_all();
  return 0;
}

template <class Config>
int Allocator<Config>::ExplicitArenas::stats(unsigned index, pm_arena_stats& out) {
  ExplicitArena* a = find(index);
  if (a == nullptr) return EINVAL;
  const ArenaStats s = a->blocks.stats();
  const HugeStats h = a->huge.stats();
  const BumpStats b = a->bump.stats();
  out.blocks = s.blocks + h.blocks + b.blocks;
  out.allocated = s.allocated + h.allocated + b.bytes;
  out.active = s.active_pages * kPageSize + h.allocated + b.regions * kBumpRegionSize;
  out.mapped = s.chunks * kChunkSize + h.mapped + s.metadata + h.metadata + kRecordBytes +
               b.chunks * (kChunkSize + kBumpSizeMapBytes);
  return 0;
}

template <class Config>
void Allocator<Config>::ExplicitArenas::lock_for_fork() {
  lock_.lock();
  for (unsigned i = first_.load(std::memory_order_relaxed); i < end_; ++i) {
    if (ExplicitArena* a = slots_[i].load(std::memory_order_relaxed)) {
      a->blocks.lock_for_fork();
      a->huge.lock_for_fork();
      a->bump.lock_for_fork();
    }
  }
}

template <class Config>
void Allocator<Config>::ExplicitArenas::unlock_after_fork() {
  for (unsigned i = first_.load(std::memory_order_relaxed); i < end_; ++i) {
    if (ExplicitArena* a = slots_[i].load(std::memory_order_relaxed)) {
      a->bump.unlock_after_fork();
      a->huge.unlock_after_fork();
      a->blocks.unlock_after_fork();
    }
  }
  lock_.unlock();
}

}  // namespace pagemalloc
