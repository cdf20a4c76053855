// Explicit arenas: arenas a program creates, allocates from by index (PM_ARENA(i)), frees
// all at once and destroys, as jemalloc's arenas.create, arena.<i>.reset and
// arena.<i>.destroy. This is the bump arena of [Pastel 2024] and the Go arena of [Hansson 2023]
// (docs/references.md): many blocks, one release, and pages kept for the next round.
//
//   index     the automatic arenas take 0 .. first-1; explicit ones first .. kArenaIndices-1,
//             the lowest free index first (a destroyed arena's index is taken again)
//   blocks    an explicit arena's own slabs, runs and huge extents: its blocks never enter a
//             thread cache, so that reset() knows them all
//   reset     frees every block; the pages stay for the next blocks (no new mmap)
//   destroy   reset, then every page back to the OS; the index becomes free
//   bump      an arena created with PM_ARENA_BUMP also bumps its blocks of up to 16 KiB from
//             regions of its own chunks (bump_space.h), with no lock; its reset moves an
//             epoch and keeps the chunks, in no time
//
// An arena's record (some 90 KiB of address space, of which some 16 KiB are ever touched:
// the stashes stay unwritten) is mapped on first use of its index and kept after destroy,
// for the next arena of that index: a stale pointer into a destroyed arena never reaches
// unmapped metadata.
#pragma once

#include <atomic>
#include <cstddef>

#include "arena/arena.h"
#include "design/allocator.h"
#include "explicit/bump_space.h"
#include "huge/huge.h"
#include "support/flags.h"
#include "support/lock.h"

struct pm_arena_stats;

namespace pagemalloc {

template <class Config>
struct Allocator<Config>::ExplicitArena {
  explicit ExplicitArena(unsigned index)
      : huge(index, {&purge_blocks, &blocks}),
        blocks(index, &huge, {}, typename Arena::LeaveStashesUnwritten{}),
        bump(index) {}

  HugeManager huge;               // huge blocks
  Arena blocks;                   // small and large blocks (of a bump arena: the larger ones)
  BumpSpace bump;                 // bumped blocks, when the arena is of the bump kind
  std::atomic<bool> live{false};  // between create and destroy
  // A bump arena's blocks or huge served a block since the last reset (else its reset
  // leaves them alone: a reset in no time).
  std::atomic<bool> ordinary_used{false};

 private:
  // HugeManager::Neighbours of huge: context is blocks.
  static void purge_blocks(void* blocks, std::size_t bytes) {
    static_cast<Arena*>(blocks)->purge_oldest(bytes);
  }
};

template <class Config>
class Allocator<Config>::ExplicitArenas {
 public:
  constexpr ExplicitArenas() = default;

  // The index of a new arena, or 0 with errno = EAGAIN (every index taken) or ENOMEM.
  // flags: PM_ARENA_BUMP, PM_ARENA_NO_FREE (valid ones: the caller checks).
  // Requires: first > 0 (index 0 is an automatic arena, so 0 can mean failure); the same
  // `first` on every call.
  unsigned create(unsigned first, unsigned flags);
  // The live explicit arena of this index, or nullptr.
  ExplicitArena* find(unsigned index) const {
    if (index < first_.load(std::memory_order_relaxed) || index >= kArenaIndices) return nullptr;
    ExplicitArena* a = slots_[index].load(std::memory_order_acquire);
    return a != nullptr && a->live.load(std::memory_order_acquire) ? a : nullptr;
  }
  // 0, or EINVAL when index names no live explicit arena.
  int reset(unsigned index);
  int destroy(unsigned index);
  static void forget_samples(const ExplicitArena& a);
  int stats(unsigned index, pm_arena_stats& out);

  // Calls visit(ExplicitArena&) for every record, live or destroyed (statistics, purge).
  template <class Visit>
  void for_each(Visit&& visit) {
    LockGuard guard(lock_);
    for (unsigned i = first_.load(std::memory_order_relaxed); i < end_; ++i)
      if (ExplicitArena* a = slots_[i].load(std::memory_order_relaxed)) visit(*a);
  }

  // Bytes of the records themselves (metadata, for the statistics).
  static std::size_t record_bytes();

  // fork(): this registry's lock, then every arena's locks (fork_impl.h).
  [[gnu::hot]] void lock_for_fork();
  [[gnu::hot]] void unlock_after_fork();

 private:
  // An arena's record: whole pages.
  static constexpr std::size_t kRecordBytes =
      (sizeof(ExplicitArena) + kPageSize - 1) / kPageSize * kPageSize;
  Lock lock_;                       // creation and destruction, one at a time
  std::atomic<unsigned> first_{0};  // the first explicit index (set by create)
  unsigned end_ = 0;                // past the highest index ever used
  std::atomic<ExplicitArena*> slots_[kArenaIndices] = {};
};

// The build's.
using ExplicitArena = Allocator<BuildConfig>::ExplicitArena;
using ExplicitArenas = Allocator<BuildConfig>::ExplicitArenas;

}  // namespace pagemalloc
