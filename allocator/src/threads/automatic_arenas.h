// The automatic arenas: the ones a thread allocates from without naming one.
//
// Each thread is given one the first time it needs one, and keeps it: its cache refills from
// it and flushes to it, and its large blocks come from it. Spreading the threads over several
// arenas spreads the lock traffic of those slow paths (jemalloc's narenas). A thread gets the
// mapped arena the fewest live threads use, and a new one only when each mapped arena has a
// thread (assign()): threads that follow one another reuse arenas. The count is fixed at the
// heap's initialization:
//
//   narenas:N          N arenas (at most kMaxAutomaticArenas)
//   default            one per two CPUs the process may run on, or of ncpus:N's N (one on 1
//                      or 2 CPUs), at most 64 (jemalloc: four per CPU; tcmalloc: one central
//                      heap behind its caches). A block that a thread of another arena frees
//                      takes the foreign path (the bin's outgoing regions, the owner's ring),
//                      dearer than a free into the thread's own arena; and threads that hand
//                      blocks to each other
//                      spread them over arenas that each keep their own freed pages and partly
//                      used slabs. On 2 CPUs, eight arenas instead of two held up to 1.3 x the
//                      memory and took up to 1.2 x the time in the cross-thread programs, and
//                      one instead of two took 0.76 x the time in oversubscribed and sh8bench
//                      and 0.8 x in larson, with less memory, though 1.3 x in xmalloc, whose
//                      eight threads then share one lock (papers/cross-thread,
//                      docs/measurements.md). Measured on 2 CPUs only.
//   deterministic      one: the same calls give the same layout on every run
//
// Arena 0 is part of the heap's static storage, constructed there by start() (until then the
// storage is all zero and count() is 0); the others are mapped on first use. The stashes, most
// of an arena's size, stay unwritten until a cache flushes to them. All of them
// share one manager of huge blocks, whose cache they ask to give back before they map a chunk.
// They are each other's neighbours (arena.h, ArenaNeighbours): one lends a large block from
// the freed pages it keeps resident beyond its allowance to a thread of another that would
// make new pages resident for it, and an arena that does make new pages resident has the
// others purge as many of the freed pages they keep beyond theirs.
//
// Under thp:auto only the first arena's chunks may get huge pages (arena_chunks.h): it holds a
// single-threaded program's whole heap, where they pay. Where threads spread over several
// arenas, each arena's heap is a part of the program's, and blocks the threads hand to each
// other keep pages of several arenas in use at once: huge pages there made the cross-thread
// programs' peak RSS up to 1.7 times as large (papers/cross-thread) and gained no time.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>

#include "arena/arena.h"
#include "design/allocator.h"
#include "support/deferred.h"
#include "support/lock.h"

namespace pagemalloc {

template <class Config>
class Allocator<Config>::AutomaticArenas {
 public:
  static constexpr unsigned kMaxAutomaticArenas = 256;
  static constexpr unsigned kMaxDefaultArenas = 64;

  constexpr AutomaticArenas() = default;  // all zero: no arena until start()

  // Constructs arena 0; count() is 1 from then on. huge: the automatic arenas' huge blocks
  // (heap.h). Requires: called once, before any other member.
  void start(HugeManager* huge) {
    huge_ = huge;
    first_.construct(0, huge, neighbours(), typename Arena::LeaveStashesUnwritten{});
    count_.store(1, std::memory_order_release);
  }

  // One per two CPUs (cpus(), at least one), at most kMaxDefaultArenas; or as many as the
  // design says (Config::kArenas, when not 0).
  [[gnu::hot]] static unsigned default_count();
  // The CPUs of the process's affinity mask (at least 1); and the CPUs the counts sized by the
  // machine are taken from: the ncpus option if set, else those.
  [[gnu::hot]] static unsigned affinity_cpus();
  [[gnu::hot]] static unsigned cpus();
  // Sets the number of arenas (clamped to 1 .. kMaxAutomaticArenas). Requires: called once, after
  // start(), before any thread was given an arena.
  void configure(unsigned count) {
    count_.store(count < 1                     ? 1
                 : count > kMaxAutomaticArenas ? kMaxAutomaticArenas
                                               : count,
                 std::memory_order_relaxed);
  }
  [[nodiscard]] unsigned count() const { return count_.load(std::memory_order_acquire); }

  // The calling thread's arena.
  Arena& for_thread() {
    if (t_arena_ == nullptr) [[unlikely]]
      t_arena_ = &assign();
    return *t_arena_;
  }
  // The arena of this index; nullptr when the index is out of range or the OS refuses memory
  // for the arena.
  Arena* at(unsigned index) {
    if (index >= count()) return nullptr;
    if (index == 0) return &first_.value;
    if (Arena* a = others_[index].load(std::memory_order_acquire)) return a;
    return map(index);
  }

  // Calls visit(Arena&) for every arena mapped so far.
  template <class Visit>
  void for_each(Visit&& visit) {
    const unsigned n = count();
    if (n == 0) return;
    visit(first_.value);
    for (unsigned i = 1; i < n; ++i)
      if (Arena* a = others_[i].load(std::memory_order_acquire)) visit(*a);
  }
  // Has the arenas purge at least `bytes` of their oldest free pages, arena 0 first, if they
  // hold as many (HugeManager::Neighbours of the automatic arenas' huge blocks).
  void purge_oldest(std::size_t bytes) {
    for_each([&](Arena& a) {
      if (bytes != 0) bytes -= std::min(bytes, a.purge_oldest(bytes));
    });
  }
  // Has the arenas other than `grown`, from the one after it on, purge up to `bytes` of their
  // oldest free pages, each only beyond its allowance (Arena::purge_excess; ArenaNeighbours of
  // every automatic arena: `grown` has just made as many resident).
  void purge_others(const Arena& grown, std::size_t bytes) {
    const unsigned n = count();
    for (unsigned step = 1; step < n && bytes != 0; ++step) {
      const unsigned i = (grown.index() + step) % n;
      Arena* a = i == 0 ? &first_.value : others_[i].load(std::memory_order_acquire);
      if (a != nullptr) bytes -= std::min(bytes, a->purge_excess(bytes));
    }
  }
  // A large block from the first arena after `asking` that lends it (Arena::lend_large), or
  // nullptr.
  void* lend_large(const Arena& asking, std::size_t bytes, std::size_t align, bool& zeroed) {
    const unsigned n = count();
    for (unsigned step = 1; step < n; ++step) {
      const unsigned i = (asking.index() + step) % n;
      Arena* a = i == 0 ? &first_.value : others_[i].load(std::memory_order_acquire);
      if (a == nullptr) continue;
      if (void* block = a->lend_large(bytes, align, zeroed)) return block;
    }
    return nullptr;
  }
  // fork(), in the child, the arenas' locks held: only the forking thread lives on. (A
  // thread's exit counts down its arena's threads when its cache is torn down,
  // thread_cache_impl.h; a thread that never made a cache stays counted: its arena only looks
  // busier.) Each arena's rings of remote frees are settled (Arena::settle_remote_in_child).
  [[gnu::hot]] void reset_in_child();

  // Bytes of the arenas' records mapped so far (metadata, for the statistics).
  std::size_t record_bytes() const;

  // fork(): the mapping lock, then every arena's lock, in index order (fork_impl.h).
  [[gnu::hot]] void lock_for_fork();
  [[gnu::hot]] void unlock_after_fork();

 private:
  // The arenas' calls to their neighbours: functions, not lambdas, so that they are marked hot
  // (run by every process that purges; allocator/CMakeLists.txt).
  constexpr ArenaNeighbours neighbours() { return {&purge_for, &lend_for, this}; }
  [[gnu::hot]] static void purge_for(void* arenas, const Arena& grown, std::size_t bytes) {
    static_cast<AutomaticArenas*>(arenas)->purge_others(grown, bytes);
  }
  [[gnu::hot]] static void* lend_for(void* arenas, const Arena& asking, std::size_t bytes,
                                     std::size_t align, bool& zeroed) {
    return static_cast<AutomaticArenas*>(arenas)->lend_large(asking, bytes, align, zeroed);
  }
  [[gnu::hot]] Arena& assign();
  Arena* map(unsigned index);
  Arena* map_locked(unsigned index);  // requires: lock_ held

  // An arena's record mapped by map(): whole pages.
  static constexpr std::size_t kRecordBytes =
      (sizeof(Arena) + kPageSize - 1) / kPageSize * kPageSize;
  static inline constinit thread_local Arena* t_arena_ = nullptr;

  HugeManager* huge_ = nullptr;
  Deferred<Arena> first_;
  std::atomic<unsigned> count_{0};
  Lock lock_;                                             // mapping of arenas 1 .. count_-1
  std::atomic<Arena*> others_[kMaxAutomaticArenas] = {};  // [0] unused: arena 0 is first_
};

// The build's.
using AutomaticArenas = Allocator<BuildConfig>::AutomaticArenas;

}  // namespace pagemalloc
