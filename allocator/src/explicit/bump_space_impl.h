// The bump side of an explicit arena: spans lent to leases and cursors, size maps checked on
// every operation, reset by moving the epoch, chunks returned on destroy.
#pragma once

#include "explicit/bump_space.h"

#include <pthread.h>

#include <algorithm>

#include "support/diagnostics.h"
#include "support/options.h"

namespace pagemalloc {

template <class Config>
void Allocator<Config>::BumpSpace::give_back_at_exit() {
  static constinit thread_local bool t_registered = false;
  if (t_registered) return;
  t_registered = true;
  pthread_once(&lease_key_once_,
               [] { pthread_key_create(&lease_key_, [](void*) { give_back_leases(); }); });
  pthread_setspecific(lease_key_, &t_registered);
}

template <class Config>
void Allocator<Config>::BumpSpace::give_back_leases() {
  for (BumpLease& lease : t_leases_) {
    if (BumpSpace* space = lease.space) {
      LockGuard guard(space->lock_);
      space->take_back(lease.cursor, false);
      space->take_back_frees(lease);
      space->unlink(lease);
    }
    lease = BumpLease{};
  }
}

template <class Config>
void* Allocator<Config>::BumpSpace::allocate_with_new_lease(BumpLease& lease, std::size_t size,
                                                            std::size_t align) {
  give_back_at_exit();
  // The slot's lease of another arena (or of an older epoch of this one) goes back first.
  if (BumpSpace* previous = lease.space; previous != nullptr) {
    LockGuard guard(previous->lock_);
    previous->take_back(lease.cursor, previous != this);
    previous->take_back_frees(lease);
    previous->unlink(lease);
  }
  const bool mine = lease.space == this;
  lease.space = nullptr;
  if (!mine) lease.cursor = pm_bump_cursor{};  // the span doubles only within one arena
  lease.cursor.arena = index_;
  LockGuard guard(lock_);
  if (!lend_region(lease.cursor, size, align)) return nullptr;
  lease.space = this;
  link(lease);
  return bump(lease.cursor, size, align);
}

template <class Config>
void* Allocator<Config>::BumpSpace::allocate_from_cursor(pm_bump_cursor& cursor, std::size_t size,
                                                         std::size_t align) {
  // A span of the current epoch with room serves an aligned block with no lock too.
  if (cursor.epoch == epoch_.load(std::memory_order_acquire)) {
    if (void* p = bump(cursor, size, align)) return p;
  }
  LockGuard guard(lock_);
  take_back(cursor, false);  // the span is full: its counts first (none of an older epoch)
  cursor.arena = index_;
  if (!lend_region(cursor, size, align)) return nullptr;
  return bump(cursor, size, align);
}

template <class Config>
void Allocator<Config>::BumpSpace::flush(pm_bump_cursor& cursor) {
  if (cursor.epoch == epoch_.load(std::memory_order_acquire)) {
    bumped_.fetch_add(cursor.blocks, std::memory_order_relaxed);
    bumped_bytes_.fetch_add(bumped_bytes(cursor), std::memory_order_relaxed);
  }
  cursor.blocks = 0;
  cursor.skipped = 0;
  cursor.begin = cursor.next;
}

template <class Config>
bool Allocator<Config>::BumpSpace::lend_region(pm_bump_cursor& cursor, std::size_t size,
                                               std::size_t align) {
  const std::uint32_t epoch = epoch_.load(std::memory_order_relaxed);
  // The span doubles across resets too: an owner that fills a chunk per round soon takes
  // one chunk per round.
  const std::size_t wanted =
      cursor.span != 0 ? std::min<std::size_t>(2 * std::size_t{cursor.span}, kBumpMaxSpan) : 1;
  char* begin = nullptr;
  char* end = nullptr;
  unsigned span = 0;
  // A rest given back that cannot hold this block is dropped (its bytes wait for the reset).
  while (begin == nullptr && partial_count_ > 0) {
    const Partial p = partial_[--partial_count_];
    if (std::size_t(p.end - p.next) >= bump_stride(size) + align) {
      begin = p.next;
      end = p.end;
      span = 1;
    }
  }
  if (begin == nullptr) {
    if (next_region_ == kBumpRegionsPerChunk) {
      ++next_chunk_;
      next_region_ = 0;
    }
    if (next_chunk_ == chunks_.all().size() && map_chunk() == nullptr) return false;
    const std::size_t regions = std::min(wanted, kBumpRegionsPerChunk - next_region_);
    auto* first =
        reinterpret_cast<char*>(chunks_.all()[next_chunk_]) + next_region_ * kBumpRegionSize;
    next_region_ += regions;
    regions_lent_ += regions;
    span = unsigned(regions);
    // The chunk's first bytes hold its size map's address: no block starts on a chunk
    // boundary (those are huge blocks' addresses).
    begin = next_region_ == regions ? first + kBumpChunkHeader : first;
    end = first + regions * kBumpRegionSize;
  }
  const std::byte* chunk = chunk_base_of(begin);
  std::uint16_t* map;
  std::memcpy(&map, chunk, sizeof map);
  cursor.next = begin;
  cursor.begin = begin;
  cursor.end = end;
  cursor.size_map = BumpSizeMap::bias(chunk, map);
  cursor.blocks = 0;
  cursor.skipped = 0;
  cursor.epoch = epoch;
  cursor.span = span;
  cursor.freeable = freeable_ ? 1u : 0u;
  return true;
}

template <class Config>
void Allocator<Config>::BumpSpace::take_back(pm_bump_cursor& cursor, bool keep_rest) {
  if (cursor.epoch != epoch_.load(std::memory_order_relaxed)) return;
  bumped_.fetch_add(cursor.blocks, std::memory_order_relaxed);
  bumped_bytes_.fetch_add(bumped_bytes(cursor), std::memory_order_relaxed);
  cursor.blocks = 0;
  cursor.skipped = 0;
  cursor.begin = cursor.next;
  // Whatever can still hold a block of 256 bytes is worth a later lease.
  if (keep_rest && cursor.end - cursor.next >= 256 && partial_count_ < kMaxPartial)
    partial_[partial_count_++] = Partial{cursor.next, cursor.end};
  cursor.next = cursor.end = cursor.begin = nullptr;
}

template <class Config>
void Allocator<Config>::BumpSpace::link(BumpLease& lease) {
  lease.next = leases_;
  leases_ = &lease;
}

template <class Config>
void Allocator<Config>::BumpSpace::unlink(BumpLease& lease) {
  for (BumpLease** at = &leases_; *at != nullptr; at = &(*at)->next) {
    if (*at == &lease) {
      *at = lease.next;
      break;
    }
  }
  lease.next = nullptr;
}

template <class Config>
std::byte* Allocator<Config>::BumpSpace::map_chunk() {
  auto* chunk = static_cast<std::byte*>(os_.reserve(kChunkSize, kChunkSize));
  if (chunk == nullptr) return nullptr;
  void* map = os_.reserve(kBumpSizeMapBytes, kPageSize);
  if (map == nullptr) {
    os_.release(chunk, kChunkSize);
    return nullptr;
  }
  std::memcpy(chunk, &map, sizeof map);
  if (!chunks_.add(chunk)) {
    os_.release(map, kBumpSizeMapBytes);
    os_.release(chunk, kChunkSize);
    return nullptr;
  }
  if (!address_map().set(chunk, AddressMap::tag(this, AddressMap::kBumpChunk))) {
    chunks_.remove(chunk);
    os_.release(map, kBumpSizeMapBytes);
    os_.release(chunk, kChunkSize);
    return nullptr;
  }
  return chunk;
}

template <class Config>
void Allocator<Config>::BumpSpace::clear_size_maps() {
  const auto chunks = chunks_.all();
  const std::size_t used = next_region_ == 0 ? next_chunk_ : next_chunk_ + 1;
  for (std::size_t i = 0; i < used && i < chunks.size(); ++i) {
    void* map;
    std::memcpy(&map, chunks[i], sizeof map);
    std::memset(map, 0, kBumpSizeMapBytes);
  }
}

template <class Config>
typename Allocator<Config>::BumpSpace::Check Allocator<Config>::BumpSpace::check(
    const void* p, std::uint16_t*& entry) const {
  const auto address = reinterpret_cast<std::uintptr_t>(p);
  if (address % kBumpGranule != 0 ||
      address - reinterpret_cast<std::uintptr_t>(chunk_base_of(p)) < kBumpChunkHeader)
    return Check::NotABlock;
  entry = BumpSizeMap::entry(p);
  if (*entry == 0) return Check::NoBlock;
  return (*entry & BumpSizeMap::kFreed) != 0 ? Check::Freed : Check::Live;
}

template <class Config>
void Allocator<Config>::BumpSpace::report(Check what, const char* call, const void* p,
                                          bool freeing) {
  switch (what) {
    case Check::NoBlock:
      report_misuse(call, p,
                    freeing ? "double free (or not a block: its arena was reset?)"
                            : "not a live block (freed, or its arena was reset?)");
    case Check::Freed:
      report_misuse(call, p, freeing ? "double free" : "not a live block (already freed?)");
    default: report_misuse(call, p, "not the start of a block");
  }
}

template <class Config>
std::size_t Allocator<Config>::BumpSpace::usable_size(const void* p, const char* call) const {
  std::uint16_t* entry = nullptr;
  const Check c = check(p, entry);
  if (c != Check::Live) [[unlikely]]
    report(c, call, p, false);
  return std::size_t{*entry} * kBumpGranule;
}

template <class Config>
void Allocator<Config>::BumpSpace::free(void* p, const char* call) {
  std::uint16_t* entry = nullptr;
  const Check c = check(p, entry);
  if (c != Check::Live) [[unlikely]]
    report(c, call, p, true);
  if (!freeable_) return;  // PM_ARENA_NO_FREE: the block stays until the reset
  const std::size_t bytes = std::size_t{*entry} * kBumpGranule;
  *entry = std::uint16_t(*entry | BumpSizeMap::kFreed);
  if (BumpLease* lease = counting_lease()) [[likely]] {
    std::atomic_ref<std::size_t>(lease->freed_blocks)
        .store(lease->freed_blocks + 1, std::memory_order_relaxed);
    std::atomic_ref<std::size_t>(lease->freed_bytes)
        .store(lease->freed_bytes + bytes, std::memory_order_relaxed);
    return;
  }
  freed_bytes_.fetch_add(bytes, std::memory_order_relaxed);
  freed_.fetch_add(1, std::memory_order_relaxed);
}

template <class Config>
typename Allocator<Config>::BumpLease* Allocator<Config>::BumpSpace::counting_lease() {
  BumpLease& lease = t_leases_[index_ % kBumpLeaseSlots];
  const std::uint32_t epoch = epoch_.load(std::memory_order_acquire);
  if (lease.space == this && lease.cursor.epoch == epoch) [[likely]]
    return &lease;
  if (lease.space != nullptr && lease.space != this) return nullptr;
  // The slot is free, or this arena's lease is of an older epoch: a lease with no span, only
  // counting (its next allocation takes a span).
  give_back_at_exit();
  LockGuard guard(lock_);
  if (lease.space == nullptr) link(lease);
  lease.space = this;
  lease.cursor = pm_bump_cursor{};
  lease.cursor.arena = index_;
  lease.cursor.epoch = epoch_.load(std::memory_order_relaxed);
  lease.freed_blocks = 0;
  lease.freed_bytes = 0;
  return &lease;
}

template <class Config>
void Allocator<Config>::BumpSpace::take_back_frees(BumpLease& lease) {
  if (lease.cursor.epoch == epoch_.load(std::memory_order_relaxed)) {
    freed_.fetch_add(lease.freed_blocks, std::memory_order_relaxed);
    freed_bytes_.fetch_add(lease.freed_bytes, std::memory_order_relaxed);
  }
  lease.freed_blocks = 0;
  lease.freed_bytes = 0;
}

template <class Config>
bool Allocator<Config>::BumpSpace::resize_in_place(void* p, std::size_t size, const char* call) {
  std::uint16_t* entry = nullptr;
  const Check c = check(p, entry);
  if (c != Check::Live) [[unlikely]]
    report(c, call, p, false);
  const std::size_t old_stride = std::size_t{*entry} * kBumpGranule;
  const std::size_t stride = bump_stride(size);
  if (size > kBumpMaxBlock) return false;
  if (stride <= old_stride) {
    *entry = std::uint16_t(stride / kBumpGranule);  // the tail waits for the reset
    freed_bytes_.fetch_add(old_stride - stride, std::memory_order_relaxed);
    return true;
  }
  // Growth: only the block this thread bumped last, into the rest of its lease's span.
  BumpLease& lease = t_leases_[index_ % kBumpLeaseSlots];
  auto* block = static_cast<char*>(p);
  if (lease.space != this || lease.cursor.epoch != epoch_.load(std::memory_order_acquire) ||
      block + old_stride != lease.cursor.next || stride > std::size_t(lease.cursor.end - block))
    return false;
  std::atomic_ref<char*>(lease.cursor.next).store(block + stride, std::memory_order_relaxed);
  *entry = std::uint16_t(stride / kBumpGranule);
  return true;
}

template <class Config>
void Allocator<Config>::BumpSpace::advance_epoch() {
  std::uint32_t next = epoch_.load(std::memory_order_relaxed) + 1;
  if (next == 0) ++next;  // 0 is a new cursor's: never current
  epoch_.store(next, std::memory_order_release);
}

template <class Config>
void Allocator<Config>::BumpSpace::reset() {
  LockGuard guard(lock_);
  if (options().checks.load(std::memory_order_relaxed)) clear_size_maps();
  advance_epoch();
  next_chunk_ = 0;
  next_region_ = 0;
  regions_lent_ = 0;
  partial_count_ = 0;
  bumped_.store(0, std::memory_order_relaxed);
  freed_.store(0, std::memory_order_relaxed);
  bumped_bytes_.store(0, std::memory_order_relaxed);
  freed_bytes_.store(0, std::memory_order_relaxed);
}

template <class Config>
void Allocator<Config>::BumpSpace::release_all() {
  reset();
  LockGuard guard(lock_);
  while (!chunks_.all().empty()) {
    std::byte* chunk = chunks_.all().back();
    void* map;
    std::memcpy(&map, chunk, sizeof map);
    address_map().set(chunk, 0);
    chunks_.remove(chunk);
    os_.release(map, kBumpSizeMapBytes);
    os_.release(chunk, kChunkSize);
  }
}

template <class Config>
BumpStats Allocator<Config>::BumpSpace::stats() {
  LockGuard guard(lock_);
  std::size_t bumped = bumped_.load(std::memory_order_relaxed);
  std::size_t bumped_bytes = bumped_bytes_.load(std::memory_order_relaxed);
  std::size_t freed = freed_.load(std::memory_order_relaxed);
  std::size_t freed_bytes = freed_bytes_.load(std::memory_order_relaxed);
  const std::uint32_t epoch = epoch_.load(std::memory_order_relaxed);
  for (BumpLease* lease = leases_; lease != nullptr; lease = lease->next) {
    if (lease->cursor.epoch != epoch) continue;
    freed += std::atomic_ref<std::size_t>(lease->freed_blocks).load(std::memory_order_relaxed);
    freed_bytes += std::atomic_ref<std::size_t>(lease->freed_bytes).load(std::memory_order_relaxed);
    pm_bump_cursor& c = lease->cursor;
    bumped += std::atomic_ref<std::size_t>(c.blocks).load(std::memory_order_relaxed);
    bumped_bytes +=
        std::size_t(std::atomic_ref<char*>(c.next).load(std::memory_order_relaxed) - c.begin) -
        std::atomic_ref<std::size_t>(c.skipped).load(std::memory_order_relaxed);
  }
  return BumpStats{bumped > freed ? bumped - freed : 0,
                   bumped_bytes > freed_bytes ? bumped_bytes - freed_bytes : 0, regions_lent_,
                   chunks_.all().size()};
}

}  // namespace pagemalloc
