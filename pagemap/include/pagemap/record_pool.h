// A pool of fixed-size records for a run manager's metadata (free-run records, chunk records),
// kept out of the chunks so that a chunk's only metadata page is its page map.
//
// Records are carved, densely and in order, from blocks of 64 KiB mapped from the OS (a page
// of a block is touched only when a record on it is first handed out) and recycled through a
// free list; the blocks go back to the OS only with the pool (release_all, the destructor).
//
// The owner keeps a reserve: reserve(n) makes the pool hold room for n records in all (in
// use, on the free list, or not yet carved), mapping blocks as needed, and fails — changing
// nothing — when the OS refuses a block. take() never maps: it needs room reserved before.
// So a run manager reserves at alloc time, where failing is allowed, the record any later
// free may need, and a free never fails.
//
// Test controls make growth fail: refuse_growth(true) refuses every block, fail_growth_in(n)
// the n-th block mapped from now. Not thread-safe: the owner's lock guards it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <new>

#include "pagemap/pages.h"
#include "pagemap/pal_linux.h"

namespace pagemalloc {

template <class T>
class RecordPool {
 public:
  static constexpr std::size_t kAlign = alignof(T) < 16 ? 16 : alignof(T);
  static constexpr std::size_t kRecordSize = (sizeof(T) + kAlign - 1) / kAlign * kAlign;
  static constexpr std::size_t kBlockBytes = 64 * 1024;
  // The first slot of every block links the blocks, so that the pool can unmap them.
  static constexpr std::size_t kRecordsPerBlock = kBlockBytes / kRecordSize - 1;
  static_assert(kRecordsPerBlock >= 64, "a record type too large for the pool's blocks");

  constexpr RecordPool() = default;
  ~RecordPool() { release_all(); }
  RecordPool(const RecordPool&) = delete;
  RecordPool& operator=(const RecordPool&) = delete;

  // Makes room for `total` records in all; false (nothing changed) when the OS refuses.
  bool reserve(std::size_t total) {
    while (capacity_ < total)
      if (!grow()) return false;
    return true;
  }

  // A record, default-initialized (members without an initializer are left as they are: the
  // owner sets them). Requires: in_use() < capacity() (reserve() first).
  T* take() {
    std::byte* at;
    if (free_ != nullptr) {
      at = reinterpret_cast<std::byte*>(free_);
      free_ = free_->next;
    } else {
      if (cursor_ == end_) start_next_block();
      at = cursor_;
      cursor_ += kRecordSize;
    }
    ++in_use_;
    return new (at) T;
  }

  void give(T* record) {
    record->~T();
    auto* r = reinterpret_cast<FreeRecord*>(record);
    r->next = free_;
    free_ = r;
    --in_use_;
  }

  // Unmaps every block; records handed out are forgotten (their owner is being torn down).
  void release_all() {
    while (blocks_ != nullptr) {
      Block* next = blocks_->next;
      LinuxPal{}.release(blocks_, kBlockBytes);
      blocks_ = next;
    }
    last_ = nullptr;
    free_ = nullptr;
    cursor_ = end_ = nullptr;
    capacity_ = in_use_ = 0;
    mapped_ = 0;
  }

  [[nodiscard]] std::size_t in_use() const { return in_use_; }
  [[nodiscard]] std::size_t capacity() const { return capacity_; }
  [[nodiscard]] std::size_t mapped_bytes() const { return mapped_; }
  // Whether `p` is the start of a record slot of one of the pool's blocks.
  [[nodiscard]] bool holds(const void* p) const {
    const auto a = reinterpret_cast<std::uintptr_t>(p);
    for (const Block* b = blocks_; b != nullptr; b = b->next) {
      const auto first = reinterpret_cast<std::uintptr_t>(b) + kRecordSize;
      if (a >= first && a < first + kRecordsPerBlock * kRecordSize)
        return (a - first) % kRecordSize == 0;
    }
    return false;
  }

  // Test controls.
  void refuse_growth(bool on) { refuse_ = on; }
  void fail_growth_in(int blocks) { fail_countdown_ = blocks; }

 private:
  struct FreeRecord {
    FreeRecord* next;
  };
  struct Block {
    Block* next;  // blocks in the order mapped
  };
  static_assert(kRecordSize >= sizeof(FreeRecord) && kRecordSize >= sizeof(Block));

  // Maps one more block at the end of the chain; its records are carved once the blocks
  // before it are used up.
  bool grow() {
    if (refuse_) return false;
    if (fail_countdown_ > 0 && --fail_countdown_ == 0) return false;
    void* p = LinuxPal{}.reserve(kBlockBytes, kPageSize);
    if (p == nullptr) return false;
    auto* block = new (p) Block{nullptr};
    if (last_ == nullptr) blocks_ = block;
    else last_->next = block;
    last_ = block;
    if (cursor_ == nullptr) start(block);
    capacity_ += kRecordsPerBlock;
    mapped_ += kBlockBytes;
    return true;
  }

  // Carving moves on to the block after the one used up (reserve() mapped it).
  void start_next_block() {
    Block* current = reinterpret_cast<Block*>(end_ - kRecordSize * (kRecordsPerBlock + 1));
    start(current->next);
  }
  void start(Block* block) {
    cursor_ = reinterpret_cast<std::byte*>(block) + kRecordSize;
    end_ = cursor_ + kRecordsPerBlock * kRecordSize;
  }

  Block* blocks_ = nullptr;  // the first block mapped
  Block* last_ = nullptr;
  FreeRecord* free_ = nullptr;
  std::byte* cursor_ = nullptr;  // the next record never handed out, in the block carved now
  std::byte* end_ = nullptr;
  std::size_t capacity_ = 0;
  std::size_t in_use_ = 0;
  std::size_t mapped_ = 0;
  bool refuse_ = false;
  int fail_countdown_ = 0;
};

}  // namespace pagemalloc
