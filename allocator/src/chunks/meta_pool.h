// A pool of fixed-size metadata records (slab descriptors, huge-extent records, thread caches),
// carved from blocks of 64 KiB (more for large records) mapped from the OS and recycled
// through a free list. The allocator never allocates its own metadata with malloc. Not
// thread-safe: the owner's lock guards it.
#pragma once

#include <sys/mman.h>

#include <cstddef>
#include <new>

namespace pagemalloc {

template <class T>
class MetaPool {
 public:
  constexpr MetaPool() = default;

  // nullptr when the OS refuses memory.
  T* acquire() {
    if (free_ != nullptr) {
      FreeRecord* r = free_;
      free_ = r->next;
      return new (r) T{};
    }
    if (cursor_ == end_ && !refill()) return nullptr;
    std::byte* at = cursor_;
    cursor_ += kRecordSize;
    return new (at) T{};
  }

  void release(T* record) {
    record->~T();
    auto* r = reinterpret_cast<FreeRecord*>(record);
    r->next = free_;
    free_ = r;
  }

  [[nodiscard]] std::size_t mapped_bytes() const { return mapped_; }

 private:
  struct FreeRecord {
    FreeRecord* next;
  };
  static constexpr std::size_t kRecordSize = (sizeof(T) + alignof(T) - 1) / alignof(T) * alignof(T);
  // 64 KiB, or room for four records of a larger type (a thread cache).
  static constexpr std::size_t kBlockSize =
      kRecordSize * 4 <= 64 * 1024 ? 64 * 1024 : (kRecordSize * 4 + 0xFFFF) & ~std::size_t{0xFFFF};
  static_assert(kRecordSize >= sizeof(FreeRecord));

  bool refill() {
    void* block =
        ::mmap(nullptr, kBlockSize, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (block == MAP_FAILED) return false;
    cursor_ = static_cast<std::byte*>(block);
    end_ = cursor_ + kBlockSize / kRecordSize * kRecordSize;
    mapped_ += kBlockSize;
    return true;
  }

  FreeRecord* free_ = nullptr;
  std::byte* cursor_ = nullptr;
  std::byte* end_ = nullptr;
  std::size_t mapped_ = 0;
};

}  // namespace pagemalloc
