// Thread caches: a stack of free regions per size class and thread, so that most small
// allocations and frees touch no lock (jemalloc's tcache, tcmalloc's thread cache).
//
// Each class's stack starts with room for initial_limit(class) regions (64, or 32 KiB worth for the
// larger classes), of which it holds at most unrefilled_limit(class) (8 KiB worth) until its thread
// first refills it: a thread that frees blocks of a class it never allocates (the last thread left,
// freeing what finished threads made) keeps no more of them than it keeps foreign regions (mleak's
// main thread held 280 KiB, docs/measurements.md). It grows, as tcmalloc's free lists do, when a
// thread frees more of that class than it holds: an overflow raises the class's limit (doubling it,
// up to capacity(class)) while the thread's budget allows, and only flushes when it does not. A bin
// grows only while the thread allocates more of it than one batch: its own regions if it refilled
// at least kGrowthRefills times since its last flush (a thread that frees what it did not allocate
// keeps no more than its first limit: those regions go home, below; and a bin whose count only
// wanders between its refills and flushes, as with a few live blocks replaced at random, keeps its
// limit: growing it there only parked regions, which short-lived threads then took from the slabs
// anew, docs/measurements.md). The budget, kBudgetBytes, bounds the bytes by which one thread's
// limits may grow above their initial ones. A stack starts in a packed area that holds every
// class's initial limit one after another (some 18 KiB: a thread that uses a few dozen classes
// touches a few pages of it, not a page per class). A growth to at most kPackedGrowth slots moves
// it to room for its new limit taken in turn from a second packed area, so that classes that grow a
// little share pages too; a larger growth (or one that finds that area full) moves it to room for
// its largest stack, reserved per class in the cache record, where it grows in place. Each area's
// pages are touched only as stacks fill them.
//
// A cache is filled from its arena and flushed back to it in batches of half its limit, under
// one lock acquisition each; a bin that only flows one way takes whole ones. A bin refilled
// kProducerRefills times in a row without a flush (a thread that allocates what others free)
// refills its whole limit, and one flushed twice in a row without a refill (a thread that frees
// what others allocated) flushes all it holds: twice the regions per lock where threads hand
// blocks on through one arena. The cache record comes from a pool (not from TLS, whose
// static size is limited); each thread holds a pointer to it. A pthread key's destructor
// returns the regions and the record when the thread exits; a thread that is exiting, or
// that is setting up its cache, bypasses the cache.
//
// Idle bins give back all they hold (as jemalloc's tcache GC, by events): at each decay tick of
// a cache (every kDecayTickBinPushes frees into one of its bins) the cache looks at its next
// kIdleBinsPerTick bins in turn, and a bin that has seen no push or pop since its last look
// returns every region it holds to its slabs, past the arena's stash, and the class's current
// slab, if that leaves it empty, to the run manager (flush_idle, Arena::free_idle_batch; only
// when the arena's lock is free, so that no thread waits for it: else at a later look). A
// program that moves on from one size to others (batches of 2 KiB blocks, then of 4 KiB ones),
// or that uses dozens of classes now and then (espresso's arrays of every size), keeps neither
// the regions of the classes it is not using nor their slabs. Flushed only down to the initial
// limit, or into the stash, those regions kept their slabs from emptying: espresso's pattern
// held 1.2 MiB so, in its caches and the stashes (docs/measurements.md).
//
// Medium blocks (large requests up to the design's kMaxMediumSize, rounded to their medium
// class: medium_classes.h) wait in the cache's medium bins (medium_bins.h) for the next
// request of their class, popped and pushed with no lock; only a block of the cache's own
// arena enters them, and a block another thread's arena holds goes back to that arena. Every
// Medium::kTickUses pushes and pops of a medium bin tick the cache as a small bin's pushes do,
// and its decay ticks look at the medium bins at most every kMediumLookMs: a bin unused since
// the last look goes back to the arena whole.
//
// A freed region's first word is set to a key: a free that finds the key there checks the
// cache and the slab's bitmap, and reports a double free instead of caching the region twice.
//
// Blocks go home. A thread owns the granules (256 bytes, 1 << kLgOwnedGranule) it took
// regions from (a refill) in the last window of kOwnedWindowMs or the one before it,
// remembered in its cache in a filter of a bit per granule (owns: kOwnedWords words, the
// granule's number modulo their bits; while the process has one cache, every granule is its
// thread's, and the fast free path skips the test: ThreadState::checks_owner). A region freed
// by a thread that does not own its granule, or one of another automatic arena, is foreign: it goes
// in through push_foreign, from the slow path, without a lock, to the bin's outgoing regions, which
// sit at the top of its slots (they take room, not count, so that no pop hands them out: the fill
// word the fast paths read never counts them). A thread that frees a block another allocated
// therefore never hands it out again beside that thread's hot objects (Hoard's passive false
// sharing), as mimalloc's per-page thread_free lists and snmalloc's message queues send such a
// block to its owner. The outgoing regions go home in one batch (return_to_owners: to this cache's
// arena under its lock, to another arena through its inbox of remote frees, without its lock:
// arena.h) when they reach foreign_limit(class) (8 KiB worth), when the bin fills, when it is idle
// at a decay tick, and at a flush of the whole cache, so a thread that only frees others' blocks
// keeps at most 8 KiB of each class. A false "owned" (two granules of one bit, or a granule whose
// regions two threads took: at the ends of their refills) only lets a thread reuse a block as
// before; a missed one (a block allocated from a granule refilled two windows ago) sends an own
// block through the arena, one flush and refill later. Pages would be too coarse: threads of one
// arena refill from one slab in turn, so a page's regions are often several threads'. A block whose
// thread exited has no owner left to share its lines with: a thread that starts owns the granules
// of the threads that exited in the last two windows, until its first rotation (Larson's server
// threads each free the blocks of the one before them, which exited).
#pragma once

#include <algorithm>
#include <array>
#include <atomic>
#include <bit>
#include <cstddef>
#include <cstdint>

#include "chunks/address_map.h"
#include "design/allocator.h"
#include "design/size_classes.h"
#include "pagemap/page_map.h"
#include "process/decay.h"
#include "support/options.h"
#include "threads/medium_bins.h"

namespace pagemalloc {

inline constexpr unsigned kCacheInitialLimit = 64;  // regions per class at first, at most

// The regions a thread cache holds of a class at first: 32 KiB worth, at least 4, at most
// kCacheInitialLimit (every class up to 512 bytes starts at 64). A thread that uses few
// regions of a large class keeps little of it: 64 regions of every class would be 6.8 MiB.
constexpr unsigned cache_initial_limit(unsigned size_class) {
  const std::size_t by_bytes = (std::size_t{32} << 10) / kAllSizeClasses[size_class].size;
  return by_bytes < 4 ? 4 : by_bytes > kCacheInitialLimit ? kCacheInitialLimit : unsigned(by_bytes);
}

// The most regions a thread cache holds of a class: 512 KiB worth, at least
// kCacheInitialLimit, at most 2048.
constexpr unsigned cache_capacity(unsigned size_class) {
  const std::size_t by_bytes = (std::size_t{512} << 10) / kAllSizeClasses[size_class].size;
  return by_bytes < kCacheInitialLimit ? kCacheInitialLimit
         : by_bytes > 2048             ? 2048
                                       : unsigned(by_bytes);
}

// The most foreign regions a bin keeps before they go home (outgoing): 8 KiB worth, at least 2.
constexpr unsigned cache_foreign_limit(unsigned size_class) {
  const std::size_t by_bytes = (std::size_t{8} << 10) / kAllSizeClasses[size_class].size;
  return by_bytes < 2 ? 2 : unsigned(by_bytes);
}

// The regions a bin holds before its thread's first refill of its class: its foreign limit (8
// KiB worth, so that a consumer's outgoing batches keep their size), at most its initial limit.
// A thread that frees blocks of a class it has never allocated (the last thread left freeing
// what finished threads made: every granule is then its own) would not reuse them; the rest
// of its initial limit opens at that first refill.
constexpr unsigned cache_unrefilled_limit(unsigned size_class) {
  return std::min(cache_foreign_limit(size_class), cache_initial_limit(size_class));
}

// The chunks a thread remembers as its arena's (ThreadCache::owns_chunk): 64 MiB of chunks in
// a row, in four lines of thread-local storage.
inline constexpr std::size_t kRememberedChunks = 32;
static_assert(std::has_single_bit(kRememberedChunks));

// The granules a thread owns (ThreadCache::owns): a bit per 256 bytes in this many words of
// its cache (4 KiB: 8 MiB in a row before two granules share a bit), and the window after which
// a refill's granules stop counting.
inline constexpr unsigned kLgOwnedGranule = 8;
inline constexpr std::size_t kOwnedWords = 512;
static_assert(std::has_single_bit(kOwnedWords));
inline constexpr std::uint64_t kOwnedWindowMs = 1000;

// Per class, of every class any design has (a design's classes are the first of these:
// size_classes.h): a bin's limit before its first refill, the slots that refill opens, and its
// foreign limit.
template <class PerClass>
constexpr std::array<std::uint32_t, kAllClassesCount> cache_class_table(PerClass of_class) {
  std::array<std::uint32_t, kAllClassesCount> table{};
  for (unsigned c = 0; c < kAllClassesCount; ++c) table[c] = of_class(c);
  return table;
}
inline constexpr auto kCacheUnrefilledLimits = cache_class_table(cache_unrefilled_limit);
inline constexpr auto kCacheOpenedAtFirstRefill = cache_class_table(
    [](unsigned c) { return cache_initial_limit(c) - cache_unrefilled_limit(c); });
inline constexpr auto kCacheForeignLimits = cache_class_table(cache_foreign_limit);

// Where each class's slots start in a cache's packed area (initial limits, one class after
// another).
inline constexpr auto kCacheInitialOffsets = [] {
  std::array<std::size_t, kAllClassesCount + 1> offsets{};
  for (unsigned c = 0; c < kAllClassesCount; ++c)
    offsets[c + 1] = offsets[c] + cache_initial_limit(c);
  return offsets;
}();
// Where each class's room for its largest stack starts in a cache's area of them (all
// classes one after another).
inline constexpr auto kCacheSlotOffsets = [] {
  std::array<std::size_t, kAllClassesCount + 1> offsets{};
  for (unsigned c = 0; c < kAllClassesCount; ++c) offsets[c + 1] = offsets[c] + cache_capacity(c);
  return offsets;
}();
// A stack that grows to at most this many slots moves to the packed area of small growths,
// which has room for kCachePackedGrowthSlots (64 KiB): the first two growths of some 20
// classes.
inline constexpr unsigned kPackedGrowth = 256;
inline constexpr std::size_t kCachePackedGrowthSlots = 8192;

template <class Config>
class Allocator<Config>::ThreadCache {
 public:
  static constexpr unsigned initial_limit(unsigned size_class) {
    return cache_initial_limit(size_class);
  }
  static constexpr unsigned unrefilled_limit(unsigned size_class) {
    return kCacheUnrefilledLimits[size_class];  // a load, where the function divides
  }
  static constexpr unsigned foreign_limit(unsigned size_class) {
    return kCacheForeignLimits[size_class];  // a load, where the function's division is slow
  }
  static constexpr std::size_t kBudgetBytes = 1 << 20;  // growth of one thread's limits
  static constexpr unsigned kMaxRefill = 256;           // regions per refill at most
  // A bin refilled this many times without a flush refills its whole limit (a producer's).
  static constexpr unsigned kProducerRefills = 3;
  // Refills since its last flush that let a bin grow at its next overflow.
  static constexpr unsigned kGrowthRefills = 2;
  static_assert(kGrowthRefills <= kProducerRefills, "refills_unflushed counts up to the latter");
  static constexpr unsigned kIdleBinsPerTick = 8;  // bins looked at per decay tick of a cache
  static constexpr unsigned capacity(unsigned size_class) { return cache_capacity(size_class); }
  using Medium = MediumBins<MediumClasses>;
  static constexpr std::uint64_t kMediumLookMs = 500;  // between two looks at idle medium bins

  // Leaves the slot areas unwritten (their pages stay untouched until used).
  [[gnu::hot]] ThreadCache();
  ThreadCache(const ThreadCache&) = delete;
  ThreadCache& operator=(const ThreadCache&) = delete;

  // The calling thread's cache, created on first use; nullptr while it must be bypassed, and
  // always in a design without thread caches (Config::kThreadCaches).
  static ThreadCache* get(Arena& arena) {
    if constexpr (!Config::kThreadCaches) return nullptr;
    if (t_.cache != nullptr) [[likely]]
      return t_.cache;
    return create(arena);
  }
  // The calling thread's cache if it has one.
  static ThreadCache* current() { return Config::kThreadCaches ? t_.cache : nullptr; }

  // The arena it takes regions from and returns them to; only regions of this arena enter it.
  [[nodiscard]] Arena* arena() const { return arena_; }

  // Whether chunk (chunk-aligned) is one of this cache's arena's chunks, with checks off: the
  // fast paths' test of a block to free or resize. A chunk found so is remembered in its slot
  // of the thread's table (kRememberedChunks, slot = chunk number modulo their count), and the
  // table holds the count of ownership changes its chunks were found under
  // (g_ownership_changes, address_map.h): while the count stays, a block in a remembered chunk
  // is the arena's without a look at the address map (two dependent loads) or at the options.
  // When the count has moved, the table is emptied before a chunk enters it. Requires: this is
  // the calling thread's cache (what it remembers is the thread's: ThreadState).
  bool owns_chunk(const void* chunk) {
    if (remembers(chunk)) [[likely]]
      return true;
    const std::uint64_t changes = g_ownership_changes.load(std::memory_order_acquire);
    if (address_map().get(chunk) != AddressMap::tag(arena_, AddressMap::kArenaChunk) ||
        options().checks.load(std::memory_order_relaxed))
      return false;
    if (t_.owned_under != changes) {
      forget_chunks();
      t_.owned_under = changes;
    }
    t_.owned_chunks[remembered_slot(chunk)] = reinterpret_cast<std::uintptr_t>(chunk);
    return true;
  }

  // Whether chunk is one the calling thread found its arena's (owns_chunk) and still
  // remembers, with the count of ownership changes unchanged since: the free path's first
  // test, in a straight line. A program whose blocks lie in up to kRememberedChunks chunks in a
  // row passes it on every free, so that the branch on it is always predicted: with one
  // remembered chunk, frees that alternate between chunks missed at random, and each miss cost
  // a pipeline flush (docs/measurements.md, "Thirty-two chunks remembered"). A thread
  // remembers chunks only while it has a cache: then remembering() is that cache.
  static bool remembers(const void* chunk) {
    return __builtin_expect(
               t_.owned_chunks[remembered_slot(chunk)] == reinterpret_cast<std::uintptr_t>(chunk),
               1) &&
           __builtin_expect(t_.owned_under == g_ownership_changes.load(std::memory_order_relaxed),
                            1);
  }
  // Requires: remembers(some chunk).
  static ThreadCache* remembering() {
    if (t_.cache == nullptr) __builtin_unreachable();  // what the compiler cannot know
    return t_.cache;
  }

  // A cached region of the class, or nullptr when the bin is empty (no refill: the caller's
  // slow path refills through pop). The region's first word is cleared (it held the freed
  // key).
  void* pop_cached(unsigned size_class) { return pop_from(bins_, size_class); }
  // pop_cached on the calling thread's cache, or nullptr if it has none: a thread without a
  // cache reads its class's bin in kNoBins, always empty, so that malloc's fast path does not
  // test the cache pointer.
  static void* pop_cached_here(unsigned size_class) {
    if constexpr (!Config::kThreadCaches) return nullptr;
    return pop_from(t_.bins, size_class);
  }

  // As pop_cached, refilling an empty bin; nullptr when the arena has no memory left.
  void* pop(unsigned size_class) {
    if (void* p = pop_cached(size_class)) [[likely]]
      return p;
    return refill(size_class);
  }

  // Requires: p is a live region of size_class not yet in any cache.
  void push(unsigned size_class, void* p) { push_to(bins_ + std::size_t{size_class}, p); }

  // A pop with prof:true that missed the fast path (heap_profiler.h; BinSampling below): the
  // region; or nullptr with `sampled` set when this allocation is the class's next sample,
  // which the caller serves elsewhere; nullptr with it clear when the arena has no memory.
  [[gnu::noinline]] void* pop_sampling(unsigned size_class, bool& sampled);
  // Whether the thread is profiled now (its medium bins keep nothing then).
  [[nodiscard]] bool profiled() const { return profiled_; }
  // push for the region p of the slab page whose entry is e: the bin's address from the
  // entry's class byte (PageEntry::class_byte_times_16), the bias folded into the address's
  // constant (one lea) instead of subtracted from the class.
  void push_slab_region(PageEntry e, void* p) {
    static_assert(sizeof(CacheBin) == 16);
    constexpr std::size_t kBias = std::size_t{PageEntry::kClassBias} * sizeof(CacheBin);
    push_to(reinterpret_cast<CacheBin*>(reinterpret_cast<std::byte*>(bins_) +
                                        (e.class_byte_times_16() - kBias)),
            p);
  }

  // Whether the cache's thread owns the granule of p (the file's comment): the free paths'
  // test that a block is the thread's to reuse.
  // The fast free path's test: checks_owner() && !owns(p) is a block that goes home.
  static bool checks_owner() { return t_.checks_owner; }
  [[nodiscard]] bool owns(const void* p) const {
    const std::uintptr_t granule = reinterpret_cast<std::uintptr_t>(p) >> kLgOwnedGranule;
    return (owned_[(granule / 64) % kOwnedWords] >> (granule % 64)) & 1;
  }

  // Requires: as push; p belongs to another automatic arena than this cache's (other_arena),
  // or lies in a granule the thread does not own. Among the bin's outgoing regions, never
  // handed out again by this thread. Out of line: the fast free path carries only its call.
  [[gnu::hot, gnu::noinline]] void push_foreign(unsigned size_class, void* p, bool other_arena);
  [[gnu::hot, gnu::noinline]] void push_foreign_disarmed(unsigned size_class, void* p,
                                                         bool other_arena);
  // The outgoing regions of the class back to their arenas, in one batch.
  [[gnu::hot]] void send_home(unsigned size_class);
  [[nodiscard]] unsigned outgoing(unsigned size_class) const {
    return uses_[size_class].outgoing();
  }

  [[nodiscard]] bool holds(unsigned size_class, const void* p) const;

  // A cached medium block of the medium class, its entry made Large again; nullptr if none.
  void* pop_medium(unsigned medium_class) {
    bool tick = false;
    void* p = medium_.pop(medium_class, tick);
    if (p == nullptr) return nullptr;
    store_entry(chunk_base_of(p), page_index_of(p), MediumClasses::kLargeEntries[medium_class]);
    if (tick) [[unlikely]]
      return medium_tick_before(p);
    return p;
  }
  // Requires: p is a live medium block of this cache's arena, of exactly its class's length
  // (MediumClasses::class_of_length). False if the cache keeps none of its class (the caller
  // frees it to the arena).
  bool push_medium(unsigned medium_class, void* p) {
    switch (try_push_medium(medium_class, p)) {
      case MediumPush::kDone: return true;
      case MediumPush::kTick: medium_tick(); return true;
      case MediumPush::kFull: return push_medium_full(medium_class, p);
    }
    return true;
  }
  // push_medium's fast half, which calls nothing: the block pushed (kDone; kTick when its push
  // is the one that ticks the cache: the caller calls medium_tick), or not, its bin at its limit
  // (kFull: the caller calls push_medium_full).
  enum class MediumPush { kDone, kTick, kFull };
  MediumPush try_push_medium(unsigned medium_class, void* p) {
    return try_push_medium(medium_class, p, page_entry(chunk_base_of(p), page_index_of(p)));
  }
  // The same, given p's first page entry (free's, which has it).
  MediumPush try_push_medium(unsigned medium_class, void* p, PageEntry& entry) {
    bool tick = false;
    if (!medium_.try_push(medium_class, p, tick)) [[unlikely]]
      return MediumPush::kFull;
    store_entry(entry, MediumClasses::kThreadCachedEntries[medium_class]);
    return tick ? MediumPush::kTick : MediumPush::kDone;
  }
  // push_medium's slow half: a bin at its limit grows, or gives back its older half.
  [[gnu::hot, gnu::noinline]] bool push_medium_full(unsigned medium_class, void* p);
  // Every Medium::kTickUses pushes and pops of a medium bin: a decay tick of the cache
  // (medium_tick_before: the tick, then the popped block p returned).
  [[gnu::noinline]] void medium_tick() noexcept;
  [[gnu::noinline, gnu::returns_nonnull]] void* medium_tick_before(void* p) noexcept;
  // Returns every medium block to the arena (a growth in place that found them in its way).
  [[gnu::hot]] void flush_medium();
  [[nodiscard]] bool holds_medium() const { return medium_.holds_any(); }
  [[nodiscard]] const Medium& medium() const { return medium_; }

  // Returns every cached region to the arena (thread exit, or pm_purge on this thread).
  [[gnu::hot]] void flush_all();

  static constexpr std::uintptr_t freed_key() { return kFreedKey; }

  // Bytes of free regions held by all threads' caches (for the statistics).
  static std::size_t bytes_cached_by_all();

  // Reallocations that moved a small block on the thread's fast path (Heap::reallocate_small)
  // and the bytes they copied: counted by the owner with plain loads and stores, summed over
  // every cache, live or gone, for the statistics.
  struct Moves {
    std::size_t moved = 0;
    std::size_t copied = 0;
  };
  void count_move(std::size_t bytes) {
    moved_.store(moved_.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
    copied_.store(copied_.load(std::memory_order_relaxed) + bytes, std::memory_order_relaxed);
  }
  static Moves moves_by_all();

  // fork(): the registry's lock is held across it. In the child only the forking thread
  // exists: the other threads' caches are dropped, and the regions they held are lost (their
  // owners may have been halfway through a push or a pop, so they cannot be trusted).
  [[gnu::hot]] static void lock_for_fork();
  [[gnu::hot]] static void unlock_after_fork_in_parent();
  [[gnu::hot]] static void reset_after_fork_in_child();

  // For the tests: whether malloc's fast path reads a cache's bins on the calling thread (not
  // kNoBins); the class's limit, the regions it holds, and where its stack lies now (the
  // record's bytes from the start of the packed area of initial limits).
  static bool fast_path_has_bins() { return t_.bins != kNoBins; }
  // The heap profiler's state for the calling thread (profile/heap_profiler.h): profiled, its
  // medium bins are given back and keep nothing (free sends medium blocks on to the arena), so
  // that each medium allocation reaches the slow path that samples it; its small bins are
  // sampled by pop_sampling. Requires: no lock held.
  static void follow_profiling(bool profiled) {
    ThreadCache* cache = t_.cache;
    if (cache == nullptr || cache->profiled_ == profiled) return;
    cache->profiled_ = profiled;
    if (profiled) cache->flush_medium();
  }
  [[nodiscard]] unsigned limit(unsigned size_class) const { return bins_[size_class].limit(); }
  [[nodiscard]] unsigned cached(unsigned size_class) const { return bins_[size_class].count(); }
  [[nodiscard]] std::size_t stack_offset(unsigned size_class) const {
    return std::size_t(reinterpret_cast<const std::byte*>(bins_[size_class].slots) -
                       reinterpret_cast<const std::byte*>(initial_slots_));
  }

 private:
  // What the fast paths touch of a class: 16 bytes, so that a class's bin is one shift away.
  // Its count, its room (limit - count) and a count of pushes share one word, which a push
  // changes with one addition: count + 1, room - 1, pushes + 1. A full bin is a zero room
  // field; every kDecayTickBinPushes-th push carries out of the word, and that carry is the
  // decay's tick (decay.h): no counter of the thread's own to load and store on each free.
  struct CacheBin {
    static constexpr std::uint64_t kCountMask = 0xffff;      // bits 0-15
    static constexpr std::uint64_t kRoomMask = 0xffff'0000;  // bits 16-31
    static constexpr unsigned kRoomShift = 16;
    static constexpr unsigned kPushesShift = 64 - std::countr_zero(kDecayTickBinPushes);
    // count + 1, room - 1 (room >= 1: no borrow reaches the pushes), pushes + 1 (mod 2^64).
    static constexpr std::uint64_t kPush =
        (std::uint64_t{1} << kPushesShift) - (std::uint64_t{1} << kRoomShift) + 1;
    // count - 1 (count >= 1), room + 1.
    static constexpr std::uint64_t kPop = (std::uint64_t{1} << kRoomShift) - 1;

    std::atomic<std::uint64_t> fill{0};  // written by the owner only, read by the statistics
    void** slots = nullptr;              // limit slots: the packed area's, or the grown one's

    [[nodiscard]] std::uint32_t count() const {
      return std::uint32_t(fill.load(std::memory_order_relaxed) & kCountMask);
    }
    [[nodiscard]] std::uint32_t limit() const {
      const std::uint64_t f = fill.load(std::memory_order_relaxed);
      return std::uint32_t((f & kCountMask) + ((f & kRoomMask) >> kRoomShift));
    }
    // Requires: count <= limit <= kCountMask.
    void set(std::uint32_t count, std::uint32_t limit) {
      const std::uint64_t pushes = fill.load(std::memory_order_relaxed) & ~(kCountMask | kRoomMask);
      fill.store(pushes | count | std::uint64_t{limit - count} << kRoomShift,
                 std::memory_order_relaxed);
    }
    void set_count(std::uint32_t count) { set(count, limit()); }
    // One more push in the pushes' field alone (a push that changes neither count nor room:
    // push_foreign's); true when it carries out of the word, a decay tick.
    bool count_push() {
      std::uint64_t next;
      const bool tick = __builtin_add_overflow(fill.load(std::memory_order_relaxed),
                                               std::uint64_t{1} << kPushesShift, &next);
      fill.store(next, std::memory_order_relaxed);
      return tick;
    }
    void set_limit(std::uint32_t limit) { set(count(), limit); }
    // The pushes' field (0 to kDecayTickBinPushes - 1), and its value set.
    [[nodiscard]] std::uint32_t pushes() const {
      return std::uint32_t(fill.load(std::memory_order_relaxed) >> kPushesShift);
    }
    void set_pushes(std::uint32_t pushes) {
      const std::uint64_t rest =
          fill.load(std::memory_order_relaxed) & ((std::uint64_t{1} << kPushesShift) - 1);
      fill.store(rest | std::uint64_t{pushes} << kPushesShift, std::memory_order_relaxed);
    }
  };
  static_assert(sizeof(CacheBin) == 16);
  static_assert(cache_capacity(0) <= CacheBin::kCountMask, "a limit fits its field");
  static_assert(std::has_single_bit(kDecayTickBinPushes) && CacheBin::kPushesShift >= 32,
                "the pushes' field is a power of two wide and above the room's");
  // push on the bin `bin`.
  void push_to(CacheBin* const bin, void* p) {
    const std::uint64_t fill = bin->fill.load(std::memory_order_relaxed);
    if ((fill & CacheBin::kRoomMask) == 0) [[unlikely]]
      return push_overflowing(bin, p);
    bin->slots[fill & CacheBin::kCountMask] = p;
    std::uint64_t next;
    const bool tick = __builtin_add_overflow(fill, CacheBin::kPush, &next);
    bin->fill.store(next, std::memory_order_relaxed);
    if (tick) [[unlikely]]
      on_push_tick(bin);
  }
  // pop_cached on the bins `bins`.
  static void* pop_from(CacheBin* bins, unsigned size_class) {
    CacheBin* const bin = bins + std::size_t{size_class};  // (one address, not one per field)
    const std::uint64_t fill = bin->fill.load(std::memory_order_relaxed);
    if ((fill & CacheBin::kCountMask) == 0) [[unlikely]]
      return nullptr;
    void* p = bin->slots[(fill & CacheBin::kCountMask) - 1];
    bin->fill.store(fill + CacheBin::kPop, std::memory_order_relaxed);
    *static_cast<std::uintptr_t*>(p) = 0;
    return p;
  }
  // What only the slow paths touch of a class.
  struct BinUse {
    bool unrefilled_flush = false;       // the last flush came with no refill since the one before
    std::uint8_t refills_unflushed = 0;  // refills since the last flush, up to kProducerRefills
    bool ever_refilled = false;          // its limit opened from unrefilled_limit to initial_limit
    // Refilled from the arena since the last flush.
    [[nodiscard]] bool refilled() const { return refills_unflushed != 0; }
    // Foreign regions at slots[limit() .. limit() + outgoing): the fill's limit (count +
    // room) leaves them out.
    // (Written by the owner only; read by the statistics.)
    std::atomic<std::uint32_t> outgoing_count{0};
    [[nodiscard]] std::uint32_t outgoing() const {
      return outgoing_count.load(std::memory_order_relaxed);
    }
    void set_outgoing(std::uint32_t n) { outgoing_count.store(n, std::memory_order_relaxed); }
    bool outgoing_elsewhere = false;  // some of them belong to other arenas
  };
  [[gnu::hot]] static ThreadCache* create(Arena& arena);
  [[gnu::hot]] static void on_thread_exit(void* cache);
  // Adds this cache's moves to the registry's total of gone caches (registry lock held).
  void retire_moves();
  [[gnu::hot]] void* refill(unsigned size_class);
  // At a bin's first refill (once per class and thread: in every program): its limit from
  // unrefilled_limit to initial_limit.
  [[gnu::hot, gnu::noinline]] void open_bin(unsigned size_class);
  // A push that found the bin full: raises its limit if the budget allows, else flushes
  // half of it; then pushes. Takes the bin, not its class: the fast path keeps no copy of it.
  [[gnu::hot]] void push_overflowing(CacheBin* bin, void* p) noexcept;
  [[gnu::hot, gnu::noinline]] void push_overflowing_disarmed(CacheBin* bin, void* p) noexcept;
  // Returns the n oldest regions to their arenas; returns the new count.
  [[gnu::hot]] std::uint32_t flush(unsigned size_class, unsigned n);
  // An idle bin's regions (none outgoing) to their slabs (Arena::free_idle_batch), unless the
  // arena's lock is held: a later look empties it then.
  [[gnu::hot, gnu::noinline]] void flush_idle(unsigned size_class);
  // A decay tick of this cache (push_to): looks at the next kIdleBinsPerTick bins and empties
  // each that has not changed since the last look (flush_idle), then ticks the decay. Out of line:
  // the free path that inlines push_to carries one call for both. Requires: no lock held.
  [[gnu::hot, gnu::noinline]] void on_decay_tick() noexcept;
  // push_to's tick, of `bin` (nullptr: on_decay_tick's): the decay's tick, or while a bin is
  // armed (below) on_sampled_tick's.
  [[gnu::hot, gnu::noinline]] void on_push_tick(CacheBin* bin) noexcept;
  // on_decay_tick while some bin is armed (below): an armed bin whose pushes' field carried out
  // is at its slow event (disarmed, armed again); the decay ticks, with every bin disarmed for
  // it, when a bin's own pushes reached kDecayTickBinPushes or no armed bin carried out.
  [[gnu::noinline]] void on_sampled_tick() noexcept;
  // The same for a tick of `bin`, armed or not.
  [[gnu::noinline]] void on_sampled_tick(CacheBin* bin) noexcept;
  [[gnu::always_inline]] inline void decay_tick_work() noexcept;  // on_decay_tick's work

  // The heap profiler's sampling of small blocks (profile/heap_profiler.h): each class of a
  // profiled thread counts down the allocations to its next sampled one (`left`, drawn from
  // the thread's exponential distance in bytes over the class's size: every byte equally
  // likely to be sampled). The fast paths stay as they are; the count comes from the bin's own
  // fields. While a bin is armed, its fast path sees a window of its stack, the top `window`
  // regions at most (the others lie below it, hidden), and its pushes' field is set so that it
  // ticks after m pushes, with window + m <= left: whatever mix of pops and pushes follows, the
  // bin reaches a slow path (a pop that finds the window empty, a push that finds no room, a
  // tick) before its left-th pop. There the pops made since arming are known exactly (the
  // window's count and the pushes since) and the bin is disarmed (its whole stack and its own
  // pushes' field back), worked on, and armed again. pop_sampling, at a pop that missed the
  // fast path, decides whether that allocation is the class's sample.
  static constexpr std::uint32_t kArmedTickPushes = kDecayTickBinPushes - 1;
  struct BinSampling {
    std::uint32_t left = 0;    // allocations to the next sample, that one included; 0: none
    std::uint32_t window = 0;  // the window's count when armed
    std::atomic<std::uint32_t> hidden{0};  // regions below the window (read by statistics)
    std::uint32_t real_pushes = 0;         // the pushes' field, as the decay counts it
    std::uint32_t preset = 0;              // the pushes' field as armed
    bool armed = false;
    std::uint8_t place = 0;  // its place in armed_ while armed
  };
  // Undoes arm(c): the pops since are taken off `left`; tick_due when the bin's own pushes
  // reached the decay's tick meanwhile.
  [[gnu::noinline]] void disarm(unsigned size_class, bool& tick_due) noexcept;
  // Arms bin c, drawing `left` if it has none.
  [[gnu::noinline]] void arm(unsigned size_class) noexcept;
  std::uint32_t draw_left(unsigned size_class) const;
  // Around a slow path's work on bin c: disarmed before, armed after while profiled, then the
  // decay's tick if its pushes reached it meanwhile (and `tick`).
  template <class Work>
  void with_bin_disarmed(unsigned size_class, Work work, bool tick = true) noexcept;
  static void return_to_owners(Arena* mine, void* const* regions, unsigned n);
  // The refill's regions' granules, owned from now on (owns).
  [[gnu::hot]] void own(void* const* regions, unsigned n);
  // At a decay tick, once a window: the granules refilled in the window just ended become the
  // owned ones, with those of the window now starting; all of them while one cache is live.
  [[gnu::hot]] void rotate_owned(std::uint64_t now);
  // At thread exit, the granules the thread owned become orphans; a new thread starts owning
  // those of the threads that exited in the last two windows (the file's comment).
  [[gnu::hot]] void leave_orphans();
  [[gnu::hot]] void adopt_orphans();
  // Medium blocks back to the arena in one batch (medium_bins.h's give_back).
  [[gnu::hot, gnu::noinline]] void give_back_medium(void* const* blocks, unsigned n);

  // A value no pointer or small integer takes (a kernel address, and a NaN as a double), that
  // is a 32-bit immediate sign-extended: free compares and writes it with no separate load of
  // the constant. A block whose first word holds it by chance only takes the slow path, which
  // asks the cache and the slab whether the block is free.
  static constexpr std::uintptr_t kFreedKey = 0xffff'ffff'9e37'79b9;
  static_assert(std::intptr_t(kFreedKey) == std::int32_t(kFreedKey));
  enum class CacheState : std::uint8_t { None, Creating, Active, Exited };
  // owns_chunk()'s memory: at first kNoChunk in every slot, which no chunk's base equals (not
  // even that of nullptr, 0: the fast free path leaves nullptr and other chunk-aligned
  // pointers to it).
  static constexpr std::uintptr_t kNoChunk = 1;
  using RememberedChunks = std::array<std::uintptr_t, kRememberedChunks>;
  static constexpr RememberedChunks kNoChunks = [] {
    RememberedChunks none{};
    none.fill(kNoChunk);
    return none;
  }();
  static std::size_t remembered_slot(const void* chunk) {
    return (reinterpret_cast<std::uintptr_t>(chunk) >> kLgChunkSize) % kRememberedChunks;
  }
  static void forget_chunks() { t_.owned_chunks = kNoChunks; }
  // The bins of a thread that has no cache: empty, never written.
  static inline constinit CacheBin kNoBins[kNumClasses]{};
  // What the fast paths read of the calling thread besides its cache's bins, in thread-local
  // storage: one line with its cache pointer, the line a malloc reads, and the table of
  // remembered chunks in the four after it, so that a free touches no line of the cache
  // record but its bin's (and the stack's slot).
  struct alignas(64) ThreadState {
    ThreadCache* cache = nullptr;
    CacheBin* bins = kNoBins;       // cache->bins_ while the thread has a cache
    std::uint64_t owned_under = 0;  // the count of ownership changes owned_chunks hold under
    CacheState state = CacheState::None;
    // Whether the free path tests the owner of a block's granule (owns): not while the
    // thread's cache was the only one at its creation or last rotation (it owns every granule
    // then, and a single-threaded program's free takes no more than a load of this line's).
    bool checks_owner = false;
    // owns_chunk()'s memory: the chunks found the arena's, each in its slot (remembered_slot),
    // kNoChunk in the slots of none. In the lines after the first, read by frees only.
    RememberedChunks owned_chunks = kNoChunks;
  };
  static inline constinit thread_local ThreadState t_{};

  // First in the record, so that a class's bin lies at the cache's address plus 16 times
  // its class: one scaled index addresses its count, limit and slots.
  CacheBin bins_[kNumClasses];
  Arena* arena_ = nullptr;
  ThreadCache* prev_ = nullptr;  // the list of live caches
  ThreadCache* next_ = nullptr;
  std::size_t grown_bytes_ = 0;        // sum over classes of (limit - initial_limit) * size
  std::size_t packed_taken_ = 0;       // slots of packed_growths_ taken
  std::atomic<std::size_t> moved_{0};  // written by the owner only (count_move)
  std::atomic<std::size_t> copied_{0};
  BinUse uses_[kNumClasses];
  std::uint64_t idle_seen_[kNumClasses] = {};  // each bin's fill at on_decay_tick's last look
  unsigned idle_next_ = 0;                     // the bin it looks at next
  Medium medium_;
  std::uint64_t medium_looked_ms_ = 0;  // when on_decay_tick last looked at the medium bins
  std::uint64_t owned_rotated_ms_ = 0;  // when rotate_owned last ran
  bool profiled_ = false;               // the heap profiler samples this thread's blocks
  unsigned armed_bins_ = 0;             // bins armed now (BinSampling), listed in armed_
  std::uint8_t armed_[kNumClasses] = {};
  static_assert(kNumClasses <= 256, "a class fits armed_'s bytes");
  BinSampling sampling_[kNumClasses];

 public:
  using OwnedFilter = std::array<std::uint64_t, kOwnedWords>;

 private:
  alignas(64) OwnedFilter owned_;  // owns()'s bits: a granule's number modulo their count
  OwnedFilter refilled_;           // the granules refilled in this window
  void* initial_slots_[kCacheInitialOffsets[kNumClasses]];  // initial_limit(c) per class
  void* packed_growths_[kCachePackedGrowthSlots];           // taken in turn by small growths
  void* grown_slots_[kCacheSlotOffsets[kNumClasses]];       // capacity(c) per class
};

// The build's.
using ThreadCache = Allocator<BuildConfig>::ThreadCache;

}  // namespace pagemalloc
