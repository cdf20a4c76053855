// A fake OS layer for tests: serves address space from one fixed, chunk-aligned buffer and
// refuses on demand, so that tests run the allocator's layers without the OS and inject
// "mmap failed" at any step.
//
// Reservations are bump-allocated; released ranges of the same size are reused. decommit()
// zero-fills, as the OS would. Not thread-safe (tests drive it from one thread).
#pragma once

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <utility>
#include <vector>

#include "pagemap/pages.h"
#include "pagemap/pal.h"

namespace pagemalloc {

class FakePal {
 public:
  explicit FakePal(std::size_t capacity)
      : base_(static_cast<std::byte*>(std::aligned_alloc(kChunkSize, capacity))),
        capacity_(capacity) {}
  ~FakePal() { std::free(base_); }
  FakePal(const FakePal&) = delete;
  FakePal& operator=(const FakePal&) = delete;

  void* reserve(std::size_t bytes, std::size_t align) {
    ++reserve_calls_;
    if (refuse_) return fail();
    if (fail_countdown_ > 0 && --fail_countdown_ == 0) return fail();
    for (auto it = released_.begin(); it != released_.end(); ++it) {
      if (it->second == bytes && reinterpret_cast<std::uintptr_t>(it->first) % align == 0) {
        void* p = it->first;
        released_.erase(it);
        ++live_;
        return p;
      }
    }
    std::size_t start = (used_ + align - 1) & ~(align - 1);
    if (start + bytes > capacity_) return fail();
    used_ = start + bytes;
    ++live_;
    std::memset(base_ + start, 0, bytes);  // the Pal contract: reservations read zero
    return base_ + start;
  }

  void release(void* p, std::size_t bytes) {
    std::memset(p, 0, bytes);
    released_.emplace_back(static_cast<std::byte*>(p), bytes);
    --live_;
  }

  bool commit(void*, std::size_t) {
    ++commit_calls_;
    return !refuse_commit_;
  }

  void decommit(void* p, std::size_t bytes) {
    std::memset(p, 0, bytes);
    decommitted_bytes_ += bytes;
  }

  bool grow(void* p, std::size_t old_bytes, std::size_t new_bytes) {
    auto* end = static_cast<std::byte*>(p) + old_bytes;
    if (refuse_ || end != base_ + used_ || used_ - old_bytes + new_bytes > capacity_) return false;
    used_ += new_bytes - old_bytes;
    return true;
  }

  // Test controls.
  void refuse_all(bool on) { refuse_ = on; }
  void fail_reserve_in(int calls) { fail_countdown_ = calls; }  // the calls-th reserve fails
  void refuse_commit(bool on) { refuse_commit_ = on; }
  [[nodiscard]] int commit_calls() const { return commit_calls_; }
  [[nodiscard]] int live_reservations() const { return live_; }
  [[nodiscard]] int reserve_calls() const { return reserve_calls_; }
  [[nodiscard]] std::size_t decommitted_bytes() const { return decommitted_bytes_; }
  [[nodiscard]] bool owns(const void* p) const { return p >= base_ && p < base_ + capacity_; }

 private:
  static void* fail() {
    errno = ENOMEM;
    return nullptr;
  }

  std::byte* base_;
  std::size_t capacity_;
  std::size_t used_ = 0;
  std::vector<std::pair<std::byte*, std::size_t>> released_;
  bool refuse_ = false;
  bool refuse_commit_ = false;
  int commit_calls_ = 0;
  int fail_countdown_ = 0;
  int live_ = 0;
  int reserve_calls_ = 0;
  std::size_t decommitted_bytes_ = 0;
};
static_assert(Pal<FakePal>);

}  // namespace pagemalloc
