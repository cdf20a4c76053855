// The chunks an arena holds, so that a reset can walk every one of them: an array mapped
// from the OS (the allocator never allocates its own metadata with malloc), doubled when
// full. Adding is O(1); removing (a chunk released to the OS, which is rare) is a search.
// Not thread-safe: the owning arena's lock guards it.
#pragma once

#include <sys/mman.h>

#include <cstddef>
#include <cstring>
#include <span>

namespace pagemalloc {

class ChunkList {
 public:
  constexpr ChunkList() = default;
  ChunkList(const ChunkList&) = delete;
  ChunkList& operator=(const ChunkList&) = delete;

  // False when the OS refuses memory for a larger array.
  bool add(std::byte* chunk) {
    if (size_ == capacity_ && !grow()) return false;
    items_[size_++] = chunk;
    return true;
  }

  void remove(std::byte* chunk) {
    for (std::size_t i = 0; i < size_; ++i) {
      if (items_[i] == chunk) {
        items_[i] = items_[--size_];
        return;
      }
    }
  }

  [[nodiscard]] std::span<std::byte* const> all() const { return {items_, size_}; }

 private:
  static constexpr std::size_t kFirstCapacity = 512;  // one page of pointers

  bool grow() {
    const std::size_t capacity = capacity_ == 0 ? kFirstCapacity : capacity_ * 2;
    void* mem = ::mmap(nullptr, capacity * sizeof(std::byte*), PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (mem == MAP_FAILED) return false;
    auto* items = static_cast<std::byte**>(mem);
    if (items_ != nullptr) {
      std::memcpy(items, items_, size_ * sizeof(std::byte*));
      ::munmap(items_, capacity_ * sizeof(std::byte*));
    }
    items_ = items;
    capacity_ = capacity;
    return true;
  }

  std::byte** items_ = nullptr;
  std::size_t size_ = 0;
  std::size_t capacity_ = 0;
};

}  // namespace pagemalloc
