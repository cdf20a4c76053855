// Thread caches: creation, refill and flush against the arena, and teardown at thread exit.
#include "thread_cache.h"

#include <pthread.h>

#include <atomic>
#include <cstring>

#include "address_map.h"
#include "arena.h"
#include "lock.h"
#include "meta_pool.h"
#include "pagemap/intrusive_list.h"

namespace pagemalloc {
namespace {

enum class CacheState : std::uint8_t { None, Creating, Active, Exited };

constinit thread_local CacheState t_state = CacheState::None;

struct CacheRegistry {
  Lock lock;
  MetaPool<ThreadCache> pool;
  ThreadCache* live = nullptr;  // head of the list of live caches
  ThreadCache::Moves retired;   // the moves counted by caches whose threads are gone
  pthread_key_t key{};
  std::atomic<bool> key_ready{false};
};
constinit CacheRegistry registry;

}  // namespace

ThreadCache::ThreadCache() {
  for (unsigned c = 0; c < kNumClasses; ++c) {
    bins_[c].slots = initial_slots_ + kCacheInitialOffsets[c];
    bins_[c].limit = initial_limit(c);
  }
}

ThreadCache* ThreadCache::create(Arena& arena) {
  if (t_state != CacheState::None) return nullptr;
  t_state = CacheState::Creating;  // allocations made below bypass the cache
  ThreadCache* cache = nullptr;
  {
    LockGuard guard(registry.lock);
    if (!registry.key_ready.load(std::memory_order_acquire)) {
      if (pthread_key_create(&registry.key, &ThreadCache::on_thread_exit) == 0)
        registry.key_ready.store(true, std::memory_order_release);
    }
    if (registry.key_ready.load(std::memory_order_relaxed)) cache = registry.pool.acquire();
    if (cache != nullptr) {
      cache->next_ = registry.live;
      if (registry.live != nullptr) registry.live->prev_ = cache;
      registry.live = cache;
    }
  }
  if (cache == nullptr) {
    t_state = CacheState::Exited;  // no cache for this thread: every call goes to the arena
    return nullptr;
  }
  cache->arena_ = &arena;
  pthread_setspecific(registry.key, cache);
  current_ = cache;
  t_state = CacheState::Active;
  return cache;
}

void ThreadCache::on_thread_exit(void* p) {
  auto* cache = static_cast<ThreadCache*>(p);
  current_ = nullptr;
  t_state = CacheState::Exited;
  cache->flush_all();
  cache->arena_->thread_left();  // automatic_arenas.h: the arena has one thread fewer
  LockGuard guard(registry.lock);
  if (cache->prev_ != nullptr) cache->prev_->next_ = cache->next_;
  else registry.live = cache->next_;
  if (cache->next_ != nullptr) cache->next_->prev_ = cache->prev_;
  cache->retire_moves();
  registry.pool.release(cache);
}

// Requires: the registry's lock held.
void ThreadCache::retire_moves() {
  registry.retired.moved += moved_.load(std::memory_order_relaxed);
  registry.retired.copied += copied_.load(std::memory_order_relaxed);
}

ThreadCache::Moves ThreadCache::moves_by_all() {
  LockGuard guard(registry.lock);
  Moves sum = registry.retired;
  for (ThreadCache* c = registry.live; c != nullptr; c = c->next_) {
    sum.moved += c->moved_.load(std::memory_order_relaxed);
    sum.copied += c->copied_.load(std::memory_order_relaxed);
  }
  return sum;
}

std::size_t ThreadCache::bytes_cached_by_all() {
  LockGuard guard(registry.lock);
  std::size_t bytes = 0;
  for (ThreadCache* c = registry.live; c != nullptr; c = c->next_)
    for (unsigned k = 0; k < kNumClasses; ++k)
      bytes +=
          std::size_t(c->bins_[k].count.load(std::memory_order_relaxed)) * kSizeClasses[k].size;
  return bytes;
}

void ThreadCache::lock_for_fork() { registry.lock.lock(); }

void ThreadCache::unlock_after_fork_in_parent() { registry.lock.unlock(); }

// Requires: the registry's lock held (by lock_for_fork, before the fork).
void ThreadCache::reset_after_fork_in_child() {
  ThreadCache* survivor = current_;
  ThreadCache* c = registry.live;
  while (c != nullptr) {
    ThreadCache* next = c->next_;
    if (c != survivor) {
      c->retire_moves();
      registry.pool.release(c);
    }
    c = next;
  }
  registry.live = survivor;
  if (survivor != nullptr) survivor->prev_ = survivor->next_ = nullptr;
  registry.lock.unlock();
}

bool ThreadCache::holds(unsigned size_class, const void* p) const {
  const Bin& bin = bins_[size_class];
  const std::uint32_t count = bin.count.load(std::memory_order_relaxed);
  for (std::uint32_t i = 0; i < count; ++i)
    if (bin.slots[i] == p) return true;
  return false;
}

void ThreadCache::tick_decay() {
  ticks_left_ = kDecayTickCalls;
  decay_tick_from_calls();
}

void* ThreadCache::refill(unsigned size_class) {
  Bin& bin = bins_[size_class];
  const unsigned batch = bin.limit / 2 < kMaxRefill ? bin.limit / 2 : kMaxRefill;
  std::uint32_t count = arena_->alloc_batch(size_class, bin.slots, batch);
  if (count == 0) return nullptr;
  bin.refilled = true;
  void* p = bin.slots[--count];
  bin.count.store(count, std::memory_order_relaxed);
  *static_cast<std::uintptr_t*>(p) = 0;
  return p;
}

void ThreadCache::push_overflowing(unsigned size_class, void* p) {
  Bin& bin = bins_[size_class];
  const std::size_t size = kSizeClasses[size_class].size;
  const unsigned room = capacity(size_class) - bin.limit;
  const unsigned step = bin.limit < room ? bin.limit : room;
  std::uint32_t count = bin.count.load(std::memory_order_relaxed);
  // A bin that holds other arenas' regions (a thread freeing what others allocated) does not
  // grow: what it would keep there is memory its owners cannot reuse.
  if (step != 0 && !bin.mixed && grown_bytes_ + step * size <= kBudgetBytes) {
    const unsigned limit = bin.limit + step;
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
    bin.limit = limit;
    grown_bytes_ += step * size;
  } else {
    count = flush(size_class, bin.limit / 2);
  }
  bin.slots[count] = p;
  bin.count.store(count + 1, std::memory_order_relaxed);
}

std::uint32_t ThreadCache::flush(unsigned size_class, unsigned n) {
  Bin& bin = bins_[size_class];
  const std::uint32_t count = bin.count.load(std::memory_order_relaxed);
  // The oldest entries (bottom of the stack) go back; the warm ones stay.
  if (bin.mixed) [[unlikely]]
    return_to_owners(arena_, bin.slots, n);
  else arena_->free_batch(bin.slots, n, "free");
  bin.refilled = false;
  for (std::uint32_t i = n; i < count; ++i) bin.slots[i - n] = bin.slots[i];
  bin.count.store(count - n, std::memory_order_relaxed);
  if (count == n) bin.mixed = false;
  return count - n;
}

// Each run of regions of one arena goes back in one batch: to this cache's arena under its
// lock, to any other through its inbox, without its lock.
void ThreadCache::return_to_owners(Arena* mine, void* const* regions, unsigned n) {
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

void ThreadCache::flush_all() {
  for (unsigned c = 0; c < kNumClasses; ++c) {
    const std::uint32_t count = bins_[c].count.load(std::memory_order_relaxed);
    if (count != 0) flush(c, count);
  }
}

}  // namespace pagemalloc
