// The bump side of an explicit arena: regions lent to leases and cursors, block headers
// checked on every operation, reset by moving the epoch, chunks returned on destroy.
#include "bump_space.h"

#include <algorithm>

#include "diagnostics.h"

namespace pagemalloc {

void* BumpSpace::allocate_with_new_lease(BumpLease& lease, std::size_t size, std::size_t align) {
  // The slot's lease of another arena (or of an older epoch of this one) goes back first.
  if (BumpSpace* previous = lease.space; previous != nullptr) {
    LockGuard guard(previous->lock_);
    previous->take_back(lease.cursor, previous != this);
  }
  const bool mine = lease.space == this;
  lease.space = nullptr;
  if (!mine) lease.cursor = pm_bump_cursor{};  // the span doubles only within one arena
  lease.cursor.arena = index_;
  LockGuard guard(lock_);
  if (!lend_region(lease.cursor, size, align)) return nullptr;
  lease.space = this;
  return bump(lease.cursor, size, align);
}

void* BumpSpace::allocate_from_cursor(pm_bump_cursor& cursor, std::size_t size,
                                      std::size_t align) {
  LockGuard guard(lock_);
  const bool current = cursor.epoch == epoch_.load(std::memory_order_relaxed);
  if (current) {
    if (void* p = bump(cursor, size, align)) return p;  // an alignment the inline path left
    take_back(cursor, false);
  }
  cursor.arena = index_;
  if (!lend_region(cursor, size, align)) return nullptr;
  return bump(cursor, size, align);
}

void BumpSpace::flush(pm_bump_cursor& cursor) {
  if (cursor.epoch == epoch_.load(std::memory_order_acquire))
    bumped_.fetch_add(cursor.blocks, std::memory_order_relaxed);
  cursor.blocks = 0;
}

bool BumpSpace::lend_region(pm_bump_cursor& cursor, std::size_t size, std::size_t align) {
  const std::uint32_t epoch = epoch_.load(std::memory_order_relaxed);
  // The span doubles across resets too: an owner that fills a chunk per round soon takes
  // one chunk per round.
  const std::size_t wanted =
      cursor.span != 0 ? std::min<std::size_t>(2 * std::size_t{cursor.span}, kBumpRegionsPerChunk) : 1;
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
    auto* first = reinterpret_cast<char*>(chunks_.all()[next_chunk_]) +
                  next_region_ * kBumpRegionSize;
    next_region_ += regions;
    regions_lent_ += regions;
    span = unsigned(regions);
    // The first block's header follows a free 8 bytes: no block starts on a chunk boundary
    // (those are huge blocks' addresses).
    begin = first + 2 * kBumpHeader;
    end = first + regions * kBumpRegionSize;
  }
  cursor.next = begin;
  cursor.end = end;
  cursor.stamp = BumpHeader::stamp(epoch);
  cursor.blocks = 0;
  cursor.epoch = epoch;
  cursor.span = span;
  return true;
}

void BumpSpace::take_back(pm_bump_cursor& cursor, bool keep_rest) {
  if (cursor.epoch != epoch_.load(std::memory_order_relaxed)) return;
  bumped_.fetch_add(cursor.blocks, std::memory_order_relaxed);
  cursor.blocks = 0;
  // Whatever can still hold a block of 256 bytes is worth a later lease.
  if (keep_rest && cursor.end - cursor.next >= 256 && partial_count_ < kMaxPartial)
    partial_[partial_count_++] = Partial{cursor.next, cursor.end};
  cursor.next = cursor.end = nullptr;
}

std::byte* BumpSpace::map_chunk() {
  auto* chunk = static_cast<std::byte*>(os_.reserve(kChunkSize, kChunkSize));
  if (chunk == nullptr) return nullptr;
  if (!chunks_.add(chunk)) {
    os_.release(chunk, kChunkSize);
    return nullptr;
  }
  if (!address_map().set(chunk, AddressMap::tag(this, AddressMap::kBumpChunk))) {
    chunks_.remove(chunk);
    os_.release(chunk, kChunkSize);
    return nullptr;
  }
  return chunk;
}

BumpSpace::Check BumpSpace::check(const void* p, std::uint64_t& header) const {
  const auto address = reinterpret_cast<std::uintptr_t>(p);
  if (address % kBumpAlign != 0 || address - reinterpret_cast<std::uintptr_t>(chunk_base_of(p)) <
                                       2 * kBumpHeader)
    return Check::NotABlock;
  header = BumpHeader::read(p);
  const std::uint64_t magic = header & BumpHeader::kMagicMask;
  if ((magic != BumpHeader::kLive && magic != BumpHeader::kFreed) ||
      BumpHeader::size_of(header) > kBumpRegionSize)
    return Check::NotABlock;
  if (BumpHeader::epoch_of(header) !=
      (epoch_.load(std::memory_order_acquire) & BumpHeader::kEpochMask))
    return Check::Stale;
  return magic == BumpHeader::kFreed ? Check::Freed : Check::Live;
}

void BumpSpace::report(Check what, const char* call, const void* p, bool freeing) {
  switch (what) {
    case Check::Stale:
      report_misuse(call, p, freeing ? "double free (its arena was reset)"
                                     : "not a live block (its arena was reset)");
    case Check::Freed:
      report_misuse(call, p, freeing ? "double free" : "not a live block (already freed?)");
    default:
      report_misuse(call, p, "not the start of a block");
  }
}

std::size_t BumpSpace::usable_size(const void* p, const char* call) const {
  std::uint64_t header = 0;
  const Check c = check(p, header);
  if (c != Check::Live) [[unlikely]] report(c, call, p, false);
  return bump_usable(BumpHeader::size_of(header));
}

void BumpSpace::free(void* p, const char* call) {
  std::uint64_t header = 0;
  const Check c = check(p, header);
  if (c != Check::Live) [[unlikely]] report(c, call, p, true);
  if (!freeable_) return;  // PM_ARENA_NO_FREE: the block stays until the reset
  BumpHeader::write(p, (header & ~BumpHeader::kMagicMask) | BumpHeader::kFreed);
  freed_.fetch_add(1, std::memory_order_relaxed);
}

bool BumpSpace::resize_in_place(void* p, std::size_t size, const char* call) {
  std::uint64_t header = 0;
  const Check c = check(p, header);
  if (c != Check::Live) [[unlikely]] report(c, call, p, false);
  const std::size_t old_size = BumpHeader::size_of(header);
  const std::uint64_t rest = header & ~BumpHeader::kSizeMask;
  if (size <= bump_usable(old_size)) {
    BumpHeader::write(p, rest | size);
    return true;
  }
  // Growth: only the block this thread bumped last, into the rest of its lease's region.
  BumpLease& lease = t_bump_leases[index_ % kBumpLeaseSlots];
  auto* block = static_cast<char*>(p);
  if (lease.space != this || lease.cursor.epoch != epoch_.load(std::memory_order_acquire) ||
      block + bump_stride(old_size) != lease.cursor.next || size > kBumpRegionSize ||
      bump_stride(size) > std::size_t(lease.cursor.end - block))
    return false;
  lease.cursor.next = block + bump_stride(size);
  BumpHeader::write(p, rest | size);
  return true;
}

void BumpSpace::advance_epoch() {
  std::uint32_t next = epoch_.load(std::memory_order_relaxed) + 1;
  if ((next & BumpHeader::kEpochMask) == 0) ++next;  // header epoch 0: never a live stamp
  epoch_.store(next, std::memory_order_release);
}

void BumpSpace::reset() {
  LockGuard guard(lock_);
  advance_epoch();
  next_chunk_ = 0;
  next_region_ = 0;
  regions_lent_ = 0;
  partial_count_ = 0;
  bumped_.store(0, std::memory_order_relaxed);
  freed_.store(0, std::memory_order_relaxed);
}

void BumpSpace::release_all() {
  reset();
  LockGuard guard(lock_);
  while (!chunks_.all().empty()) {
    std::byte* chunk = chunks_.all().back();
    address_map().set(chunk, 0);
    chunks_.remove(chunk);
    os_.release(chunk, kChunkSize);
  }
}

BumpStats BumpSpace::stats() {
  BumpLease& lease = t_bump_leases[index_ % kBumpLeaseSlots];
  if (lease.space == this) flush(lease.cursor);
  LockGuard guard(lock_);
  const std::size_t bumped = bumped_.load(std::memory_order_relaxed);
  const std::size_t freed = freed_.load(std::memory_order_relaxed);
  return BumpStats{bumped > freed ? bumped - freed : 0, regions_lent_, chunks_.all().size()};
}

}  // namespace pagemalloc
