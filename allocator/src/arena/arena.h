// An arena: one run manager and the slabs and large blocks cut from its runs, behind one lock
// (and a lock per stash, below).
//
//   small (<= 64 KiB)   a region of a slab; each size class has a bin: the slab being
//                       allocated from, a list of the others that have free regions, and a
//                       stash of free regions that thread caches flushed (as tcmalloc's
//                       transfer cache): a flush or a refill moves a batch of pointers with
//                       one copy, and slab bitmaps are touched only when the stash overflows.
//                       Each stash has a lock of its own: a refill the stash serves whole,
//                       and a flush it has room for, take no other (threads of one arena
//                       that trade regions of different classes do not queue on one lock).
//                       A class has a stash per set of CPUs (stash_sets()): a region flushed
//                       on a CPU goes first to a refill on the same CPU, whose caches still
//                       hold its lines. What lay in a stash untaken while the arena cut
//                       kStashLookPages of fresh slabs goes back to its slabs
//   large (< a chunk)   a run of whole pages, its length in the page map's first entry
//
// Slow paths (a new slab, a run freed) tick the decay clock; free runs that stayed dirty for
// decay_ms are returned to the OS.
//
// Every arena has an index (the one PM_ARENA(i) names). Its chunks are tagged with the arena
// in the address map, so that any block finds its arena from its address. reset() frees every
// block at once, by walking the page maps of its chunks: the pages stay, for the next blocks.
#pragma once

#include <array>
#include <atomic>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <type_traits>
#include <utility>

#include <sched.h>

#include "arena/arena_chunks.h"
#include "arena/large_run_cache.h"
#include "arena/medium_stash.h"
#include "arena/remote_frees.h"
#include "arena/remote_ring.h"
#include "arena/slab.h"
#include "build_config.h"
#include "chunks/meta_pool.h"
#include "design/allocator.h"
#include "design/size_classes.h"
#include "os/clock.h"
#include "pagemap/intrusive_list.h"
#include "pagemap/page_map.h"
#include "pagemap/zero_start_array.h"
#include "support/lock.h"

namespace pagemalloc {

// Regions a bin's stash holds at most: 128 KiB worth, and no more than 2048. Four threads that
// each flush a whole bin of their first limit (32 KiB worth, thread_cache.h) fit in it.
constexpr unsigned stash_capacity(unsigned size_class) {
  const unsigned by_bytes = unsigned(128 * 1024 / kAllSizeClasses[size_class].size);
  return by_bytes < 2048 ? by_bytes : 2048;
}
// The stashes of all classes, packed one after another: class c's starts at
// kStashOffsets[c] and holds stash_capacity(c) slots (some 20,000 slots in all, for classes
// up to 64 KiB; a design with fewer classes takes the first kStashOffsets[its class count]).
inline constexpr auto kStashOffsets = [] {
  std::array<unsigned, kAllClassesCount + 1> offsets{};
  for (unsigned c = 0; c < kAllClassesCount; ++c) offsets[c + 1] = offsets[c] + stash_capacity(c);
  return offsets;
}();

// Stashes per class, each for the CPUs whose number modulo the count of sets is its index: a
// thread flushes to its CPU's, and refills from its CPU's first, then from the others'. The
// count is the CPUs an arena serves, taken from the machine when the heap starts (the CPUs of
// the process's affinity mask, or the ncpus option, over the automatic arenas, rounded up:
// stash_sets_for), at most kMaxStashSets; 1 until then. With the default arenas (one per two
// CPUs) that is 2 on any machine; with narenas:1 on 64 CPUs, 8 sets spread 64 CPUs' flushes
// over 8 locks. The arena keeps room for kMaxStashSets; a set's slots stay untouched until a
// thread of its CPUs flushes.
inline constexpr unsigned kMaxStashSets = 8;
constexpr unsigned stash_sets_for(unsigned cpus, unsigned arenas) {
  const unsigned per_arena = arenas == 0 ? cpus : (cpus + arenas - 1) / arenas;
  return per_arena < 1 ? 1 : per_arena > kMaxStashSets ? kMaxStashSets : per_arena;
}
struct StashSets {
  std::atomic<unsigned> count{1};
  // ncpus asked for more CPUs than the process may run on: each thread adds an ordinal of its
  // own to its CPU's number, so that a few CPUs' threads use every set (for the tests).
  std::atomic<bool> spread{false};
  std::atomic<unsigned> ordinals{0};
};
inline constinit StashSets g_stash_sets{};
inline constinit thread_local unsigned t_stash_ordinal = ~0u;  // ~0: none given yet
inline unsigned stash_sets() { return g_stash_sets.count.load(std::memory_order_relaxed); }
// Requires: called at the heap's start, before a second thread can use an arena (the count
// only grows: regions stashed in set 0 before it stay reachable).
inline void set_stash_sets(unsigned count, bool spread) {
  g_stash_sets.spread.store(spread, std::memory_order_relaxed);
  g_stash_sets.count.store(count < 1               ? 1
                           : count > kMaxStashSets ? kMaxStashSets
                                                   : count,
                           std::memory_order_relaxed);
}
// The set of the CPU the calling thread runs on (a read of the kernel's restartable-sequence
// area, where glibc registered one; else the vDSO's getcpu).
inline unsigned stash_set_here() {
  const unsigned sets = stash_sets();
  if (sets == 1) return 0;
  const int cpu = sched_getcpu();
  unsigned n = cpu < 0 ? 0 : unsigned(cpu);
  if (g_stash_sets.spread.load(std::memory_order_relaxed)) [[unlikely]] {
    if (t_stash_ordinal == ~0u)
      t_stash_ordinal = g_stash_sets.ordinals.fetch_add(1, std::memory_order_relaxed);
    n += t_stash_ordinal;
  }
  return n % sets;
}

// Slots of a class's ring of remote frees (remote_ring.h): 64 KiB worth, a power of two from
// 16 to 1024 (a whole flush of a thread's mixed bin fits: thread_cache.h).
constexpr unsigned remote_ring_capacity(unsigned size_class) {
  const unsigned by_bytes = unsigned(64 * 1024 / kAllSizeClasses[size_class].size);
  return std::bit_floor(by_bytes < 16 ? 16u : by_bytes > 1024 ? 1024u : by_bytes);
}
// The rings' slots of all classes, packed one after another as the stashes are.
inline constexpr auto kRemoteRingOffsets = [] {
  std::array<unsigned, kAllClassesCount + 1> offsets{};
  for (unsigned c = 0; c < kAllClassesCount; ++c)
    offsets[c + 1] = offsets[c] + remote_ring_capacity(c);
  return offsets;
}();

struct ArenaStats {
  std::size_t allocated = 0;     // usable bytes of small and large blocks outside the arena
                                 // (live, or in thread caches)
  std::size_t blocks = 0;        // how many blocks those are
  std::size_t active_pages = 0;  // pages in slabs and large runs
  std::size_t chunks = 0;
  std::size_t dirty_pages = 0;
  std::size_t free_pages = 0;    // dirty + retained
  std::size_t purged_pages = 0;  // since start
  std::size_t metadata = 0;      // bytes of slab descriptors' and run records' pools

  ArenaStats& operator+=(const ArenaStats& o) {
    allocated += o.allocated;
    blocks += o.blocks;
    active_pages += o.active_pages;
    chunks += o.chunks;
    dirty_pages += o.dirty_pages;
    free_pages += o.free_pages;
    purged_pages += o.purged_pages;
    metadata += o.metadata;
    return *this;
  }
};

// The arenas beside an automatic arena (automatic_arenas.h): after the arena maps chunks,
// purge(context, arena, bytes) has the others purge as many bytes of their oldest free pages,
// as the huge blocks' manager has them do after it maps (huge.h). Pages a thread freed in one
// arena serve only that arena; without this, a program whose memory moves from the threads of
// one arena to those of another (a pipeline whose producers take turns filling its queues)
// keeps the high-water mark of every arena resident at once, for the whole decay.
//
// Before that, a large block the arena cannot cut from the freed pages it keeps resident is
// asked of the neighbours (lend): one that keeps enough freed pages resident beyond its
// allowance serves it from them, so that the memory is used again instead of purged in one
// arena and faulted in anew in another. The block is that arena's (its chunk says so).
template <class Config>
struct Allocator<Config>::ArenaNeighbours {
  void (*purge)(void* context, const Arena& grown, std::size_t bytes) = nullptr;
  void* (*lend)(void* context, const Arena& asking, std::size_t bytes, std::size_t align,
                bool& zeroed) = nullptr;
  void* context = nullptr;
};

template <class Config>
class Allocator<Config>::Arena {
 public:
  using Runs = SelectedRuns<Config, ArenaChunks>;
  static_assert(RunManager<Runs>);

  // huge: the huge blocks' manager that gives back its cache before a chunk is mapped
  // (arena_chunks.h), or nullptr.
  constexpr explicit Arena(unsigned index, HugeManager* huge = nullptr,
                           ArenaNeighbours neighbours = {})
      : index_(index),
        neighbours_(neighbours),
        pal_(this, huge),
        runs_(pal_),
        stashes_(),
        stash_slots_{},
        remote_ring_slots_{} {
    runs_.set_dirty_runs_first(Config::kDirtyRunsFirst);
  }
  // For an arena placed in memory that reads zero (the library's .bss, or a fresh anonymous
  // mapping): the stashes, their slots and the rings' slots (most of the arena's size) are left
  // unwritten, so that an arena that never uses them (an explicit one, or a small program's)
  // never makes their pages resident. A stash's zero bytes are an empty stash; a stash slot is
  // only read after it was written; a ring's slots must read null, as they do.
  struct LeaveStashesUnwritten {};
  Arena(unsigned index, HugeManager* huge, ArenaNeighbours neighbours, LeaveStashesUnwritten)
      : index_(index),
        neighbours_(neighbours),
        pal_(this, huge),
        runs_(runs_unwritten(pal_)),
        stashes_(kUnwritten) {
    runs_.set_dirty_runs_first(Config::kDirtyRunsFirst);
  }
  // Whether a stash's zero bytes are an empty stash, as the unwritten constructor assumes (for
  // the suite).
  static bool stash_starts_as_zero_bytes() { return zero_bytes_construct<Stash>(); }
  // A run manager that can leave its tables unwritten in memory that reads zero does.
  static Runs runs_unwritten(ArenaChunks& pal) {
    if constexpr (std::is_constructible_v<Runs, ArenaChunks&, ZeroStartUnwritten>)
      return Runs(pal, kUnwritten);
    else return Runs(pal);
  }
  Arena(const Arena&) = delete;
  Arena& operator=(const Arena&) = delete;

  [[nodiscard]] unsigned index() const { return index_; }
  // Under thp:auto, no chunk of this arena gets huge pages (arena_chunks.h). Requires: no chunk
  // mapped yet.
  void avoid_huge_pages() { pal_.avoid_huge_pages(); }

  // Live threads the arena was given to (automatic_arenas.h): counted up when a thread is
  // given the arena, down when its thread cache is torn down at its exit.
  [[nodiscard]] unsigned threads() const { return threads_.load(std::memory_order_relaxed); }
  void thread_arrived() { threads_.fetch_add(1, std::memory_order_relaxed); }
  void thread_left() { threads_.fetch_sub(1, std::memory_order_relaxed); }
  void set_threads(unsigned n) { threads_.store(n, std::memory_order_relaxed); }

  // nullptr when the OS refuses memory.
  void* alloc_small(unsigned size_class);
  // Requires: slab's entry was read for p. Aborts on misuse.
  void free_small(Slab* slab, void* p, const char* call);
  // Up to n regions of one class into out (a thread cache's refill); returns how many. Those
  // cut from slabs come last, highest address first, so that a stack popped from its top hands
  // them out in ascending order.
  [[gnu::hot]] unsigned alloc_batch(unsigned size_class, void** out, unsigned n);
  // Frees n small regions (a thread cache's flush) under one lock.
  [[gnu::hot]] void free_batch(void* const* regions, unsigned n, const char* call);
  // Frees n small regions of one class that a thread cache's idle bin held: to their slabs,
  // past the stash (a class the thread stopped using would keep the same slabs there), and the
  // bin's current slab, if that leaves it empty, to the run manager. Only if the arena's lock
  // is free: whether it was (else nothing is freed, and the bin keeps its regions).
  [[gnu::hot, gnu::noinline]] bool free_idle_batch(void* const* regions, unsigned n);
  // Frees n small regions of one class from a thread whose cache belongs to another arena,
  // without waiting for the arena's lock: to its stash if the lock is free, else to the
  // class's inbox, taken by the next refill of that class, which hands them out first. The
  // inbox is a ring of pointers (remote_ring.h), and when that is full, a chain linked through
  // the regions (remote_frees.h). When an inbox holds kRemoteCollectBytes or more, the pusher
  // collects it if the lock is free, so that it stays bounded when the arena's own threads
  // stop allocating that class. Regions of the 8-byte class, too small for the chain's link,
  // wait for the lock (free_batch) when the ring is full.
  [[gnu::hot]] void free_remote(void* const* regions, unsigned n);
  static constexpr std::size_t kRemoteCollectBytes = 256 * 1024;
  // Whether the small region p is free in its slab's bitmap (a double-free check).
  bool region_is_free(Slab* slab, const void* p);

  // A run of at least `bytes` (> kMaxSmallSize) aligned to `align`; nullptr when the OS
  // refuses memory. `zeroed` tells whether its pages are known to read zero.
  // may_borrow: a neighbour may lend the block (ArenaNeighbours), as it may when the block
  // would make pages resident that the arena does not keep already.
  [[gnu::hot]] void* alloc_large(std::size_t bytes, std::size_t align, bool& zeroed,
                                 bool may_borrow = false);
  // Frees the large block p (pages long, its page-map entry read for this free). When another
  // thread holds the lock, the block is deferred instead of waited for: pushed to an inbox of
  // large blocks (without the lock) that the holder, or the next thread to take the lock,
  // frees. So a thread freeing another thread's large blocks never queues behind it.
  [[gnu::hot]] void free_large(void* p, PageCount pages, const char* call = "free");
  // Frees n medium blocks that a thread cache held (their first entries ThreadCached, their
  // lengths in them), under one acquisition of the lock.
  [[gnu::hot]] void free_thread_cached(void* const* blocks, unsigned n);
  // The length of the large block at p, whose page-map entry is e: the entry's, or in a
  // design that keeps its allocated runs in a tree (Config::kAllocatedRunsTree) a search
  // of it under the lock, as jemalloc's arena_salloc did in 2008. 0 pages: no block there.
  PageCount large_pages(const void* p, PageEntry e) {
    if constexpr (Config::kAllocatedRunsTree) return large_pages_in_tree(p);
    else return e.pages();
  }
  // In a design that validates frees (Config::kValidateFree), the search OS X's malloc
  // zone made before every free in 2008 (chunk_tree.h): p's chunk in the tree of this arena's
  // chunks and, for a large block (e: its page-map entry), its length, under the lock. Its
  // answer is the one the address map and the page map gave already; the free that follows
  // reports whatever is wrong with p. In any other design it compiles to nothing.
  void validate_freed(const void* p, PageEntry e) {
    if constexpr (Config::kValidateFree) validate_freed_in_tree(p, e);
  }
  // The searches validate_freed made (0 in a design without them).
  std::uint64_t validated_frees();
  // Grows or shrinks the large block at p (pages long) to `want` pages without moving it.
  [[gnu::hot]] bool resize_large(void* p, PageCount pages, PageCount want);

  // Frees every block of the arena (and every region stashed). The pages stay, free and
  // dirty, until the decay returns them to the OS. Requires: no thread cache holds regions
  // of this arena (an explicit arena's blocks never enter a cache).
  void reset();

  // Returns the stashed regions to their slabs, then freed pages to the OS; the bytes that went.
  std::size_t purge_all();
  // The decay's clock from outside the slow paths (decay.h): purges what has been free for
  // decay_ms, under the lock; when !wait, only if the lock is free.
  [[gnu::hot]] void advance_decay(bool wait);
  // Purges the oldest free dirty pages, at least `bytes` of them if it holds as many (a huge
  // block beside the arena has just taken as many from the OS: huge.h). Returns the bytes.
  [[gnu::hot]] std::size_t purge_oldest(std::size_t bytes);
  // A neighbour grew by `bytes` (ArenaNeighbours): if the lock is free, the arena has not used
  // all its resident pages for kIdleMs (an arena that keeps using them again would fault
  // them back in at once), and it keeps more freed pages resident than its allowance (an
  // eighth of its active pages, plus kResidentSlackBytes), purges its oldest free pages, at
  // most `bytes` and no more than the excess. Returns the bytes purged.
  std::size_t purge_excess(std::size_t bytes);
  static constexpr std::uint64_t kIdleMs = 50;
  // Pages of fresh slabs between two looks at the stashes (give_back_untaken_stashed).
  static constexpr std::size_t kStashLookPages = 256;
  static constexpr std::size_t kResidentSlackBytes = std::size_t{1} << 20;
  // A large block for a neighbour (ArenaNeighbours::lend): served only if the lock is free and
  // the arena keeps, beyond its allowance, as many freed pages resident as the block needs;
  // else nullptr.
  void* lend_large(std::size_t bytes, std::size_t align, bool& zeroed);
  ArenaStats stats();
  // The run manager's invariants: nullptr, or what is broken.
  const char* check_invariants();
  // The page maps of the arena's chunks against its slabs, bins, stashes and counts
  // (heap_invariants_impl.h): nullptr, or what is broken.
  const char* check_blocks();

  // fork(): the locks are taken before and released after, in the parent and in the child,
  // so that the child never inherits one half-held (fork_impl.h): the arena's, then each
  // stash's (the order every path takes them in).
  void lock_for_fork() {
    lock_.lock();
    for (StashSet& set : used_stash_sets())
      for (Stash& s : set) s.lock.lock();
  }
  void unlock_after_fork() {
    for (StashSet& set : used_stash_sets())
      for (Stash& s : set) s.lock.unlock();
    lock_.unlock();
  }
  // In the child, every lock still held: the rings' regions to the stashes and slabs, and the
  // rings emptied, for a slot reserved by a thread of the parent is never written
  // (remote_ring.h).
  [[gnu::hot]] void settle_remote_in_child();
  // For the tests: the arena's own lock, held by a test to show what does not wait for it.
  Lock& lock_for_tests() { return lock_; }
  // What the run manager has done so far (counters.h; all zero unless built with counting).
  RunCounterValues run_counters() {
    LockGuard guard(lock_);
    return runs_.counters();
  }

 private:
  struct SlabBin {
    Slab* current = nullptr;  // allocated from first; never on `partial`
    IntrusiveList<Slab, &Slab::prev, &Slab::next> partial;  // other slabs with free regions
  };
  // A class's stash: slots 0 .. count-1 of stash_of(set, class) hold free regions. Under its own
  // lock, taken after lock_ when both are held. Regions that pass through it without lock_
  // are counted in handed_out (handed out less taken back), not in allocated_ and blocks_:
  // the arena's totals are the sums (stats(), check_blocks()). On a line of its own.
  // Slots 0 .. untaken-1 hold regions that lay there untaken since the arena last looked
  // (give_back_untaken_stashed): the least count since, so never above the count.
  struct alignas(64) Stash {
    Lock lock;
    std::int64_t handed_out = 0;
    unsigned untaken = 0;  // under the lock
    // Written under the lock; read without it only as a hint (an empty stash is not locked).
    [[nodiscard]] unsigned count() const { return count_.load(std::memory_order_relaxed); }
    void set_count(unsigned n) {
      count_.store(n, std::memory_order_relaxed);
      if (n < untaken) untaken = n;
    }

   private:
    std::atomic<unsigned> count_{0};
  };
  using StashSet = std::array<Stash, kNumClasses>;
  // The sets a thread can pick (stash_set_here): the others' stashes stay empty and unwritten.
  std::span<StashSet> used_stash_sets() { return {stashes_.begin(), stash_sets()}; }
  // Slots 0 .. stashes_[set][c].count() - 1 of class c's stash in the set hold free regions.
  void** stash_of(unsigned set, unsigned size_class) {
    return stash_slots_[set] + kStashOffsets[size_class];
  }
  // Requires: the stash's lock, and n regions in it (take) or room for n more (put). Its top
  // n regions to out; n regions onto its top.
  void take_from_stash(unsigned set, unsigned size_class, void** out, unsigned n) {
    Stash& stash = stashes_[set][size_class];
    stash.set_count(stash.count() - n);
    std::memcpy(out, stash_of(set, size_class) + stash.count(), n * sizeof(void*));
  }
  void put_in_stash(unsigned set, unsigned size_class, void* const* regions, unsigned n) {
    Stash& stash = stashes_[set][size_class];
    std::memcpy(stash_of(set, size_class) + stash.count(), regions, n * sizeof(void*));
    stash.set_count(stash.count() + n);
  }
  // Requires: lock_ not held. A whole refill from one stash alone (this CPU's first, then the
  // other sets'), or a whole flush into this CPU's (wait: whether to wait for the stash's
  // lock): whether it was done. Declined while large
  // blocks wait for lock_ (deferred_large_) or the class's inbox may hold regions, which only
  // a holder of lock_ takes.
  [[gnu::hot]] bool take_stashed(unsigned size_class, void** out, unsigned n);
  [[gnu::hot]] bool stash_whole(void* const* regions, unsigned n, bool wait);
  // Requires: lock_ held. What the stashes handed out without lock_, less what they took
  // back so: blocks and bytes to add to blocks_ and allocated_.
  struct HandedOut {
    std::int64_t blocks = 0;
    std::int64_t bytes = 0;
  };
  HandedOut stash_handed_out();

  [[gnu::hot]] Slab* next_slab(SlabBin& bin, unsigned size_class);
  // Requires: lock_ held. Every kStashLookPages pages of fresh slabs, the arena looks at its
  // stashes: the regions that lay in one untaken since the last look go back to their slabs
  // (and a slab they empty, to the run manager), so that a stash no refill draws on keeps no
  // pages from the program while the arena cuts new ones.
  [[gnu::hot, gnu::noinline]] void give_back_untaken_stashed();
  // Requires: lock_ held. alloc_batch's and alloc_large's work.
  [[gnu::hot]] unsigned alloc_batch_locked(unsigned size_class, void** out, unsigned n);
  [[gnu::hot]] void* alloc_large_locked(std::size_t bytes, std::size_t align, bool& zeroed);
  // Requires: lock_ held; called after each allocation. The pages the arena has made resident
  // are estimated as the high-water mark of its active pages, less the pages purged since.
  // When the active pages pass it, the difference is new memory the neighbours are to purge
  // as much of; returns the bytes they are to purge now (kNeighbourPurgeBytes or more), else 0.
  // (The run manager's dirty count is no measure: a freed run that merges with untouched free
  // pages makes them count as dirty too.)
  std::size_t growth() {
    update_resident();
    if (active_pages_ >= resident_pages_) full_ms_ = now_ms();
    if (active_pages_ <= resident_pages_) return 0;
    unbalanced_pages_ += active_pages_ - resident_pages_;
    resident_pages_ = active_pages_;
    if (unbalanced_pages_ * kPageSize < kNeighbourPurgeBytes) return 0;
    return std::exchange(unbalanced_pages_, 0) * kPageSize;
  }
  // Requires: lock_ held. Freed pages the arena keeps resident beyond its allowance (by the
  // estimate of growth()).
  std::size_t resident_excess_pages() {
    update_resident();
    const std::size_t allowance =
        active_pages_ + active_pages_ / 8 + kResidentSlackBytes / kPageSize;
    return resident_pages_ > allowance ? resident_pages_ - allowance : 0;
  }
  // Requires: lock_ held. Takes the pages purged since the last look off the estimate.
  void update_resident() {
    const std::size_t purged = purged_pages_ - purged_seen_;
    purged_seen_ = purged_pages_;
    resident_pages_ = resident_pages_ > purged ? resident_pages_ - purged : 0;
  }
  // Requires: lock_ not held. Has the neighbours purge `bytes` (growth_since's result).
  void balance_growth(std::size_t bytes) {
    if (bytes != 0 && neighbours_.purge != nullptr) [[unlikely]]
      neighbours_.purge(neighbours_.context, *this, bytes);
  }
  static constexpr std::size_t kNeighbourPurgeBytes = std::size_t{256} << 10;
  // large_pages' search of the allocated runs' tree, under the lock.
  PageCount large_pages_in_tree(const void* p);
  void validate_freed_in_tree(const void* p, PageEntry e);
  void give_back(Slab* slab, void* p, const char* call);
  // Requires: lock_ held; n >= 1 and regions[0] in slab's pages. Gives back the regions at
  // the start of `regions` that lie in slab (the first always; a misuse among them is
  // reported); returns how many. Out of line and never cloned: one copy in the hot text,
  // whose room is counted (tests/dropin/hot_text.sh).
  [[gnu::hot, gnu::noinline, gnu::noclone]] unsigned give_back_run(Slab* slab, void* const* regions,
                                                                   unsigned n, const char* call);
  // Requires: lock_ held. Gives back n small regions of this arena to their slabs, a run of
  // one slab at a time (give_back_run).
  void give_back_regions(void* const* regions, unsigned n, const char* call) {
    for (unsigned i = 0; i < n;) {
      const PageEntry e = page_entry(chunk_base_of(regions[i]), page_index_of(regions[i]));
      i += give_back_run(static_cast<Slab*>(e.slab_descriptor()), regions + i, n - i, call);
    }
  }
  // Requires: lock_ held. Releases it and reports p's misuse (give_back_run's, out of its
  // hot text).
  [[noreturn, gnu::cold, gnu::noinline]] void report_in_run(const void* p, const char* what,
                                                            const char* call);
  void unstash_all();
  [[gnu::hot]] void free_large_locked(void* p, PageCount pages, const char* call);
  // Requires: lock_ held. A cached large block of `pages` pages, allocated; else nullptr,
  // after the cache's oldest run went back to the run manager (LargeRunCache).
  [[gnu::hot]] void* take_cached(PageCount pages);
  // Requires: lock_ held. A run of the large-run cache back to the run manager.
  [[gnu::hot, gnu::noinline]] void give_back_cached(const LargeRunCache::Entry& run);
  // Requires: lock_ held. Every run of the large-run cache back to the run manager; whether
  // there was one.
  [[gnu::hot]] bool flush_large_cache();
  // Requires: lock_ held. A block of the medium stash made a live block again, or nullptr.
  [[gnu::hot]] void* take_stashed_medium(unsigned medium_class);
  [[gnu::hot]] void free_batch_locked(void* const* regions, unsigned n, const char* call);
  // Releases the lock, after freeing the large blocks deferred meanwhile.
  void unlock() {
    if (deferred_large_.maybe_nonempty()) free_deferred_large();
    lock_.unlock();
  }
  static constexpr std::uintptr_t kDeferredKey = 0x7061'6765'6465'6665;  // "pagedefe"
  // Requires: lock_ held. Frees every deferred large block.
  void free_deferred_large();
  // Takes the lock; on release, frees the large blocks deferred meanwhile.
  class Locked {
   public:
    explicit Locked(Arena& arena) : arena_(arena) { arena_.lock_.lock(); }
    ~Locked() { arena_.unlock(); }
    Locked(const Locked&) = delete;
    Locked& operator=(const Locked&) = delete;

   private:
    Arena& arena_;
  };
  // Requires: lock_ held. Up to n regions of the class's inbox into out, the ring's first
  // (returns how many); the rest stays for the next refill. Regions waiting there still count
  // as handed out (allocated_, blocks_) until they are taken.
  [[gnu::hot]] unsigned take_remote(unsigned size_class, void** out, unsigned n);
  // Whether the class's inbox may hold regions (a relaxed look, with or without lock_: the
  // rest of a taken chain is written under lock_ and read as an atomic).
  bool remote_waiting(unsigned size_class) {
    return taken_chain(size_class).load(std::memory_order_relaxed) != nullptr ||
           remote_rings_[size_class].maybe_nonempty() || remote_[size_class].maybe_nonempty();
  }
  std::atomic_ref<void*> taken_chain(unsigned size_class) {
    return std::atomic_ref<void*>(remote_taken_[size_class]);
  }
  RemoteRing::Slots ring_slots(unsigned size_class) {
    return {remote_ring_slots_ + kRemoteRingOffsets[size_class], remote_ring_capacity(size_class)};
  }
  // Requires: lock_ held, and the class's stash's lock when stash_locked. A region taken
  // from the inbox, to the stash, else to its slab.
  void take_back(unsigned size_class, void* p, bool stash_locked = false);
  // Requires: lock_ held. Every region waiting for the class, to its stash or slab.
  [[gnu::hot]] void collect_remote(unsigned size_class);
  void collect_all_remote();
  [[gnu::hot]] void release_slab(Slab* slab);
  [[gnu::hot]] void tick();
  void tag_interior(std::byte* chunk, PageIndex from, PageIndex to);
  void free_every_block(std::byte* chunk);
  void mark_slab_pages_free(const Slab* slab);

  const unsigned index_;
  const ArenaNeighbours neighbours_;
  std::atomic<unsigned> threads_{0};
  // On a cache line of its own, with what its holder writes after it: the fields above are
  // read by other arenas' threads on every remote free, and must not bounce with the lock.
  alignas(64) Lock lock_;
  ArenaChunks pal_;
  Runs runs_;
  SlabBin bins_[kNumClasses];
  ZeroStartArray<StashSet, kMaxStashSets> stashes_;
  MetaPool<Slab> slab_pool_;
  std::size_t allocated_ = 0;
  std::size_t blocks_ = 0;
  std::size_t active_pages_ = 0;
  std::size_t slab_pages_ = 0;        // of active_pages_, those of slabs
  std::size_t fresh_slab_pages_ = 0;  // cut since the stashes were last looked at
  std::size_t purged_pages_ = 0;
  std::size_t resident_pages_ = 0;    // estimated (growth())
  std::uint64_t full_ms_ = 0;         // when the active pages last reached resident_pages_
  std::size_t purged_seen_ = 0;       // purged_pages_ when growth() last looked
  std::size_t unbalanced_pages_ = 0;  // grown since the neighbours last purged as many
  std::uint64_t last_purge_ms_ = 0;
  RemoteRing remote_rings_[kNumClasses];  // per class: regions freed by other arenas' threads
  RemoteFrees remote_[kNumClasses];       // per class: the same, when the ring was full
  // Per class: the rest of a chain taken from remote_ (written under lock_, as atomics:
  // taken_chain).
  alignas(std::atomic_ref<void*>::required_alignment) void* remote_taken_[kNumClasses] = {};
  RemoteFrees deferred_large_;  // large blocks freed while another thread held the lock
  LargeRunCache large_cache_;   // freed large blocks kept for the same length (kLargeRunCache)
  MediumStash<MediumClasses> medium_stash_;  // freed medium blocks, per class (medium_stash.h)
  // Last: apart from everything a slow path touches.
  void* stash_slots_[kMaxStashSets][kStashOffsets[kNumClasses]];
  void* remote_ring_slots_[kRemoteRingOffsets[kNumClasses]];  // accessed as atomics
};

// The build's.
using ArenaNeighbours = Allocator<BuildConfig>::ArenaNeighbours;
using Arena = Allocator<BuildConfig>::Arena;

}  // namespace pagemalloc
