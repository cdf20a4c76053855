// Thread caches: creation, refill and flush against the arena, and teardown at thread exit.
#pragma once

#include "threads/thread_cache.h"

#include <pthread.h>

#include <atomic>
#include <cstring>

#include "arena/arena.h"
#include "chunks/address_map.h"
#include "chunks/meta_pool.h"
#include "os/clock.h"
#include "pagemap/intrusive_list.h"
#include "profile/heap_profiler.h"
#include "support/lock.h"

namespace pagemalloc {

// Every live cache of one Config, their records' pool, and the pthread key that tears them
// down.
template <class ThreadCache>
struct CacheRegistry {
  Lock lock;
  MetaPool<ThreadCache> pool;
  ThreadCache* live = nullptr;          // head of the list of live caches
  std::atomic<unsigned> live_count{0};  // how many (read without the lock by the ticks)
  // The granules that exited threads owned, in this window and the one before (a window
  // starts at the first exit kOwnedWindowMs after the last start): a new thread owns them.
  typename ThreadCache::OwnedFilter orphaned{};
  typename ThreadCache::OwnedFilter orphaned_before{};
  std::uint64_t orphaned_since_ms = 0;
  typename ThreadCache::Moves retired;  // the moves counted by caches whose threads are gone
  pthread_key_t key{};
  std::atomic<bool> key_ready{false};
};
template <class Config>
constinit CacheRegistry<typename Allocator<Config>::ThreadCache> g_cache_registry{};

template <class Config>
Allocator<Config>::ThreadCache::ThreadCache() {
  for (unsigned c = 0; c < kNumClasses; ++c) {
    bins_[c].slots = initial_slots_ + kCacheInitialOffsets[c];
    bins_[c].set_limit(unrefilled_limit(c));
  }
}

template <class Config>
typename Allocator<Config>::ThreadCache* Allocator<Config>::ThreadCache::create(Arena& arena) {
  if (t_.state != CacheState::None) return nullptr;
  t_.state = CacheState::Creating;  // allocations made below bypass the cache
  ThreadCache* cache = nullptr;
  {
    LockGuard guard(g_cache_registry<Config>.lock);
    if (!g_cache_registry<Config>.key_ready.load(std::memory_order_acquire)) {
      if (pthread_key_create(&g_cache_registry<Config>.key, &ThreadCache::on_thread_exit) == 0)
        g_cache_registry<Config>.key_ready.store(true, std::memory_order_release);
    }
    if (g_cache_registry<Config>.key_ready.load(std::memory_order_relaxed))
      cache = g_cache_registry<Config>.pool.acquire();
    if (cache != nullptr) {
      // The first cache owns every granule; a later one only those it refills from, and the
      // others own theirs from their next rotation on.
      const bool alone = g_cache_registry<Config>.live == nullptr;
      if (alone) cache->owned_.fill(~std::uint64_t{0});
      else cache->adopt_orphans();
      t_.checks_owner = !alone;
      cache->refilled_.fill(0);
      cache->owned_rotated_ms_ = now_ms();
      g_cache_registry<Config>.live_count.fetch_add(1, std::memory_order_relaxed);
      cache->next_ = g_cache_registry<Config>.live;
      if (g_cache_registry<Config>.live != nullptr) g_cache_registry<Config>.live->prev_ = cache;
      g_cache_registry<Config>.live = cache;
    }
  }
  if (cache == nullptr) {
    t_.state = CacheState::Exited;  // no cache for this thread: every call goes to the arena
    return nullptr;
  }
  cache->arena_ = &arena;
  pthread_setspecific(g_cache_registry<Config>.key, cache);
  t_.cache = cache;
  t_.bins = cache->bins_;
  t_.state = CacheState::Active;
  return cache;
}

template <class Config>
void Allocator<Config>::ThreadCache::on_thread_exit(void* p) {
  auto* cache = static_cast<ThreadCache*>(p);
  t_.cache = nullptr;
  t_.bins = kNoBins;
  forget_chunks();  // a thread remembers chunks only while it has a cache
  t_.state = CacheState::Exited;
  t_.checks_owner = false;
  cache->flush_all();
  cache->arena_->thread_left();  // automatic_arenas.h: the arena has one thread fewer
  LockGuard guard(g_cache_registry<Config>.lock);
  if (cache->prev_ != nullptr) cache->prev_->next_ = cache->next_;
  else g_cache_registry<Config>.live = cache->next_;
  if (cache->next_ != nullptr) cache->next_->prev_ = cache->prev_;
  g_cache_registry<Config>.live_count.fetch_sub(1, std::memory_order_relaxed);
  cache->leave_orphans();
  cache->retire_moves();
  g_cache_registry<Config>.pool.release(cache);
}

// Requires: the registry's lock held.
template <class Config>
void Allocator<Config>::ThreadCache::retire_moves() {
  g_cache_registry<Config>.retired.moved += moved_.load(std::memory_order_relaxed);
  g_cache_registry<Config>.retired.copied += copied_.load(std::memory_order_relaxed);
}

template <class Config>
typename Allocator<Config>::ThreadCache::Moves Allocator<Config>::ThreadCache::moves_by_all() {
  LockGuard guard(g_cache_registry<Config>.lock);
  Moves sum = g_cache_registry<Config>.retired;
  for (ThreadCache* c = g_cache_registry<Config>.live; c != nullptr; c = c->next_) {
    sum.moved += c->moved_.load(std::memory_order_relaxed);
    sum.copied += c->copied_.load(std::memory_order_relaxed);
  }
  return sum;
}

template <class Config>
std::size_t Allocator<Config>::ThreadCache::bytes_cached_by_all() {
  LockGuard guard(g_cache_registry<Config>.lock);
  std::size_t bytes = 0;
  for (ThreadCache* c = g_cache_registry<Config>.live; c != nullptr; c = c->next_) {
    for (unsigned k = 0; k < kNumClasses; ++k)
      bytes +=
          std::size_t(c->bins_[k].count() + c->sampling_[k].hidden.load(std::memory_order_relaxed) +
                      c->uses_[k].outgoing()) *
          kSizeClasses[k].size;
    bytes += c->medium_.bytes_held();
  }
  return bytes;
}

template <class Config>
void Allocator<Config>::ThreadCache::lock_for_fork() {
  g_cache_registry<Config>.lock.lock();
}

template <class Config>
void Allocator<Config>::ThreadCache::unlock_after_fork_in_parent() {
  g_cache_registry<Config>.lock.unlock();
}

// Requires: the registry's lock held (by lock_for_fork, before the fork).
template <class Config>
void Allocator<Config>::ThreadCache::reset_after_fork_in_child() {
  ThreadCache* survivor = t_.cache;
  ThreadCache* c = g_cache_registry<Config>.live;
  while (c != nullptr) {
    ThreadCache* next = c->next_;
    if (c != survivor) {
      c->retire_moves();
      c->medium_.forget_claim();
      g_cache_registry<Config>.pool.release(c);
    }
    c = next;
  }
  g_cache_registry<Config>.live = survivor;
  g_cache_registry<Config>.live_count.store(survivor != nullptr ? 1 : 0, std::memory_order_relaxed);
  if (survivor != nullptr) survivor->prev_ = survivor->next_ = nullptr;
  g_cache_registry<Config>.lock.unlock();
}

template <class Config>
bool Allocator<Config>::ThreadCache::holds(unsigned size_class, const void* p) const {
  const CacheBin& bin = bins_[size_class];
  // (A sampled bin's hidden regions lie below its window: BinSampling.)
  const std::uint32_t hidden = sampling_[size_class].hidden.load(std::memory_order_relaxed);
  void* const* bottom = bin.slots - hidden;
  const std::uint32_t count = bin.count() + hidden;
  for (std::uint32_t i = 0; i < count; ++i)
    if (bottom[i] == p) return true;
  const std::uint32_t limit = bin.limit();
  for (std::uint32_t i = limit; i < limit + uses_[size_class].outgoing(); ++i)
    if (bin.slots[i] == p) return true;
  return false;
}

template <class Config>
void Allocator<Config>::ThreadCache::push_foreign(unsigned size_class, void* p, bool other_arena) {
  if (sampling_[size_class].armed) [[unlikely]]
    return with_bin_disarmed(size_class,
                             [&] { push_foreign_disarmed(size_class, p, other_arena); });
  push_foreign_disarmed(size_class, p, other_arena);
}

template <class Config>
void Allocator<Config>::ThreadCache::push_foreign_disarmed(unsigned size_class, void* p,
                                                           bool other_arena) {
  CacheBin& bin = bins_[size_class];
  BinUse& use = uses_[size_class];
  if (use.outgoing() >= foreign_limit(size_class) || bin.count() == bin.limit())
    send_home(size_class);
  // A bin full of the thread's own regions (send_home gave it back its whole limit) flushes
  // the older half of them.
  if (bin.count() == bin.limit()) flush(size_class, bin.limit() / 2);
  const std::uint32_t limit = bin.limit();
  bin.slots[limit - 1] = p;
  bin.set_limit(limit - 1);
  use.set_outgoing(use.outgoing() + 1);
  use.outgoing_elsewhere |= other_arena;
  if (bin.count_push()) [[unlikely]]  // toward the decay's tick, as push_to's pushes
    on_decay_tick();
}

template <class Config>
void Allocator<Config>::ThreadCache::send_home(unsigned size_class) {
  CacheBin& bin = bins_[size_class];
  BinUse& use = uses_[size_class];
  const std::uint32_t outgoing = use.outgoing();
  if (outgoing == 0) return;
  const std::uint32_t limit = bin.limit();
  // All of the cache's arena (the common case with one arena) in one batch, with no look at
  // the address map.
  if (use.outgoing_elsewhere) return_to_owners(arena_, bin.slots + limit, outgoing);
  else arena_->free_batch(bin.slots + limit, outgoing, "free");
  bin.set_limit(limit + outgoing);
  use.set_outgoing(0);
  use.outgoing_elsewhere = false;
}

template <class Config>
void Allocator<Config>::ThreadCache::own(void* const* regions, unsigned n) {
  // A refill's regions come a slab at a time in address order: those of one granule (up to 32
  // of the smallest classes) one after another, its bit set once.
  std::uintptr_t last = ~std::uintptr_t{0};
  for (unsigned i = 0; i < n; ++i) {
    const std::uintptr_t granule = reinterpret_cast<std::uintptr_t>(regions[i]) >> kLgOwnedGranule;
    if (granule == last) continue;
    last = granule;
    const std::uint64_t bit = std::uint64_t{1} << (granule % 64);
    const std::size_t word = (granule / 64) % kOwnedWords;
    owned_[word] |= bit;
    refilled_[word] |= bit;
  }
}

// Requires: the registry's lock held.
template <class Config>
void Allocator<Config>::ThreadCache::leave_orphans() {
  auto& registry = g_cache_registry<Config>;
  const std::uint64_t now = now_ms();
  if (now - registry.orphaned_since_ms >= kOwnedWindowMs) {
    registry.orphaned_before = registry.orphaned;
    registry.orphaned.fill(0);
    registry.orphaned_since_ms = now;
  }
  for (std::size_t w = 0; w < kOwnedWords; ++w) registry.orphaned[w] |= owned_[w] | refilled_[w];
}

// Requires: the registry's lock held.
template <class Config>
void Allocator<Config>::ThreadCache::adopt_orphans() {
  const auto& registry = g_cache_registry<Config>;
  for (std::size_t w = 0; w < kOwnedWords; ++w)
    owned_[w] = registry.orphaned[w] | registry.orphaned_before[w];
}

template <class Config>
void Allocator<Config>::ThreadCache::rotate_owned(std::uint64_t now) {
  owned_rotated_ms_ = now;
  t_.checks_owner = g_cache_registry<Config>.live_count.load(std::memory_order_relaxed) > 1;
  if (t_.checks_owner) owned_ = refilled_;
  else owned_.fill(~std::uint64_t{0});
  refilled_.fill(0);
}

template <class Config>
void* Allocator<Config>::ThreadCache::refill(unsigned size_class) {
  CacheBin& bin = bins_[size_class];
  BinUse& use = uses_[size_class];
  if (!use.ever_refilled) [[unlikely]]
    open_bin(size_class);
  // Outgoing regions that leave too little room for a batch go home first.
  if (bin.limit() < 2) send_home(size_class);
  // Half the limit, so that frees that follow find room; the whole limit for a bin its thread
  // only allocates from (a producer's), which takes as many regions per lock as a consumer
  // returns.
  const unsigned wanted = use.refills_unflushed >= kProducerRefills ? bin.limit() : bin.limit() / 2;
  const unsigned batch = wanted < kMaxRefill ? wanted : kMaxRefill;
  std::uint32_t count = arena_->alloc_batch(size_class, bin.slots, batch);
  if (count == 0) return nullptr;
  own(bin.slots, count);
  if (use.refills_unflushed < kProducerRefills) ++use.refills_unflushed;
  void* p = bin.slots[--count];
  bin.set_count(count);
  *static_cast<std::uintptr_t*>(p) = 0;
  return p;
}

// The outgoing regions, just above the limit, move up with it: they stay outgoing (sent home
// here, the refill that follows could take them straight back).
template <class Config>
void Allocator<Config>::ThreadCache::open_bin(unsigned size_class) {
  uses_[size_class].ever_refilled = true;
  const unsigned more = kCacheOpenedAtFirstRefill[size_class];  // a load, not two divisions
  if (more == 0) return;
  CacheBin& bin = bins_[size_class];
  const std::uint32_t limit = bin.limit();
  std::memmove(bin.slots + limit + more, bin.slots + limit,
               uses_[size_class].outgoing() * sizeof(void*));
  bin.set_limit(limit + more);
}

template <class Config>
void Allocator<Config>::ThreadCache::on_decay_tick() noexcept {
  on_push_tick(nullptr);
}

template <class Config>
void Allocator<Config>::ThreadCache::on_push_tick(CacheBin* bin) noexcept {
  if (armed_bins_ != 0) [[unlikely]]
    return bin != nullptr ? on_sampled_tick(bin) : on_sampled_tick();
  decay_tick_work();
}

template <class Config>
inline void Allocator<Config>::ThreadCache::decay_tick_work() noexcept {
  for (unsigned i = 0; i < kIdleBinsPerTick; ++i) {
    const unsigned c = idle_next_;
    idle_next_ = c + 1 == kNumClasses ? 0 : c + 1;
    const std::uint64_t fill = bins_[c].fill.load(std::memory_order_relaxed);
    // A push changes the pushes' field, a pop the count: an equal fill saw neither.
    if (fill == idle_seen_[c]) {
      send_home(c);
      if (bins_[c].count() != 0) flush_idle(c);
    }
    idle_seen_[c] = bins_[c].fill.load(std::memory_order_relaxed);
  }
  const std::uint64_t now = now_ms();
  if (now - owned_rotated_ms_ >= kOwnedWindowMs) rotate_owned(now);
  if (medium_.holds_any()) {
    if (now - medium_looked_ms_ >= kMediumLookMs) {
      medium_looked_ms_ = now;
      medium_.trim_idle([this](void* const* blocks, unsigned n) { give_back_medium(blocks, n); });
    }
  }
  Decay::tick_from_calls(now);
}

template <class Config>
void Allocator<Config>::ThreadCache::push_overflowing(CacheBin* full, void* p) noexcept {
  const auto size_class = unsigned(full - bins_);
  if (sampling_[size_class].armed) [[unlikely]]
    return with_bin_disarmed(size_class, [&] { push_overflowing_disarmed(full, p); });
  push_overflowing_disarmed(full, p);
}

template <class Config>
void Allocator<Config>::ThreadCache::push_overflowing_disarmed(CacheBin* full, void* p) noexcept {
  const auto size_class = unsigned(full - bins_);
  CacheBin& bin = *full;
  BinUse& use = uses_[size_class];
  // Outgoing regions go home first, and leave room for p.
  if (use.outgoing() != 0) {
    send_home(size_class);
    const std::uint32_t count = bin.count();
    bin.slots[count] = p;
    bin.set_count(count + 1);
    return;
  }
  const std::size_t size = kSizeClasses[size_class].size;
  const unsigned room = capacity(size_class) - bin.limit();
  const unsigned step = bin.limit() < room ? bin.limit() : room;
  std::uint32_t count = bin.count();
  // A bin grows only for a thread that allocates more of it than a batch (kGrowthRefills).
  if (step != 0 && use.refills_unflushed >= kGrowthRefills &&
      grown_bytes_ + step * size <= kBudgetBytes) {
    const unsigned limit = bin.limit() + step;
    void** own_room = grown_slots_ + kCacheSlotOffsets[size_class];
    if (bin.slots != own_room) {  // moves, to a packed room for the new limit or to its own
      void** room = own_room;
      if (limit <= kPackedGrowth && packed_taken_ + limit <= kCachePackedGrowthSlots) {
        room = packed_growths_ + packed_taken_;
        packed_taken_ += limit;
      }
      std::memcpy(room, bin.slots, count * sizeof(void*));
      bin.slots = room;
    }
    bin.set_limit(limit);
    grown_bytes_ += step * size;
  } else {
    // Half the stack, keeping the warm half; all of it for a bin its thread only frees into (a
    // consumer's: no refill since its last flush, which had none before it either), whose
    // regions it will not reuse: twice the regions per lock, and none held back.
    const bool consumer = !use.refilled() && use.unrefilled_flush;
    count = flush(size_class, consumer ? count : bin.limit() / 2);
  }
  bin.slots[count] = p;
  bin.set_count(count + 1);
}

template <class Config>
void Allocator<Config>::ThreadCache::flush_idle(unsigned size_class) {
  CacheBin& bin = bins_[size_class];
  BinUse& use = uses_[size_class];
  if (!arena_->free_idle_batch(bin.slots, bin.count())) return;  // the next look, then
  use.unrefilled_flush = !use.refilled();
  use.refills_unflushed = 0;
  bin.set_count(0);
}

template <class Config>
std::uint32_t Allocator<Config>::ThreadCache::flush(unsigned size_class, unsigned n) {
  CacheBin& bin = bins_[size_class];
  BinUse& use = uses_[size_class];
  const std::uint32_t count = bin.count();
  // The oldest entries (bottom of the stack) go back; the warm ones stay. (Outgoing regions
  // above the limit stay where they are.)
  arena_->free_batch(bin.slots, n, "free");
  use.unrefilled_flush = !use.refilled();
  use.refills_unflushed = 0;
  for (std::uint32_t i = n; i < count; ++i) bin.slots[i - n] = bin.slots[i];
  bin.set_count(count - n);
  return count - n;
}

// Each run of regions of one arena goes back in one batch: to this cache's arena under its
// lock, to any other through its inbox, without its lock.
template <class Config>
void Allocator<Config>::ThreadCache::return_to_owners(Arena* mine, void* const* regions,
                                                      unsigned n) {
  auto owner_of = [](const void* p) {
    return AddressMap::owner_of<Arena>(address_map().get(chunk_base_of(p)));
  };
  unsigned start = 0;
  Arena* owner = n != 0 ? owner_of(regions[0]) : nullptr;
  for (unsigned i = 1; i <= n; ++i) {
    Arena* next = i < n ? owner_of(regions[i]) : nullptr;
    if (next != owner) {
      if (owner == mine) owner->free_batch(regions + start, i - start, "free");
      else owner->free_remote(regions + start, i - start);
      start = i;
      owner = next;
    }
  }
}

template <class Config>
void Allocator<Config>::ThreadCache::flush_all() {
  for (unsigned c = 0; c < kNumClasses; ++c) {
    bool tick_due = false;  // (a tick owed by an emptied bin is dropped)
    if (sampling_[c].armed) [[unlikely]]
      disarm(c, tick_due);
    send_home(c);
    const std::uint32_t count = bins_[c].count();
    if (count != 0) flush(c, count);
    if (profiled_) arm(c);  // (an empty window: the bin's next pop takes the slow path)
  }
  flush_medium();
}

template <class Config>
bool Allocator<Config>::ThreadCache::push_medium_full(unsigned medium_class, void* p) {
  bool tick = false;
  if (!medium_.push_full(
          medium_class, p, [this](void* const* blocks, unsigned n) { give_back_medium(blocks, n); },
          tick))
    return false;
  store_entry(chunk_base_of(p), page_index_of(p),
              PageEntry::thread_cached(PageCount(MediumClasses::kPages[medium_class])));
  if (tick) medium_tick();
  return true;
}

template <class Config>
void Allocator<Config>::ThreadCache::medium_tick() noexcept {
  on_decay_tick();
}

template <class Config>
void* Allocator<Config>::ThreadCache::medium_tick_before(void* p) noexcept {
  on_decay_tick();
  return p;
}

template <class Config>
void Allocator<Config>::ThreadCache::flush_medium() {
  medium_.empty_all([this](void* const* blocks, unsigned n) { give_back_medium(blocks, n); });
}

template <class Config>
void Allocator<Config>::ThreadCache::give_back_medium(void* const* blocks, unsigned n) {
  arena_->free_thread_cached(blocks, n);
}

template <class Config>
void Allocator<Config>::ThreadCache::on_sampled_tick(CacheBin* bin) noexcept {
  const auto c = unsigned(bin - bins_);
  if (!sampling_[c].armed) return on_sampled_tick();  // (the decay's own tick)
  bool tick_due = false;
  disarm(c, tick_due);
  if (profiled_) arm(c);
  if (tick_due) on_sampled_tick();
}

template <class Config>
void Allocator<Config>::ThreadCache::on_sampled_tick() noexcept {
  bool armed_carried = false, tick_due = false;
  for (unsigned i = 0; i < armed_bins_; ++i) {
    // (An armed bin's field starts at its preset, 1 or more, and reads 0 only once it carried.)
    const unsigned c = armed_[i];
    if (bins_[c].pushes() != 0) continue;
    armed_carried = true;
    disarm(c, tick_due);  // (the last armed takes its place, looked at next; c goes last)
    if (profiled_) arm(c);
    --i;
  }
  if (armed_carried && !tick_due) return;
  // The decay's tick works on the kIdleBinsPerTick bins from idle_next_ alone, and changes
  // those it finds idle (a fill equal to the one it saw last): those are disarmed for it.
  // (The others it only looks at; an armed bin's fill changes at each arming.)
  unsigned looked[kIdleBinsPerTick];
  unsigned disarmed = 0;
  for (unsigned i = 0, c = idle_next_; i < kIdleBinsPerTick;
       ++i, c = c + 1 == kNumClasses ? 0 : c + 1) {
    if (!sampling_[c].armed || bins_[c].fill.load(std::memory_order_relaxed) != idle_seen_[c])
      continue;
    disarm(c, tick_due);
    looked[disarmed++] = c;
  }
  decay_tick_work();
  if (profiled_)
    for (unsigned i = 0; i < disarmed; ++i) arm(looked[i]);
}

template <class Config>
std::uint32_t Allocator<Config>::ThreadCache::draw_left(unsigned size_class) const {
  const std::uint64_t bytes = HeapProfiler::draw_distance();
  const std::uint64_t left = bytes / kSizeClasses[size_class].size + 1;
  return left > 0xffff'ffffu ? 0xffff'ffffu : std::uint32_t(left);
}

template <class Config>
void Allocator<Config>::ThreadCache::arm(unsigned size_class) noexcept {
  BinSampling& s = sampling_[size_class];
  if (s.armed) return;
  if (s.left == 0) s.left = draw_left(size_class);
  CacheBin& bin = bins_[size_class];
  const std::uint32_t regions = bin.count(), k = s.left;
  const std::uint32_t window = regions < k / 2 ? regions : k / 2;
  // m pushes to the tick, at least one: window + m <= k, and the decay's own tick no later.
  // (While armed, the decay ticks every kArmedTickPushes pushes: the preset is never 0, which
  // would not tell a field that carried from one that was set.)
  const std::uint32_t real = bin.pushes();
  const std::uint32_t to_tick = real < kArmedTickPushes ? kArmedTickPushes - real : 1;
  std::uint32_t m = k - window;
  if (m > to_tick) m = to_tick;
  const std::uint32_t hidden = regions - window;
  const std::uint32_t limit = bin.limit();
  bin.slots += hidden;
  bin.set(window, limit - hidden);
  s.real_pushes = real;
  s.preset = kDecayTickBinPushes - m;
  bin.set_pushes(s.preset);
  s.window = window;
  s.hidden.store(hidden, std::memory_order_relaxed);
  s.armed = true;
  s.place = std::uint8_t(armed_bins_);
  armed_[armed_bins_++] = std::uint8_t(size_class);
}

template <class Config>
void Allocator<Config>::ThreadCache::disarm(unsigned size_class, bool& tick_due) noexcept {
  BinSampling& s = sampling_[size_class];
  if (!s.armed) return;
  CacheBin& bin = bins_[size_class];
  const std::uint32_t count = bin.count();
  const std::uint32_t pushes = (bin.pushes() - s.preset) & (kDecayTickBinPushes - 1);
  const std::uint32_t pops = s.window + pushes - count;  // (arm's bound: pops < left)
  s.left -= pops;
  const std::uint32_t hidden = s.hidden.load(std::memory_order_relaxed);
  const std::uint32_t limit = bin.limit() + hidden;
  bin.slots -= hidden;
  bin.set(count + hidden, limit);
  const std::uint32_t total = s.real_pushes + pushes;
  const bool due = total >= kArmedTickPushes;
  tick_due |= due;
  bin.set_pushes(due ? total - kArmedTickPushes : total);
  s.hidden.store(0, std::memory_order_relaxed);
  s.armed = false;
  const unsigned last = armed_[--armed_bins_];
  armed_[s.place] = std::uint8_t(last);
  sampling_[last].place = s.place;
}

template <class Config>
template <class Work>
void Allocator<Config>::ThreadCache::with_bin_disarmed(unsigned size_class, Work work,
                                                       bool tick) noexcept {
  bool tick_due = false;
  disarm(size_class, tick_due);
  work();
  if (profiled_) arm(size_class);
  if (tick_due && tick) on_decay_tick();
}

template <class Config>
void* Allocator<Config>::ThreadCache::pop_sampling(unsigned size_class, bool& sampled) {
  follow_profiling(HeapProfiler::follow_active());
  sampled = false;
  bool tick_due = false;
  disarm(size_class, tick_due);
  void* p = nullptr;
  BinSampling& s = sampling_[size_class];
  if (profiled_) {
    if (s.left == 0) s.left = draw_left(size_class);
    if (s.left == 1) {
      sampled = true;
      s.left = draw_left(size_class);
    } else {
      --s.left;
    }
  } else {
    s.left = 0;  // (a new countdown when the thread is profiled again)
  }
  if (!sampled) p = pop(size_class);
  if (profiled_) arm(size_class);
  if (tick_due) on_decay_tick();
  return p;
}

}  // namespace pagemalloc
