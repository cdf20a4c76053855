// Huge extents: carving, coalescing, growth in place and remapping.
#pragma once

#include "huge/huge.h"

#include "chunks/address_map.h"
#include "os/clock.h"
#include "pagemap/pages.h"
#include "support/diagnostics.h"
#include "support/options.h"

namespace pagemalloc {
namespace huge_detail {

constexpr std::size_t round_up(std::size_t n, std::size_t to) { return (n + to - 1) & ~(to - 1); }

template <class HugeExtent>
std::byte* last_granule(const HugeExtent* e) {
  return e->base + e->reserved - kChunkSize;
}

}  // namespace huge_detail

template <class Config>
typename Allocator<Config>::HugeManager* Allocator<Config>::HugeManager::owner_of(const void* p) {
  const std::uintptr_t v = address_map().get(p);
  if (AddressMap::tag_of(v) != AddressMap::kHuge) return nullptr;
  return AddressMap::owner_of<HugeExtent>(v)->owner;
}

// Requires: lock_ held. nullptr when the OS refuses memory.
template <class Config>
typename Allocator<Config>::HugeExtent* Allocator<Config>::HugeManager::new_record() {
  HugeExtent* e = records_.acquire();
  if (e != nullptr) e->owner = this;
  return e;
}

// Requires: lock_ held. Points the extent's first and last granules at its record.
template <class Config>
void Allocator<Config>::HugeManager::publish(HugeExtent* e) {
  address_map().set(e->base, AddressMap::tag(e, AddressMap::kHuge));
  address_map().set(huge_detail::last_granule(e), AddressMap::tag(e, AddressMap::kHuge));
}

template <class Config>
void Allocator<Config>::HugeManager::unpublish(HugeExtent* e) {
  address_map().set(e->base, 0);
  address_map().set(huge_detail::last_granule(e), 0);
}

template <class Config>
typename Allocator<Config>::HugeExtent* Allocator<Config>::HugeManager::free_neighbour_after(
    const HugeExtent* e) {
  std::uintptr_t v = address_map().get(e->base + e->reserved);
  if (AddressMap::tag_of(v) != AddressMap::kHuge) return nullptr;
  auto* n = AddressMap::owner_of<HugeExtent>(v);
  return (n->owner == this && !n->in_use && n->base == e->base + e->reserved) ? n : nullptr;
}

template <class Config>
typename Allocator<Config>::HugeExtent* Allocator<Config>::HugeManager::free_neighbour_before(
    const HugeExtent* e) {
  std::uintptr_t v = address_map().get(e->base - kChunkSize);
  if (AddressMap::tag_of(v) != AddressMap::kHuge) return nullptr;
  auto* n = AddressMap::owner_of<HugeExtent>(v);
  return (n->owner == this && !n->in_use && n->base + n->reserved == e->base) ? n : nullptr;
}

// Requires: lock_ held; e is not on the free list. Coalesces e with free neighbours and puts
// the result at the young end of the free list.
template <class Config>
void Allocator<Config>::HugeManager::add_free(HugeExtent* e) {
  e->in_use = false;
  cached_ += e->reserved;
  if (HugeExtent* before = free_neighbour_before(e)) {
    free_.remove(before);
    unpublish(before);
    unpublish(e);
    before->reserved += e->reserved;
    records_.release(e);
    e = before;
  }
  if (HugeExtent* after = free_neighbour_after(e)) {
    free_.remove(after);
    unpublish(after);
    unpublish(e);
    e->reserved += after->reserved;
    records_.release(after);
  }
  e->freed_at_ms = now_ms_;
  publish(e);
  free_.push_back(e);
}

// Requires: lock_ held; e live. Gives the extent's address space past `keep` bytes (a
// multiple of kChunkSize) to the free list.
template <class Config>
void Allocator<Config>::HugeManager::split_off_free_tail(HugeExtent* e, std::size_t keep) {
  if (keep >= e->reserved) return;
  HugeExtent* tail = new_record();
  if (tail == nullptr) return;  // keep the whole extent: nothing is lost
  unpublish(e);
  tail->base = e->base + keep;
  tail->reserved = e->reserved - keep;
  e->reserved = keep;
  publish(e);
  publish(tail);
  add_free(tail);
}

template <class Config>
void* Allocator<Config>::HugeManager::alloc(std::size_t bytes, std::size_t align, bool& zeroed) {
  const std::size_t reserved = huge_detail::round_up(bytes, kChunkSize);
  Growth growth(neighbours_);
  LockGuard guard(lock_);
  tick();
  HugeExtent* best = nullptr;
  if (align <= kChunkSize) {
    for (HugeExtent* e = free_.front(); e != nullptr; e = e->next)
      if (e->reserved >= reserved && (best == nullptr || e->reserved < best->reserved)) best = e;
  }
  if (best != nullptr) {
    free_.remove(best);
    cached_ -= best->reserved;
    best->in_use = true;
    split_off_free_tail(best, reserved);
    zeroed = false;
  } else {
    best = new_record();
    if (best == nullptr) return nullptr;
    void* p = os_.reserve(reserved, align > kChunkSize ? align : kChunkSize);
    if (p == nullptr) {
      records_.release(best);
      return nullptr;
    }
    best->base = static_cast<std::byte*>(p);
    best->reserved = reserved;
    best->in_use = true;
    mapped_ += reserved;
    growth.add(reserved);
    publish(best);
    zeroed = true;
  }
  best->usable = huge_detail::round_up(bytes, kPageSize);
  allocated_ += best->usable;
  ++blocks_;
  live_.push_back(best);
  return best->base;
}

// Requires: lock_ held.
template <class Config>
typename Allocator<Config>::HugeExtent* Allocator<Config>::HugeManager::live_extent(const void* p) {
  std::uintptr_t v = address_map().get(p);
  if (AddressMap::tag_of(v) != AddressMap::kHuge) return nullptr;
  auto* e = AddressMap::owner_of<HugeExtent>(v);
  return (e->base == p && e->in_use) ? e : nullptr;
}

template <class Config>
void Allocator<Config>::HugeManager::free(void* p, const char* call) {
  LockGuard guard(lock_);
  HugeExtent* e = live_extent(p);
  if (e == nullptr) {
    std::uintptr_t v = address_map().get(p);
    bool was_huge = AddressMap::tag_of(v) == AddressMap::kHuge &&
                    AddressMap::owner_of<HugeExtent>(v)->base == p;
    lock_.unlock();
    report_misuse(call, p, was_huge ? "double free" : "not allocated by pagemalloc");
  }
  tick();
  live_.remove(e);
  allocated_ -= e->usable;
  --blocks_;
  e->usable = 0;
  add_free(e);
}

template <class Config>
void Allocator<Config>::HugeManager::free_all() {
  LockGuard guard(lock_);
  now_ms_ = now_ms();
  while (HugeExtent* e = live_.front()) {
    live_.remove(e);
    e->usable = 0;
    add_free(e);
  }
  allocated_ = 0;
  blocks_ = 0;
  tick();
}

template <class Config>
std::size_t Allocator<Config>::HugeManager::usable_size(const void* p) {
  LockGuard guard(lock_);
  HugeExtent* e = live_extent(p);
  return e == nullptr ? 0 : e->usable;
}

template <class Config>
bool Allocator<Config>::HugeManager::resize_in_place(void* p, std::size_t bytes) {
  const std::size_t usable = huge_detail::round_up(bytes, kPageSize);
  const std::size_t reserved = huge_detail::round_up(bytes, kChunkSize);
  Growth growth(neighbours_);
  LockGuard guard(lock_);
  HugeExtent* e = live_extent(p);
  if (e == nullptr) return false;
  tick();
  if (reserved > e->reserved) {
    const std::size_t need = reserved - e->reserved;
    HugeExtent* after = free_neighbour_after(e);
    if (after != nullptr && after->reserved >= need) {
      free_.remove(after);
      cached_ -= after->reserved;
      unpublish(after);
      unpublish(e);
      e->reserved += after->reserved;
      records_.release(after);
      publish(e);
      split_off_free_tail(e, reserved);
    } else if (os_.grow(e->base, e->reserved, reserved)) {
      unpublish(e);
      mapped_ += need;
      growth.add(need);
      e->reserved = reserved;
      publish(e);
    } else {
      return false;
    }
  } else if (reserved < e->reserved) {
    split_off_free_tail(e, reserved);
  }
  allocated_ += usable;
  allocated_ -= e->usable;
  e->usable = usable;
  return true;
}

template <class Config>
void* Allocator<Config>::HugeManager::remap(void* p, std::size_t bytes) {
  const std::size_t reserved = huge_detail::round_up(bytes, kChunkSize);
  Growth growth(neighbours_);
  LockGuard guard(lock_);
  HugeExtent* e = live_extent(p);
  if (e == nullptr) return nullptr;
  void* to = os_.reserve(reserved, kChunkSize);
  if (to == nullptr) return nullptr;
  if (!os_.move(e->base, e->reserved, to, reserved)) {
    os_.release(to, reserved);
    return nullptr;
  }
  unpublish(e);
  if (reserved > e->reserved) growth.add(reserved - e->reserved);
  mapped_ += reserved;
  mapped_ -= e->reserved;
  e->base = static_cast<std::byte*>(to);
  e->reserved = reserved;
  allocated_ += huge_detail::round_up(bytes, kPageSize);
  allocated_ -= e->usable;
  e->usable = huge_detail::round_up(bytes, kPageSize);
  publish(e);
  ++moved_;
  return to;
}

template <class Config>
void Allocator<Config>::HugeManager::advance_decay(bool wait) {
  if (wait) lock_.lock();
  else if (!lock_.try_lock()) return;
  tick();
  lock_.unlock();
}

// Requires: lock_ held.
template <class Config>
void Allocator<Config>::HugeManager::tick() {
  const long decay = options().decay_ms.load(std::memory_order_relaxed);
  now_ms_ = now_ms();
  if (decay < 0) return;
  if (decay == 0 || now_ms_ - last_purge_ms_ >= purge_interval_ms(decay)) {
    purge(std::uint64_t(decay));
    last_purge_ms_ = now_ms_;
  }
}

// Requires: lock_ held; e on the free list. Unmaps it and drops its record.
template <class Config>
void Allocator<Config>::HugeManager::unmap_free(HugeExtent* e) {
  free_.remove(e);
  unpublish(e);
  os_.release(e->base, e->reserved);
  cached_ -= e->reserved;
  mapped_ -= e->reserved;
  purged_ += e->reserved;
  records_.release(e);
}

// Requires: lock_ held. Unmaps free extents older than min_age_ms.
template <class Config>
void Allocator<Config>::HugeManager::purge(std::uint64_t min_age_ms) {
  while (HugeExtent* e = free_.front()) {
    if (now_ms_ - e->freed_at_ms < min_age_ms) break;
    unmap_free(e);
  }
}

template <class Config>
void* Allocator<Config>::HugeManager::take_chunk() {
  LockGuard guard(lock_);
  HugeExtent* e = free_.front();
  if (e == nullptr) return nullptr;
  std::byte* chunk = e->base;
  if (e->reserved == kChunkSize) {
    free_.remove(e);
    unpublish(e);
    records_.release(e);
  } else {  // the rest stays free, under the same record and in the same place
    unpublish(e);
    e->base += kChunkSize;
    e->reserved -= kChunkSize;
    publish(e);
  }
  cached_ -= kChunkSize;
  mapped_ -= kChunkSize;
  return chunk;
}

template <class Config>
std::size_t Allocator<Config>::HugeManager::purge_all() {
  LockGuard guard(lock_);
  now_ms_ = now_ms();
  const std::size_t before = purged_;
  purge(0);
  return purged_ - before;
}

template <class Config>
HugeStats Allocator<Config>::HugeManager::stats() {
  LockGuard guard(lock_);
  return HugeStats{allocated_, blocks_, mapped_, cached_, purged_, moved_, records_.mapped_bytes()};
}

}  // namespace pagemalloc
