// A table of T mapped from the OS, never from the allocator it serves: the heap profiler's
// memory (stack_table.h, sample_table.h). Zeroed when mapped; its bytes are counted.
#pragma once

#include <sys/mman.h>

#include <cstddef>
#include <utility>

namespace pagemalloc {

template <class T>
class MappedTable {
 public:
  // Maps room for `count` entries, zeroed; false when the OS refuses.
  bool map(std::size_t count) {
    const std::size_t bytes = (count * sizeof(T) + 4095) & ~std::size_t{4095};
    void* at = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (at == MAP_FAILED) return false;
    entries_ = static_cast<T*>(at);
    count_ = count;
    bytes_ = bytes;
    return true;
  }
  void unmap() {
    if (entries_ != nullptr) ::munmap(entries_, bytes_);
    entries_ = nullptr;
    count_ = bytes_ = 0;
  }
  void swap(MappedTable& other) {
    std::swap(entries_, other.entries_);
    std::swap(count_, other.count_);
    std::swap(bytes_, other.bytes_);
  }
  [[nodiscard]] std::size_t size() const { return count_; }
  [[nodiscard]] std::size_t mapped_bytes() const { return bytes_; }
  T& operator[](std::size_t i) { return entries_[i]; }
  const T& operator[](std::size_t i) const { return entries_[i]; }

 private:
  T* entries_ = nullptr;
  std::size_t count_ = 0;
  std::size_t bytes_ = 0;
};

}  // namespace pagemalloc
